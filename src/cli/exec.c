/*
 * exec.c - running a program (tensorrun-pipeline(5), EXECUTION).
 *
 * The executor knows nothing of the expression language: it runs the
 * instructions the lowering made (program.h), one tr_op_run each, and
 * releases every value after the instruction the liveness pass says is its
 * last use.  Inputs are loaded as views of their mappings into a run
 * scope; each stage opens a scope of its own and ends by keeping exactly
 * what the liveness pass says later stages need, giving the pool's idle
 * cache back (unless keep_cache) and printing its line of statistics.
 * An output's file is written by its write instruction, or computed in
 * place when the place pass gave its value that destination; the files are
 * renamed into place together once every stage has succeeded.
 */
#include "config.h"

#include "exec_impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fold.h"
#include "liveness.h"
#include "msg.h"
#include "print.h"
#include "tensor_reader.h"
#include "progress.h"
#include "tensorrun_fused.h"

double exec_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ outputs */

static const char *output_key(const struct output *out)
{
    return out->key ? out->key : out->name;
}

static int open_outputs(struct exec *x)
{
    const struct program *prog = x->prog;

    x->files = calloc(prog->ngroups ? prog->ngroups : 1, sizeof *x->files);
    if (!x->files)
        return EXIT_OOM;
    for (size_t g = 0; g < prog->ngroups; g++) {
        const struct output *out = &x->p->outputs[prog->groups[g].members[0]];
        struct tio_write_options wo = {.format = out->format,
                                       .compression = out->compression,
                                       .threads = x->o->threads,
                                       .fsync = x->o->fsync};
        x->files[g].file = tio_output_open(out->path, &wo);
        if (!x->files[g].file) {
            msg_error(out->path, "output '%s': %s", out->name, tr_last_error());
            return exit_for_status(tr_last_status());
        }
    }
    return EXIT_OK;
}

/* A constant output (2 + 3, x.shape) as the tensor it is written as:
 * rank 0 for a number, rank 1 for a list (fold_stored_dtype). */
static struct tr_tensor *constant_tensor(const struct tr_value *value)
{
    bool list = value->kind == TR_VALUE_LIST;
    size_t n = list ? value->count : 1;
    const struct tr_value *items = list ? value->items : value;
    union { int64_t i64; double f64; uint8_t b; } *data = calloc(n ? n : 1, sizeof *data);
    struct tr_tensor *t = NULL;
    enum tr_dtype dtype;

    if (!data) {
        tr_set_error(TR_ERR_OOM, "out of memory writing a constant");
        return NULL;
    }
    dtype = fold_stored_dtype(value, items);
    if (dtype == TR_DTYPE_COUNT) {
        tr_set_error(TR_ERR_STATE, "this constant cannot be written as a tensor");
        free(data);
        return NULL;
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
    free(data);
    return t;
}

/* Writes group g's file from its members' values (the write instruction
 * in), each converted to its output's dtype as it is written; a constant
 * is made a tensor first (the memory pass counts both, memory.h). */
static tr_status write_group(struct exec *x, const struct instr *in)
{
    const struct output_group *g = &x->prog->groups[in->group];
    const struct output *outs = x->p->outputs;
    const char **names = calloc(g->nmembers, sizeof *names);
    const struct tr_tensor **tensors = calloc(g->nmembers, sizeof *tensors);
    struct tr_tensor **constants = calloc(g->nmembers, sizeof *constants);
    tr_status s = TR_OK;

    if (!names || !tensors || !constants) {
        s = tr_set_error(TR_ERR_OOM, "out of memory writing %s", g->path);
        goto done;
    }
    for (size_t i = 0; i < g->nmembers && s == TR_OK; i++) {
        const struct output *out = &outs[g->members[i]];
        uint32_t id = in->wargs[i];
        names[i] = g->nmembers > 1 || out->format == TIO_FORMAT_SAFETENSORS ? output_key(out) : NULL;
        tensors[i] = x->tensors[id];
        if (!tensors[i]) {
            constants[i] = constant_tensor(&x->prog->values[id].meta);
            tensors[i] = constants[i];
            if (!constants[i])
                s = tr_last_status();
        }
    }
    if (s == TR_OK)
        s = tio_output_write_each(x->files[in->group].file, g->nmembers, names, tensors,
                                  g->dtypes, NULL);
    if (s == TR_OK) {
        x->files[in->group].written = true;
        x->written_bytes += tio_output_bytes(x->files[in->group].file);
    }
done:
    for (size_t i = 0; constants && i < g->nmembers; i++)
        tr_release(constants[i]);
    free(names);
    free(tensors);
    free(constants);
    return s;
}

static int commit_outputs(struct exec *x)
{
    /* the last chance to find an input that changed under the run */
    if (check_inputs_unchanged() != EXIT_OK)
        return EXIT_IO;
    hold_interrupts();
    for (size_t i = 0; i < x->prog->ngroups; i++) {
        if (tio_output_commit(x->files[i].file) != TR_OK) {
            if (strcmp(x->prog->groups[i].path, "-") == 0)
                exit_if_stdout_closed();
            msg_error(x->prog->groups[i].path, "%s", tr_last_error());
            return exit_for_status(tr_last_status());
        }
    }
    return EXIT_OK;
}

static void close_outputs(struct exec *x)
{
    for (size_t i = 0; i < x->prog->ngroups; i++) {
        tio_output_close(x->files[i].file);
    }
    free(x->files);
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

/* ------------------------------------------------------------ arguments */

/* An operand as the engine takes it: a constant (lists item by item), a
 * value's tensor, or a list of such arguments; free with free_arg. */
static bool operand_arg(const struct exec *x, const struct operand *o, struct tr_arg *arg)
{
    struct tr_arg *items;

    memset(arg, 0, sizeof *arg);
    switch (o->kind) {
    case OPERAND_VALUE: {
        const struct value *v = &x->prog->values[o->value];
        struct tr_tensor *t = x->tensors[o->value];
        if (!t) {
            arg->value = v->meta; /* a builtin's number */
            return true;
        }
        arg->tensor = t;
        arg->value = tr_value_of(t);
        arg->value.weak = v->meta.weak;
        return true;
    }
    case OPERAND_LIST:
        arg->value = o->meta;
        items = calloc(o->count ? o->count : 1, sizeof *items);
        arg->items = items;
        arg->value.count = 0;
        if (!items)
            return false;
        for (size_t i = 0; i < o->count; i++) {
            if (!operand_arg(x, &o->items[i], &items[i]))
                return false;
            arg->value.count = i + 1;
        }
        return true;
    default:
        return constant_arg(&o->meta, arg);
    }
}

static void free_arg(struct tr_arg *arg)
{
    for (size_t i = 0; arg->items && i < arg->value.count; i++)
        free_arg((struct tr_arg *)&arg->items[i]);
    free((void *)arg->items);
}

/* ------------------------------------------------------------ instructions */

/* The result checked against what the lowering typed: a mismatch is a bug
 * of tensorrun's, not of the pipeline. */
static tr_status check_result(const struct exec *x, const struct value *v,
                              const struct tr_tensor *t)
{
    const struct tr_value *meta = x->last_block && v->has_last ? &v->last_meta : &v->meta;
    const int64_t *shape = tr_tensor_shape(t);
    bool same = tr_tensor_dtype(t) == meta->dtype && tr_tensor_ndim(t) == meta->ndim;

    for (int d = 0; same && d < meta->ndim; d++)
        same = shape[d] == meta->shape[d];
    if (same)
        return TR_OK;
    return tr_set_error(TR_ERR_STATE, "internal error: a result is not what validate typed it as");
}

static tr_status run_op(struct exec *x, size_t at)
{
    const struct instr *in = &x->prog->instrs[at];
    struct tr_arg args[TR_OP_MAX_PARAMS];
    struct tr_tensor *out[TR_OP_MAX_RESULTS] = {NULL}, *file = NULL;
    struct tr_sink sink;
    struct tr_dest dest = {NULL, NULL};
    const struct operand *operands = x->last_block && in->last_args ? in->last_args : in->args;
    tr_status s = TR_OK;
    int n = 0;

    for (; n < in->nargs && s == TR_OK; n++)
        if (!operand_arg(x, &operands[n], &args[n]))
            s = tr_set_error(TR_ERR_OOM, "out of memory passing %s its arguments", in->op->name);
    if (s == TR_OK && in->into_join) {
        dest.tensor = x->join_rows ? x->join_rows[in->results[0]] : NULL;
        if (!dest.tensor)
            s = tr_set_error(TR_ERR_STATE, "internal error: %s was to be computed into the "
                                           "rows of a joined value outside its blocks",
                             in->op->name);
    } else if (s == TR_OK && in->dest_group >= 0) {
        const struct value *v = &x->prog->values[in->results[0]];
        struct tio_output *f = x->files[in->dest_group].file;
        file = tio_output_map(f, v->meta.dtype, v->meta.ndim, v->meta.shape);
        sink = tio_output_sink(f);
        dest.tensor = file;
        dest.sink = &sink;
    } else if (s == TR_OK && in->in_place >= 0) {
        /* the memory pass found this argument's memory free to take (x * 2 + 1
         * needs one buffer); another handle of it would be a bug of that pass */
        dest.tensor = args[in->in_place].tensor;
        if (!dest.tensor || !tr_tensor_is_sole_handle(dest.tensor))
            s = tr_set_error(TR_ERR_STATE, "internal error: %s was to be computed in the "
                                           "memory of a value still in use", in->op->name);
    }
    if (s == TR_OK)
        s = tr_op_run_on(in->op, args, x->prog->values[in->results[0]].meta.device,
                         dest.tensor ? &dest : NULL, out);
    tr_release(file);
    for (int i = 0; i < n; i++)
        free_arg(&args[i]);
    for (int r = 0; s == TR_OK && r < in->nresults; r++)
        s = check_result(x, &x->prog->values[in->results[r]], out[r]);
    for (int r = 0; r < in->nresults; r++) {
        if (s == TR_OK)
            x->tensors[in->results[r]] = out[r];
        else
            tr_release(out[r]);
    }
    return s;
}

/* A fused chain: one pass over its inputs, straight into its output file
 * when the place pass said so and the file's blocks can be reserved. */
static tr_status run_fused(struct exec *x, size_t at)
{
    const struct instr *in = &x->prog->instrs[at];
    struct tr_tensor *inputs[TR_FUSED_MAX_INPUTS], *dest = NULL, *out = NULL;
    tr_status s;

    for (int k = 0; k < in->nfinputs; k++)
        inputs[k] = x->tensors[in->finputs[k]];
    if (in->into_join) {
        /* a handle of the block's rows of its joined whole */
        if (!x->join_rows || !x->join_rows[in->results[0]])
            return tr_set_error(TR_ERR_STATE, "internal error: a fused group was to be computed "
                                              "into the rows of a joined value outside its blocks");
        dest = tr_index_view(x->join_rows[in->results[0]], NULL, 0);
        if (!dest)
            return tr_last_status();
    } else if (in->dest_group >= 0 && !in->chain->has_tail) {
        /* streamed into the file: nothing of the result's size anywhere
         * (an empty result has no mapping: it is made as usual) */
        struct tio_output *file = x->files[in->dest_group].file;
        const struct value *v = &x->prog->values[in->results[0]];
        struct tr_sink sink = tio_output_sink(file);
        dest = tio_output_map(file, v->meta.dtype, v->meta.ndim, v->meta.shape);
        if (dest) {
            s = tr_fused_run_sink(in->chain, inputs, &sink);
            if (s == TR_OK)
                x->tensors[in->results[0]] = dest; /* the file's, as if streamed there */
            else
                tr_release(dest);
            return s;
        }
    }
    if (in->dest_group >= 0 && !dest) {
        const struct value *v = &x->prog->values[in->results[0]];
        struct tio_output *file = x->files[in->dest_group].file;
        dest = tio_output_map(file, v->meta.dtype, v->meta.ndim, v->meta.shape);
        if (dest && tio_output_reserve(file) != 0) {
            tr_release(dest); /* the disk cannot take it: the pool serves */
            dest = NULL;
        }
    }
    s = tr_fused_run(in->chain, inputs, dest, &out);
    tr_release(dest);
    if (s == TR_OK)
        s = check_result(x, &x->prog->values[in->results[0]], out);
    if (s == TR_OK)
        x->tensors[in->results[0]] = out;
    else
        tr_release(out);
    return s;
}

/* A subscript's operand as a description: a builtin's number as it is now. */
static struct tr_value subscript_value(const struct exec *x, const struct operand *o)
{
    return o->kind == OPERAND_VALUE ? x->prog->values[o->value].meta : o->meta;
}

/* base[subscripts]: NumPy basic indexing, a view (tr_index_view). */
static tr_status run_index(struct exec *x, size_t at)
{
    const struct instr *in = &x->prog->instrs[at];
    const struct subscript *subscripts = x->last_block && in->last_subs ? in->last_subs : in->subs;
    struct tr_value subs[TR_MAX_DIMS * 4 + 1], bounds[TR_MAX_DIMS * 4 + 1][3];
    struct tr_tensor *t;

    if (in->nsubs > sizeof subs / sizeof subs[0])
        return tr_set_error(TR_ERR_INDEX, "too many indices (%zu)", in->nsubs);
    for (size_t i = 0; i < in->nsubs; i++) {
        const struct subscript *sub = &subscripts[i];
        memset(&subs[i], 0, sizeof subs[i]);
        switch (sub->kind) {
        case SUB_ELLIPSIS:
            subs[i].kind = TR_VALUE_STRING;
            subs[i].string = "...";
            break;
        case SUB_NEWAXIS:
            subs[i].kind = TR_VALUE_NONE;
            break;
        case SUB_SLICE:
            for (int k = 0; k < 3; k++)
                bounds[i][k] = subscript_value(x, &sub->part[k]);
            subs[i].kind = TR_VALUE_LIST;
            subs[i].count = 3;
            subs[i].items = bounds[i];
            break;
        default:
            subs[i] = subscript_value(x, &sub->part[0]);
            break;
        }
    }
    t = tr_index_view(x->tensors[in->args[0].value], subs, in->nsubs);
    if (!t)
        return tr_last_status();
    if (check_result(x, &x->prog->values[in->results[0]], t) != TR_OK) {
        tr_release(t);
        return tr_last_status();
    }
    x->tensors[in->results[0]] = t;
    return TR_OK;
}

/* Releases what dies after in; within a foreach stage's blocks, only what
 * the block makes (the rest dies after the last block, exec_foreach). */
static void release_dead(struct exec *x, const struct instr *in)
{
    for (size_t i = 0; i < in->ndies; i++) {
        if ((x->block_stage >= 0 &&
             !liveness_block_local(x->prog, (size_t)x->block_stage, in->dies[i])) ||
            (x->held && stage_over_index(x->held, in->dies[i]) >= 0))
            continue;
        tr_release(x->tensors[in->dies[i]]);
        x->tensors[in->dies[i]] = NULL;
    }
}

static int write_failed(struct exec *x, const struct instr *in)
{
    const char *path = x->prog->groups[in->group].path;

    if (check_inputs_unchanged() != EXIT_OK)
        return EXIT_IO;
    if (strcmp(path, "-") == 0)
        exit_if_stdout_closed();
    msg_error(path, "%s", tr_last_error());
    return exit_for_status(tr_last_status());
}

/* ------------------------------------------------------------ inputs */

static int load_inputs(struct exec *x)
{
    for (size_t v = 0; v < x->prog->nvalues; v++) {
        const struct value *pv = &x->prog->values[v];
        struct plan_input *pi;
        if (pv->origin != ORIGIN_INPUT)
            continue;
        pi = &x->plan->inputs[pv->input];
        if (pv->streamed) {
            /* its foreach stage reads it a block at a time from the file */
            x->read_bytes += tio_file_entry(pi->file, pi->index)->nbytes;
            continue;
        }
        x->tensors[v] = tio_file_load(pi->file, pi->index);
        if (check_inputs_unchanged() != EXIT_OK)
            return EXIT_IO;
        if (!x->tensors[v]) {
            msg_error(pi->input->path, "input '%s': %s", pi->input->name, tr_last_error());
            return exit_for_status(tr_last_status());
        }
        x->read_bytes += tio_file_entry(pi->file, pi->index)->nbytes;
        pi->data_offset = tio_file_entry(pi->file, pi->index)->offset;
        /* the tensor keeps what it needs of the file (its mapping) */
        tio_close(pi->file);
        pi->file = NULL;
        if (pv->last_use == LIVE_UNUSED) {
            tr_release(x->tensors[v]);
            x->tensors[v] = NULL;
        }
    }
    return EXIT_OK;
}

/* ------------------------------------------------------------ stages */

static void stage_failed(const struct exec *x, const struct stage *st, const struct instr *in)
{
    char place[64 + 4096];

    msg_error(NULL, "stage '%s': %s", st->name, tr_last_error());
    snprintf(place, sizeof place, "%s:%d:%d", x->p->path, in->line, in->col);
    msg_note(place, "in this statement of stage '%s'", st->name);
}

/* A block's values of in that are joined and were not computed into
 * their rows: copied there (views, multi-result ops, ops that make their
 * own result). */
static tr_status fill_joins(struct exec *x, const struct instr *in)
{
    for (int r = 0; x->join_rows && r < in->nresults; r++) {
        struct tr_tensor *rows = x->join_rows[in->results[r]];
        tr_status s;
        /* computed into its rows (a kernel may still have made its own,
         * were the rows not what it can write: then it is copied too) */
        if (!rows || (r == 0 && in->into_join &&
                      tr_tensor_data(x->tensors[in->results[r]]) == tr_tensor_data(rows)))
            continue;
        s = tr_copy_into(rows, x->tensors[in->results[r]]);
        if (s != TR_OK)
            return s;
    }
    return TR_OK;
}

/* Whether the accelerator of the auto stage running has run out of
 * memory since the stage began. */
static bool device_ran_out(const struct exec *x)
{
    struct tr_memory_stats now;

    return x->fall_device.kind != TR_DEV_CPU && tr_memory_stats(x->fall_device, &now) == TR_OK &&
           now.oom_count > x->fall_ooms;
}

int exec_instr(struct exec *x, const struct stage *st, size_t at)
{
    const struct instr *in = &x->prog->instrs[at];
    tr_status ran = TR_OK;
    int status;

    /* what an output has been given cannot be taken back */
    if (in->kind == INSTR_WRITE || in->dest_group >= 0 || in->into_join)
        exec_no_fall_back(x, "it has given an output its values already");
    if (in->kind == INSTR_WRITE) {
        if (write_group(x, in) != TR_OK)
            return write_failed(x, in);
        release_dead(x, in);
        return EXIT_OK;
    }
    if (in->fused_into >= 0) {
        release_dead(x, in); /* its chain runs it */
        return EXIT_OK;
    }
    ran = in->kind == INSTR_INDEX   ? run_index(x, at)
          : in->kind == INSTR_FUSED ? run_fused(x, at)
                                    : run_op(x, at);
    if (ran == TR_OK)
        ran = fill_joins(x, in);
    /* an input that changed under the instruction makes its result (or
     * its failure) meaningless */
    status = check_inputs_unchanged();
    if (status != EXIT_OK)
        return status;
    if (ran != TR_OK) {
        status = exit_for_status(tr_last_status());
        if (status == EXIT_OOM && exec_may_fall_back(x)) {
            x->failed_at = at;
            return EXEC_FALL_BACK;
        }
        stage_failed(x, st, in);
        if (status == EXIT_OOM && x->no_fall_back && device_ran_out(x))
            msg_note(NULL, "the stage cannot run again on the CPU: %s", x->no_fall_back);
        return status;
    }
    release_dead(x, in);
    return EXIT_OK;
}

static void note_statement(const struct exec *x, const struct stage *st, int k, double t0)
{
    const struct statement *s = st->statements[k];
    char place[4200], t[32];

    snprintf(place, sizeof place, "%s:%d:%d", x->p->path, s->line, s->col);
    msg_note(place, "stage '%s', statement %d: %s", st->name, k + 1,
             report_format_time(exec_now_ms() - t0, t, sizeof t));
}

/* The devices stage s uses: its own, and the CPU (inputs, transfers,
 * writes) when that is another; returns how many. */
static size_t stage_devices(const struct exec *x, size_t s, struct tr_device *out)
{
    out[0] = x->prog->stages[s].device;
    if (out[0].kind == TR_DEV_CPU)
        return 1;
    out[1] = TR_CPU;
    return 2;
}

static void note_peak(struct exec *x, struct tr_device device, uint64_t peak)
{
    for (size_t i = 0; i < x->ndevices; i++) {
        if (tr_device_equal(x->devices[i], device)) {
            if (peak > x->device_peaks[i])
                x->device_peaks[i] = peak;
            return;
        }
    }
}

/* Whether the stage's peak on device is the memory pass's; with
 * TENSORRUN_CHECK_MEMORY set (the test suite sets it for every run), a
 * difference is an error, so that every test checks the promise. */
static int check_peak(const struct exec *x, size_t s, struct tr_device device, uint64_t peak)
{
    const struct program_stage *st = &x->prog->stages[s];
    char dev[TR_DEVICE_NAME_MAX];

    if (!x->check_memory)
        return EXIT_OK;
    for (size_t k = 0; k < st->nmemory; k++) {
        if (!tr_device_equal(st->memory[k].device, device) || st->memory[k].peak_bytes == peak)
            continue;
        msg_error(NULL, "internal error: stage '%s' peaked at %llu bytes of pool memory on %s, "
                        "and validate said %llu (TENSORRUN_CHECK_MEMORY)",
                  x->plan->stages[s].stage->name, (unsigned long long)peak,
                  tr_device_format(device, dev, sizeof dev),
                  (unsigned long long)st->memory[k].peak_bytes);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

/* The same for what came before the first stage: the inputs' opening
 * (plan_build, after run_loaded reset the peak), their loading and the
 * writes before the stages. */
static int check_before_stages(const struct exec *x)
{
    struct tr_memory_stats st;

    if (!x->check_memory || tr_memory_stats(TR_CPU, &st) != TR_OK ||
        st.peak_active_bytes == x->prog->before.peak_bytes)
        return EXIT_OK;
    msg_error(NULL, "internal error: before the stages, the pool peaked at %llu bytes on cpu, "
                    "and validate said %llu (TENSORRUN_CHECK_MEMORY)",
              (unsigned long long)st.peak_active_bytes,
              (unsigned long long)x->prog->before.peak_bytes);
    return EXIT_RUNTIME;
}

/* A stage's line of statistics for device: what its pool did since before. */
static int report_device(struct exec *x, size_t s, struct tr_device device,
                         const struct tr_memory_stats *before, const char **kept, size_t nkept,
                         double start)
{
    const struct stage *st = x->plan->stages[s].stage;
    struct tr_memory_stats after;
    struct stage_report r;

    memset(&r, 0, sizeof r);
    tr_memory_stats(device, &after);
    r.stage = st->name;
    r.index = (int)s;
    r.device = device;
    r.peak_active_bytes = after.peak_active_bytes;
    r.active_bytes = after.active_bytes;
    r.cached_bytes = after.cached_bytes;
    r.pending_bytes = after.pending_bytes;
    r.released_bytes = st->keep_cache || x->o->keep_cache ? 0 : tr_release_cached(device);
    r.alloc_count = after.alloc_count - before->alloc_count;
    r.cache_hit_count = after.cache_hit_count - before->cache_hit_count;
    r.kept = kept;
    r.nkept = nkept;
    r.blocks = st->has_foreach ? x->prog->stages[s].nblocks : -1;
    r.shard_k = x->p->shard_k;
    r.shard_n = x->p->shard_n;
    r.wall_ms = exec_now_ms() - start;
    x->released_bytes += r.released_bytes;
    if (device.kind == TR_DEV_CPU && r.peak_active_bytes > x->peak_bytes)
        x->peak_bytes = r.peak_active_bytes;
    note_peak(x, device, r.peak_active_bytes);
    report_stage(&x->report, &r);
    return check_peak(x, s, device, r.peak_active_bytes);
}

/* Whether stage s reads a stream a block at a time: what it has read is
 * gone. */
static bool reads_stream(const struct program *prog, size_t s)
{
    for (size_t c = 0; c < prog->stages[s].nover; c++)
        if (prog->values[prog->stages[s].over[c]].streamed)
            return true;
    return false;
}

/* Whether the stage's failure is its accelerator running out of memory
 * (then, in why, the error) rather than an error it would also have on
 * the CPU. */
static bool ran_out(struct exec *x, size_t s, char *why, size_t size)
{
    if (!device_ran_out(x)) {
        stage_failed(x, x->plan->stages[s].stage, &x->prog->instrs[x->failed_at]);
        return false;
    }
    snprintf(why, size, "%s", tr_last_error());
    return true;
}

static int run_stage(struct exec *x, size_t s)
{
    const struct plan_stage *ps = &x->plan->stages[s];
    const struct program_stage *pst = &x->prog->stages[s];
    const struct stage *st = ps->stage;
    struct tr_memory_stats before[2];
    char why[1024];
    bool fall_back = false;
    struct tr_device devices[2];
    size_t ndevices = stage_devices(x, s, devices), nkept = 0;
    struct tr_scope *scope;
    struct tr_tensor **keep;
    const char **kept;
    size_t nkeep = 0;
    double start = exec_now_ms(), t0 = start;
    int status = EXIT_OK;

    for (size_t d = 0; d < ndevices; d++) {
        tr_memory_reset_peak(devices[d]);
        tr_memory_stats(devices[d], &before[d]);
    }
    tr_set_matmul_tf32(st->matmul_high);
    x->fall_device = pst->automatic ? pst->device : TR_CPU;
    x->fall_ooms = before[0].oom_count;
    x->no_fall_back = NULL;
    if (reads_stream(x->prog, s))
        exec_no_fall_back(x, "it reads a stream a block at a time, and what it read is gone");
    progress_stage(x->progress, st->name, st->nstatements);
    scope = tr_scope_begin();
    if (!scope) {
        msg_error(NULL, "stage '%s': %s", st->name, tr_last_error());
        return exit_for_status(tr_last_status());
    }
    if (pst->nover > 0)
        status = exec_foreach(x, s);
    for (size_t i = pst->first; pst->nover == 0 && i < pst->first + pst->count &&
                                status == EXIT_OK;
         i++) {
        int k = x->prog->instrs[i].statement;
        status = exec_instr(x, st, i);
        if (status != EXIT_OK)
            break;
        if (i + 1 == pst->first + pst->count || x->prog->instrs[i + 1].statement != k) {
            if (x->o->verbosity > 0)
                note_statement(x, st, k, t0);
            progress_step(x->progress, (size_t)k + 1);
            t0 = exec_now_ms();
        }
    }
    if (status == EXEC_FALL_BACK) {
        fall_back = ran_out(x, s, why, sizeof why);
        status = fall_back ? EXIT_OK : EXIT_OOM;
    }
    x->no_fall_back = NULL;
    x->fall_device = TR_CPU;
    /* what the stage made and later stages need moves to the run's scope
     * (nothing, when it runs again) */
    keep = calloc(pst->nkeeps + 1, sizeof *keep);
    kept = calloc(pst->nkeeps + 1, sizeof *kept);
    for (size_t i = 0; keep && kept && i < pst->nkeeps; i++) {
        const struct value *v = &x->prog->values[pst->keeps[i]];
        if (!x->tensors[pst->keeps[i]] || fall_back)
            continue;
        if (v->stage == (int)s)
            keep[nkeep++] = x->tensors[pst->keeps[i]];
        if (v->origin != ORIGIN_INPUT && v->name)
            kept[nkept++] = v->name;
    }
    if (!keep || !kept) {
        status = EXIT_OOM;
        nkeep = 0;
    }
    if (tr_scope_end(scope, keep, nkeep) != TR_OK && status == EXIT_OK) {
        msg_error(NULL, "stage '%s': %s", st->name, tr_last_error());
        status = EXIT_RUNTIME;
    }
    /* the scope released what it did not keep */
    for (size_t v = 0; v < x->prog->nvalues; v++) {
        bool kept_here = false;
        if (x->prog->values[v].stage != (int)s || !x->tensors[v])
            continue;
        for (size_t i = 0; i < nkeep && !kept_here; i++)
            kept_here = keep[i] == x->tensors[v];
        if (!kept_here)
            x->tensors[v] = NULL;
    }
    free(keep);
    progress_done(x->progress);
    if (fall_back && status == EXIT_OK) {
        free(kept);
        status = exec_fall_back(x, s, devices[0], why);
        return status == EXIT_OK ? run_stage(x, s) : status;
    }
    for (size_t d = 0; d < ndevices && status == EXIT_OK; d++)
        status = report_device(x, s, devices[d], &before[d], kept, nkept, start);
    free(kept);
    return status;
}

/* ------------------------------------------------------------ the run */

static int print_value(struct exec *x, uint32_t id, FILE *out)
{
    struct tr_arg arg;

    if (check_inputs_unchanged() != EXIT_OK)
        return EXIT_IO;
    memset(&arg, 0, sizeof arg);
    if (x->tensors[id]) {
        /* text is made on the host */
        arg.tensor = tr_to(x->tensors[id], TR_CPU);
        if (!arg.tensor) {
            msg_error(NULL, "%s", tr_last_error());
            return exit_for_status(tr_last_status());
        }
        arg.value = tr_value_of(arg.tensor);
    } else if (!constant_arg(&x->prog->values[id].meta, &arg)) {
        free_constant_arg(&arg);
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    print_arg(&arg, out);
    if (!arg.tensor)
        free_constant_arg(&arg);
    tr_release(arg.tensor);
    return EXIT_OK;
}

static int refuse_unrunnable(const struct exec *x)
{
    for (size_t s = 0; s < x->plan->nstages; s++) {
        const struct plan_stage *ps = &x->plan->stages[s];
        char dev[TR_DEVICE_NAME_MAX];
        /* a device without a kernel for an op is the plan's error */
        if (ps->device.kind == TR_DEV_CPU || tr_device_available(ps->device))
            continue;
        tr_device_format(ps->device, dev, sizeof dev);
        msg_error(NULL, "stage '%s' is to run on %s, which is not available here (%s)",
                  ps->stage->name, dev, tr_device_unavailable_reason(ps->device));
        msg_hint("run it on the CPU: --force-device cpu (every stage), or device: cpu in "
                 "the stage");
        return EXIT_RUNTIME;
    }
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
    run.wall_ms = exec_now_ms() - start;
    run.peak_active_bytes = x->peak_bytes;
    run.ndevices = x->ndevices;
    memcpy(run.devices, x->devices, sizeof run.devices);
    memcpy(run.device_peaks, x->device_peaks, sizeof run.device_peaks);
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
    run.shard_k = x->p->shard_k;
    run.shard_n = x->p->shard_n;
    report_run(&x->report, &run);
    free(names);
    free(paths);
}

int exec_run(struct plan *plan, const struct run_options *o)
{
    struct exec x;
    struct tr_scope *run_scope;
    double start = exec_now_ms();
    int status;

    memset(&x, 0, sizeof x);
    x.plan = plan;
    x.prog = plan->program;
    x.p = plan->pipeline;
    x.o = o;
    x.check_memory = getenv("TENSORRUN_CHECK_MEMORY") && *getenv("TENSORRUN_CHECK_MEMORY");
    x.block_stage = -1;
    x.held = NULL;
    if (!drop_behind_threshold(&x.drop_behind))
        return EXIT_USAGE;
    status = refuse_unrunnable(&x);
    if (status != EXIT_OK)
        return status;
    x.tensors = calloc(x.prog->nvalues ? x.prog->nvalues : 1, sizeof *x.tensors);
    if (!x.tensors) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    tr_set_num_threads(o->threads);
    x.devices[x.ndevices++] = TR_CPU;
    for (size_t s = 0; s < x.prog->nstages; s++) {
        bool seen = false;
        for (size_t d = 0; d < x.ndevices && !seen; d++)
            seen = tr_device_equal(x.devices[d], x.prog->stages[s].device);
        if (!seen && x.ndevices < REPORT_MAX_DEVICES)
            x.devices[x.ndevices++] = x.prog->stages[s].device;
    }
    for (size_t d = 0; d < x.ndevices; d++) {
        if (tr_memory_set_limit(x.devices[d], memory_limit_of(&o->limits, x.devices[d])) !=
            TR_OK) {
            msg_error(NULL, "%s", tr_last_error());
            free(x.tensors);
            return EXIT_RUNTIME;
        }
    }
    report_init(&x.report, o->stats_out, o->stats, name_width(plan));
    run_scope = tr_scope_begin();
    if (!run_scope) {
        msg_error(NULL, "%s", tr_last_error());
        free(x.tensors);
        return EXIT_OOM;
    }
    status = open_outputs(&x);
    if (status == EXIT_OK)
        status = load_inputs(&x);
    for (size_t i = 0; i < x.prog->nprologue && status == EXIT_OK; i++)
        status = exec_instr(&x, NULL, i);
    if (status == EXIT_OK)
        status = check_before_stages(&x);
    if (status == EXIT_OK)
        x.progress = progress_start(o->progress, stderr);
    for (size_t s = 0; s < plan->nstages && status == EXIT_OK; s++)
        status = run_stage(&x, s);
    progress_stop(x.progress);
    if (status == EXIT_OK && o->print_name) {
        const struct plan_value *v = plan_lookup(x.plan, o->print_name);
        status = v ? print_value(&x, v->value, o->print_out) : EXIT_RUNTIME;
    }
    for (size_t i = 0; i < x.p->noutputs && status == EXIT_OK; i++)
        if (x.p->outputs[i].as_text)
            status = print_value(&x, x.prog->outputs[i], stdout);
    tr_scope_end(run_scope, NULL, 0);
    free(x.tensors);
    if (status == EXIT_OK)
        status = commit_outputs(&x);
    close_outputs(&x);
    if (status == EXIT_OK) {
        for (size_t d = 0; d < x.ndevices; d++)
            x.released_bytes += o->keep_cache ? 0 : tr_release_cached(x.devices[d]);
        report_total(&x, start);
    }
    plan_free(x.own_plan);
    return status;
}
