#!/usr/bin/env bats
# Output failures that no disk produces on cue, injected with an LD_PRELOAD
# shim (tests/inject/inject.c): every one is exit 4, leaves an existing
# destination exactly as it was, and leaves no temporary file.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    INJECT=${TR_INJECT:-$BATS_TEST_DIRNAME/../inject/inject.so}
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    cd "$BATS_TEST_TMPDIR"
    /usr/bin/python3 -c 'import numpy as np; np.save("m.npy", np.arange(300000, dtype="<f4"))'
    echo precious > dest.npy
}

# run_injected EXPECTED FAULT=VALUE ARGS...: tensorrun alone runs with the shim
run_injected() {
    local expected=$1 fault=$2
    shift 2
    # the sanitizer build wants its runtime first; the shim needs none of it
    run --separate-stderr timeout 60 env "$fault" LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TENSORRUN" "$@"
    if [ "$status" -ne "$expected" ]; then
        echo "tensorrun $* with $fault: status $status (expected $expected): $stderr" >&2
        return 1
    fi
}

untouched() {
    [ "$(cat dest.npy)" = precious ]
    [ -z "$(ls -A | grep -F '.tmp-')" ]
}

@test "a full disk during the data is exit 4" {
    run_injected 4 TR_FAIL_WRITE=100000 convert m.npy dest.npy
    [[ "$stderr" == *"write error: No space left on device"* ]]
    untouched
}

@test "a full disk during the header is exit 4" {
    run_injected 4 TR_FAIL_WRITE=10 convert m.npy dest.npy --dtype f16
    untouched
}

@test "a full disk under zstd compression is exit 4" {
    cp dest.npy dest.npy.zst
    run_injected 4 TR_FAIL_WRITE=1000 convert m.npy dest.npy.zst
    [ "$(cat dest.npy.zst)" = precious ]
    untouched
}

@test "a failed fsync under --fsync is exit 4" {
    run_injected 4 TR_FAIL_FSYNC=1 convert m.npy dest.npy --fsync
    [[ "$stderr" == *"cannot flush to disk"* ]]
    untouched
}

@test "a failed close is exit 4" {
    run_injected 4 TR_FAIL_CLOSE=1 convert m.npy dest.npy
    untouched
}

@test "a failed rename is exit 4" {
    run_injected 4 TR_FAIL_RENAME=1 convert m.npy dest.npy
    [[ "$stderr" == *"cannot rename"* ]]
    untouched
}
