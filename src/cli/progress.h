/*
 * progress.h - a one-line progress display on stderr for long stages:
 * the stage, the statement it is on (a foreach stage: its blocks, bytes,
 * rate and time left) and the time so far, redrawn a few times a second
 * by a thread of its own on a terminal, a plain line every ten seconds
 * (TENSORRUN_PROGRESS_INTERVAL) elsewhere.
 */
#ifndef TR_CLI_PROGRESS_H
#define TR_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "exec.h"

struct progress;

/* NULL (and every call below a no-op) when mode is off, or auto and out is
 * not a terminal. */
struct progress *progress_start(enum progress_mode mode, FILE *out);
/* A stage begins: it has nsteps statements. */
void progress_stage(struct progress *p, const char *stage, size_t nsteps);
/* done statements of the stage have run. */
void progress_step(struct progress *p, size_t done);
/* A foreach stage begins: nblocks blocks of bytes in all. */
void progress_blocks(struct progress *p, const char *stage, size_t nblocks, uint64_t bytes);
/* done blocks, bytes_done of the bytes, have run. */
void progress_block(struct progress *p, size_t done, uint64_t bytes_done);
/* The stage is over: its line, if one was drawn, is erased. */
void progress_done(struct progress *p);
void progress_stop(struct progress *p);

#endif /* TR_CLI_PROGRESS_H */
