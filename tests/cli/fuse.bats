#!/usr/bin/env bats
# Fusion: chains of elementwise ops feeding a reduction, a row-wise op or
# an output run as one pass over memory, with the unfused bits and no
# full-size temporary; TENSORRUN_NO_FUSE=1 turns it off (for tests).

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    NPY_INPUTS=x
    "$PY" -c 'import numpy as np; np.save("x.npy", np.random.default_rng(1).standard_normal((1024, 1024)).astype("<f4"))'
}

json_field() { # STAGE FIELD: a field of a stage's line in stats.jsonl
    "$PY" -c 'import json, sys
for line in open("stats.jsonl"):
    r = json.loads(line)
    if r.get("stage") == sys.argv[1]:
        print(json.dumps(r[sys.argv[2]]))' "$1" "$2"
}

@test "y = x * 2.0 + 1.0; s = sum(y), only s kept: one fused group, no temporary, the unfused bits" {
    printf '%s\n' 'tensorrun: 1' 'inputs: {x: x.npy}' 'stages:' '  - name: s' '    do:' \
        '      - y = x * 2.0 + 1.0' '      - s = sum(y)' 'outputs: {s: s.npy}' > p.yaml
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"fused group 1, 3 ops in one pass over memory:"* ]]
    [[ "$output" == *"| %"*"= mul(%0, 2)"*"not stored"* ]]
    [[ "$output" == *"| %"*"y "*"= add(%"*"not stored"* ]]
    run_tensorrun 0 validate --json p.yaml
    [ "$(printf '%s' "$output" | "$PY" -c 'import json, sys; g = json.load(sys.stdin)["stages"][0]["fused_groups"]; print(len(g), len(g[0]["instructions"]), g[0]["tail"])')" = "1 3 True" ]
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    # the 512-byte result goes straight into s.npy; the pool gives the
    # sum's partials alone (one block: an accumulator, the 256 blocks'
    # partials, the value; tr_fused_memory), no temporary
    [ "$(json_field s alloc_count)" -eq 1 ]
    [ "$(json_field s peak_active_bytes)" -eq 4608 ]
    cp s.npy fused.npy
    TENSORRUN_NO_FUSE=1 run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    assert_tensors_equal s.npy fused.npy
    # unfused: x * 2.0 is a 4 MiB temporary, which + 1.0 computes over,
    # and the sum's partials (4608 bytes) come while it lives
    [ "$(json_field s peak_active_bytes)" -eq 4198912 ]
}

@test "exp(m * 0.5) * 2 + 1 into an output: one pass, no pool memory, the unfused bits" {
    printf '%s\n' 'tensorrun: 1' 'inputs: {m: x.npy}' 'stages:' '  - name: s' '    do:' \
        '      - y = exp(m * 0.5) * 2 + 1' 'outputs: {y: y.npy}' > p.yaml
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    [ "$(json_field s alloc_count)" -eq 0 ]
    [ "$(json_field s peak_active_bytes)" -eq 0 ]
    cp y.npy fused.npy
    TENSORRUN_NO_FUSE=1 run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    assert_tensors_equal y.npy fused.npy
    [ "$(json_field s peak_active_bytes)" -eq 4194304 ]
    [ "$(json_field s alloc_count)" -eq 1 ]
}

@test "a value something else reads is not fused away" {
    printf '%s\n' 'tensorrun: 1' 'inputs: {x: x.npy}' 'stages:' '  - name: s' '    do:' \
        '      - y = x * 2.0 + 1.0' '      - s = sum(y)' 'outputs: {s: s.npy, y: y.npy}' > p.yaml
    run_tensorrun 0 validate --json p.yaml
    # y is an output: its chain makes y, and sum reads it on its own
    [ "$(printf '%s' "$output" | "$PY" -c 'import json, sys; g = json.load(sys.stdin)["stages"][0]["fused_groups"]; print(len(g), g[0]["tail"])')" = "1 False" ]
    run_tensorrun 0 p.yaml
    npy_is y.npy 'x * np.float32(2) + np.float32(1)'
}

@test "200 generated chains over f16, bf16, f32 and i32, broadcast and strided, into every tail (fusion.py)" {
    run "$PY" "$TR_SRCDIR/tests/python/fusion.py" "$TENSORRUN" "$BATS_TEST_TMPDIR/f" 210
    echo "$output" | grep -v '^# ' || true
    [ "$status" -eq 0 ]
    [[ "$output" == *"# 210 generated chains, 0 failures"* ]]
}

@test "an empty chain into its file is made as usual (an empty result has no mapping)" {
    "$PY" -c 'import numpy as np; np.save("e.npy", np.zeros((0, 3), "<f4"))'
    run_tensorrun 0 eval 'x = cast(x, bf16); r = isnan(x)' -i x=e.npy -o r=r.npy
    "$PY" -c 'import numpy as np; r = np.load("r.npy"); assert r.shape == (0, 3) and r.dtype == bool, r'
    run_tensorrun 0 eval 'r = exp(x * 2) + 1' -i x=e.npy -o r=r.npy
    "$PY" -c 'import numpy as np; r = np.load("r.npy"); assert r.shape == (0, 3) and r.dtype == np.float32, r'
}
