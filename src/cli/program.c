/*
 * program.c - building a program: its value table, its instructions in
 * stage order, and the arena that lists and names point into.
 */
#include "config.h"

#include "program.h"

#include <stdlib.h>
#include <string.h>

struct program_arena {
    struct program_arena *next;
    size_t used, size;
    _Alignas(16) char data[];
};

struct program *program_new(size_t nstages, size_t noutputs)
{
    struct program *prog = calloc(1, sizeof *prog);

    if (!prog)
        return NULL;
    prog->stages = calloc(nstages ? nstages : 1, sizeof *prog->stages);
    prog->outputs = calloc(noutputs ? noutputs : 1, sizeof *prog->outputs);
    prog->groups = calloc(noutputs ? noutputs : 1, sizeof *prog->groups);
    if (!prog->stages || !prog->outputs || !prog->groups) {
        program_free(prog);
        return NULL;
    }
    prog->nstages = nstages;
    prog->noutputs = noutputs;
    for (size_t o = 0; o < noutputs; o++)
        prog->outputs[o] = VALUE_NONE;
    return prog;
}

void program_free(struct program *prog)
{
    if (!prog)
        return;
    while (prog->arena) {
        struct program_arena *next = prog->arena->next;
        free(prog->arena);
        prog->arena = next;
    }
    free(prog->values);
    free(prog->instrs);
    free(prog->stages);
    free(prog->groups);
    free(prog->outputs);
    free(prog);
}

void *program_alloc(struct program *prog, size_t bytes)
{
    struct program_arena *a = prog->arena;
    void *p;

    bytes = (bytes + 15) & ~(size_t)15;
    if (!a || a->size - a->used < bytes) {
        size_t size = bytes > 65536 ? bytes : 65536;
        a = malloc(sizeof *a + size);
        if (!a)
            return NULL;
        a->next = prog->arena;
        a->used = 0;
        a->size = size;
        prog->arena = a;
    }
    p = a->data + a->used;
    a->used += bytes;
    memset(p, 0, bytes);
    return p;
}

uint32_t program_add_value(struct program *prog, const struct value *v)
{
    if (prog->nvalues >= VALUE_NONE - 1)
        return VALUE_NONE;
    if (prog->nvalues == prog->values_cap) {
        size_t cap = prog->values_cap ? prog->values_cap * 2 : 64;
        struct value *values = realloc(prog->values, cap * sizeof *values);
        if (!values)
            return VALUE_NONE;
        prog->values = values;
        prog->values_cap = cap;
    }
    prog->values[prog->nvalues] = *v;
    prog->values[prog->nvalues].last_use = LIVE_UNUSED;
    return (uint32_t)prog->nvalues++;
}

struct instr *program_add_instr(struct program *prog, int stage, enum instr_kind kind)
{
    struct instr *in;

    if (prog->ninstrs == prog->instrs_cap) {
        size_t cap = prog->instrs_cap ? prog->instrs_cap * 2 : 64;
        struct instr *instrs = realloc(prog->instrs, cap * sizeof *instrs);
        if (!instrs)
            return NULL;
        prog->instrs = instrs;
        prog->instrs_cap = cap;
    }
    if (stage < 0) {
        prog->nprologue++;
    } else {
        struct program_stage *ps = &prog->stages[stage];
        if (ps->count == 0)
            ps->first = prog->ninstrs;
        ps->count++;
    }
    in = &prog->instrs[prog->ninstrs++];
    memset(in, 0, sizeof *in);
    in->kind = kind;
    in->stage = stage;
    in->dest_group = -1;
    in->fused_into = -1;
    in->in_place = -1;
    return in;
}

struct instr *program_take_instrs(struct program *prog, size_t *n)
{
    struct instr *old = prog->instrs;

    *n = prog->ninstrs;
    prog->instrs = NULL;
    prog->ninstrs = prog->instrs_cap = prog->nprologue = 0;
    for (size_t s = 0; s < prog->nstages; s++)
        prog->stages[s].count = prog->stages[s].first = 0;
    return old;
}

struct instr *program_append(struct program *prog, const struct instr *in)
{
    struct instr *copy = program_add_instr(prog, in->stage, in->kind);

    if (!copy)
        return NULL;
    *copy = *in;
    for (int r = 0; r < in->nresults; r++)
        prog->values[in->results[r]].def = prog->ninstrs - 1;
    return copy;
}

void program_truncate(struct program *prog, size_t n, size_t v)
{
    while (prog->ninstrs > n) {
        struct instr *in = &prog->instrs[--prog->ninstrs];
        if (in->stage < 0)
            prog->nprologue--;
        else
            prog->stages[in->stage].count--;
    }
    if (prog->nvalues > v)
        prog->nvalues = v;
}

static void operand_reads(const struct operand *o, void (*fn)(uint32_t, void *), void *ctx)
{
    if (o->kind == OPERAND_VALUE)
        fn(o->value, ctx);
    for (size_t i = 0; o->kind == OPERAND_LIST && i < o->count; i++)
        operand_reads(&o->items[i], fn, ctx);
}

void instr_reads(const struct instr *in, void (*fn)(uint32_t value, void *ctx), void *ctx)
{
    if (in->fused_into >= 0)
        return; /* its chain's instruction reads for it */
    if (in->kind == INSTR_FUSED) {
        for (int i = 0; i < in->nfinputs; i++)
            fn(in->finputs[i], ctx);
        return;
    }
    if (in->kind == INSTR_WRITE) {
        for (size_t i = 0; i < in->nwargs; i++)
            fn(in->wargs[i], ctx);
        return;
    }
    for (int i = 0; i < in->nargs; i++)
        operand_reads(&in->args[i], fn, ctx);
    for (size_t s = 0; s < in->nsubs; s++)
        for (int k = 0; k < 3; k++)
            operand_reads(&in->subs[s].part[k], fn, ctx);
}

bool op_is_view(const struct tr_op_info *op)
{
    return op->group_id == TR_GROUP_VIEWS;
}

int stage_block_index(const struct program_stage *st, uint32_t v)
{
    for (size_t i = 0; i < st->nover; i++)
        if (st->block[i] == v)
            return (int)i;
    return -1;
}

int stage_over_index(const struct program_stage *st, uint32_t v)
{
    for (size_t i = 0; i < st->nover; i++)
        if (st->over[i] == v)
            return (int)i;
    return -1;
}

const struct instr *program_unsupported(const struct program *prog, size_t s,
                                        struct tr_device device)
{
    const struct program_stage *st = &prog->stages[s];

    for (size_t i = st->first; i < st->first + st->count; i++) {
        const struct instr *in = &prog->instrs[i];
        enum tr_dtype dtypes[TR_OP_MAX_PARAMS];
        int n = 0;
        if ((in->kind != INSTR_OP && in->kind != INSTR_FUSED) || in->transfer)
            continue;
        for (int a = 0; a < in->nargs; a++)
            if (in->args[a].kind == OPERAND_VALUE &&
                prog->values[in->args[a].value].meta.kind == TR_VALUE_TENSOR)
                dtypes[n++] = prog->values[in->args[a].value].meta.dtype;
        if (!tr_device_supports(device, in->op->id, dtypes, n))
            return in;
    }
    return NULL;
}
