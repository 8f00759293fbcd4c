/*
 * print.h - values as readable text, for `tensorrun eval` on a terminal.
 */
#ifndef TR_CLI_PRINT_H
#define TR_CLI_PRINT_H

#include <stdio.h>

#include "tensorrun_ops.h"

/* "f32[2, 3] [[1, 2, 3],\n           [4, 5, 6]]", NumPy-style, with the
 * middle of long dimensions elided; a 0-d tensor as a plain number. */
void print_tensor(const struct tr_tensor *t, FILE *out);
/* A value as eval prints it: a tensor as print_tensor does, a number, a
 * boolean, a string or a list as the expression language writes them. */
void print_arg(const struct tr_arg *arg, FILE *out);

#endif /* TR_CLI_PRINT_H */
