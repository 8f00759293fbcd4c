/*
 * memory_limits.c - --memory-limit per device.
 */
#include "memory_limits.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The device word of an item: a kind alone ("cuda") or one device
 * ("cuda:1"; "cpu" is both). */
static bool parse_device(const char *word, struct tr_device *device, bool *whole_kind)
{
    bool ok = tr_device_parse(word, device) == TR_OK;

    tr_clear_error();
    *whole_kind = ok && !strchr(word, ':');
    return ok;
}

static bool same_item(const struct memory_limits *l, size_t i, struct tr_device d, bool kind)
{
    return l->named[i].whole_kind == kind &&
           (kind ? l->named[i].device.kind == d.kind : tr_device_equal(l->named[i].device, d));
}

bool memory_limits_parse(const char *text, struct memory_limits *out, char *why,
                         size_t whysize)
{
    char buf[256], *save = NULL;
    bool every_given = false;

    memset(out, 0, sizeof *out);
    if (strlen(text) >= sizeof buf) {
        snprintf(why, whysize, "'%.40s...' is too long", text);
        return false;
    }
    strcpy(buf, text);
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *size = eq ? eq + 1 : item;
        struct tr_device device = TR_CPU;
        bool kind = false;
        uint64_t bytes;

        if (eq) {
            *eq = '\0';
            if (!parse_device(item, &device, &kind)) {
                snprintf(why, whysize, "'%s' is not a device (cpu, cuda, cuda:N)", item);
                return false;
            }
        }
        if (!parse_size(size, &bytes) || bytes == 0) {
            snprintf(why, whysize, "'%s' is not a size (such as 512M, 2G or 1.5GiB)", size);
            return false;
        }
        if (!eq) {
            if (every_given) {
                snprintf(why, whysize, "two sizes for every device");
                return false;
            }
            every_given = true;
            out->every = bytes;
        } else {
            for (size_t i = 0; i < out->n; i++) {
                if (same_item(out, i, device, kind)) {
                    snprintf(why, whysize, "%s is given two sizes", item);
                    return false;
                }
            }
            if (out->n == MEMORY_LIMITS_MAX) {
                snprintf(why, whysize, "more than %d devices", MEMORY_LIMITS_MAX);
                return false;
            }
            out->named[out->n].device = device;
            out->named[out->n].whole_kind = kind;
            out->named[out->n].bytes = bytes;
            out->n++;
        }
        warn_memory_limit(size, bytes, !eq || device.kind == TR_DEV_CPU);
    }
    if (!every_given && out->n == 0) {
        snprintf(why, whysize, "'%s' has no size", text);
        return false;
    }
    return true;
}

uint64_t memory_limit_of(const struct memory_limits *limits, struct tr_device device)
{
    for (size_t i = 0; i < limits->n; i++)
        if (same_item(limits, i, device, false))
            return limits->named[i].bytes;
    for (size_t i = 0; i < limits->n; i++)
        if (same_item(limits, i, device, true))
            return limits->named[i].bytes;
    return limits->every;
}
