#!/usr/bin/python3
"""peer_bench.py - the speed and memory targets, measured side by side
in one run and printed as one table.

Jobs (every contender maps its inputs; outputs are .npy files):
  1. y = x * 2.0 + 1.0; s = sum(y) over a mapped 1 GiB f32 .npy, only s
     kept: tensorrun against NumPy (np.load(mmap_mode="r"), the same
     expression, y.sum()) and against two floors that read the same file
     once in a fresh process: bench/mapped_sum (a C loop over the mapping)
     and tensorrun's own `s = sum(x)`.  Also the peak RssAnon (anonymous
     resident memory: the mapping is not counted) of tensorrun and NumPy.
  2. y = x[::2, 1000:9000] of a mapped [16384, 16384] f32 .npy to .npy:
     tensorrun against NumPy (np.ascontiguousarray, np.save).
  3. c = a @ b, 4096 x 4096 f32 .npy files to .npy: tensorrun against NumPy
     and PyTorch (the whole job), and the stage's wall_ms (--stats json)
     against bench/bare_sgemm, one cblas_sgemm of the same shape in its own
     process, on as many OpenBLAS threads as tensorrun has (the engine keeps
     the BLAS single-threaded and splits tiles over its OpenMP threads) and
     on one (and, with TR_BENCH_ONE_THREAD=1, tensorrun --threads 1's
     stage against the latter).
  4. bench/stream: the memory bandwidth of a read-sum loop over anonymous
     memory (the bytes of job 1) and of a STREAM triad, and the fraction of
     the read-sum bandwidth that job 1 reaches (file bytes / time).

Timing: tensorrun and the C floors are timed as whole processes, from the
outside.  NumPy and PyTorch are timed from inside, from before the load to
after the save, their imports left out (PyTorch's import alone takes over a
second); their whole processes are shown too, without a target.  Peak
RssAnon comes from separate runs watched by peak_anon.py, whose polling
would slow the timed ones.  Every round runs every contender once, in an
order rotated from round to round; the table has the medians of RUNS
rounds and ratios tensorrun / contender (below 1: tensorrun is faster or
smaller).  Before each run its inputs are read through once, so every
contender finds them in the page cache (fincore checks that they stay
there).  Targets are reported MET or NOT MET; nothing here fails on them.

Environment:
  RUNS              rounds (default 7; the issue asks for at least 7)
  TR_BENCH_SCALE    0 < S <= 1 (default 1): jobs 1 and 2 and the stream
                    buffers get S times the bytes, the matmul S times the
                    side (rounded to 64); the targets are for S = 1
  TR_BENCH_THREADS  threads of every contender (default: the online cores)
  TR_BENCH_ONE_THREAD=1  also time the matmul stage on one thread (adds
                    more than a minute where OpenBLAS is slow)
  TMPDIR            where the inputs go (about 2.2 GiB at S = 1; removed
                    afterwards unless KEEP_DATA=1, kept ones are reused)
  OUTDIR            where outputs go (default: a fresh directory in
                    /dev/shm, so that disk writeback does not decide)

Usage: peer_bench.py TENSORRUN BENCH_BINDIR
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
MIB = 1 << 20


def die(msg):
    sys.exit(f"peer_bench: {msg}")


def env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        die(f"{name}={os.environ[name]!r} is not a number")


if len(sys.argv) != 3:
    die("usage: peer_bench.py TENSORRUN BENCH_BINDIR")
TENSORRUN, BINDIR = sys.argv[1:]
RUNS = int(env_float("RUNS", 7))
SCALE = env_float("TR_BENCH_SCALE", 1)
THREADS = int(env_float("TR_BENCH_THREADS", len(os.sched_getaffinity(0))))
if RUNS < 1 or not 0 < SCALE <= 1 or THREADS < 1:
    die("RUNS and TR_BENCH_THREADS must be positive, 0 < TR_BENCH_SCALE <= 1")
KEEP = os.environ.get("KEEP_DATA") == "1"
ONE_THREAD = os.environ.get("TR_BENCH_ONE_THREAD") == "1"

N1 = max(1 << 20, int(256 * MIB * SCALE) // 1024 * 1024)   # job 1: f32 elements
ROWS2, COLS2 = max(2, int(16384 * SCALE)), 16384            # job 2
N3 = max(64, int(round(4096 * SCALE / 64)) * 64)            # job 3
READ_MIB = max(16, N1 * 4 // MIB)                           # job 4
TRIAD_MIB = max(8, READ_MIB // 2)

WORK = os.path.join(os.environ.get("TMPDIR") or "/tmp", "tensorrun-bench-peers")
os.makedirs(WORK, exist_ok=True)
if os.environ.get("OUTDIR"):
    OUT, OUT_IS_TEMP = os.environ["OUTDIR"], False
    os.makedirs(OUT, exist_ok=True)
elif os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
    OUT, OUT_IS_TEMP = tempfile.mkdtemp(prefix="tensorrun-bench-peers.", dir="/dev/shm"), True
else:
    OUT, OUT_IS_TEMP = tempfile.mkdtemp(prefix="out.", dir=WORK), True

X1, X2 = os.path.join(WORK, "x1.npy"), os.path.join(WORK, "x2.npy")
A3, B3 = os.path.join(WORK, "a.npy"), os.path.join(WORK, "b.npy")
SHAPES = {X1: (N1,), X2: (ROWS2, COLS2), A3: (N3, N3), B3: (N3, N3)}


def out(name):
    return os.path.join(OUT, name)


def remove(path):
    if os.path.exists(path):
        os.unlink(path)


# ------------------------------------------------------------ set-up

def check_space():
    """Enough free disk for the inputs and the outputs, before writing any."""
    need_in = sum(4 * int(np.prod(s)) + 128 for f, s in SHAPES.items()
                  if not (os.path.exists(f) and has_shape(f, s)))
    # the last round's outputs are kept for the checks: two slices, three products
    need_out = 2 * 4 * (ROWS2 // 2) * 8000 + 3 * 4 * N3 * N3 + MIB
    same = os.stat(WORK).st_dev == os.stat(OUT).st_dev
    for path, need in ((WORK, need_in + (need_out if same else 0)), (OUT, need_out)):
        free = shutil.disk_usage(path).free
        if free < need * 1.1:
            die(f"{path} has {free / MIB:.0f} MiB free, the benchmark needs "
                f"{need * 1.1 / MIB:.0f} MiB (set TMPDIR, OUTDIR or TR_BENCH_SCALE)")


def has_shape(path, shape):
    try:
        a = np.load(path, mmap_mode="r")
        return a.shape == shape and a.dtype == np.dtype("<f4")
    except (OSError, ValueError):
        return False


def make_inputs():
    rng = np.random.default_rng(10)
    for path, shape in SHAPES.items():
        if os.path.exists(path) and has_shape(path, shape):
            continue
        a = np.lib.format.open_memmap(path + ".part", mode="w+", dtype="<f4", shape=shape)
        flat = a.reshape(-1)
        step = 16 * MIB
        for i in range(0, flat.shape[0], step):
            n = min(step, flat.shape[0] - i)
            if path in (A3, B3):
                flat[i:i + n] = rng.uniform(-1, 1, n).astype("<f4")
            else:
                flat[i:i + n] = rng.standard_normal(n, dtype=np.float32)
        a.flush()
        del a, flat
        os.replace(path + ".part", path)


def yaml(name, inputs, statements, outputs):
    """A pipeline file; paths are JSON strings, which YAML reads as they are."""
    q = json.dumps
    text = "tensorrun: 1\ninputs: {%s}\nstages:\n  - name: %s\n    do:\n" % (
        ", ".join(f"{k}: {q(v)}" for k, v in inputs.items()), name)
    text += "".join(f"      - {s}\n" for s in statements)
    text += "outputs: {%s}\n" % ", ".join(f"{k}: {q(v)}" for k, v in outputs.items())
    path = os.path.join(WORK, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


# ------------------------------------------------------------ running

RESIDENT = {"min": 1.0, "checked": False}


def warm(paths):
    """Reads each file through, so that the run finds it in the page cache."""
    buf = bytearray(16 * MIB)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
        if shutil.which("fincore"):
            r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES", p],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip().isdigit():
                RESIDENT["checked"] = True
                RESIDENT["min"] = min(RESIDENT["min"], int(r.stdout) / os.path.getsize(p))


def child_env(**extra):
    env = dict(os.environ)  # OPENBLAS_CORETYPE and the rest as they are
    env.update({"OMP_NUM_THREADS": str(THREADS), "OPENBLAS_NUM_THREADS": str(THREADS),
                "PYTHONWARNINGS": "ignore"})
    env.update(extra)
    return env


def run(cmd, env=None):
    """Runs cmd; returns (whole-process seconds, stdout, stderr)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env or child_env())
    t = time.perf_counter() - t0
    if r.returncode != 0:
        die(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr}")
    return t, r.stdout, r.stderr


def peak_anon_kib(cmd):
    r = subprocess.run([PY, os.path.join(HERE, "peak_anon.py")] + cmd, capture_output=True,
                       text=True, env=child_env())
    if r.returncode != 0:
        die(f"peak_anon.py {' '.join(cmd)}: {r.stderr}")
    return int(r.stdout.split()[1])


def stage_ms(stderr):
    for line in stderr.splitlines():
        if line.startswith("{"):
            ev = json.loads(line)
            if ev.get("event") == "stage":
                return ev["wall_ms"]
    die("tensorrun printed no stage statistics")


# The peers print "JOB seconds": from before the load to after the save,
# their imports (before the clock starts) left out.
def peer(imports, body):
    return (f"import sys, time\n{imports}\nt0 = time.perf_counter()\n{body}\n"
            'print("JOB %.6f" % (time.perf_counter() - t0))\n')


NP_AFFINE = peer("import numpy as np", """x = np.load(sys.argv[1], mmap_mode="r")
y = x * np.float32(2.0) + np.float32(1.0)
s = y.sum()
np.save(sys.argv[2], s)""")
NP_SLICE = peer("import numpy as np", """x = np.load(sys.argv[1], mmap_mode="r")
np.save(sys.argv[2], np.ascontiguousarray(x[::2, 1000:9000]))""")
NP_MATMUL = peer("import numpy as np", """a = np.load(sys.argv[1], mmap_mode="r")
b = np.load(sys.argv[2], mmap_mode="r")
np.save(sys.argv[3], np.asarray(a @ b))""")
PT_MATMUL = peer("import numpy as np, torch\ntorch.set_num_threads(int(sys.argv[4]))",
                 """a = torch.from_numpy(np.load(sys.argv[1], mmap_mode="r"))
b = torch.from_numpy(np.load(sys.argv[2], mmap_mode="r"))
np.save(sys.argv[3], (a @ b).numpy())""")


def job_seconds(stdout):
    for line in stdout.splitlines():
        if line.startswith("JOB "):
            return float(line.split()[1])
    die("a peer printed no job time")


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


# ------------------------------------------------------------ the table

class Samples(dict):
    def add(self, key, value):
        self.setdefault(key, []).append(value)

    def med(self, key):
        return statistics.median(self[key]) if key in self else None


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    check_space()
    t_setup = time.perf_counter()
    make_inputs()
    torch_ok = have_torch()
    affine = yaml("affine", {"x": X1}, ["y = x * 2.0 + 1.0", "s = sum(y)"],
                  {"s": out("affine_tr.npy")})
    floor = yaml("floor", {"x": X1}, ["s = sum(x)"], {"s": out("floor_tr.npy")})
    slice_ = yaml("slice", {"x": X2}, ["y = x[::2, 1000:9000]"], {"y": out("slice_tr.npy")})
    matmul = yaml("matmul", {"a": A3, "b": B3}, ["c = a @ b"], {"c": out("matmul_tr.npy")})
    tr = [TENSORRUN, "run", "--threads", str(THREADS), "--stats", "json"]
    bare = os.path.join(BINDIR, "bare_sgemm")
    S = Samples()
    setup_s = time.perf_counter() - t_setup
    load_before = loadavg()

    def c_tr_affine():
        t, _, err = run(tr + [affine])
        S.add("j1 tr", t)
        S.add("j1 tr stage", stage_ms(err) / 1e3)

    def c_np_affine():
        t, o, _ = run([PY, "-c", NP_AFFINE, X1, out("affine_np.npy")])
        S.add("j1 np", job_seconds(o))
        S.add("j1 np whole", t)

    def c_floor_c():
        t, o, _ = run([os.path.join(BINDIR, "mapped_sum"), X1])
        S.add("j1 floor", t)
        S.add("j1 floor inner", float(o.split()[1]))
        S["floor sum"] = float(o.split()[0])

    def c_floor_tr():
        S.add("j1 floor tr", run(tr + [floor])[0])

    def c_mem_tr():
        S.add("j1 rss tr", peak_anon_kib(tr + [affine]))

    def c_mem_np():
        S.add("j1 rss np", peak_anon_kib([PY, "-c", NP_AFFINE, X1, out("affine_np.npy")]))

    def c_tr_slice():
        remove(out("slice_tr.npy"))
        S.add("j2 tr", run(tr + [slice_])[0])

    def c_np_slice():
        remove(out("slice_np.npy"))
        t, o, _ = run([PY, "-c", NP_SLICE, X2, out("slice_np.npy")])
        S.add("j2 np", job_seconds(o))
        S.add("j2 np whole", t)

    def c_tr_matmul():
        t, _, err = run(tr + [matmul])
        S.add("j3 tr", t)
        S.add("j3 tr stage", stage_ms(err) / 1e3)

    def c_tr1_matmul():
        t, _, err = run([TENSORRUN, "run", "--threads", "1", "--stats", "json", matmul])
        S.add("j3 tr1 stage", stage_ms(err) / 1e3)

    def c_np_matmul():
        t, o, _ = run([PY, "-c", NP_MATMUL, A3, B3, out("matmul_np.npy")])
        S.add("j3 np", job_seconds(o))
        S.add("j3 np whole", t)

    def c_pt_matmul():
        t, o, _ = run([PY, "-c", PT_MATMUL, A3, B3, out("matmul_pt.npy"), str(THREADS)])
        S.add("j3 pt", job_seconds(o))
        S.add("j3 pt whole", t)

    def c_bare_n():
        o = run([bare, str(N3), str(THREADS)])[1].split()
        S.add("j3 bare", float(o[0]))
        S["core"] = o[3]

    def c_bare_1():
        S.add("j3 bare1", float(run([bare, str(N3), "1"])[1].split()[0]))

    def c_stream():
        o = run([os.path.join(BINDIR, "stream"), str(READ_MIB), str(TRIAD_MIB), "10"])[1].split()
        S.add("j4 read", float(o[0]))
        S.add("j4 triad", float(o[1]))

    jobs = [
        ([X1], [c_tr_affine, c_np_affine, c_floor_c, c_floor_tr, c_mem_tr, c_mem_np]),
        ([X2], [c_tr_slice, c_np_slice]),
        ([A3, B3], [c_tr_matmul, c_np_matmul, c_bare_n, c_bare_1]
         + ([c_pt_matmul] if torch_ok else []) + ([c_tr1_matmul] if ONE_THREAD else [])),
        ([], [c_stream]),
    ]
    t_runs = time.perf_counter()
    for r in range(RUNS):
        for inputs, contenders in jobs:
            k = r % len(contenders)
            for c in contenders[k:] + contenders[:k]:
                warm(inputs)
                c()
    runs_s = time.perf_counter() - t_runs
    load_after = loadavg()
    checks = correctness(torch_ok, S)
    table(S, torch_ok)
    print(f"\nrounds: {RUNS}, threads: {THREADS} of {os.cpu_count()} online cores, "
          f"TR_BENCH_SCALE={SCALE:g} (job 1: {N1 * 4 / MIB:.0f} MiB, job 2: "
          f"[{ROWS2}, {COLS2}], job 3: {N3}^3, stream: {READ_MIB} MiB read, "
          f"3 x {TRIAD_MIB} MiB triad)")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
          f"inputs in {WORK}, outputs in {OUT}")
    print("page cache: every input read through before each run; "
          + (f"fincore found at least {RESIDENT['min'] * 100:.1f}% of it resident"
             if RESIDENT["checked"] else "no fincore to check residency"))
    print(f"load average (1, 5, 15 min): {load_before} before, {load_after} after; "
          f"set-up {setup_s:.0f} s, runs {runs_s:.0f} s")
    print("checks: " + "; ".join(checks))


def correctness(torch_ok, S):
    res = []
    t, n = np.load(out("affine_tr.npy")), np.load(out("affine_np.npy"))
    f = np.load(out("floor_tr.npy"))
    x = np.load(X1, mmap_mode="r")
    ref = sum(float((x[i:i + 16 * MIB].astype("f8") * 2 + 1).sum())
              for i in range(0, x.shape[0], 16 * MIB))
    ref_x = sum(float(x[i:i + 16 * MIB].astype("f8").sum()) for i in range(0, x.shape[0], 16 * MIB))
    res.append(f"job 1 sum: tensorrun {float(t):.7g}, NumPy {float(n):.7g}, f64 {ref:.7g}")
    res.append(f"sum(x): tensorrun {float(f):.7g}, mapped_sum {S['floor sum']:.7g}, f64 {ref_x:.7g}")
    same = np.array_equal(np.load(out("slice_tr.npy"), mmap_mode="r"),
                          np.load(out("slice_np.npy"), mmap_mode="r"))
    res.append("job 2 output " + ("equals NumPy's" if same else "DIFFERS from NumPy's"))
    c = np.load(out("matmul_tr.npy"), mmap_mode="r")
    for name in ["np"] + (["pt"] if torch_ok else []):
        p = np.load(out(f"matmul_{name}.npy"), mmap_mode="r")
        rel = float(np.abs(c - p).max() / np.abs(p).max())
        res.append(f"job 3 largest difference from {'NumPy' if name == 'np' else 'PyTorch'}: "
                   f"{rel:.2g} of the largest element")
    return res


def table(S, torch_ok):
    rows = []  # job, contender, median text, ratio text, target text, verdict

    def sec(v):
        return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.3f} s"

    def rng(key, fmt):
        v = S[key]
        return f"{fmt(min(v))} .. {fmt(max(v))}"

    def row(job, who, key, fmt=sec, base=None, target=None, ratio=None):
        m = S.med(key)
        if ratio is None and base is not None:
            ratio = S.med(base) / m
        verdict = "" if target is None or ratio is None else ("MET" if ratio <= target else "NOT MET")
        rows.append((job, who, fmt(m), rng(key, fmt),
                     "" if ratio is None else f"{ratio:.3f}x",
                     "" if target is None else f"<= {target}x", verdict))

    kib = lambda v: f"{v / 1024:.1f} MiB"
    j1 = "1 x*2+1, sum (1 GiB)" if SCALE == 1 else "1 x*2+1, sum"
    row(j1, "tensorrun (whole process)", "j1 tr", ratio=1.0)
    row(j1, "  its stage wall_ms", "j1 tr stage")
    row(j1, "NumPy (load..save)", "j1 np", base="j1 tr", target=0.1)
    row(j1, "NumPy (whole process)", "j1 np whole", base="j1 tr")
    row(j1, "floor: mapped_sum (C)", "j1 floor", base="j1 tr", target=1.5)
    row(j1, "  its mmap..sum", "j1 floor inner")
    row(j1, "floor: tensorrun sum(x)", "j1 floor tr", base="j1 tr")
    row(j1, "tensorrun peak RssAnon", "j1 rss tr", fmt=kib, ratio=1.0)
    row(j1, "NumPy peak RssAnon", "j1 rss np", fmt=kib, base="j1 rss tr", target=0.05)
    j2 = "2 x[::2, 1000:9000]"
    row(j2, "tensorrun (whole process)", "j2 tr", ratio=1.0)
    row(j2, "NumPy (load..save)", "j2 np", base="j2 tr", target=0.6)
    row(j2, "NumPy (whole process)", "j2 np whole", base="j2 tr")
    j3 = f"3 matmul {N3}^3"
    row(j3, "tensorrun (whole process)", "j3 tr", ratio=1.0)
    row(j3, "NumPy (load..save)", "j3 np", base="j3 tr", target=1.0)
    row(j3, "NumPy (whole process)", "j3 np whole", base="j3 tr")
    if torch_ok:
        row(j3, "PyTorch (load..save)", "j3 pt", base="j3 tr", target=1.0)
        row(j3, "PyTorch (whole process)", "j3 pt whole", base="j3 tr")
    else:
        rows.append((j3, "PyTorch", "not installed", "", "", "", ""))
    row(j3, "tensorrun stage wall_ms", "j3 tr stage", ratio=1.0)
    row(j3, f"bare sgemm, {THREADS} BLAS threads", "j3 bare", base="j3 tr stage", target=1.05)
    row(j3, "bare sgemm, 1 BLAS thread", "j3 bare1", base="j3 tr stage")
    if "core" in S:
        rows.append((j3, f"  (OpenBLAS kernels: {S['core']})", "", "", "", "", ""))
    if ONE_THREAD:
        row(j3, "tensorrun --threads 1 stage", "j3 tr1 stage", ratio=1.0)
        row(j3, "bare sgemm, 1 BLAS thread", "j3 bare1", base="j3 tr1 stage", target=1.05)
    j4 = "4 bandwidth"
    gbs = lambda v: f"{v:.2f} GB/s"
    job1_bytes = N1 * 4 + 128
    S["j4 job1"] = [job1_bytes / t / 1e9 for t in S["j1 tr"]]
    S["j4 job1 stage"] = [job1_bytes / t / 1e9 for t in S["j1 tr stage"]]
    S["j4 floor"] = [job1_bytes / t / 1e9 for t in S["j1 floor"]]
    row(j4, "stream read-sum", "j4 read", fmt=gbs)
    row(j4, "stream triad", "j4 triad", fmt=gbs)
    read = S.med("j4 read")
    row(j4, "job 1 tensorrun (whole)", "j4 job1", fmt=gbs, ratio=S.med("j4 job1") / read)
    row(j4, "job 1 tensorrun (stage)", "j4 job1 stage", fmt=gbs,
        ratio=S.med("j4 job1 stage") / read)
    row(j4, "job 1 floor mapped_sum", "j4 floor", fmt=gbs, ratio=S.med("j4 floor") / read)

    head = ("job", "contender", "median", "min .. max", "tensorrun/it", "target", "")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    print(f"peer_bench: medians of {RUNS} interleaved rounds; tensorrun/it below 1 means "
          "tensorrun is faster or smaller")
    print("(job 4: the ratio column is the fraction of the stream read-sum bandwidth)")
    last = None
    for r in [head] + rows:
        r, last = (("",) + r[1:] if r[0] == last else r), r[0]
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) if i < 6 else c
                        for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    if SCALE != 1:
        print(f"note: TR_BENCH_SCALE={SCALE:g}; the targets are for the full size")
    if RUNS < 7:
        print(f"note: {RUNS} rounds; the issue asks for medians of at least 7")


if __name__ == "__main__":
    try:
        main()
    finally:
        if not KEEP:
            for p in SHAPES:
                remove(p)
                remove(p + ".part")
            for f in ("affine", "floor", "slice", "matmul"):
                remove(os.path.join(WORK, f + ".yaml"))
            try:
                os.rmdir(WORK)
            except OSError:
                pass
        for f in ("affine", "floor", "slice", "matmul"):
            for who in ("tr", "np", "pt"):
                remove(out(f"{f}_{who}.npy"))
        if OUT_IS_TEMP:
            shutil.rmtree(OUT, ignore_errors=True)
