/*
 * plan.c - resolving and typing a pipeline before it runs: names, dtypes,
 * shapes and devices of every value, which values each stage must keep,
 * and the pool memory each stage holds at its largest.
 *
 * Every error goes to the diagnostics with its place; a statement that
 * fails binds its targets as "poisoned", so that one mistake is reported
 * once, not again at every use.
 */
#include "config.h"

#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "msg.h"

/* ------------------------------------------------------------ arena */

/* Lists, strings and name tables that values point into, freed together
 * with the plan. */
struct plan_arena {
    struct plan_arena *next;
    size_t used, size;
    _Alignas(16) char data[];
};

static void *arena_alloc(struct plan *plan, size_t bytes)
{
    struct plan_arena *a = plan->arena;
    void *p;

    bytes = (bytes + 15) & ~(size_t)15;
    if (!a || a->size - a->used < bytes) {
        size_t size = bytes > 65536 ? bytes : 65536;
        a = malloc(sizeof *a + size);
        if (!a)
            return NULL;
        a->next = plan->arena;
        a->used = 0;
        a->size = size;
        plan->arena = a;
    }
    p = a->data + a->used;
    a->used += bytes;
    return p;
}

static const char *arena_strdup(struct plan *plan, const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = arena_alloc(plan, n);

    if (copy)
        memcpy(copy, s, n);
    return copy;
}

/* ------------------------------------------------------------ values */

static struct plan_value *bind(struct plan *plan, const char *name, int stage, int line, int col)
{
    struct plan_value *v;

    if (plan->nvalues == plan->capacity) {
        size_t cap = plan->capacity ? plan->capacity * 2 : 64;
        struct plan_value *values = realloc(plan->values, cap * sizeof *values);
        if (!values)
            return NULL;
        plan->values = values;
        plan->capacity = cap;
    }
    v = &plan->values[plan->nvalues++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->stage = stage;
    v->line = line;
    v->col = col;
    return v;
}

/* The latest binding of name among the first n values. */
static struct plan_value *find(const struct plan *plan, const char *name, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (strcmp(plan->values[i].name, name) == 0)
            return &plan->values[i];
    return NULL;
}

const struct plan_value *plan_lookup(const struct plan *plan, const char *name)
{
    return find(plan, name, plan->nvalues);
}

/* Every name bound so far, NULL-terminated, for "did you mean". */
static const char **bound_names(const struct plan *plan)
{
    const char **names = calloc(plan->nvalues + 1, sizeof *names);
    size_t n = 0;

    for (size_t i = 0; names && i < plan->nvalues; i++) {
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(names[k], plan->values[i].name) == 0;
        if (!seen)
            names[n++] = plan->values[i].name;
    }
    return names;
}

/* The hint for a name nothing binds: the closest bound name, or the list
 * of them. */
static const char *unbound_hint(const struct plan *plan, const char *name, char *hint,
                                size_t size)
{
    const char **names = bound_names(plan);
    const char *guess = names ? diag_suggest(name, names) : NULL;
    char list[400];

    if (guess)
        snprintf(hint, size, "did you mean '%s'?", guess);
    else
        snprintf(hint, size, "the values are: %s",
                 names && names[0] ? diag_join(names, list, sizeof list) : "none");
    free(names);
    return hint;
}

static uint64_t tensor_bytes(const struct tr_value *v)
{
    uint64_t n = 1;

    if (v->kind != TR_VALUE_TENSOR)
        return 0;
    for (int i = 0; i < v->ndim; i++)
        n *= (uint64_t)v->shape[i];
    return tr_memory_block_size(n * tr_dtype_size(v->dtype));
}

static char *describe(const struct tr_value *v, char *buf, size_t size)
{
    char shape[160];

    switch (v->kind) {
    case TR_VALUE_TENSOR:
        snprintf(buf, size, "%s%s", tr_dtype_name(v->dtype),
                 tr_format_shape(v->shape, v->ndim, shape, sizeof shape));
        break;
    case TR_VALUE_INT:
        if (v->known)
            snprintf(buf, size, "%lld", (long long)v->integer);
        else
            snprintf(buf, size, "int");
        break;
    case TR_VALUE_FLOAT:
        snprintf(buf, size, "%g", v->number);
        break;
    case TR_VALUE_BOOL:
        snprintf(buf, size, "%s", v->boolean ? "true" : "false");
        break;
    case TR_VALUE_STRING:
        snprintf(buf, size, "\"%s\"", v->string);
        break;
    case TR_VALUE_DTYPE:
        snprintf(buf, size, "%s", tr_dtype_name(v->dtype));
        break;
    case TR_VALUE_LIST: {
        /* [2, 8]: each item as it is described, as far as buf goes */
        size_t used = 0;
        char item[64];
        snprintf(buf, size, "[");
        used = strlen(buf);
        for (size_t i = 0; i < v->count && used + 1 < size; i++) {
            snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                     describe(&v->items[i], item, sizeof item));
            used += strlen(buf + used);
        }
        if (used + 1 < size)
            snprintf(buf + used, size - used, "]");
        break;
    }
    default:
        snprintf(buf, size, "None");
    }
    return buf;
}

/* ------------------------------------------------------------ inputs */

/* "a, b, c": the names of f's tensors, cut short with "..." when they do
 * not fit in buf. */
static const char *entry_names(const struct tio_file *f, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t k = 0; k < tio_file_count(f); k++) {
        const char *name = tio_file_entry(f, k)->name;
        int n = snprintf(buf + used, size - used, "%s%s", k ? ", " : "", name ? name : "?");
        if (n < 0 || (size_t)n >= size - used) {
            memcpy(buf + (used < size - 4 ? used : size - 4), "...", 4);
            break;
        }
        used += (size_t)n;
    }
    return buf;
}

/* The index of the tensor in's key names in f, or -1 after reporting
 * why there is none (with the closest name, for a typo). */
static ptrdiff_t find_key(const struct input *in, const struct tio_file *f, struct diag_list *d)
{
    ptrdiff_t which = tio_file_find(f, in->key);
    size_t n = tio_file_count(f);
    const char **names;
    const char *guess = NULL;
    char list[512], hint[600];

    if (which >= 0)
        return which;
    if (n == 1 && !tio_file_entry(f, 0)->name) {
        if (in->given)
            snprintf(hint, sizeof hint, "leave out the key: -i %s=%s", in->name, in->path);
        else
            snprintf(hint, sizeof hint, "leave out key: %s", in->key);
        diag_error(d, in->key_line, in->key_col, hint,
                   "input '%s': %s holds one tensor, without a name; a key picks one tensor of "
                   "a file of several", in->name, in->path);
        return -1;
    }
    names = calloc(n + 1, sizeof *names);
    for (size_t k = 0; names && k < n; k++)
        names[k] = tio_file_entry(f, k)->name ? tio_file_entry(f, k)->name : "";
    if (names)
        guess = diag_suggest(in->key, names);
    free(names);
    entry_names(f, list, sizeof list);
    if (guess) {
        snprintf(hint, sizeof hint, "it holds: %s", list);
        diag_error(d, in->key_line, in->key_col, hint,
                   "input '%s': %s holds no tensor '%s' (did you mean '%s'?)", in->name,
                   in->path, in->key, guess);
    } else {
        diag_error(d, in->key_line, in->key_col, NULL,
                   "input '%s': %s holds no tensor '%s' (it holds: %s)", in->name, in->path,
                   in->key, list);
    }
    return -1;
}

/* An input without a key whose file holds several tensors (or none):
 * reported, with the way to pick one.  Returns -1. */
static ptrdiff_t several_tensors(const struct input *in, const struct tio_file *f,
                                 struct diag_list *d)
{
    char list[512], hint[1200];

    entry_names(f, list, sizeof list);
    if (in->given)
        snprintf(hint, sizeof hint, "name one with -i %s=%s:NAME; the file holds: %s", in->name,
                 in->path, list);
    else
        snprintf(hint, sizeof hint, "name one with {path: ..., key: NAME}; the file holds: %s",
                 list);
    diag_error(d, in->line, in->col, hint, "input '%s': %s holds %zu tensors; which one is meant?",
               in->name, in->path, tio_file_count(f));
    return -1;
}

static void open_inputs(struct plan *plan, struct diag_list *d, bool for_run)
{
    struct pipeline *p = plan->pipeline;

    plan->inputs = calloc(p->ninputs ? p->ninputs : 1, sizeof *plan->inputs);
    if (!plan->inputs)
        return;
    plan->ninputs = p->ninputs;
    for (size_t i = 0; i < p->ninputs; i++) {
        const struct input *in = &p->inputs[i];
        struct plan_input *pi = &plan->inputs[i];
        struct tio_open_options oo = {.format = in->format, .raw = in->has_raw ? &in->raw : NULL,
                                      .header_only = !for_run};
        struct plan_value *v = bind(plan, in->name, -1, in->line, in->col);
        const struct tio_entry *e;
        ptrdiff_t which = 0;

        pi->input = in;
        if (!v)
            return;
        v->input = true;
        v->poisoned = true;
        if (!in->path)
            continue; /* the schema has reported it */
        if (in->has_raw)
            oo.format = TIO_FORMAT_RAW;
        pi->file = tio_open(in->path, &oo);
        if (!pi->file) {
            diag_error_code(d, tr_last_status() == TR_ERR_INVALID ? 3
                               : tr_last_status() == TR_ERR_OOM   ? 5
                                                                  : 4,
                            in->path_line,
                            in->path_col, NULL, "input '%s': %s: %s", in->name, in->path,
                            tr_last_error());
            continue;
        }
        if (in->key)
            which = find_key(in, pi->file, d);
        else if (tio_file_count(pi->file) != 1)
            which = several_tensors(in, pi->file, d);
        if (which < 0)
            continue;
        pi->index = (size_t)which;
        e = tio_file_entry(pi->file, pi->index);
        pi->mapped_bytes = tio_file_mapped_bytes(pi->file) ? e->nbytes : 0;
        plan->mapped_bytes += pi->mapped_bytes;
        v->poisoned = false;
        if (!e->supported) {
            v->unsupported = true;
            v->unsupported_dtype = arena_strdup(plan, e->dtype_text);
            continue;
        }
        v->meta.kind = TR_VALUE_TENSOR;
        v->meta.dtype = e->dtype;
        v->meta.ndim = e->ndim;
        memcpy(v->meta.shape, e->shape, sizeof e->shape);
        v->meta.device = TR_CPU;
        pi->meta = v->meta;
    }
}

/* A param's value as a constant; a list's items in the plan's arena. */
static bool param_meta(struct plan *plan, const struct param *param, struct tr_value *v)
{
    memset(v, 0, sizeof *v);
    v->known = true;
    v->weak = true;
    switch (param->kind) {
    case PARAM_INT:
        v->kind = TR_VALUE_INT;
        v->integer = param->integer;
        return true;
    case PARAM_FLOAT:
        v->kind = TR_VALUE_FLOAT;
        v->number = param->number;
        return true;
    case PARAM_BOOL:
        v->kind = TR_VALUE_BOOL;
        v->boolean = param->boolean;
        return true;
    case PARAM_NONE:
        v->kind = TR_VALUE_NONE;
        return true;
    case PARAM_LIST: {
        struct tr_value *items = arena_alloc(plan, (param->nitems + 1) * sizeof *items);
        if (!items)
            return false;
        for (size_t i = 0; i < param->nitems; i++)
            if (!param_meta(plan, &param->items[i], &items[i]))
                return false;
        v->kind = TR_VALUE_LIST;
        v->count = param->nitems;
        v->items = items;
        return true;
    }
    default:
        v->kind = TR_VALUE_STRING;
        v->string = param->string;
        return true;
    }
}

static void bind_params(struct plan *plan)
{
    struct pipeline *p = plan->pipeline;

    for (size_t i = 0; i < p->nparams; i++) {
        const struct param *param = &p->params[i];
        struct plan_value *v = bind(plan, param->name, -1, param->line, param->col);
        if (!v)
            return;
        v->param = true;
        if (!param_meta(plan, param, &v->meta))
            v->poisoned = true; /* out of memory */
    }
}

/* ------------------------------------------------------------ evaluation */

struct reads {
    const char **names;
    size_t count, capacity;
};

struct eval {
    struct plan *plan;
    struct diag_list *d;
    int stage;
    struct tr_device device;
    const char *block_name;   /* the foreach value, when any */
    struct reads *reads;      /* names read from earlier stages */
    size_t visible;           /* values bound before this statement */
    uint64_t allocated;       /* bytes of every op result so far in the stage */
};

/* What an expression gave: a value, whether it depends on the foreach
 * block, and whether an error stopped it (already reported). */
struct result {
    struct tr_value v;
    bool depends;
    bool failed;
};

static void note_read(struct eval *ev, const char *name)
{
    struct reads *r = ev->reads;

    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->names[i], name) == 0)
            return;
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? r->capacity * 2 : 16;
        const char **names = realloc(r->names, cap * sizeof *names);
        if (!names)
            return;
        r->names = names;
        r->capacity = cap;
    }
    r->names[r->count++] = name;
}

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
    r.v = v;
    r.v.known = true;
    r.v.weak = true;
    return r;
}

static struct result eval(struct eval *ev, const struct expr *e);

/* x.shape, x.ndim, x.dtype or numel(x) of the tensor r: a constant. */
static struct result attribute(struct eval *ev, const char *attr, struct result r)
{
    struct tr_value *items = arena_alloc(ev->plan, TR_MAX_DIMS * sizeof *items);
    struct tr_value tensor = r.v;

    if (!items || !fold_attribute(attr, &tensor, &r.v, items))
        return failed();
    return r;
}


static bool is_builtin(const char *name)
{
    return strcmp(name, "chunk_start") == 0 || strcmp(name, "chunk_index") == 0 ||
           strcmp(name, "chunk_count") == 0;
}

static struct result eval_name(struct eval *ev, const struct expr *e)
{
    struct plan_value *v = find(ev->plan, e->v.name, ev->visible);
    struct result r;

    memset(&r, 0, sizeof r);
    if (!v && is_builtin(e->v.name)) {
        if (!ev->block_name) {
            diag_error(ev->d, e->line, e->col, "use it in a stage with foreach: {over: ..., size: ...}",
                       "'%s' is defined only inside a foreach stage", e->v.name);
            return failed();
        }
        r.v.kind = TR_VALUE_INT; /* known only as each block runs */
        r.depends = true;
        return r;
    }
    if (!v) {
        char hint[512];
        diag_error(ev->d, e->line, e->col, unbound_hint(ev->plan, e->v.name, hint, sizeof hint),
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
    if (v->stage < ev->stage)
        note_read(ev, v->name);
    r.v = v->meta;
    r.depends = v->depends_on_block;
    return r;
}

static struct result eval_list(struct eval *ev, const struct expr *e)
{
    struct tr_value *items = arena_alloc(ev->plan, (e->nargs ? e->nargs : 1) * sizeof *items);
    struct result r;

    memset(&r, 0, sizeof r);
    if (!items)
        return failed();
    for (size_t i = 0; i < e->nargs; i++) {
        struct result item = eval(ev, e->args[i].value);
        if (item.failed)
            return failed();
        items[i] = item.v;
        r.depends = r.depends || item.depends;
    }
    r.v.kind = TR_VALUE_LIST;
    r.v.count = e->nargs;
    r.v.items = items;
    r.v.known = true;
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

bool plan_bind_call(const struct expr *e, const struct tr_op_info *op, int *from,
                    struct diag_list *d)
{
    bool given[TR_OP_MAX_PARAMS] = {false}, broken = false;
    int positional = 0;
    char hint[512];

    for (int i = 0; i < TR_OP_MAX_PARAMS; i++)
        from[i] = -1;
    for (size_t a = 0; a < e->nargs; a++) {
        const struct expr_arg *arg = &e->args[a];
        int p = -1;
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

/* Evaluates a call into its results (one or two); *n says how many. */
static bool eval_call(struct eval *ev, const struct expr *e, struct result *results, int *n)
{
    const struct tr_op_info *op = tr_op_find(e->op);
    struct tr_value args[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS];
    int from[TR_OP_MAX_PARAMS], bad = -1;
    bool depends = false, broken;

    if (!op && strcmp(e->op, "numel") == 0 && e->nargs == 1 && !e->args[0].keyword) {
        struct result x = eval(ev, e->args[0].value);
        if (x.failed)
            return false;
        if (x.v.kind != TR_VALUE_TENSOR) {
            diag_error(ev->d, e->line, e->col, NULL, "numel takes a tensor");
            return false;
        }
        *n = 1;
        results[0] = attribute(ev, "numel", x);
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
    broken = !plan_bind_call(e, op, from, ev->d);
    /* evaluate the arguments, reporting each one's errors */
    for (int i = 0; i < op->nparams; i++) {
        if (from[i] < 0) {
            args[i] = op->params[i].default_value;
            continue;
        }
        struct result r = eval(ev, e->args[from[i]].value);
        if (r.failed)
            broken = true;
        args[i] = r.v;
        depends = depends || r.depends;
    }
    if (!broken && (strcmp(op->name, "max") == 0 || strcmp(op->name, "min") == 0) &&
        from[1] >= 0 && !e->args[from[1]].keyword && args[1].kind == TR_VALUE_TENSOR) {
        const struct expr *at = e->args[from[1]].value;
        diag_error(ev->d, at->line, at->col,
                   strcmp(op->name, "max") == 0 ? "the larger of two tensors is maximum(x, y)"
                                                : "the smaller of two tensors is minimum(x, y)",
                   "%s(x, dim) reduces x along dim; its second argument is not a tensor "
                   "(did you mean '%s'?)",
                   op->name, strcmp(op->name, "max") == 0 ? "maximum" : "minimum");
        broken = true;
    }
    if (broken)
        return false;
    switch (fold_constants(op->name, args, op->nparams, &out[0])) {
    case FOLD_OK:
        *n = 1;
        memset(&results[0], 0, sizeof results[0]);
        results[0].v = out[0];
        results[0].depends = depends; /* x.shape[0] of a foreach block */
        return true;
    case FOLD_ERROR:
        diag_error(ev->d, e->line, e->col, NULL, "%s", tr_last_error());
        return false;
    case FOLD_NO:
        break;
    }
    if (tr_op_infer(op, args, out, &bad) != TR_OK) {
        const struct expr *at = arg_expr(e, op, bad, from);
        diag_error(ev->d, at->line, at->col, NULL, "%s", tr_last_error());
        return false;
    }
    *n = op->nresults;
    for (int i = 0; i < op->nresults; i++) {
        memset(&results[i], 0, sizeof results[i]);
        results[i].v = out[i];
        results[i].depends = depends;
        if (out[i].kind == TR_VALUE_TENSOR && !out[i].weak) {
            if (strcmp(op->name, "to") != 0)
                results[i].v.device = ev->device;
            if (strcmp(op->group, "views") != 0)
                ev->allocated += tensor_bytes(&out[i]);
        }
    }
    return true;
}

/* list[i] or list[a:b:c] of a constant list (x.shape[0], x.shape[1:]). */
static struct result index_list(struct eval *ev, const struct expr *e, struct result base)
{
    const struct expr *s = e->nargs == 1 ? e->args[0].value : NULL;
    int64_t n = (int64_t)base.v.count, bounds[3] = {TR_SLICE_NONE, TR_SLICE_NONE, TR_SLICE_NONE};
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
        if (p.v.kind == TR_VALUE_NONE)
            continue;
        if (p.v.kind != TR_VALUE_INT || !p.v.known) {
            diag_error(ev->d, part->line, part->col, NULL,
                       "a list's index must be an integer constant");
            return failed();
        }
        bounds[k] = p.v.integer;
    }
    r = base;
    if (s->kind != EXPR_SLICE) {
        if (fold_list_index(n, bounds[0], &first) != FOLD_OK) {
            diag_error(ev->d, s->line, s->col, NULL, "%s", tr_last_error());
            return failed();
        }
        r.v = base.v.items[first];
        return r;
    }
    if (fold_list_slice(n, bounds[0], bounds[1], bounds[2], &first, &by, &count) != FOLD_OK) {
        diag_error(ev->d, s->line, s->col, NULL, "%s", tr_last_error());
        return failed();
    }
    items = arena_alloc(ev->plan, (size_t)(count ? count : 1) * sizeof *items);
    if (!items)
        return failed();
    for (int64_t i = 0; i < count; i++)
        items[i] = base.v.items[first + i * by];
    r.v.items = items;
    r.v.count = (size_t)count;
    return r;
}

static struct result eval_index(struct eval *ev, const struct expr *e)
{
    struct result base = eval(ev, e->base), r;
    struct tr_value *subs = arena_alloc(ev->plan, (e->nargs ? e->nargs : 1) * sizeof *subs);
    int bad = -1;

    if (base.failed || !subs)
        return failed();
    if (base.v.kind == TR_VALUE_LIST && base.v.known)
        return index_list(ev, e, base);
    for (size_t i = 0; i < e->nargs; i++) {
        const struct expr *s = e->args[i].value;
        memset(&subs[i], 0, sizeof subs[i]);
        if (s->kind == EXPR_ELLIPSIS) {
            subs[i].kind = TR_VALUE_STRING;
            subs[i].string = "...";
        } else if (s->kind == EXPR_NONE) {
            subs[i].kind = TR_VALUE_NONE;
        } else if (s->kind == EXPR_SLICE) {
            struct tr_value *parts = arena_alloc(ev->plan, 3 * sizeof *parts);
            if (!parts)
                return failed();
            for (int k = 0; k < 3; k++) {
                memset(&parts[k], 0, sizeof parts[k]);
                if (s->slice[k]) {
                    struct result p = eval(ev, s->slice[k]);
                    if (p.failed)
                        return failed();
                    if (p.v.kind != TR_VALUE_INT && p.v.kind != TR_VALUE_NONE) {
                        diag_error(ev->d, s->slice[k]->line, s->slice[k]->col, NULL,
                                   "a slice bound must be an integer");
                        return failed();
                    }
                    parts[k] = p.v;
                }
            }
            subs[i].kind = TR_VALUE_LIST;
            subs[i].count = 3;
            subs[i].items = parts;
        } else {
            struct result p = eval(ev, s);
            if (p.failed)
                return failed();
            if (p.v.kind != TR_VALUE_INT) {
                diag_error(ev->d, s->line, s->col, "use index_select or gather to index with a tensor",
                           "an index must be an integer, a slice, '...' or None");
                return failed();
            }
            subs[i] = p.v;
        }
    }
    memset(&r, 0, sizeof r);
    if (base.v.kind != TR_VALUE_TENSOR) {
        diag_error(ev->d, e->line, e->col, NULL, "only a tensor can be indexed");
        return failed();
    }
    if (tr_infer_index(&base.v, subs, e->nargs, &r.v, &bad) != TR_OK) {
        const struct expr *at = bad >= 0 && (size_t)bad < e->nargs ? e->args[bad].value : e;
        diag_error(ev->d, at->line, at->col, NULL, "%s", tr_last_error());
        return failed();
    }
    r.depends = base.depends;
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
        if (r.v.kind == TR_VALUE_TENSOR && strcmp(e->v.name, "T") != 0 &&
            strcmp(e->v.name, "mT") != 0)
            return attribute(ev, e->v.name, r);
        if (r.v.kind != TR_VALUE_TENSOR ||
            tr_infer_transpose_all(&r.v, strcmp(e->v.name, "mT") == 0, &r.v) != TR_OK) {
            diag_error(ev->d, e->line, e->col, NULL, "%s",
                       r.v.kind != TR_VALUE_TENSOR ? "only a tensor has .T, .mT, .shape, .ndim "
                                                     "and .dtype"
                                                   : tr_last_error());
            return failed();
        }
        return r;
    case EXPR_CALL:
        if (!eval_call(ev, e, results, &n))
            return failed();
        if (n != 1) {
            diag_error(ev->d, e->line, e->col, "assign both, as in 'v, i = topk(x, k)'",
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

static struct tr_device stage_device(const struct pipeline *p, const struct stage *s, bool *cuda)
{
    bool has = s->has_device || p->has_device;
    bool automatic = s->has_device ? s->device_auto : p->has_device ? p->device_auto : true;
    struct tr_device d = s->has_device ? s->device : p->device;

    /* auto is the CPU until the CUDA kernels exist (CUDA when a usable
     * device is present, from then on) */
    if (!has || automatic)
        d = TR_CPU;
    if (p->has_force_device)
        d = p->force_device; /* --force-device: whatever the stage says */
    *cuda = d.kind == TR_DEV_CUDA;
    return d;
}

/* Runs a stage's statements through the planner once, binding their
 * targets; block_rows is the foreach block's length (0: no foreach). */
static void eval_stage(struct plan *plan, int index, struct diag_list *d, struct reads *reads,
                       int64_t block_rows, uint64_t *allocated)
{
    const struct stage *s = &plan->pipeline->stages[index];
    struct plan_stage *ps = &plan->stages[index];
    struct eval ev = {.plan = plan, .d = d, .stage = index, .device = ps->device,
                      .reads = reads};

    if (s->has_foreach && block_rows > 0) {
        struct plan_value *over = find(plan, s->foreach_over, plan->nvalues), *block;
        if (over && !over->poisoned && over->meta.kind == TR_VALUE_TENSOR) {
            if (over->stage < index)
                note_read(&ev, over->name);
            block = bind(plan, over->name, index, s->foreach_line, s->foreach_col);
            if (block) {
                block->meta = over->meta;
                block->meta.shape[0] = block_rows;
                block->depends_on_block = true;
            }
            ev.block_name = over->name;
        }
    }
    for (size_t k = 0; k < s->nstatements; k++) {
        const struct statement *st = s->statements[k];
        struct result results[TR_OP_MAX_RESULTS];
        int n = 1;
        bool ok;

        if (!st)
            continue;
        ev.visible = plan->nvalues;
        if (st->value->kind == EXPR_CALL) {
            ok = eval_call(&ev, st->value, results, &n);
        } else {
            results[0] = eval(&ev, st->value);
            ok = !results[0].failed;
        }
        if (ok && (size_t)n != st->ntargets) {
            diag_error(d, st->targets ? st->line : st->line, st->target_cols[0],
                       n > 1 ? "assign each, as in 'v, i = topk(x, k)'" : NULL,
                       "%zu name%s for %d value%s", st->ntargets, st->ntargets == 1 ? "" : "s",
                       n, n == 1 ? "" : "s");
            ok = false;
        }
        for (size_t t = 0; t < st->ntargets; t++) {
            struct plan_value *v = bind(plan, st->targets[t], index, st->line, st->target_cols[t]);
            if (!v)
                continue;
            v->poisoned = !ok;
            if (ok) {
                v->meta = results[t].v;
                v->depends_on_block = results[t].depends;
                v->bytes = tensor_bytes(&v->meta);
            }
        }
    }
    *allocated = ev.allocated;
}

/* A foreach stage: typed with full blocks, and again with the last block
 * when it is shorter; a kept value that depends on the block is the
 * blocks' values joined along dimension 0. */
static void eval_foreach(struct plan *plan, int index, struct diag_list *d, struct reads *reads,
                         uint64_t *allocated)
{
    const struct stage *s = &plan->pipeline->stages[index];
    struct plan_value *over = find(plan, s->foreach_over, plan->nvalues);
    struct plan_stage *ps = &plan->stages[index];
    int64_t rows, blocks, last;
    size_t start = plan->nvalues, full_end;
    struct diag_list quiet;
    uint64_t ignored;

    if (!over) {
        diag_error(d, s->foreach_line, s->foreach_col, NULL,
                   "foreach: '%s' is used before anything binds it", s->foreach_over);
        eval_stage(plan, index, d, reads, 0, allocated);
        return;
    }
    if (over->poisoned) {
        eval_stage(plan, index, d, reads, 0, allocated);
        return;
    }
    if (over->meta.kind != TR_VALUE_TENSOR || over->meta.ndim == 0) {
        diag_error(d, s->foreach_line, s->foreach_col, NULL,
                   "foreach: '%s' must be a tensor of at least one dimension", over->name);
        eval_stage(plan, index, d, reads, 0, allocated);
        return;
    }
    rows = over->meta.shape[0];
    blocks = rows == 0 ? 0 : (rows + s->foreach_size - 1) / s->foreach_size;
    last = rows - (blocks > 0 ? (blocks - 1) * s->foreach_size : 0);
    ps->foreach_blocks = blocks;
    eval_stage(plan, index, d, reads, rows < s->foreach_size ? rows : s->foreach_size, allocated);
    full_end = plan->nvalues;
    if (blocks < 2 || last == s->foreach_size)
        last = -1; /* every block as long as the first */
    if (last >= 0) {
        diag_init(&quiet, d->path, NULL, 0);
        eval_stage(plan, index, &quiet, reads, last, &ignored);
        diag_free(&quiet);
    }
    /* join along dimension 0 what depends on the block */
    for (size_t i = start; i < full_end; i++) {
        struct plan_value *v = &plan->values[i];
        const struct plan_value *tail = last >= 0 ? &plan->values[full_end + (i - start)] : v;
        if (!v->depends_on_block || v->poisoned || v->meta.kind != TR_VALUE_TENSOR)
            continue;
        if (v->meta.ndim == 0)
            continue; /* refused when kept: see check_keeps */
        v->meta.shape[0] = v->meta.shape[0] * (blocks > 0 ? blocks - (last >= 0) : 0) +
                           (last >= 0 && tail->meta.kind == TR_VALUE_TENSOR ? tail->meta.shape[0] : 0);
        v->bytes = tensor_bytes(&v->meta);
    }
    plan->nvalues = full_end;
}

/* ------------------------------------------------------------ liveness */

static bool contains(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* Which values outlive each stage: those a later stage reads before
 * binding them again, those an output writes, and those kept. */
static void liveness(struct plan *plan, struct reads *reads, struct diag_list *d)
{
    struct pipeline *p = plan->pipeline;
    size_t cap = plan->nvalues + p->noutputs + 1;
    const char **demand = calloc(cap, sizeof *demand), **next = calloc(cap, sizeof *next);
    size_t ndemand = 0;

    if (!demand || !next)
        goto done;
    for (size_t o = 0; o < p->noutputs; o++)
        if (!contains(demand, ndemand, p->outputs[o].name))
            demand[ndemand++] = p->outputs[o].name;
    for (int s = (int)plan->nstages - 1; s >= 0; s--) {
        struct plan_stage *ps = &plan->stages[s];
        const struct stage *st = ps->stage;
        size_t end = ps->first_value + ps->nvalues, nnext = 0;
        ps->live = arena_alloc(plan, (ndemand + st->nkeep + 1) * sizeof *ps->live);
        ps->nlive = 0;
        for (size_t k = 0; k < ndemand + st->nkeep && ps->live; k++) {
            const char *name = k < ndemand ? demand[k] : st->keep[k - ndemand].name;
            const struct plan_value *v = find(plan, name, end);
            if (!v) {
                if (k >= ndemand)
                    diag_error(d, st->keep[k - ndemand].line, st->keep[k - ndemand].col, NULL,
                               "stage '%s' keeps '%s', which nothing binds", st->name, name);
                continue;
            }
            if (v->input || v->param || contains(ps->live, ps->nlive, name))
                continue;
            if (k >= ndemand && v->depends_on_block && v->meta.kind == TR_VALUE_TENSOR &&
                v->meta.ndim == 0)
                diag_error(d, st->keep[k - ndemand].line, st->keep[k - ndemand].col,
                           "give it a dimension, e.g. with unsqueeze(x, 0)",
                           "a kept value that depends on the foreach block needs a dimension "
                           "to join the blocks along; '%s' has none", name);
            ps->live[ps->nlive++] = name;
            ps->live_bytes += v->bytes;
        }
        /* before this stage: what it reads, and what is demanded of it
         * that it does not bind itself */
        for (size_t k = 0; k < ndemand; k++) {
            bool bound_here = false;
            for (size_t i = ps->first_value; i < end && !bound_here; i++)
                bound_here = strcmp(plan->values[i].name, demand[k]) == 0;
            if (!bound_here)
                next[nnext++] = demand[k];
        }
        for (size_t k = 0; k < reads[s].count; k++)
            if (!contains(next, nnext, reads[s].names[k]))
                next[nnext++] = reads[s].names[k];
        memcpy(demand, next, nnext * sizeof *demand);
        ndemand = nnext;
    }
done:
    free(demand);
    free(next);
}

/* ------------------------------------------------------------ outputs */

static void check_outputs(struct plan *plan, struct diag_list *d)
{
    struct pipeline *p = plan->pipeline;

    for (size_t o = 0; o < p->noutputs; o++) {
        const struct output *out = &p->outputs[o];
        const struct plan_value *v = find(plan, out->name, plan->nvalues);
        enum tio_format format = out->format;

        if (!out->path)
            continue; /* the schema has reported it */
        if (!v) {
            char hint[512];
            diag_error(d, out->line, out->col, unbound_hint(plan, out->name, hint, sizeof hint),
                       "output '%s' names a value that nothing binds", out->name);
            continue;
        }
        if (v->poisoned)
            continue;
        if (v->unsupported) {
            diag_error(d, out->line, out->col, NULL,
                       "output '%s' is an input of dtype %s, which tensorrun cannot write",
                       out->name, v->unsupported_dtype);
            continue;
        }
        p->outputs[o].as_text =
            out->text_if_scalar &&
            (v->meta.kind == TR_VALUE_INT || v->meta.kind == TR_VALUE_FLOAT ||
             v->meta.kind == TR_VALUE_BOOL || (v->meta.kind == TR_VALUE_TENSOR && v->meta.ndim == 0));
        if (out->as_text)
            continue;
        if (v->meta.kind != TR_VALUE_TENSOR &&
            fold_stored_dtype(&v->meta, v->meta.items) == TR_DTYPE_COUNT) {
            diag_error(d, out->line, out->col,
                       "a number, a boolean or a list of them is written as a tensor",
                       "output '%s' is %s, not a tensor", out->name,
                       v->param ? "a param" : "a constant");
            continue;
        }
        /* an unknown format, and bf16 asked for a .npy, are the schema's to
         * report; a value that turns out bf16 is this check's */
        if (format == TIO_FORMAT_NPY && out->dtype == TR_DTYPE_COUNT &&
            v->meta.dtype == TR_DTYPE_BF16)
            diag_error(d, out->line, out->col, "cast it (dtype: f32), or write .safetensors",
                       "output '%s' is bf16, which .npy cannot hold", out->name);
    }
}

/* ------------------------------------------------------------ the plan */

struct plan *plan_build(struct pipeline *p, struct diag_list *d, bool for_run)
{
    struct plan *plan = calloc(1, sizeof *plan);
    struct reads *reads;
    uint64_t carried = 0;

    if (!plan)
        return NULL;
    plan->pipeline = p;
    plan->stages = calloc(p->nstages ? p->nstages : 1, sizeof *plan->stages);
    reads = calloc(p->nstages ? p->nstages : 1, sizeof *reads);
    if (!plan->stages || !reads) {
        free(reads);
        plan_free(plan);
        return NULL;
    }
    plan->nstages = p->nstages;
    bind_params(plan);
    open_inputs(plan, d, for_run);
    for (size_t s = 0; s < p->nstages; s++) {
        struct plan_stage *ps = &plan->stages[s];
        uint64_t allocated = 0;
        bool cuda;
        ps->stage = &p->stages[s];
        ps->device = stage_device(p, ps->stage, &cuda);
        if (ps->device.kind == TR_DEV_CUDA && !tr_device_available(ps->device))
            diag_warning(d, ps->stage->line, ps->stage->col,
                         p->has_force_device ? NULL
                                             : "--force-device cpu runs every stage on the CPU",
                         "stage '%s' is to run on CUDA, which is not available here (%s); "
                         "running it will fail",
                         ps->stage->name ? ps->stage->name : "?", tr_cuda_unavailable_reason());
        ps->first_value = plan->nvalues;
        if (ps->stage->has_foreach)
            eval_foreach(plan, (int)s, d, &reads[s], &allocated);
        else
            eval_stage(plan, (int)s, d, &reads[s], 0, &allocated);
        ps->nvalues = plan->nvalues - ps->first_value;
        ps->peak_bytes = allocated;
    }
    check_outputs(plan, d);
    liveness(plan, reads, d);
    /* what each stage holds at once: what came in alive, plus everything
     * its scope allocates until it ends */
    for (size_t s = 0; s < plan->nstages; s++) {
        plan->stages[s].peak_bytes += carried;
        if (plan->stages[s].peak_bytes > plan->peak_bytes)
            plan->peak_bytes = plan->stages[s].peak_bytes;
        carried = plan->stages[s].live_bytes;
    }
    for (size_t s = 0; s < p->nstages; s++) {
        struct plan_stage *ps = &plan->stages[s];
        ps->reads = arena_alloc(plan, (reads[s].count + 1) * sizeof *ps->reads);
        if (ps->reads && reads[s].count > 0) {
            memcpy(ps->reads, reads[s].names, reads[s].count * sizeof *ps->reads);
            ps->nreads = reads[s].count;
        }
        free(reads[s].names);
    }
    free(reads);
    return plan;
}

void plan_free(struct plan *plan)
{
    if (!plan)
        return;
    for (size_t i = 0; i < plan->ninputs; i++)
        tio_close(plan->inputs[i].file);
    free(plan->inputs);
    free(plan->values);
    free(plan->stages);
    while (plan->arena) {
        struct plan_arena *next = plan->arena->next;
        free(plan->arena);
        plan->arena = next;
    }
    free(plan);
}

/* ------------------------------------------------------------ printing */

void plan_print(const struct plan *plan, FILE *out)
{
    const struct pipeline *p = plan->pipeline;
    char a[200], b[32], dev[TR_DEVICE_NAME_MAX];
    size_t peak_stage = 0;

    fprintf(out, "pipeline %s%s%s%s (format %d)\n", p->path, p->name ? " \"" : "",
            p->name ? p->name : "", p->name ? "\"" : "", p->version);
    if (p->nparams)
        fprintf(out, "params:\n");
    for (size_t i = 0; i < p->nparams; i++) {
        const struct plan_value *v = find(plan, p->params[i].name, plan->nvalues);
        fprintf(out, "  %-16s %s\n", p->params[i].name, v ? describe(&v->meta, a, sizeof a) : "?");
    }
    if (plan->ninputs)
        fprintf(out, "inputs (mapped inputs are read in place, not pool memory):\n");
    for (size_t i = 0; i < plan->ninputs; i++) {
        const struct plan_input *in = &plan->inputs[i];
        const struct tio_entry *e = in->file ? tio_file_entry(in->file, in->index) : NULL;
        fprintf(out, "  %-16s %-24s %s%s%s%s\n", in->input->name,
                e ? (e->supported ? describe(&in->meta, a, sizeof a) : e->dtype_text) : "?",
                in->input->path, in->mapped_bytes ? ", mapped " : "",
                in->mapped_bytes ? tr_format_bytes(in->mapped_bytes, b, sizeof b) : "",
                e && !e->supported ? " (unsupported dtype)" : "");
    }
    for (size_t s = 0; s < plan->nstages; s++) {
        const struct plan_stage *ps = &plan->stages[s];
        fprintf(out, "stage %zu \"%s\" on %s", s + 1, ps->stage->name ? ps->stage->name : "?",
                tr_device_format(ps->device, dev, sizeof dev));
        if (ps->stage->has_foreach)
            fprintf(out, ", foreach %s by %lld rows (%lld block%s)", ps->stage->foreach_over,
                    (long long)ps->stage->foreach_size, (long long)ps->foreach_blocks,
                    ps->foreach_blocks == 1 ? "" : "s");
        fprintf(out, ":\n");
        for (size_t i = ps->first_value; i < ps->first_value + ps->nvalues; i++) {
            const struct plan_value *v = &plan->values[i];
            if (v->poisoned)
                fprintf(out, "  %-16s (error)\n", v->name);
            else
                fprintf(out, "  %-16s %-24s %s\n", v->name, describe(&v->meta, a, sizeof a),
                        v->bytes ? tr_format_bytes(v->bytes, b, sizeof b) : "");
        }
        fprintf(out, "  keeps:");
        for (size_t k = 0; k < ps->nlive; k++)
            fprintf(out, " %s", ps->live[k]);
        fprintf(out, "%s (%s)\n", ps->nlive ? "" : " nothing",
                tr_format_bytes(ps->live_bytes, b, sizeof b));
        fprintf(out, "  largest live: %s\n", tr_format_bytes(ps->peak_bytes, b, sizeof b));
        if (ps->peak_bytes > plan->stages[peak_stage].peak_bytes)
            peak_stage = s;
    }
    if (p->noutputs)
        fprintf(out, "outputs:\n");
    for (size_t o = 0; o < p->noutputs; o++) {
        const struct output *out_ = &p->outputs[o];
        const struct plan_value *v = find(plan, out_->name, plan->nvalues);
        struct tr_value meta = v ? v->meta : (struct tr_value){0};
        if (out_->dtype != TR_DTYPE_COUNT)
            meta.dtype = out_->dtype;
        fprintf(out, "  %-16s %-24s -> %s%s%s\n", out_->name,
                v && !v->poisoned ? describe(&meta, a, sizeof a) : "?", out_->path,
                out_->key ? " key " : "", out_->key ? out_->key : "");
    }
    fprintf(out, "total: largest live %s", tr_format_bytes(plan->peak_bytes, b, sizeof b));
    if (plan->nstages)
        fprintf(out, " (stage \"%s\")", plan->stages[peak_stage].stage->name);
    fprintf(out, ", mapped %s\n", tr_format_bytes(plan->mapped_bytes, b, sizeof b));
}
