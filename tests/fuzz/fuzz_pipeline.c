/*
 * fuzz_pipeline.c - libFuzzer target for the pipeline reader: YAML tree,
 * schema checks, statements (expr.c), command-line overrides and the
 * printed diagnostics.
 *
 * The bytes become a file (a memfd, named through /proc/self/fd) that
 * pipeline_load reads, with a few -D, -i and -o overrides applied.  What a
 * load promises is checked: NULL only when the file cannot be read, errors
 * exactly when something is wrong, and without errors a complete struct
 * (every name, path, statement and output format present).  A broken
 * promise aborts, so libFuzzer reports it as a crash.
 *
 * Build with clang, -fsanitize=fuzzer,address,undefined, this file, the
 * cli sources it needs (pipeline.c yaml.c expr.c diag.c msg.c suggest.c)
 * and the engine's and io's, with -iquote src/cli (not -I: src/cli/yaml.h
 * would shadow libyaml's <yaml.h>); link -lyaml.  Run with the seeds:
 *
 *   ./fuzz_pipeline -max_total_time=300 CORPUS_DIR tests/fuzz/seeds-pipeline
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];
static FILE *sink;

static void check(bool cond)
{
    if (!cond)
        abort();
}

static void setup(void)
{
    fd = memfd_create("pipeline.yaml", MFD_CLOEXEC);
    check(fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sink = fopen("/dev/null", "w");
    check(sink != NULL);
}

/* Without errors, everything a later pass reads is there. */
static void check_complete(const struct pipeline *p)
{
    check(p->root && p->version == PIPELINE_FORMAT && p->nstages > 0);
    for (size_t i = 0; i < p->nparams; i++)
        check(p->params[i].name && p->params[i].string);
    for (size_t i = 0; i < p->ninputs; i++) {
        const struct input *in = &p->inputs[i];
        check(in->name && in->path && in->path[0]);
        if (in->has_raw) {
            check(in->format == TIO_FORMAT_RAW && (unsigned)in->raw.dtype < TR_DTYPE_COUNT);
            check(in->raw.ndim >= 0 && in->raw.ndim <= TR_MAX_DIMS && in->raw.offset >= 0);
            for (int d = 0; d < in->raw.ndim; d++)
                check(in->raw.shape[d] >= 0);
        }
    }
    for (size_t i = 0; i < p->nstages; i++) {
        const struct stage *st = &p->stages[i];
        check(st->name && st->nstatements > 0);
        for (size_t j = 0; j < st->nstatements; j++)
            check(st->statements[j] && st->statements[j]->ntargets > 0 &&
                  st->statements[j]->value);
        for (size_t j = 0; j < st->nkeep; j++)
            check(st->keep[j].name != NULL);
        check(!st->has_foreach || (st->foreach_over && st->foreach_size > 0));
    }
    for (size_t i = 0; i < p->noutputs; i++) {
        const struct output *o = &p->outputs[i];
        check(o->name && o->path && o->format != TIO_FORMAT_UNKNOWN);
        check(!(o->dtype == TR_DTYPE_BF16 && o->format == TIO_FORMAT_NPY &&
                o->dtype_line > 0));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct override sets[] = {{"k", "3", false}, {"eps", "0.5", false},
                              {"shape", "[2, [0x3, x], \"s\"]", false}};
    struct override inputs[] = {{"x", "x.npy", false}};
    struct override outputs[] = {{"y", "y.npy", false}, {"extra", "e.safetensors", false}};
    struct overrides ov = {sets, inputs, outputs, 3, 1, 2};
    struct diag_list diags;
    struct pipeline *p;

    if (fd < 0)
        setup();
    check(ftruncate(fd, 0) == 0);
    check(pwrite(fd, data, size, 0) == (ssize_t)size);

    for (int round = 0; round < 2; round++) {
        diag_init(&diags, path, NULL, 0);
        p = pipeline_load(path, round ? &ov : NULL, &diags);
        check(p != NULL); /* the file is always readable */
        check(diags.text == p->text && diags.len == size);
        for (size_t i = 0; i < diags.count; i++)
            check(diags.items[i].line >= 0 && diags.items[i].col >= 0);
        diag_print(&diags, sink);
        if (diags.errors == 0)
            check_complete(p);
        else
            check(diag_exit_code(&diags) != 0);
        if (!p->root)
            check(diags.errors > 0 && p->nstages == 0 && p->ninputs == 0);
        pipeline_free(p);
        diag_free(&diags);
    }
    return 0;
}
