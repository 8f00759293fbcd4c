/*
 * backend_impl.h - a device kind as the engine sees it: one table of
 * functions (its pool's segments, copies to and from the host, which ops
 * it runs and their kernels, synchronisation and events), and the helpers
 * through which every other engine file reaches a device.
 *
 * No file outside the backends (backend_*.c) asks what kind a device is
 * to decide how to use it: they look its backend up and call it.  See
 * doc/design.md, "Backends".
 *
 * Work on a device is a stream, done in the order it was issued: copies
 * return once enqueued, and are done when an event recorded after them
 * completes.  Host memory given to a copy must stay valid, and unread,
 * until then.  The CPU's copies are done when they return; the fake
 * device's land only on synchronize, wait, or the second query of an
 * event, so that a missing wait shows in tests.
 */
#ifndef TR_BACKEND_IMPL_H
#define TR_BACKEND_IMPL_H

#include "kernel_impl.h"
#include "pool_impl.h"

#define TR__DEVICE_KINDS 3       /* cpu, cuda, fake: enum tr_device_kind */
#define TR__MAX_DEVICE_INDEX 64  /* devices of one kind, at most */

/* A point in a device's stream: complete once all work issued before it
 * is done.  A value the caller owns; seq 0 is complete from the start. */
struct tr__event {
    struct tr_device device;
    uint64_t seq;    /* the backend's count of work issued before it */
    int queries;     /* queries answered "not yet" so far (the fake's) */
};

struct tr__backend {
    const char *name;   /* as devices of the kind are written: "cpu", "cuda" */
    bool host_memory;   /* the host reaches its memory: CPU kernels run on it */
    /* Devices of the kind that exist (0 .. TR__MAX_DEVICE_INDEX); the
     * first call may load a driver. */
    int (*device_count)(void);
    /* Why there are no devices, or no more than device_count(): a clause
     * for "X is not available: ...". */
    const char *(*unavailable_reason)(void);
    /* The backend of device index's pool (pool_impl.h). */
    void (*pool_backend)(int index, struct tr__pool_backend *out);

    /* Copies on device index's stream; errors begin with fn.  dst and src
     * of upload and download are host memory on one side, device memory
     * on the other; gather writes the strided view at src (byte strides,
     * 0 or negative allowed, src at element 0) compactly at dst, both on
     * the device. */
    tr_status (*upload)(int index, void *dst, const void *src, uint64_t bytes, const char *fn);
    tr_status (*download)(int index, void *dst, const void *src, uint64_t bytes,
                          const char *fn);
    tr_status (*fill_zero)(int index, void *dst, uint64_t bytes, const char *fn);
    tr_status (*gather)(int index, void *dst, const void *src, size_t item, int ndim,
                        const int64_t *shape, const int64_t *strides, const char *fn);

    /* dst = src converted to dtype to, both on device index, both strided
     * (byte strides, dst's never making two elements one), by the rules of
     * tr_copy_into; NULL where the host reaches the memory (the CPU's
     * loops do it). */
    tr_status (*convert)(int index, void *dst, const int64_t *dst_strides, enum tr_dtype to,
                         const void *src, const int64_t *src_strides, enum tr_dtype from,
                         int ndim, const int64_t *shape, const char *fn);

    /* Host memory that uploads are staged in (staging.c; pinned on a
     * GPU), or NULL where an upload reads its source where it lies. */
    void *(*staging_alloc)(int index, uint64_t bytes);
    void (*staging_free)(int index, void *ptr, uint64_t bytes);

    /* Whether op id has a kernel here for tensor operands of these n
     * dtypes (the op's own rule has accepted them). */
    bool (*supports)(const struct tr__backend *self, enum tr_op_id id,
                     const enum tr_dtype *dtypes, int n);
    /* The kernel of each op id, NULL where the backend has none. */
    tr__kernel_fn kernels[TR_OP_COUNT];

    /* Waits until all work issued on device index is done. */
    tr_status (*synchronize)(int index, const char *fn);
    /* Marks the work issued on device index so far. */
    void (*event_record)(int index, struct tr__event *event);
    /* *done: whether the event is complete (the fake answers "not yet"
     * once before it lets the work land). */
    tr_status (*event_query)(struct tr__event *event, bool *done, const char *fn);
    /* Waits until the event is complete. */
    tr_status (*event_wait)(struct tr__event *event, const char *fn);
};

/* The CPU's gather, for every backend whose memory is host memory. */
void tr__cpu_gather(void *dst, const void *src, size_t item, int ndim, const int64_t *shape,
                    const int64_t *strides);

/* Each backend's constructor, run once (backend.c): fills in *b. */
void tr__backend_cpu_init(struct tr__backend *b);
void tr__backend_cuda_init(struct tr__backend *b);
void tr__backend_fake_init(struct tr__backend *b);

/* The backend of a device kind, or NULL for a value outside the enum. */
const struct tr__backend *tr__backend_of(enum tr_device_kind kind);
/* The backend of device when the device exists; NULL with TR_ERR_DEVICE (a
 * message beginning with fn that says why) otherwise. */
const struct tr__backend *tr__backend_for(struct tr_device device, const char *fn);
/* TR_OK when device exists; otherwise TR_ERR_DEVICE as tr__backend_for. */
tr_status tr__device_check(struct tr_device device, const char *fn);

/* Copies that are done when they return: the backend's copy, then a wait
 * for it.  Errors begin with fn. */
tr_status tr__device_fill_zero(struct tr_device device, void *dst, uint64_t bytes,
                               const char *fn);
tr_status tr__device_upload(struct tr_device device, void *dst, const void *src,
                            uint64_t bytes, const char *fn);
tr_status tr__device_download(struct tr_device device, void *dst, const void *src,
                              uint64_t bytes, const char *fn);
tr_status tr__device_gather(struct tr_device device, void *dst, const void *src, size_t item,
                            int ndim, const int64_t *shape, const int64_t *strides,
                            const char *fn);

/* The ring of staging.c: this many buffers of this many bytes, from the
 * backend's staging_alloc, for one upload at a time; outside the pool. */
#define TR__STAGING_SLOTS 2
#define TR__STAGING_BYTES (4 << 20)

/* Whether tr_to(t, to) from the host goes through staging buffers: to's
 * backend has them, t is not tagged PINNED (that is copied as it lies)
 * and has elements, and t is compact or one slice of its dimension 0 fits
 * a buffer (else it is made compact on the host first). */
bool tr__staging_takes(const struct tr_tensor *t, struct tr_device to);
/* t's values, compact, into dst on device to through the ring; done (and
 * t's memory no longer read) when it returns.  Errors begin with fn. */
tr_status tr__staging_upload(struct tr_device to, void *dst, const struct tr_tensor *t,
                             const char *fn);

/* Events of a device's stream, through its backend. */
tr_status tr__event_record(struct tr_device device, struct tr__event *event, const char *fn);
tr_status tr__event_query(struct tr__event *event, bool *done, const char *fn);
tr_status tr__event_wait(struct tr__event *event, const char *fn);

/*
 * The kernel that runs op info on args: the one of the backend of the
 * device the tensor operands are on (the results' device, out[0], for an
 * op without any).  TR_ERR_DEVICE when the operands are on different
 * devices or that backend has no kernel for the op (the CPU has one);
 * TR_ERR_STATE when no backend has one yet.
 */
tr_status tr__kernel_select(const struct tr_op_info *info, const struct tr_arg *args,
                            const struct tr_value *out, tr__kernel_fn *kernel);

#endif /* TR_BACKEND_IMPL_H */
