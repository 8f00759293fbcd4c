/*
 * diag.h - the errors found in one pipeline file, gathered so that all of
 * them are reported in one pass, each in the form tensorrun(1) shows:
 *
 *   tensorrun: FILE:LINE:COL: error: MESSAGE
 *     14 |       - v, i = topk(en @ qn.T, k, dim=0)
 *        |                     ^
 *   hint: HINT
 *
 * Lines and columns start at 1.  A diagnostic at line 0 has no place in
 * the file (it names the file only).
 */
#ifndef TR_CLI_DIAG_H
#define TR_CLI_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum diag_kind { DIAG_ERROR, DIAG_WARNING };

/* A place in the file: 1-based line and column (columns count characters). */
struct diag_place {
    int line, col;
};

struct diag {
    enum diag_kind kind;
    int line, col;
    char *message;
    char *hint;      /* NULL when none */
    int exit_code;   /* what this error alone would exit with: 3, or 4 for a
                        missing or malformed input file, 2 for -D */
};

struct diag_list {
    const char *path;  /* as the user named the file */
    const char *text;  /* the file's text, for the source lines; may be NULL */
    size_t len;
    struct diag *items;
    size_t count, capacity;
    size_t errors;
};

/* A list for the file at path whose text (len bytes) is kept by the caller. */
void diag_init(struct diag_list *d, const char *path, const char *text, size_t len);
void diag_free(struct diag_list *d);

/* Adds an error (exit code 3) at line:col; hint may be NULL. */
void diag_error(struct diag_list *d, int line, int col, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The same with another exit code (4 for input files, 2 for usage). */
void diag_error_code(struct diag_list *d, int exit_code, int line, int col, const char *hint,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void diag_warning(struct diag_list *d, int line, int col, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Prints every diagnostic in the order they were found. */
void diag_print(const struct diag_list *d, FILE *out);
/* The exit status the errors call for: 2 when one is a usage error, else 4
 * when one concerns an input file, else 3; 0 when there are none. */
int diag_exit_code(const struct diag_list *d);

/* "did you mean 'x'?" support: the closest of candidates to word, or NULL. */
const char *diag_suggest(const char *word, const char *const *candidates);
/* Writes "a, b, c" of candidates into buf. */
char *diag_join(const char *const *candidates, char *buf, size_t size);

#endif /* TR_CLI_DIAG_H */
