/*
 * ops.c - `tensorrun ops [OP...] [--json | --roff]`: every op of the table
 * (or the named ones), its signature, the dtypes it takes and one line of
 * doc.
 */
#include "config.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "msg.h"
#include "tensorrun_ops.h"

static void print_json(const struct tr_op_info *op)
{
    json_t *o = json_object(), *params = json_array();
    char *text;

    json_object_set_new(o, "name", json_string(op->name));
    json_object_set_new(o, "group", json_string(op->group));
    json_object_set_new(o, "signature", json_string(op->signature));
    for (int i = 0; i < op->nparams; i++) {
        const struct tr_param *p = &op->params[i];
        json_t *param = json_object();
        json_object_set_new(param, "name", json_string(p->name));
        json_object_set_new(param, "kind", json_string(tr_param_kind_word(p->kind)));
        json_object_set_new(param, "default",
                            p->default_text ? json_string(p->default_text) : json_null());
        json_array_append_new(params, param);
    }
    json_object_set_new(o, "params", params);
    /* split and chunk: as many as their arguments make (null) */
    json_object_set_new(o, "results", op->nresults ? json_integer(op->nresults) : json_null());
    json_object_set_new(o, "dtypes", json_string(op->dtypes));
    json_object_set_new(o, "cuda", json_string(op->cuda_dtypes));
    json_object_set_new(o, "doc", json_string(op->doc));
    text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(o);
}

/* Text for roff: backslashes and leading dots made harmless, and double
 * quotes written as \(dq, since a signature is a quoted macro argument
 * (.B "gelu(x, approximate="none")" would end it at the first quote). */
static void roff_text(const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", stdout);
        else if (*s == '"')
            fputs("\\(dq", stdout);
        else if (*s == '-')
            fputs("\\-", stdout);
        else
            putchar(*s);
    }
}

/* The ops section of tensorrun-pipeline(5), from the table, so that the
 * manual cannot drift from the program. */
static void print_roff(void)
{
    const char *group = NULL;

    for (size_t i = 0; i < tr_op_count(); i++) {
        const struct tr_op_info *op = tr_op_at(i);
        if (!group || strcmp(group, op->group) != 0) {
            printf(".SS %s\n", op->group);
            group = op->group;
        }
        printf(".TP\n.B \"");
        roff_text(op->signature);
        if (op->nresults == 0)
            printf("\"\n\\(-> as many values as pieces\n");
        else if (op->nresults > 1)
            printf("\"\n\\(-> %d values\n", op->nresults);
        else
            printf("\"\n");
        roff_text(op->doc);
        printf(".\nTakes ");
        roff_text(op->dtypes);
        if (strcmp(op->cuda_dtypes, "none") != 0) {
            printf("; on CUDA, ");
            roff_text(op->cuda_dtypes);
        }
        printf(".\n");
    }
}

/* Whether op is one of the n names (every op when n is 0). */
static bool named(const struct tr_op_info *op, int n, char **names)
{
    for (int i = 0; i < n; i++)
        if (tr_op_find(names[i]) == op)
            return true;
    return n == 0;
}

static int unknown_op(const char *name)
{
    const char **names = calloc(tr_op_count() + 1, sizeof *names);
    const char *guess = NULL;

    for (size_t i = 0; names && i < tr_op_count(); i++)
        names[i] = tr_op_at(i)->name;
    if (names)
        guess = suggest(name, names);
    if (guess)
        usage_error("ops: unknown op '%s' (did you mean '%s'?)", name, guess);
    else
        usage_error("ops: unknown op '%s'", name);
    free(names);
    return EXIT_USAGE;
}

int cmd_ops(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"roff", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *group = NULL;
    bool json = false, roff = false;

    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, ":jh", options, NULL);
        if (c == -1)
            break;
        if (c == 'r') {
            roff = true;
        } else if (c == 'j') {
            json = true;
        } else if (c == 'h') {
            fputs("Usage: tensorrun ops [OP...] [--json | --roff]\n"
                  "\n"
                  "List every op (or the ops named): its signature, the dtypes it takes and\n"
                  "what it does.\n"
                  "\n"
                  "Options:\n"
                  "      --json  one JSON object per op and line\n"
                  "      --roff  the ops as the manual tensorrun-pipeline(5) lists them, in roff\n"
                  "\n"
                  "See tensorrun(1).\n",
                  stdout);
            return EXIT_OK;
        } else {
            return option_error("ops", c, argc, argv, options, false);
        }
    }
    for (int i = optind; i < argc; i++) {
        if (!tr_op_find(argv[i]))
            return unknown_op(argv[i]);
    }
    if (roff && optind < argc)
        return usage_error("ops: --roff lists every op; name none");
    if (roff) {
        print_roff();
        return EXIT_OK;
    }
    for (size_t i = 0; i < tr_op_count(); i++) {
        const struct tr_op_info *op = tr_op_at(i);
        if (!named(op, argc - optind, argv + optind))
            continue;
        if (json) {
            print_json(op);
            continue;
        }
        if (!group || strcmp(group, op->group) != 0) {
            printf("%s%s:\n", group ? "\n" : "", op->group);
            group = op->group;
        }
        printf("  %s", op->signature);
        if (op->nresults == 0)
            printf(" -> as many values as pieces");
        else if (op->nresults > 1)
            printf(" -> %d values", op->nresults);
        printf("\n      %s; takes %s", op->doc, op->dtypes);
        if (strcmp(op->cuda_dtypes, "none") != 0)
            printf("; on CUDA, %s", op->cuda_dtypes);
        printf("\n");
    }
    return EXIT_OK;
}
