#!/bin/sh
# sbatch-search.sh - the nearest-neighbour search of search-sharded.yaml as
# a Slurm job array of N shards, then a job that depends on all of them
# (afterok) and joins their answers with tensorrun concat and merges them
# with search-merge.yaml into the global k best per query.
#
#   sbatch-search.sh [--wait] N
#
# The environment names the files: EMB (the embeddings, default
# data/emb.npy), QUERIES (data/queries.npy), OUT (the directory of the
# answers and logs, default out), K (5), TENSORRUN (the program, default
# tensorrun on PATH).  Without --wait, both jobs are submitted and their
# ids printed; a failed shard cancels the merge job (--kill-on-invalid-dep)
# rather than leaving it pending.  With --wait, it waits for the array
# (exit status 1 and no merge when a shard failed), then for the merge.
#
# Shard K writes OUT/v-K.npy and OUT/i-K.npy; rerun one failed shard with
#   sbatch --array=K ... (the same --wrap line), as --shard auto/N takes K
# from SLURM_ARRAY_TASK_ID.  N is at most the foreach stage's block count
# (tensorrun validate --shard 1/N says).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
wait=
if [ "${1:-}" = --wait ]; then
    wait=--wait
    shift
fi
if [ $# -ne 1 ]; then
    echo "usage: sbatch-search.sh [--wait] N" >&2
    exit 2
fi
n=$1
emb=$(realpath "${EMB:-$here/data/emb.npy}")
queries=$(realpath "${QUERIES:-$here/data/queries.npy}")
mkdir -p "${OUT:-$here/out}"
out=$(realpath "${OUT:-$here/out}")
k=${K:-5}
tr=${TENSORRUN:-tensorrun}

# one task per shard: K from SLURM_ARRAY_TASK_ID (--array=1-N)
shards=$(sbatch --parsable $wait --array=1-"$n" --job-name=tr-search \
    --output="$out/shard-%a.log" \
    --wrap "'$tr' '$here/search-sharded.yaml' --shard auto/$n -D k=$k -i emb='$emb' \
        -i q='$queries' -o best='$out/v-{shard}.npy' -o ids='$out/i-{shard}.npy'") || exit 1
merge=$(sbatch --parsable $wait --dependency=afterok:"$shards" --kill-on-invalid-dep=yes \
    --job-name=tr-merge --output="$out/merge.log" \
    --wrap "'$tr' concat '$out/v.npy' '$out'/v-*.npy && '$tr' concat '$out/i.npy' '$out'/i-*.npy &&
        '$tr' '$here/search-merge.yaml' -D k=$k -i v='$out/v.npy' -i i='$out/i.npy' \
        -o best='$out/best.npy' -o ids='$out/ids.npy'") || exit 1
echo "$shards $merge"
