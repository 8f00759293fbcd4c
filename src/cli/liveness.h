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
 *   LIVE_UNUSED).
 * false when out of memory.
 */
bool liveness_run(struct program *prog);

#endif /* TR_CLI_LIVENESS_H */
