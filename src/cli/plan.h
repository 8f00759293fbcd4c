/*
 * plan.h - a pipeline checked all the way through before anything runs:
 * every name resolved, every value's dtype, shape and device inferred from
 * the inputs' headers and the op table, and for every stage the values
 * that must outlive it and the most pool memory it holds at once.
 */
#ifndef TR_CLI_PLAN_H
#define TR_CLI_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "pipeline.h"
#include "program.h"
#include "tensorrun_ops.h"

/* One binding of a name: an input, a param, or a statement's target. */
struct plan_value {
    const char *name;
    struct tr_value meta;
    int stage;             /* the stage that binds it; -1 for inputs and params */
    int line, col;         /* where it is bound */
    bool input, param;
    bool unsupported;      /* an input of a dtype tensorrun lacks: an error if used */
    const char *unsupported_dtype;
    bool poisoned;         /* its statement had an error: uses report nothing more */
    bool depends_on_block; /* inside a foreach stage: computed from the block */
    uint64_t bytes;        /* pool block bytes it holds (0 for views and inputs) */
    uint32_t value;        /* the program's value it names (VALUE_NONE when poisoned) */
};

struct plan_input {
    const struct input *input;
    struct tio_file *file;     /* opened for its header only */
    size_t index;              /* the tensor of the file */
    struct tr_value meta;
    uint64_t mapped_bytes;
    uint64_t data_offset;      /* the file offset of its first byte, once loaded */
    bool streamed;             /* read a block at a time by its foreach stage */
    const char *unsupported;   /* a dtype tensorrun lacks, as the file spells it */
};

struct plan_stage {
    const struct stage *stage;
    struct tr_device device;
    size_t first_value, nvalues;   /* the bindings its statements made */
    const char **live;             /* names that outlive it (kept and needed later) */
    size_t nlive;
};

struct plan {
    struct pipeline *pipeline;
    struct plan_input *inputs;
    size_t ninputs;
    struct plan_value *values;     /* every binding, in order */
    size_t nvalues, capacity;
    struct plan_stage *stages;
    size_t nstages;
    uint64_t mapped_bytes;
    struct program *program;       /* what runs (when there are no errors); its arena
                                      holds the lists and strings values point into */
    bool *pinned;                  /* per stage: an auto stage kept on the CPU (its
                                      fallback, plan_pin_cpu) */
};

/* Checks p through and through; every error goes to diags.  Returns the
 * plan (also when there are errors, as far as it got); NULL only when out
 * of memory.  Inputs are opened for their headers only, unless for_run:
 * then they are opened (mapped, or read when a pipe) once, for the run to
 * load from plan->inputs[i].file. */
struct plan *plan_build(struct pipeline *p, struct diag_list *diags, bool for_run);
/* Where the inputs' headers come from when not from their files: the
 * fuzzer and the unit tests plan without any file.  describe fills *e
 * (dtype_text, supported, dtype, ndim, shape, nbytes) for input index of
 * the pipeline and returns true, or returns false and points *why at the
 * reason there is none, reported as a file that cannot be opened. */
struct plan_input_source {
    bool (*describe)(void *ctx, size_t index, const struct input *in, struct tio_entry *e,
                     const char **why);
    void *ctx;
};

/* plan_build, not for_run, with the headers from src: nothing is opened,
 * so the plan is one to print, never to run. */
struct plan *plan_build_from(struct pipeline *p, struct diag_list *diags,
                             const struct plan_input_source *src);
void plan_free(struct plan *plan);

/*
 * The plan of plan's pipeline with auto stage s on the CPU, and every
 * stage that plan keeps there already, the rest placed as in plan: what a
 * run goes on with when s falls back (exec.c).  It is planned from plan's
 * inputs as plan opened them (their headers, how they are read), and opens
 * nothing.  The values of the lowering have the same numbers in both
 * (program.nlowered), so that the tensors made so far carry over.  NULL
 * when out of memory, or should the plan fail (it cannot: only a stage's
 * device differs).
 */
struct plan *plan_pin_cpu(const struct plan *plan, size_t s);
/* Hands the inputs' opened files, still to be read, from one plan to
 * another of the same pipeline. */
void plan_hand_inputs(struct plan *from, struct plan *to);

/* For the lowering (lower.c): a new binding of name; the latest binding
 * of name among the first n; the hint for a name nothing binds; the pool
 * bytes a tensor of v's description takes; v described in words. */
struct plan_value *plan_bind(struct plan *plan, const char *name, int stage, int line, int col);
struct plan_value *plan_find(const struct plan *plan, const char *name, size_t n);
const char *plan_unbound_hint(const struct plan *plan, const char *name, char *hint,
                              size_t size);
uint64_t plan_tensor_bytes(const struct tr_value *v);
char *plan_describe(const struct tr_value *v, char *buf, size_t size);

/* The final binding of name, or NULL. */
const struct plan_value *plan_lookup(const struct plan *plan, const char *name);

#endif /* TR_CLI_PLAN_H */
