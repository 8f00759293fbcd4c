/*
 * run.c - `tensorrun run PIPELINE.yaml` (also `tensorrun PIPELINE.yaml`)
 * and the run options it shares with `tensorrun eval`.
 */
#include "config.h"

#include "run.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "msg.h"
#include "plan.h"
#include "tensorrun_io.h"

enum {
    OPT_DEVICE = 256, OPT_THREADS, OPT_MEMORY_LIMIT, OPT_KEEP_CACHE, OPT_STATS, OPT_STATS_FILE,
    OPT_PROGRESS, OPT_NO_PROGRESS, OPT_FSYNC, OPT_PRINT
};

static const struct option options[] = {
    {"set", required_argument, NULL, 'D'},
    {"input", required_argument, NULL, 'i'},
    {"output", required_argument, NULL, 'o'},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
    {"keep-cache", no_argument, NULL, OPT_KEEP_CACHE},
    {"stats", required_argument, NULL, OPT_STATS},
    {"stats-file", required_argument, NULL, OPT_STATS_FILE},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"fsync", no_argument, NULL, OPT_FSYNC},
    {"dry-run", no_argument, NULL, 'n'},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"print", no_argument, NULL, OPT_PRINT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char run_options_help[] =
    "  -D, --set NAME=VALUE     set a pipeline parameter (repeatable)\n"
    "  -i, --input NAME=PATH    read input NAME from PATH ('-' is standard input)\n"
    "      --device DEV         default device: cpu, cuda, cuda:N or auto\n"
    "      --threads N          CPU threads (default: every online core)\n"
    "      --memory-limit SIZE  cap on the pool's reserved bytes (512M, 2G, 1.5GiB)\n"
    "      --keep-cache         do not release the pool's idle cache between stages\n"
    "      --stats FORMAT       statistics on stderr: text, json or none\n"
    "      --stats-file PATH    write the statistics to PATH instead\n"
    "      --progress, --no-progress\n"
    "                           a progress line on stderr (default: on a terminal)\n"
    "      --fsync              flush outputs and their directories to disk\n"
    "  -n, --dry-run            check and print the plan; compute and write nothing\n"
    "  -q, --quiet              no statistics, no progress\n"
    "  -v, --verbose            the time of every statement too\n";

static void print_help(bool eval)
{
    if (eval)
        fputs("Usage: tensorrun eval 'STATEMENTS' [-i NAME=PATH]... [-o [NAME=]PATH]... [OPTIONS]\n"
              "\n"
              "Run statements separated by ';' (or one bare expression, whose value is called\n"
              "'out') as a one-stage pipeline.  Without -o, the last value goes to standard\n"
              "output: as .npy bytes into a pipe or file, as text on a terminal or with --print.\n"
              "\n"
              "Options:\n"
              "  -o, --output [NAME=]PATH write NAME (default: the last value bound) to PATH\n"
              "      --print              print the last value as text on standard output\n",
              stdout);
    else
        fputs("Usage: tensorrun run PIPELINE.yaml [OPTIONS]\n"
              "       tensorrun PIPELINE.yaml [OPTIONS]\n"
              "\n"
              "Run a pipeline: every stage in its own memory scope, outputs renamed into\n"
              "place together when the whole run succeeds, statistics after every stage.\n"
              "\n"
              "Options:\n"
              "  -o, --output NAME=PATH   write value NAME to PATH ('-' is standard output)\n",
              stdout);
    fputs(run_options_help, stdout);
    fputs("\nSee tensorrun(1).\n", stdout);
}

static bool add_eval_output(struct run_args *a, const char *text)
{
    const char **grown = realloc(a->eval_outputs, (a->neval_outputs + 1) * sizeof *grown);

    if (!grown)
        return false;
    a->eval_outputs = grown;
    a->eval_outputs[a->neval_outputs++] = text;
    return true;
}

static int parse_one(int c, const char *arg, bool eval, struct run_args *a)
{
    int64_t n;

    switch (c) {
    case 'D':
    case 'i':
        return parse_override(c, arg, &a->overrides) ? EXIT_OK : EXIT_USAGE;
    case 'o':
        if (eval)
            return add_eval_output(a, arg) ? EXIT_OK : EXIT_OOM;
        return parse_override(c, arg, &a->overrides) ? EXIT_OK : EXIT_USAGE;
    case OPT_DEVICE:
        a->device_given = true;
        a->device_auto = strcmp(arg, "auto") == 0;
        if (!a->device_auto && tr_device_parse(arg, &a->device) != TR_OK)
            return usage_error("--device: '%s' is not a device (cpu, cuda, cuda:N or auto)", arg);
        return EXIT_OK;
    case OPT_THREADS:
        if (!parse_int(arg, 1, 4096, &n))
            return usage_error("--threads: '%s' is not a number of threads (1 to 4096)", arg);
        a->options.threads = (int)n;
        return EXIT_OK;
    case OPT_MEMORY_LIMIT:
        if (!parse_size(arg, &a->options.memory_limit) || a->options.memory_limit == 0)
            return usage_error("--memory-limit: '%s' is not a size (such as 512M, 2G or 1.5GiB)",
                               arg);
        return EXIT_OK;
    case OPT_KEEP_CACHE:
        a->options.keep_cache = true;
        return EXIT_OK;
    case OPT_STATS:
        a->stats_given = true;
        if (strcmp(arg, "text") == 0)
            a->options.stats = REPORT_TEXT;
        else if (strcmp(arg, "json") == 0)
            a->options.stats = REPORT_JSON;
        else if (strcmp(arg, "none") == 0)
            a->options.stats = REPORT_NONE;
        else
            return usage_error("--stats: '%s' is not text, json or none", arg);
        return EXIT_OK;
    case OPT_STATS_FILE:
        a->stats_file = arg;
        return EXIT_OK;
    case OPT_PROGRESS:
        a->options.progress = PROGRESS_ON;
        return EXIT_OK;
    case OPT_NO_PROGRESS:
        a->options.progress = PROGRESS_OFF;
        return EXIT_OK;
    case OPT_FSYNC:
        a->options.fsync = true;
        return EXIT_OK;
    case 'n':
        a->dry_run = true;
        return EXIT_OK;
    case 'q':
        a->quiet = true;
        a->options.verbosity = -1;
        return EXIT_OK;
    case 'v':
        a->options.verbosity = 1;
        return EXIT_OK;
    case OPT_PRINT:
        if (!eval)
            return usage_error("run: unknown option '--print'");
        a->print = true;
        return EXIT_OK;
    default:
        return usage_error("unknown option");
    }
}

int run_args_parse(int argc, char **argv, bool eval, struct run_args *a)
{
    const char *command = eval ? "eval" : "run";

    memset(a, 0, sizeof *a);
    a->options.stats = eval ? REPORT_NONE : REPORT_TEXT;
    a->options.stats_out = stderr;
    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, ":D:i:o:nqvh", options, NULL), status;
        if (c == -1)
            break;
        if (c == 'h') {
            print_help(eval);
            return -1;
        }
        if (c == ':')
            return usage_error("%s: option '%s' needs a value", command, argv[optind - 1]);
        if (c == '?')
            return usage_error("%s: unknown option '%s'", command, argv[optind - 1]);
        status = parse_one(c, optarg, eval, a);
        if (status != EXIT_OK)
            return status;
    }
    if (a->quiet && !a->stats_given)
        a->options.stats = REPORT_NONE;
    if (a->quiet && a->options.progress == PROGRESS_AUTO)
        a->options.progress = PROGRESS_OFF;
    return EXIT_OK;
}

void run_args_free(struct run_args *a)
{
    overrides_free(&a->overrides);
    free(a->eval_outputs);
    a->eval_outputs = NULL;
}

void check_input_memory(const struct plan *plan, uint64_t limit, struct diag_list *d)
{
    uint64_t total = 0;

    for (size_t i = 0; limit && i < plan->ninputs; i++) {
        const struct plan_input *pi = &plan->inputs[i];
        const struct input *in = pi->input;
        uint64_t bytes = pi->file ? tio_file_pool_bytes(pi->file, pi->index) : 0;
        char need[16], lim[16];
        const char *why;

        total += tr_memory_block_size(bytes);
        if (total <= limit)
            continue;
        why = tio_file_compression(pi->file) == TIO_COMPRESSION_ZSTD ? "decompressed"
              : !tio_file_mapped_bytes(pi->file)                   ? "read from a pipe"
                                                                     : "copied";
        diag_error_code(d, EXIT_OOM, in->path_line, in->path_col,
                        "raise --memory-limit, or give the input uncompressed in a file, "
                        "which is mapped rather than read into memory",
                        "input '%s': %s: its data takes %s (%llu bytes, %s, as its header "
                        "says) of pool memory, past the memory limit of %s",
                        in->name, in->path, tr_format_bytes(bytes, need, sizeof need),
                        (unsigned long long)bytes, why, tr_format_bytes(limit, lim, sizeof lim));
        return;
    }
}

int run_loaded(struct pipeline *p, struct diag_list *d, struct run_args *a)
{
    struct plan *plan;
    int status;

    if (a->device_given) {
        p->has_device = true;
        p->device_auto = a->device_auto;
        p->device = a->device_auto ? TR_CPU : a->device;
    }
    /* inputs read into memory (zstd, pipes) count from their first byte */
    if (!a->dry_run && tr_memory_set_limit(TR_CPU, a->options.memory_limit) != TR_OK) {
        msg_error(NULL, "%s", tr_last_error());
        return EXIT_RUNTIME;
    }
    plan = plan_build(p, d, !a->dry_run);
    if (plan && diag_exit_code(d) == EXIT_OK)
        check_input_memory(plan, a->options.memory_limit, d);
    status = plan ? diag_exit_code(d) : EXIT_OOM;
    diag_print(d, stderr);
    if (check_inputs_unchanged() != EXIT_OK)
        status = EXIT_IO; /* opening an input read some of it */
    if (status == EXIT_OK && a->dry_run)
        plan_print(plan, stdout);
    if (status == EXIT_OK && !a->dry_run) {
        FILE *stats = NULL;
        if (a->stats_file && strcmp(a->stats_file, "-") != 0) {
            stats = fopen(a->stats_file, "w");
            if (!stats) {
                msg_error(a->stats_file, "cannot write the statistics here: %s", strerror(errno));
                plan_free(plan);
                return EXIT_IO;
            }
            a->options.stats_out = stats;
        } else if (a->stats_file) {
            a->options.stats_out = stdout;
        }
        status = exec_run(plan, &a->options);
        if (stats && fclose(stats) != 0 && status == EXIT_OK) {
            msg_error(a->stats_file, "write error: %s", strerror(errno));
            status = EXIT_IO;
        }
    }
    plan_free(plan);
    return status;
}

int cmd_run(int argc, char **argv)
{
    struct run_args a;
    struct diag_list d;
    struct pipeline *p;
    int status = run_args_parse(argc, argv, false, &a);

    if (status != EXIT_OK) {
        run_args_free(&a);
        return status < 0 ? EXIT_OK : status;
    }
    if (argc - optind != 1) {
        run_args_free(&a);
        return usage_error("run: expected one pipeline file%s",
                           argc - optind > 1 ? ", and options after it" : "");
    }
    diag_init(&d, argv[optind], NULL, 0);
    p = pipeline_load(argv[optind], &a.overrides, &d);
    if (p) {
        status = run_loaded(p, &d, &a);
    } else {
        status = diag_exit_code(&d);
        diag_print(&d, stderr);
    }
    pipeline_free(p);
    diag_free(&d);
    run_args_free(&a);
    return status;
}
