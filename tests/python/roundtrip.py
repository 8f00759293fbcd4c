#!/usr/bin/python3
"""Round trips through `tensorrun convert`, checked bit for bit by NumPy.

NumPy writes every dtype it shares with tensorrun, in C and Fortran order,
little- and big-endian, as .npy versions 1.0, 2.0 and 3.0, plus zero-size
and rank-0 arrays.  Each goes through tensorrun into .npy, .safetensors,
.npy.zst and .safetensors.zst and back to .npy, and NumPy compares the
result with the original, value for value and byte for byte.

Usage: roundtrip.py TENSORRUN WORKDIR     (exit 0 when all agree)
"""
import os
import subprocess
import sys

import numpy as np

TENSORRUN, WORK = sys.argv[1], sys.argv[2]
DTYPES = ["?", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8"]
failures = []
checked = 0


def run(*args):
    r = subprocess.run([TENSORRUN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tensorrun {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")


def sample(code, shape, rng):
    dt = np.dtype(code)
    target, dt = dt, dt.newbyteorder("=")
    n = int(np.prod(shape))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    else:
        flat = rng.standard_normal(n).astype(dt) * dt.type(100)
        if n >= 4:  # the values that conversions get wrong first
            flat[:4] = np.array([np.inf, -np.inf, -0.0, np.nan], dtype=dt)
    return flat.astype(target).reshape(shape)


def same(a, b):
    """Equal in dtype, shape, and every value's bits (NaN payloads included)."""
    if a.dtype.newbyteorder("=") != b.dtype.newbyteorder("=") or a.shape != b.shape:
        return False
    native = a.dtype.newbyteorder("=")
    return np.ascontiguousarray(a, dtype=native).tobytes() == \
        np.ascontiguousarray(b, dtype=native).tobytes()


def check(name, original, path):
    global checked
    checked += 1
    back = np.load(path)
    if not same(original, back):
        failures.append(f"{name}: {path} differs from the original")


rng = np.random.default_rng(12345)
os.makedirs(WORK, exist_ok=True)
shapes = [(3, 4), (2, 3, 5), (7,), (), (0, 3)]
for code in DTYPES:
    for endian in ("<", ">"):
        if np.dtype(code).itemsize == 1 and endian == ">":
            continue
        for shape in shapes:
            for fortran in (False, True):
                if fortran and len(shape) < 2:
                    continue
                for version in ((1, 0), (2, 0), (3, 0)):
                    arr = sample(endian + code, shape, rng)
                    if fortran:
                        arr = np.asfortranarray(arr)
                    tag = f"{code}{'be' if endian == '>' else 'le'}_{'x'.join(map(str, shape)) or 'scalar'}_{'F' if fortran else 'C'}_v{version[0]}"
                    src = os.path.join(WORK, tag + ".npy")
                    with open(src, "wb") as f:
                        np.lib.format.write_array(f, arr, version=version)
                    try:
                        for ext in (".npy", ".safetensors", ".npy.zst", ".safetensors.zst"):
                            mid = os.path.join(WORK, tag + ".mid" + ext)
                            out = os.path.join(WORK, tag + ".back.npy")
                            run("convert", src, mid)
                            run("convert", mid, out)
                            check(f"{tag} via {ext}", arr, out)
                    except RuntimeError as e:
                        failures.append(f"{tag}: {e}")

# what tensorrun writes as .npy must be what NumPy itself writes
arr = sample("<f4", (3, 4), rng)
np.save(os.path.join(WORK, "ref.npy"), arr)
run("convert", os.path.join(WORK, "ref.npy"), os.path.join(WORK, "ref.copy.npy"))
checked += 1
if open(os.path.join(WORK, "ref.npy"), "rb").read() != open(os.path.join(WORK, "ref.copy.npy"), "rb").read():
    failures.append("tensorrun's .npy of a C-ordered f32 array is not byte-identical to np.save's")

for f in failures:
    print("FAIL:", f)
print(f"{checked} round trips, {len(failures)} failures")
sys.exit(1 if failures else 0)
