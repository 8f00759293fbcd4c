#!/usr/bin/env bats
# tensorrun eval: statements from the command line, .npy into pipes and
# files, readable text with --print, and errors that point into the text.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    NPY_INPUTS="x i big"
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
np.save("x.npy", np.arange(12, dtype="<f4").reshape(3, 4))
np.save("i.npy", np.arange(6, dtype="<i4"))
np.save("big.npy", np.arange(5000, dtype="<f8").reshape(50, 100))'
}

@test "a bare expression is called out; --print writes it as a number" {
    run_tensorrun 0 eval 'sum(x)' -i x=x.npy --print
    [ "$output" = "66." ]
    run_tensorrun 0 eval 'sum(i)' -i i=i.npy --print
    [ "$output" = "15" ]
    run_tensorrun 0 eval '2 + 3' --print
    [ "$output" = "5" ]
}

@test "without -o the result is .npy on standard output when it is not a terminal" {
    run bash -c '"$0" eval "x * 2" -i x=x.npy > y.npy' "$TENSORRUN"
    [ "$status" -eq 0 ]
    npy_is y.npy 'x * np.float32(2)'
}

@test "a filter in a pipe: eval reads - and writes -" {
    run bash -c '"$0" eval "softmax(x, dim=-1)" -i x=- < x.npy > s.npy' "$TENSORRUN"
    [ "$status" -eq 0 ]
    "$PY" -c '
import numpy as np
x = np.load("x.npy"); e = np.exp(x - x.max(-1, keepdims=True)); want = e / e.sum(-1, keepdims=True)
assert np.allclose(np.load("s.npy"), want, rtol=1e-6)'
    run bash -c 'cat x.npy | "$0" eval "x[1:, ::2].T" -i x=- | "$0" eval "y + 1" -i y=- > t.npy' "$TENSORRUN"
    [ "$status" -eq 0 ]
    npy_is t.npy 'x[1:, ::2].T + np.float32(1)'
}

@test "statements separated by ';'; -o PATH writes the last value bound, -o NAME=PATH any" {
    run_tensorrun 0 eval 'a = x + 1; b = a * a; c = [1, 2]; d = cast(b, i64)' -i x=x.npy \
        -o last.npy -o a=a.npy -o b=b.safetensors
    [ -z "$output" ]
    npy_is last.npy '((x + 1) * (x + 1)).astype(np.int64)'
    npy_is a.npy 'x + np.float32(1)'
    "$TENSORRUN" convert b.safetensors b.npy
    npy_is b.npy '(x + 1) * (x + 1)'
}

@test "a ';' inside brackets or a string does not split a statement" {
    run_tensorrun 0 eval 'y = gelu(x[0, 1:3], approximate="tanh"); z = sum(y, dim=[0])' -i x=x.npy --print
    [ -n "$output" ]
    run_tensorrun 3 eval 'y = gelu(x, approximate="a;b")' -i x=x.npy --print
    [[ "$stderr" == *'"a;b"'* ]] || [[ "$stderr" == *"approximate"* ]]
}

@test "--print: a tensor as NumPy-style text with its dtype and shape" {
    run_tensorrun 0 eval 'x[:2]' -i x=x.npy --print
    [ "${lines[0]}" = "f32[2, 4] [[0., 1., 2., 3.]," ]
    [ "${lines[1]}" = "           [4., 5., 6., 7.]]" ]
    run_tensorrun 0 eval 'cast(x[0], f16) / 10' -i x=x.npy --print
    [ "$output" = "f16[4] [0., 0.1, 0.2, 0.3]" ]
    run_tensorrun 0 eval 'i > 2' -i i=i.npy --print
    [ "$output" = "bool[6] [false, false, false, true, true, true]" ]
}

@test "--print elides the middle of a large tensor" {
    run_tensorrun 0 eval 'big' -i big=big.npy --print
    [ "${lines[0]}" = "f64[50, 100] [[0., 1., 2., …, 97., 98., 99.]," ]
    [ "${lines[1]}" = "              [100., 101., 102., …, 197., 198., 199.]," ]
    [ "${lines[3]}" = "              …," ]
    [[ "${lines[-1]}" == *"4997., 4998., 4999.]]" ]]
    [ "${#lines[@]}" -le 8 ]
}

@test "-D defines params: integers, numbers, booleans" {
    run_tensorrun 0 eval 'x * k + j' -i x=x.npy -D k=2 -D j=0.5 -o y.npy
    npy_is y.npy 'x * np.float32(2) + np.float32(0.5)'
}

@test "an unknown op is exit 3, with the place in the text and a suggestion" {
    run_tensorrun 3 eval 'y = sofmax(x, dim=-1)' -i x=x.npy
    [[ "$stderr" == *"tensorrun: eval:1:5: error: unknown op 'sofmax' (did you mean 'softmax'?)"* ]]
}

@test "syntax errors, unknown names and shape errors are exit 3 before anything runs" {
    run_tensorrun 3 eval 'y = (x + ' -i x=x.npy
    [[ "$stderr" == *"eval:1:"* ]]
    run_tensorrun 3 eval 'y = x + z' -i x=x.npy
    [[ "$stderr" == *"eval:1:9: error: 'z' is used before anything binds it"* ]]
    run_tensorrun 3 eval 'x @ x' -i x=x.npy
    [[ "$stderr" == *"matmul"* ]]
    run_tensorrun 3 eval '' --print
    # with -o: still the statement's error (3), not a usage error about -o
    run_tensorrun 3 eval 'x +' -i x=x.npy -o y.npy
    [[ "$stderr" != *"no value to write"* ]]
    run_tensorrun 3 eval "$(printf '(%.0s' {1..300})x$(printf ')%.0s' {1..300})" -i x=x.npy -o y.npy
    [[ "$stderr" == *"nested too deeply"* ]]
}

@test "usage errors are exit 2" {
    run_tensorrun 2 eval
    run_tensorrun 2 eval 'x' 'y'
    run_tensorrun 2 eval 'x' -i x
    run_tensorrun 2 eval 'x' -i x=x.npy -i x=x.npy
    run_tensorrun 2 eval 'x' -i x=x.npy -o y.what
    run_tensorrun 2 eval 'x' -i x=x.npy --bogus
}

@test "a missing input is exit 4; a runtime index error is exit 1 with nothing written" {
    run_tensorrun 4 eval 'x + 1' -i x=missing.npy -o y.npy
    [ ! -e y.npy ]
    "$PY" -c 'import numpy as np; np.save("bad.npy", np.array([7], dtype="<i8"))'
    run_tensorrun 1 eval 'gather(i, 0, j)' -i i=i.npy -i j=bad.npy -o y.npy
    [[ "$stderr" == *"stage 'eval'"* ]]
    [ ! -e y.npy ]
}

@test "random numbers: the same seed gives the same bits, another seed others" {
    run_tensorrun 0 eval 'randn([3, 3], seed=5)' -o a.npy
    run_tensorrun 0 eval 'randn([3, 3], seed=5)' -o b.npy
    run_tensorrun 0 eval 'randn([3, 3], seed=6)' -o c.npy
    assert_tensors_equal a.npy b.npy
    run ! assert_tensors_close a.npy c.npy
}

@test "statistics are off by default in eval, on with --stats" {
    run_tensorrun 0 eval 'x + 1' -i x=x.npy -o y.npy
    [ -z "$stderr" ]
    run_tensorrun 0 eval 'x + 1' -i x=x.npy -o y.npy --stats text
    [[ "$stderr" == *"eval "*"cpu"* ]]
}

@test "an output larger than the disk's free space is not reserved: the error still reaches a file" {
    # 400 TB: no disk has that free, nor any process the address space.
    # Reserving it first would fill the disk and lose the error message
    # itself (stderr is a file beside it).
    run bash -c '"$0" eval "zeros([100000000000000])" -o huge.npy 2> err; echo $?' "$TENSORRUN"
    [ "$output" = 5 ]
    grep -q "out of memory" err
    [ ! -e huge.npy ]
    [ -z "$(ls -A | grep -F .tmp-)" ]
}

@test "statements over several lines: errors point at their own line and column" {
    run_tensorrun 3 eval $'y = 1;\nz = sofmax(y)'
    [[ "$stderr" == *"eval:2:5: error: unknown op 'sofmax'"* ]]
    [[ "$stderr" == *"2 | z = sofmax(y)"* ]]
    run_tensorrun 3 eval $'\n  z = x;\n  c = z.T @ zz\n' -i x=x.npy
    [[ "$stderr" == *"eval:3:13: error: 'zz' is used before anything binds it"* ]]
    run_tensorrun 3 eval $'y = 1 +\n  (2 * ]'
    [[ "$stderr" == *"eval:2:8: error: expected an expression after '*', found ']'"* ]]
}

@test "-D: the last of a name wins, as in run; a name both -D and -i is exit 2" {
    run_tensorrun 0 eval 'a * 10' -D a=1 -D a=2
    assert_output "20"
    run_tensorrun 2 eval 'x' -D x=3 -i x=x.npy
    [[ "$stderr" == *"-D x and -i x name the same value"* ]]
    run_tensorrun 3 eval ''
    [[ "$stderr" == *"eval: error: no statement"* ]]
}

@test "-o PATH whose name tells no format takes --format's (/dev/null, /dev/stdout)" {
    run_tensorrun 0 eval 'x * 2' -i x=x.npy -o /dev/null --format npy
    run bash -c '"$0" eval "x * 2" -i x=x.npy -o /dev/stdout --format npy | cat > y.npy' "$TENSORRUN"
    npy_is y.npy 'x * 2'
    run_tensorrun 2 eval 'x * 2' -i x=x.npy -o /dev/null
    [[ "$stderr" == *"cannot tell the format from the name"*"or give --format"* ]]
}

@test "an output through a symbolic link replaces the link's target and keeps the link" {
    mkdir -p data
    "$PY" -c 'import numpy as np; np.save("data/old.npy", np.zeros(2))'
    ln -s data/old.npy link.npy
    run_tensorrun 0 eval 'x * 2' -i x=x.npy -o link.npy
    [ -L link.npy ]
    npy_is data/old.npy 'x * 2'
    # a link to the standard output made a file (what /dev/stdout is then)
    run bash -c 'ln -s /proc/self/fd/1 out.npy; "$0" eval "x * 3" -i x=x.npy -o out.npy > y.npy; [ -L out.npy ]' "$TENSORRUN"
    [ "$status" -eq 0 ]
    npy_is y.npy 'x * 3'
}

@test "messages: a bare call of two results, .shape of a constant, an empty -o" {
    run_tensorrun 3 eval 'sort(x)' -i x=x.npy
    [[ "$stderr" == *"1 name for 2 values"*"hint: assign each"* ]]
    run_tensorrun 3 eval 'x.shape.ndim' -i x=x.npy
    [[ "$stderr" == *"only a tensor has .T, .mT, .shape, .ndim and .dtype"* ]]
    run_tensorrun 2 eval 'x' -i x=x.npy -o y=
    [[ "$stderr" == *"-o y=: the path is empty"* ]]
    run_tensorrun 2 eval 'x' -i x=x.npy -o =a.npy
    [[ "$stderr" == *"-o =a.npy: the name is empty"* ]]
    [ ! -e =a.npy ]
}

@test "no suggestion that changes a short word's first letter; empty inputs say so; clamp needs a bound" {
    printf 'tensorrun: 1\nstages:\n  - name: s\n    device: gpu\n    do: [y = zeros(3)]\n' > g.yaml
    run_tensorrun 3 validate g.yaml
    [[ "$stderr" != *"did you mean 'cpu'"* ]]
    run_tensorrun 3 eval 'y = x + 1' -i x=x.npy -o j=j.npy
    [[ "$stderr" != *"did you mean"* ]]
    run bash -c '"$0" eval "x" -i x=- < /dev/null' "$TENSORRUN"
    [ "$status" -eq 4 ]
    [[ "$output" == *"the stream is empty"* ]]
    run_tensorrun 3 eval 'clamp(x)' -i x=x.npy
    [[ "$stderr" == *"clamp: give min, max or both"* ]]
    run_tensorrun 3 eval 'argmax(zeros([0]))'
    [[ "$stderr" == *"an empty tensor has no element to take the argmax of"* ]]
    run_tensorrun 3 eval 'x.u16()' -i x=x.npy
}

@test "Python's operators: // % & | ^ ~ with its precedence, on constants exactly" {
    run_tensorrun 0 eval --print -- '-7 // 2'
    [ "$output" = "-4" ]
    run_tensorrun 0 eval --print -- '-7 % 2'
    [ "$output" = "1" ]
    run_tensorrun 0 eval '12 & 10 | 1 ^ 3' --print
    [ "$output" = "10" ]
    run_tensorrun 0 eval '~5' --print
    [ "$output" = "-6" ]
    run_tensorrun 0 eval 'sum((i > 1) & (i < 4))' -i i=i.npy --print
    [ "$output" = "2" ]
    run_tensorrun 0 eval 'sum(i // 4 + i % 4)' -i i=i.npy --print
    [ "$output" = "9" ]
    run_tensorrun 3 eval '7 // 0'
    [[ "$stderr" == *"7 // 0: integer division by zero"* ]]
    run_tensorrun 3 eval 'x & 1' -i x=x.npy
    [[ "$stderr" == *"bitwise_and: does not take f32"* ]]
    run_tensorrun 3 eval 'i & 2.5' -i i=i.npy
    [[ "$stderr" == *"bitwise_and: does not take a float number (it takes bool and integers)"* ]]
}

@test "x[idx] with an integer tensor is index_select; a boolean mask is refused with a hint" {
    run_tensorrun 0 eval 'x[i[::-2] - 3]' -i x=x.npy -i i=i.npy -o r.npy
    npy_is r.npy 'np.arange(12, dtype="<f4").reshape(3, 4)[[2, 0, -2]]'
    run_tensorrun 3 eval 'x[x > 3]' -i x=x.npy
    [[ "$stderr" == *"eval:1:5: error: a boolean mask cannot index"* ]]
    [[ "$stderr" == *"hint: every shape is known before computing; keep the shape with where(mask, x, 0)"* ]]
    run_tensorrun 1 eval 'x[i]' -i x=x.npy -i i=i.npy
    [[ "$stderr" == *"index_select: index 3 is out of range for dimension 0 of size 3"* ]]
}

@test "method calls, keywords named like reserved words, and split's several values" {
    run_tensorrun 0 eval 'x.T.sum(dim=0).nan_to_num(nan=0.0).max()' -i x=x.npy --print
    [ "$output" = "38." ]
    # PyTorch's count: 4 columns in 3 chunks are 2 chunks of ceil(4 / 3)
    run_tensorrun 0 eval 'a, b = x.chunk(3, dim=1); r = b' -i x=x.npy -o r=r.npy
    npy_is r.npy 'np.arange(12, dtype="<f4").reshape(3, 4)[:, 2:]'
    run_tensorrun 3 eval 'a, b, c = x.chunk(3, dim=1)' -i x=x.npy
    [[ "$stderr" == *"3 names for 2 values"* ]]
}
