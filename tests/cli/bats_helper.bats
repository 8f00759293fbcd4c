#!/usr/bin/env bats
# bats/tensorrun.bash, the Bats assertions a user loads with one line: run
# in a Bats file of the user's own, as they would be.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np
a = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
np.save("a.npy", a)
np.save("near.npy", a + np.float32(1e-7))
b = a.copy(); b[2, 1] += 1; np.save("far.npy", b)'
}

# user_bats BODY: runs a one-test Bats file whose test is BODY, loading the
# helper in one line as a user does
user_bats() {
    printf '%s\n' "load '$TR_SRCDIR/bats/tensorrun.bash'" "@test 'user' {" "$1" "}" > user.bats
    run bats --tap user.bats
}

@test "assert_tensors_close passes within the tolerance and fails with compare's report beyond it" {
    user_bats 'assert_tensors_close near.npy a.npy'
    [ "$status" -eq 0 ]
    user_bats 'assert_tensors_close far.npy a.npy'
    [ "$status" -eq 1 ]
    [[ "$output" == *"-- tensors differ --"* ]]
    [[ "$output" == *"actual  : far.npy"* ]]
    [[ "$output" == *"expected: a.npy"* ]]
    [[ "$output" == *"far.npy: 1 of 12 differ (max abs 1.0e+00 at [2,1]"* ]]
    [[ "$output" == *"1 of 1 tensor differs"* ]]
    # compare's options go through
    user_bats 'assert_tensors_close far.npy a.npy --atol 1.5'
    [ "$status" -eq 0 ]
}

@test "assert_tensors_equal wants the same bits; a missing file cannot be compared" {
    user_bats 'assert_tensors_equal a.npy a.npy'
    [ "$status" -eq 0 ]
    user_bats 'assert_tensors_equal near.npy a.npy'
    [ "$status" -eq 1 ]
    [[ "$output" == *"near.npy: 12 of 12 differ"* ]]
    user_bats 'assert_tensors_equal missing.npy a.npy'
    [ "$status" -eq 1 ]
    [[ "$output" == *"-- tensors cannot be compared --"* ]]
    [[ "$output" == *"status  : 4"* ]]
    [[ "$output" == *"missing.npy"* ]]
    user_bats 'assert_tensors_equal a.npy'
    [ "$status" -eq 1 ]
    [[ "$output" == *"assert_tensors_equal A B [COMPARE OPTIONS]"* ]]
}

@test "the program is \$TENSORRUN when set, else tensorrun on PATH" {
    mkdir bin
    ln -s "$TENSORRUN" bin/tensorrun
    user_bats 'assert_tensors_close near.npy a.npy'
    [ "$status" -eq 0 ]
    TENSORRUN= PATH="$PWD/bin:$PATH" user_bats 'assert_tensors_close near.npy a.npy'
    [ "$status" -eq 0 ]
    TENSORRUN= PATH=/usr/bin:/bin user_bats 'assert_tensors_close near.npy a.npy'
    [ "$status" -eq 1 ]
    [[ "$output" == *"TENSORRUN is not set and PATH has no tensorrun"* ]]
    TENSORRUN=/bin/false user_bats 'assert_tensors_close near.npy a.npy'
    [ "$status" -eq 1 ]
}
