/*
 * cpu/select.c - choosing and moving elements: topk, sort, argsort,
 * gather, index_select, take_along_dim, one_hot, concat, stack.
 *
 * Sorting is stable and puts NaN last in ascending and first in
 * descending order (tensorrun-pipeline(5), OPS: sort): each value becomes a 64-bit key
 * whose unsigned order is the wanted order (sort_key.h; all bits inverted
 * for descending; bool as 0 and 1, false first, as PyTorch sorts it), and
 * the keys are merge-sorted with their indices, so that equal keys keep
 * their index order.
 */
#include <math.h>
#include <string.h>

#include "../kernel_impl.h"
#include "../kernels.h"
#include "../scratch_impl.h"
#include "../sort_key.h"

/* Values read and converted at a time. */
#define BLOCK 2048
/* Elements below which a loop is not worth the threads. */
#define PARALLEL_ELEMENTS 32768
/* topk keeps its k best in a sorted array up to this k, else sorts all. */
#define PARTIAL_K 128

/* Copies one element of size bytes. */
static inline void copy_item(char *dst, const char *src, size_t size)
{
    switch (size) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* ----------------------------------------------------------------- sort */

struct entry {
    uint64_t key;
    int64_t index;
};

/* The dtype a row is read in to make keys: f64 holds every float exactly,
 * i64 and u64 every integer. */
static enum tr_dtype key_dtype(enum tr_dtype d)
{
    return tr_dtype_is_float(d) ? TR_DTYPE_F64 : tr__compute_dtype(d);
}

/* Keys whose unsigned order is ascending order, NaN last; inverted for
 * descending order, NaN first. */
static void make_keys(uint64_t *keys, const char *values, enum tr_dtype kd, int64_t n,
                      bool descending)
{
    uint64_t flip = descending ? UINT64_MAX : 0;

    for (int64_t i = 0; i < n; i++) {
        uint64_t k;
        if (kd == TR_DTYPE_F64)
            k = tr__sort_key_f64(((const double *)(const void *)values)[i]);
        else if (kd == TR_DTYPE_I64)
            k = tr__sort_key_i64(((const int64_t *)(const void *)values)[i]);
        else
            k = ((const uint64_t *)(const void *)values)[i];
        keys[i] = k ^ flip;
    }
}

/* Sorts a[0..n) by key, stably, with tmp as room for n more. */
static void merge_sort(struct entry *a, struct entry *tmp, int64_t n)
{
    const int64_t run = 16;
    struct entry *src = a, *dst = tmp, *swap;

    for (int64_t lo = 0; lo < n; lo += run) {
        int64_t hi = lo + run < n ? lo + run : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            struct entry e = a[i];
            int64_t j = i;
            while (j > lo && a[j - 1].key > e.key) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = e;
        }
    }
    for (int64_t width = run; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            /* from the right only when strictly smaller: stable */
            while (i < mid && j < hi)
                dst[k++] = src[j].key < src[i].key ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        swap = src;
        src = dst;
        dst = swap;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

/* Offers e, whose index is above every index in best[0..*count), to the
 * sorted best k: it goes after the equal keys already there. */
static void offer(struct entry *best, int64_t *count, int64_t k, struct entry e)
{
    int64_t lo = 0, hi = *count;

    if (*count == k && e.key >= best[k - 1].key)
        return;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (best[mid].key <= e.key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (*count < k)
        (*count)++;
    memmove(best + lo + 1, best + lo, (size_t)(*count - 1 - lo) * sizeof *best);
    best[lo] = e;
}

/* Whether a line's k first entries are kept in a sorted array as the
 * values go by, rather than found by sorting them all. */
static bool keeps_best(int64_t k, int64_t n)
{
    return k <= PARTIAL_K && k < n;
}

/* Columns a thread's panel holds (see top_panel). */
#define PANEL 512

/* Whether topk along dim d of a shape goes through top_panel: its k best
 * are kept as the values go by, and a dim after d (the last) gives
 * neighbouring lines whose values sit side by side in a row. */
static bool by_panels(int64_t k, int64_t n, int d, int ndim)
{
    return keeps_best(k, n) && d < ndim - 1;
}

/* The room top_panel needs for a panel of width columns: each column's k
 * entries, its count and its two thresholds (a value and a key), and a row
 * of values and keys. */
static int64_t panel_bytes(int64_t k, int64_t width)
{
    return width * (k * (int64_t)sizeof(struct entry) + 5 * 8);
}

/* The room select_line needs for k of n: the entries (k kept, or all n
 * and as many again to merge), and a block of values read as keys. */
static int64_t room_bytes(int64_t k, int64_t n)
{
    int64_t entries = k, bytes;

    /* past int64 (a shape from a hostile header: nothing that runs), the
     * figure saturates and passes any limit */
    if ((!keeps_best(k, n) && __builtin_mul_overflow(n, 2, &entries)) ||
        __builtin_mul_overflow(entries, (int64_t)sizeof(struct entry), &bytes) ||
        __builtin_add_overflow(bytes, BLOCK * 8, &bytes))
        return INT64_MAX;
    return bytes;
}

uint64_t tr__sort_scratch(const struct tr_value *x, int64_t dim, int64_t k, int threads)
{
    int d = tr__checked_dim(dim, x->ndim);
    int64_t n = x->ndim ? x->shape[d] : 1, numel = 1, lines, width;
    uint64_t team, room;

    for (int i = 0; i < x->ndim; i++)
        numel *= x->shape[i];
    if (numel == 0 || k == 0)
        return 0; /* no result values: tr__k_sort returns before its room */
    lines = numel / n;
    /* as tr__k_sort: one line's (or one panel's) room for each thread of
     * its team */
    team = lines > 1 && lines * n > PARALLEL_ELEMENTS ? (uint64_t)threads : 1;
    if (by_panels(k, n, d, x->ndim)) {
        width = x->shape[x->ndim - 1] < PANEL ? x->shape[x->ndim - 1] : PANEL;
        room = (uint64_t)panel_bytes(k, width);
    } else {
        room = (uint64_t)room_bytes(k, n);
    }
    return room > UINT64_MAX / team ? UINT64_MAX : team * room;
}

/* The k first entries, in the order asked for, of a line of n values
 * (dtype, at line with a stride of stride bytes); room is room_bytes(k,
 * n) bytes.  Returns where they are, in room. */
static const struct entry *select_line(int64_t k, const char *line, int64_t stride,
                                       enum tr_dtype dtype, int64_t n, bool descending,
                                       char *room)
{
    enum tr_dtype kd = key_dtype(dtype);
    bool partial = keeps_best(k, n);
    struct entry *entries = (struct entry *)(void *)room;
    char *values = room + (partial ? k : 2 * n) * (int64_t)sizeof(struct entry);
    uint64_t keys[BLOCK];
    int64_t count = 0;

    if (k == 0)
        return entries;
    for (int64_t first = 0; first < n; first += BLOCK) {
        int64_t m = n - first < BLOCK ? n - first : BLOCK;
        tr__cpu_cast_row(values, 8, kd, line + first * stride, stride, dtype, m);
        make_keys(keys, values, kd, m, descending);
        for (int64_t i = 0; i < m; i++) {
            struct entry e = {keys[i], first + i};
            if (partial)
                offer(entries, &count, k, e);
            else
                entries[first + i] = e;
        }
    }
    if (!partial)
        merge_sort(entries, entries + n, n);
    return entries;
}

/* The value whose key (make_keys) is key. */
static double value_of_key(uint64_t key, bool descending)
{
    uint64_t bits;
    double v;

    if (descending)
        key = ~key;
    if (key == UINT64_MAX)
        return NAN;
    bits = key >> 63 ? key ^ (UINT64_C(1) << 63) : ~key;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* Offers float value v at row r to a column's k best, and keeps its
 * threshold, the k-th best value once there are k. */
static void offer_value(struct entry *best, int64_t *count, double *limit, int64_t k, double v,
                        int64_t r, bool descending)
{
    uint64_t key;

    make_keys(&key, (const char *)&v, TR_DTYPE_F64, 1, descending);
    offer(best, count, k, (struct entry){key, r});
    if (*count == k)
        *limit = value_of_key(best[k - 1].key, descending);
}

/* Where a panel's lines are: width neighbouring lines (columns), each of
 * n values stepping xs bytes, the columns cs bytes apart. */
struct panel {
    const char *x;
    int64_t n, xs, cs, width;
};

/*
 * The k best of each of a panel's columns, found row by row: a row's
 * values are read side by side (one pass over x in memory order, where
 * select_line would stride down each column), and only a value that beats
 * its column's k-th best so far is offered.  A float value is first held
 * against that k-th value as a double (a NaN threshold lets every value
 * through), so that the rare candidate alone becomes a key; a value equal
 * to the threshold is not offered, as offer would refuse it.  The columns
 * end exactly as select_line leaves them.  Returns the first column's
 * entries; column c's are k further on for each c.
 */
static const struct entry *top_panel(const struct panel *p, int64_t k, enum tr_dtype dtype,
                                     bool descending, char *room)
{
    enum tr_dtype kd = key_dtype(dtype);
    int64_t w = p->width;
    struct entry *best = (struct entry *)(void *)room;
    int64_t *count = (int64_t *)(void *)(room + w * k * (int64_t)sizeof *best);
    double *limit = (double *)(void *)(count + w);
    uint64_t *limit_key = (uint64_t *)(void *)(limit + w);
    char *values = (char *)(limit_key + w);
    uint64_t *keys = (uint64_t *)(void *)(values + w * 8);

    for (int64_t c = 0; c < w; c++) {
        count[c] = 0;
        limit[c] = NAN;
        limit_key[c] = 0;
    }
    for (int64_t r = 0; r < p->n; r++) {
        if (dtype == TR_DTYPE_F32) { /* read in place: a double holds each exactly */
            const char *row = p->x + r * p->xs;
            for (int64_t c = 0; c < w; c++) {
                float f;
                double v;
                memcpy(&f, row + c * p->cs, sizeof f);
                v = f;
                if (!(descending ? v <= limit[c] : v >= limit[c]))
                    offer_value(best + c * k, &count[c], &limit[c], k, v, r, descending);
            }
            continue;
        }
        tr__cpu_cast_row(values, 8, kd, p->x + r * p->xs, p->cs, dtype, w);
        if (kd == TR_DTYPE_F64) {
            const double *v = (const double *)(const void *)values;
            for (int64_t c = 0; c < w; c++)
                if (!(descending ? v[c] <= limit[c] : v[c] >= limit[c]))
                    offer_value(best + c * k, &count[c], &limit[c], k, v[c], r, descending);
        } else {
            make_keys(keys, values, kd, w, descending);
            for (int64_t c = 0; c < w; c++) {
                if (count[c] == k && keys[c] >= limit_key[c])
                    continue;
                offer(best + c * k, &count[c], k, (struct entry){keys[c], r});
                if (count[c] == k)
                    limit_key[c] = best[c * k + k - 1].key;
            }
        }
    }
    return best;
}

/*
 * topk(x, k, dim, largest, sorted), sort(x, dim, descending) and
 * argsort(x, dim, descending), line by line along dim: the values (x's
 * own bytes, copied) and their indices.  topk's results are always
 * sorted.
 */
tr_status tr__k_sort(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    bool topk = op->rule == TR__RULE_TOPK, argsort = op->rule == TR__RULE_ARGSORT;
    struct tr_tensor *x, *made[2] = {NULL, NULL}, *scratch = NULL;
    struct tr_tensor *values = NULL, *indices = NULL;
    int64_t n, k, lines, xs, os, line_bytes, columns = 1, width = 1;
    int64_t other_shape[TR_MAX_DIMS], other_x[TR_MAX_DIMS], other_o[TR_MAX_DIMS];
    int64_t out_strides[TR_MAX_DIMS];
    size_t item;
    bool descending, parallel, panels;
    char *room;
    int d, nother = 0, threads;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    d = tr__checked_dim(args[topk ? 2 : 1].value.integer, x->ndim);
    descending = topk ? args[3].value.boolean : args[2].value.boolean;
    n = x->ndim ? x->shape[d] : 1;
    xs = x->ndim ? x->strides[d] * (int64_t)tr_dtype_size(x->dtype) : 0;
    k = topk ? args[1].value.integer : n;
    if (topk && x->ndim == 0)
        k = 1; /* the result is the scalar itself (tr_op_infer kept its shape) */
    item = tr_dtype_size(x->dtype);
    for (int i = 0; s == TR_OK && i < op->info.nresults; i++) {
        made[i] = tr__empty(name, out[i].dtype, out[i].ndim, out[i].shape, out[i].device);
        if (!made[i])
            s = tr_last_status();
    }
    if (s != TR_OK || tr_tensor_numel(made[0]) == 0) {
        tr_release(x);
        return tr__give_results(made, op->info.nresults, s, results);
    }
    values = argsort ? NULL : made[0];
    indices = argsort ? made[0] : made[1];
    tr__contiguous_strides(out->ndim, out->shape, out_strides);
    os = out->ndim ? out_strides[d] : 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i == d)
            continue;
        other_shape[nother] = x->shape[i];
        other_x[nother] = x->strides[i] * (int64_t)item;
        other_o[nother++] = out_strides[i];
    }
    lines = tr_tensor_numel(x) / n;
    parallel = lines > 1 && lines * n > PARALLEL_ELEMENTS;
    threads = tr__team_size(parallel);
    panels = topk && by_panels(k, n, d, x->ndim);
    if (panels) {
        columns = x->shape[x->ndim - 1];
        width = columns < PANEL ? columns : PANEL;
        line_bytes = panel_bytes(k, width);
    } else {
        line_bytes = room_bytes(k, n);
    }
    scratch = tr__empty(name, TR_DTYPE_U8, 2, (int64_t[]){threads, line_bytes},
                        made[0]->storage->device);
    if (!scratch) {
        tr_release(x);
        return tr__give_results(made, op->info.nresults, tr_last_status(), results);
    }
    room = scratch->storage->data + scratch->offset;
    {
        const char *xbase = tr_tensor_data(x);
        char *vbase = values ? values->storage->data + values->offset : NULL;
        int64_t *ibase = (int64_t *)(void *)(indices->storage->data + indices->offset);
        int64_t tiles = panels ? (columns + width - 1) / width : 0;

#pragma omp parallel for schedule(dynamic) num_threads(threads) if (parallel && panels)
        for (int64_t at = 0; at < lines / columns * tiles; at++) {
            const struct entry *best;
            int64_t c0 = at % tiles * width, xo = 0, oo = 0;
            int64_t rest = at / tiles * columns + c0;
            struct panel p = {NULL, n, xs, other_x[nother - 1],
                              columns - c0 < width ? columns - c0 : width};

            for (int i = nother - 1; i >= 0; i--) {
                int64_t pos = rest % other_shape[i];
                rest /= other_shape[i];
                xo += pos * other_x[i];
                oo += pos * other_o[i];
            }
            p.x = xbase + xo;
            best = top_panel(&p, k, x->dtype, descending,
                             room + (int64_t)tr__team_index() * line_bytes);
            for (int64_t c = 0; c < p.width; c++) {
                int64_t co = oo + c * other_o[nother - 1];
                for (int64_t j = 0; j < k; j++) {
                    ibase[co + j * os] = best[c * k + j].index;
                    if (vbase)
                        copy_item(vbase + (co + j * os) * (int64_t)item,
                                  xbase + xo + c * p.cs + best[c * k + j].index * xs, item);
                }
            }
        }

#pragma omp parallel for schedule(dynamic) num_threads(threads) if (parallel && !panels)
        for (int64_t line = 0; line < (panels ? 0 : lines); line++) {
            const struct entry *best;
            int64_t xo = 0, oo = 0, rest = line;

            for (int i = nother - 1; i >= 0; i--) {
                int64_t at = rest % other_shape[i];
                rest /= other_shape[i];
                xo += at * other_x[i];
                oo += at * other_o[i];
            }
            best = select_line(k, xbase + xo, xs, x->dtype, n, descending,
                               room + (int64_t)tr__team_index() * line_bytes);
            for (int64_t j = 0; j < k; j++) {
                ibase[oo + j * os] = best[j].index;
                if (vbase)
                    copy_item(vbase + (oo + j * os) * (int64_t)item,
                              xbase + xo + best[j].index * xs, item);
            }
        }
    }
    tr_release(scratch);
    tr_release(x);
    return tr__give_results(made, op->info.nresults, TR_OK, results);
}

/* -------------------------------------------------------- gather, index */

/* t as a compact i64 tensor whose values all lie in [0, size), or with
 * from_end in [-size, size) (a negative one counts from the end, as
 * index_select's do): TR_ERR_INDEX naming the first that does not (a
 * negative index is out of range of gather, as in PyTorch). */
static struct tr_tensor *checked_values(const char *name, const struct tr_tensor *t, int dim,
                                        int64_t size, bool from_end)
{
    struct tr_tensor *index = tr_cast(t, TR_DTYPE_I64);
    const int64_t *v;
    int64_t n;

    if (!index)
        return NULL;
    n = tr_tensor_numel(index);
    v = tr_tensor_data(index);
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < (from_end ? -size : 0) || v[i] >= size) {
            tr_set_error(TR_ERR_INDEX,
                         "%s: index %lld is out of range for dimension %d of size %lld", name,
                         (long long)v[i], dim, (long long)size);
            tr_release(index);
            return NULL;
        }
    }
    return index;
}

/* The index argument as checked_values makes it. */
static struct tr_tensor *checked_index(const char *name, const struct tr_arg *arg, int dim,
                                       int64_t size, bool from_end)
{
    struct tr_tensor *given = tr__arg_tensor(arg, TR_DTYPE_I64), *index;

    index = given ? checked_values(name, given, dim, size, from_end) : NULL;
    tr_release(given);
    return index;
}

/* out[..., i, ...] = x[..., iv[..., i, ...], ...] for the nd-dimensional
 * out of shape at cb (compact), x at xb with byte strides xs, iv compact of
 * out's shape: the index replaces the position along d. */
static void gather_lines(char *cb, const char *xb, const int64_t *xs, const int64_t *iv, int nd,
                         const int64_t *shape, int d, size_t item)
{
    int64_t len = nd ? shape[nd - 1] : 1, total = 1, lines;

    for (int i = 0; i < nd; i++)
        total *= shape[i];
    lines = len ? total / len : 0;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (lines * len > PARALLEL_ELEMENTS && lines > 1)
    for (int64_t line = 0; line < lines; line++) {
        int64_t base = 0, rest = line, inner = 0, along = 0;
        for (int i = nd - 2; i >= 0; i--) {
            int64_t at = rest % shape[i];
            rest /= shape[i];
            if (i != d)
                base += at * xs[i];
        }
        if (nd > 0) {
            along = xs[d];
            inner = d == nd - 1 ? 0 : xs[nd - 1];
        }
        for (int64_t j = 0; j < len; j++)
            copy_item(cb + (line * len + j) * (int64_t)item,
                      xb + base + j * inner + iv[line * len + j] * along, item);
    }
}

/* gather(x, dim, index): out[..., i, ...] = x[..., index[..., i, ...], ...]
 * with the index in place of the position along dim. */
tr_status tr__k_gather(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    struct tr_tensor *x, *index = NULL, *c = NULL;
    int64_t xs[TR_MAX_DIMS], size;
    int d;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    d = tr__checked_dim(args[1].value.integer, x->ndim);
    size = x->ndim ? x->shape[d] : 1;
    index = checked_index(name, &args[2], d, size, false);
    if (index)
        c = tr__empty(name, out->dtype, out->ndim, out->shape, out->device);
    if (!c)
        s = tr_last_status();
    if (s == TR_OK && tr_tensor_numel(c) > 0) {
        tr__byte_strides(x, xs);
        gather_lines(c->storage->data + c->offset, tr_tensor_data(x), xs, tr_tensor_data(index),
                     out->ndim, out->shape, d, tr_dtype_size(x->dtype));
    }
    tr_release(index);
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* index_select(x, dim, index): the slices of x along dim that the 1-d
 * index names, in its order. */
tr_status tr__k_index_select(const struct tr__op *op, const struct tr_arg *args,
                             const struct tr_value *out, const struct tr_dest *dest,
                             struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    struct tr_tensor *x, *index = NULL, *c = NULL;
    int64_t xs[TR_MAX_DIMS], cs[TR_MAX_DIMS], shape[TR_MAX_DIMS], sx[TR_MAX_DIMS];
    int64_t sc[TR_MAX_DIMS], count, slice = 1, size, along_x = 0, along_c = 0;
    int d, n = 0;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    d = tr__checked_dim(args[1].value.integer, x->ndim);
    size = x->ndim ? x->shape[d] : 1;
    index = checked_index(name, &args[2], d, size, true);
    if (index)
        c = tr__empty(name, out->dtype, out->ndim, out->shape, out->device);
    if (!c)
        s = tr_last_status();
    if (s == TR_OK && tr_tensor_numel(c) > 0) {
        const int64_t *iv = tr_tensor_data(index);
        const char *xb = tr_tensor_data(x);
        char *cb = c->storage->data + c->offset;
        size_t item = tr_dtype_size(x->dtype);

        tr__byte_strides(x, xs);
        tr__byte_strides(c, cs);
        for (int i = 0; i < x->ndim; i++) {
            if (i == d) {
                along_x = xs[i];
                along_c = cs[i];
                continue;
            }
            shape[n] = x->shape[i];
            sx[n] = xs[i];
            sc[n++] = cs[i];
            slice *= x->shape[i];
        }
        /* a 0-d x, or a 0-d index, names one slice */
        count = x->ndim ? out->shape[d] : 1;
        /* many small slices share the threads; a large one spreads over
         * them inside tr__cpu_copy */
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) if (count > 1 && count * slice > PARALLEL_ELEMENTS && \
                                                  slice < PARALLEL_ELEMENTS)
        for (int64_t j = 0; j < count; j++)
            tr__cpu_copy(cb + j * along_c, sc, xb + (iv[j] < 0 ? iv[j] + size : iv[j]) * along_x,
                         sx, n, shape, item);
    }
    tr_release(index);
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* take_along_dim(x, indices, dim): gather of x and indices broadcast to
 * each other but along dim; without dim, the values of the flattened x at
 * the flattened indices. */
tr_status tr__k_take_along_dim(const struct tr__op *op, const struct tr_arg *args,
                               const struct tr_value *out, const struct tr_dest *dest,
                               struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    struct tr_tensor *x, *xv = NULL, *given, *iv = NULL, *index = NULL, *c = NULL;
    bool flat = args[2].value.kind == TR_VALUE_NONE;
    int64_t xs[TR_MAX_DIMS], shape[TR_MAX_DIMS];
    size_t item;
    int d = 0;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    given = x ? tr__arg_tensor(&args[1], TR_DTYPE_I64) : NULL;
    if (!given) {
        tr_release(x);
        return tr_last_status();
    }
    if (flat) {
        index = checked_values(name, given, 0, tr_tensor_numel(x), false);
    } else {
        d = tr__checked_dim(args[2].value.integer, x->ndim);
        memcpy(shape, out->shape, sizeof shape);
        shape[d] = x->shape[d];
        xv = tr_expand(x, shape, x->ndim);
        iv = xv ? tr_expand(given, out->shape, out->ndim) : NULL;
        index = iv ? checked_values(name, iv, d, x->shape[d], false) : NULL;
    }
    if (index)
        c = tr__empty(name, out->dtype, out->ndim, out->shape, out->device);
    if (!c)
        s = tr_last_status();
    item = tr_dtype_size(x->dtype);
    if (s == TR_OK && tr_tensor_numel(c) > 0 && !flat) {
        tr__byte_strides(xv, xs);
        gather_lines(c->storage->data + c->offset, tr_tensor_data(xv), xs, tr_tensor_data(index),
                     out->ndim, out->shape, d, item);
    } else if (s == TR_OK && tr_tensor_numel(c) > 0) {
        const int64_t *at = tr_tensor_data(index);
        const char *xb = tr_tensor_data(x);
        char *cb = c->storage->data + c->offset;
        int64_t n = tr_tensor_numel(c);
        int nd = x->ndim;

        tr__byte_strides(x, xs);
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) if (n > PARALLEL_ELEMENTS)
        for (int64_t j = 0; j < n; j++) {
            int64_t rest = at[j], offset = 0;
            for (int i = nd - 1; i >= 0; i--) {
                offset += rest % x->shape[i] * xs[i];
                rest /= x->shape[i];
            }
            copy_item(cb + j * (int64_t)item, xb + offset, item);
        }
    }
    tr_release(index);
    tr_release(iv);
    tr_release(xv);
    tr_release(given);
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* Rows of one_hot a thread writes at least. */
#define ONE_HOT_ROWS 1024

/* one_hot(x, num_classes): i64 zeros of x's shape plus [num_classes], with
 * a 1 at each value of x along the last dimension. */
tr_status tr__k_one_hot(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    int64_t classes = args[1].value.integer, rows;
    struct tr_tensor *x, *values = NULL, *c = NULL;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], TR_DTYPE_I64);
    if (!x)
        return tr_last_status();
    values = tr_cast(x, TR_DTYPE_I64);
    rows = values ? tr_tensor_numel(values) : 0;
    if (values) {
        const int64_t *v = tr_tensor_data(values);
        for (int64_t i = 0; i < rows && s == TR_OK; i++)
            if (v[i] < 0 || v[i] >= classes)
                s = tr_set_error(TR_ERR_INDEX, "%s: the value %lld is not a class of 0..%lld "
                                 "(num_classes is %lld)", name, (long long)v[i],
                                 (long long)classes - 1, (long long)classes);
    }
    if (values && s == TR_OK)
        c = tr__empty(name, out->dtype, out->ndim, out->shape, out->device);
    if (s == TR_OK && !c)
        s = tr_last_status();
    if (s == TR_OK && rows > 0) {
        const int64_t *v = tr_tensor_data(values);
        int64_t *cb = (int64_t *)(void *)(c->storage->data + c->offset);
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (rows * classes > PARALLEL_ELEMENTS && rows > ONE_HOT_ROWS)
        for (int64_t i = 0; i < rows; i++) {
            memset(cb + i * classes, 0, (size_t)classes * sizeof *cb);
            cb[i * classes + v[i]] = 1;
        }
    }
    tr_release(values);
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* ---------------------------------------------------------------- join */

/* The k-th item of a list argument. */
static struct tr_arg list_item(const struct tr_arg *arg, size_t k)
{
    struct tr_arg a;

    if (arg->items)
        return arg->items[k];
    memset(&a, 0, sizeof a);
    a.value = arg->value.items[k];
    return a;
}

/* concat(tensors, dim) and stack(tensors, dim): each item converted to the
 * promoted dtype into its place of the result (a slice along dim, or the
 * index along the new dim). */
tr_status tr__k_join(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    bool stack = op->rule == TR__RULE_STACK;
    struct tr_tensor *c = tr__empty(op->info.name, out->dtype, out->ndim, out->shape, out->device);
    int d = tr__checked_dim(args[1].value.integer, out->ndim);
    int64_t at = 0;
    tr_status s = c ? TR_OK : tr_last_status();

    for (size_t k = 0; s == TR_OK && k < args[0].value.count; k++) {
        struct tr_arg a = list_item(&args[0], k);
        struct tr_tensor *t = tr__arg_tensor(&a, out->dtype), *place = NULL;
        if (t)
            place = stack ? tr_select(c, d, (int64_t)k)
                          : tr_slice(c, d, at, at + t->shape[d], 1);
        s = place ? tr_copy_into(place, t) : tr_last_status();
        if (t && !stack)
            at += t->shape[d];
        tr_release(place);
        tr_release(t);
    }
    return tr__give_results(&c, 1, s, results);
}
