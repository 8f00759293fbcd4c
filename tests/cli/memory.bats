#!/usr/bin/env bats
# The pool peak validate prints is the run's, byte for byte (tensorrun(1),
# MEMORY): for the example pipelines, for chains computed in place, for
# scratch that depends on --threads, for inputs read into memory, and
# per device.  A kernel whose scratch is declared wrong makes the check
# fail, and --memory-limit is judged from the exact figure before
# anything runs.  (Every run of the test suite checks the same inside
# the run too: TENSORRUN_CHECK_MEMORY, set by make check.)

bats_require_minimum_version 1.5.0

setup() {
    load helper
    cd "$BATS_TEST_TMPDIR"
    /usr/bin/python3 -c '
import numpy as np
rng = np.random.default_rng(5)
np.save("x.npy", rng.standard_normal((1024, 1024)).astype(np.float32))
np.save("a.npy", rng.standard_normal((300, 200)).astype(np.float32))
np.save("b.npy", rng.standard_normal((200, 100)).astype(np.float32))
np.save("f.npy", np.asfortranarray(rng.standard_normal((64, 48)).astype(np.float32)))'
}

# pipeline FILE STATEMENT...: a one-stage pipeline over x, a, b and f
pipeline() {
    local file=$1 s
    shift
    {
        printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: x.npy' '  a: a.npy' '  b: b.npy' \
            '  f: f.npy' 'stages:' '  - name: s' '    do:'
        for s in "$@"; do printf '      - %s\n' "$s"; done
    } > "$file"
}

@test "the example pipelines peak where validate says, stage by stage" {
    cp -R "$TR_SRCDIR/pipelines" p
    chmod -R u+w p
    cd p
    run_tensorrun 0 make-data.yaml -q
    for f in make-data.yaml search.yaml softmax.yaml convert.yaml; do
        peaks_match "$f"
        peaks_match "$f" --threads 1
    done
}

@test "a four-statement chain: validate's peak is the run's, fused and computed in place" {
    pipeline p.yaml 'a = x * 2' 'b = a + 1' 'c = b * 3' 'd = c - 1'
    printf '%s\n' 'outputs:' '  d: d.npy' >> p.yaml
    run_tensorrun 0 validate p.yaml
    # fused, into its file: nothing of 4 MiB in the pool
    [[ "$output" == *"pool on cpu: peak 0 B (0 bytes)"* ]]
    peaks_match p.yaml
    export TENSORRUN_NO_FUSE=1
    run_tensorrun 0 validate p.yaml
    # one block of 4 MiB, b and c computed over a, d into its file
    [ "$(printf '%s\n' "$output" | grep -c 'in place of %')" -eq 2 ]
    [[ "$output" == *"pool on cpu: peak 4.0 MiB (4194304 bytes)"* ]]
    peaks_match p.yaml
    # into a compressed file, d is made in the pool too: still one block
    sed -i 's/d.npy/d.npy.zst/' p.yaml
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"pool on cpu: peak 4.0 MiB (4194304 bytes)"* ]]
    peaks_match p.yaml
}

@test "scratch that depends on --threads, copies for BLAS and strided operands are exact" {
    pipeline p.yaml 'm = a @ b' 't = a.T @ a' 'r = sum(x, dim=0)' 'g = f @ f.T' \
        'k = softmax(x[::2, ::3], dim=-1)' 'v, i = topk(x, 5, dim=-1)' 'h = cast(x[:, 1:], f16)' \
        'q = cumsum(f, dim=0)'
    printf '%s\n' '    keep: [m, t, r, g, k, v, i, h, q]' >> p.yaml
    for threads in 1 2 3 8; do
        peaks_match p.yaml --threads "$threads"
    done
    TENSORRUN_NO_FUSE=1 peaks_match p.yaml --threads 2
}

@test "values kept into later stages, outputs in other dtypes and constants count exactly" {
    printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: x.npy' 'stages:' '  - name: one' '    do:' \
        '      - y = x * 2' '      - n = y.shape' '    keep: [y, n]' '  - name: two' '    do:' \
        '      - z = y[::2] + 1' '      - s = sum(z, dim=1)' 'outputs:' '  y: y.npy' \
        '  s: {path: s.npy, dtype: f16}' '  z: {path: z.safetensors, dtype: bf16}' \
        '  n: n.npy' > p.yaml
    peaks_match p.yaml
    run_tensorrun 0 validate --json p.yaml
    printf '%s' "$output" | /usr/bin/python3 -c '
import json, sys
stages = json.load(sys.stdin)["stages"]
m = stages[1]["memory"][0]
assert m["start_bytes"] == 4194304, m      # y, kept from stage one
assert stages[0]["memory"][0]["end_bytes"] == 4194304, stages[0]  # y (n is a constant)
'
}

@test "an input read into memory counts from the first stage to its last use" {
    command -v zstd >/dev/null || skip "no zstd program"
    zstd -q x.npy -o x.npy.zst
    printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: x.npy.zst' 'stages:' '  - name: one' '    do:' \
        '      - y = sum(x)' '  - name: two' '    do:' '      - z = x[0] * 2' \
        '  - name: three' '    do:' '      - w = y + 1' 'outputs:' '  z: z.npy' '  w: w.npy' > p.yaml
    run_tensorrun 0 validate --json p.yaml
    printf '%s' "$output" | /usr/bin/python3 -c '
import json, sys
m = [s["memory"][0] for s in json.load(sys.stdin)["stages"]]
block = 4194304 + 2097152   # the stream: 4 MiB and the header, in 2 MiB steps
assert m[0]["start_bytes"] == block, m
assert m[1]["start_bytes"] == block + 512, m  # and y, kept
assert m[2]["start_bytes"] < 2097152, m    # x died in stage two
'
    peaks_match p.yaml
}

@test "a stage on the fake device peaks on each device as validate says" {
    export TENSORRUN_FAKE_DEVICES=1
    pipeline p.yaml 'y = x * 2' 'z = sum(y, dim=0)' 'w = z + 1'
    sed -i 's/  - name: s/  - name: s\n    device: fake:0/' p.yaml
    printf '%s\n' 'outputs:' '  w: w.npy' >> p.yaml
    run_tensorrun 0 validate --json p.yaml
    printf '%s' "$output" | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)["stages"][0]["memory"]
assert [d["device"] for d in m] == ["fake:0", "cpu"], m
assert m[0]["peak_bytes"] >= 4194304, m    # x moved over, then y
'
    peaks_match p.yaml
}

@test "a mis-declared kernel scratch makes the check fail" {
    pipeline p.yaml 'm = a @ b'
    printf '%s\n' 'outputs:' '  m: m.npy.zst' >> p.yaml
    peaks_match p.yaml
    rm m.npy.zst
    export TENSORRUN_TEST_MISDECLARE_SCRATCH=matmul
    run ! peaks_match p.yaml
    run_tensorrun 1 p.yaml -q
    [[ "$stderr" == *"internal error: stage 's' peaked at"*"validate said"* ]]
    [ ! -e m.npy.zst ]
}

@test "validate --memory-limit predicts exit 5 from the exact peak, naming the stage" {
    pipeline p.yaml 'y = x * 2' 'z = y @ y' 'w = sum(z)'
    printf '%s\n' 'outputs:' '  w: w.npy' >> p.yaml
    run_tensorrun 0 validate --json p.yaml --threads 2
    peak=$(printf '%s' "$output" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stages"][0]["peak_bytes"])')
    [ "$peak" -ge 8388608 ]
    run_tensorrun 0 validate p.yaml --threads 2 --memory-limit "$peak"
    run_tensorrun 5 validate p.yaml --threads 2 --memory-limit $((peak - 1))
    [[ "$stderr" == *"stage 's' needs"*"($peak bytes) of pool memory on cpu at its peak"* ]]
    [[ "$stderr" == *"p.yaml:11:"* ]]   # the matmul's line
    # the run agrees: at the limit it fits, one byte under it stops before computing
    run_tensorrun 0 p.yaml -q --threads 2 --memory-limit "$peak"
    rm w.npy
    run_tensorrun 5 p.yaml -q --threads 2 --memory-limit $((peak - 1))
    [[ "$stderr" == *"stage 's' needs"* ]]
    [ ! -e w.npy ]
}

@test "before the stages: inputs read into memory and writes of inputs count, and the limit judges them" {
    command -v zstd >/dev/null || skip "no zstd program"
    zstd -q a.npy -o a.npy.zst
    # x written as f16 before the stages (a 2 MiB buffer); a.npy.zst read
    # into the pool and unused; b read by the stage
    printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: x.npy' '  a: a.npy.zst' '  b: b.npy' \
        'stages:' '  - name: s' '    do:' '      - t = b * 2' 'outputs:' \
        '  x: {path: x16.npy, dtype: f16}' '  t: t.npy.zst' > p.yaml
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"a.npy.zst"*"read into the pool 234.5 KiB"*"(unused)"* ]]
    [[ "$output" == *"before the stages:"*"write x16.npy"*"pool on cpu: peak 2.0 MiB (2097152 bytes) writing x16.npy;"* ]]
    run_tensorrun 0 validate --json p.yaml
    before=$(printf '%s' "$output" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["before_stages_memory"]["peak_bytes"])')
    [ "$before" -eq 2097152 ]
    run_tensorrun 5 validate p.yaml --memory-limit $((before - 1))
    [[ "$stderr" == *"writing the outputs made of inputs alone, before the stages, needs 2.0 MiB (2097152 bytes)"* ]]
    run_tensorrun 5 p.yaml -q --memory-limit $((before - 1))
    [ ! -e x16.npy ] && [ ! -e t.npy.zst ]
    # at the peak it fits, and the run's own peak before the stages is it
    run_tensorrun 0 p.yaml -q --memory-limit "$before"
    peaks_match p.yaml
}

@test "a pipe of big-endian data holds its stream and its copy while it loads" {
    /usr/bin/python3 -c 'import numpy as np; np.save("be.npy", np.arange(1 << 20, dtype=">f8"))'
    run --separate-stderr sh -c "cat be.npy | '$TENSORRUN' eval 'x * 2' -i x=- -o y.npy --dry-run --json"
    [ "$status" -eq 0 ]
    need=$(printf '%s' "$output" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["before_stages_memory"]["peak_bytes"])')
    # 8 MiB + 128 bytes read whole (a block of 10 MiB), then 8 MiB copied in order
    [ "$need" -eq $((10485760 + 8388608)) ]
    run --separate-stderr sh -c "cat be.npy | '$TENSORRUN' eval 'x * 2' -i x=- -o y.npy --memory-limit $need"
    [ "$status" -eq 0 ]
    run --separate-stderr sh -c "cat be.npy | '$TENSORRUN' eval 'x * 2' -i x=- -o y.npy --memory-limit $((need - 1))"
    [ "$status" -eq 5 ]
}
