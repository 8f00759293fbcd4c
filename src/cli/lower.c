/*
 * lower.c - the one evaluation of the statement trees: names resolved,
 * every value typed from the inputs' headers and the op table, constants
 * folded exactly, and each computation emitted as an instruction of the
 * program (program.h).  Every error goes to the diagnostics with its
 * place; a statement that fails binds its targets as "poisoned", so that
 * one mistake is reported once, not again at every use.
 */
#include "config.h"

#include "lower.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fold.h"
#include "last_block.h"

struct eval {
    struct plan *plan;
    struct program *prog;
    struct diag_list *d;
    int stage;
    struct tr_device device;
    bool in_foreach;          /* its stage cuts values into blocks */
    uint32_t builtins[3];     /* chunk_start, chunk_index, chunk_count, once read */
    size_t visible;           /* names bound before this statement */
    const struct statement *st;
    int statement;            /* its index in the stage */
};

/* What an expression gave: an operand (a constant, a value, or a list
 * holding values), whether it depends on the foreach block, and whether
 * an error stopped it (already reported). */
struct result {
    struct operand o;
    bool depends;
    bool failed;
};

static struct result failed(void)
{
    struct result r;

    memset(&r, 0, sizeof r);
    r.failed = true;
    return r;
}

static struct result constant(struct tr_value v)
{
    struct result r;

    memset(&r, 0, sizeof r);
    r.o.kind = OPERAND_CONST;
    r.o.meta = v;
    r.o.meta.known = true;
    r.o.meta.weak = true;
    return r;
}

static struct result value_result(const struct program *prog, uint32_t id, bool depends)
{
    struct result r;

    memset(&r, 0, sizeof r);
    r.o.kind = OPERAND_VALUE;
    r.o.value = id;
    r.o.meta = prog->values[id].meta;
    r.depends = depends;
    return r;
}

/* A value made by the statement being lowered; VALUE_NONE when out of memory. */
static uint32_t new_value(struct eval *ev, const struct tr_value *meta, const struct expr *e,
                          enum value_origin origin, bool depends)
{
    struct value v;

    memset(&v, 0, sizeof v);
    v.meta = *meta;
    v.origin = origin;
    v.line = e ? e->line : ev->st->line;
    v.col = e ? e->col : ev->st->col;
    v.stage = ev->stage;
    v.def = ev->prog->ninstrs - 1; /* the instruction just emitted */
    v.depends = depends;
    return program_add_value(ev->prog, &v);
}

static struct instr *new_instr(struct eval *ev, enum instr_kind kind, const struct expr *e)
{
    struct instr *in = program_add_instr(ev->prog, ev->stage, kind);

    if (in) {
        in->line = e->line;
        in->col = e->col;
        in->statement = ev->statement;
    }
    return in;
}

static struct result eval(struct eval *ev, const struct expr *e);

/* x.shape, x.ndim, x.dtype or numel(x) (at e) of the tensor r: a constant. */
static struct result attribute(struct eval *ev, const char *attr, struct result r,
                               const struct expr *e)
{
    struct tr_value *items = program_alloc(ev->prog, TR_MAX_DIMS * sizeof *items);
    struct tr_value tensor = r.o.meta, v;
    bool depends = r.depends;

    if (!items || !fold_attribute(attr, &tensor, &v, items)) {
        diag_error(ev->d, e->line, e->col, NULL, "%s", items ? tr_last_error() : "out of memory");
        return failed();
    }
    r = constant(v);
    r.depends = depends; /* x.shape[0] of a foreach block */
    return r;
}

static const char *const builtin_names[3] = {"chunk_start", "chunk_index", "chunk_count"};

static int builtin_index(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, builtin_names[i]) == 0)
            return i;
    return -1;
}

static struct result eval_name(struct eval *ev, const struct expr *e)
{
    struct plan_value *v = plan_find(ev->plan, e->v.name, ev->visible);
    int builtin = v ? -1 : builtin_index(e->v.name);

    if (builtin >= 0) {
        if (!ev->in_foreach && ev->plan->pipeline->stages[ev->stage].foreach_broken)
            return failed(); /* the foreach's own error is the one to read */
        if (!ev->in_foreach) {
            diag_error(ev->d, e->line, e->col, "use it in a stage with foreach: {over: ..., size: ...}",
                       "'%s' is defined only inside a foreach stage", e->v.name);
            return failed();
        }
        if (ev->builtins[builtin] == VALUE_NONE) {
            struct tr_value meta = {.kind = TR_VALUE_INT}; /* known only as each block runs */
            struct value b;
            memset(&b, 0, sizeof b);
            b.meta = meta;
            b.origin = ORIGIN_BUILTIN;
            b.name = builtin_names[builtin];
            b.stage = ev->stage;
            b.depends = true;
            ev->builtins[builtin] = program_add_value(ev->prog, &b);
            if (ev->builtins[builtin] == VALUE_NONE)
                return failed();
        }
        return value_result(ev->prog, ev->builtins[builtin], true);
    }
    if (!v) {
        char hint[512];
        diag_error(ev->d, e->line, e->col, plan_unbound_hint(ev->plan, e->v.name, hint, sizeof hint),
                   "'%s' is used before anything binds it", e->v.name);
        return failed();
    }
    if (v->poisoned)
        return failed();
    if (v->unsupported) {
        diag_error(ev->d, e->line, e->col, "convert the file, or pick another tensor",
                   "input '%s' has dtype %s, which tensorrun cannot compute with", v->name,
                   v->unsupported_dtype);
        v->poisoned = true;
        return failed();
    }
    if (v->depends_on_block && v->stage != ev->stage &&
        (v->meta.kind != TR_VALUE_TENSOR || v->meta.ndim == 0)) {
        diag_error(ev->d, e->line, e->col,
                   "give it a dimension in its stage, e.g. with unsqueeze(x, 0), so that the "
                   "blocks' values are joined",
                   "'%s' is made from each foreach block of stage '%s' and has no dimension to "
                   "join the blocks along", v->name, ev->plan->stages[v->stage].stage->name);
        v->poisoned = true;
        return failed();
    }
    /* a value of an earlier foreach stage is its blocks' joined whole here */
    if (v->meta.kind != TR_VALUE_TENSOR) {
        struct result r = constant(v->meta);
        r.o.meta.weak = v->meta.weak;
        r.depends = v->depends_on_block && v->stage == ev->stage;
        return r;
    }
    if (v->depends_on_block && v->stage != ev->stage) {
        struct result r = value_result(ev->prog, v->value, false);
        r.o.meta = v->meta; /* the blocks' joined whole */
        return r;
    }
    return value_result(ev->prog, v->value, v->depends_on_block);
}

static struct result eval_list(struct eval *ev, const struct expr *e)
{
    size_t n = e->nargs ? e->nargs : 1;
    struct tr_value *items = program_alloc(ev->prog, n * sizeof *items);
    struct operand *ops = program_alloc(ev->prog, n * sizeof *ops);
    bool all_constant = true;
    struct result r;

    memset(&r, 0, sizeof r);
    if (!items || !ops)
        return failed();
    for (size_t i = 0; i < e->nargs; i++) {
        struct result item = eval(ev, e->args[i].value);
        if (item.failed)
            return failed();
        items[i] = item.o.meta;
        ops[i] = item.o;
        all_constant = all_constant && item.o.kind == OPERAND_CONST;
        r.depends = r.depends || item.depends;
    }
    r.o.kind = all_constant ? OPERAND_CONST : OPERAND_LIST;
    r.o.meta.kind = TR_VALUE_LIST;
    r.o.meta.count = e->nargs;
    r.o.meta.items = items;
    r.o.meta.known = true;
    if (!all_constant) {
        r.o.count = e->nargs;
        r.o.items = ops;
    }
    return r;
}

/* The position of the expression an argument error concerns: the
 * argument of a named call, the operator of an operation written as one
 * (a @ b points at the @). */
static const struct expr *arg_expr(const struct expr *call, const struct tr_op_info *op, int index,
                                   const int *from)
{
    if (call->from_operator || index < 0 || index >= op->nparams || from[index] < 0)
        return call;
    return call->args[from[index]].value;
}

/* NumPy's keywords, where they mean the same as ours. */
static const char *keyword_alias(const char *keyword)
{
    if (strcmp(keyword, "axis") == 0)
        return "dim";
    if (strcmp(keyword, "keepdims") == 0)
        return "keepdim";
    return keyword;
}

/* The parameter a keyword nothing has was meant for: NumPy's ddof and
 * PyTorch's unbiased are our correction; else the closest name. */
static const char *keyword_meant(const char *keyword, const char *const *params)
{
    const char *names[2 * TR_OP_MAX_PARAMS + 1];
    size_t n = 0;

    for (size_t i = 0; params[i]; i++) {
        if (strcmp(params[i], "correction") == 0 &&
            (strcmp(keyword, "ddof") == 0 || strcmp(keyword, "unbiased") == 0))
            return params[i];
        names[n++] = params[i];
        if (strcmp(params[i], "dim") == 0)
            names[n++] = "axis";
        else if (strcmp(params[i], "keepdim") == 0)
            names[n++] = "keepdims";
    }
    names[n] = NULL;
    return diag_suggest(keyword, names);
}

/* Binds e's arguments to op's parameters: from[i] is the argument of
 * parameter i, or -1.  A last parameter of kind tensors reached by
 * position takes the positional arguments from there on as its list
 * (einsum('ij,jk', a, b), as PyTorch spells it), unless it is given one
 * list written as such (einsum('ij,jk', [a, b])): *gathered is how many
 * it took, else 0. */
static bool bind_call(const struct expr *e, const struct tr_op_info *op, int *from,
                      int *gathered, struct diag_list *d)
{
    bool given[TR_OP_MAX_PARAMS] = {false}, broken = false;
    int positional = 0, last = op->nparams - 1;
    char hint[512];

    *gathered = 0;
    for (int i = 0; i < TR_OP_MAX_PARAMS; i++)
        from[i] = -1;
    for (size_t a = 0; a < e->nargs; a++) {
        const struct expr_arg *arg = &e->args[a];
        int p = -1;
        if (!arg->keyword && last >= 0 && op->params[last].kind == TR_PARAM_TENSORS &&
            positional >= last) {
            /* positional arguments come first: these run to the keywords */
            size_t end = a;
            while (end < e->nargs && !e->args[end].keyword)
                end++;
            positional += (int)(end - a);
            if (end - a > 1 || arg->value->kind != EXPR_LIST)
                *gathered = (int)(end - a);
            given[last] = true;
            from[last] = (int)a;
            a = end - 1;
            continue;
        }
        if (!arg->keyword) {
            p = positional++;
            if (p >= op->nparams) {
                diag_error(d, arg->line, arg->col, op->signature,
                           "%s takes at most %d argument%s, not %zu", op->name, op->nparams,
                           op->nparams == 1 ? "" : "s", e->nargs);
                broken = true;
                break;
            }
        } else {
            const char *params[TR_OP_MAX_PARAMS + 1], *keyword = keyword_alias(arg->keyword);
            for (int i = 0; i < op->nparams; i++) {
                params[i] = op->params[i].name;
                if (strcmp(params[i], keyword) == 0)
                    p = i;
            }
            params[op->nparams] = NULL;
            if (p < 0) {
                const char *guess = keyword_meant(arg->keyword, params);
                snprintf(hint, sizeof hint, "%s", op->signature);
                if (guess)
                    diag_error(d, arg->line, arg->col, hint,
                               "%s has no parameter '%s' (did you mean '%s'?)", op->name,
                               arg->keyword, guess);
                else
                    diag_error(d, arg->line, arg->col, hint, "%s has no parameter '%s'",
                               op->name, arg->keyword);
                broken = true;
                continue;
            }
            if (given[p]) {
                diag_error(d, arg->line, arg->col, op->signature,
                           "%s: argument '%s' is given twice", op->name, arg->keyword);
                broken = true;
                continue;
            }
        }
        given[p] = true;
        from[p] = (int)a;
    }
    for (int i = 0; i < op->nparams && !broken; i++) {
        if (!given[i] && op->params[i].required) {
            diag_error(d, e->line, e->col, op->signature, "%s: missing argument '%s'",
                       op->name, op->params[i].name);
            broken = true;
        }
    }
    return !broken;
}

/* Emits op with its arguments as one instruction; its results are new
 * values typed as out[] says. */
static bool emit_op(struct eval *ev, const struct expr *e, const struct tr_op_info *op,
                    const struct result *args, const struct tr_value *out, bool depends,
                    struct result *results)
{
    struct instr *in = new_instr(ev, INSTR_OP, e);
    struct tr_value metas[TR_OP_MAX_PARAMS], laid[TR_OP_MAX_RESULTS];

    if (!in)
        return false;
    in->op = op;
    in->nargs = op->nparams;
    for (int i = 0; i < op->nparams; i++) {
        in->args[i] = args[i].o;
        metas[i] = args[i].o.meta;
    }
    in->nresults = op->nresults;
    memcpy(laid, out, (size_t)op->nresults * sizeof *laid);
    /* how the results lie in memory, which the memory pass reads; an op
     * without a kernel yet is refused before it runs */
    if (tr_op_layout(op, metas, laid) != TR_OK)
        tr_clear_error();
    for (int i = 0; i < op->nresults; i++) {
        struct tr_value meta = laid[i];
        uint32_t id;
        /* a weak result (exp(1.0)) is made where the numbers are: the CPU */
        if (meta.kind == TR_VALUE_TENSOR && !meta.weak && op->id != TR_OP_TO)
            meta.device = ev->device;
        id = new_value(ev, &meta, e, ORIGIN_RESULT, depends);
        if (id == VALUE_NONE)
            return false;
        in->results[i] = id;
        results[i] = value_result(ev->prog, id, depends);
    }
    return true;
}

/* A hint for an argument that tr_op_infer refused (bad), where a common
 * mistake has a known way out; NULL otherwise. */
static const char *infer_hint(const struct tr_op_info *op, const struct tr_value *args, int bad)
{
    if (op->id == TR_OP_REPEAT_INTERLEAVE && bad == 1 && args[1].kind == TR_VALUE_TENSOR)
        return "repeats must be one integer constant: with a tensor of counts the result's "
               "shape would be known only after computing, and every shape is known before";
    if (op->id == TR_OP_ONE_HOT && bad == 1 && args[1].kind == TR_VALUE_INT &&
        args[1].integer < 1)
        return "give the number of classes, as in one_hot(x, 10): it is the result's last "
               "dimension, which must be known before computing (PyTorch's -1, the largest "
               "value plus one, is known only after)";
    return NULL;
}

/* split and chunk: one narrow view of x for each piece, when the pieces
 * are at most cap; *n says how many there are (the caller refuses a count
 * that is not its names'). */
static bool eval_pieces(struct eval *ev, const struct expr *e, const struct tr_op_info *op,
                        const struct result *args, const struct tr_value *metas, const int *from,
                        bool depends, struct result *results, size_t cap, int *n)
{
    const struct tr_op_info *narrow = tr_op_get(TR_OP_NARROW);
    int64_t *starts = program_alloc(ev->prog, cap * sizeof *starts);
    int64_t *lengths = program_alloc(ev->prog, cap * sizeof *lengths);
    size_t count;
    int bad = -1;

    if (!starts || !lengths) {
        diag_error(ev->d, e->line, e->col, NULL, "out of memory");
        return false;
    }
    if (tr_op_pieces(op, metas, starts, lengths, cap, &count, &bad) != TR_OK) {
        const struct expr *at = arg_expr(e, op, bad, from);
        diag_error(ev->d, at->line, at->col, NULL, "%s", tr_last_error());
        return false;
    }
    *n = count > INT_MAX ? INT_MAX : (int)count;
    for (size_t i = 0; count <= cap && i < count; i++) {
        struct result piece[4] = {args[0], args[2]};
        struct tr_value pmetas[4], out;
        piece[2] = constant((struct tr_value){.kind = TR_VALUE_INT, .known = true,
                                              .integer = starts[i]});
        piece[3] = constant((struct tr_value){.kind = TR_VALUE_INT, .known = true,
                                              .integer = lengths[i]});
        for (int k = 0; k < 4; k++)
            pmetas[k] = piece[k].o.meta;
        if (tr_op_infer(narrow, pmetas, &out, &bad) != TR_OK) {
            diag_error(ev->d, e->line, e->col, NULL, "%s", tr_last_error());
            return false;
        }
        if (!emit_op(ev, e, narrow, piece, &out, depends, &results[i])) {
            diag_error(ev->d, e->line, e->col, NULL, "out of memory");
            return false;
        }
    }
    return true;
}

/* Lowers a call into its results (cap at most); *n says how many. */
static bool eval_call(struct eval *ev, const struct expr *e, struct result *results, size_t cap,
                      int *n)
{
    const struct tr_op_info *op = tr_op_find(e->op);
    struct result args[TR_OP_MAX_PARAMS];
    struct tr_value metas[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS];
    int from[TR_OP_MAX_PARAMS], bad = -1, gathered;
    bool depends = false, broken;

    if (!op && strcmp(e->op, "numel") == 0 && e->nargs == 1 && !e->args[0].keyword) {
        struct result x = eval(ev, e->args[0].value);
        if (x.failed)
            return false;
        if (x.o.meta.kind != TR_VALUE_TENSOR) {
            diag_error(ev->d, e->line, e->col, NULL, "numel takes a tensor");
            return false;
        }
        *n = 1;
        results[0] = attribute(ev, "numel", x, e);
        return !results[0].failed;
    }
    if (!op) {
        const char *names[160], *alias;
        size_t k = 0;
        for (size_t i = 0; i < tr_op_count() && k < 150; i++)
            names[k++] = tr_op_at(i)->name;
        for (size_t i = 0; (alias = tr_op_alias_at(i, NULL)) && k < 159; i++)
            names[k++] = alias;
        names[k] = NULL;
        const char *guess = diag_suggest(e->op, names);
        char message[160];
        snprintf(message, sizeof message, "unknown op '%s'", e->op);
        if (guess)
            diag_error(ev->d, e->line, e->col, "see 'tensorrun ops' for every op",
                       "%s (did you mean '%s'?)", message, guess);
        else
            diag_error(ev->d, e->line, e->col, "see 'tensorrun ops' for every op", "%s", message);
        return false;
    }
    broken = !bind_call(e, op, from, &gathered, ev->d);
    /* lower the arguments, reporting each one's errors */
    for (int i = 0; i < op->nparams; i++) {
        if (from[i] < 0) {
            args[i] = constant(op->params[i].default_value);
        } else if (i == op->nparams - 1 && gathered) {
            struct expr list = *e->args[from[i]].value;
            list.kind = EXPR_LIST;
            list.args = &e->args[from[i]];
            list.nargs = (size_t)gathered;
            args[i] = eval_list(ev, &list);
            if (args[i].failed)
                broken = true;
            depends = depends || args[i].depends;
        } else {
            args[i] = eval(ev, e->args[from[i]].value);
            if (args[i].failed)
                broken = true;
            depends = depends || args[i].depends;
        }
        metas[i] = args[i].o.meta;
    }
    if (!broken && (op->id == TR_OP_MAX || op->id == TR_OP_MIN) && from[1] >= 0 &&
        !e->args[from[1]].keyword && metas[1].kind == TR_VALUE_TENSOR) {
        const struct expr *at = e->args[from[1]].value;
        bool max = op->id == TR_OP_MAX;
        diag_error(ev->d, at->line, at->col,
                   max ? "the larger of two tensors is maximum(x, y)"
                       : "the smaller of two tensors is minimum(x, y)",
                   "%s(x, dim) reduces x along dim; its second argument is not a tensor "
                   "(did you mean '%s'?)",
                   op->name, max ? "maximum" : "minimum");
        broken = true;
    }
    if (broken)
        return false;
    if (op->nresults == 0)
        return eval_pieces(ev, e, op, args, metas, from, depends, results, cap, n);
    switch (fold_constants(op->name, metas, op->nparams, &out[0])) {
    case FOLD_OK:
        *n = 1;
        results[0] = constant(out[0]);
        results[0].o.meta = out[0];
        results[0].depends = depends;
        return true;
    case FOLD_ERROR:
        diag_error(ev->d, e->line, e->col, NULL, "%s", tr_last_error());
        return false;
    case FOLD_NO:
        break;
    }
    if (tr_op_infer(op, metas, out, &bad) != TR_OK) {
        const struct expr *at = arg_expr(e, op, bad, from);
        diag_error(ev->d, at->line, at->col, infer_hint(op, metas, bad), "%s", tr_last_error());
        return false;
    }
    *n = op->nresults;
    if (!emit_op(ev, e, op, args, out, depends, results)) {
        diag_error(ev->d, e->line, e->col, NULL, "out of memory");
        return false;
    }
    return true;
}

/* list[i] or list[a:b:c] of a constant list (x.shape[0], x.shape[1:]). */
static struct result index_list(struct eval *ev, const struct expr *e, struct result base)
{
    const struct expr *s = e->nargs == 1 ? e->args[0].value : NULL;
    int64_t n = (int64_t)base.o.meta.count, bounds[3] = {TR_SLICE_NONE, TR_SLICE_NONE, TR_SLICE_NONE};
    int64_t first = 0, by = 1, count = 0;
    struct tr_value *items;
    struct result r;

    if (!s || s->kind == EXPR_ELLIPSIS || s->kind == EXPR_NONE) {
        diag_error(ev->d, e->line, e->col, NULL,
                   "a list takes one index or one slice, as in x.shape[0] or x.shape[1:]");
        return failed();
    }
    for (int k = 0; k < 3; k++) {
        const struct expr *part = s->kind == EXPR_SLICE ? s->slice[k] : k == 0 ? s : NULL;
        struct result p;
        if (!part)
            continue;
        p = eval(ev, part);
        if (p.failed)
            return failed();
        if (p.o.meta.kind == TR_VALUE_NONE)
            continue;
        if (p.o.meta.kind != TR_VALUE_INT || !p.o.meta.known) {
            diag_error(ev->d, part->line, part->col, NULL,
                       "a list's index must be an integer constant");
            return failed();
        }
        bounds[k] = p.o.meta.integer;
    }
    r = base;
    if (s->kind != EXPR_SLICE) {
        if (fold_list_index(n, bounds[0], &first) != FOLD_OK) {
            diag_error(ev->d, s->line, s->col, NULL, "%s", tr_last_error());
            return failed();
        }
        r.o.meta = base.o.meta.items[first];
        return r;
    }
    if (fold_list_slice(n, bounds[0], bounds[1], bounds[2], &first, &by, &count) != FOLD_OK) {
        diag_error(ev->d, s->line, s->col, NULL, "%s", tr_last_error());
        return failed();
    }
    items = program_alloc(ev->prog, (size_t)(count ? count : 1) * sizeof *items);
    if (!items)
        return failed();
    for (int64_t i = 0; i < count; i++)
        items[i] = base.o.meta.items[first + i * by];
    r.o.meta.items = items;
    r.o.meta.count = (size_t)count;
    return r;
}

/* One subscript's integer part (an index, a slice bound), p evaluated
 * from s: its operand and its description for tr_infer_index. */
static bool subscript_checked(struct eval *ev, const struct expr *s, struct result p, bool bound,
                              struct operand *o)
{
    if (p.failed)
        return false;
    if (p.o.meta.kind != TR_VALUE_INT && (!bound || p.o.meta.kind != TR_VALUE_NONE)) {
        if (bound && p.o.meta.kind == TR_VALUE_TENSOR)
            diag_error(ev->d, s->line, s->col, NULL,
                       "slice bounds must be constants, not values computed as the stage runs");
        else if (bound)
            diag_error(ev->d, s->line, s->col, NULL, "a slice bound must be an integer");
        else
            diag_error(ev->d, s->line, s->col,
                       p.o.meta.kind == TR_VALUE_TENSOR
                           ? "a tensor index is the only subscript (x[idx]); or use "
                             "index_select or gather"
                           : NULL,
                       "an index must be an integer, a slice, '...' or None");
        return false;
    }
    *o = p.o;
    return true;
}

static bool subscript_part(struct eval *ev, const struct expr *s, bool bound, struct operand *o)
{
    return subscript_checked(ev, s, eval(ev, s), bound, o);
}

/* x[idx] with a tensor idx: index_select(x, 0, idx) for a 1-d integer
 * idx.  A boolean mask is refused: its result's shape would be known only
 * after computing. */
static struct result tensor_index(struct eval *ev, const struct expr *e, struct result base,
                                  struct result idx)
{
    const struct tr_op_info *op = tr_op_get(TR_OP_INDEX_SELECT);
    const struct expr *at = e->args[0].value;
    struct result args[3], r;
    struct tr_value metas[3], out;
    int bad = -1;

    if (idx.o.meta.dtype == TR_DTYPE_BOOL) {
        diag_error(ev->d, at->line, at->col,
                   "every shape is known before computing; keep the shape with where(mask, x, 0)",
                   "a boolean mask cannot index: the result's shape would depend on the values");
        return failed();
    }
    if (!tr_dtype_is_integer(idx.o.meta.dtype) || idx.o.meta.ndim != 1) {
        diag_error(ev->d, at->line, at->col,
                   idx.o.meta.ndim == 0 ? "a single index is an integer constant: x[3]" : NULL,
                   "a tensor index must be 1-d and of integers, not %s with %d dimension%s",
                   tr_dtype_name(idx.o.meta.dtype), idx.o.meta.ndim,
                   idx.o.meta.ndim == 1 ? "" : "s");
        return failed();
    }
    if (base.o.meta.kind != TR_VALUE_TENSOR) {
        diag_error(ev->d, e->line, e->col, NULL, "only a tensor can be indexed");
        return failed();
    }
    args[0] = base;
    args[1] = constant((struct tr_value){.kind = TR_VALUE_INT, .known = true, .integer = 0});
    args[2] = idx;
    for (int i = 0; i < 3; i++)
        metas[i] = args[i].o.meta;
    if (tr_op_infer(op, metas, &out, &bad) != TR_OK) {
        diag_error(ev->d, (bad == 2 ? at : e)->line, (bad == 2 ? at : e)->col, NULL, "%s",
                   tr_last_error());
        return failed();
    }
    if (!emit_op(ev, e, op, args, &out, base.depends || idx.depends, &r)) {
        diag_error(ev->d, e->line, e->col, NULL, "out of memory");
        return failed();
    }
    return r;
}

static struct result eval_index(struct eval *ev, const struct expr *e)
{
    struct result base = eval(ev, e->base), r;
    size_t n = e->nargs ? e->nargs : 1;
    struct tr_value *subs = program_alloc(ev->prog, n * sizeof *subs);
    struct subscript *parts = program_alloc(ev->prog, n * sizeof *parts);
    struct tr_value meta;
    struct instr *in;
    uint32_t id;
    int bad = -1;

    if (base.failed || !subs || !parts)
        return failed();
    if (base.o.kind == OPERAND_CONST && base.o.meta.kind == TR_VALUE_LIST)
        return index_list(ev, e, base);
    for (size_t i = 0; i < e->nargs; i++) {
        const struct expr *s = e->args[i].value;
        struct subscript *sub = &parts[i];
        for (int k = 0; k < 3; k++)
            sub->part[k] = constant((struct tr_value){.kind = TR_VALUE_NONE}).o;
        if (s->kind == EXPR_ELLIPSIS) {
            sub->kind = SUB_ELLIPSIS;
            subs[i].kind = TR_VALUE_STRING;
            subs[i].string = "...";
        } else if (s->kind == EXPR_NONE) {
            sub->kind = SUB_NEWAXIS;
            subs[i].kind = TR_VALUE_NONE;
        } else if (s->kind == EXPR_SLICE) {
            struct tr_value *bounds = program_alloc(ev->prog, 3 * sizeof *bounds);
            if (!bounds)
                return failed();
            sub->kind = SUB_SLICE;
            for (int k = 0; k < 3; k++) {
                if (s->slice[k] && !subscript_part(ev, s->slice[k], true, &sub->part[k]))
                    return failed();
                bounds[k] = sub->part[k].meta;
            }
            subs[i].kind = TR_VALUE_LIST;
            subs[i].count = 3;
            subs[i].items = bounds;
        } else {
            struct result p = eval(ev, s);
            if (!p.failed && p.o.meta.kind == TR_VALUE_TENSOR && e->nargs == 1)
                return tensor_index(ev, e, base, p);
            sub->kind = SUB_INDEX;
            if (!subscript_checked(ev, s, p, false, &sub->part[0]))
                return failed();
            subs[i] = sub->part[0].meta;
        }
    }
    if (base.o.meta.kind != TR_VALUE_TENSOR) {
        diag_error(ev->d, e->line, e->col, NULL, "only a tensor can be indexed");
        return failed();
    }
    if (tr_infer_index(&base.o.meta, subs, e->nargs, &meta, &bad) != TR_OK) {
        const struct expr *at = bad >= 0 && (size_t)bad < e->nargs ? e->args[bad].value : e;
        diag_error(ev->d, at->line, at->col, NULL, "%s", tr_last_error());
        return failed();
    }
    if (tr_index_layout(&base.o.meta, subs, e->nargs, &meta) != TR_OK) {
        diag_error(ev->d, e->line, e->col, NULL, "%s", tr_last_error());
        return failed();
    }
    /* x0[chunk_index] is made from the block as much as the block itself */
    for (size_t i = 0; i < e->nargs; i++)
        for (int k = 0; k < 3; k++)
            if (parts[i].part[k].kind == OPERAND_VALUE &&
                ev->prog->values[parts[i].part[k].value].depends)
                base.depends = true;
    in = new_instr(ev, INSTR_INDEX, e);
    id = in ? new_value(ev, &meta, e, ORIGIN_RESULT, base.depends) : VALUE_NONE;
    if (id == VALUE_NONE)
        return failed();
    in = &ev->prog->instrs[ev->prog->ninstrs - 1];
    in->nargs = 1;
    in->args[0] = base.o;
    in->subs = parts;
    in->nsubs = e->nargs;
    in->nresults = 1;
    in->results[0] = id;
    r = value_result(ev->prog, id, base.depends);
    return r;
}

/* x.T (every dimension reversed) and x.mT (the last two swapped), as the
 * permute they are. */
static struct result eval_transpose(struct eval *ev, const struct expr *e, struct result x)
{
    bool last_two = strcmp(e->v.name, "mT") == 0;
    const struct tr_op_info *op = tr_op_get(TR_OP_PERMUTE);
    struct tr_value *dims = program_alloc(ev->prog, TR_MAX_DIMS * sizeof *dims), out;
    struct result args[2], r;
    int n = x.o.meta.ndim;

    if (!dims || tr_infer_transpose_all(&x.o.meta, last_two, &out) != TR_OK) {
        diag_error(ev->d, e->line, e->col, NULL, "%s", tr_last_error());
        return failed();
    }
    for (int i = 0; i < n; i++) {
        dims[i].kind = TR_VALUE_INT;
        dims[i].known = dims[i].weak = true;
        dims[i].integer = last_two ? i : n - 1 - i;
    }
    if (last_two && n >= 2) {
        dims[n - 2].integer = n - 1;
        dims[n - 1].integer = n - 2;
    }
    args[0] = x;
    args[1] = constant((struct tr_value){.kind = TR_VALUE_LIST, .count = (size_t)n, .items = dims});
    if (!emit_op(ev, e, op, args, &out, x.depends, &r))
        return failed();
    return r;
}

static struct result eval(struct eval *ev, const struct expr *e)
{
    struct tr_value v;
    struct result results[TR_OP_MAX_RESULTS], r;
    int n = 0;

    memset(&v, 0, sizeof v);
    switch (e->kind) {
    case EXPR_NAME:
        return eval_name(ev, e);
    case EXPR_INT:
        v.kind = TR_VALUE_INT;
        v.integer = e->v.integer;
        return constant(v);
    case EXPR_FLOAT:
        v.kind = TR_VALUE_FLOAT;
        v.number = e->v.number;
        return constant(v);
    case EXPR_BOOL:
        v.kind = TR_VALUE_BOOL;
        v.boolean = e->v.boolean;
        return constant(v);
    case EXPR_STRING:
        v.kind = TR_VALUE_STRING;
        v.string = e->v.name;
        return constant(v);
    case EXPR_DTYPE:
        v.kind = TR_VALUE_DTYPE;
        v.dtype = e->v.dtype;
        return constant(v);
    case EXPR_NONE:
        return constant(v);
    case EXPR_LIST:
        return eval_list(ev, e);
    case EXPR_INDEX:
        return eval_index(ev, e);
    case EXPR_ATTR:
        r = eval(ev, e->base);
        if (r.failed)
            return r;
        if (r.o.meta.kind == TR_VALUE_TENSOR && strcmp(e->v.name, "T") != 0 &&
            strcmp(e->v.name, "mT") != 0)
            return attribute(ev, e->v.name, r, e);
        if (r.o.meta.kind != TR_VALUE_TENSOR) {
            diag_error(ev->d, e->line, e->col, NULL,
                       "only a tensor has .T, .mT, .shape, .ndim and .dtype");
            return failed();
        }
        return eval_transpose(ev, e, r);
    case EXPR_CALL:
        if (!eval_call(ev, e, results, TR_OP_MAX_RESULTS, &n))
            return failed();
        if (n != 1) {
            diag_error(ev->d, e->line, e->col,
                       n == 2 ? "assign both, as in 'v, i = topk(x, k)'"
                              : "assign each to a name, as in 'a, b, c = chunk(x, 3)'",
                       "%s gives %d values, so it cannot be part of an expression", e->op, n);
            return failed();
        }
        return results[0];
    default:
        diag_error(ev->d, e->line, e->col, NULL, "this belongs inside [ ]");
        return failed();
    }
}

/* ------------------------------------------------------------ stages */

/* Binds a statement's target to what it gave: the value itself (named
 * after the target when it is a temporary), or a new constant value. */
static uint32_t bind_target(struct eval *ev, const char *name, const struct result *r, int line,
                            int col)
{
    struct value v;

    if (r->o.kind == OPERAND_VALUE) {
        struct value *made = &ev->prog->values[r->o.value];
        if (!made->name)
            made->name = name;
        return r->o.value;
    }
    memset(&v, 0, sizeof v);
    v.meta = r->o.meta;
    v.origin = ORIGIN_CONSTANT;
    v.name = name;
    v.line = line;
    v.col = col;
    v.stage = ev->stage;
    v.depends = r->depends;
    return program_add_value(ev->prog, &v);
}

/* Binds the name of a value foreach cuts (the plan value over) to its
 * block, block_rows long, as the i-th of the stage's blocks. */
static void bind_block(struct plan *plan, int index, size_t i, const struct plan_value *over,
                       int64_t block_rows)
{
    const struct name_at *at = &plan->pipeline->stages[index].foreach_over[i];
    struct tr_value meta = over->meta;
    uint32_t over_value = over->value;
    const char *name = over->name;
    struct plan_value *block = plan_bind(plan, name, index, at->line, at->col);
    struct value b;

    if (!block)
        return;
    memset(&b, 0, sizeof b);
    block->meta = meta;
    block->meta.shape[0] = block_rows;
    block->depends_on_block = true;
    b.meta = block->meta;
    b.origin = ORIGIN_BUILTIN; /* each block of over, as the block runs */
    b.name = name;
    b.line = at->line;
    b.col = at->col;
    b.stage = index;
    b.depends = true;
    block->value = program_add_value(plan->program, &b);
    plan->program->stages[index].over[i] = over_value;
    plan->program->stages[index].block[i] = block->value;
}

/* Lowers a stage's statements once, binding their targets; block_rows is
 * the foreach block's length (0: no foreach) and over the plan values it
 * cuts (found before the stage's first typing, which may bind their names
 * again). */
static void lower_statements(struct plan *plan, int index, struct diag_list *d, int64_t block_rows,
                             const size_t *over)
{
    const struct stage *s = &plan->pipeline->stages[index];
    struct plan_stage *ps = &plan->stages[index];
    struct eval ev = {.plan = plan, .prog = plan->program, .d = d, .stage = index,
                      .device = ps->device,
                      .builtins = {VALUE_NONE, VALUE_NONE, VALUE_NONE}};

    if (s->has_foreach) {
        /* after an error in over, its names are poisoned blocks, so that
         * what reads them says nothing more */
        for (size_t i = 0; i < s->nover; i++) {
            struct plan_value *v;
            if (over) {
                bind_block(plan, index, i, &plan->values[over[i]], block_rows);
                continue;
            }
            v = plan_bind(plan, s->foreach_over[i].name, index, s->foreach_over[i].line,
                          s->foreach_over[i].col);
            if (v)
                v->poisoned = true;
        }
        plan->program->stages[index].nover = over ? s->nover : 0;
        ev.in_foreach = true;
    }
    for (size_t k = 0; k < s->nstatements; k++) {
        const struct statement *st = s->statements[k];
        size_t cap = st && st->ntargets > TR_OP_MAX_RESULTS ? st->ntargets : TR_OP_MAX_RESULTS;
        struct result *results;
        int n = 1;
        bool ok;

        if (!st)
            continue;
        results = program_alloc(plan->program, cap * sizeof *results);
        if (!results) {
            diag_error(d, st->line, st->col, NULL, "out of memory");
            continue;
        }
        ev.visible = plan->nvalues;
        ev.st = st;
        ev.statement = (int)k;
        if (st->value->kind == EXPR_CALL) {
            ok = eval_call(&ev, st->value, results, cap, &n);
        } else {
            results[0] = eval(&ev, st->value);
            ok = !results[0].failed;
        }
        if (ok && (size_t)n != st->ntargets) {
            diag_error(d, st->line, st->target_cols[0],
                       n > 1 ? "assign each, as in 'v, i = topk(x, k)'" : NULL,
                       "%zu name%s for %d value%s", st->ntargets, st->ntargets == 1 ? "" : "s",
                       n, n == 1 ? "" : "s");
            ok = false;
        }
        for (size_t t = 0; t < st->ntargets; t++) {
            struct plan_value *v = plan_bind(plan, st->targets[t], index, st->line,
                                             st->target_cols[t]);
            if (!v)
                continue;
            v->poisoned = !ok;
            if (ok) {
                v->meta = results[t].o.meta;
                v->depends_on_block = results[t].depends;
                v->bytes = plan_tensor_bytes(&v->meta);
                v->value = bind_target(&ev, v->name, &results[t], st->line, st->target_cols[t]);
                v->poisoned = v->value == VALUE_NONE;
            }
        }
    }
}

/* The last block's typing (its errors in last_d) against the full
 * blocks' (the stage's statements typed without error): an error of its
 * own is the pipeline's, with the block's length, and its instructions
 * must be the full blocks' (last_block.h). */
static void check_last_block(struct program *prog, struct diag_list *d,
                             const struct diag_list *last_d, const struct stage *s, int64_t last,
                             size_t first_instr, size_t mid, uint32_t first_value, size_t vmid)
{
    if (last_d->errors > 0) {
        for (size_t i = 0; i < last_d->count; i++) {
            const struct diag *e = &last_d->items[i];
            if (e->kind != DIAG_ERROR)
                continue;
            diag_error(d, e->line, e->col,
                       e->hint ? e->hint
                               : "choose a foreach size whose blocks all fit, or one that "
                                 "divides the rows",
                       "in the last block of foreach, %lld row%s of '%s': %s", (long long)last,
                       last == 1 ? "" : "s", s->foreach_over[0].name, e->message);
        }
        return;
    }
    switch (last_block_pair(prog, first_instr, mid, prog->ninstrs, first_value,
                            (uint32_t)vmid, (uint32_t)prog->nvalues)) {
    case LAST_BLOCK_PAIRED:
        return;
    case LAST_BLOCK_NO_MEMORY:
        diag_error(d, s->foreach_line, s->foreach_col, NULL, "out of memory");
        return;
    case LAST_BLOCK_DIFFERENT:
        diag_error(d, s->foreach_line, s->foreach_col,
                   "choose a foreach size that divides the rows, so that every block is as "
                   "long",
                   "foreach: the last block, %lld row%s of '%s', would need other instructions "
                   "than the full blocks",
                   (long long)last, last == 1 ? "" : "s", s->foreach_over[0].name);
        return;
    }
}

/* A foreach stage: typed with full blocks, and again with the last block
 * when it is shorter, whose errors are the stage's and whose differences
 * (shapes, constants made from the block's length) the full blocks'
 * instructions record (its instructions are then dropped); a kept value
 * that depends on the block is the blocks' values joined along dimension
 * 0. */
/* The plan values a foreach stage cuts into blocks (over), all tensors
 * with the same dimension 0, or false after the error. */
static bool find_overs(struct plan *plan, int index, struct diag_list *d, size_t *over)
{
    const struct stage *s = &plan->pipeline->stages[index];
    bool ok = true;

    for (size_t i = 0; i < s->nover; i++) {
        const struct name_at *at = &s->foreach_over[i];
        const struct plan_value *v = plan_find(plan, at->name, plan->nvalues);
        if (!v) {
            char hint[512];
            diag_error(d, at->line, at->col, plan_unbound_hint(plan, at->name, hint, sizeof hint),
                       "foreach: '%s' is used before anything binds it", at->name);
            ok = false;
            continue;
        }
        over[i] = (size_t)(v - plan->values);
        if (v->poisoned) {
            ok = false;
        } else if (v->meta.kind != TR_VALUE_TENSOR || v->meta.ndim == 0) {
            diag_error(d, at->line, at->col, NULL,
                       "foreach: '%s' must be a tensor of at least one dimension", at->name);
            ok = false;
        } else if (i > 0 && ok && v->meta.shape[0] != plan->values[over[0]].meta.shape[0]) {
            diag_error(d, at->line, at->col,
                       "over: [x, y] cuts values whose rows line up: the same dimension 0",
                       "foreach: '%s' has %lld rows and '%s' %lld", at->name,
                       (long long)v->meta.shape[0], s->foreach_over[0].name,
                       (long long)plan->values[over[0]].meta.shape[0]);
            ok = false;
        }
    }
    return ok;
}

/* The rows of a block of size: bytes, over all the values cut together: as
 * many whole rows of each as fit, at least one. */
static int64_t rows_in_bytes(const struct plan *plan, const size_t *over, size_t nover,
                             uint64_t bytes)
{
    uint64_t row_bytes = 0;

    for (size_t i = 0; i < nover; i++) {
        const struct tr_value *t = &plan->values[over[i]].meta;
        uint64_t row = tr_dtype_size(t->dtype);
        for (int d = 1; d < t->ndim; d++) {
            if (t->shape[d] == 0)
                row = 0; /* rows of nothing */
            else
                row = row > UINT64_MAX / (uint64_t)t->shape[d] ? UINT64_MAX
                                                               : row * (uint64_t)t->shape[d];
        }
        row_bytes = row > UINT64_MAX - row_bytes ? UINT64_MAX : row_bytes + row;
    }
    if (row_bytes == 0)
        return INT64_MAX; /* one block */
    bytes /= row_bytes;
    return bytes == 0 ? 1 : bytes > INT64_MAX ? INT64_MAX : (int64_t)bytes;
}

/* A foreach stage: typed with full blocks, and again with the last block
 * when it is shorter, whose errors are the stage's and whose differences
 * (shapes, constants made from the block's length) the full blocks'
 * instructions record (its instructions are then dropped); a kept value
 * that depends on the block is the blocks' values joined along dimension
 * 0. */
/* The blocks of a foreach stage that --shard K/N runs: [*first, *first +
 * *count), the K-th of N contiguous, nearly equal ranges of the unsharded
 * run's blocks (all of them when unsharded).  false, after an error (exit
 * 2), when there are fewer blocks than shards: a shard would be empty,
 * and the stages after it would see no rows. */
static bool shard_range(const struct pipeline *p, const struct stage *s, int64_t blocks,
                        struct diag_list *d, int64_t *first, int64_t *count)
{
    unsigned __int128 k = (unsigned)p->shard_k, n = (unsigned)p->shard_n;

    *first = 0;
    *count = blocks;
    if (p->shard_n == 0)
        return true;
    if (blocks < p->shard_n) {
        diag_error_code(d, EXIT_USAGE, s->foreach_line, s->foreach_col,
                        "a shard is at least one block: use at most as many shards as blocks, "
                        "or smaller blocks",
                        "--shard %d/%d: stage '%s' has %lld block%s, fewer than the %d shards",
                        p->shard_k, p->shard_n, s->name ? s->name : "?", (long long)blocks,
                        blocks == 1 ? "" : "s", p->shard_n);
        return false;
    }
    *first = (int64_t)((unsigned __int128)blocks * (k - 1) / n);
    *count = (int64_t)((unsigned __int128)blocks * k / n) - *first;
    return true;
}

static void lower_foreach(struct plan *plan, int index, struct diag_list *d)
{
    const struct stage *s = &plan->pipeline->stages[index];
    struct program *prog = plan->program;
    struct program_stage full;
    int64_t rows, blocks, last, joined, size, first = 0, count = 0, full_run;
    bool tail_run;
    size_t start = plan->nvalues, full_end, ninstrs, nvalues, first_instr, errors;
    size_t over[FOREACH_MAX_OVER] = {0};
    uint32_t first_value;
    struct diag_list last_d;

    if (!find_overs(plan, index, d, over)) {
        lower_statements(plan, index, d, 0, NULL);
        return;
    }
    rows = plan->values[over[0]].meta.shape[0];
    size = s->foreach_size ? s->foreach_size
                           : rows_in_bytes(plan, over, s->nover, s->foreach_bytes);
    blocks = rows / size + (rows % size != 0); /* rows + size overflows */
    last = rows - (blocks > 0 ? (blocks - 1) * size : 0);
    if (!shard_range(plan->pipeline, s, blocks, d, &first, &count)) {
        lower_statements(plan, index, d, 0, NULL);
        return;
    }
    first_instr = prog->ninstrs;
    first_value = (uint32_t)prog->nvalues;
    errors = d->errors;
    /* no rows: typed for a full block that never runs, joined to none */
    lower_statements(plan, index, d, rows > 0 && rows < size ? rows : size, over);
    full_end = plan->nvalues;
    ninstrs = prog->ninstrs;
    nvalues = prog->nvalues;
    full = prog->stages[index];
    full.nblocks = count;
    full.block_rows = size;
    full.first_block = first;
    full.all_blocks = blocks;
    full.with_last = first + count == blocks;
    if (blocks < 2 || last == size)
        last = -1; /* every block as long as the first */
    if (last >= 0) {
        diag_init(&last_d, d->path, NULL, 0);
        lower_statements(plan, index, &last_d, last, over);
        if (d->errors == errors)
            check_last_block(prog, d, &last_d, s, last, first_instr, ninstrs, first_value,
                             nvalues);
        diag_free(&last_d);
    }
    /* join along dimension 0 what depends on the blocks run (a shard's) */
    tail_run = last >= 0 && full.with_last && count > 0;
    full_run = count - tail_run;
    for (size_t i = start; i < full_end; i++) {
        struct plan_value *v = &plan->values[i];
        const struct plan_value *tail = last >= 0 ? &plan->values[full_end + (i - start)] : v;
        if (!v->depends_on_block || v->poisoned || v->meta.kind != TR_VALUE_TENSOR)
            continue;
        if (v->meta.ndim == 0)
            continue; /* refused when kept: see check_keeps */
        if (__builtin_mul_overflow(v->meta.shape[0], full_run, &joined) ||
            __builtin_add_overflow(joined, tail_run && tail->meta.kind == TR_VALUE_TENSOR
                                             ? tail->meta.shape[0] : 0, &joined)) {
            diag_error(d, v->line, v->col, NULL,
                       "'%s' of the %lld blocks joined has more than %lld rows", v->name,
                       (long long)blocks, (long long)INT64_MAX);
            v->poisoned = true;
            continue;
        }
        if (tail != v && tail->meta.kind == TR_VALUE_TENSOR &&
            (tail->meta.dtype != v->meta.dtype || tail->meta.ndim != v->meta.ndim ||
             memcmp(tail->meta.shape + 1, v->meta.shape + 1,
                    (size_t)(v->meta.ndim - 1) * sizeof *v->meta.shape) != 0) &&
            v->value != VALUE_NONE && v->value < nvalues)
            prog->values[v->value].ragged = true; /* refused if joined: check_joins */
        v->meta.shape[0] = joined;
        if (v->value == VALUE_NONE || stage_block_index(&full, v->value) < 0)
            v->meta.strided = false; /* the whole is made compact */
        v->bytes = plan_tensor_bytes(&v->meta);
        if (v->value != VALUE_NONE && v->value < nvalues) {
            prog->values[v->value].joined = true;
            prog->values[v->value].joined_meta = v->meta;
        }
    }
    plan->nvalues = full_end;
    program_truncate(prog, ninstrs, nvalues);
    prog->stages[index] = full;
}

void lower_stage(struct plan *plan, int index, struct diag_list *d)
{
    if (plan->pipeline->stages[index].has_foreach)
        lower_foreach(plan, index, d);
    else
        lower_statements(plan, index, d, 0, NULL);
}

/* ------------------------------------------------------------ outputs */

/* Groups the file outputs by path and schedules each group's write right
 * after the instruction that makes the last of its members' final values
 * (before the first stage when they are inputs and constants only). */
/* The stage of a write placed after an instruction of stage: a foreach
 * block of a later stage without instructions is written in that one. */
static int write_stage(const struct program *prog, const struct output_group *grp, int stage)
{
    for (size_t m = 0; m < grp->nmembers; m++) {
        const struct value *v = &prog->values[prog->outputs[grp->members[m]]];
        if (v->origin == ORIGIN_BUILTIN && v->stage > stage)
            stage = v->stage;
    }
    return stage;
}

/* The writes of the groups placed after old instruction i (-1: before
 * any), in stage order; false when out of memory. */
static bool add_writes(struct program *prog, const struct instr *old, ptrdiff_t i,
                       const ptrdiff_t *after)
{
    int want = i >= 0 ? old[i].stage : -1;

    for (;;) {
        int later = INT_MAX;
        for (size_t g = 0; g < prog->ngroups; g++) {
            struct output_group *grp = &prog->groups[g];
            struct instr *w;
            int stage;
            if (after[g] != i)
                continue;
            stage = write_stage(prog, grp, i >= 0 ? old[i].stage : -1);
            if (stage != want) {
                if (stage > want && stage < later)
                    later = stage;
                continue;
            }
            w = program_add_instr(prog, stage, INSTR_WRITE);
            if (!w || !(w->wargs = program_alloc(prog, grp->nmembers * sizeof *w->wargs)))
                return false;
            if (i >= 0) {
                w->statement = old[i].statement;
                w->line = old[i].line;
                w->col = old[i].col;
            }
            w->group = g;
            w->nwargs = grp->nmembers;
            for (size_t m = 0; m < grp->nmembers; m++)
                w->wargs[m] = prog->outputs[grp->members[m]];
            grp->write = prog->ninstrs - 1;
        }
        if (later == INT_MAX)
            return true;
        want = later;
    }
}

bool lower_outputs(struct plan *plan)
{
    struct pipeline *p = plan->pipeline;
    struct program *prog = plan->program;
    ptrdiff_t *after = calloc(p->noutputs ? p->noutputs : 1, sizeof *after);
    struct instr *old;
    size_t nold;
    bool ok = after != NULL;

    prog->finals = program_alloc(prog, (p->noutputs + 1) * sizeof *prog->finals);
    ok = ok && prog->finals;
    for (size_t o = 0; ok && o < p->noutputs; o++) {
        const struct plan_value *v = plan_lookup(plan, p->outputs[o].name);
        prog->outputs[o] = v && !v->poisoned ? v->value : VALUE_NONE;
        if (p->outputs[o].as_text && prog->outputs[o] != VALUE_NONE)
            prog->finals[prog->nfinals++] = prog->outputs[o];
    }
    if (ok && p->print_name) {
        const struct plan_value *v = plan_lookup(plan, p->print_name);
        if (v && v->value != VALUE_NONE)
            prog->finals[prog->nfinals++] = v->value;
    }
    for (size_t o = 0; ok && o < p->noutputs; o++) {
        const struct output *out = &p->outputs[o];
        struct output_group *g = NULL;
        uint32_t id = prog->outputs[o];
        ptrdiff_t at = -1;
        if (out->as_text || !out->path || id == VALUE_NONE)
            continue;
        for (size_t i = 0; i < prog->ngroups && !g; i++)
            if (strcmp(prog->groups[i].path, out->path) == 0)
                g = &prog->groups[i];
        if (!g) {
            g = &prog->groups[prog->ngroups];
            g->path = out->path;
            g->members = program_alloc(prog, p->noutputs * sizeof *g->members);
            g->dtypes = program_alloc(prog, p->noutputs * sizeof *g->dtypes);
            if (!g->members || !g->dtypes) {
                ok = false;
                break;
            }
            after[prog->ngroups++] = -1;
        }
        g->dtypes[g->nmembers] = out->dtype;
        g->members[g->nmembers++] = o;
        if (prog->values[id].origin == ORIGIN_RESULT)
            at = (ptrdiff_t)prog->values[id].def;
        /* a foreach block (or chunk_start) is there once its stage has
         * run: after the stage's last instruction, or an earlier one's */
        if (prog->values[id].origin == ORIGIN_BUILTIN)
            for (size_t i = 0; i < prog->ninstrs; i++)
                if (prog->instrs[i].stage <= prog->values[id].stage)
                    at = (ptrdiff_t)i;
        if (at > after[g - prog->groups])
            after[g - prog->groups] = at;
    }
    /* the instructions again, each group's write in its place */
    old = program_take_instrs(prog, &nold);
    for (ptrdiff_t i = -1; ok && i < (ptrdiff_t)nold; i++) {
        if (i >= 0 && !program_append(prog, &old[i])) {
            ok = false;
            break;
        }
        ok = ok && add_writes(prog, old, i, after);
    }
    for (size_t g = 0; ok && g < prog->ngroups; g++) {
        struct output_group *grp = &prog->groups[g];
        const struct output *out = &p->outputs[grp->members[0]];
        const struct value *v = &prog->values[prog->outputs[grp->members[0]]];
        grp->mappable = grp->nmembers == 1 && out->compression == TIO_COMPRESSION_NONE &&
                        tio_output_is_file(out->path) &&
                        (out->format == TIO_FORMAT_NPY || out->format == TIO_FORMAT_RAW) &&
                        v->meta.kind == TR_VALUE_TENSOR &&
                        (out->dtype == TR_DTYPE_COUNT || out->dtype == v->meta.dtype);
    }
    free(old);
    free(after);
    return ok;
}
