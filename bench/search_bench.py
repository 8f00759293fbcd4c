#!/usr/bin/python3
"""search_bench.py - the embedding search of tensorrun-pipeline(5), FOREACH,
side by side with NumPy and PyTorch in one run, reported as ratios of
medians.

The job: L2-normalise the rows of a mapped [1000000, 256] f32 .npy, score
them against 1024 normalised queries, and keep the top 10 rows per query.
  tensorrun   a foreach stage over the rows in blocks of BLOCK (8192: the
              scores of a block, 32 MiB, and its normalised rows, 8 MiB,
              are the pool's peak), each block's top 10 per query, then a
              merge stage: the top 10 of the blocks' top 10
  NumPy       the same blocks, np.argpartition and a merge, as someone
              would write it chunk by chunk
  PyTorch     the same blocks, torch.topk, on 1 and on 2 threads
The floor is the scores' flops (2 * rows * 256 * 1024) at the rate of
bench/bare_sgemm on the same threads, measured in this run, plus one pass
over the data (bench/mapped_sum).  Every round runs every contender once,
in an order rotated from round to round; the table has the medians of RUNS
rounds.  The peers are timed from inside, from before the load to the
result, their imports left out; tensorrun as a whole process.  Peak RssAnon
(anonymous memory: the mapping is not counted) comes from separate runs
watched by peak_anon.py.  Targets (reported, never asserted): at most 0.2x
NumPy, at most 0.6x the faster PyTorch, and a peak RssAnon under 10% of
the input's size.

Environment: RUNS (default 7), TR_BENCH_SCALE (0 < S <= 1: S times the
rows, for a quick check), TR_BENCH_THREADS (default: the online cores),
TMPDIR (where the 1 GiB input goes; removed unless KEEP_DATA=1).

Usage: search_bench.py TENSORRUN BENCH_BINDIR
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
HERE = os.path.dirname(os.path.abspath(__file__))
DIM, QUERIES, K, BLOCK = 256, 1024, 10, 8192


def die(msg):
    sys.exit(f"search_bench: {msg}")


if len(sys.argv) != 3:
    die("usage: search_bench.py TENSORRUN BENCH_BINDIR")
TENSORRUN, BINDIR = sys.argv[1], sys.argv[2]
RUNS = int(os.environ.get("RUNS", "7"))
SCALE = float(os.environ.get("TR_BENCH_SCALE", "1"))
if not 0 < SCALE <= 1:
    die("0 < TR_BENCH_SCALE <= 1")
THREADS = int(os.environ.get("TR_BENCH_THREADS", str(os.cpu_count() or 1)))
ROWS = max(BLOCK, int(1000000 * SCALE) // 8 * 8)
WORK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tensorrun-bench-search")
KEEP = os.environ.get("KEEP_DATA") == "1"
EMB, Q = os.path.join(WORK, f"emb{ROWS}.npy"), os.path.join(WORK, "q.npy")


def child_env(threads=THREADS):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def make_inputs():
    os.makedirs(WORK, exist_ok=True)
    rng = np.random.default_rng(7)
    if not os.path.exists(EMB):
        x = np.lib.format.open_memmap(EMB + ".tmp", mode="w+", dtype=np.float32,
                                      shape=(ROWS, DIM))
        for i in range(0, ROWS, 65536):
            n = min(65536, ROWS - i)
            x[i:i + n] = rng.standard_normal((n, DIM), dtype=np.float32)
        x.flush()
        del x
        os.rename(EMB + ".tmp", EMB)
    if not os.path.exists(Q):
        np.save(Q, rng.standard_normal((QUERIES, DIM), dtype=np.float32))


def pipeline(out):
    path = os.path.join(out, "search.yaml")
    with open(path, "w") as f:
        f.write(f"""tensorrun: 1
params: {{k: {K}}}
inputs: {{emb: {EMB}, q: {Q}}}
stages:
  - name: normalise
    do:
      - qn = q / norm(q, dim=-1, keepdim=true)
  - name: search
    foreach: {{over: emb, size: {BLOCK}}}
    do:
      - en = emb / norm(emb, dim=-1, keepdim=true)
      - v, i = topk(en @ qn.T, k, dim=0)
      - i = i + chunk_start
    keep: [v, i]
  - name: merge
    do:
      - best, j = topk(v, k, dim=0)
      - ids = gather(i, 0, j)
outputs: {{best: {out}/best.npy, ids: {out}/ids.npy}}
""")
    return path


NUMPY = f"""
import sys, time, numpy as np
t = time.perf_counter()
e = np.load(sys.argv[1], mmap_mode="r"); q = np.load(sys.argv[2])
qn = q / np.linalg.norm(q, axis=1, keepdims=True)
vs, ids = [], []
for s in range(0, e.shape[0], {BLOCK}):
    b = np.asarray(e[s:s + {BLOCK}])
    sc = (b / np.linalg.norm(b, axis=1, keepdims=True)) @ qn.T
    i = np.argpartition(-sc, {K}, axis=0)[:{K}]
    vs.append(np.take_along_axis(sc, i, 0)); ids.append(i + s)
v, i = np.concatenate(vs), np.concatenate(ids)
j = np.argsort(-v, axis=0, kind="stable")[:{K}]
np.save(sys.argv[3], np.take_along_axis(i, j, 0))
print(time.perf_counter() - t)
"""

TORCH = f"""
import sys, time, numpy as np, torch
torch.set_num_threads(int(sys.argv[4]))
t = time.perf_counter()
e = torch.from_numpy(np.load(sys.argv[1], mmap_mode="r"))
q = torch.from_numpy(np.load(sys.argv[2]))
qn = q / q.norm(dim=1, keepdim=True)
vs, ids = [], []
for s in range(0, e.shape[0], {BLOCK}):
    b = e[s:s + {BLOCK}]
    v, i = torch.topk((b / b.norm(dim=1, keepdim=True)) @ qn.T, {K}, dim=0)
    vs.append(v); ids.append(i + s)
v, i = torch.cat(vs), torch.cat(ids)
_, j = torch.topk(v, {K}, dim=0)
np.save(sys.argv[3], torch.gather(i, 0, j).numpy())
print(time.perf_counter() - t)
"""


def run(cmd, env=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env or child_env())
    t = time.perf_counter() - t
    if r.returncode != 0:
        die(f"{' '.join(cmd[:3])} exited with {r.returncode}:\n{r.stderr}")
    return t, r.stdout


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def check(out, name):
    """The ids of name's run against f64 scores: a swap only between rows
    whose scores differ by less than 1e-6."""
    e = np.load(EMB, mmap_mode="r")
    q = np.load(Q).astype(np.float64)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    ids = np.load(os.path.join(out, name))
    best = np.full((K, QUERIES), -np.inf)
    for s in range(0, ROWS, 65536):
        b = np.asarray(e[s:s + 65536], dtype=np.float64)
        sc = (b / np.linalg.norm(b, axis=1, keepdims=True)) @ qn.T
        both = np.concatenate([best, sc])
        best = -np.sort(-np.take_along_axis(both, np.argpartition(-both, K, axis=0)[:K], 0), 0)
    sel = np.asarray(e[ids.ravel()], dtype=np.float64).reshape(K, QUERIES, DIM)
    got = ((sel / np.linalg.norm(sel, axis=2, keepdims=True)) * qn[None]).sum(2)
    worst = float(np.abs(np.sort(got, axis=0)[::-1] - best).max())
    return worst


def main():
    make_inputs()
    out = tempfile.mkdtemp(prefix="tensorrun-bench-search.", dir="/dev/shm"
                           if os.access("/dev/shm", os.W_OK) else None)
    yaml = pipeline(out)
    S = {k: [] for k in ("tr", "np", "pt1", "pt2", "floor_read", "sgemm")}
    tr = [TENSORRUN, "run", "--stats", "json", "--stats-file", os.path.join(out, "stats"),
          "--threads", str(THREADS), yaml]
    have_torch = subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0

    def c_tr():
        S["tr"].append(run(tr)[0])

    def c_np():
        S["np"].append(float(run([PY, "-c", NUMPY, EMB, Q, os.path.join(out, "np.npy")])[1]))

    def c_pt(n):
        def go():
            S[f"pt{n}"].append(float(run([PY, "-c", TORCH, EMB, Q, os.path.join(out, "pt.npy"),
                                          str(n)], child_env(n))[1]))
        return go

    def c_floor():
        S["floor_read"].append(float(run([os.path.join(BINDIR, "mapped_sum"), EMB])[1].split()[1]))

    contenders = [c_tr, c_np, c_floor] + ([c_pt(1), c_pt(2)] if have_torch else [])
    for r in range(RUNS):
        for c in contenders[r % len(contenders):] + contenders[:r % len(contenders)]:
            warm(EMB)
            c()
    # the bare sgemm rate, of a 1024^3 product on the same threads
    sg = run([os.path.join(BINDIR, "bare_sgemm"), str(1024), str(THREADS)])[1].split()
    rate = float(sg[1]) * 1e9  # flop/s
    flops = 2.0 * ROWS * DIM * QUERIES
    floor = flops / rate + statistics.median(S["floor_read"])
    anon = run([PY, os.path.join(HERE, "peak_anon.py")] + tr)[1].split()
    anon_kib = int(anon[1])
    med = {k: statistics.median(v) for k, v in S.items() if v}
    print(f"search_bench: medians of {RUNS} interleaved rounds, {ROWS} x {DIM} f32 "
          f"({ROWS * DIM * 4 / 2**30:.2f} GiB), {QUERIES} queries, top {K}, blocks of {BLOCK}, "
          f"{THREADS} threads")
    print(f"  tensorrun (whole process)   {med['tr']:8.2f} s")
    print(f"  NumPy (argpartition)        {med['np']:8.2f} s   tensorrun/it {med['tr'] / med['np']:.3f}x"
          f"   <= 0.2x  {'MET' if med['tr'] / med['np'] <= 0.2 else 'NOT MET'}")
    if have_torch:
        best_pt = min(med["pt1"], med["pt2"])
        print(f"  PyTorch topk, 1 thread      {med['pt1']:8.2f} s")
        print(f"  PyTorch topk, 2 threads     {med['pt2']:8.2f} s")
        print(f"  PyTorch, the faster         {best_pt:8.2f} s   tensorrun/it {med['tr'] / best_pt:.3f}x"
              f"   <= 0.6x  {'MET' if med['tr'] / best_pt <= 0.6 else 'NOT MET'}")
    print(f"  floor: {flops:.3g} flops at {rate / 1e9:.1f} GFLOP/s (bare_sgemm) + one read "
          f"{med['floor_read']:.2f} s = {floor:.2f} s   tensorrun/it {med['tr'] / floor:.2f}x")
    frac = anon_kib * 1024 / (ROWS * DIM * 4)
    print(f"  tensorrun peak RssAnon      {anon_kib / 1024:8.1f} MiB = {100 * frac:.1f}% of the input"
          f"   < 10%  {'MET' if frac < 0.1 else 'NOT MET'}")
    with open(os.path.join(out, "stats")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("stage") == "search":
                print(f"  its search stage: {e['wall_ms'] / 1e3:.2f} s, pool peak "
                      f"{e['peak_active_bytes'] / 2**20:.1f} MiB, {e['blocks']} blocks")
    print(f"  checks: tensorrun's top {K} within {check(out, 'ids.npy'):.2g} of the f64 scores, "
          f"NumPy's within {check(out, 'np.npy'):.2g}")
    if SCALE < 1:
        print(f"  note: TR_BENCH_SCALE={SCALE}; the targets are for the full size")
    shutil.rmtree(out)
    if not KEEP:
        shutil.rmtree(WORK, ignore_errors=True)


main()
