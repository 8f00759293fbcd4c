/*
 * run.h - what `tensorrun run` and `tensorrun eval` share: the run options
 * of SPEC.md section 2 and the path from a loaded pipeline to its exit
 * status (plan, report, dry run or execution).
 */
#ifndef TR_CLI_RUN_H
#define TR_CLI_RUN_H

#include <stdbool.h>

#include "exec.h"
#include "pipeline.h"

struct run_args {
    struct overrides overrides;
    struct run_options options;
    bool device_given, device_auto;
    struct tr_device device;
    bool stats_given, quiet, dry_run;
    const char *stats_file;
    /* eval only */
    bool print;                  /* --print: text on stdout, whatever it is */
    const char **eval_outputs;   /* -o values, with or without NAME= */
    size_t neval_outputs;
};

/* Parses argv (argv[0] is the command's name) into a and returns EXIT_OK,
 * a usage error's status, or -1 after --help (printed).  eval takes
 * --print and -o [NAME=]PATH; run takes -o NAME=PATH.  The operands (the
 * pipeline, or the statements) are left at argv[optind..argc). */
int run_args_parse(int argc, char **argv, bool eval, struct run_args *a);
void run_args_free(struct run_args *a);

/* Adds an out-of-memory error (exit 5) to d, naming the input, when the
 * inputs that are read into pool memory rather than mapped (zstd, pipes,
 * big-endian or misaligned data) take more than limit bytes (0: none), as
 * their headers say.  For validate and --dry-run, before anything is read;
 * a run reports the same when it opens or loads the input. */
void check_input_memory(const struct plan *plan, uint64_t limit, struct diag_list *d);

/* Plans p (its diagnostics into d, printed here), then prints the plan for
 * a dry run or executes it.  Returns the exit status. */
int run_loaded(struct pipeline *p, struct diag_list *d, struct run_args *a);

#endif /* TR_CLI_RUN_H */
