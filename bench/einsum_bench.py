#!/usr/bin/python3
"""einsum_bench.py - einsum('bik,bjk->bij', a, b) against matmul(a, b.mT) on
the same operands, and against NumPy's and PyTorch's einsum, reported as
ratios of medians.

The job: a and b f32 [B, N, K] (B = 16, N = 1024, K = 256 by default),
their batched product with b's rows as columns: 2 * B * N * N * K flops.
  tensorrun   `r = einsum('bik,bjk->bij', a, b)` and `r = a @ b.mT`, each
              as one eval stage that keeps r[:, 0] (so the 64 MiB product
              is not written out), timed by the stage's wall_ms (--stats
              json): the target is einsum within 10% of matmul
  NumPy       np.einsum(..., optimize=True) and np.matmul(a, b.mT)
  PyTorch     torch.einsum and torch.matmul(a, b.mT)
The peers are timed from inside, the operands loaded first, one call
before the clock starts; every round runs every contender once, in an order
rotated from round to round; the table has the medians of RUNS rounds.
The ratio einsum/matmul is reported, never asserted.

Environment: RUNS (default 7), TR_BENCH_SCALE (0 < S <= 1: S times N, for a
quick check), TR_BENCH_THREADS (default: the online cores), TMPDIR (where
the inputs go; removed unless KEEP_DATA=1).

Usage: einsum_bench.py TENSORRUN
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

PY = sys.executable
EQ = "bik,bjk->bij"


def die(msg):
    sys.exit(f"einsum_bench: {msg}")


if len(sys.argv) != 2:
    die("usage: einsum_bench.py TENSORRUN")
TENSORRUN = sys.argv[1]
RUNS = int(os.environ.get("RUNS", "7"))
SCALE = float(os.environ.get("TR_BENCH_SCALE", "1"))
if not 0 < SCALE <= 1:
    die("0 < TR_BENCH_SCALE <= 1")
THREADS = int(os.environ.get("TR_BENCH_THREADS", str(os.cpu_count() or 1)))
B, N, K = 16, max(8, int(1024 * SCALE)), 256
KEEP = os.environ.get("KEEP_DATA") == "1"


def child_env():
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(THREADS)
    return env


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    if r.returncode != 0:
        die(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr}")
    return r.stdout, r.stderr


def stage_ms(stderr):
    for line in stderr.splitlines():
        if line.startswith("{"):
            ev = json.loads(line)
            if ev.get("event") == "stage":
                return ev["wall_ms"]
    die("tensorrun printed no stage statistics")


PEER = """import sys, time
import numpy as np
{imports}
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
{setup}
f = lambda: {call}
f()
t0 = time.perf_counter()
r = f()
print("JOB %.6f" % (time.perf_counter() - t0))
"""

PEERS = {
    "NumPy einsum": ("", "", f"np.einsum('{EQ}', a, b, optimize=True)"),
    "NumPy matmul": ("", "", "np.matmul(a, np.swapaxes(b, 1, 2))"),
    "PyTorch einsum": ("import torch", f"torch.set_num_threads({THREADS}); a, b = torch.from_numpy(a), torch.from_numpy(b)",
                       f"torch.einsum('{EQ}', a, b)"),
    "PyTorch matmul": ("import torch", f"torch.set_num_threads({THREADS}); a, b = torch.from_numpy(a), torch.from_numpy(b)",
                       "torch.matmul(a, b.mT)"),
}


def main():
    work = tempfile.mkdtemp(prefix="tensorrun-bench-einsum-")
    try:
        rng = np.random.default_rng(7)
        pa, pb = os.path.join(work, "a.npy"), os.path.join(work, "b.npy")
        a = rng.standard_normal((B, N, K), dtype=np.float32)
        b = rng.standard_normal((B, N, K), dtype=np.float32)
        np.save(pa, a)
        np.save(pb, b)
        # the two agree (and are the product), at this size
        want = np.matmul(a[:, :4].astype(np.float64), np.swapaxes(b, 1, 2).astype(np.float64))[:, :, 0]
        contenders = {}
        for name, expr in (("tensorrun einsum", f"einsum('{EQ}', a, b)"), ("tensorrun matmul", "a @ b.mT")):
            out = os.path.join(work, name.split()[1] + ".npy")
            cmd = [TENSORRUN, "eval", f"r = {expr}; s = r[:, :4, 0]", "-i", f"a={pa}", "-i", f"b={pb}",
                   "-o", f"s={out}", "--threads", str(THREADS), "--stats", "json"]
            run(cmd)
            got = np.load(out).astype(np.float64)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-3 * np.sqrt(K)):
                die(f"{name} does not compute the product")
            contenders[name] = (lambda c: lambda: stage_ms(run(c)[1]) / 1e3)(cmd)
        for name, (imports, setup, call) in PEERS.items():
            script = os.path.join(work, name.replace(" ", "_") + ".py")
            with open(script, "w") as f:
                f.write(PEER.format(imports=imports, setup=setup, call=call))
            cmd = [PY, script, pa, pb]
            contenders[name] = (lambda c: lambda: float(run(c)[0].split()[-1]))(cmd)
        names = list(contenders)
        times = {n: [] for n in names}
        for r in range(RUNS):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                times[n].append(contenders[n]())
        med = {n: statistics.median(t) for n, t in times.items()}
        flops = 2.0 * B * N * N * K
        print(f"einsum('{EQ}') of f32 [{B}, {N}, {K}] x2, {THREADS} threads, medians of {RUNS} rounds")
        print(f"{'':22} {'seconds':>9} {'GFLOP/s':>9} {'/ tensorrun einsum':>19}")
        base = med["tensorrun einsum"]
        for n in names:
            print(f"{n:22} {med[n]:9.4f} {flops / med[n] / 1e9:9.1f} {med[n] / base:19.2f}")
        ratio = base / med["tensorrun matmul"]
        print(f"tensorrun einsum / matmul stage wall_ms: {ratio:.3f} (target: at most 1.10)")
        print(f"tensorrun einsum / NumPy einsum: {base / med['NumPy einsum']:.3f}; "
              f"/ PyTorch einsum: {base / med['PyTorch einsum']:.3f}")
    finally:
        if not KEEP:
            shutil.rmtree(work, ignore_errors=True)


main()
