#!/usr/bin/env bats
# What an input is: safetensors found by content, readable but unsupported
# .npy files, the byte order in inspect --json, raw inputs from endless
# streams, and raw layout options given for a file with a header.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
}

json_check() {
    "$PY" -c 'import json, sys
d = json.loads(sys.argv[1])
if not eval(sys.argv[2]):
    sys.exit("failed: " + sys.argv[2] + "\n" + json.dumps(d, indent=1))' "$1" "$2"
}

# a safetensors file whose JSON header starts with blanks, as the reference
# reader accepts it
make_blank_led() {
    "$PY" - "$1" <<'PYEOF'
import json, struct, sys
import numpy as np
h = b" \t\r\n  " + json.dumps({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + np.array([1.5, -2, 3], "<f4").tobytes())
PYEOF
}

@test "a safetensors header that starts with blanks is found by content, under any name" {
    make_blank_led blank.bin
    run_tensorrun 0 inspect --json blank.bin
    json_check "$output" 'd["format"] == "safetensors" and d["tensors"][0]["name"] == "w"'
    run_tensorrun 0 inspect --json - < blank.bin
    json_check "$output" 'd["format"] == "safetensors" and d["tensors"][0]["shape"] == [3]'
    cat blank.bin | timeout 20 "$TENSORRUN" convert - out.npy
    "$PY" -c 'import numpy as np; assert np.load("out.npy").tolist() == [1.5, -2, 3]'
}

@test "a header of blanks only is still not safetensors" {
    "$PY" -c 'import struct; open("b.dat", "wb").write(struct.pack("<Q", 8) + b" " * 8)'
    run_tensorrun 4 inspect b.dat
    assert_equal "$stderr" "tensorrun: b.dat: error: not a .npy or .safetensors file (a raw file needs its dtype and shape)"
}

@test "a structured .npy is listed as unsupported, not malformed" {
    "$PY" -c 'import numpy as np; np.save("s.npy", np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8", (2,))]))'
    run_tensorrun 0 inspect --json s.npy
    json_check "$output" 'd["tensors"][0]["dtype"] == "|V20" and d["tensors"][0]["supported"] is False'
    json_check "$output" 'd["tensors"][0]["nbytes"] == 60 and d["tensors"][0]["shape"] == [3]'
    run_tensorrun 0 inspect s.npy
    assert_output --partial "(unsupported dtype)"
    run_tensorrun 3 eval 'x + 1' -i x=s.npy
    [[ "${stderr_lines[0]}" == *"has dtype |V20, which tensorrun cannot compute with"* ]]
    run_tensorrun 4 convert s.npy o.npy
    assert_equal "$stderr" "tensorrun: s.npy: error: the tensor has dtype |V20, which tensorrun cannot compute with"
    [ ! -e o.npy ]
}

@test "a .npy of more than 8 dimensions is listed as unsupported, not malformed" {
    "$PY" -c 'import numpy as np; np.save("w.npy", np.zeros((1, 2, 1, 1, 1, 1, 1, 1, 3, 1), "<f4"))'
    run_tensorrun 0 inspect --json w.npy
    json_check "$output" 'd["tensors"][0]["shape"] == [1, 2, 1, 1, 1, 1, 1, 1, 3, 1] and d["tensors"][0]["supported"] is False'
    json_check "$output" 'd["tensors"][0]["dtype"] == "<f4" and d["tensors"][0]["nbytes"] == 24'
    json_check "$output" 'd["tensors"][0]["strides"] == [6, 3, 3, 3, 3, 3, 3, 3, 1, 1]'
    run_tensorrun 0 inspect w.npy
    assert_output --partial "(unsupported: too many dimensions)"
    run_tensorrun 3 eval 'x + 1' -i x=w.npy
    run_tensorrun 4 convert w.npy o.npy
    assert_equal "$stderr" "tensorrun: w.npy: error: the tensor has 10 dimensions; tensorrun computes with at most 8"
}

@test "inspect --json gives every tensor's byte order" {
    "$PY" -c 'import numpy as np; np.save("be.npy", np.arange(3, dtype=">i4")); np.save("le.npy", np.arange(3, dtype="<i4")); np.save("u8.npy", np.arange(3, dtype="u1")); np.save("c.npy", np.zeros(2, ">c8"))'
    run_tensorrun 0 inspect --json be.npy
    json_check "$output" 'd["tensors"][0]["byte_order"] == "big" and d["tensors"][0]["dtype"] == "i32"'
    run_tensorrun 0 inspect --json le.npy
    json_check "$output" 'd["tensors"][0]["byte_order"] == "little"'
    run_tensorrun 0 inspect --json u8.npy
    json_check "$output" 'd["tensors"][0]["byte_order"] == "little"'
    run_tensorrun 0 inspect --json c.npy
    json_check "$output" 'd["tensors"][0]["byte_order"] == "big" and d["tensors"][0]["supported"] is False'
    run_tensorrun 0 inspect c.npy
    assert_output --partial "(big-endian)"
}

@test "a raw input from an endless stream stops once the shape is read" {
    run_tensorrun 0 convert /dev/zero z.npy --input-dtype f32 --shape 4
    "$PY" -c 'import numpy as np; a = np.load("z.npy"); assert a.dtype == np.float32 and a.tolist() == [0, 0, 0, 0]'
    run timeout 20 sh -c "yes | '$TENSORRUN' convert - y.npy --input-dtype u8 --shape 2,2"
    assert_success
    "$PY" -c 'import numpy as np; assert np.load("y.npy").tolist() == [[121, 10], [121, 10]]'
    run timeout 20 sh -c "yes | '$TENSORRUN' convert - y.npy --input-dtype u8 --shape 2 --offset 1"
    assert_success
    "$PY" -c 'import numpy as np; assert np.load("y.npy").tolist() == [10, 121]'
}

@test "a raw stream shorter than its shape is still truncated" {
    run --separate-stderr sh -c "printf ab | '$TENSORRUN' convert - s.npy --input-dtype u8 --shape 4"
    [ "$status" -eq 4 ]
    assert_equal "$stderr" "tensorrun: -: error: truncated: the layout reaches byte 4, file has 2 bytes"
    [ ! -e s.npy ]
}

@test "convert: raw layout options given for a .npy or safetensors input are exit 2" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(3, dtype="<f4"))'
    run_tensorrun 2 convert a.npy o.npy --input-dtype f32 --shape 3
    assert_equal "${stderr_lines[0]}" "tensorrun: error: convert: a.npy is a .npy file, which describes itself: --input-dtype, --shape, --offset and --strides describe raw input only"
    for opt in "--input-dtype f32" "--shape 3" "--offset 8" "--strides 1"; do
        run_tensorrun 2 convert a.npy o.npy $opt
        [[ "${stderr_lines[0]}" == *"describe raw input only"* ]]
    done
    cp a.npy a.dat
    run_tensorrun 2 convert - o.npy --input-dtype u8 --shape 4 < a.dat
    [[ "${stderr_lines[0]}" == *"convert: - is a .npy file"* ]]
    cat a.npy | timeout 20 "$TENSORRUN" convert - o.npy --input-dtype u8 --shape 4 2>err || st=$?
    [ "${st:-0}" -eq 2 ]
    run_tensorrun 2 convert "$TR_SRCDIR/tests/data/safetensors-reference/f.safetensors" o.npy --input-dtype f32 --shape 6
    [[ "${stderr_lines[0]}" == *"is a .safetensors file"* ]]
    [ ! -e o.npy ]
}

@test "convert: raw bytes that start like a zip archive are raw when described as raw" {
    "$PY" -c 'open("pk.bin", "wb").write(b"PK\x03\x04" + bytes(range(4, 16)))'
    run_tensorrun 0 convert pk.bin a.npy --input-dtype u8 --shape 16
    "$PY" -c 'import numpy as np; assert np.load("a.npy").tolist()[4:] == list(range(4, 16))'
    run --separate-stderr sh -c "cat pk.bin | '$TENSORRUN' convert - b.npy --input-dtype u8 --shape 4,4"
    [ "$status" -eq 0 ]
    "$PY" -c 'import numpy as np; assert np.load("b.npy")[0].tolist() == [80, 75, 3, 4]'
}

@test "convert: a raw file may have any name, and still needs its whole layout" {
    "$PY" -c 'import numpy as np; np.arange(4, dtype="<i2").tofile("r.npy")'
    run_tensorrun 0 convert r.npy o.npy --input-dtype i16 --shape 4
    "$PY" -c 'import numpy as np; assert np.load("o.npy").tolist() == [0, 1, 2, 3]'
    run_tensorrun 2 convert r.npy o2.npy --offset 2
    assert_equal "${stderr_lines[0]}" "tensorrun: error: convert: a raw input needs both --input-dtype and --shape"
}
