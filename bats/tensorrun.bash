# tensorrun.bash - Bats assertions over tensor files, in the style of
# bats-assert, by `tensorrun compare`.  In a Bats file:
#
#   load /usr/share/tensorrun/tensorrun.bash
#
#   @test "the model's output has not drifted" {
#       tensorrun run model.yaml -o out=out.npy
#       assert_tensors_close out.npy expected/out.npy --rtol 1e-4
#   }
#
# assert_tensors_close A B [COMPARE OPTIONS]: A's tensors are close to
#   B's by tensorrun compare's rule (each dtype's default tolerances, or
#   those given).
# assert_tensors_equal A B [--key K]...: the same dtypes, shapes and bits
#   (compare --exact, which takes no tolerance).
#
# On failure each prints compare's report on standard error, between
# "-- tensors differ --" and "--" (or "-- tensors cannot be compared --"
# with compare's error when a file is missing or malformed), and fails.
# The program is $TENSORRUN when set, else tensorrun on PATH.

# The tensorrun to run, or a failure that says why there is none.
_tensorrun_program() {
    if [ -n "${TENSORRUN:-}" ]; then
        printf '%s\n' "$TENSORRUN"
    elif command -v tensorrun > /dev/null; then
        command -v tensorrun
    else
        printf '%s\n' "-- tensorrun not found --" "TENSORRUN is not set and PATH has no tensorrun" "--" >&2
        return 1
    fi
}

# _tensorrun_assert NAME A B [OPTIONS]: what both assertions do.
_tensorrun_assert() {
    local name=$1 program report status
    shift
    if [ "$#" -lt 2 ]; then
        printf '%s\n' "-- $name: usage --" "$name A B [COMPARE OPTIONS]" "--" >&2
        return 1
    fi
    program=$(_tensorrun_program) || return 1
    report=$("$program" compare "$@" 2>&1) && return 0
    status=$?
    {
        if [ "$status" -eq 1 ]; then
            printf '%s\n' "-- tensors differ --"
        else
            printf '%s\n' "-- tensors cannot be compared --"
        fi
        printf '%-8s: %s\n' "actual" "$1" "expected" "$2" "status" "$status"
        printf '%s\n' "$report" "--"
    } >&2
    return 1
}

assert_tensors_close() {
    _tensorrun_assert assert_tensors_close "$@"
}

assert_tensors_equal() {
    if [ "$#" -lt 2 ]; then
        _tensorrun_assert assert_tensors_equal "$@"
    else
        _tensorrun_assert assert_tensors_equal "$@" --exact
    fi
}
