/*
 * place.h - where results go: each output file that can hold its value's
 * memory gets the instruction that makes that value as its destination.
 */
#ifndef TR_CLI_PLACE_H
#define TR_CLI_PLACE_H

#include <stdbool.h>

#include "program.h"

/*
 * Makes every move between devices an instruction: a tensor that an
 * instruction of a stage reads from another device than the stage's is
 * moved first (one `to` per value and stage, before its first use there),
 * and a value an output's write reads from a device other than the CPU is
 * moved to the CPU right before the write.  Runs after lower_outputs and
 * before the other passes.  false when out of memory.
 */
bool place_transfers(struct program *prog);

/*
 * Makes a strided CPU value (a view such as x[::2, 1000:9000], a Fortran
 * order input) that is written alone to a file of its own the result of a
 * clone right before its write, so that place_run can stream the copy
 * into the file: no conversion buffer, no copy of its size in the pool.
 * Runs after place_transfers and foreach_run (a joined value goes where
 * its join says).  false when out of memory.
 */
bool place_copies(struct program *prog);

/*
 * Sets dest_group on the instruction whose result an output file can be:
 * the file is mappable (program.h), the value is a tensor on the CPU made
 * by a fused chain or by an op whose kernel makes its result where it is
 * told (tr_op_takes_dest: not a view, a cast or a sort), not joined
 * from the blocks of a foreach stage (its join says where it goes,
 * foreach.h), and nothing but the file's
 * write reads it, nor is it kept or printed.  Such a value never takes
 * pool memory, nor is it copied to be written.  Runs after liveness.
 */
void place_run(struct program *prog);

#endif /* TR_CLI_PLACE_H */
