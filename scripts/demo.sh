#!/bin/sh
# demo.sh - install what is missing, build tensorrun in build/, and run the
# example pipelines: make their data, search it, and show the results with
# the statistics every stage prints.
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
echo
echo '$ tensorrun pipelines/make-data.yaml'
./tensorrun ../pipelines/make-data.yaml
echo
echo '$ tensorrun pipelines/search.yaml'
./tensorrun ../pipelines/search.yaml
echo
echo '$ tensorrun eval ids --print -i ids=pipelines/out/ids.npy'
./tensorrun eval ids --print -i ids=../pipelines/out/ids.npy
