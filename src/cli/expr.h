/*
 * expr.h - the expression language of tensorrun-pipeline(5), EXPRESSIONS: statements
 * `TARGET[, TARGET]... = EXPR` parsed into trees whose every node knows
 * its place in the pipeline file.
 *
 * Operators become calls of the ops they stand for (a + b is add(a, b),
 * a @ b matmul, -a neg, a < b lt, ...), so that the planner sees one kind
 * of node for every computation; x.T, x.mT and x[...] stay nodes of their
 * own, since they are views with their own rules.
 */
#ifndef TR_CLI_EXPR_H
#define TR_CLI_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "tensorrun.h"

enum expr_kind {
    EXPR_NAME,     /* name */
    EXPR_INT,      /* 42: a decimal integer literal */
    EXPR_FLOAT,    /* 1.5, 1e-6, inf, nan */
    EXPR_STRING,   /* "cuda" or 'tanh' */
    EXPR_BOOL,     /* true, false */
    EXPR_NONE,     /* None */
    EXPR_DTYPE,    /* f32, float32, ... (reserved words) */
    EXPR_LIST,     /* [a, b, c] */
    EXPR_CALL,     /* name(args, key=value); operators too */
    EXPR_INDEX,    /* base[subscripts] */
    EXPR_ATTR,     /* base.T, base.mT; base.shape, base.ndim, base.dtype */
    EXPR_SLICE,    /* start:stop:step inside a subscript; parts may be NULL */
    EXPR_ELLIPSIS  /* ... inside a subscript */
};

struct expr;

struct expr_arg {
    char *keyword;       /* NULL for a positional argument */
    int line, col;       /* of the keyword, or of the value when positional */
    struct expr *value;
};

struct expr {
    enum expr_kind kind;
    int line, col;       /* of the node's first token (an operator call: the
                            operator's token, as compilers point at it) */
    union {
        char *name;      /* EXPR_NAME, EXPR_STRING (its text), EXPR_ATTR (T, mT, shape,
                            ndim, dtype) */
        int64_t integer;
        double number;
        bool boolean;
        enum tr_dtype dtype;
    } v;
    /* EXPR_CALL: the op's name (add, matmul, neg, ... for operators) and
     * whether it came from an operator */
    char *op;
    bool from_operator;
    /* EXPR_CALL args; EXPR_LIST items (positional args); EXPR_INDEX
     * subscripts (each an expression, EXPR_SLICE, EXPR_ELLIPSIS or
     * EXPR_NONE) */
    struct expr_arg *args;
    size_t nargs;
    /* EXPR_INDEX, EXPR_ATTR: what is indexed; EXPR_SLICE: start, stop,
     * step (any may be NULL) */
    struct expr *base;
    struct expr *slice[3];
};

struct statement {
    int line, col;       /* where the statement's text starts */
    size_t ntargets;
    char **targets;
    int *target_cols;    /* column of each target */
    struct expr *value;
};

/*
 * Parses one statement.  text is the statement as the YAML scalar holds
 * it; line and col are where that text starts in the file, and
 * single_line says whether columns in the file are col + offset (for
 * text spread over several lines, every token is given the scalar's own
 * place).  A bare expression (no '=') is accepted when bare_name is not
 * NULL: it becomes the statement bare_name = EXPR (tensorrun eval's
 * `out`).  On a syntax error, adds it to diags (at the offending token)
 * and returns NULL.
 */
struct statement *expr_parse(const char *text, int line, int col, bool single_line,
                             const char *bare_name, struct diag_list *diags);
/*
 * The same for text that does not sit on one line of the file as written
 * (a literal or folded block, a scalar over several lines): places[i] is
 * where byte i of text is in the file (strlen(text) + 1 entries), so that
 * every token is reported at its own line and column.
 */
struct statement *expr_parse_placed(const char *text, const struct diag_place *places,
                                    const char *bare_name, struct diag_list *diags);
void statement_free(struct statement *s);
void expr_free(struct expr *e);

/* Reserved words: true false None inf nan, the dtype names, and i4 and u4
 * (the quantise ops' packed dtypes, which are strings as values). */
bool expr_is_reserved(const char *word);
/* Whether word is an identifier ([A-Za-z_][A-Za-z0-9_]*) and not reserved. */
bool expr_is_identifier(const char *word);

#endif /* TR_CLI_EXPR_H */
