/*
 * last_block.c - pairing a foreach stage's last-block typing with its
 * full-block typing (last_block.h).
 */
#include "config.h"

#include "last_block.h"

#include <string.h>

struct pairing {
    struct program *prog;
    uint32_t vfirst, vmid, vend;
};

/* The full-block id of value id of the last block's typing. */
static uint32_t full_id(const struct pairing *p, uint32_t id)
{
    return id >= p->vmid && id < p->vend ? id - (p->vmid - p->vfirst) : id;
}

static bool same_constant(const struct tr_value *a, const struct tr_value *b)
{
    if (a->kind != b->kind || a->known != b->known)
        return false;
    switch (a->kind) {
    case TR_VALUE_INT:
        return a->integer == b->integer;
    case TR_VALUE_FLOAT:
        return memcmp(&a->number, &b->number, sizeof a->number) == 0;
    case TR_VALUE_BOOL:
        return a->boolean == b->boolean;
    case TR_VALUE_STRING:
        return (a->string == NULL) == (b->string == NULL) &&
               (!a->string || strcmp(a->string, b->string) == 0);
    case TR_VALUE_DTYPE:
        return a->dtype == b->dtype;
    case TR_VALUE_LIST:
        if (a->count != b->count)
            return false;
        for (size_t i = 0; i < a->count; i++)
            if (!same_constant(&a->items[i], &b->items[i]))
                return false;
        return true;
    case TR_VALUE_TENSOR:
        return a->dtype == b->dtype && a->ndim == b->ndim &&
               memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
    default:
        return true;
    }
}

/* Compares operand a (full block) with b (last block): false when they
 * cannot be the same instruction's; *differs when only a constant differs. */
static bool pair_operand(const struct pairing *p, const struct operand *a,
                         const struct operand *b, bool *differs)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case OPERAND_VALUE:
        return a->value == full_id(p, b->value);
    case OPERAND_LIST:
        if (a->count != b->count)
            return false;
        for (size_t i = 0; i < a->count; i++)
            if (!pair_operand(p, &a->items[i], &b->items[i], differs))
                return false;
        return true;
    default:
        if (!same_constant(&a->meta, &b->meta))
            *differs = true;
        return true;
    }
}

/* A copy of the last block's operand o with full-block value ids. */
static bool copy_operand(const struct pairing *p, const struct operand *o, struct operand *out)
{
    *out = *o;
    if (o->kind == OPERAND_VALUE)
        out->value = full_id(p, o->value);
    if (o->kind != OPERAND_LIST)
        return true;
    out->items = program_alloc(p->prog, (o->count ? o->count : 1) * sizeof *out->items);
    if (!out->items)
        return false;
    for (size_t i = 0; i < o->count; i++)
        if (!copy_operand(p, &o->items[i], &out->items[i]))
            return false;
    return true;
}

/* Whether instructions a (full block) and b (last block) pair up; *args
 * and *subs say where a constant differs. */
static bool pair_instr(const struct pairing *p, const struct instr *a, const struct instr *b,
                       bool *args, bool *subs)
{
    *args = *subs = false;
    if (a->kind != b->kind || a->op != b->op || a->nargs != b->nargs ||
        a->nresults != b->nresults || a->nsubs != b->nsubs || a->kind == INSTR_WRITE ||
        a->kind == INSTR_FUSED)
        return false;
    for (int r = 0; r < a->nresults; r++)
        if (a->results[r] != full_id(p, b->results[r]))
            return false;
    for (int i = 0; i < a->nargs; i++)
        if (!pair_operand(p, &a->args[i], &b->args[i], args))
            return false;
    for (size_t i = 0; i < a->nsubs; i++) {
        if (a->subs[i].kind != b->subs[i].kind)
            return false;
        for (int k = 0; k < 3; k++)
            if (!pair_operand(p, &a->subs[i].part[k], &b->subs[i].part[k], subs))
                return false;
    }
    return true;
}

static bool record(const struct pairing *p, struct instr *a, const struct instr *b, bool args,
                   bool subs)
{
    if (args) {
        a->last_args = program_alloc(p->prog, (size_t)(a->nargs ? a->nargs : 1) *
                                                  sizeof *a->last_args);
        if (!a->last_args)
            return false;
        for (int i = 0; i < a->nargs; i++)
            if (!copy_operand(p, &b->args[i], &a->last_args[i]))
                return false;
    }
    if (subs) {
        a->last_subs = program_alloc(p->prog, (a->nsubs ? a->nsubs : 1) * sizeof *a->last_subs);
        if (!a->last_subs)
            return false;
        for (size_t i = 0; i < a->nsubs; i++) {
            a->last_subs[i].kind = b->subs[i].kind;
            for (int k = 0; k < 3; k++)
                if (!copy_operand(p, &b->subs[i].part[k], &a->last_subs[i].part[k]))
                    return false;
        }
    }
    return true;
}

enum last_block_pairing last_block_pair(struct program *prog, size_t first, size_t mid,
                                        size_t end, uint32_t vfirst, uint32_t vmid,
                                        uint32_t vend)
{
    struct pairing p = {.prog = prog, .vfirst = vfirst, .vmid = vmid, .vend = vend};

    if (end - mid != mid - first || vend - vmid != vmid - vfirst)
        return LAST_BLOCK_DIFFERENT;
    for (size_t i = 0; i < mid - first; i++) {
        bool args, subs;
        if (!pair_instr(&p, &prog->instrs[first + i], &prog->instrs[mid + i], &args, &subs))
            return LAST_BLOCK_DIFFERENT;
    }
    for (size_t i = 0; i < mid - first; i++) {
        bool args, subs;
        pair_instr(&p, &prog->instrs[first + i], &prog->instrs[mid + i], &args, &subs);
        if (!record(&p, &prog->instrs[first + i], &prog->instrs[mid + i], args, subs))
            return LAST_BLOCK_NO_MEMORY;
    }
    for (uint32_t v = vfirst; v < vmid; v++) {
        struct value *a = &prog->values[v];
        const struct value *b = &prog->values[v + (vmid - vfirst)];
        if (a->meta.kind == TR_VALUE_TENSOR && !same_constant(&a->meta, &b->meta)) {
            a->has_last = true;
            a->last_meta = b->meta;
        }
    }
    return LAST_BLOCK_PAIRED;
}
