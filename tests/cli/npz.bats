#!/usr/bin/env bats
# .npz archives (np.savez, np.savez_compressed, zip64) read as collections
# of named tensors: inspect, convert, pipeline inputs with key, pipes,
# memory limits, and .npz as an output refused.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" "$TR_SRCDIR/tests/data/make-npz.py" .
}

json_check() {
    "$PY" -c 'import json, sys
d = json.loads(sys.argv[1])
if not eval(sys.argv[2]):
    sys.exit("failed: " + sys.argv[2] + "\n" + json.dumps(d, indent=1))' "$1" "$2"
}

# same_as_npz SAFETENSORS NPZ: the safetensors file holds exactly the
# archive's arrays (names, dtypes in little-endian order, shapes, values)
same_as_npz() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
import numpy as np
st, npz = sys.argv[1], np.load(sys.argv[2])
raw = open(st, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__", None)
kinds = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I16": "<i2", "U8": "u1", "U32": "<u4",
         "BOOL": "?"}
assert sorted(header) == sorted(npz.files), (sorted(header), npz.files)
for name, h in header.items():
    a, b = h["data_offsets"]
    got = np.frombuffer(raw[8 + n + a:8 + n + b], kinds[h["dtype"]]).reshape(h["shape"])
    want = npz[name]
    assert got.dtype == want.dtype.newbyteorder("<") or got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape and np.array_equal(got, want), name
PYEOF
}

@test "inspect an .npz: every member is a named tensor" {
    for f in savez.npz savez_compressed.npz zip64.npz; do
        run_tensorrun 0 inspect --json $f
        json_check "$output" 'd["format"] == "npz" and d["compression"] is None and d["metadata"] is None'
        json_check "$output" '[t["name"] for t in d["tensors"]] == ["w", "ids", "mask", "be", "fortran", "scalar", "empty", "layers/0.weight"]'
        json_check "$output" '[t["dtype"] for t in d["tensors"]] == ["f32", "i64", "bool", "f64", "i16", "f64", "u8", "u32"]'
        json_check "$output" '[t["shape"] for t in d["tensors"]] == [[3, 5], [10], [3], [2, 3], [3, 4], [], [0, 4], [4]]'
        json_check "$output" 'd["tensors"][4]["strides"] == [1, 3] and d["tensors"][3]["byte_order"] == "big"'
        json_check "$output" '[t["nbytes"] for t in d["tensors"]] == [60, 80, 3, 48, 24, 8, 0, 16]'
    done
    run_tensorrun 0 inspect savez.npz
    [ "${lines[0]}" = "savez.npz: npz, 2.2 KiB, 8 tensors" ]
    assert_line --partial "layers/0.weight"
    run_tensorrun 0 inspect --json positional.npz
    json_check "$output" '[t["name"] for t in d["tensors"]] == ["arr_0", "arr_1"]'
    run_tensorrun 0 inspect --json nothing.npz
    json_check "$output" 'd["format"] == "npz" and d["tensors"] == []'
    run_tensorrun 0 inspect --json comment.npz
    json_check "$output" 'len(d["tensors"]) == 2'
}

@test "a stored member's offset_bytes is where its data is in the archive" {
    run_tensorrun 0 inspect --json savez.npz
    "$PY" - "$output" <<'PYEOF'
import json, sys
import numpy as np
d = json.loads(sys.argv[1])
raw = open("savez.npz", "rb").read()
npz = np.load("savez.npz")
for t in d["tensors"]:
    want = npz[t["name"]]
    got = raw[t["offset_bytes"]:t["offset_bytes"] + t["nbytes"]]
    assert got == want.tobytes(order="A"), t["name"]
PYEOF
}

@test "convert an .npz to safetensors: every tensor, the values NumPy reads" {
    for f in savez savez_compressed zip64 comment positional; do
        run_tensorrun 0 convert $f.npz $f.safetensors
        same_as_npz $f.safetensors $f.npz
    done
    run_tensorrun 0 convert nothing.npz nothing.safetensors
    run_tensorrun 0 inspect --json nothing.safetensors
    json_check "$output" 'd["tensors"] == []'
}

@test "convert --key picks one member, from a stored or a deflated archive" {
    for f in savez savez_compressed zip64; do
        for k in w ids mask be fortran scalar empty layers/0.weight; do
            run_tensorrun 0 convert --key "$k" $f.npz one.npy
            "$PY" -c 'import sys, numpy as np
a, b = np.load("one.npy"), np.load(sys.argv[1])[sys.argv[2]]
assert a.shape == b.shape and a.dtype == b.dtype.newbyteorder("=") and np.array_equal(a, b), sys.argv[1:]' $f.npz "$k"
        done
    done
    run_tensorrun 4 convert --key nope savez.npz one.npy
    [[ "$stderr" == *"no tensor 'nope'"*"w, ids, mask"* ]]
    run_tensorrun 2 convert savez.npz one.npy
    [[ "$stderr" == *"holds 8 tensors; choose one with --key"* ]]
}

@test "a pipeline reads a member with {path: a.npz, key: NAME}" {
    cat > p.yaml <<'YAML'
tensorrun: 1
inputs:
  w: {path: savez_compressed.npz, key: w}
  ids: {path: savez.npz, key: ids}
  be: {path: zip64.npz, key: be}
stages:
  - name: s
    do:
      - y = sum(w, dim=0) * 2
      - z = ids - 70000
      - b = be.T
outputs:
  y: y.npy
  z: z.npy
  b: b.npy
YAML
    run_tensorrun 0 validate p.yaml
    run_tensorrun 0 run p.yaml -q
    "$PY" -c 'import numpy as np
a = np.load("values.npz")
assert np.allclose(np.load("y.npy"), a["w"].sum(0) * 2, rtol=1e-6)
assert np.load("z.npy").tolist() == list(range(10))
assert np.array_equal(np.load("b.npy"), a["be"].T)'
    sed -i 's/key: w}/key: v}/' p.yaml
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"holds no tensor 'v'"* ]]
}

@test "a member whose data is not aligned to its item size reads correctly, stored or deflated" {
    run_tensorrun 0 inspect --json odd.npz
    json_check "$output" '[t["offset_bytes"] % 8 for t in d["tensors"]] == [4, 4] and d["tensors"][1]["byte_order"] == "big"'
    for k in stored deflated; do
        run_tensorrun 0 convert --key $k odd.npz $k.npy
        "$PY" -c 'import sys, numpy as np; assert np.load(sys.argv[1]).tolist() == [0, 0.25, 0.5, 0.75, 1.0]' $k.npy
    done
}

@test "a large member, stored and deflated, reads back exactly" {
    "$PY" -c 'import numpy as np
x = np.random.default_rng(1).standard_normal(3_000_000).astype("<f4")
np.savez("big.npz", x=x, i=np.arange(1_000_001))
np.savez_compressed("bigc.npz", x=x, i=np.arange(1_000_001))'
    for f in big bigc; do
        run_tensorrun 0 convert $f.npz $f.safetensors
        same_as_npz $f.safetensors $f.npz
        run_tensorrun 0 convert --key i $f.npz i.npy
        "$PY" -c 'import numpy as np; assert np.array_equal(np.load("i.npy"), np.arange(1_000_001))'
    done
}

@test "a stored member is borrowed when aligned, copied when not; a deflated one is inflated into the pool" {
    # a member's data starts after a 30-byte local header, its name, NumPy's
    # 20-byte zip64 extra field and the 128-byte .npy header: ab.npy's at
    # 184 (a multiple of 8), a.npy's at 183
    "$PY" -c 'import numpy as np
x = np.arange(4_000_000, dtype="<i8")
np.savez("s.npz", ab=x)
np.savez("m.npz", a=x)
np.savez_compressed("c.npz", ab=x)'
    run_tensorrun 0 inspect --json s.npz
    json_check "$output" 'd["tensors"][0]["offset_bytes"] == 184'
    run_tensorrun 0 inspect --json m.npz
    json_check "$output" 'd["tensors"][0]["offset_bytes"] == 183'
    for f in s m c; do
        k=ab; [ $f = m ] && k=a
        cat > $f.yaml <<YAML
tensorrun: 1
inputs:
  x: {path: $f.npz, key: $k}
stages:
  - name: s
    do:
      - y = sum(x)
outputs:
  y: $f-y.npy
YAML
    done
    # 32 MB of data under an 8 MiB limit: only the borrowed member fits
    run_tensorrun 0 run s.yaml --memory-limit 8M -q
    "$PY" -c 'import numpy as np; assert int(np.load("s-y.npy")) == 7999998000000'
    for f in m c; do
        run_tensorrun 5 run $f.yaml --memory-limit 8M -q
        [[ "$stderr" == *"out of memory"* ]]
        [ ! -e $f-y.npy ]
        # the reason is the member's: misaligned data is copied, deflated inflated
        if [ $f = m ]; then want=copied; else want=inflated; fi
        [[ "$stderr" == *"bytes, $want, as its header says"* ]]
        run_tensorrun 0 run $f.yaml --memory-limit 64M -q
        "$PY" -c 'import sys, numpy as np; assert int(np.load(sys.argv[1])) == 7999998000000' $f-y.npy
    done
}

@test "an .npz through a pipe is read whole, then like a file" {
    cat savez_compressed.npz | timeout 20 "$TENSORRUN" inspect --json - > j.txt
    json_check "$(cat j.txt)" 'd["format"] == "npz" and len(d["tensors"]) == 8'
    cat zip64.npz | timeout 20 "$TENSORRUN" convert - p.safetensors
    same_as_npz p.safetensors zip64.npz
    "$TENSORRUN" convert savez.npz - --key fortran --format npy | "$PY" -c 'import sys, io, numpy as np
a = np.load(io.BytesIO(sys.stdin.buffer.read())); assert a.tolist() == np.arange(12).reshape(3, 4).tolist()'
}

@test "an .npz compressed with zstd is decompressed whole, then read like a file" {
    command -v zstd >/dev/null || skip "zstd is not installed"
    zstd -q savez_compressed.npz -o a.npz.zst
    run_tensorrun 0 inspect --json a.npz.zst
    json_check "$output" 'd["format"] == "npz" and d["compression"] == "zstd" and len(d["tensors"]) == 8'
    run_tensorrun 0 convert a.npz.zst a.safetensors
    same_as_npz a.safetensors savez_compressed.npz
}

@test "an input may say format: npz" {
    cp savez.npz archive.data
    cat > p.yaml <<'YAML'
tensorrun: 1
inputs:
  m: {path: archive.data, key: mask, format: npz}
stages:
  - name: s
    do:
      - y = logical_not(m)
outputs:
  y: y.npy
YAML
    run_tensorrun 0 run p.yaml -q
    "$PY" -c 'import numpy as np; assert np.load("y.npy").tolist() == [False, True, False]'
}

@test "a damaged deflated member is exit 4 when its data is read" {
    "$PY" - <<'PYEOF'
import numpy as np, struct
np.savez_compressed("c.npz", w=np.arange(1000, dtype="<i4"))
b = bytearray(open("c.npz", "rb").read())
cd = struct.unpack("<I", b[-6:-2])[0]
b[cd + 16] ^= 0xFF          # the central directory's CRC-32
open("crc.npz", "wb").write(bytes(b))
PYEOF
    run_tensorrun 0 inspect crc.npz
    run_tensorrun 4 convert crc.npz o.safetensors
    assert_equal "$stderr" "tensorrun: crc.npz: error: member 'w.npy': CRC-32 mismatch (the data is damaged)"
    [ ! -e o.safetensors ]
    [ -z "$(ls -A | grep -F '.tmp-')" ]
}

@test ".npz is read only: writing one is refused before anything runs" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(3.0))'
    run_tensorrun 2 convert a.npy o.npz
    [[ "$stderr" == *"o.npz: .npz is read only in tensorrun: write .safetensors for several tensors, or .npy for one"* ]]
    run_tensorrun 2 convert a.npy o.bin --format npz
    [[ "$stderr" == *".npz is read only"* ]]
    cat > p.yaml <<'YAML'
tensorrun: 1
inputs:
  a: a.npy
stages:
  - name: s
    do:
      - y = a + 1
outputs:
  y: y.npz
YAML
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:9:6: error: output 'y': .npz is read only in tensorrun"* ]]
    run_tensorrun 2 run p.yaml -o y=o.npz
    [[ "$stderr" == *"-o y=o.npz: .npz is read only"* ]]
    run_tensorrun 2 eval 'a + 1' -i a=a.npy -o o.npz
    [[ "$stderr" == *"-o o.npz: .npz is read only"* ]]
    run_tensorrun 2 eval 'a + 1' -i a=a.npy --format npz
    [ ! -e y.npz ] && [ ! -e o.npz ]
}
