/*
 * param.c - params and -D values typed by YAML 1.2's core schema (see
 * param.h), so that a value means the same in a pipeline file, in
 * `run -D` and in `eval -D`.
 */
#include "config.h"

#include "param.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the schema */

bool core_is_null(const char *s)
{
    return *s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

bool core_bool(const char *s, bool *out)
{
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0) {
        *out = false;
        return true;
    }
    return false;
}

/* Whether s is one or more characters, each one of digits. */
static bool all_of(const char *s, const char *digits)
{
    return *s && strspn(s, digits) == strlen(s);
}

int core_int(const char *s, int64_t *out)
{
    const char *digits = s + (*s == '-' || *s == '+');
    int base = 10;
    char *end;
    unsigned long long u;

    if (strncmp(s, "0x", 2) == 0 && all_of(s + 2, "0123456789abcdefABCDEF")) {
        base = 16;
        digits = s + 2;
    } else if (strncmp(s, "0o", 2) == 0 && all_of(s + 2, "01234567")) {
        base = 8;
        digits = s + 2;
    } else if (!all_of(digits, "0123456789")) {
        return 1;
    }
    errno = 0;
    if (base == 10) {
        long long v = strtoll(s, &end, 10);
        if (errno == ERANGE || *end)
            return 2;
        *out = v;
        return 0;
    }
    u = strtoull(digits, &end, base);
    if (errno == ERANGE || *end || u > (unsigned long long)INT64_MAX)
        return 2;
    *out = (int64_t)u;
    return 0;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool float_syntax(const char *s)
{
    size_t digits = 0;

    if (*s == '-' || *s == '+')
        s++;
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (!digits)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

bool core_float(const char *s, double *out)
{
    const char *t = s + (*s == '-' || *s == '+');
    char *end;
    double v;

    if (strcmp(t, ".inf") == 0 || strcmp(t, ".Inf") == 0 || strcmp(t, ".INF") == 0) {
        *out = *s == '-' ? -INFINITY : INFINITY;
        return true;
    }
    if (strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0) {
        *out = NAN;
        return true;
    }
    if (!float_syntax(s) || core_int(s, &(int64_t){0}) != 1)
        return false;
    errno = 0;
    v = strtod(s, &end);
    if (*end != '\0' || (errno == ERANGE && isinf(v)))
        return false;
    *out = v;
    return true;
}

/* ------------------------------------------------------------ values */

const char *param_kind_name(enum param_kind kind)
{
    switch (kind) {
    case PARAM_INT:
        return "an integer";
    case PARAM_FLOAT:
        return "a number";
    case PARAM_BOOL:
        return "true or false";
    case PARAM_NONE:
        return "None";
    case PARAM_LIST:
        return "a list";
    default:
        return "a string";
    }
}

void param_clear(struct param *p)
{
    for (size_t i = 0; i < p->nitems; i++)
        param_clear(&p->items[i]);
    free(p->items);
    free(p->string);
    p->items = NULL;
    p->nitems = 0;
    p->string = NULL;
}

/* Where errors go: the file (at a node, exit code 3) or -D (no place, 2). */
struct where {
    struct diag_list *d;
    const char *name;
    const char *text;       /* -D's value, or NULL for the file */
    bool oom;
};

__attribute__((format(printf, 4, 5)))
static void report(struct where *w, const struct ynode *at, const char *hint, const char *fmt,
                   ...)
{
    char message[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (w->text)
        diag_error_code(w->d, 2, 0, 0, hint, "-D %s=%.60s: %s", w->name, w->text, message);
    else
        diag_error(w->d, at->line, at->col, hint, "param '%s': %s", w->name, message);
}

/* Types a plain scalar's text into p (kind and value, not string). */
static bool type_plain(struct where *w, const struct ynode *at, struct param *p, const char *s)
{
    int64_t i;
    int r;

    if (core_is_null(s)) {
        p->kind = PARAM_NONE;
    } else if (core_bool(s, &p->boolean)) {
        p->kind = PARAM_BOOL;
    } else if ((r = core_int(s, &i)) == 0) {
        p->kind = PARAM_INT;
        p->integer = i;
        p->number = (double)i;
    } else if (r == 2) {
        report(w, at, "write it as a float (1.0e19) if that is meant",
               "integer %.40s is out of range", s);
        return false;
    } else if (core_float(s, &p->number)) {
        p->kind = PARAM_FLOAT;
    } else {
        p->kind = PARAM_STRING;
    }
    return true;
}

/* Appends text to buf (of size) at *used, as far as it fits. */
static void put(char *buf, size_t size, size_t *used, const char *text)
{
    size_t n = strlen(text);

    if (*used + 1 >= size)
        return;
    if (n > size - 1 - *used)
        n = size - 1 - *used;
    memcpy(buf + *used, text, n);
    *used += n;
    buf[*used] = '\0';
}

/* A list's items as [a, b, "c"], for messages and `validate`. */
static void render(const struct param *p, char *buf, size_t size, size_t *used)
{
    if (p->kind != PARAM_LIST) {
        bool quote = p->kind == PARAM_STRING;
        if (quote)
            put(buf, size, used, "\"");
        put(buf, size, used, p->kind == PARAM_NONE ? "None" : p->string ? p->string : "");
        if (quote)
            put(buf, size, used, "\"");
        return;
    }
    put(buf, size, used, "[");
    for (size_t i = 0; i < p->nitems; i++) {
        if (i)
            put(buf, size, used, ", ");
        render(&p->items[i], buf, size, used);
    }
    put(buf, size, used, "]");
}

static bool from_node(struct where *w, struct param *p, const struct ynode *v, int depth)
{
    memset(p, 0, sizeof *p);
    p->line = v->line;
    p->col = v->col;
    if (v->kind == YNODE_MAPPING) {
        report(w, v, "write NAME: VALUE, where VALUE is a scalar or a list [a, b]",
               "expected a number, true or false, a string or a list, found a mapping");
        return false;
    }
    if (v->kind == YNODE_SEQUENCE) {
        if (depth == PARAM_MAX_DEPTH) {
            report(w, v, NULL, "lists nest at most %d deep", PARAM_MAX_DEPTH);
            return false;
        }
        p->kind = PARAM_LIST;
        p->items = v->count ? calloc(v->count, sizeof *p->items) : NULL;
        if (v->count && !p->items) {
            w->oom = true;
            return false;
        }
        for (size_t i = 0; i < v->count; i++) {
            if (!from_node(w, &p->items[i], v->items[i], depth + 1)) {
                param_clear(p);
                return false;
            }
            p->nitems++;
        }
        if (depth == 0) {
            char text[512] = "";
            size_t used = 0;
            render(p, text, sizeof text, &used);
            p->string = strdup(text);
            w->oom = w->oom || !p->string;
        }
        return !w->oom;
    }
    if (strlen(v->value) != v->length) {
        report(w, v, NULL, "the value contains a NUL character");
        return false;
    }
    if (v->plain) {
        if (!type_plain(w, v, p, v->value))
            return false;
    } else {
        p->kind = PARAM_STRING;
    }
    p->string = strdup(v->value);
    w->oom = w->oom || !p->string;
    return !w->oom;
}

bool param_from_node(struct param *p, const struct ynode *v, const char *name,
                     struct diag_list *d)
{
    struct where w = {.d = d, .name = name};
    char *pname = p->name;
    int line = p->line, col = p->col;
    bool ok = from_node(&w, p, v, 0);

    p->name = pname;
    p->line = line;
    p->col = col;
    if (w.oom) {
        param_clear(p);
        diag_error(d, 0, 0, NULL, "out of memory reading param '%s'", name);
    }
    return ok && !w.oom;
}

bool param_from_text(struct param *p, const char *text, const char *name, struct diag_list *d)
{
    struct where w = {.d = d, .name = name, .text = text};
    char *pname = p->name;
    int line = p->line, col = p->col;
    bool ok;

    if (text[0] == '[' || text[0] == '"' || text[0] == '\'') {
        struct diag_list yd;
        struct ynode *root;
        diag_init(&yd, "-D", text, strlen(text));
        root = yaml_load(text, strlen(text), &yd);
        if (!root) {
            diag_error_code(d, 2, 0, 0,
                            "write a list as [2, 8] and a string in quotes as \"text\"",
                            "-D %s=%.60s: %s", name, text,
                            yd.count ? yd.items[0].message : "not a YAML value");
            diag_free(&yd);
            return false;
        }
        diag_free(&yd);
        ok = from_node(&w, p, root, 0);
        ynode_free(root);
        if (ok && p->kind == PARAM_LIST) {
            free(p->string);
            p->string = strdup(text); /* as written */
            w.oom = w.oom || !p->string;
        }
    } else {
        memset(p, 0, sizeof *p);
        ok = type_plain(&w, NULL, p, text);
        if (ok) {
            p->string = strdup(text);
            w.oom = !p->string;
        }
    }
    p->name = pname;
    p->line = line;
    p->col = col;
    if (w.oom) {
        param_clear(p);
        diag_error_code(d, 5, 0, 0, NULL, "out of memory reading -D %s", name);
    }
    return ok && !w.oom;
}
