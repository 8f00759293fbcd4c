#!/bin/sh
# check.sh - install what is missing, then build and run the whole test
# suite three ways: the normal build (build/), its unit tests under valgrind,
# and an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/);
# then `make distcheck`, which counts as one more test.  The normal check
# includes a fuzz smoke run of every libFuzzer target (clang).
# Prints each suite's wall time as it ends, and ends with one line
# "N passed, N failed[, N skipped]" summed over all of them; exits non-zero
# when anything failed.
set -u
cd "$(dirname "$0")/.."
. scripts/deps.sh
install_deps $TR_FUZZ_PACKAGES $TR_CLUSTER_PACKAGES bats bats-assert bats-support python3-numpy python3-torch \
    python3-dask valgrind zstd || exit 1

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

# timed NAME COMMAND...: runs COMMAND and prints how long it took.
started=$(date +%s)
timed() {
    name=$1
    shift
    t0=$(date +%s)
    "$@"
    rc=$?
    t=$(($(date +%s) - t0))
    printf 'check.sh: %s took %d min %02d s\n' "$name" $((t / 60)) $((t % 60))
    return $rc
}

# build DIR CONFIGURE-FLAGS...: configure and build out of tree.
build() {
    dir=$1
    shift
    mkdir -p "$dir" &&
        (cd "$dir" && { [ -f Makefile ] || ../configure -q "$@"; } && make -s -j"$jobs")
}

[ -x configure ] || autoreconf -fi || exit 1

# the fuzz smoke tests' own times, from their TAP lines
fuzz_times() {
    sed -n 's/^ok 1 - \(fuzz_[a-z_]*\): .* in \([0-9]*\) s.*/\1 \2 s/p' \
        build/fuzz_*.log 2>/dev/null | paste -sd, - | sed 's/,/, /g'
}

rm -f build/test-suite.log build/test-suite-valgrind.log build-asan/test-suite.log build/fuzz_*.log
if timed "the normal build" build build; then
    timed "the normal check" make -s -C build -j"$jobs" check
    f=$(fuzz_times)
    [ -n "$f" ] && echo "check.sh: of which the fuzz smoke run (one target per test): $f"
    tally build/test-suite.log
    timed "the valgrind check" make -s -C build check-valgrind
    tally build/test-suite-valgrind.log
else
    tally build/test-suite.log
fi
asan() {
    build build-asan --enable-sanitizers --without-cuda &&
        ASAN_OPTIONS=detect_leaks=1 make -s -C build-asan -j"$jobs" check
}
timed "the sanitizer build and check" asan
tally build-asan/test-suite.log

if timed "make distcheck" sh -c 'make -s -C build distcheck >build/distcheck.log 2>&1'; then
    passed=$((passed + 1))
else
    echo "check.sh: make distcheck failed; see build/distcheck.log" >&2
    tail -n 30 build/distcheck.log >&2
    failed=$((failed + 1))
fi

t=$(($(date +%s) - started))
printf 'check.sh: everything took %d min %02d s\n' $((t / 60)) $((t % 60))
summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
