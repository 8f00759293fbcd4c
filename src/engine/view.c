/*
 * view.c - views: new handles of the same storage with another shape,
 * strides or offset.  None of them copies or touches the data.
 */
#include "engine_impl.h"

static int64_t item_size(const struct tr_tensor *t)
{
    return (int64_t)tr_dtype_size(t->dtype);
}

/* The length of a Python slice start:stop:step over a dimension of size
 * len, with start and stop normalised as Python's slice.indices does. */
static int64_t slice_indices(int64_t len, int64_t *start, int64_t *stop, int64_t step)
{
    int64_t lower = step > 0 ? 0 : -1;
    int64_t upper = step > 0 ? len : len - 1;
    uint64_t span, magnitude;
    int64_t *ends[2] = {start, stop};

    for (int k = 0; k < 2; k++) {
        int64_t *v = ends[k];
        if (*v == TR_SLICE_NONE) {
            *v = (k == 0) == (step > 0) ? lower : upper;
            continue;
        }
        if (*v < 0)
            *v += len;
        if (*v < lower)
            *v = lower;
        else if (*v > upper)
            *v = upper;
    }
    magnitude = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
    if (step > 0 ? *stop <= *start : *start <= *stop)
        return 0;
    span = step > 0 ? (uint64_t)(*stop - *start) : (uint64_t)(*start - *stop);
    return (int64_t)((span - 1) / magnitude + 1);
}

struct tr_tensor *tr_slice(const struct tr_tensor *t, int dim, int64_t start,
                           int64_t stop, int64_t step)
{
    struct tr_tensor *v;
    int64_t count, stride;
    int d;

    TR_CHECK_HANDLE_OR_NULL(t, "slice");
    if (tr__normalize_dim("slice", dim, t->ndim, &d) != TR_OK)
        return NULL;
    TR_RETURN_NULL_IF(step == 0, TR_ERR_INVALID, "slice: the step must not be zero");
    count = slice_indices(t->shape[d], &start, &stop, step);
    /* a dimension of at most one element is never stepped: keeping its
     * stride keeps a huge step out of the copies' byte strides */
    stride = t->strides[d];
    if (count > 1)
        TR_RETURN_NULL_IF(__builtin_mul_overflow(t->strides[d], step, &stride),
                          TR_ERR_INVALID, "slice: the step %lld is too large", (long long)step);
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    if (count > 0)
        v->offset += start * t->strides[d] * item_size(t);
    v->shape[d] = count;
    v->strides[d] = stride;
    return v;
}

struct tr_tensor *tr_select(const struct tr_tensor *t, int dim, int64_t index)
{
    struct tr_tensor *v;
    int64_t size;
    int d;

    TR_CHECK_HANDLE_OR_NULL(t, "select");
    if (tr__normalize_dim("select", dim, t->ndim, &d) != TR_OK)
        return NULL;
    size = t->shape[d];
    TR_RETURN_NULL_IF(index < -size || index >= size, TR_ERR_INDEX,
                      "select: index %lld is out of range for dimension %d of size %lld",
                      (long long)index, d, (long long)size);
    if (index < 0)
        index += size;
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    v->offset += index * t->strides[d] * item_size(t);
    for (int i = d; i + 1 < t->ndim; i++) {
        v->shape[i] = t->shape[i + 1];
        v->strides[i] = t->strides[i + 1];
    }
    v->ndim = t->ndim - 1;
    return v;
}

struct tr_tensor *tr_transpose(const struct tr_tensor *t, int dim0, int dim1)
{
    struct tr_tensor *v;
    int a, b;

    TR_CHECK_HANDLE_OR_NULL(t, "transpose");
    if (tr__normalize_dim("transpose", dim0, t->ndim, &a) != TR_OK ||
        tr__normalize_dim("transpose", dim1, t->ndim, &b) != TR_OK)
        return NULL;
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    v->shape[a] = t->shape[b];
    v->strides[a] = t->strides[b];
    v->shape[b] = t->shape[a];
    v->strides[b] = t->strides[a];
    return v;
}

struct tr_tensor *tr_permute(const struct tr_tensor *t, const int *dims, int ndim)
{
    bool seen[TR_MAX_DIMS] = {false};
    int order[TR_MAX_DIMS];
    struct tr_tensor *v;

    TR_CHECK_HANDLE_OR_NULL(t, "permute");
    TR_RETURN_NULL_IF(ndim != t->ndim, TR_ERR_INVALID,
                      "permute: %d dimensions given for a tensor of %d", ndim, t->ndim);
    TR_RETURN_NULL_IF(ndim > 0 && !dims, TR_ERR_INVALID, "permute: no dimensions given");
    for (int i = 0; i < ndim; i++) {
        if (tr__normalize_dim("permute", dims[i], ndim, &order[i]) != TR_OK)
            return NULL;
        TR_RETURN_NULL_IF(seen[order[i]], TR_ERR_INVALID,
                          "permute: dimension %d appears twice", order[i]);
        seen[order[i]] = true;
    }
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = t->shape[order[i]];
        v->strides[i] = t->strides[order[i]];
    }
    return v;
}

struct tr_tensor *tr_flip(const struct tr_tensor *t, const int *dims, int n)
{
    bool seen[TR_MAX_DIMS] = {false};
    int64_t offset = 0, step, last;
    struct tr_tensor *v;
    int d;

    TR_CHECK_HANDLE_OR_NULL(t, "flip");
    TR_RETURN_NULL_IF(n < 0 || n > t->ndim || (n > 0 && !dims), TR_ERR_INVALID,
                      "flip: %d dimensions given for a tensor of %d", n, t->ndim);
    for (int i = 0; i < n; i++) {
        if (tr__normalize_dim("flip", dims[i], t->ndim, &d) != TR_OK)
            return NULL;
        TR_RETURN_NULL_IF(seen[d], TR_ERR_INVALID, "flip: dimension %d appears twice", d);
        seen[d] = true;
    }
    if (tr_tensor_numel(t) == 0)
        return tr__tensor_alias(t); /* no element to reorder */
    for (d = 0; d < t->ndim; d++) {
        if (!seen[d] || t->shape[d] < 2)
            continue;
        /* the last element of d becomes the first: the view reaches the
         * bytes t reaches, so only the sum can overflow, not the storage */
        TR_RETURN_NULL_IF(t->strides[d] == INT64_MIN ||
                              __builtin_mul_overflow(t->shape[d] - 1, t->strides[d], &step) ||
                              __builtin_mul_overflow(step, item_size(t), &last) ||
                              __builtin_add_overflow(offset, last, &offset),
                          TR_ERR_INVALID, "flip: the view's offset overflows");
    }
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    v->offset += offset;
    for (d = 0; d < t->ndim; d++)
        if (seen[d] && t->shape[d] > 1)
            v->strides[d] = -t->strides[d];
    return v;
}

void tr__movedim_order(int ndim, const int *src, const int *dst, int n, int *order)
{
    bool moved[TR_MAX_DIMS] = {false}, taken[TR_MAX_DIMS] = {false};
    int next = 0;

    for (int k = 0; k < n; k++) {
        order[dst[k]] = src[k];
        moved[src[k]] = taken[dst[k]] = true;
    }
    for (int i = 0; i < ndim; i++) {
        if (taken[i])
            continue;
        while (moved[next])
            next++;
        order[i] = next++;
    }
}

/* Resolves a -1 in a requested shape against numel.  TR_ERR_SHAPE when the
 * sizes cannot hold exactly numel elements. */
static tr_status infer_shape(const char *fn, const struct tr_tensor *t,
                             const int64_t *shape, int ndim, int64_t *out)
{
    char from[160], to[160];
    int64_t numel = tr_tensor_numel(t), known = 1;
    int infer = -1;

    TR_RETURN_ERROR_IF(ndim < 0 || ndim > TR_MAX_DIMS || (ndim > 0 && !shape), TR_ERR_SHAPE,
                       "%s: %d dimensions (at most %d are supported)", fn, ndim, TR_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        TR_RETURN_ERROR_IF(shape[i] < 0, TR_ERR_SHAPE, "%s: invalid size %lld in %s", fn,
                           (long long)shape[i], tr__format_shape(shape, ndim, to, sizeof to));
        TR_RETURN_ERROR_IF(__builtin_mul_overflow(known, shape[i], &known), TR_ERR_SHAPE,
                           "%s: shape %s has too many elements", fn,
                           tr__format_shape(shape, ndim, to, sizeof to));
    }
    if (infer >= 0 && known != 0 && numel % known == 0)
        out[infer] = numel / known;
    TR_RETURN_ERROR_IF((infer >= 0 && (known == 0 || numel % known != 0)) ||
                           (infer < 0 && known != numel),
                       TR_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", fn,
                       tr__format_shape(t->shape, t->ndim, from, sizeof from),
                       (long long)numel, tr__format_shape(shape, ndim, to, sizeof to));
    return TR_OK;
}

/*
 * Strides for viewing (shape, strides) as new_shape, or false when no
 * strides can.  The old dimensions fall into chunks that are contiguous
 * among themselves; each chunk must map onto a run of new dimensions with
 * the same element count, which then take strides counted from the
 * chunk's innermost stride.
 */
static bool view_strides(int ndim, const int64_t *shape, const int64_t *strides,
                         int new_ndim, const int64_t *new_shape, int64_t *new_strides)
{
    static const int64_t one = 1;
    int64_t chunk_stride, chunk_numel = 1, view_numel = 1;
    int v = new_ndim - 1;

    if (ndim == 0) { /* a scalar views like [1] */
        ndim = 1;
        shape = strides = &one;
    }
    chunk_stride = strides[ndim - 1];
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t reach;
        chunk_numel *= shape[d];
        if (d > 0 && (shape[d - 1] == 1 ||
                      (!__builtin_mul_overflow(chunk_numel, chunk_stride, &reach) &&
                       strides[d - 1] == reach)))
            continue; /* d - 1 continues this chunk */
        while (v >= 0 && (view_numel < chunk_numel || new_shape[v] == 1)) {
            /* only a trailing size-1 dimension can overflow here, and
             * its stride is never stepped */
            if (__builtin_mul_overflow(view_numel, chunk_stride, &new_strides[v]))
                new_strides[v] = 1;
            view_numel *= new_shape[v];
            v--;
        }
        if (view_numel != chunk_numel)
            return false;
        if (d > 0) {
            chunk_stride = strides[d - 1];
            chunk_numel = view_numel = 1;
        }
    }
    return v == -1;
}

bool tr__view_strides(int ndim, const int64_t *shape, const int64_t *strides, int new_ndim,
                      const int64_t *new_shape, int64_t *new_strides)
{
    return view_strides(ndim, shape, strides, new_ndim, new_shape, new_strides);
}

struct tr_tensor *tr_reshape_view(const struct tr_tensor *t, const int64_t *shape, int ndim)
{
    int64_t new_shape[TR_MAX_DIMS], new_strides[TR_MAX_DIMS], numel;
    char a[160], b[160], c[160];
    struct tr_tensor *v;

    TR_CHECK_HANDLE_OR_NULL(t, "reshape");
    if (infer_shape("reshape", t, shape, ndim, new_shape) != TR_OK ||
        tr__check_shape("reshape", ndim, new_shape, t->dtype, &numel) != TR_OK)
        return NULL;
    if (tr_tensor_numel(t) == 0)
        tr__contiguous_strides(ndim, new_shape, new_strides);
    else
        TR_RETURN_NULL_IF(!view_strides(t->ndim, t->shape, t->strides, ndim, new_shape,
                                        new_strides),
                          TR_ERR_SHAPE,
                          "reshape: a view of shape %s with strides %s cannot be seen as %s "
                          "without a copy",
                          tr__format_shape(t->shape, t->ndim, a, sizeof a),
                          tr__format_shape(t->strides, t->ndim, b, sizeof b),
                          tr__format_shape(new_shape, ndim, c, sizeof c));
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = new_shape[i];
        v->strides[i] = new_strides[i];
    }
    return v;
}

struct tr_tensor *tr_expand(const struct tr_tensor *t, const int64_t *shape, int ndim)
{
    int64_t new_shape[TR_MAX_DIMS], new_strides[TR_MAX_DIMS], numel;
    char a[160], b[160];
    struct tr_tensor *v;
    int lead;

    TR_CHECK_HANDLE_OR_NULL(t, "expand");
    TR_RETURN_NULL_IF(ndim < t->ndim || ndim > TR_MAX_DIMS || (ndim > 0 && !shape),
                      TR_ERR_SHAPE, "expand: cannot expand %s to %d dimensions",
                      tr__format_shape(t->shape, t->ndim, a, sizeof a), ndim);
    lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead; /* t's dimension, when there is one */
        int64_t want = shape[i];
        if (j >= 0 && (want == -1 || want == t->shape[j])) {
            new_shape[i] = t->shape[j];
            new_strides[i] = t->strides[j];
        } else if (want >= 0 && (j < 0 || t->shape[j] == 1)) {
            new_shape[i] = want;
            new_strides[i] = 0;
        } else if (j < 0 || want < 0) {
            tr__set_error(TR_ERR_SHAPE, "expand: the %sdimension %d cannot have size %lld",
                          j < 0 ? "new leading " : "", i, (long long)want);
            return NULL;
        } else {
            tr__set_error(TR_ERR_SHAPE,
                          "expand: cannot expand %s to %s (dimension %d has size %lld, not 1)",
                          tr__format_shape(t->shape, t->ndim, a, sizeof a),
                          tr__format_shape(shape, ndim, b, sizeof b), j,
                          (long long)t->shape[j]);
            return NULL;
        }
    }
    if (tr__check_shape("expand", ndim, new_shape, t->dtype, &numel) != TR_OK)
        return NULL;
    v = tr__tensor_alias(t);
    if (!v)
        return NULL;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = new_shape[i];
        v->strides[i] = new_strides[i];
    }
    return v;
}

struct tr_tensor *tr_as_strided(const struct tr_tensor *base, enum tr_dtype dtype, int ndim,
                                const int64_t *shape, const int64_t *strides,
                                int64_t offset)
{
    int64_t numel, lo, hi, item, first, last, contiguous[TR_MAX_DIMS];
    const struct tr_storage *s;

    TR_CHECK_HANDLE_OR_NULL(base, "as_strided");
    if (tr__check_shape("as_strided", ndim, shape, dtype, &numel) != TR_OK)
        return NULL;
    if (!strides || numel == 0) {
        tr__contiguous_strides(ndim, shape, contiguous);
        strides = contiguous;
    }
    if (tr__extent("as_strided", ndim, shape, strides, &lo, &hi) != TR_OK)
        return NULL;
    s = base->storage;
    item = (int64_t)tr_dtype_size(dtype);
    if (numel == 0)
        return tr__tensor_new(base->storage, dtype, ndim, shape, strides, base->offset);
    TR_RETURN_NULL_IF(__builtin_add_overflow(base->offset, offset, &offset) ||
                          __builtin_mul_overflow(lo, item, &first) ||
                          __builtin_add_overflow(first, offset, &first) ||
                          __builtin_add_overflow(hi, 1, &last) ||
                          __builtin_mul_overflow(last, item, &last) ||
                          __builtin_add_overflow(last, offset, &last),
                      TR_ERR_INVALID, "as_strided: the view's extent overflows");
    TR_RETURN_NULL_IF(first < 0 || (s->nbytes && (uint64_t)last > s->nbytes), TR_ERR_INVALID,
                      "as_strided: the view reaches bytes %lld to %lld of a %llu-byte storage",
                      (long long)first, (long long)last, (unsigned long long)s->nbytes);
    TR_RETURN_NULL_IF(((uintptr_t)s->data + (uintptr_t)offset) % (uintptr_t)item,
                      TR_ERR_INVALID,
                      "as_strided: the data is not aligned to the %lld-byte size of %s",
                      (long long)item, tr_dtype_name(dtype));
    return tr__tensor_new(base->storage, dtype, ndim, shape, strides, offset);
}
