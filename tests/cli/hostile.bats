#!/usr/bin/env bats
# Hostile input: every malformed file is exit 4 with a message that names
# the file and says what is wrong; never a crash, a hang, a huge
# allocation or a partial output.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
}

# corpus SCRIPT [ARGS...]: makes the corpus, then checks inspect and
# convert of each file against the message its expected.txt line names.
corpus() {
    mkdir corpus
    "$PY" "$TR_SRCDIR/tests/data/$1" corpus "${@:2}"
    [ -s corpus/expected.txt ]
    n=0
    while IFS=$'\t' read -r file message; do
        n=$((n + 1))
        TR_TIMEOUT=20 run_tensorrun 4 inspect "corpus/$file"
        [[ "$stderr" == "tensorrun: corpus/$file: error: "* ]] ||
            { echo "$file: unexpected message: $stderr"; return 1; }
        [[ "$stderr" == *"$message"* ]] ||
            { echo "$file: expected '$message' in: $stderr"; return 1; }
        TR_TIMEOUT=20 run_tensorrun 4 convert "corpus/$file" out.npy
        [ ! -e out.npy ] || { echo "$file: convert left an output"; return 1; }
    done < corpus/expected.txt
    echo "$n malformed files"
    [ "$n" -ge 10 ]
    [ -z "$(ls -A | grep -F '.tmp-')" ]
}

@test "the malformed .npy corpus: every file is exit 4 with its message" {
    corpus make-bad-npy.py
}

@test "the malformed .safetensors corpus: every file is exit 4 with its message" {
    corpus make-bad-safetensors.py
}

@test "the malformed .npz corpus: every file is exit 4 with its message" {
    corpus make-npz.py --bad
}

@test "corrupt and truncated zstd frames are exit 4" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(100000, dtype="<f4"))'
    run_tensorrun 0 convert a.npy good.npy.zst
    size=$(stat -c %s good.npy.zst)
    head -c $((size / 2)) good.npy.zst > cut.npy.zst
    # inspect reads the header only: a frame cut after it is not its concern
    run_tensorrun 0 inspect cut.npy.zst
    run_tensorrun 4 convert cut.npy.zst x.npy
    [[ "$stderr" == *"zstd"* ]]
    "$PY" -c '
b = bytearray(open("good.npy.zst", "rb").read())
for i in range(40, len(b) - 8, 97):
    b[i] ^= 0x5a
open("corrupt.npy.zst", "wb").write(bytes(b))'
    run_tensorrun 4 convert corrupt.npy.zst x.npy
    [[ "$stderr" == *"zstd"* ]]
    cat cut.npy.zst | TR_TIMEOUT=20 run_tensorrun 4 convert - x.npy
    printf '\x28\xb5\x2f\xfd\x00\x00\x00' > junk.npy.zst
    run_tensorrun 4 convert junk.npy.zst x.npy
    [ ! -e x.npy ]
}

@test "a .zst whose header claims far more data than the frame holds is exit 4, at once" {
    # the inner .npy says 2^40 f32 values; the stream holds a header and nothing else
    "$PY" - <<'EOF'
import numpy as np, io
b = io.BytesIO()
np.lib.format.write_array_header_1_0(b, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)})
open("liar.npy", "wb").write(b.getvalue())
EOF
    command -v zstd >/dev/null || skip "no zstd program to write a frame without a size"
    zstd -q --no-content-size -c < liar.npy > liar.npy.zst
    TR_TIMEOUT=20 run_tensorrun 4 convert liar.npy.zst x.npy
    [[ "$stderr" == *"truncated"* ]]
    cat liar.npy.zst | TR_TIMEOUT=20 run_tensorrun 4 convert - x.npy
    [[ "$stderr" == *"truncated"* ]]
    zstd -q -c < liar.npy > sized.npy.zst
    TR_TIMEOUT=20 run_tensorrun 4 convert sized.npy.zst x.npy
    [[ "$stderr" == *"truncated"* ]]
}

@test "a truncated .npy through a pipe is exit 4 with the file's real length" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(1000, dtype="<f8"))'
    head -c 5000 a.npy > short.npy
    run_tensorrun 4 convert short.npy x.npy
    [[ "$stderr" == *"truncated: header says 1000 float64 values (8000 bytes) after offset 128, file has 5000 bytes"* ]]
    cat short.npy | run_tensorrun 4 convert - x.npy
    [[ "$stderr" == *"file has 5000 bytes"* ]]
}

@test "an empty file and an empty pipe are exit 4" {
    : > empty.npy
    run_tensorrun 4 inspect empty.npy
    run_tensorrun 4 convert - x.npy < /dev/null
}

@test "a file of unknown format is exit 4, and says how to read raw data" {
    echo "hello" > data.txt
    run_tensorrun 4 inspect data.txt
    [[ "$stderr" == *"raw"* ]]
}
