/*
 * cli.h - what the program's commands share: exit codes, the commands
 * themselves, and small parsers for command-line values.
 */
#ifndef TR_CLI_H
#define TR_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "tensorrun.h"
#include "tensorrun_io.h"

/* Exit statuses, as tensorrun(1), EXIT STATUS lists them. */
enum exit_code {
    EXIT_OK = 0,
    EXIT_RUNTIME = 1,
    EXIT_USAGE = 2,
    EXIT_PIPELINE = 3,
    EXIT_IO = 4,
    EXIT_OOM = 5,
    EXIT_INTERRUPTED = 130,
};

/* The exit status for an engine or io failure: input/output and malformed
 * files 4, out of memory 5, anything else a runtime error (1). */
int exit_for_status(tr_status status);

/* Prints "tensorrun: error: ..." and the hint to try --help; returns 2. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "3,4,5" into up to max comma-separated int64 values; false when
 * malformed, negative where allow_negative is false, or too many. */
bool parse_int_list(const char *text, int64_t *out, int max, int *n, bool allow_negative);
/* A size: a number (decimals allowed) with an optional unit; K M G T and
 * KiB MiB GiB TiB are powers of 1024, KB MB GB TB powers of 1000, a bare
 * number or B is bytes.  false when malformed or past 2^64. */
bool parse_size(const char *text, uint64_t *out);
/* Warns of a --memory-limit size (as written: text) below 1 MiB, almost
 * surely a unit left out (512 for 512M), or, for host memory, above the
 * machine's memory, which caps nothing; the command goes on with the
 * limit as written. */
void warn_memory_limit(const char *text, uint64_t limit, bool host);
/* An output --format: npy, safetensors or raw (npz too, for the caller to
 * refuse), optionally followed by .zst; false for anything else. */
bool parse_output_format(const char *text, enum tio_format *format, bool *zstd);
/* A whole decimal integer in [min, max]. */
bool parse_int(const char *text, int64_t min, int64_t max, int64_t *out);

/* Installs the SIGINT/SIGTERM handler (temporary files removed, one line
 * on stderr, exit 130) and ignores SIGPIPE, so that a write into a closed
 * pipe fails and exit_if_stdout_closed can clean up first. */
void catch_interrupts(void);
/* After a failed write to standard output: when its reader has gone away
 * (a closed pipe), removes every temporary file and ends the process as
 * SIGPIPE does, without a message; returns otherwise. */
void exit_if_stdout_closed(void);
/* When standard input is a terminal, reports that it cannot be read as a
 * tensor (what: who would read it, "input 'x'") and returns true. */
bool stdin_is_terminal(const char *what);

struct option;
/* Reports the option getopt_long has just refused (c is '?' or ':'), with
 * "did you mean" for a long option and, where expression_hint, the hint
 * that "--" lets a word starting with '-' through.  Returns 2. */
int option_error(const char *command, int c, int argc, char **argv,
                 const struct option *longopts, bool expression_hint);
/* From now on SIGINT and SIGTERM wait until the process ends, whichever
 * thread takes them: for the moment outputs are renamed into place. */
void hold_interrupts(void);

/* EXIT_OK, or, when a mapped input changed size while being read (see
 * tio_guard_inputs), EXIT_IO after saying which: every result computed
 * since is to be discarded and no output replaced. */
int check_inputs_unchanged(void);

struct overrides;
/* Adds -D (c = 'D'), -i ('i') or -o ('o') NAME=VALUE to o; false after a
 * usage error. */
bool parse_override(int c, const char *arg, struct overrides *o);
void overrides_free(struct overrides *o);

int cmd_inspect(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_concat(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_eval(int argc, char **argv);

#endif /* TR_CLI_H */
