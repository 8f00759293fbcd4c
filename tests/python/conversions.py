#!/usr/bin/python3
"""`tensorrun convert --dtype` against NumPy's astype, pair by pair.

For every pair of dtypes the two share, a source array (with the edge
values of its dtype: extremes, infinities, NaN, -0.0, halfway cases for the
float narrowing) is converted by both and compared bit for bit.  Values a
float -> integer conversion cannot represent are left out, since NumPy
leaves those to the C compiler; tensorrun saturates them (tested in C).

Usage: conversions.py TENSORRUN WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

TENSORRUN, WORK = sys.argv[1], sys.argv[2]
CODES = {"bool": "?", "u8": "u1", "u16": "u2", "u32": "u4", "u64": "u8", "i8": "i1",
         "i16": "i2", "i32": "i4", "i64": "i8", "f16": "f2", "f32": "f4", "f64": "f8"}
rng = np.random.default_rng(7)
os.makedirs(WORK, exist_ok=True)


def source(code):
    dt = np.dtype(code)
    if dt.kind == "b":
        return np.array([False, True, True, False])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        edge = [info.min, info.max, 0, 1, info.max - 1, info.min + 1]
        return np.concatenate([np.array(edge, dtype=dt),
                               rng.integers(info.min, info.max, 2000, dtype=dt, endpoint=True)])
    finfo = np.finfo(dt)
    edge = [np.inf, -np.inf, np.nan, -0.0, 0.0, finfo.max, -finfo.max, finfo.tiny,
            finfo.smallest_subnormal, 0.5, 1.5, 2.5, -2.5, 65504, 65519.99, 65520, 1e-8]
    mixed = rng.standard_normal(3000) * np.exp(rng.uniform(-30, 30, 3000))
    # f32 and f64 values exactly between two f16 or f32 neighbours
    f16 = rng.standard_normal(500).astype(np.float16).astype(np.float64)
    halves = f16 + np.spacing(f16.astype(np.float16)).astype(np.float64) / 2
    with np.errstate(over="ignore"):  # the f64 extremes become infinities in f16 and f32
        return np.concatenate([np.array(edge), mixed, halves]).astype(dt)


failures, pairs = [], 0
for a, ca in CODES.items():
    src = source(ca)
    src_path = os.path.join(WORK, f"{a}.npy")
    np.save(src_path, src)
    for b, cb in CODES.items():
        if a == b:
            continue
        x = src
        if np.dtype(ca).kind == "f" and np.dtype(cb).kind in "iu":
            info = np.iinfo(np.dtype(cb))
            with np.errstate(invalid="ignore"):
                keep = np.isfinite(x) & (np.trunc(x) >= info.min) & (np.trunc(x) <= info.max)
            # beyond 2^53 float64 cannot tell whether the bounds are inside
            keep &= np.abs(x.astype(np.float64)) < 2.0 ** 53
            x = x[keep]
        path = os.path.join(WORK, f"{a}-{b}.in.npy")
        out = os.path.join(WORK, f"{a}-{b}.npy")
        np.save(path, x)
        pairs += 1
        r = subprocess.run([TENSORRUN, "convert", path, out, "--dtype", b],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{a} -> {b}: exit {r.returncode}: {r.stderr.strip()}")
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            want = x.astype(cb)
        got = np.load(out)
        if got.dtype != want.dtype or got.tobytes() != want.tobytes():
            diff = [i for i in range(len(got)) if got[i:i+1].tobytes() != want[i:i+1].tobytes()]
            i = diff[0]
            failures.append(f"{a} -> {b}: {len(diff)} of {len(got)} differ; first {x[i]!r} -> "
                            f"tensorrun {got[i]!r}, NumPy {want[i]!r}")

for f in failures:
    print("FAIL:", f)
print(f"{pairs} dtype pairs, {len(failures)} failures")
sys.exit(1 if failures else 0)
