#!/bin/sh
# check.sh - install what is missing, then build and run the whole test
# suite three ways: the normal build (build/), its unit tests under valgrind,
# and an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/);
# then `make distcheck`, which counts as one more test.  The normal check
# includes a fuzz smoke run of every libFuzzer target (clang).
# Ends with one line "N passed, N failed[, N skipped]" summed over all of
# them, and exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/.."
. scripts/deps.sh
install_deps $TR_FUZZ_PACKAGES bats bats-assert bats-support python3-numpy python3-torch \
    valgrind zstd || exit 1

jobs=$(nproc)
passed=0 failed=0 skipped=0

# Adds the counts of one test-suite.log (Automake's summary header) to the
# totals; a run that produced no log counts as one failure.
tally() {
    log=$1
    if [ ! -f "$log" ]; then
        echo "check.sh: no $log: the build or the test run broke" >&2
        failed=$((failed + 1))
        return
    fi
    n() { sed -n "s/^# $1: *\([0-9]*\).*/\1/p" "$log" | head -n 1; }
    passed=$((passed + $(n PASS) + $(n XFAIL)))
    failed=$((failed + $(n FAIL) + $(n XPASS) + $(n ERROR)))
    skipped=$((skipped + $(n SKIP)))
}

# build DIR CONFIGURE-FLAGS...: configure and build out of tree.
build() {
    dir=$1
    shift
    mkdir -p "$dir" &&
        (cd "$dir" && { [ -f Makefile ] || ../configure -q "$@"; } && make -s -j"$jobs")
}

[ -x configure ] || autoreconf -fi || exit 1

rm -f build/test-suite.log build/test-suite-valgrind.log build-asan/test-suite.log
if build build; then
    make -s -C build -j"$jobs" check
    tally build/test-suite.log
    make -s -C build check-valgrind
    tally build/test-suite-valgrind.log
else
    tally build/test-suite.log
fi
if build build-asan --enable-sanitizers --without-cuda; then
    ASAN_OPTIONS=detect_leaks=1 make -s -C build-asan -j"$jobs" check
fi
tally build-asan/test-suite.log

if make -s -C build distcheck >build/distcheck.log 2>&1; then
    passed=$((passed + 1))
else
    echo "check.sh: make distcheck failed; see build/distcheck.log" >&2
    tail -n 30 build/distcheck.log >&2
    failed=$((failed + 1))
fi

summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
