/*
 * interp.h - statements evaluated for real: the run's environment of
 * named values, and one statement at a time handed to the engine.
 */
#ifndef TR_CLI_INTERP_H
#define TR_CLI_INTERP_H

#include <stdbool.h>
#include <stddef.h>

#include "expr.h"
#include "tensorrun_ops.h"

/* A name's current value: a tensor handle the environment owns, or a
 * constant (a param). */
struct binding {
    const char *name;
    struct tr_arg arg;
    int stage;          /* the stage that bound it; -1 for inputs and params */
};

struct env {
    struct binding *items;
    size_t count, capacity;
};

/* The binding of name, or NULL. */
struct binding *env_find(const struct env *env, const char *name);
/* Binds name to arg: its tensor, if any, now belongs to the environment;
 * the tensor name held before is released.  false when out of memory (arg's
 * tensor is released then too). */
bool env_bind(struct env *env, const char *name, const struct tr_arg *arg, int stage);
/* Releases name's tensor and forgets the name. */
void env_unbind(struct env *env, const char *name);
/* The tensors arg holds (its own, or its list's): stores them in out
 * (when not NULL) and returns how many. */
size_t arg_tensors(const struct tr_arg *arg, struct tr_tensor **out);
/* Releases every tensor and forgets every name. */
void env_free(struct env *env);

/*
 * Evaluates st in stage and binds its targets.  Every op runs through
 * tr_op_run; a temporary is released as soon as the op that reads it has
 * returned.  dest (when not NULL) is the destination of the statement's
 * last op, the one whose result the target takes, and of no other; an op
 * whose destination is not given computes in place over an operand that
 * is a temporary of the statement nothing else holds, when it can.  On
 * failure returns the engine's status (tr_last_error() says why) and sets
 * *at to the expression that failed, for its place.
 */
tr_status interp_statement(struct env *env, const struct statement *st, int stage,
                           const struct tr_dest *dest, const struct expr **at);

/* Calls fn(name, ctx) for every name st reads (repeats included). */
void interp_reads(const struct statement *st, void (*fn)(const char *name, void *ctx), void *ctx);

#endif /* TR_CLI_INTERP_H */
