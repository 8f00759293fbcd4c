#!/bin/sh
# Runs one unit test program; under valgrind when TR_VALGRIND=1
# (make check VALGRIND=1), where any memory error or leak fails the test.
if [ "${TR_VALGRIND:-}" = 1 ]; then
    exec "${TR_VALGRIND_PROG:-valgrind}" --quiet --error-exitcode=99 \
        --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect \
        --suppressions="${TR_SRCDIR:-.}/tests/valgrind.supp" "$@"
fi
exec "$@"
