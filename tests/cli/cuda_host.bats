#!/usr/bin/env bats
# The CUDA backend on a machine without a GPU: tests/cuda/fake_driver.c is
# libcuda.so.1 (one device) and tests/cuda/host_module.c the CUDA module,
# whose "device" memory is the host's and whose kernels are the real
# module's element bodies (src/engine/cuda/map_body.h) in a loop.  So
# everything the engine does for a CUDA stage runs here: placement, the
# transfers, the device pool, and each CUDA kernel's planning, operands
# and results.  What only a GPU can show (the kernels' launches, the
# streams, cuBLAS) is tests/cuda/run's.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    if [[ "$("$TENSORRUN" --version)" == *"built without CUDA"* ]]; then
        skip "this tensorrun was built without CUDA support (--without-cuda)"
    fi
    [ -n "${TR_HOST_CUDA:-}" ] || TR_HOST_CUDA=$BATS_TEST_DIRNAME/../cuda
    export LD_LIBRARY_PATH=$TR_HOST_CUDA/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export TENSORRUN_CUDA_MODULE=$TR_HOST_CUDA/host-module.so
    cd "$BATS_TEST_TMPDIR"
    "$PY" "$BATS_TEST_DIRNAME/cuda_ops.py" inputs .
}

@test "cuda (host stand-in): every op of the cuda column, in each dtype it names, gives the CPU's results" {
    "$TENSORRUN" ops --json > ops.jsonl
    mkdir cpu cuda
    "$PY" "$BATS_TEST_DIRNAME/cuda_ops.py" pipeline ops.jsonl cpu cpu > cpu.yaml
    "$PY" "$BATS_TEST_DIRNAME/cuda_ops.py" pipeline ops.jsonl cuda cuda > cuda.yaml
    # every op of the column is there, over strided, broadcast and constant
    # operands; the reductions over one group of threads and several
    [ "$(grep -c ' = ' cuda.yaml)" -gt 2400 ]
    for op in exp add where clamp cast full rand randn sum mean norm max argmin matmul \
        softmax log_softmax l2_normalize layer_norm rms_norm; do
        grep -q "^      - ${op}__" cuda.yaml
    done
    run_tensorrun 0 validate cuda.yaml
    [[ "$output" == *'stage 1 "ops" on cuda:0:'* ]]
    run_tensorrun 0 cpu.yaml -q
    run_tensorrun 0 cuda.yaml --stats json --stats-file stats.jsonl
    grep -q '"stage":"ops","index":0,"device":"cuda:0"' stats.jsonl
    # the same bits, but the sums' last ones (their order is the device's)
    run "$PY" "$BATS_TEST_DIRNAME/cuda_ops.py" compare cpu/ops.safetensors cuda/ops.safetensors
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    # and those are the same every run
    mv cuda/ops.safetensors cuda/first.safetensors
    run_tensorrun 0 cuda.yaml -q
    cmp cuda/ops.safetensors cuda/first.safetensors
}

@test "cuda (host stand-in): views, copies and casts of device tensors, and values back on the host" {
    printf '%s\n' 'tensorrun: 1' 'inputs: {x: x.npy, y: y.npy}' 'stages:' '  - name: s' \
        '    device: DEVICE' '    do:' \
        '      - p = permute(unsqueeze(x, 0), [2, 0, 1])' \
        '      - f = flip(narrow(x, 1, 2, 4), 0)' \
        '      - d = diagonal(x)' \
        '      - e = expand(y, [3, 7])' \
        '      - r = reshape(transpose(x, 0, 1), [2, 21])' \
        '      - u = unflatten(flatten(x), 0, [7, 6])' \
        '      - m = movedim(squeeze(unsqueeze(x, 2)), 0, 1)' \
        '      - c = contiguous(f)' \
        '      - k = clone(e)' \
        '      - h = cast(cast(r, f16), f64)' \
        '      - b = cast(cast(x, bf16), i32)' \
        '      - t = cast(x > 1, u8) + 1' \
        'outputs:' > tmpl
    for v in p f d e r u m c k h b t; do
        echo "  $v: DEVICE/$v.npy" >> tmpl
    done
    sed 's/DEVICE/cpu/' tmpl > cpu.yaml
    sed 's/DEVICE/cuda/' tmpl > cuda.yaml
    mkdir cpu cuda
    run_tensorrun 0 cpu.yaml -q
    run_tensorrun 0 cuda.yaml -q
    for v in p f d e r u m c k h b t; do
        cmp cpu/$v.npy cuda/$v.npy
    done
    # the inputs go up once, each output comes back once
    run_tensorrun 0 validate cuda.yaml
    [ "$(grep -c 'device="cuda:0")' <<< "$output")" -eq 2 ]
    [ "$(grep -c 'device="cpu")' <<< "$output")" -eq 12 ]
}

@test "cuda (host stand-in): the device pool's statistics are exact and validate's peak is the run's" {
    # ones is made on the device: it, a and b (4 MiB each) are the peak
    printf '%s\n' 'tensorrun: 1' 'stages:' '  - name: s' '    device: cuda' '    do:' \
        '      - a = ones([1024, 1024]) * 3' '      - b = exp(a) + a' 'outputs: {b: b.npy}' > p.yaml
    peaks_match p.yaml
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    "$PY" -c '
import json
s = [json.loads(l) for l in open("stats.jsonl")]
g = [x for x in s if x.get("stage") == "s" and x.get("device") == "cuda:0"][0]
assert g["peak_active_bytes"] == 3 * 4 * 1024 * 1024, g
' || { cat stats.jsonl; false; }
    NPY_INPUTS= npy_is b.npy 'np.exp(np.full((1024, 1024), 3, np.float32)) + np.float32(3)'
    # a sum of 2^20 values takes its 64 groups' partials from the device
    # pool, as validate says
    printf '%s\n' 'tensorrun: 1' 'stages:' '  - name: s' '    device: cuda' '    do:' \
        '      - a = ones([1024, 1024])' '      - t = sum(a)' 'outputs: {t: t.npy}' > r.yaml
    peaks_match r.yaml
    run_tensorrun 0 validate r.yaml
    # a, t's 512-byte block, and 64 partials of 48 bytes
    [[ "$output" == *"pool on cuda:0: peak 4.0 MiB (4197888 bytes) at %1"* ]]
    run_tensorrun 0 r.yaml -q
    NPY_INPUTS= npy_is t.npy 'np.float32(1 << 20)'
}

@test "cuda (host stand-in): auto puts a large elementwise stage on CUDA; out of device memory it runs again on the CPU" {
    printf '%s\n' 'tensorrun: 1' 'inputs: {x: x.npy}' 'stages:' '  - name: make' '    device: cpu' \
        '    do: ["z = zeros([8192, 8192], dtype=u8)"]' '  - name: big' '    do:' \
        '      - w = (z + 1) * 2' '      - s = cast(w, f32)' '      - t = narrow(flatten(s), 0, 0, 42) + flatten(x)' \
        'outputs: {t: t.npy}' > p.yaml
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *'stage 2 "big" on cuda:0 (auto):'* ]]
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    grep -q '"stage":"big","index":1,"device":"cuda:0"' stats.jsonl
    NPY_INPUTS=x npy_is t.npy 'np.float32(2) + x.reshape(-1)'
    rm t.npy
    # no device memory at all: the stage runs again on the CPU, with a warning
    TR_HOST_CUDA_FAIL_MALLOC=0 run_tensorrun 0 p.yaml
    [[ "$stderr" == *"stage 'big'"*"runs again on the CPU"* ]]
    NPY_INPUTS=x npy_is t.npy 'np.float32(2) + x.reshape(-1)'
    # named, cuda has no CPU to fall back to: exit 5
    sed -i 's/  - name: big/  - name: big\n    device: cuda/' p.yaml
    rm t.npy
    TR_HOST_CUDA_FAIL_MALLOC=0 run_tensorrun 5 p.yaml
    [[ "$stderr" == *"cuda:0"* ]]
    [ ! -e t.npy ]
}

@test "cuda (host stand-in): an index out of range is exit 1 naming the first, as on the CPU; nothing is written" {
    "$PY" -c 'import numpy as np; np.save("i.npy", np.array([[0, 1, 9, 2, -3, 11, 0]] * 6))'
    for dev in cpu cuda; do
        printf '%s\n' 'tensorrun: 1' 'inputs: {x: x.npy, i: i.npy}' 'stages:' '  - name: s' \
            "    device: $dev" '    do: ["y = gather(x, 1, i)"]' 'outputs: {y: out.npy}' > g.yaml
        run_tensorrun 1 g.yaml
        [[ "$stderr" == *"gather: index 9 is out of range for dimension 1 of size 7"* ]]
        [ ! -e out.npy ]
        sed -i 's/gather(x, 1, i)/index_select(x, 1, narrow(flatten(i), 0, 4, 3))/' g.yaml
        run_tensorrun 1 g.yaml
        [[ "$stderr" == *"index_select: index 11 is out of range for dimension 1 of size 7"* ]]
    done
}

@test "cuda (host stand-in): test_device's GPU part (transfers, the pinned ring, deferred frees) passes" {
    unit=$TR_HOST_CUDA/../unit/test_device
    [ -x "$unit" ] || skip "tests/unit/test_device is not built"
    run "$unit"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    [[ "$output" != *"not ok"* ]]
    [[ "$output" == *"ok 34 - gpu: nothing pending once the work is done, the cache released"* ]]
    [[ "$output" == *"gpu: 21 MiB of borrowed memory goes up through the pinned ring"* ]]
}
