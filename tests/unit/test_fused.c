/*
 * test_fused.c - fused chains (tensorrun_fused.h): generated chains of 2 to
 * 6 elementwise ops over f16, bf16, f32 and integer inputs (broadcast,
 * transposed, sliced, reversed and expanded), each feeding every reduction,
 * every row-wise op, or nothing, compared bit for bit with the same ops run
 * one by one through tr_op_run, with 1 and with 2 threads; and the pool's
 * statistics of each fused run against tr_fused_memory: the result, and
 * a tail's own buffers (partials, line buffers), exactly.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "op_test.h"
#include "tap.h"
#include "tensorrun_fused.h"

#define CHAINS 240

/* ------------------------------------------------------------ random */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int below(int n)
{
    return (int)(next() % (uint64_t)n);
}

static bool chance(int percent)
{
    return below(100) < percent;
}

/* ------------------------------------------------------------ inputs */

static const enum tr_dtype input_dtypes[] = {
    TR_DTYPE_F16, TR_DTYPE_BF16, TR_DTYPE_F32, TR_DTYPE_F16, TR_DTYPE_BF16, TR_DTYPE_F32,
    TR_DTYPE_F64, TR_DTYPE_I8,   TR_DTYPE_I16, TR_DTYPE_I32, TR_DTYPE_I64,  TR_DTYPE_U8,
    TR_DTYPE_BOOL,
};
#define NDTYPES (sizeof input_dtypes / sizeof input_dtypes[0])

static double random_value(enum tr_dtype d)
{
    if (d == TR_DTYPE_BOOL)
        return below(2);
    if (d == TR_DTYPE_U8)
        return below(13);
    /* now and then past what f16 (2048) and bf16 (256) hold exactly, and
     * past f16's range: an integer meeting an f16 result is rounded first */
    if (!tr_dtype_is_float(d) && tr_dtype_size(d) > 1 && chance(20)) {
        int lim = tr_dtype_size(d) == 2 ? 23000 : 70001;
        return below(2 * lim + 1) - lim;
    }
    if (!tr_dtype_is_float(d))
        return below(13) - 6;
    switch (below(200)) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return INFINITY;
    case 3: return NAN;
    default: return (below(801) - 400) / 100.0;
    }
}

/* A tensor of dtype d and shape[0..ndim) laid out as `layout` says: 0
 * compact, 1 transposed, 2 every other element, 3 reversed, 4 expanded
 * from a size-1 dimension. */
static struct tr_tensor *make_input(enum tr_dtype d, int ndim, const int64_t *shape, int layout)
{
    int64_t base[TR_MAX_DIMS], n = 1;
    struct tr_tensor *f, *t, *v = NULL;
    double *host;
    int perm[TR_MAX_DIMS], last = ndim - 1;

    if (ndim < 2 && layout == 1)
        layout = 0;
    if (layout == 4 && (ndim == 0 || shape[last] == 1))
        layout = 0;
    memcpy(base, shape, (size_t)ndim * sizeof *base);
    if (layout == 1)
        for (int i = 0; i < ndim; i++)
            base[i] = shape[ndim - 1 - i];
    if (layout == 2 && ndim > 0)
        base[last] = 2 * shape[last] + 1;
    if (layout == 4)
        base[last] = 1;
    for (int i = 0; i < ndim; i++)
        n *= base[i];
    host = malloc((size_t)(n ? n : 1) * sizeof *host);
    for (int64_t i = 0; i < n; i++)
        host[i] = random_value(d);
    f = tr_from_data(host, TR_DTYPE_F64, ndim, base, TR_CPU);
    free(host);
    t = tr_cast(f, d);
    tr_release(f);
    switch (layout) {
    case 1:
        for (int i = 0; i < ndim; i++)
            perm[i] = ndim - 1 - i;
        v = tr_permute(t, perm, ndim);
        break;
    case 2:
        v = ndim > 0 ? tr_slice(t, last, 1, TR_SLICE_NONE, 2) : NULL;
        break;
    case 3:
        v = ndim > 0 ? tr_slice(t, last, TR_SLICE_NONE, TR_SLICE_NONE, -1) : NULL;
        break;
    case 4:
        v = tr_expand(t, shape, ndim);
        break;
    default:
        return t;
    }
    if (v)
        tr_release(t);
    return v ? v : t;
}

/* ------------------------------------------------------------ chains */

struct gen {
    struct tr_fused chain;
    struct tr_tensor *inputs[TR_FUSED_MAX_INPUTS];
    struct tr_value dims[2]; /* a tail's list of dims */
    int tail;                /* index in tails[], or -1 */
};

static const enum tr_op_id unary_ops[] = {
    TR_OP_NEG,   TR_OP_ABS,     TR_OP_SIGN,       TR_OP_EXP,     TR_OP_LOG,         TR_OP_LOG1P,
    TR_OP_EXPM1, TR_OP_SQRT,    TR_OP_RSQRT,      TR_OP_SQUARE,  TR_OP_RECIPROCAL,  TR_OP_SIN,
    TR_OP_COS,   TR_OP_TANH,    TR_OP_SIGMOID,    TR_OP_RELU,    TR_OP_GELU,        TR_OP_SILU,
    TR_OP_ERF,   TR_OP_FLOOR,   TR_OP_CEIL,       TR_OP_ROUND,   TR_OP_ISNAN,       TR_OP_ISFINITE,
    TR_OP_LOGICAL_NOT,
};
static const enum tr_op_id binary_ops[] = {
    TR_OP_ADD, TR_OP_SUB, TR_OP_MUL, TR_OP_DIV, TR_OP_POW, TR_OP_MAXIMUM, TR_OP_MINIMUM,
    TR_OP_EQ,  TR_OP_NE,  TR_OP_LT,  TR_OP_LE,  TR_OP_GT,  TR_OP_GE,      TR_OP_LOGICAL_AND,
    TR_OP_LOGICAL_OR, TR_OP_ADD, TR_OP_MUL, TR_OP_SUB,
};
static const enum tr_op_id tails[] = {
    TR_OP_SUM,  TR_OP_MEAN, TR_OP_PROD,  TR_OP_MAX, TR_OP_MIN, TR_OP_ARGMAX,    TR_OP_ARGMIN,
    TR_OP_VAR,  TR_OP_STD,  TR_OP_NORM,  TR_OP_ALL, TR_OP_ANY, TR_OP_LOGSUMEXP, TR_OP_SOFTMAX,
    TR_OP_LOG_SOFTMAX, TR_OP_L2_NORMALIZE, TR_OP_LAYER_NORM, TR_OP_RMS_NORM,
};
#define NTAILS ((int)(sizeof tails / sizeof tails[0]))
#define N(a) ((int)(sizeof a / sizeof a[0]))

static struct tr_fused_arg constant(struct tr_value v)
{
    struct tr_fused_arg a;

    memset(&a, 0, sizeof a);
    a.ref = TR_FUSED_CONST;
    a.value = v;
    return a;
}

static struct tr_fused_arg ref(enum tr_fused_ref r, int index)
{
    struct tr_fused_arg a;

    memset(&a, 0, sizeof a);
    a.ref = r;
    a.index = index;
    return a;
}

static struct tr_fused_arg number(void)
{
    static const double floats[] = {2.0, 0.5, -1.5, 3.25, 1e-3, 100.0, -0.0};
    struct tr_arg v = chance(50) ? int_arg(below(7) - 3) : float_arg(floats[below(7)]);

    return constant(v.value);
}

/* An operand for a step that is not the chain's previous step. */
static struct tr_fused_arg other(const struct gen *g, int step)
{
    int r = below(10);

    if (r < 5)
        return ref(TR_FUSED_INPUT, below(g->chain.ninputs));
    if (r < 9 || step == 0)
        return number();
    return ref(TR_FUSED_STEP, below(step));
}

/* Fills op f's arguments with its defaults. */
static void defaults(struct tr_fused_op *f)
{
    const struct tr_op_info *info = tr_op_get(f->op);

    for (int i = 0; i < info->nparams; i++)
        f->args[i] = constant(info->params[i].default_value);
}

static void gen_step(struct gen *g, int s)
{
    struct tr_fused_op *f = &g->chain.steps[s];
    struct tr_fused_arg prev = s == 0 ? ref(TR_FUSED_INPUT, 0) : ref(TR_FUSED_STEP, s - 1);
    int kind = below(10);

    memset(f, 0, sizeof *f);
    if (kind < 4) {
        f->op = unary_ops[below(N(unary_ops))];
        defaults(f);
        f->args[0] = prev;
        if (f->op == TR_OP_GELU && chance(50))
            f->args[1] = constant(string_arg("tanh").value);
    } else if (kind < 8) {
        bool swap = chance(30);
        f->op = binary_ops[below(N(binary_ops))];
        defaults(f);
        f->args[swap] = prev;
        f->args[!swap] = other(g, s);
    } else if (kind == 8) {
        f->op = chance(50) ? TR_OP_WHERE : TR_OP_CLAMP;
        defaults(f);
        if (f->op == TR_OP_WHERE) {
            int at = below(3);
            for (int i = 0; i < 3; i++)
                f->args[i] = i == at ? prev : other(g, s);
        } else {
            f->args[0] = prev;
            if (chance(70))
                f->args[1] = other(g, s);
            if (chance(70))
                f->args[2] = other(g, s);
        }
    } else {
        static const enum tr_dtype to[] = {TR_DTYPE_F16, TR_DTYPE_BF16, TR_DTYPE_F32,
                                           TR_DTYPE_I32, TR_DTYPE_I64, TR_DTYPE_U8,
                                           TR_DTYPE_BOOL, TR_DTYPE_I16};
        f->op = TR_OP_CAST;
        defaults(f);
        f->args[0] = prev;
        f->args[1] = constant(dtype_arg(to[below(N(to))]).value);
    }
}

/* The tail's arguments; `last` is the chain's result before it. */
static void gen_tail(struct gen *g, const struct tr_value *last)
{
    struct tr_fused_op *f = &g->chain.tail;
    const struct tr_op_info *info;
    int nd = last->ndim;

    memset(f, 0, sizeof *f);
    f->op = tails[g->tail];
    info = tr_op_get(f->op);
    defaults(f);
    for (int i = 1; i < info->nparams; i++) {
        const char *p = info->params[i].name;
        enum tr_param_kind k = info->params[i].kind;
        if (strcmp(p, "dim") == 0 && nd > 0 && k == TR_PARAM_DIMS && chance(60)) {
            if (nd > 1 && chance(40)) {
                int a = below(nd), b = (a + 1 + below(nd - 1)) % nd;
                g->dims[0] = int_arg(a).value;
                g->dims[1] = int_arg(b - nd).value;
                f->args[i] = constant(list_arg(NULL, 2).value);
                f->args[i].value.items = g->dims;
            } else {
                f->args[i] = constant(int_arg(below(2 * nd) - nd).value);
            }
        } else if (strcmp(p, "dim") == 0 && nd > 0 && chance(70)) {
            f->args[i] = constant(int_arg(below(2 * nd) - nd).value);
        } else if (strcmp(p, "keepdim") == 0) {
            f->args[i] = constant(bool_arg(chance(50)).value);
        } else if (strcmp(p, "correction") == 0) {
            f->args[i] = constant(int_arg(below(3)).value);
        } else if (strcmp(p, "ord") == 0) {
            static const double ords[] = {2.0, 1.0, 3.0, INFINITY};
            f->args[i] = constant(float_arg(ords[below(4)]).value);
        } else if ((strcmp(p, "weight") == 0 || strcmp(p, "bias") == 0) && nd > 0 &&
                   g->chain.ninputs < TR_FUSED_MAX_INPUTS && chance(60)) {
            int64_t len = last->shape[nd - 1];
            int k2 = g->chain.ninputs++;
            g->inputs[k2] = make_input(input_dtypes[below(NDTYPES)], 1, &len, below(4));
            f->args[i] = ref(TR_FUSED_INPUT, k2);
        }
    }
}

/* A chain's shape: mostly small, sometimes past the blocks and the
 * threshold where the kernels start threads. */
static int gen_shape(int64_t *shape)
{
    int nd = 1 + below(3);

    if (chance(15)) {
        static const int64_t big[][3] = {{70001, 1, 1}, {9, 8193, 1}, {3, 5, 4500}, {40000, 2, 1},
                                         {2, 3, 9000}};
        int b = below(5);
        nd = b == 0 ? 1 : b == 1 || b == 3 ? 2 : 3;
        memcpy(shape, big[b], sizeof big[b]);
        return nd;
    }
    for (int i = 0; i < nd; i++)
        shape[i] = 1 + below(i == nd - 1 ? 70 : 9);
    return nd;
}

static void gen_free(struct gen *g)
{
    for (int k = 0; k < g->chain.ninputs; k++)
        tr_release(g->inputs[k]);
    memset(g, 0, sizeof *g);
}

/* A chain that checks, with tail number `tail` (-1: none). */
static bool gen_chain(struct gen *g, int tail)
{
    int64_t shape[TR_MAX_DIMS];
    struct tr_value values[TR_FUSED_MAX_INPUTS], result;
    int nd = gen_shape(shape);

    memset(g, 0, sizeof *g);
    g->tail = tail;
    g->chain.ninputs = 1 + below(3);
    for (int k = 0; k < g->chain.ninputs; k++) {
        int64_t ts[TR_MAX_DIMS];
        int tn = k == 0 ? nd : nd - below(nd + 1);
        for (int i = 0; i < tn; i++)
            ts[i] = k > 0 && chance(25) ? 1 : shape[nd - tn + i];
        g->inputs[k] = make_input(input_dtypes[below(NDTYPES)], tn, ts, below(5));
    }
    g->chain.nsteps = 2 + below(5);
    for (int s = 0; s < g->chain.nsteps; s++)
        gen_step(g, s);
    for (int k = 0; k < g->chain.ninputs; k++)
        values[k] = tr_value_of(g->inputs[k]);
    if (tr_fused_check(&g->chain, values, &result, NULL) != TR_OK)
        return false;
    if (tail >= 0) {
        g->chain.has_tail = true;
        gen_tail(g, &result);
        for (int k = 0; k < g->chain.ninputs; k++)
            values[k] = tr_value_of(g->inputs[k]);
        if (tr_fused_check(&g->chain, values, &result, NULL) != TR_OK)
            return false;
    }
    return true;
}

/* ------------------------------------------------------------ running */

static struct tr_arg unfused_arg(const struct gen *g, struct tr_tensor *const *steps,
                                 const struct tr_fused_arg *a)
{
    switch (a->ref) {
    case TR_FUSED_INPUT:
        return tensor_arg(g->inputs[a->index]);
    case TR_FUSED_STEP:
        return tensor_arg(steps[a->index]);
    default: {
        struct tr_arg c;
        memset(&c, 0, sizeof c);
        c.value = a->value;
        return c;
    }
    }
}

/* The chain run op by op, or NULL when an op refuses. */
static struct tr_tensor *run_unfused(const struct gen *g)
{
    struct tr_tensor *steps[TR_FUSED_MAX_STEPS + 1] = {NULL};
    const struct tr_fused *c = &g->chain;
    int n = c->nsteps + c->has_tail;

    for (int s = 0; s < n; s++) {
        const struct tr_fused_op *f = s < c->nsteps ? &c->steps[s] : &c->tail;
        const struct tr_op_info *info = tr_op_get(f->op);
        struct tr_arg args[TR_OP_MAX_PARAMS];
        struct tr_tensor *r[TR_OP_MAX_RESULTS] = {NULL};
        for (int i = 0; i < info->nparams; i++)
            args[i] = s == c->nsteps && i == 0 ? tensor_arg(steps[s - 1])
                                                : unfused_arg(g, steps, &f->args[i]);
        if (tr_op_run(info, args, NULL, r) != TR_OK) {
            for (int k = 0; k < s; k++)
                tr_release(steps[k]);
            return NULL;
        }
        steps[s] = r[0];
    }
    for (int k = 0; k + 1 < n; k++)
        tr_release(steps[k]);
    return steps[n - 1];
}

/* t's values, compact (malloc). */
static char *bytes_of(const struct tr_tensor *t, size_t *size)
{
    char *b;

    *size = (size_t)tr_tensor_numel(t) * tr_dtype_size(tr_tensor_dtype(t));
    b = malloc(*size ? *size : 1);
    if (tr_copy_to_host(t, b, *size) != TR_OK) {
        free(b);
        return NULL;
    }
    return b;
}

static bool same(const struct tr_tensor *a, const struct tr_tensor *b)
{
    size_t na, nb;
    char *x, *y;
    bool eq;

    if (!a || !b || !is(b, tr_tensor_dtype(a), tr_tensor_ndim(a), tr_tensor_shape(a)))
        return false;
    x = bytes_of(a, &na);
    y = bytes_of(b, &nb);
    eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

static void describe(const struct gen *g, char *buf, size_t size)
{
    const struct tr_fused *c = &g->chain;
    size_t used = 0;

    used += (size_t)snprintf(buf, size, "%d inputs (", c->ninputs);
    for (int k = 0; k < c->ninputs && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s%s", k ? " " : "",
                                 tr_dtype_name(tr_tensor_dtype(g->inputs[k])),
                                 tr_tensor_is_contiguous(g->inputs[k]) ? "" : "~");
    for (int s = 0; s < c->nsteps && used < size; s++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", s ? " " : "): ",
                                 tr_op_get(c->steps[s].op)->name);
    if (used < size)
        snprintf(buf + used, size - used, " -> %s %s",
                 c->has_tail ? tr_op_get(c->tail.op)->name : "output",
                 tr_dtype_name(c->has_tail ? c->tail.result.dtype
                                           : c->steps[c->nsteps - 1].result.dtype));
}

/* A sink into host memory that counts what it is given. */
struct capture {
    char *buf;
    size_t size;
    atomic_size_t stored;
    atomic_bool outside;
    int fail; /* an errno to return, or 0 */
};

static int capture_store(void *ctx, uint64_t offset, const void *src, size_t n)
{
    struct capture *c = ctx;

    if (c->fail)
        return c->fail;
    if (offset > c->size || n > c->size - offset) {
        atomic_store(&c->outside, true);
        return 0;
    }
    memcpy(c->buf + offset, src, n);
    atomic_fetch_add(&c->stored, n);
    return 0;
}

/* A chain without a tail through a sink: the bits of want, every byte
 * stored once, nothing from the pool. */
static void test_sink(struct gen *g, const struct tr_tensor *want, int number)
{
    struct tr_memory_stats before, after;
    struct tr_sink sink = {.store = capture_store};
    struct capture c;
    size_t n;
    char *bytes = bytes_of(want, &n);
    tr_status s;

    memset(&c, 0, sizeof c);
    c.size = n;
    c.buf = calloc(n ? n : 1, 1);
    sink.ctx = &c;
    tr_memory_stats(TR_CPU, &before);
    s = tr_fused_run_sink(&g->chain, g->inputs, &sink);
    tr_memory_stats(TR_CPU, &after);
    ok(s == TR_OK && bytes && atomic_load(&c.stored) == n && !atomic_load(&c.outside) &&
           memcmp(c.buf, bytes, n) == 0 && after.alloc_count == before.alloc_count,
       "chain %d: through a sink, every byte once, the same bits, no allocation", number);
    free(c.buf);
    free(bytes);
}

static int tails_with_scratch; /* tail runs whose declared pool scratch is not 0 */

/* The pool's figures of a fused run, from before (taken, and the peak
 * reset, just before it) to now, against tr_fused_memory for threads. */
static void memory_checked(const struct gen *g, int number, int threads, bool into,
                           const struct tr_memory_stats *before)
{
    struct tr_memory_stats after;
    struct tr_op_memory m;
    uint64_t peak, active;

    tr_memory_stats(TR_CPU, &after);
    peak = after.peak_active_bytes - before->active_bytes;
    active = after.active_bytes - before->active_bytes;
    if (tr_fused_memory(&g->chain, into, threads, &m) != TR_OK) {
        ok(false, "chain %d: tr_fused_memory: %s", number, tr_last_error());
        return;
    }
    if (g->chain.has_tail && m.scratch > 0)
        tails_with_scratch++;
    ok(peak == m.peak && active == m.results[0] && m.peak == m.results[0] + m.scratch &&
           (g->chain.has_tail || m.scratch == 0),
       "chain %d, %d thread%s: pool peak +%llu, active +%llu; declared peak %llu = result "
       "%llu + scratch %llu",
       number, threads, threads > 1 ? "s" : "", (unsigned long long)peak,
       (unsigned long long)active, (unsigned long long)m.peak,
       (unsigned long long)m.results[0], (unsigned long long)m.scratch);
    if (!g->chain.has_tail && !into)
        is_int(after.alloc_count - before->alloc_count, 1,
               "chain %d, %d thread%s: without a tail, one allocation, the result", number,
               threads, threads > 1 ? "s" : "");
}

/* One chain: fused with 1 and 2 threads against unfused, and the pool. */
static bool test_chain(struct gen *g, int number)
{
    struct tr_memory_stats before, after;
    struct tr_tensor *want, *got1 = NULL, *got2 = NULL, *dest = NULL;
    struct tr_value out;
    /* the chains without a tail take turns: the pool, caller memory, a sink */
    int turn = number / (NTAILS + 1) % 3;
    bool into = !g->chain.has_tail && turn == 1;
    char what[512];

    tr_set_num_threads(1);
    want = run_unfused(g);
    if (!want)
        return false; /* the ops themselves refuse it: not a chain to fuse */
    describe(g, what, sizeof what);
    out = g->chain.has_tail ? g->chain.tail.result : g->chain.steps[g->chain.nsteps - 1].result;
    if (into)
        dest = tr_empty(out.dtype, out.ndim, out.shape, TR_CPU);
    tr_memory_stats(TR_CPU, &before);
    tr_memory_reset_peak(TR_CPU);
    if (tr_fused_run(&g->chain, g->inputs, dest, &got1) != TR_OK)
        diag("chain %d: %s", number, tr_last_error());
    tr_memory_stats(TR_CPU, &after);
    ok(same(want, got1), "chain %d, 1 thread: %s", number, what);
    if (into) {
        ok(got1 && tr_tensor_shares_storage(got1, dest) &&
               after.alloc_count == before.alloc_count &&
               after.peak_active_bytes == before.active_bytes,
           "chain %d: into caller memory, nothing allocated", number);
    }
    memory_checked(g, number, 1, into, &before);
    tr_set_num_threads(2);
    tr_memory_stats(TR_CPU, &before);
    tr_memory_reset_peak(TR_CPU);
    if (tr_fused_run(&g->chain, g->inputs, NULL, &got2) != TR_OK)
        diag("chain %d: %s", number, tr_last_error());
    ok(same(want, got2), "chain %d, 2 threads: the same bits", number);
    memory_checked(g, number, 2, false, &before);
    if (!g->chain.has_tail && turn == 2)
        test_sink(g, want, number);
    tr_release(want);
    tr_release(got1);
    tr_release(got2);
    tr_release(dest);
    return true;
}

static void test_generated(void)
{
    int done = 0, per_tail[NTAILS + 1] = {0};

    for (int attempt = 0; done < CHAINS && attempt < 200 * CHAINS; attempt++) {
        struct gen g;
        int tail = done % (NTAILS + 1) - 1;
        if (gen_chain(&g, tail) && test_chain(&g, done)) {
            per_tail[tail + 1]++;
            done++;
        }
        gen_free(&g);
    }
    is_int(done, CHAINS, "%d generated chains were run", CHAINS);
    /* every tail takes partials or line buffers: 2 runs of each chain */
    is_int(tails_with_scratch, 2 * (done - per_tail[0]),
           "every run with a tail declares pool scratch");
    for (int t = 0; t <= NTAILS; t++)
        ok(per_tail[t] >= CHAINS / (NTAILS + 1), "%d chains end in %s", per_tail[t],
           t == 0 ? "an output" : tr_op_get(tails[t - 1])->name);
}

/* ------------------------------------------------------- the API's edges */

static void test_checks(void)
{
    int64_t shape[1] = {5};
    struct tr_tensor *x = make_input(TR_DTYPE_I32, 1, shape, 0);
    struct tr_value v = tr_value_of(x), args[TR_OP_MAX_PARAMS], result;
    struct tr_fused chain;
    struct tr_tensor *y = NULL;
    int bad;

    memset(args, 0, sizeof args); /* None for the parameters not given */
    memset(&chain, 0, sizeof chain);
    chain.ninputs = 1;
    chain.nsteps = 2;
    chain.steps[0].op = TR_OP_MUL;
    chain.steps[0].args[0] = ref(TR_FUSED_INPUT, 0);
    chain.steps[0].args[1] = constant(int_arg(2).value);
    chain.steps[1].op = TR_OP_ADD;
    chain.steps[1].args[0] = ref(TR_FUSED_STEP, 0);
    chain.steps[1].args[1] = constant(float_arg(1.0).value);
    is_int(tr_fused_check(&chain, &v, &result, &bad), TR_OK, "x * 2 + 1.0 checks");
    ok(result.dtype == TR_DTYPE_F32 && chain.steps[0].result.dtype == TR_DTYPE_I32,
       "each step has its own dtype (i32, then f32)");
    ok(tr_fused_scratch_bytes(&chain) > 0, "the scratch is declared");
    {
        struct tr_op_memory m;
        is_int(tr_fused_memory(&chain, true, 1, &m), TR_OK, "its pool memory is declared");
        ok(m.results[0] == 0 && m.scratch == 0 && m.peak == 0,
           "  into a destination, without a tail: none");
        is_int(tr_fused_memory(&chain, false, 0, &m), TR_ERR_INVALID, "0 threads are refused");
    }

    chain.steps[1].args[0] = ref(TR_FUSED_INPUT, 0);
    is_int(tr_fused_check(&chain, &v, NULL, &bad), TR_ERR_INVALID, "an unused step is refused");
    is_int(bad, 0, "naming the unused step");
    chain.steps[1].args[0] = ref(TR_FUSED_STEP, 1);
    is_int(tr_fused_check(&chain, &v, NULL, &bad), TR_ERR_INVALID,
           "a step reading itself is refused");
    is_int(bad, 1, "naming it");
    chain.steps[1].args[0] = ref(TR_FUSED_STEP, 0);

    chain.has_tail = true;
    chain.tail.op = TR_OP_CUMSUM;
    defaults(&chain.tail);
    chain.tail.args[1] = constant(int_arg(0).value);
    is_int(tr_fused_check(&chain, &v, NULL, &bad), TR_ERR_INVALID, "cumsum cannot be a tail");
    is_int(bad, 2, "the tail is at fault");
    chain.tail.op = TR_OP_SUM;
    defaults(&chain.tail);
    is_int(tr_fused_check(&chain, &v, &result, NULL), TR_OK, "sum can");
    ok(result.ndim == 0 && result.dtype == TR_DTYPE_F32, "sum of f32 is an f32 scalar");

    args[0] = v;
    args[1] = int_arg(2).value;
    ok(tr_fused_can_step(TR_OP_POW, args, &v), "integer pow by a constant 2 can be fused");
    args[1] = int_arg(-1).value;
    ok(!tr_fused_can_step(TR_OP_POW, args, &v), "integer pow by -1 cannot");
    args[1] = v;
    ok(!tr_fused_can_step(TR_OP_POW, args, &v), "integer pow by a tensor cannot");
    ok(!tr_fused_can_step(TR_OP_MATMUL, args, &v), "matmul cannot");
    args[0] = int_arg(2).value;
    args[1] = int_arg(3).value;
    ok(!tr_fused_can_step(TR_OP_ADD, args, &result), "a step needs a tensor");
    args[0] = v;
    ok(tr_fused_can_tail(TR_OP_SOFTMAX, args, &v) && tr_fused_can_tail(TR_OP_ARGMAX, args, &v),
       "softmax and argmax can be tails");
    ok(!tr_fused_can_tail(TR_OP_TOPK, args, &v), "topk cannot");

    /* a sink that fails, and a chain with a tail, which cannot go to one */
    {
        struct capture c;
        struct tr_sink sink = {.store = capture_store, .ctx = &c};
        memset(&c, 0, sizeof c);
        c.fail = ENOSPC;
        chain.has_tail = false;
        is_int(tr_fused_run_sink(&chain, &x, &sink), TR_ERR_IO, "a failing store is TR_ERR_IO");
        ok(strstr(tr_last_error(), strerror(ENOSPC)) != NULL, "naming the errno: %s",
           tr_last_error());
        chain.has_tail = true;
        is_int(tr_fused_run_sink(&chain, &x, &sink), TR_ERR_INVALID,
               "a chain with a tail cannot go to a sink");
    }

    /* a destination that does not fit */
    y = tr_empty(TR_DTYPE_F64, 0, NULL, TR_CPU);
    {
        struct tr_tensor *r = NULL;
        is_int(tr_fused_run(&chain, &x, y, &r), TR_ERR_INVALID,
               "a destination of another dtype is refused");
        ok(r == NULL, "and no result is made");
    }
    tr_release(y);
    tr_release(x);
}

/* sum(x * 2.0 + 1.0) over 2^20 f32 values: the fused figure is the op by
 * op figure, and the pool holds the scalar and the sum's partials (its
 * 256 blocks' accumulators), as tr_fused_memory says. */
static void test_the_example(void)
{
    int64_t n = 1 << 20;
    struct tr_tensor *x = make_input(TR_DTYPE_F32, 1, &n, 0), *r = NULL, *want;
    struct tr_memory_stats before, after;
    struct tr_op_memory m;
    struct gen g;

    memset(&g, 0, sizeof g);
    g.inputs[0] = x;
    g.chain.ninputs = 1;
    g.chain.nsteps = 2;
    g.chain.steps[0].op = TR_OP_MUL;
    g.chain.steps[0].args[0] = ref(TR_FUSED_INPUT, 0);
    g.chain.steps[0].args[1] = constant(float_arg(2.0).value);
    g.chain.steps[1].op = TR_OP_ADD;
    g.chain.steps[1].args[0] = ref(TR_FUSED_STEP, 0);
    g.chain.steps[1].args[1] = constant(float_arg(1.0).value);
    g.chain.has_tail = true;
    g.chain.tail.op = TR_OP_SUM;
    defaults(&g.chain.tail);
    want = run_unfused(&g);
    tr_memory_stats(TR_CPU, &before);
    tr_memory_reset_peak(TR_CPU);
    is_int(tr_fused_run(&g.chain, &x, NULL, &r), TR_OK, "sum(x * 2.0 + 1.0) runs fused");
    tr_memory_stats(TR_CPU, &after);
    ok(same(want, r), "with the bits of the unfused ops");
    {
        struct tr_value xv = tr_value_of(x);
        struct tr_fused checked = g.chain;
        tr_fused_check(&checked, &xv, NULL, NULL);
        tr_fused_memory(&checked, false, tr_num_threads(), &m);
    }
    is_int(m.results[0], tr_memory_block_size(4), "its result is one 4-byte result's block");
    is_int(m.scratch, tr_memory_block_size(64 + 256 * 16 + 8),
           "  its scratch one block of partials: an accumulator, the 256 blocks' partials "
           "(16 bytes each, from byte 64), the value");
    is_int(after.peak_active_bytes - before.active_bytes, m.peak,
           "  its peak is the %llu bytes declared, not 4 MiB", (unsigned long long)m.peak);
    tr_release(r);
    tr_release(want);
    /* x * 2.0 + 1.0 itself, 4 MiB in 256 blocks, through a sink by two
     * threads */
    g.chain.has_tail = false;
    want = run_unfused(&g);
    tr_set_num_threads(2);
    test_sink(&g, want, -1);
    tr_release(want);
    tr_release(x);
}

/* sum(x * y, dim=0) of x [5000, 130] and y [5000, 1]: neighbouring outputs
 * are read together, 64 at a time (a reduction over an outer dimension),
 * in three tiles and three blocks of rows, with the unfused bits on one
 * and two threads. */
static void test_outer_reduction(void)
{
    int64_t xs[2] = {5000, 130}, ys[2] = {5000, 1};
    struct tr_tensor *in[2] = {make_input(TR_DTYPE_F32, 2, xs, 0),
                               make_input(TR_DTYPE_F32, 2, ys, 0)};
    struct gen g;

    for (int t = 1; t <= 2; t++) {
        struct tr_tensor *r = NULL, *want;
        memset(&g, 0, sizeof g);
        g.inputs[0] = in[0];
        g.inputs[1] = in[1];
        g.chain.ninputs = 2;
        g.chain.nsteps = 1;
        g.chain.steps[0].op = TR_OP_MUL;
        g.chain.steps[0].args[0] = ref(TR_FUSED_INPUT, 0);
        g.chain.steps[0].args[1] = ref(TR_FUSED_INPUT, 1);
        g.chain.has_tail = true;
        g.chain.tail.op = TR_OP_SUM;
        defaults(&g.chain.tail);
        g.chain.tail.args[1] = constant(int_arg(0).value);
        tr_set_num_threads(t);
        want = run_unfused(&g);
        ok(tr_fused_run(&g.chain, in, NULL, &r) == TR_OK && same(want, r),
           "sum(x * y, dim=0) of [5000, 130], %d thread%s: the unfused bits", t,
           t == 1 ? "" : "s");
        tr_release(r);
        tr_release(want);
    }
    tr_release(in[0]);
    tr_release(in[1]);
}

int main(void)
{
    int threads = tr_num_threads();

    test_checks();
    test_outer_reduction();
    test_the_example();
    test_generated();
    tr_set_num_threads(threads);
    return done_testing();
}
