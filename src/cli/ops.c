/*
 * ops.c - `tensorrun ops [--json]`: every op of the table, its signature,
 * the dtypes it takes and one line of doc.
 */
#include "config.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
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
    json_object_set_new(o, "results", json_integer(op->nresults));
    json_object_set_new(o, "dtypes", json_string(op->dtypes));
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
        printf("\"%s\n", op->nresults > 1 ? "\n\\(-> two values" : "");
        roff_text(op->doc);
        printf(".\nTakes ");
        roff_text(op->dtypes);
        printf(".\n");
    }
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
            printf("Usage: tensorrun ops [--json | --roff]\n");
            return EXIT_OK;
        } else {
            return usage_error("ops: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("ops: unexpected argument '%s'", argv[optind]);
    if (roff) {
        print_roff();
        return EXIT_OK;
    }
    for (size_t i = 0; i < tr_op_count(); i++) {
        const struct tr_op_info *op = tr_op_at(i);
        if (json) {
            print_json(op);
            continue;
        }
        if (!group || strcmp(group, op->group) != 0) {
            printf("%s%s:\n", group ? "\n" : "", op->group);
            group = op->group;
        }
        printf("  %s%s\n      %s; takes %s\n", op->signature,
               op->nresults > 1 ? (op->nresults == 2 ? " -> 2 values" : " -> values") : "",
               op->doc, op->dtypes);
    }
    return EXIT_OK;
}
