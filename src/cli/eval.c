/*
 * eval.c - `tensorrun eval 'STATEMENTS'`: a one-stage pipeline built from
 * the command line.  Statements are separated by ';'; a bare expression
 * binds `out`.  Errors point into the statements' text ("eval:1:COLUMN").
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "msg.h"
#include "run.h"

#define EVAL_PLACE "eval"

static char *dup_or_null(const char *s, bool *oom)
{
    char *copy = strdup(s);

    *oom = *oom || !copy;
    return copy;
}

/* -D NAME=VALUE defines a param, typed as a pipeline file's params are
 * (param.h); errors go to d. */
static void add_params(struct pipeline *p, const struct overrides *o, struct diag_list *d,
                       bool *oom)
{
    p->params = calloc(o->nsets + 1, sizeof *p->params);
    if (!p->params) {
        *oom = true;
        return;
    }
    for (size_t i = 0; i < o->nsets; i++) {
        struct param *param = &p->params[p->nparams];
        bool later = false;
        /* the last -D of a name wins, as in run */
        for (size_t k = i + 1; k < o->nsets && !later; k++)
            later = strcmp(o->sets[k].name, o->sets[i].name) == 0;
        for (size_t k = 0; k < o->ninputs && !later; k++)
            if (strcmp(o->inputs[k].name, o->sets[i].name) == 0) {
                diag_error_code(d, EXIT_USAGE, 0, 0, "a name is a param or an input, not both",
                                "-D %s and -i %s name the same value", o->sets[i].name,
                                o->inputs[k].name);
                later = true;
            }
        if (later || !param_from_text(param, o->sets[i].value, o->sets[i].name, d))
            continue;
        param->name = dup_or_null(o->sets[i].name, oom);
        p->nparams++;
    }
}

/* -i NAME=PATH[:KEY] for each -i. */
static void add_inputs(struct pipeline *p, const struct overrides *o, struct diag_list *d,
                       bool *oom)
{
    p->inputs = calloc(o->ninputs + 1, sizeof *p->inputs);
    if (!p->inputs) {
        *oom = true;
        return;
    }
    for (size_t i = 0; i < o->ninputs; i++) {
        struct input *in = &p->inputs[p->ninputs++];
        const char *value = o->inputs[i].value;
        in->name = dup_or_null(o->inputs[i].name, oom);
        in->format = TIO_FORMAT_UNKNOWN;
        in->given = true;
        if (!split_input_source(value, &in->path, &in->key)) {
            *oom = true;
        } else if (!*in->path || (in->key && !*in->key)) {
            diag_error_code(d, EXIT_USAGE, 0, 0, "write -i NAME=PATH, or -i NAME=PATH:KEY",
                            "-i %s=%s: the %s is empty", o->inputs[i].name, value,
                            *in->path ? "key" : "path");
        }
    }
}

/* Splits text at the semicolons outside brackets and strings and parses
 * each statement, with columns into the whole text. */
static void add_statements(struct stage *st, const char *text, struct diag_list *d, bool *oom)
{
    size_t len = strlen(text), start = 0, cap = 1;
    struct diag_place *places = calloc(len + 1, sizeof *places);
    int depth = 0, line = 1, col = 1;
    char quote = 0;

    for (size_t i = 0; i < len; i++)
        cap += text[i] == ';';
    st->statements = calloc(cap, sizeof *st->statements);
    if (!st->statements || !places) {
        free(places);
        *oom = true;
        return;
    }
    /* where each byte is, for statements written over several lines */
    for (size_t i = 0; i <= len; i++) {
        places[i].line = line;
        places[i].col = col++;
        if (text[i] == '\n') {
            line++;
            col = 1;
        }
    }
    for (size_t i = 0; i <= len; i++) {
        char c = text[i];
        if (quote) {
            quote = c == quote ? 0 : quote;
            if (c)
                continue;
        }
        if (c == '"' || c == '\'') {
            quote = c;
        } else if (c == '(' || c == '[') {
            depth++;
        } else if ((c == ')' || c == ']') && depth > 0) {
            depth--;
        } else if ((c == ';' && depth == 0) || c == '\0') {
            char *piece = strndup(text + start, i - start);
            size_t lead = 0;
            if (!piece) {
                free(places);
                *oom = true;
                return;
            }
            while (piece[lead] == ' ' || piece[lead] == '\t' || piece[lead] == '\n')
                lead++;
            if (piece[lead]) {
                struct statement *s =
                    expr_parse_placed(piece + lead, places + start + lead, "out", d);
                if (s)
                    st->statements[st->nstatements++] = s;
            }
            free(piece);
            start = i + 1;
        }
    }
    free(places);
    if (st->nstatements == 0 && diag_exit_code(d) == EXIT_OK)
        diag_error(d, 0, 0, "e.g. tensorrun eval 'sum(x)' -i x=data.npy", "no statement");
}

/* The name of the last value the statements bind. */
static const char *last_value(const struct stage *st)
{
    const struct statement *s = st->nstatements ? st->statements[st->nstatements - 1] : NULL;

    return s && s->ntargets ? s->targets[s->ntargets - 1] : NULL;
}

static struct output *add_output(struct pipeline *p, const struct run_args *a, const char *name,
                                 const char *path, struct diag_list *d, bool *oom)
{
    struct output *out = &p->outputs[p->noutputs];

    memset(out, 0, sizeof *out);
    out->dtype = TR_DTYPE_COUNT;
    out->format = TIO_FORMAT_NPY;
    if (strcmp(path, "-") == 0 && a->format != TIO_FORMAT_UNKNOWN) {
        out->format = a->format;
        out->compression = a->compression;
    } else if (strcmp(path, "-") != 0) {
        tio_format_from_path(path, &out->format, &out->compression);
        if (out->format == TIO_FORMAT_UNKNOWN && a->format != TIO_FORMAT_UNKNOWN) {
            /* a name that says nothing (/dev/null, a named pipe): --format does */
            out->format = a->format;
            out->compression = a->compression;
        }
        if (out->format == TIO_FORMAT_UNKNOWN || out->format == TIO_FORMAT_NPZ) {
            diag_error_code(d, EXIT_USAGE, 0, 0, "name it .npy, .safetensors, .bin or .raw "
                                                 "(each optionally .zst), or give --format",
                            out->format == TIO_FORMAT_NPZ
                                ? "-o %s: .npz is read only in tensorrun"
                                : "-o %s: cannot tell the format from the name",
                            path);
            return NULL;
        }
    }
    for (size_t i = 0; i < p->noutputs; i++) {
        if (strcmp(p->outputs[i].path, path) == 0 &&
            (out->format != TIO_FORMAT_SAFETENSORS || strcmp(p->outputs[i].name, name) == 0)) {
            diag_error_code(d, EXIT_USAGE, 0, 0, NULL, "-o: '%s' is named twice", path);
            return NULL;
        }
    }
    out->name = dup_or_null(name, oom);
    out->path = dup_or_null(path, oom);
    p->noutputs++;
    return out;
}

/* -o [NAME=]PATH for each -o; else the last value to standard output: as
 * .npy (or --format), a rank-0 value as a number; or as text (print). */
static void add_outputs(struct pipeline *p, const struct run_args *a, bool print,
                        struct diag_list *d, bool *oom)
{
    const char *last = last_value(&p->stages[0]);

    p->outputs = calloc(a->neval_outputs + 1, sizeof *p->outputs);
    if (!p->outputs) {
        *oom = true;
        return;
    }
    for (size_t i = 0; i < a->neval_outputs; i++) {
        const char *text = a->eval_outputs[i], *eq = strchr(text, '=');
        char *name = eq ? strndup(text, (size_t)(eq - text)) : NULL;
        bool named = name && expr_is_identifier(name);
        const char *path = named ? eq + 1 : text;
        if (!*path || eq == text) {
            diag_error_code(d, EXIT_USAGE, 0, 0, "write -o PATH, or -o NAME=PATH",
                            !*path ? "-o %s: the path is empty" : "-o %s: the name is empty",
                            text);
        } else if (!named && !last) {
            /* when the statements did not parse, their errors say why */
            if (diag_exit_code(d) == EXIT_OK)
                diag_error_code(d, EXIT_USAGE, 0, 0, NULL, "-o %s: no value to write", text);
        } else {
            add_output(p, a, named ? name : last, path, d, oom);
        }
        free(name);
    }
    if (a->neval_outputs == 0 && !print && last) {
        struct output *out = add_output(p, a, last, "-", d, oom);
        if (out)
            out->text_if_scalar = a->format == TIO_FORMAT_UNKNOWN;
    }
}

static struct pipeline *build(const char *text, struct run_args *a, bool print,
                              struct diag_list *d)
{
    struct pipeline *p = calloc(1, sizeof *p);
    struct stage *st;
    bool oom = false;

    if (!p)
        return NULL;
    p->version = PIPELINE_FORMAT;
    p->path = dup_or_null(EVAL_PLACE, &oom);
    p->dir = dup_or_null(".", &oom);
    p->text = dup_or_null(text, &oom);
    p->len = strlen(text);
    add_params(p, &a->overrides, d, &oom);
    add_inputs(p, &a->overrides, d, &oom);
    p->stages = calloc(1, sizeof *p->stages);
    if (!p->stages || oom) {
        pipeline_free(p);
        return NULL;
    }
    p->nstages = 1;
    st = &p->stages[0];
    st->name = dup_or_null(EVAL_PLACE, &oom);
    add_statements(st, text, d, &oom);
    add_outputs(p, a, print, d, &oom);
    if (print && last_value(st)) {
        st->keep = calloc(1, sizeof *st->keep);
        if (st->keep) {
            st->keep[0].name = dup_or_null(last_value(st), &oom);
            st->nkeep = 1;
        }
        oom = oom || !st->keep;
    }
    if (oom) {
        pipeline_free(p);
        return NULL;
    }
    return p;
}

int cmd_eval(int argc, char **argv)
{
    struct run_args a;
    struct diag_list d;
    struct pipeline *p;
    bool print;
    int status = run_args_parse(argc, argv, true, &a);

    if (status != EXIT_OK) {
        run_args_free(&a);
        return status < 0 ? EXIT_OK : status;
    }
    if (a.noperands != 1) {
        bool flags = false;
        /* 'eval -n' took the statements '-n' for --dry-run */
        for (int i = 1; i < argc && a.noperands == 0; i++)
            flags = flags || (argv[i][0] == '-' && argv[i][1] && argv[i][1] != '-' &&
                              strspn(argv[i] + 1, "nqv") == strlen(argv[i] + 1));
        run_args_free(&a);
        if (!flags)
            return usage_error("eval: expected the statements as one argument (quote them)");
        msg_error(NULL, "eval: expected the statements as one argument");
        msg_hint("put -- before an expression that starts with -: tensorrun eval -- '-x' ...");
        fputs("Try 'tensorrun --help' for more information.\n", stderr);
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < a.overrides.ninputs; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(a.overrides.inputs[i].name, a.overrides.inputs[k].name) == 0) {
                status = usage_error("-i: input '%s' is given twice", a.overrides.inputs[i].name);
                run_args_free(&a);
                return status;
            }
    print = a.print ||
            (a.neval_outputs == 0 && a.format == TIO_FORMAT_UNKNOWN && isatty(STDOUT_FILENO));
    diag_init(&d, EVAL_PLACE, a.operands[0], strlen(a.operands[0]));
    p = build(a.operands[0], &a, print, &d);
    if (!p) {
        msg_error(NULL, "out of memory");
        status = EXIT_OOM;
    } else if (diag_exit_code(&d) != EXIT_OK) {
        status = diag_exit_code(&d);
        diag_print(&d, stderr);
    } else {
        if (print) {
            a.options.print_name = last_value(&p->stages[0]);
            a.options.print_out = stdout;
        }
        status = run_loaded(p, &d, &a);
    }
    pipeline_free(p);
    diag_free(&d);
    run_args_free(&a);
    return status;
}
