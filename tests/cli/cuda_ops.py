#!/usr/bin/python3
"""The CUDA kernels against the CPU's: writes the inputs and a pipeline
that runs every op of the cuda column, in every dtype it names, over
awkward values, strided and broadcast operands and constants, on the device
given; then compares the two runs' results (cuda_host.bats on the host
stand-in, tests/cuda/run on a GPU).

usage: cuda_ops.py inputs DIR
         (x.npy: [6, 7] of awkward values, NaN, infinities and -0 among
         them; y.npy: [7]; z.npy: [64, 33, 5] and w.npy: [3, 70000] of
         non-negative values, for the sums; g.npy: 0 .. 41 as [6, 7] i64,
         for indices)
       cuda_ops.py pipeline OPS_JSONL DEVICE OUTDIR > pipeline.yaml
       cuda_ops.py compare [--gpu] CPU.safetensors CUDA.safetensors
         (prints each result outside its bound; exit 1 if any is.  The
         bound: the same bits, but for the sums (sum, mean, norm, matmul),
         whose order is the device's: 40 ulp in f32 and f64, 2 in f16 and
         bf16, as the values are non-negative that is within log2(n) eps
         sum|x| (k eps sum|a||b| for a product) for the n and k here; the
         row-wise ops (softmax, log_softmax, l2_normalize, layer_norm,
         rms_norm) within r (|cpu| + max |cpu|), r 1e-5 in f32
         (ROWWISE_TOLERANCE); with --gpu also the transcendental ops, whose last bits
         are CUDA's libm's: 2 ulp in f32 and f64, 1 in f16 and bf16, more
         for the f32 functions CUDA documents past 2 ulp (WIDER_F32_ULPS),
         the composite ones (sigmoid, silu, ...) as the row-wise ones; and
         NaN is any NaN, as a GPU has one NaN where the CPU keeps payloads
         and signs)

A result's name is OP__VARIANT__DTYPE.
"""
import json
import sys

DTYPES = {
    "any dtype": ["f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8", "u64", "bool"],
    "bool and integers": ["bool", "i64", "i32", "u8", "u64"],
    "f16, bf16, f32, f64": ["f32", "f64", "f16", "bf16"],
    "numbers (not bool)": ["f32", "f64", "f16", "bf16", "i64", "i32", "i8", "u8", "u64"],
}
# ops written apart, not as op(x) or op(a, b)
SPECIAL = {"where", "clamp", "cast", "to", "contiguous", "clone"}
# ops computed with one libm function, CUDA's on a GPU and glibc's on the
# CPU: 2 ulp in f32 and f64, 1 in f16 and bf16; but for the f32 functions
# whose CUDA bound alone is past 2 ulp, that bound and glibc's ulp
TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan",
                  "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                  "erf", "pow", "atan2"}
TRANSCENDENTAL_ULPS = {"F32": 2, "F64": 2, "F16": 1, "BF16": 1}
WIDER_F32_ULPS = {"tan": 5, "pow": 5, "acosh": 5, "asinh": 4, "sinh": 4, "atanh": 4, "atan2": 4}
# ops built of several (sigmoid, silu, softplus, elu, gelu), where a libm
# function's last bit can be amplified by cancellation: ROWWISE_TOLERANCE
# reductions whose order is the device's
ACCUMULATED = {"sum", "mean", "norm", "matmul"}
ACCUMULATED_ULPS = {"F32": 40, "F64": 40, "F16": 2, "BF16": 2}
# row-wise ops, whose exponentials and sums are the device's: within r
# (|cpu| + the largest |cpu| of the tensor), as a result near 0 (x close
# to the line's mean) has no ulp bound
ROWWISE = {"softmax", "log_softmax", "l2_normalize", "layer_norm", "rms_norm"}
COMPOSITE = {"sigmoid", "silu", "softplus", "elu", "gelu"}
ROWWISE_TOLERANCE = {"F32": 1e-5, "F64": 1e-12, "F16": 2e-3, "BF16": 1.6e-2}


def write_inputs(d):
    import numpy as np
    r = np.random.default_rng(5)
    v = np.array([0, -0.0, 1, -1, 0.5, -2.5, 3.7, 1e-40, 1e30, -1e30, np.inf, -np.inf, np.nan,
                  65504, 70000, 300, -129, 255, 2**31, 1e20, 0.1, -0.7, 2, 7, 100, -100, 1.5,
                  2.5, -0.5, 1e-3, 12345.678, -3, 4, 0.25, 9, -9, 1 / 3, 2 / 3, 0.9, -0.9, 5,
                  6], dtype=np.float32)
    np.save(f"{d}/x.npy", v.reshape(6, 7))
    np.save(f"{d}/y.npy", np.array([0.5, -1, 0, 2, np.nan, 3, -0.0], dtype=np.float32))
    np.save(f"{d}/z.npy", np.abs(r.standard_normal((64, 33, 5)) * 3).astype(np.float32))
    np.save(f"{d}/w.npy", np.abs(r.standard_normal((3, 70000))).astype(np.float32))
    np.save(f"{d}/g.npy", np.arange(42, dtype=np.int64).reshape(6, 7))


def pipeline(ops_file, device, outdir):
    ops = {}
    for line in open(ops_file):
        op = json.loads(line)
        ops[op["name"]] = op
    lines, outputs = [], []

    def bind(op, variant, dt, expr):
        name = f"{op}__{variant}__{dt}"
        lines.append(f"      - {name} = {expr}")
        outputs.append(f"  {name}: {{path: {outdir}/ops.safetensors, key: {name}}}")

    def bind2(op, variant, dt, expr):
        """Both results of topk: values (OP__VARIANTv) and indices (..i)."""
        names = [f"{op}__{variant}{r}__{dt}" for r in "vi"]
        lines.append(f"      - {names[0]}, {names[1]} = {expr}")
        for name in names:
            outputs.append(f"  {name}: {{path: {outdir}/ops.safetensors, key: {name}}}")

    def dtypes(op):
        return DTYPES.get(ops[op]["cuda"], []) if op in ops else []

    for dt in DTYPES["any dtype"]:
        # x is [6, 7]; y [7] broadcasts along its rows; a column of x, [6, 1],
        # and y as [1, 7] broadcast along their dimensions of 1
        for v in "xyzw":
            lines.append(f"      - {v}_{dt} = cast({v} * 3, {dt})" if v in "xy" else
                         f"      - {v}_{dt} = cast({v}, {dt})")
        bind("cast", "t", dt, f"cast(transpose(x_{dt}, 0, 1), f32)")
        bind("clone", "t", dt, f"clone(transpose(x_{dt}, 0, 1))")
        bind("where", "x", dt, f"where(x_{dt}, x_{dt}, y_{dt})")
        bind("clamp", "c", dt, f"clamp(x_{dt}, 0, 2)")
        bind("clamp", "t", dt, f"clamp(x_{dt}, y_{dt}, flip(y_{dt}, 0))")
        bind("clamp", "max", dt, f"clamp(x_{dt}, max=y_{dt})")
        bind("full", "c", dt, f"full([3, 4], -2.7, dtype={dt})")
        bind("ones_like", "x", dt, f"ones_like(x_{dt})")
        bind("zeros_like", "f16", dt, f"zeros_like(y_{dt}, dtype=f16)")
        bind("full_like", "x", dt, f"full_like(x_{dt}, 1)")
    for dt in DTYPES["f16, bf16, f32, f64"]:
        # 4099 values: more than one block of threads, an odd tail
        bind("rand", "s7", dt, f"rand([4099], seed=7, dtype={dt})")
        bind("randn", "sneg3", dt, f"randn([4099], seed=-3, dtype={dt})")
    for op in sorted(ops.values(), key=lambda o: o["name"]):
        name, group = op["name"], op["group"]
        if op["cuda"] == "none" or group not in ("unary", "binary") or name in SPECIAL:
            continue
        for dt in DTYPES[op["cuda"]]:
            x, y = f"x_{dt}", f"y_{dt}"
            if group == "unary":
                bind(name, "x", dt, f"{name}({x})")
                bind(name, "t", dt, f"{name}(transpose({x}, 0, 1))")
            else:
                bind(name, "xy", dt, f"{name}({x}, {y})")
                bind(name, "t", dt, f"{name}(transpose({x}, 0, 1), narrow({y}, 0, 1, 6))")
                bind(name, "b", dt, f"{name}(narrow({x}, 1, 2, 1), unsqueeze({y}, 0))")
                bind(name, "c", dt, f"{name}({x}, 2)")
                bind(name, "r", dt, f"{name}(3, {x})")
    # the reductions: over everything, one dimension, several (kept), a
    # strided view, and more values than one group of threads takes
    for op in ("sum", "mean", "norm"):
        for dt in dtypes(op):
            z, w = f"z_{dt}", f"w_{dt}"
            bind(op, "all", dt, f"{op}({z})")
            bind(op, "d1", dt, f"{op}({z}, dim=1)")
            bind(op, "d02", dt, f"{op}({z}, dim=[0, 2], keepdim=true)")
            bind(op, "t", dt, f"{op}(transpose({z}, 0, 2), dim=0)")
            bind(op, "w1", dt, f"{op}({w}, dim=1)")
            bind(op, "wall", dt, f"{op}({w})")
    for dt in dtypes("norm"):
        bind("norm", "ord1", dt, f"norm(z_{dt}, ord=1, dim=2)")
        bind("norm", "ord3", dt, f"norm(z_{dt}, ord=3, dim=0)")
        bind("norm", "inf", dt, f"norm(x_{dt}, ord=inf, dim=1)")
        bind("norm", "nan", dt, f"norm(x_{dt})")
    # products: batched, either operand stored transposed, a batch
    # broadcast, vectors, a layout cuBLAS cannot read (copied), batches
    # that do not flatten (copied), mixed dtypes
    for dt in dtypes("matmul"):
        z = f"z_{dt}"
        zt = f"transpose({z}, 1, 2)"
        bind("matmul", "bt", dt, f"matmul({z}, {zt})")
        bind("matmul", "at", dt, f"matmul({zt}, {z})")
        bind("matmul", "bcast", dt, f"matmul({z}, narrow({zt}, 0, 0, 1))")
        bind("matmul", "vm", dt, f"matmul(narrow(flatten({z}), 0, 0, 33), narrow({z}, 0, 0, 1))")
        bind("matmul", "mv", dt, f"matmul(narrow({z}, 0, 0, 2), narrow(flatten({z}), 0, 0, 5))")
        bind("matmul", "flip", dt, f"matmul(flip({z}, 2), {zt})")
        bind("matmul", "outer", dt, f"matmul(unsqueeze(narrow({z}, 0, 0, 2), 1), "
                                    f"unsqueeze(narrow({zt}, 0, 0, 3), 0))")
        bind("matmul", "mixed", dt, f"matmul({z}, cast({zt}, f64))")
    # selection: an index of any integer dtype, negative ones counting from
    # the end for index_select, strided operands
    for dt in dtypes("gather"):
        x = f"x_{dt}"
        bind("gather", "d1", dt, f"gather({x}, 1, g % 7)")
        bind("gather", "d0", dt, f"gather({x}, 0, cast(narrow(g, 0, 0, 3) % 6, u8))")
        bind("gather", "t", dt, f"gather(transpose({x}, 0, 1), 0, reshape(g, [7, 6]) % 6)")
    for dt in dtypes("index_select"):
        x = f"x_{dt}"
        gf = "flatten(g)"
        bind("index_select", "d1", dt, f"index_select({x}, 1, flip(narrow({gf}, 0, 0, 5), 0))")
        bind("index_select", "neg", dt, f"index_select({x}, 0, cast(narrow({gf}, 0, 0, 6) - 6, i16))")
        bind("index_select", "t", dt, f"index_select(transpose({x}, 0, 1), 1, narrow({gf}, 0, 0, 3))")
    # topk: NaN, infinities, -0 and ties, either end, along each dimension,
    # k the whole line, long lines, many equal keys
    for dt in dtypes("topk"):
        x, w = f"x_{dt}", f"w_{dt}"
        bind2("topk", "d1", dt, f"topk({x}, 3)")
        bind2("topk", "small", dt, f"topk({x}, 2, dim=0, largest=false)")
        bind2("topk", "all", dt, f"topk(transpose({x}, 0, 1), 6, dim=1)")
        bind2("topk", "long", dt, f"topk({w}, 5)")
        bind2("topk", "ties", dt, f"topk(cast(g % 3, {dt}), 4)")
        bind2("topk", "tiesmall", dt, f"topk(cast(reshape(g, [42]) % 2, {dt}), 30, largest=false)")
    # a number for x: made a 0-d tensor on the device
    bind("index_select", "number", "f64", "index_select(2.5, 0, narrow(flatten(g), 0, 0, 1))")
    bind("gather", "number", "i64", "gather(7, 0, sum(g) * 0)")
    # row-wise: along each dimension, lines longer than a block of threads,
    # NaN and infinities, a weight and a bias
    for dt in dtypes("softmax"):
        if dt not in DTYPES["f16, bf16, f32, f64"] and dt != "i32":
            continue
        x, z, w, y = f"x_{dt}", f"z_{dt}", f"w_{dt}", f"y_{dt}"
        for op in ("softmax", "log_softmax", "l2_normalize"):
            bind(op, "x", dt, f"{op}({x})")
            bind(op, "d0", dt, f"{op}({z}, dim=0)")
            bind(op, "d1", dt, f"{op}({z}, dim=1)")
            bind(op, "long", dt, f"{op}({w}, dim=1)")
        for op in ("layer_norm", "rms_norm"):
            bind(op, "z", dt, f"{op}({z})")
            bind(op, "t", dt, f"{op}(transpose({z}, 0, 2))")
            bind(op, "long", dt, f"{op}({w})")
            bind(op, "weight", dt, f"{op}({z}, weight=narrow(flatten({z}), 0, 3, 5))")
        bind("layer_norm", "bias", dt, f"layer_norm({x}, weight={y}, bias=flip({y}, 0))")
    for op in ("max", "min", "argmax", "argmin"):
        for dt in dtypes(op):
            x, w = f"x_{dt}", f"w_{dt}"
            dims = ["dim=0", "dim=1"] if op.startswith("arg") else ["dim=0", "dim=[0, 1]"]
            bind(op, "d0", dt, f"{op}({x}, {dims[0]})")
            bind(op, "d1", dt, f"{op}({x}, {dims[1]})")
            bind(op, "t", dt, f"{op}(transpose({x}, 0, 1), dim=1)")
            bind(op, "all", dt, f"{op}(narrow({x}, 0, 1, 4))")
            bind(op, "w1", dt, f"{op}({w}, dim=1)")
            bind(op, "wall", dt, f"{op}({w})")
    print("tensorrun: 1")
    print("inputs: {x: x.npy, y: y.npy, z: z.npy, w: w.npy, g: g.npy}")
    print("stages:")
    print("  - name: ops")
    print(f"    device: {device}")
    print("    do:")
    print("\n".join(lines))
    print("outputs:")
    print("\n".join(outputs))


def tensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def ulp_distance(dtype, a, b):
    """The largest distance in ulps between the floats of bytes a and b
    (NaN to NaN is 0, NaN to a number infinite)."""
    size = {"F64": 8, "F32": 4}.get(dtype, 2)
    sign = 1 << (8 * size - 1)
    exp_mask = {"F64": 0x7ff << 52, "F32": 0xff << 23, "F16": 0x7c00, "BF16": 0x7f80}[dtype]
    worst = 0
    for i in range(0, len(a), size):
        x = int.from_bytes(a[i:i + size], "little")
        y = int.from_bytes(b[i:i + size], "little")
        nan_x = (x & exp_mask) == exp_mask and (x & ~sign) != exp_mask
        nan_y = (y & exp_mask) == exp_mask and (y & ~sign) != exp_mask
        if nan_x or nan_y:
            if nan_x != nan_y:
                return float("inf")
            continue
        # sign and magnitude to a line where neighbouring floats are 1 apart
        ox = -(x & ~sign) if x & sign else x
        oy = -(y & ~sign) if y & sign else y
        worst = max(worst, abs(ox - oy))
    return worst


def values(dtype, raw):
    import numpy as np
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4").astype(float)
    return np.frombuffer(raw, {"F64": "<f8", "F32": "<f4", "F16": "<f2"}[dtype]).astype(float)


def close(dtype, a, b):
    """The largest amount by which a and b pass the tolerance (0: within)."""
    import numpy as np
    r = ROWWISE_TOLERANCE[dtype]
    x, y = values(dtype, a), values(dtype, b)
    finite = np.abs(x[np.isfinite(x)])
    with np.errstate(invalid="ignore"):
        over = np.abs(x - y) - r * (np.abs(x) + finite.max(initial=0))
    over[np.isnan(x) & np.isnan(y)] = 0
    over[(x == y)] = 0
    over[np.isnan(over)] = np.inf
    return max(0.0, float(over.max(initial=0)))


def same_but_nan(dtype, a, b):
    """Whether a and b are the same bits but where both are NaN."""
    import numpy as np
    if len(a) != len(b):
        return False
    x, y = values(dtype, a), values(dtype, b)
    raw = {"F64": "<u8", "F32": "<u4"}.get(dtype, "<u2")
    return bool(np.all((np.frombuffer(a, raw) == np.frombuffer(b, raw)) |
                       (np.isnan(x) & np.isnan(y))))


def compare(a_path, b_path, gpu):
    a, b = tensors(a_path), tensors(b_path)
    bad = 0
    for k in sorted(a.keys() | b.keys()):
        if a.get(k) == b.get(k):
            continue
        op = k.split("__")[0]
        dtype = a[k][0] if k in a else None
        if gpu and k in b and dtype in ROWWISE_TOLERANCE and same_but_nan(dtype, a[k][1], b[k][1]):
            continue
        if (op in ROWWISE or (gpu and op in COMPOSITE)) and k in b and dtype in ROWWISE_TOLERANCE:
            over = close(dtype, a[k][1], b[k][1])
            if over == 0:
                continue
            print(f"{k}: {over} past the tolerance {ROWWISE_TOLERANCE[dtype]}")
            bad += 1
            continue
        bounds = ACCUMULATED_ULPS if op in ACCUMULATED else \
            TRANSCENDENTAL_ULPS if gpu and op in TRANSCENDENTAL else {}
        if bounds is TRANSCENDENTAL_ULPS and op in WIDER_F32_ULPS:
            bounds = dict(bounds, F32=WIDER_F32_ULPS[op])
        if k in a and k in b and dtype in bounds:
            d = ulp_distance(dtype, a[k][1], b[k][1])
            if d <= bounds[dtype]:
                continue
            print(f"{k}: {d} ulp apart (at most {bounds[dtype]})")
        else:
            print(f"{k}: the bytes differ")
        bad += 1
    return 1 if bad else 0


def main():
    if sys.argv[1] == "inputs":
        write_inputs(sys.argv[2])
    elif sys.argv[1] == "pipeline":
        pipeline(*sys.argv[2:5])
    elif sys.argv[1] == "compare":
        gpu = sys.argv[2] == "--gpu"
        sys.exit(compare(sys.argv[2 + gpu], sys.argv[3 + gpu], gpu))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
