/*
 * msg.c - error, warning, note and hint lines on standard error.
 */
#include "config.h"

#include "msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

bool msg_color(void)
{
    static int color = -1;
    const char *no_color;

    if (color < 0) {
        no_color = getenv("NO_COLOR");
        color = isatty(STDERR_FILENO) && !(no_color && *no_color);
    }
    return color;
}

static void emit(const char *place, const char *kind, const char *color, const char *fmt,
                 va_list ap)
{
    bool c = msg_color();

    fputs("tensorrun: ", stderr);
    if (place)
        fprintf(stderr, "%s%s%s: ", c ? "\033[1m" : "", place, c ? "\033[0m" : "");
    fprintf(stderr, "%s%s:%s ", c ? color : "", kind, c ? "\033[0m" : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void msg_error(const char *place, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(place, "error", "\033[1;31m", fmt, ap);
    va_end(ap);
}

void msg_warning(const char *place, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(place, "warning", "\033[1;35m", fmt, ap);
    va_end(ap);
}

void msg_note(const char *place, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(place, "note", "\033[1;36m", fmt, ap);
    va_end(ap);
}

void msg_hint(const char *fmt, ...)
{
    va_list ap;
    bool c = msg_color();

    va_start(ap, fmt);
    fprintf(stderr, "%shint:%s ", c ? "\033[1;32m" : "", c ? "\033[0m" : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
