/*
 * cpu/einsum.c - einsum(equation, tensors): the equation read, then the
 * operands contracted left to right, two at a time, each product lowered
 * to the batched matmul of cpu/matmul.c on views.
 *
 * An operand is first seen where it lies: a letter repeated in it is its
 * diagonal (one dimension whose stride is the sum of the strides), a
 * size-1 dimension against a larger size of its letter broadcasts.  In
 * each pairwise step, of the letters of A and B:
 *   - those of one operand only that nothing after needs are summed
 *     first (a reduction into a compact copy; so is a shared letter that
 *     one side has with size 1: that side drops it);
 *   - shared letters that are kept are the batch, those of A only the
 *     rows M, those of B only the columns N, shared ones not kept the
 *     inner dimension K.
 * With a K, A is viewed as [batch..., M, K] and B as [batch..., K, N]
 * (the letters of M, and of K and of N, merged into one dimension each
 * where the strides allow, else the operand is copied compact in that
 * order) and handed to tr__mm_prepare and tr__mm_multiply (floats: BLAS
 * reads the views without a copy when it can) or tr__cpu_matmul_int
 * (integers: exact, wrapping); the last product writes straight into the
 * result when the output's letters are [batch][M][N] or [batch][N][M],
 * else into a compact temporary that is then copied in the output's
 * order.  Without a K the step is an elementwise product with
 * broadcasting (tr__map).  One operand is a permuted copy, or a
 * reduction.
 *
 * The steps are run twice over: by the kernel, and by tr__einsum_memory
 * on descriptions only (struct run's dry), which tallies each block the
 * kernel takes from the pool, in its order, with the same functions the
 * kernel's callees size their copies with.
 *
 * Intermediates (reductions, products before the last) are of the
 * compute dtype (f32 or f64) for floats, and for integers of the lane the
 * integer matmul reads (32 or 64 bits of the result's signedness), which
 * keeps every value modulo 2^bits of the result.  Reductions accumulate
 * in f64 (floats) or 64-bit integers, each sum in a fixed order on one
 * thread: the bits do not depend on the thread count.
 */
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "einsum_impl.h"
#include "matmul_impl.h"
#include "../scratch_impl.h"

#include "../kernels.h"

/* Below this many elements read, a reduction stays on one thread. */
#define PARALLEL_ELEMENTS (INT64_C(1) << 16)
/* Values converted at a time by a reduction. */
#define ROW 256

/* ------------------------------------------------------------- parsing */

static int letter_label(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return 26 + (c - 'a');
    return -1;
}

static char label_letter(int l)
{
    return l < 26 ? (char)('A' + l) : (char)('a' + l - 26);
}

/* One term of the equation: letters (label numbers) and where its
 * ellipsis stands (-1: none). */
struct term_text {
    int n, ellipsis;
    int8_t letters[TR__EINSUM_LABELS];
};

/* Reads the term at *p up to one of the characters of stop (or the end). */
static tr_status read_term(const char *name, const char **p, const char *stop, bool output,
                           int index, struct term_text *t)
{
    const char *s = *p;

    t->n = 0;
    t->ellipsis = -1;
    for (; *s && !strchr(stop, *s); s++) {
        int l = letter_label(*s);
        if (*s == ' ')
            continue;
        if (*s == '.') {
            TR_RETURN_ERROR_IF(strncmp(s, "...", 3) != 0, TR_ERR_INVALID,
                               "%s: found a '.' that is not part of an ellipsis ('...') in %s",
                               name, output ? "the output" : "an operand");
            TR_RETURN_ERROR_IF(t->ellipsis >= 0, TR_ERR_INVALID,
                               "%s: more than one ellipsis ('...') in %s", name,
                               output ? "the output" : "an operand");
            t->ellipsis = t->n;
            s += 2;
            continue;
        }
        if (l < 0) {
            if (*s == '-' || *s == '>')
                return tr_set_error(TR_ERR_INVALID, "%s: '-' and '>' only as one arrow '->'",
                                    name);
            return tr_set_error(TR_ERR_INVALID,
                                "%s: '%c' in the equation is not a letter, ',', '...' or '->'",
                                name, *s);
        }
        TR_RETURN_ERROR_IF(t->n >= TR__EINSUM_LABELS, TR_ERR_INVALID,
                           "%s: operand %d names more than %d dimensions", name, index,
                           TR__EINSUM_LABELS);
        t->letters[t->n++] = (int8_t)l;
    }
    *p = s;
    return TR_OK;
}

/* Whether x is among v[0..n), label l among labels[0..n). */
static bool has_int(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static bool has(const int8_t *labels, int n, int l)
{
    for (int i = 0; i < n; i++)
        if (labels[i] == l)
            return true;
    return false;
}

/* The size operand k has for label l (1 when it has not l). */
static int64_t own_size(const struct tr__einsum *e, const struct tr_value *ops, int k, int l)
{
    for (int i = 0; i < e->ndim[k]; i++)
        if (e->label[k][i] == l)
            return ops[k].shape[i];
    return 1;
}

/* Checks that each step of the left-to-right contraction fits, as the
 * kernel makes it: its result (the letters still needed) and, when it has
 * an inner letter (shared, not kept, of one size on both sides), its
 * matmul views of [batch..., M, K]. */
static tr_status check_steps(const char *name, const struct tr__einsum *e,
                             const struct tr_value *ops)
{
    bool acc[TR__EINSUM_LABELS] = {false};
    int64_t acc_size[TR__EINSUM_LABELS];

    for (int l = 0; l < TR__EINSUM_LABELS; l++)
        acc_size[l] = 1;
    for (int i = 0; i < e->ndim[0]; i++) {
        acc[e->label[0][i]] = true;
        acc_size[e->label[0][i]] = ops[0].shape[i];
    }
    for (int s = 1; s < e->nops; s++) {
        bool keep[TR__EINSUM_LABELS] = {false}, mine[TR__EINSUM_LABELS] = {false};
        int kept = 0, batch = 0, inner = 0;
        for (int i = 0; i < e->nout; i++)
            keep[e->out[i]] = true;
        for (int o = s + 1; o < e->nops; o++)
            for (int i = 0; i < e->ndim[o]; i++)
                keep[e->label[o][i]] = true;
        for (int i = 0; i < e->ndim[s]; i++)
            mine[e->label[s][i]] = true;
        for (int l = 0; l < TR__EINSUM_LABELS; l++) {
            int64_t size = own_size(e, ops, s, l);
            kept += (acc[l] || mine[l]) && keep[l];
            batch += acc[l] && mine[l] && keep[l];
            inner += acc[l] && mine[l] && !keep[l] && acc_size[l] == size;
            if (mine[l] && size > acc_size[l])
                acc_size[l] = size;
            acc[l] = (acc[l] || mine[l]) && keep[l];
        }
        TR_RETURN_ERROR_IF(kept > TR_MAX_DIMS, TR_ERR_SHAPE,
                           "%s: the product of the first %d operands would have %d dimensions "
                           "(at most %d)", name, s + 1, kept, TR_MAX_DIMS);
        TR_RETURN_ERROR_IF(inner && batch > TR_MAX_DIMS - 2, TR_ERR_SHAPE,
                           "%s: operand %d shares %d kept letters with the operands before it "
                           "(a contraction has at most %d batch dimensions)", name, s, batch,
                           TR_MAX_DIMS - 2);
    }
    return TR_OK;
}

tr_status tr__einsum_parse(const char *name, const char *equation, int nops,
                           const struct tr_value *ops, struct tr__einsum *e, int *bad)
{
    const char *p = equation, *arrow = strstr(equation, "->");
    struct term_text t;
    int count[TR__EINSUM_LABELS] = {0}, widest = 0, ellipses[TR__EINSUM_MAX_OPERANDS];
    bool seen[TR__EINSUM_LABELS] = {false};

    memset(e, 0, sizeof *e);
    *bad = 0;
    TR_RETURN_ERROR_IF(nops > TR__EINSUM_MAX_OPERANDS, TR_ERR_INVALID,
                       "%s: at most %d operands, not %d", name, TR__EINSUM_MAX_OPERANDS, nops);
    e->nops = nops;
    for (int i = 0; i < TR__EINSUM_LABELS; i++)
        e->size[i] = 1;
    /* the operands' terms */
    for (int k = 0;; k++) {
        int letters;
        TR_FORWARD_IF_ERROR(read_term(name, &p, ",-", false, k, &t));
        if (k < nops) {
            letters = t.n;
            if (t.ellipsis < 0 ? letters != ops[k].ndim : letters > ops[k].ndim) {
                *bad = 1;
                return tr_set_error(TR_ERR_INVALID,
                                    "%s: operand %d has %d dimension%s, but its subscripts "
                                    "name %d%s", name, k, ops[k].ndim,
                                    ops[k].ndim == 1 ? "" : "s", letters,
                                    t.ellipsis < 0 ? " (and no ellipsis)" : " besides '...'");
            }
            ellipses[k] = t.ellipsis < 0 ? -1 : ops[k].ndim - letters;
            if (ellipses[k] > widest)
                widest = ellipses[k];
            e->ndim[k] = ops[k].ndim;
            /* letters now; ellipsis labels once the widest is known */
            for (int i = 0, d = 0; i < t.n; i++, d++) {
                if (i == t.ellipsis)
                    d += ellipses[k];
                e->label[k][d] = t.letters[i];
                count[t.letters[i]]++;
                seen[t.letters[i]] = true;
            }
            ellipses[k] = t.ellipsis < 0 ? -1 : t.ellipsis * 256 + ellipses[k];
        }
        if (*p != ',') {
            if (k + 1 != nops) {
                *bad = 1;
                return tr_set_error(TR_ERR_INVALID,
                                    "%s: the equation has %d operand%s, but %d tensor%s given",
                                    name, k + 1, k == 0 ? "" : "s", nops,
                                    nops == 1 ? " is" : "s are");
            }
            break;
        }
        p++;
    }
    /* ellipsis labels right-aligned against the widest */
    for (int k = 0; k < nops; k++) {
        int at, width;
        if (ellipses[k] < 0)
            continue;
        at = ellipses[k] / 256;
        width = ellipses[k] % 256;
        for (int j = 0; j < width; j++)
            e->label[k][at + j] = (int8_t)(TR__EINSUM_ELLIPSIS + widest - width + j);
    }
    if (*p == '-' && p != arrow)
        return tr_set_error(TR_ERR_INVALID, "%s: '-' and '>' only as one arrow '->'", name);
    /* sizes: a repeated letter's dimensions agree; across operands, size
     * 1 broadcasts */
    for (int k = 0; k < nops; k++) {
        for (int i = 0; i < e->ndim[k]; i++) {
            int l = e->label[k][i];
            int64_t s = ops[k].shape[i];
            for (int j = 0; j < i; j++)
                if (e->label[k][j] == l && ops[k].shape[j] != s) {
                    *bad = 1;
                    return tr_set_error(TR_ERR_SHAPE,
                                        "%s: subscript %c is repeated for operand %d but the "
                                        "sizes do not match (%lld != %lld)", name,
                                        l < TR__EINSUM_ELLIPSIS ? label_letter(l) : '.', k,
                                        (long long)ops[k].shape[j], (long long)s);
                }
            if (s == 1)
                continue;
            if (e->size[l] != 1 && e->size[l] != s) {
                *bad = 1;
                if (l >= TR__EINSUM_ELLIPSIS)
                    return tr_set_error(TR_ERR_SHAPE,
                                        "%s: the dimensions of operand %d's ellipsis do not "
                                        "broadcast (%lld against %lld)", name, k,
                                        (long long)s, (long long)e->size[l]);
                return tr_set_error(TR_ERR_SHAPE,
                                    "%s: operand %d has size %lld for subscript %c, which "
                                    "another operand has as %lld", name, k, (long long)s,
                                    label_letter(l), (long long)e->size[l]);
            }
            e->size[l] = s;
        }
    }
    /* the output */
    if (arrow) {
        p = arrow + 2;
        TR_FORWARD_IF_ERROR(read_term(name, &p, ",", true, 0, &t));
        TR_RETURN_ERROR_IF(*p == ',', TR_ERR_INVALID, "%s: the output is one term (no ',')", name);
        TR_RETURN_ERROR_IF(t.n + (t.ellipsis >= 0 ? widest : 0) > TR_MAX_DIMS, TR_ERR_SHAPE,
                           "%s: the result would have %d dimensions (at most %d)", name,
                           t.n + (t.ellipsis >= 0 ? widest : 0), TR_MAX_DIMS);
        for (int i = 0; i <= t.n; i++) {
            if (i == t.ellipsis)
                for (int j = 0; j < widest; j++)
                    e->out[e->nout++] = (int8_t)(TR__EINSUM_ELLIPSIS + j);
            if (i == t.n)
                break;
            TR_RETURN_ERROR_IF(!seen[t.letters[i]], TR_ERR_INVALID,
                               "%s: output subscript %c does not appear in any operand", name,
                               label_letter(t.letters[i]));
            TR_RETURN_ERROR_IF(has(e->out, e->nout, t.letters[i]), TR_ERR_INVALID,
                               "%s: output subscript %c appears more than once", name,
                               label_letter(t.letters[i]));
            e->out[e->nout++] = t.letters[i];
        }
    } else {
        int n = widest;
        for (int l = 0; l < TR__EINSUM_ELLIPSIS; l++)
            n += count[l] == 1;
        TR_RETURN_ERROR_IF(n > TR_MAX_DIMS, TR_ERR_SHAPE,
                           "%s: the result would have %d dimensions (at most %d)", name, n,
                           TR_MAX_DIMS);
        for (int j = 0; j < widest; j++)
            e->out[e->nout++] = (int8_t)(TR__EINSUM_ELLIPSIS + j);
        for (int l = 0; l < TR__EINSUM_ELLIPSIS; l++)
            if (count[l] == 1)
                e->out[e->nout++] = (int8_t)l;
    }
    *bad = 1;
    TR_FORWARD_IF_ERROR(check_steps(name, e, ops));
    *bad = -1;
    return TR_OK;
}

/* ------------------------------------------------------------- a run */

/* An operand, a reduction or a product, as a step sees it: a view of t
 * (NULL when the run is dry), one label per dimension. */
struct term {
    struct tr_tensor *t;
    enum tr_dtype dtype;
    int n;
    int lab[TR_MAX_DIMS];
    int64_t shape[TR_MAX_DIMS], st[TR_MAX_DIMS]; /* strides in elements */
    int64_t off;                                 /* bytes from t's element 0 */
    uint64_t held;                               /* the pool block it holds, or 0 */
};

struct run {
    const char *name;
    bool dry;                   /* describe and tally only */
    const struct tr__einsum *e;
    const struct tr_value *out;
    const struct tr_dest *dest;
    bool given;                 /* dry: the result has a destination */
    const struct tr_arg *list;  /* the operands (not dry) */
    const struct tr_value *vals;/* their descriptions (dry) */
    int threads;
    bool integer;
    enum tr_dtype compute;      /* the products' */
    enum tr_dtype inter;        /* intermediates' */
    uint64_t live, peak, result_block;
};

static uint64_t take(struct run *r, uint64_t bytes)
{
    uint64_t block = tr_memory_block_size(bytes);

    r->live += block;
    if (r->live > r->peak)
        r->peak = r->live;
    return block;
}

static void drop(struct run *r, uint64_t block)
{
    r->live -= block;
}

static int64_t numel_of(int n, const int64_t *shape)
{
    int64_t k = 1;

    for (int i = 0; i < n; i++)
        k *= shape[i];
    return k;
}

static uint64_t bytes_of(int n, const int64_t *shape, enum tr_dtype dtype)
{
    return (uint64_t)numel_of(n, shape) * tr_dtype_size(dtype);
}

static int find(const struct term *t, int l)
{
    for (int i = 0; i < t->n; i++)
        if (t->lab[i] == l)
            return i;
    return -1;
}

static void term_release(struct run *r, struct term *t)
{
    if (!r->dry)
        tr_release(t->t);
    t->t = NULL;
    drop(r, t->held);
    t->held = 0;
}

/* The description of a view, for the functions that size copies. */
static struct tr_value desc(enum tr_dtype dtype, int n, const int64_t *shape, const int64_t *st)
{
    struct tr_value v;

    memset(&v, 0, sizeof v);
    v.kind = TR_VALUE_TENSOR;
    v.dtype = dtype;
    v.ndim = n;
    v.device = TR_CPU;
    v.strided = true;
    memcpy(v.shape, shape, (size_t)n * sizeof *shape);
    memcpy(v.strides, st, (size_t)n * sizeof *st);
    return v;
}

/* A new handle viewing term t with shape and strides (elements). */
static struct tr_tensor *view(const struct term *t, int n, const int64_t *shape,
                              const int64_t *st)
{
    return tr_as_strided(t->t, t->dtype, n, shape, st, t->off);
}

/* A compact term of dtype, labels lab and shape: a new pool tensor (the
 * final result when final). */
static tr_status term_new(struct run *r, struct term *c, enum tr_dtype dtype, int n,
                          const int *lab, const int64_t *shape, bool final)
{
    memset(c, 0, sizeof *c);
    c->dtype = dtype;
    c->n = n;
    memcpy(c->lab, lab, (size_t)n * sizeof *lab);
    memcpy(c->shape, shape, (size_t)n * sizeof *shape);
    tr__contiguous_strides(n, shape, c->st);
    if (final) {
        r->result_block = r->dry && r->given ? 0 : tr_memory_block_size(bytes_of(n, shape, dtype));
        r->live += r->result_block;
        if (r->live > r->peak)
            r->peak = r->live;
        if (!r->dry) {
            c->t = tr__new_result(r->name, r->out, r->out->device, r->dest);
            if (!c->t)
                return tr_last_status();
        }
        return TR_OK;
    }
    c->held = take(r, bytes_of(n, shape, dtype));
    if (!r->dry) {
        c->t = tr__empty(r->name, dtype, n, shape, r->out->device);
        if (!c->t) {
            drop(r, c->held);
            return tr_last_status();
        }
    }
    return TR_OK;
}

/* Operand k as tr__operand (floats) or tr__arg_tensor (integers) give it,
 * a repeated label made its diagonal. */
static tr_status term_operand(struct run *r, int k, struct term *t)
{
    const int8_t *labels = r->e->label[k];
    int n = r->e->ndim[k];
    struct tr_value v;

    memset(t, 0, sizeof *t);
    if (r->dry) {
        v = r->vals[k];
    } else {
        struct tr_arg a;
        if (r->list->items) {
            a = r->list->items[k];
        } else {
            memset(&a, 0, sizeof a);
            a.value = r->list->value.items[k];
        }
        v = a.value;
        t->t = r->integer ? tr__arg_tensor(&a, r->out->dtype)
                          : tr__operand(&a, r->out->dtype, r->compute);
        if (!t->t)
            return tr_last_status();
    }
    if (v.kind == TR_VALUE_TENSOR) {
        t->dtype = v.dtype;
        memcpy(t->shape, v.shape, sizeof t->shape);
        tr__value_strides(&v, t->st);
        if (!r->integer && tr__operand_rounds(v.dtype, r->out->dtype)) {
            t->dtype = r->out->dtype;
            tr__contiguous_strides(n, v.shape, t->st);
            t->held = take(r, bytes_of(n, v.shape, t->dtype));
        }
    } else {
        t->dtype = r->integer ? r->out->dtype : r->compute;
    }
    if (t->t) { /* what the handle says, to the letter */
        t->dtype = t->t->dtype;
        memcpy(t->st, t->t->strides, sizeof t->st);
    }
    /* the diagonals */
    t->n = 0;
    for (int i = 0; i < n; i++) {
        int at = find(t, labels[i]);
        if (at >= 0) {
            t->st[at] += t->t ? t->t->strides[i] : t->st[i];
            continue;
        }
        t->lab[t->n] = labels[i];
        t->shape[t->n] = t->t ? t->t->shape[i] : v.shape[i];
        t->st[t->n] = t->t ? t->t->strides[i] : t->st[i];
        t->n++;
    }
    return TR_OK;
}

/* Removes dimension d (of size 1) from t. */
static void term_drop_dim(struct term *t, int d)
{
    for (int i = d; i + 1 < t->n; i++) {
        t->lab[i] = t->lab[i + 1];
        t->shape[i] = t->shape[i + 1];
        t->st[i] = t->st[i + 1];
    }
    t->n--;
}

/* t's shape and strides for the labels lab[0..n) of sizes size[]: a label
 * t has not, or has with size 1, broadcasts (stride 0). */
static void arrange(const struct term *t, int n, const int *lab, const int64_t *size,
                    int64_t *shape, int64_t *st)
{
    for (int i = 0; i < n; i++) {
        int d = find(t, lab[i]);
        shape[i] = size[i];
        st[i] = d >= 0 && t->shape[d] == size[i] ? t->st[d] : 0;
    }
}

/* out = the sum of x over its dimensions from p on, x's first p
 * dimensions being out's (compact).  Each sum in f64 (floats) or 64-bit
 * integers (wrapping), in a fixed order, on one thread. */
static void reduce_into(const struct tr_tensor *x, int p, struct tr_tensor *out)
{
    enum tr_dtype acc = tr_dtype_is_float(out->dtype)    ? TR_DTYPE_F64
                        : tr_dtype_is_signed(out->dtype) ? TR_DTYPE_I64
                                                         : TR_DTYPE_U64;
    int64_t bs[TR_MAX_DIMS], nout = numel_of(p, x->shape), nsum, len, step, rows;
    int64_t item_out = (int64_t)tr_dtype_size(out->dtype);
    const char *base = tr_tensor_data(x);
    char *dst = tr_tensor_data_mut(out);
    int q = x->ndim - p;

    if (nout == 0 || !dst)
        return;
    tr__byte_strides(x, bs);
    nsum = numel_of(q, x->shape + p);
    len = q ? x->shape[x->ndim - 1] : 1;
    step = q ? bs[x->ndim - 1] : 0;
    rows = len ? nsum / len : 0;
#pragma omp parallel for schedule(static) num_threads(tr_num_threads()) \
    if (nout > 1 && nout * nsum >= PARALLEL_ELEMENTS)
    for (int64_t o = 0; o < nout; o++) {
        int64_t at = 0, rest = o;
        double fsum = 0;
        uint64_t isum = 0;
        union {
            double f[ROW];
            uint64_t u[ROW];
        } buf;

        for (int d = p - 1; d >= 0; d--) {
            at += rest % x->shape[d] * bs[d];
            rest /= x->shape[d];
        }
        for (int64_t row = 0; row < rows; row++) {
            int64_t from = at;
            rest = row;
            for (int d = x->ndim - 2; d >= p; d--) {
                from += rest % x->shape[d] * bs[d];
                rest /= x->shape[d];
            }
            for (int64_t j = 0; j < len; j += ROW) {
                int64_t m = len - j < ROW ? len - j : ROW;
                tr__cpu_cast_row((char *)&buf, 8, acc, base + from + j * step, step, x->dtype, m);
                if (acc == TR_DTYPE_F64)
                    for (int64_t i = 0; i < m; i++)
                        fsum += buf.f[i];
                else
                    for (int64_t i = 0; i < m; i++)
                        isum += buf.u[i];
            }
        }
        if (acc == TR_DTYPE_F64)
            tr__cpu_cast_row(dst + o * item_out, item_out, out->dtype, (const char *)&fsum, 8,
                             acc, 1);
        else
            tr__cpu_cast_row(dst + o * item_out, item_out, out->dtype, (const char *)&isum, 8,
                             acc, 1);
    }
}

/* Sums t over the labels keep[] does not mark, into a compact term of
 * the intermediate dtype (the result when final); nothing to do when it
 * has none unless final. */
static tr_status reduce_term(struct run *r, struct term *t, const bool *keep, int n_out,
                             const int *out_lab, bool final)
{
    int lab[TR_MAX_DIMS], order[TR_MAX_DIMS], p = 0, q = 0;
    int64_t shape[TR_MAX_DIMS], xs[TR_MAX_DIMS], xst[TR_MAX_DIMS];
    struct term c;
    struct tr_tensor *x = NULL;
    tr_status s;

    if (final) {
        for (int i = 0; i < n_out; i++)
            order[p++] = find(t, out_lab[i]);
    } else {
        for (int i = 0; i < t->n; i++)
            if (keep[t->lab[i]])
                order[p++] = i;
        if (p == t->n)
            return TR_OK;
    }
    for (int i = 0; i < p; i++) {
        lab[i] = t->lab[order[i]];
        shape[i] = t->shape[order[i]];
    }
    for (int i = 0; i < t->n; i++)
        if (!has_int(order, p, i))
            order[p + q++] = i;
    for (int i = 0; i < p + q; i++) {
        xs[i] = t->shape[order[i]];
        xst[i] = t->st[order[i]];
    }
    TR_FORWARD_IF_ERROR(term_new(r, &c, final ? r->out->dtype : r->inter, p, lab, shape, final));
    s = TR_OK;
    if (!r->dry) {
        x = view(t, p + q, xs, xst);
        if (!x)
            s = tr_last_status();
        else if (q == 0)
            s = tr_copy_into(c.t, x);
        else
            reduce_into(x, p, c.t);
        tr_release(x);
    }
    term_release(r, t);
    if (s != TR_OK) {
        term_release(r, &c);
        return s;
    }
    *t = c;
    return TR_OK;
}

/* Merges t's dimensions dims[0..n) (in that order) into one: its size
 * and stride; false when the strides do not allow it. */
static bool merge(const struct term *t, const int *dims, int n, int64_t *size, int64_t *stride)
{
    int64_t s = 1, inner = 0, last = -1;

    for (int i = 0; i < n; i++)
        s *= t->shape[dims[i]];
    *size = s;
    *stride = 1;
    if (s <= 1)
        return true;
    for (int i = n - 1; i >= 0; i--) {
        int d = dims[i];
        if (t->shape[d] == 1)
            continue;
        if (last < 0)
            *stride = t->st[d];
        else if (t->st[d] != inner)
            return false;
        last = d;
        inner = t->st[d] * t->shape[d];
    }
    return true;
}

/* Copies t, viewed in the order of dims[0..n) of its dimensions, into a
 * compact term of the intermediate dtype. */
static tr_status term_compact(struct run *r, struct term *t, const int *dims, int n)
{
    int lab[TR_MAX_DIMS];
    int64_t shape[TR_MAX_DIMS], st[TR_MAX_DIMS];
    struct term c;
    struct tr_tensor *v;

    for (int i = 0; i < n; i++) {
        lab[i] = t->lab[dims[i]];
        shape[i] = t->shape[dims[i]];
        st[i] = t->st[dims[i]];
    }
    memset(&c, 0, sizeof c);
    c.dtype = r->inter;
    c.n = n;
    memcpy(c.lab, lab, (size_t)n * sizeof *lab);
    memcpy(c.shape, shape, (size_t)n * sizeof *shape);
    tr__contiguous_strides(n, shape, c.st);
    c.held = take(r, bytes_of(n, shape, r->inter));
    if (!r->dry) {
        v = view(t, n, shape, st);
        c.t = v ? tr_cast(v, r->inter) : NULL;
        tr_release(v);
        if (!c.t) {
            drop(r, c.held);
            return tr_last_status();
        }
    }
    term_release(r, t);
    *t = c;
    return TR_OK;
}

/* The product without an inner letter: c[lab] = a * b, broadcast. */
static tr_status product(struct run *r, struct term *a, struct term *b, bool final,
                         struct term *c)
{
    int lab[TR_MAX_DIMS], n = 0;
    int64_t size[TR_MAX_DIMS], sa[TR_MAX_DIMS], ta[TR_MAX_DIMS], sb[TR_MAX_DIMS],
        tb[TR_MAX_DIMS];
    struct tr_tensor *va = NULL, *vb = NULL;
    enum tr_dtype compute = tr__compute_dtype(r->out->dtype);
    tr_status s = TR_OK;

    if (final) {
        for (int i = 0; i < r->e->nout; i++)
            lab[n++] = r->e->out[i];
    } else {
        for (int i = 0; i < a->n; i++)
            lab[n++] = a->lab[i];
        for (int i = 0; i < b->n; i++)
            if (find(a, b->lab[i]) < 0)
                lab[n++] = b->lab[i];
    }
    for (int i = 0; i < n; i++) {
        int da = find(a, lab[i]), db = find(b, lab[i]);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        size[i] = x == 1 ? y : x;
    }
    TR_FORWARD_IF_ERROR(term_new(r, c, final ? r->out->dtype : r->inter, n, lab, size, final));
    if (!r->dry) {
        arrange(a, n, lab, size, sa, ta);
        arrange(b, n, lab, size, sb, tb);
        va = view(a, n, sa, ta);
        vb = va ? view(b, n, sb, tb) : NULL;
        s = vb ? tr__map(c->t, compute, (const struct tr_tensor *const[]){va, vb}, 2, compute,
                         tr__mm_mul_fn(compute), NULL)
               : tr_last_status();
        tr_release(vb);
        tr_release(va);
    }
    term_release(r, a);
    term_release(r, b);
    if (s != TR_OK)
        term_release(r, c);
    return s;
}

/* A view of t as the matrices [batch..., rows, cols] of the labels of
 * bl (nb), then of g1 (n1) merged, then of g2 (n2) merged, the batch
 * sizes bs[]; copied compact first when a group does not merge. */
static tr_status matrices(struct run *r, struct term *t, const int *bl, int nb,
                          const int64_t *bs, const int *g1, int n1, const int *g2, int n2,
                          int64_t *shape, int64_t *st)
{
    int d1[TR_MAX_DIMS], d2[TR_MAX_DIMS], all[TR_MAX_DIMS], n = 0;
    bool ok;

    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n1; i++)
            d1[i] = find(t, g1[i]);
        for (int i = 0; i < n2; i++)
            d2[i] = find(t, g2[i]);
        ok = merge(t, d1, n1, &shape[nb], &st[nb]) &&
             merge(t, d2, n2, &shape[nb + 1], &st[nb + 1]);
        if (ok || pass == 1)
            break;
        n = 0;
        for (int i = 0; i < nb; i++)
            if (find(t, bl[i]) >= 0)
                all[n++] = find(t, bl[i]);
        memcpy(all + n, d1, (size_t)n1 * sizeof *d1);
        memcpy(all + n + n1, d2, (size_t)n2 * sizeof *d2);
        TR_FORWARD_IF_ERROR(term_compact(r, t, all, n + n1 + n2));
    }
    if (!ok)
        return tr_set_error(TR_ERR_STATE, "%s: a compact operand does not merge", r->name);
    for (int i = 0; i < nb; i++) {
        int d = find(t, bl[i]);
        shape[i] = d >= 0 ? t->shape[d] : 1;
        st[i] = d >= 0 && t->shape[d] == bs[i] ? t->st[d] : 0;
        if (d >= 0 && t->shape[d] != bs[i])
            shape[i] = 1; /* broadcast by the product */
    }
    return TR_OK;
}

/* The product with inner letters k[0..nk): through matmul. */
static tr_status contract(struct run *r, struct term *a, struct term *b, const int *bl, int nb,
                          const int *ml, int nm, const int *nl, int nn, const int *kl, int nk,
                          bool final, bool direct, struct term *c)
{
    int lab[TR_MAX_DIMS], n = 0;
    int64_t size[TR_MAX_DIMS], bs[TR_MAX_DIMS], sa[TR_MAX_DIMS], ta[TR_MAX_DIMS];
    int64_t sb[TR_MAX_DIMS], tb[TR_MAX_DIMS], sc[TR_MAX_DIMS], tc[TR_MAX_DIMS];
    uint64_t copies[2] = {0, 0}, tiles = 0;
    struct tr__mm_operand oa, ob;
    struct tr_tensor *va = NULL, *vb = NULL, *vc = NULL;
    struct term tmp;
    struct tr_value da, db, dc;
    tr_status s = TR_OK;
    bool into_result = final && direct;

    memset(&oa, 0, sizeof oa);
    memset(&ob, 0, sizeof ob);
    memset(&tmp, 0, sizeof tmp);
    for (int i = 0; i < nb; i++) {
        int x = find(a, bl[i]), y = find(b, bl[i]);
        bs[i] = a->shape[x] == 1 ? b->shape[y] : a->shape[x];
        lab[n] = bl[i];
        size[n++] = bs[i];
    }
    for (int i = 0; i < nm; i++) {
        lab[n] = ml[i];
        size[n++] = a->shape[find(a, ml[i])];
    }
    for (int i = 0; i < nn; i++) {
        lab[n] = nl[i];
        size[n++] = b->shape[find(b, nl[i])];
    }
    TR_FORWARD_IF_ERROR(matrices(r, a, bl, nb, bs, ml, nm, kl, nk, sa, ta));
    TR_FORWARD_IF_ERROR(matrices(r, b, bl, nb, bs, kl, nk, nl, nn, sb, tb));
    for (int i = 0; i < nb; i++)
        sc[i] = bs[i];
    sc[nb] = sa[nb];
    sc[nb + 1] = sb[nb + 1];
    tr__contiguous_strides(nb + 2, sc, tc);
    da = desc(a->dtype, nb + 2, sa, ta);
    db = desc(b->dtype, nb + 2, sb, tb);
    dc = desc(into_result ? r->out->dtype : r->inter, nb + 2, sc, tc);
    if (!r->dry) {
        va = view(a, nb + 2, sa, ta);
        vb = va ? view(b, nb + 2, sb, tb) : NULL;
        if (!vb) {
            tr_release(va);
            return tr_last_status();
        }
    }
    if (!r->integer) { /* as tr__k_matmul: the operands, then the result */
        if (tr__mm_copies(&da, true, r->compute)) {
            copies[0] = take(r, bytes_of(nb + 2, sa, r->compute));
            da = desc(r->compute, nb + 2, sa, ta);
            tr__contiguous_strides(nb + 2, sa, da.strides);
        }
        if (tr__mm_copies(&db, false, r->compute)) {
            copies[1] = take(r, bytes_of(nb + 2, sb, r->compute));
            db = desc(r->compute, nb + 2, sb, tb);
            tr__contiguous_strides(nb + 2, sb, db.strides);
        }
        if (!r->dry) {
            s = tr__mm_prepare(r->name, &oa, va, true, r->compute, nb);
            if (s == TR_OK)
                s = tr__mm_prepare(r->name, &ob, vb, false, r->compute, nb);
            else
                tr_release(vb);
            va = vb = NULL;
        }
    }
    if (s == TR_OK)
        s = term_new(r, &tmp, into_result ? r->out->dtype : r->inter, n, lab, size,
                     into_result);
    if (s == TR_OK && !r->dry) {
        vc = tr_as_strided(tmp.t, tmp.dtype, nb + 2, sc, tc, 0);
        if (!vc)
            s = tr_last_status();
    }
    if (s == TR_OK && !r->integer) {
        tiles = take(r, tr__mm_tile_scratch(&da, &db, &dc, nb, r->threads));
        if (!r->dry)
            s = tr__mm_multiply(r->name, &oa, &ob, vc, nb, r->compute, NULL, NULL, NULL);
    } else if (s == TR_OK) {
        enum tr_dtype lane;
        if (tr__mm_int_copies(&da, true, dc.dtype, &lane))
            copies[0] = take(r, bytes_of(nb + 2, sa, lane));
        if (tr__mm_int_copies(&db, false, dc.dtype, &lane))
            copies[1] = take(r, bytes_of(nb + 2, sb, lane));
        tiles = take(r, tr__mm_int_tile_scratch(&da, &db, &dc, nb, r->threads));
        if (!r->dry) {
            s = tr__cpu_matmul_int(r->name, va, vb, vc, nb);
            va = vb = NULL;
        }
    }
    drop(r, tiles);
    drop(r, copies[0]);
    drop(r, copies[1]);
    if (!r->dry) {
        tr_release(va);
        tr_release(vb);
        tr_release(oa.t);
        tr_release(ob.t);
        tr_release(vc);
    }
    term_release(r, a);
    term_release(r, b);
    if (s != TR_OK) {
        term_release(r, &tmp);
        return s;
    }
    if (!final || direct) {
        *c = tmp;
        return TR_OK;
    }
    /* the product in the output's order */
    for (int i = 0; i < r->e->nout; i++)
        lab[i] = r->e->out[i];
    s = term_new(r, c, r->out->dtype, r->e->nout, lab, r->out->shape, true);
    if (s == TR_OK) {
        int64_t os[TR_MAX_DIMS], ot[TR_MAX_DIMS];
        if (!r->dry) {
            struct tr_tensor *v;
            arrange(&tmp, r->e->nout, lab, c->shape, os, ot);
            v = view(&tmp, r->e->nout, os, ot);
            s = v ? tr_copy_into(c->t, v) : tr_last_status();
            tr_release(v);
        }
    }
    term_release(r, &tmp);
    if (s != TR_OK)
        term_release(r, c);
    return s;
}

/* Sorts the labels l[0..n) by t's strides, largest first (stable). */
static void by_stride(const struct term *t, int *l, int n)
{
    for (int i = 1; i < n; i++) {
        int x = l[i], j = i;
        int64_t sx = t->st[find(t, x)];
        sx = sx < 0 ? -sx : sx;
        for (; j > 0; j--) {
            int64_t sy = t->st[find(t, l[j - 1])];
            if ((sy < 0 ? -sy : sy) >= sx)
                break;
            l[j] = l[j - 1];
        }
        l[j] = x;
    }
}

/* The class of label l in a step: 0 batch, 1 of a only, 2 of b only. */
static int class_of(const struct term *a, const struct term *b, int l)
{
    bool x = find(a, l) >= 0, y = find(b, l) >= 0;

    return x && y ? 0 : x ? 1 : 2;
}

/* Whether the output's labels run batch, then a's, then b's. */
static bool in_order(const struct run *r, const struct term *a, const struct term *b)
{
    int last = 0;

    for (int i = 0; i < r->e->nout; i++) {
        int k = class_of(a, b, r->e->out[i]);
        if (k < last)
            return false;
        last = k;
    }
    return true;
}

/* One step: a and b (both taken over) into c, keeping the labels keep[]
 * marks; the last step (final) makes the result. */
static tr_status pair(struct run *r, struct term *a, struct term *b, const bool *keep,
                      bool final, struct term *c)
{
    bool ka[TR__EINSUM_LABELS], kb[TR__EINSUM_LABELS], direct = true;
    int bl[TR_MAX_DIMS], ml[TR_MAX_DIMS], nl[TR_MAX_DIMS], kl[TR_MAX_DIMS];
    int nb = 0, nm = 0, nn = 0, nk = 0;
    tr_status s;

    /* a shared letter summed over that one side has with size 1: that
     * side drops it, the other sums it */
    for (int i = 0; i < a->n;) {
        int l = a->lab[i], j = find(b, l);
        if (j >= 0 && !keep[l] && a->shape[i] != b->shape[j]) {
            if (a->shape[i] == 1) {
                term_drop_dim(a, i);
                continue;
            }
            term_drop_dim(b, j);
        }
        i++;
    }
    for (int l = 0; l < TR__EINSUM_LABELS; l++) {
        ka[l] = keep[l] || find(b, l) >= 0;
        kb[l] = keep[l] || find(a, l) >= 0;
    }
    s = reduce_term(r, a, ka, 0, NULL, false);
    if (s == TR_OK)
        s = reduce_term(r, b, kb, 0, NULL, false);
    for (int i = 0; s == TR_OK && i < a->n; i++)
        if (!keep[a->lab[i]] && find(b, a->lab[i]) >= 0)
            kl[nk++] = a->lab[i];
    if (s == TR_OK && nk == 0)
        return product(r, a, b, final, c);
    if (s == TR_OK && final && !in_order(r, a, b)) {
        struct term x = *a;
        *a = *b;
        *b = x;
        if (!in_order(r, a, b)) { /* neither: into a temporary */
            *b = *a;
            *a = x;
            direct = false;
        }
    }
    if (s == TR_OK) {
        by_stride(a, kl, nk);
        if (final) {
            for (int i = 0; i < r->e->nout; i++) {
                int l = r->e->out[i], k = class_of(a, b, l);
                if (k == 0)
                    bl[nb++] = l;
                else if (k == 1)
                    ml[nm++] = l;
                else
                    nl[nn++] = l;
            }
        } else {
            for (int i = 0; i < a->n; i++) {
                int l = a->lab[i];
                if (find(b, l) < 0)
                    ml[nm++] = l;
                else if (keep[l])
                    bl[nb++] = l;
            }
            for (int i = 0; i < b->n; i++)
                if (find(a, b->lab[i]) < 0)
                    nl[nn++] = b->lab[i];
        }
        s = contract(r, a, b, bl, nb, ml, nm, nl, nn, kl, nk, final, direct, c);
    }
    if (s != TR_OK) {
        term_release(r, a);
        term_release(r, b);
    }
    return s;
}

/* The whole contraction; the result in *result (not dry). */
static tr_status run_all(struct run *r, struct tr_tensor **result)
{
    const struct tr__einsum *e = r->e;
    struct term acc, b, c;
    bool keep[TR__EINSUM_LABELS];
    int out_lab[TR_MAX_DIMS];
    tr_status s;

    for (int i = 0; i < e->nout; i++)
        out_lab[i] = e->out[i];
    TR_FORWARD_IF_ERROR(term_operand(r, 0, &acc));
    if (e->nops == 1) {
        memset(keep, 0, sizeof keep);
        for (int i = 0; i < e->nout; i++)
            keep[e->out[i]] = true;
        s = reduce_term(r, &acc, keep, e->nout, out_lab, true);
        if (s != TR_OK) {
            term_release(r, &acc);
            return s;
        }
        *result = acc.t;
        return TR_OK;
    }
    for (int k = 1; k < e->nops; k++) {
        s = term_operand(r, k, &b);
        if (s != TR_OK) {
            term_release(r, &acc);
            return s;
        }
        memset(keep, 0, sizeof keep);
        for (int i = 0; i < e->nout; i++)
            keep[e->out[i]] = true;
        for (int o = k + 1; o < e->nops; o++)
            for (int i = 0; i < e->ndim[o]; i++)
                keep[e->label[o][i]] = true;
        TR_FORWARD_IF_ERROR(pair(r, &acc, &b, keep, k == e->nops - 1, &c));
        acc = c;
    }
    *result = acc.t;
    return TR_OK;
}

/* The operands' descriptions for the parser: numbers as rank 0. */
static void operand_values(const struct tr_value *list, struct tr_value *ops)
{
    for (size_t k = 0; k < list->count && k < TR__EINSUM_MAX_OPERANDS; k++) {
        ops[k] = list->items[k];
        if (ops[k].kind != TR_VALUE_TENSOR)
            ops[k].ndim = 0;
    }
}

static void run_init(struct run *r, const struct tr__op *op, const struct tr__einsum *e,
                     const struct tr_value *out)
{
    memset(r, 0, sizeof *r);
    r->name = op->info.name;
    r->e = e;
    r->out = out;
    r->integer = tr_dtype_is_integer(out->dtype);
    r->compute = tr__compute_dtype(out->dtype);
    if (!r->integer)
        r->inter = r->compute;
    else if (tr_dtype_is_signed(out->dtype))
        r->inter = tr_dtype_size(out->dtype) <= 4 ? TR_DTYPE_I32 : TR_DTYPE_I64;
    else
        r->inter = tr_dtype_size(out->dtype) <= 4 ? TR_DTYPE_U32 : TR_DTYPE_U64;
}

tr_status tr__einsum_memory(const struct tr__op *op, const struct tr_value *args,
                            const struct tr_value *out, bool given, int threads,
                            uint64_t *peak, uint64_t *result_block)
{
    struct tr_value ops[TR__EINSUM_MAX_OPERANDS];
    struct tr__einsum e;
    struct run r;
    int bad;

    operand_values(&args[1], ops);
    TR_FORWARD_IF_ERROR(tr__einsum_parse(op->info.name, args[0].string, (int)args[1].count, ops,
                                         &e, &bad));
    run_init(&r, op, &e, out);
    r.dry = true;
    r.given = given;
    r.vals = args[1].items;
    r.threads = threads;
    TR_FORWARD_IF_ERROR(run_all(&r, &(struct tr_tensor *){NULL}));
    *peak = r.peak;
    *result_block = r.result_block;
    return TR_OK;
}

tr_status tr__k_einsum(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    struct tr_value ops[TR__EINSUM_MAX_OPERANDS];
    struct tr__einsum e;
    struct run r;
    int bad;

    TR_RETURN_ERROR_IF(!tr_dtype_is_integer(out->dtype) && !tr_dtype_is_float(out->dtype),
                       TR_ERR_DTYPE, "%s: does not take %s", op->info.name,
                       tr_dtype_name(out->dtype));
    for (size_t k = 0; k < args[1].value.count && k < TR__EINSUM_MAX_OPERANDS; k++) {
        const struct tr_arg *a = args[1].items ? &args[1].items[k] : NULL;
        ops[k] = !a ? args[1].value.items[k] : a->tensor ? tr_value_of(a->tensor) : a->value;
        if (ops[k].kind != TR_VALUE_TENSOR)
            ops[k].ndim = 0;
    }
    TR_FORWARD_IF_ERROR(tr__einsum_parse(op->info.name, args[0].value.string,
                                         (int)args[1].value.count, ops, &e, &bad));
    run_init(&r, op, &e, out);
    r.dest = dest;
    r.list = &args[1];
    r.threads = tr_num_threads();
    return run_all(&r, &results[0]);
}
