#!/usr/bin/env bats
# The NumPy spellings people type first: axis and keepdims, the op aliases
# clip, cat, concatenate, absolute, amax and amin, and "did you mean"
# suggestions a user would accept (or none).

bats_require_minimum_version 1.5.0

setup() {
    load helper
    NPY_INPUTS="x"
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
np.save("x.npy", (np.arange(12, dtype="<f4").reshape(3, 4) - 5) / 4)'
}

@test "axis and keepdims mean dim and keepdim" {
    run_tensorrun 0 eval 'sum(x, axis=0, keepdims=true)' -i x=x.npy -o a.npy
    npy_is a.npy 'x.sum(axis=0, keepdims=True)'
    run_tensorrun 0 eval 'x.mean(axis=-1)' -i x=x.npy -o b.npy
    npy_is b.npy 'x.mean(axis=-1)'
}

@test "the op aliases clip, cat, concatenate, absolute, amax and amin" {
    run_tensorrun 0 eval 'clip(x, -0.5, 0.5)' -i x=x.npy -o clip.npy
    npy_is clip.npy 'np.clip(x, np.float32(-0.5), np.float32(0.5))'
    run_tensorrun 0 eval 'cat([x, x], axis=1)' -i x=x.npy -o cat.npy
    npy_is cat.npy 'np.concatenate([x, x], axis=1)'
    run_tensorrun 0 eval 'concatenate([x, x])' -i x=x.npy -o conc.npy
    npy_is conc.npy 'np.concatenate([x, x])'
    run_tensorrun 0 eval 'absolute(x)' -i x=x.npy -o abs.npy
    npy_is abs.npy 'np.absolute(x)'
    run_tensorrun 0 eval 'amax(x, axis=0)' -i x=x.npy -o amax.npy
    npy_is amax.npy 'np.amax(x, axis=0)'
    run_tensorrun 0 eval 'x.amin(axis=1, keepdims=true)' -i x=x.npy -o amin.npy
    npy_is amin.npy 'np.amin(x, axis=1, keepdims=True)'
}

@test "did you mean: aliases are known, ddof and unbiased point to correction, max(x, y) to maximum" {
    run_tensorrun 3 eval 'clp(x, 0, 1)' -i x=x.npy
    [[ "$stderr" == *"unknown op 'clp' (did you mean 'clip'?)"* ]]
    run_tensorrun 3 eval 'var(x, ddof=1)' -i x=x.npy
    [[ "$stderr" == *"var has no parameter 'ddof' (did you mean 'correction'?)"* ]]
    run_tensorrun 3 eval 'std(x, unbiased=false)' -i x=x.npy
    [[ "$stderr" == *"std has no parameter 'unbiased' (did you mean 'correction'?)"* ]]
    run_tensorrun 3 eval 'max(x, x)' -i x=x.npy
    [[ "$stderr" == *"(did you mean 'maximum'?)"* ]]
    run_tensorrun 3 eval 'min(x, x * 2)' -i x=x.npy
    [[ "$stderr" == *"(did you mean 'minimum'?)"* ]]
    run_tensorrun 3 eval 'sum(x, axs=0)' -i x=x.npy
    [[ "$stderr" == *"(did you mean 'axis'?)"* ]]
}

@test "no suggestion a user would not accept: isreal is not isnan, clip is not ceil" {
    run_tensorrun 3 eval 'isreal(x)' -i x=x.npy
    [[ "$stderr" == *"unknown op 'isreal'"* ]]
    [[ "$stderr" != *"did you mean"* ]]
    run_tensorrun 3 eval 'sofmax(x)' -i x=x.npy
    [[ "$stderr" == *"(did you mean 'softmax'?)"* ]]
}
