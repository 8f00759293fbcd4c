/*
 * run.c - `tensorrun run PIPELINE.yaml` (also `tensorrun PIPELINE.yaml`)
 * and the run options it shares with `tensorrun eval`.
 */
#include "config.h"

#include "run.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "msg.h"
#include "plan.h"
#include "program_print.h"
#include "shard.h"
#include "tensorrun_io.h"

enum {
    OPT_DEVICE = 256, OPT_FORCE_DEVICE, OPT_THREADS, OPT_MEMORY_LIMIT, OPT_KEEP_CACHE, OPT_STATS,
    OPT_STATS_FILE, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_FSYNC, OPT_PRINT, OPT_FORMAT, OPT_JSON,
    OPT_SHARD
};

static const struct option options[] = {
    {"set", required_argument, NULL, 'D'},
    {"input", required_argument, NULL, 'i'},
    {"output", required_argument, NULL, 'o'},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"force-device", required_argument, NULL, OPT_FORCE_DEVICE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
    {"keep-cache", no_argument, NULL, OPT_KEEP_CACHE},
    {"stats", required_argument, NULL, OPT_STATS},
    {"stats-file", required_argument, NULL, OPT_STATS_FILE},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"fsync", no_argument, NULL, OPT_FSYNC},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"dry-run", no_argument, NULL, 'n'},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"print", no_argument, NULL, OPT_PRINT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char run_options_help[] =
    "  -D, --set NAME=VALUE     set a pipeline parameter (repeatable)\n"
    "  -i, --input NAME=PATH[:KEY]\n"
    "                           read input NAME from PATH ('-' is standard input);\n"
    "                           :KEY picks one tensor of a .safetensors file\n"
    "      --device DEV         default device for stages that name none: cpu, cuda,\n"
    "                           cuda:N or auto\n"
    "      --force-device DEV   every stage on DEV (cpu, cuda or cuda:N), whatever the\n"
    "                           stages say\n"
    "      --threads N          CPU threads (default: every online core)\n"
    "      --memory-limit SIZE  cap on each pool's active bytes (512M, 2G, 1.5GiB), or\n"
    "                           per device: cpu=8G,cuda=60G\n"
    "      --keep-cache         do not release the pool's idle cache between stages\n"
    "      --stats FORMAT       statistics on stderr: text, json or none\n"
    "      --stats-file PATH    write the statistics to PATH instead\n"
    "      --progress, --no-progress\n"
    "                           a progress line on stderr (default: on a terminal)\n"
    "      --fsync              flush outputs and their directories to disk\n"
    "      --shard K/N|auto/N|auto\n"
    "                           run the K-th of N ranges of every foreach stage's blocks\n"
    "                           (auto: a Slurm job array's task); outputs need {shard}\n"
    "  -n, --dry-run            check and print the program; compute and write nothing\n"
    "      --json               with --dry-run: the program as JSON (else a usage error)\n"
    "  -q, --quiet              no statistics, no progress\n"
    "  -v, --verbose            the time of every statement too\n";

static const char validate_options_help[] =
    "  -D, --set NAME=VALUE     set a pipeline parameter (repeatable)\n"
    "  -i, --input NAME=PATH[:KEY]\n"
    "                           read input NAME from PATH (:KEY: one tensor of it)\n"
    "  -o, --output NAME=PATH   write value NAME to PATH\n"
    "      --device DEV         default device for stages that name none\n"
    "      --force-device DEV   every stage on DEV (cpu, cuda or cuda:N)\n"
    "      --threads N          CPU threads the run would use\n"
    "      --memory-limit SIZE  the run's cap on pool memory (512M, 2G, 1.5GiB, or per\n"
    "                           device: cpu=8G,cuda=60G)\n"
    "      --shard K/N|auto/N|auto\n"
    "                           the blocks of shard K of N (see run --help)\n"
    "      --json               the program as JSON\n";

static void print_help(enum run_command command)
{
    bool eval = command == RUN_COMMAND_EVAL;

    if (command == RUN_COMMAND_VALIDATE) {
        fputs("Usage: tensorrun validate PIPELINE.yaml [OPTIONS]\n"
              "\n"
              "Check everything that can be checked without computing (the schema, every\n"
              "statement, the inputs' headers, the outputs' directories), report every error,\n"
              "and print the plan.  Exit 0 exactly when run would start computing.\n"
              "\n"
              "Options:\n",
              stdout);
        fputs(validate_options_help, stdout);
        fputs("\nSee tensorrun(1).\n", stdout);
        return;
    }
    if (eval)
        fputs("Usage: tensorrun eval 'STATEMENTS' [-i NAME=PATH]... [-o [NAME=]PATH]... [OPTIONS]\n"
              "\n"
              "Run statements separated by ';' (or one bare expression, whose value is called\n"
              "'out') as a one-stage pipeline.  Without -o, the last value goes to standard\n"
              "output: as .npy bytes into a pipe or file, as text on a terminal or with --print.\n"
              "A rank-0 value goes as a number and a newline, into a pipe or file too.\n"
              "Put -- before statements that start with '-': tensorrun eval -- '-x' -i x=a.npy\n"
              "\n"
              "Options:\n"
              "  -o, --output [NAME=]PATH write NAME (default: the last value bound) to PATH\n"
              "      --print              print the last value as text on standard output\n"
              "      --format FORMAT      write bytes to standard output, even of a rank-0\n"
              "                           value: npy, safetensors or raw (optionally .zst)\n",
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

/* Whether validate takes option c: those that change what the plan says. */
static bool validate_takes(int c)
{
    return c == 'D' || c == 'i' || c == 'o' || c == OPT_DEVICE || c == OPT_FORCE_DEVICE ||
           c == OPT_THREADS || c == OPT_MEMORY_LIMIT || c == OPT_JSON || c == OPT_SHARD;
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
    case OPT_FORCE_DEVICE:
        a->force_given = true;
        if (strcmp(arg, "auto") == 0 || tr_device_parse(arg, &a->force_device) != TR_OK) {
            tr_clear_error();
            return usage_error("--force-device: '%s' is not a device (cpu, cuda or cuda:N)", arg);
        }
        return EXIT_OK;
    case OPT_THREADS:
        if (!parse_int(arg, 1, 4096, &n))
            return usage_error("--threads: '%s' is not a number of threads (1 to 4096)", arg);
        a->options.threads = (int)n;
        return EXIT_OK;
    case OPT_MEMORY_LIMIT: {
        char why[160];
        if (!memory_limits_parse(arg, &a->options.limits, why, sizeof why))
            return usage_error("--memory-limit: %s (a size, such as 512M, 2G or 1.5GiB, or "
                               "sizes per device, such as cpu=8G,cuda=60G)",
                               why);
        return EXIT_OK;
    }
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
    case OPT_SHARD:
        if (eval)
            return usage_error("eval: --shard splits foreach stages, which eval has none of");
        return shard_parse(arg, &a->shard_k, &a->shard_n);
    case 'n':
        a->dry_run = true;
        return EXIT_OK;
    case OPT_JSON:
        a->json = true;
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
    case OPT_FORMAT: {
        char word[32];
        size_t len = strlen(arg);
        bool zstd = len > 4 && strcmp(arg + len - 4, ".zst") == 0;
        if (!eval)
            return usage_error("run: unknown option '--format' (an output's format: follows "
                               "its name, or format: in the pipeline)");
        snprintf(word, sizeof word, "%.*s", (int)(zstd ? len - 4 : len), arg);
        if (len >= sizeof word || tio_format_parse(word, &a->format) != TR_OK ||
            a->format == TIO_FORMAT_UNKNOWN || a->format == TIO_FORMAT_NPZ) /* read only */
            return usage_error("eval: --format: unknown format '%s' (expected npy, safetensors "
                               "or raw, each optionally followed by .zst)", arg);
        a->compression = zstd ? TIO_COMPRESSION_ZSTD : TIO_COMPRESSION_NONE;
        return EXIT_OK;
    }
    default:
        return usage_error("unknown option");
    }
}

/* Whether word, an option of the command line, takes the next word as
 * its value ("-i", "-qo", "--input", not "--input=x"). */
static bool takes_next_word(const char *word, const char *shortopts)
{
    size_t len = strlen(word);

    if (word[0] != '-' || len < 2)
        return false;
    if (word[1] == '-') {
        if (strchr(word, '='))
            return false;
        for (const struct option *o = options; o->name; o++)
            if (strcmp(word + 2, o->name) == 0)
                return o->has_arg == required_argument;
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        const char *at = strchr(shortopts, word[i]);
        if (at && at[1] == ':')
            return i == len - 1; /* "-iNAME=PATH" holds its value */
    }
    return false;
}

int run_args_parse(int argc, char **argv, bool eval, struct run_args *a)
{
    return run_args_parse_for(argc, argv, eval ? RUN_COMMAND_EVAL : RUN_COMMAND_RUN, a);
}

int run_args_parse_for(int argc, char **argv, enum run_command which, struct run_args *a)
{
    static const char shortopts[] = ":D:i:o:nqvh";
    bool eval = which == RUN_COMMAND_EVAL, validate = which == RUN_COMMAND_VALIDATE;
    const char *command = eval ? "eval" : validate ? "validate" : "run";
    bool ended = false;
    int n = 0;

    memset(a, 0, sizeof *a);
    a->options.stats = eval ? REPORT_NONE : REPORT_TEXT;
    a->options.stats_out = stderr;
    /* "--" ends the options: the word after it is the operand, whatever it
     * looks like ('-x' as statements); options may still follow it */
    a->args = calloc((size_t)argc + 1, sizeof *a->args);
    if (!a->args) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !ended && strcmp(argv[i], "--") == 0 &&
            !takes_next_word(argv[i - 1], shortopts)) {
            ended = true;
            if (i + 1 < argc)
                a->protected_operand = argv[++i];
            continue;
        }
        a->args[n++] = argv[i];
    }
    opterr = 0;
    optind = 1;
    for (;;) {
        int longindex = -1;
        int c = getopt_long(n, a->args, shortopts, options, &longindex), status;
        if (c == -1)
            break;
        if (c == 'h') {
            print_help(which);
            return -1;
        }
        if (c == ':' || c == '?')
            return option_error(command, c, n, a->args, options, eval);
        if (validate && !validate_takes(c)) {
            if (longindex >= 0)
                return usage_error("validate: '--%s' is an option of run, not of validate",
                                   options[longindex].name);
            return usage_error("validate: '-%c' is an option of run, not of validate", c);
        }
        status = parse_one(c, optarg, eval, a);
        if (status != EXIT_OK)
            return status;
    }
    if (a->protected_operand)
        a->operands[a->noperands++] = a->protected_operand;
    for (int i = optind; i < n; i++) {
        if (a->noperands < 2)
            a->operands[a->noperands] = a->args[i];
        a->noperands++;
    }
    if (a->print && a->format != TIO_FORMAT_UNKNOWN)
        return usage_error("eval: --print writes text, --format bytes: give one of them");
    if (a->json && !a->dry_run && !validate)
        return usage_error("%s: --json prints the program, which only --dry-run prints "
                           "(statistics as JSON: --stats json)", command);
    a->dry_run = a->dry_run || validate;
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
    free(a->args);
    a->args = NULL;
}

int check_standard_input(const struct pipeline *p)
{
    const char *first = NULL;
    char what[128];

    for (size_t i = 0; i < p->ninputs; i++) {
        const struct input *in = &p->inputs[i];
        if (!in->path || strcmp(in->path, "-") != 0)
            continue;
        if (first)
            return usage_error("inputs '%s' and '%s' both read standard input ('-'), which can "
                               "be read once", first, in->name);
        first = in->name;
    }
    snprintf(what, sizeof what, "input '%s'", first ? first : "");
    return first && stdin_is_terminal(what) ? EXIT_USAGE : EXIT_OK;
}

/* A dry run checks what the run's tio_output_open would refuse, each
 * error at the output's place in the file, so that validate exits 4 where
 * run would. */
static void check_outputs_writable(const struct pipeline *p, struct diag_list *d)
{
    for (size_t i = 0; i < p->noutputs; i++) {
        const struct output *o = &p->outputs[i];
        bool seen = false;
        if (!o->path)
            continue;
        for (size_t k = 0; k < i && !seen; k++)
            seen = p->outputs[k].path && strcmp(p->outputs[k].path, o->path) == 0;
        if (seen)
            continue;
        if (tio_output_check(o->path) != TR_OK) {
            diag_error_code(d, exit_for_status(tr_last_status()), o->line, o->col, NULL,
                            "output '%s': %s", o->name, tr_last_error());
            tr_clear_error();
        }
    }
}

void check_input_memory(const struct plan *plan, uint64_t limit, struct diag_list *d)
{
    uint64_t total = 0;

    for (size_t i = 0; limit && i < plan->ninputs; i++) {
        const struct plan_input *pi = &plan->inputs[i];
        const struct input *in = pi->input;
        uint64_t bytes = pi->file && !pi->streamed ? tio_file_pool_bytes(pi->file, pi->index) : 0;
        char need[16], lim[16];
        const char *why;

        total += tr_memory_block_size(bytes);
        if (total <= limit)
            continue;
        why = tio_file_compression(pi->file) == TIO_COMPRESSION_ZSTD ? "decompressed"
              : !tio_file_mapped_bytes(pi->file)                   ? "read from a pipe"
              : tio_file_is_deflated(pi->file, pi->index)          ? "inflated"
                                                                     : "copied";
        diag_error_code(d, EXIT_OOM, in->path_line, in->path_col,
                        strcmp(why, "copied") == 0
                            ? "raise --memory-limit: data that is big-endian, or not "
                              "aligned to its item size, is copied, not mapped"
                        : strcmp(why, "inflated") == 0
                            ? "raise --memory-limit, or store the member uncompressed "
                              "(numpy.savez, not savez_compressed), which is mapped"
                            : "raise --memory-limit, or give the input uncompressed in a "
                              "file, which is mapped rather than read into memory",
                        "input '%s': %s: out of memory: its data takes %s (%llu bytes, %s, "
                        "as its header says) of pool memory, past the memory limit of %s "
                        "(%llu bytes)",
                        in->name, in->path, tr_format_bytes(bytes, need, sizeof need),
                        (unsigned long long)bytes, why, tr_format_bytes(limit, lim, sizeof lim),
                        (unsigned long long)limit);
        return;
    }
}

void check_stage_memory(const struct plan *plan, const struct memory_limits *limits,
                        struct diag_list *d)
{
    const struct program *prog = plan->program;
    const struct stage_memory *b = &prog->before;
    uint64_t limit = memory_limit_of(limits, TR_CPU);

    if (limit && b->peak_bytes > limit) {
        char need[16], lim[16];
        const struct instr *at = b->peak_at != SIZE_MAX ? &prog->instrs[b->peak_at] : NULL;
        const struct output *out =
            at && at->kind == INSTR_WRITE
                ? &plan->pipeline->outputs[prog->groups[at->group].members[0]]
                : NULL;
        diag_error_code(d, 5, out ? out->line : 1, out ? out->col : 1,
                        "raise --memory-limit; an input given uncompressed in a file is mapped, "
                        "not read into memory",
                        "%s needs %s (%llu bytes) of pool memory on cpu, past the memory limit "
                        "of %s (%llu bytes)",
                        at ? "writing the outputs made of inputs alone, before the stages,"
                           : "reading the inputs",
                        tr_format_bytes(b->peak_bytes, need, sizeof need),
                        (unsigned long long)b->peak_bytes, tr_format_bytes(limit, lim, sizeof lim),
                        (unsigned long long)limit);
        return;
    }

    for (size_t s = 0; s < prog->nstages; s++) {
        const struct program_stage *st = &prog->stages[s];
        const struct stage *stage = plan->stages[s].stage;
        for (size_t k = 0; k < st->nmemory; k++) {
            const struct stage_memory *m = &st->memory[k];
            char need[16], lim[16], dev[TR_DEVICE_NAME_MAX];
            int line = stage->line, col = stage->col;
            uint64_t cpu_limit = memory_limit_of(limits, TR_CPU);
            limit = memory_limit_of(limits, m->device);
            if (!limit || m->peak_bytes <= limit)
                continue;
            if (m->peak_at != SIZE_MAX) {
                line = prog->instrs[m->peak_at].line;
                col = prog->instrs[m->peak_at].col;
            }
            tr_format_bytes(m->peak_bytes, need, sizeof need);
            tr_format_bytes(limit, lim, sizeof lim);
            tr_device_format(m->device, dev, sizeof dev);
            if (st->has_fallback && tr_device_equal(m->device, st->device) &&
                (!cpu_limit || st->fallback_peak_bytes <= cpu_limit)) {
                /* auto's stage runs out there, and again on the CPU */
                diag_warning(d, line, col, NULL,
                             "stage '%s' needs %s (%llu bytes) of pool memory on %s at its "
                             "peak, past its memory limit of %s: it will fall back to the CPU",
                             stage->name ? stage->name : "?", need,
                             (unsigned long long)m->peak_bytes, dev, lim);
                continue;
            }
            diag_error_code(d, 5, line, col,
                            "raise --memory-limit, or make the stage's values smaller (a "
                            "foreach stage works block by block)",
                            "stage '%s' needs %s (%llu bytes) of pool memory on %s at its peak, "
                            "here, past the memory limit of %s (%llu bytes)",
                            stage->name ? stage->name : "?", need,
                            (unsigned long long)m->peak_bytes, dev, lim,
                            (unsigned long long)limit);
            return;
        }
    }
}

int run_loaded(struct pipeline *p, struct diag_list *d, struct run_args *a)
{
    struct plan *plan;
    int status = check_standard_input(p);

    if (status != EXIT_OK) {
        diag_print(d, stderr);
        return status;
    }
    if (a->device_given) {
        p->has_device = true;
        p->device_auto = a->device_auto;
        p->device = a->device_auto ? TR_CPU : a->device;
    }
    p->has_force_device = a->force_given;
    p->force_device = a->force_device;
    p->threads = a->options.threads;
    p->print_name = a->options.print_name;
    p->shard_k = a->shard_k;
    p->shard_n = a->shard_n;
    status = shard_outputs(p);
    if (status != EXIT_OK)
        return status;
    if (!a->shard_n)
        shard_warn_unsharded();
    /* inputs read into memory (zstd, pipes) count from their first byte */
    if (!a->dry_run &&
        tr_memory_set_limit(TR_CPU, memory_limit_of(&a->options.limits, TR_CPU)) != TR_OK) {
        msg_error(NULL, "%s", tr_last_error());
        return EXIT_RUNTIME;
    }
    /* the peak before the first stage starts with the inputs' opening */
    if (!a->dry_run)
        tr_memory_reset_peak(TR_CPU);
    plan = plan_build(p, d, !a->dry_run);
    if (plan && diag_exit_code(d) == EXIT_OK && shard_check_plan(plan) != EXIT_OK) {
        diag_print(d, stderr);
        plan_free(plan);
        return EXIT_USAGE;
    }
    if (plan && diag_exit_code(d) == EXIT_OK)
        check_input_memory(plan, memory_limit_of(&a->options.limits, TR_CPU), d);
    if (plan && diag_exit_code(d) == EXIT_OK)
        check_stage_memory(plan, &a->options.limits, d);
    if (plan && a->dry_run)
        check_outputs_writable(p, d);
    status = plan ? diag_exit_code(d) : EXIT_OOM;
    diag_print(d, stderr);
    if (check_inputs_unchanged() != EXIT_OK)
        status = EXIT_IO; /* opening an input read some of it */
    if (status == EXIT_OK && a->dry_run && a->json)
        program_print_json(plan, stdout);
    else if (status == EXIT_OK && a->dry_run)
        program_print(plan, stdout);
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

/* run and validate: options, one pipeline file, then run_loaded. */
static int run_file(int argc, char **argv, enum run_command which)
{
    const char *command = which == RUN_COMMAND_VALIDATE ? "validate" : "run";
    struct run_args a;
    struct diag_list d;
    struct pipeline *p;
    int status = run_args_parse_for(argc, argv, which, &a);

    if (status != EXIT_OK) {
        run_args_free(&a);
        return status < 0 ? EXIT_OK : status;
    }
    if (a.noperands != 1) {
        run_args_free(&a);
        return usage_error("%s: expected one pipeline file%s", command,
                           a.noperands > 1 ? ", and options after it" : "");
    }
    diag_init(&d, a.operands[0], NULL, 0);
    p = pipeline_load(a.operands[0], &a.overrides, &d);
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

int cmd_run(int argc, char **argv)
{
    return run_file(argc, argv, RUN_COMMAND_RUN);
}

int cmd_validate(int argc, char **argv)
{
    return run_file(argc, argv, RUN_COMMAND_VALIDATE);
}
