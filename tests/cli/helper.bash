# helper.bash - shared set-up for the CLI tests.
#
#   run_tensorrun EXPECTED_STATUS [ARGS...]
# runs the program under test (with a timeout) and fails, showing the
# command and its output, unless it exits with EXPECTED_STATUS.

load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load
# assert_tensors_close, assert_tensors_equal: the helper tensorrun installs
source "${TR_SRCDIR:-$BATS_TEST_DIRNAME/../..}/bats/tensorrun.bash"

TENSORRUN=${TENSORRUN:-$BATS_TEST_DIRNAME/../../tensorrun}
TR_TIMEOUT=${TR_TIMEOUT:-60}

run_tensorrun() {
    local expected=$1
    shift
    run --separate-stderr timeout "$TR_TIMEOUT" "$TENSORRUN" "$@"
    if [ "$status" -ne "$expected" ]; then
        echo "command: tensorrun $*" >&2
        echo "status:  $status (expected $expected)" >&2
        echo "stdout:  $output" >&2
        echo "stderr:  $stderr" >&2
        return 1
    fi
}

# npy_is FILE EXPR: the .npy FILE equals the NumPy expression EXPR exactly
# (dtype, shape and values, NaN equal to NaN); the names in $NPY_INPUTS are
# the arrays NAME.npy of the working directory, loaded for EXPR.
npy_is() {
    /usr/bin/python3 -c '
import sys, numpy as np
env = {"np": np}
env.update((n, np.load(n + ".npy")) for n in sys.argv[3].split())
got, want = np.load(sys.argv[1]), eval(sys.argv[2], env)
assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
assert np.array_equal(got, want, equal_nan=True), (got, want)
' "$1" "$2" "${NPY_INPUTS:-}"
}

# value_is NAME DESC: after `run_tensorrun 0 validate --json ...` (or
# `--dry-run --json`), the last value bound to NAME is DESC: its dtype and
# shape as f32[5,3], or its constant as validate writes it (16, "yes", None).
value_is() {
    printf '%s' "$output" | /usr/bin/python3 -c '
import json, sys
values = [v for v in json.load(sys.stdin)["values"] if v["name"] == sys.argv[1]]
assert values, "no value is called " + sys.argv[1]
v = values[-1]
got = v["constant"] if "constant" in v else "%s[%s]" % (v["dtype"], ",".join(map(str, v["shape"])))
assert got == sys.argv[2], (got, sys.argv[2])
' "$1" "$2"
}

# peaks_match PIPELINE [ARGS...]: validate's exact pool peak of every stage
# on every device (validate --json) is what the run then reports
# (--stats json), byte for byte.
peaks_match() {
    local plan="$BATS_TEST_TMPDIR/peaks-plan.json" stats="$BATS_TEST_TMPDIR/peaks-stats.json"
    timeout "$TR_TIMEOUT" "$TENSORRUN" validate --json "$@" > "$plan" || return 1
    timeout "$TR_TIMEOUT" "$TENSORRUN" run "$@" --stats json --stats-file "$stats" || return 1
    /usr/bin/python3 - "$plan" "$stats" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
events = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ran = {(e["index"], e["device"]): e["peak_active_bytes"] for e in events if e["event"] == "stage"}
said = {(i, m["device"]): m["peak_bytes"]
        for i, s in enumerate(plan["stages"]) for m in s["memory"]}
assert ran and said.keys() == ran.keys(), (said, ran)
for key in said:
    assert said[key] == ran[key], "stage %d on %s: validate said %d, the run peaked at %d" % (
        key[0], key[1], said[key], ran[key])
PY
}
