/*
 * cpu/fused.c - running a fused chain (tensorrun_fused.h) as one blocked
 * pass: each thread computes FUSED_BLOCK values at a time, every step into
 * a small buffer of its own (the thread's scratch), and hands the last
 * step's values on: into the result, or to the reduction or row-wise op
 * (reduce.c, nn.c) that asked for them through a `struct tr__source`.
 *
 * Each step is computed exactly as its kernel computes it on a tensor
 * (tr__ew_describe): its operands prepared as the kernel prepares them
 * (converted to the compute dtype, through an f16/bf16 result's dtype or
 * bool where the kernel goes that way), the kernel's own loop, and the
 * values rounded to the step's dtype.  An element's value does not depend
 * on the block it is computed in, and the tail groups values into its
 * own blocks, so the result has the unfused bits for every thread count.
 *
 * Scratch, per thread, in slots of FUSED_BLOCK values of 8 bytes: one per
 * input (its block, when it is not read where it is), two per step (its
 * values, and its loop's output before rounding), three operand slots and
 * three rounding slots shared by the steps, and one per constant operand
 * (its value repeated, filled once).
 */
#include <stdlib.h>
#include <string.h>

#include "../kernels.h"
#include "fused_impl.h"
#include "reduce_impl.h"

/* values a step computes at a time: its three slots (up to 8 KiB each)
 * stay in the L1 cache, where 4096, a reduction's block, spilled to L2 */
#define FUSED_BLOCK 1024
/* a slot is a block of 8-byte values and four cache lines more, so that
 * the slots a loop reads and writes start at different offsets in a page:
 * at the same offset, every load would wait on the store 4 KiB before it
 * (4K aliasing), and the loops would run at a fraction of their speed */
#define SLOT ((size_t)FUSED_BLOCK * 8 + 256)
#define PARALLEL_ELEMENTS 32768
/* fetch_tile: each used input's tile, TR__SOURCE_TILE outputs of a block
 * of values, as raw items; a cache line between their rows, as reduce.c's */
#define TILE_PITCH (FUSED_BLOCK + 16)
#define TILE_ROOM ((size_t)TR__SOURCE_TILE * TILE_PITCH * 8)
#define NO_DTYPE TR_DTYPE_COUNT

struct input {
    const char *base;
    enum tr_dtype dtype;
    int64_t strides[TR_MAX_DIMS]; /* in bytes, broadcast to the chain's shape */
    struct tr__iter kept, walk;   /* set by bind */
    size_t slot;
    bool used;                    /* by a step (not only by the tail) */
};

struct operand {
    enum tr_fused_ref ref;
    int index;
    enum tr_dtype via;  /* rounded to this dtype first; NO_DTYPE: not */
    _Alignas(8) char value[8]; /* CONST: the value in the compute dtype */
    size_t slot;        /* CONST: its block; else where it is converted */
    size_t via_slot;
};

struct step {
    struct tr__ew_desc d;
    enum tr_dtype result;
    struct operand ops[3];
    size_t slot, out_slot;
};

struct plan {
    struct tr__source src; /* first: the source is the plan */
    size_t slots;          /* the scratch of the slots; then, when tiled, TILE_ROOM */
    int ninputs, nsteps;
    struct input in[TR_FUSED_MAX_INPUTS];
    struct step st[TR_FUSED_MAX_STEPS];
};

/* The constant operands of op f: its tensor parameters given a number. */
static int constant_operands(const struct tr_fused_op *f)
{
    const struct tr_op_info *info = tr_op_get(f->op);
    int n = 0;

    for (int i = 0; i < info->nparams; i++) {
        enum tr_param_kind k = info->params[i].kind;
        if ((k == TR_PARAM_TENSOR || k == TR_PARAM_TENSOR_OR_NONE) &&
            f->args[i].ref == TR_FUSED_CONST && f->args[i].value.kind != TR_VALUE_NONE)
            n++;
    }
    return n;
}

size_t tr__fused_scratch(const struct tr_fused *chain)
{
    size_t slots = (size_t)chain->ninputs + 6;

    for (int s = 0; s < chain->nsteps; s++)
        slots += 2 + (size_t)constant_operands(&chain->steps[s]);
    return slots * SLOT;
}

/* --------------------------------------------------------- the source */

static tr_status bind(const struct tr__source *src, const bool *flags)
{
    struct plan *p = (struct plan *)(uintptr_t)src;

    for (int k = 0; k < p->ninputs; k++) {
        struct input *in = &p->in[k];
        int64_t ks[TR_MAX_DIMS], kshape[TR_MAX_DIMS], ws[TR_MAX_DIMS], wshape[TR_MAX_DIMS];
        const int64_t *sp;
        int nk = 0, nw = 0;
        for (int d = 0; d < src->ndim; d++) {
            if (flags[d]) {
                wshape[nw] = src->shape[d];
                ws[nw++] = in->strides[d];
            } else {
                kshape[nk] = src->shape[d];
                ks[nk++] = in->strides[d];
            }
        }
        sp = ks;
        tr__iter_init(&in->kept, nk, kshape, 1, &sp);
        sp = ws;
        tr__iter_init(&in->walk, nw, wshape, 1, &sp);
    }
    /* as reduce.c tiles a tensor: when an input's values of one output are
     * further apart than its neighbouring outputs */
    p->src.tiles = false;
    for (int k = 0; k < p->ninputs; k++) {
        const struct input *in = &p->in[k];
        int64_t rstep = llabs(in->walk.strides[0][in->walk.ndim - 1]);
        int64_t kstep = llabs(in->kept.strides[0][in->kept.ndim - 1]);
        if (in->used && tr__iter_count(&in->kept) > 1 && tr__iter_count(&in->walk) > 1 &&
            rstep != (int64_t)tr_dtype_size(in->dtype) && kstep < rstep)
            p->src.tiles = true;
    }
    p->src.scratch = p->slots + (p->src.tiles ? (size_t)p->ninputs * TILE_ROOM : 0);
    return TR_OK;
}

static void init(const struct tr__source *src, void *scratch)
{
    const struct plan *p = (const struct plan *)src;

    for (int s = 0; s < p->nsteps; s++)
        for (int i = 0; i < p->st[s].d.nin; i++) {
            const struct operand *op = &p->st[s].ops[i];
            enum tr_dtype c = p->st[s].d.in_compute;
            if (op->ref == TR_FUSED_CONST)
                tr__cpu_cast_row((char *)scratch + op->slot, (int64_t)tr_dtype_size(c), c,
                                 op->value, 0, c, FUSED_BLOCK);
        }
}

/* Asks for the bytes after [p, p + bytes) to be brought into the L2 cache
 * (a prefetch never faults, past the end of a mapping included): the next
 * block of an input read where it is arrives while the steps compute on
 * this one, rather than only when the first step reads it.  Measured on a
 * mapped 1 GiB input, x * 2.0 + 1.0 summed: about a fifth less time. */
static void prefetch_next(const char *p, size_t bytes)
{
    for (size_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(p + bytes + b, 0, 2);
}

/* The steps over n <= FUSED_BLOCK values of the inputs (each input's
 * compact, in its dtype), the last one's into dst as dtype to. */
static void compute_block(const struct plan *p, char *scratch, const char *const *inputs,
                          int64_t n, char *dst, enum tr_dtype to)
{
    const char *vals[TR_FUSED_MAX_STEPS];

    for (int s = 0; s < p->nsteps; s++) {
        const struct step *st = &p->st[s];
        enum tr_dtype cin = st->d.in_compute, cout = st->d.out_compute, r = st->result;
        const char *args[3], *computed;
        bool last = s == p->nsteps - 1;
        char *res = last && to == r ? dst : scratch + st->slot;

        for (int i = 0; i < st->d.nin; i++) {
            const struct operand *op = &st->ops[i];
            const char *v;
            enum tr_dtype from;
            if (op->ref == TR_FUSED_CONST) {
                args[i] = scratch + op->slot;
                continue;
            }
            v = op->ref == TR_FUSED_INPUT ? inputs[op->index] : vals[op->index];
            from = op->ref == TR_FUSED_INPUT ? p->in[op->index].dtype : p->st[op->index].result;
            if (op->via != NO_DTYPE) {
                tr__cpu_cast_row(scratch + op->via_slot, (int64_t)tr_dtype_size(op->via), op->via,
                                 v, (int64_t)tr_dtype_size(from), from, n);
                v = scratch + op->via_slot;
                from = op->via;
            }
            if (from != cin) {
                tr__cpu_cast_row(scratch + op->slot, (int64_t)tr_dtype_size(cin), cin, v,
                                 (int64_t)tr_dtype_size(from), from, n);
                v = scratch + op->slot;
            }
            args[i] = v;
        }
        if (!st->d.fn) {
            computed = args[0]; /* a copy: in_compute is out_compute */
        } else if (cout == r) {
            st->d.fn(res, args, n, &st->d.params);
            computed = NULL;
        } else {
            st->d.fn(scratch + st->out_slot, args, n, &st->d.params);
            computed = scratch + st->out_slot;
        }
        if (computed)
            tr__cpu_cast_row(res, (int64_t)tr_dtype_size(r), r, computed,
                             (int64_t)tr_dtype_size(cout), cout, n);
        vals[s] = res;
        if (last && res != dst)
            tr__cpu_cast_row(dst, (int64_t)tr_dtype_size(to), to, res, (int64_t)tr_dtype_size(r),
                             r, n);
    }
}

/* Values [first, first + n) of the walk at index o, n <= FUSED_BLOCK, into
 * dst as dtype to. */
static void eval_block(const struct plan *p, char *scratch, int64_t o, int64_t first, int64_t n,
                       char *dst, enum tr_dtype to)
{
    const char *inputs[TR_FUSED_MAX_INPUTS];

    for (int k = 0; k < p->ninputs; k++) {
        const struct input *in = &p->in[k];
        int64_t off[TR__ITER_MAX_OPS];
        if (!in->used)
            continue;
        tr__iter_offsets(&in->kept, o, off);
        inputs[k] = tr__walk_block(&in->walk, in->base + off[0], in->dtype, first, n,
                                   scratch + in->slot, in->dtype);
        if (inputs[k] != scratch + in->slot)
            prefetch_next(inputs[k], (size_t)n * tr_dtype_size(in->dtype));
    }
    compute_block(p, scratch, inputs, n, dst, to);
}

/* fetch for nt neighbouring outputs: each input's values for all of them
 * gathered row by row into its tile, then the steps output by output. */
static void fetch_tile(const struct tr__source *src, void *scratch, int64_t o, int nt,
                       int64_t first, int64_t n, char *dst, int64_t pitch, enum tr_dtype to)
{
    const struct plan *p = (const struct plan *)src;
    char *tiles = (char *)scratch + p->slots;
    int64_t offs[TR_FUSED_MAX_INPUTS][TR__SOURCE_TILE], size = (int64_t)tr_dtype_size(to);
    const char *inputs[TR_FUSED_MAX_INPUTS];

    for (int k = 0; k < p->ninputs; k++) {
        int64_t off[TR__ITER_MAX_OPS];
        for (int q = 0; p->in[k].used && q < nt; q++) {
            tr__iter_offsets(&p->in[k].kept, o + q, off);
            offs[k][q] = off[0];
        }
    }
    for (int64_t done = 0; done < n; done += FUSED_BLOCK) {
        int64_t m = n - done < FUSED_BLOCK ? n - done : FUSED_BLOCK;
        for (int k = 0; k < p->ninputs; k++)
            if (p->in[k].used)
                tr__gather_tile(&p->in[k].walk, p->in[k].base, offs[k], nt, first + done, m,
                                tr_dtype_size(p->in[k].dtype), TILE_PITCH,
                                tiles + (size_t)k * TILE_ROOM);
        for (int q = 0; q < nt; q++) {
            for (int k = 0; k < p->ninputs; k++)
                inputs[k] = tiles + (size_t)k * TILE_ROOM +
                            (size_t)q * TILE_PITCH * tr_dtype_size(p->in[k].dtype);
            compute_block(p, (char *)scratch, inputs, m, dst + (q * pitch + done) * size, to);
        }
    }
}

static void fetch(const struct tr__source *src, void *scratch, int64_t o, int64_t first,
                  int64_t n, char *dst, enum tr_dtype to)
{
    int64_t size = (int64_t)tr_dtype_size(to);

    for (int64_t done = 0; done < n; done += FUSED_BLOCK) {
        int64_t m = n - done < FUSED_BLOCK ? n - done : FUSED_BLOCK;
        eval_block((const struct plan *)src, scratch, o, first + done, m, dst + done * size, to);
    }
}

void *tr__source_scratch(const struct tr__source *src)
{
    size_t bytes = (src->scratch + 63) / 64 * 64;
    void *scratch = aligned_alloc(64, bytes ? bytes : 64);

    if (scratch)
        src->init(src, scratch);
    return scratch;
}

/* ------------------------------------------------------------- the plan */

/* t's byte strides as seen from a tensor of shape[0..ndim), broadcast. */
static void broadcast_strides(const struct tr_tensor *t, int ndim, const int64_t *shape,
                              int64_t *out)
{
    int64_t bs[TR_MAX_DIMS];

    tr__byte_strides(t, bs);
    for (int d = 0; d < ndim; d++) {
        int j = d - (ndim - t->ndim);
        out[d] = j < 0 || t->shape[j] == 1 || shape[d] == 1 ? 0 : bs[j];
    }
}

/* The argument of a step or tail as the kernels take it. */
static struct tr_arg kernel_arg(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                                const struct tr_fused_arg *a)
{
    struct tr_arg arg;

    memset(&arg, 0, sizeof arg);
    switch (a->ref) {
    case TR_FUSED_CONST:
        arg.value = a->value;
        break;
    case TR_FUSED_INPUT:
        arg.tensor = inputs[a->index];
        arg.value = tr_value_of(inputs[a->index]);
        break;
    case TR_FUSED_STEP:
        arg.value = chain->steps[a->index].result;
        break;
    }
    return arg;
}

/* A constant operand's value in the compute dtype, made as the kernel
 * makes it. */
static tr_status constant_value(const struct tr_arg *arg, enum tr__ew_prep prep,
                                enum tr_dtype result, enum tr_dtype compute, char *value)
{
    struct tr_tensor *t;

    if (prep == TR__EW_OPERAND)
        t = tr__operand(arg, result, compute);
    else
        t = tr__arg_tensor(arg, prep == TR__EW_TRUTH ? TR_DTYPE_BOOL
                                                     : tr_value_dtype(&arg->value));
    if (!t)
        return tr_last_status();
    tr__cpu_cast_row(value, 0, compute, tr_tensor_data(t), 0, t->dtype, 1);
    tr_release(t);
    return TR_OK;
}

static tr_status plan_init(struct plan *p, const struct tr_fused *chain,
                           struct tr_tensor *const *inputs)
{
    const struct tr_value *shape = &chain->steps[chain->nsteps - 1].result;
    size_t slot = 0;

    memset(p, 0, sizeof *p);
    p->ninputs = chain->ninputs;
    p->nsteps = chain->nsteps;
    p->src.dtype = shape->dtype;
    p->src.ndim = shape->ndim;
    memcpy(p->src.shape, shape->shape, sizeof p->src.shape);
    p->src.bind = bind;
    p->src.init = init;
    p->src.fetch = fetch;
    p->src.fetch_tile = fetch_tile;
    for (int k = 0; k < p->ninputs; k++) {
        p->in[k].base = tr_tensor_data(inputs[k]);
        p->in[k].dtype = inputs[k]->dtype;
        broadcast_strides(inputs[k], shape->ndim, shape->shape, p->in[k].strides);
        p->in[k].slot = slot;
        slot += SLOT;
    }
    /* the shared operand and rounding slots */
    for (int s = 0; s < p->nsteps; s++)
        for (int i = 0; i < 3; i++) {
            p->st[s].ops[i].slot = slot + (size_t)i * SLOT;
            p->st[s].ops[i].via_slot = slot + (size_t)(3 + i) * SLOT;
        }
    slot += 6 * SLOT;
    for (int s = 0; s < p->nsteps; s++) {
        const struct tr_fused_op *f = &chain->steps[s];
        const struct tr__op *op = tr__op_of(tr_op_get(f->op));
        struct tr_arg args[TR_OP_MAX_PARAMS];
        struct step *st = &p->st[s];

        for (int i = 0; i < op->info.nparams; i++)
            args[i] = kernel_arg(chain, inputs, &f->args[i]);
        st->result = f->result.dtype;
        TR_RETURN_ERROR_IF(!tr__ew_describe(op, args, &f->result, &st->d), TR_ERR_STATE,
                           "fused chain: step %d: %s has no loop for these dtypes", s,
                           op->info.name);
        st->slot = slot;
        st->out_slot = slot + SLOT;
        slot += 2 * SLOT;
        for (int i = 0; i < st->d.nin; i++) {
            const struct tr_fused_arg *a = &f->args[st->d.param[i]];
            struct operand *o = &st->ops[i];
            o->ref = a->ref;
            o->index = a->index;
            o->via = NO_DTYPE;
            if (a->ref == TR_FUSED_INPUT)
                p->in[a->index].used = true;
            if (a->ref == TR_FUSED_CONST) {
                TR_FORWARD_IF_ERROR(constant_value(&args[st->d.param[i]], st->d.prep[i],
                                                   st->result, st->d.in_compute, o->value));
                o->slot = slot;
                slot += SLOT;
                continue;
            }
            if (st->d.prep[i] == TR__EW_TRUTH)
                o->via = TR_DTYPE_BOOL;
            else if (st->d.prep[i] == TR__EW_OPERAND &&
                     tr__operand_rounds(args[st->d.param[i]].value.dtype, st->result))
                o->via = st->result;
        }
    }
    p->src.scratch = p->slots = slot;
    /* what tr_fused_scratch_bytes declares, from the chain alone */
    TR_RETURN_ERROR_IF(slot != tr__fused_scratch(chain), TR_ERR_STATE,
                       "fused chain: %zu bytes of scratch, %zu declared", slot,
                       tr__fused_scratch(chain));
    return TR_OK;
}

/* ------------------------------------------------------------- running */

/* A chain without a tail: the last step's values straight into ydata
 * (compact), or, when store is not NULL, through each thread's stage into
 * store (each thread's blocks follow one another, so a stage fills with
 * one run). */
static tr_status run_into(const struct plan *p, char *ydata, const struct tr__store *store)
{
    bool flags[TR_MAX_DIMS], failed = false;
    int64_t total = 1, blocks, size = (int64_t)tr_dtype_size(p->src.dtype);
    atomic_int store_error = 0;

    for (int d = 0; d < p->src.ndim; d++)
        total *= p->src.shape[d];
    if (total == 0)
        return TR_OK;
    blocks = (total + FUSED_BLOCK - 1) / FUSED_BLOCK;
    for (int d = 0; d < TR_MAX_DIMS; d++)
        flags[d] = true;
    TR_FORWARD_IF_ERROR(p->src.bind(&p->src, flags));
#pragma omp parallel if (total > PARALLEL_ELEMENTS) num_threads(tr_num_threads())
    {
        void *scratch = tr__source_scratch(&p->src);
        struct tr__stage stage = {0};

        if (store)
            tr__stage_init(&stage, store, TR__STAGE_BYTES);
        if (!scratch || (store && !stage.buf)) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t first = b * FUSED_BLOCK;
            int64_t n = total - first < FUSED_BLOCK ? total - first : FUSED_BLOCK;
            char *dst;
            if (!scratch || (store && (!stage.buf || stage.err)))
                continue;
            dst = store ? tr__stage_place(&stage, (uint64_t)(first * size), (uint64_t)(n * size))
                        : ydata + first * size;
            eval_block(p, scratch, 0, first, n, dst, p->src.dtype);
        }
        tr__stage_finish(&stage, &store_error);
        free(scratch);
    }
    TR_RETURN_ERROR_IF(failed, TR_ERR_OOM, "fused chain: out of memory for a thread's scratch");
    if (atomic_load(&store_error))
        return tr__store_failed(store, atomic_load(&store_error));
    return TR_OK;
}

tr_status tr__fused_cpu_stream(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                               const struct tr__store *store)
{
    struct plan *p = malloc(sizeof *p);
    tr_status s;

    TR_RETURN_ERROR_IF(!p, TR_ERR_OOM, "fused chain: out of memory");
    s = plan_init(p, chain, inputs);
    if (s == TR_OK)
        s = run_into(p, NULL, store);
    free(p);
    return s;
}

tr_status tr__fused_cpu_run(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                            struct tr_tensor *y)
{
    struct plan *p = malloc(sizeof *p);
    tr_status s;

    TR_RETURN_ERROR_IF(!p, TR_ERR_OOM, "fused chain: out of memory");
    s = plan_init(p, chain, inputs);
    if (s == TR_OK && !chain->has_tail) {
        s = run_into(p, tr_tensor_data_mut(y), NULL);
    } else if (s == TR_OK) {
        const struct tr__op *op = tr__op_of(tr_op_get(chain->tail.op));
        struct tr_arg args[TR_OP_MAX_PARAMS];
        for (int i = 0; i < op->info.nparams; i++)
            args[i] = kernel_arg(chain, inputs, &chain->tail.args[i]);
        memset(&args[0], 0, sizeof args[0]);
        args[0].value = chain->steps[chain->nsteps - 1].result;
        s = op->kernel == tr__k_reduce
                ? tr__reduce_source(op, args, &chain->tail.result, &p->src, y)
                : tr__nn_source(op, args, &chain->tail.result, &p->src, y);
    }
    free(p);
    return s;
}
