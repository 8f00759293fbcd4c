/*
 * validate.c - `tensorrun validate PIPELINE.yaml`: every check that needs
 * no computing, every error reported in one pass; the plan on success.
 */
#include "config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "msg.h"
#include "plan.h"
#include "run.h"

/* Appends "NAME=VALUE" to a list of overrides; false (after a usage
 * error) when it is malformed. */
static bool add_override(struct override **list, size_t *n, const char *text, const char *option)
{
    const char *eq = strchr(text, '=');
    struct override *grown;
    char *name;

    if (!eq || eq == text) {
        usage_error("%s: expected NAME=VALUE, not '%s'", option, text);
        return false;
    }
    name = strndup(text, (size_t)(eq - text));
    if (!name || !expr_is_identifier(name)) {
        usage_error("%s: '%s' is not a name", option, name ? name : text);
        free(name);
        return false;
    }
    grown = realloc(*list, (*n + 1) * sizeof **list);
    if (!grown) {
        free(name);
        return false;
    }
    *list = grown;
    (*list)[*n] = (struct override){.name = name, .value = eq + 1};
    (*n)++;
    return true;
}

void overrides_free(struct overrides *o)
{
    struct override *lists[3] = {o->sets, o->inputs, o->outputs};
    size_t counts[3] = {o->nsets, o->ninputs, o->noutputs};

    for (int l = 0; l < 3; l++) {
        for (size_t i = 0; i < counts[l]; i++)
            free((char *)lists[l][i].name);
        free(lists[l]);
    }
    memset(o, 0, sizeof *o);
}

bool parse_override(int c, const char *arg, struct overrides *o)
{
    switch (c) {
    case 'D':
        return add_override(&o->sets, &o->nsets, arg, "-D");
    case 'i':
        return add_override(&o->inputs, &o->ninputs, arg, "-i");
    default:
        return add_override(&o->outputs, &o->noutputs, arg, "-o");
    }
}

int cmd_validate(int argc, char **argv)
{
    static const struct option options[] = {
        {"set", required_argument, NULL, 'D'},
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct overrides o = {0};
    struct diag_list d;
    struct pipeline *p;
    struct plan *plan = NULL;
    int status;

    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, ":D:i:o:h", options, NULL);
        if (c == -1)
            break;
        if (c == 'h') {
            printf("Usage: tensorrun validate PIPELINE.yaml [-D NAME=VALUE]... [-i NAME=PATH]... "
                   "[-o NAME=PATH]...\n");
            overrides_free(&o);
            return EXIT_OK;
        }
        if (c == ':' || c == '?') {
            overrides_free(&o);
            return option_error("validate", c, argc, argv, options, false);
        }
        if (!parse_override(c, optarg, &o)) {
            overrides_free(&o);
            return EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        overrides_free(&o);
        return usage_error("validate: expected one pipeline file");
    }
    diag_init(&d, argv[optind], NULL, 0);
    p = pipeline_load(argv[optind], &o, &d);
    status = p ? check_standard_input(p) : EXIT_OK;
    if (p && status == EXIT_OK)
        plan = plan_build(p, &d, false);
    if (status == EXIT_OK)
        status = diag_exit_code(&d);
    diag_print(&d, stderr);
    if (status == EXIT_OK && plan)
        plan_print(plan, stdout);
    plan_free(plan);
    pipeline_free(p);
    diag_free(&d);
    overrides_free(&o);
    return status;
}
