#!/usr/bin/python3
"""bigfile_bench.py - a file larger than RAM through a foreach stage,
side by side with Dask array and the disk's own sequential read, in one
run.

The file: [ROWS, 256] f32 in a .npy on disk (32 GiB by default, more than
this machine's 24 GiB of RAM), written by a tensorrun pipeline (a foreach
stage over a row index, each block's rows straight into the output file).
The job: L2-normalise every row and sum the rows, [256] f32.
  tensorrun   a foreach stage in blocks of BLOCK_MB MiB (64 MiB, 65536
              rows): each block's column sums, joined, then a merge stage
  Dask        da.from_array over np.load(mmap_mode='r'), the same chunks,
              (x / norm(x, axis=1)).sum(axis=0).compute(), its threads
              (Dask's norm of f32 rows is f64, and so is the rest)
  disk        dd of the whole file with O_DIRECT, 16 MiB reads: the
              sequential read speed that bounds both
Each contender runs once, in the order disk, tensorrun, Dask (each reads
the whole file, which does not fit in the page cache, so each reads it
from the disk).  Wall time, peak RSS (VmRSS: with the file's pages
mapped) and peak RssAnon (without them) are polled every 10 ms.  Target
(reported, never asserted): ahead of Dask on time and on peak RSS.

Environment: TR_BIG_GIB (the file's size, default 32), TR_BENCH_THREADS
(default: the online cores), TMPDIR (where the file goes: it needs the
room; removed unless KEEP_DATA=1).

Usage: bigfile_bench.py TENSORRUN
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

DIM, BLOCK_MB = 256, 64


def die(msg):
    sys.exit(f"bigfile_bench: {msg}")


if len(sys.argv) != 2:
    die("usage: bigfile_bench.py TENSORRUN")
TENSORRUN = sys.argv[1]
GIB = float(os.environ.get("TR_BIG_GIB", "32"))
THREADS = int(os.environ.get("TR_BENCH_THREADS", str(os.cpu_count() or 1)))
ROWS = max(1024, int(GIB * 2**30) // (DIM * 4) // 1024 * 1024)
BLOCK = min(ROWS, BLOCK_MB * 2**20 // (DIM * 4))
WORK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tensorrun-bench-bigfile")
KEEP = os.environ.get("KEEP_DATA") == "1"
BIG = os.path.join(WORK, f"big{ROWS}.npy")

DASK = f"""
import sys, numpy as np, dask, dask.array as da
dask.config.set(scheduler="threads", num_workers={THREADS})
x = da.from_array(np.load(sys.argv[1], mmap_mode="r"), chunks=({BLOCK}, {DIM}))
np.save(sys.argv[2], (x / da.linalg.norm(x, axis=1, keepdims=True)).sum(axis=0).compute())
"""


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def watch(cmd, env=None):
    """Runs cmd: (seconds, peak VmRSS KiB, peak RssAnon KiB)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    rss = anon = 0
    while p.poll() is None:
        rss = max(rss, status_kib(p.pid, "VmRSS:"))
        anon = max(anon, status_kib(p.pid, "RssAnon:"))
        time.sleep(0.01)
    t = time.perf_counter() - t
    if p.returncode != 0:
        die(f"{' '.join(cmd[:3])} exited with {p.returncode}:\n{p.stderr.read().decode()}")
    return t, rss, anon


def make_input(out):
    """The big file, by tensorrun: row r is randn's rows plus r * 1e-7,
    so that no two blocks are the same."""
    if os.path.exists(BIG):
        return 0.0
    os.makedirs(WORK, exist_ok=True)
    np.save(os.path.join(out, "r.npy"), np.arange(ROWS, dtype=np.float32))
    with open(os.path.join(out, "gen.yaml"), "w") as f:
        f.write(f"""tensorrun: 1
inputs: {{r: {out}/r.npy}}
stages:
  - name: generate
    foreach: {{over: r, size: {BLOCK}}}
    do:
      - x = randn([r.shape[0], {DIM}], seed=7) + unsqueeze(r, 1) * 1e-7
outputs: {{x: {BIG}.tmp.npy}}
""")
    t = time.perf_counter()
    subprocess.run([TENSORRUN, "run", "-q", "--threads", str(THREADS),
                    os.path.join(out, "gen.yaml")], check=True)
    os.rename(BIG + ".tmp.npy", BIG)
    return time.perf_counter() - t


def pipeline(out):
    path = os.path.join(out, "reduce.yaml")
    with open(path, "w") as f:
        f.write(f"""tensorrun: 1
inputs: {{x: {BIG}}}
stages:
  - name: reduce
    foreach: {{over: x, size: {BLOCK}}}
    do:
      - y = x / norm(x, dim=-1, keepdim=true)
      - s = unsqueeze(sum(y, dim=0), 0)
    keep: [s]
  - name: merge
    do: ["total = sum(s, dim=0)"]
outputs: {{total: {out}/tr.npy}}
""")
    return path


def check(out):
    """Both results against f64 sums of the f64 normalised rows."""
    x = np.load(BIG, mmap_mode="r")
    want = np.zeros(DIM)
    for s in range(0, ROWS, 1 << 20):
        b = np.asarray(x[s:s + (1 << 20)], dtype=np.float64)
        want += (b / np.linalg.norm(b, axis=1, keepdims=True)).sum(axis=0)
    scale = np.abs(want).max()
    return [float(np.abs(np.load(os.path.join(out, n)) - want).max() / scale)
            for n in ("tr.npy", "dask.npy")]


def main():
    out = tempfile.mkdtemp(prefix="tensorrun-bench-bigfile.")
    gen = make_input(out)
    size = os.path.getsize(BIG)
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS))
    direct = subprocess.run(["dd", f"if={BIG}", "of=/dev/null", "bs=4096", "count=1",
                             "iflag=direct"], capture_output=True).returncode == 0
    dd = watch(["dd", f"if={BIG}", "of=/dev/null", "bs=16M"] + (["iflag=direct"] if direct else []))
    tr = watch([TENSORRUN, "run", "-q", "--threads", str(THREADS), pipeline(out)], env)
    dk = watch([sys.executable, "-c", DASK, BIG, os.path.join(out, "dask.npy")], env)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    errs = check(out)
    gbs = lambda t: size / t / 1e9
    print(f"bigfile_bench: one run each, [{ROWS}, {DIM}] f32 on disk ({size / 2**30:.2f} GiB; "
          f"RAM {ram / 2**30:.1f} GiB), blocks of {BLOCK} rows ({BLOCK * DIM * 4 >> 20} MiB), "
          f"{THREADS} threads")
    if gen:
        print(f"  written by tensorrun in {gen:.1f} s ({gbs(gen):.2f} GB/s)")
    print(f"  disk: dd, {'O_DIRECT' if direct else 'cached  '}       {dd[0]:8.2f} s  {gbs(dd[0]):6.2f} GB/s"
          + ("" if direct else "   (the file system refuses O_DIRECT: not the disk's speed)"))
    for name, r in (("tensorrun", tr), ("Dask array", dk)):
        print(f"  {name:<24} {r[0]:8.2f} s  {gbs(r[0]):6.2f} GB/s = {dd[0] / r[0]:.2f}x the disk"
              f"   peak RSS {r[1] / 1024:8.1f} MiB   peak RssAnon {r[2] / 1024:8.1f} MiB")
    print(f"  tensorrun/Dask: time {tr[0] / dk[0]:.3f}x "
          f"({'MET' if tr[0] < dk[0] else 'NOT MET'}), peak RSS {tr[1] / max(dk[1], 1):.3f}x "
          f"({'MET' if tr[1] < dk[1] else 'NOT MET'})")
    print(f"  checks: largest difference from the f64 sums, relative to the largest: "
          f"tensorrun {errs[0]:.2g}, Dask {errs[1]:.2g}")
    if size < ram:
        print(f"  note: TR_BIG_GIB={GIB}: the file fits in RAM; the target is for one that does not")
    shutil.rmtree(out)
    if not KEEP:
        shutil.rmtree(WORK, ignore_errors=True)


main()
