/*
 * fuzz_expr.c - libFuzzer target for the expression parser (src/cli/expr.c).
 *
 * Feeds arbitrary bytes, as one statement's text, to expr_parse twice (as
 * a statement on one line, and as a bare expression spread over lines),
 * and checks what it promises: a tree and no diagnostic, or NULL and
 * exactly one error, placed inside the text.  A tree is then printed back
 * as fully parenthesised source, which must parse to the same tree.  Any
 * broken promise aborts, so libFuzzer reports it as a crash; leaks are
 * LeakSanitizer's.
 *
 * Build with clang, -fsanitize=fuzzer,address,undefined, this file,
 * src/cli/expr.c, diag.c, msg.c, suggest.c and the engine's sources, then
 * run with the seed statements:
 *
 *   ./fuzz_expr -max_total_time=300 -dict=tests/fuzz/expr.dict CORPUS tests/fuzz/seeds-expr
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool cond)
{
    if (!cond)
        abort();
}

/* ------------------------------------------------------------ printing */

struct out {
    char *text;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    check(n >= 0);
    if (o->len + (size_t)n + 1 > o->cap) {
        size_t cap = (o->len + (size_t)n + 1) * 2;
        char *text = realloc(o->text, cap);
        check(text != NULL);
        o->text = text;
        o->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(o->text + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

static void put_float(struct out *o, double v)
{
    char buf[64];

    if (isnan(v)) {
        put(o, "nan");
        return;
    }
    if (isinf(v)) {
        put(o, "inf");
        return;
    }
    snprintf(buf, sizeof buf, "%.17g", v);
    put(o, "%s%s", buf, strpbrk(buf, ".e") ? "" : ".0");
}

static void put_string(struct out *o, const char *s)
{
    put(o, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            put(o, "\\%c", *s);
        else if (*s == '\n')
            put(o, "\\n");
        else if (*s == '\t')
            put(o, "\\t");
        else
            put(o, "%c", *s);
    }
    put(o, "\"");
}

static void print_expr(struct out *o, const struct expr *e);

static void print_args(struct out *o, const struct expr *e)
{
    for (size_t i = 0; i < e->nargs; i++) {
        if (i > 0)
            put(o, ", ");
        if (e->args[i].keyword)
            put(o, "%s=", e->args[i].keyword);
        print_expr(o, e->args[i].value);
    }
}

static const char *operator_text(const char *op)
{
    static const char *const table[][2] = {
        {"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"}, {"pow", "**"},
        {"matmul", "@"}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="},
        {"eq", "=="}, {"ne", "!="}, {"floor_divide", "//"}, {"remainder", "%"},
        {"bitwise_and", "&"}, {"bitwise_or", "|"}, {"bitwise_xor", "^"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(op, table[i][0]) == 0)
            return table[i][1];
    abort();
}

/* Source text for e, every operator, index and attribute parenthesised. */
static void print_expr(struct out *o, const struct expr *e)
{
    switch (e->kind) {
    case EXPR_NAME:
        put(o, "%s", e->v.name);
        break;
    case EXPR_INT:
        check(e->v.integer >= 0);
        put(o, "%lld", (long long)e->v.integer);
        break;
    case EXPR_FLOAT:
        check(!(e->v.number < 0));
        put_float(o, e->v.number);
        break;
    case EXPR_STRING:
        put_string(o, e->v.name);
        break;
    case EXPR_BOOL:
        put(o, "%s", e->v.boolean ? "true" : "false");
        break;
    case EXPR_NONE:
        put(o, "None");
        break;
    case EXPR_DTYPE:
        put(o, "%s", tr_dtype_name(e->v.dtype));
        break;
    case EXPR_LIST:
        put(o, "[");
        print_args(o, e);
        put(o, "]");
        break;
    case EXPR_CALL:
        if (!e->from_operator) {
            put(o, "%s(", e->op);
            print_args(o, e);
            put(o, ")");
        } else if (strcmp(e->op, "neg") == 0 || strcmp(e->op, "bitwise_not") == 0) {
            check(e->nargs == 1);
            put(o, "(%c", e->op[0] == 'n' ? '-' : '~');
            print_expr(o, e->args[0].value);
            put(o, ")");
        } else {
            check(e->nargs == 2);
            put(o, "(");
            print_expr(o, e->args[0].value);
            put(o, " %s ", operator_text(e->op));
            print_expr(o, e->args[1].value);
            put(o, ")");
        }
        break;
    case EXPR_INDEX:
        put(o, "(");
        print_expr(o, e->base);
        put(o, ")[");
        print_args(o, e);
        put(o, "]");
        break;
    case EXPR_ATTR:
        put(o, "(");
        print_expr(o, e->base);
        put(o, ").%s", e->v.name);
        break;
    case EXPR_SLICE:
        if (e->slice[0])
            print_expr(o, e->slice[0]);
        put(o, ":");
        if (e->slice[1])
            print_expr(o, e->slice[1]);
        put(o, ":");
        if (e->slice[2])
            print_expr(o, e->slice[2]);
        break;
    case EXPR_ELLIPSIS:
        put(o, "...");
        break;
    }
}

/* ------------------------------------------------------------ checks */

/* What the parser promises of every node; in_index says whether e is a
 * subscript (the only place for slices and '...'). */
static void check_expr(const struct expr *e, int line, int col_min, int col_max, bool in_index)
{
    check(e != NULL);
    check(e->line == line && e->col >= col_min && e->col <= col_max);
    check(e->kind != EXPR_SLICE || in_index);
    check(e->kind != EXPR_ELLIPSIS || in_index);
    check((e->op != NULL) == (e->kind == EXPR_CALL));
    check(e->kind == EXPR_CALL || !e->from_operator);
    check((e->base != NULL) == (e->kind == EXPR_INDEX || e->kind == EXPR_ATTR));
    check(e->kind == EXPR_SLICE || (!e->slice[0] && !e->slice[1] && !e->slice[2]));
    check(e->nargs == 0 || e->kind == EXPR_CALL || e->kind == EXPR_LIST || e->kind == EXPR_INDEX);
    check(e->kind != EXPR_INDEX || e->nargs > 0);
    if (e->kind == EXPR_ATTR)
        check(strcmp(e->v.name, "T") == 0 || strcmp(e->v.name, "mT") == 0 ||
              strcmp(e->v.name, "shape") == 0 || strcmp(e->v.name, "ndim") == 0 ||
              strcmp(e->v.name, "dtype") == 0);
    if (e->kind == EXPR_NAME)
        check(expr_is_identifier(e->v.name));
    if (e->kind == EXPR_CALL && !e->from_operator)
        check(expr_is_identifier(e->op));
    if (e->kind == EXPR_DTYPE)
        check(e->v.dtype >= 0 && e->v.dtype < TR_DTYPE_COUNT);
    for (size_t i = 0; i < e->nargs; i++) {
        const struct expr_arg *a = &e->args[i];
        check(a->line == line && a->col >= col_min && a->col <= col_max);
        check(!a->keyword || (e->kind == EXPR_CALL && !e->from_operator));
        if (a->keyword) {
            /* reserved words may be keywords: nan_to_num(x, nan=0.0) */
            check(expr_is_identifier(a->keyword) || expr_is_reserved(a->keyword));
            for (size_t j = 0; j < i; j++)
                check(!e->args[j].keyword || strcmp(e->args[j].keyword, a->keyword) != 0);
        } else {
            check(i == 0 || !e->args[i - 1].keyword);
        }
        check_expr(a->value, line, col_min, col_max, e->kind == EXPR_INDEX);
    }
    if (e->kind == EXPR_INDEX) {
        size_t ellipses = 0;
        for (size_t i = 0; i < e->nargs; i++)
            ellipses += e->args[i].value->kind == EXPR_ELLIPSIS;
        check(ellipses <= 1);
    }
    if (e->base)
        check_expr(e->base, line, col_min, col_max, false);
    for (int i = 0; i < 3; i++) {
        if (e->slice[i]) {
            check(e->slice[i]->kind != EXPR_NONE);
            check_expr(e->slice[i], line, col_min, col_max, false);
        }
    }
}

static bool same_number(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static bool same_string(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Whether two trees are the same, places aside. */
static bool same(const struct expr *a, const struct expr *b)
{
    if (!a || !b)
        return a == b;
    if (a->kind != b->kind || a->nargs != b->nargs || a->from_operator != b->from_operator ||
        !same_string(a->op, b->op))
        return false;
    switch (a->kind) {
    case EXPR_NAME:
    case EXPR_STRING:
    case EXPR_ATTR:
        if (strcmp(a->v.name, b->v.name) != 0)
            return false;
        break;
    case EXPR_INT:
        if (a->v.integer != b->v.integer)
            return false;
        break;
    case EXPR_FLOAT:
        if (!same_number(a->v.number, b->v.number))
            return false;
        break;
    case EXPR_BOOL:
        if (a->v.boolean != b->v.boolean)
            return false;
        break;
    case EXPR_DTYPE:
        if (a->v.dtype != b->v.dtype)
            return false;
        break;
    default:
        break;
    }
    for (size_t i = 0; i < a->nargs; i++)
        if (!same_string(a->args[i].keyword, b->args[i].keyword) ||
            !same(a->args[i].value, b->args[i].value))
            return false;
    return same(a->base, b->base) && same(a->slice[0], b->slice[0]) &&
           same(a->slice[1], b->slice[1]) && same(a->slice[2], b->slice[2]);
}

/* s's value printed back parses to the same tree.  The printed text has
 * more parentheses, each a level of nesting, so it may pass the depth
 * limit where the original did not: that failure alone is allowed. */
static void check_round_trip(const struct statement *s)
{
    struct out o = {NULL, 0, 0};
    struct diag_list d;
    struct statement *again;

    print_expr(&o, s->value);
    diag_init(&d, "fuzz", NULL, 0);
    again = expr_parse(o.text, 1, 1, true, "out", &d);
    if (again)
        check(same(s->value, again->value));
    else
        check(d.count == 1 && strstr(d.items[0].message, "nested too deeply"));
    statement_free(again);
    diag_free(&d);
    free(o.text);
}

static void run(const char *text, size_t len, int line, int col, bool single_line,
                const char *bare)
{
    struct diag_list d;
    struct statement *s;
    int col_max = single_line ? col + (int)len : col;

    diag_init(&d, "fuzz", text, len);
    s = expr_parse(text, line, col, single_line, bare, &d);
    if (s) {
        check(d.count == 0);
        check(s->line == line && s->col == col && s->ntargets >= 1 && s->value);
        for (size_t i = 0; i < s->ntargets; i++) {
            check(expr_is_identifier(s->targets[i]) || (bare && strcmp(s->targets[i], bare) == 0));
            check(s->target_cols[i] >= col && s->target_cols[i] <= col_max);
            for (size_t j = 0; j < i; j++)
                check(strcmp(s->targets[i], s->targets[j]) != 0);
        }
        check_expr(s->value, line, col, col_max, false);
        check_round_trip(s);
    } else {
        check(d.count == 1 && d.errors == 1);
        check(d.items[0].line == line && d.items[0].col >= col && d.items[0].col <= col_max);
        check(d.items[0].message && d.items[0].message[0]);
    }
    statement_free(s);
    diag_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    size_t len;

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    len = strlen(text); /* the parser sees the text up to a NUL */
    run(text, len, 3, 7, true, NULL);
    run(text, len, 5, 2, false, "out");
    free(text);
    return 0;
}
