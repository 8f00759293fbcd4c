#!/usr/bin/python3
"""cdist_bench.py - cdist(a, b) of a [10000, 256] and b [1000, 256] f32,
p = 2, side by side with its floor, NumPy and PyTorch in one run, reported
as ratios of medians.

  tensorrun   one stage, d = cdist(a, b), its inputs mapped .npy files and
              its result written into the output's mapping; the figure is
              the stage's wall_ms from --stats json (the whole process is
              printed beside)
  bare sgemm  bench/bare_sgemm M K N THREADS: the product a b^T alone, one
              cblas_sgemm call on THREADS OpenBLAS threads (and on 1),
              its output page-faulted in as the stage's is: the floor
  NumPy       the norm expansion, sqrt(max(|a|^2 + |b|^2 - 2 a @ b.T, 0))
              (scipy's cdist is not used: it need not be installed), timed
              from the load to the save to /dev/shm
  PyTorch     torch.cdist on 1 and on THREADS threads, timed the same way

Every round runs every contender once, in an order rotated from round to
round; the table has the medians of RUNS rounds.  Target (reported, never
asserted): the stage within 1.2x of the bare sgemm on the same threads.
tensorrun's result is checked against float64 on a sample of rows.

Environment: RUNS (default 7), TR_BENCH_SCALE (0 < S <= 1: S times both
row counts, for a quick check), TR_BENCH_THREADS (default: the online
cores), TMPDIR (where the 11 MB of inputs go; removed unless KEEP_DATA=1).

Usage: cdist_bench.py TENSORRUN BENCH_BINDIR
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

PY = sys.executable
DIM = 256


def die(msg):
    sys.exit(f"cdist_bench: {msg}")


if len(sys.argv) != 3:
    die("usage: cdist_bench.py TENSORRUN BENCH_BINDIR")
TENSORRUN, BINDIR = sys.argv[1], sys.argv[2]
RUNS = int(os.environ.get("RUNS", "7"))
SCALE = float(os.environ.get("TR_BENCH_SCALE", "1"))
if not 0 < SCALE <= 1:
    die("0 < TR_BENCH_SCALE <= 1")
THREADS = int(os.environ.get("TR_BENCH_THREADS", str(os.cpu_count() or 1)))
P, R = max(64, int(10000 * SCALE)), max(32, int(1000 * SCALE))
WORK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tensorrun-bench-cdist")
KEEP = os.environ.get("KEEP_DATA") == "1"
A, B = os.path.join(WORK, f"a{P}.npy"), os.path.join(WORK, f"b{R}.npy")


def child_env(threads=THREADS):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def make_inputs():
    os.makedirs(WORK, exist_ok=True)
    rng = np.random.default_rng(11)
    if not os.path.exists(A):
        np.save(A, rng.standard_normal((P, DIM), dtype=np.float32))
    if not os.path.exists(B):
        np.save(B, rng.standard_normal((R, DIM), dtype=np.float32))


def pipeline(out):
    path = os.path.join(out, "cdist.yaml")
    with open(path, "w") as f:
        f.write(f"""tensorrun: 1
inputs: {{a: {A}, b: {B}}}
stages:
  - name: cdist
    do:
      - d = cdist(a, b)
outputs: {{d: {out}/d.npy}}
""")
    return path


NUMPY = """
import sys, time, numpy as np
t = time.perf_counter()
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * (a @ b.T)
np.save(sys.argv[3], np.sqrt(np.maximum(d2, 0, out=d2), out=d2))
print(time.perf_counter() - t)
"""

TORCH = """
import sys, time, numpy as np, torch
torch.set_num_threads(int(sys.argv[4]))
t = time.perf_counter()
a = torch.from_numpy(np.load(sys.argv[1])); b = torch.from_numpy(np.load(sys.argv[2]))
np.save(sys.argv[3], torch.cdist(a, b).numpy())
print(time.perf_counter() - t)
"""


def run(cmd, env=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env or child_env())
    t = time.perf_counter() - t
    if r.returncode != 0:
        die(f"{' '.join(cmd[:3])} exited with {r.returncode}:\n{r.stderr}")
    return t, r.stdout


def stage_ms(stats):
    with open(stats) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "stage" and e.get("stage") == "cdist":
                return e["wall_ms"]
    die("no cdist stage in the statistics")


def check(path):
    """The largest error of a result against float64 over a sample of rows,
    relative to the largest distance."""
    a, b = np.load(A).astype(np.float64), np.load(B).astype(np.float64)
    d = np.load(path, mmap_mode="r")
    rows = np.arange(0, P, max(1, P // 200))
    ref = np.sqrt(((a[rows, None, :] - b[None, :, :]) ** 2).sum(-1))
    return float(np.abs(np.asarray(d[rows], np.float64) - ref).max() / ref.max())


def main():
    make_inputs()
    out = tempfile.mkdtemp(prefix="tensorrun-bench-cdist.", dir="/dev/shm"
                           if os.access("/dev/shm", os.W_OK) else None)
    yaml = pipeline(out)
    stats = os.path.join(out, "stats")
    S = {k: [] for k in ("stage", "tr", "sgemm", "sgemm1", "np", "pt1", "ptn")}
    tr = [TENSORRUN, "run", "--stats", "json", "--stats-file", stats, "--threads", str(THREADS), yaml]
    have_torch = subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0

    def c_tr():
        S["tr"].append(run(tr)[0])
        S["stage"].append(stage_ms(stats) / 1e3)

    def c_sgemm(n, key):
        def go():
            S[key].append(float(run([os.path.join(BINDIR, "bare_sgemm"), str(P), str(DIM), str(R),
                                     str(n)])[1].split()[0]))
        return go

    def c_np():
        S["np"].append(float(run([PY, "-c", NUMPY, A, B, os.path.join(out, "np.npy")])[1]))

    def c_pt(n, key):
        def go():
            S[key].append(float(run([PY, "-c", TORCH, A, B, os.path.join(out, "pt.npy"), str(n)],
                                    child_env(n))[1]))
        return go

    contenders = [c_tr, c_sgemm(THREADS, "sgemm"), c_sgemm(1, "sgemm1"), c_np]
    if have_torch:
        contenders += [c_pt(1, "pt1"), c_pt(THREADS, "ptn")]
    for r in range(RUNS):
        for c in contenders[r % len(contenders):] + contenders[:r % len(contenders)]:
            c()
    med = {k: statistics.median(v) for k, v in S.items() if v}
    st = med["stage"]
    print(f"cdist_bench: medians of {RUNS} interleaved rounds, cdist of [{P}, {DIM}] and "
          f"[{R}, {DIM}] f32, p = 2, {THREADS} threads")
    print(f"  tensorrun, the cdist stage  {1e3 * st:9.1f} ms   (whole process {1e3 * med['tr']:.1f} ms)")
    print(f"  {f'bare sgemm a b^T, {THREADS} threads':<28}{1e3 * med['sgemm']:9.1f} ms   stage/it "
          f"{st / med['sgemm']:.2f}x   <= 1.2x  {'MET' if st / med['sgemm'] <= 1.2 else 'NOT MET'}")
    print(f"  bare sgemm a b^T, 1 thread  {1e3 * med['sgemm1']:9.1f} ms   stage/it "
          f"{st / med['sgemm1']:.2f}x")
    print(f"  NumPy, norm expansion       {1e3 * med['np']:9.1f} ms   stage/it {st / med['np']:.2f}x")
    if have_torch:
        print(f"  torch.cdist, 1 thread       {1e3 * med['pt1']:9.1f} ms   stage/it {st / med['pt1']:.2f}x")
        print(f"  {f'torch.cdist, {THREADS} threads':<28}{1e3 * med['ptn']:9.1f} ms   stage/it "
              f"{st / med['ptn']:.2f}x")
    print(f"  check: tensorrun within {check(os.path.join(out, 'd.npy')):.2g} of float64 "
          f"(relative to the largest distance), NumPy within {check(os.path.join(out, 'np.npy')):.2g}")
    if SCALE < 1:
        print(f"  note: TR_BENCH_SCALE={SCALE}; the target is for the full size")
    shutil.rmtree(out)
    if not KEEP:
        shutil.rmtree(WORK, ignore_errors=True)


main()
