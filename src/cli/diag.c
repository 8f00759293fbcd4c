/*
 * diag.c - gathering a pipeline's errors and printing them with their
 * source line and a caret.
 */
#include "config.h"

#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

void diag_init(struct diag_list *d, const char *path, const char *text, size_t len)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    d->text = text;
    d->len = len;
}

void diag_free(struct diag_list *d)
{
    for (size_t i = 0; i < d->count; i++) {
        free(d->items[i].message);
        free(d->items[i].hint);
    }
    free(d->items);
    d->items = NULL;
    d->count = d->capacity = d->errors = 0;
}

static char *vformat(const char *fmt, va_list ap)
{
    va_list copy;
    int n;
    char *s;

    va_copy(copy, ap);
    n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static void add(struct diag_list *d, enum diag_kind kind, int code, int line, int col,
                const char *hint, const char *fmt, va_list ap)
{
    struct diag *item;

    if (d->count == d->capacity) {
        size_t cap = d->capacity ? d->capacity * 2 : 8;
        struct diag *items = realloc(d->items, cap * sizeof *items);
        if (!items)
            return; /* out of memory: the error is lost, the exit code is not */
        d->items = items;
        d->capacity = cap;
    }
    item = &d->items[d->count++];
    item->kind = kind;
    item->line = line;
    item->col = col;
    item->message = vformat(fmt, ap);
    item->hint = hint ? strdup(hint) : NULL;
    item->exit_code = code;
    if (kind == DIAG_ERROR)
        d->errors++;
}

void diag_error(struct diag_list *d, int line, int col, const char *hint, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    add(d, DIAG_ERROR, 3, line, col, hint, fmt, ap);
    va_end(ap);
}

void diag_error_code(struct diag_list *d, int exit_code, int line, int col, const char *hint,
                     const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    add(d, DIAG_ERROR, exit_code, line, col, hint, fmt, ap);
    va_end(ap);
}

void diag_warning(struct diag_list *d, int line, int col, const char *hint, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    add(d, DIAG_WARNING, 0, line, col, hint, fmt, ap);
    va_end(ap);
}

/* The text of line (1-based) of the file, and its length. */
static const char *source_line(const struct diag_list *d, int line, size_t *len)
{
    const char *p = d->text, *end = d->text + d->len;

    if (!p || line < 1)
        return NULL;
    for (int l = 1; l < line && p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return NULL;
        p = nl + 1;
    }
    if (p >= end)
        return NULL;
    {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        *len = (size_t)((nl ? nl : end) - p);
    }
    return p;
}

static void print_one(const struct diag_list *d, const struct diag *item, FILE *out)
{
    bool color = out == stderr && msg_color();
    const char *kind = item->kind == DIAG_ERROR ? "error" : "warning";
    const char *tint = item->kind == DIAG_ERROR ? "\033[1;31m" : "\033[1;35m";
    size_t len = 0;
    const char *text = source_line(d, item->line, &len);

    fprintf(out, "tensorrun: %s%s", color ? "\033[1m" : "", d->path);
    if (item->line > 0)
        fprintf(out, ":%d:%d", item->line, item->col);
    fprintf(out, ":%s %s%s:%s %s\n", color ? "\033[0m" : "", color ? tint : "", kind,
            color ? "\033[0m" : "", item->message ? item->message : "(out of memory)");
    if (text) {
        int width = fprintf(out, "%5d | ", item->line) - 2;
        for (size_t i = 0; i < len; i++)
            fputc(text[i] == '\t' ? ' ' : text[i], out);
        fprintf(out, "\n%*s| ", width, "");
        for (int c = 1; c < item->col && (size_t)c <= len; c++)
            fputc(' ', out);
        fprintf(out, "%s^%s\n", color ? tint : "", color ? "\033[0m" : "");
    }
    if (item->hint)
        fprintf(out, "%shint:%s %s\n", color ? "\033[1;32m" : "", color ? "\033[0m" : "",
                item->hint);
}

void diag_print(const struct diag_list *d, FILE *out)
{
    for (size_t i = 0; i < d->count; i++)
        print_one(d, &d->items[i], out);
}

int diag_exit_code(const struct diag_list *d)
{
    int code = 0;

    /* a usage error first, then a bad input file, then the pipeline's own */
    for (size_t i = 0; i < d->count; i++) {
        int c = d->items[i].kind == DIAG_ERROR ? d->items[i].exit_code : 0;
        if (c == 2 || (c == 4 && code != 2) || (c && !code))
            code = c;
    }
    return code;
}

const char *diag_suggest(const char *word, const char *const *candidates)
{
    return suggest(word, candidates);
}

char *diag_join(const char *const *candidates, char *buf, size_t size)
{
    size_t used = 0;

    if (size)
        buf[0] = '\0';
    for (size_t i = 0; candidates[i] && used + 1 < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", candidates[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}
