/*
 * util.c - exit codes and parsers of command-line values.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sys/stat.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "msg.h"
#include "tensorrun_io.h"

bool parse_output_format(const char *text, enum tio_format *format, bool *zstd)
{
    char name[32];
    size_t len = strlen(text);

    *zstd = len > 4 && strcmp(text + len - 4, ".zst") == 0;
    snprintf(name, sizeof name, "%.*s", (int)(*zstd ? len - 4 : len), text);
    return tio_format_parse(name, format) == TR_OK;
}

int exit_for_status(tr_status status)
{
    switch (status) {
    case TR_OK:
        return EXIT_OK;
    case TR_ERR_IO:
    case TR_ERR_FORMAT:
        return EXIT_IO;
    case TR_ERR_OOM:
        return EXIT_OOM;
    default:
        return EXIT_RUNTIME;
    }
}

int usage_error(const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    msg_error(NULL, "%s", text);
    fputs("Try 'tensorrun --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

bool parse_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    long long v;

    if (!text || !*text)
        return false;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool parse_int_list(const char *text, int64_t *out, int max, int *n, bool allow_negative)
{
    const char *p = text;

    *n = 0;
    if (!text || !*text)
        return false;
    for (;;) {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (end == p || errno || (!allow_negative && v < 0) || *n >= max)
            return false;
        out[(*n)++] = v;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        p = end + 1;
    }
}

int check_inputs_unchanged(void)
{
    const char *path = tio_input_changed();

    if (!path)
        return EXIT_OK;
    msg_error(strcmp(path, "-") == 0 ? "standard input" : path,
              "changed size while being read (another process truncated it?); what was "
              "computed from it is discarded");
    return EXIT_IO;
}

/* Set once the outputs are being renamed into place. */
static volatile sig_atomic_t holding;
/* The line an interruption prints, made before any signal can come. */
static char interrupted_line[128];
static size_t interrupted_len;

/* SIGINT and SIGTERM: no temporary file survives, no output is replaced,
 * and one line says so; or, once the renames have begun, all of them
 * finish.  The main thread blocks the signals then, but another thread
 * (an idle OpenMP worker) may still be the one that takes them. */
static void on_interrupt(int sig)
{
    ssize_t ignored;

    (void)sig;
    if (holding)
        return;
    tio_remove_temporaries();
    ignored = write(STDERR_FILENO, interrupted_line, interrupted_len);
    (void)ignored;
    _exit(EXIT_INTERRUPTED);
}

void catch_interrupts(void)
{
    struct sigaction sa;
    bool c = msg_color();
    int n = snprintf(interrupted_line, sizeof interrupted_line,
                     "tensorrun: %serror:%s interrupted; no output file was replaced\n",
                     c ? "\033[1;31m" : "", c ? "\033[0m" : "");

    interrupted_len = n > 0 && (size_t)n < sizeof interrupted_line ? (size_t)n : 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void hold_interrupts(void)
{
    sigset_t set;

    holding = 1;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Whether standard output is a pipe or socket that nothing reads any
 * more: poll reports an error (or a hang-up) on its write end then. */
static bool stdout_reader_gone(void)
{
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    struct stat st;

    if (fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return false;
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

void exit_if_stdout_closed(void)
{
    sigset_t set;

    if (!stdout_reader_gone())
        return;
    tio_remove_temporaries();
    signal(SIGPIPE, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGPIPE);
    _exit(128 + SIGPIPE); /* not reached: SIGPIPE's default action ends the process */
}

bool stdin_is_terminal(const char *what)
{
    if (!isatty(STDIN_FILENO))
        return false;
    msg_error(NULL, "standard input is a terminal; %s reads a tensor from it", what);
    msg_hint("redirect a file into it (< data.npy) or pipe one in (cat data.npy | tensorrun ...)");
    return true;
}

/* Whether getopt_long, having refused short option opt, is still inside
 * the word argv[optind] ("-bo" after refusing 'b'); else it has just left
 * argv[optind - 1]. */
static bool inside_word(int argc, char **argv, int opt)
{
    const char *w = optind < argc ? argv[optind] : NULL;

    return w && w[0] == '-' && w[1] && w[1] != '-' && strchr(w + 1, opt);
}

int option_error(const char *command, int c, int argc, char **argv,
                 const struct option *longopts, bool expression_hint)
{
    bool inside = optopt > 0 && optopt < 256 && inside_word(argc, argv, optopt);
    const char *word = inside ? argv[optind] : argv[optind - 1];
    bool is_long = !inside && word[0] == '-' && word[1] == '-';
    char name[64];

    if (is_long)
        snprintf(name, sizeof name, "%.*s", (int)strcspn(word, "="), word);
    else
        snprintf(name, sizeof name, "-%c", optopt);
    if (c == ':')
        return usage_error("%s: option '%s' needs a value", command, name);
    if (is_long && optopt != 0)
        return usage_error("%s: option '%s' takes no value", command, name);
    if (!is_long && strlen(word) > 2)
        msg_error(NULL, "%s: unknown option '%s' (in '%s')", command, name, word);
    else
        msg_error(NULL, "%s: unknown option '%s'", command, name);
    if (is_long) {
        const char *names[65], *guess;
        char spelled[64][40];
        size_t n = 0;
        for (; longopts && longopts[n].name && n < 64; n++) {
            snprintf(spelled[n], sizeof spelled[n], "--%s", longopts[n].name);
            names[n] = spelled[n];
        }
        names[n] = NULL;
        guess = suggest(name, names);
        if (guess)
            msg_hint("did you mean '%s'?", guess);
    } else if (expression_hint) {
        msg_hint("put -- before an expression that starts with -: tensorrun %s -- '%s' ...",
                 command, word);
    }
    fputs("Try 'tensorrun --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

/* What a size was read as, in words: "512 bytes", "1.5 MiB". */
static const char *size_words(uint64_t bytes, char *buf, size_t size)
{
    if (bytes < 1024)
        snprintf(buf, size, "%llu byte%s", (unsigned long long)bytes, bytes == 1 ? "" : "s");
    else
        tr_format_bytes(bytes, buf, size);
    return buf;
}

void warn_memory_limit(const char *text, uint64_t limit, bool host)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t machine = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    char read_as[32], mem[32];

    if (limit < ((uint64_t)1 << 20)) {
        size_t digits = strspn(text, "0123456789.");
        msg_warning(NULL, "--memory-limit %s is %s; did you mean %.*sM?", text,
                    size_words(limit, read_as, sizeof read_as), (int)digits, text);
    } else if (host && machine && limit > machine) {
        msg_warning(NULL, "--memory-limit %s is %s, more than this machine's memory (%s); "
                          "it limits nothing",
                    text, size_words(limit, read_as, sizeof read_as),
                    tr_format_bytes(machine, mem, sizeof mem));
    }
}
