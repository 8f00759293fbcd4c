/*
 * test_passes.c - the fuse, liveness, place and memory passes on programs
 * built by hand: which chains become one instruction, where each value
 * dies, what each stage keeps, which result an output file may hold,
 * the parts of a foreach stage and its joins, which op computes in place,
 * and each stage's pool peak, worked out by hand from the pool's rounding
 * (512-byte blocks up to 1 MiB).
 */
#include "config.h"

#include <string.h>

#include "foreach.h"
#include "fuse.h"
#include "last_block.h"
#include "liveness.h"
#include "memory.h"
#include "place.h"
#include "tap.h"
#include "tensorrun_fused.h"

/* The length of the tensors the builders make. */
static int64_t length = 8;

static struct tr_value tensor(int64_t n)
{
    struct tr_value v = {.kind = TR_VALUE_TENSOR, .dtype = TR_DTYPE_F32, .ndim = 1};

    v.shape[0] = n;
    v.device = TR_CPU;
    return v;
}

static uint32_t input(struct program *prog, const char *name)
{
    struct value v = {.meta = tensor(length), .origin = ORIGIN_INPUT, .name = name, .stage = -1};

    return program_add_value(prog, &v);
}

static struct operand val(uint32_t id)
{
    struct operand o = {.kind = OPERAND_VALUE, .value = id};

    return o;
}

static struct operand num(double x)
{
    struct operand o = {.kind = OPERAND_CONST};

    o.meta.kind = TR_VALUE_FLOAT;
    o.meta.number = x;
    o.meta.known = o.meta.weak = true;
    return o;
}

/* Emits op(a, b) (b may be a constant) in stage; returns its result. */
static uint32_t binary(struct program *prog, int stage, enum tr_op_id id, struct operand a,
                       struct operand b, const char *name)
{
    struct instr *in = program_add_instr(prog, stage, INSTR_OP);
    struct value v = {.meta = tensor(length), .origin = ORIGIN_RESULT, .name = name, .stage = stage};
    uint32_t r;

    v.def = prog->ninstrs - 1;
    r = program_add_value(prog, &v);
    in = &prog->instrs[prog->ninstrs - 1];
    in->op = tr_op_get(id);
    in->nargs = 2;
    in->args[0] = a;
    in->args[1] = b;
    in->nresults = 1;
    in->results[0] = r;
    return r;
}

static size_t write_of(struct program *prog, int stage, uint32_t value, size_t group)
{
    struct instr *in = program_add_instr(prog, stage, INSTR_WRITE);

    in->group = group;
    in->wargs = program_alloc(prog, sizeof *in->wargs);
    in->wargs[0] = value;
    in->nwargs = 1;
    prog->groups[group].write = prog->ninstrs - 1;
    prog->groups[group].members = program_alloc(prog, sizeof *prog->groups[group].members);
    prog->groups[group].members[0] = group;
    prog->groups[group].dtypes = program_alloc(prog, sizeof *prog->groups[group].dtypes);
    prog->groups[group].dtypes[0] = TR_DTYPE_COUNT; /* its own */
    prog->groups[group].nmembers = 1;
    prog->groups[group].mappable = true;
    prog->groups[group].path = "out.npy";
    prog->outputs[group] = value;
    prog->ngroups = group + 1;
    return prog->ninstrs - 1;
}

static bool dies_after(const struct program *prog, size_t at, uint32_t value)
{
    for (size_t i = 0; i < prog->instrs[at].ndies; i++)
        if (prog->instrs[at].dies[i] == value)
            return true;
    return false;
}

/* y = x * 2 + 1 into out.npy: each temporary dies where it is read, the
 * file's value after its write, and the last op computes into the file. */
static void test_chain(void)
{
    struct program *prog = program_new(1, 1);
    uint32_t x = input(prog, "x");
    uint32_t t = binary(prog, 0, TR_OP_MUL, val(x), num(2), NULL);
    uint32_t y = binary(prog, 0, TR_OP_ADD, val(t), num(1), "y");
    size_t w = write_of(prog, 0, y, 0);

    ok(liveness_run(prog), "liveness runs");
    is_int(prog->values[x].last_use, 0, "x dies after the mul");
    is_int(prog->values[t].last_use, 1, "the temporary dies after the add");
    is_int(prog->values[y].last_use, w, "y dies after its write");
    ok(dies_after(prog, 0, x) && dies_after(prog, 1, t) && dies_after(prog, w, y),
       "each instruction lists what dies after it");
    is_int(prog->stages[0].nkeeps, 0, "the stage keeps nothing");
    place_run(prog);
    is_int(prog->instrs[1].dest_group, 0, "the add computes into the output file");
    is_int(prog->instrs[0].dest_group, -1, "the mul does not");
    program_free(prog);
}

/* A value read by a later stage is kept by every stage in between; one
 * read again after the output's write is not computed into the file. */
static void test_stages(void)
{
    struct program *prog = program_new(3, 1);
    uint32_t x = input(prog, "x");
    uint32_t a = binary(prog, 0, TR_OP_MUL, val(x), num(2), "a");
    size_t w = write_of(prog, 0, a, 0);
    uint32_t b = binary(prog, 1, TR_OP_ADD, val(x), num(1), "b");
    uint32_t c = binary(prog, 2, TR_OP_ADD, val(a), val(b), "c");

    ok(liveness_run(prog), "liveness runs");
    is_int(prog->values[a].last_use, 3, "a lives until stage 3 reads it");
    is_int(prog->stages[0].nkeeps, 2, "stage 1 keeps x and a");
    ok(prog->stages[1].nkeeps == 2 && prog->stages[1].keeps[0] == a &&
           prog->stages[1].keeps[1] == b,
       "stage 2 keeps a and b (x is read no more)");
    is_int(prog->values[c].last_use, 3, "a result nothing reads dies where it is made");
    place_run(prog);
    is_int(prog->instrs[0].dest_group, -1, "a, read after its write, takes no file memory");
    (void)w;
    program_free(prog);
}

/* keep: holds a value past its stage even when nothing reads it; a
 * value printed at the end lives to the end. */
static void test_keep_and_finals(void)
{
    struct program *prog = program_new(2, 0);
    uint32_t x = input(prog, "x");
    uint32_t a = binary(prog, 0, TR_OP_MUL, val(x), num(2), "a");
    uint32_t b = binary(prog, 1, TR_OP_ADD, val(x), num(1), "b");

    prog->stages[0].kept = program_alloc(prog, sizeof(uint32_t));
    prog->stages[0].kept[0] = a;
    prog->stages[0].nkept = 1;
    prog->finals = program_alloc(prog, sizeof(uint32_t));
    prog->finals[0] = b;
    prog->nfinals = 1;
    ok(liveness_run(prog), "liveness runs");
    is_int(prog->values[a].last_use, 1, "a kept lives into the next stage's first instruction");
    ok(prog->values[a].kept, "a is marked kept");
    ok(prog->values[b].last_use == LIVE_FOREVER, "b, printed at the end, lives to the end");
    is_int(prog->stages[1].nkeeps, 1, "stage 2 keeps b for the end");
    program_free(prog);
}

/* An input nothing reads is never kept. */
static void test_unused_input(void)
{
    struct program *prog = program_new(1, 0);
    uint32_t x = input(prog, "x"), y = input(prog, "y");

    binary(prog, 0, TR_OP_MUL, val(x), num(2), "a");
    ok(liveness_run(prog), "liveness runs");
    ok(prog->values[y].last_use == LIVE_UNUSED, "an unread input stays unused");
    program_free(prog);
}

/* A unary op of a in stage. */
static uint32_t unary(struct program *prog, int stage, enum tr_op_id id, struct operand a,
                      const char *name)
{
    uint32_t r = binary(prog, stage, id, a, num(0), name);

    prog->instrs[prog->ninstrs - 1].nargs = 1;
    return r;
}

/* sum(a): a full reduction to f32[]. */
static uint32_t sum_of(struct program *prog, int stage, uint32_t a)
{
    uint32_t r = binary(prog, stage, TR_OP_SUM, val(a), num(0), "s");
    struct instr *in = &prog->instrs[prog->ninstrs - 1];

    in->args[1].meta.kind = TR_VALUE_NONE; /* dim=None */
    in->args[2] = in->args[1];
    in->args[2].meta.kind = TR_VALUE_BOOL;  /* keepdim=false */
    in->args[2].meta.boolean = false;
    in->nargs = 3;
    prog->values[r].meta.ndim = 0;
    return r;
}

/* y = x * 2 + 1; s = sum(y): one chain of two steps and a tail; the
 * intermediates are never stored and x lives until the chain. */
static void test_fuse_chain(void)
{
    struct program *prog = program_new(1, 1);
    uint32_t x = input(prog, "x");
    uint32_t t = binary(prog, 0, TR_OP_MUL, val(x), num(2), NULL);
    uint32_t y = binary(prog, 0, TR_OP_ADD, val(t), num(1), "y");
    uint32_t s = sum_of(prog, 0, y);

    write_of(prog, 0, s, 0);
    ok(fuse_run(prog), "fuse runs");
    is_int(prog->instrs[2].kind, INSTR_FUSED, "the sum is the chain's instruction");
    ok(prog->instrs[0].fused_into == 2 && prog->instrs[1].fused_into == 2,
       "the mul and the add are its steps");
    is_int(prog->instrs[2].chain->nsteps, 2, "two steps");
    ok(prog->instrs[2].chain->has_tail, "and the sum as its tail");
    ok(prog->instrs[2].nfinputs == 1 && prog->instrs[2].finputs[0] == x, "it reads x alone");
    ok(prog->values[t].fused && prog->values[y].fused && !prog->values[s].fused,
       "the intermediates are not stored, the sum is");
    is_int(prog->instrs[2].fused_group, 1, "it is fused group 1");
    ok(liveness_run(prog), "liveness runs");
    is_int(prog->values[x].last_use, 2, "x lives until the chain runs");
    ok(prog->values[t].last_use == LIVE_UNUSED, "a step's result is never released: never made");
    program_free(prog);
}

/* An intermediate that is an output, or read twice, ends the chain
 * there; one step alone with no tail is no chain. */
static void test_fuse_limits(void)
{
    struct program *prog = program_new(1, 1);
    uint32_t x = input(prog, "x");
    uint32_t t = binary(prog, 0, TR_OP_MUL, val(x), num(2), "t");
    uint32_t y = unary(prog, 0, TR_OP_EXP, val(t), "y");
    uint32_t s = sum_of(prog, 0, y);

    write_of(prog, 0, t, 0); /* t is an output */
    (void)s;
    ok(fuse_run(prog), "fuse runs");
    is_int(prog->instrs[0].fused_into, -1, "the output's op stays on its own");
    is_int(prog->instrs[2].kind, INSTR_FUSED, "exp and sum are fused");
    ok(prog->instrs[1].fused_into == 2 && prog->instrs[2].chain->nsteps == 1,
       "with exp as the one step");
    ok(prog->instrs[2].nfinputs == 1 && prog->instrs[2].finputs[0] == t, "reading t");
    program_free(prog);

    prog = program_new(2, 0);
    x = input(prog, "x");
    t = binary(prog, 0, TR_OP_MUL, val(x), num(2), "t");
    y = binary(prog, 1, TR_OP_ADD, val(t), num(1), "y");
    ok(fuse_run(prog), "fuse runs");
    ok(prog->instrs[0].fused_into == -1 && prog->instrs[1].kind == INSTR_OP,
       "no chain crosses a stage");
    program_free(prog);
    (void)y;
}

/* A foreach stage over x whose block is b: c = w * 2 and d = c * 3 do not
 * depend on the block and move before the rest; y = b + w, t = b * d and
 * z = t + y do, and so does the write of z, which runs after the blocks.
 * y, read by the next stage, joins in the pool; z, read by its .npy
 * output alone, joins into that file.  The chain t + y stays within the
 * block's part: c and d are not pulled into it from the part before. */
static void test_foreach(void)
{
    struct program *prog = program_new(2, 1);
    uint32_t x = input(prog, "x"), w = input(prog, "w");
    struct value block = {.meta = tensor(length), .origin = ORIGIN_BUILTIN, .name = "x",
                          .stage = 0, .depends = true};
    uint32_t b = program_add_value(prog, &block), y, c, d, t, z;

    prog->stages[0].over[0] = x;
    prog->stages[0].nover = 1;
    prog->stages[0].nblocks = 4;
    prog->stages[0].block[0] = b;
    y = binary(prog, 0, TR_OP_ADD, val(b), val(w), "y");
    c = binary(prog, 0, TR_OP_MUL, val(w), num(2), "c");
    d = binary(prog, 0, TR_OP_MUL, val(c), num(3), "d");
    t = binary(prog, 0, TR_OP_MUL, val(b), val(d), "t");
    z = binary(prog, 0, TR_OP_ADD, val(t), val(y), "z");
    prog->values[y].depends = prog->values[t].depends = prog->values[z].depends = true;
    write_of(prog, 0, z, 0);
    binary(prog, 1, TR_OP_SUB, val(y), num(1), "q");
    for (uint32_t v = y; v <= z; v++)
        prog->values[v].joined_meta = prog->values[v].meta;
    ok(foreach_run(prog), "foreach runs");
    is_int(prog->stages[0].nonce, 2, "two instructions run once");
    is_int(prog->stages[0].nblock, 3, "three run for each block");
    is_int(prog->stages[0].count, 6, "and the write after them");
    ok(prog->instrs[0].results[0] == c && prog->instrs[1].results[0] == d,
       "c and d move first, in their order");
    ok(prog->instrs[0].part == PART_ONCE && prog->instrs[1].part == PART_ONCE, "as the once part");
    ok(prog->instrs[2].results[0] == y && prog->instrs[3].results[0] == t &&
           prog->instrs[4].results[0] == z && prog->instrs[2].part == PART_BLOCK &&
           prog->instrs[4].part == PART_BLOCK,
       "then y, t and z, for each block");
    ok(prog->instrs[5].kind == INSTR_WRITE && prog->instrs[5].part == PART_AFTER &&
           prog->groups[0].write == 5,
       "then z's write, after the blocks, its group renumbered");
    ok(prog->values[y].def == 2 && prog->values[c].def == 0, "values point at their new places");
    is_int(prog->instrs[6].part, PART_STAGE, "an ordinary stage has no parts");
    is_int(prog->values[y].join, JOIN_POOL, "y, read by the next stage, joins in the pool");
    is_int(prog->values[z].join, JOIN_FILE, "z, read by its .npy alone, joins into its file");
    is_int(prog->values[z].join_group, 0, "that file");
    is_int(prog->values[t].join, JOIN_NONE, "t lives within a block");
    is_int(prog->values[c].join, JOIN_NONE, "c is made once, not joined");
    ok(fuse_run(prog), "fuse runs");
    ok(prog->instrs[4].kind == INSTR_FUSED && prog->instrs[3].fused_into == 4 &&
           prog->instrs[4].chain->nsteps == 2,
       "t and z are one chain of the block's part");
    ok(prog->instrs[1].kind == INSTR_FUSED && prog->instrs[0].fused_into == 1,
       "c and d one of the once part, not pulled into it");
    ok(liveness_run(prog), "liveness runs");
    place_run(prog);
    is_int(prog->instrs[4].dest_group, -1, "a joined value's file is its join's, not a destination");
    program_free(prog);

    /* the block itself kept is what it was cut from; a value written
     * through a copy (a transfer back to the CPU) joins as that copy */
    prog = program_new(2, 1);
    x = input(prog, "x");
    b = program_add_value(prog, &block);
    prog->stages[0].over[0] = x;
    prog->stages[0].nover = 1;
    prog->stages[0].nblocks = 4;
    prog->stages[0].block[0] = b;
    prog->stages[0].kept = program_alloc(prog, sizeof(uint32_t));
    prog->stages[0].kept[0] = b;
    prog->stages[0].nkept = 1;
    y = binary(prog, 0, TR_OP_ADD, val(b), num(1), "y");
    t = unary(prog, 0, TR_OP_CLONE, val(y), NULL); /* as a `to` would be */
    prog->values[y].depends = prog->values[t].depends = true;
    write_of(prog, 0, t, 0);
    prog->outputs[0] = y; /* the output's value; its write writes the copy */
    ok(foreach_run(prog), "foreach runs");
    is_int(prog->values[b].join, JOIN_OVER, "the kept block joins as the value it is cut from");
    is_int(prog->values[t].join, JOIN_FILE, "the copy the write writes joins into the file");
    is_int(prog->values[y].join, JOIN_NONE, "the value it copies lives within a block");
    program_free(prog);
}

/* The passes memory_run follows, in the order plan.c runs them (no fusion:
 * the figures are the unfused program's). */
static bool plan_memory(struct program *prog)
{
    if (!liveness_run(prog))
        return false;
    place_run(prog);
    return memory_run(prog, 1);
}

static uint64_t peak(const struct program *prog, size_t stage)
{
    return prog->stages[stage].memory[0].peak_bytes;
}

/* A strided view written alone to its .npy becomes a clone computed into
 * the file: no buffer to write it through, no pool memory. */
static void test_copies(void)
{
    struct program *prog = program_new(1, 1);
    uint32_t x = input(prog, "x");
    uint32_t v = unary(prog, 0, TR_OP_PERMUTE, val(x), "v"), c;
    const struct instr *in;

    prog->values[v].meta.strided = true; /* as tr_op_layout says of a transpose */
    prog->values[v].meta.strides[0] = 2;
    write_of(prog, 0, v, 0);
    ok(place_copies(prog), "place_copies runs");
    is_int(prog->ninstrs, 3, "one instruction more");
    in = &prog->instrs[1];
    ok(in->kind == INSTR_OP && in->op->id == TR_OP_CLONE && in->args[0].value == v,
       "a clone of v, right before the write");
    c = in->results[0];
    ok(!prog->values[c].meta.strided && prog->instrs[2].wargs[0] == c &&
           prog->groups[0].write == 2,
       "compact, and what the write writes");
    ok(plan_memory(prog), "the passes after it run");
    is_int(prog->instrs[1].dest_group, 0, "the clone is computed into the file");
    is_int(peak(prog, 0), 0, "taking no pool memory");
    program_free(prog);

    prog = program_new(1, 1);
    x = input(prog, "x");
    v = binary(prog, 0, TR_OP_MUL, val(x), num(2), "v");
    write_of(prog, 0, v, 0);
    ok(place_copies(prog) && prog->ninstrs == 2, "a compact value needs no clone");
    program_free(prog);
}

/* f32[1000] takes 4000 bytes, a block of 4096.  t = x * 2; y = t + 1
 * computes y into t's block, which dies there; t + t cannot (t is read
 * twice), nor can an op over a value read later. */
static void test_memory_in_place(void)
{
    struct program *prog;
    uint32_t x, t, y;

    length = 1000;
    prog = program_new(1, 1);
    x = input(prog, "x");
    t = binary(prog, 0, TR_OP_MUL, val(x), num(2), "t");
    y = binary(prog, 0, TR_OP_ADD, val(t), num(1), "y");
    write_of(prog, 0, y, 0);
    prog->groups[0].mappable = false; /* a .zst, say: y is made in the pool */
    ok(plan_memory(prog), "memory runs");
    is_int(prog->instrs[1].in_place, 0, "y = t + 1 is computed over t");
    is_int(prog->instrs[0].in_place, -1, "t = x * 2 is not: x is an input");
    is_int(prog->values[t].block_bytes, 4096, "t takes a block of 4096");
    is_int(prog->values[y].block_bytes, 0, "y takes none of its own");
    is_int(peak(prog, 0), 4096, "the stage peaks at one block");
    is_int(prog->stages[0].memory[0].peak_at, 0, "reached by the mul");
    is_int(prog->stages[0].memory[0].end_bytes, 0, "and ends with nothing");
    program_free(prog);

    prog = program_new(1, 1);
    x = input(prog, "x");
    t = binary(prog, 0, TR_OP_MUL, val(x), num(2), "t");
    y = binary(prog, 0, TR_OP_ADD, val(t), val(t), "y");
    write_of(prog, 0, y, 0);
    prog->groups[0].mappable = false;
    ok(plan_memory(prog), "memory runs");
    is_int(prog->instrs[1].in_place, -1, "t + t is not computed over t");
    is_int(peak(prog, 0), 8192, "two blocks at the add");
    is_int(prog->stages[0].memory[0].peak_at, 1, "reached by the add");
    program_free(prog);

    prog = program_new(1, 2);
    x = input(prog, "x");
    t = binary(prog, 0, TR_OP_MUL, val(x), num(2), "t");
    y = binary(prog, 0, TR_OP_ADD, val(t), num(1), "y");
    write_of(prog, 0, y, 0);
    prog->groups[0].mappable = false;
    write_of(prog, 0, t, 1);
    prog->groups[1].mappable = false;
    ok(plan_memory(prog), "memory runs");
    is_int(prog->instrs[1].in_place, -1, "an op over a value written later is not in place");
    is_int(peak(prog, 0), 8192, "so t and y are both live");
    program_free(prog);
    length = 8;
}

/* A view holds its root's block after the value it views dies; an input
 * read into memory counts from the stage's start; what a stage keeps
 * counts in the next one from its start. */
static void test_memory_roots(void)
{
    struct program *prog;
    struct instr *in;
    uint32_t x, t, v, u, z;

    length = 1000;
    prog = program_new(2, 2);
    x = input(prog, "x");
    prog->values[x].stream_bytes = 4000; /* decompressed, say */
    t = binary(prog, 0, TR_OP_MUL, val(x), num(2), "t");
    v = unary(prog, 0, TR_OP_UNSQUEEZE, val(t), "v"); /* v = unsqueeze(t, 0) */
    in = &prog->instrs[prog->ninstrs - 1];
    in->nargs = 2;
    in->args[1].meta.kind = TR_VALUE_INT;
    in->args[1].meta.integer = 0;
    prog->values[v].meta.ndim = 2;
    prog->values[v].meta.shape[0] = 1;
    prog->values[v].meta.shape[1] = 1000;
    u = binary(prog, 0, TR_OP_MUL, val(x), num(3), "u");
    write_of(prog, 0, v, 0);
    prog->groups[0].mappable = false;
    z = binary(prog, 1, TR_OP_ADD, val(u), num(1), "z");
    write_of(prog, 1, z, 1);
    prog->groups[1].mappable = false;
    ok(plan_memory(prog), "memory runs");
    is_int(prog->values[v].block_bytes, 0, "the view takes no block");
    is_int(prog->stages[0].memory[0].start_bytes, 4096, "the input's block is there at the start");
    is_int(peak(prog, 0), 3 * 4096, "x, t (held by its view v) and u at once");
    is_int(prog->stages[0].memory[0].end_bytes, 4096, "u is kept for stage 2");
    is_int(prog->stages[1].memory[0].start_bytes, 4096, "which starts with it");
    is_int(prog->instrs[prog->stages[1].first].in_place, 0, "z = u + 1 is computed over u");
    is_int(peak(prog, 1), 4096, "so stage 2 peaks at u's block");
    program_free(prog);
    length = 8;
}

/* Writing converts through one buffer of at most 4 MiB, none when the
 * value is written as it lies; a value computed into its file takes no
 * pool memory at all. */
static void test_memory_writes(void)
{
    struct program *prog;
    uint32_t x, y;

    length = 1000;
    prog = program_new(1, 1);
    x = input(prog, "x");
    y = binary(prog, 0, TR_OP_MUL, val(x), num(2), "y");
    write_of(prog, 0, y, 0);
    prog->groups[0].dtypes[0] = TR_DTYPE_F16;
    prog->groups[0].mappable = false;
    ok(plan_memory(prog), "memory runs");
    is_int(peak(prog, 0), 4096 + 2048, "y, and 2000 bytes of f16 to write it");
    is_int(prog->stages[0].memory[0].peak_at, 1, "at the write");
    program_free(prog);

    prog = program_new(1, 1);
    x = input(prog, "x");
    y = binary(prog, 0, TR_OP_MUL, val(x), num(2), "y");
    write_of(prog, 0, y, 0);
    ok(plan_memory(prog), "memory runs");
    is_int(prog->instrs[0].dest_group, 0, "y is computed into its file");
    is_int(peak(prog, 0), 0, "which takes no pool memory");
    program_free(prog);

    length = (int64_t)3 << 20; /* 12 MiB of f32, written as f64 */
    prog = program_new(1, 1);
    x = input(prog, "x");
    y = binary(prog, 0, TR_OP_MUL, val(x), num(2), "y");
    write_of(prog, 0, y, 0);
    prog->groups[0].dtypes[0] = TR_DTYPE_F64;
    prog->groups[0].mappable = false;
    ok(plan_memory(prog), "memory runs");
    is_int(peak(prog, 0), ((uint64_t)12 << 20) + ((uint64_t)4 << 20),
           "y, and a buffer of 4 MiB (large blocks round to 2 MiB)");
    program_free(prog);
    length = 8;
}

/* A foreach stage over a 1024-value input in blocks of 256: y = b * 2 and
 * z = u + y are kept for stage 1 (joined in the pool, each block computed
 * into its rows), t = b + 1 and u = t * 3 live within a block (u over t);
 * w = c * 0.5, made once, is read by every block.  Worked out by hand: w
 * is 1024 bytes, the wholes of y and z 4096 each from the blocks' start,
 * t a block of 1024, so the stage peaks at 10240 and hands 8192 on;
 * stage 1 reads y and z whole, and q = y - z goes over y. */
static void test_foreach_memory(void)
{
    struct program *prog = program_new(2, 0);
    struct value block = {.origin = ORIGIN_BUILTIN, .name = "x", .stage = 0, .depends = true};
    uint32_t x, c, w, b, y, t, u, z, q;

    length = 1024;
    x = input(prog, "x");
    length = 256;
    c = input(prog, "c");
    block.meta = tensor(256);
    b = program_add_value(prog, &block);
    prog->stages[0].over[0] = x;
    prog->stages[0].nover = 1;
    prog->stages[0].nblocks = 4;
    prog->stages[0].block[0] = b;
    prog->stages[0].kept = program_alloc(prog, 2 * sizeof(uint32_t));
    w = binary(prog, 0, TR_OP_MUL, val(c), num(0.5), "w"); /* once */
    y = binary(prog, 0, TR_OP_MUL, val(b), num(2), "y");
    t = binary(prog, 0, TR_OP_ADD, val(b), val(w), "t");
    u = binary(prog, 0, TR_OP_MUL, val(t), num(3), "u");
    z = binary(prog, 0, TR_OP_ADD, val(u), val(y), "z");
    prog->stages[0].kept[0] = y;
    prog->stages[0].kept[1] = z;
    prog->stages[0].nkept = 2;
    for (uint32_t v = y; v <= z; v++) {
        prog->values[v].depends = true;
        prog->values[v].joined = true;
        prog->values[v].joined_meta = tensor(1024);
    }
    length = 1024;
    q = binary(prog, 1, TR_OP_SUB, val(y), val(z), "q");
    ok(foreach_run(prog), "foreach runs");
    ok(liveness_run(prog), "liveness runs");
    ok(liveness_block_local(prog, 0, t) && liveness_block_local(prog, 0, b) &&
           !liveness_block_local(prog, 0, w) && !liveness_block_local(prog, 0, x),
       "t and the block are made by every block, w and x are not");
    ok(dies_after(prog, prog->values[z].def, w) && !dies_after(prog, prog->values[t].def, w),
       "w, read by t's instruction, lives to the blocks' last instruction");
    ok(dies_after(prog, prog->values[u].def, t), "t dies where u reads it, in each block");
    place_run(prog);
    ok(memory_run(prog, 1), "memory runs");
    ok(prog->instrs[prog->values[y].def].into_join && prog->instrs[prog->values[z].def].into_join,
       "y and z are computed into their rows of the wholes");
    ok(!prog->instrs[prog->values[t].def].into_join, "t, not joined, is not");
    is_int(prog->instrs[prog->values[u].def].in_place, 0, "u over t");
    is_int(prog->values[w].block_bytes, 1024, "w is made once: 256 values");
    is_int(peak(prog, 0), 1024 + 4096 + 4096 + 1024, "the stage peaks at w, the wholes and t");
    is_int(prog->stages[0].memory[0].peak_at, prog->values[t].def, "reached at t");
    is_int(prog->stages[0].memory[0].end_bytes, 8192, "and hands on the two wholes");
    is_int(prog->stages[1].memory[0].start_bytes, 8192, "which the next stage starts with");
    is_int(prog->instrs[prog->values[q].def].in_place, 0,
           "q over y's whole, which dies there and no block holds any more");
    is_int(peak(prog, 1), 8192, "so the stage reads them whole in their own bytes");
    program_free(prog);
    length = 8;
}

/* Two typings of one foreach body, a full block of 8 and a last block of
 * 3: y = b * 8 (the block's length) and s = sum(y).  They pair: y's
 * constant and shape differ; a body of another op does not pair. */
static void test_last_block(void)
{
    struct program *prog = program_new(1, 0);
    struct value block = {.origin = ORIGIN_BUILTIN, .name = "x", .stage = 0, .depends = true};
    uint32_t x, b, y, b3, y3;

    x = input(prog, "x");
    block.meta = tensor(8);
    b = program_add_value(prog, &block);
    y = binary(prog, 0, TR_OP_MUL, val(b), num(8), "y");
    sum_of(prog, 0, y);
    length = 3;
    block.meta = tensor(3);
    b3 = program_add_value(prog, &block);
    y3 = binary(prog, 0, TR_OP_MUL, val(b3), num(3), "y");
    sum_of(prog, 0, y3);
    length = 8;
    ok(last_block_pair(prog, 0, 2, 4, b, b3, (uint32_t)prog->nvalues) == LAST_BLOCK_PAIRED,
       "the typings pair");
    ok(prog->instrs[0].last_args && prog->instrs[0].last_args[0].value == b &&
           prog->instrs[0].last_args[1].meta.number == 3,
       "y's last block multiplies the block by 3, in the full block's ids");
    ok(!prog->instrs[1].last_args, "the sum's operands are the same");
    ok(prog->values[b].has_last && prog->values[b].last_meta.shape[0] == 3 &&
           prog->values[y].has_last && prog->values[y].last_meta.shape[0] == 3,
       "the block and y are 3 long in the last block");
    ok(!prog->values[x].has_last && !prog->values[y + 1].has_last,
       "the input and the sum (f32[]) are the same in both");
    prog->instrs[2].op = tr_op_get(TR_OP_ADD);
    prog->instrs[0].last_args = NULL;
    prog->values[b].has_last = false;
    ok(last_block_pair(prog, 0, 2, 4, b, b3, (uint32_t)prog->nvalues) == LAST_BLOCK_DIFFERENT,
       "another op in the last block does not pair");
    ok(!prog->instrs[0].last_args && !prog->values[b].has_last, "and nothing is recorded");
    ok(last_block_pair(prog, 0, 2, 3, b, b3, (uint32_t)prog->nvalues) == LAST_BLOCK_DIFFERENT,
       "nor does a different count");
    program_free(prog);
}

int main(void)
{
    test_fuse_chain();
    test_fuse_limits();
    test_chain();
    test_stages();
    test_keep_and_finals();
    test_unused_input();
    test_foreach();
    test_memory_in_place();
    test_copies();
    test_memory_roots();
    test_memory_writes();
    test_foreach_memory();
    test_last_block();
    return done_testing();
}
