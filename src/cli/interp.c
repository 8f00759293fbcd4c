/*
 * interp.c - statements evaluated for real: names looked up in the run's
 * environment, constants folded as the planner folds them, every call
 * handed to the engine through the op table, indexing and .T/.mT made
 * views.  The planner has already checked everything that can be checked
 * without data, so what fails here is what only data can break.
 */
#include "config.h"

#include "interp.h"

#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "plan.h"

/* ------------------------------------------------------------ environment */

struct binding *env_find(const struct env *env, const char *name)
{
    for (size_t i = 0; i < env->count; i++)
        if (strcmp(env->items[i].name, name) == 0)
            return &env->items[i];
    return NULL;
}

/* Releases what an argument holds: its tensor, or a list's items. */
static void arg_release(struct tr_arg *arg)
{
    tr_release(arg->tensor);
    arg->tensor = NULL;
    for (size_t i = 0; arg->items && i < arg->value.count; i++)
        arg_release((struct tr_arg *)&arg->items[i]);
    free((void *)arg->items);
    arg->items = NULL;
}

/* A list the environment owns: its items copied, each tensor a new
 * handle. */
static bool list_copy(const struct tr_arg *from, struct tr_arg *to)
{
    size_t n = from->value.count;
    struct tr_arg *items = calloc(n ? n : 1, sizeof *items);

    *to = *from;
    to->items = items;
    to->value.items = NULL;
    to->value.count = 0;
    if (!items)
        return false;
    for (size_t i = 0; i < n; i++) {
        const struct tr_arg *item = &from->items[i];
        items[i] = *item;
        items[i].items = NULL;
        if (item->value.kind == TR_VALUE_LIST && !list_copy(item, &items[i]))
            return false;
        if (item->tensor) {
            items[i].tensor = tr_expand(item->tensor, tr_tensor_shape(item->tensor),
                                        tr_tensor_ndim(item->tensor));
            if (!items[i].tensor)
                return false;
        }
        to->value.count = i + 1;
    }
    return true;
}

bool env_bind(struct env *env, const char *name, const struct tr_arg *arg, int stage)
{
    struct binding *b = env_find(env, name);

    if (!b) {
        if (env->count == env->capacity) {
            size_t cap = env->capacity ? env->capacity * 2 : 32;
            struct binding *items = realloc(env->items, cap * sizeof *items);
            if (!items) {
                tr_release(arg->tensor);
                tr_set_error(TR_ERR_OOM, "out of memory binding '%s'", name);
                return false;
            }
            env->items = items;
            env->capacity = cap;
        }
        b = &env->items[env->count++];
        memset(b, 0, sizeof *b);
    }
    if (b->arg.tensor != arg->tensor)
        tr_release(b->arg.tensor);
    b->arg.tensor = NULL;
    arg_release(&b->arg);
    b->name = name;
    b->stage = stage;
    if (arg->value.kind == TR_VALUE_LIST) {
        if (!list_copy(arg, &b->arg)) {
            arg_release(&b->arg);
            *b = env->items[--env->count];
            tr_set_error(TR_ERR_OOM, "out of memory binding '%s'", name);
            return false;
        }
        return true;
    }
    b->arg = *arg;
    b->arg.items = NULL;
    return true;
}

size_t arg_tensors(const struct tr_arg *arg, struct tr_tensor **out)
{
    size_t n = 0;

    if (arg->tensor) {
        if (out)
            out[0] = arg->tensor;
        return 1;
    }
    for (size_t i = 0; arg->items && i < arg->value.count; i++)
        n += arg_tensors(&arg->items[i], out ? out + n : NULL);
    return n;
}

void env_unbind(struct env *env, const char *name)
{
    struct binding *b = env_find(env, name);

    if (!b)
        return;
    arg_release(&b->arg);
    *b = env->items[--env->count];
}

void env_free(struct env *env)
{
    for (size_t i = 0; i < env->count; i++)
        arg_release(&env->items[i].arg);
    free(env->items);
    memset(env, 0, sizeof *env);
}

/* ------------------------------------------------------------ values */

/* What an expression gave.  A temporary tensor is the evaluation's own, to
 * release once read; a name's tensor belongs to the environment. */
struct rv {
    struct tr_arg arg;
    bool temp;
    struct rv *items;      /* a list's items (arg.items is their args) */
    struct tr_arg *item_args;
};

static void rv_drop(struct rv *v)
{
    if (v->temp)
        tr_release(v->arg.tensor);
    for (size_t i = 0; v->items && i < v->arg.value.count; i++)
        rv_drop(&v->items[i]);
    free(v->items);
    free(v->item_args);
    memset(v, 0, sizeof *v);
}

static struct rv constant(struct tr_value value)
{
    struct rv v;

    memset(&v, 0, sizeof v);
    v.arg.value = value;
    v.arg.value.known = true;
    v.arg.value.weak = true;
    return v;
}

static struct rv tensor(struct tr_tensor *t, bool temp)
{
    struct rv v;

    memset(&v, 0, sizeof v);
    v.arg.tensor = t;
    v.arg.value = tr_value_of(t);
    v.temp = temp;
    return v;
}

struct interp {
    struct env *env;
    const struct expr *at;   /* where the first failure was */
};

static tr_status fail(struct interp *in, const struct expr *e)
{
    if (!in->at)
        in->at = e;
    return tr_last_status() != TR_OK ? tr_last_status() : TR_ERR_INVALID;
}

static tr_status eval(struct interp *in, const struct expr *e, struct rv *out);
static tr_status attribute(struct interp *in, const struct expr *e, const char *attr,
                           struct tr_value x, struct rv *out);
static tr_status index_list(struct interp *in, const struct expr *e, struct rv *base,
                            struct rv *out);

static tr_status eval_name(struct interp *in, const struct expr *e, struct rv *out)
{
    const struct binding *b = env_find(in->env, e->v.name);

    if (!b) {
        tr_set_error(TR_ERR_STATE, "'%s' has no value here", e->v.name);
        return fail(in, e);
    }
    memset(out, 0, sizeof *out);
    out->arg = b->arg;
    if (b->arg.tensor) {
        out->arg.value = tr_value_of(b->arg.tensor);
        out->arg.value.weak = b->arg.value.weak;
    }
    return TR_OK;
}

static tr_status eval_list(struct interp *in, const struct expr *e, struct rv *out)
{
    size_t n = e->nargs;
    tr_status s = TR_OK;

    memset(out, 0, sizeof *out);
    out->items = calloc(n ? n : 1, sizeof *out->items);
    out->item_args = calloc(n ? n : 1, sizeof *out->item_args);
    if (!out->items || !out->item_args) {
        free(out->items);
        free(out->item_args);
        out->items = NULL;
        out->item_args = NULL;
        tr_set_error(TR_ERR_OOM, "out of memory evaluating a list");
        return fail(in, e);
    }
    out->arg.value.kind = TR_VALUE_LIST;
    out->arg.value.known = true;
    for (size_t i = 0; i < n && s == TR_OK; i++) {
        s = eval(in, e->args[i].value, &out->items[i]);
        if (s == TR_OK) {
            out->item_args[i] = out->items[i].arg;
            out->arg.value.count = i + 1;
        }
    }
    out->arg.items = out->item_args;
    if (s != TR_OK)
        rv_drop(out);
    return s;
}

/* Numbers that are all known constants are folded, as the planner did, so
 * that dim=-1 or k*2 is an integer where an op needs one. */
static bool all_constant(const struct tr_arg *args, int n)
{
    for (int i = 0; i < n; i++)
        if (args[i].tensor)
            return false;
    return true;
}

/* Whether an op's arguments are all numbers or tensors computed from
 * numbers alone (exp(1.0)): its results may then be weak too, as the
 * planner typed them, so that they do not widen the tensors they meet. */
static bool all_weak(const struct tr_arg *args, int n)
{
    for (int i = 0; i < n; i++)
        if ((args[i].tensor && !args[i].value.weak) || args[i].value.kind == TR_VALUE_LIST)
            return false; /* lists: shapes and joins, whose results are never weak */
    return true;
}

/* Marks results weak where the op table's rule makes them so. */
static void mark_weak(const struct tr_op_info *op, const struct tr_arg *args, struct rv *results)
{
    struct tr_value values[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS];
    int bad;

    for (int i = 0; i < op->nparams; i++)
        values[i] = args[i].value;
    if (tr_op_infer(op, values, out, &bad) != TR_OK)
        return;
    for (int r = 0; r < op->nresults; r++)
        results[r].arg.value.weak = out[r].weak;
}

/* A temporary argument of the elementwise op that its result may be
 * computed over (its destination, tr_op_run): the only handle of a
 * writable, compact CPU pool tensor of the result's dtype and shape, which
 * is released right after the op (x * 2 + 1 needs one buffer, not two);
 * or NULL. */
static struct tr_tensor *consumed(const struct tr_op_info *op, const struct rv *args)
{
    struct tr_value values[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS];
    int bad;

    if (op->group_id != TR_GROUP_UNARY && op->group_id != TR_GROUP_BINARY)
        return NULL;
    for (int i = 0; i < op->nparams; i++)
        values[i] = args[i].arg.value;
    if (tr_op_infer(op, values, out, &bad) != TR_OK)
        return NULL;
    for (int i = 0; i < op->nparams; i++) {
        struct tr_tensor *t = args[i].arg.tensor;
        if (!args[i].temp || !t || tr_tensor_dtype(t) != out[0].dtype ||
            tr_tensor_ndim(t) != out[0].ndim ||
            memcmp(tr_tensor_shape(t), out[0].shape, (size_t)out[0].ndim * sizeof(int64_t)) != 0)
            continue;
        if (tr_tensor_is_sole_handle(t) && tr_tensor_storage_kind(t) == TR_STORAGE_POOL &&
            !(tr_tensor_flags(t) & TR_FLAG_READONLY) &&
            tr_tensor_device(t).kind == TR_DEV_CPU && tr_tensor_is_contiguous(t))
            return t;
    }
    return NULL;
}

/* Runs the call e; dest (when not NULL) is its op's result's destination. */
static tr_status eval_call(struct interp *in, const struct expr *e,
                           const struct tr_dest *dest, struct rv *results, int *n)
{
    const struct tr_op_info *op = tr_op_find(e->op);
    struct rv args[TR_OP_MAX_PARAMS];
    struct tr_arg pass[TR_OP_MAX_PARAMS];
    struct tr_tensor *out[TR_OP_MAX_RESULTS] = {NULL};
    struct tr_value values[TR_OP_MAX_PARAMS], folded;
    int from[TR_OP_MAX_PARAMS];
    enum fold_result fold = FOLD_NO;
    tr_status s = TR_OK;

    if (!op && strcmp(e->op, "numel") == 0 && e->nargs == 1) {
        struct rv x;
        s = eval(in, e->args[0].value, &x);
        if (s == TR_OK) {
            s = attribute(in, e, "numel", x.arg.value, &results[0]);
            rv_drop(&x);
        }
        *n = 1;
        return s;
    }
    if (!op || !plan_bind_call(e, op, from, NULL)) {
        tr_set_error(TR_ERR_STATE, "%s: the call does not match the op", e->op);
        return fail(in, e);
    }
    memset(args, 0, sizeof args);
    for (int i = 0; i < op->nparams && s == TR_OK; i++) {
        if (from[i] < 0) {
            args[i].arg.value = op->params[i].default_value;
        } else {
            s = eval(in, e->args[from[i]].value, &args[i]);
        }
        pass[i] = args[i].arg;
        values[i] = args[i].arg.value;
    }
    if (s == TR_OK && all_constant(pass, op->nparams))
        fold = fold_constants(op->name, values, op->nparams, &folded);
    if (fold == FOLD_OK) {
        *n = 1;
        results[0] = constant(folded);
    } else if (fold == FOLD_ERROR) {
        s = fail(in, e);
    } else if (s == TR_OK) {
        struct tr_dest over = {.tensor = dest ? NULL : consumed(op, args)};
        s = tr_op_run(op, pass, dest ? dest : &over, out);
        if (s != TR_OK) {
            fail(in, e);
        } else {
            *n = op->nresults;
            for (int r = 0; r < op->nresults; r++)
                results[r] = tensor(out[r], true);
            if (all_weak(pass, op->nparams))
                mark_weak(op, pass, results);
        }
    }
    for (int i = 0; i < op->nparams; i++)
        rv_drop(&args[i]);
    return s;
}

/* A subscript's integer, or TR_SLICE_NONE for a bound left out. */
static tr_status subscript_int(struct interp *in, const struct expr *e, int64_t *out)
{
    struct rv v;
    tr_status s;

    if (!e || e->kind == EXPR_NONE) {
        *out = TR_SLICE_NONE;
        return TR_OK;
    }
    s = eval(in, e, &v);
    if (s != TR_OK)
        return s;
    if (v.arg.tensor || v.arg.value.kind != TR_VALUE_INT) {
        rv_drop(&v);
        tr_set_error(TR_ERR_INDEX, "an index must be an integer");
        return fail(in, e);
    }
    *out = v.arg.value.integer;
    return TR_OK;
}

/* base[subscripts]: NumPy basic indexing, made of views one dimension at a
 * time (d is the dimension of the view so far that the next subscript
 * applies to). */
static tr_status eval_index(struct interp *in, const struct expr *e, struct rv *out)
{
    struct rv base;
    struct tr_tensor *t, *next;
    int consumed = 0, d = 0, ndim;
    tr_status s = eval(in, e->base, &base);

    if (s != TR_OK)
        return s;
    if (!base.arg.tensor && base.arg.value.kind == TR_VALUE_LIST && e->nargs == 1)
        return index_list(in, e, &base, out);
    if (!base.arg.tensor) {
        rv_drop(&base);
        tr_set_error(TR_ERR_INDEX, "only a tensor can be indexed");
        return fail(in, e);
    }
    ndim = tr_tensor_ndim(base.arg.tensor);
    for (size_t i = 0; i < e->nargs; i++) {
        enum expr_kind k = e->args[i].value->kind;
        consumed += k != EXPR_ELLIPSIS && k != EXPR_NONE;
    }
    t = tr_expand(base.arg.tensor, tr_tensor_shape(base.arg.tensor), ndim); /* our own handle */
    rv_drop(&base);
    for (size_t i = 0; t && i < e->nargs; i++) {
        const struct expr *sub = e->args[i].value;
        int64_t a, b, c;
        next = NULL;
        if (sub->kind == EXPR_ELLIPSIS) {
            d += ndim - consumed;
            continue;
        }
        if (sub->kind == EXPR_NONE) {
            int64_t shape[TR_MAX_DIMS];
            int n = tr_tensor_ndim(t);
            memcpy(shape, tr_tensor_shape(t), (size_t)d * sizeof *shape);
            shape[d] = 1;
            memcpy(shape + d + 1, tr_tensor_shape(t) + d, (size_t)(n - d) * sizeof *shape);
            next = tr_reshape_view(t, shape, n + 1);
            d++;
        } else if (sub->kind == EXPR_SLICE) {
            s = subscript_int(in, sub->slice[0], &a);
            if (s == TR_OK)
                s = subscript_int(in, sub->slice[1], &b);
            if (s == TR_OK)
                s = subscript_int(in, sub->slice[2], &c);
            if (s == TR_OK)
                next = tr_slice(t, d, a, b, c == TR_SLICE_NONE ? 1 : c);
            d++;
        } else {
            s = subscript_int(in, sub, &a);
            if (s == TR_OK)
                next = tr_select(t, d, a);
        }
        tr_release(t);
        t = next;
        if (s != TR_OK)
            return s;
        if (!t)
            return fail(in, sub);
    }
    if (!t)
        return fail(in, e);
    *out = tensor(t, true);
    return TR_OK;
}

/* A constant list of n items, each a copy of items[first + i * by]. */
static tr_status constant_list(struct interp *in, const struct expr *e,
                               const struct tr_value *items, int64_t first, int64_t by,
                               int64_t n, struct rv *out)
{
    memset(out, 0, sizeof *out);
    out->items = calloc((size_t)(n ? n : 1), sizeof *out->items);
    out->item_args = calloc((size_t)(n ? n : 1), sizeof *out->item_args);
    if (!out->items || !out->item_args) {
        rv_drop(out);
        tr_set_error(TR_ERR_OOM, "out of memory making a list");
        return fail(in, e);
    }
    out->arg.value.kind = TR_VALUE_LIST;
    out->arg.value.known = out->arg.value.weak = true;
    out->arg.value.count = (size_t)n;
    out->arg.items = out->item_args;
    for (int64_t i = 0; i < n; i++) {
        out->items[i] = constant(items[first + i * by]);
        out->item_args[i] = out->items[i].arg;
    }
    return TR_OK;
}

/* x.shape, x.ndim, x.dtype or numel(x) of the tensor described by x. */
static tr_status attribute(struct interp *in, const struct expr *e, const char *attr,
                           struct tr_value x, struct rv *out)
{
    struct tr_value v, items[TR_MAX_DIMS];

    if (!fold_attribute(attr, &x, &v, items)) {
        tr_set_error(TR_ERR_STATE, "a tensor has no attribute '%s'", attr);
        return fail(in, e);
    }
    if (v.kind == TR_VALUE_LIST)
        return constant_list(in, e, items, 0, 1, (int64_t)v.count, out);
    *out = constant(v);
    return TR_OK;
}

/* list[i] or list[a:b:c] of a constant list (x.shape[0], x.shape[1:]). */
static tr_status index_list(struct interp *in, const struct expr *e, struct rv *base,
                            struct rv *out)
{
    const struct expr *sub = e->args[0].value;
    int64_t n = (int64_t)base->arg.value.count, bounds[3], first, by, count;
    struct tr_value items[TR_MAX_DIMS * 4];
    tr_status s = TR_OK;

    for (int k = 0; k < 3 && s == TR_OK; k++)
        s = subscript_int(in, sub->kind == EXPR_SLICE ? sub->slice[k] : k == 0 ? sub : NULL,
                          &bounds[k]);
    if (s == TR_OK && (size_t)n > sizeof items / sizeof *items) {
        tr_set_error(TR_ERR_INDEX, "the list is too long to index");
        s = fail(in, e);
    }
    for (int64_t i = 0; s == TR_OK && i < n; i++)
        items[i] = base->arg.items[i].value;
    if (s == TR_OK && sub->kind != EXPR_SLICE) {
        if (fold_list_index(n, bounds[0], &first) != FOLD_OK)
            s = fail(in, sub);
        else
            *out = constant(items[first]);
    } else if (s == TR_OK) {
        if (fold_list_slice(n, bounds[0], bounds[1], bounds[2], &first, &by, &count) != FOLD_OK)
            s = fail(in, sub);
        else
            s = constant_list(in, e, items, first, by, count, out);
    }
    rv_drop(base);
    return s;
}

/* x.T reverses every dimension; x.mT swaps the last two. */
static tr_status eval_attr(struct interp *in, const struct expr *e, struct rv *out)
{
    struct rv base;
    struct tr_tensor *t;
    int dims[TR_MAX_DIMS], n;
    tr_status s = eval(in, e->base, &base);

    if (s != TR_OK)
        return s;
    if (!base.arg.tensor) {
        rv_drop(&base);
        tr_set_error(TR_ERR_INVALID, "only a tensor has .T and .mT");
        return fail(in, e);
    }
    if (strcmp(e->v.name, "T") != 0 && strcmp(e->v.name, "mT") != 0) {
        s = attribute(in, e, e->v.name, base.arg.value, out);
        rv_drop(&base);
        return s;
    }
    n = tr_tensor_ndim(base.arg.tensor);
    for (int i = 0; i < n; i++)
        dims[i] = strcmp(e->v.name, "mT") == 0 ? i : n - 1 - i;
    if (strcmp(e->v.name, "mT") == 0 && n >= 2) {
        dims[n - 2] = n - 1;
        dims[n - 1] = n - 2;
    }
    t = tr_permute(base.arg.tensor, dims, n);
    rv_drop(&base);
    if (!t)
        return fail(in, e);
    *out = tensor(t, true);
    return TR_OK;
}

static tr_status eval(struct interp *in, const struct expr *e, struct rv *out)
{
    struct tr_value v;
    struct rv results[TR_OP_MAX_RESULTS];
    tr_status s;
    int n = 0;

    memset(&v, 0, sizeof v);
    switch (e->kind) {
    case EXPR_NAME:
        return eval_name(in, e, out);
    case EXPR_INT:
        v.kind = TR_VALUE_INT;
        v.integer = e->v.integer;
        break;
    case EXPR_FLOAT:
        v.kind = TR_VALUE_FLOAT;
        v.number = e->v.number;
        break;
    case EXPR_BOOL:
        v.kind = TR_VALUE_BOOL;
        v.boolean = e->v.boolean;
        break;
    case EXPR_STRING:
        v.kind = TR_VALUE_STRING;
        v.string = e->v.name;
        break;
    case EXPR_DTYPE:
        v.kind = TR_VALUE_DTYPE;
        v.dtype = e->v.dtype;
        break;
    case EXPR_NONE:
        break;
    case EXPR_LIST:
        return eval_list(in, e, out);
    case EXPR_INDEX:
        return eval_index(in, e, out);
    case EXPR_ATTR:
        return eval_attr(in, e, out);
    case EXPR_CALL:
        s = eval_call(in, e, NULL, results, &n);
        if (s != TR_OK)
            return s;
        for (int r = 1; r < n; r++)
            rv_drop(&results[r]);
        *out = results[0];
        return TR_OK;
    default:
        tr_set_error(TR_ERR_STATE, "this expression cannot be evaluated here");
        return fail(in, e);
    }
    *out = constant(v);
    return TR_OK;
}

/* ------------------------------------------------------------ statements */

tr_status interp_statement(struct env *env, const struct statement *st, int stage,
                           const struct tr_dest *dest, const struct expr **at)
{
    struct interp in = {.env = env};
    struct rv results[TR_OP_MAX_RESULTS];
    tr_status s;
    int n = 1;

    memset(results, 0, sizeof results);
    if (st->value->kind == EXPR_CALL)
        s = eval_call(&in, st->value, dest, results, &n);
    else
        s = eval(&in, st->value, &results[0]);
    if (s == TR_OK && (size_t)n != st->ntargets) {
        tr_set_error(TR_ERR_STATE, "%zu names for %d values", st->ntargets, n);
        s = fail(&in, st->value);
    }
    for (size_t t = 0; s == TR_OK && t < st->ntargets; t++) {
        struct tr_arg arg = results[t].arg;
        /* a name's tensor stays its own: the target gets a new handle */
        if (arg.tensor && !results[t].temp) {
            arg.tensor = tr_expand(arg.tensor, tr_tensor_shape(arg.tensor),
                                   tr_tensor_ndim(arg.tensor));
            if (!arg.tensor)
                s = fail(&in, st->value);
        }
        if (s == TR_OK) {
            results[t].temp = false; /* the environment's now */
            if (!env_bind(env, st->targets[t], &arg, stage))
                s = fail(&in, st->value);
        }
    }
    for (int r = 0; r < n; r++)
        rv_drop(&results[r]);
    *at = in.at ? in.at : st->value;
    return s;
}

/* ------------------------------------------------------------ reads */

static void expr_reads(const struct expr *e, void (*fn)(const char *, void *), void *ctx)
{
    if (!e)
        return;
    if (e->kind == EXPR_NAME)
        fn(e->v.name, ctx);
    for (size_t i = 0; i < e->nargs; i++)
        expr_reads(e->args[i].value, fn, ctx);
    expr_reads(e->base, fn, ctx);
    if (e->kind == EXPR_SLICE)
        for (int k = 0; k < 3; k++)
            expr_reads(e->slice[k], fn, ctx);
}

void interp_reads(const struct statement *st, void (*fn)(const char *name, void *ctx), void *ctx)
{
    expr_reads(st->value, fn, ctx);
}
