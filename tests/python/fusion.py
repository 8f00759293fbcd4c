#!/usr/bin/python3
"""fusion.py TENSORRUN WORKDIR [COUNT]: generated chains of elementwise ops
(2 to 6 ops over f16, bf16, f32 and i32 tensors, with broadcast and
strided operands and constants) feeding each reduction, each row-wise op,
or an output.  Each pipeline must show exactly one fused group in
`validate --json`, give the same bytes as with TENSORRUN_NO_FUSE=1 (the
unfused program), and allocate no full-size temporary: its stage's
alloc_count is at most its result's block (one) and, with a tail, the
tail's own buffers (one more block: a reduction's partials or a row-wise
op's line buffers, which test_fused checks against tr_fused_memory).  Prints one line per failure and a summary; exit 1 on any failure.
"""
import json
import os
import random
import subprocess
import sys

import numpy as np

ROWS, COLS = 64, 48
FLOAT_UNARY = ["exp", "neg", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "silu", "gelu",
               "square", "floor", "ceil", "round", "expm1"]
INT_UNARY = ["neg", "abs", "square"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]
REDUCTIONS = ["sum", "mean", "max", "min", "prod", "norm", "logsumexp", "var"]
ROW_WISE = ["softmax", "log_softmax"]


def safetensors(path, arrays):
    """Writes arrays ({name: (dtype word, numpy uint16/other array)}) as .safetensors."""
    header, blobs, offset = {}, [], 0
    for name, (word, a) in arrays.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": word, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def inputs(work, rng):
    r = np.random.default_rng(7)
    x32 = (r.standard_normal((ROWS, COLS)) * 0.5).astype(np.float32)
    row = (r.standard_normal((1, COLS)) * 0.5).astype(np.float32)
    col = (r.standard_normal((ROWS, 1)) * 0.5).astype(np.float32)
    square = (r.standard_normal((COLS, ROWS)) * 0.5).astype(np.float32)
    bf16 = (x32.view(np.uint32) >> 16).astype(np.uint16)
    xi = r.integers(-20, 20, (ROWS, COLS)).astype(np.int32)
    safetensors(os.path.join(work, "in.safetensors"), {
        "f32": ("F32", x32), "f16": ("F16", x32.astype(np.float16)), "bf16": ("BF16", bf16),
        "i32": ("I32", xi), "row": ("F32", row), "col": ("F32", col), "t": ("F32", square)})


def chain(rng, dtype):
    """A chain of 2..6 ops over x (of dtype) as one expression, and its
    other tensor operands (names of inputs)."""
    expr = "x"
    if rng.random() < 0.25:
        expr = "x[::2]" if rng.random() < 0.5 else "x[:, 1:]"
    n = rng.randint(2, 6)
    for _ in range(n):
        if rng.random() < 0.45:
            op = rng.choice(INT_UNARY if dtype == "i32" else FLOAT_UNARY)
            expr = "%s(%s)" % (op, expr)
        else:
            op = rng.choice(BINARY)
            if dtype != "i32" and rng.random() < 0.3 and "[" not in expr:
                other = rng.choice(["row", "col", "t.T"])
            else:
                other = rng.choice(["2", "3", "0.5", "1.5"]) if dtype != "i32" else rng.choice(["2", "3", "-1"])
            expr = "%s(%s, %s)" % (op, expr, other)
    return expr, n


def pipeline(work, index, expr, dtype, tail):
    body = "y = %s" % expr if not tail else "s = %s(%s)" % (tail, expr)
    dims = ", dim=-1" if tail in ROW_WISE else ""
    if tail:
        body = "s = %s(%s%s)" % (tail, expr, dims)
    out = "s" if tail else "y"
    text = """tensorrun: 1
inputs:
  x: {path: in.safetensors, key: %s}
  row: {path: in.safetensors, key: row}
  col: {path: in.safetensors, key: col}
  t: {path: in.safetensors, key: t}
stages:
  - name: chain
    do:
      - %s
outputs:
  %s: {path: out%d.safetensors}
""" % (dtype, body, out, index)
    path = os.path.join(work, "p%d.yaml" % index)
    with open(path, "w") as f:
        f.write(text)
    return path, os.path.join(work, "out%d.safetensors" % index)


def run(tensorrun, args, env=None):
    return subprocess.run([tensorrun] + args, capture_output=True, text=True, env=env)


def main():
    tensorrun, work = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 210
    os.makedirs(work, exist_ok=True)
    rng = random.Random(20261201)
    inputs(work, rng)
    tails = [None] + REDUCTIONS + ROW_WISE
    failures = 0
    unfused_env = dict(os.environ, TENSORRUN_NO_FUSE="1")
    for i in range(count):
        dtype = rng.choice(["f32", "f16", "bf16", "i32"])
        tail = tails[i % len(tails)]
        if dtype == "i32" and tail in ("mean", "norm", "logsumexp", "var") + tuple(ROW_WISE):
            dtype = "f32"
        expr, n = chain(rng, dtype)
        path, out = pipeline(work, i, expr, dtype, tail)
        what = "%s %s(%s)" % (dtype, tail or "output", expr)
        plan = run(tensorrun, ["validate", "--json", path])
        if plan.returncode != 0:
            print("not ok: %s: validate: %s" % (what, plan.stderr.strip()))
            failures += 1
            continue
        groups = [g for s in json.loads(plan.stdout)["stages"] for g in s["fused_groups"]]
        if len(groups) != 1:
            print("not ok: %s: %d fused groups, not one" % (what, len(groups)))
            failures += 1
        fused = run(tensorrun, [path, "--stats", "json", "--threads", "2"])
        if fused.returncode != 0:
            print("not ok: %s: run: %s" % (what, fused.stderr.strip()))
            failures += 1
            continue
        with open(out, "rb") as f:
            got = f.read()
        stage = [json.loads(l) for l in fused.stderr.splitlines() if '"stage"' in l][0]
        plain = run(tensorrun, [path, "-q", "--threads", "1"], unfused_env)
        with open(out, "rb") as f:
            want = f.read()
        if plain.returncode != 0 or got != want:
            print("not ok: %s: fused and unfused differ" % what)
            failures += 1
        # the result is the only pool block but the tail's buffers: a
        # reduction's or a row-wise op's into the pool (or its file), an
        # output's into its file
        if stage["alloc_count"] > (2 if tail else 1):
            print("not ok: %s: %d allocations (a full-size temporary?)" % (what, stage["alloc_count"]))
            failures += 1
    print("# %d generated chains, %d failures" % (count, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
