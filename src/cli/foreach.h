/*
 * foreach.h - the structure of a foreach stage (tensorrun-pipeline(5),
 * FOREACH): which instructions run once before the blocks, which run for
 * every block, which after the last one, and where each block's part of a
 * joined value goes.
 */
#ifndef TR_CLI_FOREACH_H
#define TR_CLI_FOREACH_H

#include <stdbool.h>

#include "program.h"

/*
 * In every foreach stage, moves the instructions whose results do not
 * depend on the block (value.depends false) before all the others, in
 * their order (PART_ONCE: computed once and kept as they are), then those
 * that do (PART_BLOCK), then the writes that read a joined value
 * (PART_AFTER); every other instruction is PART_STAGE.  Each value of the
 * stage that depends on the block and is needed after it (kept, read by a
 * later stage or printed at the end) or written to an output gets its
 * join: JOIN_FILE into its output's file at the block's rows when that
 * write alone reads it after the stage and the file is mappable (one
 * tensor, .npy or raw, uncompressed), else JOIN_POOL; the block itself
 * (a name bound to it) is JOIN_OVER, the value it is cut from.  Runs after
 * place_transfers and before fuse_run, which keeps chains within a part.
 * false when out of memory.
 */
bool foreach_run(struct program *prog);

#endif /* TR_CLI_FOREACH_H */
