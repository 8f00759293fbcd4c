/*
 * liveness.h - the one place lifetimes are decided: after which
 * instruction each value's handle is released, and what each stage keeps
 * for later ones.
 */
#ifndef TR_CLI_LIVENESS_H
#define TR_CLI_LIVENESS_H

#include <stdbool.h>

#include "program.h"

/*
 * Sets every value's last_use and every instruction's dies, and each
 * stage's keeps:
 * - a value dies after the last instruction that reads it (an output's
 *   write is a read);
 * - a value read after the last stage (program->finals) lives to the end;
 * - a value a stage keeps (program_stage.kept) and nothing reads later
 *   lives into the next stage with instructions, dying after its first
 *   instruction (to the end when there is none);
 * - a result nothing reads dies right after the instruction that makes
 *   it, an input nothing reads as soon as it is loaded (last_use stays
 *   LIVE_UNUSED);
 * - in a foreach stage, what the blocks read but do not make lives to the
 *   last instruction of the blocks (every block reads it again), and the
 *   value cut into blocks to the stage's last instruction; the executor
 *   releases what a block makes (liveness_block_local) after its last use
 *   in each block, and the rest after the last block's;
 * - in an auto stage placed on an accelerator, what the stage reads from
 *   before it lives to the stage's last instruction (should the stage fall
 *   back to the CPU, it runs again from its first).
 * false when out of memory.
 */
bool liveness_run(struct program *prog);

/* Whether value v is made anew by every block of stage s (a result of its
 * PART_BLOCK instructions, the block itself, or a builtin). */
bool liveness_block_local(const struct program *prog, size_t s, uint32_t v);

#endif /* TR_CLI_LIVENESS_H */
