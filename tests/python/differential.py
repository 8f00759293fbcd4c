#!/usr/bin/python3
"""Differential test of every op through `tensorrun eval`, against NumPy and PyTorch.

For every op that `tensorrun ops --json` lists and every dtype its entry says
it takes, statements run through `tensorrun eval` and NumPy and PyTorch (CPU)
compute the same thing in float64, with PyTorch's semantics where the man pages
promise them: type promotion between tensors and with weak scalars, integer
true division giving f32, NaN winning in max/min/maximum/minimum/clamp,
stable sorts and topk with NaN last (first when descending), sums of integers
in i64/u64.  Inputs are broadcast, strided (x.T, x[::2, 1:], x[::-1, ::-2],
x.mT, x[..., None]), 0-d and empty; reductions take negative dims, lists of
dims and keepdim; float inputs carry NaN, +-inf and -0.0; integer arithmetic
must wrap, integer matmul, dot and outer included (the exact sum of products
modulo 2**bits, over random dtypes, shapes, batches and views); bool sorts
false before true.

Integer, bool, copy, view, cast and index results must match exactly, and so
must quantisation (its reference repeats cpu/quantize.c's float32 arithmetic).  Float
results must lie within a tolerance fitted to the dtype and the op: f32/f64
elementwise about 8 ulp; f16/bf16 (computed in f32, then rounded) within 1
ulp of the float64 result rounded through f32; sums within log2(n)*eps*sum|x|
(pairwise summation); matmul within K*eps*sum|a||b|.  bf16 cannot be in .npy:
it goes in as f32 and `cast(x, bf16)` and comes back as .safetensors, so its
dtype is checked too.  rand/randn are checked for dtype, shape, range,
moments and determinism; sum, mean, softmax, matmul, norm and cumsum must give
the same bits with --threads 1 and --threads 2.

Checks are batched into few eval calls; a batch that fails is split until
the failing checks are alone.  Nothing is skipped: an op without a kernel
("cannot run yet") or without a check of its own counts as a failure, and
so does a dtype that PyTorch takes for an op (probed on the peer) but
`ops --json` does not list.  Each failure prints the eval command that
reproduces it (its inputs stay in WORKDIR/in).

Usage: differential.py TENSORRUN WORKDIR     (exit 0 when all agree)

DIFF_OPS=op,op,... runs only the checks of those ops (while working on them).
"""
import concurrent.futures
import hashlib
import json
import math
import os
import re
import shlex
import struct
import subprocess
import sys
import threading
import warnings

import numpy as np
import torch
import torch.nn.functional as F

TENSORRUN, WORK = sys.argv[1], sys.argv[2]
np.seterr(all="ignore")
warnings.simplefilter("ignore", RuntimeWarning)   # NaN, inf and empty slices are meant
torch.set_num_threads(1)
RNG = np.random.default_rng(20240611)

DTYPES = ["bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]
UNSIGNED = ["u8", "u16", "u32", "u64"]
SIGNED = ["i8", "i16", "i32", "i64"]
INTS = UNSIGNED + SIGNED
FLOATS = ["f16", "bf16", "f32", "f64"]
# bf16 is carried in NumPy as float32 arrays that hold bf16 values
NP = dict(bool=np.bool_, u8=np.uint8, u16=np.uint16, u32=np.uint32, u64=np.uint64,
          i8=np.int8, i16=np.int16, i32=np.int32, i64=np.int64,
          f16=np.float16, bf16=np.float32, f32=np.float32, f64=np.float64)
NAME_OF = {np.dtype(v): k for k, v in NP.items() if k != "bf16"}
BITS = dict(bool=8, u8=8, u16=16, u32=32, u64=64, i8=8, i16=16, i32=32, i64=64,
            f16=16, bf16=16, f32=32, f64=64)
PREC = dict(f16=(11, -14), bf16=(8, -126), f32=(24, -126), f64=(53, -1022))  # (digits, emin)
EPS = {k: 2.0 ** (1 - p) for k, (p, _) in PREC.items()}
BF16_MAX = (2 - 2 ** -7) * 2.0 ** 127
TORCH_DT = dict(bool=torch.bool, u8=torch.uint8, i8=torch.int8, i16=torch.int16, i32=torch.int32,
                i64=torch.int64, f16=torch.float16, bf16=torch.bfloat16, f32=torch.float32,
                f64=torch.float64)

checks = 0
failures = []
lock = threading.Lock()
skipped = {}        # op -> set of labels
covered = set()


# ---------------------------------------------------------------- values

class TV:
    """A typed value: a tensorrun dtype name and a NumPy array holding its values."""
    def __init__(self, dt, a):
        self.dt, self.a = dt, np.asarray(a, dtype=NP[dt])

    def view(self, fn):
        return TV(self.dt, fn(self.a))


def round_bf16(a):
    """float64 values rounded to bfloat16 (to nearest, ties to even), as float32."""
    a = np.asarray(a, dtype=np.float64)
    _, e = np.frexp(a)
    ulp = np.ldexp(1.0, np.maximum(e, -125) - 8)
    r = np.round(a / ulp) * ulp
    r = np.where(np.isfinite(a), r, a)
    r = np.where(np.abs(r) > BF16_MAX, np.copysign(np.inf, a), r)
    return r.astype(np.float32)


def round_to(dt, a, via_f32=False):
    """float64 values rounded to the float dtype dt; through f32 first for results
    that tensorrun computes in f32 (f16 and bf16 are storage types)."""
    a = np.asarray(a, dtype=np.float64)
    if via_f32 and dt in ("f16", "bf16"):
        a = a.astype(np.float32).astype(np.float64)
    return round_bf16(a) if dt == "bf16" else a.astype(NP[dt])


def limits(dt):
    info = np.iinfo(NP[dt])
    return int(info.min), int(info.max)


def convert(x, dt):
    """cast(x, dt) as tensorrun(1), DTYPE CONVERSION says: float to int truncates and
    saturates (NaN -> 0), integer narrowing wraps, floats round to nearest."""
    src, a = x.dt, x.a
    if src == dt:
        return TV(dt, a.copy())
    if dt == "bool":
        return TV(dt, a != 0)
    if dt in FLOATS:
        if src in FLOATS or dt not in ("f32", "f64"):
            return TV(dt, round_to(dt, a.astype(np.float64)))
        return TV(dt, a.astype(NP[dt]))
    if src in FLOATS:
        f = np.trunc(a.astype(np.float64))
        lo, hi = limits(dt)
        out = np.zeros(a.shape, NP[dt])
        big, small = f >= float(hi), f <= float(lo)
        mid = ~(big | small | np.isnan(f))
        out[mid] = f[mid].astype(NP[dt])
        out[big], out[small] = hi, lo
        return TV(dt, out)
    return TV(dt, a.astype(NP[dt]))  # integers and bool: two's complement wrap


def promote(d1, d2):
    """Result dtype of two tensors: PyTorch's rules, and tensorrun-pipeline(5)'s for the unsigned
    types PyTorch lacks (smallest signed type holding both; u64 with signed: None)."""
    if d1 == d2:
        return d1
    if d1 == "bool" or d2 == "bool":
        return d2 if d1 == "bool" else d1
    if d1 in FLOATS and d2 in FLOATS:
        if {d1, d2} == {"f16", "bf16"}:
            return "f32"
        return d1 if BITS[d1] > BITS[d2] else d2
    if d1 in FLOATS or d2 in FLOATS:
        return d1 if d1 in FLOATS else d2
    if (d1 in SIGNED) == (d2 in SIGNED):
        return d1 if BITS[d1] > BITS[d2] else d2
    u, s = (d1, d2) if d1 in UNSIGNED else (d2, d1)
    if u == "u64":
        return None
    return "i%d" % max(2 * BITS[u], BITS[s])


def promote_weak(dt, s):
    """Result dtype of a tensor and a number written in the statement (a weak scalar)."""
    if isinstance(s, bool):
        return dt
    if isinstance(s, int):
        return "i64" if dt == "bool" else dt
    return dt if dt in FLOATS else "f32"


def rtype(*vals):
    tensors = [v for v in vals if isinstance(v, TV)]
    dt = tensors[0].dt
    for t in tensors[1:]:
        dt = promote(dt, t.dt)
        if dt is None:
            return None
    for s in vals:
        if not isinstance(s, TV) and s is not None:
            dt = promote_weak(dt, s)
    return dt


def conv(v, dt):
    """A tensor or weak scalar as values of dtype dt."""
    if isinstance(v, TV):
        return convert(v, dt).a
    sdt = "bool" if isinstance(v, bool) else "i64" if isinstance(v, int) else "f64"
    return convert(TV(sdt, np.array(v)), dt).a


def fdt(dt):
    """The dtype of a float op's result: floats stay, integers and bool give f32."""
    return dt if dt in FLOATS else "f32"


def fvals(x):
    """x's values as a float op computes with them (integers through f32), in float64."""
    return convert(x, fdt(x.dt)).a.astype(np.float64)


def acc(dt):
    """eps of the precision a float op on dt computes in."""
    return EPS["f64"] if dt == "f64" else EPS["f32"]


def t64(a):
    return torch.from_numpy(np.array(a, np.float64, order="C"))


SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan]


def gen(dt, shape, kind="small", specials=True):
    """Test values of dtype dt.  kind: 'full' (integers over their whole range,
    floats ~N(0, 100)), 'small' (integers near 0, floats ~N(0, 2)), 'mix' (many
    ties: half small, half full integers; floats in steps of 0.5), 'pos' (no
    negatives, no zero), 'exp' (integers 0..4, floats as small)."""
    n = int(np.prod(shape, dtype=np.int64))
    if dt == "bool":
        a = RNG.integers(0, 2, n).astype(bool)
    elif dt in INTS:
        lo, hi = limits(dt)
        full = RNG.integers(lo, hi, n, dtype=NP[dt], endpoint=True)
        if n >= 4:
            full[:4] = [lo, hi, 0, 1] if dt in UNSIGNED else [lo, hi, -1, 0]
            full = RNG.permutation(full)
        small = RNG.integers(0, 13, n) if dt in UNSIGNED else RNG.integers(-6, 7, n)
        a = {"full": full, "small": small, "pos": RNG.integers(1, 10, n), "exp": RNG.integers(0, 5, n),
             "mix": np.where(RNG.integers(0, 2, n) == 1, small.astype(NP[dt]), full)}[kind]
        a = a.astype(NP[dt])
    else:
        v = RNG.standard_normal(n)
        v = {"full": v * 100, "small": v * 2, "exp": v * 2, "pos": np.abs(v) * 2 + 0.125,
             "mix": np.round(v * 4) / 2}[kind]
        if specials and kind != "pos" and n >= 8:
            v[RNG.choice(n, len(SPECIALS), replace=False)] = SPECIALS
        a = round_to(dt, v)
    return TV(dt, np.asarray(a).reshape(shape))


# ---------------------------------------------------------------- expectations

def ordered(g, dt):
    """Float bits as integers ordered like the values (+0 and -0 both 0)."""
    if dt == "f64":
        b, sign = np.array(g, np.float64, order="C").view(np.uint64), np.uint64(1 << 63)
        m = (b & ~sign).astype(np.float64)   # exact for the distances that matter here
        return np.where((b & sign) != 0, -m, m)
    if dt == "f32":
        b, sign = np.array(g, np.float32, order="C").view(np.uint32).astype(np.int64), 1 << 31
    elif dt == "f16":
        b, sign = np.array(g, np.float16, order="C").view(np.uint16).astype(np.int64), 1 << 15
    else:
        b, sign = (np.array(g, np.float32, order="C").view(np.uint32) >> 16).astype(np.int64), 1 << 15
    m = b & (sign - 1)
    return np.where((b & sign) != 0, -m, m)


def ulp(dt, r):
    p, emin = PREC[dt]
    r = np.asarray(r, np.float64)
    _, e = np.frexp(r)
    e = np.where(np.isfinite(r) & (r != 0), e, emin + 1)
    return np.ldexp(1.0, np.maximum(e, emin + 1) - p)


def first_bad(bad, got, exp, tol=None):
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    msg = f"{int(bad.sum())} of {bad.size} values differ; first at {list(idx)}: expected {exp[idx]!r}, got {got[idx]!r}"
    if tol is not None:
        msg += f" (tolerance {float(tol[idx]):.3g})"
    return msg


def head(gdt, g, dt, shape):
    if gdt != dt:
        return f"dtype {gdt}, expected {dt}"
    if tuple(g.shape) != tuple(shape):
        return f"shape {list(g.shape)}, expected {list(shape)}"
    return None


class Exact:
    """Equal values (NaN matches NaN; -0.0 and 0.0 differ only with zero_sign)."""
    def __init__(self, dt, values, zero_sign=False):
        self.dt, self.ref, self.zero_sign = dt, np.asarray(values, NP[dt]), zero_sign

    def check(self, gdt, g):
        msg = head(gdt, g, self.dt, self.ref.shape)
        if msg:
            return msg
        if self.dt in FLOATS:
            e, gg = self.ref.astype(np.float64), g.astype(np.float64)
            bad = ~((e == gg) | (np.isnan(e) & np.isnan(gg)))
            if self.zero_sign:
                bad |= ~np.isnan(e) & (np.signbit(e) != np.signbit(gg))
        else:
            e, gg = self.ref, g
            bad = e != gg
        bad = np.asarray(bad)
        return first_bad(bad, gg, e) if bad.any() else None


class Close:
    """A float result near the float64 reference ref: within tol + 1 ulp of the
    result's dtype, or for f16/bf16 within 1 ulp of ref rounded through f32.
    NaN must match NaN and infinities must be exact."""
    def __init__(self, dt, ref, tol=0.0):
        self.dt, self.ref = dt, np.asarray(ref, np.float64)
        tol = np.broadcast_to(np.asarray(tol, np.float64), self.ref.shape)
        self.tol = np.where(np.isfinite(self.ref) & ~np.isnan(tol), tol, 0.0)

    def check(self, gdt, g):
        msg = head(gdt, g, self.dt, self.ref.shape)
        if msg:
            return msg
        ref, r = self.ref, round_to(self.dt, self.ref, via_f32=True).astype(np.float64)
        gg = g.astype(np.float64)
        nn = ~np.isnan(ref) & ~np.isnan(gg)
        ok = (np.isnan(ref) & np.isnan(gg)) | (nn & (gg == r))
        fin = nn & np.isfinite(gg) & np.isfinite(ref)
        ok |= fin & (np.abs(gg - ref) <= self.tol + ulp(self.dt, r))
        if self.dt in ("f16", "bf16"):
            ok |= nn & (np.abs(ordered(g, self.dt) - ordered(r, self.dt)) <= 1)
        bad = np.asarray(~ok)
        return first_bad(bad, gg, r, self.tol) if bad.any() else None


class Custom:
    def __init__(self, dt, fn):
        self.dt, self.fn = dt, fn

    def check(self, gdt, g):
        return self.fn(gdt, g)


def close_rel(dt, ref, k=8.0, atol=0.0):
    """Elementwise: about k ulp of the computing precision, plus atol (in units of
    that eps) for ops whose best f32 formula loses absolute accuracy."""
    e = acc(dt)
    ref = np.asarray(ref, np.float64)
    return Close(dt, ref, k * e * np.abs(ref) + atol * e)


# ---------------------------------------------------------------- cases and running

class Case:
    def __init__(self, op, label, inputs, stmts, outs, error=None):
        self.op, self.label, self.inputs, self.outs, self.error = op, label, inputs, outs, error
        pre = [f"{n} = cast({n}, bf16)" for n, v in inputs.items() if v.dt == "bf16"]
        self.stmts = pre + list(stmts)
        self.names = set(inputs) | {t.strip() for s in self.stmts for t in s.split("=", 1)[0].split(",")}
        self.files = {n: input_file(v) for n, v in inputs.items()}
        self.id = len(CASES)
        self.paths = {n: os.path.join(WORK, "out", f"c{self.id}_{n}" + (".safetensors" if e.dt == "bf16" else ".npy"))
                      for n, e in outs.items()}

    def command(self, prefix=""):
        ren = (lambda s: s) if not prefix else (lambda s: rename(s, self.names, prefix))
        args = []
        for n, p in self.files.items():
            args += ["-i", f"{prefix}{n}={p}"]
        for n, p in self.paths.items():
            args += ["-o", f"{prefix}{n}={p}"]
        return [ren(s) for s in self.stmts], args

    def repro(self):
        stmts, args = self.command()
        return " ".join(shlex.quote(a) for a in [TENSORRUN, "eval", "; ".join(stmts), *args])


CASES = []
IDENT = re.compile(r'(?<![\w."])([A-Za-z_]\w*)(?![\w"])')


def rename(text, names, prefix):
    return IDENT.sub(lambda m: prefix + m.group(1) if m.group(1) in names else m.group(1), text)


_written = set()


def input_file(tv):
    arr = np.array(tv.a, order="C")
    h = hashlib.sha1(arr.dtype.str.encode() + str(arr.shape).encode() + arr.tobytes()).hexdigest()[:16]
    path = os.path.join(WORK, "in", h + ".npy")
    if path not in _written:
        np.save(path, arr)
        _written.add(path)
    return path


ONLY = set(filter(None, os.environ.get("DIFF_OPS", "").split(",")))


def case(op, label, inputs, stmts, outs, error=None):
    if op not in OPS and op != "index" or ONLY and op not in ONLY:
        return
    covered.add(op)
    if isinstance(stmts, str):
        stmts = [stmts]
    CASES.append(Case(op, label, inputs, stmts, outs, error))


def one(op, label, inputs, expr, expect):
    case(op, label, inputs, [f"r = {expr}"], {"r": expect})


def error_case(op, label, inputs, stmts, codes):
    """A statement tensorrun must refuse with one of the exit statuses codes."""
    case(op, label, inputs, stmts, {}, error=codes)


ST_DTYPES = {"BOOL": ("bool", np.bool_), "U8": ("u8", np.uint8), "U16": ("u16", "<u2"), "U32": ("u32", "<u4"),
             "U64": ("u64", "<u8"), "I8": ("i8", np.int8), "I16": ("i16", "<i2"), "I32": ("i32", "<i4"),
             "I64": ("i64", "<i8"), "F16": ("f16", "<f2"), "BF16": ("bf16", "<u2"), "F32": ("f32", "<f4"),
             "F64": ("f64", "<f8")}


def read_result(path):
    if path.endswith(".npy"):
        a = np.load(path)
        return NAME_OF.get(a.dtype.newbyteorder("="), str(a.dtype)), a.astype(a.dtype.newbyteorder("="))
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    header.pop("__metadata__", None)
    (_, info), = header.items()
    s, e = info["data_offsets"]
    dt, code = ST_DTYPES[info["dtype"]]
    a = np.frombuffer(b[8 + n + s:8 + n + e], code).reshape(info["shape"])
    if dt == "bf16":
        a = (a.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(a.shape)
    return dt, a.astype(np.dtype(code).newbyteorder("=") if dt != "bf16" else np.float32)


def count(n=1):
    global checks
    with lock:
        checks += n


def fail(c, what):
    failures.append(f"{c.op} {c.label}: {what} -- repro: {c.repro()}")


def verify(c):
    for n, expect in c.outs.items():
        count()
        try:
            gdt, g = read_result(c.paths[n])
        except (OSError, ValueError, KeyError) as e:
            fail(c, f"{n}: cannot read the result: {e}")
            continue
        msg = expect.check(gdt, g)
        if msg:
            fail(c, f"{n}: {msg}")


def tensorrun(args, timeout=120):
    try:
        return subprocess.run([TENSORRUN, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {timeout} s")


def run_single(c):
    stmts, args = c.command()
    r = tensorrun(["eval", "; ".join(stmts), *args])
    err = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
    if "cannot run yet" in r.stderr:
        skipped.setdefault(c.op, set()).add(c.label)
        return
    if c.error is not None:
        count()
        if r.returncode not in c.error:
            fail(c, f"exit {r.returncode}, expected exit {' or '.join(map(str, c.error))} {err}")
        return
    if r.returncode != 0:
        count(len(c.outs))
        fail(c, f"exit {r.returncode}: {err}")
        return
    verify(c)


def run_group(group):
    if len(group) == 1:
        return run_single(group[0])
    stmts, args = [], []
    for c in group:
        s, a = c.command(f"c{c.id}_")
        stmts += s
        args += a
    r = tensorrun(["eval", "; ".join(stmts), *args])
    if r.returncode == 0:
        for c in group:
            verify(c)
    else:
        half = len(group) // 2
        run_group(group[:half])
        run_group(group[half:])


def run_all(cases, size=64):
    batchable = [c for c in cases if c.error is None]
    groups = [batchable[i:i + size] for i in range(0, len(batchable), size)]
    groups += [[c] for c in cases if c.error is not None]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for _ in pool.map(run_group, groups):
            pass


# ---------------------------------------------------------------- the ops table

def taken(spec):
    if spec == "any dtype":
        return list(DTYPES)
    if spec.startswith("numbers"):
        return [d for d in DTYPES if d != "bool"]
    if spec == "bool and integers":
        return ["bool"] + INTS
    if spec == "signed integers and floats":
        return SIGNED + FLOATS
    return [d.strip() for d in spec.split(",") if d.strip() in DTYPES]


os.makedirs(os.path.join(WORK, "in"), exist_ok=True)
os.makedirs(os.path.join(WORK, "out"), exist_ok=True)
_ops = subprocess.run([TENSORRUN, "ops", "--json"], capture_output=True, text=True, check=True).stdout
OPS = {o["name"]: taken(o.get("dtypes", "any dtype")) for o in map(json.loads, _ops.splitlines())}


def dts(op):
    return OPS.get(op, [])


def lit(v):
    """A Python value in pipeline syntax."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(lit, v)) + "]"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return repr(v) if isinstance(v, str) else str(v)


def kw(**k):
    """', name=value' for the keyword arguments that are not None."""
    return "".join(f", {n}={lit(v)}" for n, v in k.items() if v is not None)


# operand views: (tag, base shape, expression over x, what the expression does)
VIEWS = [
    ("contiguous", (3, 4, 5), "x", lambda a: a),
    ("T", (5, 4), "x.T", lambda a: a.T),
    ("slice", (8, 6), "x[::2, 1:]", lambda a: a[::2, 1:]),
    ("negstep", (4, 9), "x[::-1, ::-2]", lambda a: a[::-1, ::-2]),
    ("mT", (2, 5, 4), "x.mT", lambda a: np.swapaxes(a, -1, -2)),
    ("newaxis", (4, 5), "x[..., None]", lambda a: a[..., None]),
    ("0d", (), "x", lambda a: a),
    ("empty", (0, 3), "x", lambda a: a),
]

# ---------------------------------------------------------------- unary

UNARY_FLOAT = {  # op: (float64 reference, absolute slack in eps of the computing precision)
    "exp": (torch.exp, 0), "log": (torch.log, 0), "log1p": (torch.log1p, 0), "expm1": (torch.expm1, 0),
    "sqrt": (torch.sqrt, 0), "rsqrt": (torch.rsqrt, 0), "reciprocal": (torch.reciprocal, 0),
    "sin": (torch.sin, 2), "cos": (torch.cos, 2), "tanh": (torch.tanh, 1), "sigmoid": (torch.sigmoid, 1),
    "erf": (torch.erf, 1), "silu": (F.silu, 2), "gelu": (F.gelu, "x"),
    "exp2": (torch.exp2, 0), "log2": (torch.log2, 0), "log10": (torch.log10, 0), "tan": (torch.tan, 2),
    "asin": (torch.asin, 1), "acos": (torch.acos, 1), "atan": (torch.atan, 1), "sinh": (torch.sinh, 1),
    "cosh": (torch.cosh, 1), "asinh": (torch.asinh, 1), "acosh": (torch.acosh, 1), "atanh": (torch.atanh, 1),
}
# float-only ops with parameters: op -> [(keyword arguments, float64 reference)]
UNARY_PARAM = {
    "softplus": [({}, lambda t: F.softplus(t)), ({"beta": 2, "threshold": 5}, lambda t: F.softplus(t, 2, 5))],
    "leaky_relu": [({}, lambda t: F.leaky_relu(t)),
                   ({"negative_slope": 0.2}, lambda t: F.leaky_relu(t, 0.2))],
    "elu": [({}, lambda t: F.elu(t)), ({"alpha": 0.5}, lambda t: F.elu(t, 0.5))],
}
LARGEST = dict(f16=65504.0, bf16=float(BF16_MAX), f32=float(np.finfo(np.float32).max),
               f64=float(np.finfo(np.float64).max))


def round_ref(x, decimals):
    """round(x, decimals) as PyTorch computes it, in the compute precision (f32 for
    f16, bf16 and f32), then rounded to x's dtype; integers with negative decimals
    through float64, as NumPy's."""
    if x.dt in FLOATS:
        ct = np.float64 if x.dt == "f64" else np.float32
        v, p = x.a.astype(ct), ct(10.0 ** abs(decimals))
        r = np.rint(v * p) / p if decimals > 0 else np.rint(v / p) * p if decimals < 0 else np.rint(v)
        return Exact(x.dt, round_to(x.dt, r.astype(np.float64)), zero_sign=True)
    if decimals >= 0:
        return Exact(x.dt, x.a)
    p = 10.0 ** -decimals
    return Exact(x.dt, (np.rint(x.a.astype(np.float64) / p) * p).astype(np.int64).astype(NP[x.dt]))


def nan_to_num_ref(x, nan=0.0, posinf=None, neginf=None):
    if x.dt not in FLOATS:
        return Exact(x.dt, x.a)
    v = x.a.astype(np.float64)
    hi = LARGEST[x.dt] if posinf is None else posinf
    lo = -LARGEST[x.dt] if neginf is None else neginf
    r = np.where(np.isnan(v), nan, np.where(v == np.inf, hi, np.where(v == -np.inf, lo, v)))
    return Exact(x.dt, round_to(x.dt, r, via_f32=True))


def unary_ref(op, x, approximate="none"):
    a = x.a
    if op in UNARY_FLOAT:
        fn, slack = UNARY_FLOAT[op]
        v = fvals(x)
        ref = (F.gelu(t64(v), approximate=approximate) if op == "gelu" else fn(t64(v))).numpy()
        atol = 4 * np.abs(v) + 2 if slack == "x" else slack
        return close_rel(fdt(x.dt), ref, atol=np.where(np.isfinite(v), atol, 0))
    if op in UNARY_PARAM:
        v = fvals(x)
        ref = UNARY_PARAM[op][approximate][1](t64(v)).numpy()
        return close_rel(x.dt, ref, atol=np.where(np.isfinite(v), 2, 0))
    if op in ("isnan", "isfinite", "logical_not", "isinf", "isposinf", "isneginf"):
        fl = x.dt in FLOATS
        f = {"isnan": lambda: np.isnan(a) if fl else np.zeros(a.shape, bool),
             "isfinite": lambda: np.isfinite(a) if fl else np.ones(a.shape, bool),
             "isinf": lambda: np.isinf(a) if fl else np.zeros(a.shape, bool),
             "isposinf": lambda: np.isposinf(a) if fl else np.zeros(a.shape, bool),
             "isneginf": lambda: np.isneginf(a) if fl else np.zeros(a.shape, bool),
             "logical_not": lambda: a == 0}[op]
        return Exact("bool", f())
    if op == "bitwise_not":
        return Exact(x.dt, ~a)
    if op == "nan_to_num":
        return nan_to_num_ref(x)
    if op == "round":
        return round_ref(x, 0)
    if x.dt in FLOATS:
        v = a.astype(np.float64)
        f = {"neg": np.negative, "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.round,
             "relu": lambda v: np.maximum(v, 0.0), "square": np.square, "trunc": np.trunc,
             "sign": np.sign}[op]   # NaN stays NaN, as in NumPy (PyTorch 1.13 gives 0)
        ref = f(v)
        if op == "square":
            return Close(x.dt, ref, 0)
        return Exact(x.dt, round_to(x.dt, ref), zero_sign=op in ("neg", "abs", "floor", "ceil", "round", "trunc"))
    if op == "square" and x.dt == "bool":     # PyTorch's pow(x, 2): i64
        return Exact("i64", a.astype(np.int64))
    f = {"neg": np.negative, "abs": np.abs, "square": lambda a: a * a, "floor": lambda a: a, "trunc": lambda a: a,
         "ceil": lambda a: a, "round": lambda a: a, "sign": np.sign,
         "relu": lambda a: np.maximum(a, np.zeros((), a.dtype))}[op]
    return Exact(x.dt, a if x.dt == "bool" and op == "sign" else f(a))


UNARY = ["neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "square", "reciprocal",
         "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "erf", "floor", "ceil", "round",
         "isnan", "isfinite", "logical_not", "exp2", "log2", "log10", "tan", "asin", "acos", "atan", "sinh",
         "cosh", "asinh", "acosh", "atanh", "softplus", "leaky_relu", "elu", "trunc", "isinf", "isposinf",
         "isneginf", "nan_to_num", "bitwise_not"]


def unary_cases():
    for op in UNARY:
        for dt in dts(op):
            for tag, shape, expr, fn in VIEWS:
                x = gen(dt, shape, "full" if op in ("neg", "abs", "square", "sign", "relu", "bitwise_not",
                                                    "nan_to_num") else "small")
                v = x.view(fn)
                if op in UNARY_PARAM:
                    for k, (kwargs, _) in enumerate(UNARY_PARAM[op]):
                        one(op, f"{dt} {tag} {kwargs}", {"x": x}, f"{op}({expr}{kw(**kwargs)})",
                            unary_ref(op, v, approximate=k))
                    continue
                one(op, f"{dt} {tag}", {"x": x}, f"{op}({expr})", unary_ref(op, v))
                if op == "gelu" and tag in ("contiguous", "T"):
                    one(op, f"{dt} {tag} tanh", {"x": x}, f'gelu({expr}, approximate="tanh")',
                        unary_ref(op, v, approximate="tanh"))
            if op == "neg":
                x = gen(dt, (4, 5), "full")
                one("neg", f"{dt} operator", {"x": x}, "-x", unary_ref("neg", x))
            if op == "bitwise_not":
                x = gen(dt, (4, 5), "full")
                one(op, f"{dt} operator", {"x": x}, "~x", unary_ref(op, x))
                one(op, f"{dt} method", {"x": x}, "x[::-1].bitwise_not()", unary_ref(op, x.view(lambda a: a[::-1])))
            if op == "nan_to_num" and dt in FLOATS:
                x = gen(dt, (4, 5), "small")
                one(op, f"{dt} given values", {"x": x}, "nan_to_num(x, nan=1.5, posinf=100, neginf=-100.0)",
                    nan_to_num_ref(x, 1.5, 100.0, -100.0))
                one(op, f"{dt} method, posinf only", {"x": x}, "x.T.nan_to_num(posinf=7)",
                    nan_to_num_ref(x.view(lambda a: a.T), 0.0, 7.0))
            if op == "round":
                x = gen(dt, (6, 7), "mix" if dt in FLOATS else "small")
                for d in (1, 2, -1, 3):
                    one(op, f"{dt} decimals={d}", {"x": x}, f"round(x, decimals={d})", round_ref(x, d))
                one(op, f"{dt} decimals=2 strided", {"x": x}, "x[::-2].T.round(2)",
                    round_ref(x.view(lambda a: a[::-2].T), 2))
            if op == "softplus" and dt in FLOATS:
                # stable at large logits, whatever the threshold
                x = TV(dt, round_to(dt, np.array([-1e4, -300.0, -30.0, 0.0, 30.0, 300.0, 1e4])))
                v = x.a.astype(np.float64)
                ref = np.where(v > 1e9, v, np.logaddexp(0.0, v))
                one(op, f"{dt} large logits, threshold 1e9", {"x": x}, "softplus(x, threshold=1e9)",
                    close_rel(dt, ref, atol=2))
    for op in ("softplus", "leaky_relu", "elu", "bitwise_not"):
        bad = "i32" if op != "bitwise_not" else "f32"
        if op in OPS and bad not in dts(op):
            error_case(op, f"{bad} refused", {"x": gen(bad, (3,))}, [f"r = {op}(x)"], (3,))
    if "bitwise_not" in OPS:
        error_case("bitwise_not", "~ of a float refused", {"x": gen("f64", (3,))}, ["r = ~x"], (3,))
    for op in ("neg", "abs", "square", "floor", "relu", "trunc"):
        if "bool" not in dts(op) and op in OPS:
            error_case(op, "bool refused", {"x": gen("bool", (3,))}, [f"r = {op}(x)"], (3,))


# ---------------------------------------------------------------- binary

CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
       "ge": np.greater_equal}
SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "eq": "==", "ne": "!=", "lt": "<",
       "le": "<=", "gt": ">", "ge": ">=", "floor_divide": "//", "remainder": "%", "bitwise_and": "&",
       "bitwise_or": "|", "bitwise_xor": "^"}
BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
# computed in the compute dtype (f32 for f16, bf16 and f32) by the algorithm NumPy uses too
DIVMOD = {"floor_divide": np.floor_divide, "remainder": np.remainder, "fmod": np.fmod}


def isclose_ref(A, B, rtol=1e-5, atol=1e-8, equal_nan=False):
    """isclose in float64: equal values are close, NaN only to NaN with equal_nan, infinities
    only to themselves, finite values within atol + rtol * |b|."""
    A, B = np.asarray(A), np.asarray(B)
    if A.dtype.kind in "iub" and B.dtype.kind in "iub":
        d = np.abs(A.astype(object) - B.astype(object))
        tol = atol + rtol * np.abs(B.astype(np.float64))
        return (d == 0) | (np.vectorize(float)(d) <= tol) if d.size else np.zeros(d.shape, bool)
    A, B = A.astype(np.float64), B.astype(np.float64)
    fin = np.isfinite(A) & np.isfinite(B)
    r = (A == B) | (fin & (np.abs(A - B) <= atol + rtol * np.abs(B)))
    return r | (equal_nan & np.isnan(A) & np.isnan(B))


def binary_ref(op, a, b):
    """The expectation for op(a, b); a and b are TVs or weak Python scalars."""
    if op in ("logical_and", "logical_or", "logical_xor"):
        ta = conv(a, a.dt) != 0 if isinstance(a, TV) else np.array(bool(a))
        tb = conv(b, b.dt) != 0 if isinstance(b, TV) else np.array(bool(b))
        return Exact("bool", {"logical_and": np.logical_and, "logical_or": np.logical_or,
                              "logical_xor": np.logical_xor}[op](ta, tb))
    P = rtype(a, b)
    if op == "isclose":
        A, B = conv(a, P), conv(b, P)
        return Exact("bool", isclose_ref(A, B))
    if op in BITWISE:
        return Exact(P, BITWISE[op](conv(a, P), conv(b, P)))
    if op in DIVMOD:
        A, B = conv(a, P), conv(b, P)
        if P in INTS:
            with np.errstate(all="ignore"):
                return Exact(P, DIVMOD[op](A, B))
        ct = np.float64 if P == "f64" else np.float32
        r = DIVMOD[op](A.astype(ct), B.astype(ct)).astype(np.float64)
        if op == "remainder":      # PyTorch's: a zero remainder has a's sign (NumPy's, b's)
            r = np.where(r == 0, np.copysign(0.0, A.astype(np.float64)), r)
        return Exact(P, round_to(P, r), zero_sign=True)
    if op == "atan2":
        P = fdt(P)
        A, B = conv(a, P).astype(np.float64), conv(b, P).astype(np.float64)
        return close_rel(P, np.arctan2(A, B), atol=2)
    if op in CMP:
        A, B = conv(a, P), conv(b, P)
        if P in FLOATS:
            A, B = A.astype(np.float64), B.astype(np.float64)
        return Exact("bool", CMP[op](A, B))
    if op == "div":
        P = fdt(P)
    A, B = conv(a, P), conv(b, P)
    if P == "bool":
        f = {"add": np.logical_or, "mul": np.logical_and, "maximum": np.logical_or,
             "minimum": np.logical_and}[op]
        return Exact("bool", f(A, B))
    if P in INTS:
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "pow": np.power,
             "maximum": np.maximum, "minimum": np.minimum}[op]
        return Exact(P, f(A, B))
    A, B = A.astype(np.float64), B.astype(np.float64)
    if op in ("maximum", "minimum"):
        return Exact(P, round_to(P, (np.maximum if op == "maximum" else np.minimum)(A, B)))
    if op == "pow":
        return close_rel(P, np.power(A, B))
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    return Close(P, f(A, B), 0)


BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or", "floor_divide", "remainder", "fmod", "atan2", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor", "isclose"]
MIXED = [("u8", "i8"), ("u8", "i16"), ("u16", "i8"), ("u16", "i32"), ("u32", "i8"), ("u32", "i64"),
         ("u8", "u32"), ("u64", "u16"), ("i8", "i64"), ("bool", "i32"), ("bool", "f16"), ("i32", "f16"),
         ("i64", "f32"), ("u64", "bf16"), ("f16", "bf16"), ("bf16", "f32"), ("f16", "f64"), ("i16", "bf16")]
SCALARS = {"pow": (2, 0.5, 2)}     # op: (int scalar, float scalar, scalar on the left)


def bin_kind(op, side, dt):
    if op == "pow":
        return "exp" if side == "b" and dt in INTS else ("full" if dt in INTS else "small")
    if op in ("div", "atan2"):
        return "small"
    if op in ("floor_divide", "remainder", "fmod") and dt in INTS:
        return "full" if side == "a" else "small"
    return "mix"


def bin_expr(op, a, b, operator=False):
    return f"{a} {SYM[op]} {b}" if operator and op in SYM else f"{op}({a}, {b})"


def binary_cases():
    for op in BINARY:
        for dt in dts(op):
            lab = lambda t: f"{dt} {t}"
            ka, kb = bin_kind(op, "a", dt), bin_kind(op, "b", dt)
            x, y = gen(dt, (3, 1, 5), ka), gen(dt, (4, 5), kb)
            one(op, lab("broadcast"), {"x": x, "y": y}, bin_expr(op, "x", "y"), binary_ref(op, x, y))
            x, y = gen(dt, (5, 4), ka), gen(dt, (8, 6), kb)
            one(op, lab("strided"), {"x": x, "y": y}, bin_expr(op, "x.T", "y[::2, 1:]", operator=True),
                binary_ref(op, x.view(lambda a: a.T), y.view(lambda a: a[::2, 1:])))
            x, y = gen(dt, (2, 5, 4), ka), gen(dt, (5,), kb)
            one(op, lab("mT"), {"x": x, "y": y}, bin_expr(op, "x.mT", "y"),
                binary_ref(op, x.view(lambda a: np.swapaxes(a, 1, 2)), y))
            x, y = gen(dt, (), ka), gen(dt, (2, 3), kb)
            one(op, lab("0d"), {"x": x, "y": y}, bin_expr(op, "x", "y"), binary_ref(op, x, y))
            x, y = gen(dt, (0, 3), ka), gen(dt, (3,), kb)
            one(op, lab("empty"), {"x": x, "y": y}, bin_expr(op, "x", "y"), binary_ref(op, x, y))
            si, sf, sl = SCALARS.get(op, (2, 2.5, 3))
            x = gen(dt, (4, 5), ka)
            one(op, lab(f"scalar {si}"), {"x": x}, bin_expr(op, "x", si, True), binary_ref(op, x, si))
            if op in BITWISE:     # a float number makes the result a float, which they refuse
                error_case(op, lab(f"scalar {sf} refused"), {"x": x}, [f"r = {bin_expr(op, 'x', sf, True)}"], (3,))
            else:
                one(op, lab(f"scalar {sf}"), {"x": x}, bin_expr(op, "x", sf, True), binary_ref(op, x, sf))
            xe = gen(dt, (4, 5), kb)
            one(op, lab(f"scalar {sl} on the left"), {"x": xe}, bin_expr(op, sl, "x", True),
                binary_ref(op, sl, xe))
            if op in ("add", "mul", "logical_and", "maximum", "eq"):
                one(op, lab("scalar true"), {"x": x}, f"{op}(x, true)", binary_ref(op, x, True))
        pairs = [(a, b) for a in DTYPES for b in DTYPES if a != b] if op == "add" else MIXED
        for d1, d2 in pairs:
            if d1 not in dts(op) or d2 not in dts(op):
                continue
            x, y = gen(d1, (3, 1), bin_kind(op, "a", d1)), gen(d2, (4,), bin_kind(op, "b", d2))
            if promote(d1, d2) is None:
                error_case(op, f"{d1} with {d2} refused", {"x": x, "y": y}, [f"r = {op}(x, y)"], (3,))
            else:
                one(op, f"{d1} with {d2}", {"x": x, "y": y}, bin_expr(op, "x", "y"), binary_ref(op, x, y))
    for op in BITWISE:
        if op in OPS:
            error_case(op, "f32 refused", {"x": gen("f32", (3,)), "y": gen("i32", (3,))},
                       [f"r = {bin_expr(op, 'x', 'y', True)}"], (3,))
    if "isclose" in OPS:
        for dt in ("f16", "f32", "f64", "bf16"):
            x = gen(dt, (5, 8), "small")
            noise = RNG.choice([0.0, 1e-6, 1e-4, 1e-2], x.a.shape) * x.a.astype(np.float64)
            y = TV(dt, round_to(dt, x.a.astype(np.float64) + noise))
            P = dt
            for k in ({}, {"rtol": 1e-3}, {"atol": 0.01, "rtol": 0}, {"equal_nan": True}):
                one("isclose", f"{dt} near values {k}", {"x": x, "y": y}, f"isclose(x, y.T.T{kw(**k)})",
                    Exact("bool", isclose_ref(conv(x, P), conv(y, P), **k)))
        x, y = TV("i64", [2 ** 62, 2 ** 62 + 1, -5, 7]), TV("i64", [2 ** 62 + 1, 2 ** 62 + 1, -4, 7])
        one("isclose", "i64 exact distances", {"x": x, "y": y}, "isclose(x, y, rtol=0, atol=0.5)",
            Exact("bool", isclose_ref(x.a, y.a, rtol=0, atol=0.5)))
        error_case("isclose", "negative rtol refused", {"x": gen("f32", (3,))}, ["r = isclose(x, x, rtol=-1)"], (3,))
    if "floor_divide" in OPS:
        # integer division by zero gives 0 (NumPy's choice), and INT_MIN // -1 wraps
        for dt in ("i8", "i64", "u16"):
            lo, hi = limits(dt)
            x, y = TV(dt, [7, lo, hi, lo, 5, 0]), TV(dt, [0, 0, 0, hi, 3, 0])
            if dt in SIGNED:
                y = TV(dt, [0, -1, -1, 0, -3, 0])
            for op in DIVMOD:
                one(op, f"{dt} by 0 and -1", {"x": x, "y": y}, f"{op}(x, y)", binary_ref(op, x, y))
    for op in ("lt", "maximum", "mul"):
        if op in OPS:
            error_case(op, "u64 with i8 refused", {"x": gen("u64", (3,)), "y": gen("i8", (3,))},
                       [f"r = {op}(x, y)"], (3,))
    if "sub" in OPS and "bool" not in dts("sub"):
        error_case("sub", "bool - bool refused", {"x": gen("bool", (3,)), "y": gen("bool", (3,))},
                   ["r = x - y"], (3,))
    # PyTorch converts the operands to the promoted dtype before it computes: i32 100000 is f16 inf
    if "mul" in OPS and "f16" in dts("mul"):
        x, y = TV("i32", [100000, 3, -70000, 2049]), TV("f16", [0, -2, 1, 0.5])
        one("mul", "i32 with f16, operands converted to f16", {"x": x, "y": y}, "x * y", binary_ref("mul", x, y))
    # wrapping integer arithmetic, spelled out
    for dt in INTS:
        lo, hi = limits(dt)
        x = TV(dt, [hi, lo, hi, lo + 1])
        one("add", f"{dt} overflow wraps", {"x": x}, "x + 1", binary_ref("add", x, 1))
        one("sub", f"{dt} underflow wraps", {"x": x}, "x - 2", binary_ref("sub", x, 2))
        one("mul", f"{dt} overflow wraps", {"x": x}, "x * 3", binary_ref("mul", x, 3))


def where_clamp_cases():
    for dt in dts("where"):
        c = gen("bool", (3, 1, 5))
        x, y = gen(dt, (4, 5), "full"), gen(dt, (5,), "full")
        P = rtype(x, y)
        one("where", f"{dt} broadcast", {"c": c, "x": x, "y": y}, "where(c, x, y)",
            Exact(P, np.where(c.a, conv(x, P), conv(y, P))))
        xs = gen(dt, (5, 4), "full")
        one("where", f"{dt} strided", {"c": c, "x": xs, "y": y}, "where(c, x.T, y[::-1])",
            Exact(P, np.where(c.a, conv(xs.view(lambda a: a.T), P), conv(y.view(lambda a: a[::-1]), P))))
        for s in (0, 2.5):
            P = rtype(x, s)
            one("where", f"{dt} scalar {s}", {"c": c, "x": x}, f"where(c, x, {s})",
                Exact(P, np.where(c.a, conv(x, P), conv(s, P))))
        cond = gen(dt, (4, 5), "small")
        one("where", f"{dt} comparison condition", {"x": cond}, "where(x > 0, x, 1)",
            Exact(rtype(cond, 1), np.where(conv(cond, rtype(cond, 0)) > conv(0, rtype(cond, 0)), cond.a,
                                           conv(1, rtype(cond, 1)))))
    for d1, d2 in MIXED:
        c, x, y = gen("bool", (4,)), gen(d1, (4,), "small"), gen(d2, (4,), "small")
        P = promote(d1, d2)
        one("where", f"{d1} with {d2}", {"c": c, "x": x, "y": y}, "where(c, x, y)",
            Exact(P, np.where(c.a, conv(x, P), conv(y, P))))
    if "where" in OPS:
        error_case("where", "u64 with i64 refused", {"c": gen("bool", (3,)), "x": gen("u64", (3,)),
                                                     "y": gen("i64", (3,))}, ["r = where(c, x, y)"], (3,))

    def clamp_ref(x, lo, hi):
        P = rtype(x, lo, hi)
        v = conv(x, P)
        if P in FLOATS:
            v = v.astype(np.float64)
        if lo is not None:
            L = conv(lo, P)
            v = np.maximum(v, L.astype(np.float64) if P in FLOATS else L)
        if hi is not None:
            H = conv(hi, P)
            v = np.minimum(v, H.astype(np.float64) if P in FLOATS else H)
        return Exact(P, round_to(P, v) if P in FLOATS else v)

    for dt in dts("clamp"):
        x = gen(dt, (4, 5), "full" if dt in INTS else "small")
        lo, hi = (2, 7) if dt in UNSIGNED else (-3, 3)
        one("clamp", f"{dt} ints", {"x": x}, f"clamp(x, {lo}, {hi})", clamp_ref(x, lo, hi))
        one("clamp", f"{dt} floats", {"x": x}, "clamp(x, -0.5, 2.5)", clamp_ref(x, -0.5, 2.5))
        one("clamp", f"{dt} min only", {"x": x}, f"clamp(x, min={lo})", clamp_ref(x, lo, None))
        one("clamp", f"{dt} max only", {"x": x}, f"clamp(x, max={hi})", clamp_ref(x, None, hi))
        xs = gen(dt, (5, 4), "full" if dt in INTS else "small")
        one("clamp", f"{dt} strided", {"x": xs}, f"clamp(x.T, {lo}, {hi})",
            clamp_ref(xs.view(lambda a: a.T), lo, hi))
        lt, ht = gen(dt, (5,), "small"), gen(dt, (4, 1), "small")
        ht = TV(dt, np.maximum(lt.a.max() if lt.a.size else 0, ht.a)) if dt in INTS else ht
        one("clamp", f"{dt} tensor bounds", {"x": x, "y": lt, "z": ht}, "clamp(x, y, z)", clamp_ref(x, lt, ht))
        x0 = gen(dt, ())
        one("clamp", f"{dt} 0d", {"x": x0}, f"clamp(x, {lo}, {hi})", clamp_ref(x0, lo, hi))


# ---------------------------------------------------------------- reductions

def axes_of(ndim, dim):
    if dim is None:
        return tuple(range(ndim))
    dims = dim if isinstance(dim, list) else [dim]
    return tuple(sorted(d % ndim for d in dims))


def reduce_ref(op, x, dim=None, keepdim=False, correction=1, ord=2):
    ax = axes_of(x.a.ndim, dim)
    n = int(np.prod([x.a.shape[i] for i in ax], dtype=np.int64))
    lg = math.log2(max(n, 2))
    K = dict(axis=ax, keepdims=keepdim)
    if op == "count_nonzero":
        return Exact("i64", np.count_nonzero(x.a, axis=ax, keepdims=keepdim).astype(np.int64))
    if op in ("sum", "prod", "cumsum", "cumprod", "nansum") and x.dt not in FLOATS:
        accdt = "u64" if x.dt in UNSIGNED else "i64"
        a = x.a.astype(NP[accdt])
        if op in ("cumsum", "cumprod"):
            return Exact(accdt, (np.cumsum if op == "cumsum" else np.cumprod)(a, axis=dim % x.a.ndim))
        return Exact(accdt, (np.prod if op == "prod" else np.sum)(a, **K))
    if op in ("max", "min"):
        return Exact(x.dt, (np.max if op == "max" else np.min)(x.a, **K))
    if op in ("argmax", "argmin"):
        f = np.argmax if op == "argmax" else np.argmin
        return Exact("i64", f(x.a, axis=dim, keepdims=keepdim))
    if op in ("all", "any"):
        return Exact("bool", (np.all if op == "all" else np.any)(x.a != 0, **K))
    rdt, e = fdt(x.dt), acc(x.dt)
    v = fvals(x)
    if op == "sum":
        return Close(rdt, v.sum(**K), (lg + 2) * e * np.abs(v).sum(**K))
    if op in ("nansum", "nanmean"):
        v0 = np.where(np.isnan(v), 0.0, v)
        s, t = v0.sum(**K), (lg + 2) * e * np.abs(v0).sum(**K)
        if op == "nansum":
            return Close(rdt, s, t)
        c = (~np.isnan(v)).sum(**K)
        with np.errstate(all="ignore"):
            return Close(rdt, s / c, t / np.maximum(c, 1))
    if op == "mean":
        return Close(rdt, v.sum(**K) / n, (lg + 2) * e * np.abs(v).sum(**K) / max(n, 1))
    if op == "prod":
        ref = np.prod(v, **K)
        return Close(rdt, ref, (n + 2) * e * np.abs(ref))
    if op == "cumsum":
        d = dim % x.a.ndim
        return Close(rdt, np.cumsum(v, axis=d), (x.a.shape[d] + 2) * e * np.cumsum(np.abs(v), axis=d))
    if op == "cumprod":         # accumulated in f64 and rounded once: an ulp of the result, or two
        d = dim % x.a.ndim
        ref = np.cumprod(v, axis=d)
        return Close(rdt, ref, (x.a.shape[d] + 2) * EPS["f64"] * np.abs(ref))
    if op in ("var", "std"):
        m = v.mean(axis=ax, keepdims=True)
        ss = ((v - m) ** 2).sum(**K)
        var = ss / max(n - correction, 0)
        tol = 4 * (lg + 4) * e * var
        if op == "var":
            return Close(rdt, var, tol)
        return Close(rdt, np.sqrt(var), 2 * (lg + 4) * e * np.sqrt(var))
    if op == "norm":
        av = np.abs(v)
        ref = np.max(av, **K) if math.isinf(ord) else (av ** ord).sum(**K) ** (1.0 / ord)
        return Close(rdt, ref, 2 * (lg + 4 + 2 * min(ord, 8)) * e * np.abs(ref))
    if op == "logsumexp":
        m = np.max(v, axis=ax, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        ref = np.log(np.exp(v - m).sum(axis=ax, keepdims=True)) + m
        ref = ref if keepdim else ref.reshape([s for i, s in enumerate(v.shape) if i not in ax])
        return Close(rdt, ref, 4 * e * (np.abs(ref) + lg + 2))
    raise KeyError(op)


REDUCE = ["sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "norm", "all", "any",
          "logsumexp", "nansum", "nanmean", "count_nonzero"]
RVIEWS = [  # (tag, base shape, expression, view, keyword arguments)
    ("all", (4, 5, 6), "x", lambda a: a, {}),
    ("dim=1", (4, 5, 6), "x", lambda a: a, {"dim": 1}),
    ("dim=-1 keepdim", (4, 5, 6), "x", lambda a: a, {"dim": -1, "keepdim": True}),
    ("dim=[0, 2]", (4, 5, 6), "x", lambda a: a, {"dim": [0, 2]}),
    ("dim=[-1, 0] keepdim", (4, 5, 6), "x", lambda a: a, {"dim": [-1, 0], "keepdim": True}),
    ("keepdim all", (3, 4), "x", lambda a: a, {"keepdim": True}),
    ("mT", (4, 6, 5), "x.mT", lambda a: np.swapaxes(a, 1, 2), {"dim": 1}),
    ("slice", (8, 6), "x[::2, 1:]", lambda a: a[::2, 1:], {"dim": 0}),
    ("negstep", (5, 9), "x[::-1, ::-2]", lambda a: a[::-1, ::-2], {"dim": -2}),
    ("0d", (), "x", lambda a: a, {}),
    ("empty dim=0", (0, 3), "x", lambda a: a, {"dim": 0}),
    ("empty dim=1", (0, 3), "x", lambda a: a, {"dim": 1}),
    ("long rows", (3, 1000), "x", lambda a: a, {"dim": -1}),
]


def reduce_cases():
    for op in REDUCE:
        for dt in dts(op):
            for tag, shape, expr, fn, k in RVIEWS:
                if op in ("argmax", "argmin") and isinstance(k.get("dim"), list):
                    continue
                empty_bad = op in ("max", "min", "argmax", "argmin") and shape == (0, 3) and k.get("dim") != 1
                if op == "prod" and shape == (3, 1000):
                    continue
                kind = {"sum": "full", "prod": "pos", "max": "mix", "min": "mix", "argmax": "mix",
                        "argmin": "mix", "all": "mix", "any": "mix", "nansum": "full",
                        "count_nonzero": "mix"}.get(op, "small")
                if op in ("sum", "cumsum", "nansum") and dt in FLOATS:
                    kind = "small"
                x = gen(dt, shape, kind, specials=tag not in ("long rows",))
                if op == "prod" and dt in FLOATS:
                    x = TV(dt, round_to(dt, RNG.uniform(0.6, 1.5, shape) * RNG.choice([-1, 1], shape)))
                if op in ("any", "all") and tag == "dim=1":
                    x.a[1] = 0          # a slice of zeros, and one without
                    x.a[2] = 1
                expr_full = f"{op}({expr}{kw(**k)})"
                if empty_bad:
                    error_case(op, f"{dt} {tag} refused", {"x": x}, [f"r = {expr_full}"], (1, 3))
                    continue
                one(op, f"{dt} {tag}", {"x": x}, expr_full, reduce_ref(op, x.view(fn), **k))
            if op in ("var", "std"):
                x = gen(dt, (4, 5, 6), "small")
                for k in ({"correction": 0, "dim": 1}, {"correction": 2, "dim": [0, 2], "keepdim": True}):
                    one(op, f"{dt} {k}", {"x": x}, f"{op}(x{kw(**k)})", reduce_ref(op, x, **k))
            if op == "norm":
                x = gen(dt, (4, 5, 6), "small")
                for k in ({"ord": 1, "dim": 1}, {"ord": math.inf, "dim": [0, 2]},
                          {"ord": 3, "dim": -1, "keepdim": True}, {"ord": 0.5}, {"ord": math.inf}):
                    one(op, f"{dt} {k}", {"x": x}, f"norm(x{kw(**k)})", reduce_ref(op, x, **k))
    for op in ("cumsum", "cumprod"):
        for dt in dts(op):
            for tag, shape, expr, fn, d in [("dim=0", (4, 5, 6), "x", lambda a: a, 0),
                                            ("dim=-1", (4, 5, 6), "x", lambda a: a, -1),
                                            ("mT", (3, 6, 5), "x.mT", lambda a: np.swapaxes(a, 1, 2), 1),
                                            ("negstep", (5, 9), "x[::-1, ::-2]", lambda a: a[::-1, ::-2], 1),
                                            ("empty", (0, 3), "x", lambda a: a, 0),
                                            ("0d", (), "x", lambda a: a, 0),
                                            ("long", (2, 1000), "x", lambda a: a, 1)]:
                x = gen(dt, shape, "full" if dt in INTS else "small", specials=tag != "long")
                if op == "cumprod" and dt in FLOATS:   # near 1, so that 1000 of them stay finite
                    x = TV(dt, round_to(dt, RNG.uniform(0.9, 1.1, shape) * RNG.choice([-1, 1], shape)))
                    if tag != "long" and x.a.size > 8:
                        x.a.reshape(-1)[[1, 5]] = [np.nan, np.inf]
                if shape == ():       # a scalar's running sum is itself: the reference of [x], as 0-d
                    ref = reduce_ref(op, x.view(lambda a: a.reshape(1)), dim=0)
                    ref.ref = ref.ref.reshape(())
                    if isinstance(ref, Close):
                        ref.tol = ref.tol.reshape(())
                else:
                    ref = reduce_ref(op, x.view(fn), dim=d)
                one(op, f"{dt} {tag}", {"x": x}, f"{op}({expr}, {d})", ref)
                if tag == "dim=-1":
                    one(op, f"{dt} method, dim=-2", {"x": x}, f"x.{op}(dim=-2)", reduce_ref(op, x, dim=-2))
    quantile_cases()
    # pairwise summation: a running f32 sum of 0.1 drifts by ~1%, pairwise by ~1e-6
    for tag, expr, n, dim in [("1e6 values", "sum(full([1000000], 0.1))", 1000000, None),
                              ("dim=0 of [500000, 2]", "sum(full([500000, 2], 0.1), dim=0)", 500000, 0),
                              ("mean over rows of [4, 250000]", "mean(full([4, 250000], 0.1), dim=1)", 250000, 1)]:
        v = float(np.float32(0.1))
        ref = np.float64(v * n) if "mean" not in expr else np.float64(v)
        ref = ref if dim is None else np.full(2 if dim == 0 else 4, ref)
        tol = math.log2(n) * EPS["f32"] * np.abs(ref)
        one("sum" if "sum" in expr else "mean", f"pairwise {tag}", {}, expr, Close("f32", ref, tol))


def order_ref(x, dim, fn):
    """fn(sorted values, n) along dim (None: all values), NaN wherever a value reduced is NaN."""
    a = x.a.reshape(-1) if dim is None else np.moveaxis(x.a, dim, -1)
    n = a.shape[-1]
    srt = np.sort(a.astype(np.float64) if x.dt in FLOATS else a, axis=-1)
    r = fn(srt, n)
    if x.dt in FLOATS:
        r = np.where(np.isnan(a.astype(np.float64)).any(axis=-1), np.nan, r)
    return r


def median_ref(x, dim=None, keepdim=False):
    r = order_ref(x, dim, lambda srt, n: srt[..., (n - 1) // 2])
    if keepdim:
        r = np.expand_dims(r, tuple(range(x.a.ndim)) if dim is None else dim)
    return Exact(x.dt, round_to(x.dt, r) if x.dt in FLOATS else np.asarray(r, NP[x.dt]))


def quantile_ref(x, q, dim=None, keepdim=False, how="linear"):
    def fn(srt, n):
        qs = np.atleast_1d(np.asarray(q, np.float64))
        out = []
        for qq in qs:
            pos = qq * (n - 1)
            lo = min(int(math.floor(pos)), n - 1)
            hi = min(lo + 1, n - 1) if pos > lo else lo
            a, b = srt[..., lo].astype(np.float64), srt[..., hi].astype(np.float64)
            w = pos - lo
            if how == "lower":
                r = a
            elif how == "higher":
                r = b
            elif how == "nearest":
                r = srt[..., int(np.rint(pos))].astype(np.float64)
            else:
                w = (0.5 if w > 0 else 0.0) if how == "midpoint" else w
                r = a + w * (b - a) if w < 0.5 else b - (b - a) * (1 - w)
            out.append(r)
        return np.stack(out) if isinstance(q, list) else out[0]
    r = order_ref(x, dim, fn)
    if keepdim:
        ax = tuple(range(x.a.ndim)) if dim is None else dim % x.a.ndim
        r = np.expand_dims(r, tuple(a + isinstance(q, list) for a in np.atleast_1d(ax)))
    rdt = fdt(x.dt)
    return Close(rdt, r, 4 * acc(x.dt) * np.abs(r))


def quantile_cases():
    """median and quantile select exact order statistics; the views include dim 0 wide enough to
    be read in two tiles and a partial one, a strided view, and dim 1 of a 3-d tensor."""
    views = [("all", (4, 5, 6), "x", lambda a: a, None, False),
             ("dim=0", (7, 5), "x", lambda a: a, 0, False),
             ("dim=-1 keepdim", (4, 5, 6), "x", lambda a: a, -1, True),
             ("dim=1 of 3-d", (3, 9, 4), "x", lambda a: a, 1, False),
             ("mT dim=1", (3, 6, 5), "x.mT", lambda a: np.swapaxes(a, 1, 2), 1, False),
             ("wide dim 0", (31, 150), "x", lambda a: a, 0, False),
             ("negstep dim=0", (9, 140), "x[::-1, ::-2]", lambda a: a[::-1, ::-2], 0, False),
             ("slice dim=1", (8, 12), "x[1::2, ::3]", lambda a: a[1::2, ::3], 1, False),
             ("all keepdim", (3, 4), "x", lambda a: a, None, True),
             ("0d", (), "x", lambda a: a, None, False),
             ("empty kept", (0, 3), "x", lambda a: a, 1, False)]
    for dt in dts("median"):
        for tag, shape, expr, fn, dim, keep in views:
            x = gen(dt, shape, "mix", specials=tag not in ("wide dim 0",))
            k = kw(dim=dim, keepdim=keep or None)
            one("median", f"{dt} {tag}", {"x": x}, f"median({expr}{k})", median_ref(x.view(fn), dim, keep))
        x = gen(dt, (40, 30), "mix", specials=False)
        one("median", f"{dt} method, even count", {"x": x}, "x.T.median(1)", median_ref(x.view(lambda a: a.T), 1))
    for dt in dts("quantile"):
        for tag, shape, expr, fn, dim, keep in views:
            x = gen(dt, shape, "small", specials=tag not in ("wide dim 0",))
            for q in (0.3, [0.0, 0.25, 0.5, 1.0]):
                k = kw(dim=dim, keepdim=keep or None)
                one("quantile", f"{dt} {tag} q={q}", {"x": x}, f"quantile({expr}, {lit(q)}{k})",
                    quantile_ref(x.view(fn), q, dim, keep))
        x = gen(dt, (6, 11), "mix", specials=False)
        for how in ("lower", "higher", "nearest", "midpoint", "linear"):
            one("quantile", f"{dt} {how}", {"x": x}, f'x.quantile([0.1, 0.45, 0.5, 0.9], dim=1, interpolation="{how}")',
                quantile_ref(x, [0.1, 0.45, 0.5, 0.9], 1, how=how))
    if "median" in OPS:
        for stmt, tag in (("r = median(x, 1)", "an empty dim"), ("r = median(x)", "an empty tensor")):
            error_case("median", f"{tag} refused", {"x": gen("f32", (3, 0))}, [stmt], (3,))
        error_case("median", "bool refused", {"x": gen("bool", (3,))}, ["r = median(x)"], (3,))
    if "quantile" in OPS:
        x = gen("f32", (3, 4))
        for stmt, tag in (("r = quantile(x, 1.5)", "q past 1"), ("r = quantile(x, [0.5, -0.1])", "q below 0"),
                          ('r = quantile(x, 0.5, interpolation="cubic")', "an unknown interpolation"),
                          ("r = quantile(x, x)", "a tensor q")):
            error_case("quantile", f"{tag} refused", {"x": x}, [stmt], (3,))


# ---------------------------------------------------------------- linear algebra, neural

def wrap(v, dt):
    """Python integers reduced modulo 2**bits of the integer dtype dt, into its range."""
    lo, hi = limits(dt)
    m = 1 << BITS[dt]
    return np.array([(int(x) - lo) % m + lo for x in np.ravel(v)], dtype=object).reshape(np.shape(v)).astype(NP[dt])


def imm_exact(dt, a, b):
    """The integer product of a and b as dt: each element the exact sum of its
    products (Python integers), wrapped around modulo 2**bits of dt."""
    return wrap(np.matmul(conv(a, dt).astype(object), conv(b, dt).astype(object)), dt)


def mm_ref(dt, a, b, k):
    if dt in INTS:
        return Exact(dt, imm_exact(dt, TV(dt, a), TV(dt, b)))
    A, B = a.astype(np.float64), b.astype(np.float64)
    ref = np.matmul(A, B)
    tol = (k + 2) * acc(dt) * np.matmul(np.abs(A), np.abs(B))
    return Close(dt, ref, tol)


# an operand of integer matmul given as a view: (tag, base shape from the shape
# wanted, expression over x, what the expression does)
MM_VIEWS = [("plain", lambda s: s, "{}", lambda a: a),
            ("mT", lambda s: s[:-2] + (s[-1], s[-2]), "{}.mT", lambda a: np.swapaxes(a, -1, -2)),
            ("step", lambda s: s[:-1] + (2 * s[-1],), "{}[..., ::2]", lambda a: a[..., ::2]),
            ("reversed", lambda s: s, "{}[..., ::-1, :]", lambda a: a[..., ::-1, :])]


def int_matmul_cases(n):
    """n random integer products: dtypes (mixed ones promote), shapes, batches
    that broadcast, 1-d operands and strided views, values over the whole range."""
    pairs = [(a, b) for a in INTS for b in INTS if promote(a, b) is not None]
    for c in range(n):
        d1, d2 = pairs[RNG.integers(len(pairs))]
        m, k, nn = (int(v) for v in RNG.integers(0, 12, 3))
        batch = [tuple(int(v) for v in RNG.integers(1, 4, RNG.integers(0, 3)))]
        batch.append(tuple(1 if RNG.integers(2) else v for v in batch[0])[RNG.integers(len(batch[0]) + 1):])
        ops, exprs = {}, []
        for side, (name, dt, shape) in enumerate((("x", d1, batch[0] + (m, k)), ("y", d2, batch[1] + (k, nn)))):
            if RNG.integers(5) == 0:      # a vector: a row on the left, a column on the right
                shape = (shape[-1],) if side == 0 else (shape[-2],)
                tag, base, expr, fn = ("plain", lambda s: s, "{}", lambda a: a) if RNG.integers(2) else \
                    ("negstep", lambda s: (2 * s[0],), "{}[::-2]", lambda a: a[::-2])
            else:
                tag, base, expr, fn = MM_VIEWS[RNG.integers(len(MM_VIEWS))]
            x = gen(dt, base(shape), "full")
            ops[name] = (x, tag, expr.format(name), fn(x.a))
        (x, tx, ex, va), (y, ty, ey, vb) = ops["x"], ops["y"]
        P = promote(d1, d2)
        one("matmul", f"random {c}: {d1} {list(va.shape)} {tx} @ {d2} {list(vb.shape)} {ty}", {"x": x, "y": y},
            f"{ex} @ {ey}", Exact(P, imm_exact(P, TV(d1, va), TV(d2, vb))))


def linalg_cases():
    for dt in dts("matmul"):
        g = lambda s: gen(dt, s, "full" if dt in INTS else "small", specials=False)
        shapes = [("2-d", (3, 4), (4, 5), "x @ y", lambda a, b: (a, b)),
                  ("batched broadcast", (2, 1, 3, 4), (5, 4, 6), "matmul(x, y)", lambda a, b: (a, b)),
                  ("vector @ matrix", (4,), (4, 5), "x @ y", lambda a, b: (a, b)),
                  ("matrix @ vector", (3, 4), (4,), "x @ y", lambda a, b: (a, b)),
                  ("vector @ vector", (7,), (7,), "x @ y", lambda a, b: (a, b)),
                  ("mT", (2, 4, 3), (4, 5), "x.mT @ y", lambda a, b: (np.swapaxes(a, 1, 2), b)),
                  ("T T", (4, 3), (5, 4), "x.T @ y.T", lambda a, b: (a.T, b.T)),
                  ("slices", (6, 5), (4, 9), "x[::2, 1:] @ y[:, ::-2]", lambda a, b: (a[::2, 1:], b[:, ::-2])),
                  ("K=0", (3, 0), (0, 4), "x @ y", lambda a, b: (a, b)),
                  ("M=0", (0, 4), (4, 5), "x @ y", lambda a, b: (a, b)),
                  ("tiles", (67, 130), (130, 45), "x @ y", lambda a, b: (a, b)),
                  ("batched tiles", (3, 70, 33), (33, 66), "x @ y", lambda a, b: (a, b))]
        for tag, sa, sb, expr, fn in shapes:
            x, y = g(sa), g(sb)
            va, vb = fn(x.a, y.a)
            one("matmul", f"{dt} {tag}", {"x": x, "y": y}, expr, mm_ref(dt, va, vb, va.shape[-1]))
        if dt in FLOATS:
            x, y = g((3, 4)), g((4, 2))
            x.a[1, 2] = np.nan
            one("matmul", f"{dt} NaN", {"x": x, "y": y}, "x @ y", mm_ref(dt, x.a, y.a, 4))
    if "i32" in dts("matmul"):
        int_matmul_cases(60)
        for d1, d2 in (("i32", "f32"), ("u8", "f16"), ("i64", "bf16")):
            x, y = gen(d1, (3, 5), "small"), gen(d2, (5, 4), "small", specials=False)
            P = promote(d1, d2)
            one("matmul", f"{d1} @ {d2}", {"x": x, "y": y}, "x @ y", mm_ref(P, conv(x, P), conv(y, P), 5))
    for dt in dts("outer"):
        kind = "full" if dt in INTS else "small"
        x, y = gen(dt, (10,), kind), gen(dt, (7,), kind)
        if dt in FLOATS:
            ref = np.multiply.outer(x.a[::2].astype(np.float64), y.a.astype(np.float64))
            one("outer", f"{dt} strided", {"x": x, "y": y}, "outer(x[::2], y)", Close(dt, ref, 0))
            one("outer", f"{dt} empty", {"x": x, "y": y}, "outer(x[:0], y)", Close(dt, np.zeros((0, 7)), 0))
        else:   # integers wrap; bool is logical and (PyTorch)
            one("outer", f"{dt} strided", {"x": x, "y": y}, "outer(x[::2], y)",
                Exact(dt, np.multiply.outer(x.a[::2], y.a)))
            one("outer", f"{dt} empty", {"x": x, "y": y}, "outer(x[:0], y)", Exact(dt, np.zeros((0, 7))))
    if "i32" in dts("outer"):
        for d1, d2 in (("i8", "u8"), ("bool", "i32"), ("u16", "i64"), ("i16", "f32")):
            x, y = gen(d1, (6,), "full"), gen(d2, (5,), "full" if d2 in INTS else "small")
            P = promote(d1, d2)
            ref = np.multiply.outer(conv(x, P), conv(y, P))
            one("outer", f"{d1} with {d2}", {"x": x, "y": y}, "outer(x[::-1], y)",
                Exact(P, ref[::-1]) if P in INTS else Close(P, ref[::-1].astype(np.float64), 0))
    for dt in dts("dot"):
        kind = "full" if dt in INTS else "small"
        for tag, n, expr, fn in [("plain", 9, "dot(x, y)", lambda a: a), ("long", 5000, "dot(x, y)", lambda a: a),
                                 ("reversed", 9, "dot(x[::-1], y)", lambda a: a[::-1]), ("empty", 0, "dot(x, y)", lambda a: a)]:
            x, y = gen(dt, (n,), kind, specials=False), gen(dt, (n,), kind, specials=False)
            one("dot", f"{dt} {tag}", {"x": x, "y": y}, expr, mm_ref(dt, fn(x.a), y.a, n))
    if "i32" in dts("dot"):
        x, y = gen("u8", (300,), "full"), gen("i16", (150,), "full")
        one("dot", "u8 with i16, strided", {"x": x, "y": y}, "dot(x[1::2], y)",
            Exact("i16", imm_exact("i16", x.view(lambda a: a[1::2]), y)))
    for op, expr in (("matmul", "x @ x"), ("dot", "dot(x[0], x[1])"), ("outer", "outer(x[0], x[1])")):
        refused = [d for d in DTYPES if d not in dts(op)]
        for d in ("i32", "bool"):
            if op in OPS and d in refused:
                error_case(op, f"{d} refused", {"x": gen(d, (3, 3))}, [f"r = {expr}"], (3,))
    if "matmul" in OPS:
        error_case("matmul", "shapes that do not line up", {"x": gen("f32", (3, 4)), "y": gen("f32", (5, 6))},
                   ["r = x @ y"], (3,))


def neural_cases():
    for dt in dts("softmax"):
        for op in ("softmax", "log_softmax"):
            for tag, shape, expr, fn, dim in [("dim=-1", (4, 5, 6), "x", lambda a: a, -1),
                                              ("dim=0", (4, 5, 6), "x", lambda a: a, 0),
                                              ("dim=1 mT", (3, 6, 5), "x.mT", lambda a: np.swapaxes(a, 1, 2), 1),
                                              ("slice", (8, 6), "x[::2, 1:]", lambda a: a[::2, 1:], -1),
                                              ("long", (2, 3000), "x", lambda a: a, -1),
                                              ("empty", (0, 3), "x", lambda a: a, -1)]:
                x = gen(dt, shape, "small", specials=False)
                if dt in FLOATS and tag == "dim=-1":
                    x.a[0, 0, :2] = -np.inf      # masked entries
                    x.a[0, 1, :] = -np.inf       # a fully masked row: NaN, as PyTorch
                    x.a[1, 0, 3] = np.nan
                v = fvals(x.view(fn))
                ref = (torch.softmax if op == "softmax" else torch.log_softmax)(t64(v), dim).numpy()
                m = np.max(v, axis=dim, keepdims=True, initial=-np.inf)
                spread = np.where(np.isfinite(v - m), np.abs(v - m), 0)
                lg = math.log2(max(v.shape[dim] if v.ndim else 1, 2))
                e = acc(dt)
                tol = (e * (8 + 2 * spread + 2 * lg) * np.abs(ref) if op == "softmax"
                       else 8 * e * (np.abs(ref) + spread + lg + 1))
                one(op, f"{dt} {tag}", {"x": x}, f"{op}({expr}, dim={dim})", Close(fdt(dt), ref, tol))
    for dt in dts("layer_norm"):
        e, rdt = acc(dt), fdt(dt)
        x = gen(dt, (3, 4, 16), "small", specials=False)
        xs = gen(dt, (16, 5), "small", specials=False)
        w = gen(dt, (16,), "small", specials=False) if dt in FLOATS else None
        b = gen(dt, (16,), "small", specials=False) if dt in FLOATS else None
        for tag, inputs, expr, v, k in [
                ("plain", {"x": x}, "layer_norm(x)", fvals(x), {}),
                ("eps", {"x": x}, "layer_norm(x, eps=0.001)", fvals(x), {"eps": 1e-3}),
                ("strided", {"x": xs}, "layer_norm(x.T)", fvals(xs).T, {}),
                ("weight bias", {"x": x, "w": w, "b": b}, "layer_norm(x, w, b)", fvals(x), {"w": w, "b": b}),
                ("weight only", {"x": x, "w": w}, "layer_norm(x, weight=w)", fvals(x), {"w": w})]:
            if "w" in inputs and w is None:
                continue
            eps = k.get("eps", 1e-5)
            wv = k["w"].a.astype(np.float64) if k.get("w") else np.ones(v.shape[-1])
            bv = k["b"].a.astype(np.float64) if k.get("b") else np.zeros(v.shape[-1])
            z = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + eps)
            tol = 8 * e * 8 * ((1 + np.abs(z)) * np.abs(wv) + np.abs(bv))
            one("layer_norm", f"{dt} {tag}", inputs, expr, Close(rdt, z * wv + bv, tol))
        for tag, inputs, expr, v, wv, eps in [
                ("plain", {"x": x}, "rms_norm(x)", fvals(x), 1.0, 1e-6),
                ("eps", {"x": x}, "rms_norm(x, eps=0.5)", fvals(x), 1.0, 0.5),
                ("strided", {"x": xs}, "rms_norm(x.T)", fvals(xs).T, 1.0, 1e-6),
                ("weight", {"x": x, "w": w}, "rms_norm(x, w)", fvals(x), w, 1e-6)]:
            if wv is None:
                continue
            wv = wv.a.astype(np.float64) if isinstance(wv, TV) else wv
            ref = v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * wv
            one("rms_norm", f"{dt} {tag}", inputs, expr, Close(rdt, ref, 8 * e * 8 * (np.abs(ref) + np.abs(wv))))
        x0 = gen(dt, (4, 6), "small", specials=False)
        x0.a[1] = 0
        for tag, inputs, expr, v, dim, eps in [
                ("dim=-1", {"x": x0}, "l2_normalize(x)", fvals(x0), -1, 1e-12),
                ("dim=0", {"x": x0}, "l2_normalize(x, dim=0)", fvals(x0), 0, 1e-12),
                ("eps", {"x": x0}, "l2_normalize(x, eps=10.0)", fvals(x0), -1, 10.0),
                ("strided", {"x": xs}, "l2_normalize(x.T, dim=1)", fvals(xs).T, 1, 1e-12)]:
            ref = F.normalize(t64(v), dim=dim, eps=eps).numpy()
            one("l2_normalize", f"{dt} {tag}", inputs, expr, Close(rdt, ref, 8 * e * 8 * np.abs(ref)))


# ---------------------------------------------------------------- distances

def cdist_ref(dt, a, b, p):
    """torch.cdist in float64 of a and b (NumPy arrays of dt's values), and its
    tolerance: a p-norm of M terms, each a few roundings; p = 2 with more than 25
    rows on a side goes through |a|^2 + |b|^2 - 2 a.b (PyTorch's rule too), whose
    error in d^2 is about M eps (|a|^2 + |b|^2).  A NaN coordinate gives NaN for
    every p (PyTorch's p = inf may skip it)."""
    A, B = a.astype(np.float64), b.astype(np.float64)
    ref = torch.cdist(t64(A), t64(B), p=p).numpy() if A.size and B.size else \
        np.zeros(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + (A.shape[-2], B.shape[-2]))
    nan_a, nan_b = np.isnan(A).any(-1), np.isnan(B).any(-1)
    ref = np.where(nan_a[..., :, None] | nan_b[..., None, :], np.nan, ref)
    e, m = acc(dt), A.shape[-1]
    if p == 2 and (A.shape[-2] > 25 or B.shape[-2] > 25):
        na, nb = (A * A).sum(-1), (B * B).sum(-1)
        err = (m + 8) * e * (na[..., :, None] + nb[..., None, :])
        tol = np.minimum(np.sqrt(err), err / np.maximum(ref, 1e-300))
    elif p == 0:
        tol = 0.0
    else:
        tol = (m + 8) * e * np.abs(ref)
    return Close(dt, ref, tol)


def cosine_ref(rdt, a, b, dim, eps=1e-8):
    """F.cosine_similarity in float64 (PyTorch 1.13: each norm clamped at eps on its
    own); tensorrun computes in f64 too, so f64 results are near its bits."""
    ref = F.cosine_similarity(t64(a), t64(b), dim=dim, eps=eps).numpy()
    n = np.broadcast_shapes(np.shape(a), np.shape(b))
    lg = math.log2(max(n[dim] if n else 1, 2))
    return Close(rdt, ref, 16 * (lg + 1) * EPS["f64"])


def distance_cases():
    for dt in dts("cdist"):
        g = lambda s: gen(dt, s, "small", specials=False)
        shapes = [("direct", (5, 3), (4, 3), "cdist(x, y{})", lambda a, b: (a, b)),
                  ("product", (40, 7), (30, 7), "cdist(x, y{})", lambda a, b: (a, b)),
                  ("one side long", (3, 6), (31, 6), "cdist(x, y{})", lambda a, b: (a, b)),
                  ("batched broadcast", (2, 1, 6, 4), (3, 30, 4), "cdist(x, y{})", lambda a, b: (a, b)),
                  ("T", (3, 5), (4, 3), "cdist(x.T, y{})", lambda a, b: (a.T, b)),
                  ("T product", (6, 33), (30, 6), "cdist(x.T, y{})", lambda a, b: (a.T, b)),
                  ("negstep", (6, 8), (9, 4), "cdist(x[::-1, ::-2], y[::2]{})",
                   lambda a, b: (a[::-1, ::-2], b[::2])),
                  ("y.mT", (2, 27, 5), (2, 5, 28), "cdist(x, y.mT{})", lambda a, b: (a, np.swapaxes(b, 1, 2))),
                  ("long rows", (3, 5000), (4, 5000), "cdist(x, y{})", lambda a, b: (a, b)),
                  ("P=0", (0, 3), (40, 3), "cdist(x, y{})", lambda a, b: (a, b)),
                  ("M=0", (3, 0), (30, 0), "cdist(x, y{})", lambda a, b: (a, b))]
        for tag, sa, sb, expr, fn in shapes:
            x, y = g(sa), g(sb)
            va, vb = fn(x.a, y.a)
            for p in (0, 1, 2, 3, math.inf, 0.5):
                if tag in ("long rows", "T", "y.mT") and p in (0.5, 3):
                    continue
                if p == 0 and dt != "f64":
                    # counts, from differences of values that are not all distinct
                    pass
                karg = "" if p == 2 else f", p={lit(float(p)) if p == math.inf else p}"
                one("cdist", f"{dt} {tag} p={p}", {"x": x, "y": y}, expr.format(karg),
                    cdist_ref(dt, va, vb, p))
        x, y = g((4, 3)), g((30, 3))
        x.a[1, 2], y.a[3, 0] = np.nan, np.nan
        for p in (0, 1, 2, 3, math.inf):
            karg = "" if p == 2 else f", p={lit(float(p)) if p == math.inf else p}"
            one("cdist", f"{dt} NaN p={p}", {"x": x, "y": y}, f"cdist(x, y{karg})",
                cdist_ref(dt, x.a, y.a, p))
            one("cdist", f"{dt} NaN direct p={p}", {"x": x, "y": y}, f"cdist(x, y[:5]{karg})",
                cdist_ref(dt, x.a, y.a[:5], p))
        x = g((30, 4))
        one("cdist", f"{dt} cdist(x, x) direct", {"x": x}, "cdist(x[:20], x[:20])", cdist_ref(dt, x.a[:20], x.a[:20], 2))
    if "cdist" in OPS:
        f = lambda s: gen("f32", s)
        for tag, inputs, stmt in [("1-d", {"x": f((4,)), "y": f((3, 4))}, "r = cdist(x, y)"),
                                  ("rows differ", {"x": f((4, 3)), "y": f((5, 4))}, "r = cdist(x, y)"),
                                  ("batches differ", {"x": f((2, 4, 3)), "y": f((3, 5, 3))}, "r = cdist(x, y)"),
                                  ("p < 0", {"x": f((4, 3)), "y": f((5, 3))}, "r = cdist(x, y, p=-1)"),
                                  ("p NaN", {"x": f((4, 3)), "y": f((5, 3))}, "r = cdist(x, y, p=nan)"),
                                  ("i32", {"x": gen("i32", (4, 3)), "y": gen("i32", (5, 3))}, "r = cdist(x, y)")]:
            error_case("cdist", tag, inputs, [stmt], (3,))
    for dt in dts("cosine_similarity"):
        rdt = fdt(dt)
        g = lambda s: gen(dt, s, "small", specials=False)
        x, y = g((4, 5, 6)), g((4, 5, 6))
        xb, yb = g((3, 1, 6)), g((4, 6))
        xt, yt = g((6, 4)), g((4, 6))
        z, z2 = g((4, 6)), g((4, 6))
        z.a[1] = 0
        for tag, inputs, expr, a, b, dim, eps in [
                ("dim=-1", {"x": x, "y": y}, "cosine_similarity(x, y)", fvals(x), fvals(y), -1, 1e-8),
                ("dim=0", {"x": x, "y": y}, "cosine_similarity(x, y, dim=0)", fvals(x), fvals(y), 0, 1e-8),
                ("dim=1", {"x": x, "y": y}, "cosine_similarity(x, y, 1)", fvals(x), fvals(y), 1, 1e-8),
                ("broadcast", {"x": xb, "y": yb}, "cosine_similarity(x, y)", fvals(xb), fvals(yb), -1, 1e-8),
                ("broadcast dim=1", {"x": xb, "y": yb}, "cosine_similarity(x, y, dim=1)", fvals(xb), fvals(yb), 1, 1e-8),
                ("T", {"x": xt, "y": yt}, "cosine_similarity(x.T, y)", fvals(xt).T, fvals(yt), -1, 1e-8),
                ("negstep", {"x": xt, "y": yt}, "cosine_similarity(x[::-1], y.T, dim=0)", fvals(xt)[::-1], fvals(yt).T, 0, 1e-8),
                ("zero rows", {"x": z, "y": z2}, "cosine_similarity(x, y)", fvals(z), fvals(z2), -1, 1e-8),
                ("eps", {"x": z, "y": z2}, "cosine_similarity(x, y, eps=2.5)", fvals(z), fvals(z2), -1, 2.5),
                ("0-d", {"x": g(()), "y": g(())}, "cosine_similarity(x, y)", None, None, -1, 1e-8),
                ("empty", {"x": g((0, 3)), "y": g((0, 3))}, "cosine_similarity(x, y)", np.zeros((0, 3)), np.zeros((0, 3)), -1, 1e-8),
                ("length 0", {"x": g((2, 0)), "y": g((2, 0))}, "cosine_similarity(x, y)", np.zeros((2, 0)), np.zeros((2, 0)), -1, 1e-8),
                ("long", {"x": g((2, 9000)), "y": g((9000,))}, "cosine_similarity(x, y)", None, None, -1, 1e-8)]:
            if a is None:
                a, b = fvals(inputs["x"]), fvals(inputs["y"])
            one("cosine_similarity", f"{dt} {tag}", inputs, expr, cosine_ref(rdt, a, b, dim, eps))
        if dt in FLOATS:
            w, w2 = g((3, 5)), g((3, 5))
            w.a[0, 2], w.a[2, 4] = np.nan, np.inf
            one("cosine_similarity", f"{dt} NaN", {"x": w, "y": w2}, "cosine_similarity(x[:2], y[:2])",
                cosine_ref(rdt, fvals(w)[:2], fvals(w2)[:2], -1))
    if "cosine_similarity" in OPS:
        x = gen("f32", (4, 5))
        for d1, d2 in (("f16", "f32"), ("i32", "f64"), ("u8", "bool")):
            a, b = gen(d1, (3, 4), "small", specials=False), gen(d2, (4,), "small", specials=False)
            one("cosine_similarity", f"{d1} with {d2}", {"x": a, "y": b}, "cosine_similarity(x, y)",
                cosine_ref(fdt(promote(d1, d2)), fvals(a), fvals(b), -1))
        for tag, inputs, stmt in [("shapes", {"x": x, "y": gen("f32", (3, 5))}, "r = cosine_similarity(x, y)"),
                                  ("dim", {"x": x, "y": x}, "r = cosine_similarity(x, x, dim=2)"),
                                  ("u64 with i64", {"x": gen("u64", (3,)), "y": gen("i64", (3,))},
                                   "r = cosine_similarity(x, y)")]:
            error_case("cosine_similarity", tag, inputs, [stmt], (3,))


def cross_entropy_ref(dt, v, t, d, reduction):
    """F.cross_entropy in float64 of logits v (classes on dimension d) and class
    indices t; the tolerance: log_softmax's per line (the spread of the line and
    log C), then the pairwise sum's."""
    lt = torch.from_numpy(np.moveaxis(v, d, 1) if v.ndim > 1 else v.copy())
    ref = F.cross_entropy(lt, torch.from_numpy(np.asarray(t, np.int64)), reduction=reduction).numpy()
    line = F.cross_entropy(lt, torch.from_numpy(np.asarray(t, np.int64)), reduction="none").numpy()
    e = acc(dt)
    m = v.max(axis=d, keepdims=True) if v.shape[d] else v
    spread = np.abs(v - m).max(axis=d) if v.size else np.zeros(line.shape)
    per = 8 * e * (spread + math.log2(max(v.shape[d], 2)) + 1)
    if reduction == "none":
        return Close(dt, ref, per)
    n = max(line.size, 1)
    tol = per.sum() + (math.log2(n) + 1) * e * np.abs(line).sum()
    return Close(dt, ref, tol / n if reduction == "mean" else tol)


def cross_entropy_cases():
    for dt in dts("cross_entropy"):
        g = lambda s, k="small": gen(dt, s, k, specials=False)
        x, t = g((6, 5)), TV("i64", RNG.integers(0, 5, 6))
        x3, t3 = g((3, 4, 5)), TV("i32", RNG.integers(0, 4, (3, 5)))
        xl, tl = g((4, 6, 5)), TV("u8", RNG.integers(0, 5, (4, 6)))
        xt, tt = g((5, 8)), TV("i16", RNG.integers(0, 5, 16))
        v1, t0 = g((7,)), TV("i64", np.array(3))
        big = TV(dt, round_to(dt, RNG.standard_normal((4, 6)) * 1e4 if dt != "f16" else RNG.standard_normal((4, 6)) * 1e4 / 2))
        tb = TV("i64", RNG.integers(0, 6, 4))
        wide, tw = g((3, 5000)), TV("i64", RNG.integers(0, 5000, 3))
        for red in ("mean", "sum", "none"):
            rk = "" if red == "mean" else f", reduction={lit(red)}"
            for tag, inputs, expr, v, tv, d in [
                    ("[N, C]", {"x": x, "t": t}, f"cross_entropy(x, t{rk})", fvals(x), t.a, 1),
                    ("[N, C, d]", {"x": x3, "t": t3}, f"cross_entropy(x, t{rk})", fvals(x3), t3.a, 1),
                    ("dim=-1", {"x": xl, "t": tl}, f"cross_entropy(x, t, dim=-1{rk})", fvals(xl), tl.a, 2),
                    ("dim=0", {"x": x, "t": TV("i64", RNG.integers(0, 6, 5))}, None, fvals(x), None, 0),
                    ("strided", {"x": xt, "t": tt}, f"cross_entropy(x.T, t[::2]{rk})", fvals(xt).T, tt.a[::2], 1),
                    ("[C], 0-d target", {"x": v1, "t": t0}, f"cross_entropy(x, t{rk})", fvals(v1), t0.a, 0),
                    ("[C], constant target", {"x": v1}, f"cross_entropy(x, 2{rk})", fvals(v1), np.array(2), 0),
                    ("large logits", {"x": big, "t": tb}, f"cross_entropy(x, t{rk})", fvals(big), tb.a, 1),
                    ("long lines", {"x": wide, "t": tw}, f"cross_entropy(x, t{rk})", fvals(wide), tw.a, 1),
                    ("empty", {"x": g((0, 4)), "t": TV("i64", np.zeros(0, np.int64))}, f"cross_entropy(x, t{rk})",
                     np.zeros((0, 4)), np.zeros(0, np.int64), 1)]:
                if expr is None:
                    tv = inputs["t"].a
                    expr = f"cross_entropy(x, t, dim=0{rk})"
                one("cross_entropy", f"{dt} {tag} {red}", inputs, expr, cross_entropy_ref(dt, v, tv, d, red))
    if "cross_entropy" in OPS:
        x, t = gen("f32", (4, 3)), TV("i64", np.array([0, 2, 1, 1]))
        for tag, inputs, stmt, code in [
                ("target out of range", {"x": x, "t": TV("i64", np.array([0, 3, 1, 1]))}, "r = cross_entropy(x, t)", 1),
                ("negative target", {"x": x, "t": TV("i64", np.array([0, -1, 1, 1]))}, "r = cross_entropy(x, t)", 1),
                ("ignore_index -100 is not ignored", {"x": x, "t": TV("i64", np.array([0, -100, 1, 1]))},
                 "r = cross_entropy(x, t)", 1),
                ("float target", {"x": x, "t": gen("f32", (4, 3))}, "r = cross_entropy(x, t)", 3),
                ("target shape", {"x": x, "t": TV("i64", np.array([0, 1, 2]))}, "r = cross_entropy(x, t)", 3),
                ("target rank", {"x": x, "t": t}, "r = cross_entropy(x, t[None])", 3),
                ("reduction", {"x": x, "t": t}, 'r = cross_entropy(x, t, reduction="avg")', 3),
                ("dim", {"x": x, "t": t}, "r = cross_entropy(x, t, dim=2)", 3),
                ("0-d logits", {"x": gen("f32", ())}, "r = cross_entropy(x, 0)", 3),
                ("integer logits", {"x": gen("i32", (4, 3)), "t": t}, "r = cross_entropy(x, t)", 3)]:
            error_case("cross_entropy", tag, inputs, [stmt], (code,))


# ---------------------------------------------------------------- select

def stable_order(a, axis, descending):
    """Indices of a stable sort, NaN last ascending and first descending (tensorrun-pipeline(5), OPS: sort)."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    idx = np.argsort(np.flip(a, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - idx, axis)


def select_cases():
    for dt in dts("sort"):
        for tag, shape, expr, fn, dim, desc in [("dim=-1", (4, 5, 6), "x", lambda a: a, -1, False),
                                                ("dim=0 descending", (6, 5), "x", lambda a: a, 0, True),
                                                ("strided", (7, 4), "x.T", lambda a: a.T, -1, True),
                                                ("negstep", (4, 9), "x[::-1, ::-2]", lambda a: a[::-1, ::-2], 1, False),
                                                ("long", (2, 2000), "x", lambda a: a, -1, True),
                                                ("0d", (), "x", lambda a: a, -1, False),
                                                ("empty", (0, 3), "x", lambda a: a, -1, False)]:
            x = gen(dt, shape, "mix")
            v = x.view(fn)
            d = dim if v.a.ndim else None
            order = stable_order(v.a, d, desc) if v.a.ndim else np.zeros((), np.int64)
            vals = np.take_along_axis(v.a, order, d) if v.a.ndim else v.a
            k = kw(dim=dim if v.a.ndim else None, descending=desc or None)
            case("sort", f"{dt} {tag}", {"x": x}, [f"v, ix = sort({expr}{k})"],
                 {"v": Exact(dt, vals, zero_sign=False), "ix": Exact("i64", order)})
            case("argsort", f"{dt} {tag}", {"x": x}, [f"r = argsort({expr}{k})"], {"r": Exact("i64", order)})
        for tag, shape, expr, fn, k, dim, largest in [("k=3", (4, 7), "x", lambda a: a, 3, -1, True),
                                                      ("smallest dim=0", (6, 5), "x", lambda a: a, 2, 0, False),
                                                      ("k=all", (3, 6), "x", lambda a: a, 6, -1, True),
                                                      ("strided", (7, 4), "x.T", lambda a: a.T, 1, -1, True),
                                                      ("k=0", (3, 6), "x", lambda a: a, 0, -1, True),
                                                      ("long", (2, 3000), "x", lambda a: a, 50, -1, False),
                                                      ("panels dim=0", (40, 1100), "x", lambda a: a, 5, 0, True),
                                                      ("panels strided", (300, 9), "x.T", lambda a: a.T, 3, 0, False),
                                                      ("panels 3-d", (3, 30, 7), "x", lambda a: a, 4, 1, False)]:
            x = gen(dt, shape, "mix")
            v = x.view(fn)
            order = np.take(stable_order(v.a, dim, largest), range(k), axis=dim)
            case("topk", f"{dt} {tag}", {"x": x},
                 [f"v, ix = topk({expr}, {k}{kw(dim=dim, largest=False if not largest else None)})"],
                 {"v": Exact(dt, np.take_along_axis(v.a, order, dim)), "ix": Exact("i64", order)})
    for op in ("sort", "argsort", "topk"):
        if op in OPS and "bool" not in dts(op):
            error_case(op, "bool refused", {"x": gen("bool", (4,))},
                       ["v, ix = topk(x, 1)" if op == "topk" else "v, ix = sort(x)" if op == "sort" else "r = argsort(x)"], (3,))
    for dt in dts("gather"):
        x = gen(dt, (4, 6), "full")
        idx = TV("i64", RNG.integers(0, 6, (3, 5)))
        one("gather", f"{dt} dim=1", {"x": x, "i": idx}, "gather(x, 1, i)",
            Exact(dt, np.take_along_axis(x.a[:3, :6], idx.a, 1)))
        idx0 = TV("i64", RNG.integers(0, 4, (7, 6)))
        one("gather", f"{dt} dim=0", {"x": x, "i": idx0}, "gather(x, 0, i)", Exact(dt, np.take_along_axis(x.a, idx0.a, 0)))
        xt = x.view(lambda a: a.T)
        idx2 = TV("i64", RNG.integers(0, 4, (6, 2)))
        one("gather", f"{dt} strided dim=-1", {"x": x, "i": idx2}, "gather(x.T, -1, i)",
            Exact(dt, np.take_along_axis(xt.a, idx2.a, 1)))
        one("gather", f"{dt} empty index", {"x": x, "i": TV("i64", np.zeros((0, 6)))}, "gather(x, 0, i)",
            Exact(dt, np.zeros((0, 6), NP[dt])))
    if "gather" in OPS:
        error_case("gather", "index out of range", {"x": gen("f32", (2, 3)), "i": TV("i64", [[0, 3]])},
                   ["r = gather(x, 1, i)"], (1,))
    for dt in dts("index_select"):
        x = gen(dt, (5, 6), "full")
        for tag, idx, expr, fn, dim in [("dim=0 i64", TV("i64", [4, 0, 0, 2]), "index_select(x, 0, i)", lambda a: a, 0),
                                        ("dim=-1 i32", TV("i32", [5, 1, 3]), "index_select(x, -1, i)", lambda a: a, 1),
                                        ("strided", TV("i64", [1, 1, 0]), "index_select(x[::2, ::-1], 1, i)",
                                         lambda a: a[::2, ::-1], 1),
                                        ("empty", TV("i64", np.zeros(0)), "index_select(x, 0, i)", lambda a: a, 0)]:
            one("index_select", f"{dt} {tag}", {"x": x, "i": idx}, expr,
                Exact(dt, np.take(fn(x.a), idx.a.astype(np.int64), axis=dim)))
    if "index_select" in OPS:
        error_case("index_select", "index out of range", {"x": gen("f32", (2, 3)), "i": TV("i64", [2])},
                   ["r = index_select(x, 0, i)"], (1,))
        error_case("index_select", "index -3 of 2 out of range", {"x": gen("f32", (2, 3)), "i": TV("i64", [-3])},
                   ["r = index_select(x, 0, i)"], (1,))
    # x[idx] with a 1-d integer tensor: index_select along dimension 0; a negative index counts from the end
    for dt in dts("index_select"):
        x = gen(dt, (5, 6), "full")
        for tag, idx, expr, fn in [("i64 from the end", TV("i64", [4, -1, 0, -5]), "x[i]", lambda a: a),
                                   ("u8", TV("u8", [3, 3, 1]), "x[i]", lambda a: a),
                                   ("i16 of a transpose", TV("i16", [5, -6, 2]), "x.T[i]", lambda a: a.T),
                                   ("of a negative-step view", TV("i32", [0, -1]), "x[::-2, 1:][i]",
                                    lambda a: a[::-2, 1:]),
                                   ("empty", TV("i64", np.zeros(0)), "x[i]", lambda a: a)]:
            one("index_select", f"{dt} x[idx] {tag}", {"x": x, "i": idx}, expr,
                Exact(dt, np.take(fn(x.a), idx.a.astype(np.int64), axis=0)))
    if "index_select" in OPS:
        x = gen("f32", (5, 6))
        error_case("index_select", "x[mask] refused", {"x": x}, ["r = x[x > 0]"], (3,))
        error_case("index_select", "x[idx] with a 2-d idx refused", {"x": x, "i": TV("i64", [[0, 1]])},
                   ["r = x[i]"], (3,))
        error_case("index_select", "x[idx] with a float idx refused", {"x": x, "i": TV("f32", [0.0])},
                   ["r = x[i]"], (3,))
        error_case("index_select", "x[idx, 0] refused", {"x": x, "i": TV("i64", [0])}, ["r = x[i, 0]"], (3,))
        error_case("index_select", "x[idx] out of range", {"x": x, "i": TV("i64", [5])}, ["r = x[i]"], (1,))
    # split and chunk: views, as many as the arguments make, PyTorch's pieces
    for dt in dts("split"):
        x = gen(dt, (7, 6), "full")
        for tag, expr, fn, pieces in [
                ("size 3", "split(x, 3)", lambda a: a, lambda t: torch.split(t, 3)),
                ("sizes, dim=1", "x.split([1, 0, 5], dim=1)", lambda a: a, lambda t: torch.split(t, [1, 0, 5], 1)),
                ("of a transpose, dim=-1", "split(x.T, 2, -1)", lambda a: a.T, lambda t: torch.split(t, 2, -1)),
                ("negstep", "split(x[::-1, ::-2], 2)", lambda a: a[::-1, ::-2], lambda t: torch.split(t, 2))]:
            v = fn(x.a)
            parts = pieces(torch.from_numpy(np.ascontiguousarray(v.astype(np.float64))))
            starts = np.cumsum([0] + [p.shape[0 if "dim" not in tag else -1] for p in parts])
            names = [f"p{i}" for i in range(len(parts))]
            axis = 0 if "dim" not in tag else 1
            outs = {n: Exact(dt, np.take(v, range(starts[i], starts[i + 1]), axis=axis)) for i, n in enumerate(names)}
            case("split", f"{dt} {tag}", {"x": x}, [f"{', '.join(names)} = {expr}"], outs)
    for dt in dts("chunk"):
        for size, n in ((5, 4), (6, 4), (2, 5), (9, 3), (0, 3)):
            x = gen(dt, (size, 2), "full")
            parts = torch.chunk(torch.zeros(size, 2), n)
            names = [f"p{i}" for i in range(len(parts))]
            at = np.cumsum([0] + [p.shape[0] for p in parts])
            outs = {nm: Exact(dt, x.a[at[i]:at[i + 1]]) for i, nm in enumerate(names)}
            case("chunk", f"{dt} [{size}] in {n}", {"x": x}, [f"{', '.join(names)} = x.chunk({n})"], outs)
    if "split" in OPS:
        x = gen("f32", (5, 3))
        for stmt, tag in (("a, b = split(x, [2, 2])", "sizes short of the dim"), ("a = split(x, 0)", "size 0"),
                          ("a, b, c = split(x, 3)", "more names than pieces"),
                          ("a = split(x, 2) + 1", "pieces in an expression"),
                          ("a, b = chunk(x, 0)", "0 chunks"), ("a = split(x.sum(), 1)", "a 0-d tensor")):
            error_case("split" if "split" in stmt else "chunk", f"{tag} refused", {"x": x}, [stmt], (3,))
    for dt in dts("concat"):
        x, y, z = gen(dt, (2, 3), "full"), gen(dt, (4, 3), "full"), gen(dt, (0, 3), "full")
        one("concat", f"{dt} dim=0", {"x": x, "y": y, "z": z}, "concat([x, y, z], 0)",
            Exact(dt, np.concatenate([x.a, y.a, z.a], 0)))
        one("concat", f"{dt} dim=-1 strided", {"x": x, "y": y}, "concat([x.T, y.T[:, ::-1]], dim=-1)",
            Exact(dt, np.concatenate([x.a.T, y.a.T[:, ::-1]], -1)))
        s = gen(dt, (2, 3), "full")
        one("stack", f"{dt} dim=0", {"x": x, "y": s}, "stack([x, y])", Exact(dt, np.stack([x.a, s.a], 0)))
        one("stack", f"{dt} dim=-1", {"x": x, "y": s}, "stack([x, y[::-1]], dim=-1)",
            Exact(dt, np.stack([x.a, s.a[::-1]], -1)))
        one("stack", f"{dt} dim=1 0d", {"x": TV(dt, x.a[0, 0]), "y": TV(dt, s.a[1, 1])}, "stack([x, y])",
            Exact(dt, np.stack([x.a[0, 0], s.a[1, 1]])))
    for d1, d2 in MIXED:
        x, y = gen(d1, (2, 3), "small"), gen(d2, (1, 3), "small")
        P = promote(d1, d2)
        one("concat", f"{d1} with {d2}", {"x": x, "y": y}, "concat([x, y], 0)",
            Exact(P, np.concatenate([conv(x, P), conv(y, P)])))


def pad_ref(a, pad, mode="constant", value=0):
    """F.pad on a NumPy array: pairs from the last dimension back; negative widths
    crop (constant mode); reflect and replicate are np.pad's reflect and edge."""
    widths = [(0, 0)] * a.ndim
    for k in range(len(pad) // 2):
        widths[a.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    if mode != "constant":
        return np.pad(a, widths, mode={"reflect": "reflect", "replicate": "edge"}[mode])
    # out[j] = x[j - before] where that is inside x, else the value
    out = np.full([n + b + e for n, (b, e) in zip(a.shape, widths)], np.array(value).astype(a.dtype), a.dtype)
    src = tuple(slice(max(0, -b), max(0, min(n, n + e))) for n, (b, e) in zip(a.shape, widths))
    dst = tuple(slice(max(0, b), max(0, b) + max(0, s.stop - s.start)) for (b, _), s in zip(widths, src))
    if all(s.stop > s.start for s in src):
        out[dst] = a[src]
    return out


def arrange_cases():
    """roll, repeat, repeat_interleave, pad, take_along_dim and one_hot: exact copies,
    against NumPy (np.roll, np.tile, np.repeat, np.pad, np.take_along_axis, np.eye),
    which PyTorch agrees with where it takes the dtype (checked once below)."""
    x = gen("f64", (2, 3, 4), "full", specials=False)
    t = torch.from_numpy(x.a)
    assert np.array_equal(torch.roll(t, (1, -2), (0, 2)).numpy(), np.roll(x.a, (1, -2), (0, 2)))
    assert np.array_equal(t.repeat(2, 1, 1, 3).numpy(), np.tile(x.a, (2, 1, 1, 3)))
    assert np.array_equal(torch.repeat_interleave(t, 3, 1).numpy(), np.repeat(x.a, 3, 1))
    for mode, pad in [("constant", [1, -1, 2, 0]), ("reflect", [3, 1, 2, 1]), ("replicate", [4, 0, 1, 5])]:
        ref = F.pad(t, pad, mode=mode, **({"value": 2.5} if mode == "constant" else {})).numpy()
        assert np.array_equal(ref, pad_ref(x.a, pad, mode, 2.5), equal_nan=True), mode
    idx = RNG.integers(0, 3, (2, 1, 4))
    assert np.array_equal(torch.take_along_dim(t, torch.from_numpy(idx), 1).numpy(), np.take_along_axis(x.a, idx, 1))
    assert np.array_equal(F.one_hot(torch.tensor([[0, 3], [2, 2]]), 4).numpy(), np.eye(4, dtype=np.int64)[[[0, 3], [2, 2]]])
    for dt in dts("roll"):
        for tag, shape, expr, fn in VIEWS:
            x = gen(dt, shape, "full")
            a = fn(x.a)
            items = [(f"roll({expr}, 2)", np.roll(a, 2)), (f"roll({expr}, -7)", np.roll(a, -7))]
            if a.ndim >= 1:
                items.append((f"roll({expr}, [-3], [0])", np.roll(a, -3, 0)))
            if a.ndim >= 2:
                items += [(f"roll({expr}, [1, 7], [-1, 0])", np.roll(a, (1, 7), (-1, 0))),
                          (f"roll({expr}, [1, 2], dims=[1, 1])", np.roll(a, (1, 2), (1, 1)))]
            case("roll", f"{dt} {tag}", {"x": x}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})
    if "roll" in OPS:
        x, s0 = gen("f32", (3, 4)), gen("f32", ())
        for label, stmt in [("two shifts, no dims", "r = roll(x, [1, 2])"), ("shifts and dims differ", "r = roll(x, 1, [0, 1])"),
                            ("dim on 0-d", "r = roll(s, 1, 0)"), ("dim out of range", "r = roll(x, 1, 2)"),
                            ("float shift", "r = roll(x, 1.5)"), ("no shift", "r = roll(x, [], [])")]:
            error_case("roll", label, {"x": x, "s": s0}, [stmt], (3,))
    for dt in dts("repeat"):
        for tag, shape, expr, fn in VIEWS:
            x = gen(dt, shape, "full")
            a = fn(x.a)
            n = a.ndim
            items = [(f"repeat({expr}, {lit([2] + [1, 3, 2][:n] + [1] * max(0, n - 3))})",
                      np.tile(a, [2] + [1, 3, 2][:n] + [1] * max(0, n - 3))),
                     (f"repeat({expr}, {lit([3] * n)})", np.tile(a, [3] * n) if n else a),
                     (f"repeat({expr}, {lit([1] * n + [0])})", np.tile(a, [1] * n + [0]))]
            if n == 1:
                items.append((f"repeat({expr}, 4)", np.tile(a, 4)))
            case("repeat", f"{dt} {tag}", {"x": x}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})
    if "repeat" in OPS:
        x = gen("f32", (3, 4))
        for label, stmt in [("fewer repeats than dims", "r = repeat(x, 2)"), ("negative", "r = repeat(x, [2, -1])"),
                            ("too many dims", "r = repeat(x, [1, 1, 1, 1, 1, 1, 1, 1, 1])")]:
            error_case("repeat", label, {"x": x}, [stmt], (3,))
    for dt in dts("repeat_interleave"):
        for tag, shape, expr, fn in VIEWS:
            x = gen(dt, shape, "full")
            a = fn(x.a)
            items = [(f"repeat_interleave({expr}, 3)", np.repeat(a, 3)), (f"repeat_interleave({expr}, 0)", np.repeat(a, 0))]
            if a.ndim >= 1:
                items += [(f"repeat_interleave({expr}, 2, dim=0)", np.repeat(a, 2, 0)),
                          (f"repeat_interleave({expr}, 7, -1)", np.repeat(a, 7, -1)),
                          (f"repeat_interleave({expr}, 0, dim=-1)", np.repeat(a, 0, -1))]
            case("repeat_interleave", f"{dt} {tag}", {"x": x}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})
    if "repeat_interleave" in OPS:
        x, s0, i = gen("f32", (3, 4)), gen("f32", ()), TV("i64", [1, 2, 0])
        for label, stmt in [("tensor of repeats", "r = repeat_interleave(x, i, dim=0)"), ("negative", "r = repeat_interleave(x, -1)"),
                            ("dim on 0-d", "r = repeat_interleave(s, 2, 0)"), ("dim out of range", "r = repeat_interleave(x, 2, 2)"),
                            ("float repeats", "r = repeat_interleave(x, 2.0)")]:
            error_case("repeat_interleave", label, {"x": x, "s": s0, "i": i}, [stmt], (3,))
    for dt in dts("pad"):
        value = True if dt == "bool" else 2.5 if dt in FLOATS else 5
        for tag, shape, expr, fn in VIEWS:
            x = gen(dt, shape, "full")
            a = fn(x.a)
            items = []
            if a.ndim == 0:
                items.append((f"pad({expr}, [])", a))
            else:
                items += [(f"pad({expr}, [1, 2])", pad_ref(a, [1, 2])),
                          (f"pad({expr}, [0, 3], value={lit(value)})", pad_ref(a, [0, 3], value=value))]
                if a.shape[-1] >= 3:
                    items.append((f'pad({expr}, [2, 1], mode="reflect")', pad_ref(a, [2, 1], "reflect")))
                if a.size:
                    items.append((f'pad({expr}, [3, 1], "replicate")', pad_ref(a, [3, 1], "replicate")))
            if a.ndim >= 2:
                items.append((f"pad({expr}, [1, -1, -1, 2], value={lit(value)})", pad_ref(a, [1, -1, -1, 2], value=value)))
                if a.shape[-1] >= 2:
                    items.append((f"pad({expr}, [-1, -1, 0, 0])", pad_ref(a, [-1, -1, 0, 0])))
                items.append((f"pad({expr}, [0, 0, -{a.shape[-2]}, 2])", pad_ref(a, [0, 0, -a.shape[-2], 2])))
                if min(a.shape[-2:]) >= 3:
                    items.append((f'pad({expr}, [2, 2, 1, 2], mode="reflect")', pad_ref(a, [2, 2, 1, 2], "reflect")))
                if a.size:
                    items.append((f'pad({expr}, [2, 0, 1, 3], mode="replicate")', pad_ref(a, [2, 0, 1, 3], "replicate")))
            if a.ndim >= 3 and min(a.shape) >= 2:
                for mode in ("reflect", "replicate"):
                    items.append((f'pad({expr}, [1, 1, 1, 0, 0, 1], mode="{mode}")', pad_ref(a, [1, 1, 1, 0, 0, 1], mode)))
            case("pad", f"{dt} {tag}", {"x": x}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})
        if dt in INTS:   # a float value is truncated, as PyTorch converts it
            x = gen(dt, (2, 3), "small")
            one("pad", f"{dt} float value", {"x": x}, "pad(x, [1, 1], value=2.7)", Exact(dt, pad_ref(x.a, [1, 1], value=2)))
    if "pad" in OPS:
        x, e, u = gen("f32", (2, 3)), gen("f32", (2, 0)), gen("u8", (2, 3))
        for label, stmt in [("odd length", "r = pad(x, [1])"), ("too many pairs", "r = pad(x, [1, 1, 1, 1, 1, 1])"),
                            ("reflect as wide as the size", 'r = pad(x, [3, 0], mode="reflect")'),
                            ("replicate an empty dim", 'r = pad(e, [1, 0], mode="replicate")'),
                            ("reflect an empty dim", 'r = pad(e, [1, 0], mode="reflect")'),
                            ("unknown mode", 'r = pad(x, [1, 1], mode="circular")'),
                            ("negative width in reflect", 'r = pad(x, [-1, 1], mode="reflect")'),
                            ("value in replicate", 'r = pad(x, [1, 1], mode="replicate", value=1)'),
                            ("negative size", "r = pad(x, [-2, -2])"),
                            ("width INT64_MIN", "r = pad(x, [-9223372036854775807 - 1, 9223372036854775807])"), ("u8 value -1", "r = pad(u, [1, 1], value=-1)"),
                            ("u8 value 255.5", "r = pad(u, [1, 1], value=255.5)"), ("u8 value nan", "r = pad(u, [1, 1], value=nan)"),
                            ("f16 value 1e6", "r = pad(cast(x, f16), [1, 1], value=1e6)")]:
            error_case("pad", label, {"x": x, "e": e, "u": u}, [stmt], (3,))
    for dt in dts("take_along_dim"):
        for tag, shape, expr, fn in VIEWS:
            x = gen(dt, shape, "full")
            a = fn(x.a)
            inputs, stmts, outs = {"x": x}, [], {}
            if a.size:
                idx = TV("i64", RNG.integers(0, a.size, (2, 5)))
                inputs["i"] = idx
                stmts.append(f"f = take_along_dim({expr}, i)")
                outs["f"] = Exact(dt, a.reshape(-1)[idx.a.reshape(-1)], zero_sign=True)
            if a.ndim >= 1:
                for k, idt in enumerate(["i64", "i32", "u8"]):
                    d = [0, -1, a.ndim - 1][k]
                    ishape = [1 if (i + k) % 2 and i != d % a.ndim else a.shape[i] for i in range(a.ndim)]
                    ishape[d] = 3 if a.shape[d] else 0
                    idx = TV(idt, RNG.integers(0, max(a.shape[d], 1), ishape))
                    inputs[f"j{k}"] = idx
                    stmts.append(f"r{k} = take_along_dim({expr}, j{k}, {d})")
                    outs[f"r{k}"] = Exact(dt, np.take_along_axis(a, idx.a.astype(np.int64), d), zero_sign=True)
            # x broadcast to the indices (x[::-1, ::-2][:1] meets a bug of indexing a
            # negative-step view, not take_along_dim's)
            if a.ndim >= 2 and a.size and tag != "negstep":
                idx = TV("i64", RNG.integers(0, a.shape[-1], (4,) + a.shape[1:-1] + (2,)))
                inputs["b"] = idx
                stmts.append(f"b2 = take_along_dim({expr}[:1], b, -1)")
                outs["b2"] = Exact(dt, np.take_along_axis(a[:1], idx.a, -1), zero_sign=True)
            if a.ndim == 0:
                inputs["z"] = TV("i64", np.zeros((), np.int64))
                stmts.append(f"z0 = take_along_dim({expr}, z)")
                outs["z0"] = Exact(dt, a.reshape(1), zero_sign=True)
            case("take_along_dim", f"{dt} {tag}", inputs, stmts, outs)
    if "take_along_dim" in OPS:
        x, s0 = gen("f32", (3, 4)), gen("f32", ())
        for label, stmt, idx, code in [("negative index (as gather)", "r = take_along_dim(x, i, 1)", [[-1]], 1),
                                       ("index out of range", "r = take_along_dim(x, i, 0)", [[3]], 1),
                                       ("flat index out of range", "r = take_along_dim(x, i)", [[12]], 1),
                                       ("float indices", "r = take_along_dim(x, cast(i, f32), 1)", [[0]], 3),
                                       ("rank differs", "r = take_along_dim(x, i, 1)", [0], 3),
                                       ("cannot broadcast", "r = take_along_dim(x, i, 1)", [[0], [1]], 3),
                                       ("dim on 0-d", "r = take_along_dim(s, i, 0)", 0, 3)]:
            error_case("take_along_dim", label, {"x": x, "s": s0, "i": TV("i64", idx)}, [stmt], (code,))
    for dt in dts("one_hot"):
        for tag, shape, expr, fn in VIEWS:
            x = gen(dt, shape, "exp")
            a = fn(x.a).astype(np.int64)
            one("one_hot", f"{dt} {tag}", {"x": x}, f"one_hot({expr}, 5)", Exact("i64", np.eye(5, dtype=np.int64)[a]))
        x = gen(dt, (4, 3), "exp")
        one("one_hot", f"{dt} one class", {"x": TV(dt, np.zeros((4, 3)))}, "one_hot(x, num_classes=1)",
            Exact("i64", np.ones((4, 3, 1), np.int64)))
    if "one_hot" in OPS:
        i, f, b = TV("i64", [0, 2, 1]), gen("f32", (3,)), gen("bool", (3,))
        for label, stmt, code in [("num_classes missing", "r = one_hot(i)", 3), ("num_classes -1", "r = one_hot(i, -1)", 3),
                                  ("num_classes 0", "r = one_hot(i, 0)", 3), ("float x", "r = one_hot(f, 3)", 3),
                                  ("bool x", "r = one_hot(b, 3)", 3), ("class out of range", "r = one_hot(i, 2)", 1),
                                  ("negative class", "r = one_hot(i - 1, 3)", 1),
                                  ("8 dimensions", "r = one_hot(i[None, None, None, None, None, None, None], 3)", 3)]:
            error_case("one_hot", label, {"i": i, "f": f, "b": b}, [stmt], (code,))


# (qmax, affine, packed) of each dtype word of the quantise ops
QDTYPES = {"i8": (127, False, False), "i16": (32767, False, False), "i4": (7, False, True),
           "u8": (255, True, False), "u4": (15, True, True)}
Q_STORED = {"i8": "i8", "i16": "i16", "i4": "u8", "u8": "u8", "u4": "u8"}


def q_scaled(v, dim, group):
    """v (float64) arranged so that each scale's values lie along the last axes: (values, axes
    to reduce, how to bring a statistic back to v's shape, the scale's shape)."""
    if group:
        g = v.reshape(v.shape[:-1] + (v.shape[-1] // group, group))
        return g, (-1,), lambda s: np.repeat(s, group, axis=-1), v.shape[:-1] + (v.shape[-1] // group,)
    if dim is None or v.ndim == 0:
        shape = () if dim is None else (1,)
        return v, tuple(range(v.ndim)), lambda s: np.broadcast_to(np.reshape(s, [1] * v.ndim), v.shape), shape
    d = dim % v.ndim
    other = tuple(i for i in range(v.ndim) if i != d)
    keep = [-1 if i == d else 1 for i in range(v.ndim)]
    return v, other, lambda s: np.broadcast_to(np.reshape(s, keep), v.shape), (v.shape[d],)


def quant_ref(x, qd="i8", dim=None, group=None):
    """quantize / quantize_affine as cpu/quantize.c computes them, bit for bit: x read as float64,
    then float32 arithmetic (float64 for f64 x); the symmetric scale is max|x| / qmax in float64
    rounded once to float32; the affine one (hi - lo) / qmax in the compute precision over
    lo = min(x, 0), hi = max(x, 0); q = rint(x / scale) (+ zero point), half to even, clamped;
    a NaN quotient counts 0, a zero scale gives q 0 and zero point 0.  Returns q (i4/u4 packed
    into u8, element 2k in the low nibble), scale (f32) and the zero point (u8) or None."""
    qmax, affine, packed = QDTYPES[qd]
    ct = np.float64 if x.dt == "f64" else np.float32
    v = x.a.astype(np.float64)
    g, axes, back, sshape = q_scaled(v, dim, group)
    zero = None
    with np.errstate(all="ignore"):
        if not affine:
            m = np.max(np.abs(g), axis=axes, initial=0.0)
            scale = (m / qmax).astype(np.float32)
        else:
            mn, mx = np.min(g, axis=axes, initial=np.inf), np.max(g, axis=axes, initial=-np.inf)
            lo = np.where((mn < 0) | np.isnan(mn), mn, 0.0).astype(ct)
            hi = np.where((mx > 0) | np.isnan(mx), mx, 0.0).astype(ct)
            scale = ((hi - lo) / ct(qmax)).astype(np.float32)
            z = np.where(scale == 0, ct(0), np.rint(-lo / scale.astype(ct)))
            zero = np.clip(np.where(np.isnan(z), 0, z), 0, qmax).astype(np.uint8)
        scale = scale.reshape(sshape)
        s_b = back(scale).astype(ct)
        r = np.rint(v.astype(ct) / s_b).astype(np.float64)
        r = np.where(np.isnan(r), 0.0, r)
        if affine:
            zb = back(zero)
            r = np.clip(r + zb, 0, qmax)
        else:
            r = np.clip(r, -qmax, qmax)
        r = np.where(s_b == 0, 0.0, r).astype(np.int64)
    if zero is not None:
        zero = zero.reshape(sshape)
    if packed:
        n = (r & 15).astype(np.uint8)
        r = n[..., 0::2] | (n[..., 1::2] << 4)
    return r.astype(NP[Q_STORED[qd]]), scale, zero


def dequant_ref(q, scale, zero=None, dim=None, group=None, packed=None):
    """(q - zero) * scale in float64, rounded once to f32; q unpacked first for i4/u4."""
    v = q.astype(np.float64)
    if packed:
        b = np.asarray(q, np.uint8).astype(np.int64)
        n = np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[:-1] + (2 * b.shape[-1],))
        v = np.where(n >= 8, n - 16, n) if packed == "i4" else n
        v = v.astype(np.float64)
    _, _, back, _ = q_scaled(v, dim, group)
    s = back(np.asarray(scale, np.float64))
    z = 0.0 if zero is None else back(np.asarray(zero, np.float64))
    return ((v - z) * s).astype(np.float32)


# views with an even last dimension, for i4 and u4
Q_VIEWS = [
    ("contiguous", (3, 4, 6), "x", lambda a: a),
    ("T", (6, 4), "x.T", lambda a: a.T),
    ("slice", (8, 7), "x[::2, 1:]", lambda a: a[::2, 1:]),
    ("negstep", (4, 12), "x[::-1, ::-2]", lambda a: a[::-1, ::-2]),
    ("empty", (0, 4), "x", lambda a: a),
    ("0d", (), "x", lambda a: a),
]


def quantize_case(dt, qd, tag, shape, expr, fn, dim=None, group=None, kind="full", specials=False, zero_row=False):
    op = "quantize_affine" if QDTYPES[qd][1] else "quantize"
    x = gen(dt, shape, kind, specials=specials)
    if zero_row and x.a.ndim and x.a.shape[0] > 1:
        x.a[1] = 0                       # a zero slice: scale 0, q 0
    q, scale, zero = quant_ref(x.view(fn), qd, dim, group)
    outs = {"q": Exact(Q_STORED[qd], q), "s": Exact("f32", scale)}
    targets = "q, s"
    if zero is not None:
        outs["z"] = Exact("u8", zero)
        targets = "q, s, z"
    case(op, f"{dt} {qd} {tag}{kw(dim=dim, group=group)}", {"x": x},
         [f"{targets} = {op}({expr}, dtype={qd}{kw(dim=dim, group=group)})"], outs)


def quantize_cases():
    # every dtype the ops take, to every quantised dtype, whole, per slice and per group
    for qd, (qmax, affine, packed) in QDTYPES.items():
        op = "quantize_affine" if affine else "quantize"
        for dt in dts(op):
            for dim, group in ((None, None), (1, None), (None, 3), (-1, None)):
                quantize_case(dt, qd, "contiguous", (3, 4, 6), "x", lambda a: a, dim, group, zero_row=dim == 1)
        # views: transposed, sliced, negative steps, empty, 0-d
        for dt in ("f32", "f64", "bf16", "i32"):
            for tag, shape, expr, fn in Q_VIEWS:
                for dim, group in ((None, None), (0, None), (-1, None), (None, 2)):
                    if tag == "0d" and (packed or group):
                        continue             # refused: below
                    quantize_case(dt, qd, tag, shape, expr, fn, dim, group)
        # NaN and infinities follow the documented rule; ties at x / scale = k + 0.5 go to even
        quantize_case("f32", qd, "specials", (4, 8), "x", lambda a: a, None, None, kind="small", specials=True)
        quantize_case("f32", qd, "specials", (4, 8), "x", lambda a: a, 0, None, kind="small", specials=True)
        quantize_case("f64", qd, "ties", (4, 8), "x", lambda a: a, None, 2, kind="mix")
        quantize_case("f32", qd, "ties", (4, 8), "x", lambda a: a, 1, None, kind="mix")
    for dt in dts("quantize"):
        zero = TV(dt, np.zeros((2, 4), NP[dt]))
        case("quantize", f"{dt} zeros", {"x": zero}, ["q, s = quantize(x)"],
             {"q": Exact("i8", np.zeros((2, 4))), "s": Exact("f32", np.float32(0))})
        case("quantize_affine", f"{dt} zeros", {"x": zero}, ["q, s, z = quantize_affine(x, dtype=u4)"],
             {"q": Exact("u8", np.zeros((2, 2))), "s": Exact("f32", np.float32(0)), "z": Exact("u8", np.uint8(0))})

    # dequantize: every dtype of q, exact; zero points, groups, packed bytes read through views
    for dt in dts("dequantize"):
        q, s = gen(dt, (3, 4), "small", specials=False), TV("f32", RNG.uniform(0.01, 2, 4))
        one("dequantize", f"{dt} dim=1", {"q": q, "s": s}, "dequantize(q, s, dim=1)",
            Exact("f32", dequant_ref(q.a, s.a, dim=1)))
        z = TV("u8", RNG.integers(0, 256, (3, 2)))
        sg = TV("f32", RNG.uniform(0.01, 2, (3, 2)))
        one("dequantize", f"{dt} zero point, group=2", {"q": q, "s": sg, "z": z},
            "dequantize(q, s, z, group=2)", Exact("f32", dequant_ref(q.a, sg.a, z.a, group=2)))
    for word in ("i4", "u4"):
        b = TV("u8", RNG.integers(0, 256, (6, 4), dtype=np.uint8))
        for tag, expr, fn in (("contiguous", "q", lambda a: a), ("T", "q.T", lambda a: a.T),
                              ("negstep", "q[::-1, ::-2]", lambda a: a[::-1, ::-2])):
            qa = fn(b.a)
            s0 = TV("f32", RNG.uniform(0.01, 2, qa.shape[0]))
            one("dequantize", f"{word} {tag} dim=0", {"q": b, "s": s0},
                f"dequantize({expr}, s, dim=0, dtype={word})",
                Exact("f32", dequant_ref(qa, s0.a, dim=0, packed=word)))
            sg = TV("f32", RNG.uniform(0.01, 2, (qa.shape[0], qa.shape[1] * 2 // 4)))
            zg = TV("u8", RNG.integers(0, 16, sg.a.shape))
            one("dequantize", f"{word} {tag} group=4", {"q": b, "s": sg, "z": zg},
                f"dequantize({expr}, s, z, group=4, dtype={word})",
                Exact("f32", dequant_ref(qa, sg.a, zg.a, group=4, packed=word)))
        one("dequantize", f"{word} empty", {"q": TV("u8", np.zeros((0, 3), np.uint8))},
            f"dequantize(q, 0.5, dtype={word})", Exact("f32", np.zeros((0, 6), np.float32)))

    # the round trip: every value within half a scale step
    for qd, (qmax, affine, packed) in QDTYPES.items():
        op = "quantize_affine" if affine else "quantize"
        for dim, group in ((None, None), (0, None), (None, 4)):
            x = gen("f32", (6, 8), "full", specials=False)
            if affine:
                x.a[2] = np.abs(x.a[2]) + 1              # a slice of positives: zero point 0
            q, scale, zero = quant_ref(x, qd, dim, group)
            back = dequant_ref(q, scale, zero, dim, group, packed=qd if packed else None)
            _, _, spread, _ = q_scaled(x.a.astype(np.float64), dim, group)
            step = spread(np.asarray(scale, np.float64))
            tol = step / 2 * (1 + 1e-5) + np.abs(x.a) * 2.0 ** -23

            def within(gdt, g, x=x, tol=tol, back=back):
                msg = head(gdt, g, "f32", x.a.shape) or Exact("f32", back).check(gdt, g)
                if msg:
                    return msg
                bad = np.abs(g.astype(np.float64) - x.a) > tol
                return first_bad(bad, g, x.a, tol) if bad.any() else None
            targets = "q, s, z" if affine else "q, s"
            zarg = ", z" if affine else ""
            case("dequantize", f"round trip {qd}{kw(dim=dim, group=group)}", {"x": x},
                 [f"{targets} = {op}(x, dtype={qd}{kw(dim=dim, group=group)})",
                  f"r = dequantize(q, s{zarg}{kw(dim=dim, group=group)}{', dtype=' + qd if packed else ''})"],
                 {"r": Custom("f32", within)})

    # refusals (exit 3)
    x = {"x": gen("f32", (2, 3))}
    x4 = {"x": gen("f32", (2, 4))}
    for op, label, stmt in [
            ("quantize", "i4 of an odd last dimension", "q, s = quantize(x, dtype=i4)"),
            ("quantize_affine", "u4 of an odd last dimension", "q, s, z = quantize_affine(x, dtype=u4)"),
            ("quantize", "i4 of a 0-d tensor", "q, s = quantize(x[0, 0], dtype=i4)"),
            ("quantize", "u4 is not symmetric", "q, s = quantize(x, dtype=u4)"),
            ("quantize", "u8 is not symmetric", "q, s = quantize(x, dtype=u8)"),
            ("quantize", "f16 is no quantised dtype", "q, s = quantize(x, dtype=f16)"),
            ("quantize_affine", "i8 is not affine", "q, s, z = quantize_affine(x, dtype=i8)"),
            ("quantize_affine", "i4 is not affine", "q, s, z = quantize_affine(x, dtype=i4)"),
            ("quantize", "dim and group together", "q, s = quantize(x, dim=0, group=3)"),
            ("quantize_affine", "dim and group together", "q, s, z = quantize_affine(x, dim=0, group=3)"),
            ("quantize", "a group that does not divide the last dimension", "q, s = quantize(x, group=2)"),
            ("quantize", "group 0", "q, s = quantize(x, group=0)"),
            ("quantize", "group -3", "q, s = quantize(x, group=-3)"),
            ("quantize", "a group of a 0-d tensor", "q, s = quantize(x[0, 0], group=1)"),
            ("quantize", "dim out of range", "q, s = quantize(x, dim=2)"),
            ("quantize", "a string for dtype", "q, s = quantize(x, dtype=\"int4\")"),
            ("quantize_affine", "two names for three values", "q, s = quantize_affine(x)"),
            ("quantize", "i4 as a variable", "i4 = x + 1"),
            ("cast", "i4 is no tensor dtype", "r = cast(x, i4)"),
            ("zeros", "u4 is no tensor dtype", "r = zeros([2], dtype=u4)")]:
        error_case(op, label, x, [stmt], (3,))
    for label, stmt in [
            ("i4 needs u8 bytes", "r = dequantize(cast(x, i8), 1.0, dtype=i4)"),
            ("dtype names i4, u4 or None", "r = dequantize(cast(x, u8), 1.0, dtype=u8)"),
            ("i4 of a 0-d q", "r = dequantize(cast(x[0, 0], u8), 1.0, dtype=i4)"),
            ("a scale of several values without dim or group", "r = dequantize(x, x[0])"),
            ("a scale of the wrong length along dim", "r = dequantize(x, x[0], dim=0)"),
            ("a group scale of the wrong shape", "r = dequantize(x, x[:, :3], group=2)"),
            ("a zero point of the wrong shape", "r = dequantize(x, x[:, :2], x[:, :1], group=2)"),
            ("dim and group together", "r = dequantize(x, x[:, :2], dim=0, group=2)"),
            ("a group that does not divide the last dimension", "r = dequantize(x, x[:, :2], group=3)")]:
        error_case("dequantize", label, x4, [stmt], (3,))
    quantize_thread_checks()


def quantize_thread_checks():
    """Bitwise the same with --threads 1 and 2, and the reference's bits, on inputs large
    enough for the threads."""
    global checks
    if ONLY and not ONLY & {"quantize", "quantize_affine", "dequantize"}:
        return
    x = TV("f32", (RNG.standard_normal((700, 778)) * 3).astype(np.float32))
    x.a[5] = 0
    path = input_file(x)
    stmts = [("quantize", "q1, s1 = quantize(x)", {"q1": (lambda: quant_ref(x, "i8")[0]), "s1": (lambda: quant_ref(x, "i8")[1])}),
             ("quantize", "q2, s2 = quantize(x.T, dtype=i16, dim=1)", {"q2": (lambda: quant_ref(x.view(lambda a: a.T), "i16", 1)[0])}),
             ("quantize", "q3, s3 = quantize(x, dtype=i4, group=2)", {"q3": (lambda: quant_ref(x, "i4", None, 2)[0]), "s3": (lambda: quant_ref(x, "i4", None, 2)[1])}),
             ("quantize_affine", "q4, s4, z4 = quantize_affine(x, dim=0)", {"q4": (lambda: quant_ref(x, "u8", 0)[0]), "z4": (lambda: quant_ref(x, "u8", 0)[2])}),
             ("quantize_affine", "q5, s5, z5 = quantize_affine(x[::-1], dtype=u4)", {"q5": (lambda: quant_ref(x.view(lambda a: a[::-1]), "u4")[0])}),
             ("dequantize", "d5 = dequantize(q5, s5, z5, dtype=u4)", {}),
             ("dequantize", "d3 = dequantize(q3, s3, group=2, dtype=i4)", {})]
    stmts = [t for t in stmts if t[0] in OPS]
    names = [n for _, s, _ in stmts for n in s.split(" = ")[0].split(", ")]
    outs = {}
    for t in (1, 2):
        args = ["eval", "; ".join(s for _, s, _ in stmts), "-i", f"x={path}"]
        for n in names:
            args += ["-o", f"{n}={os.path.join(WORK, 'out', f'qthreads{t}_{n}.npy')}"]
        if not direct(args + ["--threads", str(t)], f"--threads {t}", "quantize"):
            return
        outs[t] = {n: np.load(os.path.join(WORK, "out", f"qthreads{t}_{n}.npy")) for n in names}
    for op, s, refs in stmts:
        for n in s.split(" = ")[0].split(", "):
            checks += 1
            a, b = outs[1][n], outs[2][n]
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                failures.append(f"{op} f32 [700, 778] `{s}`: {n} differs between --threads 1 and 2")
            if n in refs:
                checks += 1
                want = refs[n]()
                if want.shape != a.shape or want.tobytes() != np.ascontiguousarray(a, want.dtype).tobytes():
                    failures.append(f"{op} f32 [700, 778] `{s}`: {n} is not the reference's")


# ---------------------------------------------------------------- create, views, copies

def create_cases():
    for dt in DTYPES:
        for op, val in (("zeros", 0), ("ones", 1)):
            if dt in dts(op):
                for shape in ([2, 3], [], [0, 4]):
                    one(op, f"{dt} {shape}", {}, f"{op}({shape}, dtype={dt})", Exact(dt, np.full(shape, conv(val, dt))))
        if dt in dts("full"):
            for v in (3, 2.5, True):
                one("full", f"{dt} value {v}", {}, f"full([2, 3], {lit(v)}, dtype={dt})",
                    Exact(dt, np.broadcast_to(conv(v, dt), (2, 3))))
        if dt in dts("eye"):
            one("eye", f"{dt} 3", {}, f"eye(3, dtype={dt})", Exact(dt, convert(TV("f64", np.eye(3)), dt).a))
            one("eye", f"{dt} 2x4", {}, f"eye(2, 4, dtype={dt})", Exact(dt, convert(TV("f64", np.eye(2, 4)), dt).a))
        if dt in dts("arange"):
            if dt == "bool":
                one("arange", "bool", {}, "arange(0, 2, dtype=bool)", Exact("bool", [False, True]))
            elif dt in FLOATS:
                one("arange", f"{dt} fractional step", {}, f"arange(-1, 1, 0.25, dtype={dt})",
                    Exact(dt, round_to(dt, np.arange(-1, 1, 0.25))))
            else:
                one("arange", f"{dt}", {}, f"arange(1, 11, 3, dtype={dt})", Exact(dt, np.arange(1, 11, 3)))
                if dt in SIGNED:
                    one("arange", f"{dt} negative step", {}, f"arange(5, -5, -3, dtype={dt})",
                        Exact(dt, np.arange(5, -5, -3)))
        if dt in dts("linspace"):
            if dt in FLOATS:
                ref = np.linspace(-1, 2, 7)
                one("linspace", f"{dt}", {}, f"linspace(-1, 2, 7, dtype={dt})",
                    Close(dt, ref, 4 * acc(dt) * 2))
                ref = np.linspace(0, 1, 10)
                one("linspace", f"{dt} ends exact", {}, f"linspace(0, 1, 10, dtype={dt})",
                    Custom(dt, lambda gdt, g, dt=dt, ref=ref: head(gdt, g, dt, (10,)) or
                           (None if g[0] == 0 and g[-1] == 1 else f"ends {g[0]!r}, {g[-1]!r}, expected 0 and 1")
                           or Close(dt, ref, 4 * acc(dt)).check(gdt, g)))
            elif dt == "bool":
                one("linspace", "bool", {}, "linspace(0, 1, 3, dtype=bool)", Exact("bool", [False, True, True]))
            else:
                one("linspace", f"{dt}", {}, f"linspace(0, 10, 6, dtype={dt})", Exact(dt, [0, 2, 4, 6, 8, 10]))
                if dt in SIGNED:
                    one("linspace", f"{dt} truncates", {}, f"linspace(-5, 5, 4, dtype={dt})", Exact(dt, [-5, -1, 1, 5]))
    one("full", "default dtype int", {}, "full([2], 7)", Exact("i64", [7, 7]))
    one("full", "default dtype float", {}, "full([2], 2.5)", Exact("f32", [2.5, 2.5]))
    one("full", "default dtype bool", {}, "full([2], true)", Exact("bool", [True, True]))
    one("zeros", "default dtype", {}, "zeros([2])", Exact("f32", [0, 0]))
    one("ones", "default dtype", {}, "ones([])", Exact("f32", 1))
    one("eye", "default dtype", {}, "eye(2)", Exact("f32", np.eye(2)))
    one("arange", "one argument", {}, "arange(5)", Exact("i64", np.arange(5)))
    one("arange", "default dtype float", {}, "arange(0, 2, 0.5)", Exact("f32", [0, 0.5, 1, 1.5]))
    one("arange", "empty", {}, "arange(3, 3)", Exact("i64", np.zeros(0)))
    one("linspace", "default dtype", {}, "linspace(0, 1, 5)", Exact("f32", [0, 0.25, 0.5, 0.75, 1]))
    one("linspace", "one step", {}, "linspace(2, 5, 1)", Exact("f32", [2]))
    one("linspace", "no steps", {}, "linspace(2, 5, 0)", Exact("f32", np.zeros(0)))
    for op in ("rand", "randn"):
        for dt in dts(op):
            n = 20000

            def rcheck(gdt, g, dt=dt, op=op, n=n):
                msg = head(gdt, g, dt, (n // 100, 100))
                if msg:
                    return msg
                v = g.astype(np.float64)
                if not np.isfinite(v).all():
                    return "non-finite values"
                if op == "rand":
                    top = 1.0 if dt in ("f16", "bf16") else np.nextafter(1.0, 0)
                    if v.min() < 0 or v.max() > top:
                        return f"values outside [0, 1): min {v.min()}, max {v.max()}"
                    mean, var = 0.5, 1 / 12
                else:
                    mean, var = 0.0, 1.0
                if abs(v.mean() - mean) > 5 * math.sqrt(var / n) or abs(v.var() - var) > 6 * var * math.sqrt(2 / n) + 4 * EPS[dt]:
                    return f"mean {v.mean():.4f}, variance {v.var():.4f}: expected {mean}, {var:.4f}"
                if len(np.unique(v)) < min(n // 20, 50):
                    return f"only {len(np.unique(v))} distinct values"
                return None
            one(op, f"{dt} moments", {}, f"{op}([{n // 100}, 100], seed=7, dtype={dt})", Custom(dt, rcheck))
            one(op, f"{dt} 0d", {}, f"{op}([], dtype={dt})",
                Custom(dt, lambda gdt, g, dt=dt: head(gdt, g, dt, ())))
            one(op, f"{dt} empty", {}, f"{op}([3, 0], seed=1, dtype={dt})",
                Custom(dt, lambda gdt, g, dt=dt: head(gdt, g, dt, (3, 0))))
        if op in OPS and "i32" not in dts(op):
            error_case(op, "i32 refused", {}, [f"r = {op}([2], dtype=i32)"], (3,))


def view_cases():
    for dt in DTYPES:
        x = gen(dt, (3, 4, 5), "full")
        a = x.a
        groups = {
            "reshape": [("reshape(x, [5, -1])", a.reshape(5, -1)), ("reshape(x.mT, [-1])", np.swapaxes(a, 1, 2).reshape(-1)),
                        ("reshape(x[0, 0, :1], [])", a[0, 0, :1].reshape(())), ("reshape(x[:, :0], [0, 7])", a[:, :0].reshape(0, 7))],
            "transpose": [("transpose(x, 0, -1)", np.swapaxes(a, 0, 2)), ("transpose(x[::2], 1, 2)", np.swapaxes(a[::2], 1, 2))],
            "permute": [("permute(x, [2, 0, 1])", a.transpose(2, 0, 1)), ("permute(x, [-1, -3, -2])", a.transpose(2, 0, 1)),
                        ("permute(x.mT, [1, 0, 2])", np.swapaxes(a, 1, 2).transpose(1, 0, 2))],
            "squeeze": [("squeeze(x[None, :, :1])", a[:, :1].squeeze()), ("squeeze(x[:, :1, None], [1, 2])", a[:, :1]
                                                                                 .reshape(3, 5)),
                        ("squeeze(x, 0)", a), ("squeeze(x[:1, ::-1, :1], -1)", a[:1, ::-1, :1][..., 0])],
            "unsqueeze": [("unsqueeze(x, -1)", a[..., None]), ("unsqueeze(x.mT, 1)", np.swapaxes(a, 1, 2)[:, None])],
            "expand": [("expand(x[:, :1], [3, 6, 5])", np.broadcast_to(a[:, :1], (3, 6, 5))),
                       ("expand(x[None], [2, -1, -1, -1])", np.broadcast_to(a[None], (2, 3, 4, 5)))],
            "broadcast_to": [("broadcast_to(x[0, 0], [2, 3, 5])", np.broadcast_to(a[0, 0], (2, 3, 5))),
                             ("broadcast_to(x[::-1, :1, 1:2], [3, 2, 1])", np.broadcast_to(a[::-1, :1, 1:2], (3, 2, 1)))],
            "flatten": [("flatten(x)", a.reshape(-1)), ("flatten(x, 1)", a.reshape(3, -1)),
                        ("flatten(x.mT, 0, 1)", np.swapaxes(a, 1, 2).reshape(15, 4))],
            "diagonal": [("diagonal(x)", np.diagonal(a)), ("diagonal(x, 1)", np.diagonal(a, 1)),
                         ("diagonal(x, -1, 1, 2)", np.diagonal(a, -1, 1, 2)), ("diagonal(x, 0, -1, 0)", np.diagonal(a, 0, 2, 0))],
            "index": [("x[1]", a[1]), ("x[-1, ::-2]", a[-1, ::-2]), ("x[..., 1:3]", a[..., 1:3]), ("x[None, :, 0]", a[None, :, 0]),
                      ("x[:, ::-1, -2:]", a[:, ::-1, -2:]), ("x[1, 2, 3]", a[1, 2, 3]), ("x[:, 4:2]", a[:, 4:2]),
                      ("x.T", a.T), ("x.mT", np.swapaxes(a, 1, 2)), ("x[..., None]", a[..., None]), ("x[-3:, 1::2, ::4]", a[-3:, 1::2, ::4])],
            "contiguous": [("contiguous(x.T)", a.T), ("contiguous(x)", a), ("contiguous(x[:, ::-1])", a[:, ::-1])],
            "clone": [("clone(x[::2])", a[::2]), ("clone(x.mT)", np.swapaxes(a, 1, 2))],
            "to": [('to(x, "cpu")', a), ('to(x.T, "cpu")', a.T)],
        }
        for op, items in groups.items():
            if op != "index" and dt not in dts(op):
                continue
            case(op, f"{dt}", {"x": x}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})


def more_view_cases():
    """flip, narrow, unflatten and movedim: exact values on compact, transposed, negative-step,
    0-d and empty operands (flip's negative strides feed other views and copies too)."""
    for dt in DTYPES:
        x, s = gen(dt, (3, 4, 5), "full"), gen(dt, (), "full")
        a, sa = x.a, s.a
        groups = {
            "flip": [("flip(x, [0])", np.flip(a, 0)), ("flip(x, [0, -1])", np.flip(a, (0, 2))), ("flip(x, 1)", np.flip(a, 1)),
                     ("flip(x.T, [1])", np.flip(a.T, 1)), ("flip(x[::-1, :, ::2], [0, 2])", np.flip(a[::-1, :, ::2], (0, 2))),
                     ("flip(x[:, :0], [1, 2])", a[:, :0]), ("flip(x, [])", a), ("flip(flip(x.mT, [1]), [1])", np.swapaxes(a, 1, 2)),
                     ("contiguous(flip(x.mT, [0, 1]))", np.flip(np.swapaxes(a, 1, 2), (0, 1))),
                     ("transpose(flip(x, [0]), 0, 2)", np.swapaxes(np.flip(a, 0), 0, 2)),
                     ("flip(x, [2])[1, ::2]", np.flip(a, 2)[1, ::2]), ("flip(s, [0])", sa), ("flip(s, [])", sa)],
            "narrow": [("narrow(x, 0, 1, 2)", a[1:3]), ("narrow(x, -1, -3, 2)", a[..., 2:4]), ("narrow(x.T, 1, 0, 4)", a.T[:, 0:4]),
                       ("narrow(x[::-1], 2, 5, 0)", a[::-1][..., 5:5]), ("narrow(x, 1, -4, 4)", a), ("narrow(x[:, ::-2], 1, 1, 1)", a[:, ::-2][:, 1:2]),
                       ("narrow(x[:0], 1, 2, 2)", a[:0, 2:4])],
            "unflatten": [("unflatten(x, 2, [5, 1])", a.reshape(3, 4, 5, 1)), ("unflatten(x, 1, [2, -1])", a.reshape(3, 2, 2, 5)),
                          ("unflatten(x.T, 0, [-1, 1, 5])", a.T.reshape(1, 1, 5, 4, 3)),
                          ("unflatten(x[::-1, ::2], -1, [5, 1])", a[::-1, ::2].reshape(3, 2, 5, 1)),
                          ("unflatten(x[:, :0], 1, [0, 7])", a[:, :0].reshape(3, 0, 7, 5)), ("unflatten(x, 0, [3])", a),
                          ("unflatten(x.mT, 1, [1, 5])", np.swapaxes(a, 1, 2).reshape(3, 1, 5, 4))],
            "movedim": [("movedim(x, 0, -1)", np.moveaxis(a, 0, -1)), ("movedim(x, [0, 1], [2, 0])", np.moveaxis(a, [0, 1], [2, 0])),
                        ("movedim(x.mT, -1, 0)", np.moveaxis(np.swapaxes(a, 1, 2), -1, 0)), ("movedim(x[::-1], [], [])", a[::-1]),
                        ("movedim(x[:, ::-1], [2, 0, 1], [0, 1, 2])", np.moveaxis(a[:, ::-1], [2, 0, 1], [0, 1, 2])),
                        ("movedim(x[:0], 0, 2)", np.moveaxis(a[:0], 0, 2)), ("movedim(s, 0, -1)", sa)],
            # an index of a view of negative strides (its layout's stand-in must take them)
            "index": [("x[::-1][1, ::-2]", a[::-1][1, ::-2]), ("x[:, ::-1].mT[0, 1:]", np.swapaxes(a[:, ::-1], 1, 2)[0, 1:])],
        }
        for op, items in groups.items():
            if op != "index" and dt not in dts(op):
                continue
            case(op, f"{dt}", {"x": x, "s": s}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})
    x = gen("f32", (3, 4, 5))
    for op, stmt, why in (
            ("flip", "flip(x, [0, -3])", "a dim listed twice"), ("flip", "flip(x, [3])", "dim out of range"),
            ("flip", "flip(x, [0, 1, 2, 0])", "more dims than x has"),
            ("narrow", "narrow(x, 3, 0, 1)", "dim out of range"), ("narrow", "narrow(x, 1, 5, 0)", "start past the end"),
            ("narrow", "narrow(x, 1, -5, 1)", "start before the start"), ("narrow", "narrow(x, 1, 2, 3)", "length past the end"),
            ("narrow", "narrow(x, 1, 0, -1)", "negative length"), ("narrow", "narrow(x[0, 0, 0], 0, 0, 1)", "a 0-d tensor"),
            ("unflatten", "unflatten(x, 1, [3, 2])", "sizes that do not multiply to the size"),
            ("unflatten", "unflatten(x, 1, [-1, 3])", "-1 that cannot divide"), ("unflatten", "unflatten(x, 1, [-1, -1])", "two -1"),
            ("unflatten", "unflatten(x, 1, [])", "no sizes"), ("unflatten", "unflatten(x, -4, [4])", "dim out of range"),
            ("unflatten", "unflatten(x[:0], 0, [-1, 0])", "-1 beside 0"), ("unflatten", "unflatten(x[0, 0, 0], 0, [1])", "a 0-d tensor"),
            ("unflatten", "unflatten(x, 0, [-2, -1])", "a negative size"),
            ("unflatten", "unflatten(x, 0, [1, 1, 1, 1, 1, 1, 3])", "more than 8 dimensions"),
            ("movedim", "movedim(x, [0, 1], [2])", "source and destination of different lengths"),
            ("movedim", "movedim(x, [0, 0], [1, 2])", "a source dim twice"), ("movedim", "movedim(x, [0, 1], [2, -1])", "a destination twice"),
            ("movedim", "movedim(x, 3, 0)", "dim out of range")):
        error_case(op, why, {"x": x}, [f"r = {stmt}"], (3,))


def like_cases():
    """zeros_like, ones_like, full_like: x's shape, x's dtype unless dtype is given (full_like's value
    converted to it, as full converts), whatever x's strides."""
    for dt in DTYPES:
        x, s = gen(dt, (3, 4), "full"), gen(dt, (), "full")
        if dt in dts("zeros_like"):
            one("zeros_like", f"{dt}", {"x": x}, "zeros_like(x)", Exact(dt, np.zeros((3, 4)), zero_sign=True))
            one("zeros_like", f"{dt} x.T", {"x": x}, "zeros_like(x.T)", Exact(dt, np.zeros((4, 3)), zero_sign=True))
            one("zeros_like", f"{dt} 0d", {"s": s}, "zeros_like(s)", Exact(dt, np.zeros(()), zero_sign=True))
            one("zeros_like", f"{dt} empty", {"x": x}, "zeros_like(x[:, :0])", Exact(dt, np.zeros((3, 0))))
            for to in ("f16", "i8", "bool"):
                one("zeros_like", f"{dt} to {to}", {"x": x}, f"zeros_like(x[::-1], dtype={to})", Exact(to, np.zeros((3, 4))))
        if dt in dts("ones_like"):
            one("ones_like", f"{dt}", {"x": x}, "ones_like(x[::-1, ::2])", Exact(dt, conv(1, dt) * np.ones((3, 2), NP[dt])))
            one("ones_like", f"{dt} 0d", {"s": s}, "ones_like(s)", Exact(dt, conv(1, dt)))
            one("ones_like", f"{dt} empty", {"x": x}, "ones_like(x[:0])", Exact(dt, np.zeros((0, 4))))
            for to in ("bf16", "u64", "bool"):
                one("ones_like", f"{dt} to {to}", {"x": x}, f"ones_like(x.T, dtype={to})", Exact(to, np.ones((4, 3))))
        if dt in dts("full_like"):
            for v in (3, 2.5, -1.75, True, 0):
                if v == -1.75 and dt in UNSIGNED:
                    continue      # a negative float into an unsigned dtype saturates; covered by cast's checks
                one("full_like", f"{dt} value {v}", {"x": x}, f"full_like(x.mT, {lit(v)})",
                    Exact(dt, np.broadcast_to(conv(v, dt), (4, 3)), zero_sign=True))
            one("full_like", f"{dt} 0d", {"s": s}, "full_like(s, 7)", Exact(dt, conv(7, dt)))
            one("full_like", f"{dt} empty", {"x": x}, "full_like(x[:, 4:], 7)", Exact(dt, np.zeros((3, 0))))
            for to, v in (("f32", 2.5), ("i16", -300), ("bool", 0.5), ("u8", 255)):
                one("full_like", f"{dt} to {to} value {v}", {"x": x}, f"full_like(x, {lit(v)}, dtype={to})",
                    Exact(to, np.broadcast_to(conv(v, to), (3, 4))))
    # PyTorch's reference: full_like keeps x's dtype, the value converted to it
    for dt, v in (("i32", 2.5), ("bool", 2.5), ("f16", 1.1), ("u8", 7)):
        t = torch.full_like(torch.zeros(2, dtype=TORCH_DT[dt]), v)
        assert t.dtype == TORCH_DT[dt] and (t.float().numpy() == conv(v, dt).astype(np.float32)).all(), (dt, v)
    x = gen("i8", (2, 3))
    error_case("full_like", "300 does not fit i8", {"x": x}, ["r = full_like(x, 300)"], (3,))
    error_case("full_like", "-1 does not fit u8", {"x": x}, ["r = full_like(x, -1, dtype=u8)"], (3,))
    error_case("zeros_like", "a number is not a tensor", {}, ["r = zeros_like(2)"], (3,))
    error_case("ones_like", "a string is not a dtype", {"x": x}, ['r = ones_like(x, dtype="f32")'], (3,))


def triangle_cases():
    """tril and triu on the last two dimensions: batched, every dtype, any strides, diagonals past
    the matrix; a compact copy with zeros outside."""
    for dt in DTYPES:
        x = gen(dt, (2, 4, 5), "full")
        a = x.a
        for op, fn in (("tril", np.tril), ("triu", np.triu)):
            if dt not in dts(op):
                continue
            items = [(f"{op}(x)", fn(a)), (f"{op}(x, 1)", fn(a, 1)), (f"{op}(x, -2)", fn(a, -2)), (f"{op}(x, diagonal=10)", fn(a, 10)),
                     (f"{op}(x, -10)", fn(a, -10)), (f"{op}(x.mT)", fn(np.swapaxes(a, 1, 2))),
                     (f"{op}(x[::-1, ::2, ::-1], 1)", fn(a[::-1, ::2, ::-1], 1)), (f"{op}(x[0])", fn(a[0])),
                     (f"{op}(x[:, :0])", fn(a[:, :0])), (f"{op}(x[0, 1:2])", fn(a[0, 1:2])),
                     (f"{op}(broadcast_to(x[0, 0], [3, 5]), -1)", fn(np.broadcast_to(a[0, 0], (3, 5)), -1)),
                     (f"{op}(x[None, :, :, 1:], 2)", fn(a[None, :, :, 1:], 2))]
            case(op, f"{dt}", {"x": x}, [f"r{i} = {e}" for i, (e, _) in enumerate(items)],
                 {f"r{i}": Exact(dt, ref, zero_sign=True) for i, (_, ref) in enumerate(items)})
    for dt in ("f32", "i64", "bool", "u8"):
        t = torch.from_numpy(np.array(gen(dt, (3, 4), "full", specials=False).a))
        assert (torch.tril(t, -1).numpy() == np.tril(t.numpy(), -1)).all() and (torch.triu(t, 2).numpy() == np.triu(t.numpy(), 2)).all()
    for op in ("tril", "triu"):
        error_case(op, "a vector", {"x": gen("f32", (4,))}, [f"r = {op}(x)"], (3,))
        error_case(op, "a 0-d tensor", {"x": gen("f32", ())}, [f"r = {op}(x, 1)"], (3,))


def cast_values(dt):
    if dt in FLOATS:
        v = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.7, -0.7, 1.0, -1.0, 127.6, 128.5,
                      -128.5, -129.0, 255.5, 256.0, 65504.0, 65520.0, 70000.0, -32768.9, 2147483647.0, 3e9, -3e9, 5e9,
                      1e19, -1e19, 2e19, 1e30, -1e30, 1e-30, 3.4e38, 1e-40, 1e300, -1e300, 1e-310])
        v = np.concatenate([v, RNG.standard_normal(25) * 1000])
        return TV(dt, round_to(dt, v))
    if dt == "bool":
        return TV(dt, [True, False, True, True])
    lo, hi = limits(dt)
    extra = [lo, hi, 0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31, 2 ** 53 + 1, 2 ** 63 - 1]
    extra += [-1, -128, -129, -32769, -2 ** 31, -2 ** 63] if dt in SIGNED else []
    extra = [e for e in extra if lo <= e <= hi]
    return TV(dt, np.concatenate([np.array(extra, dtype=NP[dt]), gen(dt, (20,), "full").a]))


def cast_cases():
    for src in dts("cast"):
        x = cast_values(src)
        targets = [d for d in DTYPES if d in dts("cast")]
        case("cast", f"{src} to every dtype", {"x": x}, [f"r_{d} = cast(x, {d})" for d in targets],
             {f"r_{d}": Exact(d, convert(x, d).a, zero_sign=True) for d in targets})
        k = min(20, x.a.size // 2)
        xs = TV(src, np.stack([x.a[:k], x.a[k:2 * k]]))
        case("cast", f"{src} strided", {"x": xs}, [f"r_{d} = cast(x.T[::-1], {d})" for d in ("f32", "i32", "u8")],
             {f"r_{d}": Exact(d, convert(TV(src, xs.a.T[::-1]), d).a, zero_sign=True) for d in ("f32", "i32", "u8")})


# ---------------------------------------------------------------- einsum

def einsum_explicit(eq, shapes):
    """eq with '...' written as letters and its output explicit (PyTorch's reading:
    an ellipsis the output leaves out is summed, which NumPy refuses)."""
    eq = eq.replace(" ", "")
    inputs, arrow, output = eq.partition("->")
    terms = inputs.split(",")
    spare = [c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in eq]
    width = max([len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t] + [0])
    ell = "".join(reversed(spare[:width]))
    terms = [t.replace("...", ell[width - (len(s) - len(t.replace("...", ""))):]) for t, s in zip(terms, shapes)]
    if not arrow:
        letters = "".join(terms)
        output = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return ",".join(terms) + "->" + output.replace("...", ell)


def einsum_ref(eq, ops, P):
    """np.einsum of the operands converted to P: integers exact (64-bit arithmetic
    wraps, then narrowed to P, which keeps the sum modulo 2**bits), floats in float64
    within (terms + 2 * operands) * eps * einsum(|operands|)."""
    eq = einsum_explicit(eq, [o.a.shape for o in ops])
    if P in INTS:
        wide = np.uint64 if P in UNSIGNED else np.int64
        vals = [conv(o, P).astype(wide) for o in ops]
        return Exact(P, np.einsum(eq, *vals).astype(NP[P]))
    vals = [convert(o, P).a.astype(np.float64) for o in ops]
    ref = np.einsum(eq, *vals)
    inputs, _, output = eq.partition("->")
    sizes = {}
    for term, v in zip(inputs.split(","), vals):
        for c, n in zip(term, v.shape):
            sizes[c] = max(sizes.get(c, 1), n)
    terms = int(np.prod([n for c, n in sizes.items() if c not in output], dtype=np.int64))
    tol = (terms + 2 * len(ops)) * acc(P) * np.abs(np.einsum(eq, *[np.abs(v) for v in vals]))
    return Close(P, ref, tol)


# (label, equation, operand shapes, the operands' expressions over x, y, z, the views they take)
EINSUM_CASES = [
    ("matrix product", "ij,jk->ik", [(3, 4), (4, 5)], None),
    ("batched, b's rows transposed", "bik,bjk->bij", [(2, 3, 4), (2, 5, 4)], None),
    ("batched", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], None),
    ("right transposed", "ij,kj->ik", [(3, 4), (5, 4)], None),
    ("outer", "i,j->ij", [(3,), (4,)], None),
    ("dot", "i,i->", [(7,), (7,)], None),
    ("trace", "ii->", [(4, 4)], None),
    ("diagonal", "ii->i", [(4, 4)], None),
    ("transpose", "ij->ji", [(3, 4)], None),
    ("sum", "ij->", [(3, 4)], None),
    ("sum of rows", "ij->j", [(3, 4)], None),
    ("implicit", "ij,jk", [(3, 4), (4, 5)], None),
    ("implicit sorted", "ba,cb", [(4, 3), (5, 4)], None),
    ("implicit trace", "ii", [(4, 4)], None),
    ("ellipsis, batch broadcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)], None),
    ("implicit ellipsis", "...ij,...jk", [(2, 3, 4), (1, 4, 2)], None),
    ("ellipsis summed", "...i->i", [(2, 3, 4)], None),
    ("batched diagonals", "...ii->...i", [(2, 3, 3)], None),
    ("three operands", "ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)], None),
    ("three operands, shared batch", "bij,bjk,bk->bi", [(2, 3, 4), (2, 4, 5), (2, 5)], None),
    ("size-1 letter broadcast", "ij,jk->ik", [(3, 1), (4, 5)], None),
    ("size-1 batch broadcast", "bij,bjk->bik", [(1, 3, 4), (2, 4, 5)], None),
    ("scalars", ",->", [(), ()], None),
    ("scalar and vector", "i,->i", [(5,), ()], None),
    ("batch not first", "bij,bjk->ibk", [(2, 3, 4), (2, 4, 5)], None),
    ("output transposed", "ij,jk->ki", [(3, 4), (4, 5)], None),
    ("two inner letters in another order", "ijk,jil->kl", [(3, 4, 5), (4, 3, 2)], None),
    ("elementwise", "ab,ab->ab", [(3, 4), (3, 4)], None),
    ("elementwise broadcast, permuted", "ab,b->ba", [(3, 4), (4,)], None),
    ("sum of products", "ij,ij->", [(3, 4), (3, 4)], None),
    ("letters summed first", "ijk,kl->l", [(2, 3, 4), (4, 5)], None),
    ("diagonal of a product operand", "iij,jk->ik", [(3, 3, 4), (4, 2)], None),
    ("spaces and capitals", "A b , b C -> A C", [(3, 4), (4, 2)], None),
    ("transposed operand", "ij,jk->ik", [(4, 3), (4, 5)], ["x.T", "y"]),
    ("negative steps", "bik,bjk->bij", [(2, 6, 4), (2, 5, 4)], ["x[:, ::2]", "y[..., ::-1]"]),
    ("reversed diagonal", "ii->i", [(4, 4)], ["x[::-1]"]),
    ("strided sum", "ij->", [(6, 5)], ["x[::2, 1:]"]),
    ("mT operand", "bij,bjk->bik", [(2, 3, 4), (2, 5, 4)], ["x", "y.mT"]),
    ("rows that do not merge", "ijk,kl->ijl", [(4, 3, 2), (4, 5)], ["x.T", "y"]),
    ("negative-step inner letters", "ij,ij->i", [(3, 8), (3, 4)], ["x[:, ::-2]", "y"]),
    ("empty inner letter", "ij,jk->ik", [(3, 0), (0, 4)], None),
    ("empty rows", "ij,jk->ik", [(0, 4), (4, 5)], None),
    ("empty dot", "i,i->", [(0,), (0,)], None),
    ("empty sum", "ij->i", [(3, 0)], None),
    ("tiles", "bik,bjk->bij", [(2, 70, 33), (2, 600, 33)], None),
]


def einsum_cases():
    names = ["x", "y", "z"]
    for dt in dts("einsum"):
        kind = "full" if dt in INTS else "small"
        for label, eq, shapes, exprs in EINSUM_CASES:
            if dt not in ("f32", "i32", "i64") and label in ("tiles",):
                continue
            ops = [gen(dt, s, kind, specials=False) for s in shapes]
            exprs = exprs or names[:len(ops)]
            views = []
            for o, e in zip(ops, exprs):
                a = o.a
                v = {"x.T": lambda: a.T, "y.mT": lambda: np.swapaxes(a, -1, -2), "x[:, ::2]": lambda: a[:, ::2],
                     "y[..., ::-1]": lambda: a[..., ::-1], "x[::-1]": lambda: a[::-1],
                     "x[::2, 1:]": lambda: a[::2, 1:], "x[:, ::-2]": lambda: a[:, ::-2]}.get(e, lambda: a)()
                views.append(TV(dt, v))
            args = ", ".join(exprs)
            inputs = dict(zip(names, ops))
            one("einsum", f"{dt} {label} '{eq}'", inputs, f"einsum('{eq}', {args})", einsum_ref(eq, views, dt))
        x, y = gen(dt, (3, 4), kind, specials=False), gen(dt, (4, 5), kind, specials=False)
        one("einsum", f"{dt} a list of operands", {"x": x, "y": y}, "einsum('ij,jk->ik', [x, y])",
            einsum_ref("ij,jk->ik", [x, y], dt))
    if "f32" in dts("einsum"):
        x, y = gen("f32", (3, 4)), gen("f32", (4, 2), specials=False)
        x.a[1, 2] = np.nan
        one("einsum", "f32 NaN", {"x": x, "y": y}, "einsum('ij,jk->ik', x, y)", einsum_ref("ij,jk->ik", [x, y], "f32"))
        for d1, d2 in (("i8", "u8"), ("i32", "f32"), ("u8", "f16"), ("i64", "bf16"), ("u16", "u32"), ("f32", "f64")):
            x = gen(d1, (3, 4), "full" if d1 in INTS else "small", specials=False)
            y = gen(d2, (4, 5), "full" if d2 in INTS else "small", specials=False)
            P = promote(d1, d2)
            if P in FLOATS and (d1 in INTS or d2 in INTS):
                x, y = gen(d1, (3, 4), "small", specials=False), gen(d2, (4, 5), "small", specials=False)
            one("einsum", f"{d1} with {d2}", {"x": x, "y": y}, "einsum('ij,jk->ik', x, y)",
                einsum_ref("ij,jk->ik", [x, y], P))
        one("einsum", "a number operand", {"x": x}, "einsum('ij,->ij', x, 2)",
            einsum_ref("ij,->ij", [x, TV(promote_weak(x.dt, 2), 2)], promote_weak(x.dt, 2)))
        f = lambda *s: {n: gen("f32", sh) for n, sh in zip(names, s)}
        for label, inputs, stmt in [
                ("a '-' not in an arrow", f((3, 4), (4, 5)), "r = einsum('ij,jk-ik', x, y)"),
                ("a lone '.'", f((3, 4)), "r = einsum('i.j->ij', x)"),
                ("two ellipses", f((3, 4)), "r = einsum('...i...->i', x)"),
                ("a digit", f((3, 4)), "r = einsum('i1->i', x)"),
                ("two arrows", f((3, 4)), "r = einsum('ij->i->j', x)"),
                ("more operands than terms", f((3, 4), (4, 5)), "r = einsum('ij->ij', x, y)"),
                ("fewer operands than terms", f((3, 4)), "r = einsum('ij,jk->ik', x)"),
                ("subscripts for more dimensions", f((3, 4)), "r = einsum('ijk->i', x)"),
                ("subscripts for fewer dimensions", f((3, 4, 5)), "r = einsum('ij->i', x)"),
                ("letter sizes differ", f((3, 4), (5, 6)), "r = einsum('ij,jk->ik', x, y)"),
                ("a repeated letter's sizes differ", f((3, 4)), "r = einsum('ii->i', x)"),
                ("ellipses that do not broadcast", f((2, 3), (4, 3)), "r = einsum('...i,...i->...', x, y)"),
                ("output letter in no operand", f((3, 4)), "r = einsum('ij->k', x)"),
                ("output letter twice", f((3, 4)), "r = einsum('ij->ii', x)"),
                ("too many dimensions", f((1, 2, 1, 2, 1), (2, 1, 2, 1, 2)), "r = einsum('abcde,fghij->abcdefghij', x, y)"),
                ("too many implicit dimensions", f((1, 2, 1, 2, 1), (2, 1, 2, 1, 2)), "r = einsum('abcde,fghij', x, y)"),
                ("bool", {"x": gen("bool", (3, 3))}, "r = einsum('ij->ji', x)"),
                ("not a string", f((3, 3)), "r = einsum(x, x)")]:
            error_case("einsum", label, inputs, [stmt], (3,))
    # the reference is PyTorch's einsum, where PyTorch takes the dtype
    for dt in ("f32", "f64", "i32", "i64", "u8"):
        for label, eq, shapes, exprs in EINSUM_CASES:
            if exprs or label in ("tiles", "spaces and capitals") or 0 in [n for s in shapes for n in s]:
                continue
            ops = [gen(dt, s, "small", specials=False) for s in shapes]
            try:
                t = torch.einsum(eq, *[torch.from_numpy(np.array(o.a)) for o in ops])
            except RuntimeError:     # PyTorch 1.13 sums an integer operand to i64 first, then
                continue             # refuses the product of i64 and i32 ('ijk,kl->l')
            got = {v: k for k, v in TORCH_DT.items()}[t.dtype]
            # where PyTorch sums an integer letter before any product (a single operand, a
            # size-1 letter) the result is its sum's i64; tensorrun keeps the operands' dtype
            # throughout, as NumPy does and PyTorch does for products
            assert got == dt or dt in INTS and got == "i64", f"torch.einsum('{eq}') of {dt}"
            msg = einsum_ref(eq, ops, dt).check(dt, t.numpy().astype(NP[dt]))
            assert msg is None, f"reference einsum('{eq}') of {dt} is not PyTorch's: {msg}"


# ---------------------------------------------------------------- checks outside the batches

def direct(args, label, op):
    r = tensorrun(args)
    if "cannot run yet" in r.stderr:
        skipped.setdefault(op, set()).add(label)
        return False
    if r.returncode != 0:
        failures.append(f"{op} {label}: exit {r.returncode}: {r.stderr.strip()[:300]} -- repro: "
                        + " ".join(shlex.quote(a) for a in [TENSORRUN, *args]))
        return False
    return True


def thread_checks():
    """Bitwise the same with --threads 1 and 2 (tensorrun-pipeline(5), EXECUTION)."""
    global checks
    x = TV("f32", (RNG.standard_normal((1000, 777)) * 3 + 1).astype(np.float32))
    path = input_file(x)
    v = x.a.astype(np.float64)
    stmts = [("sum", "s = sum(x)"), ("sum", "s0 = sum(x, dim=0)"), ("mean", "m = mean(x, dim=1)"),
             ("mean", "ma = mean(x)"), ("softmax", "sm = softmax(x, dim=-1)"), ("softmax", "sm0 = softmax(x, dim=0)"),
             ("matmul", "mm = x.mT @ x"), ("matmul", "mb = x[:500] @ x[500:].T"), ("norm", "nr = norm(x, dim=1)"),
             ("norm", "na = norm(x)"), ("cumsum", "cs = cumsum(x, 0)"), ("cumsum", "cs1 = cumsum(x, -1)"),
             ("nansum", "ns = nansum(x, dim=0)"), ("nanmean", "nm = nanmean(x)"),
             ("cumprod", "cp = cumprod(x / 4, -1)"), ("tril", "tl = tril(x.mT, 3)"),
             ("median", "md = median(x, 0)"), ("quantile", "qt = quantile(x, [0.1, 0.9], dim=1)"),
             ("einsum", "es = einsum('ij,ik->jk', x, x)"), ("einsum", "et = einsum('ij->j', x)"),
             ("cdist", "cd = cdist(x[:300], x[300:700])"), ("cdist", "cd1 = cdist(x[:200, :500], x[200:300, :500], p=1)"),
             ("cosine_similarity", "co = cosine_similarity(x[:500], x[500:])"),
             ("cosine_similarity", "co0 = cosine_similarity(x, x[0], dim=0)"),
             ("cross_entropy", "ce = cross_entropy(x, argmax(x[:, :7], 1))"),
             ("cross_entropy", "cen = cross_entropy(x[:, :50].T, argmax(x[:, :50], 1), dim=0, reduction=\"none\")")]
    stmts = [(op, s) for op, s in stmts if op in OPS]
    refs = {"s": reduce_ref("sum", x), "s0": reduce_ref("sum", x, dim=0), "m": reduce_ref("mean", x, dim=1),
            "ma": reduce_ref("mean", x), "nr": reduce_ref("norm", x, dim=1), "na": reduce_ref("norm", x),
            "cs": reduce_ref("cumsum", x, dim=0), "cs1": reduce_ref("cumsum", x, dim=-1),
            "ns": reduce_ref("nansum", x, dim=0), "nm": reduce_ref("nanmean", x),
            "cp": reduce_ref("cumprod", TV("f32", x.a / 4), dim=-1),
            "mm": mm_ref("f32", x.a.T, x.a, 1000), "mb": mm_ref("f32", x.a[:500], x.a[500:].T, 777),
            "tl": Exact("f32", np.tril(x.a.T, 3)), "md": median_ref(x, 0),
            "qt": quantile_ref(x, [0.1, 0.9], 1),
            "es": mm_ref("f32", x.a.T, x.a, 1000), "et": reduce_ref("sum", x, dim=0),
            "cd": cdist_ref("f32", x.a[:300], x.a[300:700], 2), "cd1": cdist_ref("f32", x.a[:200, :500], x.a[200:300, :500], 1),
            "co": cosine_ref("f32", v[:500], v[500:], -1), "co0": cosine_ref("f32", v, v[0], 0),
            "ce": cross_entropy_ref("f32", v, np.argmax(v[:, :7], 1), 1, "mean"),
            "cen": cross_entropy_ref("f32", v[:, :50].T, np.argmax(v[:, :50], 1), 0, "none")}
    for name, dim in (("sm", -1), ("sm0", 0)):
        ref = torch.softmax(t64(v), dim).numpy()
        m = v.max(axis=dim, keepdims=True)
        refs[name] = Close("f32", ref, EPS["f32"] * (8 + 2 * np.abs(v - m) + 2 * math.log2(v.shape[dim])) * ref)
    outs = {}
    for t in (1, 2):
        args = ["eval", "; ".join(s for _, s in stmts), "-i", f"x={path}"]
        names = [s.split(" = ")[0] for _, s in stmts]
        for nme in names:
            args += ["-o", f"{nme}={os.path.join(WORK, 'out', f'threads{t}_{nme}.npy')}"]
        args += ["--threads", str(t)]
        if not direct(args, f"--threads {t}", "threads"):
            return
        outs[t] = {nme: np.load(os.path.join(WORK, "out", f"threads{t}_{nme}.npy")) for nme in names}
    for op, s in stmts:
        nme = s.split(" = ")[0]
        repro = " ".join(shlex.quote(a) for a in [TENSORRUN, "eval", s, "-i", f"x={path}", "-o", f"{nme}.npy"])
        checks += 2
        a, b = outs[1][nme], outs[2][nme]
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            diff = np.argwhere(a != b) if a.shape == b.shape else np.zeros((0, a.ndim), int)
            at = tuple(diff[0]) if len(diff) else None
            where = f"first at {list(at)}: {a[at]!r} vs {b[at]!r}" if at is not None else "NaN or shape"
            failures.append(f"{op} f32 [1000, 777] `{s}`: --threads 1 and --threads 2 differ in {len(diff)} values "
                            f"({where}) -- repro: {repro} --threads 1, then --threads 2")
        msg = refs[nme].check(NAME_OF[a.dtype], a)
        if msg:
            failures.append(f"{op} f32 [1000, 777] `{s}`: {msg} -- repro: {repro} --threads 1")


def random_checks():
    """rand/randn: a seed always gives the same bits, whatever --threads; seeds differ."""
    global checks
    for op in ("rand", "randn"):
        for dt in dts(op):
            res = {}
            for tag, seed, threads in (("a", 7, "1"), ("b", 7, "2"), ("c", 8, "2")):
                p = os.path.join(WORK, "out", f"{op}_{dt}_{tag}.safetensors")
                expr = f"r = {op}([300, 70], seed={seed}, dtype={dt})"
                if not direct(["eval", expr, "-o", f"r={p}", "--threads", threads], f"{dt} seed {seed}", op):
                    break
                res[tag] = read_result(p)[1]
            else:
                checks += 2
                if res["a"].tobytes() != res["b"].tobytes():
                    failures.append(f"{op} {dt}: seed 7 gives different bits with --threads 1 and 2 -- repro: "
                                    f"{TENSORRUN} eval 'r = {op}([300, 70], seed=7, dtype={dt})' -o r=a.safetensors "
                                    "--threads 1, then --threads 2")
                if (res["a"] == res["c"]).mean() > 0.01:
                    failures.append(f"{op} {dt}: seeds 7 and 8 give {100 * (res['a'] == res['c']).mean():.0f}% the same values"
                                    f" -- repro: {TENSORRUN} eval 'r = {op}([300, 70], seed=8, dtype={dt})' -o r=c.safetensors")


# ---------------------------------------------------------------- the reference, checked against PyTorch

def self_check():
    """The reference's promotion, rounding and sort order are PyTorch's, where PyTorch has the dtypes."""
    tdt = [d for d in DTYPES if d in TORCH_DT]
    for d1 in tdt:
        t1 = torch.zeros(2, dtype=TORCH_DT[d1])
        for d2 in tdt:
            want = torch.result_type(t1, torch.zeros(2, dtype=TORCH_DT[d2]))
            assert TORCH_DT[promote(d1, d2)] == want, (d1, d2)
        for s in (2, 2.5, True):
            assert TORCH_DT[promote_weak(d1, s)] == torch.result_type(t1, s), (d1, s)
    v32 = (RNG.standard_normal(4000) * 10.0 ** RNG.integers(-40, 38, 4000)).astype(np.float32)
    assert (round_bf16(v32).view(np.uint32) ==
            torch.from_numpy(v32).to(torch.bfloat16).to(torch.float32).numpy().view(np.uint32)).all()
    a = np.round(RNG.standard_normal((5, 40)) * 2) / 2
    a[a == 1.5] = np.nan
    for desc in (False, True):
        t = torch.sort(torch.from_numpy(a), dim=-1, descending=desc, stable=True)
        assert (stable_order(a, -1, desc) == t.indices.numpy()).all()
        ab = a > 0           # bool: false before true, true first when descending
        t = torch.sort(torch.from_numpy(ab), dim=-1, descending=desc, stable=True)
        assert (stable_order(ab, -1, desc) == t.indices.numpy()).all(), "bool sort order"
    # integer products wrap around: the exact reference is NumPy's and PyTorch's
    for d in INTS:
        x, y = gen(d, (2, 5, 40), "full"), gen(d, (40, 3), "full")
        assert (imm_exact(d, x, y) == np.matmul(x.a, y.a)).all(), f"integer matmul reference ({d}) is not NumPy's"
        if d in TORCH_DT:
            t = torch.matmul(torch.from_numpy(x.a), torch.from_numpy(y.a)).numpy()
            assert (imm_exact(d, x, y) == t).all(), f"integer matmul reference ({d}) is not PyTorch's"
    def torch_of(v):
        t = torch.from_numpy(np.array(v.a, order="C"))
        return t.to(torch.bfloat16) if v.dt == "bf16" else t
    for op in BINARY:
        for d1, d2 in [(d, d) for d in tdt] + [p for p in MIXED if p[0] in TORCH_DT and p[1] in TORCH_DT]:
            if op in ("sub", "pow") and "bool" in (d1, d2):
                continue
            x, y = gen(d1, (3, 1), bin_kind(op, "a", d1)), gen(d2, (4,), bin_kind(op, "b", d2))
            for b in (y, 2, 2.5):
                try:
                    t = getattr(torch, op)(torch_of(x), torch_of(b) if isinstance(b, TV) else b)
                except TypeError:     # torch.maximum and friends take no numbers
                    continue
                except RuntimeError:  # a dtype PyTorch refuses (floor_divide of bool, an integer
                    continue          # divided by 0, isclose of two dtypes)
                name = {v: k for k, v in TORCH_DT.items()}[t.dtype]
                got = t.float().numpy() if name == "bf16" else t.numpy()
                if op in DIVMOD and name in ("f16", "bf16"):
                    # PyTorch rounds each step of floor_divide to the half type; tensorrun computes
                    # in f32 and rounds once, as NumPy does: only the dtype is PyTorch's
                    assert binary_ref(op, x, b).dt == name, f"reference {op}({d1}, {d2}) dtype"
                    continue
                msg = binary_ref(op, x, b).check(name, got)
                assert msg is None, f"reference {op}({d1}, {b if not isinstance(b, TV) else d2}) is not PyTorch's: {msg}"
    tname = {v: k for k, v in TORCH_DT.items()}

    def same_as_torch(expect, t, what):
        got = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        msg = expect.check(tname[t.dtype], got)
        assert msg is None, f"reference {what} is not PyTorch's: {msg}"
    for d in tdt:
        x = gen(d, (4, 6), "mix")
        for op in ("neg", "abs", "square", "relu", "floor", "round", "exp", "sigmoid", "isnan", "logical_not"):
            if d == "bool" and op in ("neg", "abs", "relu", "floor", "round") or \
                    d not in FLOATS and op in ("exp", "sigmoid"):   # PyTorch refuses; tensorrun gives f32
                continue
            try:
                t = getattr(torch, op)(torch_of(x))
            except RuntimeError:      # no CPU kernel for this dtype in PyTorch 1.13
                continue
            same_as_torch(unary_ref(op, x), t, f"{op}({d})")
        for op in ("sum", "prod", "max", "min", "argmax", "argmin", "all", "any", "cumsum"):
            if op in ("argmax", "argmin") and d == "bool" or op in ("sum", "prod", "cumsum", "all", "any") and d == "u8":
                continue          # tensorrun: sums of unsigned integers are u64; PyTorch's all(u8) is u8
            try:
                t = getattr(torch, op)(torch_of(x), 1)
            except RuntimeError:
                continue
            same_as_torch(reduce_ref(op, x, dim=1), t.values if op in ("max", "min") else t, f"{op}({d}, dim=1)")


# ---------------------------------------------------------------- the peer's dtypes

def _t(dt, shape=(3, 4)):
    return torch.ones(shape, dtype=TORCH_DT[dt])


_IDX = torch.zeros((3, 4), dtype=torch.int64)
# op -> a call of PyTorch's op of the same meaning on tensors of one dtype
PROBE = {
    **{op: (lambda op: lambda t: getattr(torch, op)(t))(op) for op in UNARY
       if op not in ("gelu", "silu", "softplus", "leaky_relu", "elu", "relu")},
    "gelu": F.gelu, "silu": F.silu, "softplus": F.softplus, "leaky_relu": F.leaky_relu, "elu": F.elu,
    "relu": torch.relu,
    **{op: (lambda op: lambda t: getattr(torch, op)(t, t))(op) for op in BINARY},
    "where": lambda t: torch.where(t != 0, t, t), "clamp": lambda t: torch.clamp(t, min=t),
    **{op: (lambda op: lambda t: getattr(torch, op)(t))(op)
       for op in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "all", "any",
                  "nansum", "nanmean", "count_nonzero", "median")},
    "norm": lambda t: torch.linalg.vector_norm(t), "logsumexp": lambda t: torch.logsumexp(t, 0),
    "quantile": lambda t: torch.quantile(t, 0.5), "cumsum": lambda t: torch.cumsum(t, 0),
    "cumprod": lambda t: torch.cumprod(t, 0),
    "matmul": lambda t: torch.matmul(t, t.T), "dot": lambda t: torch.dot(t[0], t[0]),
    "outer": lambda t: torch.outer(t[0], t[0]), "tril": torch.tril, "triu": torch.triu,
    "softmax": lambda t: torch.softmax(t, -1), "log_softmax": lambda t: torch.log_softmax(t, -1),
    "layer_norm": lambda t: F.layer_norm(t, (4,)), "l2_normalize": lambda t: F.normalize(t),
    "one_hot": lambda t: F.one_hot(t, 3),
    "topk": lambda t: torch.topk(t, 1), "sort": torch.sort, "argsort": torch.argsort,
    "gather": lambda t: torch.gather(t, 0, _IDX), "index_select": lambda t: torch.index_select(t, 0, _IDX[0]),
    "take_along_dim": lambda t: torch.take_along_dim(t, _IDX, 0),
    "concat": lambda t: torch.cat([t, t]), "stack": lambda t: torch.stack([t, t]),
    "roll": lambda t: torch.roll(t, 1), "repeat": lambda t: t.repeat(2, 1),
    "repeat_interleave": lambda t: torch.repeat_interleave(t, 2), "pad": lambda t: F.pad(t, (1, 1)),
    "split": lambda t: torch.split(t, 2), "chunk": lambda t: torch.chunk(t, 2),
    "flip": lambda t: torch.flip(t, [0]), "narrow": lambda t: torch.narrow(t, 0, 0, 1),
    "movedim": lambda t: torch.movedim(t, 0, 1), "unflatten": lambda t: t.unflatten(1, (2, 2)),
    "zeros_like": torch.zeros_like, "ones_like": torch.ones_like, "full_like": lambda t: torch.full_like(t, 1),
}


def peer_dtypes():
    """Every dtype PyTorch takes for an op must be one `ops --json` lists: the differential
    test would otherwise skip it silently."""
    global checks
    for op, call in sorted(PROBE.items()):
        if op not in OPS or call is None:
            continue
        for dt in TORCH_DT:
            try:
                call(_t(dt))
            except Exception:       # PyTorch does not take it (or has no CPU kernel for it)
                continue
            checks += 1
            if dt not in dts(op):
                failures.append(f"{op} {dt}: PyTorch takes it, `tensorrun ops --json` does not list it")


# ---------------------------------------------------------------- main

self_check()
peer_dtypes()
unary_cases()
binary_cases()
where_clamp_cases()
reduce_cases()
linalg_cases()
neural_cases()
select_cases()
arrange_cases()
quantize_cases()
create_cases()
view_cases()
cast_cases()
more_view_cases()
like_cases()
triangle_cases()
einsum_cases()
distance_cases()
cross_entropy_cases()
run_all(CASES)
thread_checks()
random_checks()

for op in sorted((ONLY & set(OPS) or set(OPS)) - covered):
    skipped.setdefault(op, set()).add("no differential check for this op")
for f in failures:
    print("FAIL:", f)
for op, labels in sorted(skipped.items()):
    print(f"SKIP: {op}: {len(labels)} checks ({'; '.join(sorted(labels)[:3])}{'; ...' if len(labels) > 3 else ''})"
          + (": cannot run yet" if "no differential check for this op" not in labels else ""))
print(f"{checks} checks, {len(failures)} failed, {sum(len(v) for v in skipped.values())} skipped")
sys.exit(1 if failures or skipped else 0)
