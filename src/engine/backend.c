/*
 * backend.c - the table of backends, one per device kind, and what the
 * rest of the engine asks of a device through it: checks, copies that
 * are done when they return, events, and which kernel runs an op.
 */
#include "backend_impl.h"

#include <pthread.h>
#include <stdio.h>

static struct tr__backend backends[TR__DEVICE_KINDS];
static pthread_once_t backends_once = PTHREAD_ONCE_INIT;

static void backends_init(void)
{
    tr__backend_cpu_init(&backends[TR_DEV_CPU]);
    tr__backend_cuda_init(&backends[TR_DEV_CUDA]);
    tr__backend_fake_init(&backends[TR_DEV_FAKE]);
}

const struct tr__backend *tr__backend_of(enum tr_device_kind kind)
{
    if ((unsigned)kind >= TR__DEVICE_KINDS)
        return NULL;
    pthread_once(&backends_once, backends_init);
    return &backends[kind];
}

const char *tr_device_unavailable_reason(struct tr_device device)
{
    static _Thread_local char why[128];
    const struct tr__backend *b = tr__backend_of(device.kind);
    int count;

    if (b && tr_device_available(device))
        return "";
    if (!b || device.index < 0 || device.index >= TR__MAX_DEVICE_INDEX)
        return "there is no such device";
    count = b->device_count();
    if (count == 0)
        return b->unavailable_reason();
    snprintf(why, sizeof why, "there %s only %d %s device%s", count == 1 ? "is" : "are", count,
             b->name, count == 1 ? "" : "s");
    return why;
}

const struct tr__backend *tr__backend_for(struct tr_device device, const char *fn)
{
    const struct tr__backend *b = tr__backend_of(device.kind);
    char name[TR_DEVICE_NAME_MAX];

    if (b && tr_device_available(device))
        return b;
    TR_RETURN_NULL_IF(!b || device.index < 0 || device.index >= TR__MAX_DEVICE_INDEX,
                      TR_ERR_DEVICE, "%s: unknown device", fn);
    tr__set_error(TR_ERR_DEVICE, "%s: %s is not available: %s", fn,
                  tr_device_format(device, name, sizeof name),
                  tr_device_unavailable_reason(device));
    return NULL;
}

tr_status tr__device_check(struct tr_device device, const char *fn)
{
    return tr__backend_for(device, fn) ? TR_OK : tr_last_status();
}

/* ---------------------------------------------------------------- events */

tr_status tr__event_record(struct tr_device device, struct tr__event *event, const char *fn)
{
    const struct tr__backend *b = tr__backend_for(device, fn);

    if (!b)
        return tr_last_status();
    b->event_record(device.index, event);
    return TR_OK;
}

tr_status tr__event_query(struct tr__event *event, bool *done, const char *fn)
{
    const struct tr__backend *b = tr__backend_for(event->device, fn);

    if (!b)
        return tr_last_status();
    return b->event_query(event, done, fn);
}

tr_status tr__event_wait(struct tr__event *event, const char *fn)
{
    const struct tr__backend *b = tr__backend_for(event->device, fn);

    if (!b)
        return tr_last_status();
    return b->event_wait(event, fn);
}

tr_status tr_device_synchronize(struct tr_device device)
{
    const struct tr__backend *b = tr__backend_for(device, "synchronize");

    if (!b)
        return tr_last_status();
    return b->synchronize(device.index, "synchronize");
}

/* ------------------------------------------------------ copies, waited for */

/* Waits for what status's copy enqueued on device (nothing when it failed). */
static tr_status wait_for(const struct tr__backend *b, struct tr_device device, tr_status status,
                          const char *fn)
{
    struct tr__event done;

    if (status != TR_OK)
        return status;
    b->event_record(device.index, &done);
    return b->event_wait(&done, fn);
}

tr_status tr__device_fill_zero(struct tr_device device, void *dst, uint64_t bytes,
                               const char *fn)
{
    const struct tr__backend *b = tr__backend_for(device, fn);

    if (!b)
        return tr_last_status();
    return wait_for(b, device, b->fill_zero(device.index, dst, bytes, fn), fn);
}

tr_status tr__device_upload(struct tr_device device, void *dst, const void *src,
                            uint64_t bytes, const char *fn)
{
    const struct tr__backend *b = tr__backend_for(device, fn);

    if (!b)
        return tr_last_status();
    return wait_for(b, device, b->upload(device.index, dst, src, bytes, fn), fn);
}

tr_status tr__device_download(struct tr_device device, void *dst, const void *src,
                              uint64_t bytes, const char *fn)
{
    const struct tr__backend *b = tr__backend_for(device, fn);

    if (!b)
        return tr_last_status();
    return wait_for(b, device, b->download(device.index, dst, src, bytes, fn), fn);
}

tr_status tr__device_gather(struct tr_device device, void *dst, const void *src, size_t item,
                            int ndim, const int64_t *shape, const int64_t *strides,
                            const char *fn)
{
    const struct tr__backend *b = tr__backend_for(device, fn);

    if (!b)
        return tr_last_status();
    return wait_for(b, device,
                    b->gather(device.index, dst, src, item, ndim, shape, strides, fn), fn);
}

/* ------------------------------------------------------------------ ops */

/* The device of the first tensor among args (and the items of lists), in
 * *device; TR_ERR_DEVICE when another is elsewhere. */
static tr_status operand_device(const struct tr_op_info *info, const struct tr_arg *args,
                                int nargs, bool *found, struct tr_device *device)
{
    char a[TR_DEVICE_NAME_MAX], b[TR_DEVICE_NAME_MAX];

    for (int i = 0; i < nargs; i++) {
        const struct tr_tensor *t = args[i].tensor;
        if (args[i].value.kind == TR_VALUE_LIST && args[i].items)
            TR_FORWARD_IF_ERROR(operand_device(info, args[i].items, (int)args[i].value.count,
                                               found, device));
        if (!t)
            continue;
        if (!*found) {
            *device = t->storage->device;
            *found = true;
            continue;
        }
        TR_RETURN_ERROR_IF(!tr_device_equal(*device, t->storage->device), TR_ERR_DEVICE,
                           "%s: the operands are on different devices (%s and %s); move one "
                           "with to()",
                           info->name, tr_device_format(*device, a, sizeof a),
                           tr_device_format(t->storage->device, b, sizeof b));
    }
    return TR_OK;
}

tr_status tr__kernel_select(const struct tr_op_info *info, const struct tr_arg *args,
                            const struct tr_value *out, tr__kernel_fn *kernel)
{
    struct tr_device device = out[0].device;
    const struct tr__backend *b;
    char name[TR_DEVICE_NAME_MAX];
    bool found = false;

    TR_FORWARD_IF_ERROR(operand_device(info, args, info->nparams, &found, &device));
    b = tr__backend_for(device, info->name);
    if (!b)
        return tr_last_status();
    *kernel = b->kernels[info->id];
    if (*kernel)
        return TR_OK;
    TR_RETURN_ERROR_IF(info->nresults == 0, TR_ERR_INVALID,
                       "%s: gives as many results as pieces; cut x with tr_op_pieces and "
                       "take each piece with narrow", info->name);
    TR_RETURN_ERROR_IF(!tr__backend_of(TR_DEV_CPU)->kernels[info->id], TR_ERR_STATE,
                       "%s: this op cannot run yet (its kernel is not written)", info->name);
    return tr__set_error(TR_ERR_DEVICE,
                         "%s: %s has no kernel for this op (the %s backend does not support "
                         "it); move the operands to the CPU with to()",
                         info->name, tr_device_format(device, name, sizeof name), b->name);
}

bool tr_device_supports(struct tr_device device, enum tr_op_id id, const enum tr_dtype *dtypes,
                        int n)
{
    const struct tr__backend *b = tr__backend_of(device.kind);

    return b && (unsigned)id < TR_OP_COUNT && b->supports(b, id, dtypes, n);
}
