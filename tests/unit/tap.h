/*
 * tap.h - a few TAP helpers for the unit tests: each check prints one
 * "ok N - ..." or "not ok N - ..." line; done_testing() prints the plan and
 * gives the exit status.
 */
#ifndef TR_TAP_H
#define TR_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count;
static int tap_failures;

__attribute__((format(printf, 4, 5)))
static inline int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    printf("%s %d - ", pass ? "ok" : "not ok", ++tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (!pass) {
        tap_failures++;
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return pass;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* Integer equality that shows both sides on failure. */
#define is_int(got, want, ...)                                                \
    do {                                                                      \
        long long got_ = (long long)(got), want_ = (long long)(want);         \
        if (!ok(got_ == want_, __VA_ARGS__))                                  \
            printf("#   got %lld, want %lld\n", got_, want_);                 \
    } while (0)

#define is_double(got, want, ...)                                             \
    do {                                                                      \
        double got_ = (got), want_ = (want);                                  \
        if (!ok(got_ == want_, __VA_ARGS__))                                  \
            printf("#   got %.17g, want %.17g\n", got_, want_);               \
    } while (0)

__attribute__((format(printf, 1, 2)))
static inline void diag(const char *fmt, ...)
{
    va_list ap;

    fputs("# ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

__attribute__((format(printf, 1, 2)))
static inline void skip(const char *fmt, ...)
{
    va_list ap;

    printf("ok %d - # SKIP ", ++tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static inline int done_testing(void)
{
    printf("1..%d\n", tap_count);
    return tap_failures ? 1 : 0;
}

#endif /* TR_TAP_H */
