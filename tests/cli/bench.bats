#!/usr/bin/env bats
# bench.bats - the benchmark floors and peer_bench.py, at a tiny size:
# that they compute what they say and that the script prints its whole
# table.  No time is asserted here; the figures are `make bench-peers`'s.

load helper

BENCH_BIN=$(dirname "$TENSORRUN")/bench
SCRIPT=${TR_SRCDIR:-$BATS_TEST_DIRNAME/../..}/bench/peer_bench.py

setup() {
    cd "$BATS_TEST_TMPDIR"
}

@test "mapped_sum sums a mapped .npy (format 1.0 and 2.0 headers)" {
    /usr/bin/python3 -c '
import numpy as np
x = np.arange(1000003, dtype="<f4") % 1000 - 250
np.save("v1.npy", x)
with open("v2.npy", "wb") as f:
    np.lib.format.write_array_header_2_0(f, np.lib.format.header_data_from_array_1_0(x))
    f.write(x.tobytes())
print(int(x.astype("f8").sum()))' > want
    for f in v1.npy v2.npy; do
        run "$BENCH_BIN/mapped_sum" "$f"
        assert_success
        read -r sum seconds threads <<< "$output"
        [ "$sum" = "$(cat want)" ] || { echo "sum $sum, want $(cat want)"; return 1; }
        [ "$threads" -ge 1 ]
    done
    OMP_NUM_THREADS=1 run "$BENCH_BIN/mapped_sum" v1.npy
    assert_output --regexp "^$(cat want) [0-9.]+ 1\$"
}

@test "mapped_sum refuses a file that is not a .npy" {
    printf 'not a tensor file at all' > bad.npy
    run "$BENCH_BIN/mapped_sum" bad.npy
    assert_failure 1
    assert_output "mapped_sum: bad.npy is not a .npy with aligned data"
    run "$BENCH_BIN/mapped_sum"
    assert_failure 2
}

@test "stream and bare_sgemm report positive rates, and refuse bad arguments" {
    OMP_NUM_THREADS=2 run "$BENCH_BIN/stream" 8 8 2
    assert_success
    assert_output --regexp '^[0-9]+\.[0-9]{3} [0-9]+\.[0-9]{3} 2$'
    run "$BENCH_BIN/stream" 0
    assert_failure 2
    run "$BENCH_BIN/bare_sgemm" 64 2
    assert_success
    assert_output --regexp '^[0-9.]+ [0-9.]+ 2 [^ ]+$'
    run "$BENCH_BIN/bare_sgemm" 64
    assert_failure 2
    run "$BENCH_BIN/bare_sgemm" 64 32 16 2
    assert_success
    assert_output --regexp '^[0-9.]+ [0-9.]+ 2 [^ ]+$'
    run "$BENCH_BIN/bare_sgemm" 64 32 2
    assert_failure 2
}

@test "cdist_bench.py prints its table, its target and its check at a tiny size" {
    TMPDIR=$BATS_TEST_TMPDIR RUNS=1 TR_BENCH_SCALE=0.01 TR_BENCH_THREADS=2 \
        run timeout 300 /usr/bin/python3 "${SCRIPT%/*}/cdist_bench.py" "$TENSORRUN" "$BENCH_BIN"
    assert_success
    assert_line --partial "medians of 1 interleaved rounds, cdist of [100, 256] and [32, 256]"
    assert_line --partial "NumPy, norm expansion"
    [ "$(grep -c -E '  (MET|NOT MET)$' <<< "$output")" -eq 1 ]
    assert_line --regexp '^  check: tensorrun within [0-9.e-]+ of float64'
}

@test "peer_bench.py prints every job, target and check at a tiny size" {
    TMPDIR=$BATS_TEST_TMPDIR OUTDIR=$BATS_TEST_TMPDIR/out RUNS=1 TR_BENCH_SCALE=0.001 \
        run timeout 300 /usr/bin/python3 "$SCRIPT" "$TENSORRUN" "$BENCH_BIN"
    assert_success
    assert_line --partial "medians of 1 interleaved rounds"
    for job in "1 x*2+1, sum" "2 x[::2, 1000:9000]" "3 matmul 64^3" "4 bandwidth"; do
        assert_line --partial "$job"
    done
    # one verdict per target: NumPy and the floor, RssAnon, the slice,
    # NumPy (and PyTorch where it is installed) and the bare sgemm
    want=6
    /usr/bin/python3 -c 'import torch' 2> /dev/null && want=7
    [ "$(grep -c -E '  (MET|NOT MET)$' <<< "$output")" -eq "$want" ]
    assert_line --partial "job 2 output equals NumPy's"
    assert_line --partial "note: TR_BENCH_SCALE=0.001; the targets are for the full size"
    # the inputs and outputs are gone
    [ ! -e "$BATS_TEST_TMPDIR/tensorrun-bench-peers" ]
    [ -z "$(ls -A "$BATS_TEST_TMPDIR/out")" ]
}

@test "peer_bench.py refuses a bad scale before writing anything" {
    TMPDIR=$BATS_TEST_TMPDIR TR_BENCH_SCALE=2 run /usr/bin/python3 "$SCRIPT" "$TENSORRUN" "$BENCH_BIN"
    assert_failure
    assert_output --partial "0 < TR_BENCH_SCALE <= 1"
    [ ! -e "$BATS_TEST_TMPDIR/tensorrun-bench-peers" ]
}

@test "search_bench.py runs the embedding search beside NumPy and prints its table at a tiny size" {
    TMPDIR=$BATS_TEST_TMPDIR RUNS=1 TR_BENCH_SCALE=0.01 \
        run timeout 300 /usr/bin/python3 "${TR_SRCDIR:-$BATS_TEST_DIRNAME/../..}/bench/search_bench.py" \
        "$TENSORRUN" "$BENCH_BIN"
    assert_success
    assert_line --partial "medians of 1 interleaved rounds"
    assert_line --partial "NumPy (argpartition)"
    assert_line --regexp "checks: tensorrun's top 10 within [0-9.e-]+ of the f64 scores"
    # both found the exact top 10 (to f32 rounding)
    worst=$(sed -n "s/.*tensorrun's top 10 within \([0-9.e-]*\) of.*/\1/p" <<< "$output")
    /usr/bin/python3 -c "import sys; assert float(sys.argv[1]) < 1e-5" "$worst"
    assert_line --partial "blocks"
    [ ! -e "$BATS_TEST_TMPDIR/tensorrun-bench-search" ]
}

@test "bigfile_bench.py writes its file with tensorrun, reads it beside Dask and dd, and checks both sums, at a tiny size" {
    if ! /usr/bin/python3 -c 'import dask.array' 2> /dev/null; then
        [ "${CI:-}" != true ] || fail "CI installs python3-dask"
        skip "python3-dask is not installed"
    fi
    TMPDIR=$BATS_TEST_TMPDIR TR_BIG_GIB=0.02 \
        run timeout 300 /usr/bin/python3 "${TR_SRCDIR:-$BATS_TEST_DIRNAME/../..}/bench/bigfile_bench.py" \
        "$TENSORRUN"
    assert_success
    assert_line --partial "written by tensorrun in"
    assert_line --regexp "^  disk: dd, O_DIRECT +[0-9.]+ s"
    assert_line --regexp "^  tensorrun +[0-9.]+ s .* peak RSS +[0-9.]+ MiB"
    assert_line --regexp "^  Dask array +[0-9.]+ s"
    assert_line --regexp "tensorrun/Dask: time [0-9.]+x \((MET|NOT MET)\), peak RSS [0-9.]+x"
    errs=$(sed -n 's/.*relative to the largest: tensorrun \([0-9.e-]*\), Dask \([0-9.e-]*\)$/\1 \2/p' <<< "$output")
    /usr/bin/python3 -c "import sys; assert all(float(e) < 1e-5 for e in sys.argv[1:]), sys.argv" $errs
    assert_line --partial "note: TR_BIG_GIB=0.02: the file fits in RAM"
    [ ! -e "$BATS_TEST_TMPDIR/tensorrun-bench-bigfile" ]
    [ -z "$(ls -d "$BATS_TEST_TMPDIR"/tensorrun-bench-bigfile.* 2> /dev/null)" ]
}

@test "compare_bench.py compares two files beside NumPy, checks both answers and prints its table at a tiny size" {
    TMPDIR=$BATS_TEST_TMPDIR RUNS=1 TR_BENCH_SCALE=0.001 \
        run timeout 300 /usr/bin/python3 "$TR_SRCDIR/bench/compare_bench.py" "$TENSORRUN" "$BENCH_BIN"
    assert_success
    assert_line --partial "tensorrun compare (whole process)"
    assert_line --regexp '^  NumPy allclose \+ first index +[0-9.]+ s   tensorrun/it [0-9.]+x   <= 0\.2x  (MET|NOT MET)$'
    assert_line --partial "checks: both found 3 differences, the first at [87,5]: yes"
    assert_line --partial "of that bandwidth"
    [ -z "$(ls -A "$BATS_TEST_TMPDIR" | grep tensorrun-bench-compare)" ]
}

@test "shard_bench.py runs the search whole and as 4 shards, checks both answers and prints its table at a tiny size" {
    TMPDIR=$BATS_TEST_TMPDIR RUNS=1 TR_BENCH_SCALE=0.01 \
        run timeout 300 /usr/bin/python3 "$TR_SRCDIR/bench/shard_bench.py" "$TENSORRUN" "$TR_SRCDIR"
    assert_success
    assert_line --regexp '^  sharded/whole: CPU [0-9.]+x \(ideal 1\.0: the overhead of sharding\), wall [0-9.]+x$'
    assert_line --partial "checks: the sharded run's ids are the whole run's: yes"
    [ -z "$(ls -A "$BATS_TEST_TMPDIR" | grep tensorrun-bench-shard)" ]
}
