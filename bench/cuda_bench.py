#!/usr/bin/python3
"""cuda_bench.py - tensorrun's CUDA kernels against PyTorch on the same GPU.

usage: cuda_bench.py TENSORRUN [WORKDIR]

Each figure is a ratio, printed with the two times it comes from:

  h2d       a mapped 4 GiB .npy moved to cuda:0 (to()), against PyTorch's
            copy from pinned memory: the target is at least 0.8 of its
            bandwidth
  add, sum  x * 2 + 1 and sum(x) over 1 GiB of f32 on the device, against
            the device's copy bandwidth (PyTorch's clone): at least 0.8
  softmax   softmax of 8192 x 8192 f32 along the last dimension, against
            torch.softmax: at least its speed
  matmul    8192^3 f32 (no TF32 on either side), against torch.matmul:
            within 10%

A tensorrun time is the difference between a stage that does the op R (40)
times and one that does it once, divided by R - 1, so that neither
start-up, transfers nor the final copy to the host count; each stage ends
with a value copied to the host, which waits for the device.  Each run is
the best of 3; a difference that is not positive is reported as a failed
measurement, not as a ratio.  Needs
PyTorch with CUDA; exits 77 without a GPU.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

REPEAT = 40


def run_seconds(tensorrun, work, text):
    """Wall seconds of tensorrun running the pipeline text (best of 3)."""
    path = os.path.join(work, "p.yaml")
    with open(path, "w") as f:
        f.write(text)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([tensorrun, path, "-q"], check=True, cwd=work)
        best = min(best, time.perf_counter() - start)
    return best


def stage_seconds(tensorrun, work, make, step, repeat):
    """A CUDA stage: the statements of make, then step repeat times (each
    reads the last one's c, so none is dead), then c back to the host."""
    lines = ["tensorrun: 1", "stages:", "  - name: s", "    device: cuda", "    do:"]
    lines += [f"      - {m}" for m in make] + [f"      - {step}"] * repeat
    lines += ["      - t = sum(narrow(flatten(c), 0, 0, 1))", "outputs: {t: t.npy}"]
    return run_seconds(tensorrun, work, "\n".join(lines) + "\n")


def per_op(tensorrun, work, make, step):
    """Seconds per op, or None when the runs' difference is not positive."""
    one = stage_seconds(tensorrun, work, make, step, 1)
    many = stage_seconds(tensorrun, work, make, step, REPEAT)
    return (many - one) / (REPEAT - 1) if many > one else None


def torch_seconds(fn, torch):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def report(name, ours, theirs, target):
    """One line: the times, and the peer's time over ours (higher is better)."""
    if ours is None or ours <= 0:
        print(json.dumps({"bench": name, "failed": "the runs' difference was not positive",
                          "peer_s": round(theirs, 6), "target": target}))
        return
    print(json.dumps({"bench": name, "tensorrun_s": round(ours, 6), "peer_s": round(theirs, 6),
                      "ratio": round(theirs / ours, 3), "target": target}))


def main():
    tensorrun = os.path.abspath(sys.argv[1])
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="tensorrun-cuda-bench-")
    try:
        import numpy as np
        import torch
    except ImportError as e:
        sys.exit(f"cuda_bench: needs numpy and PyTorch ({e})")
    if not torch.cuda.is_available():
        print("cuda_bench: no GPU that PyTorch can use: nothing to measure")
        sys.exit(77)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda:0")

    # h2d: a mapped file up, against pinned memory up
    n = 1 << 30  # 4 GiB of f32
    big = os.path.join(work, "big.npy")
    if not os.path.exists(big):
        np.lib.format.open_memmap(big, mode="w+", dtype="<f4", shape=(n,))[:] = 1
    np.save(os.path.join(work, "small.npy"), np.ones(1024, dtype="<f4"))
    up = ("tensorrun: 1\ninputs: {x: %s}\nstages:\n  - name: up\n    device: cuda\n"
          "    do: [\"t = sum(narrow(x, 0, 0, 1))\"]\noutputs: {t: t.npy}\n")
    # the run that moves 4 GiB less the one that moves 4 KiB: the copy alone
    ours = run_seconds(tensorrun, work, up % "big.npy") - run_seconds(tensorrun, work,
                                                                      up % "small.npy")
    ours = ours if ours > 0 else None
    pinned = torch.ones(n, dtype=torch.float32).pin_memory()
    theirs = torch_seconds(lambda: pinned.to(dev, non_blocking=True), torch)
    report("h2d 4 GiB mapped vs pinned", ours, theirs, ">= 0.8")

    # add and sum over 1 GiB, against the device's copy bandwidth
    m = 1 << 28
    x = torch.ones(m, dtype=torch.float32, device=dev)
    copy = torch_seconds(lambda: x.clone(), torch)
    # (x * 2 + 1 reads and writes 1 GiB, as clone does; sum reads it only)
    report("x * 2 + 1, 1 GiB f32 vs clone",
           per_op(tensorrun, work, [f"c = ones([{m}])"], "c = c * 2 + 1"), copy, ">= 0.8")
    report("sum 1 GiB f32 vs clone / 2",
           per_op(tensorrun, work, [f"v = ones([{m}])", "c = sum(v)"], "c = c + sum(v)"),
           copy / 2, ">= 0.8")
    s = torch.rand(8192, 8192, device=dev)
    report("softmax 8192x8192 f32",
           per_op(tensorrun, work, ["c = rand([8192, 8192])"], "c = softmax(c)"),
           torch_seconds(lambda: torch.softmax(s, -1), torch), ">= 1")
    report("matmul 8192^3 f32",
           per_op(tensorrun, work, ["v = rand([8192, 8192])", "c = v"], "c = matmul(v, c)"),
           torch_seconds(lambda: torch.matmul(s, s), torch), ">= 0.9")


if __name__ == "__main__":
    main()
