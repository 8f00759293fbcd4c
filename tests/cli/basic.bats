#!/usr/bin/env bats
# The program's own options: --help, --version, help, and usage errors.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "--help prints usage on stdout and exits 0" {
    run_tensorrun 0 --help
    assert_line --index 0 --partial "Usage: tensorrun"
    assert_output --partial "Commands:"
    [ -z "$stderr" ]
}

@test "--help lists only commands that exist" {
    run_tensorrun 0 --help
    commands=$(printf '%s\n' "$output" | sed -n '/^Commands:/,/^$/p' | awk 'NF && !/^Commands:/ {print $1}')
    [ -n "$commands" ]
    for c in $commands; do
        run_tensorrun 0 help "$c"
    done
}

@test "--version prints the version on stdout and exits 0" {
    run_tensorrun 0 --version
    assert_line --index 0 --regexp '^tensorrun [0-9]+\.[0-9]+\.[0-9]+$'
    assert_output --partial "CUDA:"
}

@test "help COMMAND prints that command's usage" {
    run_tensorrun 0 help help
    assert_output --partial "Usage: tensorrun help"
}

@test "no arguments is a usage error" {
    run_tensorrun 2
    assert_equal "$output" ""
    [[ "$stderr" == *"Usage: tensorrun"* ]]
}

@test "an unknown option is exit 2 with a message on stderr" {
    run_tensorrun 2 --frobnicate
    assert_equal "$output" ""
    [[ "$stderr" == *"tensorrun: error: unknown option '--frobnicate'"* ]]
}

@test "an unknown command is exit 2 with a suggestion" {
    run_tensorrun 2 hlep
    [[ "$stderr" == *"unknown command 'hlep'"* ]]
    [[ "$stderr" == *"did you mean 'help'?"* ]]
}

@test "help for an unknown command is exit 2" {
    run_tensorrun 2 help nosuchcommand
    [[ "$stderr" == *"unknown command 'nosuchcommand'"* ]]
}

@test "a write error on stdout is reported" {
    [ -w /dev/full ] || skip "/dev/full is not available"
    run --separate-stderr timeout 10 "$TENSORRUN" --help
    run bash -c '"$0" --help > /dev/full' "$TENSORRUN"
    [ "$status" -eq 4 ]
    [[ "$output" == *"write error"* ]]
}

@test "NO_COLOR keeps messages free of escape codes" {
    NO_COLOR=1 run_tensorrun 2 --frobnicate
    [[ "$stderr" != *$'\033'* ]]
}

@test "--help and --version may be shortened, as every long option may" {
    run_tensorrun 0 --vers
    [[ "$output" == "tensorrun "* ]]
    run_tensorrun 0 --hel
    [[ "$output" == *"Usage: tensorrun"* ]]
    run_tensorrun 2 --x
    [[ "$stderr" == *"unknown option '--x'"* ]]
}
