/*
 * format.c - byte counts and shapes as the messages and reports print them.
 */
#include "engine_impl.h"

#include <stdarg.h>
#include <stdio.h>

char *tr_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = -1;

    if (bytes < 1024) {
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    /* 1023.95 MiB would print as "1024.0 MiB"; say "1.0 GiB" instead */
    if (v >= 1023.95 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

/* Appends to buf as snprintf would, never past size. */
__attribute__((format(printf, 4, 5)))
static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (used >= size)
        return used;
    va_start(ap, fmt);
    n = vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
    return n < 0 ? used : used + (size_t)n;
}

char *tr_format_shape(const int64_t *shape, int ndim, char *buf, size_t size)
{
    size_t used = append(buf, size, 0, "[");

    for (int i = 0; i < ndim; i++)
        used = append(buf, size, used, i ? ",%lld" : "%lld", (long long)shape[i]);
    append(buf, size, used, "]");
    return buf;
}
