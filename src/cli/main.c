/*
 * main.c - the tensorrun program: picks the command and reports how it
 * ended, with the exit statuses of tensorrun(1), EXIT STATUS.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "msg.h"
#include "tensorrun_io.h"

struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
};

static int cmd_help(int argc, char **argv);

static const struct command commands[] = {
    {"run", "run a pipeline (also: tensorrun PIPELINE.yaml)", cmd_run},
    {"eval", "run statements given on the command line", cmd_eval},
    {"inspect", "show what is in tensor files, reading only their headers", cmd_inspect},
    {"convert", "copy a tensor between formats, dtypes and compression", cmd_convert},
    {"compare", "whether two tensor files hold the same values, within a tolerance", cmd_compare},
    {"concat", "join tensor files along a dimension, streaming", cmd_concat},
    {"validate", "check a pipeline without computing and print its plan", cmd_validate},
    {"ops", "list every op: its signature, dtypes and what it does", cmd_ops},
    {"help", "show help for tensorrun or for one command", cmd_help},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_usage(FILE *out)
{
    fputs("Usage: tensorrun COMMAND [ARGUMENTS]\n"
          "       tensorrun --help | --version\n"
          "\n"
          "Run declarative tensor pipelines over memory-mapped tensor files.\n"
          "\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "Options:\n"
          "  -h, --help     show this help and exit\n"
          "  -V, --version  show the version and exit\n"
          "\n"
          "Exit status: 0 success, 1 runtime error, 2 usage error, 3 invalid pipeline,\n"
          "4 input/output error, 5 out of memory, 130 interrupted, 141 closed pipe.\n"
          "\n"
          "See tensorrun(1).  Report bugs to " PACKAGE_BUGREPORT ".\n",
          out);
}

static void print_version(void)
{
    int gpus = tr_cuda_device_count();

    printf("tensorrun %s\n", PACKAGE_VERSION);
    if (gpus > 0)
        printf("CUDA: %d device%s\n", gpus, gpus == 1 ? "" : "s");
    else
        printf("CUDA: not available (%s)\n", tr_cuda_unavailable_reason());
}

static int unknown_command(const char *name)
{
    const char *names[N_COMMANDS + 1];
    const char *guess;

    for (size_t i = 0; i < N_COMMANDS; i++)
        names[i] = commands[i].name;
    names[N_COMMANDS] = NULL;
    guess = suggest(name, names);
    msg_error(NULL, "unknown command '%s'", name);
    if (guess)
        msg_hint("did you mean '%s'?", guess);
    fputs("Try 'tensorrun --help' for the list of commands.\n", stderr);
    return EXIT_USAGE;
}

static int cmd_help(int argc, char **argv)
{
    static char help_option[] = "--help";
    char *help_argv[] = {NULL, help_option, NULL};
    const struct command *c;

    if (argc > 2)
        return usage_error("help takes at most one command, got '%s' too", argv[2]);
    if (argc < 2) {
        print_usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs("Usage: tensorrun help [COMMAND]\n"
              "\n"
              "Show what tensorrun's commands are, or what `tensorrun COMMAND --help` shows.\n"
              "\n"
              "See tensorrun(1).\n",
              stdout);
        return EXIT_OK;
    }
    c = find_command(argv[1]);
    if (!c)
        return unknown_command(argv[1]);
    /* what `COMMAND --help` prints */
    help_argv[0] = argv[1];
    return c->run(2, help_argv);
}

/* `tensorrun PIPELINE.yaml` runs it: a word that names a file, has a
 * directory in it, or ends in .yaml or .yml is a pipeline, not a
 * mistyped command. */
static bool looks_like_pipeline(const char *arg)
{
    size_t n = strlen(arg);

    return access(arg, F_OK) == 0 || strchr(arg, '/') ||
           (n > 5 && strcmp(arg + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(arg + n - 4, ".yml") == 0);
}

/* Flushes standard output and reports a failed write (a full disk) as an
 * input/output error; a closed pipe ends the program as SIGPIPE would. */
static int close_stdout(int code)
{
    bool failed = (fflush(stdout) != 0) | ferror(stdout);

    if (failed)
        exit_if_stdout_closed(); /* before fclose, which closes its descriptor */
    if (failed | (fclose(stdout) != 0)) {
        msg_error(NULL, "write error on standard output");
        return code == EXIT_OK ? EXIT_IO : code;
    }
    return code;
}

/* Whether arg shortens option (at least "--" and one letter), as getopt
 * takes a long option's prefix; --help and --version share no letter. */
static bool is_prefix_of(const char *arg, const char *option)
{
    size_t n = strlen(arg);

    return n > 2 && strncmp(arg, "--", 2) == 0 && strncmp(option, arg, n) == 0;
}

int main(int argc, char **argv)
{
    const char *arg = argc > 1 ? argv[1] : NULL;
    const struct command *c;

    catch_interrupts();
    tio_guard_inputs();

    if (!arg) {
        print_usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || is_prefix_of(arg, "--help")) {
        print_usage(stdout);
        return close_stdout(EXIT_OK);
    }
    if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0 ||
        is_prefix_of(arg, "--version")) {
        print_version();
        return close_stdout(EXIT_OK);
    }
    if (strcmp(arg, "--") == 0) /* the pipeline follows, whatever its name */
        return close_stdout(cmd_run(argc, argv));
    if (arg[0] == '-' && arg[1] != '\0')
        return usage_error("unknown option '%s' (the options before a command are --help "
                           "and --version)", arg);
    c = find_command(arg);
    if (!c && looks_like_pipeline(arg))
        return close_stdout(cmd_run(argc, argv));
    if (!c)
        return unknown_command(arg);
    return close_stdout(c->run(argc - 1, argv + 1));
}
