/*
 * fuse.h - chains of elementwise instructions that feed a reduction, a
 * row-wise op, or simply a value made into one instruction that the engine
 * runs as a single blocked pass over memory (tensorrun_fused.h), with the
 * bits of the unfused ops and no tensor for the chain's intermediates.
 */
#ifndef TR_CLI_FUSE_H
#define TR_CLI_FUSE_H

#include <stdbool.h>

#include "program.h"

/*
 * Finds the chains and makes each one's last instruction an INSTR_FUSED
 * (its other instructions become its steps: fused_into).  A chain's
 * intermediate values are read once, by the chain, in the same stage, and
 * are no output, kept value or value printed at the end; its steps are
 * what tr_fused_can_step allows, its tail what tr_fused_can_tail allows
 * (neither with a constant that a shorter last block changes, last_args),
 * and it has at least two steps, or one and a tail.  Runs before
 * liveness.  Does nothing when the environment sets TENSORRUN_NO_FUSE (a
 * switch for tests: the unfused program must give the same bits).  false
 * when out of memory.
 */
bool fuse_run(struct program *prog);

#endif /* TR_CLI_FUSE_H */
