#!/bin/bash
# startup_bench.sh - what CUDA support costs a run that does not use it.
# A small pipeline (device: auto, below the placement threshold: no driver
# is asked) is timed with hyperfine, RUNS runs (default 30) after 3
# warm-ups, for
#   - this build of tensorrun (CUDA module built beside it, when configure
#     found CUDA), and
#   - a --without-cuda build of the same sources (made once in
#     WORKDIR/nocuda),
# each with and without a libcuda.so.1 on the library path (a stub built
# here whose cuInit says "no device", as a driver on a machine without a
# GPU would).  Reports each mean and its difference from the
# --without-cuda build's, in ms; the target is under 1 ms.
#
# Usage: startup_bench.sh TENSORRUN SRCDIR [WORKDIR]
set -eu
TENSORRUN=$1
SRCDIR=$(cd "$2" && pwd)
WORK=${3:-${TMPDIR:-/tmp}/tensorrun-startup-bench}
RUNS=${RUNS:-30}
PY=/usr/bin/python3
command -v hyperfine > /dev/null || { echo "startup_bench: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
mkdir -p "$WORK/stub"
cd "$WORK"

if [ ! -x nocuda/tensorrun ]; then
    echo "startup_bench: building a --without-cuda tensorrun in $WORK/nocuda (once)"
    mkdir -p nocuda
    (cd nocuda && "$SRCDIR/configure" -q --without-cuda > /dev/null &&
        make -s -j"$(nproc)" tensorrun > /dev/null)
fi
cat > stub/cuda.c <<'C'
/* a driver that finds no device: CUDA_ERROR_NO_DEVICE */
int cuInit(unsigned flags) { (void)flags; return 100; }
int cuDeviceGetCount(int *n) { *n = 0; return 100; }
C
cc -shared -fPIC -o stub/libcuda.so.1 stub/cuda.c

"$PY" -c 'import numpy as np; np.save("a.npy", np.arange(64, dtype="<f4").reshape(8, 8))'
printf '%s\n' 'tensorrun: 1' 'inputs: {a: a.npy}' 'stages:' '  - name: s' \
    '    do: ["y = matmul(a, a) + 1"]' 'outputs: {y: y.npy}' > p.yaml

hyperfine -N -w 3 -r "$RUNS" --export-json times.json \
    -n "without-cuda build" "$WORK/nocuda/tensorrun p.yaml -q" \
    -n "this build" "$TENSORRUN p.yaml -q" \
    -n "without-cuda build, libcuda.so.1 present" \
    "env LD_LIBRARY_PATH=$WORK/stub $WORK/nocuda/tensorrun p.yaml -q" \
    -n "this build, libcuda.so.1 present" "env LD_LIBRARY_PATH=$WORK/stub $TENSORRUN p.yaml -q" \
    > /dev/null
"$PY" - "$TENSORRUN" << 'PY'
import json, subprocess, sys
r = {x["command"]: x for x in json.load(open("times.json"))["results"]}
ver = subprocess.run([sys.argv[1], "--version"], capture_output=True, text=True).stdout
print("tensorrun --version:", " | ".join(l for l in ver.splitlines() if "CUDA" in l))
base = r["without-cuda build"]["mean"]
for name, x in r.items():
    ref = r["without-cuda build" + (", libcuda.so.1 present" if "present" in name else "")]["mean"]
    print(f"  {name:42s} {x['mean'] * 1e3:7.2f} ms +- {x['stddev'] * 1e3:5.2f}"
          f"   vs --without-cuda: {(x['mean'] - ref) * 1e3:+6.2f} ms")
PY
