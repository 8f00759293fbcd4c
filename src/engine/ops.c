/*
 * ops.c - the op table built from ops.def: parameter lists parsed once
 * from their text, lookup by name, and the parameter kinds' words.
 */
#include "kernel_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_words[] = {
#define TR__PARAM_WORD(e, word, what) word,
    TR_PARAM_KIND_MAP(TR__PARAM_WORD)
#undef TR__PARAM_WORD
};

static const char *const kind_whats[] = {
#define TR__PARAM_WHAT(e, word, what) what,
    TR_PARAM_KIND_MAP(TR__PARAM_WHAT)
#undef TR__PARAM_WHAT
};

const char *tr_param_kind_word(enum tr_param_kind kind)
{
    return (unsigned)kind < TR_PARAM_KIND_COUNT ? kind_words[kind] : "?";
}

const char *tr_param_kind_what(enum tr_param_kind kind)
{
    return (unsigned)kind < TR_PARAM_KIND_COUNT ? kind_whats[kind] : "?";
}

bool tr_packed_dtype_word(const char *word)
{
    return word && (strcmp(word, "i4") == 0 || strcmp(word, "u4") == 0);
}

/* The rows of ops.def, as written. */
struct op_row {
    const char *name, *params, *doc;
    enum tr_op_group group;
    enum tr__rule rule;
    enum tr__takes takes, cuda;
    int nresults;
};

static const struct op_row rows[] = {
#define OP(id, name, group, rule, results, takes, cuda, params, doc)         \
    [TR_OP_##id] = {#name,          params,           doc,    TR_GROUP_##group, TR__RULE_##rule, \
                    TR__TAKES_##takes, TR__TAKES_##cuda, results},
#include "ops.def"
#undef OP
};

#define NOPS (sizeof rows / sizeof rows[0])

static struct tr__op ops[NOPS];
static char signatures[NOPS][160];
static pthread_once_t built = PTHREAD_ONCE_INIT;

static const char *const group_names[] = {
#define TR__GROUP_NAME(e, name) name,
    TR_OP_GROUP_MAP(TR__GROUP_NAME)
#undef TR__GROUP_NAME
};

static const char *const takes_words[] = {
    [TR__TAKES_ANY] = "any dtype",
    [TR__TAKES_NUMERIC] = "numbers (not bool)",
    [TR__TAKES_INTEGRAL] = "bool and integers",
    [TR__TAKES_FLOAT] = "f16, bf16, f32, f64",
    [TR__TAKES_SIGNED] = "signed integers and floats",
    [TR__TAKES_INTEGER] = "u8, u16, u32, u64, i8, i16, i32, i64",
    [TR__TAKES_NONE] = "none",
};

bool tr__takes(enum tr__takes t, enum tr_dtype d)
{
    switch (t) {
    case TR__TAKES_NUMERIC:
        return d != TR_DTYPE_BOOL;
    case TR__TAKES_INTEGRAL:
        return !tr_dtype_is_float(d);
    case TR__TAKES_FLOAT:
        return tr_dtype_is_float(d);
    case TR__TAKES_SIGNED:
        return tr_dtype_is_signed(d);
    case TR__TAKES_INTEGER:
        return tr_dtype_is_integer(d);
    case TR__TAKES_NONE:
        return false;
    default:
        return true;
    }
}

/* A default value written in ops.def: None, true, false, an integer, a
 * number, a dtype or a double-quoted string. */
static struct tr_value parse_default(const char *text, size_t len)
{
    struct tr_value v = {.kind = TR_VALUE_NONE, .known = true, .weak = true};
    char buf[32];
    char *end;

    snprintf(buf, sizeof buf, "%.*s", (int)len, text);
    if (strcmp(buf, "None") == 0)
        return v;
    if (strcmp(buf, "true") == 0 || strcmp(buf, "false") == 0) {
        v.kind = TR_VALUE_BOOL;
        v.boolean = buf[0] == 't';
        return v;
    }
    if (buf[0] == '"') {
        v.kind = TR_VALUE_STRING;
        v.string = text + 1; /* points into ops.def's text: up to the quote */
        return v;
    }
    if (tr_dtype_parse(buf, &v.dtype) == TR_OK) {
        v.kind = TR_VALUE_DTYPE;
        return v;
    }
    v.integer = strtoll(buf, &end, 10);
    if (*end == '\0') {
        v.kind = TR_VALUE_INT;
        return v;
    }
    v.kind = TR_VALUE_FLOAT;
    v.number = strtod(buf, &end);
    return v;
}

/* Parses a row's "name:kind=default, ..." into op->params. */
static void parse_params(const struct op_row *row, struct tr__op *op)
{
    const char *p = row->params;
    size_t sig = 0;

    sig += (size_t)snprintf(signatures[op - ops] + sig, sizeof signatures[0] - sig, "%s(",
                            row->name);
    while (*p && op->info.nparams < TR_OP_MAX_PARAMS) {
        struct tr_param *param = &op->info.params[op->info.nparams];
        const char *colon = strchr(p, ':'), *end = strchr(p, ','), *eq;
        size_t name_len = (size_t)(colon - p), kind_len;
        char *name = calloc(1, name_len + 1);

        if (!end)
            end = p + strlen(p);
        eq = memchr(colon, '=', (size_t)(end - colon));
        kind_len = (size_t)((eq ? eq : end) - colon - 1);
        if (kind_len > 4 && strncmp(colon + 1 + kind_len - 4, "/any", 4) == 0) {
            param->any_dtype = true;
            kind_len -= 4;
        }
        memcpy(name, p, name_len);
        param->name = name;
        for (int k = 0; k < TR_PARAM_KIND_COUNT; k++)
            if (strlen(kind_words[k]) == kind_len && strncmp(colon + 1, kind_words[k], kind_len) == 0)
                param->kind = (enum tr_param_kind)k;
        param->required = eq == NULL;
        if (eq) {
            size_t dlen = (size_t)(end - eq - 1);
            char *text = calloc(1, dlen + 1);
            memcpy(text, eq + 1, dlen);
            param->default_text = text;
            param->default_value = parse_default(text, dlen);
            if (param->default_value.kind == TR_VALUE_STRING)
                param->default_value.string = strndup(text + 1, dlen > 2 ? dlen - 2 : 0);
        }
        sig += (size_t)snprintf(signatures[op - ops] + sig, sizeof signatures[0] - sig,
                                "%s%s%s%s", op->info.nparams ? ", " : "", name,
                                eq ? "=" : "", eq ? param->default_text : "");
        op->info.nparams++;
        p = *end ? end + 1 : end;
        while (*p == ' ')
            p++;
    }
    snprintf(signatures[op - ops] + sig, sizeof signatures[0] - sig, ")");
}

static void build(void)
{
    for (size_t i = 0; i < NOPS; i++) {
        struct tr__op *op = &ops[i];
        op->info.id = (enum tr_op_id)i;
        op->info.name = rows[i].name;
        op->info.group_id = rows[i].group;
        op->info.group = group_names[rows[i].group];
        op->info.doc = rows[i].doc;
        op->info.nresults = rows[i].nresults;
        op->info.dtypes = takes_words[rows[i].takes];
        op->kernel = tr__kernel_for((enum tr_op_id)i);
        op->info.has_kernel = op->kernel != NULL;
        op->rule = rows[i].rule;
        op->takes = rows[i].takes;
        op->cuda = rows[i].cuda;
        op->info.cuda_dtypes = takes_words[rows[i].cuda];
        parse_params(&rows[i], op);
        op->info.signature = signatures[i];
    }
}

size_t tr_op_count(void)
{
    return NOPS;
}

const struct tr_op_info *tr_op_at(size_t index)
{
    pthread_once(&built, build);
    return index < NOPS ? &ops[index].info : NULL;
}

const struct tr_op_info *tr_op_get(enum tr_op_id id)
{
    return tr_op_at((size_t)id);
}

/* The NumPy spellings people type first, where they mean the same. */
static const char *const aliases[][2] = {
    {"clip", "clamp"},      {"cat", "concat"}, {"concatenate", "concat"},
    {"absolute", "abs"},    {"amax", "max"},   {"amin", "min"},
};

const char *tr_op_alias_at(size_t index, const char **op)
{
    if (index >= sizeof aliases / sizeof *aliases)
        return NULL;
    if (op)
        *op = aliases[index][1];
    return aliases[index][0];
}

const struct tr_op_info *tr_op_find(const char *name)
{
    pthread_once(&built, build);
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strcmp(aliases[i][0], name) == 0)
            name = aliases[i][1];
    for (size_t i = 0; i < NOPS; i++)
        if (strcmp(ops[i].info.name, name) == 0)
            return &ops[i].info;
    return NULL;
}

const struct tr__op *tr__op_of(const struct tr_op_info *info)
{
    return (const struct tr__op *)info; /* info is the first member */
}

int tr__param_index(const struct tr__op *op, const char *name)
{
    for (int i = 0; i < op->info.nparams; i++)
        if (strcmp(op->info.params[i].name, name) == 0)
            return i;
    return -1;
}

double tr__number(const struct tr_value *v)
{
    return v->kind == TR_VALUE_INT    ? (double)v->integer
           : v->kind == TR_VALUE_BOOL ? (double)v->boolean
                                      : v->number;
}
