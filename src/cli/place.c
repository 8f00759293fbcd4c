/*
 * place.c - destinations of results (place.h).
 */
#include "config.h"

#include "place.h"

#include <stdlib.h>
#include <string.h>

struct count {
    const struct program *prog;
    uint32_t value;
    size_t reads;
};

static void count_read(uint32_t value, void *ctx)
{
    struct count *c = ctx;

    c->reads += value == c->value;
}

/* How many instructions besides skip read value. */
static size_t other_reads(const struct program *prog, uint32_t value, size_t skip)
{
    struct count c = {.prog = prog, .value = value};

    for (size_t i = 0; i < prog->ninstrs; i++)
        if (i != skip)
            instr_reads(&prog->instrs[i], count_read, &c);
    return c.reads;
}

struct mover {
    struct program *prog;
    size_t nvalues;           /* the values before any move */
    uint32_t *to_stage;       /* per value: its copy on the stage's device, or VALUE_NONE */
    uint32_t *to_cpu;         /* per value: its copy on the CPU, for the stage's writes */
    int stage;
    bool ok;
};

/* The copy of value v on device (made by a new `to` the first time). */
static uint32_t move(struct mover *mv, uint32_t v, struct tr_device device, uint32_t *copies,
                     const struct instr *before)
{
    struct program *prog = mv->prog;
    struct value copy;
    struct instr *in;
    char name[TR_DEVICE_NAME_MAX], *word;
    uint32_t id;

    if (v >= mv->nvalues)
        return v; /* a copy already */
    if (copies[v] != VALUE_NONE)
        return copies[v];
    copy = prog->values[v];
    if (copy.stage != mv->stage) {
        /* a later stage moves the blocks' whole of a foreach stage's
         * value, which does not depend on this stage's blocks */
        if (copy.joined)
            copy.meta = copy.joined_meta;
        copy.depends = false;
        copy.has_last = false;
    }
    copy.meta.device = device;
    copy.meta.strided = false; /* moved compact (tr_op_layout) */
    copy.origin = ORIGIN_RESULT;
    copy.stage = mv->stage;
    copy.def = prog->ninstrs;
    copy.joined = false;
    tr_device_format(device, name, sizeof name);
    word = program_alloc(prog, strlen(name) + 1);
    id = word ? program_add_value(prog, &copy) : VALUE_NONE;
    in = id != VALUE_NONE ? program_add_instr(prog, mv->stage, INSTR_OP) : NULL;
    if (!in) {
        mv->ok = false;
        return v;
    }
    memcpy(word, name, strlen(name) + 1);
    in->op = tr_op_get(TR_OP_TO);
    in->nargs = 2;
    in->args[0].kind = OPERAND_VALUE;
    in->args[0].value = v;
    in->args[0].meta = prog->values[v].joined && prog->values[v].stage != mv->stage
                           ? prog->values[v].joined_meta
                           : prog->values[v].meta;
    in->args[1].kind = OPERAND_CONST;
    in->args[1].meta.kind = TR_VALUE_STRING;
    in->args[1].meta.known = in->args[1].meta.weak = true;
    in->args[1].meta.string = word;
    in->nresults = 1;
    in->results[0] = id;
    in->transfer = true;
    in->statement = before->statement;
    in->line = before->line;
    in->col = before->col;
    copies[v] = id;
    return id;
}

static void move_operand(struct mover *mv, struct operand *o, struct tr_device device,
                         uint32_t *copies, const struct instr *before)
{
    if (o->kind == OPERAND_VALUE && mv->prog->values[o->value].meta.kind == TR_VALUE_TENSOR &&
        !tr_device_equal(mv->prog->values[o->value].meta.device, device)) {
        o->value = move(mv, o->value, device, copies, before);
        o->meta = mv->prog->values[o->value].meta;
    }
    for (size_t i = 0; o->kind == OPERAND_LIST && i < o->count; i++)
        move_operand(mv, &o->items[i], device, copies, before);
}

/* Whether anything is on another device than the CPU. */
static bool any_device(const struct program *prog)
{
    for (size_t s = 0; s < prog->nstages; s++)
        if (prog->stages[s].device.kind != TR_DEV_CPU)
            return true;
    for (size_t v = 0; v < prog->nvalues; v++)
        if (prog->values[v].meta.kind == TR_VALUE_TENSOR &&
            prog->values[v].meta.device.kind != TR_DEV_CPU)
            return true;
    return false;
}

bool place_transfers(struct program *prog)
{
    struct mover mv = {.prog = prog, .nvalues = prog->nvalues, .stage = -2, .ok = true};
    size_t nold, *where;
    struct instr *old;

    if (!any_device(prog))
        return true;
    where = calloc(prog->ninstrs + 1, sizeof *where);
    mv.to_stage = calloc(mv.nvalues + 1, sizeof *mv.to_stage);
    mv.to_cpu = calloc(mv.nvalues + 1, sizeof *mv.to_cpu);
    if (!where || !mv.to_stage || !mv.to_cpu) {
        free(where);
        free(mv.to_stage);
        free(mv.to_cpu);
        return false;
    }
    old = program_take_instrs(prog, &nold);
    for (size_t i = 0; i < nold && mv.ok; i++) {
        struct instr in = old[i];
        struct tr_device here = in.stage >= 0 ? prog->stages[in.stage].device : TR_CPU;
        if (in.stage != mv.stage) {
            /* a new stage: nothing is on its device yet */
            mv.stage = in.stage;
            for (size_t v = 0; v < mv.nvalues; v++)
                mv.to_stage[v] = mv.to_cpu[v] = VALUE_NONE;
        }
        if (in.kind == INSTR_WRITE) {
            uint32_t *wargs = program_alloc(prog, (in.nwargs + 1) * sizeof *wargs);
            if (!wargs) {
                mv.ok = false;
                break;
            }
            for (size_t k = 0; k < in.nwargs; k++) {
                struct operand o = {.kind = OPERAND_VALUE, .value = in.wargs[k]};
                move_operand(&mv, &o, TR_CPU, mv.to_cpu, &in);
                wargs[k] = o.value;
            }
            in.wargs = wargs;
        } else if (!(in.kind == INSTR_OP && in.op->id == TR_OP_TO)) {
            for (int a = 0; a < in.nargs; a++)
                move_operand(&mv, &in.args[a], here, mv.to_stage, &in);
            for (int k = 0; k < in.nfinputs; k++) {
                struct operand o = {.kind = OPERAND_VALUE, .value = in.finputs[k]};
                move_operand(&mv, &o, here, mv.to_stage, &in);
                in.finputs[k] = o.value;
            }
        }
        if (!mv.ok || !program_append(prog, &in)) {
            mv.ok = false;
            break;
        }
        where[i] = prog->ninstrs - 1;
    }
    for (size_t g = 0; mv.ok && g < prog->ngroups; g++)
        prog->groups[g].write = where[prog->groups[g].write];
    free(old);
    free(where);
    free(mv.to_stage);
    free(mv.to_cpu);
    return mv.ok;
}

/* Whether the write's one value goes to a file of its own but does not
 * lie there as it is (a strided view, Fortran order), in a stage (the
 * writes before the stages stay as they are, and a joined value goes
 * where its join says). */
static bool wants_copy(const struct program *prog, const struct instr *in)
{
    const struct output_group *g = &prog->groups[in->group];
    const struct value *v = &prog->values[in->wargs[0]];

    return in->stage >= 0 && in->part != PART_AFTER && g->mappable && in->nwargs == 1 &&
           v->meta.kind == TR_VALUE_TENSOR &&
           v->meta.strided && v->meta.device.kind == TR_DEV_CPU && v->join == JOIN_NONE;
}

bool place_copies(struct program *prog)
{
    size_t nold, *where;
    struct instr *old;
    bool ok = true, any = false;

    for (size_t i = 0; i < prog->ninstrs && !any; i++)
        any = prog->instrs[i].kind == INSTR_WRITE && wants_copy(prog, &prog->instrs[i]);
    if (!any)
        return true;
    where = calloc(prog->ninstrs + 1, sizeof *where);
    if (!where)
        return false;
    old = program_take_instrs(prog, &nold);
    for (size_t i = 0; i < nold && ok; i++) {
        struct instr in = old[i];
        if (in.kind == INSTR_WRITE && wants_copy(prog, &in)) {
            struct value copy = prog->values[in.wargs[0]];
            uint32_t *wargs = program_alloc(prog, sizeof *wargs), id;
            struct instr *c;
            copy.origin = ORIGIN_RESULT;
            copy.name = NULL;
            copy.stage = in.stage;
            copy.def = prog->ninstrs;
            copy.meta.strided = false;
            copy.meta.weak = false;
            copy.stream_bytes = copy.copy_bytes = 0;
            id = wargs ? program_add_value(prog, &copy) : VALUE_NONE;
            c = id != VALUE_NONE ? program_add_instr(prog, in.stage, INSTR_OP) : NULL;
            if (!c) {
                ok = false;
                break;
            }
            c->op = tr_op_get(TR_OP_CLONE);
            c->nargs = 1;
            c->args[0].kind = OPERAND_VALUE;
            c->args[0].value = in.wargs[0];
            c->args[0].meta = prog->values[in.wargs[0]].meta;
            c->nresults = 1;
            c->results[0] = id;
            c->statement = in.statement;
            c->line = in.line;
            c->col = in.col;
            c->part = in.part; /* the write's part, whose count grows by one */
            prog->stages[in.stage].nonce += in.part == PART_ONCE;
            prog->stages[in.stage].nblock += in.part == PART_BLOCK;
            wargs[0] = id;
            in.wargs = wargs;
        }
        ok = program_append(prog, &in) != NULL;
        where[i] = prog->ninstrs - 1;
    }
    for (size_t g = 0; ok && g < prog->ngroups; g++)
        prog->groups[g].write = where[prog->groups[g].write];
    free(old);
    free(where);
    return ok;
}

void place_run(struct program *prog)
{
    for (size_t g = 0; g < prog->ngroups; g++) {
        const struct output_group *grp = &prog->groups[g];
        uint32_t id = prog->instrs[grp->write].wargs[0]; /* the value written: a clone, say */
        const struct value *v = &prog->values[id];
        struct instr *def;
        if (!grp->mappable || v->origin != ORIGIN_RESULT || v->kept || v->join != JOIN_NONE ||
            v->last_use != grp->write || v->meta.device.kind != TR_DEV_CPU)
            continue;
        def = &prog->instrs[v->def];
        if ((def->kind != INSTR_OP && def->kind != INSTR_FUSED) || def->results[0] != id ||
            (def->kind == INSTR_OP && !tr_op_takes_dest(def->op)))
            continue;
        if (other_reads(prog, id, grp->write) == 0)
            def->dest_group = (ptrdiff_t)g;
    }
}
