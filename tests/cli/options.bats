#!/usr/bin/env bats
# validate and run --dry-run say what run will do: the run options that
# change the plan (--device, --force-device, --threads, --memory-limit),
# output directories checked as the run checks them, and the warnings of a
# --memory-limit that cannot be meant.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    INJECT=${TR_INJECT:-$BATS_TEST_DIRNAME/../inject/inject.so}
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(4, dtype="<i8"))'
}

# pipeline BODY: writes p.yaml: the version line, then BODY
pipeline() {
    printf 'tensorrun: 1\n%s\n' "$1" > p.yaml
}

@test "a missing output directory is exit 4 in validate and --dry-run, as in run" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: no/such/dir/y.npy}'
    run_tensorrun 4 p.yaml
    want="output 'y': cannot create a file in no/such/dir: No such file or directory"
    [[ "$stderr" == *"$want"* ]]
    run_tensorrun 4 validate p.yaml
    [[ "$stderr" == *"p.yaml:5:11: error: $want"* ]]
    [ -z "$output" ]
    run_tensorrun 4 run --dry-run p.yaml
    [[ "$stderr" == *"$want"* ]]
    # given on the command line
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}'
    run_tensorrun 4 validate p.yaml -o y=nowhere/y.npy
    [[ "$stderr" == *"output 'y': cannot create a file in nowhere: No such file or directory"* ]]
    run_tensorrun 0 validate p.yaml -o y=y.npy
    [ ! -e y.npy ]
    run_tensorrun 0 validate p.yaml -o y=-
}

@test "validate reports an output directory's error beside the pipeline's own" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2, z = nope]}
outputs: {y: gone/y.npy}'
    run_tensorrun 4 validate p.yaml
    [[ "$stderr" == *"'nope' is used before anything binds it"* ]]
    [[ "$stderr" == *"cannot create a file in gone"* ]]
}

@test "an output directory that is not writable is exit 4 in validate, as in run" {
    mkdir ro && chmod 555 ro
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a]}
outputs: {y: ro/y.npy}'
    if [ "$(id -u)" -ne 0 ]; then
        run_tensorrun 4 validate p.yaml
        [[ "$stderr" == *"cannot create a file in ro: Permission denied"* ]]
        run_tensorrun 4 p.yaml -n
    else
        # root writes anywhere: the shim refuses the directory instead
        [ -f "$INJECT" ] || skip "root writes anywhere, and the fault-injection shim is not built"
        run --separate-stderr env TR_FAIL_CREATE=1 LD_PRELOAD="$INJECT" \
            ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
            "$TENSORRUN" validate p.yaml
        [ "$status" -eq 4 ]
        [[ "$stderr" == *"output 'y': cannot create a file in ro: Permission denied"* ]]
    fi
    [ ! -e ro/y.npy ]
    [ -z "$(ls -A ro)" ]
}

@test "an output that is a directory is exit 4 in validate" {
    mkdir out.npy
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a]}
outputs: {y: out.npy}'
    run_tensorrun 4 validate p.yaml
    [[ "$stderr" == *"output 'y': is a directory"* ]]
    run_tensorrun 4 p.yaml -q
    [[ "$stderr" == *"output 'y': is a directory"* ]]
}

@test "validate takes --device, --force-device, --threads and --memory-limit" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 0 validate p.yaml --device cpu --threads 2 --memory-limit 64M --force-device cpu
    [[ "$output" == *'stage 1 "s" on cpu'* ]]
    run_tensorrun 2 validate p.yaml --device gpu
    [[ "$stderr" == *"--device: 'gpu' is not a device"* ]]
    run_tensorrun 2 validate p.yaml --threads 0
    [[ "$stderr" == *"--threads: '0' is not a number of threads"* ]]
    run_tensorrun 2 validate p.yaml --memory-limit lots
    [[ "$stderr" == *"--memory-limit: 'lots' is not a size"* ]]
    run_tensorrun 2 validate p.yaml --force-device auto
    [[ "$stderr" == *"--force-device: 'auto' is not a device (cpu, cuda or cuda:N)"* ]]
    # options that only a run uses are not validate's
    run_tensorrun 2 validate p.yaml --stats json
    [[ "$stderr" == *"validate: '--stats' is an option of run, not of validate"* ]]
    run_tensorrun 2 validate p.yaml -q
    [[ "$stderr" == *"validate: '-q' is an option of run, not of validate"* ]]
    run_tensorrun 0 validate --help
    [[ "$output" == *"--force-device DEV"* && "$output" == *"--memory-limit SIZE"* ]]
}

@test "validate judges --memory-limit by the exact peak: a chain streamed into its file fits" {
    "$PY" -c 'import numpy as np; np.save("big.npy", np.zeros((512, 1024), "<f4"))'
    pipeline 'inputs: {a: big.npy}
stages:
  - {name: s, do: [y = a * 2, z = y + 1]}
outputs: {z: z.npy}'
    run_tensorrun 0 validate p.yaml --memory-limit 1M
    [[ "$output" == *"pool on cpu: peak 0 B (0 bytes)"* ]]
}

@test "a stage with device: cuda runs on the CPU with --force-device cpu" {
    gpu=yes
    [[ "$("$TENSORRUN" --version)" != *"CUDA: not available"* ]] || gpu=no
    pipeline 'device: cuda
inputs: {a: a.npy}
stages:
  - name: gpu
    device: cuda
    do: ["y = cumsum(a, 0)"]
  - name: other
    do: ["z = prod(y + 1)"]
outputs: {z: z.npy}'
    # CUDA has no kernel for cumsum (the cuda column of ops.def), known with or
    # without a GPU: an error at the statement, from validate and the run
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:7:15: error: stage 'gpu' is to run on cuda:0, which has no kernel for cumsum"* ]]
    [[ "$stderr" == *"hint: run it on the CPU: device: cpu in the stage, or device: auto"* ]]
    # the pipeline's own device: cuda places the other stage there too
    [[ "$stderr" == *"stage 'other' is to run on cuda:0, which has no kernel for prod"* ]]
    if [ "$gpu" = no ]; then
        [[ "$stderr" == *"p.yaml:5:11: warning: stage 'gpu' is to run on CUDA"* ]]
        [[ "$stderr" == *"hint: --force-device cpu runs every stage on the CPU"* ]]
    fi
    run_tensorrun 3 p.yaml -q
    [[ "$stderr" == *"stage 'gpu' is to run on cuda:0, which has no kernel for cumsum"* ]]
    [ ! -e z.npy ]
    # --device sets the default only: the stage's own device stays
    run_tensorrun 3 validate p.yaml --device cpu
    [[ "$stderr" == *"stage 'gpu' is to run on cuda:0, which has no kernel for cumsum"* ]]
    [[ "$stderr" != *"stage 'other'"* ]]
    run_tensorrun 0 validate p.yaml --force-device cpu
    [[ "$output" == *'stage 1 "gpu" on cpu'* ]]
    [[ "$output" == *'stage 2 "other" on cpu'* ]]
    [[ "$stderr" != *"warning"* ]]
    run_tensorrun 0 p.yaml -q --force-device cpu
    "$PY" -c 'import numpy as np; assert np.load("z.npy") == np.prod(np.cumsum(np.arange(4)) + 1)'
    run_tensorrun 0 eval 'a * 3' -i a=a.npy --force-device cpu --print
    [[ "$output" == *"[0, 3, 6, 9]"* ]]
}

@test "--force-device cuda puts every stage on CUDA" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, device: cpu, do: [y = prod(a)]}'
    run_tensorrun 3 validate p.yaml --force-device cuda:1 -o y=y.npy
    [[ "$stderr" == *"stage 's' is to run on cuda:1, which has no kernel for prod"* ]]
}

@test "a --memory-limit below 1 MiB is a warning naming what it was read as" {
    run_tensorrun 0 eval 'a + 1' -i a=a.npy --memory-limit 512 -o y.npy
    [[ "$stderr" == *"warning: --memory-limit 512 is 512 bytes; did you mean 512M?"* ]]
    run_tensorrun 0 eval 'a + 1' -i a=a.npy --memory-limit 100K -o y.npy
    [[ "$stderr" == *"warning: --memory-limit 100K is 100.0 KiB; did you mean 100M?"* ]]
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 0 validate p.yaml --memory-limit 1
    [[ "$stderr" == *"warning: --memory-limit 1 is 1 byte; did you mean 1M?"* ]]
    run_tensorrun 0 p.yaml -q --memory-limit 2048
    [[ "$stderr" == *"warning: --memory-limit 2048 is 2.0 KiB; did you mean 2048M?"* ]]
    # 1 MiB and more: no warning
    run_tensorrun 0 p.yaml -q --memory-limit 1M
    [ -z "$stderr" ]
}

@test "a --memory-limit above the machine's memory is a warning" {
    run_tensorrun 0 eval 'a + 1' -i a=a.npy --memory-limit 1000T -o y.npy
    [[ "$stderr" == *"warning: --memory-limit 1000T is 1000.0 TiB, more than this machine's memory ("*"); it limits nothing"* ]]
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 0 validate p.yaml --memory-limit 4096T
    [[ "$stderr" == *"--memory-limit 4096T is 4.0 PiB, more than this machine's memory"* ]]
    run_tensorrun 0 p.yaml -q --memory-limit 9000000000000000
    [[ "$stderr" == *"more than this machine's memory"* ]]
}

@test "--json without --dry-run is a usage error that points to --stats json" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 2 p.yaml --json
    [[ "$stderr" == *"run: --json prints the program, which only --dry-run prints"*"--stats json"* ]]
    [ ! -e y.npy ]
    run_tensorrun 0 p.yaml --dry-run --json
    [[ "$output" == *'"stages"'* ]]
    run_tensorrun 2 eval 'x * 2' -i x=a.npy --json
}
