#!/usr/bin/env bats
# tensorrun run: results checked against NumPy, the statistics checked
# against known allocation sizes, outputs in every form, and every failure
# with its exit status, leaving destinations untouched.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    INJECT=${TR_INJECT:-$BATS_TEST_DIRNAME/../inject/inject.so}
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
rng = np.random.default_rng(7)
np.save("a.npy", rng.standard_normal((64, 32)).astype("<f4"))
np.save("b.npy", rng.standard_normal((32, 16)).astype("<f4"))
np.save("m.npy", rng.standard_normal((1024, 1024)).astype("<f4"))'
}

# pipeline BODY: writes p.yaml: the version line, then BODY
pipeline() {
    printf 'tensorrun: 1\n%s\n' "$1" > p.yaml
}

# close FILE EXPR [RTOL]: the .npy FILE matches the NumPy expression EXPR
# (a, b and m are the inputs)
close() {
    "$PY" -c '
import sys, numpy as np
a, b, m = np.load("a.npy"), np.load("b.npy"), np.load("m.npy")
got, want = np.load(sys.argv[1]), eval(sys.argv[2])
rtol = float(sys.argv[3])
assert got.shape == want.shape, (got.shape, want.shape)
assert got.dtype == want.dtype, (got.dtype, want.dtype)
err = np.abs(got.astype("f8") - want.astype("f8")).max() if got.size else 0
scale = max(np.abs(want.astype("f8")).max() if want.size else 0, 1e-30)
assert err <= rtol * scale, (err, scale)
' "$1" "$2" "${3:-1e-6}"
}

# json_field STAGE FIELD: FIELD of the stage event STAGE in stats.jsonl
json_field() {
    "$PY" -c '
import sys, json
for line in open("stats.jsonl"):
    o = json.loads(line)
    if o["event"] == "stage" and o["stage"] == sys.argv[1] or o["event"] == sys.argv[1]:
        print(json.dumps(o[sys.argv[2]]) if not isinstance(o[sys.argv[2]], (int, str)) else o[sys.argv[2]])
' "$1" "$2"
}

# long_pipeline: p.yaml, one stage 'long' of 49 statements that take
# several seconds (2048x2048 products, one after the other; 13 of them
# took 1.5 s on one thread of a fast CPU, less than the tests wait before
# they interrupt it)
long_pipeline() {
    pipeline "stages:
  - name: long
    do:
      - x = randn([2048, 2048], seed=1)
      - y = x @ x
$(for _ in $(seq 47); do echo '      - y = y @ x'; done)
outputs: {y: y.npy, x: x.npy}"
}

no_temporaries() {
    local left
    left=$(find . -name '.*.tmp-*' -o -name '*.tmp-*' | head -5)
    [ -z "$left" ] || { echo "temporary files left: $left"; return 1; }
}

@test "a pipeline runs and its outputs match NumPy" {
    pipeline 'inputs: {a: a.npy, b: b.npy}
stages:
  - name: compute
    do:
      - c = a * 2.0 + 1
      - d = exp(-abs(c)) / (1 + sqrt(abs(a)))
      - e = c @ b
      - s = softmax(e, dim=-1)
  - name: reduce
    do:
      - t = sum(s, dim=0)
      - u = mean(d) - max(d) + min(d, dim=1)
      - v = relu(a[1:10:2, ::-3]) - tanh(a.T[0]) [0] * sigmoid(a[0, 0])
outputs:
  c: c.npy
  d: d.npy
  e: e.npy
  s: s.npy
  t: t.npy
  u: u.npy
  v: v.npy'
    run_tensorrun 0 p.yaml -q
    [ -z "$stderr" ]
    close c.npy 'a * np.float32(2) + 1'
    close d.npy 'np.exp(-abs(a*2+1)) / (1 + np.sqrt(abs(a)))'
    close e.npy '(a*2+1) @ b' 1e-5
    close s.npy 'np.exp((a*2+1)@b - ((a*2+1)@b).max(-1, keepdims=True)) / np.exp((a*2+1)@b - ((a*2+1)@b).max(-1, keepdims=True)).sum(-1, keepdims=True)' 1e-5
    close t.npy '(lambda e: (np.exp(e - e.max(-1, keepdims=True)) / np.exp(e - e.max(-1, keepdims=True)).sum(-1, keepdims=True)).sum(0))((a*2+1)@b)' 1e-5
    close u.npy '(lambda d: d.mean() - d.max() + d.min(1))(np.exp(-abs(a*2+1)) / (1 + np.sqrt(abs(a))))' 1e-5
    close v.npy 'np.maximum(a[1:10:2, ::-3], 0) - np.tanh(a.T[0][0]) * (1/(1+np.exp(-a[0,0])))' 1e-6
}

@test "tensorrun PIPELINE.yaml is tensorrun run PIPELINE.yaml" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a + 1]}
outputs: {y: y.npy}'
    run_tensorrun 0 p.yaml --stats none
    close y.npy 'a + np.float32(1)'
    rm y.npy
    run_tensorrun 0 run p.yaml --stats none
    close y.npy 'a + np.float32(1)'
}

@test "the text statistics: a header, one line per stage, a total" {
    pipeline 'inputs: {m: m.npy}
stages:
  - name: scale
    do: [y = m * 2]
  - name: shift
    do: [z = y + 1]
outputs: {z: z.npy}'
    run_tensorrun 0 p.yaml
    [ "$(echo "$stderr" | wc -l)" -eq 4 ]
    [[ "$(echo "$stderr" | sed -n 1p)" == "stage "*"device"*"time"*"peak active"*"active"*"cached"*"released"*"allocs"*"hits" ]]
    [[ "$(echo "$stderr" | sed -n 2p)" == "scale "*"cpu "*"4.0 MiB"* ]]
    [[ "$(echo "$stderr" | sed -n 3p)" == "shift "*"cpu "* ]]
    [[ "$(echo "$stderr" | sed -n 4p)" == "total "*"mapped 4.0 MiB, read 4.0 MiB, written 4.0 MiB" ]]
}

@test "a stage that keeps one 1024x1024 f32 value reports exactly 4194304 active bytes" {
    pipeline 'inputs: {m: m.npy}
stages:
  - name: make
    do:
      - a = cumsum(m, 0)
      - b = cumsum(m, 1)
      - y = a + b
  - name: use
    do: [z = sum(y)]
outputs: {z: z.npy}'
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    [ -z "$stderr" ]
    [ "$(json_field make active_bytes)" -eq 4194304 ]
    [ "$(json_field make kept)" = '["y"]' ]
    # two 4 MiB results (cumsum fuses with nothing); y is computed over a,
    # which dies there, and b is released after it: the peak is both
    [ "$(json_field make peak_active_bytes)" -eq 8388608 ]
    [ "$(json_field make alloc_count)" -eq 2 ]
    # the temporary went back to the cache, and the cache to the OS
    [ "$(json_field make cached_bytes)" -eq 4194304 ]
    [ "$(json_field make released_bytes)" -eq 4194304 ]
    # the mapped input is not pool memory
    [ "$(json_field run mapped_bytes)" -eq 4194304 ]
    [ "$(json_field use active_bytes)" -eq 0 ]
    [ "$(json_field run peak_active_bytes)" = '{"cpu": 8388608}' ]
}

@test "an output nothing else reads is computed straight into its file: no pool memory" {
    pipeline 'inputs: {m: m.npy}
stages:
  - name: direct
    do:
      - y = softmax(m * 2, dim=-1)
      - p = m @ m
  - name: later
    do: [s = sum(q)]
outputs: {y: y.npy, p: p.bin, q: q.npy, s: s.npy}'
    # q is read by a later stage: it stays pool memory
    sed -i 's/- p = m @ m/- p = m @ m\n      - q = m + 1/' p.yaml
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    close y.npy 'np.exp(2 * m - (2 * m).max(-1, keepdims=True)) / np.exp(2 * m - (2 * m).max(-1, keepdims=True)).sum(-1, keepdims=True)'
    "$PY" -c '
import numpy as np
m = np.load("m.npy"); p = np.fromfile("p.bin", dtype="<f4").reshape(1024, 1024)
assert np.allclose(p, m.astype("f8") @ m, rtol=1e-4, atol=1e-3)
assert (np.load("q.npy") == m + 1).all()'
    # m * 2 and the softmax are one fused pass into y.npy, the product
    # went into p.bin; the pool's two blocks are the softmax's per-thread
    # buffers (one block, given back when it returns) and q, kept for the
    # later stage
    [ "$(json_field direct alloc_count)" -eq 2 ]
    [ "$(json_field direct active_bytes)" -eq 4194304 ]
    [ "$(json_field direct kept)" = '["q"]' ]
}

@test "the last op of a statement computes into the output's file, not its temporaries" {
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    pipeline 'inputs: {m: m.npy}
stages:
  - name: s
    do:
      - y = exp(m * 0.5) * 2 + 1
outputs: {y: y.npy}'
    # any write(2) to the output fails: the file is filled by the add
    # alone, in place, and nothing is copied to it afterwards
    run --separate-stderr env TR_FAIL_WRITE=0 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" p.yaml --stats json
    [ "$status" -eq 0 ]
    close y.npy 'np.exp(m * np.float32(0.5)) * np.float32(2) + np.float32(1)' 1e-6
    # the four ops are one fused pass straight into the file: no
    # temporary at all (unfused: one 4 MiB buffer written over by each op)
    echo "$stderr" | grep '"event":"stage"' > stats.jsonl
    [ "$(json_field s peak_active_bytes)" -eq 0 ]
    [ "$(json_field s alloc_count)" -eq 0 ]
    run --separate-stderr env TENSORRUN_NO_FUSE=1 TR_FAIL_WRITE=0 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" p.yaml --stats json
    [ "$status" -eq 0 ]
    echo "$stderr" | grep '"event":"stage"' > stats.jsonl
    [ "$(json_field s peak_active_bytes)" -eq 4194304 ]
    [ "$(json_field s alloc_count)" -eq 1 ]
}

@test "an output that cannot be reserved on disk is written as usual" {
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    pipeline 'inputs: {m: m.npy}
stages:
  - name: s
    do:
      - y = softmax(m, dim=0)
outputs: {y: y.npy}'
    # the one case validate's peak cannot know (tensorrun(1), MEMORY): the
    # file system refuses the blocks, so y is made in the pool instead
    run --separate-stderr env -u TENSORRUN_CHECK_MEMORY TR_FAIL_FALLOCATE=1 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" p.yaml --stats json --stats-file stats.jsonl --threads 2
    [ "$status" -eq 0 ]
    close y.npy 'np.exp(m - m.max(0)) / np.exp(m - m.max(0)).sum(0)'
    # y in the pool (4 MiB), and the softmax's tile buffers for its two
    # threads in one block: 2 x 348224 bytes, 696832 once rounded
    [ "$(json_field s peak_active_bytes)" -eq 4891136 ]
    echo precious > y.npy
    run --separate-stderr env TR_FAIL_FALLOCATE=1 TR_FAIL_WRITE=1000 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TENSORRUN" p.yaml
    [ "$status" -eq 4 ]
    [ "$(cat y.npy)" = precious ]
    no_temporaries
}

@test "an output streamed into its file that fills up: exit 4, the destination as it was" {
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    pipeline 'inputs: {m: m.npy}
stages:
  - name: s
    do:
      - y = softmax(m, dim=-1)
outputs: {y: y.npy}'
    echo precious > y.npy
    # the header goes, then the rows fail after about 256 KiB of 4 MiB
    run --separate-stderr env TR_FAIL_PWRITE=300000 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TENSORRUN" p.yaml
    [ "$status" -eq 4 ]
    [[ "$stderr" == *"softmax: cannot write the result to its file: No space left on device"* ]]
    [ "$(cat y.npy)" = precious ]
    no_temporaries
}

@test "a product handed to its file a band at a time: NumPy's values; a full disk is exit 4" {
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    pipeline 'inputs: {m: m.npy, a: a.npy}
stages:
  - name: s
    do:
      - y = matmul(m, m[:, :200])
      - d = cdist(m[:, :512], m[:300, 512:])
outputs: {y: y.npy, d: d.npy}'
    # no blocks reserved: a file system that refuses them changes nothing
    run --separate-stderr env TR_FAIL_FALLOCATE=1 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" p.yaml --stats json --stats-file stats.jsonl --threads 2
    [ "$status" -eq 0 ]
    close y.npy 'm @ m[:, :200]' 1e-5
    # d against float64's norm expansion, exact enough where no two rows
    # are near each other
    close d.npy '(lambda x, z: np.sqrt((x ** 2).sum(1)[:, None] + (z ** 2).sum(1) - 2 * (x @ z.T)))(m[:, :512].astype("f8"), m[:300, 512:].astype("f8")).astype("f4")' 1e-5
    # neither result is in the pool (each would be where no blocks can be
    # reserved), nothing is copied for BLAS: only the squared norms of
    # cdist's 1324 rows, 5296 bytes, a block of 5632
    [ "$(json_field s peak_active_bytes)" -eq 5632 ]
    echo precious > d.npy
    # y (800 KiB) goes, then d's bands fail after about 380 KB
    run --separate-stderr env TR_FAIL_PWRITE=1200000 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TENSORRUN" p.yaml
    [ "$status" -eq 4 ]
    [[ "$stderr" == *"cdist: cannot write the result to its file: No space left on device"* ]]
    [ "$(cat d.npy)" = precious ]
    no_temporaries
}

@test "--keep-cache and keep_cache: nothing is released between stages" {
    pipeline 'inputs: {m: m.npy}
stages:
  - name: make
    do:
      - a = cumsum(m, 0)
      - b = cumsum(m, 1)
      - y = a + b
  - name: use
    do: [z = sum(y)]
outputs: {z: z.npy}'
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl --keep-cache
    [ "$(json_field make released_bytes)" -eq 0 ]
    [ "$(json_field use released_bytes)" -eq 0 ]
    # b's 4 MiB, released after y, stays in the cache
    [ "$(json_field make cached_bytes)" -eq 4194304 ]
    sed -i 's/  - name: make/  - name: make\n    keep_cache: true/' p.yaml
    run_tensorrun 0 p.yaml --stats json --stats-file stats.jsonl
    [ "$(json_field make released_bytes)" -eq 0 ]
    [ "$(json_field use released_bytes)" -gt 0 ]
}

@test "JSON statistics have every field tensorrun(1), STATISTICS lists" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: one, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 0 p.yaml --stats json
    echo "$stderr" | "$PY" -c '
import sys, json
lines = [json.loads(l) for l in sys.stdin]
assert [l["event"] for l in lines] == ["stage", "run"], lines
s, r = lines
for k in ["stage", "index", "device", "wall_ms", "peak_active_bytes", "active_bytes",
          "cached_bytes", "released_bytes", "alloc_count", "cache_hit_count", "kept"]:
    assert k in s, k
for k in ["wall_ms", "peak_active_bytes", "mapped_bytes", "read_bytes", "written_bytes", "outputs"]:
    assert k in r, k
assert s["stage"] == "one" and s["index"] == 0 and s["device"] == "cpu"
assert r["outputs"] == {"y": "y.npy"}, r["outputs"]
assert r["read_bytes"] == 64 * 32 * 4 and r["mapped_bytes"] == 64 * 32 * 4
assert r["written_bytes"] == __import__("os").path.getsize("y.npy")
'
}

@test "-q prints nothing; --stats-file takes the statistics" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: one, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 0 p.yaml -q
    [ -z "$stderr" ] && [ -z "$output" ]
    run_tensorrun 0 p.yaml --stats-file stats.txt
    [ -z "$stderr" ]
    grep -q '^total ' stats.txt
    run_tensorrun 0 p.yaml -q --stats json
    [[ "$stderr" == *'"event":"run"'* ]]
}

@test "outputs: several in one safetensors file, dtype conversion, zstd, raw" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = a + 1
      - y = a * 2
      - w = cast(y, i32)
outputs:
  x: {path: both.safetensors, key: plus}
  y: {path: both.safetensors, dtype: f16}
  a: {path: a16.npy.zst, dtype: f16}
  w: w.bin'
    run_tensorrun 0 p.yaml -q
    run "$TENSORRUN" inspect --json both.safetensors
    [[ "$output" == *'"name":"plus","dtype":"f32"'* ]]
    [[ "$output" == *'"name":"y","dtype":"f16"'* ]]
    "$TENSORRUN" convert a16.npy.zst a16.npy
    close a16.npy 'a.astype("f2")'
    "$PY" -c '
import numpy as np
a = np.load("a.npy")
w = np.fromfile("w.bin", dtype="<i4").reshape(64, 32)
assert (w == (a * 2).astype("i4")).all()'
}

@test "an output to - is .npy on standard output" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a - 1]}
outputs:
  y: "-"'
    run bash -c '"$0" p.yaml -q > out.npy' "$TENSORRUN"
    [ "$status" -eq 0 ]
    close out.npy 'a - np.float32(1)'
}

@test "an input from standard input: a pipe and a regular file" {
    pipeline 'inputs:
  a: "-"
stages:
  - {name: s, do: [y = a * a]}
outputs: {y: y.npy}'
    run bash -c 'cat a.npy | "$0" p.yaml -q' "$TENSORRUN"
    [ "$status" -eq 0 ]
    close y.npy 'a * a'
    rm y.npy
    run bash -c '"$0" p.yaml -q < a.npy' "$TENSORRUN"
    [ "$status" -eq 0 ]
    close y.npy 'a * a'
}

@test "-D, -i and -o override the pipeline" {
    pipeline 'params: {k: 2}
inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * k]}
outputs: {y: y.npy}'
    run_tensorrun 0 p.yaml -q -D k=5 -i a=b.npy -o y=other.npy
    [ ! -e y.npy ]
    close other.npy 'b * np.float32(5)'
    run_tensorrun 2 p.yaml -D nope=1
    [[ "$stderr" == *"nope"* ]]
}

@test "an output may replace one of the run's own mapped inputs" {
    cp a.npy own.npy
    pipeline 'inputs: {x: own.npy}
stages:
  - {name: s, do: [y = x + 100]}
outputs: {y: own.npy}'
    run_tensorrun 0 p.yaml -q
    close own.npy 'a + np.float32(100)'
    no_temporaries
}

@test "results are bitwise the same for every --threads" {
    pipeline 'inputs: {m: m.npy}
stages:
  - name: s
    do:
      - p = m @ m.T
      - s = softmax(m * 0.5, dim=-1)
      - t = sum(m, dim=0)
      - u = sum(m)
      - n = l2_normalize(m, dim=-1)
outputs: {p: p1.npy, s: s1.npy, t: t1.npy, u: u1.npy, n: n1.npy}'
    run_tensorrun 0 p.yaml -q --threads 1
    for f in p s t u n; do mv "${f}1.npy" "${f}_1.npy"; done
    run_tensorrun 0 p.yaml -q --threads 2
    for f in p s t u n; do cmp "${f}_1.npy" "${f}1.npy"; done
    close p1.npy 'm @ m.T' 1e-5
    close u1.npy 'np.float32(m.astype("f8").sum())' 1e-6
}

@test "--dry-run prints the plan and writes nothing" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 0 p.yaml --dry-run
    [[ "$output" == *'stage 1 "s" on cpu'* ]]
    [ ! -e y.npy ]
    [ -z "$stderr" ]
}

@test "--device cuda: an op without a CUDA kernel is exit 3, a GPU that is not usable exit 1; auto runs on the CPU" {
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: ["y = cumsum(a, 0)"]}
outputs: {y: y.npy}'
    run_tensorrun 0 p.yaml --device auto -q
    rm y.npy
    run_tensorrun 3 p.yaml --device cuda
    [[ "$stderr" == *"stage 's' is to run on cuda:0, which has no kernel for cumsum"* ]]
    [ ! -e y.npy ]
    # to() needs only the module's copies
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: ["y = to(a, \"cuda\")"]}
outputs: {y: y.npy}'
    if [[ "$("$TENSORRUN" --version)" == *"CUDA: not available"* ]]; then
        run_tensorrun 1 p.yaml --device cuda
        [[ "$stderr" == *"stage 's' is to run on cuda:0, which is not available here"* ]]
        [ ! -e y.npy ]
    else
        run_tensorrun 0 p.yaml --device cuda -q
        assert_tensors_equal y.npy a.npy
    fi
    run_tensorrun 2 p.yaml --device tpu
    [[ "$stderr" == *"--device"* ]]
}

# ------------------------------------------------------------ failures

@test "a missing input file is exit 4" {
    pipeline 'inputs: {a: nothere.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 4 p.yaml
    [[ "$stderr" == *"nothere.npy"* ]]
    [ ! -e y.npy ]
}

@test "a malformed input file is exit 4" {
    printf '\x93NUMPY\x01\x00\x10\x00{"descr": nonsense' > bad.npy
    pipeline 'inputs: {a: bad.npy}
stages:
  - {name: s, do: [y = a * 2]}
outputs: {y: y.npy}'
    run_tensorrun 4 p.yaml
    [[ "$stderr" == *"bad.npy"* ]]
    [ ! -e y.npy ]
}

@test "--memory-limit too small for a stage: exit 5 naming the stage; outputs untouched" {
    echo "old" > y.npy
    pipeline 'inputs: {m: m.npy}
stages:
  - name: first
    do: [x = m + 1]
  - name: big
    do:
      - y = x * 2
      - z = y * 3 + x
outputs: {x: x.npy, y: y.npy, z: z.npy}'
    run_tensorrun 5 p.yaml --memory-limit 6M
    [[ "$stderr" == *"stage 'big'"* ]]
    [[ "$stderr" == *"limit"* ]]
    [ "$(cat y.npy)" = old ]
    [ ! -e x.npy ] && [ ! -e z.npy ]
    no_temporaries
    run_tensorrun 0 p.yaml --memory-limit 16MiB -q
    close z.npy '(m + 1) * 2 * 3 + (m + 1)' 1e-6
    # units in either case; anything else is a usage error
    run_tensorrun 0 p.yaml --memory-limit 16m -q
    run_tensorrun 5 p.yaml --memory-limit 6mb -q
    run_tensorrun 2 p.yaml --memory-limit lots
    run_tensorrun 2 p.yaml --memory-limit 0
}

@test "an output directory that does not exist is exit 4 before anything is computed" {
    pipeline 'inputs: {m: m.npy}
stages:
  - {name: s, do: [y = m @ m]}
outputs: {y: no/such/dir/y.npy}'
    run_tensorrun 4 p.yaml
    [[ "$stderr" == *"no/such/dir"* ]]
    [[ "$stderr" != *"total"* ]]
}

@test "an output directory that is not writable is exit 4" {
    mkdir ro && chmod 555 ro
    pipeline 'inputs: {a: a.npy}
stages:
  - {name: s, do: [y = a]}
outputs: {y: ro/y.npy}'
    if [ "$(id -u)" -ne 0 ]; then
        run_tensorrun 4 p.yaml
    else
        # root writes anywhere: the shim refuses the file instead
        [ -f "$INJECT" ] || skip "root writes anywhere, and the fault-injection shim is not built"
        run --separate-stderr env TR_FAIL_CREATE=1 LD_PRELOAD="$INJECT" \
            ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TENSORRUN" p.yaml
        [ "$status" -eq 4 ]
    fi
    [[ "$stderr" == *"cannot create a file in ro: Permission denied"* ]]
    [ ! -e ro/y.npy ]
}

@test "an out-of-range index at run time is exit 1, and nothing is written" {
    "$PY" -c 'import numpy as np; np.save("i.npy", np.array([0, 5, 64], dtype="<i8"))'
    echo "old" > y.npy
    pipeline 'inputs: {a: a.npy, i: i.npy}
stages:
  - name: s
    do:
      - y = index_select(a, 0, i)
outputs: {y: y.npy}'
    run_tensorrun 1 p.yaml
    [[ "$stderr" == *"stage 's'"*"64"* ]]
    [[ "$stderr" == *"p.yaml:6:"* ]]
    [ "$(cat y.npy)" = old ]
    no_temporaries
}

@test "SIGINT during a long stage: exit 130, one line, nothing replaced, no temporary file" {
    echo "old" > y.npy
    long_pipeline
    "$TENSORRUN" p.yaml -q --threads 1 2> err & pid=$!
    sleep 1
    kill -INT $pid
    status=0
    wait $pid || status=$?
    [ "$status" -eq 130 ]
    [ "$(cat err)" = "tensorrun: error: interrupted; no output file was replaced" ]
    [ "$(cat y.npy)" = old ]
    [ ! -e x.npy ]
    no_temporaries
}

@test "SIGINT while the outputs are renamed into place: all of them are, whichever thread takes it" {
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    echo old > y.npy
    echo old > z.npy
    pipeline 'inputs: {m: m.npy}
stages:
  - name: s
    do:
      - y = softmax(m, dim=-1)
      - z = m * 2
outputs: {y: y.npy, z: z.npy}'
    # the signal comes at the second rename, when the main thread holds
    # interrupts and only the idle worker threads can take it
    run --separate-stderr env TR_INTERRUPT_RENAME=2 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" p.yaml -q --threads 2
    [ "$status" -eq 0 ]
    close z.npy 'm * 2'
    "$PY" -c 'import numpy as np; assert np.load("y.npy").shape == (1024, 1024)'
    no_temporaries
}

@test "--progress: a line names the stage and its statement; not on a terminal, a plain line now and then" {
    long_pipeline
    # stderr is not a terminal: a plain line every TENSORRUN_PROGRESS_INTERVAL
    # seconds (10 unless set), never redrawn
    TENSORRUN_PROGRESS_INTERVAL=0.5 "$TENSORRUN" p.yaml --progress --stats none --threads 1 \
        2> forced & forced=$!
    "$TENSORRUN" p.yaml --stats none --threads 1 2> auto & auto=$!
    sleep 1.6
    kill -INT $forced $auto
    wait $forced || true
    wait $auto || true
    [ "$(grep -ac '^long: statement [0-9]* of 49, [0-9.]* s$' forced)" -ge 2 ]
    run ! grep -aq $'\r' forced
    # no progress line unless asked for
    run ! grep -aq 'statement' auto
    # on a terminal, the line is redrawn once the stage has run a second
    command -v script > /dev/null || skip "script(1) is not installed"
    script -qfc "timeout -s INT 1.6 $TENSORRUN p.yaml --stats none --threads 1" /dev/null \
        > tty || true
    grep -aq $'\r\033\[Klong: statement [0-9]* of 49, 1\.[0-9] s' tty
}

@test "SIGTERM has the same effect as SIGINT" {
    long_pipeline
    "$TENSORRUN" p.yaml -q --threads 1 2> err & pid=$!
    sleep 1
    kill -TERM $pid
    status=0
    wait $pid || status=$?
    [ "$status" -eq 130 ]
    [ "$(cat err)" = "tensorrun: error: interrupted; no output file was replaced" ]
    [ ! -e x.npy ] && [ ! -e y.npy ]
    no_temporaries
}

@test "-o NAME=PATH replaces the destination: the pipeline's format and key no longer apply" {
    "$PY" -c 'import numpy as np; np.save("x.npy", np.arange(16, dtype="<f4").reshape(2, 8))'
    printf 'tensorrun: 1\ninputs: {x: x.npy}\nstages:\n  - name: s\n    do: [y = x * 2]\noutputs:\n  y: {path: out.safetensors, key: weight.q, format: safetensors, dtype: f16}\n' > o.yaml
    run_tensorrun 0 run o.yaml -o y=qw.npy -q
    "$PY" -c 'import numpy as np; y = np.load("qw.npy"); assert y.dtype == np.float16 and y[1, 7] == 30'
    run_tensorrun 0 run o.yaml -o y=b.safetensors -q
    run_tensorrun 0 inspect b.safetensors
    [[ "$output" == *"weight.q"*"f16"* ]]
    [ ! -e out.safetensors ]
}
