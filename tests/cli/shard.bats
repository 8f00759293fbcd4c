#!/usr/bin/env bats
# --shard K/N, auto/N and auto: the shards' outputs joined are the
# unsharded run's bits; {shard} paths; Slurm's job-array arithmetic; every
# refusal with its exit status; the shard in validate and the statistics.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
np.save("x.npy", np.random.default_rng(1).standard_normal((1000, 8)).astype(np.float32))'
    # 16 blocks of 64 rows, the last of 40; the builtins in the results
    cat > p.yaml <<'EOF'
tensorrun: 1
inputs: {x: x.npy}
stages:
  - name: score
    foreach: {over: x, size: 64}
    do:
      - y = x * 2 + chunk_start
      - r = sum(x, dim=1, keepdim=true) + chunk_index * 1000 + chunk_count
      - v, i = topk(x[:, 0], 3)
    keep: [y, r, v, i]
  - name: after
    do:
      - t = sum(y, dim=0)
outputs: {y: 'y-{shard}.npy', r: 'r-{shard}-of-{shards}.npy', i: 'i-{shard}.npy', t: 't-{shard}.npy'}
EOF
}

# joined N NAME: concat of the N shards' NAME-*.npy into NAME-joined.npy
joined() {
    local parts=()
    for f in "$2"-*.npy; do parts+=("$f"); done
    [ "${#parts[@]}" -eq "$1" ] || { echo "${#parts[@]} parts of $2, not $1"; return 1; }
    "$TENSORRUN" concat "$2-joined.npy" "${parts[@]}"
}

@test "the shards' parts joined are the unsharded run's bits, for 1 to 16 shards" {
    run_tensorrun 0 p.yaml -q -o y=y.npy -o r=r.npy -o i=i.npy -o t=t.npy
    mkdir whole && mv y.npy r.npy i.npy t.npy whole/
    for n in 1 2 3 7 16; do
        for k in $(seq 1 $n); do
            TENSORRUN_CHECK_MEMORY=1 run_tensorrun 0 p.yaml --shard $k/$n -q -o r=r-{shard}.npy
        done
        for v in y r i; do
            joined $n $v
            assert_tensors_equal $v-joined.npy whole/$v.npy
        done
        rm -f y-* r-* i-* t-*
    done
}

@test "a .zst input: each shard reads and drops the blocks before its own" {
    zstd -q x.npy -o x.npy.zst
    run_tensorrun 0 p.yaml -q -o y=y.npy
    mv y.npy whole.npy
    for k in 1 2 3; do
        TENSORRUN_CHECK_MEMORY=1 run_tensorrun 0 p.yaml --shard $k/3 -q -i x=x.npy.zst
    done
    joined 3 y
    assert_tensors_equal y-joined.npy whole.npy
    peaks_match p.yaml --shard 2/3 -i x=x.npy.zst
    peaks_match p.yaml --shard 3/3
}

@test "{shard} is K padded to N's width, {shards} is N" {
    run_tensorrun 0 p.yaml --shard 3/10 -q
    [ -e y-03.npy ] && [ -e r-03-of-10.npy ] && [ -e t-03.npy ]
    run_tensorrun 0 p.yaml --shard 16/16 -q
    [ -e y-16.npy ]
    # unsharded, a pipeline written for shards is the one shard of one
    run_tensorrun 0 p.yaml -q
    [ -e y-1.npy ] && [ -e r-1-of-1.npy ]
}

@test "validate prints the shard's blocks; the statistics carry the shard" {
    run_tensorrun 0 validate p.yaml --shard 2/3
    [[ "$output" == *'stage 1 "score" on cpu, foreach x by 64 rows (blocks 6 to 10 of 16: shard 2 of 3):'* ]]
    run_tensorrun 0 validate p.yaml --shard 3/3 --json
    "$PY" -c '
import json, sys
plan = json.loads(sys.argv[1])
s = plan["stages"][0]
assert plan["shard"] == [3, 3], plan["shard"]
assert (s["foreach_first_block"], s["foreach_blocks"], s["foreach_all_blocks"]) == (10, 6, 16), s
y = [v for v in plan["values"] if v["name"] == "y"][-1]
join = [j for j in s["joins"] if j["value"] == y["id"]][0]
assert join["shape"] == [5 * 64 + 40, 8], join' "$output"
    run_tensorrun 0 p.yaml --shard 2/3 --stats json
    "$PY" -c '
import json, sys
events = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
assert all(e["shard"] == [2, 3] for e in events), events
assert events[0]["blocks"] == 5, events[0]' "$stderr"
    run_tensorrun 0 p.yaml --shard 2/3
    [[ "$stderr" == *"5 blocks (shard 2 of 3)"* ]]
}

@test "refused with exit 2: no {shard}, standard output, a pipe cut into blocks, more shards than blocks, K outside 1..N" {
    run_tensorrun 2 p.yaml --shard 1/2 -o y=y.npy
    [[ "$stderr" == *"output 'y' (y.npy) has no {shard} in its path, so every shard would write the same file"* ]]
    run_tensorrun 2 p.yaml --shard 1/2 -o y=-
    [[ "$stderr" == *"output 'y' goes to standard output"* ]]
    run --separate-stderr bash -c "cat x.npy | '$TENSORRUN' p.yaml --shard 1/2 -i x=- -q"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"input 'x' (-) is a pipe, which every shard would have to read whole"* ]]
    run_tensorrun 2 p.yaml --shard 1/17
    [[ "$stderr" == *"--shard 1/17: stage 'score' has 16 blocks, fewer than the 17 shards"* ]]
    run_tensorrun 2 validate p.yaml --shard 1/17
    for bad in 0/3 4/3 3 x/2 2/x "" 1/0; do
        run_tensorrun 2 p.yaml --shard "$bad"
    done
    run_tensorrun 2 eval 'x * 2' -i x=x.npy --shard 1/2
    # nothing was written
    [ -z "$(ls | grep -e '^y' -e '^r-' -e '^t-')" ]
}

@test "--shard auto: Slurm's task id, min, step and count, for 0-15, 1-8 and 0-30:2; a list or no array is exit 2" {
    array() {  # array ID MIN STEP COUNT MAX: the shard validate says
        SLURM_ARRAY_TASK_ID=$1 SLURM_ARRAY_TASK_MIN=$2 SLURM_ARRAY_TASK_STEP=$3 \
            SLURM_ARRAY_TASK_COUNT=$4 SLURM_ARRAY_TASK_MAX=$5 \
            "$TENSORRUN" validate p.yaml --shard auto --json |
            "$PY" -c 'import json, sys; print(*json.load(sys.stdin)["shard"], sep="/")'
    }
    [ "$(array 0 0 1 16 15)" = 1/16 ]
    [ "$(array 15 0 1 16 15)" = 16/16 ]
    [ "$(array 1 1 1 8 8)" = 1/8 ]
    [ "$(array 5 1 1 8 8)" = 5/8 ]
    [ "$(array 0 0 2 16 30)" = 1/16 ]
    [ "$(array 30 0 2 16 30)" = 16/16 ]
    [ "$(array 14 0 2 16 30)" = 8/16 ]
    # --array=1,3,7: not evenly spaced
    SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=3 \
        SLURM_ARRAY_TASK_MAX=7 run_tensorrun 2 validate p.yaml --shard auto
    [[ "$stderr" == *"the job array is not evenly spaced"* ]]
    # a task between the steps
    SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=16 \
        run_tensorrun 2 validate p.yaml --shard auto
    # outside a job array
    run_tensorrun 2 p.yaml --shard auto
    [[ "$stderr" == *"SLURM_ARRAY_TASK_ID is not set: this is not a task of a Slurm job array"* ]]
    SLURM_ARRAY_TASK_ID=3 run_tensorrun 2 p.yaml --shard auto
    [[ "$stderr" == *"SLURM_ARRAY_TASK_MIN is not set"* ]]
}

@test "--shard auto/N: the task id is the shard, for arrays written 1-N" {
    SLURM_ARRAY_TASK_ID=3 run_tensorrun 0 p.yaml --shard auto/4 -q
    [ -e y-3.npy ]
    SLURM_ARRAY_TASK_ID=0 run_tensorrun 2 p.yaml --shard auto/4
    [[ "$stderr" == *"SLURM_ARRAY_TASK_ID=0 is not a shard from 1 to 4 (submit the array as --array=1-4)"* ]]
    SLURM_ARRAY_TASK_ID=5 run_tensorrun 2 p.yaml --shard auto/4
    run_tensorrun 2 p.yaml --shard auto/4
}

@test "warnings: a sharded pipeline without foreach, a job array's task without --shard" {
    cat > plain.yaml <<'EOF'
tensorrun: 1
inputs: {x: x.npy}
stages:
  - name: s
    do:
      - y = x * 2
outputs: {y: 'plain-{shard}.npy'}
EOF
    run_tensorrun 0 plain.yaml --shard 1/2 -q
    [[ "$stderr" == *"warning: --shard 1/2: the pipeline has no foreach stage, so every shard does all the work"* ]]
    SLURM_ARRAY_TASK_ID=4 run_tensorrun 0 p.yaml -q
    [[ "$stderr" == *"warning: this is task 4 of a Slurm job array, and every task does all the work"* ]]
}
