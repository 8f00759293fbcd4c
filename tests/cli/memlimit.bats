#!/usr/bin/env bats
# --memory-limit covers the inputs that are read into pool memory rather
# than mapped (zstd, pipes, big-endian data): an input whose header says it
# cannot fit fails at once with exit 5, naming the input and its size,
# before its data is read; --dry-run predicts the same from the header.

bats_require_minimum_version 1.5.0

MIB256=268435456

setup() {
    load helper
    cd "$BATS_TEST_TMPDIR"
    # a true header for 256 MiB of f32 zeros; zstd makes the file tiny
    /usr/bin/python3 -c '
import sys, numpy as np
np.lib.format.write_array_header_1_0(sys.stdout.buffer,
    {"descr": "<f4", "fortran_order": False, "shape": (1 << 26,)})' > header
    printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: big.npy.zst' 'stages:' '  - name: s' \
        '    do:' '      - y = sum(x)' 'outputs:' '  y: out.npy' > p.yaml
    echo precious > out.npy
}

# big_zst [ZSTD OPTIONS]: big.npy.zst, 256 MiB of zeros once decompressed
big_zst() {
    { cat header; head -c "$MIB256" /dev/zero; } | zstd -q -f "$@" -o big.npy.zst
}

# peak_of CMD...: runs CMD, and sets
# status, stderr and peak: the child's peak resident memory in KiB
peak_of() {
    local out
    out=$(/usr/bin/python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE)
sys.stderr.buffer.write(r.stderr)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@" 2>stderr.txt)
    status=${out% *}
    peak=${out#* }
    stderr=$(cat stderr.txt)
}

@test "a .zst input too big for --memory-limit is exit 5 at once, naming it and its size" {
    command -v zstd >/dev/null || skip "no zstd program"
    big_zst --stream-size="$(( MIB256 + $(stat -c %s header) ))"
    [ "$(stat -c %s big.npy.zst)" -lt 1048576 ]
    peak_of timeout 60 "$TENSORRUN" run p.yaml --memory-limit 64M -q
    [ "$status" -eq 5 ] || { echo "status $status: $stderr" >&2; false; }
    [[ "$stderr" == *"input 'x'"*"big.npy.zst"*"256.0 MiB"*"memory limit of 64.0 MiB"* ]] ||
        { echo "$stderr" >&2; false; }
    # nothing like 256 MiB was ever resident (128 MiB leaves room for
    # the sanitizer build's own)
    [ "$peak" -lt 131072 ] || { echo "peak $peak KiB" >&2; false; }
    [ "$(cat out.npy)" = precious ]
}

@test "a .zst frame that does not declare its size is refused at once too" {
    command -v zstd >/dev/null || skip "no zstd program"
    big_zst # from a pipe: zstd records no content size
    peak_of timeout 60 "$TENSORRUN" eval 'sum(x)' -i x=big.npy.zst --memory-limit 64M
    [ "$status" -eq 5 ] || { echo "status $status: $stderr" >&2; false; }
    [[ "$stderr" == *"big.npy.zst"*"256.0 MiB"* ]]
    [ "$peak" -lt 131072 ] || { echo "peak $peak KiB" >&2; false; }
}

@test "a pipe too big for --memory-limit is exit 5 at once, without reading it" {
    # the writer would go on for 256 MiB; tensorrun stops after the header
    peak_of timeout 60 sh -c '{ cat header; head -c '"$MIB256"' /dev/zero; } |
        "$1" eval "sum(x)" -i x=- --memory-limit 64M' sh "$TENSORRUN"
    [ "$status" -eq 5 ] || { echo "status $status: $stderr" >&2; false; }
    [[ "$stderr" == *"input 'x'"*"256.0 MiB"*"memory limit of 64.0 MiB"* ]] ||
        { echo "$stderr" >&2; false; }
    [ "$peak" -lt 131072 ] || { echo "peak $peak KiB" >&2; false; }
}

@test "an input under the limit still runs, and counts against it" {
    /usr/bin/python3 -c 'import numpy as np; np.save("small.npy", np.ones(1 << 20, dtype="<f4"))'
    zstd -q -f small.npy -o small.npy.zst
    run_tensorrun 0 eval 'sum(x)' -i x=small.npy.zst --memory-limit 8M --print
    [ "$output" = "1048576." ]
    # the input's block (4 MiB and its header, 6 MiB after rounding) and
    # 4 MiB more for the cumulative sum do not fit in 8M; the input alone did
    # (into a .safetensors file, which it cannot be computed straight into)
    run_tensorrun 0 eval 'z = cumsum(x, 0)' -i x=small.npy.zst --memory-limit 12M -o out.safetensors
    echo precious > out.safetensors
    run_tensorrun 5 eval 'z = cumsum(x, 0)' -i x=small.npy.zst --memory-limit 8M -o out.safetensors
    [ "$(cat out.safetensors)" = precious ]
}

@test "run --dry-run --memory-limit predicts a .zst input that cannot fit (exit 5)" {
    command -v zstd >/dev/null || skip "no zstd program"
    big_zst --stream-size="$(( MIB256 + $(stat -c %s header) ))"
    run_tensorrun 5 run p.yaml --dry-run --memory-limit 64M
    [[ "$stderr" == *"p.yaml:3:"*"input 'x': big.npy.zst: out of memory: its data takes 256.0 MiB"*"decompressed"*"memory limit of 64.0 MiB"* ]] ||
        { echo "$stderr" >&2; false; }
    [ -z "$output" ]
    run_tensorrun 0 run p.yaml --dry-run --memory-limit 512M
    run_tensorrun 0 run p.yaml --dry-run
}

@test "--dry-run --memory-limit predicts a pipe and a big-endian copy from their headers" {
    run_tensorrun 5 eval 'sum(x)' -i x=- --dry-run --memory-limit 64M < <(cat header; head -c "$MIB256" /dev/zero)
    [[ "$stderr" == *"input 'x': -: out of memory: its data takes 256.0 MiB"*"read from a pipe"* ]] ||
        { echo "$stderr" >&2; false; }
    /usr/bin/python3 -c 'import numpy as np; np.save("be.npy", np.ones((1 << 21,), dtype=">f4"))'
    run_tensorrun 5 eval 'sum(x)' -i x=be.npy --dry-run --memory-limit 4M
    [[ "$stderr" == *"be.npy: out of memory: its data takes 8.0 MiB"*"copied"* ]] || { echo "$stderr" >&2; false; }
    run_tensorrun 0 eval 'sum(x)' -i x=be.npy --dry-run --memory-limit 16M
}

@test "a second input that does not fit beside the first is refused at once too" {
    command -v zstd >/dev/null || skip "no zstd program"
    /usr/bin/python3 -c '
import sys, numpy as np
np.lib.format.write_array_header_1_0(sys.stdout.buffer,
    {"descr": "<f4", "fortran_order": False, "shape": (10 << 20,)})' > header40
    # from a pipe: the frames declare no size, so only the limit can refuse
    { cat header40; head -c 41943040 /dev/zero; } | zstd -q -f -o a.npy.zst
    cp a.npy.zst b.npy.zst
    run_tensorrun 0 eval 'sum(x)' -i x=a.npy.zst --memory-limit 64M
    run_tensorrun 5 eval 'sum(x) + sum(y)' -i x=a.npy.zst -i y=b.npy.zst --memory-limit 64M
    [[ "$stderr" == *"input 'y'"*"b.npy.zst"*"its data takes 40.0 MiB"*"memory limit of 64.0 MiB"* ]] ||
        { echo "$stderr" >&2; false; }
}
