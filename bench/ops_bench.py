#!/usr/bin/python3
"""ops_bench.py - the scans and the median against NumPy and PyTorch, side by
side in one run.

Jobs (inputs are mapped .npy files; outputs .npy files in /dev/shm):
  cumsum   y = cumsum(x, -1) of a [16384, 16384] f32 x (1 GiB)
  cumprod  y = cumprod(x, -1) of the same x (its values are 1 + 1e-4 N(0, 1),
           so the running products stay near 1, far from subnormals)
  median   m = median(x, 0) of a [4096, 4096] f32 x: the lower middle value
           of each column (PyTorch's median; NumPy's np.median, what a NumPy
           user calls, averages the two middle values, a little more work)

tensorrun is timed as a whole process from the outside (its stage's wall_ms
from --stats json is shown beside it); NumPy and PyTorch from inside, from
before the load to after the save, their imports left out.  Every round runs
each contender once, in an order rotated from round to round; the table has
the medians of RUNS rounds and the ratios tensorrun / peer (below 1:
tensorrun is faster).  The target is below 1 against both.  Nothing here
fails on it.

Environment: RUNS (default 3), TR_BENCH_THREADS (default: the online cores;
every contender gets as many), TMPDIR (where the 1.1 GiB of inputs go; kept
with KEEP_DATA=1 and reused).

Usage: ops_bench.py TENSORRUN
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

TENSORRUN = sys.argv[1]
PY = "/usr/bin/python3"
RUNS = int(os.environ.get("RUNS", "3"))
THREADS = int(os.environ.get("TR_BENCH_THREADS", str(os.cpu_count() or 1)))
KEEP = os.environ.get("KEEP_DATA") == "1"
WORK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tensorrun-ops-bench")
OUT = tempfile.mkdtemp(prefix="tensorrun-ops-", dir="/dev/shm")


def die(msg):
    print(f"ops_bench: {msg}", file=sys.stderr)
    sys.exit(1)


def env():
    e = dict(os.environ)  # OPENBLAS_CORETYPE and the rest as they are
    e.update({"OMP_NUM_THREADS": str(THREADS), "OPENBLAS_NUM_THREADS": str(THREADS),
              "PYTHONWARNINGS": "ignore"})
    return e


def make_inputs():
    os.makedirs(WORK, exist_ok=True)
    rng = np.random.default_rng(7)
    paths = {"scan": os.path.join(WORK, "scan.npy"), "median": os.path.join(WORK, "median.npy")}
    if not os.path.exists(paths["scan"]):
        x = np.lib.format.open_memmap(paths["scan"] + ".part", "w+", np.float32, (16384, 16384))
        for r in range(0, 16384, 1024):
            x[r:r + 1024] = 1 + 1e-4 * rng.standard_normal((1024, 16384), np.float32)
        x.flush()
        del x
        os.rename(paths["scan"] + ".part", paths["scan"])
    if not os.path.exists(paths["median"]):
        np.save(paths["median"], rng.standard_normal((4096, 4096), np.float32))
    return paths


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def tensorrun(stmt, path, out):
    cmd = [TENSORRUN, "eval", stmt, "-i", f"x={path}", "-o", f"y={out}", "--threads", str(THREADS),
           "--stats", "json"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env())
    t = time.perf_counter() - t0
    if r.returncode != 0:
        die(f"{' '.join(cmd)}: {r.stderr}")
    stage = next((json.loads(l)["wall_ms"] / 1e3 for l in r.stderr.splitlines()
                  if l.startswith("{") and json.loads(l).get("event") == "stage"), None)
    return t, stage


PEERS = {
    ("numpy", "cumsum"): "y = np.cumsum(x, axis=-1)",
    ("numpy", "cumprod"): "y = np.cumprod(x, axis=-1)",
    ("numpy", "median"): "y = np.median(x, axis=0)",
    ("torch", "cumsum"): "y = torch.cumsum(torch.from_numpy(x), -1).numpy()",
    ("torch", "cumprod"): "y = torch.cumprod(torch.from_numpy(x), -1).numpy()",
    ("torch", "median"): "y = torch.median(torch.from_numpy(x), 0).values.numpy()",
}


def peer(who, job, path, out):
    imports = "import numpy as np" + ("\nimport torch\ntorch.set_num_threads(%d)" % THREADS
                                      if who == "torch" else "")
    # np.load without mmap for torch: from_numpy of a read-only map warns and copies anyway
    load = 'x = np.load(sys.argv[1], mmap_mode="r")'
    code = (f"import sys, time\n{imports}\nt0 = time.perf_counter()\n{load}\n{PEERS[(who, job)]}\n"
            f"np.save(sys.argv[2], y)\nprint('JOB %.6f' % (time.perf_counter() - t0))\n")
    r = subprocess.run([PY, "-c", code, path, out], capture_output=True, text=True, env=env())
    if r.returncode != 0:
        die(f"{who} {job}: {r.stderr}")
    return float(r.stdout.split()[-1])


def main():
    paths = make_inputs()
    jobs = [("cumsum", "y = cumsum(x, -1)", "scan"), ("cumprod", "y = cumprod(x, -1)", "scan"),
            ("median", "y = median(x, 0)", "median")]
    times = {}
    for rnd in range(RUNS):
        for job, stmt, inp in jobs:
            warm(paths[inp])
            contenders = ["tensorrun", "numpy", "torch"]
            contenders = contenders[rnd % 3:] + contenders[:rnd % 3]
            for who in contenders:
                out = os.path.join(OUT, f"{job}-{who}.npy")
                if who == "tensorrun":
                    t, stage = tensorrun(stmt, paths[inp], out)
                    times.setdefault((job, "stage"), []).append(stage)
                else:
                    t = peer(who, job, paths[inp], out)
                times.setdefault((job, who), []).append(t)
                os.remove(out)
    print(f"ops_bench: {THREADS} threads, medians of {RUNS} rounds (seconds)")
    print(f"{'job':10} {'tensorrun':>10} {'(stage)':>9} {'NumPy':>8} {'PyTorch':>8} "
          f"{'vs NumPy':>9} {'vs PyTorch':>11}  target")
    for job, _, _ in jobs:
        m = {k: statistics.median(times[(job, k)]) for k in ("tensorrun", "stage", "numpy", "torch")}
        rn, rt = m["tensorrun"] / m["numpy"], m["tensorrun"] / m["torch"]
        met = "MET" if rn < 1 and rt < 1 else "NOT MET"
        print(f"{job:10} {m['tensorrun']:10.3f} {m['stage']:9.3f} {m['numpy']:8.3f} {m['torch']:8.3f} "
              f"{rn:8.3f}x {rt:10.3f}x  {met} (faster than both)")


if __name__ == "__main__":
    try:
        main()
    finally:
        os.rmdir(OUT) if os.path.isdir(OUT) and not os.listdir(OUT) else None
        if not KEEP:
            for f in ("scan.npy", "median.npy"):
                try:
                    os.remove(os.path.join(WORK, f))
                except OSError:
                    pass
            try:
                os.rmdir(WORK)
            except OSError:
                pass
