#!/usr/bin/env bats
# tensorrun convert: formats, dtypes, compression, pipes, keys, raw inputs,
# atomic outputs and exit codes; round trips checked by NumPy.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    REF="$TR_SRCDIR/tests/data/safetensors-reference"
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c 'import numpy as np; np.save("m.npy", np.arange(12, dtype="<f4").reshape(3, 4))'
}

npy_equal() { # npy_equal A B: same dtype, shape and bytes
    "$PY" -c 'import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes() else 1)' "$1" "$2"
}

@test "round trips of every dtype, order and .npy version through every format (NumPy checks)" {
    run "$PY" "$TR_SRCDIR/tests/python/roundtrip.py" "$TENSORRUN" "$BATS_TEST_TMPDIR/rt"
    echo "$output" | tail -n 20
    [ "$status" -eq 0 ]
}

@test "--dtype conversions agree with NumPy's astype for every dtype pair" {
    run "$PY" "$TR_SRCDIR/tests/python/conversions.py" "$TENSORRUN" "$BATS_TEST_TMPDIR/cv"
    echo "$output" | tail -n 20
    [ "$status" -eq 0 ]
}

@test "the output of .npy is byte-identical to np.save's" {
    run_tensorrun 0 convert m.npy copy.npy
    cmp m.npy copy.npy
}

@test "stdin and stdout: a pipe in, a pipe out" {
    cat m.npy | "$TENSORRUN" convert - - --dtype f64 | "$TENSORRUN" convert - out.npy
    "$PY" -c 'import numpy as np; a = np.load("out.npy"); assert a.dtype == np.float64 and (a == np.arange(12).reshape(3, 4)).all()'
}

@test "stdin that is a regular file is mapped, and .zst through a pipe decompresses" {
    run_tensorrun 0 convert m.npy m.npy.zst
    "$TENSORRUN" convert - a.npy < m.npy
    npy_equal m.npy a.npy
    cat m.npy.zst | "$TENSORRUN" convert - b.npy
    npy_equal m.npy b.npy
}

@test "zstd output is a standard zstd frame" {
    command -v zstd >/dev/null || skip "no zstd program"
    run_tensorrun 0 convert m.npy m.npy.zst --level 19
    zstd -dq m.npy.zst -o plain.npy
    cmp m.npy plain.npy
}

@test "a safetensors file keeps all its tensors and its metadata" {
    run_tensorrun 0 convert "$REF/overall.safetensors" all.safetensors
    run_tensorrun 0 inspect --json all.safetensors
    "$PY" -c 'import json, sys
d = json.loads(sys.argv[1])
assert d["metadata"] == {"test": "a"}, d
assert sorted(t["name"] for t in d["tensors"]) == sorted("BHIbdefhi"), d' "$output"
}

@test "every reference safetensors file converts to .npy with the right values" {
    for f in B H I b d e f h i; do
        run_tensorrun 0 convert "$REF/$f.safetensors" "$f.npy"
        "$PY" -c 'import numpy as np, sys
code = sys.argv[1]
want = np.array(range(-3, 3), dtype="<" + code)
got = np.load(sys.argv[1] + ".npy")
assert got.dtype == want.dtype and (got == want).all(), (got, want)' "$f"
    done
}

@test "--key picks one tensor; several tensors and no --key is exit 2 listing them" {
    run_tensorrun 0 convert "$REF/overall.safetensors" e.npy --key e
    "$PY" -c 'import numpy as np; a = np.load("e.npy"); assert a.dtype == np.float16 and list(a) == [-3, -2, -1, 0, 1, 2]'
    run_tensorrun 2 convert "$REF/overall.safetensors" x.npy
    [[ "$stderr" == *"choose one with --key"* ]]
    [[ "$stderr" == *"B, H, I"* ]]
    [ ! -e x.npy ]
}

@test "a --key naming no tensor is exit 4 listing the names" {
    run_tensorrun 4 convert "$REF/overall.safetensors" x.npy --key nope
    [[ "$stderr" == *"no tensor 'nope'"* ]]
    [[ "$stderr" == *"d, e, f"* ]]
}

@test "bf16 to .npy is refused with exit 2 and a hint; bf16 to .safetensors works" {
    run_tensorrun 2 convert m.npy x.npy --dtype bf16
    [[ "$stderr" == *"bf16"* ]]
    [[ "$stderr" == *"hint:"* ]]
    [ ! -e x.npy ]
    run_tensorrun 0 convert m.npy x.safetensors --dtype bf16
    run_tensorrun 0 convert x.safetensors back.npy --dtype f32
    npy_equal m.npy back.npy
}

@test "raw input: dtype, shape, offset and strides (a pitched region of interest)" {
    "$PY" -c 'import numpy as np; (np.arange(40, dtype="<i4").reshape(5, 8)).tofile("blob.bin")'
    run_tensorrun 0 convert blob.bin roi.npy --input-dtype i32 --shape 2,3 --offset 40 --strides 8,1
    "$PY" -c 'import numpy as np; a = np.load("roi.npy"); assert a.tolist() == [[10, 11, 12], [18, 19, 20]], a'
    run_tensorrun 0 convert blob.bin all.npy --input-dtype int32 --shape 5,8
    "$PY" -c 'import numpy as np; assert (np.load("all.npy") == np.arange(40).reshape(5, 8)).all()'
    run_tensorrun 0 convert blob.bin rev.npy --input-dtype i32 --shape 5 --offset 156 --strides -8
    "$PY" -c 'import numpy as np; assert np.load("rev.npy").tolist() == [39, 31, 23, 15, 7]'
}

@test "raw input without --input-dtype and --shape is exit 2" {
    "$PY" -c 'import numpy as np; np.zeros(4, "<f4").tofile("blob.bin")'
    run_tensorrun 2 convert blob.bin x.npy
    [[ "$stderr" == *"--input-dtype and --shape"* ]]
    run_tensorrun 2 convert blob.bin x.npy --input-dtype f32
    run_tensorrun 2 convert blob.bin x.npy --shape 4
}

@test "raw extents past the end are exit 4; bad shapes and strides are exit 2" {
    "$PY" -c 'import numpy as np; np.zeros(4, "<f4").tofile("blob.bin")'
    run_tensorrun 4 convert blob.bin x.npy --input-dtype f32 --shape 5
    [[ "$stderr" == *"truncated"* ]]
    run_tensorrun 4 convert blob.bin x.npy --input-dtype f32 --shape 2,2 --strides 3,1
    run_tensorrun 2 convert blob.bin x.npy --input-dtype f32 --shape -1
    run_tensorrun 2 convert blob.bin x.npy --input-dtype f32 --shape 4611686018427387904,4
    run_tensorrun 2 convert blob.bin x.npy --input-dtype f32 --shape 2,2 --strides 9223372036854775807,1
    run_tensorrun 2 convert blob.bin x.npy --input-dtype f32 --shape 4 --strides -1
    run_tensorrun 2 convert blob.bin x.npy --input-dtype f32 --shape 4 --strides 1,1
    [ ! -e x.npy ]
}

@test "a missing input is exit 4 naming the file" {
    run_tensorrun 4 convert nope.npy x.npy
    [[ "$stderr" == "tensorrun: nope.npy: error: cannot open: No such file or directory"* ]]
}

@test "an output directory that does not exist is exit 4, and nothing is left behind" {
    run_tensorrun 4 convert m.npy no/such/dir/x.npy
    [[ "$stderr" == *"no/such/dir"* ]]
}

@test "an unwritable output directory is exit 4" {
    local inject=${TR_INJECT:-$BATS_TEST_DIRNAME/../inject/inject.so}
    mkdir ro && chmod a-w ro
    if [ "$(id -u)" -ne 0 ]; then
        run_tensorrun 4 convert m.npy ro/x.npy
    else
        # root writes anywhere: the shim refuses the file instead
        [ -f "$inject" ] || skip "root writes anywhere, and the fault-injection shim is not built"
        run --separate-stderr env TR_FAIL_CREATE=1 LD_PRELOAD="$inject" \
            ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
            "$TENSORRUN" convert m.npy ro/x.npy
        [ "$status" -eq 4 ]
    fi
    [[ "$stderr" == *"Permission denied"* ]]
    [ ! -e ro/x.npy ]
}

@test "a failed conversion leaves an existing destination untouched and no temporary file" {
    echo "precious" > dest.npy
    "$PY" -c 'open("bad.npy", "wb").write(b"\x93NUMPY\x01\x00" + b"\x10\x00" + b"{garbage}       ")'
    run_tensorrun 4 convert bad.npy dest.npy
    [ "$(cat dest.npy)" = "precious" ]
    [ -z "$(ls -A | grep -F '.tmp-')" ]
}

@test "converting a file onto itself works (the mapping outlives the rename)" {
    cp m.npy self.npy
    run_tensorrun 0 convert self.npy self.npy --dtype f64
    "$PY" -c 'import numpy as np; a = np.load("self.npy"); assert a.dtype == np.float64 and (a == np.arange(12).reshape(3, 4)).all()'
}

@test "the output keeps an existing destination's mode" {
    cp m.npy keep.npy && chmod 640 keep.npy
    run_tensorrun 0 convert m.npy keep.npy --dtype f16
    [ "$(stat -c %a keep.npy)" = 640 ]
}

@test "--fsync writes the same file" {
    run_tensorrun 0 convert m.npy synced.npy --fsync
    cmp m.npy synced.npy
}

@test "usage errors are exit 2" {
    run_tensorrun 2 convert m.npy
    run_tensorrun 2 convert m.npy x.npy extra
    run_tensorrun 2 convert m.npy x.npy --dtype f33
    run_tensorrun 2 convert m.npy x.npy --format tiff
    run_tensorrun 2 convert m.npy x.unknown
    run_tensorrun 2 convert m.npy x.npy --level 99
    run_tensorrun 2 convert m.npy x.npy --bogus
    run_tensorrun 2 convert m.npy x.npy --dtype
}

@test "--format names the output format for an unknown extension or stdout" {
    run_tensorrun 0 convert m.npy out.data --format safetensors
    run_tensorrun 0 inspect --json out.data
    [[ "$output" == *'"format":"safetensors"'* ]]
    "$TENSORRUN" convert m.npy - --format raw > raw.bin
    [ "$(stat -c %s raw.bin)" -eq 48 ]
}

@test "SIGINT during a conversion is exit 130 and replaces nothing" {
    # random values: zstd -19 takes minutes over them (zeros it compressed
    # within the half second the test once waited, and exited 0)
    "$PY" -c 'import numpy as np; np.save("big.npy", np.random.default_rng(1).random((16, 1024, 1024), "<f4"))'
    echo "precious" > dest.npy.zst
    "$TENSORRUN" convert big.npy dest.npy.zst --level 19 &
    pid=$!
    # the signal while it converts: once its temporary file exists
    for _ in $(seq 100); do
        ls -A | grep -qF '.tmp-' && break
        sleep 0.05
    done
    kill -INT "$pid"
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -eq 130 ]
    [ "$(cat dest.npy.zst)" = "precious" ]
    [ -z "$(ls -A | grep -F '.tmp-')" ]
}

@test "--input-dtype and --shape win over bytes that only look like another format" {
    # 24 as the first i64 reads like a safetensors header length followed by '{'
    "$PY" -c 'import numpy as np; np.array([24, 123, 5, 6, 7, 8], "<i8").tofile("ints.bin")'
    run_tensorrun 0 convert ints.bin o.npy --input-dtype i64 --shape 6
    "$PY" -c 'import numpy as np; assert np.load("o.npy").tolist() == [24, 123, 5, 6, 7, 8]'
    run --separate-stderr sh -c "cat ints.bin | '$TENSORRUN' convert - p.npy --input-dtype i64 --shape 6"
    [ "$status" -eq 0 ]
    "$PY" -c 'import numpy as np; assert np.load("p.npy").tolist() == [24, 123, 5, 6, 7, 8]'
    # a real .npy under another name is not raw: its header is not data
    cp m.npy looks-like.bin
    run_tensorrun 2 convert looks-like.bin b.npy --input-dtype u8 --shape 176
    [[ "$stderr" == *"looks-like.bin is a .npy file"* ]]
}

@test "an empty raw file with a zero-size shape converts" {
    : > empty.bin
    run_tensorrun 0 convert empty.bin e.npy --input-dtype f32 --shape 0,3
    "$PY" -c 'import numpy as np; assert np.load("e.npy").shape == (0, 3)'
}

@test "standard input is read from where its reader left it" {
    (printf 'GARBAGE!'; cat m.npy) > pre.bin
    ( head -c 8 > /dev/null; "$TENSORRUN" convert - after.npy ) < pre.bin
    npy_equal m.npy after.npy
}

@test "a destination name as long as the file system allows" {
    name=$(printf 'x%.0s' $(seq 246)).npy
    run_tensorrun 0 convert m.npy "$name"
    npy_equal m.npy "$name"
}

@test "zstd streams from pzstd (skippable frames first) are read" {
    command -v pzstd >/dev/null || skip "no pzstd program"
    pzstd -q m.npy -o pz.npy.zst
    run_tensorrun 0 convert pz.npy.zst back.npy
    npy_equal m.npy back.npy
}

@test "--format npy.zst compresses standard output" {
    "$TENSORRUN" convert m.npy - --format npy.zst > out.zst
    run_tensorrun 0 inspect --json out.zst
    [[ "$output" == *'"compression":"zstd"'* ]]
    run_tensorrun 0 convert out.zst back.npy
    npy_equal m.npy back.npy
}

@test "a closed pipe on standard output ends convert quietly, as SIGPIPE would (141)" {
    "$PY" -c 'import numpy as np; np.save("big.npy", np.zeros(4 << 20, "<f4"))'
    set +o pipefail
    run --separate-stderr bash -c '"$0" convert big.npy - | head -c 10 > /dev/null; echo "${PIPESTATUS[0]}"' "$TENSORRUN"
    [ "${lines[-1]}" = 141 ]
    [ -z "$stderr" ]
}

@test "converting a huge integer to bf16 rounds once" {
    # 2^60 + 2^52 + 1 is just above the midpoint of two bf16 values; through f64
    # it would land on the midpoint and round to even, 2^60
    "$PY" -c 'import numpy as np; np.array([2**60 + 2**52 + 1, -(2**60 + 2**52 + 1)], "<i8").tofile("big.bin")'
    run_tensorrun 0 convert big.bin b.safetensors --input-dtype i64 --shape 2 --dtype bf16
    run_tensorrun 0 convert b.safetensors b.npy --dtype f64
    "$PY" -c 'import numpy as np; assert np.load("b.npy").tolist() == [2**60 + 2**53, -(2**60 + 2**53)], np.load("b.npy")'
}

@test "a named pipe or device as the destination is written into, never replaced" {
    mkfifo fifo
    ln -s fifo link
    for dest in fifo link; do
        timeout 10 cat fifo > "got-$dest.npy" &
        reader=$!
        run_tensorrun 0 convert m.npy "$dest" --format npy
        wait $reader
        cmp "got-$dest.npy" m.npy
    done
    # still a pipe, and the link still a link to it
    [ -p fifo ] && [ -L link ]
    run_tensorrun 0 convert m.npy /dev/null --format npy
    [ -c /dev/null ]
}
