/*
 * liveness.c - lifetimes of the program's values (liveness.h).
 */
#include "config.h"

#include "liveness.h"

#include <stdlib.h>
#include <string.h>

struct reader {
    struct program *prog;
    size_t at;
};

static void note_read(uint32_t value, void *ctx)
{
    struct reader *r = ctx;

    r->prog->values[value].last_use = r->at;
}

/* The first instruction of the first stage after s that has any, or
 * LIVE_FOREVER. */
static size_t next_stage_start(const struct program *prog, size_t s)
{
    for (size_t t = s + 1; t < prog->nstages; t++)
        if (prog->stages[t].count)
            return prog->stages[t].first;
    return LIVE_FOREVER;
}

/* The index just past stage s's instructions: where "after stage s" begins. */
static size_t stage_end(const struct program *prog, size_t s)
{
    for (size_t t = s + 1; t-- > 0;)
        if (prog->stages[t].count)
            return prog->stages[t].first + prog->stages[t].count;
    return prog->nprologue;
}

static bool add_to(struct program *prog, uint32_t **list, size_t *n, size_t cap, uint32_t value)
{
    if (!*list && !(*list = program_alloc(prog, cap * sizeof **list)))
        return false;
    (*list)[(*n)++] = value;
    return true;
}

/* Whether value v is made anew by every block of stage s: a result of
 * its PART_BLOCK instructions, the block, or a builtin. */
bool liveness_block_local(const struct program *prog, size_t s, uint32_t v)
{
    const struct value *pv = &prog->values[v];

    if (pv->stage != (int)s)
        return false;
    if (pv->origin == ORIGIN_BUILTIN)
        return true;
    return pv->origin == ORIGIN_RESULT && pv->def < prog->ninstrs &&
           prog->instrs[pv->def].part == PART_BLOCK;
}

struct block_reader {
    struct program *prog;
    size_t stage, last;
};

static void extend_read(uint32_t value, void *ctx)
{
    struct block_reader *r = ctx;
    struct value *pv = &r->prog->values[value];

    if (!liveness_block_local(r->prog, r->stage, value) &&
        (pv->last_use == LIVE_UNUSED || pv->last_use < r->last))
        pv->last_use = r->last;
}

/* What a foreach stage's blocks read that they do not make (a value made
 * once before them, an input) is read again by the next block: it lives
 * to the last instruction of the blocks. */
static void extend_over_blocks(struct program *prog, size_t s)
{
    const struct program_stage *st = &prog->stages[s];
    struct block_reader r = {.prog = prog, .stage = s};

    if (st->nover == 0 || st->nblock == 0)
        return;
    r.last = st->first + st->nonce + st->nblock - 1;
    for (size_t i = st->first + st->nonce; i <= r.last; i++)
        instr_reads(&prog->instrs[i], extend_read, &r);
}

struct stage_reader {
    struct program *prog;
    int stage;
    size_t last;
};

static void hold_read(uint32_t value, void *ctx)
{
    struct stage_reader *r = ctx;
    struct value *pv = &r->prog->values[value];

    if (pv->stage != r->stage && (pv->last_use == LIVE_UNUSED || pv->last_use < r->last))
        pv->last_use = r->last;
}

/* An auto stage on an accelerator may fall back: run again, on the CPU,
 * from its first instruction (exec.c).  What it reads from before it lives
 * to its last instruction, so that the second run finds it. */
static void hold_for_fallback(struct program *prog, size_t s)
{
    const struct program_stage *st = &prog->stages[s];
    struct stage_reader r = {.prog = prog, .stage = (int)s, .last = st->first + st->count - 1};

    if (!st->automatic || st->device.kind == TR_DEV_CPU || st->count == 0)
        return;
    for (size_t i = st->first; i <= r.last; i++)
        instr_reads(&prog->instrs[i], hold_read, &r);
}

bool liveness_run(struct program *prog)
{
    struct reader r = {.prog = prog};
    size_t *ndies = calloc(prog->ninstrs + 1, sizeof *ndies);

    if (!ndies)
        return false;
    for (size_t v = 0; v < prog->nvalues; v++)
        prog->values[v].last_use = LIVE_UNUSED;
    for (r.at = 0; r.at < prog->ninstrs; r.at++)
        instr_reads(&prog->instrs[r.at], note_read, &r);
    for (size_t s = 0; s < prog->nstages; s++) {
        const struct program_stage *st = &prog->stages[s];
        size_t end = stage_end(prog, s);
        for (size_t k = 0; k < st->nkept; k++) {
            struct value *v = &prog->values[st->kept[k]];
            v->kept = true;
            if (v->last_use == LIVE_UNUSED || v->last_use < end)
                v->last_use = next_stage_start(prog, s);
        }
    }
    /* what a foreach stage cuts into blocks lives while any block runs (to
     * the next stage that has instructions when it has none) */
    for (size_t s = 0; s < prog->nstages; s++) {
        const struct program_stage *st = &prog->stages[s];
        size_t last = st->count ? st->first + st->count - 1 : next_stage_start(prog, s);
        for (size_t c = 0; c < st->nover; c++) {
            struct value *over = &prog->values[st->over[c]];
            if (over->last_use == LIVE_UNUSED || over->last_use < last)
                over->last_use = last;
        }
    }
    for (size_t s = 0; s < prog->nstages; s++) {
        extend_over_blocks(prog, s);
        hold_for_fallback(prog, s);
    }
    for (size_t f = 0; f < prog->nfinals; f++)
        prog->values[prog->finals[f]].last_use = LIVE_FOREVER;
    for (size_t v = 0; v < prog->nvalues; v++) {
        struct value *pv = &prog->values[v];
        if (pv->last_use == LIVE_UNUSED && pv->origin == ORIGIN_RESULT && !pv->fused)
            pv->last_use = pv->def;
        if (pv->last_use < prog->ninstrs)
            ndies[pv->last_use]++;
    }
    for (size_t v = 0; v < prog->nvalues; v++) {
        struct value *pv = &prog->values[v];
        struct instr *in;
        if (pv->last_use >= prog->ninstrs)
            continue;
        in = &prog->instrs[pv->last_use];
        if (!add_to(prog, &in->dies, &in->ndies, ndies[pv->last_use], (uint32_t)v)) {
            free(ndies);
            return false;
        }
    }
    free(ndies);
    /* what each stage keeps: tensors made by then and read after it */
    for (size_t s = 0; s < prog->nstages; s++) {
        struct program_stage *st = &prog->stages[s];
        size_t end = stage_end(prog, s), n = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (size_t v = 0; v < prog->nvalues; v++) {
                const struct value *pv = &prog->values[v];
                bool made = pv->origin == ORIGIN_INPUT ||
                            (pv->origin == ORIGIN_RESULT && pv->def < end) ||
                            (pv->origin == ORIGIN_BUILTIN && pv->stage <= (int)s);
                if (!made || pv->meta.kind != TR_VALUE_TENSOR || pv->last_use == LIVE_UNUSED ||
                    (pv->last_use != LIVE_FOREVER && pv->last_use < end))
                    continue;
                if (pass == 0)
                    n++;
                else
                    st->keeps[st->nkeeps++] = (uint32_t)v;
            }
            if (pass == 0 && n && !(st->keeps = program_alloc(prog, n * sizeof *st->keeps)))
                return false;
            if (!n)
                break;
        }
    }
    return true;
}
