#!/usr/bin/env bats
# Stages on another device, through the fake device (host memory behind
# the backend interface, TENSORRUN_FAKE_DEVICES=N, for tests): explicit
# transfers in the program, the CPU's bits, statistics, limits and cache
# release per device, and a clear refusal of what a device cannot run.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    NPY_INPUTS=m
    "$PY" -c 'import numpy as np; np.save("m.npy", np.random.default_rng(3).standard_normal((1024, 1024)).astype("<f4"))'
    printf '%s\n' 'tensorrun: 1' 'inputs: {m: m.npy}' 'stages:' '  - name: onfake' \
        '    device: fake' '    do:' '      - y = exp(m * 0.5) * 2 + 1' '      - s = sum(y)' \
        '  - name: back' '    do:' '      - z = y + 1' 'outputs: {s: s.npy, z: z.npy}' > p.yaml
}

json_line() { # STAGE DEVICE FIELD: a field of a stage's line for a device
    "$PY" -c 'import json, sys
for line in open("stats.jsonl"):
    r = json.loads(line)
    if r.get("stage") == sys.argv[1] and r.get("device") == sys.argv[2]:
        print(json.dumps(r.get(sys.argv[3])))' "$1" "$2" "$3"
}

@test "a stage on another device: its transfers are instructions of the program" {
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml
    [[ "$output" == *'stage 1 "onfake" on fake:0:'* ]]
    [[ "$output" == *'m         = to(%0, device="fake:0")'* ]]
    [[ "$output" == *'s         = to(%'*', device="cpu")'* ]]
    [[ "$output" == *'y         = to(%'*', device="cpu")'* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate --json p.yaml
    # three moves: m there, s back for its file, y back for stage 2
    [ "$(printf '%s' "$output" | "$PY" -c 'import json, sys
p = json.load(sys.stdin)
print(sum(i.get("op") == "to" for s in p["stages"] for i in s["instructions"]))')" -eq 3 ]
}

@test "the fake device gives the CPU's bits, and each device's pool is reported on its own" {
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    cp s.npy s_fake.npy && cp z.npy z_fake.npy
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 p.yaml --force-device cpu -q
    assert_tensors_equal s.npy s_fake.npy
    assert_tensors_equal z.npy z_fake.npy
    # the stage's two pools: fake:0 computed (m's copy and the results),
    # the CPU took s back (one 512-byte block)
    [ "$(json_line onfake fake:0 alloc_count)" -gt 0 ]
    [ "$(json_line onfake cpu alloc_count)" -eq 1 ]
    [ "$(json_line onfake cpu peak_active_bytes)" -eq 512 ]
    # y stays on fake:0 for the next stage, 4 MiB
    [ "$(json_line onfake fake:0 active_bytes)" -eq 4194304 ]
    [ "$(json_line onfake fake:0 kept)" = '["y"]' ]
    # every device's cache is given back after the stage
    [ "$(json_line onfake fake:0 cached_bytes)" -eq "$(json_line onfake fake:0 released_bytes)" ]
    # the device's line says how much of its cache waited for its work;
    # the CPU's, whose work is done when it returns, has no such figure
    [ "$(json_line onfake fake:0 pending_bytes)" -le "$(json_line onfake fake:0 cached_bytes)" ]
    [ "$(json_line onfake cpu pending_bytes)" = null ]
    "$PY" -c 'import json
run = [json.loads(l) for l in open("stats.jsonl") if "\"run\"" in l][0]
assert set(run["peak_active_bytes"]) == {"cpu", "fake:0"}, run'
}

@test "--memory-limit caps each device's pool; the stage that passes it is named" {
    # known before anything runs, from the exact peak
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 p.yaml --memory-limit 6M
    [[ "$stderr" == *"stage 'onfake' needs"*"of pool memory on fake:0 at its peak"* ]]
    [ ! -e s.npy ] && [ ! -e z.npy ]
}

@test "--memory-limit per device: a kind, one device, the rest; the most specific wins" {
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 validate p.yaml --memory-limit cpu=64M,fake=6M
    [[ "$stderr" == *"stage 'onfake' needs"*"on fake:0 at its peak, here, past the memory limit of 6.0 MiB"* ]]
    # y back on the CPU, 4 MiB in the second stage (z goes into its file)
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 validate p.yaml --memory-limit fake=64M,3M
    [[ "$stderr" == *"stage 'back' needs"*"on cpu at its peak"* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 validate p.yaml --memory-limit 3M,fake=64M
    [[ "$stderr" == *"stage 'back' needs"*"on cpu at its peak"* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 validate p.yaml --memory-limit 64M,fake:0=6M
    [[ "$stderr" == *"stage 'onfake' needs"* ]]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate p.yaml --memory-limit fake=6M,fake:0=64M,cpu=64M
    # a run within each device's limit, and one past fake:0's, which stops
    # before it computes
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 p.yaml -q --memory-limit fake=64M,cpu=16M
    rm s.npy z.npy
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 5 p.yaml -q --memory-limit cpu=64M,fake=6M
    [ ! -e s.npy ] && [ ! -e z.npy ]
}

@test "--memory-limit per device: malformed items are exit 2, and only the CPU's size is checked against this machine" {
    for bad in gpu=1G cpu=1G,cpu=2G cpu= =1G 1G,2G cuda:x=1G cpu=0 ,; do
        run_tensorrun 2 validate p.yaml --memory-limit "$bad"
        [[ "$stderr" == *"--memory-limit:"* ]]
    done
    run_tensorrun 2 validate p.yaml --memory-limit gpu=1G
    [[ "$stderr" == *"'gpu' is not a device"* ]]
    run_tensorrun 2 validate p.yaml --memory-limit cpu=1G,cpu=2G
    [[ "$stderr" == *"cpu is given two sizes"* ]]
    run_tensorrun 0 validate p.yaml --memory-limit cpu=64M,cuda=100T
    [[ "$stderr" != *"more than this machine's memory"* ]]
    run_tensorrun 0 validate p.yaml --memory-limit 100T
    [[ "$stderr" == *"more than this machine's memory"* ]]
    run_tensorrun 0 validate p.yaml --memory-limit cuda=512
    [[ "$stderr" == *"--memory-limit 512 is 512 bytes; did you mean 512M?"* ]]
}

@test "an op the device has no kernel for is an error at the statement, before anything runs" {
    sed -i 's/      - s = sum(y)/      - s = cumsum(y, 0)/' p.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 3 p.yaml
    [[ "$stderr" == *"p.yaml:8:13: error: stage 'onfake' is to run on fake:0, which has no kernel for cumsum"* ]]
    [[ "$stderr" == *"hint: run it on the CPU: device: cpu in the stage, or device: auto"* ]]
    [ ! -e s.npy ]
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:8:13: error: stage 'onfake' is to run on fake:0, which has no kernel for cumsum"* ]]
    # known from the op table: also where the device is not present
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"which has no kernel for cumsum"* ]]
}

@test "without TENSORRUN_FAKE_DEVICES there is no fake device, and the message says why" {
    run_tensorrun 1 p.yaml
    [[ "$stderr" == *"fake:0, which is not available here (the fake device is for tests only"* ]]
}
