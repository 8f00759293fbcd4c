/*
 * staging.c - host to device through a ring of staging buffers.
 *
 * A copy from pageable host memory (a mapped file, borrowed memory) is
 * cut into chunks of at most TR__STAGING_BYTES; each chunk is read into
 * one of TR__STAGING_SLOTS buffers of the device's staging memory (pinned
 * on a GPU) and its upload queued from there, so that reading the next
 * chunk (page faults of the file included) overlaps the device's copy of
 * this one.  A slot is filled again only once the event recorded after
 * its last upload is complete.  A strided view goes up the same way, a
 * run of its dimension-0 slices gathered into each chunk, so that no
 * compact copy of it is made on the host.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "iter_impl.h"

struct ring {
    const struct tr__backend *b;
    struct tr_device to;
    void *buf[TR__STAGING_SLOTS];
    struct tr__event done[TR__STAGING_SLOTS];
    bool busy[TR__STAGING_SLOTS];
    const char *fn;
};

/* The slot for chunk number c, free to fill: its last upload waited for. */
static tr_status take_slot(struct ring *r, uint64_t c, void **buf)
{
    int slot = (int)(c % TR__STAGING_SLOTS);

    if (r->busy[slot])
        TR_FORWARD_IF_ERROR(r->b->event_wait(&r->done[slot], r->fn));
    r->busy[slot] = false;
    if (!r->buf[slot]) {
        r->buf[slot] = r->b->staging_alloc(r->to.index, TR__STAGING_BYTES);
        TR_RETURN_ERROR_IF(!r->buf[slot], TR_ERR_OOM,
                           "%s: out of host memory for a staging buffer of %d MiB", r->fn,
                           TR__STAGING_BYTES >> 20);
    }
    *buf = r->buf[slot];
    return TR_OK;
}

/* Queues the upload of n bytes of the filled slot of chunk c to dst. */
static tr_status send_slot(struct ring *r, uint64_t c, void *dst, uint64_t n)
{
    int slot = (int)(c % TR__STAGING_SLOTS);

    TR_FORWARD_IF_ERROR(r->b->upload(r->to.index, dst, r->buf[slot], n, r->fn));
    r->b->event_record(r->to.index, &r->done[slot]);
    r->busy[slot] = true;
    return TR_OK;
}

/* Waits for every queued upload (the source may go once this returns),
 * and frees the buffers; s is the status so far, returned unless a wait
 * fails first. */
static tr_status finish(struct ring *r, tr_status s)
{
    for (int i = 0; i < TR__STAGING_SLOTS; i++) {
        if (r->busy[i]) {
            tr_status w = r->b->event_wait(&r->done[i], r->fn);
            if (s == TR_OK)
                s = w;
        }
        if (r->buf[i])
            r->b->staging_free(r->to.index, r->buf[i], TR__STAGING_BYTES);
    }
    return s;
}

bool tr__staging_takes(const struct tr_tensor *t, struct tr_device to)
{
    const struct tr__backend *b = tr__backend_of(to.kind);
    int64_t row = tr_dtype_size(t->dtype);

    if (!b || !b->staging_alloc || (t->storage->flags & TR_FLAG_PINNED) ||
        tr_tensor_numel(t) == 0)
        return false;
    if (tr__is_contiguous(t->ndim, t->shape, t->strides))
        return true;
    for (int i = 1; i < t->ndim; i++)
        row *= t->shape[i];
    return row <= TR__STAGING_BYTES;
}

/* t's bytes, compact, a chunk at a time. */
static tr_status upload_compact(struct ring *r, char *dst, const struct tr_tensor *t)
{
    const char *src = t->storage->data + t->offset;
    uint64_t bytes = tr_tensor_nbytes(t), c = 0;
    tr_status s = TR_OK;
    void *buf;

    for (uint64_t at = 0; at < bytes && s == TR_OK; at += TR__STAGING_BYTES, c++) {
        uint64_t n = bytes - at < TR__STAGING_BYTES ? bytes - at : TR__STAGING_BYTES;
        s = take_slot(r, c, &buf);
        if (s == TR_OK) {
            memcpy(buf, src + at, n);
            s = send_slot(r, c, dst + at, n);
        }
    }
    return s;
}

/* A strided t, as many of its dimension-0 slices a chunk as fit, each
 * chunk gathered compact (a slice fits: tr__staging_takes). */
static tr_status upload_rows(struct ring *r, char *dst, const struct tr_tensor *t)
{
    const char *src = t->storage->data + t->offset;
    int64_t strides[TR_MAX_DIMS], item = (int64_t)tr_dtype_size(t->dtype), row = item, rows;
    uint64_t c = 0;
    tr_status s = TR_OK;
    void *buf;

    tr__byte_strides(t, strides);
    for (int i = 1; i < t->ndim; i++)
        row *= t->shape[i];
    rows = TR__STAGING_BYTES / row;
    for (int64_t r0 = 0; r0 < t->shape[0] && s == TR_OK; r0 += rows, c++) {
        int64_t shape[TR_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        shape[0] = t->shape[0] - r0 < rows ? t->shape[0] - r0 : rows;
        s = take_slot(r, c, &buf);
        if (s == TR_OK) {
            tr__cpu_gather(buf, src + r0 * strides[0], (size_t)item, t->ndim, shape, strides);
            s = send_slot(r, c, dst + r0 * row, (uint64_t)(shape[0] * row));
        }
    }
    return s;
}

tr_status tr__staging_upload(struct tr_device to, void *dst, const struct tr_tensor *t,
                             const char *fn)
{
    struct ring r = {.b = tr__backend_for(to, fn), .to = to, .fn = fn};

    if (!r.b)
        return tr_last_status();
    return finish(&r, tr__is_contiguous(t->ndim, t->shape, t->strides)
                          ? upload_compact(&r, dst, t)
                          : upload_rows(&r, dst, t));
}
