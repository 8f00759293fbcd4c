/*
 * backend_fake.c - the fake device: host memory behind the backend
 * interface, so that every machine has a second device to test with
 * (per-device pools and statistics, transfers, placement).  Test-only: it
 * exists only when TENSORRUN_FAKE_DEVICES=N (1 to 8) is set, as fake:0 ..
 * fake:N-1, each with as much memory as TENSORRUN_FAKE_MEMORY=BYTES says
 * (a device that runs out), or as the host gives.
 *
 * Its copies behave like a GPU's asynchronous ones: each is queued on the
 * device's stream and applied only when an event recorded after it is
 * waited for, on synchronize, on the second query of such an event, before
 * a kernel of the device runs, or before the pool frees a segment.  Code
 * that reads a copy's destination without waiting sees the old bytes.  Its
 * pool defers a free made while copies are queued (pool_impl.h) until
 * they land.
 *
 * Its kernels are the CPU's, run on its memory (they make their results on
 * the device they run for, so those come from the fake pool), except
 * cumsum's: it is left out on purpose, so that a placement pass has an op
 * the device does not support.
 */
#include "backend_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAKE 8
#define ENV "TENSORRUN_FAKE_DEVICES"
#define MEMORY_ENV "TENSORRUN_FAKE_MEMORY"
/* an event answers "not yet" to this many queries, then lets its work land */
#define QUERIES_BEFORE_LANDING 1
/* the op the fake device has no kernel for */
#define LEFT_OUT TR_OP_CUMSUM

enum work_kind { WORK_COPY, WORK_ZERO, WORK_GATHER };

struct work {
    enum work_kind kind;
    char *dst;
    const char *src;
    uint64_t bytes;                 /* COPY, ZERO */
    size_t item;                    /* GATHER: the view at src */
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int64_t strides[TR_MAX_DIMS];   /* in bytes */
};

struct fake {
    pthread_mutex_t lock;
    struct work *queue;        /* queue[first .. first + count): not applied yet */
    size_t first, count, cap;
    uint64_t issued, landed;   /* work items enqueued and applied, ever */
    uint64_t reserved;         /* bytes of the segments its pool holds */
};

static struct fake fakes[MAX_FAKE];
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static int fake_count;
static char fake_reason[256];

static void detect_fake(void)
{
    const char *env = getenv(ENV);
    char *end;
    long n;

    for (int i = 0; i < MAX_FAKE; i++)
        pthread_mutex_init(&fakes[i].lock, NULL);
    if (!env || !*env) {
        snprintf(fake_reason, sizeof fake_reason,
                 "the fake device is for tests only; set " ENV "=N for N of them (1 to %d)",
                 MAX_FAKE);
        return;
    }
    errno = 0;
    n = strtol(env, &end, 10);
    if (*end != '\0' || errno || n < 0 || n > MAX_FAKE) {
        snprintf(fake_reason, sizeof fake_reason,
                 ENV "='%.40s' is not a number of fake devices from 0 to %d", env, MAX_FAKE);
        return;
    }
    if (n == 0)
        snprintf(fake_reason, sizeof fake_reason, ENV " is 0");
    fake_count = (int)n;
}

static int count(void)
{
    pthread_once(&fake_once, detect_fake);
    return fake_count;
}

static const char *reason(void)
{
    pthread_once(&fake_once, detect_fake);
    return fake_reason;
}

/* ---------------------------------------------------------------- stream */

/* Applies f's queued work up to and including number upto (f locked). */
static void land_locked(struct fake *f, uint64_t upto)
{
    while (f->count > 0 && f->landed < upto) {
        const struct work *w = &f->queue[f->first];
        switch (w->kind) {
        case WORK_COPY:
            memcpy(w->dst, w->src, w->bytes);
            break;
        case WORK_ZERO:
            tr__cpu_fill_zero(w->dst, w->bytes);
            break;
        case WORK_GATHER:
            tr__cpu_gather(w->dst, w->src, w->item, w->ndim, w->shape, w->strides);
            break;
        }
        f->first++;
        f->count--;
        f->landed++;
    }
    if (f->count == 0)
        f->first = 0;
}

static void land(struct fake *f, uint64_t upto)
{
    pthread_mutex_lock(&f->lock);
    land_locked(f, upto);
    pthread_mutex_unlock(&f->lock);
}

static void land_all(struct fake *f)
{
    pthread_mutex_lock(&f->lock);
    land_locked(f, f->issued);
    pthread_mutex_unlock(&f->lock);
}

static tr_status enqueue(int index, const struct work *w, const char *fn)
{
    struct fake *f = &fakes[index];
    tr_status s = TR_OK;

    pthread_mutex_lock(&f->lock);
    if (f->first + f->count == f->cap && f->first > 0) {
        memmove(f->queue, f->queue + f->first, f->count * sizeof *f->queue);
        f->first = 0;
    }
    if (f->count == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct work *q = realloc(f->queue, cap * sizeof *q);
        if (q) {
            f->queue = q;
            f->cap = cap;
        } else {
            s = tr__set_error(TR_ERR_OOM, "%s: fake:%d: out of memory queueing a copy", fn,
                              index);
        }
    }
    if (s == TR_OK) {
        f->queue[f->first + f->count++] = *w;
        f->issued++;
    }
    pthread_mutex_unlock(&f->lock);
    return s;
}

static tr_status fake_copy(int index, void *dst, const void *src, uint64_t bytes,
                           const char *fn)
{
    struct work w = {.kind = WORK_COPY, .dst = dst, .src = src, .bytes = bytes};

    return bytes ? enqueue(index, &w, fn) : TR_OK;
}

static tr_status fake_fill_zero(int index, void *dst, uint64_t bytes, const char *fn)
{
    struct work w = {.kind = WORK_ZERO, .dst = dst, .bytes = bytes};

    return bytes ? enqueue(index, &w, fn) : TR_OK;
}

static tr_status fake_gather(int index, void *dst, const void *src, size_t item, int ndim,
                             const int64_t *shape, const int64_t *strides, const char *fn)
{
    struct work w = {.kind = WORK_GATHER, .dst = dst, .src = src, .item = item, .ndim = ndim};

    memcpy(w.shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(w.strides, strides, (size_t)ndim * sizeof *strides);
    return enqueue(index, &w, fn);
}

static tr_status fake_synchronize(int index, const char *fn)
{
    (void)fn;
    land_all(&fakes[index]);
    return TR_OK;
}

static void fake_event_record(int index, struct tr__event *event)
{
    struct fake *f = &fakes[index];

    pthread_mutex_lock(&f->lock);
    *event = (struct tr__event){.device = TR_FAKE(index), .seq = f->issued};
    pthread_mutex_unlock(&f->lock);
}

static tr_status fake_event_query(struct tr__event *event, bool *done, const char *fn)
{
    struct fake *f = &fakes[event->device.index];

    (void)fn;
    pthread_mutex_lock(&f->lock);
    if (f->landed < event->seq && event->queries++ >= QUERIES_BEFORE_LANDING)
        land_locked(f, event->seq);
    *done = f->landed >= event->seq;
    pthread_mutex_unlock(&f->lock);
    return TR_OK;
}

static tr_status fake_event_wait(struct tr__event *event, const char *fn)
{
    (void)fn;
    land(&fakes[event->device.index], event->seq);
    return TR_OK;
}

/* ------------------------------------------------------------------ pool */

/* The bytes each fake device has, TENSORRUN_FAKE_MEMORY, or 0 for as much
 * as the host gives: read at every segment, so that a test can change it
 * between allocations. */
static uint64_t capacity(void)
{
    const char *env = getenv(MEMORY_ENV);
    char *end;
    unsigned long long n;

    if (!env || !*env)
        return 0;
    errno = 0;
    n = strtoull(env, &end, 10);
    return *end == '\0' && errno == 0 ? (uint64_t)n : 0;
}

/* Segments are plain host memory; ctx is the device's struct fake. */
static void *fake_raw_alloc(void *ctx, uint64_t bytes)
{
    struct fake *f = ctx;
    uint64_t cap = capacity();
    void *p = NULL;
    bool fits;

    pthread_mutex_lock(&f->lock);
    fits = cap == 0 || (f->reserved <= cap && bytes <= cap - f->reserved);
    if (fits)
        f->reserved += bytes;
    pthread_mutex_unlock(&f->lock);
    if (!fits)
        return NULL;
    if (bytes > SIZE_MAX || posix_memalign(&p, 4096, (size_t)bytes) != 0) {
        pthread_mutex_lock(&f->lock);
        f->reserved -= bytes;
        pthread_mutex_unlock(&f->lock);
        return NULL;
    }
    return p;
}

/* Queued work may still write into the segment: it lands first. */
static void fake_raw_free(void *ctx, void *ptr, uint64_t bytes)
{
    struct fake *f = ctx;

    land_all(f);
    free(ptr);
    pthread_mutex_lock(&f->lock);
    f->reserved -= bytes;
    pthread_mutex_unlock(&f->lock);
}

/* The stream's marks are its counts of work issued; a query lands
 * nothing, so a block freed with work queued stays deferred until
 * something waits for that work. */
static uint64_t fake_stream_mark(void *ctx)
{
    struct fake *f = ctx;
    uint64_t mark;

    pthread_mutex_lock(&f->lock);
    mark = f->issued;
    pthread_mutex_unlock(&f->lock);
    return mark;
}

static bool fake_stream_done(void *ctx, uint64_t mark)
{
    struct fake *f = ctx;
    bool done;

    pthread_mutex_lock(&f->lock);
    done = f->landed >= mark;
    pthread_mutex_unlock(&f->lock);
    return done;
}

static void fake_stream_wait(void *ctx, uint64_t mark)
{
    land(ctx, mark);
}

/* Staging buffers are host memory too, outside the pool. */
static void *fake_staging_alloc(int index, uint64_t bytes)
{
    (void)index;
    return bytes <= SIZE_MAX ? malloc((size_t)bytes) : NULL;
}

static void fake_staging_free(int index, void *ptr, uint64_t bytes)
{
    (void)index;
    (void)bytes;
    free(ptr);
}

static void fake_pool_backend(int index, struct tr__pool_backend *out)
{
    *out = (struct tr__pool_backend){.raw_alloc = fake_raw_alloc,
                                     .raw_free = fake_raw_free,
                                     .ctx = &fakes[index],
                                     .stream_mark = fake_stream_mark,
                                     .stream_done = fake_stream_done,
                                     .stream_wait = fake_stream_wait};
}

/* --------------------------------------------------------------- kernels */

/* A kernel is work on the stream like the copies before it: they land
 * first.  Every fake device's, since an op's operands may come from any. */
static tr_status fake_kernel(const struct tr__op *op, const struct tr_arg *args,
                             const struct tr_value *out, const struct tr_dest *dest,
                             struct tr_tensor **results)
{
    for (int i = 0; i < count(); i++)
        land_all(&fakes[i]);
    return tr__kernel_for(op->info.id)(op, args, out, dest, results);
}

static bool fake_supports(const struct tr__backend *self, enum tr_op_id id,
                          const enum tr_dtype *dtypes, int n)
{
    (void)dtypes;
    (void)n;
    return self->kernels[id] != NULL;
}

void tr__backend_fake_init(struct tr__backend *b)
{
    *b = (struct tr__backend){
        .name = "fake",
        .host_memory = true,
        .device_count = count,
        .unavailable_reason = reason,
        .pool_backend = fake_pool_backend,
        .upload = fake_copy,
        .download = fake_copy,
        .fill_zero = fake_fill_zero,
        .gather = fake_gather,
        .staging_alloc = fake_staging_alloc,
        .staging_free = fake_staging_free,
        .supports = fake_supports,
        .synchronize = fake_synchronize,
        .event_record = fake_event_record,
        .event_query = fake_event_query,
        .event_wait = fake_event_wait,
    };
    for (int id = 0; id < TR_OP_COUNT; id++)
        if (id != LEFT_OUT && tr__kernel_for((enum tr_op_id)id))
            b->kernels[id] = fake_kernel;
}
