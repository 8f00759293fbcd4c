/*
 * lower.h - the statement trees of a pipeline evaluated once into its
 * program (program.h): values typed, constants folded, one instruction
 * per computation, and the outputs' writes in their places.
 */
#ifndef TR_CLI_LOWER_H
#define TR_CLI_LOWER_H

#include <stdbool.h>

#include "diag.h"
#include "plan.h"
#include "program.h"

/* Lowers stage index of plan->pipeline into plan->program, binding its
 * targets in plan; every error goes to d. */
void lower_stage(struct plan *plan, int index, struct diag_list *d);
/* Groups the outputs by file and places each file's write after the
 * instruction that finishes its last value (once every stage is lowered
 * and the outputs are checked).  false when out of memory. */
bool lower_outputs(struct plan *plan);

#endif /* TR_CLI_LOWER_H */
