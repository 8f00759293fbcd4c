#!/usr/bin/python3
"""Result dtypes of binary ops against PyTorch's torch.result_type.

For every pair of the dtypes PyTorch has, with tensors of rank 1 and rank 0
on either side and numbers written in the statement (weak scalars), checks
that both the dtype `tensorrun eval --dry-run` predicts and the dtype the
run writes equal PyTorch's.  usage: promotion.py TENSORRUN WORKDIR
"""
import json
import os
import struct
import subprocess
import sys

import torch

DTYPES = {  # tensorrun name: (safetensors name, torch dtype, item size)
    "bool": ("BOOL", torch.bool, 1), "u8": ("U8", torch.uint8, 1),
    "i8": ("I8", torch.int8, 1), "i16": ("I16", torch.int16, 2),
    "i32": ("I32", torch.int32, 4), "i64": ("I64", torch.int64, 8),
    "f16": ("F16", torch.float16, 2), "bf16": ("BF16", torch.bfloat16, 2),
    "f32": ("F32", torch.float32, 4), "f64": ("F64", torch.float64, 8),
}
NAMES = {v[0]: k for k, v in DTYPES.items()}


def write_safetensors(path, dtype):
    """Tensors v (shape [3]) and s (shape []) of dtype, all ones (bytes 1)."""
    st, _, size = DTYPES[dtype]
    header = {"v": {"dtype": st, "shape": [3], "data_offsets": [0, 3 * size]},
              "s": {"dtype": st, "shape": [], "data_offsets": [3 * size, 4 * size]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    one = {1: b"\x01", 2: b"\x00\x3c" if dtype == "f16" else b"\x80\x3f" if dtype == "bf16"
           else b"\x01\x00", 4: struct.pack("<f", 1) if dtype == "f32" else b"\x01\0\0\0",
           8: struct.pack("<d", 1) if dtype == "f64" else b"\x01" + b"\0" * 7}[size]
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + one * 4)


def safetensors_dtype(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return NAMES[json.loads(f.read(n))["out"]["dtype"]]


def planned_dtype(text):
    values = [v for v in json.loads(text)["values"] if v["name"] == "out"]
    return values[-1].get("dtype") if values else None


def main():
    tensorrun, work = sys.argv[1], sys.argv[2]
    for d in DTYPES:
        write_safetensors(os.path.join(work, d + ".safetensors"), d)
    operands = [(d, k) for d in DTYPES for k in ("v", "s")]
    numbers = {"2": 2, "2.5": 2.5, "true": True}
    cases = [(a, b) for a in operands for b in operands]
    cases += [(a, n) for a in operands for n in numbers]
    failures = checked = 0
    for a, b in cases:
        args = ["-i", "a=%s/%s.safetensors:%s" % (work, a[0], a[1])]
        ta = torch.ones(3 if a[1] == "v" else (), dtype=DTYPES[a[0]][1])
        if isinstance(b, tuple):
            args += ["-i", "b=%s/%s.safetensors:%s" % (work, b[0], b[1])]
            tb, text = torch.ones(3 if b[1] == "v" else (), dtype=DTYPES[b[0]][1]), "a + b"
        else:
            tb, text = numbers[b], "a + " + b
        want = [k for k, v in DTYPES.items() if v[1] == torch.result_type(ta, tb)][0]
        out = os.path.join(work, "out.safetensors")
        plan = subprocess.run([tensorrun, "eval", text, "-n", "--json", "-o", out] + args,
                              capture_output=True,
                              text=True)
        run = subprocess.run([tensorrun, "eval", text, "-o", out, "-q"] + args,
                             capture_output=True, text=True)
        got_plan = planned_dtype(plan.stdout) if plan.returncode == 0 else plan.stderr.strip()
        got_run = safetensors_dtype(out) if run.returncode == 0 else run.stderr.strip()
        checked += 1
        if got_plan != want or got_run != want:
            failures += 1
            print("not ok: %s with a=%s b=%s: planned %s, ran %s, PyTorch %s"
                  % (text, a, b, got_plan, got_run, want))
    print("%d of %d cases agree with torch.result_type" % (checked - failures, checked))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
