/*
 * shard.h - --shard K/N, --shard auto/N and --shard auto (a Slurm job
 * array's task): which of N contiguous ranges of every foreach stage's
 * blocks a run computes, and the {shard} and {shards} of its output paths.
 */
#ifndef TR_CLI_SHARD_H
#define TR_CLI_SHARD_H

#include "pipeline.h"

struct plan;

/* The largest N: shard numbers are printed zero-padded to its width. */
#define SHARD_MAX 1000000

/* Reads --shard's argument into *k and *n (1 <= k <= n), taking auto's
 * numbers from Slurm's SLURM_ARRAY_TASK_* variables; EXIT_OK or a usage
 * error (reported). */
int shard_parse(const char *arg, int *k, int *n);

/* Replaces {shard} (k, zero-padded to n's width) and {shards} (n) in
 * every output path of p (1 and 1 when unsharded).  A sharded run whose
 * output path lacks {shard} (the shards would write over each other), or
 * is standard output, is a usage error (reported); else EXIT_OK. */
int shard_outputs(struct pipeline *p);

/* After planning a sharded run: a pipe cut into blocks is a usage error
 * (every shard would read all of it; reported), and a pipeline without a
 * foreach stage a warning (every shard does all the work). */
int shard_check_plan(const struct plan *plan);

/* Warns when the run is a task of a Slurm job array but not sharded. */
void shard_warn_unsharded(void);

#endif /* TR_CLI_SHARD_H */
