#!/usr/bin/env bats
# tensorrun concat: split files joined back are the original's bits, in
# every format and along every dimension; safetensors name by name; shapes,
# dtypes and names that do not line up are exit 4 with the file named; the
# output is atomic and the memory bounded.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
}

# st PATH 'PY-DICT' [METADATA]: a safetensors file of the NumPy arrays of
# the Python dict expression
st() {
    "$PY" - "$@" <<'EOF'
import json, struct, sys
import numpy as np
codes = {"float32": "F32", "float64": "F64", "int64": "I64", "float16": "F16", "int32": "I32"}
tensors = eval(sys.argv[2])
header, data = {}, b""
for name, a in tensors.items():
    header[name] = {"dtype": codes[str(a.dtype)], "shape": list(a.shape),
                    "data_offsets": [len(data), len(data) + a.nbytes]}
    data += np.ascontiguousarray(a).tobytes()
if len(sys.argv) > 3:
    header["__metadata__"] = json.loads(sys.argv[3])
h = json.dumps(header).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
}

@test "a file split along any dimension and joined again is the original's bits, in every format" {
    "$PY" - <<'EOF'
import numpy as np
a = np.random.default_rng(3).standard_normal((6, 5, 4)).astype(np.float32)
np.save("full.npy", a)
a.tofile("full.bin")
for d in range(3):
    parts = np.array_split(a, 3, axis=d)
    for i, p in enumerate(parts):
        np.save("p%d-%d.npy" % (d, i), p)
EOF
    for d in 0 1 2; do
        run_tensorrun 0 concat j.npy p$d-0.npy p$d-1.npy p$d-2.npy --dim $d
        cmp j.npy full.npy
    done
    run_tensorrun 0 concat j.npy p2-0.npy p2-1.npy p2-2.npy --dim -1
    cmp j.npy full.npy
    # raw out, zstd out, safetensors out; zstd and raw in
    run_tensorrun 0 concat j.bin p0-0.npy p0-1.npy p0-2.npy
    cmp j.bin full.bin
    run_tensorrun 0 concat j.npy.zst p1-0.npy p1-1.npy p1-2.npy --dim 1
    zstd -dqc j.npy.zst | cmp - full.npy
    zstd -q p1-1.npy -o p1-1.npy.zst
    run_tensorrun 0 concat j.safetensors p1-0.npy p1-1.npy.zst p1-2.npy --dim 1
    run_tensorrun 0 compare j.safetensors full.npy --exact
    "$PY" -c 'import numpy as np; np.load("p0-1.npy").tofile("p0-1.bin")'
    run_tensorrun 0 concat j.npy full.bin full.bin --input-dtype f32 --shape 6,5,4
    run_tensorrun 0 validate /dev/null -i x=j.npy 2> /dev/null || true
    "$PY" -c 'import numpy as np; a = np.load("full.npy"); assert (np.load("j.npy") == np.concatenate([a, a])).all()'
}

@test "inputs from pipes and standard input stream; the output can be standard output" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.arange(300000, dtype=np.int64).reshape(1000, 300))'
    "$PY" -c 'import numpy as np; np.save("b.npy", -np.arange(600, dtype=np.int64).reshape(2, 300))'
    run --separate-stderr bash -c "cat b.npy | '$TENSORRUN' concat j.npy - a.npy -"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"standard input can be only one of the inputs"* ]]
    run --separate-stderr bash -c "cat b.npy | '$TENSORRUN' concat - <(zstd -c a.npy) - > j.npy"
    [ "$status" -eq 0 ]
    "$PY" -c '
import numpy as np
a, b = np.load("a.npy"), np.load("b.npy")
assert (np.load("j.npy") == np.concatenate([a, b])).all()'
}

@test "safetensors are joined name by name; the first file's metadata is kept; a missing name is exit 4" {
    st a.safetensors '{"w": np.ones((2, 3), np.float32), "ids": np.arange(2)}' '{"step": "1"}'
    st b.safetensors '{"ids": np.arange(2, 5), "w": np.zeros((3, 3), np.float32)}' '{"step": "2"}'
    run_tensorrun 0 concat j.safetensors a.safetensors b.safetensors
    run_tensorrun 0 inspect j.safetensors --json
    "$PY" - "$output" <<'EOF'
import json, sys
info = json.loads(sys.argv[1].splitlines()[0])
assert info["metadata"] == {"step": "1"}, info
shapes = {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}
assert shapes == {"w": ("f32", [5, 3]), "ids": ("i64", [5])}, shapes
EOF
    # --dtype converts the floating-point tensors, as convert does
    run_tensorrun 0 concat j.safetensors a.safetensors b.safetensors --dtype f16
    run_tensorrun 0 inspect j.safetensors
    [[ "$output" == *"w"*"f16"*"[5, 3]"* || "$output" == *"w"*"f16"*"[5,3]"* ]]
    [[ "$output" == *"ids"*"i64"* ]]
    st c.safetensors '{"w": np.zeros((1, 3), np.float32)}'
    run_tensorrun 4 concat j.safetensors a.safetensors c.safetensors
    [[ "$stderr" == *"c.safetensors: error: no tensor 'ids', which a.safetensors holds"* ]]
    st d.safetensors '{"w": np.zeros((1, 3), np.float32), "ids": np.arange(1), "x": np.zeros(1, np.float32)}'
    run_tensorrun 4 concat j.safetensors a.safetensors d.safetensors
    [[ "$stderr" == *"d.safetensors: error: tensor 'x' is not in a.safetensors"* ]]
    # named tensors are named in the messages
    st e.safetensors '{"w": np.zeros((1, 4), np.float32), "ids": np.arange(1)}'
    run_tensorrun 4 concat j.safetensors a.safetensors e.safetensors
    [[ "$stderr" == *"e.safetensors: error: tensor 'w': dimension 1 is 4, and in a.safetensors it is 3 (only dimension 0, joined, may differ)"* ]]
    st f.safetensors '{"w": np.zeros((1, 3), np.float32), "ids": np.arange(1, dtype=np.int32)}'
    run_tensorrun 4 concat j.safetensors a.safetensors f.safetensors --dtype f64
    [[ "$stderr" == *"f.safetensors: error: tensor 'ids': the dtype is i32, and in a.safetensors it is i64"* ]]
    [[ "$stderr" == *"(--dtype converts a collection's floating-point tensors only)"* ]]
    run_tensorrun 4 concat j.safetensors a.safetensors f.safetensors
    [[ "$stderr" == *"hint: --dtype converts a collection's floating-point tensors only"* ]]
    # safetensors streams of several tensors, in their own order and in another
    zstd -q a.safetensors -o a.safetensors.zst
    run_tensorrun 0 concat j.safetensors a.safetensors.zst <(cat b.safetensors)
    run_tensorrun 0 concat k.safetensors a.safetensors b.safetensors
    run_tensorrun 0 compare j.safetensors k.safetensors --exact
    # several tensors cannot go to a one-tensor format
    run_tensorrun 2 concat j.npy a.safetensors b.safetensors
}

@test "shapes and dtypes that do not line up are exit 4, naming the file and the dimension" {
    "$PY" -c '
import numpy as np
np.save("a.npy", np.zeros((2, 3), np.float32)); np.save("b.npy", np.zeros((2, 4), np.float32))
np.save("c.npy", np.zeros((2, 3, 1), np.float32)); np.save("d.npy", np.zeros((2, 3), np.float64))
np.save("s.npy", np.float32(1))'
    run_tensorrun 4 concat j.npy a.npy b.npy
    [[ "$stderr" == *"b.npy: error: dimension 1 is 4, and a.npy's is 3 (only dimension 0, joined, may differ)"* ]]
    run_tensorrun 0 concat j.npy a.npy b.npy --dim 1
    run_tensorrun 4 concat j.npy a.npy c.npy
    [[ "$stderr" == *"c.npy: error: 3 dimensions, and a.npy has 2"* ]]
    run_tensorrun 4 concat j.npy a.npy d.npy
    [[ "$stderr" == *"d.npy: error: the dtype is f64, and a.npy's is f32"* ]]
    [[ "$stderr" == *"give --dtype"* ]]
    run_tensorrun 0 concat j.npy a.npy d.npy --dtype f64
    "$PY" -c 'import numpy as np; j = np.load("j.npy"); assert j.dtype == np.float64 and j.shape == (4, 3)'
    run_tensorrun 4 concat j.npy a.npy a.npy --dim 2
    [[ "$stderr" == *"a.npy: error: 2 dimensions: there is no dimension 2 to join along"* ]]
    run_tensorrun 4 concat j.npy s.npy s.npy
    [[ "$stderr" == *"a 0-d tensor has no dimension to join along"* ]]
    run_tensorrun 4 concat j.npy a.npy missing.npy
    run_tensorrun 2 concat j.npy
    run_tensorrun 2 concat j.npz a.npy
    run_tensorrun 2 concat j.npy a.npy --dim x
}

@test "a closed pipe on standard output ends it quietly, as SIGPIPE does (141)" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.ones((4096, 1024), np.float32))'
    for extra in "" "--dtype f16" "--format npy.zst"; do
        run --separate-stderr bash -c "'$TENSORRUN' concat - a.npy a.npy $extra | head -c 100 > /dev/null; echo \${PIPESTATUS[0]}"
        [ "$output" = 141 ] || { echo "$extra: $output, $stderr"; return 1; }
        [ -z "$stderr" ]
    done
}

@test "the output is atomic: a failure leaves the destination as it was" {
    "$PY" -c 'import numpy as np; np.save("a.npy", np.ones((1000, 100), np.float32))'
    echo old > j.npy
    # the second input's stream ends early: found after the first was written
    head -c 20000 a.npy > short.npy.part
    run --separate-stderr bash -c "cat short.npy.part | '$TENSORRUN' concat j.npy a.npy -"
    [ "$status" -eq 4 ]
    [ "$(cat j.npy)" = old ]
    # no temporary file (.j.npy.tmp-XXXXXX) is left behind
    [ -z "$(ls -A | grep '^\.j\.npy\.tmp-')" ]
    # nor when the failure comes after the first input's data went out
    head -c 300000 a.npy | { run --separate-stderr "$TENSORRUN" concat j.npy a.npy -; [ "$status" -eq 4 ]; }
    [ "$(cat j.npy)" = old ]
    [ -z "$(ls -A | grep '^\.j\.npy\.tmp-')" ]
}

@test "memory is bounded: zstd inputs larger than --memory-limit join within it" {
    "$PY" -c '
import numpy as np
a = np.lib.format.open_memmap("a.npy", "w+", np.float32, (4096, 4096))
a[:] = np.arange(4096, dtype=np.float32)
a.flush()'
    zstd -q -1 a.npy -o a.npy.zst
    # 2 x 64 MiB through 16 MiB, along dimension 0 and along dimension 1
    anon=$("$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" concat j.npy a.npy.zst a.npy.zst --memory-limit 16M | cut -d' ' -f2)
    [ -n "${TR_SANITIZED:-}" ] || [ "$anon" -lt $((20 * 1024)) ] || { echo "RssAnon peaked at $anon KiB"; return 1; }
    run_tensorrun 0 compare j.npy <("$PY" -c '
import sys, numpy as np
a = np.load("a.npy", mmap_mode="r")
np.save(sys.stdout.buffer, np.concatenate([a, a]))') --exact
    anon=$("$PY" "$TR_SRCDIR/bench/peak_anon.py" "$TENSORRUN" concat j.npy a.npy.zst a.npy.zst --dim 1 --memory-limit 16M | cut -d' ' -f2)
    [ -n "${TR_SANITIZED:-}" ] || [ "$anon" -lt $((20 * 1024)) ] || { echo "RssAnon peaked at $anon KiB"; return 1; }
    "$PY" -c '
import numpy as np
a, j = np.load("a.npy", mmap_mode="r"), np.load("j.npy", mmap_mode="r")
assert j.shape == (4096, 8192) and (j[:, :4096] == a).all() and (j[:, 4096:] == a).all()'
    # mapped inputs take no pool at all, and small outputs a small buffer
    run_tensorrun 0 concat j.npy a.npy a.npy --memory-limit 5M
    "$PY" -c 'import numpy as np; np.save("s.npy", np.arange(100, dtype=np.float32))'
    run_tensorrun 0 concat j.npy s.npy s.npy --memory-limit 2M
}
