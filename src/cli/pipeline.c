/*
 * pipeline.c - the schema of tensorrun-pipeline(5): a pipeline file's YAML
 * tree checked and turned into struct pipeline.
 *
 * Every check reports its error at the node concerned and goes on, so that
 * one pass finds every error in the file.  Items are kept even when part
 * of them is wrong (a stage whose name is bad still has its statements),
 * so that later passes can look for more errors; the fields that could not
 * be read stay NULL.  Names are checked for duplicates through a small
 * hash set, so a hostile file costs linear time.
 */
#include "config.h"

#include "pipeline.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* A pipeline file is text a person wrote; anything larger is a mistake
 * (a tensor file named by accident, /dev/zero). */
#define PIPELINE_MAX_BYTES ((size_t)64 << 20)

#define IDENT_HINT "names are letters, digits and '_', not starting with a digit, and not a " \
                   "reserved word (true false None inf nan, dtype names, i4, u4)"

struct ctx {
    struct pipeline *p;
    struct diag_list *d;
    bool oom;
};

static const char *const top_keys[] = {"tensorrun", "name",   "device",  "params",
                                       "inputs",    "stages", "outputs", NULL};
static const char *const input_keys[] = {"path",  "key",    "format",  "dtype",
                                         "shape", "offset", "strides", NULL};
static const char *const stage_keys[] = {"name", "do",         "device",           "keep",
                                         "keep_cache", "matmul_precision", "foreach", NULL};
static const char *const foreach_keys[] = {"over", "size", NULL};
static const char *const output_keys[] = {"path", "dtype", "key", "format", NULL};
static const char *const output_format_words[] = {
    "npy", "safetensors", "raw", "npy.zst", "safetensors.zst", "raw.zst", NULL};
static const char *const device_words[] = {"cpu", "cuda", "auto", NULL};
static const char *const precision_words[] = {"highest", "high", NULL};

static const char *const dtype_words[] = {
#define DTYPE_SHORT(e, name, size, kind, long_name) #name,
    TR_DTYPE_MAP(DTYPE_SHORT)
#undef DTYPE_SHORT
#define DTYPE_LONG(e, name, size, kind, long_name) long_name,
    TR_DTYPE_MAP(DTYPE_LONG)
#undef DTYPE_LONG
    NULL};

/* ------------------------------------------------------------- helpers */

static char *dup_text(struct ctx *c, const char *s)
{
    char *t = strdup(s);

    if (!t)
        c->oom = true;
    return t;
}

static void *alloc_array(struct ctx *c, size_t n, size_t size)
{
    void *a;

    if (n == 0)
        return NULL;
    a = calloc(n, size);
    if (!a)
        c->oom = true;
    return a;
}

static bool is_null(const struct ynode *n)
{
    return n->kind == YNODE_SCALAR && n->plain &&
           (n->length == 0 || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0 ||
            strcmp(n->value, "Null") == 0 || strcmp(n->value, "NULL") == 0);
}

/* What a node is, for "expected X, found Y". */
static const char *found(const struct ynode *n, char *buf, size_t size)
{
    if (n->kind == YNODE_MAPPING)
        return "a mapping";
    if (n->kind == YNODE_SEQUENCE)
        return "a sequence";
    if (is_null(n))
        return "nothing";
    if (n->length > 40 || strlen(n->value) != n->length)
        return "a string";
    for (size_t i = 0; i < n->length; i++)
        if ((unsigned char)n->value[i] < 0x20)
            return "a string";
    snprintf(buf, size, "'%s'", n->value);
    return buf;
}

/* Reports "expected WHAT for 'FIELD', found ..." at n. */
static void expected(struct ctx *c, const struct ynode *n, const char *what, const char *field,
                     const char *hint)
{
    char buf[64];

    diag_error(c->d, n->line, n->col, hint, "expected %s for '%s', found %s", what, field,
               found(n, buf, sizeof buf));
}

/* The text of a scalar that is not null and holds no NUL, or NULL after
 * an error. */
static const char *get_string(struct ctx *c, const struct ynode *n, const char *field)
{
    if (n->kind != YNODE_SCALAR || is_null(n)) {
        expected(c, n, "a string", field, NULL);
        return NULL;
    }
    if (strlen(n->value) != n->length) {
        diag_error(c->d, n->line, n->col, NULL, "'%s' contains a NUL character", field);
        return NULL;
    }
    return n->value;
}

/* An unquoted integer in [min, max]; false after an error. */
static bool get_int(struct ctx *c, const struct ynode *n, const char *field, int64_t min,
                    int64_t max, int64_t *out)
{
    int64_t v;

    if (n->kind != YNODE_SCALAR || !n->plain || strlen(n->value) != n->length) {
        expected(c, n, "an integer", field, NULL);
        return false;
    }
    switch (core_int(n->value, &v)) {
    case 0:
        break;
    case 2:
        diag_error(c->d, n->line, n->col, NULL, "'%s' is out of range: %s", field, n->value);
        return false;
    default:
        expected(c, n, "an integer", field, NULL);
        return false;
    }
    if (v < min) {
        if (min == 0)
            diag_error(c->d, n->line, n->col, NULL, "'%s' cannot be negative (%" PRId64 ")",
                       field, v);
        else
            diag_error(c->d, n->line, n->col, NULL,
                       "'%s' must be at least %" PRId64 ", not %" PRId64, field, min, v);
        return false;
    }
    if (v > max) {
        diag_error(c->d, n->line, n->col, NULL, "'%s' must be at most %" PRId64 ", not %" PRId64,
                   field, max, v);
        return false;
    }
    *out = v;
    return true;
}

static bool get_bool(struct ctx *c, const struct ynode *n, const char *field, bool *out)
{
    if (n->kind != YNODE_SCALAR || !n->plain || !core_bool(n->value, out)) {
        expected(c, n, "true or false", field, NULL);
        return false;
    }
    return true;
}

static bool expect_kind(struct ctx *c, const struct ynode *n, enum ynode_kind kind,
                        const char *field, const char *hint)
{
    if (n->kind == kind && !(kind == YNODE_SCALAR && is_null(n)))
        return true;
    expected(c, n, kind == YNODE_MAPPING ? "a mapping" : kind == YNODE_SEQUENCE ? "a sequence"
                                                                               : "a string",
             field, hint);
    return false;
}

/* One of words, or an error with the closest one and the list. */
static int get_word(struct ctx *c, const struct ynode *n, const char *field,
                    const char *const *words)
{
    const char *s = get_string(c, n, field);
    const char *guess;
    char list[256];

    if (!s)
        return -1;
    for (int i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return i;
    guess = diag_suggest(s, words);
    diag_join(words, list, sizeof list);
    if (guess)
        diag_error(c->d, n->line, n->col, NULL, "unknown %s '%.60s' (did you mean '%s'?)", field,
                   s, guess);
    else
        diag_error(c->d, n->line, n->col, NULL, "unknown %s '%.60s' (expected %s)", field, s,
                   list);
    return -1;
}

/* Whether a mapping's key is one of valid; reports it when not. */
static bool known_key(struct ctx *c, const struct ynode *key, const char *const *valid,
                      const char *where)
{
    char list[256], hint[320];
    const char *guess;

    for (size_t i = 0; valid[i]; i++)
        if (key->length == strlen(valid[i]) && strcmp(key->value, valid[i]) == 0)
            return true;
    diag_join(valid, list, sizeof list);
    snprintf(hint, sizeof hint, "the keys of %s are %s", where, list);
    guess = strlen(key->value) == key->length ? diag_suggest(key->value, valid) : NULL;
    if (guess)
        diag_error(c->d, key->line, key->col, hint, "unknown key '%.60s' (did you mean '%s'?)",
                   key->value, guess);
    else
        diag_error(c->d, key->line, key->col, hint, "unknown key '%.60s'", key->value);
    return false;
}

static bool key_is(const struct ynode *key, const char *word)
{
    return key->length == strlen(word) && strcmp(key->value, word) == 0;
}

static bool check_identifier(struct ctx *c, const struct ynode *n, const char *what)
{
    if (strlen(n->value) == n->length && expr_is_identifier(n->value))
        return true;
    diag_error(c->d, n->line, n->col, IDENT_HINT, "%s '%.60s' is not a valid name", what,
               n->value);
    return false;
}

/* A stage's name: [A-Za-z_][A-Za-z0-9_-]*. */
static bool stage_name_ok(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return false;
    return true;
}

static bool dtype_word(struct ctx *c, const struct ynode *n, enum tr_dtype *out)
{
    const char *s = get_string(c, n, "dtype");
    const char *guess;

    if (!s)
        return false;
    if (tr_dtype_parse(s, out) == TR_OK)
        return true;
    tr_clear_error();
    guess = diag_suggest(s, dtype_words);
    if (guess)
        diag_error(c->d, n->line, n->col, NULL, "unknown dtype '%.60s' (did you mean '%s'?)", s,
                   guess);
    else
        diag_error(c->d, n->line, n->col,
                   "dtypes: bool u8 u16 u32 u64 i8 i16 i32 i64 f16 bf16 f32 f64",
                   "unknown dtype '%.60s'", s);
    return false;
}

/* device: cpu | cuda | cuda:N | auto */
static void device_word(struct ctx *c, const struct ynode *n, bool *has, struct tr_device *dev,
                        bool *is_auto)
{
    const char *s = get_string(c, n, "device");
    const char *guess;

    if (!s)
        return;
    if (strcmp(s, "auto") == 0) {
        *has = *is_auto = true;
        *dev = TR_CPU;
        return;
    }
    if (tr_device_parse(s, dev) == TR_OK) {
        *has = true;
        *is_auto = false;
        return;
    }
    if (strncmp(s, "cuda:", 5) == 0) {
        diag_error(c->d, n->line, n->col, NULL, "%s", tr_last_error());
    } else {
        guess = diag_suggest(s, device_words);
        if (guess)
            diag_error(c->d, n->line, n->col, NULL, "unknown device '%.60s' (did you mean '%s'?)",
                       s, guess);
        else
            diag_error(c->d, n->line, n->col, NULL,
                       "unknown device '%.60s' (expected cpu, cuda, cuda:N or auto)", s);
    }
    tr_clear_error();
}

/* A path from the file: relative to the file's directory. */
static char *resolve(struct ctx *c, const char *path)
{
    const char *dir = c->p->dir;
    size_t ld, lp;
    char *out;

    if (path[0] == '/' || strcmp(path, "-") == 0 || strcmp(dir, ".") == 0)
        return dup_text(c, path);
    ld = strlen(dir);
    lp = strlen(path);
    out = malloc(ld + lp + 2);
    if (!out) {
        c->oom = true;
        return NULL;
    }
    memcpy(out, dir, ld);
    if (ld && dir[ld - 1] != '/')
        out[ld++] = '/';
    memcpy(out + ld, path, lp + 1);
    return out;
}

static char *path_value(struct ctx *c, const struct ynode *n, const char *field)
{
    const char *s = get_string(c, n, field);

    if (!s)
        return NULL;
    if (!*s) {
        diag_error(c->d, n->line, n->col, NULL, "'%s' is empty", field);
        return NULL;
    }
    return resolve(c, s);
}

/* ------------------------------------------------------------ name sets */

/* Strings (not owned) with a line each, for duplicate checks in linear
 * time. */
struct nameset {
    const char **keys;
    int *lines;
    int *tags;
    size_t cap, count;
};

static uint64_t hash_text(const char *s)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static size_t nameset_slot(const struct nameset *set, const char *key)
{
    size_t mask = set->cap - 1, s = (size_t)hash_text(key) & mask;

    while (set->keys[s] && strcmp(set->keys[s], key) != 0)
        s = (s + 1) & mask;
    return s;
}

/* Adds key; when it was there already, returns false and the first one's
 * line and tag. */
static bool nameset_add(struct ctx *c, struct nameset *set, const char *key, int line, int tag,
                        int *first_line, int *first_tag)
{
    size_t s;

    if ((set->count + 1) * 2 > set->cap) {
        struct nameset bigger = {0};
        bigger.cap = set->cap ? set->cap * 2 : 16;
        bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
        bigger.lines = calloc(bigger.cap, sizeof *bigger.lines);
        bigger.tags = calloc(bigger.cap, sizeof *bigger.tags);
        if (!bigger.keys || !bigger.lines || !bigger.tags) {
            free(bigger.keys);
            free(bigger.lines);
            free(bigger.tags);
            c->oom = true;
            return true;
        }
        for (size_t i = 0; i < set->cap; i++) {
            if (set->keys[i]) {
                size_t t = nameset_slot(&bigger, set->keys[i]);
                bigger.keys[t] = set->keys[i];
                bigger.lines[t] = set->lines[i];
                bigger.tags[t] = set->tags[i];
            }
        }
        bigger.count = set->count;
        free(set->keys);
        free(set->lines);
        free(set->tags);
        *set = bigger;
    }
    s = nameset_slot(set, key);
    if (set->keys[s]) {
        *first_line = set->lines[s];
        *first_tag = set->tags[s];
        return false;
    }
    set->keys[s] = key;
    set->lines[s] = line;
    set->tags[s] = tag;
    set->count++;
    return true;
}

static void nameset_free(struct nameset *set)
{
    free(set->keys);
    free(set->lines);
    free(set->tags);
    memset(set, 0, sizeof *set);
}

/* -------------------------------------------------------------- params */

static void parse_params(struct ctx *c, const struct ynode *node)
{
    struct pipeline *p = c->p;

    if (is_null(node))
        return;
    if (!expect_kind(c, node, YNODE_MAPPING, "params", "write params as NAME: VALUE lines"))
        return;
    p->params = alloc_array(c, node->count, sizeof *p->params);
    if (!p->params)
        return;
    for (size_t i = 0; i < node->count; i++) {
        const struct ynode *k = node->pairs[i].key, *v = node->pairs[i].value;
        struct param *pa;

        if (!check_identifier(c, k, "param name"))
            continue;
        pa = &p->params[p->nparams];
        if (!param_from_node(pa, v, k->value, c->d))
            continue;
        pa->name = dup_text(c, k->value);
        pa->line = k->line;
        pa->col = k->col;
        if (!pa->name) {
            param_clear(pa);
            continue;
        }
        p->nparams++;
    }
}

/* Writes "a, b, c" of the names into buf ("none" when there are none). */
static const char *name_list(struct ctx *c, const char *const *names, size_t n, char *buf,
                             size_t size)
{
    const char **list;

    if (n == 0)
        return "none";
    list = calloc(n + 1, sizeof *list);
    if (!list) {
        c->oom = true;
        return "?";
    }
    for (size_t i = 0; i < n; i++)
        list[i] = names[i];
    diag_join(list, buf, size);
    free(list);
    return buf;
}

/* "did you mean" among the names, as a hint, into buf; NULL when none. */
static const char *name_hint(struct ctx *c, const char *word, const char *const *names, size_t n,
                             char *buf, size_t size)
{
    const char **list;
    const char *guess;

    if (n == 0)
        return NULL;
    list = calloc(n + 1, sizeof *list);
    if (!list) {
        c->oom = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        list[i] = names[i];
    guess = diag_suggest(word, list);
    if (guess)
        snprintf(buf, size, "did you mean '%s'?", guess);
    free(list);
    return guess ? buf : NULL;
}

/*
 * Gives param pa the -D value (typed on its own, as eval types it), when
 * it is of pa's kind in the file: an integer for an integer, any number
 * for a float (an integer becomes a float), true or false for a boolean,
 * a list for a list, anything for a param that is None.  A string param
 * takes the text of any scalar as it is written (-D label=10 is "10").
 * Takes over value's contents when it returns true.
 */
static bool set_param(struct param *pa, struct param *value)
{
    char *name = pa->name;
    int line = pa->line, col = pa->col;

    if (pa->kind == PARAM_FLOAT && value->kind == PARAM_INT) {
        value->kind = PARAM_FLOAT;
        value->number = (double)value->integer;
    }
    if (pa->kind == PARAM_STRING && value->kind != PARAM_LIST)
        value->kind = PARAM_STRING;
    if (pa->kind != PARAM_NONE && value->kind != pa->kind)
        return false;
    param_clear(pa);
    *pa = *value;
    pa->name = name;
    pa->line = line;
    pa->col = col;
    memset(value, 0, sizeof *value);
    return true;
}

static void apply_sets(struct ctx *c, const struct overrides *ov)
{
    struct pipeline *p = c->p;
    const char **names = alloc_array(c, p->nparams + 1, sizeof *names);

    if (!names && p->nparams)
        return;
    for (size_t i = 0; i < p->nparams; i++)
        names[i] = p->params[i].name;
    for (size_t i = 0; ov && i < ov->nsets; i++) {
        struct override *o = &ov->sets[i];
        struct param *pa = NULL, value;
        char list[512], hint[128];
        const char *v = o->value ? o->value : "";

        for (size_t j = 0; j < p->nparams && !pa; j++)
            if (strcmp(p->params[j].name, o->name) == 0)
                pa = &p->params[j];
        if (!pa) {
            diag_error_code(c->d, 2, 0, 0,
                            name_hint(c, o->name, names, p->nparams, hint, sizeof hint),
                            "-D: no param '%s' (params: %s)", o->name,
                            name_list(c, names, p->nparams, list, sizeof list));
            continue;
        }
        memset(&value, 0, sizeof value);
        if (!param_from_text(&value, v, o->name, c->d))
            continue;
        if (!set_param(pa, &value)) {
            diag_error_code(c->d, 2, 0, 0,
                            pa->kind == PARAM_LIST ? "write a list in brackets: -D NAME=[2, 8]"
                                                   : "a -D value is typed as YAML types a "
                                                     "plain scalar",
                            "-D %s=%.60s: param '%s' takes %s (it is %.40s at line %d), not %s",
                            o->name, v, o->name, param_kind_name(pa->kind), pa->string,
                            pa->line, param_kind_name(value.kind));
            param_clear(&value);
            continue;
        }
        o->used = true;
    }
    free(names);
}

/* -------------------------------------------------------------- inputs */

static bool get_dims(struct ctx *c, const struct ynode *n, const char *field, int64_t min,
                     int64_t *out, int *ndim)
{
    bool ok = true;

    if (!expect_kind(c, n, YNODE_SEQUENCE, field, NULL))
        return false;
    if (n->count > TR_MAX_DIMS) {
        diag_error(c->d, n->line, n->col, NULL, "'%s' has %zu dimensions; at most %d are allowed",
                   field, n->count, TR_MAX_DIMS);
        return false;
    }
    for (size_t i = 0; i < n->count; i++)
        if (!get_int(c, n->items[i], field, min, INT64_MAX, &out[i]))
            ok = false;
    *ndim = (int)n->count;
    return ok;
}

/* format: npy | safetensors | raw, each optionally .zst (for inputs the
 * compression is found from the content, so the suffix is only allowed). */
static bool format_word(struct ctx *c, const struct ynode *n, enum tio_format *format,
                        enum tio_compression *compression)
{
    const char *s = get_string(c, n, "format");
    char word[32];
    size_t len;
    const char *guess;

    if (!s)
        return false;
    len = strlen(s);
    *compression = TIO_COMPRESSION_NONE;
    if (len > 4 && len < sizeof word && strcmp(s + len - 4, ".zst") == 0) {
        memcpy(word, s, len - 4);
        word[len - 4] = '\0';
        *compression = TIO_COMPRESSION_ZSTD;
    } else if (len < sizeof word) {
        memcpy(word, s, len + 1);
    } else {
        word[0] = '\0';
    }
    if (tio_format_parse(word, format) == TR_OK && *format != TIO_FORMAT_UNKNOWN)
        return true;
    tr_clear_error();
    guess = diag_suggest(s, output_format_words);
    if (guess)
        diag_error(c->d, n->line, n->col, NULL, "unknown format '%.60s' (did you mean '%s'?)", s,
                   guess);
    else
        diag_error(c->d, n->line, n->col, "formats: npy, safetensors, raw, each optionally .zst",
                   "unknown format '%.60s'", s);
    return false;
}

static void parse_input_long(struct ctx *c, struct input *in, const struct ynode *map)
{
    const struct ynode *dtype_n = NULL, *shape_n = NULL, *offset_n = NULL, *strides_n = NULL;
    const struct ynode *format_n = NULL, *key_n = NULL;
    bool format_given = false, dtype_ok = false, shape_ok = false, strides_ok = false;
    enum tio_compression ignored;
    int nstrides = 0;

    if (!ynode_get(map, "path"))
        diag_error(c->d, map->line, map->col, "add path: FILE", "input '%s' has no 'path'",
                   in->name);
    for (size_t i = 0; i < map->count; i++) {
        const struct ynode *k = map->pairs[i].key, *v = map->pairs[i].value;

        if (!known_key(c, k, input_keys, "an input"))
            continue;
        if (key_is(k, "path")) {
            in->path = path_value(c, v, "path");
            in->path_line = v->line;
            in->path_col = v->col;
        } else if (key_is(k, "key")) {
            const char *s = get_string(c, v, "key");
            key_n = v;
            if (s) {
                in->key = dup_text(c, s);
                in->key_line = v->line;
                in->key_col = v->col;
            }
        } else if (key_is(k, "format")) {
            format_n = v;
            format_given = format_word(c, v, &in->format, &ignored);
        } else if (key_is(k, "dtype")) {
            dtype_n = v;
            dtype_ok = dtype_word(c, v, &in->raw.dtype);
        } else if (key_is(k, "shape")) {
            shape_n = v;
            shape_ok = get_dims(c, v, "shape", 0, in->raw.shape, &in->raw.ndim);
        } else if (key_is(k, "offset")) {
            offset_n = v;
            (void)get_int(c, v, "offset", 0, INT64_MAX, &in->raw.offset);
        } else if (key_is(k, "strides")) {
            strides_n = v;
            strides_ok = get_dims(c, v, "strides", INT64_MIN, in->raw.strides, &nstrides);
        }
    }
    if (dtype_n && !shape_n)
        diag_error(c->d, dtype_n->line, dtype_n->col, "add shape: [D0, D1, ...]",
                   "a raw input needs both 'dtype' and 'shape'; 'shape' is missing");
    if (shape_n && !dtype_n)
        diag_error(c->d, shape_n->line, shape_n->col, "add dtype: f32 (or another dtype)",
                   "a raw input needs both 'dtype' and 'shape'; 'dtype' is missing");
    if (dtype_n && shape_n) {
        in->has_raw = dtype_ok && shape_ok;
        if (format_given && in->format != TIO_FORMAT_RAW)
            diag_error(c->d, format_n->line, format_n->col,
                       "leave out dtype and shape, or write format: raw",
                       "'dtype' and 'shape' describe a raw file, but the format is %s",
                       tio_format_name(in->format));
        if (in->has_raw)
            in->format = TIO_FORMAT_RAW;
    } else {
        if (format_given && in->format == TIO_FORMAT_RAW)
            diag_error(c->d, format_n->line, format_n->col, "add dtype: and shape: [...]",
                       "a raw input needs 'dtype' and 'shape'");
        if (offset_n)
            diag_error(c->d, offset_n->line, offset_n->col, NULL,
                       "'offset' applies to raw inputs only (those with 'dtype' and 'shape')");
        if (strides_n)
            diag_error(c->d, strides_n->line, strides_n->col, NULL,
                       "'strides' applies to raw inputs only (those with 'dtype' and 'shape')");
    }
    if (strides_n && shape_n && strides_ok && shape_ok) {
        if (nstrides != in->raw.ndim)
            diag_error(c->d, strides_n->line, strides_n->col, NULL,
                       "'strides' has %d entries but 'shape' has %d", nstrides, in->raw.ndim);
        else
            in->raw.has_strides = true;
    }
    if (key_n && (in->has_raw || (format_given && in->format == TIO_FORMAT_NPY)))
        diag_error(c->d, key_n->line, key_n->col, NULL,
                   "'key' picks one tensor of a .safetensors file; this input is %s",
                   in->has_raw ? "raw" : "npy");
}

static void parse_inputs(struct ctx *c, const struct ynode *node, struct nameset *names)
{
    struct pipeline *p = c->p;

    if (is_null(node))
        return;
    if (!expect_kind(c, node, YNODE_MAPPING, "inputs", "write inputs as NAME: PATH lines"))
        return;
    p->inputs = alloc_array(c, node->count, sizeof *p->inputs);
    if (!p->inputs)
        return;
    for (size_t i = 0; i < node->count; i++) {
        const struct ynode *k = node->pairs[i].key, *v = node->pairs[i].value;
        struct input *in;
        int first_line, first_tag;

        if (!check_identifier(c, k, "input name"))
            continue;
        if (!nameset_add(c, names, k->value, k->line, 1, &first_line, &first_tag))
            diag_error(c->d, k->line, k->col,
                       "inputs, params and statement targets share one namespace",
                       "'%s' is already a param (line %d)", k->value, first_line);
        in = &p->inputs[p->ninputs];
        in->name = dup_text(c, k->value);
        if (!in->name)
            continue;
        p->ninputs++;
        in->line = k->line;
        in->col = k->col;
        in->format = TIO_FORMAT_UNKNOWN;
        in->raw.dtype = TR_DTYPE_COUNT;
        if (v->kind == YNODE_MAPPING) {
            parse_input_long(c, in, v);
        } else if (v->kind == YNODE_SCALAR && !is_null(v)) {
            in->path = path_value(c, v, "path");
            in->path_line = v->line;
            in->path_col = v->col;
        } else {
            char buf[64];
            diag_error(c->d, v->line, v->col, "write NAME: PATH or NAME: {path: PATH, ...}",
                       "expected a path or a mapping for input '%s', found %s", k->value,
                       found(v, buf, sizeof buf));
        }
    }
}

bool split_input_source(const char *value, char **path, char **key)
{
    const char *colon = strrchr(value, ':');

    *key = NULL;
    if (!colon || access(value, F_OK) == 0) {
        *path = strdup(value);
        return *path != NULL;
    }
    *path = strndup(value, (size_t)(colon - value));
    *key = strdup(colon + 1);
    if (*path && *key)
        return true;
    free(*path);
    free(*key);
    *path = *key = NULL;
    return false;
}

static void apply_inputs(struct ctx *c, const struct overrides *ov)
{
    struct pipeline *p = c->p;
    const char **names = alloc_array(c, p->ninputs + 1, sizeof *names);

    if (!names && p->ninputs)
        return;
    for (size_t i = 0; i < p->ninputs; i++)
        names[i] = p->inputs[i].name;
    for (size_t i = 0; ov && i < ov->ninputs; i++) {
        struct override *o = &ov->inputs[i];
        struct input *in = NULL;
        char list[512], hint[128];
        char *path, *key;

        for (size_t j = 0; j < p->ninputs && !in; j++)
            if (strcmp(p->inputs[j].name, o->name) == 0)
                in = &p->inputs[j];
        if (!in) {
            diag_error_code(c->d, 2, 0, 0,
                            name_hint(c, o->name, names, p->ninputs, hint, sizeof hint),
                            "-i: no input '%s' (inputs: %s)", o->name,
                            name_list(c, names, p->ninputs, list, sizeof list));
            continue;
        }
        if (!o->value || !*o->value) {
            diag_error_code(c->d, 2, 0, 0, NULL, "-i %s=: the path is empty", o->name);
            continue;
        }
        if (!split_input_source(o->value, &path, &key)) {
            c->oom = true;
            continue;
        }
        if (!*path || (key && !*key)) {
            diag_error_code(c->d, 2, 0, 0, "write -i NAME=PATH, or -i NAME=PATH:KEY",
                            "-i %s=%s: the %s is empty", o->name, o->value, *path ? "key" : "path");
            free(path);
            free(key);
            continue;
        }
        /* the whole source: the pipeline's key, format and raw layout go */
        free(in->path);
        free(in->key);
        in->path = path;
        in->key = key;
        in->path_line = in->path_col = in->key_line = in->key_col = 0;
        in->format = TIO_FORMAT_UNKNOWN;
        in->has_raw = false;
        memset(&in->raw, 0, sizeof in->raw);
        in->given = true;
        o->used = true;
    }
    free(names);
}

/* -------------------------------------------------------------- stages */

/* The brackets a statement's text opens and does not close, outside
 * strings: negative when it closes more than it opens. */
static long open_brackets(const char *text)
{
    long depth = 0;
    char quote = 0;

    for (const char *t = text; *t; t++) {
        if (quote)
            quote = *t == quote ? 0 : quote;
        else if (*t == '"' || *t == '\'')
            quote = *t;
        else if (*t == '(' || *t == '[')
            depth++;
        else if (*t == ')' || *t == ']')
            depth--;
    }
    return depth;
}

/*
 * In a flow sequence (do: [y = clamp(x, 0, 1)]) YAML ends an item at every
 * comma, so a statement with a comma arrives in pieces: one that opens a
 * bracket, then pieces that close it.  Returns how many items from first
 * on are the pieces of one statement (0 when the item is whole) and
 * reports them once.
 */
static size_t split_statement(struct ctx *c, struct stage *st, const struct ynode *seq,
                              size_t first)
{
    const struct ynode *s = seq->items[first];
    char joined[512], hint[640];
    size_t n = 1, used;
    long depth;
    struct statement *parsed;

    if (!seq->flow || s->kind != YNODE_SCALAR || !s->plain || strlen(s->value) != s->length)
        return 0;
    depth = open_brackets(s->value);
    if (depth <= 0)
        return 0;
    while (depth > 0 && first + n < seq->count) {
        const struct ynode *next = seq->items[first + n];
        if (next->kind != YNODE_SCALAR || !next->plain || strlen(next->value) != next->length)
            break;
        depth += open_brackets(next->value);
        n++;
    }
    if (n == 1)
        return 0; /* nothing after it: an unclosed bracket, for expr_parse to report */
    /* the statement as written, give or take the spaces after its commas */
    used = (size_t)snprintf(joined, sizeof joined, "%s", s->value);
    for (size_t k = 1; k < n && used < sizeof joined; k++)
        used += (size_t)snprintf(joined + used, sizeof joined - used, ", %s",
                                 seq->items[first + k]->value);
    snprintf(hint, sizeof hint,
             "write 'do:' as a block list, one '- STATEMENT' line each, or quote the "
             "statement: [\"%.200s\"]",
             joined);
    diag_error(c->d, s->line, s->col, hint,
               "YAML split this statement at its comma%s: inside [ ], a comma ends a list "
               "item, so '%.40s' is only its first piece",
               n > 2 ? "s" : "", s->value);
    /* read it whole all the same, so that its targets are bound for the
     * statements after it (its own errors point at its start) */
    if (used < sizeof joined) {
        parsed = expr_parse(joined, s->line, s->col, false, NULL, c->d);
        if (parsed)
            st->statements[st->nstatements++] = parsed;
    }
    return n;
}

static void parse_do(struct ctx *c, struct stage *st, const struct ynode *v)
{
    if (!expect_kind(c, v, YNODE_SEQUENCE, "do", "write each statement as a '- NAME = EXPR' line"))
        return;
    if (v->count == 0) {
        diag_error(c->d, v->line, v->col, NULL, "'do' is empty: a stage needs a statement");
        return;
    }
    st->statements = alloc_array(c, v->count, sizeof *st->statements);
    if (!st->statements)
        return;
    for (size_t i = 0; i < v->count; i++) {
        const struct ynode *s = v->items[i];
        struct statement *parsed;
        size_t pieces = split_statement(c, st, v, i);

        if (pieces) {
            i += pieces - 1;
            continue;
        }
        if (s->kind != YNODE_SCALAR || is_null(s)) {
            char buf[64];
            diag_error(c->d, s->line, s->col, "quote a statement that YAML reads otherwise",
                       "expected a statement (NAME = EXPR), found %s", found(s, buf, sizeof buf));
            continue;
        }
        if (strlen(s->value) != s->length) {
            diag_error(c->d, s->line, s->col, NULL, "the statement contains a NUL character");
            continue;
        }
        if (s->places)
            parsed = expr_parse_placed(s->value, s->places, NULL, c->d);
        else
            parsed = expr_parse(s->value, s->line, s->col, s->single_line, NULL, c->d);
        if (parsed)
            st->statements[st->nstatements++] = parsed;
    }
}

static void parse_keep(struct ctx *c, struct stage *st, const struct ynode *v)
{
    if (!expect_kind(c, v, YNODE_SEQUENCE, "keep", "write keep: [a, b]"))
        return;
    st->keep = alloc_array(c, v->count, sizeof *st->keep);
    if (!st->keep)
        return;
    for (size_t i = 0; i < v->count; i++) {
        const struct ynode *n = v->items[i];
        struct name_at *kn;

        if (n->kind != YNODE_SCALAR || is_null(n)) {
            expected(c, n, "a value name", "keep", NULL);
            continue;
        }
        if (!check_identifier(c, n, "value name"))
            continue;
        kn = &st->keep[st->nkeep];
        kn->name = dup_text(c, n->value);
        if (!kn->name)
            continue;
        kn->line = n->line;
        kn->col = n->col;
        st->nkeep++;
    }
}

/* foreach's size: rows (an integer), or bytes a block (a size with its
 * unit: 64M, 1GiB, 500MB, 4096B) */
static bool parse_block_size(struct ctx *c, const struct ynode *n, struct stage *st)
{
    int64_t rows;
    uint64_t bytes;
    size_t len = n->kind == YNODE_SCALAR ? strlen(n->value) : 0;

    if (n->kind == YNODE_SCALAR && n->plain && len == n->length && len > 0 &&
        ((n->value[len - 1] >= 'A' && n->value[len - 1] <= 'Z') ||
         (n->value[len - 1] >= 'a' && n->value[len - 1] <= 'z'))) {
        if (!parse_size(n->value, &bytes)) {
            expected(c, n, "rows (an integer) or bytes a block (such as 64M)", "size", NULL);
            return false;
        }
        if (bytes == 0) {
            diag_error(c->d, n->line, n->col, NULL, "'size' must be at least one byte, not %s",
                       n->value);
            return false;
        }
        st->foreach_bytes = bytes;
        return true;
    }
    if (!get_int(c, n, "size", 1, INT64_MAX, &rows))
        return false;
    st->foreach_size = rows;
    return true;
}

/* foreach's over: a value name, or a list of them (row-aligned values
 * cut into blocks together), each once. */
static bool parse_over(struct ctx *c, struct stage *st, const struct ynode *n)
{
    const struct ynode *const *items = &n;
    size_t count = 1;
    bool ok = true;

    if (n->kind == YNODE_SEQUENCE) {
        items = (const struct ynode *const *)n->items;
        count = n->count;
        if (count == 0 || count > FOREACH_MAX_OVER) {
            diag_error(c->d, n->line, n->col, "write over: NAME, or over: [x, y] for row-aligned "
                       "values",
                       "over lists %zu values; it takes 1 to %d", count, FOREACH_MAX_OVER);
            return false;
        }
    }
    for (size_t i = 0; i < count; i++) {
        const struct ynode *name = items[i];
        bool fresh = true;

        if (name->kind != YNODE_SCALAR || is_null(name)) {
            expected(c, name, "a value name", "over", "write over: NAME, or over: [x, y]");
            ok = false;
            continue;
        }
        if (!check_identifier(c, name, "value name")) {
            ok = false;
            continue;
        }
        for (size_t j = 0; j < st->nover && fresh; j++) {
            if (strcmp(st->foreach_over[j].name, name->value) == 0) {
                diag_error(c->d, name->line, name->col, "name each value once",
                           "over names '%s' twice", name->value);
                fresh = ok = false;
            }
        }
        if (!fresh)
            continue;
        st->foreach_over[st->nover].name = dup_text(c, name->value);
        if (!st->foreach_over[st->nover].name)
            return false;
        st->foreach_over[st->nover].line = name->line;
        st->foreach_over[st->nover].col = name->col;
        st->nover++;
    }
    return ok;
}

static void parse_foreach(struct ctx *c, struct stage *st, const struct ynode *v)
{
    const struct ynode *over = NULL, *size = NULL;
    bool ok = true;

    if (!expect_kind(c, v, YNODE_MAPPING, "foreach", "write foreach: {over: NAME, size: ROWS}")) {
        st->foreach_broken = true;
        return;
    }
    if (!ynode_get(v, "over"))
        diag_error(c->d, v->line, v->col, "add over: NAME (the value to split along dim 0)",
                   "'foreach' has no 'over'");
    if (!ynode_get(v, "size"))
        diag_error(c->d, v->line, v->col, "add size: ROWS (rows per block)",
                   "'foreach' has no 'size'");
    for (size_t i = 0; i < v->count; i++) {
        const struct ynode *k = v->pairs[i].key, *n = v->pairs[i].value;

        if (!known_key(c, k, foreach_keys, "foreach"))
            continue;
        if (key_is(k, "over")) {
            over = n;
            ok = parse_over(c, st, n) && ok;
        } else if (key_is(k, "size")) {
            size = n;
            if (!parse_block_size(c, n, st))
                ok = false;
        }
    }
    if (!over || !size || !ok) {
        st->foreach_broken = true;
        return;
    }
    st->has_foreach = true;
    st->foreach_line = over->line;
    st->foreach_col = over->col;
}

static void parse_stage(struct ctx *c, struct stage *st, const struct ynode *map,
                        struct nameset *stage_names)
{
    const struct ynode *name = ynode_get(map, "name");

    st->line = map->line;
    st->col = map->col;
    if (!name)
        diag_error(c->d, map->line, map->col, "add name: NAME (unique among the stages)",
                   "this stage has no 'name'");
    if (!ynode_get(map, "do"))
        diag_error(c->d, map->line, map->col, "add do: followed by '- NAME = EXPR' lines",
                   "this stage has no 'do' (its statements)");
    for (size_t i = 0; i < map->count; i++) {
        const struct ynode *k = map->pairs[i].key, *v = map->pairs[i].value;

        if (!known_key(c, k, stage_keys, "a stage"))
            continue;
        if (key_is(k, "name")) {
            const char *s = get_string(c, v, "name");
            int first_line, first_tag;

            if (!s)
                continue;
            st->line = v->line;
            st->col = v->col;
            if (!stage_name_ok(s)) {
                diag_error(c->d, v->line, v->col,
                           "stage names are letters, digits, '_' and '-', not starting with a "
                           "digit",
                           "stage name '%.60s' is not valid", s);
                continue;
            }
            if (!nameset_add(c, stage_names, s, v->line, 0, &first_line, &first_tag)) {
                diag_error(c->d, v->line, v->col, "give every stage its own name",
                           "duplicate stage name '%s' (first at line %d)", s, first_line);
                continue;
            }
            st->name = dup_text(c, s);
        } else if (key_is(k, "do")) {
            parse_do(c, st, v);
        } else if (key_is(k, "device")) {
            device_word(c, v, &st->has_device, &st->device, &st->device_auto);
        } else if (key_is(k, "keep")) {
            parse_keep(c, st, v);
        } else if (key_is(k, "keep_cache")) {
            (void)get_bool(c, v, "keep_cache", &st->keep_cache);
        } else if (key_is(k, "matmul_precision")) {
            int w = get_word(c, v, "matmul_precision", precision_words);
            if (w >= 0)
                st->matmul_high = w == 1;
        } else if (key_is(k, "foreach")) {
            parse_foreach(c, st, v);
        }
    }
}

static void parse_stages(struct ctx *c, const struct ynode *node)
{
    struct pipeline *p = c->p;
    struct nameset stage_names = {0};

    if (!expect_kind(c, node, YNODE_SEQUENCE, "stages",
                     "write stages as '- name: NAME' items, each with its 'do' list"))
        return;
    if (node->count == 0) {
        diag_error(c->d, node->line, node->col, "add a stage: '- name: NAME' with its 'do' list",
                   "'stages' is empty: a pipeline needs at least one stage");
        return;
    }
    p->stages = alloc_array(c, node->count, sizeof *p->stages);
    if (!p->stages)
        return;
    for (size_t i = 0; i < node->count; i++) {
        const struct ynode *item = node->items[i];
        struct stage *st = &p->stages[p->nstages++];

        st->line = item->line;
        st->col = item->col;
        if (!expect_kind(c, item, YNODE_MAPPING, "a stage", "a stage is a mapping: name:, do:"))
            continue;
        parse_stage(c, st, item, &stage_names);
    }
    nameset_free(&stage_names);
}

/* ------------------------------------------------------------- outputs */

/* What the file gave for an output beyond the struct's fields. */
struct output_extra {
    const struct ynode *path_n, *dtype_n, *key_n;
    bool format_given;
    enum tio_compression format_compression;
};

static void parse_output_long(struct ctx *c, struct output *o, struct output_extra *x,
                              const struct ynode *map)
{
    if (!ynode_get(map, "path"))
        diag_error(c->d, map->line, map->col, "add path: FILE", "output '%s' has no 'path'",
                   o->name);
    for (size_t i = 0; i < map->count; i++) {
        const struct ynode *k = map->pairs[i].key, *v = map->pairs[i].value;

        if (!known_key(c, k, output_keys, "an output"))
            continue;
        if (key_is(k, "path")) {
            x->path_n = v;
            o->path = path_value(c, v, "path");
        } else if (key_is(k, "dtype")) {
            if (dtype_word(c, v, &o->dtype)) {
                x->dtype_n = v;
                o->dtype_line = v->line;
                o->dtype_col = v->col;
            }
        } else if (key_is(k, "key")) {
            const char *s = get_string(c, v, "key");
            if (s) {
                x->key_n = v;
                o->key = dup_text(c, s);
            }
        } else if (key_is(k, "format")) {
            x->format_given = format_word(c, v, &o->format, &x->format_compression);
            o->format_line = v->line;
            o->format_col = v->col;
        }
    }
}

static void parse_outputs(struct ctx *c, const struct ynode *node, struct output_extra *extra)
{
    struct pipeline *p = c->p;

    if (is_null(node))
        return;
    if (!expect_kind(c, node, YNODE_MAPPING, "outputs", "write outputs as NAME: PATH lines"))
        return;
    for (size_t i = 0; i < node->count; i++) {
        const struct ynode *k = node->pairs[i].key, *v = node->pairs[i].value;
        struct output *o;
        struct output_extra *x;

        if (!check_identifier(c, k, "output (value) name"))
            continue;
        o = &p->outputs[p->noutputs];
        x = &extra[p->noutputs];
        o->name = dup_text(c, k->value);
        if (!o->name)
            continue;
        p->noutputs++;
        o->line = k->line;
        o->col = k->col;
        o->dtype = TR_DTYPE_COUNT;
        o->format = TIO_FORMAT_UNKNOWN;
        o->compression = TIO_COMPRESSION_NONE;
        if (v->kind == YNODE_MAPPING) {
            parse_output_long(c, o, x, v);
        } else if (v->kind == YNODE_SCALAR && !is_null(v)) {
            x->path_n = v;
            o->path = path_value(c, v, "path");
        } else {
            char buf[64];
            diag_error(c->d, v->line, v->col, "write NAME: PATH or NAME: {path: PATH, ...}",
                       "expected a path or a mapping for output '%s', found %s", k->value,
                       found(v, buf, sizeof buf));
        }
    }
}

static void apply_outputs(struct ctx *c, const struct overrides *ov, struct output_extra *extra)
{
    struct pipeline *p = c->p;

    for (size_t i = 0; ov && i < ov->noutputs; i++) {
        struct override *o = &ov->outputs[i];
        struct output *out = NULL;
        char *path;

        if (!o->value || !*o->value) {
            diag_error_code(c->d, 2, 0, 0, NULL, "-o %s=: the path is empty", o->name);
            continue;
        }
        for (size_t j = 0; j < p->noutputs && !out; j++)
            if (strcmp(p->outputs[j].name, o->name) == 0)
                out = &p->outputs[j];
        if (!out) {
            if (!expr_is_identifier(o->name)) {
                diag_error_code(c->d, 2, 0, 0, IDENT_HINT, "-o %s=...: '%s' is not a value name",
                                o->name, o->name);
                continue;
            }
            out = &p->outputs[p->noutputs];
            memset(&extra[p->noutputs], 0, sizeof extra[p->noutputs]);
            out->name = dup_text(c, o->name);
            if (!out->name)
                continue;
            p->noutputs++;
            out->dtype = TR_DTYPE_COUNT;
            out->format = TIO_FORMAT_UNKNOWN;
            out->compression = TIO_COMPRESSION_NONE;
        }
        path = dup_text(c, o->value);
        if (!path)
            continue;
        free(out->path);
        out->path = path;
        extra[out - p->outputs].path_n = NULL; /* from the command line now */
        /* -o replaces the destination: the file's format:, and a key:
         * unless the new file is a .safetensors too (the dtype stays: it
         * is the value's, as written) */
        extra[out - p->outputs].format_given = false;
        out->format = TIO_FORMAT_UNKNOWN;
        out->compression = TIO_COMPRESSION_NONE;
        if (out->key) {
            enum tio_format by_name = TIO_FORMAT_UNKNOWN;
            enum tio_compression zst;
            if (strcmp(path, "-") != 0)
                tio_format_from_path(path, &by_name, &zst);
            if (by_name != TIO_FORMAT_SAFETENSORS) {
                free(out->key);
                out->key = NULL;
                extra[out - p->outputs].key_n = NULL;
            }
        }
        o->used = true;
    }
}

/* An output's format and compression from format: and its path; then the
 * checks that need both. */
static void finish_output(struct ctx *c, struct output *o, const struct output_extra *x)
{
    enum tio_format by_name = TIO_FORMAT_UNKNOWN;
    enum tio_compression zst = TIO_COMPRESSION_NONE;

    if (!o->path)
        return;
    if (strcmp(o->path, "-") != 0)
        tio_format_from_path(o->path, &by_name, &zst);
    if (x->format_given) {
        o->compression = x->format_compression == TIO_COMPRESSION_ZSTD ? TIO_COMPRESSION_ZSTD : zst;
    } else if (by_name != TIO_FORMAT_UNKNOWN) {
        o->format = by_name;
        o->compression = zst;
    } else if (strcmp(o->path, "-") == 0) {
        o->format = TIO_FORMAT_NPY;
    } else {
        const char *hint = "name it .npy, .safetensors, .bin or .raw (each optionally .zst), "
                           "or add format: npy|safetensors|raw";
        if (x->path_n)
            diag_error(c->d, x->path_n->line, x->path_n->col, hint,
                       "cannot tell the format of output '%s' from its name '%s'", o->name,
                       x->path_n->value);
        else
            diag_error_code(c->d, 2, 0, 0, "name it .npy, .safetensors, .bin or .raw "
                                           "(each optionally .zst)",
                            "-o %s=%s: cannot tell the format from the name", o->name, o->path);
        return;
    }
    if (o->format == TIO_FORMAT_NPZ) {
        const char *what = "write .safetensors (several tensors) or .npy";
        if (x->path_n)
            diag_error(c->d, x->path_n->line, x->path_n->col, what,
                       "output '%s': .npz is read only in tensorrun", o->name);
        else
            diag_error_code(c->d, 2, 0, 0, what, "-o %s=%s: .npz is read only in tensorrun",
                            o->name, o->path);
        return;
    }
    if (o->dtype == TR_DTYPE_BF16 && o->format == TIO_FORMAT_NPY && x->dtype_n)
        diag_error(c->d, x->dtype_n->line, x->dtype_n->col,
                   "cast to f32 first, or write .safetensors",
                   "bf16 cannot be written to .npy");
    if (o->key && o->format != TIO_FORMAT_SAFETENSORS && x->key_n)
        diag_error(c->d, x->key_n->line, x->key_n->col, NULL,
                   "'key' names a tensor inside a .safetensors file; this output is %s",
                   tio_format_name(o->format));
}

/* Two outputs into one file: only safetensors files take several, each
 * under its own name. */
static void check_destinations(struct ctx *c, const struct output_extra *extra)
{
    struct pipeline *p = c->p;
    struct nameset files = {0}, tensors = {0};
    char **keys = alloc_array(c, p->noutputs, sizeof *keys);

    if (!keys)
        return;
    for (size_t i = 0; i < p->noutputs; i++) {
        struct output *o = &p->outputs[i];
        const struct ynode *at = extra[i].path_n;
        int line = at ? at->line : 0, col = at ? at->col : 0;
        int first, tag;
        bool st = o->format == TIO_FORMAT_SAFETENSORS;
        const char *tname;
        size_t lp, lt;

        if (!o->path)
            continue;
        if (!nameset_add(c, &files, o->path, (int)i, st, &first, &tag)) {
            if (!st || !tag) {
                diag_error(c->d, line, col,
                           "a .npy or raw file holds one tensor; only .safetensors takes several",
                           "outputs '%s' and '%s' both write '%s'", p->outputs[first].name,
                           o->name, at ? at->value : o->path);
                continue;
            }
        }
        if (!st)
            continue;
        tname = o->key ? o->key : o->name;
        lp = strlen(o->path);
        lt = strlen(tname);
        keys[i] = malloc(lp + lt + 2);
        if (!keys[i]) {
            c->oom = true;
            continue;
        }
        memcpy(keys[i], o->path, lp + 1);
        memcpy(keys[i] + lp + 1, tname, lt + 1);
        keys[i][lp] = '\x01'; /* a byte no path or name of ours holds */
        if (!nameset_add(c, &tensors, keys[i], (int)i, 0, &first, &tag))
            diag_error(c->d, line, col, "give one of them another 'key'",
                       "outputs '%s' and '%s' both write the tensor '%s' of '%s'",
                       p->outputs[first].name, o->name, tname, at ? at->value : o->path);
    }
    nameset_free(&files);
    nameset_free(&tensors);
    for (size_t i = 0; i < p->noutputs; i++)
        free(keys[i]);
    free(keys);
}

/* ------------------------------------------------------------- the file */

static bool read_file(struct ctx *c, const char *path)
{
    struct pipeline *p = c->p;
    struct stat st;
    size_t cap = 4096, len = 0;
    char *buf;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        diag_error_code(c->d, 4, 0, 0, NULL, "cannot open: %s", strerror(errno));
        return false;
    }
    if (fstat(fd, &st) != 0)
        memset(&st, 0, sizeof st);
    if (S_ISDIR(st.st_mode)) {
        diag_error_code(c->d, 4, 0, 0, NULL, "cannot read: %s", strerror(EISDIR));
        close(fd);
        return false;
    }
    if (S_ISREG(st.st_mode) && st.st_size > 0 && (uintmax_t)st.st_size < PIPELINE_MAX_BYTES)
        cap = (size_t)st.st_size + 1;
    buf = malloc(cap);
    if (!buf) {
        close(fd);
        c->oom = true;
        return false;
    }
    for (;;) {
        ssize_t n;
        if (len + 1 >= cap) {
            char *bigger;
            if (cap > PIPELINE_MAX_BYTES) {
                diag_error_code(c->d, 4, 0, 0, "a pipeline file is YAML text",
                                "larger than %zu MiB: not a pipeline file",
                                PIPELINE_MAX_BYTES >> 20);
                free(buf);
                close(fd);
                return false;
            }
            bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                close(fd);
                c->oom = true;
                return false;
            }
            buf = bigger;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            diag_error_code(c->d, 4, 0, 0, NULL, "cannot read: %s", strerror(errno));
            free(buf);
            close(fd);
            return false;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    p->text = buf;
    p->len = len;
    return true;
}

static char *dir_of(struct ctx *c, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;

    if (!slash)
        return dup_text(c, ".");
    if (slash == path)
        return dup_text(c, "/");
    dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        c->oom = true;
    return dir;
}

/* tensorrun: 1.  Returns false when the file is of another format, whose
 * keys this program cannot judge. */
static bool check_version(struct ctx *c, const struct ynode *root)
{
    const struct ynode *v = ynode_get(root, "tensorrun");
    int64_t n;

    if (!v) {
        diag_error(c->d, 1, 1, "add 'tensorrun: 1' as the file's first line",
                   "missing 'tensorrun: %d' (the format version)", PIPELINE_FORMAT);
        return true;
    }
    if (v->kind != YNODE_SCALAR || !v->plain || core_int(v->value, &n) != 0) {
        expected(c, v, "the integer 1", "tensorrun", "the format version is 'tensorrun: 1'");
        return true;
    }
    if (n != PIPELINE_FORMAT) {
        diag_error(c->d, v->line, v->col, n > PIPELINE_FORMAT ? "a newer tensorrun reads it" : NULL,
                   "this file needs tensorrun format %" PRId64 "; this program reads format %d",
                   n, PIPELINE_FORMAT);
        c->p->version = n > 0 && n < 1000000 ? (int)n : -1;
        return false;
    }
    c->p->version = PIPELINE_FORMAT;
    return true;
}

static void check_schema(struct ctx *c, const struct overrides *ov)
{
    struct pipeline *p = c->p;
    const struct ynode *root = p->root;
    struct nameset names = {0};
    struct output_extra *extra;
    const struct ynode *outputs;
    size_t nout = ov ? ov->noutputs : 0;

    if (root->kind != YNODE_MAPPING) {
        char buf[64];
        diag_error(c->d, root->line, root->col, "a pipeline starts with 'tensorrun: 1'",
                   "expected a mapping (tensorrun:, stages:, ...) at the top of the file, "
                   "found %s",
                   found(root, buf, sizeof buf));
        return;
    }
    if (!check_version(c, root))
        return;
    if (!ynode_get(root, "stages"))
        diag_error(c->d, 1, 1, "add stages: with at least one '- name: NAME' and its 'do' list",
                   "missing 'stages' (a pipeline needs at least one stage)");
    outputs = ynode_get(root, "outputs");
    if (outputs && outputs->kind == YNODE_MAPPING)
        nout += outputs->count;
    p->outputs = alloc_array(c, nout, sizeof *p->outputs);
    extra = alloc_array(c, nout, sizeof *extra);
    if (nout && (!p->outputs || !extra)) {
        free(extra);
        return;
    }
    for (size_t i = 0; i < root->count; i++) {
        const struct ynode *k = root->pairs[i].key, *v = root->pairs[i].value;

        if (!known_key(c, k, top_keys, "a pipeline"))
            continue;
        if (key_is(k, "name")) {
            const char *s = get_string(c, v, "name");
            if (s)
                p->name = dup_text(c, s);
        } else if (key_is(k, "device")) {
            device_word(c, v, &p->has_device, &p->device, &p->device_auto);
        } else if (key_is(k, "params")) {
            parse_params(c, v);
            for (size_t j = 0; j < p->nparams; j++) {
                int first_line, first_tag;
                if (!nameset_add(c, &names, p->params[j].name, p->params[j].line, 0,
                                 &first_line, &first_tag))
                    diag_error(c->d, p->params[j].line, p->params[j].col,
                               "inputs, params and statement targets share one namespace",
                               "'%s' is already an input (line %d)", p->params[j].name,
                               first_line);
            }
        } else if (key_is(k, "inputs")) {
            parse_inputs(c, v, &names);
        } else if (key_is(k, "stages")) {
            parse_stages(c, v);
        } else if (key_is(k, "outputs")) {
            parse_outputs(c, v, extra);
        }
    }
    nameset_free(&names);
    apply_sets(c, ov);
    apply_inputs(c, ov);
    apply_outputs(c, ov, extra);
    for (size_t i = 0; i < p->noutputs; i++)
        finish_output(c, &p->outputs[i], &extra[i]);
    check_destinations(c, extra);
    free(extra);
}

struct placed {
    struct diag d;
    size_t order;
};

static int by_place(const void *a, const void *b)
{
    const struct placed *x = a, *y = b;

    if (x->d.line != y->d.line)
        return x->d.line < y->d.line ? -1 : 1;
    if (x->d.col != y->d.col)
        return x->d.col < y->d.col ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Puts the diagnostics from index start on in the order of their places
 * (those of the command line, with no place, first), so that they read
 * from the top of the file down whichever check found them. */
static void sort_diags(struct diag_list *d, size_t start)
{
    size_t n = d->count - start;
    struct placed *tmp;

    if (n < 2)
        return;
    tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return; /* they stay in the order found */
    for (size_t i = 0; i < n; i++) {
        tmp[i].d = d->items[start + i];
        tmp[i].order = i;
    }
    qsort(tmp, n, sizeof *tmp, by_place);
    for (size_t i = 0; i < n; i++)
        d->items[start + i] = tmp[i].d;
    free(tmp);
}

struct pipeline *pipeline_load(const char *path, const struct overrides *overrides,
                               struct diag_list *diags)
{
    size_t first_diag = diags->count;
    struct pipeline *p;
    struct ctx c;

    if (strcmp(path, "-") == 0) {
        diag_error_code(diags, 2, 0, 0, "save the pipeline to a file and name that",
                        "a pipeline cannot be read from standard input");
        return NULL;
    }
    p = calloc(1, sizeof *p);
    if (!p) {
        diag_error(diags, 0, 0, NULL, "out of memory reading the pipeline");
        return NULL;
    }
    memset(&c, 0, sizeof c);
    c.p = p;
    c.d = diags;
    p->path = dup_text(&c, path);
    p->dir = dir_of(&c, path);
    if (!p->path || !p->dir || !read_file(&c, path)) {
        if (c.oom)
            diag_error(diags, 0, 0, NULL, "out of memory reading the pipeline");
        pipeline_free(p);
        return NULL;
    }
    diags->text = p->text;
    diags->len = p->len;
    p->root = yaml_load(p->text, p->len, diags);
    if (p->root)
        check_schema(&c, overrides);
    if (c.oom)
        diag_error(diags, 0, 0, NULL, "out of memory reading the pipeline");
    sort_diags(diags, first_diag);
    return p;
}

void pipeline_free(struct pipeline *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nparams; i++) {
        free(p->params[i].name);
        param_clear(&p->params[i]);
    }
    free(p->params);
    for (size_t i = 0; i < p->ninputs; i++) {
        free(p->inputs[i].name);
        free(p->inputs[i].path);
        free(p->inputs[i].key);
    }
    free(p->inputs);
    for (size_t i = 0; i < p->nstages; i++) {
        struct stage *st = &p->stages[i];
        free(st->name);
        for (size_t j = 0; j < st->nstatements; j++)
            statement_free(st->statements[j]);
        free(st->statements);
        for (size_t j = 0; j < st->nkeep; j++)
            free(st->keep[j].name);
        free(st->keep);
        for (size_t j = 0; j < st->nover; j++)
            free(st->foreach_over[j].name);
    }
    free(p->stages);
    for (size_t i = 0; i < p->noutputs; i++) {
        free(p->outputs[i].name);
        free(p->outputs[i].path);
        free(p->outputs[i].key);
    }
    free(p->outputs);
    ynode_free(p->root);
    free(p->name);
    free(p->path);
    free(p->dir);
    free(p->text);
    free(p);
}
