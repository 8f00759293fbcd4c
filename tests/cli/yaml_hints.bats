#!/usr/bin/env bats
# The YAML traps a pipeline's author falls into get a hint that works: a
# bare - (standard input) that YAML reads as a list item, a statement that
# a flow sequence splits at its commas, and an error inside a block or
# multi-line scalar reported at its own line and column.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(4, dtype="<f4"))'
}

# pipeline BODY: writes p.yaml: the version line, then BODY
pipeline() {
    printf 'tensorrun: 1\n%s\n' "$1" > p.yaml
}

@test "x: - as an input or an output: quote it" {
    pipeline 'inputs:
  x: -
stages:
  - name: s
    do:
      - y = x'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:3:6: error: YAML syntax error: block sequence entries are not allowed in this context"* ]]
    [[ "$stderr" == *'hint: YAML reads a bare - as the start of a list item; write "-" (in quotes) for standard input or output'* ]]
    pipeline 'inputs:
  x:
    path: -   # standard input
stages:
  - name: s
    do:
      - y = x'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *'p.yaml:4:11: error: YAML syntax error'* ]]
    [[ "$stderr" == *'write "-" (in quotes)'* ]]
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do:
      - y = x
outputs:
  y: -'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *'write "-" (in quotes) for standard input or output'* ]]
    # quoted, it is standard output
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do:
      - y = x * 2
outputs:
  y: "-"'
    run_tensorrun 0 p.yaml -q
    # a - that starts a real list item gets no such hint
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do: - y = x'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" != *'write "-"'* ]]
}

@test "a flow sequence that splits a statement at its commas: use a block list or quote it" {
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do: [y = clamp(x, 0, 1), z = y + 1]
outputs: {z: z.npy}'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:5:10: error: YAML split this statement at its commas: inside [ ], a comma ends a list item, so 'y = clamp(x' is only its first piece"* ]]
    [[ "$stderr" == *"hint: write 'do:' as a block list, one '- STATEMENT' line each, or quote the statement: [\"y = clamp(x, 0, 1)\"]"* ]]
    # one error, not one per piece, and y is still bound for z
    [ "$(grep -c 'error:' <<< "$stderr")" -eq 1 ]
    pipeline 'inputs: {x: a.npy}
stages:
  - {name: s, do: [y = x, z = maximum(y, 1)]}'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:4:27: error: YAML split this statement at its comma: "*"'z = maximum(y'"* ]]
    # quoted, the same statement is whole
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do: ["y = clamp(x, 0, 1)", z = y + 1]
outputs: {z: z.npy}'
    run_tensorrun 0 p.yaml -q
    "$PY" -c 'import numpy as np; assert (np.load("z.npy") == np.clip(np.arange(4), 0, 1) + 1).all()'
}

@test "a YAML syntax error inside a flow sequence says why" {
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do: [y = x[0:2]]'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:5:15: error: YAML syntax error"* ]]
    [[ "$stderr" == *"hint: inside [ ] and { }, YAML splits text at commas and reads brackets as its own"* ]]
}

@test "an error inside a folded, literal or multi-line scalar is at its own line and column" {
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do:
      - >
        y = x +
        sofmax(x)
      - |
        z = y *
            (x + 1))
      - w = x +
          nope
      - "v = x +
          nada"
      - >-
        u = x + 1
          +
          zip(x)'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:8:9: error: unknown op 'sofmax' (did you mean 'softmax'?)"* ]]
    [[ "$stderr" == *"   8 |         sofmax(x)"* ]]
    [[ "$stderr" == *"p.yaml:11:20: error: unexpected ')'"* ]]
    [[ "$stderr" == *"p.yaml:13:11: error: 'nope' is used before anything binds it"* ]]
    [[ "$stderr" == *"p.yaml:15:11: error: 'nada' is used before anything binds it"* ]]
    [[ "$stderr" == *"p.yaml:19:11: error: unknown op 'zip'"* ]]
}

@test "a statement in a block scalar runs as written" {
    pipeline 'inputs: {x: a.npy}
stages:
  - name: s
    do:
      - >
        y = x *
        2 + 1
      - |
        z = y
outputs: {z: z.npy}'
    run_tensorrun 0 p.yaml -q
    "$PY" -c 'import numpy as np; assert (np.load("z.npy") == np.arange(4) * 2 + 1).all()'
}
