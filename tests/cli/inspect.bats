#!/usr/bin/env bats
# tensorrun inspect: the JSON and text forms, every format, exit codes.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    REF="$TR_SRCDIR/tests/data/safetensors-reference"
    cd "$BATS_TEST_TMPDIR"
}

# json_check JSON PYTHON-EXPR: the expression, with d bound to the object,
# must hold
json_check() {
    "$PY" -c 'import json, sys
d = json.loads(sys.argv[1])
if not eval(sys.argv[2]):
    sys.exit("failed: " + sys.argv[2] + "\n" + json.dumps(d, indent=1))' "$1" "$2"
}

@test "inspect --json of a .npy, field by field" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.zeros((3, 4), "<f4"))'
    run_tensorrun 0 inspect --json a.npy
    [ "${#lines[@]}" -eq 1 ]
    json_check "$output" 'list(d) == ["path", "format", "compression", "size_bytes", "metadata", "tensors"]'
    json_check "$output" 'd["path"] == "a.npy" and d["format"] == "npy" and d["compression"] is None'
    json_check "$output" 'd["size_bytes"] == 176 and d["metadata"] is None and len(d["tensors"]) == 1'
    json_check "$output" 'd["tensors"][0] == {"name": None, "dtype": "f32", "shape": [3, 4], "strides": [4, 1], "offset_bytes": 128, "nbytes": 48, "byte_order": "little"}'
}

@test "inspect --json of a Fortran-ordered big-endian .npy shows its strides" {
    "$PY" -c 'import numpy as np; np.save("f.npy", np.asfortranarray(np.zeros((3, 4), ">i8")))'
    run_tensorrun 0 inspect --json f.npy
    json_check "$output" 'd["tensors"][0]["dtype"] == "i64" and d["tensors"][0]["strides"] == [1, 3]'
}

@test "inspect --json of every reference safetensors file" {
    for f in B H I b d e f h i; do
        run_tensorrun 0 inspect --json "$REF/$f.safetensors"
        json_check "$output" "d['format'] == 'safetensors' and d['metadata'] == {'test': 'a'}"
        json_check "$output" "[t['name'] for t in d['tensors']] == ['$f'] and d['tensors'][0]['shape'] == [6]"
    done
    run_tensorrun 0 inspect --json "$REF/overall.safetensors"
    json_check "$output" 'd["size_bytes"] == 702 and len(d["tensors"]) == 9'
    json_check "$output" '[t["offset_bytes"] for t in d["tensors"]] == [534, 540, 552, 576, 582, 630, 642, 666, 678]'
    json_check "$output" '[t["dtype"] for t in d["tensors"]] == ["u8", "u16", "u32", "i8", "f64", "f16", "f32", "i16", "i32"]'
    json_check "$output" 'all(t["nbytes"] == 6 * {"u8": 1, "i8": 1, "u16": 2, "i16": 2, "f16": 2, "u32": 4, "i32": 4, "f32": 4, "f64": 8}[t["dtype"]] for t in d["tensors"])'
}

@test "inspect lists a tensor of an unsupported safetensors dtype and says so" {
    "$PY" - <<'EOF'
import json, struct
h = json.dumps({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]},
                "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}},
               separators=(",", ":")).encode()
open("fp8.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(6))
EOF
    run_tensorrun 0 inspect --json fp8.safetensors
    json_check "$output" 'd["tensors"][0]["dtype"] == "F8_E4M3" and d["tensors"][0]["supported"] is False'
    json_check "$output" '"supported" not in d["tensors"][1]'
    run_tensorrun 4 convert fp8.safetensors x.npy --key a
    [[ "$stderr" == *"F8_E4M3"* ]]
    run_tensorrun 0 convert fp8.safetensors b.npy --key b
}

@test "inspect of a .zst reports the compressed size and the inner layout" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.zeros((3, 4), "<f4"))'
    run_tensorrun 0 convert a.npy a.npy.zst
    run_tensorrun 0 inspect --json a.npy.zst
    json_check "$output" 'd["compression"] == "zstd" and d["format"] == "npy"'
    json_check "$output" "d['size_bytes'] == $(stat -c %s a.npy.zst) and d['tensors'][0]['offset_bytes'] == 128"
}

@test "inspect of standard input" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.zeros(5, "<i2"))'
    run --separate-stderr bash -c '"$0" inspect --json - < a.npy' "$TENSORRUN"
    [ "$status" -eq 0 ]
    json_check "$output" 'd["path"] == "-" and d["tensors"][0]["shape"] == [5]'
    run --separate-stderr bash -c 'cat a.npy | "$0" inspect --json -' "$TENSORRUN"
    [ "$status" -eq 0 ]
    json_check "$output" 'd["tensors"][0]["dtype"] == "i16" and d["size_bytes"] == 138'
    head -c 130 a.npy > short.npy
    run --separate-stderr bash -c 'cat short.npy | "$0" inspect -' "$TENSORRUN"
    [ "$status" -eq 4 ]
    [[ "$stderr" == *"truncated"* ]]
}

@test "inspect reads only the header of a huge file" {
    # a 64 GiB .npy that is one header and a hole: reading its data would take minutes
    "$PY" - <<'EOF'
import numpy as np
with open("huge.npy", "wb") as f:
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (16 * 2**30,)})
    f.truncate(128 + 64 * 2**30)
EOF
    TR_TIMEOUT=5 run_tensorrun 0 inspect --json huge.npy
    json_check "$output" 'd["tensors"][0]["nbytes"] == 64 * 2**30'
}

@test "the text form names the format, every tensor and the metadata" {
    run_tensorrun 0 inspect "$REF/overall.safetensors"
    [[ "${lines[0]}" == *"overall.safetensors: safetensors, 702 B, 9 tensors" ]]
    [[ "$output" == *"metadata  test = a"* ]]
    [[ "$output" == *" f64 "*"[6]"* ]]
}

@test "several files: one JSON line each; a bad one is exit 4 after the others" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.zeros(2, "<f4")); open("bad.npy", "wb").write(b"not a tensor file")'
    run_tensorrun 4 inspect --json a.npy bad.npy "$REF/f.safetensors"
    [ "${#lines[@]}" -eq 2 ]
    [[ "$stderr" == "tensorrun: bad.npy: error: "* ]]
}

@test "inspect of a missing file is exit 4; no file is exit 2" {
    run_tensorrun 4 inspect nope.npy
    [[ "$stderr" == *"nope.npy: error: cannot open: No such file or directory"* ]]
    run_tensorrun 2 inspect
    run_tensorrun 2 inspect --bogus a.npy
}

@test "inspect of a directory is exit 4" {
    mkdir d
    run_tensorrun 4 inspect d
    [[ "$stderr" == *"is a directory"* ]]
}

@test "a path that is not UTF-8 still has its \"path\" in JSON" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.zeros(2))'
    cp a.npy $'\xff.npy'
    run_tensorrun 0 inspect --json $'\xff.npy'
    json_check "$output" 'd["path"] == "\ufffd.npy"'
}

@test "a write error on standard output is exit 4" {
    [ -w /dev/full ] || skip "no /dev/full"
    "$PY" -c 'import numpy as np; np.save("a.npy", np.zeros(2))'
    run bash -c '"$0" inspect a.npy > /dev/full' "$TENSORRUN"
    [ "$status" -eq 4 ]
}

@test "inspect of raw bytes is exit 4: a raw file has no header to describe" {
    head -c 100 /dev/urandom > rnd.bin
    run_tensorrun 4 inspect rnd.bin
    [[ "$stderr" == *"no header"* ]]
}

@test "control characters in a file's names do not reach the terminal" {
    "$PY" - <<'PY'
import json, struct
h = json.dumps({"__metadata__": {"k": "\u001b[31mred"}, "a\u001bb": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, separators=(",", ":")).encode()
open("esc.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0")
PY
    run_tensorrun 0 inspect esc.safetensors
    [[ "$output" != *$'\033'* ]]
    [[ "$output" == *'\x1b[31mred'* ]]
}
