/*
 * place.c - destinations of results (place.h).
 */
#include "config.h"

#include "place.h"

#include <stdlib.h>

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

void place_run(struct program *prog)
{
    for (size_t g = 0; g < prog->ngroups; g++) {
        const struct output_group *grp = &prog->groups[g];
        uint32_t id = prog->outputs[grp->members[0]];
        const struct value *v = &prog->values[id];
        struct instr *def;
        if (!grp->mappable || v->origin != ORIGIN_RESULT || v->kept ||
            v->last_use != grp->write || v->meta.device.kind != TR_DEV_CPU)
            continue;
        def = &prog->instrs[v->def];
        if ((def->kind != INSTR_OP && def->kind != INSTR_FUSED) || def->results[0] != id ||
            op_is_view(def->op))
            continue;
        if (other_reads(prog, id, grp->write) == 0)
            def->dest_group = (ptrdiff_t)g;
    }
}
