#!/usr/bin/env bats
# Integer and bool operands: matmul, dot and outer of integers are exact
# and wrap around as NumPy's do; sort, argsort and topk take bool; an
# integer raised to a negative integer power is a runtime error.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    NPY_INPUTS="a b m"
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
rng = np.random.default_rng(9)
big = np.iinfo(np.int64)
np.save("a.npy", rng.integers(big.min, big.max, (3, 70, 40), dtype=np.int64, endpoint=True))
np.save("b.npy", rng.integers(big.min, big.max, (40, 90), dtype=np.int64, endpoint=True))
np.save("m.npy", rng.integers(0, 2, (4, 9)).astype(bool))
np.save("base.npy", np.array([2, 3, 4], dtype=np.int64))
np.save("neg.npy", np.array([1, -1, 2], dtype=np.int32))'
}

@test "a @ b of i64 .npy inputs is NumPy's product, wrapping around" {
    run_tensorrun 0 eval 'a @ b' -i a=a.npy -i b=b.npy -o r.npy
    npy_is r.npy 'a @ b'
    run_tensorrun 0 eval 'r = a.mT[1:, ::2] @ a[0, :, ::-1]' -i a=a.npy -o r=s.npy --threads 2
    npy_is s.npy 'a.swapaxes(1, 2)[1:, ::2] @ a[0, :, ::-1]'
    run_tensorrun 0 eval 'dot(cast(b[0], i8), cast(b[1], i8))' -i b=b.npy -o d.npy
    npy_is d.npy 'np.dot(b[0].astype(np.int8), b[1].astype(np.int8))'
    run_tensorrun 0 eval 'outer(cast(b[0], u16), cast(b[1], i8))' -i b=b.npy -o o.npy
    npy_is o.npy 'np.multiply.outer(b[0].astype(np.uint16), b[1].astype(np.int8)).astype(np.int32)'
}

@test "bool matmul is refused, as PyTorch refuses it" {
    run_tensorrun 3 eval 'm @ m.T' -i m=m.npy -o r.npy
    [[ "$stderr" == *"matmul: does not take bool"* ]]
    [ ! -e r.npy ]
}

@test "sort, argsort and topk take bool: false before true, stable" {
    run_tensorrun 0 eval 'v, i = sort(m, descending=true); j = argsort(m.T, dim=0); t, k = topk(m, 3)' \
        -i m=m.npy -o v=v.npy -o i=i.npy -o j=j.npy -o t=t.npy -o k=k.npy
    npy_is v.npy 'np.sort(m)[:, ::-1]'
    npy_is i.npy 'np.argsort(~m, kind="stable")'
    npy_is j.npy 'np.argsort(m.T, axis=0, kind="stable")'
    npy_is t.npy 'np.sort(m)[:, ::-1][:, :3]'
    npy_is k.npy 'np.argsort(~m, kind="stable")[:, :3]'
}

@test "an integer to a negative integer tensor power is exit 1, and nothing is written" {
    run_tensorrun 1 eval 'r = x ** y' -i x=base.npy -i y=neg.npy -o r=r.npy
    [[ "$stderr" == *"pow: integers to negative integer powers are not allowed"* ]]
    [ ! -e r.npy ]
    run bash -c '"$0" eval "x ** y" -i x=base.npy -i y=neg.npy > out.npy' "$TENSORRUN"
    [ "$status" -eq 1 ]
    [ ! -s out.npy ]
    run_tensorrun 0 eval 'r = cast(x, f64) ** y' -i x=base.npy -i y=neg.npy -o r=f.npy
    "$PY" -c 'import numpy as np; assert np.load("f.npy").tolist() == [2.0, 1 / 3, 16.0]'
}

@test "ops --json lists the dtypes matmul, dot, outer and the sorts take" {
    run_tensorrun 0 ops --json
    "$PY" -c '
import json, sys
ops = {o["name"]: o["dtypes"] for o in map(json.loads, sys.argv[1].splitlines())}
assert ops["matmul"] == ops["dot"] == "numbers (not bool)", ops["matmul"]
for op in ("outer", "sort", "argsort", "topk"):
    assert ops[op] == "any dtype", (op, ops[op])' "$output"
}
