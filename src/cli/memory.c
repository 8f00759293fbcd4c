/*
 * memory.c - the memory pass (memory.h): a replay of the pool over the
 * program, in the order the executor runs it.
 *
 * Every pool block is a root: an input read into memory, a result the
 * kernel made.  A value holds the root it was made in; a view (x[...],
 * permute, a copy that needs none) holds its argument's, and so does a
 * result computed in place.  A root's block is active while any value
 * holds it, as the engine's storage is alive while any handle is.  An
 * instruction adds, for a moment, what tr_op_scratch (or tr_fused_memory,
 * or the write's buffers) declares on top of the blocks active before it;
 * the highest such sum during a stage is its peak.
 */
#include "config.h"

#include "memory.h"

#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "liveness.h"
#include "tensorrun_fused.h"
#include "tensorrun_io.h"

#define NO_ROOT SIZE_MAX

struct root {
    uint64_t bytes;              /* its block, rounded */
    size_t device;               /* an index into replay.devices */
    size_t holders;              /* the live values that hold it */
};

struct replay {
    struct program *prog;
    int threads;
    struct root *roots;
    size_t nroots;
    size_t *root_of;             /* per value: the root it holds, or NO_ROOT */
    struct tr_device *devices;   /* every device met so far, the CPU first */
    uint64_t *live;              /* per device: the active bytes now */
    size_t ndevices, devices_cap;
    struct program_stage *stage; /* the stage replayed, or &before */
    struct program_stage before; /* the inputs' loading and the writes before the stages */
    size_t at;                   /* the instruction replayed */
    /* foreach: while the (one) block replayed runs, and each joined value's
     * whole (its root, or NO_ROOT for one in its file) */
    bool in_blocks;
    bool last_block;             /* replaying a shorter last block: its operands and shapes,
                                    the decisions the full block made */
    const struct program_stage *held; /* during the part before its blocks, the stage
                                    whose cut values die after them at the earliest */
    size_t *whole_of;
    /* per value: what it is to the instructions replayed now; a joined
     * value is its blocks' whole once its stage's blocks have run */
    const struct tr_value **meta_of;
    bool ok;
};

/* Sums of sizes the headers and the pipeline choose: past 2^64 bytes
 * (nothing that runs) they stay at UINT64_MAX, which passes any limit. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static size_t device_index(struct replay *r, struct tr_device device)
{
    for (size_t i = 0; i < r->ndevices; i++)
        if (tr_device_equal(r->devices[i], device))
            return i;
    if (r->ndevices == r->devices_cap) {
        r->ok = false; /* cannot happen: the cap counts every place a device is named */
        return 0;
    }
    r->devices[r->ndevices] = device;
    r->live[r->ndevices] = 0;
    return r->ndevices++;
}

/* Bytes active on device d for a moment, on top of what is live now. */
static void reach(struct replay *r, size_t d, uint64_t extra)
{
    uint64_t total = sat_add(r->live[d], extra);

    for (size_t i = 0; r->stage && i < r->stage->nmemory; i++) {
        struct stage_memory *m = &r->stage->memory[i];
        if (tr_device_equal(m->device, r->devices[d]) && total > m->peak_bytes) {
            m->peak_bytes = total;
            m->peak_at = r->at;
        }
    }
}

static void hold(struct replay *r, uint32_t value, size_t root)
{
    r->root_of[value] = root;
    if (root != NO_ROOT)
        r->roots[root].holders++;
}

/* A new pool block of bytes (already rounded) on device d, active now and
 * held by holders handles; its index. */
static size_t new_root(struct replay *r, size_t d, uint64_t bytes, size_t holders)
{
    struct root *root = &r->roots[r->nroots];

    root->bytes = bytes;
    root->device = d;
    root->holders = holders;
    r->live[d] = sat_add(r->live[d], bytes);
    return r->nroots++;
}

/* A new block for value, of bytes already rounded (none for 0). */
static void take(struct replay *r, uint32_t value, size_t d, uint64_t bytes)
{
    if (bytes == 0) {
        r->root_of[value] = NO_ROOT;
        return;
    }
    r->prog->values[value].block_bytes = bytes;
    hold(r, value, new_root(r, d, bytes, 0));
}

/* One holder of root lets go; the last one's going frees its block. */
static void let_go(struct replay *r, size_t root)
{
    if (root == NO_ROOT || --r->roots[root].holders > 0)
        return;
    if (r->live[r->roots[root].device] != UINT64_MAX) /* saturated stays so */
        r->live[r->roots[root].device] -= r->roots[root].bytes;
}

static void release(struct replay *r, uint32_t value)
{
    size_t root = r->root_of[value];

    r->root_of[value] = NO_ROOT;
    let_go(r, root);
}

/* ------------------------------------------------------------ arguments */

/* The descriptions tr_op_scratch takes: each argument as the engine will
 * see it (a value's tensor as it lies, a list item by item).  lists[i]
 * holds list i's items; free them with free_lists. */
static bool describe_args(const struct replay *r, const struct instr *in,
                          struct tr_value *args, struct tr_value **lists)
{
    const struct operand *operands = r->last_block && in->last_args ? in->last_args : in->args;

    for (int i = 0; i < in->nargs; i++) {
        const struct operand *o = &operands[i];
        lists[i] = NULL;
        if (o->kind == OPERAND_VALUE) {
            args[i] = *r->meta_of[o->value];
            continue;
        }
        args[i] = o->meta;
        if (o->kind != OPERAND_LIST)
            continue;
        lists[i] = calloc(o->count ? o->count : 1, sizeof *lists[i]);
        if (!lists[i])
            return false;
        for (size_t k = 0; k < o->count; k++)
            lists[i][k] = o->items[k].kind == OPERAND_VALUE ? *r->meta_of[o->items[k].value]
                                                            : o->items[k].meta;
        args[i].items = lists[i];
        args[i].count = o->count;
    }
    return true;
}

static void free_lists(struct tr_value **lists, int n)
{
    for (int i = 0; i < n; i++)
        free(lists[i]);
}

static bool same_layout(const struct tr_value *a, const struct tr_value *b)
{
    return a->kind == TR_VALUE_TENSOR && b->kind == TR_VALUE_TENSOR && a->dtype == b->dtype &&
           a->ndim == b->ndim && !a->strided &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

static int reads_of(const struct instr *in, uint32_t value)
{
    int n = 0;

    for (int i = 0; i < in->nargs; i++)
        n += in->args[i].kind == OPERAND_VALUE && in->args[i].value == value;
    return n;
}

/* The argument an elementwise instruction at can write its result over:
 * a result that dies here, read once, compact, of the result's dtype and
 * shape, in a CPU block nothing else holds (the engine then takes it as
 * the result's destination, struct tr_dest); -1 when there is none. */
static int in_place_arg(const struct replay *r, const struct instr *in)
{
    const struct program *prog = r->prog;
    const struct value *res = &prog->values[in->results[0]];

    if (in->transfer || in->dest_group >= 0 || !tr_op_takes_dest(in->op) ||
        (in->op->group_id != TR_GROUP_UNARY && in->op->group_id != TR_GROUP_BINARY) ||
        res->meta.kind != TR_VALUE_TENSOR || res->meta.device.kind != TR_DEV_CPU)
        return -1;
    for (int i = 0; i < in->nargs; i++) {
        const struct operand *o = &in->args[i];
        const struct value *v = o->kind == OPERAND_VALUE ? &prog->values[o->value] : NULL;
        size_t root = v ? r->root_of[o->value] : NO_ROOT;
        if (root == NO_ROOT || v->origin != ORIGIN_RESULT || v->last_use != r->at ||
            reads_of(in, o->value) != 1 || !same_layout(r->meta_of[o->value], &res->meta) ||
            r->roots[root].holders != 1 || !tr_device_equal(r->devices[r->roots[root].device], TR_CPU))
            continue;
        return i;
    }
    return -1;
}

/* Whether instruction in, in a foreach stage's blocks, computes its
 * first result, a joined value, straight into its block's rows of the
 * joined whole (compact rows of a compact tensor, which any kernel that
 * takes a destination can write); the others' joined results are copied
 * there (exec_foreach.c). */
static bool into_join(const struct replay *r, const struct instr *in)
{
    const struct value *v = in->nresults > 0 ? &r->prog->values[in->results[0]] : NULL;

    if (!r->in_blocks || !v || (v->join != JOIN_POOL && v->join != JOIN_FILE) ||
        v->meta.kind != TR_VALUE_TENSOR)
        return false;
    if (in->kind == INSTR_FUSED)
        return true;
    return in->kind == INSTR_OP && !in->transfer && tr_op_takes_dest(in->op) &&
           v->meta.device.kind == TR_DEV_CPU;
}

/* ------------------------------------------------------------ instructions */

static void replay_op(struct replay *r, struct instr *in)
{
    struct tr_value args[TR_OP_MAX_PARAMS], results[TR_OP_MAX_RESULTS];
    struct tr_value *lists[TR_OP_MAX_PARAMS] = {NULL};
    bool given[TR_OP_MAX_RESULTS] = {false};
    struct tr_op_memory m;
    size_t d, from;

    if (!r->last_block) { /* every block runs the full block's decisions */
        in->into_join = into_join(r, in);
        in->in_place = in->into_join ? -1 : in_place_arg(r, in);
    }
    given[0] = in->in_place >= 0 || in->into_join ||
               (in->dest_group >= 0 && tr_op_takes_dest(in->op));
    for (int i = 0; i < in->nresults; i++)
        results[i] = *r->meta_of[in->results[i]];
    if (!describe_args(r, in, args, lists)) {
        free_lists(lists, in->nargs);
        r->ok = false;
        return;
    }
    if (tr_op_scratch(in->op, args, results, given, r->threads, &m) != TR_OK) {
        tr_clear_error(); /* no kernel: the run refuses it before it starts */
        memset(&m, 0, sizeof m);
    }
    free_lists(lists, in->nargs);
    d = device_index(r, results[0].kind == TR_VALUE_TENSOR ? results[0].device : TR_CPU);
    from = args[0].kind == TR_VALUE_TENSOR ? device_index(r, args[0].device) : d;
    if (in->op->id == TR_OP_TO && from != d) {
        /* a compact copy where it is, then the block where it goes */
        reach(r, from, m.scratch);
        reach(r, d, m.results[0]);
    } else {
        reach(r, d, m.peak);
    }
    for (int i = 0; i < in->nresults; i++) {
        uint32_t id = in->results[i];
        const struct operand *alias = NULL;
        if (m.results[i] > 0) {
            take(r, id, d, m.results[i]);
            continue;
        }
        if (i == 0 && in->into_join) {
            hold(r, id, r->whole_of[id]);
            continue;
        }
        if (i == 0 && in->in_place >= 0)
            alias = &in->args[in->in_place];
        else if (!given[i] && results[i].kind == TR_VALUE_TENSOR &&
                 (!tr_op_takes_dest(in->op) || in->op->group_id == TR_GROUP_COPY))
            alias = &in->args[0]; /* a view, or x itself (a copy it needs none of) */
        if (alias && alias->kind == OPERAND_VALUE)
            hold(r, id, r->root_of[alias->value]);
        else
            r->root_of[id] = NO_ROOT;
    }
}

static void replay_fused(struct replay *r, struct instr *in)
{
    struct tr_value inputs[TR_FUSED_MAX_INPUTS];
    struct tr_fused last;
    const struct tr_fused *chain = in->chain;
    struct tr_op_memory m;
    size_t d = device_index(r, TR_CPU);

    if (!r->last_block) {
        in->into_join = into_join(r, in);
    } else {
        /* the chain typed again with the last block's operands */
        last = *in->chain;
        for (int k = 0; k < in->nfinputs; k++)
            inputs[k] = *r->meta_of[in->finputs[k]];
        if (tr_fused_check(&last, inputs, NULL, NULL) == TR_OK)
            chain = &last;
        else
            tr_clear_error();
    }
    if (tr_fused_memory(chain, in->dest_group >= 0 || in->into_join, r->threads, &m) !=
        TR_OK) {
        tr_clear_error();
        memset(&m, 0, sizeof m);
    }
    reach(r, d, m.peak);
    if (in->into_join)
        hold(r, in->results[0], r->whole_of[in->results[0]]);
    else
        take(r, in->results[0], d, m.results[0]);
}

/* What exec's write_group holds: each constant made a tensor, then one
 * member's conversion buffer at a time (tio_write_pool_bytes). */
static void replay_write(struct replay *r, const struct instr *in)
{
    const struct program *prog = r->prog;
    const struct output_group *g = &prog->groups[in->group];
    uint64_t held = 0, buffer = 0;

    for (size_t i = 0; i < in->nwargs; i++) {
        const struct value *v = &prog->values[in->wargs[i]];
        enum tr_dtype want = g->dtypes[i];
        struct tr_value t = *r->meta_of[in->wargs[i]];
        uint64_t b;
        if (t.kind != TR_VALUE_TENSOR) {
            bool list = t.kind == TR_VALUE_LIST;
            enum tr_dtype stored = fold_stored_dtype(&t, list ? t.items : &t);
            memset(&t, 0, sizeof t);
            if (stored == TR_DTYPE_COUNT)
                continue; /* refused when it is written */
            t.kind = TR_VALUE_TENSOR;
            t.dtype = stored;
            t.ndim = list ? 1 : 0;
            t.shape[0] = list ? (int64_t)v->meta.count : 1;
            t.device = TR_CPU;
            held = sat_add(held, tr_memory_block_size((list ? v->meta.count : 1) *
                                                      tr_dtype_size(stored)));
        } else if ((v->origin == ORIGIN_RESULT &&
                    prog->instrs[v->def].dest_group == (ptrdiff_t)in->group) ||
                   (v->join == JOIN_FILE && v->join_group == (ptrdiff_t)in->group)) {
            continue; /* computed in the file: nothing to write */
        }
        b = tr_memory_block_size(tio_write_pool_bytes(&t, want));
        if (b > buffer)
            buffer = b;
    }
    reach(r, device_index(r, TR_CPU), sat_add(held, buffer));
}

static void replay_instr(struct replay *r, struct instr *in)
{
    if (in->fused_into < 0) {
        switch (in->kind) {
        case INSTR_OP:
            replay_op(r, in);
            break;
        case INSTR_FUSED:
            replay_fused(r, in);
            break;
        case INSTR_WRITE:
            replay_write(r, in);
            break;
        case INSTR_INDEX:
            hold(r, in->results[0], r->root_of[in->args[0].value]);
            break;
        }
    }
    for (size_t k = 0; k < in->ndies; k++)
        if ((!r->in_blocks || liveness_block_local(r->prog, (size_t)in->stage, in->dies[k])) &&
            !(r->held && stage_over_index(r->held, in->dies[k]) >= 0))
            release(r, in->dies[k]); /* the rest dies after the last block */
}

/* ------------------------------------------------------------ stages */

static void begin_stage(struct replay *r, struct program_stage *st)
{
    st->nmemory = 0;
    st->memory[st->nmemory++].device = st->device;
    if (st->device.kind != TR_DEV_CPU)
        st->memory[st->nmemory++].device = TR_CPU;
    for (size_t i = 0; i < st->nmemory; i++) {
        struct stage_memory *m = &st->memory[i];
        m->start_bytes = m->peak_bytes = r->live[device_index(r, m->device)];
        m->peak_at = SIZE_MAX;
    }
    r->stage = st;
}

/* The stage's scope ends: what it made and does not keep is released. */
static void end_stage(struct replay *r, size_t s)
{
    const struct program_stage *st = &r->prog->stages[s];

    for (size_t v = 0; v < r->prog->nvalues; v++) {
        bool kept = false;
        if (r->prog->values[v].stage != (int)s || r->root_of[v] == NO_ROOT)
            continue;
        for (size_t k = 0; k < st->nkeeps && !kept; k++)
            kept = st->keeps[k] == v;
        if (!kept)
            release(r, (uint32_t)v);
    }
    for (size_t i = 0; i < st->nmemory; i++)
        r->stage->memory[i].end_bytes = r->live[device_index(r, st->memory[i].device)];
    r->stage = NULL;
}

/* From the inputs' opening to the first stage, as plan_build and exec's
 * load_inputs go: every stream is read whole when its file is opened;
 * then, input by input, the load makes its copy (and closing the file
 * gives the stream's block back), and an input nothing reads is released
 * at once. */
static void load_inputs(struct replay *r)
{
    struct program *prog = r->prog;
    size_t cpu = device_index(r, TR_CPU);
    uint64_t streams = 0;

    memset(&prog->before, 0, sizeof prog->before);
    prog->before.device = TR_CPU;
    prog->before.peak_at = SIZE_MAX;
    for (size_t v = 0; v < prog->nvalues; v++)
        if (prog->values[v].origin == ORIGIN_INPUT)
            streams = sat_add(streams, tr_memory_block_size(prog->values[v].stream_bytes));
    r->live[cpu] = streams;
    prog->before.peak_bytes = streams;
    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        uint64_t stream = tr_memory_block_size(pv->stream_bytes);
        uint64_t copy = tr_memory_block_size(pv->copy_bytes);
        if (pv->origin != ORIGIN_INPUT)
            continue;
        if (sat_add(r->live[cpu], copy) > prog->before.peak_bytes)
            prog->before.peak_bytes = sat_add(r->live[cpu], copy);
        if (r->live[cpu] != UINT64_MAX)
            r->live[cpu] -= stream; /* the tensor's own block is taken again below */
        take(r, (uint32_t)v, cpu, copy ? copy : stream);
        if (pv->last_use == LIVE_UNUSED)
            release(r, (uint32_t)v);
    }
}

/* The bytes of a tensor described by t, UINT64_MAX past 2^64 (0 with a
 * dimension of 0). */
static uint64_t value_bytes(const struct tr_value *t)
{
    uint64_t bytes = tr_dtype_size(t->dtype);

    for (int k = 0; k < t->ndim; k++) {
        if (t->shape[k] == 0)
            return 0;
        bytes = bytes > UINT64_MAX / (uint64_t)t->shape[k] ? UINT64_MAX
                                                             : bytes * (uint64_t)t->shape[k];
    }
    return bytes;
}

/* A root for the whole of joined value v, made before the first block:
 * none for one in its output file. */
static void take_whole(struct replay *r, uint32_t v)
{
    const struct value *pv = &r->prog->values[v];
    uint64_t bytes = value_bytes(&pv->joined_meta);
    size_t d = device_index(r, pv->joined_meta.device);

    if (pv->join != JOIN_POOL || bytes == 0)
        return;
    /* held by the whole's own handle until the blocks end */
    r->whole_of[v] = new_root(r, d, tr_memory_block_size(bytes), 1);
    reach(r, d, 0);
}

/* The pool block a stream cut into blocks is read into, a full block of
 * it (block), taken after the wholes. */
static size_t take_buffer(struct replay *r, const struct tr_value *block)
{
    uint64_t bytes = value_bytes(block);
    size_t d = device_index(r, TR_CPU), root;

    if (bytes == 0)
        return NO_ROOT;
    root = new_root(r, d, tr_memory_block_size(bytes), 1);
    reach(r, d, 0);
    return root;
}

/* Whether stage s has a shorter last block that differs in what it asks
 * for (a shape, a constant made from the block's length). */
static bool has_shorter_last_block(const struct program *prog, size_t s)
{
    const struct program_stage *st = &prog->stages[s];

    for (size_t v = 0; v < prog->nvalues; v++)
        if (prog->values[v].stage == (int)s && prog->values[v].has_last)
            return true;
    for (size_t i = st->first; i < st->first + st->count; i++)
        if (prog->instrs[i].last_args || prog->instrs[i].last_subs)
            return true;
    return false;
}

/* One block of stage s, then its scope's end: every value it made is
 * released (a joined one's part was a view of its whole).  The last block
 * is replayed with its own shapes and operands and the full block's
 * decisions. */
static void replay_block(struct replay *r, size_t s, bool last)
{
    const struct program_stage *st = &r->prog->stages[s];
    size_t first = st->first + st->nonce;

    r->last_block = last;
    for (size_t v = 0; last && v < r->prog->nvalues; v++)
        if (r->prog->values[v].stage == (int)s && r->prog->values[v].has_last)
            r->meta_of[v] = &r->prog->values[v].last_meta;
    r->in_blocks = true;
    for (r->at = first; r->at < first + st->nblock && r->ok; r->at++)
        replay_instr(r, &r->prog->instrs[r->at]);
    r->in_blocks = false;
    for (size_t v = 0; v < r->prog->nvalues; v++) {
        if (r->prog->values[v].stage == (int)s && r->prog->values[v].has_last)
            r->meta_of[v] = &r->prog->values[v].meta;
        if (liveness_block_local(r->prog, s, (uint32_t)v))
            release(r, (uint32_t)v);
    }
    r->last_block = false;
}

/*
 * A foreach stage, as exec_foreach runs it: the instructions before the
 * blocks, the joined wholes, one block (a full one: a shorter last block
 * needs no more of any kind), whose scope then releases what it made,
 * and the instructions after the blocks, with each joined value holding
 * its whole.  Every block starts from the same active bytes and makes the
 * same requests, so one is every block's figure.
 */
static void replay_foreach(struct replay *r, size_t s)
{
    struct program_stage *st = &r->prog->stages[s];
    size_t once_end = st->first + st->nonce, blocks_end = once_end + st->nblock;
    size_t buffer[FOREACH_MAX_OVER];

    r->held = st;
    for (r->at = st->first; r->at < once_end && r->ok; r->at++)
        replay_instr(r, &r->prog->instrs[r->at]);
    r->held = NULL;
    for (size_t v = 0; v < r->prog->nvalues; v++)
        if (r->prog->values[v].stage == (int)s)
            take_whole(r, (uint32_t)v);
    for (size_t c = 0; c < st->nover; c++)
        buffer[c] = r->prog->values[st->over[c]].streamed && st->nblocks > 0
                        ? take_buffer(r, &r->prog->values[st->block[c]].meta)
                        : NO_ROOT;
    if (st->nblocks > 0)
        replay_block(r, s, false);
    if (st->nblocks > 0 && st->with_last && has_shorter_last_block(r->prog, s))
        replay_block(r, s, true);
    r->at = blocks_end;
    for (size_t c = 0; c < st->nover; c++)
        let_go(r, buffer[c]); /* after the last block */
    for (size_t v = 0; v < r->prog->nvalues; v++) {
        int c = stage_block_index(st, (uint32_t)v);
        if (!liveness_block_local(r->prog, s, (uint32_t)v))
            continue;
        if (r->whole_of[v] != NO_ROOT) {
            hold(r, (uint32_t)v, r->whole_of[v]);
            r->roots[r->whole_of[v]].holders--; /* the value's handle is the whole's */
        } else if (r->prog->values[v].join == JOIN_OVER && c >= 0) {
            hold(r, (uint32_t)v, r->root_of[st->over[c]]); /* a view of all it was cut from */
        }
    }
    /* then what the blocks read but did not make dies, and a cut value
     * when the part before them read it last */
    for (size_t i = once_end; i < blocks_end; i++) {
        const struct instr *in = &r->prog->instrs[i];
        for (size_t k = 0; k < in->ndies; k++)
            if (!liveness_block_local(r->prog, s, in->dies[k]))
                release(r, in->dies[k]);
    }
    for (size_t c = 0; c < st->nover; c++)
        if (r->prog->values[st->over[c]].last_use < once_end)
            release(r, st->over[c]);
    for (size_t v = 0; v < r->prog->nvalues; v++) {
        const struct value *pv = &r->prog->values[v];
        int c = stage_block_index(st, (uint32_t)v);
        if (pv->stage != (int)s)
            continue;
        if (pv->join == JOIN_POOL || pv->join == JOIN_FILE)
            r->meta_of[v] = &pv->joined_meta;
        else if (pv->join == JOIN_OVER && c >= 0)
            r->meta_of[v] = r->meta_of[st->over[c]];
    }
    for (; r->at < st->first + st->count && r->ok; r->at++)
        replay_instr(r, &r->prog->instrs[r->at]);
}

bool memory_run(struct program *prog, int threads)
{
    struct replay r = {.prog = prog, .threads = threads};
    size_t cap = prog->ninstrs + prog->nstages + 2;

    /* a root per value (a block's twice: the full one and the last), one
     * per joined whole, one per stream's buffer */
    r.roots = calloc(3 * prog->nvalues + prog->nstages * FOREACH_MAX_OVER + 1, sizeof *r.roots);
    r.root_of = malloc((prog->nvalues + 1) * sizeof *r.root_of);
    r.whole_of = malloc((prog->nvalues + 1) * sizeof *r.whole_of);
    r.meta_of = malloc((prog->nvalues + 1) * sizeof *r.meta_of);
    r.devices = calloc(cap, sizeof *r.devices);
    r.live = calloc(cap, sizeof *r.live);
    r.devices_cap = cap;
    r.ok = r.roots && r.root_of && r.whole_of && r.meta_of && r.devices && r.live;
    memset(&prog->before, 0, sizeof prog->before);
    for (size_t v = 0; r.ok && v < prog->nvalues; v++) {
        r.root_of[v] = r.whole_of[v] = NO_ROOT;
        r.meta_of[v] = &prog->values[v].meta;
    }
    if (r.ok) {
        device_index(&r, TR_CPU);
        load_inputs(&r);
    }
    r.before.nmemory = 1;
    r.before.memory[0] = prog->before;
    r.stage = &r.before;
    for (r.at = 0; r.ok && r.at < prog->nprologue; r.at++)
        replay_instr(&r, &prog->instrs[r.at]);
    r.stage = NULL;
    prog->before = r.before.memory[0];
    if (r.ok)
        prog->before.end_bytes = r.live[0]; /* the CPU's */
    for (size_t s = 0; s < prog->nstages && r.ok; s++) {
        struct program_stage *st = &prog->stages[s];
        begin_stage(&r, st);
        if (st->nover > 0)
            replay_foreach(&r, s);
        for (r.at = st->first; st->nover == 0 && r.at < st->first + st->count && r.ok;
             r.at++)
            replay_instr(&r, &prog->instrs[r.at]);
        end_stage(&r, s);
    }
    free(r.roots);
    free(r.root_of);
    free(r.whole_of);
    free(r.meta_of);
    free(r.devices);
    free(r.live);
    return r.ok;
}
