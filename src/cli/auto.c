/*
 * auto.c - the placement of device: auto stages (auto.h).
 */
#include "config.h"

#include "auto.h"

#include <stdlib.h>

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t elements(const struct tr_value *m)
{
    uint64_t n = 1;

    if (m->kind != TR_VALUE_TENSOR)
        return 0;
    for (int d = 0; d < m->ndim; d++)
        n = mul_sat(n, m->shape[d] > 0 ? (uint64_t)m->shape[d] : 0);
    return n;
}

static uint64_t operand_elements(const struct program *prog, const struct operand *o)
{
    uint64_t n = 0;

    if (o->kind == OPERAND_VALUE)
        return elements(&prog->values[o->value].meta);
    for (size_t i = 0; o->kind == OPERAND_LIST && i < o->count; i++)
        n = add_sat(n, operand_elements(prog, &o->items[i]));
    return n;
}

void auto_stage_work(const struct program *prog, size_t s, uint64_t *out_elements,
                     uint64_t *out_macs)
{
    const struct program_stage *st = &prog->stages[s];
    uint64_t n = 0, macs = 0, times = st->nover > 0 && st->nblocks > 0 ? (uint64_t)st->nblocks : 1;

    for (size_t i = st->first; i < st->first + st->count; i++) {
        const struct instr *in = &prog->instrs[i];
        if (in->kind != INSTR_OP || in->op->group_id == TR_GROUP_VIEWS)
            continue;
        for (int a = 0; a < in->nargs; a++)
            n = add_sat(n, operand_elements(prog, &in->args[a]));
        for (int r = 0; r < in->nresults; r++)
            n = add_sat(n, elements(&prog->values[in->results[r]].meta));
        if ((in->op->id == TR_OP_MATMUL || in->op->id == TR_OP_CDIST) &&
            in->args[0].kind == OPERAND_VALUE) {
            const struct tr_value *a = &prog->values[in->args[0].value].meta;
            uint64_t inner = a->kind == TR_VALUE_TENSOR && a->ndim > 0 && a->shape[a->ndim - 1] > 0
                                 ? (uint64_t)a->shape[a->ndim - 1]
                                 : 0;
            macs = add_sat(macs, mul_sat(elements(&prog->values[in->results[0]].meta), inner));
        }
    }
    *out_elements = mul_sat(n, times);
    *out_macs = mul_sat(macs, times);
}

/* The accelerator auto places stages on, when there is one. */
static bool accelerator(struct tr_device *out)
{
    const char *fake = getenv("TENSORRUN_FAKE_DEVICES");

    *out = fake && *fake ? TR_FAKE(0) : TR_CUDA(0);
    return tr_device_available(*out);
}

static bool made_on_cpu(const struct program *prog, const struct value *v, size_t s)
{
    return v->origin == ORIGIN_RESULT && v->stage == (int)s && v->meta.kind == TR_VALUE_TENSOR &&
           !v->meta.weak && v->meta.device.kind == TR_DEV_CPU &&
           !(prog->instrs[v->def].kind == INSTR_OP && prog->instrs[v->def].op->id == TR_OP_TO);
}

static void follow(const struct program *prog, struct operand *o)
{
    if (o->kind == OPERAND_VALUE && o->meta.kind == TR_VALUE_TENSOR)
        o->meta.device = prog->values[o->value].meta.device;
    for (size_t i = 0; o->kind == OPERAND_LIST && i < o->count; i++)
        follow(prog, &o->items[i]);
}

/* Moves stage s to device: its results (as a foreach stage's whole and
 * last block describe them too), and every operand's copy of their
 * description. */
static void retarget(struct program *prog, size_t s, struct tr_device device)
{
    prog->stages[s].device = device;
    for (size_t v = 0; v < prog->nvalues; v++) {
        struct value *pv = &prog->values[v];
        if (!made_on_cpu(prog, pv, s))
            continue;
        pv->meta.device = device;
        if (pv->joined)
            pv->joined_meta.device = device;
        if (pv->has_last)
            pv->last_meta.device = device;
    }
    for (size_t i = 0; i < prog->ninstrs; i++)
        for (int a = 0; a < prog->instrs[i].nargs; a++)
            follow(prog, &prog->instrs[i].args[a]);
}

void auto_place(struct program *prog, const char *const *stage_names, const bool *pinned,
                struct diag_list *d)
{
    struct tr_device accel;
    int asked = 0; /* 0: not yet; 1: there is one; -1: there is none */

    for (size_t s = 0; s < prog->nstages; s++) {
        const struct instr *in;
        uint64_t n, macs;
        char dev[TR_DEVICE_NAME_MAX];
        if (!prog->stages[s].automatic || (pinned && pinned[s]))
            continue;
        auto_stage_work(prog, s, &n, &macs);
        if (n < AUTO_MIN_ELEMENTS && macs < AUTO_MIN_MACS)
            continue;
        if (asked == 0)
            asked = accelerator(&accel) ? 1 : -1;
        if (asked < 0)
            return;
        in = program_unsupported(prog, s, accel);
        if (in) {
            diag_warning(d, in->line, in->col, NULL,
                         "stage '%s' runs on the CPU: %s has no kernel for %s",
                         stage_names[s], tr_device_format(accel, dev, sizeof dev),
                         in->op->name);
            continue;
        }
        retarget(prog, s, accel);
    }
}
