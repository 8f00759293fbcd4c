#!/usr/bin/python3
"""Writes a pipeline that runs every op of the cuda column, in every dtype
it names, over awkward values, strided and broadcast operands and
constants, on the device given (cuda_host.bats runs it on cuda and on cpu
and compares the bits).

usage: cuda_ops.py OPS_JSONL DEVICE OUTDIR > pipeline.yaml
       cuda_ops.py compare [--gpu] CPU.safetensors CUDA.safetensors
         (prints each tensor whose bytes differ; exit 1 if any does.  With
         --gpu the transcendental ops, whose last bits are CUDA's libm's on
         a GPU, may be 2 ulp apart in f32 and f64, 1 in f16 and bf16; every
         other op must match bit for bit)
"""
import json
import sys

DTYPES = {
    "any dtype": ["f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8", "u64", "bool"],
    "bool and integers": ["bool", "i64", "i32", "u8", "u64"],
    "f16, bf16, f32, f64": ["f32", "f64", "f16", "bf16"],
    "numbers (not bool)": ["f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8", "u64"],
}
# ops whose operands are not (x) or (a, b), or that are written apart
SPECIAL = {"where", "clamp", "cast", "to", "contiguous", "clone"}
# ops computed with a libm function, CUDA's on a GPU and glibc's on the CPU
TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan",
                  "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                  "sigmoid", "silu", "erf", "softplus", "elu", "gelu", "pow", "atan2"}
ULPS = {"F32": 2, "F64": 2, "F16": 1, "BF16": 1}


def tensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def ulp_distance(dtype, a, b):
    """The largest distance in ulps between the floats of bytes a and b
    (NaN to NaN is 0, NaN to a number infinite)."""
    size = {"F64": 8, "F32": 4}.get(dtype, 2)
    worst = 0
    for i in range(0, len(a), size):
        x = int.from_bytes(a[i:i + size], "little")
        y = int.from_bytes(b[i:i + size], "little")
        sign = 1 << (8 * size - 1)
        exp_mask = {8: 0x7ff << 52, 4: 0xff << 23, 2: 0}[size]
        if size == 2:  # f16 or bf16: exponent bits by format
            exp_mask = 0x7c00 if dtype == "F16" else 0x7f80
        nan_x = (x & ~sign & exp_mask) == exp_mask and (x & ~sign) != exp_mask
        nan_y = (y & ~sign & exp_mask) == exp_mask and (y & ~sign) != exp_mask
        if nan_x or nan_y:
            if nan_x != nan_y:
                return float("inf")
            continue
        # sign-magnitude to a line where neighbouring floats are 1 apart
        ox = -(x & ~sign) if x & sign else x
        oy = -(y & ~sign) if y & sign else y
        worst = max(worst, abs(ox - oy))
    return worst


def compare(a_path, b_path, gpu):
    a, b = tensors(a_path), tensors(b_path)
    bad = 0
    for k in sorted(a.keys() | b.keys()):
        if a.get(k) == b.get(k):
            continue
        op = k.rsplit("_", 1)[0]
        for suffix in ("_t", "_b", "_c", "_r"):
            op = op[:-len(suffix)] if op.endswith(suffix) else op
        dtype = a[k][0] if k in a else None
        if gpu and k in a and k in b and op in TRANSCENDENTAL and dtype in ULPS:
            d = ulp_distance(dtype, a[k][1], b[k][1])
            if d <= ULPS[dtype]:
                continue
            print(f"{k}: {d} ulp apart (at most {ULPS[dtype]})")
        else:
            print(f"{k}: the bytes differ")
        bad += 1
    return 1 if bad else 0


def main():
    if sys.argv[1] == "compare":
        gpu = sys.argv[2] == "--gpu"
        sys.exit(compare(sys.argv[2 + gpu], sys.argv[3 + gpu], gpu))
    ops_file, device, outdir = sys.argv[1:4]
    ops = [json.loads(line) for line in open(ops_file)]
    lines, outputs = [], []

    def bind(name, expr):
        lines.append(f"      - {name} = {expr}")
        outputs.append(f"  {name}: {{path: {outdir}/ops.safetensors, key: {name}}}")

    for dt in DTYPES["any dtype"]:
        # x is [6, 7]; y [7] broadcasts along its rows; a column of x, [6, 1],
        # and y as [1, 7] broadcast along their dimensions of 1
        lines.append(f"      - x_{dt} = cast(x * 3, {dt})")
        lines.append(f"      - y_{dt} = cast(y * 3, {dt})")
        bind(f"cast_{dt}", f"cast(transpose(x_{dt}, 0, 1), f32)")
        bind(f"clone_{dt}", f"clone(transpose(x_{dt}, 0, 1))")
        bind(f"where_{dt}", f"where(x_{dt}, x_{dt}, y_{dt})")
        bind(f"clamp_{dt}", f"clamp(x_{dt}, 0, 2)")
        bind(f"clampt_{dt}", f"clamp(x_{dt}, y_{dt}, flip(y_{dt}, 0))")
        bind(f"clampmax_{dt}", f"clamp(x_{dt}, max=y_{dt})")
        bind(f"full_{dt}", f"full([3, 4], -2.7, dtype={dt})")
        bind(f"ones_like_{dt}", f"ones_like(x_{dt})")
        bind(f"zeros_like_{dt}", f"zeros_like(y_{dt}, dtype=f16)")
        bind(f"full_like_{dt}", f"full_like(x_{dt}, 1)")
    for dt in DTYPES["f16, bf16, f32, f64"]:
        # 4099 values: more than one block of threads, an odd tail
        bind(f"rand_{dt}", f"rand([4099], seed=7, dtype={dt})")
        bind(f"randn_{dt}", f"randn([4099], seed=-3, dtype={dt})")
    for op in ops:
        name, group = op["name"], op["group"]
        if op["cuda"] == "none" or group not in ("unary", "binary") or name in SPECIAL:
            continue
        for dt in DTYPES[op["cuda"]]:
            x, y = f"x_{dt}", f"y_{dt}"
            if group == "unary":
                bind(f"{name}_{dt}", f"{name}({x})")
                bind(f"{name}_t_{dt}", f"{name}(transpose({x}, 0, 1))")
            else:
                bind(f"{name}_{dt}", f"{name}({x}, {y})")
                bind(f"{name}_t_{dt}", f"{name}(transpose({x}, 0, 1), narrow({y}, 0, 1, 6))")
                bind(f"{name}_b_{dt}", f"{name}(narrow({x}, 1, 2, 1), unsqueeze({y}, 0))")
                bind(f"{name}_c_{dt}", f"{name}({x}, 2)")
                bind(f"{name}_r_{dt}", f"{name}(3, {x})")
    print("tensorrun: 1")
    print("inputs: {x: x.npy, y: y.npy}")
    print("stages:")
    print("  - name: ops")
    print(f"    device: {device}")
    print("    do:")
    print("\n".join(lines))
    print("outputs:")
    print("\n".join(outputs))


if __name__ == "__main__":
    main()
