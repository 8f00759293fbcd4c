#!/usr/bin/env bats
# The example pipelines of pipelines/ run as they are, on the data that
# make-data.yaml makes, and give what NumPy computes.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cp -R "$TR_SRCDIR/pipelines" "$BATS_TEST_TMPDIR/p"
    chmod -R u+w "$BATS_TEST_TMPDIR/p"
    cd "$BATS_TEST_TMPDIR/p"
    run_tensorrun 0 make-data.yaml -q
}

@test "make-data.yaml makes the same data on every run" {
    cp data/emb.npy first.npy
    run_tensorrun 0 make-data.yaml -q
    assert_tensors_equal first.npy data/emb.npy
    "$PY" -c '
import numpy as np
e, q, s = np.load("data/emb.npy"), np.load("data/queries.npy"), np.load("data/scores.npy")
assert e.shape == (20000, 128) and e.dtype == np.float32
assert abs(e.mean()) < 0.01 and abs(e.std() - 1) < 0.01
assert q.shape == (4, 128) and np.abs(q - e[:4]).max() < 1
assert s.shape == (64, 1000) and s.min() >= -2 and s.max() < 2'
}

@test "search.yaml finds each query's own embedding first, as NumPy does" {
    run_tensorrun 0 search.yaml
    [[ "$stderr" == *"normalise"*"search"*"total"* ]]
    "$PY" -c '
import numpy as np
e, q = np.load("data/emb.npy"), np.load("data/queries.npy")
ids, best = np.load("out/ids.npy"), np.load("out/best.npy")
assert ids.dtype == np.int32 and ids.shape == (5, 4)
assert (ids[0] == np.arange(4)).all()
en = e / np.linalg.norm(e, axis=-1, keepdims=True)
qn = q / np.linalg.norm(q, axis=-1, keepdims=True)
sim = en @ qn.T
assert (np.argsort(-sim, axis=0, kind="stable")[:5] == ids).all()
assert np.abs(-np.sort(-sim, axis=0)[:5] - best).max() < 1e-5'
}

@test "softmax.yaml: probabilities, maxima and entropies as NumPy computes them" {
    run_tensorrun 0 softmax.yaml -q -D temperature=0.25
    "$PY" -c '
import numpy as np
s = np.load("data/scores.npy").astype("f8") / 0.25
p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
assert np.allclose(np.load("out/probs.npy"), p, rtol=1e-5, atol=1e-12)
assert np.allclose(np.load("out/top.npy"), p.max(-1), rtol=1e-5)
assert np.allclose(np.load("out/entropy.npy"), -(p * np.log(p)).sum(-1), rtol=1e-4)'
}

@test "convert.yaml: bf16 safetensors, f16 .npy.zst, int8 with per-row scales" {
    run_tensorrun 0 convert.yaml -q
    run_tensorrun 0 inspect --json out/emb.safetensors out/emb-i8.safetensors
    [[ "${lines[0]}" == *'"name":"embeddings","dtype":"bf16","shape":[20000,128]'* ]]
    [[ "${lines[1]}" == *'"name":"q","dtype":"i8","shape":[20000,128]'* ]]
    [[ "${lines[1]}" == *'"name":"scale","dtype":"f32","shape":[20000]'* ]]
    "$TENSORRUN" convert out/emb-f16.npy.zst half.npy
    "$TENSORRUN" convert out/emb-i8.safetensors q.npy --key q
    "$TENSORRUN" convert out/emb-i8.safetensors scale.npy --key scale
    "$PY" -c '
import numpy as np
e = np.load("data/emb.npy")
assert (np.load("half.npy") == e.astype("f2")).all()
q, scale = np.load("q.npy"), np.load("scale.npy")
want = np.abs(e).max(-1) / np.float32(127)
assert np.allclose(scale, want, rtol=1e-6)
assert (q == np.clip(np.round(e / scale[:, None]), -127, 127).astype("i1")).all()
err = float(np.load("out/quantize-error.npy"))
assert 0 < err <= scale.max() / 2 * 1.0001, err'
}

# shards: search-sharded.yaml's 4 shards, and their answers joined for
# search-merge.yaml
shards() {
    for k in 1 2 3 4; do
        run_tensorrun 0 search-sharded.yaml --shard $k/4 -q
    done
    run_tensorrun 0 concat out/v.npy out/v-1.npy out/v-2.npy out/v-3.npy out/v-4.npy
    run_tensorrun 0 concat out/i.npy out/i-1.npy out/i-2.npy out/i-3.npy out/i-4.npy
}

@test "search-sharded.yaml in 4 shards, joined and merged by search-merge.yaml, is search.yaml's top k" {
    run_tensorrun 0 validate search-sharded.yaml --shard 4/4
    [[ "$output" == *"foreach emb by 2048 rows (blocks 8 to 10 of 10: shard 4 of 4)"* ]]
    shards
    run_tensorrun 0 search-merge.yaml -q -o best=out/merged-best.npy -o ids=out/merged-ids.npy
    run_tensorrun 0 search.yaml -q
    assert_tensors_equal out/merged-best.npy out/best.npy
    assert_tensors_equal out/merged-ids.npy out/ids.npy
    # more shards than its 10 blocks is refused
    run_tensorrun 2 search-sharded.yaml --shard 1/11
}

@test "every example passes validate" {
    shards # search-merge.yaml's inputs
    for p in *.yaml; do
        run_tensorrun 0 validate "$p"
    done
}
