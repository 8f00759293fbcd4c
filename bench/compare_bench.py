#!/usr/bin/python3
"""compare_bench.py - `tensorrun compare` side by side with NumPy in one
run, reported as ratios of medians.

The job: two mapped [262144, 1024] f32 .npy files of 1 GiB each that
differ in 3 elements; is every element close, and where is the first that
is not?
  tensorrun   tensorrun compare A B (f32's default tolerances), as a whole
              process
  NumPy       np.load(mmap_mode="r") both, np.allclose(a, b) with the same
              tolerances, then the first differing index
              (np.argmax(~np.isclose(a, b)) and np.unravel_index), as a
              regression script would; timed from the load to the answer
The floor is one read of both files (2 GiB) at bench/stream's read-sum
rate measured in this run, the machine's memory bandwidth for such a loop:
tensorrun's fraction of it is reported.  The files are read once before
the rounds so that every contender reads them from the page cache.  Each
round runs every contender once, in an order rotated from round to round.
Target (reported, never asserted): at most 0.2x NumPy.

Environment: RUNS (default 5), TR_BENCH_SCALE (0 < S <= 1: S times the
rows, for a quick check), TMPDIR (where the 2 GiB of inputs go; removed
afterwards).

Usage: compare_bench.py TENSORRUN BENCH_BINDIR
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

COLS = 1024
RTOL, ATOL = 1.3e-6, 1e-5


def die(msg):
    sys.exit(f"compare_bench: {msg}")


if len(sys.argv) != 3:
    die("usage: compare_bench.py TENSORRUN BENCH_BINDIR")
TENSORRUN, BINDIR = sys.argv[1], sys.argv[2]
RUNS = int(os.environ.get("RUNS", "5"))
SCALE = float(os.environ.get("TR_BENCH_SCALE", "1"))
if not 0 < SCALE <= 1:
    die("0 < TR_BENCH_SCALE <= 1")
ROWS = max(64, int(262144 * SCALE))
DIFFER = [(ROWS // 3, 5), (ROWS // 2, 700), (ROWS - 1, COLS - 1)]


def make(tmp):
    a_path, b_path = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
    a = np.lib.format.open_memmap(a_path, "w+", np.float32, (ROWS, COLS))
    b = np.lib.format.open_memmap(b_path, "w+", np.float32, (ROWS, COLS))
    rng = np.random.default_rng(5)
    for r in range(0, ROWS, 16384):
        block = rng.standard_normal((min(16384, ROWS - r), COLS), dtype=np.float32)
        a[r:r + len(block)] = block
        b[r:r + len(block)] = block
    for r, c in DIFFER:
        b[r, c] += 1
    a.flush()
    b.flush()
    del a, b
    return a_path, b_path


def numpy_compare(a_path, b_path):
    t0 = time.perf_counter()
    a = np.load(a_path, mmap_mode="r")
    b = np.load(b_path, mmap_mode="r")
    close = np.allclose(a, b, rtol=RTOL, atol=ATOL)
    first = None if close else np.unravel_index(
        int(np.argmax(~np.isclose(a, b, rtol=RTOL, atol=ATOL))), a.shape)
    return time.perf_counter() - t0, first


def tensorrun_compare(a_path, b_path):
    t0 = time.perf_counter()
    p = subprocess.run([TENSORRUN, "compare", a_path, b_path, "--max-report", "1"],
                       capture_output=True, text=True)
    t = time.perf_counter() - t0
    if p.returncode != 1:
        die(f"tensorrun compare exited {p.returncode}: {p.stderr.strip()}")
    return t, p.stdout


def main():
    tmp = tempfile.mkdtemp(prefix="tensorrun-bench-compare-")
    try:
        a_path, b_path = make(tmp)
        for path in (a_path, b_path):  # into the page cache
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass
        times = {"tr": [], "np": []}
        firsts = {}
        for r in range(RUNS):
            order = ["tr", "np"] if r % 2 == 0 else ["np", "tr"]
            for who in order:
                if who == "tr":
                    t, firsts["tr"] = tensorrun_compare(a_path, b_path)
                else:
                    t, firsts["np"] = numpy_compare(a_path, b_path)
                times[who].append(t)
        s = subprocess.run([os.path.join(BINDIR, "stream"), "1024", "64", "5"],
                           capture_output=True, text=True, check=True).stdout.split()
        read_gbps = float(s[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        nbytes = 2 * ROWS * COLS * 4
        floor = nbytes / (read_gbps * 1e9)
        ratio = med["tr"] / med["np"]
        want = "at [%d,%d]" % DIFFER[0]
        print(f"compare_bench: medians of {RUNS} interleaved rounds, two {ROWS} x {COLS} f32 "
              f"files ({nbytes / 2**30:.2f} GiB in all) differing in {len(DIFFER)} elements, "
              f"{os.cpu_count()} threads, from the page cache")
        print(f"  tensorrun compare (whole process)  {med['tr']:8.3f} s")
        print(f"  NumPy allclose + first index       {med['np']:8.3f} s   tensorrun/it {ratio:.3f}x"
              f"   <= 0.2x  {'MET' if ratio <= 0.2 else 'NOT MET'}")
        print(f"  floor: 2 reads at {read_gbps:.1f} GB/s (bench/stream read-sum) = {floor:.3f} s"
              f"   tensorrun reaches {floor / med['tr']:.0%} of that bandwidth")
        ok = (f"{len(DIFFER)} of {ROWS * COLS} differ" in firsts["tr"] and want in firsts["tr"]
              and tuple(map(int, firsts["np"])) == DIFFER[0])
        print(f"  checks: both found {len(DIFFER)} differences, the first {want}: "
              f"{'yes' if ok else 'NO'}")
        if SCALE != 1:
            print(f"  note: TR_BENCH_SCALE={SCALE:g}; the target is for the full size")
        if not ok:
            sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
