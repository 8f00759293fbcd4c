/*
 * memory.h - the exact pool memory of every stage, known before anything
 * runs (tensorrun(1), MEMORY).  The pass replays the executor's pool on
 * the program: every block an instruction takes (tr_op_scratch,
 * tr_fused_memory, the write's buffers, each rounded as the pool rounds
 * it), every handle the liveness pass releases, every view that holds
 * its root's block.  What it computes for a stage's devices is what the
 * run then reports as peak_active_bytes, byte for byte.
 */
#ifndef TR_CLI_MEMORY_H
#define TR_CLI_MEMORY_H

#include <stdbool.h>

#include "program.h"

/*
 * Decides which elementwise instructions compute into the memory of an
 * argument that dies there (instr.in_place: a value the liveness pass
 * ends at that instruction, read once, compact, of the result's dtype and
 * shape, whose block no other live value holds), then fills every stage's
 * memory[] for threads CPU threads (the run's --threads).  Runs after
 * place_run, last.  false when out of memory.
 */
bool memory_run(struct program *prog, int threads);

#endif /* TR_CLI_MEMORY_H */
