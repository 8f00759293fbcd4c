/*
 * size.c - sizes in bytes as people write them (cli.h, parse_size): a
 * number and an optional unit, 64M, 1.5GiB, 100MB, for --memory-limit,
 * TENSORRUN_DROP_BEHIND and a foreach stage's size.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "cli.h"

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
