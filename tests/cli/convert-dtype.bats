#!/usr/bin/env bats
# convert --dtype over a collection converts its floating-point tensors
# only (token ids and masks stay exact); --dtype-all converts every one;
# --key and single-tensor inputs always convert; --name names the tensor.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    # f32 weights, i64 position_ids 70000..70009 and a bool mask
    "$PY" - <<'PYEOF'
import json, struct
import numpy as np
w = np.linspace(-1, 1, 6, dtype="<f4").reshape(2, 3)
ids = np.arange(70000, 70010, dtype="<i8")
mask = np.array([True, False, True, True])
parts, header, at = [], {}, 0
for name, a, dt in [("w", w, "F32"), ("position_ids", ids, "I64"), ("mask", mask, "BOOL")]:
    b = a.tobytes()
    header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
    parts.append(b)
    at += len(b)
header["__metadata__"] = {"format": "pt"}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open("model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(parts))
np.savez("model.npz", w=w, position_ids=ids, mask=mask)
PYEOF
}

# read_st FILE: prints name dtype values, one tensor a line, in name order
read_st() {
    "$PY" - "$1" <<'PYEOF'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h.pop("__metadata__", None)
kinds = {"F32": "<f4", "I64": "<i8", "BOOL": "?", "U8": "u1", "F16": "<f2"}
for name in sorted(h):
    t = h[name]
    a, b = t["data_offsets"]
    data = raw[8 + n + a:8 + n + b]
    if t["dtype"] == "BF16":
        v = (np.frombuffer(data, "<u2").astype("<u4") << 16).view("<f4")
    else:
        v = np.frombuffer(data, kinds[t["dtype"]])
    print(name, t["dtype"], " ".join(str(x) for x in v.tolist()))
PYEOF
}

@test "convert --dtype bf16 of a model converts the weights only; ids and mask stay exact" {
    run_tensorrun 0 convert model.safetensors out.safetensors --dtype bf16
    assert_equal "$stderr" "tensorrun: note: converted 1 floating-point tensor to bf16; copied 2 integer and bool tensors unchanged (--dtype-all converts them too)"
    run read_st out.safetensors
    assert_line "position_ids I64 70000 70001 70002 70003 70004 70005 70006 70007 70008 70009"
    assert_line "mask BOOL True False True True"
    assert_line --regexp "^w BF16 -1.0 -0.6"
    run_tensorrun 0 inspect --json out.safetensors
    [[ "$output" == *'"metadata":{"format":"pt"}'* ]]
}

@test "the same from an .npz" {
    run_tensorrun 0 convert model.npz out.safetensors --dtype bf16
    [[ "$stderr" == *"converted 1 floating-point tensor to bf16; copied 2 integer and bool tensors unchanged"* ]]
    run read_st out.safetensors
    assert_line "position_ids I64 70000 70001 70002 70003 70004 70005 70006 70007 70008 70009"
    assert_line "mask BOOL True False True True"
}

@test "convert --dtype-all converts every tensor, and says so" {
    run_tensorrun 0 convert model.safetensors all.safetensors --dtype-all bf16
    assert_equal "$stderr" "tensorrun: note: converted all 3 tensors to bf16 (--dtype-all)"
    run read_st all.safetensors
    # 70000..70009 rounded to bf16's 8 bits of precision, as PyTorch rounds them
    assert_line "position_ids BF16 70144.0 70144.0 70144.0 70144.0 70144.0 70144.0 70144.0 70144.0 70144.0 70144.0"
    assert_line "mask BF16 1.0 0.0 1.0 1.0"
    run_tensorrun 2 convert model.safetensors x.safetensors --dtype f16 --dtype-all bf16
    [[ "$stderr" == *"give one of --dtype and --dtype-all, once"* ]]
    run_tensorrun 2 convert model.safetensors x.safetensors --dtype-all f12
    [[ "$stderr" == *"--dtype-all: unknown dtype 'f12'"* ]]
}

@test "a tensor picked with --key, or a single-tensor input, is always converted" {
    run_tensorrun 0 convert model.safetensors ids.npy --key position_ids --dtype f32
    "$PY" -c 'import numpy as np; a = np.load("ids.npy"); assert a.dtype == np.float32 and a.tolist() == list(range(70000, 70010))'
    run_tensorrun 0 convert model.safetensors ids.safetensors --key position_ids --dtype bf16
    [ -z "$stderr" ]
    run read_st ids.safetensors
    assert_line --regexp "^position_ids BF16 70144.0"
    "$PY" -c 'import numpy as np; np.save("i.npy", np.arange(3, dtype="<i8"))'
    run_tensorrun 0 convert i.npy i.safetensors --dtype f16
    run read_st i.safetensors
    assert_line "tensor F16 0.0 1.0 2.0"
}

@test "--name names the tensor written to a .safetensors output" {
    "$PY" -c 'import numpy as np; np.save("i.npy", np.arange(3, dtype="<i8"))'
    run_tensorrun 0 convert i.npy named.safetensors --name token_ids
    run read_st named.safetensors
    assert_line "token_ids I64 0 1 2"
    run_tensorrun 0 convert model.safetensors m.safetensors --key mask --name attention_mask
    run read_st m.safetensors
    assert_line "attention_mask BOOL True False True True"
    run_tensorrun 2 convert model.safetensors x.safetensors --name one
    [[ "$stderr" == *"--name names one tensor, and model.safetensors holds 3 (pick one with --key)"* ]]
    run_tensorrun 2 convert i.npy x.npy --name one
    [[ "$stderr" == *"--name names the tensor of a .safetensors output; x.npy is npy"* ]]
    run_tensorrun 2 convert i.npy x.safetensors --name __metadata__
    [ ! -e x.safetensors ] && [ ! -e x.npy ]
}
