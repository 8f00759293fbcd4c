/*
 * fuzz_pipeline.c - libFuzzer target for the pipeline from its text to its
 * program: YAML tree, schema checks, statements (expr.c), command-line
 * overrides, then the lowering (lower.c), the passes (liveness.c,
 * place.c) and the printouts (program_print.c), with inputs whose headers
 * the fuzzer makes up.  Nothing is ever run, and no file is opened but
 * the pipeline's own.
 *
 * The first byte picks the mode:
 * - below 0x09 (no YAML text starts so): structured.  The next bytes are
 *   the inputs' headers (dtypes, unsupported ones too, ranks 0 to
 *   TR_MAX_DIMS, sizes 0, 1, small, 2^31, 2^32, up to INT64_MAX where a
 *   zero makes the tensor empty), and the rest is read as choices in a
 *   small grammar of pipelines that always parse: statements calling ops
 *   of the op table with any number of positional and keyword arguments,
 *   operators, indexing and slicing, .T and attributes, lists, constants
 *   from the edges of int64 and double, foreach stages, keep:, and
 *   outputs to .npy, .safetensors and raw files under /nonexistent.
 * - anything else: the bytes are the pipeline's YAML, loaded as is and
 *   with a few -D, -i and -o overrides; inputs get fixed f32 headers.
 *
 * What each step promises is checked: a load gives NULL only when the
 * file cannot be read, errors exactly when something is wrong, and
 * without errors a complete struct; a plan without errors has a program
 * whose invariants hold (check_program).  A broken promise aborts, so
 * libFuzzer reports it as a crash.
 *
 * Build with `make fuzz_pipeline` (Makefile.am, FUZZ_TARGETS); run with
 * the corpus and the seeds:
 *
 *   ./fuzz_pipeline -max_total_time=300 -dict=tests/fuzz/pipeline.dict \
 *       CORPUS_DIR tests/fuzz/corpus-pipeline tests/fuzz/seeds-pipeline
 *
 * TR_FUZZ_SHOW=1 ./fuzz_pipeline FILE prints the pipeline a structured
 * input stands for.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pipeline.h"
#include "tensorrun_fused.h"
#include "plan.h"
#include "program_print.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int fd = -1;
static char path[64];
static FILE *sink;

/* A broken promise: said, then abort() for libFuzzer to report. */
static void broken(int line, const char *what)
{
    fprintf(stderr, "fuzz_pipeline.c:%d: broken: %s\n", line, what);
    abort();
}

#define check(cond) ((cond) ? (void)0 : broken(__LINE__, #cond))

static void setup(void)
{
    fd = memfd_create("pipeline.yaml", MFD_CLOEXEC);
    check(fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sink = fopen("/dev/null", "w");
    check(sink != NULL);
}

/* ------------------------------------------------------------ the load */

/* Without errors, everything a later pass reads is there. */
static void check_complete(const struct pipeline *p)
{
    check(p->root && p->version == PIPELINE_FORMAT && p->nstages > 0);
    for (size_t i = 0; i < p->nparams; i++)
        check(p->params[i].name && p->params[i].string);
    for (size_t i = 0; i < p->ninputs; i++) {
        const struct input *in = &p->inputs[i];
        check(in->name && in->path && in->path[0]);
        if (in->has_raw) {
            check(in->format == TIO_FORMAT_RAW && (unsigned)in->raw.dtype < TR_DTYPE_COUNT);
            check(in->raw.ndim >= 0 && in->raw.ndim <= TR_MAX_DIMS && in->raw.offset >= 0);
            for (int d = 0; d < in->raw.ndim; d++)
                check(in->raw.shape[d] >= 0);
        }
    }
    for (size_t i = 0; i < p->nstages; i++) {
        const struct stage *st = &p->stages[i];
        check(st->name && st->nstatements > 0);
        for (size_t j = 0; j < st->nstatements; j++)
            check(st->statements[j] && st->statements[j]->ntargets > 0 &&
                  st->statements[j]->value);
        for (size_t j = 0; j < st->nkeep; j++)
            check(st->keep[j].name != NULL);
        check(!st->has_foreach ||
              (st->nover > 0 && (st->foreach_size > 0) != (st->foreach_bytes > 0)));
        for (size_t j = 0; j < st->nover; j++) {
            check(st->foreach_over[j].name != NULL);
            for (size_t k = 0; k < j; k++)
                check(strcmp(st->foreach_over[j].name, st->foreach_over[k].name) != 0);
        }
    }
    for (size_t i = 0; i < p->noutputs; i++) {
        const struct output *o = &p->outputs[i];
        check(o->name && o->path && o->format != TIO_FORMAT_UNKNOWN);
        check(!(o->dtype == TR_DTYPE_BF16 && o->format == TIO_FORMAT_NPY &&
                o->dtype_line > 0));
    }
}

/* ------------------------------------------------------------ the program */

static void check_meta(const struct tr_value *v)
{
    check((unsigned)v->kind <= TR_VALUE_LIST);
    if (v->kind == TR_VALUE_TENSOR) {
        check((unsigned)v->dtype < TR_DTYPE_COUNT);
        check(v->ndim >= 0 && v->ndim <= TR_MAX_DIMS);
        for (int d = 0; d < v->ndim; d++)
            check(v->shape[d] >= 0);
    }
    if (v->kind == TR_VALUE_LIST) {
        check(v->count == 0 || v->items != NULL);
        for (size_t i = 0; i < v->count; i++)
            check_meta(&v->items[i]);
    }
}

struct reads {
    const struct program *prog;
    size_t at;          /* the instruction reading */
    size_t count;
    bool no_block;      /* it runs once, before a foreach stage's blocks */
};

/* A value read by instruction r->at exists and is made before it. */
static void check_read(uint32_t id, void *ctx)
{
    struct reads *r = ctx;
    const struct program *prog = r->prog;
    const struct instr *in = &prog->instrs[r->at];
    const struct value *v;

    check(id < prog->nvalues);
    v = &prog->values[id];
    r->count++;
    /* made from its own stage's block: a later stage reads it joined */
    check(!r->no_block || !v->depends || v->stage != in->stage);
    switch (v->origin) {
    case ORIGIN_RESULT:
        check(v->def < r->at);
        break;
    case ORIGIN_BUILTIN:
        /* a block, or chunk_start, read in its stage, or joined later */
        check(in->stage >= v->stage);
        if (in->kind == INSTR_WRITE) /* once the blocks' stage has computed */
            for (size_t i = r->at + 1; i < prog->ninstrs; i++)
                check(prog->instrs[i].stage > v->stage || prog->instrs[i].kind == INSTR_WRITE);
        break;
    default:
        break;
    }
    /* nothing is read after its handle is released */
    check(v->last_use == LIVE_FOREVER || (v->last_use != LIVE_UNUSED && v->last_use >= r->at));
}

static void check_operand(const struct program *prog, const struct operand *o)
{
    switch (o->kind) {
    case OPERAND_CONST:
        check_meta(&o->meta);
        break;
    case OPERAND_VALUE:
        check(o->value < prog->nvalues);
        break;
    case OPERAND_LIST:
        check(o->count > 0 && o->items);
        for (size_t i = 0; i < o->count; i++)
            check_operand(prog, &o->items[i]);
        break;
    default:
        check(false);
    }
}

struct find {
    uint32_t id;
    size_t count;
};

static void find_read(uint32_t id, void *ctx)
{
    struct find *f = ctx;

    f->count += id == f->id;
}

/* Whether instruction at reads id. */
static bool reads_value(const struct program *prog, size_t at, uint32_t id)
{
    struct find f = {.id = id};

    instr_reads(&prog->instrs[at], find_read, &f);
    return f.count > 0;
}

static void check_instr(const struct program *prog, size_t i, int stage)
{
    const struct instr *in = &prog->instrs[i];
    struct reads r = {.prog = prog, .at = i};

    check(in->stage == stage);
    check(in->nresults >= 0 && in->nresults <= TR_OP_MAX_RESULTS);
    switch (in->kind) {
    case INSTR_OP:
        check(in->op && in->nargs == in->op->nparams && in->nresults == in->op->nresults);
        for (int a = 0; a < in->nargs; a++)
            check_operand(prog, &in->args[a]);
        break;
    case INSTR_INDEX:
        check(in->nresults == 1);
        check(in->nargs == 1 && in->args[0].kind == OPERAND_VALUE);
        check_operand(prog, &in->args[0]);
        for (size_t s = 0; s < in->nsubs; s++)
            for (int k = 0; k < 3; k++)
                check(in->subs[s].part[k].kind != OPERAND_LIST);
        break;
    case INSTR_WRITE:
        check(in->nresults == 0 && in->group < prog->ngroups);
        check(prog->groups[in->group].write == i);
        check(in->nwargs == prog->groups[in->group].nmembers);
        break;
    case INSTR_FUSED:
        /* a chain: its steps before it, in its stage, fused into it */
        check(in->op && in->chain && in->nresults == 1 && in->fused_into < 0);
        check(in->nfinputs >= 0 && in->nfinputs <= TR_FUSED_MAX_INPUTS);
        check(in->nfinputs == in->chain->ninputs);
        for (int k = 0; k < in->nfinputs; k++)
            check(in->finputs[k] < prog->nvalues &&
                  prog->values[in->finputs[k]].meta.kind == TR_VALUE_TENSOR);
        {
            int steps = 0;
            for (size_t j = 0; j < i; j++)
                steps += prog->instrs[j].fused_into == (ptrdiff_t)i;
            check(steps == in->chain->nsteps - !in->chain->has_tail);
        }
        break;
    default:
        check(false);
    }
    if (in->fused_into >= 0) {
        const struct instr *chain = &prog->instrs[in->fused_into];
        check(in->kind == INSTR_OP && (size_t)in->fused_into > i && chain->kind == INSTR_FUSED &&
              chain->stage == stage && prog->values[in->results[0]].fused);
    }
    for (int k = 0; k < in->nresults; k++) {
        check(in->results[k] < prog->nvalues);
        const struct value *v = &prog->values[in->results[k]];
        check(v->origin == ORIGIN_RESULT && v->def == i && v->stage == stage);
    }
    instr_reads(in, check_read, &r);
    /* what dies here was made by then, is released once, and is read by
     * nothing later */
    for (size_t k = 0; k < in->ndies; k++) {
        uint32_t id = in->dies[k];
        check(id < prog->nvalues);
        const struct value *v = &prog->values[id];
        check(v->last_use == i);
        check(v->origin != ORIGIN_RESULT || v->def <= i);
        for (size_t j = k + 1; j < in->ndies; j++)
            check(in->dies[j] != id);
    }
    /* memory: in place only over an argument that dies here, is read
     * once, and has the result's dtype and shape */
    check(in->in_place >= -1 && in->in_place < in->nargs);
    if (in->in_place >= 0) {
        const struct operand *o = &in->args[in->in_place];
        check(in->kind == INSTR_OP && in->dest_group < 0 && in->fused_into < 0);
        check(o->kind == OPERAND_VALUE && prog->values[o->value].last_use == i);
        const struct value *av = &prog->values[o->value];
        /* a later stage computes over a joined value's whole */
        const struct tr_value *a = av->joined && av->stage != in->stage ? &av->joined_meta
                                                                        : &av->meta;
        const struct tr_value *res = &prog->values[in->results[0]].meta;
        check(a->dtype == res->dtype && a->ndim == res->ndim && !a->strided);
        check(memcmp(a->shape, res->shape, (size_t)a->ndim * sizeof *a->shape) == 0);
        for (int k = 0; k < in->nargs; k++)
            check(k == in->in_place || in->args[k].kind != OPERAND_VALUE ||
                  in->args[k].value != o->value);
        check(prog->values[in->results[0]].block_bytes == 0);
    }
    check(in->dest_group >= -1 && in->dest_group < (ptrdiff_t)prog->ngroups);
    if (in->dest_group >= 0) {
        const struct output_group *g = &prog->groups[in->dest_group];
        uint32_t id = prog->instrs[g->write].wargs[0];
        check((in->kind == INSTR_OP || in->kind == INSTR_FUSED) && !op_is_view(in->op) && g->mappable);
        check(in->results[0] == id && !prog->values[id].kept);
        check(prog->values[id].last_use == g->write);
        for (size_t j = 0; j < prog->ninstrs; j++)
            check(j == g->write || !reads_value(prog, j, id));
    }
}

/* The invariants of a program the passes have annotated (program.h,
 * liveness.h, place.h). */
static void check_program(const struct plan *plan)
{
    const struct program *prog = plan->program;
    const struct pipeline *p = plan->pipeline;
    size_t at;

    check(prog && prog->nstages == p->nstages && prog->noutputs == p->noutputs);
    check(prog->nprologue <= prog->ninstrs && prog->ngroups <= prog->noutputs);
    /* an auto stage on the accelerator can always be planned on the CPU */
    for (size_t s = 0; s < prog->nstages; s++)
        check(!prog->stages[s].automatic || prog->stages[s].device.kind == TR_DEV_CPU ||
              prog->stages[s].has_fallback);
    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        check_meta(&pv->meta);
        check((unsigned)pv->origin <= ORIGIN_BUILTIN);
        if (pv->origin == ORIGIN_RESULT) {
            check(pv->def < prog->ninstrs);
            bool found = false;
            for (int k = 0; k < prog->instrs[pv->def].nresults; k++)
                found |= prog->instrs[pv->def].results[k] == v;
            check(found);
        }
        if (pv->origin == ORIGIN_INPUT)
            check(pv->input < p->ninputs && pv->stage == -1);
        /* a join: of a value made from a foreach stage's block; into a
         * mappable file whose write writes it; the block is its over */
        if (pv->join != JOIN_NONE) {
            check(pv->stage >= 0 && prog->stages[pv->stage].nover > 0 && pv->depends);
            check((pv->join == JOIN_OVER) ==
                  (stage_block_index(&prog->stages[pv->stage], (uint32_t)v) >= 0));
        }
        if (pv->join == JOIN_FILE) {
            check(pv->join_group >= 0 && (size_t)pv->join_group < prog->ngroups &&
                  prog->groups[pv->join_group].mappable);
            check(prog->instrs[prog->groups[pv->join_group].write].wargs[0] == v);
        }
        check(pv->last_use == LIVE_UNUSED || pv->last_use == LIVE_FOREVER ||
              pv->last_use < prog->ninstrs);
        if (pv->last_use == LIVE_UNUSED)
            check((pv->origin != ORIGIN_RESULT || pv->fused) && !pv->kept); /* a chain's step is never made */
        /* a value that dies is in its instruction's dies exactly once */
        if (pv->last_use < prog->ninstrs) {
            const struct instr *in = &prog->instrs[pv->last_use];
            size_t n = 0;
            for (size_t k = 0; k < in->ndies; k++)
                n += in->dies[k] == v;
            check(n == 1);
        }
    }
    for (at = 0; at < prog->nprologue; at++) {
        check(prog->instrs[at].kind == INSTR_WRITE);
        check_instr(prog, at, -1);
    }
    for (size_t s = 0; s < prog->nstages; s++) {
        const struct program_stage *st = &prog->stages[s];
        if (st->count) {
            check(st->first == at && st->first + st->count <= prog->ninstrs);
            for (; at < st->first + st->count; at++)
                check_instr(prog, at, (int)s);
        }
        check(st->nkept == 0 || st->kept);
        for (size_t k = 0; k < st->nkept; k++)
            check(st->kept[k] < prog->nvalues && prog->values[st->kept[k]].kept);
        for (size_t k = 0; k < st->nkeeps; k++) {
            check(st->keeps[k] < prog->nvalues);
            const struct value *v = &prog->values[st->keeps[k]];
            check(v->meta.kind == TR_VALUE_TENSOR && v->last_use != LIVE_UNUSED);
            check(v->last_use == LIVE_FOREVER || v->last_use >= at);
            check(v->origin != ORIGIN_RESULT || v->def < at);
        }
        /* memory: a peak is at least what the stage starts and ends with,
         * reached at the start or by one of its instructions */
        check(st->nmemory >= 1 && st->nmemory <= STAGE_MAX_DEVICES);
        check(tr_device_equal(st->memory[0].device, st->device));
        for (size_t k = 0; k < st->nmemory; k++) {
            const struct stage_memory *m = &st->memory[k];
            check(m->peak_bytes >= m->start_bytes && m->peak_bytes >= m->end_bytes);
            check(m->peak_at == SIZE_MAX ||
                  (m->peak_at >= st->first && m->peak_at < st->first + st->count));
            check(m->peak_at != SIZE_MAX || m->peak_bytes == m->start_bytes);
        }
        /* foreach: the parts in order, nothing once that needs the block,
         * only writes after the blocks */
        if (st->nover == 0) {
            for (size_t i = st->first; i < st->first + st->count; i++)
                check(prog->instrs[i].part == PART_STAGE);
        } else {
            check(st->nonce + st->nblock <= st->count);
            for (size_t i = st->first; i < st->first + st->count; i++) {
                const struct instr *in = &prog->instrs[i];
                size_t k = i - st->first;
                check(in->part == (k < st->nonce                ? PART_ONCE
                                   : k < st->nonce + st->nblock ? PART_BLOCK
                                                                : PART_AFTER));
                check(in->part != PART_AFTER || in->kind == INSTR_WRITE);
                for (int r = 0; in->part == PART_ONCE && r < in->nresults; r++)
                    check(!prog->values[in->results[r]].depends);
                if (in->part == PART_ONCE) {
                    struct reads r = {.prog = prog, .at = i, .no_block = true};
                    instr_reads(in, check_read, &r);
                }
            }
        }
        /* the values cut into blocks outlive every block */
        check(st->nover <= FOREACH_MAX_OVER);
        for (size_t c = 0; c < st->nover; c++) {
            check(st->over[c] < prog->nvalues && st->block[c] < prog->nvalues);
            if (st->count) {
                size_t lu = prog->values[st->over[c]].last_use;
                check(lu == LIVE_FOREVER || lu >= st->first + st->count - 1);
            }
        }
    }
    check(at == prog->ninstrs);
    for (size_t o = 0; o < prog->noutputs; o++)
        check(prog->outputs[o] == VALUE_NONE || prog->outputs[o] < prog->nvalues);
    for (size_t f = 0; f < prog->nfinals; f++) {
        check(prog->finals[f] < prog->nvalues);
        check(prog->values[prog->finals[f]].last_use == LIVE_FOREVER);
    }
    for (size_t g = 0; g < prog->ngroups; g++) {
        const struct output_group *grp = &prog->groups[g];
        check(grp->path && grp->nmembers > 0 && grp->members);
        check(grp->write < prog->ninstrs);
        const struct instr *w = &prog->instrs[grp->write];
        check(w->kind == INSTR_WRITE && w->group == g);
        for (size_t m = 0; m < grp->nmembers; m++) {
            check(grp->members[m] < prog->noutputs);
            uint32_t id = prog->outputs[grp->members[m]];
            check(id != VALUE_NONE && w->wargs[m] < prog->nvalues);
            /* the value itself, or its copy moved to the CPU for the write,
             * or (place_copies) a compact clone of either */
            if (w->wargs[m] != id) {
                uint32_t got = w->wargs[m];
                const struct value *copy = &prog->values[got];
                const struct instr *make = &prog->instrs[copy->def];
                check(copy->origin == ORIGIN_RESULT && copy->meta.device.kind == TR_DEV_CPU &&
                      make->args[0].kind == OPERAND_VALUE);
                if (!make->transfer) {
                    check(make->op->id == TR_OP_CLONE && grp->mappable && !copy->meta.strided);
                    got = make->args[0].value;
                    copy = &prog->values[got];
                    make = got != id ? &prog->instrs[copy->def] : make;
                    check(got == id || copy->origin == ORIGIN_RESULT);
                }
                if (got != id)
                    check(make->transfer && make->args[0].kind == OPERAND_VALUE &&
                          make->args[0].value == id && copy->meta.device.kind == TR_DEV_CPU);
            }
            check(strcmp(p->outputs[grp->members[m]].path, grp->path) == 0);
            /* a file is written once its values are made */
            const struct value *v = &prog->values[id];
            check(v->origin != ORIGIN_RESULT || v->def < grp->write);
            check(v->meta.kind == TR_VALUE_TENSOR || v->origin == ORIGIN_CONSTANT);
        }
    }
    /* every output is written by one group, or printed as text */
    for (size_t o = 0; o < prog->noutputs; o++) {
        size_t n = 0;
        for (size_t g = 0; g < prog->ngroups; g++)
            for (size_t m = 0; m < prog->groups[g].nmembers; m++)
                n += prog->groups[g].members[m] == o;
        check(n == (p->outputs[o].as_text ? 0 : 1));
    }
}

/* Plans p with headers from src and, without errors, checks and prints
 * the program. */
static void plan_and_check(struct pipeline *p, struct diag_list *d,
                           const struct plan_input_source *src)
{
    struct plan *plan = plan_build_from(p, d, src);

    check(plan != NULL); /* nothing here runs out of memory */
    for (size_t i = 0; i < d->count; i++)
        check(d->items[i].line >= 0 && d->items[i].col >= 0);
    diag_print(d, sink);
    if (diag_exit_code(d) == 0) {
        check_program(plan);
        program_print(plan, sink);
        program_print_json(plan, sink);
    }
    plan_free(plan);
}

/* ------------------------------------------------------------ bytes */

struct bytes {
    const uint8_t *data;
    size_t size, pos;
};

/* The next byte; 0 once they are used up, so every input ends. */
static unsigned next(struct bytes *b)
{
    return b->pos < b->size ? b->data[b->pos++] : 0;
}

static unsigned pick(struct bytes *b, unsigned n)
{
    return n ? next(b) % n : 0;
}

/* ------------------------------------------------------------ headers */

#define MAX_INPUTS 4

struct headers {
    size_t n;
    struct tio_entry e[MAX_INPUTS];
    bool missing[MAX_INPUTS];
};

static const int64_t sizes[] = {
    0, 1, 1, 2, 3, 4, 5, 7, 8, 16, 64, 1000, 4096,
    INT32_MAX, (int64_t)INT32_MAX + 1, INT64_C(1) << 32, INT64_C(1) << 40,
    INT64_C(1) << 62, INT64_MAX - 1, INT64_MAX,
};

/* C order's strides in elements, as a reader gives them (empty
 * dimensions count as 1). */
static void c_strides(struct tio_entry *e)
{
    int64_t stride = 1;

    for (int d = e->ndim - 1; d >= 0; d--) {
        e->strides[d] = stride;
        stride *= e->shape[d] > 1 ? e->shape[d] : 1;
    }
}

/* A header a reader could accept: its sizes other than 0 multiply out
 * within int64 bytes (npy.c and safetensors.c refuse more), in an empty
 * tensor too. */
static void make_header(struct bytes *b, struct tio_entry *e)
{
    unsigned c = next(b);
    uint64_t count = 1, span = 1, itemsize;

    memset(e, 0, sizeof *e);
    if (c % 16 == 15) {
        e->supported = false;
        snprintf(e->dtype_text, sizeof e->dtype_text, "%s", c & 16 ? "F8_E4M3" : "<c8");
    } else {
        e->supported = true;
        e->dtype = (enum tr_dtype)(c % TR_DTYPE_COUNT);
        snprintf(e->dtype_text, sizeof e->dtype_text, "%s", tr_dtype_name(e->dtype));
    }
    itemsize = e->supported ? tr_dtype_size(e->dtype) : 1;
    e->ndim = (int)pick(b, TR_MAX_DIMS + 1);
    for (int d = 0; d < e->ndim; d++) {
        unsigned s = next(b);
        int64_t n = s >= 0xf0 ? (int64_t)(s - 0xf0) * 3 + 9
                              : sizes[s % (sizeof sizes / sizeof *sizes)];
        uint64_t elements, bytes;
        /* as a reader checks: the sizes other than 0 multiply out within
         * int64 bytes, even in an empty tensor */
        if (__builtin_mul_overflow(span, (uint64_t)(n ? n : 1), &elements) ||
            __builtin_mul_overflow(elements, itemsize, &bytes) || bytes > INT64_MAX)
            n = 1;
        e->shape[d] = n;
        count *= (uint64_t)n;
        span *= (uint64_t)(n ? n : 1);
    }
    c_strides(e);
    e->nbytes = count * itemsize;
}

static bool describe(void *ctx, size_t index, const struct input *in, struct tio_entry *e,
                     const char **why)
{
    const struct headers *h = ctx;

    (void)in;
    if (index >= h->n || h->missing[index]) {
        *why = "no such file";
        return false;
    }
    *e = h->e[index];
    return true;
}

/* ------------------------------------------------------------ the grammar */

struct text {
    char buf[16384];
    size_t len;
    bool full;
};

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->full)
        return;
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof t->buf - t->len) {
        t->full = true;
        t->buf[t->len] = '\0';
        return;
    }
    t->len += (size_t)n;
}

/* The names an expression may read: inputs, params, earlier targets, the
 * foreach builtins, and a name nothing binds. */
#define MAX_NAMES 48

struct names {
    char name[MAX_NAMES][16];
    size_t n;
};

static void add_name(struct names *ns, const char *fmt, unsigned i)
{
    if (ns->n < MAX_NAMES)
        snprintf(ns->name[ns->n++], sizeof ns->name[0], fmt, i);
}

static const char *const ints[] = {
    "0", "1", "2", "3", "-1", "-2", "7", "8", "64", "1000", "2147483647", "2147483648",
    "4294967296", "9223372036854775807", "-9223372036854775807", "-9223372036854775808",
    "9223372036854775808", "0x7f", "0b101", "1_000", "00", "99999999999999999999",
};
static const char *const floats[] = {
    "0.5", "-0.0", "1e-6", "1.5", "1e308", "-1e308", "5e-324", "inf", "-inf", "nan",
    "3.0", "1e400", "0.1",
};
static const char *const words[] = {
    "True", "False", "true", "false", "None", "'s'", "\\\"abc\\\"", "''", "'f32'",
    "'sum'", "'mean'", "'none'", "'highest'",
};
static const char *const binops[] = {
    "+", "-", "*", "/", "**", "@", "<", "<=", ">", ">=", "==", "!=",
};
static const char *const attrs[] = {"T", "mT", "shape", "ndim", "dtype"};

static void expr(struct bytes *b, struct text *t, const struct names *ns, int depth);

static void atom(struct bytes *b, struct text *t, const struct names *ns)
{
    unsigned c = next(b);

    switch (c % 10) {
    case 0:
    case 1:
    case 2:
    case 8:
    case 9:
        put(t, "%s", ns->n ? ns->name[pick(b, (unsigned)ns->n)] : "x0");
        break;
    case 3:
        put(t, "%s", ints[pick(b, sizeof ints / sizeof *ints)]);
        break;
    case 4:
        put(t, "%s", floats[pick(b, sizeof floats / sizeof *floats)]);
        break;
    case 5:
        put(t, "%s", words[pick(b, sizeof words / sizeof *words)]);
        break;
    case 6:
        put(t, "%s", tr_dtype_name((enum tr_dtype)pick(b, TR_DTYPE_COUNT)));
        break;
    default:
        put(t, "%u", next(b));
    }
}

static void list(struct bytes *b, struct text *t, const struct names *ns, int depth)
{
    unsigned n = pick(b, 5);

    put(t, "[");
    for (unsigned i = 0; i < n; i++) {
        put(t, i ? ", " : "");
        expr(b, t, ns, depth + 1);
    }
    put(t, "]");
}

static const char *const small_ints[] = {"0", "1", "-1", "2", "0", "1", "-2", "3"};

/* An argument of the kind param takes, mostly; one byte in eight gives
 * any expression instead. */
static void argument(struct bytes *b, struct text *t, const struct names *ns,
                     const struct tr_param *param, int depth)
{
    unsigned c = next(b);

    if (c % 8 == 7) {
        expr(b, t, ns, depth + 1);
        return;
    }
    switch (param->kind) {
    case TR_PARAM_TENSOR:
    case TR_PARAM_TENSOR_OR_NONE:
        if (c & 8)
            expr(b, t, ns, depth + 1);
        else
            put(t, "%s", ns->n ? ns->name[pick(b, (unsigned)ns->n)] : "x0");
        break;
    case TR_PARAM_TENSORS:
        list(b, t, ns, depth);
        break;
    case TR_PARAM_INT:
    case TR_PARAM_INT_OR_NONE:
    case TR_PARAM_DIMS:
        if (c & 8)
            put(t, "%s", small_ints[pick(b, 8)]);
        else if (c & 16)
            put(t, "%s", ints[pick(b, sizeof ints / sizeof *ints)]);
        else if (c & 32)
            put(t, "[%s, %s]", small_ints[pick(b, 8)], small_ints[pick(b, 8)]);
        else
            put(t, "None");
        break;
    case TR_PARAM_SHAPE:
        if (c & 8) {
            unsigned n = pick(b, 4);
            put(t, "[");
            for (unsigned i = 0; i < n; i++)
                put(t, "%s%s", i ? ", " : "",
                    next(b) & 1 ? small_ints[pick(b, 8)] : ints[pick(b, sizeof ints / sizeof *ints)]);
            put(t, "]");
        } else {
            put(t, "%s.shape", ns->n ? ns->name[pick(b, (unsigned)ns->n)] : "x0");
        }
        break;
    case TR_PARAM_NUMBER:
    case TR_PARAM_NUMBER_OR_NONE:
        put(t, "%s", c & 8 ? floats[pick(b, sizeof floats / sizeof *floats)]
                           : ints[pick(b, sizeof ints / sizeof *ints)]);
        break;
    case TR_PARAM_BOOL:
        put(t, "%s", c & 8 ? "true" : "false");
        break;
    case TR_PARAM_DTYPE:
    case TR_PARAM_DTYPE_OR_NONE:
        put(t, "%s", tr_dtype_name((enum tr_dtype)pick(b, TR_DTYPE_COUNT)));
        break;
    case TR_PARAM_QDTYPE:
    case TR_PARAM_QDTYPE_OR_NONE:
        put(t, "%s", c & 8    ? (c & 16 ? "i4" : "u4")
                     : c & 16 ? "None"
                              : tr_dtype_name((enum tr_dtype)pick(b, TR_DTYPE_COUNT)));
        break;
    case TR_PARAM_DEVICE:
        put(t, "%s", c & 8 ? "'cpu'" : c & 16 ? "'cuda:1'" : "'cuda'");
        break;
    default:
        put(t, "%s", param->default_text && (c & 8) ? param->default_text
                                                    : words[pick(b, sizeof words / sizeof *words)]);
    }
}

/* op(args): mostly its required parameters in order, each an argument
 * of its kind, then a few keywords; sometimes fewer or more positional
 * ones, repeated or unknown keywords. */
static void call(struct bytes *b, struct text *t, const struct names *ns, int depth)
{
    const struct tr_op_info *op = tr_op_at(pick(b, (unsigned)tr_op_count()));
    unsigned c = next(b), npos = 0, nkw;
    bool first = true;

    while (npos < (unsigned)op->nparams && op->params[npos].required)
        npos++;
    if (c % 8 == 7)
        npos = pick(b, (unsigned)op->nparams + 2);
    nkw = c % 4 == 3 ? 1 + pick(b, 3) : 0;
    put(t, "%s(", op->name);
    for (unsigned i = 0; i < npos; i++) {
        put(t, first ? "" : ", ");
        first = false;
        if (i < (unsigned)op->nparams)
            argument(b, t, ns, &op->params[i], depth);
        else
            expr(b, t, ns, depth + 1);
    }
    for (unsigned i = 0; i < nkw; i++) {
        unsigned k = next(b);
        put(t, first ? "" : ", ");
        first = false;
        if (op->nparams && k < 0xf0) {
            const struct tr_param *param = &op->params[k % (unsigned)op->nparams];
            put(t, "%s=", param->name);
            argument(b, t, ns, param, depth);
        } else {
            /* unknown, or a near miss of one */
            static const char *const bogus[] = {"bogus", "dims", "keep_dim", "axis"};
            put(t, "%s=", bogus[k % 4]);
            expr(b, t, ns, depth + 1);
        }
    }
    put(t, ")");
}

static void subscripts(struct bytes *b, struct text *t, const struct names *ns, int depth)
{
    unsigned n = 1 + pick(b, 4);

    put(t, "[");
    for (unsigned i = 0; i < n; i++) {
        unsigned c = next(b);
        put(t, i ? ", " : "");
        switch (c % 6) {
        case 0:
            put(t, "...");
            break;
        case 1:
            put(t, "None");
            break;
        case 2:
        case 3:
            expr(b, t, ns, depth + 1);
            break;
        default:
            /* start:stop:step, each part there or not */
            if (c & 8)
                expr(b, t, ns, depth + 1);
            put(t, ":");
            if (c & 16)
                expr(b, t, ns, depth + 1);
            if (c & 32) {
                put(t, ":");
                if (c & 64)
                    expr(b, t, ns, depth + 1);
            }
        }
    }
    put(t, "]");
}

static void expr(struct bytes *b, struct text *t, const struct names *ns, int depth)
{
    unsigned c = next(b);

    if (depth >= 5 || b->pos >= b->size) {
        atom(b, t, ns);
        return;
    }
    switch (c % 12) {
    case 0:
    case 1:
    case 2:
        call(b, t, ns, depth);
        break;
    case 3:
        expr(b, t, ns, depth + 1);
        put(t, " %s ", binops[pick(b, sizeof binops / sizeof *binops)]);
        expr(b, t, ns, depth + 1);
        break;
    case 4:
        put(t, "-");
        expr(b, t, ns, depth + 1);
        break;
    case 5:
        put(t, "(");
        expr(b, t, ns, depth + 1);
        put(t, ")");
        break;
    case 6:
        atom(b, t, ns);
        subscripts(b, t, ns, depth);
        break;
    case 7:
        atom(b, t, ns);
        put(t, ".%s", attrs[pick(b, sizeof attrs / sizeof *attrs)]);
        if (c & 16)
            subscripts(b, t, ns, depth);
        break;
    case 8:
        list(b, t, ns, depth);
        break;
    case 9: {
        /* x.op(args): a method call */
        const struct tr_op_info *op = tr_op_at(pick(b, (unsigned)tr_op_count()));
        atom(b, t, ns);
        put(t, ".%s(", op->name);
        if (c & 16)
            expr(b, t, ns, depth + 1);
        put(t, ")");
        break;
    }
    case 10:
        put(t, "numel(");
        atom(b, t, ns);
        put(t, ")");
        break;
    default:
        atom(b, t, ns);
    }
}

/* Writes a pipeline in the grammar to t; its inputs' headers into h. */
static void make_pipeline(struct bytes *b, struct text *t, struct headers *h)
{
    struct names ns = {.n = 0};
    unsigned nparams = pick(b, 3), nstages = 1 + pick(b, 3), nout, made = 0;

    h->n = 1 + pick(b, MAX_INPUTS);
    for (size_t i = 0; i < h->n; i++) {
        h->missing[i] = next(b) == 0xff;
        make_header(b, &h->e[i]);
    }
    put(t, "tensorrun: 1\n");
    if (nparams) {
        put(t, "params:\n");
        for (unsigned i = 0; i < nparams; i++) {
            unsigned c = next(b);
            put(t, "  p%u: ", i);
            switch (c % 5) {
            case 0:
                put(t, "%s\n", ints[pick(b, sizeof ints / sizeof *ints)]);
                break;
            case 1:
                put(t, "%s\n", floats[pick(b, 10)]);
                break;
            case 2:
                put(t, "[%s, %s]\n", ints[pick(b, 8)], ints[pick(b, sizeof ints / sizeof *ints)]);
                break;
            case 3:
                put(t, "%s\n", c & 8 ? "true" : "null");
                break;
            default:
                put(t, "%s\n", c & 8 ? "sum" : "[]");
            }
            add_name(&ns, "p%u", i);
        }
    }
    put(t, "inputs:\n");
    for (size_t i = 0; i < h->n; i++) {
        static const char *const exts[] = {".npy", ".safetensors", ".npz", ".bin"};
        unsigned c = next(b);
        if (c % 4 == 3)
            put(t, "  x%zu: {path: /nonexistent/x%zu.bin, dtype: f32, shape: [4, 2]}\n", i, i);
        else if (c % 4 == 2)
            put(t, "  x%zu: {path: /nonexistent/x%zu.safetensors, key: t}\n", i, i);
        else
            put(t, "  x%zu: /nonexistent/x%zu%s\n", i, i, exts[c % 4]);
        add_name(&ns, "x%u", (unsigned)i);
    }
    put(t, "stages:\n");
    for (unsigned s = 0; s < nstages; s++) {
        unsigned c = next(b), nst = 1 + pick(b, 4);
        size_t before = ns.n;
        put(t, "  - name: s%u\n", s);
        if (c & 1)
            put(t, "    foreach: {over: x%u, size: %s}\n", pick(b, (unsigned)h->n),
                c & 2 ? "1" : c & 4 ? "3" : "9223372036854775807");
        if (c & 1) {
            add_name(&ns, "chunk_start", 0);
            add_name(&ns, "chunk_index", 0);
            add_name(&ns, "chunk_count", 0);
        }
        if (c & 8) /* fake:0 (LLVMFuzzerInitialize offers it) reaches the transfers */
            put(t, "    device: %s\n", c & 16 ? "cpu" : c & 32 ? "fake:0" : "auto");
        put(t, "    do:\n");
        for (unsigned k = 0; k < nst; k++) {
            unsigned two = next(b) % 5 == 4;
            struct text e = {.len = 0};
            put(t, "      - \"");
            if (two)
                put(t, "v%u, v%u = ", made, made + 1);
            else
                put(t, "v%u = ", made);
            expr(b, &e, &ns, 0);
            put(t, "%s\"\n", e.full || !e.len ? "1" : e.buf);
            add_name(&ns, "v%u", made++);
            if (two)
                add_name(&ns, "v%u", made++);
        }
        if (c & 32) {
            /* keep: some of what is bound, or a name nothing binds */
            unsigned nk = 1 + pick(b, 3);
            put(t, "    keep: [");
            for (unsigned k = 0; k < nk; k++)
                put(t, "%s%s", k ? ", " : "", ns.n ? ns.name[pick(b, (unsigned)ns.n)] : "v0");
            put(t, "]\n");
        }
        if (c & 1)
            ns.n = before < ns.n ? ns.n : before; /* the builtins stay: a later use is an error */
    }
    nout = pick(b, 5);
    if (nout) {
        put(t, "outputs:\n");
        for (unsigned o = 0; o < nout; o++) {
            unsigned c = next(b);
            const char *name = ns.n ? ns.name[pick(b, (unsigned)ns.n)] : "v0";
            switch (c % 6) {
            case 0:
                put(t, "  %s: /nonexistent/o%u.npy\n", name, o);
                break;
            case 1:
                put(t, "  %s: {path: /nonexistent/o.safetensors, key: k%u}\n", name, o);
                break;
            case 2:
                put(t, "  %s: {path: /nonexistent/o%u.bin, dtype: %s}\n", name, o,
                    tr_dtype_name((enum tr_dtype)pick(b, TR_DTYPE_COUNT)));
                break;
            case 3:
                put(t, "  %s: {path: /nonexistent/o%u.npy, dtype: %s}\n", name, o,
                    tr_dtype_name((enum tr_dtype)pick(b, TR_DTYPE_COUNT)));
                break;
            case 4:
                put(t, "  %s: /nonexistent/o%u.npz\n", name, o);
                break;
            default:
                put(t, "  %s: /nonexistent/o%u.raw\n", name, o);
            }
        }
    }
}

/* ------------------------------------------------------------ modes */

static void load(const char *text, size_t len, struct diag_list *diags, struct pipeline **pp,
                 const struct overrides *ov)
{
    struct pipeline *p;

    check(ftruncate(fd, 0) == 0);
    check(pwrite(fd, text, len, 0) == (ssize_t)len);
    diag_init(diags, path, NULL, 0);
    p = pipeline_load(path, ov, diags);
    check(p != NULL); /* the file is always readable */
    check(diags->text == p->text && diags->len == len);
    for (size_t i = 0; i < diags->count; i++)
        check(diags->items[i].line >= 0 && diags->items[i].col >= 0);
    if (diags->errors == 0)
        check_complete(p);
    else
        check(diag_exit_code(diags) != 0);
    if (!p->root)
        check(diags->errors > 0 && p->nstages == 0 && p->ninputs == 0);
    *pp = p;
}

static void structured(const uint8_t *data, size_t size)
{
    struct bytes b = {data, size, 0};
    static struct text t;
    struct headers h;
    struct plan_input_source src = {describe, &h};
    struct diag_list diags;
    struct pipeline *p;

    t.len = 0;
    t.full = false;
    t.buf[0] = '\0';
    make_pipeline(&b, &t, &h);
    if (t.full)
        return;
    if (getenv("TR_FUZZ_SHOW"))
        fprintf(stderr, "%s", t.buf);
    load(t.buf, t.len, &diags, &p, NULL);
    if (diags.errors) {
        pipeline_free(p);
        diag_free(&diags);
        return;
    }
    /* some outputs printed as text, as -e prints its last value */
    for (size_t o = 0; o < p->noutputs; o++)
        p->outputs[o].text_if_scalar = (next(&b) & 3) == 3;
    /* and, as --print NAME, a name printed once the stages have run */
    if ((next(&b) & 7) == 7)
        p->print_name = next(&b) & 1 ? "v0" : "x0";
    plan_and_check(p, &diags, &src);
    pipeline_free(p);
    diag_free(&diags);
}

static void raw_yaml(const uint8_t *data, size_t size)
{
    struct override sets[] = {{"k", "3", false}, {"eps", "0.5", false},
                              {"shape", "[2, [0x3, x], \"s\"]", false}};
    struct override inputs[] = {{"x", "x.npy", false}};
    struct override outputs[] = {{"y", "y.npy", false}, {"extra", "e.safetensors", false}};
    struct overrides ov = {sets, inputs, outputs, 3, 1, 2};
    struct headers h = {.n = MAX_INPUTS};
    struct plan_input_source src = {describe, &h};
    struct diag_list diags;
    struct pipeline *p;

    /* input i: f32 of shape [8, 4] cut to rank i */
    for (size_t i = 0; i < MAX_INPUTS; i++) {
        struct tio_entry *e = &h.e[i];
        memset(e, 0, sizeof *e);
        e->supported = true;
        e->dtype = TR_DTYPE_F32;
        snprintf(e->dtype_text, sizeof e->dtype_text, "<f4");
        e->ndim = (int)i;
        for (int d = 0; d < e->ndim; d++)
            e->shape[d] = d ? 4 : 8;
        c_strides(e);
        h.missing[i] = false;
    }
    for (int round = 0; round < 2; round++) {
        load((const char *)data, size, &diags, &p, round ? &ov : NULL);
        diag_print(&diags, sink);
        if (diags.errors == 0) {
            h.n = p->ninputs < MAX_INPUTS ? p->ninputs : MAX_INPUTS;
            plan_and_check(p, &diags, &src);
        }
        pipeline_free(p);
        diag_free(&diags);
    }
}

/* One fake device, so that stages on another device than the CPU plan
 * their transfers (read by the engine once, before any stage asks). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("TENSORRUN_FAKE_DEVICES", "1", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0)
        setup();
    if (size && data[0] < 0x09)
        structured(data + 1, size - 1);
    else
        raw_yaml(data, size);
    return 0;
}
