#!/usr/bin/python3
"""shard_bench.py - what sharding costs: the search of
pipelines/search-sharded.yaml over a mapped [ROWS, 256] f32 .npy with
1024 queries, run whole, and run as 4 shards (--shard K/4) in 4 local
processes, 2 at a time (one per core, --threads 1 each), followed by the
merge (tensorrun concat of the shards' answers and
pipelines/search-merge.yaml).  The ideal is the same total CPU time
(user + system, of every process) as the whole run; the ratio is the
overhead of sharding.  The wall times are reported too, and both answers
are checked to be the same ids.  Medians of RUNS rounds.

Environment: RUNS (default 3), TR_BENCH_SCALE (0 < S <= 1: S times the
500000 rows), TMPDIR (where the 0.5 GiB input goes; removed afterwards).

Usage: shard_bench.py TENSORRUN SRCDIR
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SHARDS, PARALLEL, DIM, QUERIES, K = 4, 2, 256, 1024, 10


def die(msg):
    sys.exit(f"shard_bench: {msg}")


if len(sys.argv) != 3:
    die("usage: shard_bench.py TENSORRUN SRCDIR")
TENSORRUN, SRCDIR = sys.argv[1], sys.argv[2]
RUNS = int(os.environ.get("RUNS", "3"))
SCALE = float(os.environ.get("TR_BENCH_SCALE", "1"))
if not 0 < SCALE <= 1:
    die("0 < TR_BENCH_SCALE <= 1")
ROWS = max(2048 * SHARDS, int(500000 * SCALE))
SHARDED = os.path.join(SRCDIR, "pipelines", "search-sharded.yaml")
MERGE = os.path.join(SRCDIR, "pipelines", "search-merge.yaml")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tr(*args):
    return [TENSORRUN, *args]


def run_whole(tmp, emb, q):
    cpu0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(tr(SHARDED, "-D", f"k={K}", "-i", f"emb={emb}", "-i", f"q={q}",
                      "-o", f"best={tmp}/whole-v.npy", "-o", f"ids={tmp}/whole-i.npy", "-q"),
                   check=True)
    return time.perf_counter() - t0, children_cpu() - cpu0


def run_sharded(tmp, emb, q):
    cpu0, t0 = children_cpu(), time.perf_counter()
    pending = list(range(1, SHARDS + 1))
    running = []
    while pending or running:
        while pending and len(running) < PARALLEL:
            k = pending.pop(0)
            running.append(subprocess.Popen(tr(
                SHARDED, "--shard", f"{k}/{SHARDS}", "--threads", "1", "-D", f"k={K}",
                "-i", f"emb={emb}", "-i", f"q={q}", "-o", f"best={tmp}/v-{{shard}}.npy",
                "-o", f"ids={tmp}/i-{{shard}}.npy", "-q")))
        done = running.pop(0)
        if done.wait() != 0:
            die("a shard failed")
    parts = [f"{tmp}/{n}-{k}.npy" for n in "vi" for k in range(1, SHARDS + 1)]
    subprocess.run(tr("concat", f"{tmp}/v.npy", *parts[:SHARDS]), check=True)
    subprocess.run(tr("concat", f"{tmp}/i.npy", *parts[SHARDS:]), check=True)
    subprocess.run(tr(MERGE, "-D", f"k={K}", "-i", f"v={tmp}/v.npy", "-i", f"i={tmp}/i.npy",
                      "-o", f"best={tmp}/sharded-v.npy", "-o", f"ids={tmp}/sharded-i.npy", "-q"),
                   check=True)
    return time.perf_counter() - t0, children_cpu() - cpu0


def main():
    tmp = tempfile.mkdtemp(prefix="tensorrun-bench-shard-")
    try:
        emb, q = os.path.join(tmp, "emb.npy"), os.path.join(tmp, "q.npy")
        e = np.lib.format.open_memmap(emb, "w+", np.float32, (ROWS, DIM))
        rng = np.random.default_rng(11)
        for r in range(0, ROWS, 65536):
            e[r:r + 65536] = rng.standard_normal((min(65536, ROWS - r), DIM), dtype=np.float32)
        e.flush()
        del e
        np.save(q, rng.standard_normal((QUERIES, DIM), dtype=np.float32))
        with open(emb, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass
        whole, sharded = [], []
        for r in range(RUNS):
            for who in (["whole", "sharded"] if r % 2 == 0 else ["sharded", "whole"]):
                (whole if who == "whole" else sharded).append(
                    run_whole(tmp, emb, q) if who == "whole" else run_sharded(tmp, emb, q))
        wall_w, cpu_w = (statistics.median(x) for x in zip(*whole))
        wall_s, cpu_s = (statistics.median(x) for x in zip(*sharded))
        same = np.array_equal(np.load(f"{tmp}/whole-i.npy"), np.load(f"{tmp}/sharded-i.npy"))
        blocks = -(-ROWS // 2048)
        print(f"shard_bench: medians of {RUNS} rounds, the search of search-sharded.yaml over "
              f"{ROWS} x {DIM} f32 ({ROWS * DIM * 4 / 2**30:.2f} GiB, {blocks} blocks of 2048 "
              f"rows), {QUERIES} queries, top {K}")
        print(f"  whole, {os.cpu_count()} threads          wall {wall_w:7.2f} s   CPU {cpu_w:7.2f} s")
        print(f"  {SHARDS} shards, {PARALLEL} at a time, 1 thread each, + concat and merge"
              f"   wall {wall_s:7.2f} s   CPU {cpu_s:7.2f} s")
        print(f"  sharded/whole: CPU {cpu_s / cpu_w:.3f}x (ideal 1.0: the overhead of sharding), "
              f"wall {wall_s / wall_w:.3f}x")
        print(f"  checks: the sharded run's ids are the whole run's: {'yes' if same else 'NO'}")
        if SCALE != 1:
            print(f"  note: TR_BENCH_SCALE={SCALE:g}")
        if not same:
            sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
