/*
 * yaml.c - libyaml's events into a tree of nodes that keep their place.
 *
 * The tree is built without recursion: a stack of the collections still
 * open, at most YAML_MAX_DEPTH deep.  Every problem that does not stop
 * libyaml (an anchor, an alias, a tag, a key that is not a scalar, a key
 * given twice) is reported and the parse goes on, so that one pass finds
 * them all; the tree is then thrown away and NULL returned.  Keys are
 * checked for duplicates through a small hash table per open mapping, so a
 * hostile file with many keys costs linear time, not quadratic.
 */
#include "config.h"

#include <yaml.h>

#include "yaml_tree.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YAML_MAX_DEPTH 64

struct frame {
    struct ynode *node;
    size_t capacity;       /* of items or pairs */
    bool want_value;       /* mappings: the next node is the value of the last key */
    size_t *slots;         /* mappings: hash table of pair index + 1, 0 when empty */
    size_t nslots;         /* a power of two, or 0 */
};

struct builder {
    struct diag_list *diags;
    const char *text;
    size_t len;
    struct frame stack[YAML_MAX_DEPTH];
    int depth;
    struct ynode *root;
    size_t *line_starts;   /* byte offset of each line, made when first needed */
    size_t nlines;
    bool failed;           /* an error was reported: the tree is not returned */
    bool stop;             /* nothing more can be read */
};

/* libyaml's marks are 0-based and count characters. */
static int mark_line(yaml_mark_t m)
{
    return m.line < INT32_MAX ? (int)m.line + 1 : INT32_MAX;
}

static int mark_col(yaml_mark_t m)
{
    return m.column < INT32_MAX ? (int)m.column + 1 : INT32_MAX;
}

/* Frees a node and everything under it; the recursion is as deep as the
 * tree, which the builder bounds. */
static void node_free(struct ynode *n)
{
    if (!n)
        return;
    if (n->kind == YNODE_SEQUENCE) {
        for (size_t i = 0; i < n->count; i++)
            node_free(n->items[i]);
    } else if (n->kind == YNODE_MAPPING) {
        for (size_t i = 0; i < n->count; i++) {
            node_free(n->pairs[i].key);
            node_free(n->pairs[i].value);
        }
    }
    free(n->value);
    free(n->places);
    free(n->items);
    free(n->pairs);
    free(n);
}

void ynode_free(struct ynode *node)
{
    node_free(node);
}

struct ynode *ynode_get(const struct ynode *mapping, const char *key)
{
    size_t len;

    if (!mapping || mapping->kind != YNODE_MAPPING || !key)
        return NULL;
    len = strlen(key);
    for (size_t i = 0; i < mapping->count; i++) {
        const struct ynode *k = mapping->pairs[i].key;
        if (k && k->kind == YNODE_SCALAR && k->length == len && memcmp(k->value, key, len) == 0)
            return mapping->pairs[i].value;
    }
    return NULL;
}

__attribute__((format(printf, 5, 6)))
static void fail(struct builder *b, int line, int col, const char *hint, const char *fmt, ...)
{
    va_list ap;
    char buf[256];

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    diag_error(b->diags, line, col, hint, "%s", buf);
    b->failed = true;
}

static void out_of_memory(struct builder *b)
{
    if (!b->stop)
        diag_error(b->diags, 0, 0, NULL, "out of memory reading the YAML");
    b->failed = true;
    b->stop = true;
}

/* ------------------------------------------------------- duplicate keys */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static bool same_key(const struct ynode *a, const struct ynode *b)
{
    return a->length == b->length && memcmp(a->value, b->value, a->length) == 0;
}

/* Puts pair index i (whose key is a scalar) into the frame's table. */
static void slot_put(struct frame *f, size_t i)
{
    const struct ynode *k = f->node->pairs[i].key;
    size_t mask = f->nslots - 1, s = (size_t)hash_bytes(k->value, k->length) & mask;

    while (f->slots[s])
        s = (s + 1) & mask;
    f->slots[s] = i + 1;
}

/* The index of an earlier pair whose key equals key, or SIZE_MAX. */
static size_t slot_find(const struct frame *f, const struct ynode *key)
{
    size_t mask, s;

    if (!f->nslots)
        return SIZE_MAX;
    mask = f->nslots - 1;
    s = (size_t)hash_bytes(key->value, key->length) & mask;
    while (f->slots[s]) {
        size_t i = f->slots[s] - 1;
        if (same_key(f->node->pairs[i].key, key))
            return i;
        s = (s + 1) & mask;
    }
    return SIZE_MAX;
}

/* Records the key of pair i; grows the table to keep it at most half full
 * of the nkeys pairs so far (all of which it holds once grown: the keys
 * reported as duplicates, which were never added, too, so a run of them
 * may ask for more than one doubling). */
static bool slot_add(struct builder *b, struct frame *f, size_t i, size_t nkeys)
{
    if (nkeys * 2 > f->nslots) {
        size_t n = f->nslots ? f->nslots * 2 : 16;
        size_t *slots;
        while (nkeys * 2 > n)
            n *= 2;
        slots = calloc(n, sizeof *slots);
        if (!slots) {
            out_of_memory(b);
            return false;
        }
        free(f->slots);
        f->slots = slots;
        f->nslots = n;
        for (size_t j = 0; j < i; j++)
            if (f->node->pairs[j].key->kind == YNODE_SCALAR)
                slot_put(f, j);
    }
    slot_put(f, i);
    return true;
}

/* ---------------------------------------------------------- the builder */

/* Appends n to the innermost open collection, or makes it the root. */
static void attach(struct builder *b, struct ynode *n)
{
    struct frame *f;
    struct ynode *parent;

    if (b->depth == 0) {
        if (b->root)
            node_free(b->root);
        b->root = n;
        return;
    }
    f = &b->stack[b->depth - 1];
    parent = f->node;
    if (parent->kind == YNODE_SEQUENCE) {
        if (parent->count == f->capacity) {
            size_t cap = f->capacity ? f->capacity * 2 : 4;
            struct ynode **items = realloc(parent->items, cap * sizeof *items);
            if (!items) {
                node_free(n);
                out_of_memory(b);
                return;
            }
            parent->items = items;
            f->capacity = cap;
        }
        parent->items[parent->count++] = n;
        return;
    }
    if (f->want_value) {
        parent->pairs[parent->count - 1].value = n;
        f->want_value = false;
        return;
    }
    /* a key */
    if (parent->count == f->capacity) {
        size_t cap = f->capacity ? f->capacity * 2 : 4;
        struct ypair *pairs = realloc(parent->pairs, cap * sizeof *pairs);
        if (!pairs) {
            node_free(n);
            out_of_memory(b);
            return;
        }
        parent->pairs = pairs;
        f->capacity = cap;
    }
    parent->pairs[parent->count].key = n;
    parent->pairs[parent->count].value = NULL;
    parent->count++;
    f->want_value = true;
    if (n->kind != YNODE_SCALAR) {
        fail(b, n->line, n->col, "write keys as plain words, such as 'name:'",
             "a mapping key must be a scalar, not a %s",
             n->kind == YNODE_MAPPING ? "mapping" : "sequence");
        return;
    }
    {
        size_t first = slot_find(f, n);
        if (first != SIZE_MAX) {
            int show = n->length > 60 ? 60 : (int)n->length;
            fail(b, n->line, n->col, NULL, "key '%.*s%s' appears twice (first at line %d)", show,
                 n->value, n->length > 60 ? "..." : "", parent->pairs[first].key->line);
            return;
        }
    }
    (void)slot_add(b, f, parent->count - 1, parent->count);
}

static struct ynode *new_node(struct builder *b, enum ynode_kind kind, yaml_mark_t start)
{
    struct ynode *n = calloc(1, sizeof *n);

    if (!n) {
        out_of_memory(b);
        return NULL;
    }
    n->kind = kind;
    n->line = mark_line(start);
    n->col = mark_col(start);
    return n;
}

/* Anchors, tags: reported, the node itself still built. */
static void check_properties(struct builder *b, const yaml_event_t *e, const yaml_char_t *anchor,
                             const yaml_char_t *tag)
{
    int line = mark_line(e->start_mark), col = mark_col(e->start_mark);

    if (anchor)
        fail(b, line, col, "write the value out again where it is needed",
             "YAML anchors ('&%.40s') are not allowed in a pipeline file", (const char *)anchor);
    if (tag)
        fail(b, line, col, "remove the tag; quote the text if it should stay a string",
             "YAML tags ('%.40s') are not allowed in a pipeline file", (const char *)tag);
}

/* An empty plain scalar, ~ or null: YAML's null. */
static bool is_null(const struct ynode *n)
{
    const char *s = n->value;

    return n->kind == YNODE_SCALAR && n->plain &&
           (n->length == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
            strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0);
}

/* Counts the characters (code points) of UTF-8 text. */
static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    return n;
}

/* The byte offset of a mark (whose line and column count characters), or
 * SIZE_MAX when it is not in the text. */
static size_t mark_byte(struct builder *b, yaml_mark_t m)
{
    size_t at, chars = 0;

    if (!b->line_starts) {
        size_t n = 1;
        for (size_t i = 0; i < b->len; i++)
            n += b->text[i] == '\n';
        b->line_starts = malloc(n * sizeof *b->line_starts);
        if (!b->line_starts)
            return SIZE_MAX;
        b->line_starts[0] = 0;
        b->nlines = 1;
        for (size_t i = 0; i < b->len; i++)
            if (b->text[i] == '\n')
                b->line_starts[b->nlines++] = i + 1;
    }
    if (m.line >= b->nlines)
        return SIZE_MAX;
    at = b->line_starts[m.line];
    while (at < b->len && b->text[at] != '\n' && chars < m.column) {
        at++;
        if (at >= b->len || ((unsigned char)b->text[at] & 0xC0) != 0x80)
            chars++;
    }
    return chars == m.column ? at : SIZE_MAX;
}

/* Moves *at one byte on, keeping the line and column of the character it
 * is in. */
static void step(const struct builder *b, size_t *at, struct diag_place *pl)
{
    if (b->text[*at] == '\n') {
        pl->line++;
        pl->col = 1;
    } else if (*at + 1 < b->len && ((unsigned char)b->text[*at + 1] & 0xC0) != 0x80 &&
               pl->col < INT32_MAX) {
        pl->col++;
    }
    (*at)++;
}

/*
 * Where each byte of a scalar over several lines is in the file: the
 * scalar's characters are found in its source one after the other, and
 * what lies between them must be what YAML takes away (indentation, line
 * breaks that folding made spaces, quotes and the backslash of an escaped
 * line break).  Anything else (an escape such as \t) means the text does
 * not map onto the file: NULL then, and errors point at the scalar's start.
 */
static struct diag_place *scalar_places(struct builder *b, const yaml_event_t *e,
                                        const struct ynode *n)
{
    yaml_scalar_style_t style = e->data.scalar.style;
    bool quoted = style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                  style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    size_t at = mark_byte(b, e->start_mark), end = mark_byte(b, e->end_mark);
    struct diag_place pl = {mark_line(e->start_mark), mark_col(e->start_mark)};
    struct diag_place *places;

    if (at == SIZE_MAX || end == SIZE_MAX || at > end || n->length > end - at)
        return NULL;
    if (style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE) {
        /* the text starts on the line after the | or > and its header */
        while (at < end && b->text[at] != '\n')
            step(b, &at, &pl);
        if (at < end)
            step(b, &at, &pl);
    } else if (quoted && at < end) {
        step(b, &at, &pl);
    }
    places = malloc((n->length + 1) * sizeof *places);
    if (!places)
        return NULL;
    for (size_t i = 0; i < n->length; i++) {
        while (at < end && b->text[at] != n->value[i]) {
            char k = b->text[at];
            if (!(k == ' ' || k == '\t' || k == '\n' || k == '\r' ||
                  (quoted && (k == '\\' || k == '"' || k == '\'')))) {
                free(places);
                return NULL;
            }
            step(b, &at, &pl);
        }
        if (at >= end) {
            free(places);
            return NULL;
        }
        places[i] = pl;
        step(b, &at, &pl);
    }
    places[n->length] = pl;
    return places;
}

static void on_scalar(struct builder *b, const yaml_event_t *e)
{
    yaml_scalar_style_t style = e->data.scalar.style;
    struct ynode *n;

    check_properties(b, e, e->data.scalar.anchor, e->data.scalar.tag);
    n = new_node(b, YNODE_SCALAR, e->start_mark);
    if (!n)
        return;
    n->length = e->data.scalar.length;
    n->value = malloc(n->length + 1);
    if (!n->value) {
        free(n);
        out_of_memory(b);
        return;
    }
    memcpy(n->value, e->data.scalar.value, n->length);
    n->value[n->length] = '\0';
    n->plain = style == YAML_PLAIN_SCALAR_STYLE;
    if (style == YAML_PLAIN_SCALAR_STYLE) {
        n->single_line = e->start_mark.line == e->end_mark.line;
    } else if (style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
               style == YAML_DOUBLE_QUOTED_SCALAR_STYLE) {
        /* The text starts after the quote.  On one line, escapes only ever
         * shorten the text ('' and \x41 stand for one character), so the
         * text maps onto the file column for column exactly when its
         * length is the distance between the quotes. */
        n->col++;
        n->single_line = e->start_mark.line == e->end_mark.line &&
                         e->end_mark.column >= e->start_mark.column + 2 &&
                         utf8_chars(n->value, n->length) ==
                             e->end_mark.column - e->start_mark.column - 2;
    } else {
        n->single_line = false; /* literal and folded blocks */
    }
    if (!n->single_line)
        n->places = scalar_places(b, e, n);
    attach(b, n);
}

static void on_start(struct builder *b, const yaml_event_t *e, enum ynode_kind kind)
{
    struct ynode *n;
    struct frame *f;

    if (kind == YNODE_SEQUENCE)
        check_properties(b, e, e->data.sequence_start.anchor, e->data.sequence_start.tag);
    else
        check_properties(b, e, e->data.mapping_start.anchor, e->data.mapping_start.tag);
    if (b->depth == YAML_MAX_DEPTH) {
        diag_error(b->diags, mark_line(e->start_mark), mark_col(e->start_mark), NULL,
                   "YAML nested more than %d levels deep", YAML_MAX_DEPTH);
        b->failed = true;
        b->stop = true;
        return;
    }
    n = new_node(b, kind, e->start_mark);
    if (!n)
        return;
    n->flow = kind == YNODE_SEQUENCE ? e->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                                     : e->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    f = &b->stack[b->depth++];
    memset(f, 0, sizeof *f);
    f->node = n;
}

static void on_end(struct builder *b)
{
    struct frame *f;
    struct ynode *n;

    if (b->depth == 0)
        return; /* cannot happen: libyaml balances its events */
    f = &b->stack[--b->depth];
    n = f->node;
    free(f->slots);
    f->slots = NULL;
    if (n->kind == YNODE_MAPPING && f->want_value) {
        /* cannot happen either; keep the tree well formed regardless */
        n->pairs[n->count - 1].value = NULL;
    }
    attach(b, n);
}

/* Line and column of a byte offset of the text, counting characters. */
static void place_of_offset(const char *text, size_t len, size_t offset, int *line, int *col)
{
    int l = 1, c = 1;

    if (offset > len)
        offset = len;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80 && c < INT32_MAX) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* Whether the mark is at a '-' with nothing after it on its line but
 * blanks or a comment (x: - meant as standard input). */
static bool bare_dash(struct builder *b, yaml_mark_t m)
{
    size_t at = mark_byte(b, m);

    if (at == SIZE_MAX || at >= b->len || b->text[at] != '-')
        return false;
    for (at++; at < b->len && (b->text[at] == ' ' || b->text[at] == '\t'); at++)
        ;
    return at >= b->len || b->text[at] == '\n' || b->text[at] == '\r' || b->text[at] == '#';
}

static void syntax_error(struct builder *b, const yaml_parser_t *p)
{
    int line, col;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    const char *hint = NULL;
    char context[160] = "";

    if (p->error == YAML_MEMORY_ERROR) {
        out_of_memory(b);
        return;
    }
    if (p->error == YAML_READER_ERROR) {
        place_of_offset(b->text, b->len, p->problem_offset, &line, &col);
    } else {
        line = mark_line(p->problem_mark);
        col = mark_col(p->problem_mark);
        if (p->context)
            snprintf(context, sizeof context, " (%s at line %d)", p->context,
                     mark_line(p->context_mark));
        if (strstr(problem, "block sequence entries are not allowed") &&
            bare_dash(b, p->problem_mark))
            hint = "YAML reads a bare - as the start of a list item; write \"-\" (in quotes) "
                   "for standard input or output";
        else if (p->context && strstr(p->context, "flow"))
            hint = "inside [ ] and { }, YAML splits text at commas and reads brackets as its "
                   "own: write a statement that has them in a block list ('- y = ...' lines), "
                   "or quote it";
        if (p->problem_mark.index < b->len && strstr(problem, "cannot start any token")) {
            /* the mark counts characters; find the byte it points at */
            size_t chars = 0, i = 0;
            for (; i < b->len; i++) {
                if (((unsigned char)b->text[i] & 0xC0) != 0x80) {
                    if (chars == p->problem_mark.index)
                        break;
                    chars++;
                }
            }
            if (i < b->len && b->text[i] == '\t')
                hint = "YAML indents with spaces; a tab cannot start a token";
        }
    }
    diag_error(b->diags, line, col, hint, "YAML syntax error: %s%s", problem, context);
    b->failed = true;
    b->stop = true;
}

struct ynode *yaml_load(const char *text, size_t len, struct diag_list *diags)
{
    yaml_parser_t parser;
    struct builder b;
    bool seen_document = false;

    memset(&b, 0, sizeof b);
    b.diags = diags;
    b.text = text;
    b.len = len;
    if (!yaml_parser_initialize(&parser)) {
        out_of_memory(&b);
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    while (!b.stop) {
        yaml_event_t e;
        if (!yaml_parser_parse(&parser, &e)) {
            syntax_error(&b, &parser);
            break;
        }
        switch (e.type) {
        case YAML_DOCUMENT_START_EVENT:
            seen_document = true;
            break;
        case YAML_DOCUMENT_END_EVENT:
            /* only the first document is read */
            b.stop = true;
            break;
        case YAML_STREAM_END_EVENT:
            b.stop = true;
            break;
        case YAML_ALIAS_EVENT:
            fail(&b, mark_line(e.start_mark), mark_col(e.start_mark),
                 "write the value out again where it is needed",
                 "YAML aliases ('*%.40s') are not allowed in a pipeline file",
                 (const char *)e.data.alias.anchor);
            {
                /* keep the tree's shape: an empty scalar in its place */
                struct ynode *n = new_node(&b, YNODE_SCALAR, e.start_mark);
                if (n) {
                    n->value = calloc(1, 1);
                    if (!n->value) {
                        free(n);
                        out_of_memory(&b);
                    } else {
                        attach(&b, n);
                    }
                }
            }
            break;
        case YAML_SCALAR_EVENT:
            on_scalar(&b, &e);
            break;
        case YAML_SEQUENCE_START_EVENT:
            on_start(&b, &e, YNODE_SEQUENCE);
            break;
        case YAML_MAPPING_START_EVENT:
            on_start(&b, &e, YNODE_MAPPING);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            on_end(&b);
            break;
        default:
            break;
        }
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&parser);
    free(b.line_starts);
    /* a parse stopped early leaves collections open: hang them together
     * so that one free releases them all */
    while (b.depth > 0)
        on_end(&b);
    if (!b.failed && (!seen_document || !b.root || is_null(b.root))) {
        diag_error(diags, 1, 1, NULL, "the file holds no YAML document (it is empty)");
        b.failed = true;
    }
    if (b.failed) {
        node_free(b.root);
        return NULL;
    }
    return b.root;
}
