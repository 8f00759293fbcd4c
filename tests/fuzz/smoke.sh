#!/bin/sh
# smoke.sh TARGET.smoke - make check's fuzz smoke run of one
# libFuzzer target: a fixed number of inputs from -seed=1 and
# the committed seeds, so the run is the same every time; any crash, leak or
# sanitizer report fails it.  Prints TAP.  A target that was not built
# (clang with libFuzzer is missing) is skipped, except under CI=true, where
# a skip would hide that the fuzzing never ran.
#   TR_FUZZ_RUNS  "default=N TARGET=N ...": the number of inputs per target
t=$(basename "$1" .smoke)
srcdir=${TR_SRCDIR:-.}
runs=300000
for pair in ${TR_FUZZ_RUNS:-}; do
    case $pair in
    default=*) runs=${pair#default=} ;;
    esac
done
for pair in ${TR_FUZZ_RUNS:-}; do
    case $pair in
    "$t"=*) runs=${pair#*=} ;;
    esac
done

echo 1..1
if [ ! -x "./$t" ]; then
    if [ "${CI:-}" = true ]; then
        echo "not ok 1 - $t was not built: clang with libFuzzer is missing (scripts/deps.sh installs it)"
        exit 1
    fi
    echo "ok 1 - $t # SKIP clang with libFuzzer is missing"
    exit 0
fi

n=${t#fuzz_}
seeds=$srcdir/tests/fuzz/seeds-$n
[ -d "$seeds" ] || seeds=$srcdir/tests/fuzz/seeds
# a target's committed corpus (what long runs found, minimized) is replayed
# first, then mutated along with the seeds
corpus=
[ -d "$srcdir/tests/fuzz/corpus-$n" ] && corpus=$srcdir/tests/fuzz/corpus-$n
dict=
[ -f "$srcdir/tests/fuzz/$n.dict" ] && dict=-dict=$srcdir/tests/fuzz/$n.dict
# new inputs go to a corpus of the build's own, never into the seeds
work=fuzz-smoke/$t
rm -rf "$work" && mkdir -p "$work/corpus" || exit 1

start=$(date +%s)
"./$t" -runs="$runs" -seed=1 -print_final_stats=1 $dict -artifact_prefix="$work/" \
    "$work/corpus" $corpus "$seeds" >"$work/log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
if [ "$rc" -eq 0 ]; then
    echo "ok 1 - $t: ${units:-?} inputs in $secs s, no crash"
    exit 0
fi
echo "not ok 1 - $t: status $rc after $secs s (log: $work/log)"
grep -E 'ERROR|SUMMARY|Test unit written|artifact_prefix' "$work/log" | sed 's/^/# /'
tail -n 30 "$work/log" | sed 's/^/# /'
exit 1
