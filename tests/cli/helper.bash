# helper.bash - shared set-up for the CLI tests.
#
#   run_tensorrun EXPECTED_STATUS [ARGS...]
# runs the program under test (with a timeout) and fails, showing the
# command and its output, unless it exits with EXPECTED_STATUS.

load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load

TENSORRUN=${TENSORRUN:-$BATS_TEST_DIRNAME/../../tensorrun}
TR_TIMEOUT=${TR_TIMEOUT:-60}

run_tensorrun() {
    local expected=$1
    shift
    run --separate-stderr timeout "$TR_TIMEOUT" "$TENSORRUN" "$@"
    if [ "$status" -ne "$expected" ]; then
        echo "command: tensorrun $*" >&2
        echo "status:  $status (expected $expected)" >&2
        echo "stdout:  $output" >&2
        echo "stderr:  $stderr" >&2
        return 1
    fi
}
