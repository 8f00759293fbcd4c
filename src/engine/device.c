/*
 * device.c - device names, whether a device exists, and the pools of the
 * devices: one per device, created on first use, each over its backend's
 * segments (backend_impl.h), and the memory API that reaches them.
 */
#include "backend_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ names */

/* "cuda", "cuda:N", "fake" and "fake:N": the kinds with an index. */
static const struct {
    const char *word;
    enum tr_device_kind kind;
} indexed[] = {{"cuda", TR_DEV_CUDA}, {"fake", TR_DEV_FAKE}};

tr_status tr_device_parse(const char *text, struct tr_device *out)
{
    const char *digits;
    char *end;
    long index;

    if (text && strcmp(text, "cpu") == 0) {
        *out = TR_CPU;
        return TR_OK;
    }
    for (size_t k = 0; text && k < sizeof indexed / sizeof *indexed; k++) {
        size_t n = strlen(indexed[k].word);
        if (strncmp(text, indexed[k].word, n) != 0 || (text[n] != '\0' && text[n] != ':'))
            continue;
        if (text[n] == '\0') {
            *out = (struct tr_device){indexed[k].kind, 0};
            return TR_OK;
        }
        digits = text + n + 1;
        errno = 0;
        index = strtol(digits, &end, 10);
        TR_RETURN_ERROR_IF(*digits < '0' || *digits > '9' || *end != '\0' || errno ||
                               index >= TR__MAX_DEVICE_INDEX,
                           TR_ERR_INVALID,
                           "unknown device '%s' (expected %s:N, N from 0 to %d)", text,
                           indexed[k].word, TR__MAX_DEVICE_INDEX - 1);
        *out = (struct tr_device){indexed[k].kind, (int)index};
        return TR_OK;
    }
    return tr__set_error(TR_ERR_INVALID, "unknown device '%s' (expected cpu, cuda or cuda:N)",
                         text ? text : "(null)");
}

char *tr_device_format(struct tr_device device, char *buf, size_t size)
{
    const struct tr__backend *b = tr__backend_of(device.kind);

    if (!b)
        snprintf(buf, size, "device?%d", (int)device.kind);
    else if (device.kind == TR_DEV_CPU)
        snprintf(buf, size, "cpu");
    else
        snprintf(buf, size, "%s:%d", b->name, device.index);
    return buf;
}

bool tr_device_equal(struct tr_device a, struct tr_device b)
{
    return a.kind == b.kind && (a.kind == TR_DEV_CPU || a.index == b.index);
}

bool tr_device_available(struct tr_device device)
{
    const struct tr__backend *b = tr__backend_of(device.kind);

    if (!b)
        return false;
    if (device.kind == TR_DEV_CPU)
        return true; /* the CPU's index means nothing */
    return device.index >= 0 && device.index < b->device_count();
}

/* ------------------------------------------------------------ pools */

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tr__pool *pools[TR__DEVICE_KINDS][TR__MAX_DEVICE_INDEX];

/* The one slot of the CPU, whatever index its tr_device carries. */
static struct tr__pool **pool_slot(struct tr_device device)
{
    return &pools[device.kind][device.kind == TR_DEV_CPU ? 0 : device.index];
}

struct tr__pool *tr__pool_for(struct tr_device device, const char *fn)
{
    const struct tr__backend *b = tr__backend_for(device, fn);
    struct tr__pool **slot, *pool;
    struct tr__pool_backend backend;

    if (!b)
        return NULL;
    slot = pool_slot(device);
    pthread_mutex_lock(&pools_lock);
    if (!*slot) {
        b->pool_backend(device.index, &backend);
        *slot = tr__pool_create(device.kind == TR_DEV_CPU ? TR_CPU : device, &backend);
    }
    pool = *slot;
    pthread_mutex_unlock(&pools_lock);
    TR_RETURN_NULL_IF(!pool, TR_ERR_OOM, "out of memory creating a device pool");
    return pool;
}

size_t tr_memory_devices(struct tr_device *out, size_t cap)
{
    size_t n = 0;

    pthread_mutex_lock(&pools_lock);
    for (int kind = 0; kind < TR__DEVICE_KINDS; kind++)
        for (int index = 0; index < TR__MAX_DEVICE_INDEX; index++) {
            struct tr_memory_stats st;
            if (!pools[kind][index])
                continue;
            /* a pool made only to be asked about or limited was not used */
            tr__pool_stats(pools[kind][index], &st);
            if (st.alloc_count == 0 && st.oom_count == 0)
                continue;
            if (n < cap)
                out[n] = (struct tr_device){(enum tr_device_kind)kind, index};
            n++;
        }
    pthread_mutex_unlock(&pools_lock);
    return n;
}

tr_status tr_memory_stats(struct tr_device device, struct tr_memory_stats *out)
{
    struct tr__pool *pool = tr__pool_for(device, "memory_stats");

    if (!pool)
        return tr_last_status();
    tr__pool_stats(pool, out);
    return TR_OK;
}

uint64_t tr_release_cached(struct tr_device device)
{
    struct tr__pool *pool = tr__pool_for(device, "release_cached");

    return pool ? tr__pool_release_cached(pool) : 0;
}

tr_status tr_memory_set_limit(struct tr_device device, uint64_t bytes)
{
    struct tr__pool *pool = tr__pool_for(device, "memory_set_limit");

    if (!pool)
        return tr_last_status();
    tr__pool_set_limit(pool, bytes);
    return TR_OK;
}

uint64_t tr_memory_block_size(uint64_t bytes)
{
    return bytes ? tr__pool_round(bytes) : 0;
}

tr_status tr_memory_reset_peak(struct tr_device device)
{
    struct tr__pool *pool = tr__pool_for(device, "memory_reset_peak");

    if (!pool)
        return tr_last_status();
    tr__pool_reset_peak(pool);
    return TR_OK;
}
