/*
 * exec_impl.h - what the executor's files share: the state of a run, and
 * running one instruction (exec.c) for the block loop of a foreach stage
 * (exec_foreach.c).
 */
#ifndef TR_CLI_EXEC_IMPL_H
#define TR_CLI_EXEC_IMPL_H

#include "exec.h"

/* An output group's open file. */
struct out_file {
    struct tio_output *file;
    bool written;
};

struct exec {
    struct plan *plan;
    struct program *prog;
    struct pipeline *p;
    const struct run_options *o;
    struct tr_tensor **tensors;   /* each value's handle while it lives */
    struct out_file *files;       /* one per program->groups */
    struct report report;
    struct progress *progress;
    uint64_t read_bytes, written_bytes, released_bytes, peak_bytes;
    /* every device the program runs on (the CPU's first), and each one's peak */
    struct tr_device devices[REPORT_MAX_DEVICES];
    uint64_t device_peaks[REPORT_MAX_DEVICES];
    size_t ndevices;
    bool check_memory;            /* TENSORRUN_CHECK_MEMORY: peaks must be the pass's */
    /* while a foreach stage's blocks run (exec_foreach.c) */
    int block_stage;              /* the stage; -1 outside the blocks */
    const struct program_stage *held; /* while the part before its blocks runs, the
                                     stage whose cut values die after the blocks at the
                                     earliest */
    bool last_block;              /* the shorter last block: last_args, last_meta */
    struct tr_tensor **join_rows; /* per value: its block's rows of its joined whole */
    uint64_t drop_behind;         /* a mapped input cut into blocks past this many bytes
                                     is dropped from the page cache once read */
    /* while an auto stage on an accelerator runs: that device (else the
     * CPU), its pool's oom_count when the stage began, why the stage may
     * no longer fall back to the CPU (NULL: it still may), and, once it
     * ran out of memory, where */
    struct tr_device fall_device;
    uint64_t fall_ooms;
    const char *no_fall_back;
    size_t failed_at;
    struct plan *own_plan;        /* the plan run on after a fallback (x->plan) */
};

/* exec_instr's status for an instruction that ran out of memory while the
 * stage may still fall back: nothing is reported yet. */
#define EXEC_FALL_BACK (-1)

/* Whether the stage running may still fall back to the CPU. */
static inline bool exec_may_fall_back(const struct exec *x)
{
    return x->fall_device.kind != TR_DEV_CPU && !x->no_fall_back;
}

/* From here on it may not, because of why (the first reason stays, for
 * the note an out-of-memory error gets). */
static inline void exec_no_fall_back(struct exec *x, const char *why)
{
    if (exec_may_fall_back(x))
        x->no_fall_back = why;
}

double exec_now_ms(void);

/* Runs instruction at of stage st (NULL: before the stages); an error is
 * reported and its exit status returned.  Within a foreach stage's blocks
 * it takes the last block's operands in the last block, computes a joined
 * value into its rows (or copies it there) and releases only what the
 * block makes. */
int exec_instr(struct exec *x, const struct stage *st, size_t at);

/* Runs stage s's instructions, a foreach stage: once the instructions
 * before the blocks, the blocks' for every block of foreach.size rows,
 * each in a scope of its own, then those after the last block. */
int exec_foreach(struct exec *x, size_t s);

/*
 * After auto stage s ran out of memory on device, and its scope has ended:
 * the run goes on with the plan of s on the CPU (plan_pin_cpu), which
 * becomes x->plan, its tensors carried over, once device has given back
 * its cache; warns that it does.  The error of the instruction that ran
 * out is reported, and EXIT_OOM returned, when the tensors alive cannot
 * carry over (none so far) or there is no memory to plan with.
 */
int exec_fall_back(struct exec *x, size_t s, struct tr_device device, const char *why);

#endif /* TR_CLI_EXEC_IMPL_H */
