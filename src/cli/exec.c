/*
 * exec.c - running a checked plan (tensorrun-pipeline(5), EXECUTION).
 *
 * Inputs are loaded as views of their mappings into a run scope.  Each
 * stage opens a scope of its own; after every statement, a value nothing
 * reads any more is released at once, and an output whose values are all
 * final is written to its temporary file (then it too can go).  When the
 * stage ends, its scope keeps exactly the values still needed, the pool
 * gives its idle cache back (unless keep_cache), and the stage's line of
 * statistics is printed.  Outputs are renamed into place together once
 * every stage has succeeded.
 */
#include "config.h"

#include "exec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fold.h"
#include "interp.h"
#include "msg.h"
#include "print.h"
#include "progress.h"

/* The outputs that go to one destination (one file holds them all). */
struct out_group {
    const char *path;
    size_t first;                /* index of its first output */
    size_t *members;             /* indices into pipeline->outputs */
    size_t nmembers;
    struct tio_output *file;
    bool written;
};

struct exec {
    struct plan *plan;
    struct pipeline *p;
    const struct run_options *o;
    struct env env;
    struct out_group *groups;
    size_t ngroups;
    struct report report;
    struct progress *progress;
    uint64_t read_bytes, written_bytes, released_bytes, peak_bytes;
};

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool contains(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static bool binds(const struct statement *st, const char *name)
{
    for (size_t t = 0; st && t < st->ntargets; t++)
        if (strcmp(st->targets[t], name) == 0)
            return true;
    return false;
}

struct find_read {
    const char *name;
    bool found;
};

static void match_read(const char *name, void *ctx)
{
    struct find_read *f = ctx;

    f->found = f->found || strcmp(f->name, name) == 0;
}

static bool reads(const struct statement *st, const char *name)
{
    struct find_read f = {.name = name};

    if (st)
        interp_reads(st, match_read, &f);
    return f.found;
}

/* ------------------------------------------------------------ outputs */

static const char *output_key(const struct output *out)
{
    return out->key ? out->key : out->name;
}

/* Whether name's current value is the one its outputs write: no later
 * statement binds it again.  Stage s has run up to statement k. */
static bool is_final(const struct exec *x, const char *name, size_t s, size_t k)
{
    const struct plan_value *v = plan_lookup(x->plan, name);
    const struct stage *st;

    if (!v || v->stage < 0 || (size_t)v->stage < s)
        return true;
    if ((size_t)v->stage > s)
        return false;
    st = &x->p->stages[s];
    for (size_t j = k + 1; j < st->nstatements; j++)
        if (binds(st->statements[j], name))
            return false;
    return true;
}

static int open_outputs(struct exec *x)
{
    struct pipeline *p = x->p;

    x->groups = calloc(p->noutputs ? p->noutputs : 1, sizeof *x->groups);
    if (!x->groups)
        return EXIT_OOM;
    for (size_t o = 0; o < p->noutputs; o++) {
        const struct output *out = &p->outputs[o];
        struct out_group *g = NULL;
        if (out->as_text)
            continue; /* printed at the end */
        for (size_t i = 0; i < x->ngroups && !g; i++)
            if (strcmp(x->groups[i].path, out->path) == 0)
                g = &x->groups[i];
        if (!g) {
            struct tio_write_options wo = {.format = out->format,
                                           .compression = out->compression,
                                           .threads = x->o->threads,
                                           .fsync = x->o->fsync};
            g = &x->groups[x->ngroups++];
            g->path = out->path;
            g->first = o;
            g->members = calloc(p->noutputs, sizeof *g->members);
            if (!g->members)
                return EXIT_OOM;
            g->file = tio_output_open(out->path, &wo);
            if (!g->file) {
                msg_error(out->path, "output '%s': %s", out->name, tr_last_error());
                return exit_for_status(tr_last_status());
            }
        }
        g->members[g->nmembers++] = o;
    }
    return EXIT_OK;
}

/* Writes g's file from the current values of its outputs. */
/* A constant output (2 + 3, x.shape) as the tensor it is written as:
 * rank 0 for a number, rank 1 for a list (fold_stored_dtype). */
static struct tr_tensor *constant_tensor(const struct tr_arg *arg)
{
    bool list = arg->value.kind == TR_VALUE_LIST;
    size_t n = list ? arg->value.count : 1;
    struct tr_value *items = calloc(n ? n : 1, sizeof *items);
    union { int64_t i64; double f64; uint8_t b; } *data = calloc(n ? n : 1, sizeof *data);
    struct tr_tensor *t = NULL;
    enum tr_dtype dtype;

    if (!items || !data) {
        tr_set_error(TR_ERR_OOM, "out of memory writing a constant");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        items[i] = list ? arg->items[i].value : arg->value;
    dtype = fold_stored_dtype(&arg->value, items);
    if (dtype == TR_DTYPE_COUNT) {
        tr_set_error(TR_ERR_STATE, "this constant cannot be written as a tensor");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const struct tr_value *v = &items[i];
        double number = v->kind == TR_VALUE_FLOAT ? v->number
                        : v->kind == TR_VALUE_INT ? (double)v->integer
                                                  : v->boolean;
        if (dtype == TR_DTYPE_I64)
            ((int64_t *)data)[i] = v->kind == TR_VALUE_INT ? v->integer : v->boolean;
        else if (dtype == TR_DTYPE_F64)
            ((double *)data)[i] = number;
        else
            ((uint8_t *)data)[i] = v->boolean;
    }
    t = tr_from_data(data, dtype, list ? 1 : 0, (int64_t[]){(int64_t)n}, TR_CPU);
done:
    free(items);
    free(data);
    return t;
}

static tr_status write_group(struct exec *x, struct out_group *g)
{
    const struct output *outs = x->p->outputs;
    const char **names = calloc(g->nmembers, sizeof *names);
    const struct tr_tensor **tensors = calloc(g->nmembers, sizeof *tensors);
    struct tr_tensor **casts = calloc(g->nmembers, sizeof *casts);
    enum tr_dtype dtype = outs[g->members[0]].dtype;
    tr_status s = TR_OK;

    if (!names || !tensors || !casts) {
        s = tr_set_error(TR_ERR_OOM, "out of memory writing %s", g->path);
        goto done;
    }
    /* one dtype for the whole file is converted while writing; outputs of
     * one file with different dtypes are converted first */
    for (size_t i = 1; i < g->nmembers; i++)
        if (outs[g->members[i]].dtype != dtype)
            dtype = TR_DTYPE_COUNT + 1;
    for (size_t i = 0; i < g->nmembers && s == TR_OK; i++) {
        const struct output *out = &outs[g->members[i]];
        const struct binding *b = env_find(&x->env, out->name);
        names[i] = g->nmembers > 1 || out->format == TIO_FORMAT_SAFETENSORS ? output_key(out) : NULL;
        tensors[i] = b ? b->arg.tensor : NULL;
        if (b && !tensors[i]) {
            casts[i] = constant_tensor(&b->arg);
            tensors[i] = casts[i];
            if (!casts[i]) {
                s = tr_last_status();
                break;
            }
        }
        if (!tensors[i]) {
            s = tr_set_error(TR_ERR_STATE, "output '%s' has no tensor to write", out->name);
        } else if (dtype == TR_DTYPE_COUNT + 1 && out->dtype != TR_DTYPE_COUNT) {
            struct tr_tensor *cast = tr_cast(tensors[i], out->dtype);
            tr_release(casts[i]);
            casts[i] = cast;
            tensors[i] = cast;
            if (!cast)
                s = tr_last_status();
        }
    }
    if (s == TR_OK)
        s = tio_output_write(g->file, g->nmembers, names, tensors,
                             dtype == TR_DTYPE_COUNT + 1 ? TR_DTYPE_COUNT : dtype, NULL);
    if (s == TR_OK) {
        g->written = true;
        x->written_bytes += tio_output_bytes(g->file);
    }
done:
    for (size_t i = 0; casts && i < g->nmembers; i++)
        tr_release(casts[i]);
    free(names);
    free(tensors);
    free(casts);
    return s;
}

/* Writes every output whose values are all final.  Stage s has run up to
 * statement k (s = 0, k = -1 before anything runs: inputs only). */
static int write_final_outputs(struct exec *x, size_t s, ptrdiff_t k, bool before)
{
    for (size_t i = 0; i < x->ngroups; i++) {
        struct out_group *g = &x->groups[i];
        bool ready = !g->written;
        for (size_t m = 0; m < g->nmembers && ready; m++) {
            const char *name = x->p->outputs[g->members[m]].name;
            const struct plan_value *v = plan_lookup(x->plan, name);
            ready = before ? v && v->stage < 0 : is_final(x, name, s, (size_t)k) &&
                                                     env_find(&x->env, name);
        }
        if (ready && write_group(x, g) != TR_OK) {
            if (check_inputs_unchanged() != EXIT_OK)
                return EXIT_IO;
            if (strcmp(g->path, "-") == 0)
                exit_if_stdout_closed();
            msg_error(g->path, "%s", tr_last_error());
            return exit_for_status(tr_last_status());
        }
    }
    return EXIT_OK;
}

static int commit_outputs(struct exec *x)
{
    /* the last chance to find an input that changed under the run */
    if (check_inputs_unchanged() != EXIT_OK)
        return EXIT_IO;
    hold_interrupts();
    for (size_t i = 0; i < x->ngroups; i++) {
        if (tio_output_commit(x->groups[i].file) != TR_OK) {
            if (strcmp(x->groups[i].path, "-") == 0)
                exit_if_stdout_closed();
            msg_error(x->groups[i].path, "%s", tr_last_error());
            return exit_for_status(tr_last_status());
        }
    }
    return EXIT_OK;
}

static void close_outputs(struct exec *x)
{
    for (size_t i = 0; i < x->ngroups; i++) {
        tio_output_close(x->groups[i].file);
        free(x->groups[i].members);
    }
    free(x->groups);
}

/* ------------------------------------------------------------ liveness */

/* Whether an output still to be written needs name's current value. */
static bool awaited_by_output(const struct exec *x, const char *name, size_t s, size_t k)
{
    for (size_t o = 0; o < x->p->noutputs; o++)
        if (x->p->outputs[o].as_text && strcmp(x->p->outputs[o].name, name) == 0 &&
            is_final(x, name, s, k))
            return true;
    for (size_t i = 0; i < x->ngroups; i++) {
        const struct out_group *g = &x->groups[i];
        for (size_t m = 0; m < g->nmembers && !g->written; m++)
            if (strcmp(x->p->outputs[g->members[m]].name, name) == 0 && is_final(x, name, s, k))
                return true;
    }
    return false;
}

/* Whether something other than an output reads name's value as statement
 * k of stage s leaves it: a later statement, the stage's keep, or a later
 * stage. */
static bool read_later(const struct exec *x, const char *name, size_t s, size_t k)
{
    const struct stage *st = &x->p->stages[s];

    for (size_t j = k + 1; j < st->nstatements; j++) {
        if (reads(st->statements[j], name))
            return true;
        if (binds(st->statements[j], name))
            return false;
    }
    for (size_t i = 0; i < st->nkeep; i++)
        if (strcmp(st->keep[i].name, name) == 0)
            return true;
    for (size_t t = s + 1; t < x->plan->nstages; t++) {
        const struct plan_stage *later = &x->plan->stages[t];
        if (contains(later->reads, later->nreads, name))
            return true;
        for (size_t j = 0; j < later->stage->nstatements; j++)
            if (binds(later->stage->statements[j], name))
                return false;
    }
    return false;
}

/* Whether name's current value is read after statement k of stage s (k =
 * the stage's last statement at its end), kept by stage s, or awaited by an
 * output. */
static bool needed(const struct exec *x, const char *name, size_t s, size_t k)
{
    return read_later(x, name, s, k) || awaited_by_output(x, name, s, k);
}

/*
 * The mapping of the output file that statement k of stage s can compute
 * its value straight into, in *dest (its sink in *sink), or false: its one target goes only
 * to a file of its own, .npy or raw, uncompressed, in its own dtype, and
 * nothing else reads it.  Such a value never takes pool memory, nor is it
 * copied to be written.
 */
static bool output_mapping(struct exec *x, size_t s, size_t k, struct tr_dest *dest,
                           struct tr_sink *sink)
{
    const struct statement *st = x->p->stages[s].statements[k];
    const char *name = st->ntargets == 1 ? st->targets[0] : NULL;
    const struct plan_value *v = name ? plan_lookup(x->plan, name) : NULL;

    memset(dest, 0, sizeof *dest);
    if (!v || v->meta.kind != TR_VALUE_TENSOR || v->meta.device.kind != TR_DEV_CPU ||
        !is_final(x, name, s, k) || read_later(x, name, s, k))
        return false;
    for (size_t i = 0; i < x->ngroups; i++) {
        struct out_group *g = &x->groups[i];
        const struct output *out = &x->p->outputs[g->members[0]];
        if (g->nmembers == 1 && !g->written && strcmp(out->name, name) == 0 &&
            (out->dtype == TR_DTYPE_COUNT || out->dtype == v->meta.dtype)) {
            dest->tensor = tio_output_map(g->file, v->meta.dtype, v->meta.ndim, v->meta.shape);
            *sink = tio_output_sink(g->file);
            dest->sink = sink;
            return dest->tensor != NULL;
        }
    }
    return false;
}

/* Releases every tensor nothing needs any more. */
static void release_dead(struct exec *x, size_t s, size_t k)
{
    for (size_t i = 0; i < x->env.count;) {
        const struct binding *b = &x->env.items[i];
        if (arg_tensors(&b->arg, NULL) && !needed(x, b->name, s, k))
            env_unbind(&x->env, b->name); /* moves the last binding here */
        else
            i++;
    }
}

/* ------------------------------------------------------------ inputs */

static int load_inputs(struct exec *x)
{
    for (size_t i = 0; i < x->plan->ninputs; i++) {
        struct plan_input *pi = &x->plan->inputs[i];
        const struct input *in = pi->input;
        struct tr_arg arg;

        memset(&arg, 0, sizeof arg);
        arg.tensor = tio_file_load(pi->file, pi->index);
        if (check_inputs_unchanged() != EXIT_OK) {
            tr_release(arg.tensor);
            return EXIT_IO;
        }
        if (!arg.tensor) {
            msg_error(in->path, "input '%s': %s", in->name, tr_last_error());
            return exit_for_status(tr_last_status());
        }
        x->read_bytes += tio_file_entry(pi->file, pi->index)->nbytes;
        /* the tensor keeps what it needs of the file (its mapping) */
        tio_close(pi->file);
        pi->file = NULL;
        arg.value = tr_value_of(arg.tensor);
        if (!env_bind(&x->env, in->name, &arg, -1))
            return EXIT_OOM;
    }
    return EXIT_OK;
}

/* The argument for a constant: a list's items as arguments too (the
 * environment copies lists item by item); free with free_constant_arg. */
static bool constant_arg(const struct tr_value *v, struct tr_arg *arg)
{
    struct tr_arg *items;

    memset(arg, 0, sizeof *arg);
    arg->value = *v;
    if (v->kind != TR_VALUE_LIST)
        return true;
    items = calloc(v->count ? v->count : 1, sizeof *items);
    arg->items = items;
    arg->value.count = 0;
    if (!items)
        return false;
    for (size_t i = 0; i < v->count; i++) {
        if (!constant_arg(&v->items[i], &items[i]))
            return false;
        arg->value.count = i + 1;
    }
    return true;
}

static void free_constant_arg(struct tr_arg *arg)
{
    for (size_t i = 0; arg->items && i < arg->value.count; i++)
        free_constant_arg((struct tr_arg *)&arg->items[i]);
    free((void *)arg->items);
}

static int bind_params(struct exec *x)
{
    for (size_t i = 0; i < x->p->nparams; i++) {
        const struct plan_value *v = NULL;
        struct tr_arg arg;
        for (size_t k = 0; k < x->plan->nvalues && !v; k++)
            if (x->plan->values[k].param && strcmp(x->plan->values[k].name, x->p->params[i].name) == 0)
                v = &x->plan->values[k];
        if (!v)
            continue;
        if (!constant_arg(&v->meta, &arg) || !env_bind(&x->env, v->name, &arg, -1)) {
            free_constant_arg(&arg);
            return EXIT_OOM;
        }
        free_constant_arg(&arg);
    }
    return EXIT_OK;
}

/* ------------------------------------------------------------ stages */

static int refuse_unrunnable(const struct exec *x)
{
    for (size_t s = 0; s < x->plan->nstages; s++) {
        const struct plan_stage *ps = &x->plan->stages[s];
        char dev[TR_DEVICE_NAME_MAX];
        if (ps->stage->has_foreach) {
            msg_error(NULL, "stage '%s': foreach (chunked stages) is checked by this version "
                            "but does not run yet", ps->stage->name);
            msg_hint("run the stage without foreach; chunked execution comes in a later release");
            return EXIT_RUNTIME;
        }
        if (ps->device.kind != TR_DEV_CPU) {
            tr_device_format(ps->device, dev, sizeof dev);
            if (!tr_device_available(ps->device))
                msg_error(NULL, "stage '%s' is to run on %s, which is not available here (%s)",
                          ps->stage->name, dev, tr_cuda_unavailable_reason());
            else
                msg_error(NULL, "stage '%s' is to run on %s, but this version of tensorrun has "
                                "no CUDA kernels yet", ps->stage->name, dev);
            msg_hint("run it on the CPU: --force-device cpu (every stage), or device: cpu in "
                     "the stage");
            return EXIT_RUNTIME;
        }
    }
    return EXIT_OK;
}

static void stage_failed(const struct exec *x, const struct stage *st, const struct expr *at)
{
    char place[64 + 4096];

    msg_error(NULL, "stage '%s': %s", st->name, tr_last_error());
    snprintf(place, sizeof place, "%s:%d:%d", x->p->path, at->line, at->col);
    msg_note(place, "in this statement of stage '%s'", st->name);
}

static int run_stage(struct exec *x, size_t s)
{
    const struct plan_stage *ps = &x->plan->stages[s];
    const struct stage *st = ps->stage;
    struct tr_memory_stats before, after;
    struct stage_report r;
    struct tr_scope *scope;
    struct tr_tensor **keep;
    const char **kept;
    size_t nkeep = 0;
    double start = now_ms();
    int status = EXIT_OK;

    memset(&r, 0, sizeof r);
    tr_memory_reset_peak(TR_CPU);
    tr_memory_stats(TR_CPU, &before);
    progress_stage(x->progress, st->name, st->nstatements);
    scope = tr_scope_begin();
    if (!scope) {
        msg_error(NULL, "stage '%s': %s", st->name, tr_last_error());
        return exit_for_status(tr_last_status());
    }
    for (size_t k = 0; k < st->nstatements && status == EXIT_OK; k++) {
        const struct expr *at = NULL;
        double t0 = now_ms();
        struct tr_dest into;
        struct tr_sink sink;
        bool mapped = output_mapping(x, s, k, &into, &sink);
        tr_status ran;

        ran = interp_statement(&x->env, st->statements[k], (int)s, mapped ? &into : NULL, &at);
        tr_release(into.tensor);
        /* an input that changed under the statement makes its result (or
         * its failure) meaningless */
        status = check_inputs_unchanged();
        if (status != EXIT_OK)
            break;
        if (ran != TR_OK) {
            status = exit_for_status(tr_last_status());
            stage_failed(x, st, at);
            break;
        }
        if (x->o->verbosity > 0) {
            char place[4200], t[32];
            snprintf(place, sizeof place, "%s:%d:%d", x->p->path, st->statements[k]->line,
                     st->statements[k]->col);
            msg_note(place, "stage '%s', statement %zu: %s", st->name, k + 1,
                     report_format_time(now_ms() - t0, t, sizeof t));
        }
        status = write_final_outputs(x, s, (ptrdiff_t)k, false);
        release_dead(x, s, k);
        progress_step(x->progress, k + 1);
    }
    /* what the stage's scope still holds is needed: it moves to the run */
    for (size_t i = 0; i < x->env.count; i++)
        nkeep += arg_tensors(&x->env.items[i].arg, NULL);
    keep = calloc(nkeep + 1, sizeof *keep);
    kept = calloc(x->env.count + 1, sizeof *kept);
    nkeep = 0;
    for (size_t i = 0; keep && kept && i < x->env.count; i++) {
        const struct binding *b = &x->env.items[i];
        size_t n = arg_tensors(&b->arg, keep + nkeep);
        if (b->stage == (int)s)
            nkeep += n;
        if (n && b->stage >= 0)
            kept[r.nkept++] = b->name;
    }
    if (!keep || !kept) {
        status = EXIT_OOM;
        nkeep = 0;
    }
    if (tr_scope_end(scope, keep, nkeep) != TR_OK && status == EXIT_OK) {
        msg_error(NULL, "stage '%s': %s", st->name, tr_last_error());
        status = EXIT_RUNTIME;
    }
    free(keep);
    progress_done(x->progress);
    if (status != EXIT_OK) {
        free(kept);
        return status;
    }
    tr_memory_stats(TR_CPU, &after);
    r.stage = st->name;
    r.index = (int)s;
    r.device = ps->device;
    r.peak_active_bytes = after.peak_active_bytes;
    r.active_bytes = after.active_bytes;
    r.cached_bytes = after.cached_bytes;
    r.released_bytes = st->keep_cache || x->o->keep_cache ? 0 : tr_release_cached(TR_CPU);
    r.alloc_count = after.alloc_count - before.alloc_count;
    r.cache_hit_count = after.cache_hit_count - before.cache_hit_count;
    r.kept = kept;
    r.wall_ms = now_ms() - start;
    x->released_bytes += r.released_bytes;
    if (r.peak_active_bytes > x->peak_bytes)
        x->peak_bytes = r.peak_active_bytes;
    report_stage(&x->report, &r);
    free(kept);
    return EXIT_OK;
}

/* ------------------------------------------------------------ the run */

static int print_value(struct exec *x, const char *name, FILE *out)
{
    const struct binding *b = env_find(&x->env, name);

    if (!b) {
        msg_error(NULL, "'%s' has no value to print", name);
        return EXIT_RUNTIME;
    }
    if (check_inputs_unchanged() != EXIT_OK)
        return EXIT_IO;
    print_arg(&b->arg, out);
    return EXIT_OK;
}

static int name_width(const struct plan *plan)
{
    size_t w = 5;

    for (size_t s = 0; s < plan->nstages; s++)
        if (strlen(plan->stages[s].stage->name) > w)
            w = strlen(plan->stages[s].stage->name);
    return (int)(w > 40 ? 40 : w);
}

static void report_total(struct exec *x, double start)
{
    struct run_report run;
    const char **names = calloc(x->p->noutputs + 1, sizeof *names);
    const char **paths = calloc(x->p->noutputs + 1, sizeof *paths);

    memset(&run, 0, sizeof run);
    run.wall_ms = now_ms() - start;
    run.peak_active_bytes = x->peak_bytes;
    run.released_bytes = x->released_bytes;
    run.mapped_bytes = x->plan->mapped_bytes;
    run.read_bytes = x->read_bytes;
    run.written_bytes = x->written_bytes;
    for (size_t o = 0; names && paths && o < x->p->noutputs; o++) {
        names[run.noutputs] = x->p->outputs[o].name;
        paths[run.noutputs++] = x->p->outputs[o].path;
    }
    run.output_names = names;
    run.output_paths = paths;
    report_run(&x->report, &run);
    free(names);
    free(paths);
}

int exec_run(struct plan *plan, const struct run_options *o)
{
    struct exec x;
    struct tr_scope *run_scope;
    double start = now_ms();
    int status;

    memset(&x, 0, sizeof x);
    x.plan = plan;
    x.p = plan->pipeline;
    x.o = o;
    status = refuse_unrunnable(&x);
    if (status != EXIT_OK)
        return status;
    tr_set_num_threads(o->threads > 0 ? o->threads : 0);
    if (tr_memory_set_limit(TR_CPU, o->memory_limit) != TR_OK) {
        msg_error(NULL, "%s", tr_last_error());
        return EXIT_RUNTIME;
    }
    report_init(&x.report, o->stats_out, o->stats, name_width(plan));
    run_scope = tr_scope_begin();
    if (!run_scope) {
        msg_error(NULL, "%s", tr_last_error());
        return EXIT_OOM;
    }
    status = open_outputs(&x);
    if (status == EXIT_OK)
        status = bind_params(&x);
    if (status == EXIT_OK)
        status = load_inputs(&x);
    if (status == EXIT_OK)
        status = write_final_outputs(&x, 0, -1, true);
    if (status == EXIT_OK)
        x.progress = progress_start(o->progress, stderr);
    for (size_t s = 0; s < plan->nstages && status == EXIT_OK; s++)
        status = run_stage(&x, s);
    progress_stop(x.progress);
    if (status == EXIT_OK && o->print_name)
        status = print_value(&x, o->print_name, o->print_out);
    for (size_t i = 0; i < x.p->noutputs && status == EXIT_OK; i++)
        if (x.p->outputs[i].as_text)
            status = print_value(&x, x.p->outputs[i].name, stdout);
    env_free(&x.env);
    tr_scope_end(run_scope, NULL, 0);
    if (status == EXIT_OK)
        status = commit_outputs(&x);
    close_outputs(&x);
    if (status == EXIT_OK) {
        x.released_bytes += o->keep_cache ? 0 : tr_release_cached(TR_CPU);
        report_total(&x, start);
    }
    return status;
}
