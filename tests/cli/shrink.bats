#!/usr/bin/env bats
# An input that another process truncates while tensorrun reads it: the
# reads past its new end (SIGBUS on a mapping) are survived, the command
# ends with exit 4 naming the file, every destination stays exactly as it
# was and no temporary file is left.  The truncation is injected with the
# LD_PRELOAD shim (tests/inject/inject.c): TR_TRUNCATE=PATH is cut to 0
# bytes at the TR_TRUNCATE_AT-th write to a file.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    INJECT=${TR_INJECT:-$BATS_TEST_DIRNAME/../inject/inject.so}
    [ -f "$INJECT" ] || skip "the fault-injection shim is not built"
    cd "$BATS_TEST_TMPDIR"
    # 16 MiB: many 256 KiB stores and 4 MiB writes, so the cut comes
    # while the input is still being read
    /usr/bin/python3 -c 'import numpy as np; np.save("x.npy", np.arange(1 << 22, dtype="<f4"))'
    echo precious > a.npy
    echo precious > b.npy
}

# truncated_at N ARGS...: tensorrun ARGS, x.npy cut at the Nth write
truncated_at() {
    local n=$1
    shift
    run --separate-stderr timeout 60 env TR_TRUNCATE=x.npy TR_TRUNCATE_AT="$n" \
        LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" "$@"
    # the cut really happened, and while the file was in use
    [ "$(stat -c %s x.npy)" -eq 0 ]
}

# changed: exit 4, one message naming x.npy, nothing replaced, no temporary
changed() {
    if [ "$status" -ne 4 ]; then
        echo "status $status (expected 4): $stderr" >&2
        return 1
    fi
    [[ "$stderr" == *"tensorrun: x.npy: error: changed size while being read"* ]]
    [ "$(grep -c 'error:' <<<"$stderr")" -eq 1 ]
    [ "$(cat a.npy)" = precious ]
    [ "$(cat b.npy)" = precious ]
    [ -z "$(ls -A | grep -F '.tmp-')" ]
}

@test "eval: an input cut while its result streams into the output is exit 4" {
    truncated_at 2 eval 'x * 2' -i x=x.npy -o b.npy --threads 2
    changed
}

@test "eval: an input cut under a reduction is exit 4" {
    # the cut comes at the header of the first output; sum then reads x
    truncated_at 1 eval 'y = x[0:4] + 1; s = sum(x * 2)' -i x=x.npy -o y=a.npy -o s=b.npy
    changed
}

@test "run: an input cut in a later stage discards an output already written" {
    printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: x.npy' 'stages:' \
        '  - name: first' '    do:' '      - head = x[0:8] + 1' \
        '  - name: second' '    do:' '      - z = x * 2' \
        'outputs:' '  head: a.npy' '  z: b.npy' > p.yaml
    # writes 1 and 2 are head's, complete in its temporary file; 3 is z's header
    truncated_at 3 run p.yaml --threads 2 -q
    changed
}

@test "run: an input cut while a compressed output is written is exit 4" {
    # 64 MiB: zstd's one worker takes a few MiB at a time, and its first
    # compressed bytes are written long before it has read them all
    /usr/bin/python3 -c 'import numpy as np; np.save("x.npy", np.arange(1 << 24, dtype="<f4"))'
    printf '%s\n' 'tensorrun: 1' 'inputs:' '  x: x.npy' 'stages:' \
        '  - name: s' '    do:' '      - y = x[1:]' 'outputs:' '  y: b.npy.zst' > p.yaml
    echo precious > b.npy.zst
    truncated_at 1 run p.yaml -q --threads 1
    [ "$(cat b.npy.zst)" = precious ]
    changed
}

@test "convert: an input cut while it is copied is exit 4" {
    # written straight from the mapping: the write fails (EFAULT), not a read
    truncated_at 2 convert x.npy b.npy
    changed
}

@test "convert: an input cut while it is converted is exit 4" {
    truncated_at 2 convert x.npy b.npy --dtype f16
    changed
}

@test "an input that is not cut runs through the same shim" {
    run --separate-stderr env TR_TRUNCATE=other.npy TR_TRUNCATE_AT=2 LD_PRELOAD="$INJECT" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TENSORRUN" convert x.npy b.npy --dtype f16
    [ "$status" -eq 0 ]
    /usr/bin/python3 -c 'import numpy as np; assert (np.load("b.npy") == np.arange(1 << 22, dtype="<f2")).all()'
}
