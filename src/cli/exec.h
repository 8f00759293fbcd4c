/*
 * exec.h - running a checked plan: one engine scope per stage, outputs
 * written as soon as their values are final and renamed into place
 * together at the end, the pool's statistics after every stage.
 */
#ifndef TR_CLI_EXEC_H
#define TR_CLI_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memory_limits.h"
#include "plan.h"
#include "report.h"

enum progress_mode { PROGRESS_AUTO, PROGRESS_ON, PROGRESS_OFF };

struct run_options {
    int threads;                 /* 0: every online core */
    struct memory_limits limits; /* --memory-limit */
    bool keep_cache;             /* --keep-cache: no release between stages */
    enum report_mode stats;
    FILE *stats_out;             /* where the statistics go */
    enum progress_mode progress;
    bool fsync;
    int verbosity;               /* -1 quiet, 0 normal, 1 verbose */
    const char *print_name;      /* a value printed as text at the end (eval) */
    FILE *print_out;
};

/* Runs plan (which has no errors) and returns the exit status; every
 * failure has been reported on stderr. */
int exec_run(struct plan *plan, const struct run_options *options);

#endif /* TR_CLI_EXEC_H */
