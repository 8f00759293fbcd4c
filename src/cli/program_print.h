/*
 * program_print.h - the program as validate and --dry-run show it:
 * text for people, JSON for scripts (tensorrun(1), THE PROGRAM).
 */
#ifndef TR_CLI_PROGRAM_PRINT_H
#define TR_CLI_PROGRAM_PRINT_H

#include <stdio.h>

#include "plan.h"

void program_print(const struct plan *plan, FILE *out);
void program_print_json(const struct plan *plan, FILE *out);

#endif /* TR_CLI_PROGRAM_PRINT_H */
