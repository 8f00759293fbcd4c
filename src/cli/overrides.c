/*
 * overrides.c - the -D, -i and -o overrides of run, eval and validate:
 * "NAME=VALUE" words collected for the pipeline loader.  (validate itself
 * is run's dry run: run.c.)
 */
#include "config.h"

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

