#!/bin/bash
# io_bench.sh - tensor files, side by side with NumPy, PyTorch and zstd:
#   1. inspect of a 1 GiB .npy against inspect of a 1 KiB one (the header
#      is all it reads: same time, same page faults)
#   2. convert of a 1 GiB f32 .npy to f16 .npy against NumPy and PyTorch
#      (time and peak resident memory)
#   3. convert to .npy.zst against `zstd -T0 -3` on the same bytes
# Each job runs RUNS times, the tools alternating; medians are reported.
# Outputs go to OUTDIR (default /dev/shm when it exists): on a disk, each
# tool would pay for the writeback of the one before it, and the figures
# would measure the disk rather than the tools.
#
# Usage: io_bench.sh TENSORRUN [WORKDIR]     (WORKDIR needs about 1 GiB,
#                                             OUTDIR about 2 GiB)
set -eu
TENSORRUN=$1
WORK=${2:-${TMPDIR:-/tmp}/tensorrun-io-bench}
RUNS=${RUNS:-3}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
if [ -z "${OUTDIR:-}" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        OUTDIR=$(mktemp -d /dev/shm/tensorrun-io-bench.XXXXXX)
        # the outputs live in memory: gone however the script ends
        trap 'rm -rf "$OUTDIR"' EXIT
    else
        OUTDIR=$WORK
    fi
fi

if [ ! -f big.npy ]; then
    "$PY" -c '
import numpy as np
a = np.lib.format.open_memmap("big.npy", mode="w+", dtype="<f4", shape=(256 * 2**20,))
a[:] = np.random.default_rng(0).standard_normal(a.shape[0], dtype=np.float32)
a.flush()
np.save("tiny.npy", np.zeros(256, "<f4"))'
fi
cat big.npy > /dev/null # warm: every tool reads from the page cache

# measure NAME COMMAND...: appends "seconds max_rss_kib minor_faults" to NAME.times
measure() {
    local name=$1
    shift
    /usr/bin/time -f "%e %M %R" -o "$name.one" "$@" > /dev/null
    cat "$name.one" >> "$name.times"
}

# median NAME FIELD: the median of one column of NAME.times
median() {
    awk -v f="$2" '{print $f}' "$1.times" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}

# per_run NAME N COMMAND...: appends the mean seconds of N runs to NAME.times
per_run() {
    local name=$1 n=$2 t0 t1
    shift 2
    t0=$(date +%s%N)
    for _ in $(seq "$n"); do "$@" > /dev/null; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.6f 0 0\n", (b - a) / n / 1e9 }' >> "$name.times"
}

rm -f ./*.times
for _ in $(seq "$RUNS"); do
    per_run inspect_big 200 "$TENSORRUN" inspect big.npy
    per_run inspect_tiny 200 "$TENSORRUN" inspect tiny.npy
    measure faults_big "$TENSORRUN" inspect big.npy
    measure faults_tiny "$TENSORRUN" inspect tiny.npy
    measure tensorrun_f16 "$TENSORRUN" convert big.npy "$OUTDIR/out_tr.npy" --dtype f16
    measure numpy_f16 "$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.load("big.npy", mmap_mode="r").astype("f2"))' "$OUTDIR/out_np.npy"
    if "$PY" -c 'import torch' 2>/dev/null; then
        measure torch_f16 "$PY" -W ignore -c 'import numpy as np, sys, torch
torch.set_num_threads(2)
np.save(sys.argv[1], torch.from_numpy(np.load("big.npy", mmap_mode="r")).half().numpy())' "$OUTDIR/out_pt.npy"
    fi
    measure tensorrun_zst "$TENSORRUN" convert big.npy "$OUTDIR/out_tr.npy.zst"
    if command -v zstd > /dev/null; then
        measure zstd_cli zstd -q -f -T0 -3 big.npy -o "$OUTDIR/out_cli.npy.zst"
    fi
done
cmp "$OUTDIR/out_tr.npy" "$OUTDIR/out_np.npy" ||
    echo "warning: tensorrun's f16 file differs from NumPy's"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

echo "io_bench: medians of $RUNS alternating runs, input in $WORK, outputs in $OUTDIR"
printf '  inspect 1 GiB .npy   %8.2f ms  %6d page faults\n' \
    "$(awk -v s="$(median inspect_big 1)" 'BEGIN { print s * 1000 }')" "$(median faults_big 3)"
printf '  inspect 1 KiB .npy   %8.2f ms  %6d page faults   (1 GiB / 1 KiB: %s; the header is all it reads)\n' \
    "$(awk -v s="$(median inspect_tiny 1)" 'BEGIN { print s * 1000 }')" "$(median faults_tiny 3)" \
    "$(ratio "$(median inspect_big 1)" "$(median inspect_tiny 1)")"
t=$(median tensorrun_f16 1)
printf '  convert f32 -> f16   tensorrun %6.3f s  peak RSS %7d KiB\n' "$t" "$(median tensorrun_f16 2)"
printf '                       NumPy     %6.3f s  peak RSS %7d KiB   tensorrun/NumPy %s (target <= 0.4)\n' \
    "$(median numpy_f16 1)" "$(median numpy_f16 2)" "$(ratio "$t" "$(median numpy_f16 1)")"
if [ -f torch_f16.times ]; then
    printf '                       PyTorch   %6.3f s  peak RSS %7d KiB   tensorrun/PyTorch %s (target <= 0.75)\n' \
        "$(median torch_f16 1)" "$(median torch_f16 2)" "$(ratio "$t" "$(median torch_f16 1)")"
fi
z=$(median tensorrun_zst 1)
if [ -f zstd_cli.times ]; then
    printf '  convert to .npy.zst  tensorrun %6.3f s, zstd -T0 -3 %6.3f s   tensorrun/zstd %s (target <= 1)\n' \
        "$z" "$(median zstd_cli 1)" "$(ratio "$z" "$(median zstd_cli 1)")"
fi
rm -f ./*.one "$OUTDIR"/out_*
[ "$OUTDIR" = "$WORK" ] || rmdir "$OUTDIR"
