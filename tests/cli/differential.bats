#!/usr/bin/env bats
# The differential test of every op and dtype against NumPy and PyTorch
# (tests/python/differential.py): the most expensive of the CLI suites, so
# make check runs it in the normal build only, beside the fuzz smoke run and
# the Slurm cluster (not under the sanitizers, nor in make distcheck).

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
}

@test "every op and dtype agrees with NumPy and PyTorch (differential.py)" {
    if ! "$PY" -c 'import torch' 2>/dev/null; then
        [ "${CI:-}" != true ] || { echo "CI=true: python3-torch must be installed" >&2; return 1; }
        skip "PyTorch (python3-torch) is not installed"
    fi
    run "$PY" "$TR_SRCDIR/tests/python/differential.py" "$TENSORRUN" "$BATS_TEST_TMPDIR/d"
    echo "$output" | tail -n 30
    [ "$status" -eq 0 ]
}
