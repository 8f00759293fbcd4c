#!/bin/bash
# validate_bench.sh - what checking a pipeline costs:
#   1. validate of a pipeline over a 1 GiB input against the same pipeline
#      over a 1 KiB one (only headers are read: the same time and faults)
#   2. validate of a 200-statement pipeline (target: well under 10 ms)
# Each is the mean of many runs; RUNS rounds of those, the median reported.
#
# Usage: validate_bench.sh TENSORRUN [WORKDIR]
set -eu
TENSORRUN=$1
WORK=${2:-${TMPDIR:-/tmp}/tensorrun-validate-bench}
RUNS=${RUNS:-3}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"

"$PY" - <<'PY'
import numpy as np
with open("big.npy", "wb") as f:       # 1 GiB: a header and a hole
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2**20, 256)})
    f.truncate(128 + 2**30)
np.save("small.npy", np.zeros((16, 256), "<f4"))
np.save("q.npy", np.zeros((4, 256), "<f4"))
for name, data in (("big", "big.npy"), ("small", "small.npy")):
    open(name + ".yaml", "w").write(f"""tensorrun: 1
inputs: {{x: {data}, q: q.npy}}
stages:
  - name: s
    do:
      - xn = x / norm(x, dim=-1, keepdim=true)
      - v, i = topk(xn @ q.T, 10, dim=0)
outputs:
  v: v.npy
""")
lines = ["tensorrun: 1", "inputs: {x: small.npy}", "params: {eps: 1.0e-6}", "stages:"]
for s in range(20):
    lines += [f"  - name: s{s}", "    do:"]
    prev = "x" if s == 0 else f"y{s - 1}_9"
    for k in range(10):
        src = prev if k == 0 else f"y{s}_{k - 1}"
        lines.append(f"      - y{s}_{k} = softmax({src} * 2.0 + eps, dim=-1) / (norm({src}, dim=-1, keepdim=true) + eps)")
lines += ["outputs:", "  y19_9: out.npy"]
open("long.yaml", "w").write("\n".join(lines) + "\n")
PY

# mean_ms N COMMAND...: the mean milliseconds of N runs
mean_ms() {
    local n=$1 t0 t1
    shift
    t0=$(date +%s%N)
    for _ in $(seq "$n"); do "$@" > /dev/null; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.3f\n", (b - a) / n / 1e6 }'
}

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

"$TENSORRUN" validate long.yaml > /dev/null # it must be valid
big=() small=() long=()
for _ in $(seq "$RUNS"); do
    big+=("$(mean_ms 100 "$TENSORRUN" validate big.yaml)")
    small+=("$(mean_ms 100 "$TENSORRUN" validate small.yaml)")
    long+=("$(mean_ms 100 "$TENSORRUN" validate long.yaml)")
done
fb=$(/usr/bin/time -f %R "$TENSORRUN" validate big.yaml 2>&1 >/dev/null | tail -n 1)
fs=$(/usr/bin/time -f %R "$TENSORRUN" validate small.yaml 2>&1 >/dev/null | tail -n 1)
b=$(printf '%s\n' "${big[@]}" | median)
s=$(printf '%s\n' "${small[@]}" | median)
l=$(printf '%s\n' "${long[@]}" | median)
echo "validate_bench: medians of $RUNS rounds of 100 runs each, whole process"
printf '  pipeline over a 1 GiB input  %7.2f ms  %5d page faults\n' "$b" "$fb"
printf '  pipeline over a 1 KiB input  %7.2f ms  %5d page faults  (1 GiB / 1 KiB: %s)\n' "$s" "$fs" \
    "$(awk -v a="$b" -v c="$s" 'BEGIN { printf "%.2f", a / c }')"
printf '  200 statements in 20 stages  %7.2f ms  (target: well under 10 ms)\n' "$l"
