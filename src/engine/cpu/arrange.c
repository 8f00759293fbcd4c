/*
 * cpu/arrange.c - copies that rearrange whole blocks of their input: roll,
 * repeat, repeat_interleave and pad.
 *
 * Each makes its compact result in the pool and fills it with a few
 * strided copies (tr_copy_into between views of x and of the result, or of
 * the result and itself), so that every element is copied exactly, the
 * threads share each copy as tr__cpu_copy splits it, and the pool holds
 * the result and nothing else (but roll of a strided x without dims, which
 * first makes x compact to flatten it).
 */
#include <string.h>

#include "../kernel_impl.h"

#include "../kernels.h"

/* A view of t's [start, start + len) along d (0 <= start, start + len <=
 * size). */
static struct tr_tensor *part(const struct tr_tensor *t, int d, int64_t start, int64_t len)
{
    return tr_slice(t, d, start, start + len, 1);
}

/* Copies src into a view of dst; both views are released. */
static tr_status copy_views(struct tr_tensor *to, struct tr_tensor *from)
{
    tr_status s = to && from ? tr_copy_into(to, from) : tr_last_status();

    tr_release(to);
    tr_release(from);
    return s;
}

/* Item k of an argument that is an integer or a list of integers (the
 * list's items are arg->items when the caller gave them so, else the
 * value's). */
static int64_t int_item(const struct tr_arg *arg, size_t k)
{
    if (arg->value.kind != TR_VALUE_LIST)
        return arg->value.integer;
    return arg->items ? arg->items[k].value.integer : arg->value.items[k].integer;
}

/* How many integers such an argument holds. */
static size_t int_count(const struct tr_arg *arg)
{
    return arg->value.kind == TR_VALUE_LIST ? arg->value.count : 1;
}

/* ----------------------------------------------------------------- roll */

/* roll(x, shifts, dims): c[(i + shift) mod size] = x[i] along each dim.
 * Each rolled dim cuts x and c into two parts, so the result is 2^k
 * copies of blocks for k rolled dims; without dims, one roll of the
 * flattened x (a compact copy first when x is strided). */
tr_status tr__k_roll(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    size_t n = int_count(&args[1]);
    int64_t by[TR_MAX_DIMS] = {0}, flat;
    struct tr_tensor *x, *src = NULL, *dst = NULL, *c;
    int rolled[TR_MAX_DIMS], k = 0, nd;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], out->dtype);
    if (!x)
        return tr_last_status();
    c = tr__empty(name, out->dtype, out->ndim, out->shape, out->device);
    if (!c || tr_tensor_numel(c) == 0) {
        tr_release(x);
        return c ? tr__give_results(&c, 1, TR_OK, results) : tr_last_status();
    }
    flat = tr_tensor_numel(x);
    if (args[2].value.kind == TR_VALUE_NONE) {
        struct tr_tensor *compact = tr_contiguous(x);
        src = compact ? tr_reshape_view(compact, &flat, 1) : NULL;
        dst = src ? tr_reshape_view(c, &flat, 1) : NULL;
        tr_release(compact);
        by[0] = int_item(&args[1], 0) % flat;
    } else {
        src = tr__tensor_alias(x);
        dst = src ? tr__tensor_alias(c) : NULL;
        for (size_t i = 0; i < n; i++) {
            int d = tr__checked_dim(int_item(&args[2], i), x->ndim);
            by[d] = (by[d] + int_item(&args[1], i) % x->shape[d]) % x->shape[d];
        }
    }
    if (!dst)
        s = tr_last_status();
    nd = s == TR_OK ? src->ndim : 0;
    for (int d = 0; d < nd; d++) {
        if (by[d] < 0)
            by[d] += src->shape[d];
        if (by[d] != 0)
            rolled[k++] = d;
    }
    /* piece p takes, along rolled dim rolled[j], the head of x (to the
     * tail of c) when bit j is 0 and its tail (to the head of c) when 1 */
    for (uint32_t p = 0; s == TR_OK && p < (1u << k); p++) {
        struct tr_tensor *from = tr__tensor_alias(src), *to = tr__tensor_alias(dst);
        for (int j = 0; j < k && from && to; j++) {
            int d = rolled[j];
            int64_t size = src->shape[d], e = by[d], len = (p >> j & 1) ? e : size - e;
            struct tr_tensor *f = part(from, d, (p >> j & 1) ? size - e : 0, len);
            struct tr_tensor *t = f ? part(to, d, (p >> j & 1) ? 0 : e, len) : NULL;
            tr_release(from);
            tr_release(to);
            from = f;
            to = t;
        }
        s = copy_views(to, from);
    }
    tr_release(dst);
    tr_release(src);
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* --------------------------------------------------------------- repeat */

/* repeat(x, repeats): x copied into the first tile of c, then, dimension
 * by dimension from the last, the filled part copied after itself,
 * doubling it until it covers the dimension: log2(repeats) copies each. */
tr_status tr__k_repeat(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    int64_t tile[TR_MAX_DIMS];
    struct tr_tensor *x, *xv = NULL, *first = NULL, *c;
    int nd = out->ndim, lead;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], out->dtype);
    if (!x)
        return tr_last_status();
    c = tr__empty(name, out->dtype, nd, out->shape, out->device);
    if (!c || tr_tensor_numel(c) == 0) {
        tr_release(x);
        return c ? tr__give_results(&c, 1, TR_OK, results) : tr_last_status();
    }
    lead = nd - x->ndim;
    for (int i = 0; i < nd; i++)
        tile[i] = i < lead ? 1 : x->shape[i - lead];
    /* x with leading dimensions of size 1, into c[:tile0, :tile1, ...] */
    xv = tr_expand(x, tile, nd);
    first = xv ? tr__tensor_alias(c) : NULL;
    for (int i = 0; i < nd && first; i++) {
        struct tr_tensor *narrower = part(first, i, 0, tile[i]);
        tr_release(first);
        first = narrower;
    }
    s = copy_views(first, xv);
    for (int d = nd - 1; d >= 0 && s == TR_OK; d--) {
        /* c[:tile0, ..., :tile(d-1), :have, all, ...] is filled */
        struct tr_tensor *region = tr__tensor_alias(c);
        for (int i = 0; i < d && region; i++) {
            struct tr_tensor *narrower = part(region, i, 0, tile[i]);
            tr_release(region);
            region = narrower;
        }
        if (!region)
            s = tr_last_status();
        for (int64_t have = tile[d]; s == TR_OK && have < out->shape[d];) {
            int64_t more = have < out->shape[d] - have ? have : out->shape[d] - have;
            s = copy_views(part(region, d, have, more), part(region, d, 0, more));
            have += more;
        }
        tr_release(region);
    }
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* ---------------------------------------------------- repeat_interleave */

/* repeat_interleave(x, repeats, dim): c[i * r + j] = x[i] along dim for j
 * in [0, r): r copies of x into the slices j::r of c when r is at most the
 * size, else one copy of each x[i] broadcast r times into c[i*r:(i+1)*r].
 * Without dim, the flattened x repeated is x repeated along its last
 * dimension and flattened, so c is seen as x's shape with the last size
 * times r. */
tr_status tr__k_repeat_interleave(const struct tr__op *op, const struct tr_arg *args,
                                  const struct tr_value *out, const struct tr_dest *dest,
                                  struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    int64_t r = args[1].value.integer, shape[TR_MAX_DIMS], size;
    struct tr_tensor *x, *xv = NULL, *cv = NULL, *c;
    tr_status s = TR_OK;
    int d;

    x = tr__arg_tensor(&args[0], out->dtype);
    if (!x)
        return tr_last_status();
    c = tr__empty(name, out->dtype, out->ndim, out->shape, out->device);
    if (!c || tr_tensor_numel(c) == 0) {
        tr_release(x);
        return c ? tr__give_results(&c, 1, TR_OK, results) : tr_last_status();
    }
    if (args[2].value.kind == TR_VALUE_NONE) {
        xv = x->ndim ? tr__tensor_alias(x) : tr_expand(x, (int64_t[]){1}, 1);
        d = xv ? xv->ndim - 1 : 0;
        if (xv) {
            memcpy(shape, xv->shape, sizeof shape);
            shape[d] *= r;
            cv = tr_reshape_view(c, shape, xv->ndim);
        }
    } else {
        d = tr__checked_dim(args[2].value.integer, x->ndim);
        xv = tr__tensor_alias(x);
        cv = xv ? tr__tensor_alias(c) : NULL;
    }
    if (!cv)
        s = tr_last_status();
    size = cv ? xv->shape[d] : 0;
    if (s == TR_OK && r <= size) {
        for (int64_t j = 0; j < r && s == TR_OK; j++)
            s = copy_views(tr_slice(cv, d, j, TR_SLICE_NONE, r), tr__tensor_alias(xv));
    } else if (s == TR_OK) {
        memcpy(shape, xv->shape, sizeof shape);
        shape[d] = r;
        for (int64_t i = 0; i < size && s == TR_OK; i++) {
            struct tr_tensor *one = part(xv, d, i, 1);
            s = copy_views(part(cv, d, i * r, r), one ? tr_expand(one, shape, xv->ndim) : NULL);
            tr_release(one);
        }
    }
    tr_release(cv);
    tr_release(xv);
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}

/* ------------------------------------------------------------------ pad */

/* Fills a view of host memory with one value of its dtype. */
static void fill_view(struct tr_tensor *t, const void *value)
{
    int64_t ts[TR_MAX_DIMS], zero[TR_MAX_DIMS] = {0};

    if (tr_tensor_numel(t) == 0)
        return;
    tr__byte_strides(t, ts);
    tr__cpu_copy(tr_tensor_data_mut(t), ts, value, zero, t->ndim, t->shape,
                 tr_dtype_size(t->dtype));
}

/* pad(x, pad, mode, value): x (cropped by negative widths) copied into the
 * middle of c; then, in constant mode, the slabs before and after it along
 * every padded dimension filled with the value; in reflect and replicate
 * modes, dimension by dimension from the last, each slab copied from the
 * middle along that dimension (reversed, or its edge broadcast), over the
 * dimensions done so far whole and the others' middle only. */
tr_status tr__k_pad(const struct tr__op *op, const struct tr_arg *args,
                    const struct tr_value *out, const struct tr_dest *dest,
                    struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    int npairs = (int)int_count(&args[1]) / 2, nd = out->ndim;
    bool constant = strcmp(args[2].value.string, "constant") == 0;
    bool reflect = strcmp(args[2].value.string, "reflect") == 0;
    int64_t before[TR_MAX_DIMS] = {0}, after[TR_MAX_DIMS] = {0};
    struct tr_tensor *x, *from, *to, *c, *value = NULL;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], out->dtype);
    if (!x)
        return tr_last_status();
    c = tr__empty(name, out->dtype, nd, out->shape, out->device);
    if (!c || tr_tensor_numel(c) == 0) {
        tr_release(x);
        return c ? tr__give_results(&c, 1, TR_OK, results) : tr_last_status();
    }
    for (int k = 0; k < npairs; k++) {
        before[nd - 1 - k] = int_item(&args[1], 2 * (size_t)k);
        after[nd - 1 - k] = int_item(&args[1], 2 * (size_t)k + 1);
    }
    /* the middle: x cropped where a width is negative, into c past the
     * positive widths */
    from = tr__tensor_alias(x);
    to = tr__tensor_alias(c);
    for (int d = 0; d < nd && from && to; d++) {
        int64_t crop = before[d] < 0 ? -before[d] : 0, at = before[d] > 0 ? before[d] : 0;
        int64_t len = x->shape[d] - crop - (after[d] < 0 ? -after[d] : 0);
        struct tr_tensor *f, *t;
        if (len <= 0)
            len = crop = at = 0; /* nothing of x is left: c is all value */
        f = part(from, d, crop, len);
        t = f ? part(to, d, at, len) : NULL;
        tr_release(from);
        tr_release(to);
        from = f;
        to = t;
    }
    s = copy_views(to, from);
    if (s == TR_OK && constant) {
        value = tr__arg_tensor(&args[3], out->dtype);
        for (int d = 0; d < nd && value; d++) {
            /* the slabs within c: a width past a crop that empties x
             * (pad(zeros(0, 3), [0, 0, -1, 2]) is one row) */
            int64_t size = out->shape[d];
            int64_t b = before[d] < size ? before[d] : size, a = after[d] < size ? after[d] : size;
            if (b > 0) {
                to = part(c, d, 0, b);
                if (to)
                    fill_view(to, tr_tensor_data(value));
                tr_release(to);
            }
            if (a > 0) {
                to = part(c, d, size - a, a);
                if (to)
                    fill_view(to, tr_tensor_data(value));
                tr_release(to);
            }
        }
        if (!value)
            s = tr_last_status();
        tr_release(value);
    }
    for (int d = nd - 1; s == TR_OK && !constant && d >= nd - npairs; d--) {
        int64_t b = before[d], a = after[d], size = x->shape[d], shape[TR_MAX_DIMS];
        struct tr_tensor *region = tr__tensor_alias(c);
        /* the dims below d are not done yet: their middle only */
        for (int i = nd - npairs; i < d && region; i++) {
            struct tr_tensor *narrower = part(region, i, before[i], x->shape[i]);
            tr_release(region);
            region = narrower;
        }
        if (!region) {
            s = tr_last_status();
            break;
        }
        memcpy(shape, region->shape, sizeof shape);
        if (b > 0 && reflect) {
            s = copy_views(part(region, d, 0, b), tr_slice(region, d, 2 * b, b, -1));
        } else if (b > 0) {
            struct tr_tensor *edge = part(region, d, b, 1);
            shape[d] = b;
            s = copy_views(part(region, d, 0, b), edge ? tr_expand(edge, shape, nd) : NULL);
            tr_release(edge);
        }
        if (s == TR_OK && a > 0 && reflect) {
            int64_t stop = b + size - 2 - a;
            s = copy_views(part(region, d, b + size, a),
                           tr_slice(region, d, b + size - 2, stop < 0 ? TR_SLICE_NONE : stop, -1));
        } else if (s == TR_OK && a > 0) {
            struct tr_tensor *edge = part(region, d, b + size - 1, 1);
            shape[d] = a;
            s = copy_views(part(region, d, b + size, a), edge ? tr_expand(edge, shape, nd) : NULL);
            tr_release(edge);
        }
        tr_release(region);
    }
    tr_release(x);
    return tr__give_results(&c, 1, s, results);
}
