/*
 * fuse.c - chains of elementwise instructions made one (fuse.h).
 *
 * The program is read backwards: each instruction that can end a chain
 * (a tail op whose input is an elementwise result read by it alone, or an
 * elementwise op) takes every elementwise instruction before it whose
 * result only it, or another member, reads.  Chains never cross stages
 * or the parts of a foreach stage (foreach.h), never take a value
 * something else needs, and are typed again by the
 * engine (tr_fused_check) before they replace their instructions.
 */
#include "config.h"

#include "fuse.h"

#include <stdlib.h>
#include <string.h>

#include "tensorrun_fused.h"

struct counts {
    size_t *reads;       /* per value: how many reads, repeats included */
    size_t *reader;      /* per value: the last instruction that reads it */
    bool *pinned;        /* per value: an output's, kept, or printed at the end */
    size_t at;
};

static void count_read(uint32_t value, void *ctx)
{
    struct counts *c = ctx;

    c->reads[value]++;
    c->reader[value] = c->at;
}

/* The descriptions of in's arguments; false for a list, or a value joined
 * from an earlier foreach stage's blocks (whose description is a block's),
 * which are never fused. */
static bool arg_metas(const struct program *prog, const struct instr *in, struct tr_value *metas)
{
    for (int i = 0; i < in->nargs; i++) {
        const struct operand *o = &in->args[i];
        if (o->kind == OPERAND_LIST ||
            (o->kind == OPERAND_VALUE && prog->values[o->value].joined &&
             prog->values[o->value].stage != in->stage))
            return false;
        metas[i] = o->kind == OPERAND_VALUE ? prog->values[o->value].meta : o->meta;
    }
    return true;
}

static bool can_step(const struct program *prog, const struct instr *in)
{
    struct tr_value metas[TR_OP_MAX_PARAMS];

    /* a chain's constants are fixed: none made from a foreach block's length */
    return in->kind == INSTR_OP && in->fused_into < 0 && in->nresults == 1 && !in->last_args &&
           arg_metas(prog, in, metas) &&
           tr_fused_can_step(in->op->id, metas, &prog->values[in->results[0]].meta);
}

static bool can_tail(const struct program *prog, const struct instr *in)
{
    struct tr_value metas[TR_OP_MAX_PARAMS];

    return in->kind == INSTR_OP && in->nresults == 1 && in->nargs > 0 && !in->last_args &&
           in->args[0].kind == OPERAND_VALUE && arg_metas(prog, in, metas) &&
           tr_fused_can_tail(in->op->id, metas, &prog->values[in->results[0]].meta);
}

/* The instruction that makes value v when it can be a step whose result
 * only instruction reader reads, in reader's stage; else -1. */
static ptrdiff_t inner_step(const struct program *prog, const struct counts *c, uint32_t v,
                            size_t reader)
{
    const struct value *pv = &prog->values[v];

    if (pv->origin != ORIGIN_RESULT || c->pinned[v] || c->reads[v] != 1 || c->reader[v] != reader)
        return -1;
    if (prog->instrs[pv->def].stage != prog->instrs[reader].stage ||
        prog->instrs[pv->def].part != prog->instrs[reader].part ||
        !can_step(prog, &prog->instrs[pv->def]))
        return -1;
    return (ptrdiff_t)pv->def;
}

static int compare_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return x < y ? -1 : x > y;
}

/* The chain's argument for operand o of a member: a constant, a step (an
 * earlier member's result) or an input (added to inputs); false when it
 * cannot be one (a number known only at run time, too many inputs). */
static bool chain_arg(const struct program *prog, const struct operand *o, const size_t *members,
                      int nmembers, uint32_t *inputs, int *ninputs, struct tr_fused_arg *a)
{
    memset(a, 0, sizeof *a);
    if (o->kind == OPERAND_CONST) {
        a->ref = TR_FUSED_CONST;
        a->value = o->meta;
        return true;
    }
    if (o->kind != OPERAND_VALUE || prog->values[o->value].meta.kind != TR_VALUE_TENSOR)
        return false;
    for (int m = 0; m < nmembers; m++) {
        if (prog->instrs[members[m]].results[0] == o->value) {
            a->ref = TR_FUSED_STEP;
            a->index = m;
            return true;
        }
    }
    for (int k = 0; k < *ninputs; k++) {
        if (inputs[k] == o->value) {
            a->ref = TR_FUSED_INPUT;
            a->index = k;
            return true;
        }
    }
    if (*ninputs == TR_FUSED_MAX_INPUTS)
        return false;
    a->ref = TR_FUSED_INPUT;
    a->index = *ninputs;
    inputs[(*ninputs)++] = o->value;
    return true;
}

/* Builds and checks the chain of members (in order) and tail (or NULL);
 * on success, makes the chain's last instruction its INSTR_FUSED. */
static bool make_chain(struct program *prog, size_t *members, int nmembers, struct instr *tail)
{
    struct tr_fused *chain = program_alloc(prog, sizeof *chain);
    uint32_t *inputs = program_alloc(prog, TR_FUSED_MAX_INPUTS * sizeof *inputs);
    struct tr_value metas[TR_FUSED_MAX_INPUTS], result;
    struct instr *sink = tail ? tail : &prog->instrs[members[nmembers - 1]];
    const struct value *want = &prog->values[sink->results[0]];
    int ninputs = 0, bad;

    if (!chain || !inputs)
        return false;
    chain->nsteps = nmembers;
    for (int m = 0; m < nmembers; m++) {
        const struct instr *in = &prog->instrs[members[m]];
        chain->steps[m].op = in->op->id;
        for (int i = 0; i < in->nargs; i++)
            if (!chain_arg(prog, &in->args[i], members, m, inputs, &ninputs,
                           &chain->steps[m].args[i]))
                return true; /* not a chain after all; nothing changed */
    }
    if (tail) {
        chain->has_tail = true;
        chain->tail.op = tail->op->id;
        chain->tail.args[0].ref = TR_FUSED_STEP;
        chain->tail.args[0].index = nmembers - 1;
        for (int i = 1; i < tail->nargs; i++)
            if (!chain_arg(prog, &tail->args[i], members, 0, inputs, &ninputs,
                           &chain->tail.args[i]))
                return true;
    }
    chain->ninputs = ninputs;
    for (int k = 0; k < ninputs; k++)
        metas[k] = prog->values[inputs[k]].meta;
    if (tr_fused_check(chain, metas, &result, &bad) != TR_OK || result.dtype != want->meta.dtype ||
        result.ndim != want->meta.ndim ||
        memcmp(result.shape, want->meta.shape, (size_t)result.ndim * sizeof *result.shape) != 0) {
        tr_clear_error();
        return true;
    }
    sink->kind = INSTR_FUSED;
    sink->chain = chain;
    sink->finputs = inputs;
    sink->nfinputs = ninputs;
    for (int m = 0; m < nmembers; m++) {
        struct instr *in = &prog->instrs[members[m]];
        if (in == sink)
            continue;
        in->fused_into = sink - prog->instrs;
        prog->values[in->results[0]].fused = true;
    }
    return true;
}

/* Gathers the steps of the chain that ends at last (its result read by
 * reader when there is a tail), into members, in program order. */
static int gather(const struct program *prog, const struct counts *c, size_t last, size_t *members)
{
    int n = 1;

    members[0] = last;
    for (int m = 0; m < n; m++) {
        const struct instr *in = &prog->instrs[members[m]];
        for (int i = 0; i < in->nargs && n < TR_FUSED_MAX_STEPS; i++) {
            ptrdiff_t def;
            bool seen = false;
            if (in->args[i].kind != OPERAND_VALUE)
                continue;
            def = inner_step(prog, c, in->args[i].value, members[m]);
            for (int k = 0; k < n && !seen; k++)
                seen = def >= 0 && members[k] == (size_t)def;
            if (def >= 0 && !seen)
                members[n++] = (size_t)def;
        }
    }
    qsort(members, (size_t)n, sizeof *members, compare_size);
    return n;
}

bool fuse_run(struct program *prog)
{
    struct counts c;
    size_t members[TR_FUSED_MAX_STEPS];
    int group = 0;
    bool ok = true;
    const char *off = getenv("TENSORRUN_NO_FUSE");

    if (off && *off)
        return true;
    c.reads = calloc(prog->nvalues + 1, sizeof *c.reads);
    c.reader = calloc(prog->nvalues + 1, sizeof *c.reader);
    c.pinned = calloc(prog->nvalues + 1, sizeof *c.pinned);
    if (!c.reads || !c.reader || !c.pinned) {
        ok = false;
        goto done;
    }
    for (c.at = 0; c.at < prog->ninstrs; c.at++)
        instr_reads(&prog->instrs[c.at], count_read, &c);
    for (size_t o = 0; o < prog->noutputs; o++)
        if (prog->outputs[o] != VALUE_NONE)
            c.pinned[prog->outputs[o]] = true;
    for (size_t f = 0; f < prog->nfinals; f++)
        c.pinned[prog->finals[f]] = true;
    for (size_t s = 0; s < prog->nstages; s++)
        for (size_t k = 0; k < prog->stages[s].nkept; k++)
            c.pinned[prog->stages[s].kept[k]] = true;
    for (size_t i = prog->ninstrs; i-- > 0 && ok;) {
        struct instr *in = &prog->instrs[i];
        struct instr *tail = NULL;
        ptrdiff_t last = -1;
        int n;
        if (in->kind != INSTR_OP || in->fused_into >= 0)
            continue;
        if (can_tail(prog, in))
            last = inner_step(prog, &c, in->args[0].value, i);
        if (last >= 0)
            tail = in;
        else if (can_step(prog, in))
            last = (ptrdiff_t)i;
        else
            continue;
        n = gather(prog, &c, (size_t)last, members);
        if (n < (tail ? 1 : 2))
            continue;
        ok = make_chain(prog, members, n, tail);
    }
    /* groups numbered in program order */
    for (size_t i = 0; i < prog->ninstrs; i++)
        if (prog->instrs[i].kind == INSTR_FUSED)
            prog->instrs[i].fused_group = ++group;
done:
    free(c.reads);
    free(c.reader);
    free(c.pinned);
    return ok;
}
