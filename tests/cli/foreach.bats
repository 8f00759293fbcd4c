#!/usr/bin/env bats
# foreach stages (tensorrun-pipeline(5), FOREACH): the body runs once per
# block of rows, in a scope of its own; what does not depend on the block
# runs once; kept values are joined along dimension 0 in block order,
# straight into their place; the last block may be shorter, and its own
# length is what x.shape[0] says there.  Results against NumPy, the same
# bits for every block size and thread count, the pool's figures against
# validate's, and a pipeline over an input four times the memory limit.

bats_require_minimum_version 1.5.0

PY=/usr/bin/python3

setup() {
    load helper
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
rng = np.random.default_rng(11)
np.save("e.npy", rng.standard_normal((1000, 48)).astype(np.float32))
np.save("q.npy", rng.standard_normal((6, 48)).astype(np.float32))
np.save("w.npy", rng.standard_normal((48, 32)).astype(np.float32))'
}

# stage_json FIELD: the first stage event of --stats json in $output,
# field FIELD (a foreach stage's blocks, its peak, ...)
stage_json() {
    printf '%s\n' "$stderr" "$output" | "$PY" -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{") and json.loads(line)["event"] == "stage":
        print(json.loads(line).get(sys.argv[1], "absent")); break
' "$1"
}

search_pipeline() {
    cat > search.yaml <<EOF
tensorrun: 1
params: {k: 5}
inputs: {emb: ${1:-e.npy}, q: q.npy}
stages:
  - name: normalise
    do:
      - qn = q / norm(q, dim=-1, keepdim=true)
  - name: search
    foreach: {over: emb, size: ${2:-128}}
    do:
      - en = emb / norm(emb, dim=-1, keepdim=true)
      - v, i = topk(en @ qn.T, k, dim=0)
      - i = i + chunk_start
    keep: [v, i]
  - name: merge
    do:
      - best, j = topk(v, k, dim=0)
      - ids = gather(i, 0, j)
outputs: {best: best.npy, ids: ids.npy}
EOF
}

# search_is_numpys: best.npy and ids.npy are NumPy's top 5 of e.npy's
# normalised rows against q.npy's; a swap only between candidates whose f64
# scores differ by less than 1e-6
search_is_numpys() {
    "$PY" -c '
import numpy as np
e, q = np.load("e.npy").astype(np.float64), np.load("q.npy").astype(np.float64)
s = (e / np.linalg.norm(e, axis=1, keepdims=True)) @ (q / np.linalg.norm(q, axis=1, keepdims=True)).T
want = np.argsort(-s, axis=0, kind="stable")[:5]
ids, best = np.load("ids.npy"), np.load("best.npy")
assert ids.shape == (5, 6) and ids.dtype == np.int64 and best.dtype == np.float32, (ids.shape, ids.dtype)
for c in range(6):
    for r in range(5):
        if ids[r, c] != want[r, c]:
            assert abs(s[ids[r, c], c] - s[want[r, c], c]) < 1e-6, (r, c, ids[:, c], want[:, c])
assert np.allclose(best, np.take_along_axis(s, ids, 0), atol=1e-6)
'
}

@test "the embedding search: per-block top-k, then a merge stage, gives NumPy's top-k" {
    search_pipeline e.npy 128
    run_tensorrun 0 search.yaml
    [[ "$stderr" == *"search"*"8 blocks"* ]]
    search_is_numpys
    # one block, and blocks of one row
    search_pipeline e.npy 1000
    run_tensorrun 0 search.yaml -q
    search_is_numpys
    search_pipeline e.npy 5
    run_tensorrun 0 search.yaml -q
    search_is_numpys
}

@test "a block size that leaves a shorter last block, and a k past it, exit 3 naming the block" {
    search_pipeline e.npy 999
    run_tensorrun 3 validate search.yaml
    [[ "$stderr" == *"last block of foreach, 1 row of 'emb'"*"topk"* ]]
    run_tensorrun 3 search.yaml
    [ ! -e ids.npy ]
    # every statement the last block cannot run is reported, each at its line
    body last.yaml 300 'y = reshape(e, [150, 96])' 'r = reshape(e[:, 0], [3, 100])' 'n = e'
    run_tensorrun 3 validate last.yaml
    [[ "$stderr" == *"last.yaml:7:"*"in the last block of foreach, 100 rows of 'e': reshape"* ]]
    [[ "$stderr" == *"last.yaml:8:"*"in the last block of foreach, 100 rows of 'e': reshape"* ]]
    search_pipeline e.npy 995
    run_tensorrun 0 search.yaml -q
    search_is_numpys
}

# body FILE SIZE STATEMENT...: a foreach stage over e by SIZE rows whose
# statements' targets y, r and n go to y.npy, r.npy and n.npy
body() {
    local file=$1 size=$2 s
    shift 2
    {
        printf '%s\n' 'tensorrun: 1' 'inputs: {e: e.npy, w: w.npy}' 'stages:' '  - name: s' \
            "    foreach: {over: e, size: $size}" '    do:'
        for s in "$@"; do printf '      - %s\n' "$s"; done
        printf '%s\n' 'outputs: {y: y.npy, r: r.npy, n: n.npy}'
    } > "$file"
}

@test "rows that depend only on the same input rows: the same bits for every block size and thread count" {
    local first=""
    for size in 1000 300 64 7 1; do
        body p.yaml "$size" 'y = exp(e * 0.5) * 2 + 1' 'r = sum(e * e, dim=1)' \
            'n = e / norm(e, dim=-1, keepdim=true)'
        for t in 1 2; do
            run_tensorrun 0 p.yaml --threads "$t" -q
            cat y.npy r.npy n.npy > "all-$size-$t"
            [ -z "$first" ] && first="all-$size-$t"
            cmp "$first" "all-$size-$t"
        done
    done
    "$PY" -c '
import numpy as np
e = np.load("e.npy")
assert np.allclose(np.load("y.npy"), np.exp(e * np.float32(0.5)) * 2 + 1, rtol=1e-6)
assert np.allclose(np.load("r.npy"), (e.astype(np.float64) ** 2).sum(1), rtol=1e-5)
assert np.allclose(np.load("n.npy"), e / np.linalg.norm(e, axis=1, keepdims=True), atol=1e-6)'
    # a matrix product over the rows: block sizes that are multiples of its
    # 256-row tile, and one block
    first=""
    for size in 1000 768 512 256; do
        body p.yaml "$size" 'y = e @ w' 'r = sum(e, dim=1)' 'n = e'
        for t in 1 2; do
            run_tensorrun 0 p.yaml --threads "$t" -q
            [ -z "$first" ] && cp y.npy mm-first.npy && first=1
            assert_tensors_equal mm-first.npy y.npy
        done
    done
    "$PY" -c '
import numpy as np
e = np.load("e.npy")
w = np.load("w.npy")
assert np.allclose(np.load("mm-first.npy"), e @ w, rtol=1e-5, atol=1e-4)'
}

@test "chunk_start, chunk_index and chunk_count, and x.shape[0], which is each block's own length" {
    body p.yaml 300 'y = full([e.shape[0], 3], chunk_index) * 1000 + chunk_count * 100 + e.shape[0] * 0' \
        'r = arange(e.shape[0]) + chunk_start' 'n = e / e.shape[0]'
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"(the last block: %"*"f32[100,48])"* ]]
    [[ "$output" == *"div(%"*", 300)"*"(the last block: div(%"*", 100)"* ]]
    run_tensorrun 0 p.yaml -q
    NPY_INPUTS=e npy_is r.npy 'np.arange(1000, dtype=np.int64)'
    NPY_INPUTS=e npy_is y.npy 'np.repeat(np.arange(4, dtype=np.int64) * 1000 + 400, [300, 300, 300, 100])[:, None].repeat(3, 1)'
    NPY_INPUTS=e npy_is n.npy 'np.concatenate([e[:900] / np.float32(300), e[900:] / np.float32(100)])'
    # they are known only as each block runs: not slice bounds
    body p.yaml 300 'y = w[chunk_index:chunk_index + 1]' 'r = e' 'n = e'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"slice bounds must be constants, not values computed as the stage runs"* ]]
}

@test "a value only an output reads is joined in its file, each block at its rows; a kept one in the pool" {
    body p.yaml 100 'y = e * 2 + 1' 'r = sum(e, dim=1)' 'n = e'
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"joins %"*" y f32[1000,48] into y.npy, each block at its rows"* ]]
    [[ "$output" == *"joins %"*" e f32[1000,48] as the value the blocks are cut from"* ]]
    run_tensorrun 0 p.yaml --stats json
    # the pool holds r's 4000 bytes (4096) and one block's scratch, never
    # y's 192000 bytes
    [ "$(stage_json peak_active_bytes)" -lt 100000 ]
    NPY_INPUTS=e npy_is y.npy 'e * np.float32(2) + np.float32(1)'
    NPY_INPUTS=e npy_is n.npy 'e'
    cat > k.yaml <<'EOF'
tensorrun: 1
inputs: {e: e.npy}
stages:
  - name: s
    foreach: {over: e, size: 64}
    do:
      - y = e * 2 + 1
      - s = e[:, 0:4]
    keep: [y, s]
  - name: after
    do:
      - t = sum(y, dim=0) + sum(s, dim=0)[0]
outputs: {t: t.npy, y: y.npy}
EOF
    run_tensorrun 0 validate k.yaml
    [[ "$output" == *"joins %"*" y f32[1000,48] in the pool, made before the first block"* ]]
    run_tensorrun 0 k.yaml -q
    NPY_INPUTS=e npy_is y.npy 'e * np.float32(2) + np.float32(1)'
    "$PY" -c '
import numpy as np
e = np.load("e.npy"); y = e * np.float32(2) + np.float32(1)
assert np.allclose(np.load("t.npy"), y.sum(0, dtype=np.float64) + e[:, 0].sum(dtype=np.float64), rtol=1e-5)'
}

@test "a foreach stage peaks where validate says, per block, with its joins, for 1 and 2 threads" {
    search_pipeline e.npy 128
    peaks_match search.yaml
    peaks_match search.yaml --threads 1
    body p.yaml 100 'y = exp(e * 0.5) * 2 + 1' 'r = sum(e * e, dim=1)' \
        'n = e / norm(e, dim=-1, keepdim=true)'
    peaks_match p.yaml
    body p.yaml 333 'y = e @ w' 'r = softmax(y, dim=-1)[:, 0]' 'n = cast(e, f64) / e.shape[0]'
    peaks_match p.yaml
    peaks_match p.yaml --threads 1
}

@test "pool blocks are reused from block to block: every block after the first hits the cache" {
    body p.yaml 100 'y = exp(e * 0.5) * 2 + 1' 'r = sum(e * e, dim=1)' \
        'n = e / norm(e, dim=-1, keepdim=true)'
    run_tensorrun 0 p.yaml --stats json --keep-cache
    [ "$(stage_json blocks)" = 10 ]
    allocs=$(stage_json alloc_count)
    hits=$(stage_json cache_hit_count)
    # blocks after the first take their blocks from the cache
    [ "$hits" -ge $(( (allocs - 3) * 9 / 10 )) ]
    run_tensorrun 0 p.yaml -v --stats none
    [ "$(grep -c "block [0-9]* of 10 (rows" <<< "$stderr")" = 10 ]
}

@test "a value of rank 0 made from each block, written or read by a later stage, is exit 3" {
    body p.yaml 100 'y = sum(e)' 'r = e' 'n = e'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"output 'y' is made from each foreach block and has no dimension"* ]]
    body p.yaml 100 'y = e.shape[0]' 'r = e' 'n = e'
    run_tensorrun 3 p.yaml
    [[ "$stderr" == *"output 'y'"* ]]
    cat > later.yaml <<'EOF'
tensorrun: 1
inputs: {e: e.npy}
stages:
  - name: s
    foreach: {over: e, size: 100}
    do: [m = max(e)]
  - name: t
    do: [y = e * m]
outputs: {y: y.npy}
EOF
    run_tensorrun 3 validate later.yaml
    [[ "$stderr" == *"'m' is made from each foreach block of stage 's' and has no dimension"* ]]
    # unsqueezed, it is joined: one maximum per block
    sed -i 's/m = max(e)/"m = unsqueeze(max(e), 0)"/; s/y = e \* m/y = max(m)/' later.yaml
    run_tensorrun 0 later.yaml -q
    NPY_INPUTS=e npy_is y.npy 'e.max()'
}

@test "larger than the memory limit: 4x the limit streams through foreach, not without it" {
    # 128 MiB of f32 through --memory-limit 32M; the normalised rows alone
    # would need 128 MiB of pool
    "$PY" -c '
import numpy as np
x = np.lib.format.open_memmap("big.npy", mode="w+", dtype=np.float32, shape=(32768, 1024))
rng = np.random.default_rng(3)
for i in range(0, 32768, 8192):
    x[i:i + 8192] = rng.standard_normal((8192, 1024), dtype=np.float32)
x.flush()'
    cat > chunked.yaml <<'EOF'
tensorrun: 1
inputs: {x: big.npy}
stages:
  - name: s
    foreach: {over: x, size: 2048}
    do:
      - n = x / norm(x, dim=-1, keepdim=true)
      - r = sum(n * n, dim=1) + max(n, dim=1)
outputs: {r: r.npy}
EOF
    sed '/foreach/d' chunked.yaml > whole.yaml
    run_tensorrun 0 validate chunked.yaml --memory-limit 32M
    run_tensorrun 5 validate whole.yaml --memory-limit 32M
    [[ "$stderr" == *"stage 's'"* ]]
    run_tensorrun 5 whole.yaml --memory-limit 32M
    [ ! -e r.npy ]
    run_tensorrun 0 chunked.yaml -q
    cp r.npy r-mapped.npy
    run_tensorrun 0 chunked.yaml --memory-limit 32M --stats json
    [ "$(stage_json peak_active_bytes)" -le $((32 << 20)) ]
    # measured: the process's anonymous memory (RssAnon, the mapping not
    # counted) stays under the limit, mapped, through a pipe and from .zst,
    # at most the pool's peak and 8 MiB (the program, its libraries' and
    # threads' own); the stream's blocks are read one at a time
    zstd -q -1 -T2 big.npy -o big.npy.zst
    run_tensorrun 0 validate chunked.yaml -i x=big.npy.zst --memory-limit 32M --json
    peak=$(printf '%s' "$output" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["peak_bytes"]["cpu"])')
    [ "$peak" -le $((20 << 20)) ]
    run_tensorrun 5 validate whole.yaml -i x=big.npy.zst --memory-limit 32M
    anon=$("$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" chunked.yaml --memory-limit 32M -q | cut -d' ' -f2)
    [ "$anon" -le $(( (32 << 10) )) ]
    for how in pipe zst zstpipe; do
        rm r.npy
        case $how in
        pipe) anon=$(cat big.npy | "$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" chunked.yaml -i x=- --memory-limit 32M -q) ;;
        zst) anon=$("$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" chunked.yaml -i x=big.npy.zst --memory-limit 32M -q) ;;
        zstpipe) anon=$(zstdcat big.npy.zst | "$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" chunked.yaml -i x=- --memory-limit 32M -q) ;;
        esac
        anon=${anon#* }
        [ "$anon" -le $(( (32 << 10) )) ]
        # (the sanitizer build's runtime has memory of its own)
        [ -n "${TR_SANITIZED:-}" ] || [ "$anon" -le $(( (peak >> 10) + (8 << 10) )) ]
        assert_tensors_equal r.npy r-mapped.npy
    done
    "$PY" -c '
import numpy as np
x = np.load("big.npy", mmap_mode="r")
want = np.empty(32768)
for i in range(0, 32768, 8192):
    b = x[i:i + 8192].astype(np.float64)
    n = b / np.linalg.norm(b, axis=1, keepdims=True)
    want[i:i + 8192] = (n * n).sum(1) + n.max(1)
assert np.allclose(np.load("r.npy"), want, rtol=1e-5, atol=1e-6)'
}

# resident FILE: the bytes of FILE in the page cache (fincore, by mincore(2))
resident() {
    fincore --bytes --noheadings --output RES "$1" | tr -d ' '
}

@test "a mapped input is read ahead a block at a time, and dropped behind past TENSORRUN_DROP_BEHIND" {
    [ "$(stat -f -c %T .)" != tmpfs ] || skip "the page cache of tmpfs cannot be dropped"
    "$PY" -c '
import os, numpy as np
np.save("m.npy", np.random.default_rng(4).standard_normal((4096, 1024)).astype(np.float32))
fd = os.open("m.npy", os.O_RDONLY); os.fsync(fd); os.close(fd)'
    cat > dr.yaml <<'EOF2'
tensorrun: 1
inputs: {x: m.npy}
stages:
  - name: s
    foreach: {over: x, size: 256}
    do: ["r = sum(x, dim=1)"]
outputs: {r: r.npy}
EOF2
    size=$(stat -c %s m.npy)
    # the default threshold is a quarter of RAM: 16 MiB stays cached
    cat m.npy > /dev/null
    # (the sanitizer build wants its runtime first; the shim needs none of it)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    TR_LOG_ADVICE=$PWD/kept.log LD_PRELOAD=$TR_INJECT run_tensorrun 0 dr.yaml -q
    # each next block asked for, in pieces of at most 128 KiB (one hint
    # reads no more than the disk's read-ahead window)
    awk '/^madvise WILLNEED/ { n++; sum += $3; if ($3 > 131072) big++ }
         END { exit !(n >= 15 * 8 && sum >= 15 * 1048576 && sum < 15 * 1048576 + 15 * 8192 && !big) }' kept.log
    run ! grep -q DONTNEED kept.log
    [ "$(resident m.npy)" -ge "$size" ]
    # past the threshold, each block read is dropped from the process and
    # then from the page cache: all but the page the header shares
    TENSORRUN_DROP_BEHIND=1M TR_LOG_ADVICE=$PWD/drop.log LD_PRELOAD=$TR_INJECT \
        run_tensorrun 0 dr.yaml -q
    [ "$(grep -c '^madvise DONTNEED' drop.log)" = 16 ]
    # evicted in whole 2 MiB folios: every other block, and the last
    [ "$(grep -c '^fadvise DONTNEED' drop.log)" = 8 ]
    [ "$(resident m.npy)" -le 4096 ]
    "$PY" -c '
import numpy as np
m = np.load("m.npy")
assert np.allclose(np.load("r.npy"), m.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-4)'
    TENSORRUN_DROP_BEHIND=lots run_tensorrun 2 dr.yaml
    [[ "$stderr" == *"TENSORRUN_DROP_BEHIND"* ]]
}

@test "size: in bytes is whole rows of the input a block, at least one" {
    # a row of e is 48 f32, 192 bytes: 19200 bytes are 100 rows, 100 bytes one
    search_pipeline e.npy 19200B
    run_tensorrun 0 validate search.yaml
    [[ "$output" == *"foreach emb by 100 rows (10 blocks)"* ]]
    run_tensorrun 0 search.yaml -q
    search_is_numpys
    search_pipeline e.npy 1K
    run_tensorrun 0 validate search.yaml
    [[ "$output" == *"foreach emb by 5 rows (200 blocks)"* ]]
    search_pipeline e.npy 100B
    run_tensorrun 3 validate search.yaml
    [[ "$stderr" == *"k = 5 is out of range for dimension 0 of size 1"* ]]
    search_pipeline e.npy 12Q
    run_tensorrun 3 validate search.yaml
    [[ "$stderr" == *"rows (an integer) or bytes a block (such as 64M)"* ]]
    search_pipeline e.npy 0K
    run_tensorrun 3 validate search.yaml
    [[ "$stderr" == *"'size' must be at least one byte"* ]]
}

# slow_writer FIFO: writes a [12288, 512] f32 .npy of ones into FIFO 256
# rows every 50 ms, so that a foreach stage over it takes about 2.5 s
# whatever the CPU's speed (the progress line waits a second to appear).
slow_writer() {
    rm -f "$1" && mkfifo "$1"
    "$PY" - "$1" <<'EOF2' &
import sys, time
import numpy as np
a = np.ones((12288, 512), np.float32)
with open(sys.argv[1], "wb") as f:
    np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(a))
    for i in range(0, len(a), 256):
        f.write(a[i:i + 256].tobytes())
        f.flush()
        time.sleep(0.05)
EOF2
}

@test "the progress of a foreach stage: blocks, bytes, rate and time left; a bar on a terminal" {
    cat > slow.yaml <<'EOF2'
tensorrun: 1
inputs: {x: m.npy}
stages:
  - name: slow
    foreach: {over: x, size: 256}
    do:
      - r = sum(x, dim=1)
outputs: {r: r.npy}
EOF2
    slow_writer m.npy
    TENSORRUN_PROGRESS_INTERVAL=0.2 run_tensorrun 0 slow.yaml --progress --stats none
    grep -q '^slow: block [0-9]* of 48, [0-9.]* [KM]iB of 24.0 MiB, [0-9.]* [KM]iB/s, .* left$' <<< "$stderr"
    command -v script > /dev/null || skip "script(1) is not installed"
    slow_writer m.npy
    script -qfc "$TENSORRUN slow.yaml --stats none" /dev/null > tty
    grep -aq $'\r\033\\[Kslow: \\[[#.]*\\] block [0-9]* of 48' tty
}

@test "a pipe or .zst cut into blocks is read a block at a time, and read whole when something else reads it" {
    search_pipeline e.npy 128
    run_tensorrun 0 search.yaml -q
    mv ids.npy ids-mapped.npy
    zstd -q e.npy -o e.npy.zst
    run_tensorrun 0 validate search.yaml -i emb=e.npy.zst
    [[ "$output" == *"e.npy.zst, read a block at a time by its foreach stage"* ]]
    run_tensorrun 0 search.yaml -i emb=e.npy.zst -q
    assert_tensors_equal ids.npy ids-mapped.npy
    cat e.npy | run_tensorrun 0 search.yaml -i emb=- -q
    assert_tensors_equal ids.npy ids-mapped.npy
    zstdcat e.npy.zst | run_tensorrun 0 search.yaml -i emb=- -q
    assert_tensors_equal ids.npy ids-mapped.npy
    peaks_match search.yaml -i emb=e.npy.zst
    # a stream that ends early is exit 4 at the block it ends in, and
    # nothing is written
    rm ids.npy best.npy
    run_tensorrun 4 search.yaml -i emb=<(head -c 100000 e.npy)
    [[ "$stderr" == *"input 'emb'"*"the stream ends after"* ]]
    [ ! -e ids.npy ] && [ ! -e best.npy ]
    # read by a later stage too: read whole, as any stream input is
    sed -i 's/      - best, j = topk(v, k, dim=0)/      - best, j = topk(v + 0 * max(emb), k, dim=0)/' search.yaml
    run_tensorrun 0 validate search.yaml -i emb=e.npy.zst
    [[ "$output" == *"e.npy.zst, read into the pool"* ]]
    run_tensorrun 0 search.yaml -i emb=e.npy.zst -q
    assert_tensors_equal ids.npy ids-mapped.npy
}

@test "a foreach stage reads an earlier foreach stage's joined value whole, once before its blocks" {
    cat > two.yaml <<'EOF2'
tensorrun: 1
inputs: {e: e.npy}
stages:
  - name: first
    foreach: {over: e, size: 300}
    do: [y = e * 2]
    keep: [y]
  - name: second
    foreach: {over: e, size: 128}
    do:
      - m = max(y)
      - "z = e / m - y[0:1, :]"
  # y dies in the stage before: its whole is not counted here
  - name: third
    do: [w = sum(z)]
outputs: {z: z.npy, w: w.npy}
EOF2
    run_tensorrun 0 validate two.yaml --json
    printf '%s' "$output" | "$PY" -c '
import json, sys
plan = json.load(sys.stdin)
ops = {i["op"]: i["part"] for s in plan["stages"] for i in s["instructions"] if i.get("op")}
assert ops["max"] == "once", ops'
    run_tensorrun 0 two.yaml -q
    NPY_INPUTS=e npy_is z.npy 'e / (e * np.float32(2)).max() - (e * np.float32(2))[0:1, :]'
    peaks_match two.yaml
    TENSORRUN_FAKE_DEVICES=1 run_tensorrun 0 validate two.yaml
}

@test "the last block: a join whose other dimensions change is exit 3; what it asks for more is counted; the body may rebind the name it cuts" {
    "$PY" -c 'import numpy as np; np.save("t.npy", np.arange(30, dtype=np.float32).reshape(10, 3)); np.save("g.npy", np.ones((1001, 1), np.float32))'
    cat > ragged.yaml <<'EOF2'
tensorrun: 1
inputs: {e: t.npy}
stages:
  - name: s
    foreach: {over: e, size: 4}
    do: ["y = exp(transpose(e, 0, 1))"]
outputs: {y: y.npy}
EOF2
    run_tensorrun 3 validate ragged.yaml
    [[ "$stderr" == *"'y' is f32[3,4] in the full blocks and f32[3,2] in the last one"* ]]
    # within a block it is fine: a sum makes the rows the block's again
    sed -i 's/y = exp(transpose(e, 0, 1))/y = sum(transpose(e, 0, 1), dim=0)/' ragged.yaml
    run_tensorrun 0 ragged.yaml -q
    NPY_INPUTS=t npy_is y.npy 't.sum(1)'
    # the last block (1 row) makes an arange of 99900, the others of 0
    cat > more.yaml <<'EOF2'
tensorrun: 1
inputs: {e: g.npy}
stages:
  - name: s
    foreach: {over: e, size: 1000}
    do:
      - p = arange(100000 - 100 * e.shape[0])
      - y = e + sum(p)
outputs: {y: y.npy}
EOF2
    peaks_match more.yaml
    run_tensorrun 0 more.yaml -q
    "$PY" -c '
import numpy as np
y = np.load("y.npy")
assert (y[:1000] == 1).all() and y[1000, 0] == np.float32(1 + np.arange(99900, dtype=np.int64).sum()), y[999:]'
    # rebinding the name cut into blocks: the last block is cut from the input too
    cat > rebind.yaml <<'EOF2'
tensorrun: 1
inputs: {e: t.npy}
stages:
  - name: s
    foreach: {over: e, size: 4}
    do: ["e = e[:, 1:]"]
outputs: {e: y.npy}
EOF2
    run_tensorrun 0 rebind.yaml -q
    NPY_INPUTS=t npy_is y.npy 't[:, 1:]'
    # nothing computed per block, and the block kept: the input survives
    cat > empty.yaml <<'EOF2'
tensorrun: 1
inputs: {e: t.npy}
stages:
  - name: a
    foreach: {over: e, size: 4}
    do: [k = 1]
    keep: [e]
  - name: b
    do: [s = e * 2]
outputs: {s: s.npy}
EOF2
    run_tensorrun 0 empty.yaml -q
    NPY_INPUTS=t npy_is s.npy 't * np.float32(2)'
}

@test "over: [x, y] cuts row-aligned values into the same blocks: features and labels, mapped or streamed" {
    "$PY" -c '
import numpy as np
rng = np.random.default_rng(5)
np.save("f.npy", rng.standard_normal((1000, 6)).astype(np.float32))
np.save("l.npy", rng.integers(0, 3, 1000).astype(np.int64))
np.save("short.npy", np.zeros(999, np.int64))'
    cat > pairs.yaml <<'EOF2'
tensorrun: 1
inputs: {f: f.npy, l: l.npy}
stages:
  - name: score
    foreach: {over: [f, l], size: 300}
    do:
      - s = sum(f, dim=1) * cast(l, f32)
      - at = l + chunk_start
    keep: [s]
  - name: total
    do: [t = sum(s)]
outputs: {s: s.npy, at: at.npy, t: t.npy}
EOF2
    run_tensorrun 0 validate pairs.yaml
    [[ "$output" == *"foreach f, l by 300 rows (4 blocks)"* ]]
    run_tensorrun 0 validate pairs.yaml --json
    printf '%s' "$output" | "$PY" -c '
import json, sys
st = json.load(sys.stdin)["stages"][0]
assert st["foreach_over"] == ["f", "l"] and st["foreach_blocks"] == 4, st'
    run_tensorrun 0 pairs.yaml -q
    NPY_INPUTS="f l" npy_is s.npy 'f.sum(axis=1, dtype=np.float32) * l.astype(np.float32)'
    NPY_INPUTS="l" npy_is at.npy 'l + np.repeat(np.arange(0, 1000, 300), [300, 300, 300, 100])'
    peaks_match pairs.yaml
    cp s.npy s-mapped.npy
    # each streamed a block at a time: a pipe and a .zst, together
    zstd -q l.npy -o l.npy.zst
    zstd -q f.npy -o f.npy.zst
    run_tensorrun 0 validate pairs.yaml -i f=- -i l=l.npy.zst < <(cat f.npy)
    [[ "$output" == *"l.npy.zst, read a block at a time by its foreach stage"* ]]
    [[ "$output" == *"f32[1000,6]"*"-, read a block at a time by its foreach stage"* ]]
    cat f.npy | run_tensorrun 0 pairs.yaml -i f=- -i l=l.npy.zst -q
    assert_tensors_equal s.npy s-mapped.npy
    peaks_match pairs.yaml -i f=f.npy.zst -i l=l.npy.zst
    # size: in bytes counts a row of each: 6 f32 and one i64, 32 bytes
    sed -i 's/size: 300/size: 3200B/' pairs.yaml
    run_tensorrun 0 validate pairs.yaml
    [[ "$output" == *"foreach f, l by 100 rows (10 blocks)"* ]]
    # no rows: no block runs, and what is joined has no rows either
    "$PY" -c 'import numpy as np; np.save("f0.npy", np.zeros((0, 6), np.float32)); np.save("l0.npy", np.zeros(0, np.int64))'
    run_tensorrun 0 pairs.yaml -i f=f0.npy -i l=l0.npy --stats json
    [ "$(stage_json blocks)" = 0 ]
    npy_is s.npy 'np.zeros(0, np.float32)'
    npy_is at.npy 'np.zeros(0, np.int64)'
    npy_is t.npy 'np.float32(0)'
    peaks_match pairs.yaml -i f=f0.npy -i l=l0.npy
    # rows that do not line up, a name twice, an empty list: one error
    # each, and nothing said of what reads the names
    run_tensorrun 3 validate pairs.yaml -i l=short.npy
    [[ "$stderr" == *"foreach: 'l' has 999 rows and 'f' 1000"* ]]
    [ "$(grep -c 'error:' <<< "$stderr")" = 1 ]
    run_tensorrun 4 validate pairs.yaml -i l=missing.npy
    [ "$(grep -c 'error:' <<< "$stderr")" = 1 ]
    sed -i 's/over: \[f, l\]/over: [f, ll]/' pairs.yaml
    run_tensorrun 3 validate pairs.yaml
    [[ "$stderr" == *"foreach: 'll' is used before anything binds it"*"did you mean 'l'"* ]]
    sed -i 's/over: \[f, ll\]/over: [f, l, f]/' pairs.yaml
    run_tensorrun 3 validate pairs.yaml
    [[ "$stderr" == *"over names 'f' twice"* ]]
    sed -i 's/over: \[f, l, f\]/over: []/' pairs.yaml
    run_tensorrun 3 validate pairs.yaml
    [[ "$stderr" == *"over lists 0 values; it takes 1 to 8"* ]]
    # a size that is not one: its error alone, not chunk_start's after it
    sed -i 's/over: \[\], size: 3200B/over: [f, l], size: rows/' pairs.yaml
    run_tensorrun 3 validate pairs.yaml
    [[ "$stderr" == *"for 'size', found 'rows'"* ]]
    [ "$(grep -c 'error:' <<< "$stderr")" = 1 ]
}
