#!/usr/bin/env bats
# Constants: exact integer and double arithmetic before anything runs, a
# constant taking a tensor's dtype only where it meets one (and refused
# where it does not fit), rank-0 promotion, and shapes as constants.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    NPY_INPUTS="x i d"
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
np.save("x.npy", np.arange(15, dtype="<f4").reshape(5, 3) / 7)
np.save("i.npy", np.arange(6, dtype="<i4"))
np.save("d.npy", np.array(0.1, dtype="<f8"))'
}

@test "integer constants stay exact 64-bit integers: arange(3) + 2 ** 25" {
    run_tensorrun 0 eval 'arange(3) + 2 ** 25' -o a.npy
    npy_is a.npy 'np.arange(3) + 2 ** 25'
    run_tensorrun 0 eval 'arange(2 ** 25 - 2, 2 ** 25 + 3)' -o b.npy
    npy_is b.npy 'np.arange(2 ** 25 - 2, 2 ** 25 + 3)'
    run_tensorrun 0 eval 'arange(3) + 2 ** 62' -o c.npy
    npy_is c.npy 'np.arange(3) + 2 ** 62'
    run_tensorrun 0 eval 'arange(2 ** 60 + 1, 2 ** 60 + 12, 5)' -o d.npy
    npy_is d.npy 'np.arange(2 ** 60 + 1, 2 ** 60 + 12, 5)'
}

@test "a constant result prints as the value it is: 2 ** 3 is 8, 1/3 a double" {
    run_tensorrun 0 eval '2 ** 3' --print
    assert_output "8"
    run_tensorrun 0 eval '1/3' --print
    assert_output "0.3333333333333333"
    run_tensorrun 0 eval '0.1 + 0.2' --print
    assert_output "0.30000000000000004"
    run_tensorrun 0 eval '2 ** 0.5' --print
    assert_output "1.4142135623730951"
}

@test "a constant takes a tensor's dtype only where it meets one: cast(0.1, f64) is 0.1" {
    run_tensorrun 0 eval 'cast(0.1, f64)' -o a.npy
    npy_is a.npy 'np.array(0.1)'
    run_tensorrun 0 eval 'x * 0.1' -i x=x.npy -o b.npy
    npy_is b.npy 'x * np.float32(0.1)'
    run_tensorrun 0 eval 'arange(3) + exp(1.0)' -o c.npy
    npy_is c.npy '(np.arange(3) + np.float32(np.exp(1.0))).astype(np.float32)'
}

@test "constants computed with integers work wherever an integer is wanted" {
    run_tensorrun 0 eval 'x[0:2**2]' -i x=x.npy -o a.npy
    npy_is a.npy 'x[0:4]'
    run_tensorrun 0 eval 'zeros([2 ** 2])' -o b.npy
    npy_is b.npy 'np.zeros(4, dtype=np.float32)'
    run_tensorrun 0 eval 'reshape(arange(16), [2**3, -1])' -o c.npy
    npy_is c.npy 'np.arange(16).reshape(8, -1)'
    run_tensorrun 0 eval 'v, j = topk(i, k**2)' -D k=2 -i i=i.npy -o j.npy
    npy_is j.npy 'np.array([5, 4, 3, 2])'
}

@test "integer overflow and integer to a negative power are exit 3, before running" {
    run_tensorrun 3 eval '2 ** 63'
    [[ "$stderr" == *"does not fit a 64-bit integer"* ]]
    run_tensorrun 3 eval 'arange(3) * (2 ** 62 * 4)'
    [[ "$stderr" == *"4611686018427387904 * 4 does not fit a 64-bit integer"* ]]
    run_tensorrun 3 eval '2 ** -1'
    [[ "$stderr" == *"negative integer power"* ]]
    run_tensorrun 3 eval 'i ** -1' -i i=i.npy -o out.npy
    [[ "$stderr" == *"pow: an integer tensor to a negative integer power (-1) is not allowed"* ]]
    [ ! -e out.npy ]
    run_tensorrun 0 eval 'x ** -1' -i x=x.npy -o f.npy
}

@test "a constant that does not fit the integer dtype it meets is exit 3, naming both" {
    run_tensorrun 3 eval 'i + 2**40' -i i=i.npy
    [[ "$stderr" == *"add: the constant 1099511627776 does not fit i32"* ]]
    run_tensorrun 3 eval 'cast(i, u8) * 300' -i i=i.npy
    [[ "$stderr" == *"mul: the constant 300 does not fit u8"* ]]
    run_tensorrun 3 eval 'clamp(cast(i, u8), 0, 256)' -i i=i.npy
    [[ "$stderr" == *"the constant 256 does not fit u8"* ]]
    # a comparison converts nothing: 300 is compared as itself
    run_tensorrun 0 eval 'cast(i, u8) < 300' -i i=i.npy -o lt.npy
    npy_is lt.npy 'np.ones(6, dtype=bool)'
    run_tensorrun 0 eval 'i + (2**31 - 1 - 5)' -i i=i.npy -o fits.npy
    npy_is fits.npy '(i + (2**31 - 6)).astype(np.int32)'
}

@test "a rank-0 tensor does not widen a tensor with dimensions of its category" {
    run_tensorrun 0 eval 'x + d' -i x=x.npy -i d=d.npy -o a.npy
    npy_is a.npy 'x + np.float32(0.1)'
    run_tensorrun 0 eval 'i + d' -i i=i.npy -i d=d.npy -o b.npy
    npy_is b.npy 'i + 0.1'
    run_tensorrun 0 validate --json <(printf 'tensorrun: 1\ninputs: {x: %s/x.npy, d: %s/d.npy}\nstages:\n  - name: s\n    do: [y = x + d]\n' "$PWD" "$PWD")
    value_is y 'f32[5,3]'
}

@test "shapes are constants: x.shape, x.shape[i], x.ndim, x.dtype, numel(x)" {
    run_tensorrun 0 eval 'x.shape' -i x=x.npy --print
    assert_output "[5, 3]"
    run_tensorrun 0 eval 'x.shape[-1]' -i x=x.npy --print
    assert_output "3"
    run_tensorrun 0 eval 'x.shape[::-1]' -i x=x.npy --print
    assert_output "[3, 5]"
    run_tensorrun 0 eval 'x.ndim * 10 + numel(x)' -i x=x.npy --print
    assert_output "35"
    run_tensorrun 0 eval 'x.dtype' -i x=x.npy --print
    assert_output "f32"
    run_tensorrun 0 eval 'z = x - mean(x, dim=0); c = z.T @ z / (x.shape[0] - 1)' -i x=x.npy -o c.npy
    "$PY" -c '
import numpy as np
x, c = np.load("x.npy"), np.load("c.npy")
assert c.dtype == np.float32 and c.shape == (3, 3)
assert np.allclose(c, np.cov(x.T), rtol=1e-5, atol=1e-7), (c, np.cov(x.T))'
    run_tensorrun 0 eval 'zeros(x.shape, dtype=i.dtype) + x.shape[1]' -i x=x.npy -i i=i.npy -o z.npy
    npy_is z.npy 'np.full((5, 3), 3, dtype=np.int32)'
    run_tensorrun 0 eval 's = x.shape; reshape(x, [s[1], s[0]])' -i x=x.npy -o r.npy
    npy_is r.npy 'x.reshape(3, 5)'
}

@test "shape constants are checked before running: a bad index is exit 3 at its place" {
    run_tensorrun 3 eval 'x.shape[2]' -i x=x.npy
    [[ "$stderr" == *"eval:1:9: error: index 2 is out of range for a list of 2"* ]]
    run_tensorrun 3 eval 'x.size' -i x=x.npy
    [[ "$stderr" == *"unknown attribute 'size'"* ]]
    run_tensorrun 3 eval 'numel(2)'
    [[ "$stderr" == *"numel takes a tensor"* ]]
}

@test "result dtypes of every dtype pair, rank 0 and numbers included, are PyTorch's (promotion.py)" {
    if ! "$PY" -c 'import torch' 2>/dev/null; then
        [ "${CI:-}" != true ] || fail "PyTorch (python3-torch) is missing, and CI installs it"
        skip "PyTorch (python3-torch) is not installed"
    fi
    mkdir -p p
    run "$PY" "$TR_SRCDIR/tests/python/promotion.py" "$TENSORRUN" "$BATS_TEST_TMPDIR/p"
    echo "$output" | grep -v Warning | tail -n 30
    [ "$status" -eq 0 ]
}

@test "a number meeting an f16 tensor is rounded to f16 first, as PyTorch does (70000 is inf)" {
    "$PY" -c 'import numpy as np; np.save("h.npy", ((np.arange(5) - 3) * 1.1).astype(np.float16))'
    run_tensorrun 0 eval 'h * 70000' -i h=h.npy -o a.npy
    "$PY" -c '
import numpy as np
h, a = np.load("h.npy"), np.load("a.npy")
assert a.dtype == np.float16
want = (h.astype(np.float32) * np.float32(np.float16(70000))).astype(np.float16)
assert np.array_equal(a, want, equal_nan=True), (a, want)
assert np.isinf(a[0]), a'
    run_tensorrun 0 eval 'h * 3.14159' -i h=h.npy -o b.npy
    "$PY" -c '
import numpy as np
h, b = np.load("h.npy"), np.load("b.npy")
want = (h.astype(np.float32) * np.float32(np.float16(3.14159))).astype(np.float16)
assert np.array_equal(b, want), (b, want)'
}

@test "where(mask, 0.1, 0.2): numbers meeting the mask take the default float dtype, f32" {
    "$PY" -c 'import numpy as np; np.save("b.npy", np.array([True, False, True]))'
    run_tensorrun 0 eval 'where(b, 0.1, 0.2)' -i b=b.npy -o w.npy
    npy_is w.npy 'np.array([0.1, 0.2, 0.1], dtype=np.float32)'
    run_tensorrun 0 eval 'where(b, 1.5, 0)' -i b=b.npy -o v.npy
    npy_is v.npy 'np.array([1.5, 0, 1.5], dtype=np.float32)'
}

@test "the hint for a negative integer base keeps its parentheses" {
    run_tensorrun 3 eval '(-2) ** -2'
    [[ "$stderr" == *"(-2) ** -2: an integer to a negative integer power is not allowed (write (-2.0) ** -2 for a float)"* ]]
    run_tensorrun 0 eval '(-2.0) ** -2' --print
    assert_output "0.25"
}

@test "a constant written out is a tensor: i64, f64 or bool, rank 0, or rank 1 for a list" {
    run bash -c '"$0" eval "2 + 3" --format npy > five.npy' "$TENSORRUN"
    npy_is five.npy 'np.array(5)'
    run_tensorrun 0 eval 's = 1/3' -o third.npy
    npy_is third.npy 'np.array(1/3)'
    run bash -c '"$0" eval "x.shape" -i x=x.npy > shape.npy' "$TENSORRUN"
    npy_is shape.npy 'np.array([5, 3])'
    run_tensorrun 0 eval 'l = [1, 2.5, true]' -o l.npy
    npy_is l.npy 'np.array([1, 2.5, 1.0])'
    run_tensorrun 0 eval 'b = true' -o b.npy
    npy_is b.npy 'np.array(True)'
    run_tensorrun 3 eval 's = "cuda"' -o s.npy
    [[ "$stderr" == *"output 's' is a constant, not a tensor"* ]]
}

@test "a shape with a float in it says which item is wrong" {
    run_tensorrun 3 eval 'reshape(x, [5, x.shape[1] / 3])' -i x=x.npy
    [[ "$stderr" == *"reshape: argument 'shape' must be a shape"*"the item at index 1 is a float"* ]]
}
