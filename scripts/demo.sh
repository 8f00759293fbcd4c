#!/bin/sh
# demo.sh - install what is missing, build tensorrun in build/, and show
# what it does: the version and devices, then the pool benchmark.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
install_deps

[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure -q
make -s -j"$(nproc)"
./tensorrun --version
make -s bench
