#!/usr/bin/env bats
# tensorrun compare: every class of difference with its exit status, the
# tolerance rule against numpy.isclose, the report, safetensors by name,
# every input form, and bounded memory for files larger than the limit.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
}

# npy NAME EXPR: saves the NumPy expression EXPR as NAME.npy
npy() {
    "$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], eval(sys.argv[2]))' "$1" "$2"
}

@test "equal files are close (exit 0); a value beyond the tolerance differs (exit 1) and is reported" {
    npy a 'np.arange(12, dtype=np.float32).reshape(3, 4)'
    npy b 'np.arange(12, dtype=np.float32).reshape(3, 4)'
    run_tensorrun 0 compare a.npy b.npy
    [ "$output" = "0 of 1 tensor differs" ]
    npy b 'np.where(np.arange(12).reshape(3, 4) == 6, np.float32(6.5), np.arange(12, dtype=np.float32).reshape(3, 4)).astype(np.float32)'
    run_tensorrun 1 compare a.npy b.npy
    [ "${lines[0]}" = "a.npy: 1 of 12 differ (max abs 5.0e-01 at [1,2], max rel 7.7e-02 at [1,2])" ]
    [ "${lines[1]}" = "  at [1,2]: 6 against 6.5 (abs 5.0e-01, rel 7.7e-02)" ]
    [ "${lines[2]}" = "1 of 1 tensor differs" ]
    run_tensorrun 1 compare a.npy b.npy -q
    [ -z "$output" ]
    # a tolerance that takes it in
    run_tensorrun 0 compare a.npy b.npy --atol 0.5
}

@test "NaN: equal to NaN unless --no-equal-nan, never to a number; an infinity only to itself" {
    npy a 'np.array([np.nan, 1.0, np.inf, -np.inf, np.inf], np.float64)'
    npy b 'np.array([np.nan, 1.0, np.inf, -np.inf, np.inf], np.float64)'
    run_tensorrun 0 compare a.npy b.npy
    run_tensorrun 1 compare a.npy b.npy --no-equal-nan
    [ "${lines[0]}" = "a.npy: 1 of 5 differ (each a NaN against a number or a NaN)" ]
    npy b 'np.array([2.0, 1.0, np.inf, np.inf, 1e308], np.float64)'
    run_tensorrun 1 compare a.npy b.npy --max-report 5
    [ "${lines[0]}" = "a.npy: 3 of 5 differ (max abs inf at [3], max rel inf at [4])" ]
    [ "${lines[1]}" = "  at [0]: nan against 2 (abs nan, rel nan)" ]
    [ "${lines[2]}" = "  at [3]: -inf against inf (abs inf, rel nan)" ]
    [ "${lines[3]}" = "  at [4]: inf against 1e+308 (abs inf, rel inf)" ]
    # an infinity against a huge tolerance is still a difference
    npy a 'np.array([1.0, np.inf])'
    npy b 'np.array([1e300, 1e308])'
    run_tensorrun 1 compare a.npy b.npy --atol 1e300 --rtol 1e300
    [ "${lines[0]}" = "a.npy: 1 of 2 differ (max abs inf at [1], max rel inf at [1])" ]
    # against an infinite reference there is no relative difference to name
    npy a 'np.array([[1.0, 2.0]], np.float32)'
    npy b 'np.array([[1.0, np.inf]], np.float32)'
    run_tensorrun 1 compare a.npy b.npy
    [ "${lines[0]}" = "a.npy: 1 of 2 differ (max abs inf at [0,1])" ]
}

@test "a dtype, a shape, a missing and an extra tensor are differences" {
    npy a 'np.zeros((2, 3), np.float32)'
    npy b 'np.zeros((2, 3), np.float64)'
    run_tensorrun 1 compare a.npy b.npy
    [ "${lines[0]}" = "a.npy: dtype f32 against f64" ]
    # --ignore-dtype compares the values in f64
    run_tensorrun 0 compare a.npy b.npy --ignore-dtype
    npy b 'np.zeros((3, 2), np.float32)'
    run_tensorrun 1 compare a.npy b.npy --ignore-dtype
    [ "${lines[0]}" = "a.npy: shape [2,3] against [3,2]" ]
    "$PY" -c '
import numpy as np, json, struct
def st(path, tensors):
    header, data = {}, b""
    for name, a in tensors.items():
        header[name] = {"dtype": {"float32": "F32", "int64": "I64"}[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    h = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
st("a.safetensors", {"w": np.ones(4, np.float32), "ids": np.arange(3), "only_a": np.zeros(1, np.float32)})
st("b.safetensors", {"ids": np.arange(3), "w": np.ones(4, np.float32), "only_b": np.zeros(1, np.float32)})
'
    run_tensorrun 1 compare a.safetensors b.safetensors
    [ "${lines[0]}" = "only_a: only in a.safetensors" ]
    [ "${lines[1]}" = "only_b: only in b.safetensors" ]
    [ "${lines[2]}" = "2 of 4 tensors differ" ]
    run_tensorrun 0 compare a.safetensors b.safetensors --key w --key ids
    [ "$output" = "0 of 2 tensors differ" ]
    run_tensorrun 1 compare a.safetensors b.safetensors --key w --key only_b
    run_tensorrun 1 compare a.safetensors b.safetensors --json
    "$PY" -c '
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines()]
only = {t["name"]: t for t in lines[:-1]}
assert only["only_a"]["difference"] == "only_in_a" and only["only_a"]["dtype"] == ["f32", None], only
assert only["only_b"]["shape"] == [None, [1]] and only["w"]["close"] is True, only' "$output"
    # a key given twice is compared once; an empty one is a usage error
    run_tensorrun 0 compare a.safetensors b.safetensors --key w --key w
    [ "$output" = "0 of 1 tensor differs" ]
    run_tensorrun 2 compare a.safetensors b.safetensors --key ''
    run_tensorrun 4 compare a.safetensors b.safetensors --key nowhere
    [[ "$stderr" == *"no tensor 'nowhere' in a.safetensors or b.safetensors"* ]]
    # one tensor of a collection against a single-tensor file
    npy w 'np.ones(4, np.float32)'
    run_tensorrun 0 compare w.npy a.safetensors --key w
    run_tensorrun 2 compare w.npy a.safetensors
    [[ "$stderr" == *"a.safetensors holds 3 tensors and the other file one: pick one with --key"* ]]
}

@test "the default tolerances follow the dtype: f16, bf16, f32, f64, and integers exactly" {
    "$PY" - <<'EOF'
import numpy as np
# just inside and just outside each dtype's atol + rtol * |b| at b = 1
for name, dt, rtol, atol in [("f16", np.float16, 1e-3, 1e-5), ("f32", np.float32, 1.3e-6, 1e-5),
                             ("f64", np.float64, 1e-7, 1e-7)]:
    b = np.ones(2, dt)
    inside = np.array([1 + (atol + rtol) * 0.5] * 2, dt)
    outside = np.array([1 + (atol + rtol) * 4] * 2, dt)
    assert np.isclose(inside.astype(np.float64), b.astype(np.float64), rtol, atol).all()
    assert not np.isclose(outside.astype(np.float64), b.astype(np.float64), rtol, atol).any()
    np.save(name + "-b.npy", b); np.save(name + "-in.npy", inside); np.save(name + "-out.npy", outside)
np.save("i-b.npy", np.array([5, 7], np.int32)); np.save("i-out.npy", np.array([5, 8], np.int32))
EOF
    for t in f16 f32 f64; do
        run_tensorrun 0 compare $t-in.npy $t-b.npy
        run_tensorrun 1 compare $t-out.npy $t-b.npy
    done
    run_tensorrun 1 compare i-out.npy i-b.npy
    [ "${lines[0]}" = "i-out.npy: 1 of 2 differ (max abs 1.0e+00 at [1], max rel 1.4e-01 at [1])" ]
    run_tensorrun 0 compare i-out.npy i-b.npy --atol 1
    # integers past f64's 53 bits: compared, shown and differenced exactly
    npy big-a 'np.array([2**53 + 1, 5], np.int64)'
    npy big-b 'np.array([2**53, 5], np.int64)'
    run_tensorrun 1 compare big-a.npy big-b.npy
    [ "${lines[0]}" = "big-a.npy: 1 of 2 differ (max abs 1.0e+00 at [0], max rel 1.1e-16 at [0])" ]
    [ "${lines[1]}" = "  at [0]: 9007199254740993 against 9007199254740992 (abs 1.0e+00, rel 1.1e-16)" ]
    npy u-a 'np.array([2**64 - 1], np.uint64)'
    npy u-b 'np.array([7], np.uint64)'
    run_tensorrun 1 compare u-a.npy u-b.npy --json
    "$PY" -c '
import json, sys
t = json.loads(sys.argv[1].splitlines()[0])
assert t["first"][0]["a"] == "18446744073709551615" and t["first"][0]["b"] == 7, t' "$output"
    # bf16 (in safetensors: .npy cannot hold it): 1.6e-2 relative
    "$PY" -c '
import numpy as np, json, struct
def bf16(x): return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)
for path, v in [("bf-b.safetensors", 1.0), ("bf-in.safetensors", 1.0078125), ("bf-out.safetensors", 1.03125)]:
    d = bf16([v]).tobytes()
    h = json.dumps({"x": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + d)
'
    run_tensorrun 0 compare bf-in.safetensors bf-b.safetensors
    run_tensorrun 1 compare bf-out.safetensors bf-b.safetensors
}

@test "--exact compares bits: -0.0 differs from 0.0; it refuses tolerances and --ignore-dtype" {
    npy a 'np.array([0.0, 1.0], np.float32)'
    npy b 'np.array([-0.0, 1.0], np.float32)'
    run_tensorrun 0 compare a.npy b.npy
    run_tensorrun 1 compare a.npy b.npy --exact
    [ "${lines[0]}" = "a.npy: 1 of 2 differ (no difference in value: signed zeros or NaNs)" ]
    [ "${lines[1]}" = "  at [0]: 0 against -0 (abs 0.0e+00, rel 0.0e+00)" ]
    run_tensorrun 2 compare a.npy b.npy --exact --atol 1
    run_tensorrun 2 compare a.npy b.npy --exact --ignore-dtype
    [[ "$stderr" == *"--exact compares bits, which --ignore-dtype cannot"* ]]
    # NaN payloads are bits too
    npy a 'np.array([np.nan], np.float32)'
    npy b 'np.frombuffer(np.uint32(0x7fc00001).tobytes(), np.float32)'
    run_tensorrun 0 compare a.npy b.npy
    run_tensorrun 1 compare a.npy b.npy --exact
}

@test "usage errors are exit 2, missing and malformed files exit 4" {
    npy a 'np.zeros(3, np.float32)'
    run_tensorrun 2 compare a.npy
    run_tensorrun 2 compare a.npy a.npy --rtol -1
    run_tensorrun 2 compare a.npy a.npy --atol nan
    run_tensorrun 2 compare a.npy a.npy --max-report x
    run_tensorrun 2 compare a.npy a.npy --bogus
    run_tensorrun 4 compare a.npy missing.npy
    [[ "$stderr" == *"missing.npy"* ]]
    printf '\x93NUMPY\x01\x00\x10\x00{bad' > bad.npy
    run_tensorrun 4 compare bad.npy a.npy
    [[ "$stderr" == *"bad.npy"* ]]
    head -c 100 a.npy > short.npy
    run_tensorrun 4 compare a.npy short.npy
    run_tensorrun 0 compare a.npy a.npy --memory-limit 512
    [[ "$stderr" == *"warning: --memory-limit 512 is 512 bytes; did you mean 512M?"* ]]
    run_tensorrun 0 compare --help
    [[ "$output" == *"Exit status: 0 everything is close, 1 something differs"* ]]
}

@test "the tolerance decisions are numpy.isclose's over random cases, one ulp either side included" {
    "$PY" - <<'EOF'
import numpy as np
r = np.random.default_rng(7)
n = 40000
b = r.standard_normal(n) * 10.0 ** r.integers(-8, 8, n)
rtol, atol = 1e-4, 1e-6
edge = atol + rtol * np.abs(b)
a = b + edge * r.choice([-1, 1], n)
# one ulp on either side of the edge, and random offsets around it
k = n // 4
a[:k] = b[:k] + np.nextafter(edge[:k], np.inf)
a[k:2 * k] = b[k:2 * k] + np.nextafter(edge[k:2 * k], 0)
a[2 * k:3 * k] = b[2 * k:3 * k] + edge[2 * k:3 * k] * r.uniform(0.5, 1.5, k)
a[-10:] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, np.nan, 5e-324, 0]
b[-10:] = [np.nan, np.inf, np.inf, -0.0, 0.0, -1e308, 1e308, 1.0, 0, 5e-324]
np.save("a.npy", a); np.save("b.npy", b)
want = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
np.save("want.npy", np.flatnonzero(want))
print(want.sum())
EOF
    run_tensorrun 1 compare a.npy b.npy --rtol 1e-4 --atol 1e-6 --json --max-report 1000000 --threads 2
    printf '%s\n' "$output" > got.json
    "$PY" - <<'EOF'
import json, numpy as np
lines = [json.loads(l) for l in open("got.json")]
got = [d["at"][0] for d in lines[0]["first"]]
want = np.load("want.npy").tolist()
assert lines[0]["differ"] == len(want), (lines[0]["differ"], len(want))
assert got == want, "first mismatch at %d" % next(i for i, (x, y) in enumerate(zip(got, want)) if x != y)
assert lines[-1] == {"tensors": 1, "differ": 1, "close": False}, lines[-1]
EOF
    # the same verdict, counts and first differences on one thread
    run_tensorrun 1 compare a.npy b.npy --rtol 1e-4 --atol 1e-6 --json --max-report 1000000 --threads 1
    [ "$output" = "$(cat got.json)" ]
}

@test "--json: one object per tensor, then the summary; the maxima and their places" {
    npy a 'np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)'
    npy b 'np.array([[1.0, 2.5], [3.0, 4.5]], np.float32)'
    run_tensorrun 1 compare a.npy b.npy --json --max-report 1
    "$PY" - "$output" <<'EOF'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines()]
t, summary = lines
assert t["name"] == "a.npy" and t["difference"] == "values" and t["differ"] == 2, t
assert t["elements"] == 4 and t["dtype"] == ["f32", "f32"] and t["shape"] == [[2, 2], [2, 2]], t
assert t["max_abs"] == 0.5 and t["max_abs_at"] == [0, 1], t
assert t["max_rel"] == 0.2 and t["max_rel_at"] == [0, 1], t
assert t["rtol"] == 1.3e-6 and t["atol"] == 1e-5 and t["equal_nan"] is True, t
assert t["first"] == [{"at": [0, 1], "a": 2.0, "b": 2.5, "abs": 0.5, "rel": 0.2}], t["first"]
assert summary == {"tensors": 1, "differ": 1, "close": False}, summary
EOF
}

@test "every input form compares with every other: .zst, a pipe, standard input, raw, Fortran order, big-endian" {
    "$PY" - <<'EOF'
import numpy as np
a = np.arange(60000, dtype=np.float32).reshape(300, 200)
np.save("a.npy", a)
np.save("f.npy", np.asfortranarray(a))
np.save("be.npy", a.astype(">f4"))
a.tofile("a.bin")
EOF
    zstd -q a.npy -o a.npy.zst
    run_tensorrun 0 compare a.npy.zst f.npy
    run_tensorrun 0 compare be.npy a.npy.zst
    run_tensorrun 0 compare a.bin a.npy --input-dtype f32 --shape 300,200
    run_tensorrun 0 compare f.npy <(zstdcat a.npy.zst)
    run --separate-stderr bash -c "cat a.npy | '$TENSORRUN' compare - f.npy"
    [ "$status" -eq 0 ]
    run --separate-stderr bash -c "zstdcat a.npy.zst | '$TENSORRUN' compare be.npy -"
    [ "$status" -eq 0 ]
    # a safetensors stream of several tensors, read one after another
    "$PY" -c '
import json, struct
import numpy as np
a = np.load("a.npy")
h = json.dumps({"x": {"dtype": "F32", "shape": [300, 200], "data_offsets": [0, a.nbytes]},
                "y": {"dtype": "F32", "shape": [300, 200], "data_offsets": [a.nbytes, 2 * a.nbytes]}}).encode()
h += b" " * (-len(h) % 8)
open("two.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + a.tobytes() + (a * 2).tobytes())'
    zstd -q two.safetensors -o two.safetensors.zst
    run_tensorrun 0 compare two.safetensors.zst two.safetensors
    [ "$output" = "0 of 2 tensors differ" ]
    run --separate-stderr bash -c "cat two.safetensors | '$TENSORRUN' compare <(zstdcat two.safetensors.zst) -"
    [ "$status" -eq 0 ]
    # an .npz (stored or deflated) against a safetensors file, name by name
    "$PY" -c '
import numpy as np
a = np.load("a.npy")
np.savez("s.npz", w=a, ids=np.arange(5))
np.savez_compressed("c.npz", ids=np.arange(5), w=a)'
    run_tensorrun 0 compare s.npz c.npz
    [ "$output" = "0 of 2 tensors differ" ]
    run_tensorrun 0 compare c.npz a.npy --key w
    # the layout options describe raw input only
    run_tensorrun 2 compare a.npy f.npy --input-dtype f32 --shape 300,200
    # a stream that ends early is a malformed file
    head -c 100000 a.npy | { run --separate-stderr "$TENSORRUN" compare - a.npy; [ "$status" -eq 4 ]; }
}

@test "two files larger than --memory-limit compare within it, streamed from .zst; mapped ones take no pool" {
    "$PY" -c '
import numpy as np
a = np.lib.format.open_memmap("a.npy", "w+", np.float32, (4096, 4096))
a[:] = np.arange(4096, dtype=np.float32)
a.flush()
b = np.lib.format.open_memmap("b.npy", "w+", np.float32, (4096, 4096))
b[:] = a
b[4000, 17] = -1
b.flush()
'
    zstd -q -1 a.npy -o a.npy.zst
    zstd -q -1 b.npy -o b.npy.zst
    # 64 MiB each, through 16 MiB
    run_tensorrun 1 compare a.npy.zst b.npy.zst --memory-limit 16M
    [ "${lines[0]}" = "a.npy.zst: 1 of 16777216 differ (max abs 1.8e+01 at [4000,17], max rel 1.8e+01 at [4000,17])" ]
    anon=$("$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" compare a.npy.zst a.npy.zst --memory-limit 16M -q | cut -d' ' -f2)
    # the pool (two runs of 4 MiB), zstd's windows and the program itself
    [ -n "${TR_SANITIZED:-}" ] || [ "$anon" -lt $((16 * 1024)) ] || { echo "RssAnon peaked at $anon KiB"; return 1; }
    anon=$("$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" compare a.npy a.npy --memory-limit 1M -q | cut -d' ' -f2)
    [ -n "${TR_SANITIZED:-}" ] || [ "$anon" -lt $((4 * 1024)) ] || { echo "RssAnon peaked at $anon KiB"; return 1; }
}
