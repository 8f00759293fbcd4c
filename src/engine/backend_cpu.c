/*
 * backend_cpu.c - the CPU as a backend: its pool's segments are anonymous
 * mappings (pool_cpu.c), copies are memcpy and are done when they return,
 * and its kernels are the ones of kernels.def.
 */
#include "backend_impl.h"

#include <string.h>

void tr__cpu_gather(void *dst, const void *src, size_t item, int ndim, const int64_t *shape,
                    const int64_t *strides)
{
    int64_t dst_strides[TR_MAX_DIMS];

    tr__contiguous_strides(ndim, shape, dst_strides);
    for (int i = 0; i < ndim; i++)
        dst_strides[i] *= (int64_t)item;
    tr__cpu_copy(dst, dst_strides, src, strides, ndim, shape, item);
}

static int cpu_count(void)
{
    return 1;
}

static const char *cpu_reason(void)
{
    return "";
}

static void cpu_pool_backend(int index, struct tr__pool_backend *out)
{
    (void)index;
    *out = tr__cpu_pool_backend;
}

static tr_status cpu_copy(int index, void *dst, const void *src, uint64_t bytes,
                          const char *fn)
{
    (void)index;
    (void)fn;
    memcpy(dst, src, bytes);
    return TR_OK;
}

static tr_status cpu_fill_zero(int index, void *dst, uint64_t bytes, const char *fn)
{
    (void)index;
    (void)fn;
    tr__cpu_fill_zero(dst, bytes);
    return TR_OK;
}

static tr_status cpu_gather(int index, void *dst, const void *src, size_t item, int ndim,
                            const int64_t *shape, const int64_t *strides, const char *fn)
{
    (void)index;
    (void)fn;
    tr__cpu_gather(dst, src, item, ndim, shape, strides);
    return TR_OK;
}

/* The kernels' own checks (tr_op_infer's rule) decide the dtypes. */
static bool cpu_supports(const struct tr__backend *self, enum tr_op_id id,
                         const enum tr_dtype *dtypes, int n)
{
    (void)dtypes;
    (void)n;
    return self->kernels[id] != NULL;
}

static tr_status cpu_synchronize(int index, const char *fn)
{
    (void)index;
    (void)fn;
    return TR_OK;
}

/* Every CPU copy is done when it returns: its events are complete. */
static void cpu_event_record(int index, struct tr__event *event)
{
    (void)index;
    *event = (struct tr__event){.device = TR_CPU};
}

static tr_status cpu_event_query(struct tr__event *event, bool *done, const char *fn)
{
    (void)event;
    (void)fn;
    *done = true;
    return TR_OK;
}

static tr_status cpu_event_wait(struct tr__event *event, const char *fn)
{
    (void)event;
    (void)fn;
    return TR_OK;
}

void tr__backend_cpu_init(struct tr__backend *b)
{
    *b = (struct tr__backend){
        .name = "cpu",
        .host_memory = true,
        .device_count = cpu_count,
        .unavailable_reason = cpu_reason,
        .pool_backend = cpu_pool_backend,
        .upload = cpu_copy,
        .download = cpu_copy,
        .fill_zero = cpu_fill_zero,
        .gather = cpu_gather,
        .supports = cpu_supports,
        .synchronize = cpu_synchronize,
        .event_record = cpu_event_record,
        .event_query = cpu_event_query,
        .event_wait = cpu_event_wait,
    };
    for (int id = 0; id < TR_OP_COUNT; id++)
        b->kernels[id] = tr__kernel_for((enum tr_op_id)id);
}
