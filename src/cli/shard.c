/*
 * shard.c - which shard a run is (see shard.h): Slurm's job-array
 * variables, and the output paths of the shards.
 */
#include "config.h"

#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "msg.h"
#include "plan.h"
#include "program.h"
#include "tensorrun_io.h"

/* A whole number from text, in [min, max]. */
static bool number(const char *text, int64_t min, int64_t max, int64_t *out)
{
    return text && parse_int(text, min, max, out);
}

/* The variable name, as a whole number; false after a usage error. */
static bool slurm_var(const char *name, int64_t min, int64_t *out, int *status)
{
    const char *v = getenv(name);

    if (!v || !*v) {
        *status = usage_error("--shard auto: %s is not set: this is not a task of a Slurm job "
                              "array (give --shard K/N)", name);
        return false;
    }
    if (!number(v, min, INT32_MAX, out)) {
        *status = usage_error("--shard auto: %s=%s is not a whole number", name, v);
        return false;
    }
    return true;
}

int shard_parse(const char *arg, int *k, int *n)
{
    int64_t kk, nn, id, lo, step, count, hi;
    const char *slash = strchr(arg, '/');
    char head[32];
    int status = EXIT_OK;

    if (strcmp(arg, "auto") == 0)
        goto automatic;
    if (!slash || (size_t)(slash - arg) >= sizeof head || !number(slash + 1, 1, SHARD_MAX, &nn))
        return usage_error("--shard: '%s' is not K/N, auto/N or auto (such as --shard 2/8)",
                           arg);
    snprintf(head, sizeof head, "%.*s", (int)(slash - arg), arg);
    if (strcmp(head, "auto") == 0) {
        /* --array=1-N: the task id is the shard */
        if (!slurm_var("SLURM_ARRAY_TASK_ID", 0, &kk, &status))
            return status;
        if (kk < 1 || kk > nn)
            return usage_error("--shard auto/%lld: SLURM_ARRAY_TASK_ID=%lld is not a shard from "
                               "1 to %lld (submit the array as --array=1-%lld)",
                               (long long)nn, (long long)kk, (long long)nn, (long long)nn);
    } else if (!number(head, 1, SHARD_MAX, &kk) || kk > nn) {
        return usage_error("--shard %s: K/N needs 1 <= K <= N (N at most %d)", arg, SHARD_MAX);
    }
    *k = (int)kk;
    *n = (int)nn;
    return EXIT_OK;
automatic:
    if (!slurm_var("SLURM_ARRAY_TASK_ID", 0, &id, &status) ||
        !slurm_var("SLURM_ARRAY_TASK_MIN", 0, &lo, &status) ||
        !slurm_var("SLURM_ARRAY_TASK_STEP", 1, &step, &status) ||
        !slurm_var("SLURM_ARRAY_TASK_COUNT", 1, &count, &status))
        return status;
    /* an array with a step (0-30:2), not a list (1,3,7): evenly spaced */
    if (getenv("SLURM_ARRAY_TASK_MAX") && number(getenv("SLURM_ARRAY_TASK_MAX"), 0, INT32_MAX, &hi) &&
        hi != lo + (count - 1) * step)
        return usage_error("--shard auto: the job array is not evenly spaced (from %lld to %lld "
                           "by %lld is not %lld tasks): give --shard auto/N with --array=1-N",
                           (long long)lo, (long long)hi, (long long)step, (long long)count);
    if (id < lo || (id - lo) % step != 0 || (id - lo) / step + 1 > count)
        return usage_error("--shard auto: task %lld is not one of %lld tasks from %lld by %lld",
                           (long long)id, (long long)count, (long long)lo, (long long)step);
    if (count > SHARD_MAX)
        return usage_error("--shard auto: %lld tasks are more than %d shards", (long long)count,
                           SHARD_MAX);
    *k = (int)((id - lo) / step + 1);
    *n = (int)count;
    return EXIT_OK;
}

/* path with every {shard} and {shards} replaced; NULL when out of memory. */
static char *substitute(const char *path, const char *shard, const char *shards)
{
    size_t len = strlen(path), cap = len + 1;
    char *out;

    for (const char *p = strchr(path, '{'); p; p = strchr(p + 1, '{'))
        cap += strlen(shard) + strlen(shards);
    out = malloc(cap);
    if (!out)
        return NULL;
    for (size_t i = 0, o = 0;; ) {
        if (strncmp(path + i, "{shards}", 8) == 0) {
            o += (size_t)sprintf(out + o, "%s", shards);
            i += 8;
        } else if (strncmp(path + i, "{shard}", 7) == 0) {
            o += (size_t)sprintf(out + o, "%s", shard);
            i += 7;
        } else if ((out[o++] = path[i++]) == '\0') {
            break;
        }
    }
    return out;
}

int shard_outputs(struct pipeline *p)
{
    int k = p->shard_n ? p->shard_k : 1, n = p->shard_n ? p->shard_n : 1;
    char shard[16], shards[16];

    snprintf(shards, sizeof shards, "%d", n);
    snprintf(shard, sizeof shard, "%0*d", (int)strlen(shards), k);
    for (size_t i = 0; i < p->noutputs; i++) {
        struct output *o = &p->outputs[i];
        char *path;
        if (!o->path)
            continue;
        if (p->shard_n && strcmp(o->path, "-") == 0)
            return usage_error("--shard: output '%s' goes to standard output, which the shards "
                               "would share: give it a path with {shard} in it", o->name);
        if (p->shard_n && !strstr(o->path, "{shard}"))
            return usage_error("--shard: output '%s' (%s) has no {shard} in its path, so every "
                               "shard would write the same file (such as -o %s=part-{shard}.npy)",
                               o->name, o->path, o->name);
        if (!strchr(o->path, '{'))
            continue;
        path = substitute(o->path, shard, shards);
        if (!path) {
            msg_error(NULL, "out of memory");
            return EXIT_OOM;
        }
        free(o->path);
        o->path = path;
    }
    return EXIT_OK;
}

/* Whether path ("-": standard input) is not a regular file: a pipe, a
 * FIFO, a device, which cannot be read from the middle. */
static bool is_pipe(const char *path)
{
    struct stat st;
    int rc = strcmp(path, "-") == 0 ? fstat(STDIN_FILENO, &st) : stat(path, &st);

    return rc == 0 && !S_ISREG(st.st_mode);
}

int shard_check_plan(const struct plan *plan)
{
    const struct program *prog = plan->program;
    bool any = false;

    if (!plan->pipeline->shard_n)
        return EXIT_OK;
    for (size_t s = 0; s < prog->nstages; s++) {
        const struct program_stage *st = &prog->stages[s];
        any |= st->nover > 0;
        for (size_t c = 0; c < st->nover; c++) {
            const struct value *v = &prog->values[st->over[c]];
            const struct plan_input *in;
            if (v->origin != ORIGIN_INPUT)
                continue;
            in = &plan->inputs[v->input];
            if (in->file && is_pipe(in->input->path) &&
                tio_file_compression(in->file) == TIO_COMPRESSION_NONE)
                return usage_error("--shard: input '%s' (%s) is a pipe, which every shard would "
                                   "have to read whole: give it as a file",
                                   in->input->name, in->input->path);
        }
    }
    if (!any)
        msg_warning(NULL, "--shard %d/%d: the pipeline has no foreach stage, so every shard "
                          "does all the work", plan->pipeline->shard_k, plan->pipeline->shard_n);
    return EXIT_OK;
}

void shard_warn_unsharded(void)
{
    const char *id = getenv("SLURM_ARRAY_TASK_ID");

    if (id && *id)
        msg_warning(NULL, "this is task %s of a Slurm job array, and every task does all the "
                          "work: give --shard auto (or --shard auto/N) to split it", id);
}
