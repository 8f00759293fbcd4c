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

#include "auto.h"
#include "fold.h"
#include "foreach.h"
#include "fuse.h"
#include "liveness.h"
#include "lower.h"
#include "memory.h"
#include "place.h"
#include "msg.h"

/* ------------------------------------------------------------ arena */

/* Lists, strings and name tables live in the program's arena, freed with
 * it. */
static void *arena_alloc(struct plan *plan, size_t bytes)
{
    return program_alloc(plan->program, bytes);
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

struct plan_value *plan_bind(struct plan *plan, const char *name, int stage, int line, int col)
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
    v->value = VALUE_NONE;
    return v;
}

struct plan_value *plan_find(const struct plan *plan, const char *name, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (strcmp(plan->values[i].name, name) == 0)
            return &plan->values[i];
    return NULL;
}

const struct plan_value *plan_lookup(const struct plan *plan, const char *name)
{
    return plan_find(plan, name, plan->nvalues);
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
const char *plan_unbound_hint(const struct plan *plan, const char *name, char *hint,
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

uint64_t plan_tensor_bytes(const struct tr_value *v)
{
    uint64_t n = 1;

    if (v->kind != TR_VALUE_TENSOR)
        return 0;
    for (int i = 0; i < v->ndim; i++)
        n *= (uint64_t)v->shape[i];
    return tr_memory_block_size(n * tr_dtype_size(v->dtype));
}

char *plan_describe(const struct tr_value *v, char *buf, size_t size)
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
                     plan_describe(&v->items[i], item, sizeof item));
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

/* The program's value for binding v of an input (origin ORIGIN_INPUT, the
 * pipeline's input number input) or a param (ORIGIN_CONSTANT). */
static uint32_t binding_value(struct plan *plan, const struct plan_value *v,
                              enum value_origin origin, size_t input)
{
    struct value pv;

    memset(&pv, 0, sizeof pv);
    pv.meta = v->meta;
    pv.origin = origin;
    pv.name = v->name;
    pv.line = v->line;
    pv.col = v->col;
    pv.stage = -1;
    pv.input = input;
    return program_add_value(plan->program, &pv);
}

/* Whether a foreach stage names input in as what it cuts into blocks
 * (its data is then read when the program says how: plan_stream_inputs). */
static bool cut_into_blocks(const struct pipeline *p, const struct input *in)
{
    for (size_t s = 0; s < p->nstages; s++)
        for (size_t c = 0; p->stages[s].has_foreach && c < p->stages[s].nover; c++)
            if (strcmp(p->stages[s].foreach_over[c].name, in->name) == 0)
                return true;
    return false;
}

/* The tensor of input i, from its file (opened into pi->file), or from
 * src when there is one; NULL after reporting why there is none. */
static const struct tio_entry *input_entry(const struct pipeline *p, struct plan_input *pi,
                                           size_t i, struct tio_entry *entry,
                                           const struct plan_input_source *src,
                                           struct diag_list *d, bool for_run)
{
    const struct input *in = pi->input;
    struct tio_open_options oo = {.format = in->format, .raw = in->has_raw ? &in->raw : NULL,
                                  .header_only = !for_run,
                                  .defer_data = for_run && cut_into_blocks(p, in)};
    ptrdiff_t which = 0;

    if (src) {
        const char *why = "no such tensor";
        memset(entry, 0, sizeof *entry);
        if (src->describe(src->ctx, i, in, entry, &why))
            return entry;
        diag_error_code(d, 4, in->path_line, in->path_col, NULL, "input '%s': %s: %s", in->name,
                        in->path, why);
        return NULL;
    }
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
        return NULL;
    }
    if (in->key)
        which = find_key(in, pi->file, d);
    else if (tio_file_count(pi->file) != 1)
        which = several_tensors(in, pi->file, d);
    if (which < 0)
        return NULL;
    pi->index = (size_t)which;
    pi->mapped_bytes = tio_file_mapped_bytes(pi->file)
                           ? tio_file_entry(pi->file, pi->index)->nbytes : 0;
    return tio_file_entry(pi->file, pi->index);
}

static void open_inputs(struct plan *plan, struct diag_list *d, bool for_run,
                        const struct plan_input_source *src)
{
    struct pipeline *p = plan->pipeline;

    plan->inputs = calloc(p->ninputs ? p->ninputs : 1, sizeof *plan->inputs);
    if (!plan->inputs)
        return;
    plan->ninputs = p->ninputs;
    for (size_t i = 0; i < p->ninputs; i++) {
        const struct input *in = &p->inputs[i];
        struct plan_input *pi = &plan->inputs[i];
        struct plan_value *v = plan_bind(plan, in->name, -1, in->line, in->col);
        struct tio_entry entry;
        const struct tio_entry *e;

        pi->input = in;
        if (!v)
            return;
        v->input = true;
        v->poisoned = true;
        if (!in->path)
            continue; /* the schema has reported it */
        e = input_entry(p, pi, i, &entry, src, d, for_run);
        if (!e)
            continue;
        plan->mapped_bytes += pi->mapped_bytes;
        v->poisoned = false;
        if (!e->supported) {
            v->unsupported = true;
            v->unsupported_dtype = arena_strdup(plan, e->dtype_text);
            pi->unsupported = v->unsupported_dtype;
            continue;
        }
        v->meta.kind = TR_VALUE_TENSOR;
        v->meta.dtype = e->dtype;
        v->meta.ndim = e->ndim;
        memcpy(v->meta.shape, e->shape, sizeof e->shape);
        v->meta.device = TR_CPU;
        /* Fortran order is viewed as it lies */
        v->meta.strided = !tr_strides_are_contiguous(e->ndim, e->shape, e->strides);
        if (v->meta.strided)
            memcpy(v->meta.strides, e->strides, sizeof e->strides);
        pi->meta = v->meta;
        v->value = binding_value(plan, v, ORIGIN_INPUT, i);
        if (v->value != VALUE_NONE && pi->file) {
            plan->program->values[v->value].stream_bytes = tio_file_stream_bytes(pi->file);
            plan->program->values[v->value].copy_bytes = tio_file_copy_bytes(pi->file, pi->index);
        }
        v->poisoned = v->value == VALUE_NONE;
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
        struct plan_value *v = plan_bind(plan, param->name, -1, param->line, param->col);
        if (!v)
            return;
        v->param = true;
        if (!param_meta(plan, param, &v->meta)) {
            v->poisoned = true; /* out of memory */
            continue;
        }
        v->value = binding_value(plan, v, ORIGIN_CONSTANT, 0);
        v->poisoned = v->value == VALUE_NONE;
    }
}

/* ------------------------------------------------------------ liveness */

/* ------------------------------------------------------------ keeps */

/* Each stage's keep: names, as the values they name when the stage ends. */
static void check_keeps(struct plan *plan, struct diag_list *d)
{
    struct program *prog = plan->program;

    for (size_t s = 0; s < plan->nstages; s++) {
        const struct plan_stage *ps = &plan->stages[s];
        const struct stage *st = ps->stage;
        struct program_stage *pst = &prog->stages[s];
        pst->kept = program_alloc(prog, (st->nkeep + 1) * sizeof *pst->kept);
        for (size_t k = 0; pst->kept && k < st->nkeep; k++) {
            const char *name = st->keep[k].name;
            const struct plan_value *v = plan_find(plan, name, ps->first_value + ps->nvalues);
            if (!v) {
                diag_error(d, st->keep[k].line, st->keep[k].col, NULL,
                           "stage '%s' keeps '%s', which nothing binds", st->name, name);
                continue;
            }
            if (v->input || v->param || v->poisoned || v->value == VALUE_NONE)
                continue;
            if (v->depends_on_block && v->meta.kind == TR_VALUE_TENSOR && v->meta.ndim == 0)
                diag_error(d, st->keep[k].line, st->keep[k].col,
                           "give it a dimension, e.g. with unsqueeze(x, 0)",
                           "a kept value that depends on the foreach block needs a dimension "
                           "to join the blocks along; '%s' has none", name);
            pst->kept[pst->nkept++] = v->value;
        }
    }
}

/* ------------------------------------------------------------ outputs */

static void check_outputs(struct plan *plan, struct diag_list *d)
{
    struct pipeline *p = plan->pipeline;

    for (size_t o = 0; o < p->noutputs; o++) {
        const struct output *out = &p->outputs[o];
        const struct plan_value *v = plan_find(plan, out->name, plan->nvalues);
        enum tio_format format = out->format;

        if (!out->path)
            continue; /* the schema has reported it */
        if (!v) {
            char hint[512];
            diag_error(d, out->line, out->col, plan_unbound_hint(plan, out->name, hint, sizeof hint),
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
        if (v->depends_on_block && (v->meta.kind != TR_VALUE_TENSOR || v->meta.ndim == 0)) {
            diag_error(d, out->line, out->col,
                       "give it a dimension in its stage, e.g. with unsqueeze(x, 0), so that "
                       "the blocks' values are joined",
                       "output '%s' is made from each foreach block and has no dimension to "
                       "join the blocks along", out->name);
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

/* A stage's device: what the stage or the pipeline says, --force-device
 * over both; *automatic when that is auto, which is lowered on the CPU
 * and placed once the stage's work is known (auto_place). */
static struct tr_device stage_device(const struct pipeline *p, const struct stage *s,
                                     bool *automatic)
{
    bool has = s->has_device || p->has_device;
    struct tr_device d = s->has_device ? s->device : p->device;

    *automatic = !p->has_force_device &&
                 (!has || (s->has_device ? s->device_auto : p->device_auto));
    if (*automatic)
        d = TR_CPU;
    if (p->has_force_device)
        d = p->force_device; /* --force-device: whatever the stage says */
    return d;
}

/* auto_place over the plan's program, which names the stages. */
static bool place_automatic(struct plan *plan, const bool *pinned, struct diag_list *d)
{
    const char **names = calloc(plan->nstages + 1, sizeof *names);

    if (!names)
        return false;
    for (size_t s = 0; s < plan->nstages; s++)
        names[s] = plan->stages[s].stage->name ? plan->stages[s].stage->name : "?";
    auto_place(plan->program, names, pinned, d);
    for (size_t s = 0; s < plan->nstages; s++)
        plan->stages[s].device = plan->program->stages[s].device;
    free(names);
    return true;
}

/* A value joined from a foreach stage's blocks whose shorter last block
 * has another dtype or other dimensions past the first (x.T, where
 * dimension 1 is the block's length) cannot be joined: exit 3. */
static void check_joins(struct plan *plan, struct diag_list *d)
{
    const struct program *prog = plan->program;

    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        char full[200], last[200];
        if (!pv->ragged || pv->join == JOIN_NONE)
            continue;
        diag_error(d, pv->line, pv->col,
                   "make dimension 0 the one that follows the block's rows, or choose a "
                   "foreach size that divides them",
                   "'%s' is %s in the full blocks and %s in the last one: the blocks cannot "
                   "be joined along dimension 0",
                   pv->name ? pv->name : "this value", plan_describe(&pv->meta, full, sizeof full),
                   plan_describe(&pv->last_meta, last, sizeof last));
    }
}

static void note_read(uint32_t value, void *ctx)
{
    ((bool *)ctx)[value] = true;
}

/* Whether input value v is read by anything but the blocks of the one
 * foreach stage s that cuts it (an instruction, an output, a stage's
 * keep:, the printed values, another stage's blocks, the block itself
 * kept or written whole). */
static bool read_elsewhere(const struct program *prog, size_t s, uint32_t v, const bool *read)
{
    const struct program_stage *st = &prog->stages[s];
    int c = stage_over_index(st, v);

    if (read[v] || prog->values[st->block[c]].join == JOIN_OVER)
        return true;
    for (size_t o = 0; o < prog->noutputs; o++)
        if (prog->outputs[o] == v)
            return true;
    for (size_t f = 0; f < prog->nfinals; f++)
        if (prog->finals[f] == v)
            return true;
    for (size_t t = 0; t < prog->nstages; t++) {
        for (size_t k = 0; k < prog->stages[t].nkept; k++)
            if (prog->stages[t].kept[k] == v)
                return true;
        if (t != s && stage_over_index(&prog->stages[t], v) >= 0)
            return true;
    }
    return false;
}

/* Whether a foreach stage cuts its c-th value twice (two names for one
 * value): one stream cannot give the same rows twice. */
static bool cut_twice(const struct program_stage *st, size_t c)
{
    for (size_t k = 0; k < st->nover; k++)
        if (k != c && st->over[k] == st->over[c])
            return true;
    return false;
}

/* The stream inputs (a pipe, .zst) that their foreach stage reads a block
 * at a time into one pool block (value.streamed): what nothing else
 * reads, of rows that are runs of the stream (tio_file_streams_rows).
 * The other streams opened with their data deferred are read whole now,
 * as at their opening.  false when out of memory; a stream that cannot
 * be read is an error in d. */
static bool stream_inputs(struct plan *plan, struct diag_list *d)
{
    struct program *prog = plan->program;
    bool *read = calloc(prog->nvalues + 1, sizeof *read);

    if (!read)
        return false;
    for (size_t i = 0; i < prog->ninstrs; i++)
        instr_reads(&prog->instrs[i], note_read, read);
    for (size_t s = 0; s < prog->nstages; s++) {
        for (size_t c = 0; c < prog->stages[s].nover; c++) {
            struct value *ov = &prog->values[prog->stages[s].over[c]];
            struct plan_input *pi;
            if (ov->origin != ORIGIN_INPUT)
                continue;
            pi = &plan->inputs[ov->input];
            if (!pi->file || !tio_file_streams_rows(pi->file, pi->index) ||
                read_elsewhere(prog, s, prog->stages[s].over[c], read) ||
                cut_twice(&prog->stages[s], c))
                continue;
            ov->streamed = true;
            ov->stream_bytes = 0;
            ov->copy_bytes = 0; /* rows are read into an aligned block, in order */
            plan->inputs[ov->input].streamed = true;
        }
    }
    free(read);
    for (size_t v = 0; v < prog->nvalues; v++) {
        struct value *pv = &prog->values[v];
        const struct plan_input *pi;
        if (pv->origin != ORIGIN_INPUT || pv->streamed)
            continue;
        pi = &plan->inputs[pv->input];
        if (pi->file && tio_file_read_deferred(pi->file) != TR_OK)
            diag_error_code(d, tr_last_status() == TR_ERR_OOM ? 5 : 4, pi->input->path_line,
                            pi->input->path_col, NULL, "input '%s': %s: %s", pi->input->name,
                            pi->input->path, tr_last_error());
    }
    return true;
}

/* Names for what each stage keeps, and the bytes they hold, from the
 * liveness pass. */
static void stage_keeps(struct plan *plan)
{
    const struct program *prog = plan->program;

    for (size_t s = 0; s < plan->nstages; s++) {
        struct plan_stage *ps = &plan->stages[s];
        const struct program_stage *st = &prog->stages[s];
        ps->live = arena_alloc(plan, (st->nkeeps + 1) * sizeof *ps->live);
        for (size_t k = 0; ps->live && k < st->nkeeps; k++) {
            const struct value *v = &prog->values[st->keeps[k]];
            ps->live[ps->nlive++] = v->name ? v->name : "?";
        }
    }
}

/* A stage placed on a device that has no kernel for one of its ops is an
 * error, at the statement: known from the op table whether the device is
 * present or not (the cuda column of ops.def), so that validate tells on
 * any machine.  An auto stage never gets here: it stays on the CPU. */
static void check_kernels(const struct plan *plan, struct diag_list *d)
{
    for (size_t s = 0; s < plan->nstages; s++) {
        const struct plan_stage *ps = &plan->stages[s];
        const struct instr *in;
        char dev[TR_DEVICE_NAME_MAX];
        if (ps->device.kind == TR_DEV_CPU)
            continue;
        in = program_unsupported(plan->program, s, ps->device);
        if (!in)
            continue;
        tr_device_format(ps->device, dev, sizeof dev);
        diag_error(d, in->line, in->col,
                   "run it on the CPU: device: cpu in the stage, or device: auto, which keeps a "
                   "stage on the CPU when the device cannot run it",
                   "stage '%s' is to run on %s, which has no kernel for %s",
                   ps->stage->name ? ps->stage->name : "?", dev, in->op->name);
    }
}

/* For a plan like another (plan_pin_cpu): its inputs' headers. */
static bool describe_like(void *ctx, size_t i, const struct input *in, struct tio_entry *e,
                          const char **why)
{
    const struct plan *like = ctx;
    const struct tr_value *m = &like->inputs[i].meta;
    int64_t stride = 1;

    (void)in;
    if (like->inputs[i].unsupported) {
        snprintf(e->dtype_text, sizeof e->dtype_text, "%s", like->inputs[i].unsupported);
        return true;
    }
    if (m->kind != TR_VALUE_TENSOR) {
        *why = "it was not opened";
        return false;
    }
    e->supported = true;
    e->dtype = m->dtype;
    e->ndim = m->ndim;
    memcpy(e->shape, m->shape, sizeof e->shape);
    for (int d = m->ndim - 1; d >= 0; d--) {
        e->strides[d] = m->strided ? m->strides[d] : stride;
        stride *= m->shape[d];
    }
    e->nbytes = plan_tensor_bytes(m);
    return true;
}

/* The figures of like's inputs that come from their files, which a plan
 * like it has not opened (how they are read, what their loading takes). */
static void inputs_like(struct plan *plan, const struct plan *like)
{
    for (size_t v = 0; v < plan->program->nvalues && v < like->program->nvalues; v++) {
        struct value *pv = &plan->program->values[v];
        const struct value *lv = &like->program->values[v];
        if (pv->origin != ORIGIN_INPUT || lv->origin != ORIGIN_INPUT)
            continue;
        pv->streamed = lv->streamed;
        pv->stream_bytes = lv->stream_bytes;
        pv->copy_bytes = lv->copy_bytes;
        plan->inputs[pv->input].streamed = like->inputs[lv->input].streamed;
    }
    plan->mapped_bytes = like->mapped_bytes;
}

/* For each auto stage placed on an accelerator: its pool peak on the CPU,
 * were it to fall back (plan_pin_cpu; a stage it cannot plan has none,
 * which the fuzzer reports, and the run's fallback says so). */
static void fallback_peaks(struct plan *plan)
{
    for (size_t s = 0; s < plan->nstages; s++) {
        struct program_stage *st = &plan->program->stages[s];
        struct plan *twin;
        if (!st->automatic || st->device.kind == TR_DEV_CPU)
            continue;
        twin = plan_pin_cpu(plan, s);
        if (!twin)
            continue;
        st->has_fallback = true;
        st->fallback_peak_bytes = twin->program->stages[s].memory[0].peak_bytes;
        plan_free(twin);
    }
}

static struct plan *build(struct pipeline *p, struct diag_list *d, bool for_run,
                          const struct plan_input_source *src, const bool *pinned,
                          const struct plan *like)
{
    struct plan *plan = calloc(1, sizeof *plan);

    if (!plan)
        return NULL;
    plan->pipeline = p;
    plan->stages = calloc(p->nstages ? p->nstages : 1, sizeof *plan->stages);
    plan->program = program_new(p->nstages, p->noutputs);
    if (!plan->stages || !plan->program) {
        plan_free(plan);
        return NULL;
    }
    plan->nstages = p->nstages;
    plan->pinned = calloc(p->nstages + 1, sizeof *plan->pinned);
    if (!plan->pinned) {
        plan_free(plan);
        return NULL;
    }
    for (size_t s = 0; pinned && s < p->nstages; s++)
        plan->pinned[s] = pinned[s];
    bind_params(plan);
    open_inputs(plan, d, for_run, src);
    for (size_t s = 0; s < p->nstages; s++) {
        struct plan_stage *ps = &plan->stages[s];
        ps->stage = &p->stages[s];
        ps->device = stage_device(p, ps->stage, &plan->program->stages[s].automatic);
        plan->program->stages[s].device = ps->device;
        if (ps->device.kind != TR_DEV_CPU && !tr_device_available(ps->device)) {
            char dev[TR_DEVICE_NAME_MAX];
            tr_device_format(ps->device, dev, sizeof dev);
            diag_warning(d, ps->stage->line, ps->stage->col,
                         p->has_force_device ? NULL
                                             : "--force-device cpu runs every stage on the CPU",
                         "stage '%s' is to run on %s, which is not available here (%s); "
                         "running it will fail",
                         ps->stage->name ? ps->stage->name : "?",
                         ps->device.kind == TR_DEV_CUDA ? "CUDA" : dev,
                         tr_device_unavailable_reason(ps->device));
        }
        ps->first_value = plan->nvalues;
        lower_stage(plan, (int)s, d);
        ps->nvalues = plan->nvalues - ps->first_value;
    }
    check_outputs(plan, d);
    check_keeps(plan, d);
    if (diag_exit_code(d) == 0) {
        plan->program->nlowered = plan->program->nvalues;
        if (!place_automatic(plan, plan->pinned, d) || !lower_outputs(plan) || !place_transfers(plan->program) ||
            !foreach_run(plan->program) || !place_copies(plan->program) ||
            !fuse_run(plan->program) ||
            !liveness_run(plan->program)) {
            plan_free(plan);
            return NULL;
        }
        place_run(plan->program);
        check_joins(plan, d);
        if (!stream_inputs(plan, d)) {
            plan_free(plan);
            return NULL;
        }
        if (like)
            inputs_like(plan, like);
        /* the kernels' scratch depends on the run's thread count */
        tr_set_num_threads(p->threads);
        if (!memory_run(plan->program, tr_num_threads())) {
            plan_free(plan);
            return NULL;
        }
        stage_keeps(plan);
        check_kernels(plan, d);
        if (!like && diag_exit_code(d) == 0)
            fallback_peaks(plan);
    }
    return plan;
}

struct plan *plan_pin_cpu(const struct plan *plan, size_t s)
{
    struct plan_input_source src = {.describe = describe_like, .ctx = (void *)plan};
    bool *pinned = calloc(plan->nstages + 1, sizeof *pinned);
    struct diag_list d;
    struct plan *twin;

    if (!pinned)
        return NULL;
    memcpy(pinned, plan->pinned, plan->nstages * sizeof *pinned);
    pinned[s] = true;
    diag_init(&d, plan->pipeline->path, NULL, 0);
    twin = build(plan->pipeline, &d, false, &src, pinned, plan);
    free(pinned);
    if (twin && diag_exit_code(&d) != 0) {
        plan_free(twin);
        twin = NULL;
    }
    diag_free(&d);
    return twin;
}

void plan_hand_inputs(struct plan *from, struct plan *to)
{
    for (size_t i = 0; i < from->ninputs && i < to->ninputs; i++) {
        to->inputs[i].file = from->inputs[i].file;
        to->inputs[i].index = from->inputs[i].index;
        to->inputs[i].data_offset = from->inputs[i].data_offset;
        from->inputs[i].file = NULL;
    }
}

struct plan *plan_build(struct pipeline *p, struct diag_list *d, bool for_run)
{
    return build(p, d, for_run, NULL, NULL, NULL);
}

struct plan *plan_build_from(struct pipeline *p, struct diag_list *d,
                             const struct plan_input_source *src)
{
    return build(p, d, false, src, NULL, NULL);
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
    free(plan->pinned);
    program_free(plan->program);
    free(plan);
}
