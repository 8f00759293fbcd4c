#!/bin/bash
# exec_bench.sh - running pipelines, side by side with the same job in
# NumPy and in PyTorch (two threads):
#   1. a tiny pipeline (two 4x4 inputs, one matmul, one output), the whole
#      process, against `python3 -c 'import numpy; ...'` doing the same
#   2. softmax over the last axis of a mapped 8192x8192 f32 .npy, written
#      to .npy: time and peak anonymous memory (RssAnon: the mapped input is
#      not counted, the output buffer is)
#   3. y = x * 2.0 + 1.0; s = sum(y) over a mapped 1 GiB f32 .npy
# Every job runs RUNS times, the tools alternating; medians are reported,
# and ratios tensorrun / peer (below 1: tensorrun is faster or smaller).
# Jobs 2 and 3 compare tensorrun's whole process with the peers' own time
# for the job (from before the load to after the save, imports left out:
# PyTorch's import alone takes over a second); the peers' whole-process
# times are shown after them.
#
# Usage: exec_bench.sh TENSORRUN [WORKDIR]   (WORKDIR needs about 1.3 GiB)
set -eu
TENSORRUN=$1
WORK=${2:-${TMPDIR:-/tmp}/tensorrun-exec-bench}
RUNS=${RUNS:-5}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"
cd "$WORK"
if [ -z "${OUTDIR:-}" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        OUTDIR=$(mktemp -d /dev/shm/tensorrun-exec-bench.XXXXXX)
        # the outputs live in memory: gone however the script ends
        trap 'rm -rf "$OUTDIR"' EXIT
    else
        OUTDIR=$WORK
    fi
fi
HAVE_TORCH=0
"$PY" -c 'import torch' 2> /dev/null && HAVE_TORCH=1

if [ ! -f x1g.npy ] || [ ! -f s8k.npy ]; then
    "$PY" -c '
import numpy as np
rng = np.random.default_rng(0)
x = np.lib.format.open_memmap("x1g.npy", mode="w+", dtype="<f4", shape=(256 * 2**20,))
x[:] = rng.standard_normal(x.shape[0], dtype=np.float32)
x.flush()
s = np.lib.format.open_memmap("s8k.npy", mode="w+", dtype="<f4", shape=(8192, 8192))
s[:] = rng.standard_normal((8192, 8192), dtype=np.float32)
s.flush()
np.save("a4.npy", rng.standard_normal((4, 4)).astype("<f4"))
np.save("b4.npy", rng.standard_normal((4, 4)).astype("<f4"))'
fi
cat x1g.npy s8k.npy > /dev/null # warm: every tool reads from the page cache

cat > tiny.yaml << 'YAML'
tensorrun: 1
inputs: {a: a4.npy, b: b4.npy}
stages:
  - name: product
    do:
      - c = a @ b
YAML
printf 'outputs: {c: %s/tiny_tr.npy}\n' "$OUTDIR" >> tiny.yaml
cat > softmax.yaml << 'YAML'
tensorrun: 1
inputs: {x: s8k.npy}
stages:
  - name: softmax
    do:
      - y = softmax(x, dim=-1)
YAML
printf 'outputs: {y: %s/softmax_tr.npy}\n' "$OUTDIR" >> softmax.yaml
cat > affine.yaml << 'YAML'
tensorrun: 1
inputs: {x: x1g.npy}
stages:
  - name: affine
    do:
      - y = x * 2.0 + 1.0
      - s = sum(y)
YAML
printf 'outputs: {s: %s/affine_tr.npy}\n' "$OUTDIR" >> affine.yaml

NP_TINY='import numpy as np, sys; np.save(sys.argv[1], np.load("a4.npy") @ np.load("b4.npy"))'
PT_TINY='import numpy as np, sys, torch; torch.set_num_threads(2)
np.save(sys.argv[1], (torch.from_numpy(np.load("a4.npy")) @ torch.from_numpy(np.load("b4.npy"))).numpy())'
# The peers' job time: from after the imports to after the save, appended
# to the file named by argv[2] (not in the runs that measure memory).
JOB_START='import time; t0 = time.perf_counter()'
JOB_END='import os
if not os.environ.get("NO_JOB_TIME"): open(sys.argv[2], "a").write("%.6f\n" % (time.perf_counter() - t0))'
NP_SOFTMAX='import numpy as np, sys
'"$JOB_START"'
x = np.load("s8k.npy", mmap_mode="r")
e = np.exp(x - x.max(axis=-1, keepdims=True))
e /= e.sum(axis=-1, keepdims=True)
np.save(sys.argv[1], e)
'"$JOB_END"
PT_SOFTMAX='import numpy as np, sys, torch; torch.set_num_threads(2)
'"$JOB_START"'
x = torch.from_numpy(np.load("s8k.npy", mmap_mode="r"))
np.save(sys.argv[1], torch.softmax(x, dim=-1).numpy())
'"$JOB_END"
NP_AFFINE='import numpy as np, sys
'"$JOB_START"'
x = np.load("x1g.npy", mmap_mode="r")
y = x * np.float32(2.0) + np.float32(1.0)
np.save(sys.argv[1], y.sum())
'"$JOB_END"
PT_AFFINE='import numpy as np, sys, torch; torch.set_num_threads(2)
'"$JOB_START"'
x = torch.from_numpy(np.load("x1g.npy", mmap_mode="r"))
y = x * 2.0 + 1.0
np.save(sys.argv[1], y.sum().numpy())
'"$JOB_END"

# measure NAME COMMAND...: appends "seconds peak_anon_kib" to NAME.times,
# from two runs: one timed alone, one watched by peak_anon.py (whose
# polling every millisecond takes a core's share from a two-thread run on
# two cores, and so is kept out of the times).
measure() {
    local name=$1 t0 t1 kib
    shift
    t0=$(date +%s%N)
    "$@" > /dev/null
    t1=$(date +%s%N)
    kib=$(NO_JOB_TIME=1 "$PY" "$HERE/peak_anon.py" "$@" | awk '{print $2}')
    awk -v a="$t0" -v b="$t1" -v k="$kib" 'BEGIN { printf "%.6f %d\n", (b - a) / 1e9, k }' >> "$name.times"
}

# per_run NAME N COMMAND...: appends the mean seconds of N runs to NAME.times
per_run() {
    local name=$1 n=$2 t0 t1
    shift 2
    t0=$(date +%s%N)
    for _ in $(seq "$n"); do "$@" > /dev/null; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.6f 0\n", (b - a) / n / 1e9 }' >> "$name.times"
}

# median NAME FIELD [EXT]: the median of a column of NAME.times (or NAME.EXT)
median() {
    awk -v f="$2" '{print $f}' "$1.${3:-times}" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}

rm -f ./*.times ./*.job
export PYTHONWARNINGS=ignore
for _ in $(seq "$RUNS"); do
    per_run tiny_tr 20 "$TENSORRUN" tiny.yaml -q
    per_run tiny_np 20 "$PY" -c "$NP_TINY" "$OUTDIR/tiny_np.npy"
    [ "$HAVE_TORCH" = 1 ] && per_run tiny_pt 5 "$PY" -c "$PT_TINY" "$OUTDIR/tiny_pt.npy"
    measure softmax_tr "$TENSORRUN" softmax.yaml -q
    measure softmax_np "$PY" -c "$NP_SOFTMAX" "$OUTDIR/softmax_np.npy" softmax_np.job
    [ "$HAVE_TORCH" = 1 ] && measure softmax_pt "$PY" -c "$PT_SOFTMAX" "$OUTDIR/softmax_pt.npy" softmax_pt.job
    measure affine_tr "$TENSORRUN" affine.yaml -q
    measure affine_np "$PY" -c "$NP_AFFINE" "$OUTDIR/affine_np.npy" affine_np.job
    [ "$HAVE_TORCH" = 1 ] && measure affine_pt "$PY" -c "$PT_AFFINE" "$OUTDIR/affine_pt.npy" affine_pt.job
done

"$PY" -c '
import numpy as np, sys
d = sys.argv[1]
t, n = np.load(d + "/softmax_tr.npy"), np.load(d + "/softmax_np.npy")
print("softmax: largest difference from NumPy %.3g" % np.abs(t - n).max())
t, n = np.load(d + "/affine_tr.npy"), np.load(d + "/affine_np.npy")
print("sum: tensorrun %.9g, NumPy %.9g, f64 %.9g" % (t, n,
      (np.load("x1g.npy", mmap_mode="r").astype("f8") * 2 + 1).sum()))' "$OUTDIR"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f MiB", k / 1024 }'; }
report() { # report JOB LABEL: the peers' job times where they wrote them
    local tr np pt ext=times
    [ -f "$1_np.job" ] && ext=job
    tr=$(median "$1_tr" 1)
    np=$(median "$1_np" 1 $ext)
    printf '%-34s tensorrun %8.4f s   NumPy %8.4f s (x%s)' "$2" "$tr" "$np" "$(ratio "$tr" "$np")"
    if [ -f "$1_pt.times" ]; then
        pt=$(median "$1_pt" 1 $ext)
        printf '   PyTorch %8.4f s (x%s)' "$pt" "$(ratio "$tr" "$pt")"
    fi
    if [ $ext = job ]; then
        printf '   [whole process: NumPy %.4f s' "$(median "$1_np" 1)"
        [ -f "$1_pt.times" ] && printf ', PyTorch %.4f s' "$(median "$1_pt" 1)"
        printf ']'
    fi
    echo
}
report_memory() { # report_memory JOB LABEL
    local tr np pt
    tr=$(median "$1_tr" 2)
    np=$(median "$1_np" 2)
    printf '%-34s tensorrun %10s   NumPy %10s (x%s)' "$2" "$(mib "$tr")" "$(mib "$np")" "$(ratio "$tr" "$np")"
    if [ -f "$1_pt.times" ]; then
        pt=$(median "$1_pt" 2)
        printf '   PyTorch %10s (x%s)' "$(mib "$pt")" "$(ratio "$tr" "$pt")"
    fi
    echo
}
echo "exec_bench: medians of $RUNS alternating runs; (xR) is tensorrun / peer"
report tiny "tiny pipeline, whole process"
report softmax "softmax 8192x8192 f32, time"
report_memory softmax "softmax, peak RssAnon"
report affine "x*2+1, sum over 1 GiB, time"
report_memory affine "x*2+1, sum, peak RssAnon"
rm -rf "${OUTDIR:?}"/*_tr.npy "${OUTDIR:?}"/*_np.npy "${OUTDIR:?}"/*_pt.npy
[ "$OUTDIR" = "$WORK" ] || rmdir "$OUTDIR" 2> /dev/null || true
