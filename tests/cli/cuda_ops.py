#!/usr/bin/python3
"""Writes a pipeline that runs every op of the cuda column, in every dtype
it names, over awkward values, strided and broadcast operands and
constants, on the device given (cuda_host.bats runs it on cuda and on cpu
and compares the bits).

usage: cuda_ops.py OPS_JSONL DEVICE OUTDIR > pipeline.yaml
       cuda_ops.py compare A.safetensors B.safetensors
         (prints each tensor whose bytes differ; exit 1 if any does)
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


def tensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}


def compare(a_path, b_path):
    a, b = tensors(a_path), tensors(b_path)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for k in differ:
        print(f"{k}: the bytes differ")
    return 1 if differ else 0


def main():
    if sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
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


main()
