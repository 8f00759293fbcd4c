/*
 * test_scratch.c - tr_op_scratch against what the kernels really take
 * from the pool: every op that has a kernel runs on representative
 * arguments (contiguous, transposed, sliced and broadcast operands;
 * several dtypes; small shapes and shapes large enough for the threads;
 * numbers among the arguments) with 1 and 2 threads, after
 * tr_memory_reset_peak, and the pool's peak above what was live before
 * must be the declared peak exactly, and what stays active the declared
 * results.  Then the test switch TENSORRUN_TEST_MISDECLARE_SCRATCH must
 * make one op's declaration wrong, and only that op's.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

static int checked[256]; /* cases checked, by op id */

static struct tr_memory_stats stats(void)
{
    struct tr_memory_stats s;

    tr_memory_stats(TR_CPU, &s);
    return s;
}

/* The engine's thread setting, which every kernel's team reads. */
static int threads_now(void)
{
    return tr_num_threads();
}

static void set_threads(int n)
{
    tr_set_num_threads(n);
}

/* The descriptions tr_op_run gives tr_op_infer, lists included (items
 * point into lists[i]). */
static void describe(const struct tr_op_info *op, const struct tr_arg *args,
                     struct tr_value *values, struct tr_value lists[][8])
{
    for (int i = 0; i < op->nparams; i++) {
        values[i] = args[i].tensor ? tr_value_of(args[i].tensor) : args[i].value;
        values[i].weak = args[i].value.weak;
        if (args[i].value.kind == TR_VALUE_LIST && args[i].items) {
            for (size_t k = 0; k < args[i].value.count && k < 8; k++)
                lists[i][k] = args[i].items[k].tensor ? tr_value_of(args[i].items[k].tensor)
                                                      : args[i].items[k].value;
            values[i].items = lists[i];
        }
    }
}

static int layout_failures;

/* tr_op_layout's description of the results against the results. */
static void layout_checked(const struct tr_op_info *op, const struct tr_value *values,
                           struct tr_value *out, struct tr_tensor *const *r)
{
    if (tr_op_layout(op, values, out) != TR_OK) {
        layout_failures++;
        return;
    }
    for (int i = 0; i < op->nresults; i++) {
        struct tr_value v = tr_value_of(r[i]);
        if (v.strided != out[i].strided ||
            (v.strided && memcmp(v.strides, out[i].strides, (size_t)v.ndim * sizeof *v.strides))) {
            diag("%s: result %d is%s strided, tr_op_layout says%s", op->name, i,
                 v.strided ? "" : " not", out[i].strided ? " so" : " not");
            layout_failures++;
        }
    }
}

/* Runs op on the leading arguments (defaults for the rest) and compares
 * the pool's figures with the declaration; 0 when it matched, else the
 * peak's difference (run - declared).  *ran is false when tr_op_infer
 * refuses the arguments (not a case of this op). */
static int64_t measure(const char *name, const struct tr_arg *given, int n, bool *ran,
                       struct tr_op_memory *declared, struct tr_memory_stats *before,
                       struct tr_memory_stats *after)
{
    const struct tr_op_info *op = tr_op_find(name);
    struct tr_arg args[TR_OP_MAX_PARAMS];
    struct tr_value values[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS], lists[TR_OP_MAX_PARAMS][8];
    struct tr_tensor *r[TR_OP_MAX_RESULTS] = {NULL};
    struct tr_scope *scope;
    int bad;
    tr_status s;

    *ran = false;
    for (int i = 0; i < op->nparams; i++) {
        if (i < n) {
            args[i] = given[i];
        } else {
            memset(&args[i], 0, sizeof args[i]);
            args[i].value = op->params[i].default_value;
        }
    }
    describe(op, args, values, lists);
    if (tr_op_infer(op, values, out, &bad) != TR_OK)
        return 0;
    if (tr_op_scratch(op, values, out, NULL, threads_now(), declared) != TR_OK)
        return INT64_MAX;
    scope = tr_scope_begin();
    *before = stats();
    tr_memory_reset_peak(TR_CPU);
    s = tr_op_run(op, args, NULL, r);
    *after = stats();
    if (s == TR_OK)
        layout_checked(op, values, out, r);
    tr_scope_end(scope, NULL, 0);
    if (s == TR_ERR_INDEX && after->active_bytes == before->active_bytes)
        return 0; /* indices these values do not have: not a case, and nothing leaked */
    if (s != TR_OK)
        return INT64_MIN;
    *ran = true;
    return (int64_t)(after->peak_active_bytes - before->active_bytes) - (int64_t)declared->peak;
}

static void check(const char *name, const struct tr_arg *given, int n, const char *what)
{
    static const int counts[] = {1, 2};
    const struct tr_op_info *op = tr_op_find(name);

    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        struct tr_op_memory m;
        struct tr_memory_stats before, after;
        uint64_t results = 0;
        bool ran;
        int64_t diff;

        set_threads(counts[c]);
        diff = measure(name, given, n, &ran, &m, &before, &after);
        if (!ran && diff == 0)
            continue; /* arguments the op does not take */
        for (int i = 0; i < op->nresults; i++)
            results += m.results[i];
        checked[op->id]++;
        ok(ran && diff == 0 && after.active_bytes - before.active_bytes == results &&
               m.peak == results + m.scratch,
           "%s(%s), %d thread%s: peak %llu = results %llu + scratch %llu (ran: peak +%llu, "
           "active +%llu)%s",
           name, what, counts[c], counts[c] > 1 ? "s" : "", (unsigned long long)m.peak,
           (unsigned long long)results, (unsigned long long)m.scratch,
           (unsigned long long)(after.peak_active_bytes - before.active_bytes),
           (unsigned long long)(after.active_bytes - before.active_bytes),
           ran ? "" : tr_last_error());
    }
    set_threads(2);
}

/* --------------------------------------------------------------- inputs */

/* i % 7 - 3 in shape, as dtype (bool: i % 3 != 0). */
static struct tr_tensor *make(enum tr_dtype dtype, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    double *v;
    struct tr_tensor *f, *t;

    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = dtype == TR_DTYPE_BOOL ? (double)(i % 3 != 0) : (double)(i % 7 - 3);
    f = tr_from_data(v, TR_DTYPE_F64, ndim, shape, TR_CPU);
    t = tr_cast(f, dtype);
    tr_release(f);
    free(v);
    return t;
}

/* The tensors most cases run on, each with a name for the messages. */
struct input {
    const char *what;
    struct tr_tensor *t;
};

static struct input inputs[32];
static int ninputs;

static struct tr_tensor *add(const char *what, struct tr_tensor *t)
{
    inputs[ninputs].what = what;
    inputs[ninputs++].t = t;
    return t;
}

static void make_inputs(void)
{
    static const enum tr_dtype small_dtypes[] = {TR_DTYPE_F32, TR_DTYPE_F16, TR_DTYPE_BF16,
                                                 TR_DTYPE_F64, TR_DTYPE_I32, TR_DTYPE_I64,
                                                 TR_DTYPE_U8,  TR_DTYPE_BOOL};
    static const char *const small_names[] = {"f32[5,6]", "f16[5,6]", "bf16[5,6]", "f64[5,6]",
                                              "i32[5,6]", "i64[5,6]", "u8[5,6]",   "bool[5,6]"};
    struct tr_tensor *t;

    for (size_t i = 0; i < sizeof small_dtypes / sizeof small_dtypes[0]; i++)
        add(small_names[i], make(small_dtypes[i], 2, (int64_t[]){5, 6}));
    add("f32[]", make(TR_DTYPE_F32, 0, NULL));
    add("f32[7]", make(TR_DTYPE_F32, 1, (int64_t[]){7}));
    t = make(TR_DTYPE_F32, 2, (int64_t[]){6, 5});
    add("f32[6,5].T", tr_transpose(t, 0, 1));
    tr_release(t);
    t = make(TR_DTYPE_I32, 2, (int64_t[]){5, 12});
    add("i32[5,12][:, ::2]", tr_slice(t, 1, TR_SLICE_NONE, TR_SLICE_NONE, 2));
    tr_release(t);
    /* negative strides reach below element [0, 0]: the layout of a view
     * of it (a transpose) was once lost, and the plan took it as compact */
    t = make(TR_DTYPE_F32, 2, (int64_t[]){6, 7});
    add("f32[6,7][::-2]", tr_slice(t, 0, TR_SLICE_NONE, TR_SLICE_NONE, -2));
    tr_release(t);
    t = make(TR_DTYPE_F32, 2, (int64_t[]){1, 6});
    add("f32[1,6] broadcast to [5,6]", tr_expand(t, (int64_t[]){5, 6}, 2));
    tr_release(t);
    add("f32[300,200]", make(TR_DTYPE_F32, 2, (int64_t[]){300, 200}));
    add("f16[300,200]", make(TR_DTYPE_F16, 2, (int64_t[]){300, 200}));
    add("i16[300,200]", make(TR_DTYPE_I16, 2, (int64_t[]){300, 200}));
    t = make(TR_DTYPE_F64, 2, (int64_t[]){200, 300});
    add("f64[200,300].T", tr_transpose(t, 0, 1));
    tr_release(t);
    add("f32[2,3,70000]", make(TR_DTYPE_F32, 3, (int64_t[]){2, 3, 70000}));
    add("f32[0,6]", make(TR_DTYPE_F32, 2, (int64_t[]){0, 6}));
}

static void free_inputs(void)
{
    for (int i = 0; i < ninputs; i++)
        tr_release(inputs[i].t);
    ninputs = 0;
}

static struct tr_tensor *input_named(const char *what)
{
    for (int i = 0; i < ninputs; i++)
        if (strcmp(inputs[i].what, what) == 0)
            return inputs[i].t;
    return NULL;
}

/* ---------------------------------------------------------------- cases */

/* Every op of a group whose other parameters have defaults, on every
 * input (the op table refuses the dtypes it does not take). */
static void on_every_input(const char *group)
{
    for (size_t o = 0; o < tr_op_count(); o++) {
        const struct tr_op_info *op = tr_op_at(o);
        if (!op->has_kernel || strcmp(op->group, group) != 0 || op->params[0].kind != TR_PARAM_TENSOR)
            continue;
        if (op->nparams > 1 && op->params[1].required)
            continue;
        for (int i = 0; i < ninputs; i++)
            check(op->name, (struct tr_arg[]){tensor_arg(inputs[i].t)}, 1, inputs[i].what);
    }
}

static void test_elementwise(void)
{
    static const char *const pairs[][2] = {
        {"f32[5,6]", "f32[5,6]"},   {"f16[5,6]", "i32[5,6]"},   {"bf16[5,6]", "i64[5,6]"},
        {"i32[5,6]", "u8[5,6]"},    {"f32[6,5].T", "f32[7]"},   {"f16[300,200]", "i16[300,200]"},
        {"f32[300,200]", "f32[]"},  {"f32[1,6] broadcast to [5,6]", "f64[5,6]"},
        {"i32[5,12][:, ::2]", "f16[5,6]"}, {"bool[5,6]", "bool[5,6]"},
    };

    on_every_input("unary");
    check("gelu", (struct tr_arg[]){tensor_arg(input_named("f16[5,6]")), string_arg("tanh")}, 2,
          "f16[5,6], tanh");
    for (size_t o = 0; o < tr_op_count(); o++) {
        const struct tr_op_info *op = tr_op_at(o);
        /* two tensors, and options with defaults (isclose's tolerances) */
        if (!op->has_kernel || strcmp(op->group, "binary") != 0 || op->nparams < 2 ||
            op->params[1].kind != TR_PARAM_TENSOR ||
            (op->nparams > 2 && op->params[2].kind == TR_PARAM_TENSOR))
            continue;
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            char what[96];
            struct tr_tensor *a = input_named(pairs[p][0]), *b = input_named(pairs[p][1]);
            snprintf(what, sizeof what, "%s, %s", pairs[p][0], pairs[p][1]);
            check(op->name, (struct tr_arg[]){tensor_arg(a), tensor_arg(b)}, 2, what);
            snprintf(what, sizeof what, "%s, 3", pairs[p][0]);
            check(op->name, (struct tr_arg[]){tensor_arg(a), int_arg(3)}, 2, what);
            snprintf(what, sizeof what, "2.5, %s", pairs[p][1]);
            check(op->name, (struct tr_arg[]){float_arg(2.5), tensor_arg(b)}, 2, what);
        }
    }
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        char what[128];
        struct tr_tensor *a = input_named(pairs[p][0]), *b = input_named(pairs[p][1]);
        snprintf(what, sizeof what, "%s, %s, %s", pairs[p][1], pairs[p][0], pairs[p][1]);
        check("where", (struct tr_arg[]){tensor_arg(b), tensor_arg(a), tensor_arg(b)}, 3, what);
        check("where", (struct tr_arg[]){tensor_arg(input_named("bool[5,6]")), tensor_arg(a),
                                         float_arg(0.5)},
              3, "bool[5,6], ..., 0.5");
        check("where", (struct tr_arg[]){float_arg(0.5), tensor_arg(a), tensor_arg(b)}, 3,
              "0.5, ...");
        check("clamp", (struct tr_arg[]){tensor_arg(a), tensor_arg(b), tensor_arg(b)}, 3, what);
        check("clamp", (struct tr_arg[]){tensor_arg(a), none_arg(), int_arg(2)}, 3, "x, None, 2");
        check("clamp", (struct tr_arg[]){tensor_arg(a)}, 1, "x alone (a copy)");
    }
}

static void test_reductions(void)
{
    struct tr_arg both[2] = {int_arg(0), int_arg(-1)};

    on_every_input("reduce");
    for (size_t o = 0; o < tr_op_count(); o++) {
        const struct tr_op_info *op = tr_op_at(o);
        int dim = -1;
        if (!op->has_kernel || strcmp(op->group, "reduce") != 0)
            continue;
        for (int i = 0; i < op->nparams; i++)
            if (strcmp(op->params[i].name, "dim") == 0)
                dim = i;
        for (int i = 0; i < ninputs && dim >= 0; i++) {
            struct tr_arg args[TR_OP_MAX_PARAMS];
            char what[96];
            for (int d = 0; d < 3; d++) {
                for (int k = 0; k < op->nparams; k++) {
                    memset(&args[k], 0, sizeof args[k]);
                    args[k].value = op->params[k].default_value;
                }
                args[0] = tensor_arg(inputs[i].t);
                args[dim] = d == 2 ? list_arg(both, 2) : int_arg(d);
                if (op->params[dim].kind == TR_PARAM_INT_OR_NONE && d == 2)
                    continue;
                snprintf(what, sizeof what, "%s, dim=%s", inputs[i].what,
                         d == 0 ? "0" : d == 1 ? "1" : "[0,-1]");
                check(op->name, args, op->nparams, what);
            }
        }
    }
    /* quantile's q has no default: one and a list, over all and along dims */
    for (int i = 0; i < ninputs; i++) {
        struct tr_arg qs[2] = {float_arg(0.1), float_arg(0.9)}, none = {0};
        struct tr_arg x = tensor_arg(inputs[i].t);
        char what[96];
        for (int d = -1; d < 2; d++) {
            struct tr_arg dim = d < 0 ? none : int_arg(d);
            snprintf(what, sizeof what, "%s, 0.5, dim=%d", inputs[i].what, d);
            check("quantile", (struct tr_arg[]){x, float_arg(0.5), dim}, 3, what);
            snprintf(what, sizeof what, "%s, [0.1, 0.9], dim=%d", inputs[i].what, d);
            check("quantile", (struct tr_arg[]){x, list_arg(qs, 2), dim}, 3, what);
        }
    }
}

static void test_neural(void)
{
    struct tr_tensor *w = make(TR_DTYPE_F16, 1, (int64_t[]){6}), *wide = make(TR_DTYPE_F32, 1, (int64_t[]){200});

    on_every_input("neural");
    for (int i = 0; i < ninputs; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s, dim=0", inputs[i].what);
        check("softmax", (struct tr_arg[]){tensor_arg(inputs[i].t), int_arg(0)}, 2, what);
        check("log_softmax", (struct tr_arg[]){tensor_arg(inputs[i].t), int_arg(0)}, 2, what);
        check("l2_normalize", (struct tr_arg[]){tensor_arg(inputs[i].t), int_arg(0)}, 2, what);
    }
    check("layer_norm",
          (struct tr_arg[]){tensor_arg(input_named("f32[5,6]")), tensor_arg(w), tensor_arg(w)}, 3,
          "f32[5,6], weight and bias f16[6]");
    check("layer_norm", (struct tr_arg[]){tensor_arg(input_named("f32[300,200]")), tensor_arg(wide)},
          2, "f32[300,200], weight f32[200]");
    check("rms_norm", (struct tr_arg[]){tensor_arg(input_named("f64[200,300].T")), tensor_arg(wide)},
          2, "f64[200,300].T, weight f32[200]");
    check("rms_norm", (struct tr_arg[]){tensor_arg(input_named("f32[6,5].T")), float_arg(2.0)}, 2,
          "f32[6,5].T, weight 2.0");
    {
        /* targets |i % 7 - 3| (0..3) for logits of 4 classes and more */
        struct tr_tensor *i6 = make(TR_DTYPE_I64, 1, (int64_t[]){6});
        struct tr_tensor *t6 = run("abs", (struct tr_arg[]){tensor_arg(i6)}, 1);
        struct tr_tensor *i300 = make(TR_DTYPE_I32, 1, (int64_t[]){300});
        struct tr_tensor *t300 = run("abs", (struct tr_arg[]){tensor_arg(i300)}, 1);
        struct tr_tensor *t5 = tr_slice(t6, 0, 0, 5, 1);
        static const char *const how[] = {"mean", "sum", "none"};
        for (int k = 0; k < 3; k++) {
            check("cross_entropy", (struct tr_arg[]){tensor_arg(input_named("f32[6,5].T")),
                                                     tensor_arg(t5), int_arg(1), string_arg(how[k])},
                  4, "f32[6,5].T, i64[5]");
            check("cross_entropy", (struct tr_arg[]){tensor_arg(input_named("f16[5,6]")),
                                                     tensor_arg(t6), int_arg(0), string_arg(how[k])},
                  4, "f16[5,6], i64[6], dim=0");
            check("cross_entropy", (struct tr_arg[]){tensor_arg(input_named("f64[200,300].T")),
                                                     tensor_arg(t300), int_arg(1), string_arg(how[k])},
                  4, "f64[200,300].T, i32[300]");
            check("cross_entropy", (struct tr_arg[]){tensor_arg(input_named("f32[300,200]")),
                                                     tensor_arg(t300), int_arg(-1), string_arg(how[k])},
                  4, "f32[300,200], i32[300]");
            check("cross_entropy", (struct tr_arg[]){tensor_arg(input_named("f32[7]")), int_arg(3),
                                                     int_arg(1), string_arg(how[k])},
                  4, "f32[7], 3");
            check("cross_entropy", (struct tr_arg[]){tensor_arg(input_named("bf16[5,6]")),
                                                     tensor_arg(t5), int_arg(1), string_arg(how[k])},
                  4, "bf16[5,6], i64[5]");
        }
        tr_release(t5);
        tr_release(t300);
        tr_release(i300);
        tr_release(t6);
        tr_release(i6);
    }
    tr_release(w);
    tr_release(wide);
}

static void test_create(void)
{
    struct tr_arg small[2] = {int_arg(4), int_arg(5)}, large[2] = {int_arg(600), int_arg(700)};
    const struct tr_arg *shapes[2] = {small, large};

    for (int s = 0; s < 2; s++) {
        const char *what = s ? "[600,700]" : "[4,5]";
        struct tr_arg shape = list_arg(shapes[s], 2);
        check("zeros", (struct tr_arg[]){shape, dtype_arg(TR_DTYPE_F16)}, 2, what);
        check("ones", (struct tr_arg[]){shape}, 1, what);
        check("full", (struct tr_arg[]){shape, float_arg(1.5)}, 2, what);
        check("full", (struct tr_arg[]){shape, int_arg(3), dtype_arg(TR_DTYPE_U8)}, 3, what);
        check("rand", (struct tr_arg[]){shape, int_arg(1)}, 2, what);
        check("randn", (struct tr_arg[]){shape, int_arg(1), dtype_arg(TR_DTYPE_F64)}, 3, what);
        check("eye", (struct tr_arg[]){shapes[s][0], shapes[s][1]}, 2, what);
    }
    check("arange", (struct tr_arg[]){int_arg(1000)}, 1, "1000");
    check("arange", (struct tr_arg[]){float_arg(0), float_arg(1), float_arg(1e-6)}, 3,
          "0, 1, 1e-6");
    check("linspace", (struct tr_arg[]){float_arg(0), float_arg(1), int_arg(300000)}, 3,
          "0, 1, 300000");
    check("linspace", (struct tr_arg[]){float_arg(0), float_arg(1), int_arg(3)}, 3, "0, 1, 3");
}

static void test_views_and_copies(void)
{
    struct tr_arg flat_shape[1] = {int_arg(-1)}, perm[2] = {int_arg(1), int_arg(0)};
    struct tr_arg to_shape[2] = {int_arg(5), int_arg(6)};
    struct tr_arg split[2] = {int_arg(1), int_arg(-1)};
    struct tr_arg device = string_arg("cpu");

    for (int i = 0; i < ninputs; i++) {
        struct tr_arg x = tensor_arg(inputs[i].t);
        const char *what = inputs[i].what;
        check("reshape", (struct tr_arg[]){x, list_arg(flat_shape, 1)}, 2, what);
        check("flatten", (struct tr_arg[]){x}, 1, what);
        check("transpose", (struct tr_arg[]){x, int_arg(0), int_arg(-1)}, 3, what);
        check("permute", (struct tr_arg[]){x, list_arg(perm, 2)}, 2, what);
        check("squeeze", (struct tr_arg[]){x}, 1, what);
        check("unsqueeze", (struct tr_arg[]){x, int_arg(0)}, 2, what);
        check("expand", (struct tr_arg[]){x, list_arg(to_shape, 2)}, 2, what);
        check("broadcast_to", (struct tr_arg[]){x, list_arg(to_shape, 2)}, 2, what);
        check("diagonal", (struct tr_arg[]){x}, 1, what);
        check("contiguous", (struct tr_arg[]){x}, 1, what);
        check("clone", (struct tr_arg[]){x}, 1, what);
        check("cast", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_F32)}, 2, what);
        check("cast", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I16)}, 2, what);
        check("flip", (struct tr_arg[]){x, list_arg(perm, 2)}, 2, what);
        check("flip", (struct tr_arg[]){x, int_arg(-1)}, 2, what);
        check("narrow", (struct tr_arg[]){x, int_arg(0), int_arg(-1), int_arg(1)}, 4, what);
        check("unflatten", (struct tr_arg[]){x, int_arg(-1), list_arg(split, 2)}, 3, what);
        check("movedim", (struct tr_arg[]){x, int_arg(0), int_arg(-1)}, 3, what);
        check("zeros_like", (struct tr_arg[]){x}, 1, what);
        check("ones_like", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I8)}, 2, what);
        check("full_like", (struct tr_arg[]){x, float_arg(2.5)}, 2, what);
        check("tril", (struct tr_arg[]){x}, 1, what);
        check("triu", (struct tr_arg[]){x, int_arg(-1)}, 2, what);
    }
    check("clone", (struct tr_arg[]){float_arg(2.0)}, 1, "2.0");
    check("cast", (struct tr_arg[]){int_arg(2), dtype_arg(TR_DTYPE_F16)}, 2, "2 to f16");
    check("cast", (struct tr_arg[]){int_arg(2), dtype_arg(TR_DTYPE_I64)}, 2, "2 to i64");
    check("contiguous", (struct tr_arg[]){float_arg(2.0)}, 1, "2.0");
    check("to", (struct tr_arg[]){tensor_arg(input_named("f32[6,5].T")), device}, 2,
          "f32[6,5].T to cpu");

    /* a view of negative strides: tr_op_layout's stand-in must take it */
    struct tr_tensor *base = make(TR_DTYPE_F32, 2, (int64_t[]){5, 6});
    struct tr_tensor *back = tr_slice(base, 1, TR_SLICE_NONE, TR_SLICE_NONE, -2);
    struct tr_arg xb = tensor_arg(back);
    check("transpose", (struct tr_arg[]){xb, int_arg(0), int_arg(1)}, 3, "f32[5,6][:, ::-2]");
    check("diagonal", (struct tr_arg[]){xb}, 1, "f32[5,6][:, ::-2]");
    check("unsqueeze", (struct tr_arg[]){xb, int_arg(1)}, 2, "f32[5,6][:, ::-2]");
    check("flip", (struct tr_arg[]){xb, list_arg(perm, 2)}, 2, "f32[5,6][:, ::-2]");
    check("narrow", (struct tr_arg[]){xb, int_arg(1), int_arg(1), int_arg(2)}, 4,
          "f32[5,6][:, ::-2]");
    check("unflatten", (struct tr_arg[]){xb, int_arg(0), list_arg(split, 2)}, 3,
          "f32[5,6][:, ::-2]");
    check("movedim", (struct tr_arg[]){xb, int_arg(1), int_arg(0)}, 3, "f32[5,6][:, ::-2]");
    check("tril", (struct tr_arg[]){xb, int_arg(1)}, 2, "f32[5,6][:, ::-2]");
    tr_release(back);
    tr_release(base);
}

static void test_linalg(void)
{
    struct tr_tensor *a = make(TR_DTYPE_F32, 2, (int64_t[]){5, 6});
    struct tr_tensor *b = make(TR_DTYPE_F32, 2, (int64_t[]){6, 7});
    struct tr_tensor *bt_base = make(TR_DTYPE_F32, 2, (int64_t[]){7, 6});
    struct tr_tensor *bt = tr_transpose(bt_base, 0, 1);
    struct tr_tensor *b16 = make(TR_DTYPE_F16, 2, (int64_t[]){6, 7});
    struct tr_tensor *bi = make(TR_DTYPE_I32, 2, (int64_t[]){6, 7});
    struct tr_tensor *ai = make(TR_DTYPE_I32, 2, (int64_t[]){5, 6});
    struct tr_tensor *ai8 = make(TR_DTYPE_I8, 2, (int64_t[]){5, 6});
    struct tr_tensor *batch = make(TR_DTYPE_F64, 3, (int64_t[]){3, 5, 6});
    struct tr_tensor *big_a = make(TR_DTYPE_F32, 2, (int64_t[]){300, 200});
    struct tr_tensor *big_b = make(TR_DTYPE_F16, 2, (int64_t[]){200, 600});
    struct tr_tensor *big_i = make(TR_DTYPE_I64, 2, (int64_t[]){200, 300});
    struct tr_tensor *big_ib = make(TR_DTYPE_I64, 2, (int64_t[]){300, 200});
    struct tr_tensor *big_it = tr_transpose(big_i, 0, 1);
    struct tr_tensor *strided = tr_slice(input_named("i32[5,12][:, ::2]"), 0, 0, 5, 1);
    struct tr_tensor *v6 = make(TR_DTYPE_F32, 1, (int64_t[]){6});
    struct tr_tensor *v6i = make(TR_DTYPE_I16, 1, (int64_t[]){6});
    struct tr_tensor *col = tr_slice(a, 1, 0, 1, 1); /* [5,1] of a */
    struct tr_tensor *v5 = tr_reshape_view(col, (int64_t[]){5}, 1);
    const struct {
        const char *what;
        struct tr_tensor *a, *b;
    } products[] = {
        {"f32[5,6] @ f32[6,7]", a, b},         {"f32[5,6] @ f32[7,6].T", a, bt},
        {"f32[5,6] @ f16[6,7]", a, b16},       {"i32[5,6] @ f16[6,7]", ai, b16},
        {"i32[5,6] @ i32[6,7]", ai, bi},       {"i8[5,6] @ i32[6,7]", ai8, bi},
        {"i32[5,12][:, ::2] @ i32[6,7]", strided, bi},
        {"f64[3,5,6] @ f32[6,7]", batch, b},
        {"f32[300,200] @ f16[200,600]", big_a, big_b},
        {"i64[300,200] @ i64[200,300].T", big_ib, big_it},
        {"f32[6] @ f32[6,7]", v6, b},          {"f32[5,6] @ i16[6]", a, v6i},
        {"f32[5,6] @ strided f32[6]", a, NULL},
    };

    for (size_t p = 0; p < sizeof products / sizeof products[0]; p++) {
        struct tr_tensor *rhs = products[p].b;
        if (!rhs) {
            struct tr_tensor *t = make(TR_DTYPE_F32, 1, (int64_t[]){12});
            rhs = tr_slice(t, 0, 0, 12, 2);
            tr_release(t);
            check("matmul", (struct tr_arg[]){tensor_arg(products[p].a), tensor_arg(rhs)}, 2,
                  products[p].what);
            tr_release(rhs);
            continue;
        }
        check("matmul", (struct tr_arg[]){tensor_arg(products[p].a), tensor_arg(rhs)}, 2,
              products[p].what);
    }
    check("dot", (struct tr_arg[]){tensor_arg(v6), tensor_arg(v6i)}, 2, "f32[6] . i16[6]");
    check("dot", (struct tr_arg[]){tensor_arg(v6i), tensor_arg(v6i)}, 2, "i16[6] . i16[6]");
    check("outer", (struct tr_arg[]){tensor_arg(v6), tensor_arg(v5)}, 2, "f32[6], strided f32[5]");
    check("outer", (struct tr_arg[]){tensor_arg(v6i), tensor_arg(v6)}, 2, "i16[6], f32[6]");
    {
        struct tr_tensor *h = make(TR_DTYPE_F16, 1, (int64_t[]){6});
        check("outer", (struct tr_arg[]){tensor_arg(v6i), tensor_arg(h)}, 2, "i16[6], f16[6]");
        tr_release(h);
    }
    tr_release(v5);
    tr_release(col);
    tr_release(v6i);
    tr_release(v6);
    tr_release(strided);
    tr_release(big_it);
    tr_release(big_ib);
    tr_release(big_i);
    tr_release(big_b);
    tr_release(big_a);
    tr_release(batch);
    tr_release(ai8);
    tr_release(ai);
    tr_release(bi);
    tr_release(b16);
    tr_release(bt);
    tr_release(bt_base);
    tr_release(b);
    tr_release(a);
}

/* roll, repeat, repeat_interleave, pad, take_along_dim and one_hot, on
 * every input (the [300,200] ones for the threads), with indices from 0
 * to 3 (small_index, i64 [5,6]; list, i32 [4]). */
static void test_arrange(struct tr_tensor *small_index, struct tr_tensor *list)
{
    struct tr_arg shifts[2] = {int_arg(1), int_arg(-2)}, dims[2] = {int_arg(0), int_arg(-1)};
    struct tr_arg reps[3] = {int_arg(2), int_arg(1), int_arg(3)};
    struct tr_arg crop[4] = {int_arg(1), int_arg(2), int_arg(-1), int_arg(1)};
    struct tr_arg two[2] = {int_arg(2), int_arg(1)};
    struct tr_arg edges[4] = {int_arg(1), int_arg(0), int_arg(2), int_arg(2)};
    struct tr_tensor *row = tr_slice(small_index, 0, 0, 1, 1); /* [1,6] */
    struct tr_tensor *row3 = tr_slice(row, 1, 0, 3, 1);        /* [1,3], strided */
    struct tr_tensor *col = tr_slice(small_index, 1, 0, 1, 1); /* [5,1], strided */
    struct tr_tensor *col2 = tr_slice(col, 0, 0, 2, 1);        /* [2,1] */
    struct tr_tensor *big = make(TR_DTYPE_I64, 2, (int64_t[]){300, 200});
    struct tr_tensor *classes = run("abs", (struct tr_arg[]){tensor_arg(big)}, 1);
    struct tr_tensor *big_t = tr_transpose(classes, 0, 1);

    for (int i = 0; i < ninputs; i++) {
        struct tr_arg x = tensor_arg(inputs[i].t);
        const char *what = inputs[i].what;
        check("roll", (struct tr_arg[]){x, int_arg(2)}, 2, what);
        check("roll", (struct tr_arg[]){x, list_arg(shifts, 2), list_arg(dims, 2)}, 3, what);
        check("repeat", (struct tr_arg[]){x, list_arg(reps, 3)}, 2, what);
        check("repeat_interleave", (struct tr_arg[]){x, int_arg(3)}, 2, what);
        check("repeat_interleave", (struct tr_arg[]){x, int_arg(2), int_arg(0)}, 3, what);
        check("repeat_interleave", (struct tr_arg[]){x, int_arg(9), int_arg(-1)}, 3, what);
        check("pad", (struct tr_arg[]){x, list_arg(crop, 4), string_arg("constant"), float_arg(1)},
              4, what);
        check("pad", (struct tr_arg[]){x, list_arg(two, 2), string_arg("reflect")}, 3, what);
        check("pad", (struct tr_arg[]){x, list_arg(edges, 4), string_arg("replicate")}, 3, what);
        check("take_along_dim", (struct tr_arg[]){x, tensor_arg(small_index)}, 2, what);
        check("take_along_dim", (struct tr_arg[]){x, tensor_arg(row3), int_arg(1)}, 3, what);
        check("take_along_dim", (struct tr_arg[]){x, tensor_arg(col2), int_arg(0)}, 3, what);
        check("take_along_dim", (struct tr_arg[]){x, tensor_arg(row), int_arg(-1)}, 3, what);
    }
    check("take_along_dim", (struct tr_arg[]){tensor_arg(input_named("f32[300,200]")),
                                              tensor_arg(big_t), int_arg(0)},
          3, "f32[300,200], i64[200,300].T");
    check("one_hot", (struct tr_arg[]){tensor_arg(small_index), int_arg(4)}, 2, "i64[5,6], 4");
    check("one_hot", (struct tr_arg[]){tensor_arg(col), int_arg(5)}, 2, "i64[5,1] strided, 5");
    check("one_hot", (struct tr_arg[]){tensor_arg(list), int_arg(4)}, 2, "i32[4], 4");
    check("one_hot", (struct tr_arg[]){tensor_arg(big_t), int_arg(4)}, 2, "i64[200,300].T, 4");
    check("one_hot", (struct tr_arg[]){int_arg(2), int_arg(4)}, 2, "2, 4");
    tr_release(big_t);
    tr_release(classes);
    tr_release(big);
    tr_release(col2);
    tr_release(col);
    tr_release(row3);
    tr_release(row);
}

/* cdist through the product (more than 25 rows a side; f16 results take
 * tile buffers; a transposed b is read where it lies, a strided a is
 * copied) and directly (p = 3, p = 2 with few rows, a batch), and
 * cosine_similarity (broadcast, integers, a scalar), on sizes for the
 * threads too. */
static void test_distances(void)
{
    struct tr_tensor *a = make(TR_DTYPE_F32, 2, (int64_t[]){30, 6});
    struct tr_tensor *b16 = make(TR_DTYPE_F16, 2, (int64_t[]){40, 6});
    struct tr_tensor *b = make(TR_DTYPE_F64, 2, (int64_t[]){6, 40});
    struct tr_tensor *bt = tr_transpose(b, 0, 1);              /* [40,6], strided */
    struct tr_tensor *batch = make(TR_DTYPE_F32, 3, (int64_t[]){2, 5, 6});
    struct tr_tensor *big = input_named("f32[300,200]"), *big16 = input_named("f16[300,200]");
    struct tr_tensor *sliced = input_named("i32[5,12][:, ::2]");
    struct tr_tensor *t6 = input_named("f32[6,5].T"), *f6 = input_named("f32[5,6]");
    struct tr_tensor *few = tr_slice(big, 0, 0, 20, 1);
    struct tr_tensor *sa = tr_slice(a, 1, 0, 6, 2); /* [30,3], strided */
    struct tr_tensor *sb = tr_slice(b16, 1, 1, 6, 2); /* [40,3] */

    check("cdist", (struct tr_arg[]){tensor_arg(a), tensor_arg(b16)}, 2, "f32[30,6], f16[40,6]");
    check("cdist", (struct tr_arg[]){tensor_arg(b16), tensor_arg(b16)}, 2, "f16[40,6], f16[40,6]");
    check("cdist", (struct tr_arg[]){tensor_arg(a), tensor_arg(bt)}, 2, "f32[30,6], f64[6,40].T");
    check("cdist", (struct tr_arg[]){tensor_arg(sa), tensor_arg(sb)}, 2, "strided f32[30,3], f16[40,3]");
    check("cdist", (struct tr_arg[]){tensor_arg(sa), tensor_arg(sb), float_arg(3)}, 3,
          "strided f32[30,3], f16[40,3], p=3");
    check("cdist", (struct tr_arg[]){tensor_arg(batch), tensor_arg(f6)}, 2, "f32[2,5,6], f32[5,6]");
    check("cdist", (struct tr_arg[]){tensor_arg(batch), tensor_arg(t6), float_arg(INFINITY)}, 3,
          "f32[2,5,6], f32[6,5].T, p=inf");
    check("cdist", (struct tr_arg[]){tensor_arg(big), tensor_arg(big16)}, 2, "f32[300,200], f16[300,200]");
    check("cdist", (struct tr_arg[]){tensor_arg(big), tensor_arg(few), float_arg(1)}, 3,
          "f32[300,200], f32[20,200], p=1");
    check("cdist", (struct tr_arg[]){tensor_arg(few), tensor_arg(few)}, 2, "f32[20,200], f32[20,200]");
    check("cdist", (struct tr_arg[]){tensor_arg(input_named("f32[0,6]")), tensor_arg(b16)}, 2,
          "f32[0,6], f16[40,6]");
    check("cosine_similarity", (struct tr_arg[]){tensor_arg(f6), tensor_arg(t6)}, 2,
          "f32[5,6], f32[6,5].T");
    check("cosine_similarity", (struct tr_arg[]){tensor_arg(sliced), tensor_arg(f6), int_arg(0)}, 3,
          "i32[5,12][:, ::2], f32[5,6], dim=0");
    check("cosine_similarity", (struct tr_arg[]){tensor_arg(big16), tensor_arg(big)}, 2,
          "f16[300,200], f32[300,200]");
    check("cosine_similarity", (struct tr_arg[]){tensor_arg(batch), float_arg(2.0), int_arg(1)}, 3,
          "f32[2,5,6], 2.0, dim=1");
    tr_release(sb);
    tr_release(sa);
    tr_release(few);
    tr_release(batch);
    tr_release(bt);
    tr_release(b);
    tr_release(b16);
    tr_release(a);
}

static void test_select(void)
{
    struct tr_tensor *index = make(TR_DTYPE_I64, 2, (int64_t[]){5, 6});
    struct tr_tensor *small_index, *index_t, *list_index, *i32_index;
    struct tr_arg items[3];

    /* |i % 7 - 3|: indices from 0 to 3 */
    small_index = run("abs", (struct tr_arg[]){tensor_arg(index)}, 1);
    index_t = tr_transpose(small_index, 0, 1); /* [6,5], strided */
    list_index = make(TR_DTYPE_I32, 1, (int64_t[]){4});
    i32_index = run("abs", (struct tr_arg[]){tensor_arg(list_index)}, 1);
    for (int i = 0; i < ninputs; i++) {
        struct tr_arg x = tensor_arg(inputs[i].t);
        const char *what = inputs[i].what;
        if (tr_tensor_numel(inputs[i].t) > 100000)
            continue; /* the [300,200] inputs make the threads' case */
        check("sort", (struct tr_arg[]){x}, 1, what);
        check("sort", (struct tr_arg[]){x, int_arg(0), bool_arg(true)}, 3, what);
        check("argsort", (struct tr_arg[]){x, int_arg(0)}, 2, what);
        check("topk", (struct tr_arg[]){x, int_arg(3)}, 2, what);
        check("topk", (struct tr_arg[]){x, int_arg(1), int_arg(0)}, 3, what);
        check("topk", (struct tr_arg[]){x, int_arg(0)}, 2, what);
        check("gather", (struct tr_arg[]){x, int_arg(1), tensor_arg(small_index)}, 3, what);
        check("gather", (struct tr_arg[]){x, int_arg(0), tensor_arg(index_t)}, 3, what);
        check("index_select", (struct tr_arg[]){x, int_arg(0), tensor_arg(i32_index)}, 3, what);
        check("index_select", (struct tr_arg[]){x, int_arg(-1), int_arg(0)}, 3, what);
        check("quantize", (struct tr_arg[]){x}, 1, what);
        check("quantize", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I8), int_arg(0)}, 3, what);
        check("quantize", (struct tr_arg[]){x, string_arg("i4")}, 2, what);
        check("quantize", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I16), none_arg(), int_arg(2)}, 4,
              what);
        check("quantize_affine", (struct tr_arg[]){x}, 1, what);
        check("quantize_affine", (struct tr_arg[]){x, string_arg("u4"), int_arg(0)}, 3, what);
        check("quantize_affine", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_U8), none_arg(), int_arg(3)},
              4, what);
        items[0] = x;
        items[1] = x;
        items[2] = tensor_arg(input_named("f16[5,6]"));
        check("concat", (struct tr_arg[]){list_arg(items, 2)}, 1, what);
        check("concat", (struct tr_arg[]){list_arg(items, 3), int_arg(1)}, 2, what);
        check("stack", (struct tr_arg[]){list_arg(items, 3)}, 1, what);
    }
    test_arrange(small_index, i32_index);
    {
        struct tr_tensor *q = make(TR_DTYPE_I8, 2, (int64_t[]){5, 6});
        struct tr_tensor *scale = make(TR_DTYPE_F64, 1, (int64_t[]){5});
        struct tr_tensor *scale32 = make(TR_DTYPE_F32, 1, (int64_t[]){6});
        check("dequantize", (struct tr_arg[]){tensor_arg(q), float_arg(0.5)}, 2, "i8[5,6], 0.5");
        check("dequantize", (struct tr_arg[]){tensor_arg(q), tensor_arg(scale), none_arg(), int_arg(0)}, 4,
              "i8[5,6], f64[5], dim 0");
        check("dequantize", (struct tr_arg[]){tensor_arg(q), tensor_arg(scale32), none_arg(), int_arg(1)}, 4,
              "i8[5,6], f32[6], dim 1");
        {
            struct tr_tensor *qt = tr_transpose(q, 0, 1); /* [6,5], strided */
            struct tr_tensor *zero = make(TR_DTYPE_U8, 2, (int64_t[]){5, 3});
            struct tr_tensor *gscale = make(TR_DTYPE_F32, 2, (int64_t[]){5, 3});
            struct tr_tensor *packed = make(TR_DTYPE_U8, 2, (int64_t[]){5, 3});
            check("dequantize", (struct tr_arg[]){tensor_arg(q), tensor_arg(gscale), tensor_arg(zero),
                                                  none_arg(), int_arg(2)},
                  5, "i8[5,6], f32[5,3], u8[5,3], group 2");
            check("dequantize", (struct tr_arg[]){tensor_arg(qt), float_arg(0.5), int_arg(3)}, 3,
                  "i8[6,5] strided, 0.5, 3");
            check("dequantize", (struct tr_arg[]){tensor_arg(packed), tensor_arg(gscale), tensor_arg(zero),
                                                  none_arg(), int_arg(2), string_arg("u4")},
                  6, "u8[5,3] as u4, f32[5,3], u8[5,3], group 2");
            check("dequantize", (struct tr_arg[]){tensor_arg(packed), tensor_arg(scale), none_arg(),
                                                  int_arg(0), none_arg(), string_arg("i4")},
                  6, "u8[5,3] as i4, f64[5], dim 0");
            tr_release(packed);
            tr_release(gscale);
            tr_release(zero);
            tr_release(qt);
        }
        tr_release(scale32);
        tr_release(scale);
        tr_release(q);
    }
    tr_release(i32_index);
    tr_release(list_index);
    tr_release(index_t);
    tr_release(small_index);
    tr_release(index);
}

/* einsum's steps on every input: sums, permuted copies, products with
 * and without an inner letter, into the result or a temporary, views
 * BLAS takes and views it copies, mixed dtypes, three operands. */
static void test_einsum(void)
{
    static const char *const one[] = {"ij->ji", "ij->", "ij->j", "ii->i", "...->"};
    static const char *const two[] = {"ij,ij->ij", "ij,kj->ik", "ij,kj->ki", "ij,ik->jk",
                                      "ij,ij->", "ij,ik->ji", "ij,j->i", "ij,->ij"};
    struct tr_arg items[3];

    for (int i = 0; i < ninputs; i++) {
        struct tr_arg x = tensor_arg(inputs[i].t);
        const char *what = inputs[i].what;
        items[0] = items[1] = items[2] = x;
        for (size_t e = 0; e < sizeof one / sizeof one[0]; e++)
            check("einsum", (struct tr_arg[]){string_arg(one[e]), list_arg(items, 1)}, 2, what);
        for (size_t e = 0; e < sizeof two / sizeof two[0]; e++)
            check("einsum", (struct tr_arg[]){string_arg(two[e]), list_arg(items, 2)}, 2, what);
        check("einsum", (struct tr_arg[]){string_arg("ij,kj,kl->il"), list_arg(items, 3)}, 2, what);
        items[1] = tensor_arg(input_named("f16[5,6]"));
        check("einsum", (struct tr_arg[]){string_arg("ij,kj->ik"), list_arg(items, 2)}, 2, what);
        items[1] = tensor_arg(input_named("i32[5,6]"));
        check("einsum", (struct tr_arg[]){string_arg("ij,ij->i"), list_arg(items, 2)}, 2, what);
    }
}

/* A result whose memory the caller provides takes no block: the
 * declaration keeps only the operands' copies. */
static void test_given(void)
{
    const struct tr_op_info *op = tr_op_find("add");
    struct tr_tensor *a = input_named("f16[5,6]"), *b = input_named("i32[5,6]");
    struct tr_value args[2] = {tr_value_of(a), tr_value_of(b)}, out;
    struct tr_op_memory pooled, given;
    bool yes = true;
    int bad;

    tr_op_infer(op, args, &out, &bad);
    tr_op_scratch(op, args, &out, NULL, 1, &pooled);
    tr_op_scratch(op, args, &out, &yes, 1, &given);
    is_int(pooled.results[0], 512, "add(f16[5,6], i32[5,6]) makes a 512-byte result");
    is_int(pooled.scratch, 512, "  beside the i32 operand rounded to f16 (512 bytes)");
    is_int(given.results[0], 0, "given its memory, it makes none");
    is_int(given.peak, 512, "  and holds only the operand's copy");
    ok(tr_op_scratch(op, args, &out, NULL, 0, &given) == TR_ERR_INVALID,
       "0 threads is refused: %s", tr_last_error());
}

/* Every op that has a kernel was checked on some case. */
static void test_coverage(void)
{
    is_int(layout_failures, 0, "tr_op_layout described every result of every case as it was");
    for (size_t o = 0; o < tr_op_count(); o++) {
        const struct tr_op_info *op = tr_op_at(o);
        if (op->has_kernel)
            ok(checked[op->id] >= 2, "%s: %d cases checked", op->name, checked[op->id]);
    }
}

/* The test switch, in a child (the variable is read once per process):
 * sum's declaration is 512 bytes too high, mean's is right. */
static void test_misdeclare(void)
{
    pid_t pid = fork();
    int status = 0;

    if (pid == 0) {
        struct tr_tensor *x = make(TR_DTYPE_F32, 2, (int64_t[]){5, 6});
        struct tr_op_memory m;
        struct tr_memory_stats before, after;
        bool ran;
        int64_t sum, mean;

        setenv("TENSORRUN_TEST_MISDECLARE_SCRATCH", "sum", 1);
        sum = measure("sum", (struct tr_arg[]){tensor_arg(x)}, 1, &ran, &m, &before, &after);
        mean = measure("mean", (struct tr_arg[]){tensor_arg(x)}, 1, &ran, &m, &before, &after);
        _exit(sum == -512 && mean == 0 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "TENSORRUN_TEST_MISDECLARE_SCRATCH=sum: sum's peak is declared 512 bytes too high, "
       "mean's is right");
}

int main(void)
{
    test_misdeclare();
    make_inputs();
    test_elementwise();
    test_reductions();
    test_neural();
    test_create();
    test_views_and_copies();
    test_linalg();
    test_distances();
    test_select();
    test_einsum();
    test_given();
    free_inputs();
    test_coverage();
    return done_testing();
}
