/*
 * util.c - exit codes and parsers of command-line values.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "msg.h"
#include "tensorrun_io.h"

int exit_for_status(tr_status status)
{
    switch (status) {
    case TR_OK:
        return EXIT_OK;
    case TR_ERR_IO:
    case TR_ERR_FORMAT:
        return EXIT_IO;
    case TR_ERR_OOM:
        return EXIT_OOM;
    default:
        return EXIT_RUNTIME;
    }
}

int usage_error(const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    msg_error(NULL, "%s", text);
    fputs("Try 'tensorrun --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

bool parse_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    long long v;

    if (!text || !*text)
        return false;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool parse_int_list(const char *text, int64_t *out, int max, int *n, bool allow_negative)
{
    const char *p = text;

    *n = 0;
    if (!text || !*text)
        return false;
    for (;;) {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (end == p || errno || (!allow_negative && v < 0) || *n >= max)
            return false;
        out[(*n)++] = v;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        p = end + 1;
    }
}

bool parse_size(const char *text, uint64_t *out)
{
    static const struct {
        const char *suffix;
        double factor;
    } units[] = {
        {"", 1.0},       {"B", 1.0},
        {"K", 0x1p10},   {"KiB", 0x1p10}, {"KB", 1e3},
        {"M", 0x1p20},   {"MiB", 0x1p20}, {"MB", 1e6},
        {"G", 0x1p30},   {"GiB", 0x1p30}, {"GB", 1e9},
        {"T", 0x1p40},   {"TiB", 0x1p40}, {"TB", 1e12},
    };
    char *end;
    double v;

    if (!text || !*text || *text == '-' || *text == '+')
        return false;
    errno = 0;
    v = strtod(text, &end);
    if (end == text || errno || v != v)
        return false;
    while (*end == ' ')
        end++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            double bytes = v * units[i].factor;
            if (bytes >= 0x1p64)
                return false;
            *out = (uint64_t)bytes;
            return true;
        }
    }
    return false;
}

int check_inputs_unchanged(void)
{
    const char *path = tio_input_changed();

    if (!path)
        return EXIT_OK;
    msg_error(strcmp(path, "-") == 0 ? "standard input" : path,
              "changed size while being read (another process truncated it?); what was "
              "computed from it is discarded");
    return EXIT_IO;
}

/* Set once the outputs are being renamed into place. */
static volatile sig_atomic_t holding;

/* SIGINT and SIGTERM: no temporary file survives, no output is replaced;
 * or, once the renames have begun, all of them finish.  The main thread
 * blocks the signals then, but another thread (an idle OpenMP worker)
 * may still be the one that takes them. */
static void on_interrupt(int sig)
{
    (void)sig;
    if (holding)
        return;
    tio_remove_temporaries();
    _exit(EXIT_INTERRUPTED);
}

void catch_interrupts(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void hold_interrupts(void)
{
    sigset_t set;

    holding = 1;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}
