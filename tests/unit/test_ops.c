/*
 * test_ops.c - the op table and its inference rules: signatures,
 * promotion (PyTorch's, with weak scalars), broadcasting, and the shape
 * rules of each group.
 */
#include <string.h>

#include "tensorrun_ops.h"
#include "tap.h"

static struct tr_value tensor(enum tr_dtype d, int ndim, const int64_t *shape)
{
    struct tr_value v = {.kind = TR_VALUE_TENSOR, .dtype = d, .ndim = ndim};

    if (ndim > 0)
        memcpy(v.shape, shape, (size_t)ndim * sizeof *shape);
    return v;
}

static struct tr_value integer(int64_t i)
{
    return (struct tr_value){.kind = TR_VALUE_INT, .integer = i, .known = true, .weak = true};
}

static struct tr_value number(double f)
{
    return (struct tr_value){.kind = TR_VALUE_FLOAT, .number = f, .known = true, .weak = true};
}

static struct tr_value dtype_value(enum tr_dtype d)
{
    return (struct tr_value){.kind = TR_VALUE_DTYPE, .dtype = d, .known = true, .weak = true};
}

static struct tr_value boolean(bool b)
{
    return (struct tr_value){.kind = TR_VALUE_BOOL, .boolean = b, .known = true, .weak = true};
}

/* Infers op on args given for its leading parameters, defaults for the
 * rest; returns the status and fills results. */
static tr_status infer(const char *name, const struct tr_value *given, int n,
                       struct tr_value *results)
{
    const struct tr_op_info *op = tr_op_find(name);
    struct tr_value args[TR_OP_MAX_PARAMS];
    int bad;

    if (!op)
        return TR_ERR_INVALID;
    for (int i = 0; i < op->nparams; i++)
        args[i] = i < n ? given[i] : op->params[i].default_value;
    return tr_op_infer(op, args, results, &bad);
}

static bool shape_is(const struct tr_value *v, int ndim, const int64_t *shape)
{
    return v->kind == TR_VALUE_TENSOR && v->ndim == ndim &&
           memcmp(v->shape, shape, (size_t)ndim * sizeof *shape) == 0;
}

static void test_table(void)
{
    bool all_parsed = true, sorted_docs = true;
    const char *groups = "create views copy unary binary reduce linalg neural select quantize";

    /* create 11, views 13, copy 4, unary 46, binary 26, reduce 20, linalg 8,
     * neural 7, select 14, quantize 3 */
    is_int(tr_op_count(), 152, "the table holds its 152 ops");
    for (size_t i = 0; i < tr_op_count(); i++) {
        const struct tr_op_info *op = tr_op_at(i);
        if (op->nparams == 0 || !op->doc[0] || !strstr(groups, op->group) ||
            strncmp(op->signature, op->name, strlen(op->name)) != 0)
            all_parsed = false;
        for (int p = 0; p < op->nparams; p++)
            if (!op->params[p].name[0] || (unsigned)op->params[p].kind >= TR_PARAM_KIND_COUNT)
                all_parsed = false;
        if (tr_op_find(op->name) != op)
            sorted_docs = false;
    }
    ok(all_parsed, "every op has parameters, a doc line, a group and a signature");
    ok(sorted_docs, "every op is found by its name");
    ok(strcmp(tr_op_find("topk")->signature,
              "topk(x, k, dim=-1, largest=true, sorted=true)") == 0,
       "topk's signature: %s", tr_op_find("topk")->signature);
    ok(tr_op_find("topk")->nresults == 2 && tr_op_find("sort")->nresults == 2 &&
           tr_op_find("quantize")->nresults == 2,
       "topk, sort and quantize give two results");
    ok(tr_op_find("sofmax") == NULL, "unknown names are not found");
    bool grouped = true;
    for (size_t i = 0; i < tr_op_count(); i++) {
        const struct tr_op_info *op = tr_op_at(i);
        /* the enum and the printed name are one row of TR_OP_GROUP_MAP */
        const char *word = strstr(groups, op->group);
        int nth = 0;
        for (const char *c = groups; word && c < word; c++)
            nth += *c == ' ';
        grouped = grouped && op->id == (enum tr_op_id)i && word && nth == (int)op->group_id;
    }
    ok(grouped, "every op's id is its index, and its group_id names its group");
    ok(tr_op_get(TR_OP_RESHAPE)->group_id == TR_GROUP_VIEWS &&
           tr_op_get(TR_OP_SOFTMAX)->group_id == TR_GROUP_NEURAL &&
           strcmp(tr_op_get(TR_OP_SOFTMAX)->name, "softmax") == 0,
       "reshape is a view, softmax a neural op");
    const struct tr_op_info *gather = tr_op_get(TR_OP_GATHER), *clamp = tr_op_get(TR_OP_CLAMP);
    ok(!gather->params[0].any_dtype && gather->params[2].any_dtype &&
           gather->params[2].kind == TR_PARAM_TENSOR && clamp->params[1].any_dtype &&
           clamp->params[1].kind == TR_PARAM_TENSOR_OR_NONE && !clamp->params[1].required,
       "ops.def's /any marks an index and a bound, and leaves the kind and default alone");
    ok(strcmp(tr_op_find("gelu")->params[1].default_value.string, "none") == 0,
       "string defaults are read");
}

static void test_promotion(void)
{
    static const struct {
        enum tr_dtype a, b, want;
    } cases[] = {
        {TR_DTYPE_U8, TR_DTYPE_I8, TR_DTYPE_I16},   {TR_DTYPE_U8, TR_DTYPE_I16, TR_DTYPE_I16},
        {TR_DTYPE_U16, TR_DTYPE_I16, TR_DTYPE_I32}, {TR_DTYPE_U32, TR_DTYPE_I32, TR_DTYPE_I64},
        {TR_DTYPE_U32, TR_DTYPE_I8, TR_DTYPE_I64},  {TR_DTYPE_I32, TR_DTYPE_I64, TR_DTYPE_I64},
        {TR_DTYPE_F16, TR_DTYPE_BF16, TR_DTYPE_F32}, {TR_DTYPE_F16, TR_DTYPE_F32, TR_DTYPE_F32},
        {TR_DTYPE_I64, TR_DTYPE_F16, TR_DTYPE_F16}, {TR_DTYPE_BOOL, TR_DTYPE_U8, TR_DTYPE_U8},
        {TR_DTYPE_BOOL, TR_DTYPE_BOOL, TR_DTYPE_BOOL},
    };
    struct tr_value r[1], a, b;
    int64_t s3[1] = {3};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tr_value args[2] = {tensor(cases[i].a, 1, s3), tensor(cases[i].b, 1, s3)};
        tr_status s = infer("add", args, 2, r);
        ok(s == TR_OK && r[0].dtype == cases[i].want, "%s + %s is %s",
           tr_dtype_name(cases[i].a), tr_dtype_name(cases[i].b), tr_dtype_name(cases[i].want));
    }
    a = tensor(TR_DTYPE_U64, 1, s3);
    b = tensor(TR_DTYPE_I8, 1, s3);
    ok(infer("add", (struct tr_value[]){a, b}, 2, r) == TR_ERR_DTYPE &&
           strstr(tr_last_error(), "cast"),
       "u64 + i8 asks for a cast: %s", tr_last_error());
    /* weak scalars */
    ok(infer("mul", (struct tr_value[]){tensor(TR_DTYPE_F16, 1, s3), number(2.5)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F16,
       "f16 tensor * 2.5 stays f16");
    ok(infer("mul", (struct tr_value[]){tensor(TR_DTYPE_I32, 1, s3), number(2.5)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F32,
       "i32 tensor * 2.5 is f32");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_U8, 1, s3), integer(200)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_U8,
       "u8 tensor + 200 stays u8");
    ok(infer("mul", (struct tr_value[]){tensor(TR_DTYPE_U8, 1, s3), integer(300)}, 2, r) ==
               TR_ERR_DTYPE &&
           strstr(tr_last_error(), "300") && strstr(tr_last_error(), "u8"),
       "u8 tensor * 300 is refused, naming the constant: %s", tr_last_error());
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_I32, 1, s3), integer(INT64_C(1) << 40)},
             2, r) == TR_ERR_DTYPE,
       "i32 tensor + 2**40 is refused");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_I32, 1, s3), integer(INT32_MIN)}, 2, r) ==
               TR_OK &&
           r[0].dtype == TR_DTYPE_I32,
       "i32 tensor + -2**31 fits");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_U64, 1, s3), integer(-1)}, 2, r) ==
           TR_ERR_DTYPE,
       "u64 tensor + -1 is refused");
    ok(infer("lt", (struct tr_value[]){tensor(TR_DTYPE_U8, 1, s3), integer(300)}, 2, r) == TR_OK,
       "u8 tensor < 300 is a comparison, not a conversion: taken");
    ok(infer("clamp", (struct tr_value[]){tensor(TR_DTYPE_U8, 1, s3), integer(0), integer(256)}, 3,
             r) == TR_ERR_DTYPE,
       "clamp(u8 tensor, 0, 256) is refused");
    ok(infer("full", (struct tr_value[]){integer(3), integer(128), dtype_value(TR_DTYPE_I8)}, 3,
             r) == TR_ERR_DTYPE,
       "full(3, 128, i8) is refused");
    ok(infer("pow", (struct tr_value[]){tensor(TR_DTYPE_I64, 1, s3), integer(-1)}, 2, r) ==
               TR_ERR_DTYPE &&
           strstr(tr_last_error(), "negative"),
       "i64 tensor ** -1 is refused: %s", tr_last_error());
    ok(infer("pow", (struct tr_value[]){tensor(TR_DTYPE_F32, 1, s3), integer(-1)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F32,
       "f32 tensor ** -1 is taken");
    /* rank-0 tensors do not widen tensors with dimensions of their category */
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_F32, 1, s3), tensor(TR_DTYPE_F64, 0, s3)},
             2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F32,
       "f32[3] + f64[] is f32");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_I32, 1, s3), tensor(TR_DTYPE_I64, 0, s3)},
             2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_I32,
       "i32[3] + i64[] is i32");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_I32, 1, s3), tensor(TR_DTYPE_F64, 0, s3)},
             2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F64,
       "i32[3] + f64[] is f64 (a higher category widens, to its own dtype)");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_BOOL, 1, s3), tensor(TR_DTYPE_U8, 0, s3)},
             2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_U8,
       "bool[3] + u8[] is u8");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_F32, 0, s3), tensor(TR_DTYPE_F64, 0, s3)},
             2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F64,
       "f32[] + f64[] is f64 (both rank 0)");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_F16, 0, s3), number(2.5)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F16,
       "f16[] + 2.5 is f16");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_I16, 0, s3), number(2.5)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F32,
       "i16[] + 2.5 is f32");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_BOOL, 1, s3), integer(1)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_I64,
       "bool tensor + 1 is i64");
    ok(infer("div", (struct tr_value[]){tensor(TR_DTYPE_I32, 1, s3), integer(2)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F32,
       "integer / integer is f32");
    ok(infer("lt", (struct tr_value[]){tensor(TR_DTYPE_F64, 1, s3), integer(2)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_BOOL,
       "comparisons give bool");
    ok(infer("add", (struct tr_value[]){integer(2), number(0.5)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F64 && r[0].weak && r[0].ndim == 0,
       "two numbers give a weak f64 scalar (a constant keeps its exact value)");
    ok(infer("neg", (struct tr_value[]){tensor(TR_DTYPE_BOOL, 1, s3)}, 1, r) == TR_ERR_DTYPE &&
           strstr(tr_last_error(), "neg: does not take bool"),
       "neg does not take bool: %s", tr_last_error());
    ok(infer("exp", (struct tr_value[]){tensor(TR_DTYPE_I64, 1, s3)}, 1, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_F32,
       "exp of integers is f32");
}

static void test_shapes(void)
{
    int64_t a[2] = {1024, 256}, b[2] = {128, 1000000}, c[3] = {5, 1, 3}, d[2] = {4, 3};
    int64_t want[3] = {5, 4, 3}, batch_a[3] = {7, 2, 3}, batch_b[2] = {3, 4};
    struct tr_value r[2];

    ok(infer("matmul", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a), tensor(TR_DTYPE_F32, 2, b)},
             2, r) == TR_ERR_SHAPE &&
           strcmp(tr_last_error(),
                  "matmul: shapes [1024,256] and [128,1000000] do not line up (256 != 128)") == 0,
       "matmul's message: %s", tr_last_error());
    ok(infer("matmul",
             (struct tr_value[]){tensor(TR_DTYPE_F32, 3, batch_a), tensor(TR_DTYPE_F32, 2, batch_b)},
             2, r) == TR_OK &&
           shape_is(&r[0], 3, (int64_t[]){7, 2, 4}),
       "batched matmul broadcasts the batch");
    ok(infer("matmul", (struct tr_value[]){tensor(TR_DTYPE_U8, 2, a), tensor(TR_DTYPE_I8, 2, b)},
             2, r) == TR_ERR_SHAPE,
       "matmul takes integers: %s", tr_last_error());
    ok(infer("matmul", (struct tr_value[]){tensor(TR_DTYPE_U8, 3, batch_a), tensor(TR_DTYPE_I8, 2, batch_b)},
             2, r) == TR_OK && r[0].dtype == TR_DTYPE_I16,
       "u8 @ i8 is i16, as u8 * i8 is");
    ok(infer("matmul", (struct tr_value[]){tensor(TR_DTYPE_BOOL, 2, a), tensor(TR_DTYPE_BOOL, 2, a)},
             2, r) == TR_ERR_DTYPE && strstr(tr_last_error(), "bool"),
       "matmul refuses bool, as PyTorch does: %s", tr_last_error());
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_F32, 3, c), tensor(TR_DTYPE_F32, 2, d)}, 2,
             r) == TR_OK &&
           shape_is(&r[0], 3, want),
       "[5,1,3] + [4,3] broadcasts to [5,4,3]");
    ok(infer("add", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a), tensor(TR_DTYPE_F32, 2, d)}, 2,
             r) == TR_ERR_SHAPE &&
           strstr(tr_last_error(), "cannot be broadcast"),
       "%s", tr_last_error());
    ok(infer("sum", (struct tr_value[]){tensor(TR_DTYPE_I8, 3, c), integer(-1), boolean(true)}, 3,
             r) == TR_OK &&
           shape_is(&r[0], 3, (int64_t[]){5, 1, 1}) && r[0].dtype == TR_DTYPE_I64,
       "sum over -1 with keepdim, integers to i64");
    ok(infer("mean", (struct tr_value[]){tensor(TR_DTYPE_F16, 3, c),
                                         (struct tr_value){.kind = TR_VALUE_LIST, .count = 2,
                                                           .items = (struct tr_value[]){integer(0), integer(2)}}},
             2, r) == TR_OK &&
           shape_is(&r[0], 1, (int64_t[]){1}) && r[0].dtype == TR_DTYPE_F16,
       "mean over a list of dims");
    ok(infer("sum", (struct tr_value[]){tensor(TR_DTYPE_F32, 3, c), integer(3)}, 2, r) == TR_ERR_INDEX &&
           strstr(tr_last_error(), "dim 3 is out of range"),
       "%s", tr_last_error());
    ok(infer("topk", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a), integer(10), integer(0)}, 3, r) == TR_OK &&
           shape_is(&r[0], 2, (int64_t[]){10, 256}) && r[1].dtype == TR_DTYPE_I64,
       "topk along 0: values and i64 indices");
    ok(infer("topk", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a), tensor(TR_DTYPE_I64, 0, NULL)},
             2, r) == TR_ERR_INVALID &&
           strstr(tr_last_error(), "'k' must be an integer, not a tensor"),
       "%s", tr_last_error());
    ok(infer("concat", (struct tr_value[]){(struct tr_value){.kind = TR_VALUE_LIST, .count = 2,
                                               .items = (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a),
                                                                            tensor(TR_DTYPE_F32, 2, b)}}},
             1, r) == TR_ERR_SHAPE,
       "concat of mismatched shapes: %s", tr_last_error());
    ok(infer("concat", (struct tr_value[]){(struct tr_value){.kind = TR_VALUE_LIST, .count = 2,
                                               .items = (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a),
                                                                            tensor(TR_DTYPE_F16, 2, a)}}},
             1, r) == TR_OK &&
           shape_is(&r[0], 2, (int64_t[]){2048, 256}) && r[0].dtype == TR_DTYPE_F32,
       "concat along 0");
    ok(infer("reshape", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a),
                                            (struct tr_value){.kind = TR_VALUE_LIST, .count = 2,
                                                              .items = (struct tr_value[]){integer(-1), integer(512)}}},
             2, r) == TR_OK &&
           shape_is(&r[0], 2, (int64_t[]){512, 512}),
       "reshape infers -1");
    ok(infer("arange", (struct tr_value[]){integer(10)}, 1, r) == TR_OK &&
           shape_is(&r[0], 1, (int64_t[]){10}) && r[0].dtype == TR_DTYPE_I64,
       "arange(10) is i64[10]");
    ok(infer("arange", (struct tr_value[]){number(0), integer(1), number(0.25)}, 3, r) == TR_OK &&
           shape_is(&r[0], 1, (int64_t[]){4}) && r[0].dtype == TR_DTYPE_F32,
       "arange(0.0, 1, 0.25) is f32[4]");
    ok(infer("zeros", (struct tr_value[]){(struct tr_value){.kind = TR_VALUE_LIST, .count = 2,
                                              .items = (struct tr_value[]){integer(2), integer(3)}}},
             1, r) == TR_OK &&
           shape_is(&r[0], 2, (int64_t[]){2, 3}) && r[0].dtype == TR_DTYPE_F32,
       "zeros([2, 3]) is f32");
    ok(infer("full", (struct tr_value[]){integer(4), integer(7)}, 2, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_I64,
       "full with an integer value is i64");
    ok(infer("quantize", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a),
                                             (struct tr_value){.kind = TR_VALUE_DTYPE, .dtype = TR_DTYPE_I8},
                                             integer(0)},
             3, r) == TR_OK &&
           r[0].dtype == TR_DTYPE_I8 && shape_is(&r[1], 1, (int64_t[]){1024}),
       "quantize per channel: i8 values and one scale per row");
    ok(infer("layer_norm", (struct tr_value[]){tensor(TR_DTYPE_F32, 2, a), tensor(TR_DTYPE_F32, 1, (int64_t[]){255})},
             2, r) == TR_ERR_SHAPE,
       "layer_norm checks its weight: %s", tr_last_error());
}

static void test_views(void)
{
    int64_t s[3] = {4, 5, 6};
    struct tr_value x = tensor(TR_DTYPE_F32, 3, s), r;
    struct tr_value slice[3] = {integer(1), {.kind = TR_VALUE_NONE}, integer(-1)};
    struct tr_value subs[4] = {integer(0), {.kind = TR_VALUE_NONE},
                               {.kind = TR_VALUE_LIST, .count = 3, .items = slice},
                               {.kind = TR_VALUE_STRING, .string = "..."}};
    int bad;

    ok(tr_infer_transpose_all(&x, false, &r) == TR_OK && shape_is(&r, 3, (int64_t[]){6, 5, 4}),
       ".T reverses all dimensions");
    ok(tr_infer_transpose_all(&x, true, &r) == TR_OK && shape_is(&r, 3, (int64_t[]){4, 6, 5}),
       ".mT swaps the last two");
    ok(tr_infer_index(&x, subs, 4, &r, &bad) == TR_OK && shape_is(&r, 3, (int64_t[]){1, 2, 6}),
       "x[0, None, 1::-1, ...] is [1, 2, 6]");
    subs[0] = integer(4);
    ok(tr_infer_index(&x, subs, 1, &r, &bad) == TR_ERR_INDEX && bad == 0,
       "an index past the end: %s", tr_last_error());
    ok(tr_infer_index(&x, (struct tr_value[]){integer(0), integer(0), integer(0), integer(0)}, 4,
                      &r, &bad) == TR_ERR_INDEX,
       "too many indices: %s", tr_last_error());
    /* regression (fuzz_pipeline): the dimensions after the last None
     * were copied past TR_MAX_DIMS */
    {
        int64_t s7[7] = {1, 2, 3, 4, 5, 6, 7};
        struct tr_value x7 = tensor(TR_DTYPE_F32, 7, s7);
        struct tr_value nn[2] = {{.kind = TR_VALUE_NONE}, {.kind = TR_VALUE_NONE}};
        ok(tr_infer_index(&x7, nn, 2, &r, &bad) == TR_ERR_SHAPE && bad == 1,
           "x[None, None] of 7 dimensions is 9: %s", tr_last_error());
        ok(tr_infer_index(&x7, nn, 1, &r, &bad) == TR_OK && r.ndim == 8,
           "x[None] of 7 dimensions is 8");
        nn[1] = integer(0);
        ok(tr_infer_index(&x7, nn, 2, &r, &bad) == TR_OK && r.ndim == 7,
           "x[None, 0] of 7 dimensions is 7");
    }
}

/* Regressions (fuzz_pipeline): shapes whose element counts pass int64,
 * as an empty tensor's view can have them, were multiplied or added in
 * int64 without a check. */
static void test_huge_shapes(void)
{
    const int64_t big = INT64_C(1) << 62;
    int64_t s[3] = {big, big, 0}, s2[2] = {big, big};
    struct tr_value empty = tensor(TR_DTYPE_F32, 3, s), full = tensor(TR_DTYPE_F32, 2, s2), r[2];
    struct tr_value items[2], args[2];

    args[0] = empty;
    items[0] = integer(-1);
    args[1] = (struct tr_value){.kind = TR_VALUE_LIST, .count = 1, .items = items};
    ok(infer("reshape", args, 2, r) == TR_OK && shape_is(&r[0], 1, (int64_t[]){0}),
       "reshape(x, [-1]) of an empty [2^62, 2^62, 0] is [0]");
    args[0] = full;
    ok(infer("reshape", args, 2, r) == TR_ERR_SHAPE, "reshape of [2^62, 2^62]: %s",
       tr_last_error());
    ok(infer("flatten", &empty, 1, r) == TR_OK && shape_is(&r[0], 1, (int64_t[]){0}),
       "flatten of an empty [2^62, 2^62, 0] is [0]");
    ok(infer("flatten", &full, 1, r) == TR_ERR_SHAPE, "flatten of [2^62, 2^62]: %s",
       tr_last_error());
    items[0] = full;
    items[1] = full;
    args[0] = (struct tr_value){.kind = TR_VALUE_LIST, .count = 2, .items = items};
    args[1] = integer(0);
    ok(infer("cat", args, 2, r) == TR_ERR_SHAPE, "cat of two [2^62, 2^62] along 0: %s",
       tr_last_error());
    args[1] = integer(1);
    items[0] = items[1] = tensor(TR_DTYPE_F32, 2, (int64_t[]){2, big});
    ok(infer("cat", args, 2, r) == TR_ERR_SHAPE, "cat of two [2, 2^62] along 1: %s",
       tr_last_error());
    {
        int64_t s1[1] = {8};
        struct tr_value x = tensor(TR_DTYPE_F32, 1, s1), slice[3], sub;
        int bad;
        slice[0] = slice[1] = (struct tr_value){.kind = TR_VALUE_NONE};
        slice[2] = integer(INT64_MIN);
        sub = (struct tr_value){.kind = TR_VALUE_LIST, .count = 3, .items = slice};
        ok(tr_infer_index(&x, &sub, 1, &r[0], &bad) == TR_OK && shape_is(&r[0], 1, (int64_t[]){1}),
           "x[::INT64_MIN] of 8 is 1 long");
        slice[2] = integer(INT64_MAX);
        ok(tr_infer_index(&x, &sub, 1, &r[0], &bad) == TR_OK && shape_is(&r[0], 1, (int64_t[]){1}),
           "x[::INT64_MAX] of 8 is 1 long");
    }
}

/* split and chunk: PyTorch's pieces, known before anything runs. */
static void test_pieces(void)
{
    const struct tr_op_info *split = tr_op_find("split"), *chunk = tr_op_find("chunk");
    struct tr_value x = tensor(TR_DTYPE_F32, 2, (int64_t[]){5, 3}), out[2];
    struct tr_value empty = tensor(TR_DTYPE_F32, 1, (int64_t[]){0});
    struct tr_value sizes[3] = {integer(1), integer(0), integer(4)};
    struct tr_value list = {.kind = TR_VALUE_LIST, .count = 3, .items = sizes};
    int64_t starts[8], lengths[8];
    size_t n;
    int bad;

    ok(split->nresults == 0 && chunk->nresults == 0, "split and chunk give as many results as pieces");
    ok(tr_op_pieces(chunk, (struct tr_value[]){x, integer(4), integer(0)}, starts, lengths, 8, &n,
                    &bad) == TR_OK &&
           n == 3 && lengths[0] == 2 && lengths[1] == 2 && lengths[2] == 1 && starts[2] == 4,
       "chunk of 5 in 4 is 3 pieces of 2, 2 and 1, as in PyTorch");
    ok(tr_op_pieces(chunk, (struct tr_value[]){empty, integer(3), integer(0)}, starts, lengths, 8,
                    &n, &bad) == TR_OK && n == 3 && lengths[2] == 0,
       "chunk of an empty dim in 3 is 3 empty pieces");
    ok(tr_op_pieces(split, (struct tr_value[]){x, integer(2), integer(-2)}, starts, lengths, 8, &n,
                    &bad) == TR_OK && n == 3 && lengths[2] == 1,
       "split of 5 by 2 is 2, 2 and 1");
    ok(tr_op_pieces(split, (struct tr_value[]){x, list, integer(0)}, starts, lengths, 1, &n, &bad) ==
               TR_OK && n == 3 && starts[0] == 0 && lengths[0] == 1,
       "split by sizes counts every piece, and writes only the first max");
    ok(tr_op_pieces(split, (struct tr_value[]){x, integer(1), integer(1)}, NULL, NULL, 0, &n, &bad) ==
               TR_OK && n == 3,
       "split by 1 along dim 1 of [5, 3] is 3 pieces");
    sizes[2] = integer(3);
    ok(tr_op_pieces(split, (struct tr_value[]){x, list, integer(0)}, starts, lengths, 8, &n, &bad) ==
               TR_ERR_SHAPE && bad == 1 && strstr(tr_last_error(), "add up"),
       "sizes that do not add up are refused: %s", tr_last_error());
    ok(tr_op_pieces(split, (struct tr_value[]){x, integer(0), integer(0)}, starts, lengths, 8, &n,
                    &bad) == TR_ERR_INVALID && bad == 1,
       "a size of 0 of a dim of 5 is refused");
    ok(tr_op_pieces(chunk, (struct tr_value[]){x, integer(0), integer(0)}, starts, lengths, 8, &n,
                    &bad) == TR_ERR_INVALID,
       "0 chunks are refused");
    ok(tr_op_pieces(chunk, (struct tr_value[]){x, integer(2), integer(2)}, starts, lengths, 8, &n,
                    &bad) == TR_ERR_INDEX && bad == 2,
       "dim 2 of a matrix is refused");
    ok(infer("split", (struct tr_value[]){x, integer(2)}, 2, out) == TR_OK,
       "tr_op_infer checks split and gives no results");
    ok(tr_op_pieces(tr_op_find("topk"), (struct tr_value[]){x}, starts, lengths, 8, &n, &bad) ==
           TR_ERR_INVALID,
       "tr_op_pieces of an op with fixed results is refused");
}

int main(void)
{
    test_table();
    test_pieces();
    test_promotion();
    test_shapes();
    test_views();
    test_huge_shapes();
    return done_testing();
}
