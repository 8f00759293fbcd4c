/*
 * program.h - a pipeline lowered into what runs: a table of values (every
 * tensor and constant the pipeline makes, with its dtype, shape, device
 * and place in the file) and, per stage, a flat list of instructions over
 * them.  The lowering (lower.c) makes it once; the passes (liveness.c, ...)
 * annotate it; the executor (exec.c) runs it and `validate` prints it
 * (program_print.c).  doc/design.md, "The program", is the map.
 */
#ifndef TR_CLI_PROGRAM_H
#define TR_CLI_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pipeline.h" /* FOREACH_MAX_OVER */
#include "tensorrun_ops.h"

#define VALUE_NONE UINT32_MAX

enum value_origin {
    ORIGIN_INPUT,    /* a pipeline input, loaded before the first stage */
    ORIGIN_CONSTANT, /* a param, or a name bound to a constant (k = 2 * 3) */
    ORIGIN_RESULT,   /* a result of an instruction */
    ORIGIN_BUILTIN   /* chunk_start, chunk_index, chunk_count: set per foreach block */
};

struct value {
    struct tr_value meta;    /* a tensor's dtype, shape and device; a constant itself */
    enum value_origin origin;
    const char *name;        /* the first name bound to it; NULL for a temporary */
    int line, col;           /* where it is made */
    int stage;               /* the stage that makes it; -1 for inputs and constants */
    size_t input;            /* ORIGIN_INPUT: the index of the pipeline's input */
    size_t def;              /* ORIGIN_RESULT: the instruction that makes it */
    bool depends;            /* made from the foreach block */
    bool fused;              /* made inside a fused chain: never stored */
    bool joined;             /* kept from a foreach stage: the blocks' values joined */
    struct tr_value joined_meta; /* ... into this, along dimension 0 */
    /* liveness: the instruction after which its handle is released
     * (LIVE_FOREVER: the end of the run); LIVE_UNUSED when nothing reads it */
    size_t last_use;
    bool kept;               /* some stage keeps it (keep:, or needed later) */
    /* foreach: where each block's part of a value joined along dimension 0
     * goes, so that the whole is never held twice: a tensor of joined_meta
     * made before the first block, or the output file of join_group at
     * the block's rows; the block itself joined is the value it is cut
     * from (JOIN_OVER, nothing made); JOIN_NONE for a value not joined */
    enum join_kind { JOIN_NONE, JOIN_POOL, JOIN_FILE, JOIN_OVER } join;
    ptrdiff_t join_group;
    /* ORIGIN_INPUT: the CPU pool bytes, before rounding, of the block its
     * stream is read into when the file is opened (tio_file_stream_bytes)
     * and of the copy its load makes (tio_file_copy_bytes); 0 and 0 when
     * it is mapped and viewed in place */
    uint64_t stream_bytes, copy_bytes;
    /* ORIGIN_INPUT: a stream (a pipe, .zst) that its foreach stage reads a
     * block at a time into one block of the pool, and nothing else reads
     * (then stream_bytes is 0) */
    bool streamed;
    uint64_t block_bytes;    /* memory: the pool block it is made in (rounded); 0 when it
                                has none of its own (a view, in place, in a file) */
    /* foreach, a value that depends on the block when the last block is
     * shorter: what it is in that block (last_meta), which the run checks
     * its result against there */
    bool has_last;
    struct tr_value last_meta;
    bool ragged;             /* ... whose dtype or dimensions past the first differ there:
                                it cannot be joined along dimension 0 */
};

#define LIVE_UNUSED SIZE_MAX
#define LIVE_FOREVER (SIZE_MAX - 1)

enum operand_kind {
    OPERAND_CONST,  /* constant: a number, None, a dtype, a string, a list of constants */
    OPERAND_VALUE,  /* a value of the table */
    OPERAND_LIST    /* a list with at least one value in it: cat([a, b]) */
};

struct operand {
    enum operand_kind kind;
    uint32_t value;              /* OPERAND_VALUE */
    struct tr_value meta;        /* OPERAND_CONST: the constant; else what the value or list is */
    size_t count;                /* OPERAND_LIST */
    struct operand *items;
};

enum subscript_kind { SUB_INDEX, SUB_SLICE, SUB_NEWAXIS, SUB_ELLIPSIS };

/* One subscript of x[...]: an index (part[0]), or a slice's start, stop
 * and step (each an integer operand or the constant None). */
struct subscript {
    enum subscript_kind kind;
    struct operand part[3];
};

enum instr_kind {
    INSTR_OP,       /* one tr_op_run */
    INSTR_INDEX,    /* x[...]: NumPy basic indexing, a view of args[0] */
    INSTR_WRITE,    /* an output file written from args (its members' values) */
    INSTR_FUSED     /* a chain of INSTR_OPs (fuse.h) run as one tr_fused_run */
};
/* A transfer between devices is an INSTR_OP of the op `to` with the
 * transfer flag set (place.h). */

struct tr_fused;

struct instr {
    enum instr_kind kind;
    const struct tr_op_info *op;              /* INSTR_OP */
    int nargs;                                /* INSTR_OP: op->nparams */
    struct operand args[TR_OP_MAX_PARAMS];    /* INSTR_WRITE: see wargs */
    int nresults;
    uint32_t results[TR_OP_MAX_RESULTS];
    struct subscript *subs;                   /* INSTR_INDEX */
    size_t nsubs;
    size_t group;                             /* INSTR_WRITE: the output group */
    uint32_t *wargs;                          /* INSTR_WRITE: one value per member */
    size_t nwargs;
    int stage;                                /* -1: before the first stage */
    int statement;                            /* the statement of the stage it lowers */
    int line, col;                            /* the expression, for errors */
    /* liveness: the values whose handles are released after it */
    uint32_t *dies;
    size_t ndies;
    /* place: the output group whose file results[0] is computed into, or -1 */
    ptrdiff_t dest_group;
    /* fuse: an INSTR_OP that is a step of the chain that instruction
     * fused_into runs (it runs no more on its own), or -1; an INSTR_FUSED
     * keeps op (its tail's, or its last step's), its chain and the values
     * the chain reads (finputs) */
    ptrdiff_t fused_into;
    struct tr_fused *chain;
    uint32_t *finputs;
    int nfinputs;
    int fused_group;                          /* INSTR_FUSED: 1, 2, ... in the program */
    bool transfer;                            /* a `to` the place pass added */
    /* foreach: which part of a foreach stage it is in (PART_STAGE in
     * every other stage) */
    enum foreach_part {
        PART_STAGE,   /* not a foreach stage */
        PART_ONCE,    /* block-invariant: runs once, before the first block */
        PART_BLOCK,   /* runs for every block */
        PART_AFTER    /* reads the joined values: runs once, after the last block */
    } part;
    /* memory: the argument whose memory results[0] takes (an elementwise
     * op over a value that dies here), or -1 */
    int in_place;
    /* foreach, when the last block is shorter and a constant of this
     * instruction was made from the block's length (x.shape[0]): the
     * operands (nargs of them) or subscripts (nsubs) it has in that block;
     * NULL when they are the same */
    struct operand *last_args;
    struct subscript *last_subs;
    /* memory: results[0] is a joined value (JOIN_POOL, JOIN_FILE) computed
     * straight into its block's rows of the joined whole; false: computed
     * in the pool and copied there */
    bool into_join;
};

/* The outputs that go to one file, written by one INSTR_WRITE. */
struct output_group {
    const char *path;
    size_t *members;             /* indices into pipeline->outputs */
    enum tr_dtype *dtypes;       /* each member's dtype in the file (TR_DTYPE_COUNT: its own) */
    size_t nmembers;
    size_t write;                /* its INSTR_WRITE */
    /* one value alone, in its own dtype, to an uncompressed .npy or raw
     * file of its own (not standard output, a device or a pipe): the
     * file's memory can be the value's (see place.h) */
    bool mappable;
};

/* The pool of one device over a stage, as the memory pass computes it:
 * what is active when the stage starts and at its peak, which is the
 * run's peak_active_bytes for the stage on that device, exactly. */
struct stage_memory {
    struct tr_device device;
    uint64_t start_bytes;        /* active when it starts (kept from before, inputs) */
    uint64_t peak_bytes;
    size_t peak_at;              /* the instruction that reaches it; SIZE_MAX: the start */
    uint64_t end_bytes;          /* active once its scope has ended, before the cache goes */
};

#define STAGE_MAX_DEVICES 2      /* the stage's own and the CPU */

struct program_stage {
    size_t first, count;         /* its instructions */
    uint32_t *kept;              /* what its keep: names, as values (liveness input) */
    size_t nkept;
    uint32_t *keeps;             /* tensor values made here or before, alive after it */
    size_t nkeeps;
    uint32_t over[FOREACH_MAX_OVER];  /* foreach: the values cut into blocks together, */
    uint32_t block[FOREACH_MAX_OVER]; /* and their blocks */
    size_t nover;                /* 0: not a foreach stage */
    int64_t nblocks;             /* foreach: its blocks (0 when over has no rows) */
    int64_t block_rows;          /* foreach: rows a block (size:, or its bytes in rows) */
    int64_t first_block;         /* foreach: the first block run (its index in the whole:
                                    not 0 for a later --shard), then nblocks of them */
    int64_t all_blocks;          /* foreach: the blocks of the unsharded run */
    bool with_last;              /* foreach: the blocks run end with the whole's last */
    size_t nonce, nblock;        /* foreach: its instructions are nonce PART_ONCE, then
                                    nblock PART_BLOCK, then PART_AFTER */
    struct tr_device device;     /* where its instructions run */
    bool automatic;              /* device: auto chose it (auto.h) */
    bool has_fallback;           /* automatic, on an accelerator: then, its pool peak */
    uint64_t fallback_peak_bytes; /* on the CPU were it to fall back (plan_pin_cpu) */
    struct stage_memory memory[STAGE_MAX_DEVICES]; /* its own device's first */
    size_t nmemory;
};

struct program_arena;

struct program {
    /* memory: the CPU pool from the inputs' opening to the first stage:
     * the streams read whole, the copies loads make, the inputs nothing
     * reads released, and the writes before the stages */
    struct stage_memory before;
    struct value *values;
    size_t nvalues, values_cap;
    size_t nlowered;             /* the values of the lowering: the passes add the rest */
    struct instr *instrs;        /* the prologue first (writes of inputs only), then the stages */
    size_t ninstrs, instrs_cap;
    size_t nprologue;
    struct program_stage *stages;
    size_t nstages;
    struct output_group *groups;
    size_t ngroups;
    uint32_t *outputs;           /* the value each pipeline output writes (VALUE_NONE: none) */
    size_t noutputs;
    uint32_t *finals;            /* values read once every stage has run (printed as text) */
    size_t nfinals;
    struct program_arena *arena;
};

struct program *program_new(size_t nstages, size_t noutputs);
void program_free(struct program *prog);

/* Memory freed with the program (zeroed); NULL when out of memory. */
void *program_alloc(struct program *prog, size_t bytes);

/* A new value, VALUE_NONE when out of memory. */
uint32_t program_add_value(struct program *prog, const struct value *v);
/* A new instruction in stage (-1: the prologue, which is only possible
 * before any stage has one); NULL when out of memory.  Instructions are
 * added stage by stage, in order. */
struct instr *program_add_instr(struct program *prog, int stage, enum instr_kind kind);
/* For a pass that writes the instructions anew: takes them out of the
 * program (*n of them; the caller frees the array), leaving every stage
 * empty; program_append then adds a copy of an instruction in its stage,
 * pointing its results' def at the copy (NULL when out of memory). */
struct instr *program_take_instrs(struct program *prog, size_t *n);
struct instr *program_append(struct program *prog, const struct instr *in);
/* Drops the instructions from index n on and the values from v on (the
 * typing of a foreach stage's shorter last block). */
void program_truncate(struct program *prog, size_t n, size_t v);

/* Whether op makes views of its argument rather than new memory. */
bool op_is_view(const struct tr_op_info *op);

/* Which of a foreach stage's blocks v is, or of the values it cuts into
 * blocks: its index in block (over), or -1. */
int stage_block_index(const struct program_stage *st, uint32_t v);
int stage_over_index(const struct program_stage *st, uint32_t v);

/* Calls fn for every value an instruction reads (repeats included): none
 * for a step of a fused chain, the chain's inputs for the chain. */
void instr_reads(const struct instr *in, void (*fn)(uint32_t value, void *ctx), void *ctx);

/* The first instruction of stage s whose op device has no kernel for
 * (tr_device_supports), or NULL. */
const struct instr *program_unsupported(const struct program *prog, size_t s,
                                        struct tr_device device);

#endif /* TR_CLI_PROGRAM_H */
