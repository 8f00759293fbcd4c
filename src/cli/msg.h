/*
 * msg.h - messages on standard error, in the one format the man pages show:
 * "tensorrun: PLACE: error: text".  PLACE may be NULL.
 */
#ifndef TR_CLI_MSG_H
#define TR_CLI_MSG_H

#include <stdbool.h>

void msg_error(const char *place, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void msg_warning(const char *place, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void msg_note(const char *place, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void msg_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether messages are coloured: stderr is a terminal and NO_COLOR is unset. */
bool msg_color(void);

/* The candidate closest to word by edit distance, or NULL when none is close
 * enough to be a plausible typo.  candidates ends with NULL. */
const char *suggest(const char *word, const char *const *candidates);

#endif /* TR_CLI_MSG_H */
