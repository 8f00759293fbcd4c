/*
 * param.h - the constants a user writes: a pipeline file's params and
 * -D NAME=VALUE, typed by one rule, YAML 1.2's core schema.
 *
 * A plain scalar is null (empty, ~, null, Null, NULL), a boolean (true,
 * True, TRUE, false, False, FALSE), an integer (decimal [-+]?[0-9]+, 0o17,
 * 0x10), a float ([-+]?(.5|1|1.|1.5)([eE][-+]?[0-9]+)?, [-+]?.inf, .nan
 * in any of YAML's three spellings), and else a string: yes, no, on, off
 * and inf are strings.  A quoted scalar is a string; a flow or block
 * sequence is a list whose items are typed the same way.
 */
#ifndef TR_CLI_PARAM_H
#define TR_CLI_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "yaml_tree.h"

enum param_kind { PARAM_INT, PARAM_FLOAT, PARAM_BOOL, PARAM_STRING, PARAM_NONE, PARAM_LIST };

/* Lists nest at most this deep ([[1, 2], [3, 4]] is 2). */
#define PARAM_MAX_DEPTH 8

struct param {
    char *name;             /* NULL for a list's items */
    int line, col;
    enum param_kind kind;
    int64_t integer;
    double number;          /* PARAM_FLOAT; PARAM_INT's value too */
    bool boolean;
    char *string;           /* the value as written (after -D) for every kind;
                               a list from the file as [a, b] */
    struct param *items;    /* PARAM_LIST: its items, which own what they hold */
    size_t nitems;
};

/* YAML 1.2 core schema, for one plain scalar's whole text. */
bool core_is_null(const char *s);
bool core_bool(const char *s, bool *out);
/* 0: an integer, in *out; 1: not an integer; 2: an integer outside int64. */
int core_int(const char *s, int64_t *out);
/* A float (not an integer's syntax); false otherwise. */
bool core_float(const char *s, double *out);

/*
 * The value of a param written as node v of the pipeline file (a scalar,
 * or a sequence of them).  Errors go to d at their node (exit code 3):
 * a mapping, an integer out of range, a NUL, lists nested too deep.
 * false after one; p's kind and value are then unset.  Does not touch
 * p->name, line or col.
 */
bool param_from_node(struct param *p, const struct ynode *v, const char *name,
                     struct diag_list *d);
/*
 * The value of -D name=text: text typed as a plain scalar would be, or, when
 * it starts with '[', '"' or '\'', read as YAML (so [2, 8] is a list and
 * "0x10" a string).  Errors go to d with exit code 2 and no place.
 */
bool param_from_text(struct param *p, const char *text, const char *name, struct diag_list *d);
/* Frees what p holds (its string and items, not its name) and clears it. */
void param_clear(struct param *p);
/* "an integer", "a number", "true or false", "a string", "None", "a list". */
const char *param_kind_name(enum param_kind kind);

#endif /* TR_CLI_PARAM_H */
