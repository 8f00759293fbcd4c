#!/usr/bin/env bats
# device: auto (the default): a stage goes to the accelerator only when its
# planned work passes the thresholds and the accelerator has a kernel for
# each of its ops, and a stage that runs out of memory there runs again on
# the CPU.  The accelerator is the fake device (TENSORRUN_FAKE_DEVICES,
# host memory behind the backend interface), so these never skip.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    # 2^30 multiply-adds in stage 'big', the threshold itself; stage
    # 'small' reads and writes a few elements
    printf '%s\n' 'tensorrun: 1' 'stages:' '  - name: big' '    do:' \
        '      - a = rand([1024, 1024])' '      - c = matmul(a, a)' '      - s = sum(c)' \
        '  - name: small' '    do:' '      - t = s + 1' 'outputs: {c: c.npy, t: t.npy}' > p.yaml
}

stage_field() { # FILE STAGE FIELD: a field of validate --json's stage
    "$PY" -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(json.dumps([s for s in p["stages"] if s["name"] == sys.argv[2]][0].get(sys.argv[3])))' "$@"
}

@test "auto: a stage whose work passes the threshold runs on the accelerator, with the CPU's bits" {
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml
    [[ "$output" == *'stage 1 "big" on fake:0 (auto):'* ]]
    [[ "$output" == *'stage 2 "small" on cpu:'* ]]
    # both placements' peaks: a and c on the device, or on the CPU
    [[ "$output" == *"pool on fake:0: peak 8.0 MiB (8388608 bytes)"* ]]
    [[ "$output" == *"pool on cpu, should it fall back: peak 8.0 MiB (8388608 bytes)"* ]]
    TENSORRUN_FAKE_DEVICES=1 "$TENSORRUN" validate --json p.yaml > plan.json
    [ "$(stage_field plan.json big device)" = '"fake:0"' ]
    [ "$(stage_field plan.json big auto)" = true ]
    [ "$(stage_field plan.json big fallback_peak_bytes)" -eq 8388608 ]
    [ "$(stage_field plan.json small fallback_peak_bytes)" = null ]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    [ "$(grep -c '"stage":"big","index":0,"device":"fake:0"' stats.jsonl)" -eq 1 ]
    mv c.npy c_fake.npy && mv t.npy t_fake.npy
    run_tensorrun 0 p.yaml -q
    assert_tensors_equal c.npy c_fake.npy
    assert_tensors_equal t.npy t_fake.npy
}

@test "auto: below both thresholds a stage stays on the CPU, and no driver is asked" {
    sed -i 's/rand(\[1024, 1024\])/rand([1024, 1023])/; s/matmul(a, a)/matmul(a, transpose(a, 0, 1))/' p.yaml
    # 1024 * 1024 * 1023 multiply-adds, just under 2^30
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml
    [[ "$output" == *'stage 1 "big" on cpu:'* ]]
    [[ "$output" != *"should it fall back"* ]]
    # 2^26 elements written is the other threshold, and 1 fewer row is under
    printf '%s\n' 'tensorrun: 1' 'stages:' '  - name: z' '    do: ["z = zeros([8192, 8192])"]' \
        '  - name: y' '    do: ["y = zeros([8191, 8192])"]' > z.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate z.yaml
    [[ "$output" == *'stage 1 "z" on fake:0 (auto):'* ]]
    [[ "$output" == *'stage 2 "y" on cpu:'* ]]
    # a small job never loads the NVIDIA driver; a large one asks it
    LD_DEBUG=files run_tensorrun 0 validate p.yaml
    [[ "$stderr" != *libcuda* ]]
    LD_DEBUG=files run_tensorrun 0 validate z.yaml
    if [[ "$("$TENSORRUN" --version)" == *"built without CUDA"* ]]; then
        [[ "$stderr" != *libcuda* ]] # a --without-cuda build has no driver to ask
    else
        [[ "$stderr" == *libcuda.so.1* ]]
    fi
    # an explicit device or --force-device is never auto's to move
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate z.yaml --force-device cpu
    [[ "$output" == *'stage 1 "z" on cpu:'* ]]
}

@test "auto: a stage with an op the accelerator has no kernel for stays on the CPU, with a warning naming it" {
    sed -i 's/      - s = sum(c)/      - s = cumsum(c, 0)/' p.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml
    [[ "$stderr" == *"p.yaml:7:13: warning: stage 'big' runs on the CPU: fake:0 has no kernel for cumsum"* ]]
    [[ "$output" == *'stage 1 "big" on cpu:'* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 p.yaml -q
    [[ "$stderr" == *"stage 'big' runs on the CPU: fake:0 has no kernel for cumsum"* ]]
}

@test "auto: a stage that runs out of device memory runs again on the CPU, with a warning and the CPU's bits" {
    run_tensorrun 0 p.yaml -q
    mv c.npy c_cpu.npy && mv t.npy t_cpu.npy
    # a 6 MiB device: a fits, c does not
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=6291456 run_tensorrun 0 p.yaml \
        --stats json --stats-file stats.jsonl
    [[ "$stderr" == *"warning: stage 'big' ran out of memory on fake:0, and runs again on the CPU: out of memory on fake:0"* ]]
    assert_tensors_equal c.npy c_cpu.npy
    assert_tensors_equal t.npy t_cpu.npy
    # its report is the CPU's, at the peak validate gave for a fallback
    # (TENSORRUN_CHECK_MEMORY compares the two too)
    [ "$(grep -c '"stage":"big","index":0,"device":"fake:0"' stats.jsonl)" -eq 0 ]
    grep -q '"stage":"big","index":0,"device":"cpu","wall_ms":[0-9.e+-]*,"peak_active_bytes":8388608' stats.jsonl
    # a --memory-limit the device's peak passes: the stage will fall back,
    # which validate says instead of refusing it (the CPU's fallback fits)
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml --memory-limit fake=6M
    [[ "$stderr" == *"warning: stage 'big' needs 8.0 MiB (8388608 bytes) of pool memory on fake:0 at its peak, past its memory limit of 6.0 MiB: it will fall back to the CPU"* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 p.yaml -q --memory-limit fake=6M
    [[ "$stderr" == *"stage 'big' ran out of memory on fake:0, and runs again on the CPU: out of memory on fake:0"*"memory limit of 6.0 MiB"* ]]
    assert_tensors_equal c.npy c_cpu.npy
    # and when the CPU's is past its own limit too, that is exit 5
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 validate p.yaml --memory-limit fake=6M,cpu=6M
    [[ "$stderr" == *"stage 'big' needs 8.0 MiB (8388608 bytes) of pool memory on fake:0 at its peak, here, past the memory limit of 6.0 MiB"* ]]
    # a later stage on the device reads what the first made on the CPU:
    # it runs out too, and falls back in turn
    printf '%s\n' '  - name: again' '    do:' '      - d = matmul(c, a)' 'outputs: {d: d.npy}' > more
    sed -i '/^outputs:/d' p.yaml && cat more >> p.yaml
    sed -i 's/outputs: {d: d.npy}/outputs: {c: c.npy, t: t.npy, d: d.npy}/' p.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml
    [[ "$output" == *'stage 3 "again" on fake:0 (auto):'* ]]
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=6291456 run_tensorrun 0 p.yaml -q
    [[ "$stderr" == *"stage 'big' ran out of memory on fake:0"* ]]
    [[ "$stderr" == *"stage 'again' ran out of memory on fake:0"* ]]
    mv d.npy d_fake.npy
    run_tensorrun 0 p.yaml -q
    assert_tensors_equal d.npy d_fake.npy
}

@test "auto: a stage that has given an output its values, or read a stream, does not fall back: exit 5" {
    # s is written before c is made
    printf '%s\n' 'tensorrun: 1' 'stages:' '  - name: big' '    do:' \
        '      - a = rand([1024, 1024])' '      - s = sum(a)' '      - c = matmul(a, a)' \
        'outputs: {s: s.npy, c: c.npy}' > w.yaml
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=6291456 run_tensorrun 5 w.yaml -q
    [[ "$stderr" == *"error: stage 'big': out of memory on fake:0"* ]]
    [[ "$stderr" == *"note: the stage cannot run again on the CPU: it has given an output its values already"* ]]
    [ ! -e s.npy ] && [ ! -e c.npy ]
    # a pipe cut into blocks: 4 blocks of 2^28 multiply-adds
    "$PY" -c 'import numpy as np
r = np.random.default_rng(1)
np.save("x.npy", r.standard_normal((4096, 256)).astype("<f4"))
np.save("w.npy", r.standard_normal((256, 1024)).astype("<f4"))'
    printf '%s\n' 'tensorrun: 1' 'inputs: {x: "-", w: w.npy}' 'stages:' '  - name: blocks' \
        '    foreach: {over: x, size: 1024}' '    do: ["y = matmul(x, w)"]' 'outputs: {y: y.npy}' > f.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate f.yaml < x.npy
    [[ "$output" == *'stage 1 "blocks" on fake:0 (auto)'* ]]
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=4194304 run_tensorrun 5 f.yaml -q -i x=<(cat x.npy)
    [[ "$stderr" == *"note: the stage cannot run again on the CPU: it reads a stream a block at a time"* ]]
    [ ! -e y.npy ]
    # from a file it can, and does, when the blocks are joined in the pool
    sed -i 's/x: "-"/x: x.npy/' f.yaml
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=4194304 run_tensorrun 0 f.yaml -q -o y=y.npy.zst
    [[ "$stderr" == *"stage 'blocks' ran out of memory on fake:0, and runs again on the CPU"* ]]
    zstd -q -d y.npy.zst -o y.npy
    "$PY" -c 'import numpy as np
y, x, w = np.load("y.npy"), np.load("x.npy"), np.load("w.npy")
assert np.allclose(y, x @ w, rtol=1e-4, atol=1e-3)'
    # joined into its file's mapping, the stage has written to it
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=4194304 run_tensorrun 5 f.yaml -q
    [[ "$stderr" == *"note: the stage cannot run again on the CPU: it has given an output its values already"* ]]
}

@test "auto: a foreach stage on the accelerator, with a shorter last block, its whole read by the next stage" {
    "$PY" -c 'import numpy as np
r = np.random.default_rng(2)
np.save("x.npy", r.standard_normal((4000, 256)).astype("<f4"))
np.save("w.npy", r.standard_normal((256, 1024)).astype("<f4"))'
    # 4 blocks, the last of 928 rows: past 2^30 multiply-adds in all; the
    # whole y is kept for the next stage, nothing follows the blocks
    printf '%s\n' 'tensorrun: 1' 'inputs: {x: x.npy, w: w.npy}' 'stages:' '  - name: blocks' \
        '    foreach: {over: x, size: 1024}' '    do: ["y = matmul(x, w)"]' \
        '  - name: after' '    do: ["s = sum(y, 0)"]' 'outputs: {s: s.npy}' > f.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate f.yaml
    [[ "$output" == *'stage 1 "blocks" on fake:0 (auto)'* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 f.yaml --stats json --stats-file stats.jsonl
    grep -q '"stage":"blocks","index":0,"device":"fake:0"' stats.jsonl
    mv s.npy s_fake.npy
    run_tensorrun 0 f.yaml -q
    assert_tensors_equal s.npy s_fake.npy
    # out of device memory in the first block: runs again on the CPU, with
    # what it read from before it (x, w) still there
    TENSORRUN_FAKE_DEVICES=1 TENSORRUN_FAKE_MEMORY=4194304 run_tensorrun 0 f.yaml -q
    [[ "$stderr" == *"stage 'blocks' ran out of memory on fake:0, and runs again on the CPU"* ]]
    assert_tensors_equal s.npy s_fake.npy
}
