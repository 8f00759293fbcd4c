/*
 * foreach.c - the parts of a foreach stage and its joins (foreach.h).
 *
 * An instruction that makes nothing from the block cannot read anything
 * made from it (what it reads would depend on the block too), so the
 * block-invariant ones can all move before the others without changing
 * what any instruction reads.
 */
#include "config.h"

#include "foreach.h"

#include <stdlib.h>
#include <string.h>

static bool depends(const struct program *prog, const struct instr *in)
{
    if (in->kind == INSTR_WRITE) {
        for (size_t k = 0; k < in->nwargs; k++)
            if (prog->values[in->wargs[k]].depends)
                return true;
        return false;
    }
    for (int r = 0; r < in->nresults; r++)
        if (prog->values[in->results[r]].depends)
            return true;
    return false;
}

static enum foreach_part part_of(const struct program *prog, const struct instr *in)
{
    if (!depends(prog, in))
        return PART_ONCE;
    return in->kind == INSTR_WRITE ? PART_AFTER : PART_BLOCK;
}

/* Appends stage s's instructions, old[first .. first + count), part by
 * part; where[] maps each old index to its new one. */
static bool order_stage(struct program *prog, size_t s, const struct instr *old, size_t first,
                        size_t count, size_t *where)
{
    struct program_stage *st = &prog->stages[s];

    st->nonce = st->nblock = 0;
    for (enum foreach_part part = PART_ONCE; part <= PART_AFTER; part++) {
        for (size_t i = first; i < first + count; i++) {
            struct instr in = old[i];
            if (part_of(prog, &in) != part)
                continue;
            in.part = part;
            if (!program_append(prog, &in))
                return false;
            where[i] = prog->ninstrs - 1;
            st->nonce += part == PART_ONCE;
            st->nblock += part == PART_BLOCK;
        }
    }
    return true;
}

/* Fixes what points at instructions by index after the reordering: the
 * operands need nothing (they name values), but groups name their write. */
static void renumber(struct program *prog, const size_t *where)
{
    for (size_t g = 0; g < prog->ngroups; g++)
        prog->groups[g].write = where[prog->groups[g].write];
}

struct after_reads {
    const struct program *prog;
    size_t stage;
    bool *later;      /* per value: read by an instruction of a later stage */
    size_t at;
};

static void note_later(uint32_t value, void *ctx)
{
    struct after_reads *a = ctx;

    if (a->prog->instrs[a->at].stage > (int)a->stage)
        a->later[value] = true;
}

/* The output group whose write writes value (after place_transfers, a
 * CPU copy of a value on another device is what is written), when it is
 * the only one; -1 when none does, -2 when several do. */
static ptrdiff_t group_writing(const struct program *prog, uint32_t value)
{
    ptrdiff_t found = -1;

    for (size_t g = 0; g < prog->ngroups; g++) {
        const struct instr *w = &prog->instrs[prog->groups[g].write];
        for (size_t m = 0; m < w->nwargs; m++)
            if (w->wargs[m] == value)
                found = found == -1 ? (ptrdiff_t)g : -2;
    }
    return found;
}

static void set_joins(struct program *prog, size_t s, bool *later)
{
    const struct program_stage *st = &prog->stages[s];
    struct after_reads a = {.prog = prog, .stage = s, .later = later};

    memset(later, 0, prog->nvalues * sizeof *later);
    for (a.at = 0; a.at < prog->ninstrs; a.at++)
        if (prog->instrs[a.at].kind != INSTR_WRITE)
            instr_reads(&prog->instrs[a.at], note_later, &a);
    for (size_t k = 0; k < st->nkept; k++)
        later[st->kept[k]] = true;
    for (size_t t = s + 1; t < prog->nstages; t++)
        for (size_t i = 0; i < prog->stages[t].nover; i++)
            later[prog->stages[t].over[i]] = true; /* a later stage cuts it into blocks */
    for (size_t f = 0; f < prog->nfinals; f++)
        later[prog->finals[f]] = true;
    for (size_t v = 0; v < prog->nvalues; v++) {
        struct value *pv = &prog->values[v];
        ptrdiff_t g;
        bool block = stage_block_index(st, (uint32_t)v) >= 0;
        if (pv->stage != (int)s || !pv->depends || pv->meta.kind != TR_VALUE_TENSOR ||
            pv->meta.ndim == 0 || (pv->origin != ORIGIN_RESULT && !block))
            continue;
        g = group_writing(prog, (uint32_t)v);
        if (!later[v] && g == -1)
            continue; /* lives within a block */
        if (block) {
            pv->join = JOIN_OVER; /* the blocks joined are what they were cut from */
            continue;
        }
        pv->join = JOIN_POOL;
        if (!later[v] && g >= 0 && prog->groups[g].mappable &&
            pv->meta.device.kind == TR_DEV_CPU) {
            pv->join = JOIN_FILE;
            pv->join_group = g;
        }
    }
}

bool foreach_run(struct program *prog)
{
    size_t nold, *where = NULL;
    struct instr *old;
    bool *later = NULL, ok = true, any = false;

    for (size_t s = 0; s < prog->nstages; s++)
        any = any || prog->stages[s].nover > 0;
    if (!any)
        return true;
    where = calloc(prog->ninstrs + 1, sizeof *where);
    later = calloc(prog->nvalues + 1, sizeof *later);
    if (!where || !later) {
        free(where);
        free(later);
        return false;
    }
    old = program_take_instrs(prog, &nold);
    for (size_t i = 0; i < nold && ok;) {
        int s = old[i].stage;
        if (s >= 0 && prog->stages[s].nover > 0) {
            size_t count = 0;
            while (i + count < nold && old[i + count].stage == s)
                count++;
            ok = order_stage(prog, (size_t)s, old, i, count, where);
            i += count;
            continue;
        }
        ok = program_append(prog, &old[i]) != NULL;
        where[i++] = prog->ninstrs - 1;
    }
    if (ok)
        renumber(prog, where);
    for (size_t s = 0; ok && s < prog->nstages; s++)
        if (prog->stages[s].nover > 0)
            set_joins(prog, s, later);
    free(old);
    free(where);
    free(later);
    return ok;
}
