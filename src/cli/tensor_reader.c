/*
 * tensor_reader.c - a tensor read a run of elements at a time: in place,
 * from a stream, or copied out of a strided view (see tensor_reader.h).
 */
#include "config.h"

#include "tensor_reader.h"

#include <stdlib.h>

#include "cli.h"
#include "msg.h"

struct tensor_reader {
    struct tio_file *file;
    size_t index;
    enum tr_dtype own, dtype;
    int64_t numel, run, pos;
    bool streamed;               /* read from the stream, a run at a time */
    struct tr_tensor *whole;     /* otherwise: loaded (a view, or a copy) */
    const char *in_place;        /* whole's data, when it is compact and of dtype */
    struct tr_tensor *raw;       /* a stream's run as read (its own dtype) */
    struct tr_tensor *out;       /* a run of dtype, as given */
    struct tio_readahead *ra;
    const char *last;            /* the run given in place before, and its bytes */
    uint64_t last_bytes;
};

static int64_t count_of(const struct tio_entry *e)
{
    int64_t n = 1;

    for (int d = 0; d < e->ndim; d++)
        n *= e->shape[d]; /* a file's header is checked: no overflow */
    return n;
}

/* A pool block of n elements of dtype, held by the reader. */
static struct tr_tensor *block(enum tr_dtype dtype, int64_t n)
{
    struct tr_tensor *t = tr_empty(dtype, 1, (int64_t[]){n > 0 ? n : 1}, TR_CPU);

    if (t && tr_detach(t) != TR_OK) {
        tr_release(t);
        return NULL;
    }
    return t;
}

struct tensor_reader *tensor_reader_open(struct tio_file *file, size_t index, const char *path,
                                         enum tr_dtype dtype, int64_t run, uint64_t drop_above)
{
    const struct tio_entry *e = tio_file_entry(file, index);
    struct tensor_reader *r = calloc(1, sizeof *r);
    bool ok = r != NULL;

    if (!r) {
        tr_set_error(TR_ERR_OOM, "out of memory");
        return NULL;
    }
    r->file = file;
    r->index = index;
    r->own = e->dtype;
    r->dtype = dtype;
    r->numel = count_of(e);
    r->run = run < r->numel ? run : r->numel;
    r->streamed = tio_file_streams_rows(file, index);
    if (r->streamed) {
        r->raw = block(r->own, r->run);
        ok = r->raw && (dtype == r->own || (r->out = block(dtype, r->run)));
    } else {
        r->whole = tio_file_load(file, index);
        ok = r->whole && tr_detach(r->whole) == TR_OK;
        if (ok && tr_tensor_is_contiguous(r->whole) && dtype == r->own) {
            r->in_place = tr_tensor_data(r->whole);
            r->ra = tio_readahead_open(r->whole, path, e->offset, drop_above);
        } else if (ok) {
            ok = (r->out = block(dtype, r->run)) != NULL;
        }
    }
    if (!ok) {
        tensor_reader_close(r);
        return NULL;
    }
    return r;
}

/*
 * Copies n elements of t from row-major element from on into dst (a
 * compact 1-d view of n elements): whole leading rows as one view each,
 * a partial row by recursing into it.
 */
static tr_status copy_run(struct tr_tensor *dst, const struct tr_tensor *t, int64_t from,
                          int64_t n)
{
    int ndim = tr_tensor_ndim(t);
    const int64_t *shape = tr_tensor_shape(t);
    int64_t row = 1, done = 0;

    if (ndim == 0)
        return tr_copy_into(dst, tr_reshape_view(t, (int64_t[]){1}, 1));
    for (int d = 1; d < ndim; d++)
        row *= shape[d];
    while (done < n) {
        int64_t i = (from + done) / row, off = (from + done) % row, k;
        struct tr_tensor *part;
        if (off != 0 || n - done < row) {
            k = row - off < n - done ? row - off : n - done;
            part = tr_slice(dst, 0, done, done + k, 1);
            TR_FORWARD_IF_ERROR(part ? copy_run(part, tr_select(t, 0, i), off, k)
                                     : tr_last_status());
        } else {
            int64_t rows = (n - done) / row, view[TR_MAX_DIMS];
            const struct tr_tensor *src = tr_slice(t, 0, i, i + rows, 1);
            k = rows * row;
            view[0] = rows;
            for (int d = 1; d < ndim; d++)
                view[d] = shape[d];
            part = tr_slice(dst, 0, done, done + k, 1);
            part = part ? tr_reshape_view(part, view, ndim) : NULL;
            if (!src || !part)
                return tr_last_status();
            TR_FORWARD_IF_ERROR(tr_copy_into(part, src));
        }
        done += k;
    }
    return TR_OK;
}

const void *tensor_reader_next(struct tensor_reader *r, int64_t n)
{
    size_t own_size = tr_dtype_size(r->own);
    struct tr_scope *scope;
    tr_status s = TR_OK;

    if (n > r->run || n > r->numel - r->pos) {
        tr_set_error(TR_ERR_STATE, "a run of %lld elements past the tensor's end",
                     (long long)n);
        return NULL;
    }
    if (r->in_place) {
        const char *p = r->in_place + (size_t)r->pos * own_size;
        uint64_t bytes = (uint64_t)n * own_size;
        if (r->last)
            tio_readahead_done(r->ra, r->last, r->last_bytes);
        if (r->pos + n < r->numel)
            tio_readahead_next(r->ra, p + bytes, bytes);
        r->last = p;
        r->last_bytes = bytes;
        r->pos += n;
        return p;
    }
    scope = tr_scope_begin();
    if (!scope) {
        tr_set_error(TR_ERR_OOM, "out of memory");
        return NULL;
    }
    if (r->streamed) {
        s = tio_file_read_next(r->file, r->index, tr_tensor_data_mut(r->raw),
                               (uint64_t)n * own_size);
        if (s == TR_OK && r->out) {
            struct tr_tensor *dst = tr_slice(r->out, 0, 0, n, 1);
            const struct tr_tensor *src = tr_slice(r->raw, 0, 0, n, 1);
            s = dst && src ? tr_copy_into(dst, src) : tr_last_status();
        }
    } else {
        struct tr_tensor *dst = tr_slice(r->out, 0, 0, n, 1);
        s = dst ? copy_run(dst, r->whole, r->pos, n) : tr_last_status();
    }
    tr_scope_end(scope, NULL, 0);
    if (s != TR_OK)
        return NULL;
    r->pos += n;
    return tr_tensor_data(r->out ? r->out : r->raw);
}

int64_t tensor_reader_position(const struct tensor_reader *r)
{
    return r->pos;
}

tr_status tensor_reader_order(struct tio_file *file, const size_t *index, size_t n)
{
    uint64_t next = 0;

    for (size_t i = 0; i < n; i++) {
        const struct tio_entry *e = tio_file_entry(file, index[i]);
        if (e->offset < next)
            return tio_file_read_deferred(file);
        next = e->offset + e->nbytes + (e->nbytes == 0);
    }
    return TR_OK;
}

bool drop_behind_threshold(uint64_t *out)
{
    const char *v = getenv("TENSORRUN_DROP_BEHIND");

    *out = tio_readahead_default_threshold();
    if (!v || parse_size(v, out))
        return true;
    msg_error(NULL, "TENSORRUN_DROP_BEHIND=%s is not a size in bytes (such as 64M)", v);
    return false;
}

void tensor_reader_close(struct tensor_reader *r)
{
    if (!r)
        return;
    tio_readahead_close(r->ra);
    tr_release(r->whole);
    tr_release(r->raw);
    tr_release(r->out);
    free(r);
}
