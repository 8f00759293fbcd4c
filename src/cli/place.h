/*
 * place.h - where results go: each output file that can hold its value's
 * memory gets the instruction that makes that value as its destination.
 */
#ifndef TR_CLI_PLACE_H
#define TR_CLI_PLACE_H

#include "program.h"

/*
 * Sets dest_group on the instruction whose result an output file can be:
 * the file is mappable (program.h), the value is a tensor on the CPU made
 * by an op that makes new memory (not a view), and nothing but the file's
 * write reads it, nor is it kept or printed.  Such a value never takes
 * pool memory, nor is it copied to be written.  Runs after liveness.
 */
void place_run(struct program *prog);

#endif /* TR_CLI_PLACE_H */
