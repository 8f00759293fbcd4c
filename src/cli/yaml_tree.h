/*
 * yaml_tree.h - a YAML document as a small tree whose every node knows where it
 * is in the file (1-based line and column), built from libyaml's events.
 */
#ifndef TR_CLI_YAML_TREE_H
#define TR_CLI_YAML_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include "diag.h"

enum ynode_kind { YNODE_SCALAR, YNODE_SEQUENCE, YNODE_MAPPING };

struct ynode;

struct ypair {
    struct ynode *key;   /* always a scalar */
    struct ynode *value;
};

struct ynode {
    enum ynode_kind kind;
    int line, col;         /* where the node starts; for a quoted scalar, its
                              text's first character (after the quote).
                              Columns count characters, as libyaml does */
    /* scalars */
    char *value;           /* the text, NUL-terminated (may hold '\n') */
    size_t length;         /* its length (the text may contain NUL) */
    bool plain;            /* unquoted: may be a number, bool or null */
    bool single_line;      /* the scalar's text sits on its line as written,
                              so column = col + offset for one-line text */
    struct diag_place *places; /* otherwise (a literal or folded block, a plain
                              or quoted scalar over several lines): where
                              each byte of value is in the file, length + 1
                              entries; NULL when the text does not map onto
                              the file (an escape such as \n) */
    /* sequences and mappings */
    bool flow;             /* written in flow style: [a, b] or {k: v} */
    size_t count;
    struct ynode **items;  /* sequence items */
    struct ypair *pairs;   /* mapping entries, in file order */
};

/*
 * Parses the first document of text (len bytes, UTF-8; later documents
 * are not read).  Nesting deeper than 64 is refused.  Returns the root node,
 * or NULL after adding an error for a syntax error (at its place), an
 * empty document, anchors, aliases and tags (refused: a pipeline has no
 * use for them), a mapping key that is not a scalar, or a key that
 * appears twice.
 */
struct ynode *yaml_load(const char *text, size_t len, struct diag_list *diags);
void ynode_free(struct ynode *node);

/* The value of key in a mapping node, or NULL. */
struct ynode *ynode_get(const struct ynode *mapping, const char *key);

#endif /* TR_CLI_YAML_TREE_H */
