/*
 * run.h - what `tensorrun run` and `tensorrun eval` share: the run options
 * of tensorrun(1) and the path from a loaded pipeline to its exit
 * status (plan, report, dry run or execution).
 */
#ifndef TR_CLI_RUN_H
#define TR_CLI_RUN_H

#include <stdbool.h>

#include "exec.h"
#include "pipeline.h"

/* The commands that take run options: validate takes those that change
 * what the plan says (-D -i -o --device --force-device --threads
 * --memory-limit). */
enum run_command { RUN_COMMAND_RUN, RUN_COMMAND_EVAL, RUN_COMMAND_VALIDATE };

struct run_args {
    struct overrides overrides;
    struct run_options options;
    bool device_given, device_auto;
    struct tr_device device;
    bool force_given;            /* --force-device: every stage on force_device */
    struct tr_device force_device;
    bool stats_given, quiet, dry_run;
    int shard_k, shard_n;        /* --shard; 0/0 unsharded */
    bool json;                   /* --json: validate and --dry-run print JSON */
    const char *stats_file;
    char **args;                 /* argv without "--" and the word after it */
    const char *protected_operand; /* the word after "--" */
    const char *operands[2];     /* the first two operands (the pipeline, the statements) */
    int noperands;               /* how many there are */
    /* eval only */
    bool print;                  /* --print: text on stdout, whatever it is */
    const char **eval_outputs;   /* -o values, with or without NAME= */
    size_t neval_outputs;
    enum tio_format format;      /* --format: bytes of this format on stdout; UNKNOWN */
    enum tio_compression compression;
};

/* Parses argv (argv[0] is the command's name) into a and returns EXIT_OK,
 * a usage error's status, or -1 after --help (printed).  eval takes
 * --print, --format and -o [NAME=]PATH; run takes -o NAME=PATH.  The
 * operands (the pipeline, or the statements) are counted in a->noperands,
 * the first two in a->operands; "--" makes the word after it an operand,
 * and options may follow that word. */
int run_args_parse(int argc, char **argv, bool eval, struct run_args *a);
/* The same for any command; validate is run_args_parse_for(VALIDATE),
 * and leaves a->dry_run set. */
int run_args_parse_for(int argc, char **argv, enum run_command command, struct run_args *a);
void run_args_free(struct run_args *a);

/* Exit 2 (reported) when two inputs of p read standard input, or the one
 * that does would read a terminal; else EXIT_OK. */
int check_standard_input(const struct pipeline *p);

/* Adds an out-of-memory error (exit 5) to d, naming the input, when the
 * inputs that are read into pool memory rather than mapped (zstd, pipes,
 * big-endian or misaligned data) take more than limit bytes (0: none), as
 * their headers say.  For validate and --dry-run, before anything is read;
 * a run reports the same when it opens or loads the input. */
void check_input_memory(const struct plan *plan, uint64_t limit, struct diag_list *d);
/* The first stage whose exact peak (the memory pass's) would pass the
 * limit of one of its devices is exit 5 at the statement where the peak
 * is, so that a run that cannot fit stops before it computes anything,
 * and validate says so. */
void check_stage_memory(const struct plan *plan, const struct memory_limits *limits,
                        struct diag_list *d);

/* Plans p (its diagnostics into d, printed here), then prints the plan for
 * a dry run or executes it.  The options that change the plan (--device,
 * --force-device, --memory-limit, --threads) are set on p first; a dry run
 * also checks that every output could be created, as the run would.
 * Returns the exit status. */
int run_loaded(struct pipeline *p, struct diag_list *d, struct run_args *a);

#endif /* TR_CLI_RUN_H */
