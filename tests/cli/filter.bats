#!/usr/bin/env bats
# tensorrun as a Unix filter: -i NAME=PATH:KEY, rank-0 results as numbers,
# standard input (a terminal, or named twice), a closed pipe on standard
# output, interruptions, "--" before an expression, help and ops.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import json, struct, numpy as np
np.save("a.npy", np.arange(6, dtype="<f4"))
np.save("bo.npy", np.array([1.5, -2.0, 3.0], dtype="<f4"))
np.save("big.npy", np.zeros((1024, 1024), dtype="<f4"))
def safetensors(path, tensors):
    header, data = {}, b""
    for name, v in tensors.items():
        b = v.tobytes()
        header[name] = {"dtype": {"float32": "F32", "int64": "I64"}[str(v.dtype)],
                        "shape": list(v.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
safetensors("m.safetensors", {"weight": np.arange(6, dtype="<f4"),
                              "bias": np.ones(3, dtype="<f4"),
                              "ids": np.arange(4, dtype="<i8")})'
}

# closed_pipe ARGS...: runs tensorrun with standard output the write end of
# a pipe whose read end is closed; prints its exit status as Python gives
# it (-13 for a SIGPIPE death) and then its standard error
closed_pipe() {
    "$PY" -c '
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
sys.stdout.write("%d\n%s" % (p.returncode, p.stderr.decode()))' "$TENSORRUN" "$@"
}

# on_terminal COMMAND: runs the shell command with standard input (and
# output) a terminal, within 20 seconds
on_terminal() {
    command -v script > /dev/null || skip "script (util-linux) is not installed"
    run timeout 20 script -qec "$1" /dev/null < /dev/null
}

no_temporaries() {
    local left
    left=$(find . -name '.*.tmp-*' | head -5)
    [ -z "$left" ] || { echo "temporary files left: $left"; return 1; }
}

# ------------------------------------------------------------ -i PATH:KEY

@test "-i NAME=PATH:KEY picks one tensor of a safetensors file, in eval and run" {
    run_tensorrun 0 eval 'sum(x)' -i x=m.safetensors:weight
    [ "$output" = "15." ]
    run_tensorrun 0 eval 'sum(x)' -i x=m.safetensors:ids
    [ "$output" = "6" ]
    printf 'tensorrun: 1\ninputs: {w: w.npy}\nstages:\n  - name: s\n    do: [y = w * 2]\noutputs: {y: y.npy}\n' > p.yaml
    run_tensorrun 0 p.yaml -q -i w=m.safetensors:bias
    run_tensorrun 0 eval 'y' -i y=y.npy --print
    [ "$output" = "f32[3] [2., 2., 2.]" ]
    # the key is the text after the last ':'; standard input takes one too
    run bash -c '"$0" eval "sum(x)" -i x=-:ids < m.safetensors' "$TENSORRUN"
    [ "$status" -eq 0 ]
    [ "$output" = "6" ]
}

@test "-i NAME=PATH:KEY is the file PATH:KEY when that file exists" {
    cp m.safetensors 'w:2.safetensors'
    cp a.npy 'x:1'
    run_tensorrun 0 eval 'sum(x)' -i 'x=x:1'
    [ "$output" = "15." ]
    run_tensorrun 0 eval 'sum(x)' -i 'x=w:2.safetensors:bias'
    [ "$output" = "3." ]
}

@test "-i replaces the whole source: a pipeline's key no longer applies" {
    printf 'tensorrun: 1\ninputs:\n  wq: {path: m.safetensors, key: weight}\nstages:\n  - name: s\n    do: [y = sum(wq)]\noutputs: {y: y.npy}\n' > p.yaml
    run_tensorrun 0 p.yaml -q -i wq=a.npy
    [ -z "$stderr" ]
    run_tensorrun 0 eval 'y' -i y=y.npy
    [ "$output" = "15." ]
    run_tensorrun 0 p.yaml -q -i wq=m.safetensors:ids
    run_tensorrun 0 eval 'y' -i y=y.npy
    [ "$output" = "6" ]
    # a raw layout written in the pipeline goes too
    printf 'tensorrun: 1\ninputs:\n  r: {path: r.bin, dtype: f32, shape: [2]}\nstages:\n  - name: s\n    do: [y = sum(r)]\noutputs: {y: y.npy}\n' > raw.yaml
    run_tensorrun 0 raw.yaml -q -i r=bo.npy
    run_tensorrun 0 eval 'y' -i y=y.npy
    [ "$output" = "2.5" ]
}

@test "a file of several tensors without a key: the hint says how, in the syntax used" {
    run_tensorrun 3 eval 'sum(x)' -i x=m.safetensors
    [[ "$stderr" == *"error: input 'x': m.safetensors holds 3 tensors; which one is meant?"* ]]
    [[ "$stderr" == *"hint: name one with -i x=m.safetensors:NAME; the file holds: weight, bias, ids"* ]]
    [[ "$stderr" != *"path:"* ]]
    printf 'tensorrun: 1\ninputs: {w: m.safetensors}\nstages:\n  - name: s\n    do: [y = w * 2]\noutputs: {y: y.npy}\n' > p.yaml
    run_tensorrun 3 p.yaml
    [[ "$stderr" == *"hint: name one with {path: ..., key: NAME}; the file holds: weight, bias, ids"* ]]
}

@test "a mistyped key gets a suggestion, from -i and from key:" {
    run_tensorrun 3 eval 'sum(x)' -i x=m.safetensors:wieght
    [[ "$stderr" == *"error: input 'x': m.safetensors holds no tensor 'wieght' (did you mean 'weight'?)"* ]]
    [[ "$stderr" == *"hint: it holds: weight, bias, ids"* ]]
    printf 'tensorrun: 1\ninputs:\n  w: {path: m.safetensors, key: bais}\nstages:\n  - name: s\n    do: [y = w * 2]\noutputs: {y: y.npy}\n' > p.yaml
    run_tensorrun 3 p.yaml
    [[ "$stderr" == *"p.yaml:3:33: error: input 'w': m.safetensors holds no tensor 'bais' (did you mean 'bias'?)"* ]]
    # nothing close: the list, no guess
    run_tensorrun 3 eval 'sum(x)' -i x=m.safetensors:zzzzzzzz
    [[ "$stderr" == *"holds no tensor 'zzzzzzzz' (it holds: weight, bias, ids)"* ]]
}

@test "a key for a file of one unnamed tensor says so, never '(null)'" {
    run_tensorrun 3 eval 'sum(x)' -i x=a.npy:w
    [[ "$stderr" == *"error: input 'x': a.npy holds one tensor, without a name; a key picks one tensor of a file of several"* ]]
    [[ "$stderr" == *"hint: leave out the key: -i x=a.npy"* ]]
    printf 'tensorrun: 1\ninputs:\n  w: {path: a.npy, key: w}\nstages:\n  - name: s\n    do: [y = w * 2]\noutputs: {y: y.npy}\n' > p.yaml
    run_tensorrun 3 p.yaml
    [[ "$stderr" == *"hint: leave out key: w"* ]]
    [[ "$stderr" != *"(null)"* ]]
}

@test "-i with an empty path or key is a usage error" {
    run_tensorrun 2 eval 'sum(x)' -i x=m.safetensors:
    [[ "$stderr" == *"-i x=m.safetensors:: the key is empty"* ]]
    run_tensorrun 2 eval 'sum(x)' -i x=:weight
    [[ "$stderr" == *"the path is empty"* ]]
    printf 'tensorrun: 1\ninputs: {w: a.npy}\nstages:\n  - name: s\n    do: [y = w * 2]\noutputs: {y: y.npy}\n' > p.yaml
    run_tensorrun 2 p.yaml -i w=m.safetensors:
}

# ------------------------------------------------------- rank-0 results

@test "a rank-0 eval result is a number and a newline on any standard output" {
    n=$("$TENSORRUN" eval 'sum(x)' -i x=a.npy)
    [ "$n" = "15." ]
    "$TENSORRUN" eval 'sum(i)' -i i=m.safetensors:ids > n.txt
    [ "$(od -c n.txt | head -1)" = "$(printf '6\n' | od -c | head -1)" ]
    run bash -c '"$0" eval "x[1] > 0" -i x=bo.npy | cat' "$TENSORRUN"
    [ "$output" = "false" ]
    run bash -c '"$0" eval "2 + 3" | cat' "$TENSORRUN"
    [ "$status" -eq 0 ]
    [ "$output" = "5" ]
    run bash -c '"$0" eval "y = sum(x); z = y * 2" -i x=a.npy | cat' "$TENSORRUN"
    [ "$output" = "30." ]
    # a tensor of rank 1 or more is still .npy bytes
    "$TENSORRUN" eval 'x[:1]' -i x=a.npy > one.npy
    "$PY" -c 'import numpy as np; assert np.load("one.npy").tolist() == [0.0]'
}

@test "--format npy|safetensors|raw forces bytes, even of a rank-0 value" {
    "$TENSORRUN" eval 'sum(x)' -i x=a.npy --format npy > s.npy
    "$PY" -c 'import numpy as np; v = np.load("s.npy"); assert v.shape == () and v.dtype == np.float32 and v == 15'
    "$TENSORRUN" eval 'x * 2' -i x=a.npy --format safetensors > s.safetensors
    run_tensorrun 0 inspect s.safetensors
    [[ "$output" == *"out "*"f32"*"[6]"* ]]
    "$TENSORRUN" eval 'sum(x)' -i x=m.safetensors:ids --format raw > s.bin
    [ "$(stat -c %s s.bin)" -eq 8 ]
    # on a terminal too
    on_terminal "'$TENSORRUN' eval 'sum(x)' -i x=a.npy --format npy | od -c | head -1"
    [[ "$output" == *"N   U   M   P   Y"* ]]
    # -o writes a file, whatever the rank
    run_tensorrun 0 eval 'sum(x)' -i x=a.npy -o s2.npy
    "$PY" -c 'import numpy as np; assert np.load("s2.npy") == 15'
    run_tensorrun 2 eval 'sum(x)' -i x=a.npy --format npz
    run_tensorrun 2 eval 'sum(x)' -i x=a.npy --format npy --print
}

@test "printed numbers are the shortest decimals that read back as the stored values" {
    "$PY" -c '
import numpy as np
rng = np.random.default_rng(3)
mag = 10.0 ** rng.integers(-12, 20, 300)
np.save("f64.npy", rng.standard_normal(300) * mag)
np.save("f32.npy", (rng.standard_normal(300) * mag).astype("<f4"))
np.save("f16.npy", rng.standard_normal(300).astype("<f2"))'
    for d in f64 f32 f16; do
        "$TENSORRUN" eval 'x' -i x=$d.npy --print > $d.txt
    done
    "$PY" -c '
import re, numpy as np
for d in ("f64", "f32", "f16"):
    want = np.load(d + ".npy")
    text = open(d + ".txt").read()
    assert text.startswith(d + "[300] ["), text[:40]
    got = re.findall(r"-?[0-9.]+(?:e[-+]?[0-9]+)?", text[len(d) + 6:])
    assert len(got) == 300, len(got)
    for g, w in zip(got, want):
        # reads back as the stored value of its dtype ...
        assert want.dtype.type(float(g)) == w, (d, g, w)
        # ... with no more significant digits than the shortest round trip
        digits = lambda s: len(s.lstrip("-").split("e")[0].replace(".", "").strip("0"))
        assert digits(g) <= digits(np.format_float_scientific(w, unique=True)), (d, g, w)
'
    run_tensorrun 0 eval 'cast(arange(3), f32) / 3' --print
    [ "$output" = "f32[3] [0., 0.33333334, 0.6666667]" ]
    run_tensorrun 0 eval 'sum(cast(x, f64)) / 7' -i x=a.npy
    [ "$output" = "2.142857142857143" ]
}

# ------------------------------------------------------- standard input

@test "standard input that is a terminal is refused at once (exit 2), in every command" {
    printf 'tensorrun: 1\ninputs: {x: "-"}\nstages:\n  - name: s\n    do: [y = x * 2]\noutputs: {y: y.npy}\n' > p.yaml
    for cmd in "eval 'sum(x)' -i x=-" "p.yaml" "run p.yaml -i x=-" "validate p.yaml" \
               "convert - out.npy" "inspect -" "inspect a.npy -"; do
        on_terminal "'$TENSORRUN' $cmd; echo \"rc=\$?\""
        [[ "$output" == *"standard input is a terminal"* ]] || { echo "$cmd: $output"; false; }
        [[ "$output" == *"rc=2"* ]] || { echo "$cmd: $output"; false; }
    done
    [ ! -e out.npy ]
    [ ! -e y.npy ]
    # from a file or a pipe it is read
    run bash -c 'cat a.npy | "$0" eval "sum(x)" -i x=-' "$TENSORRUN"
    [ "$output" = "15." ]
}

@test "'-' given for two inputs is exit 2, from a file and from a pipe" {
    run --separate-stderr bash -c '"$0" eval "a + b" -i a=- -i b=- < a.npy' "$TENSORRUN"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"inputs 'a' and 'b' both read standard input ('-'), which can be read once"* ]]
    run --separate-stderr bash -c 'cat a.npy | "$0" eval "a + b" -i a=- -i b=-' "$TENSORRUN"
    [ "$status" -eq 2 ]
    printf 'tensorrun: 1\ninputs: {a: "-", b: b.npy}\nstages:\n  - name: s\n    do: [y = a + b]\noutputs: {y: y.npy}\n' > p.yaml
    run --separate-stderr bash -c '"$0" p.yaml -i b=- < a.npy' "$TENSORRUN"
    [ "$status" -eq 2 ]
    run --separate-stderr bash -c '"$0" validate p.yaml -i b=- < a.npy' "$TENSORRUN"
    [ "$status" -eq 2 ]
    run --separate-stderr bash -c '"$0" inspect - - < a.npy' "$TENSORRUN"
    [ "$status" -eq 2 ]
    [ -z "$output" ]
    [ ! -e y.npy ]
}

# ------------------------------------------------------- a closed pipe

@test "a closed pipe on standard output: no message, a SIGPIPE death, in every command" {
    printf 'tensorrun: 1\ninputs: {x: a.npy}\nstages:\n  - name: s\n    do: [y = x * 2]\n' > p.yaml
    for cmd in "ops" "ops --json" "--help" "help run" "inspect a.npy" "inspect --json a.npy" \
               "eval sum(x) -i x=a.npy" "eval x*2 -i x=big.npy" "eval x -i x=a.npy --print" \
               "eval x*2 -i x=big.npy --format safetensors" "convert big.npy -" \
               "convert big.npy - --format npy.zst" "validate p.yaml" "p.yaml -q -o y=-" \
               "p.yaml --stats-file -"; do
        run closed_pipe $cmd
        [ "${lines[0]}" = -13 ] || { echo "$cmd: $output"; false; }
        [ "${#lines[@]}" -eq 1 ] || { echo "$cmd: $output"; false; }
    done
    no_temporaries
}

@test "a closed pipe as the shell sees it: 141" {
    set +o pipefail
    run --separate-stderr bash -c '"$0" eval "x * 2" -i x=big.npy | head -c 1 > /dev/null; echo "${PIPESTATUS[0]}"' "$TENSORRUN"
    [ "$output" = 141 ]
    [ -z "$stderr" ]
}

@test "a closed pipe removes the run's temporary files and replaces no output" {
    echo old > z.npy
    printf 'tensorrun: 1\ninputs: {x: big.npy}\nstages:\n  - name: s\n    do: [y = x + 1, z = y * 2]\noutputs: {y: "-", z: z.npy}\n' > p.yaml
    run closed_pipe p.yaml -q
    [ "${lines[0]}" = -13 ]
    [ "${#lines[@]}" -eq 1 ]
    [ "$(cat z.npy)" = old ]
    no_temporaries
    # a full disk is still a write error
    run bash -c '"$0" ops > /dev/full' "$TENSORRUN"
    [ "$status" -eq 4 ]
    [[ "$output" == *"write error on standard output"* ]]
}

# ---------------------------------------------------------- interrupts

@test "SIGINT and SIGTERM print one line: interrupted; no output file was replaced" {
    # random values: zstd -19 takes minutes over them (over zeros it could
    # finish within the half second this once waited, and exit 0)
    "$PY" -c 'import numpy as np; np.save("huge.npy", np.random.default_rng(1).random((16, 1024, 1024), "<f4"))'
    echo precious > dest.npy.zst
    for sig in INT TERM; do
        "$TENSORRUN" convert huge.npy dest.npy.zst --level 19 2> err & pid=$!
        # the signal while it converts: once its temporary file exists
        for _ in $(seq 100); do
            ls -A | grep -qF '.tmp-' && break
            sleep 0.05
        done
        kill -$sig $pid
        rc=0
        wait $pid || rc=$?
        [ "$rc" -eq 130 ]
        [ "$(cat err)" = "tensorrun: error: interrupted; no output file was replaced" ]
        [ "$(cat dest.npy.zst)" = precious ]
    done
    no_temporaries
}

# ------------------------------------------------ options and expressions

@test "-- ends the options: an expression may start with -; options may follow it" {
    run_tensorrun 0 eval -- '-bo' -i bo=bo.npy --print
    [ "$output" = "f32[3] [-1.5, 2., -3.]" ]
    run_tensorrun 0 eval -i bo=bo.npy --print -- '-bo * 2'
    [ "$output" = "f32[3] [-3., 4., -6.]" ]
    run_tensorrun 0 eval -- '-1' --print
    [ "$output" = "-1" ]
    # -- as the value of an option is that value
    run_tensorrun 2 eval 'x' -i --
    [[ "$stderr" == *"-i"* ]]
    # run, inspect and convert too
    cp a.npy ./-a.npy
    printf 'tensorrun: 1\ninputs: {x: a.npy}\nstages:\n  - name: s\n    do: [y = x * 2]\noutputs: {y: y.npy}\n' > ./-p.yaml
    run_tensorrun 0 run -q -- -p.yaml
    [ -f y.npy ]
    rm y.npy
    run_tensorrun 0 -- -p.yaml -q
    [ -f y.npy ]
    run_tensorrun 0 inspect -- -a.npy
    run_tensorrun 0 convert -- -a.npy b.npy
}

@test "an expression that starts with - and no --: the option is named, with a hint" {
    run_tensorrun 2 eval '-bo' -i bo=bo.npy
    [[ "$stderr" == *"error: eval: unknown option '-b' (in '-bo')"* ]]
    [[ "$stderr" == *"hint: put -- before an expression that starts with -"* ]]
    [[ "$stderr" != *"'eval'"* ]]
    run_tensorrun 2 eval '-x' -i x=a.npy
    [[ "$stderr" == *"unknown option '-x'"* ]]
    [[ "$stderr" == *"hint: put -- before an expression that starts with -"* ]]
    # -n and -q are options: the statements are then missing
    run_tensorrun 2 eval '-n' -i n=a.npy
    [[ "$stderr" == *"hint: put -- before an expression that starts with -"* ]]
    # a mistyped long option gets a suggestion, in every command
    run_tensorrun 2 eval 'x' --prnt
    [[ "$stderr" == *"unknown option '--prnt'"* ]]
    [[ "$stderr" == *"did you mean '--print'?"* ]]
    run_tensorrun 2 inspect --jsn a.npy
    [[ "$stderr" == *"did you mean '--json'?"* ]]
    run_tensorrun 2 convert a.npy b.npy --dtpye f64
    [[ "$stderr" == *"did you mean '--dtype'?"* ]]
    run_tensorrun 2 run p.yaml --stats-flie x
    [[ "$stderr" == *"did you mean '--stats-file'?"* ]]
    run_tensorrun 2 eval 'x' --print=yes
    [[ "$stderr" == *"option '--print' takes no value"* ]]
    run_tensorrun 2 eval 'x' -qi
    [[ "$stderr" == *"option '-i' needs a value"* ]]
}

# ---------------------------------------------------------- help and ops

@test "help COMMAND prints what COMMAND --help prints, for every command" {
    for c in run eval inspect convert validate ops help; do
        want=$("$TENSORRUN" $c --help)
        got=$("$TENSORRUN" help $c)
        [ -n "$got" ] && [ "$got" = "$want" ] || { echo "help $c differs"; false; }
    done
    run_tensorrun 0 help run
    [[ "$output" == *"--memory-limit"* ]]
    [[ "$output" == *"NAME=PATH[:KEY]"* ]]
    run_tensorrun 0 help ops
    [[ "$output" == *"--json"* ]]
    [[ "$output" == *"--roff"* ]]
    [[ "$output" == *"[OP...]"* ]]
    run_tensorrun 0 help eval
    [[ "$output" == *"--format"* ]]
    [[ "$output" == *"--"* ]]
}

@test "ops OP... lists only the ops named; an unknown one is exit 2 with a suggestion" {
    run_tensorrun 0 ops softmax topk
    [ "$(grep -c '^  [a-z_]*(' <<< "$output")" -eq 2 ]
    [[ "$output" == *"softmax(x, "* ]]
    [[ "$output" == *"topk(x, k"* ]]
    run_tensorrun 0 ops --json topk
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == '{"name":"topk"'* ]]
    run_tensorrun 2 ops softmax sofmax
    [[ "$stderr" == *"unknown op 'sofmax' (did you mean 'softmax'?)"* ]]
    [ -z "$output" ]
}
