#!/usr/bin/env bats
# Params and -D values: one typing rule (YAML 1.2's core schema) for
# pipeline files, `run -D` and `eval -D`; list-valued params used as
# constant lists; a null param is None.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c 'import numpy as np; np.save("x.npy", np.arange(16, dtype="<f4"))'
}

# pipeline BODY: writes p.yaml: the version line, then BODY
pipeline() {
    printf 'tensorrun: 1\n%s\n' "$1" > p.yaml
}

@test "eval -D k=0x10 is the integer 16, as k: 0x10 is in a file" {
    run_tensorrun 0 eval 'arange(3) * k' -D k=0x10 --print
    [ "$output" = "i64[3] [0, 16, 32]" ]
    run_tensorrun 0 eval 'arange(3) * k' -D k=0o17 --print
    [ "$output" = "i64[3] [0, 15, 30]" ]
    pipeline 'params: {k: 0x10}
stages:
  - {name: s, do: [y = arange(3) * k]}
outputs: {y: y.npy}'
    run_tensorrun 0 validate --json p.yaml
    value_is k 16
    value_is y 'i64[3]'
    run_tensorrun 0 p.yaml -q
    "$PY" -c 'import numpy as np; y = np.load("y.npy"); assert y.dtype == np.int64 and list(y) == [0, 16, 32], y'
    run_tensorrun 0 p.yaml -q -D k=0x20
    "$PY" -c 'import numpy as np; assert list(np.load("y.npy")) == [0, 32, 64]'
}

@test "-D k=True is a boolean in eval and in run alike; yes, no, on, off are strings" {
    run_tensorrun 0 eval 'k' -D k=True --print
    [ "$output" = "true" ]
    run_tensorrun 0 eval 'k' -D k=FALSE --print
    [ "$output" = "false" ]
    for word in yes no on off; do
        run_tensorrun 0 eval 'k' -D k=$word --print
        [ "$output" = "\"$word\"" ]
    done
    pipeline 'params: {flag: false, word: yes}
stages:
  - name: s
    do:
      - y = where(flag, x, -x)
inputs: {x: x.npy}
outputs: {y: y.npy}'
    run_tensorrun 0 validate --json p.yaml
    value_is word '"yes"'
    run_tensorrun 0 p.yaml -q -D flag=True
    "$PY" -c 'import numpy as np; assert (np.load("y.npy") == np.arange(16)).all()'
    run_tensorrun 2 p.yaml -q -D flag=yes
    [[ "$stderr" == *"-D flag=yes: param 'flag' takes true or false (it is false at line 2), not a string"* ]]
}

@test ".inf, -.inf and .nan are floats; ~ and null are None" {
    run_tensorrun 0 eval 'full([2], k)' -D k=-.inf --print
    [ "$output" = "f32[2] [-inf, -inf]" ]
    run_tensorrun 0 eval 'full([1], k)' -D k=.nan --print
    [ "$output" = "f32[1] [nan]" ]
    run_tensorrun 0 eval 'clamp(x, max=k)' -i x=x.npy -D k=.inf -o y.npy
    "$PY" -c 'import numpy as np; assert (np.load("y.npy") == np.arange(16)).all()'
    run_tensorrun 0 eval 'k' -D k=inf --print
    [ "$output" = '"inf"' ]
    # None: a reduction over every dimension
    run_tensorrun 0 eval 'sum(reshape(x, [4, 4]), dim=d)' -i x=x.npy -D 'd=~' --print
    [ "$output" = "120." ]
    pipeline 'params: {d: null, e: ~}
stages:
  - name: s
    do:
      - y = sum(reshape(x, [4, 4]), dim=d)
inputs: {x: x.npy}
outputs: {y: y.npy}'
    run_tensorrun 0 validate --json p.yaml
    value_is d None
    run_tensorrun 0 p.yaml -q
    "$PY" -c 'import numpy as np; assert np.load("y.npy") == 120'
    # a param that is None takes any -D value
    run_tensorrun 0 p.yaml -q -D d=1
    "$PY" -c 'import numpy as np; assert list(np.load("y.npy")) == [6, 22, 38, 54]'
}

@test "a quoted -D value is a string" {
    run_tensorrun 0 eval 'k' -D 'k="0x10"' --print
    [ "$output" = '"0x10"' ]
    run_tensorrun 0 eval 'k' -D "k='true'" --print
    [ "$output" = '"true"' ]
    run_tensorrun 2 eval 'k' -D 'k="open' --print
    [[ "$stderr" == *"-D k=\"open: YAML syntax error"* ]]
}

@test "an integer out of range is an error, in a file and in -D" {
    run_tensorrun 2 eval 'k' -D k=99999999999999999999 --print
    [[ "$stderr" == *"-D k=99999999999999999999: integer 99999999999999999999 is out of range"* ]]
    pipeline 'params: {k: 0x8000000000000000}
stages:
  - {name: s, do: [y = k]}'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:2:13: error: param 'k': integer 0x8000000000000000 is out of range"* ]]
}

@test "list params reach expressions as constant lists: zeros, reshape, permute" {
    pipeline 'params:
  shape: [2, 8]
  dims: [1, 0]
  sizes: [4, -1]
inputs: {x: x.npy}
stages:
  - name: s
    do:
      - z = zeros(shape)
      - r = reshape(x, shape)
      - t = permute(r, dims)
      - u = reshape(x, sizes)
outputs: {z: z.npy, t: t.npy, u: u.npy}'
    run_tensorrun 0 validate --json p.yaml
    value_is shape '[2, 8]'
    value_is dims '[1, 0]'
    value_is t 'f32[8,2]'
    run_tensorrun 0 p.yaml -q
    "$PY" -c '
import numpy as np
x = np.arange(16, dtype=np.float32)
assert np.load("z.npy").shape == (2, 8)
assert (np.load("t.npy") == x.reshape(2, 8).T).all()
assert np.load("u.npy").shape == (4, 4)'
    run_tensorrun 0 p.yaml -q -D 'shape=[4,4]' -D 'sizes=[-1, 2]'
    "$PY" -c '
import numpy as np
x = np.arange(16, dtype=np.float32)
assert (np.load("t.npy") == x.reshape(4, 4).T).all()
assert np.load("u.npy").shape == (8, 2)'
    run_tensorrun 0 validate --json p.yaml -D 'shape=[16, 1]'
    value_is shape '[16, 1]'
    run_tensorrun 2 p.yaml -D shape=16
    [[ "$stderr" == *"-D shape=16: param 'shape' takes a list (it is [2, 8] at line 3), not an integer"* ]]
    [[ "$stderr" == *"hint: write a list in brackets: -D NAME=[2, 8]"* ]]
}

@test "eval -D shape=[2,8]: a list, its items typed by the same rule" {
    run_tensorrun 0 eval 'zeros(shape)' -D 'shape=[2,0x3]' --print
    [[ "$output" == "f32[2, 3] "* ]]
    run_tensorrun 0 eval 'reshape(x, s)' -i x=x.npy -D 's=[2, -1]' -o y.npy
    "$PY" -c 'import numpy as np; assert np.load("y.npy").shape == (2, 8)'
    run_tensorrun 0 eval 'permute(reshape(x, [2, 8]), d)' -i x=x.npy -D 'd=[1, 0]' -o y.npy
    "$PY" -c 'import numpy as np; assert np.load("y.npy").shape == (8, 2)'
    run_tensorrun 0 eval 's' -D 's=[1, [2, 3], "a", b]' --print
    assert_output '[1, [2, 3], "a", "b"]'
    run_tensorrun 2 eval 'zeros(s)' -D 's=[2, 8'
    [[ "$stderr" == *"-D s=[2, 8: YAML syntax error"* ]]
    run_tensorrun 2 eval 'zeros(s)' -D 's=[{a: 1}]'
    [[ "$stderr" == *"-D s=[{a: 1}]: expected a number, true or false, a string or a list, found a mapping"* ]]
}

@test "a list param of the wrong kind for an op is exit 3 at its use" {
    pipeline 'params: {shape: [2, x]}
stages:
  - {name: s, do: [z = zeros(shape)]}'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:4:30: error: zeros: argument 'shape' must be a shape"* ]]
}

@test "a list of integers where one integer is taken: the list is what is wrong" {
    run_tensorrun 3 eval 'argmax(arange(6), dim=[0, 0])' --print
    [[ "$stderr" == *"argmax: argument 'dim' must be an integer or None, not a list"* ]]
    run_tensorrun 3 eval 'argmax(arange(6), dim=[0, 1.5])' --print
    [[ "$stderr" == *"the item at index 1 is a float"* ]]
}
