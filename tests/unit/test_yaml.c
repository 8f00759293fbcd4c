/*
 * test_yaml.c - the YAML tree: places of keys and values in block and flow
 * style, quoted and multi-line scalars, and what is refused (duplicate
 * keys, anchors, aliases, tags, deep nesting, collections as keys, empty
 * documents, syntax errors), and garbage never crashing.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "yaml_tree.h"

static struct diag_list diags;

static struct ynode *load(const char *text)
{
    diag_free(&diags);
    diag_init(&diags, "t.yaml", text, strlen(text));
    return yaml_load(text, strlen(text), &diags);
}

/* Whether diagnostic i exists, is at line:col and its message holds part. */
static void is_diag(size_t i, int line, int col, const char *part, const char *what)
{
    const struct diag *d = i < diags.count ? &diags.items[i] : NULL;

    ok(d && d->line == line && d->col == col && d->message && strstr(d->message, part), "%s",
       what);
    if (d)
        diag("got %d:%d %s", d->line, d->col, d->message ? d->message : "(null)");
    else
        diag("no diagnostic %zu (count %zu)", i, diags.count);
}

static void is_at(const struct ynode *n, int line, int col, const char *what)
{
    ok(n && n->line == line && n->col == col, "%s at %d:%d", what, line, col);
    if (n && (n->line != line || n->col != col))
        diag("got %d:%d", n->line, n->col);
}

static const struct ynode *key_of(const struct ynode *map, const char *key)
{
    for (size_t i = 0; map && i < map->count; i++)
        if (strcmp(map->pairs[i].key->value, key) == 0)
            return map->pairs[i].key;
    return NULL;
}

static void test_block_positions(void)
{
    const char *text = "tensorrun: 1\n"
                       "name: hello world\n"
                       "list:\n"
                       "  - a\n"
                       "  - 'b c'\n"
                       "  - \"d\\te\"\n"
                       "flow: {x: 1, y: [2, 'three']}\n"
                       "'quoted key': \"it''s\"\n"
                       "single: 'it''s'\n"
                       "empty:\n"
                       "last: 5\n";
    struct ynode *root = load(text);
    const struct ynode *n, *list, *flow, *y;

    ok(root && diags.count == 0, "a block mapping loads");
    if (!root)
        return;
    is_int(root->kind, YNODE_MAPPING, "the root is a mapping");
    is_at(root, 1, 1, "the root");
    is_int(root->count, 8, "eight keys");
    is_at(key_of(root, "name"), 2, 1, "key 'name'");
    n = ynode_get(root, "name");
    is_at(n, 2, 7, "value 'hello world'");
    ok(n && n->plain && n->single_line && strcmp(n->value, "hello world") == 0 &&
           n->length == 11,
       "plain, one line, text and length kept");

    list = ynode_get(root, "list");
    ok(list && list->kind == YNODE_SEQUENCE && list->count == 3, "a block sequence of three");
    is_at(list, 4, 3, "the block sequence (its first '-')");
    if (list && list->count == 3) {
        is_at(list->items[0], 4, 5, "item 'a'");
        is_at(list->items[1], 5, 6, "single-quoted 'b c': its text after the quote");
        ok(!list->items[1]->plain && list->items[1]->single_line, "quoted: not plain, one line");
        is_at(list->items[2], 6, 6, "double-quoted with an escape");
        ok(!list->items[2]->single_line && strcmp(list->items[2]->value, "d\te") == 0,
           "an escape changes offsets: not single_line; the escape is decoded");
    }

    flow = ynode_get(root, "flow");
    ok(flow && flow->kind == YNODE_MAPPING && flow->count == 2, "a flow mapping");
    is_at(flow, 7, 7, "the flow mapping's '{'");
    is_at(key_of(flow, "x"), 7, 8, "flow key x");
    is_at(ynode_get(flow, "x"), 7, 11, "flow value 1");
    y = ynode_get(flow, "y");
    is_at(y, 7, 17, "the flow sequence's '['");
    if (y && y->kind == YNODE_SEQUENCE && y->count == 2) {
        is_at(y->items[0], 7, 18, "flow item 2");
        is_at(y->items[1], 7, 22, "flow item 'three' (after its quote)");
        ok(y->items[1]->single_line && !y->items[1]->plain, "quoted flow item on one line");
    }

    is_at(key_of(root, "quoted key"), 8, 2, "a quoted key");
    n = ynode_get(root, "quoted key");
    ok(n && strcmp(n->value, "it''s") == 0 && n->single_line,
       "a double-quoted '' stays two characters: single_line");
    n = ynode_get(root, "single");
    ok(n && strcmp(n->value, "it's") == 0 && !n->single_line,
       "single-quoted '' is one character: not single_line");

    n = ynode_get(root, "empty");
    ok(n && n->kind == YNODE_SCALAR && n->plain && n->length == 0, "an empty value is ''");
    ok(n && n->line == 10, "an empty value sits on its key's line");
    is_at(ynode_get(root, "last"), 11, 7, "the last value");
    ok(ynode_get(root, "nope") == NULL && ynode_get(n, "x") == NULL,
       "ynode_get: missing key and non-mapping give NULL");
    ynode_free(root);
}

static void test_multiline(void)
{
    const char *text = "a: one\n"
                       "  two\n"
                       "b: |\n"
                       "  x = 1\n"
                       "  y = 2\n"
                       "c: >\n"
                       "  folded\n"
                       "  text\n"
                       "d: \"two\n"
                       "  lines\"\n"
                       "e: caf\xc3\xa9 = 1\n"
                       "f: x\n";
    struct ynode *root = load(text);
    const struct ynode *n;

    ok(root != NULL, "multi-line scalars load");
    if (!root)
        return;
    n = ynode_get(root, "a");
    ok(n && strcmp(n->value, "one two") == 0 && !n->single_line && n->plain,
       "a multi-line plain scalar is folded and not single_line");
    n = ynode_get(root, "b");
    ok(n && strcmp(n->value, "x = 1\ny = 2\n") == 0 && !n->single_line && !n->plain,
       "a literal block keeps its lines, not single_line");
    is_at(n, 3, 4, "a literal block at its '|'");
    n = ynode_get(root, "c");
    ok(n && strcmp(n->value, "folded text\n") == 0 && !n->single_line, "a folded block");
    n = ynode_get(root, "d");
    ok(n && strcmp(n->value, "two lines") == 0 && !n->single_line,
       "a quoted scalar over two lines is not single_line");
    is_at(n, 9, 5, "a quoted multi-line scalar after its quote");
    n = ynode_get(root, "e");
    ok(n && n->single_line && n->length == 9, "UTF-8 text kept as bytes");
    is_at(ynode_get(root, "f"), 12, 4, "columns count characters");
    ynode_free(root);
}

static void test_duplicates(void)
{
    struct ynode *root;

    root = load("a: 1\nb: 2\na: 3\n");
    ok(root == NULL && diags.errors == 1, "a duplicate key is refused");
    is_diag(0, 3, 1, "key 'a' appears twice (first at line 1)", "the duplicate at the second");

    root = load("stages:\n  - {x: 1, y: 2, x: 3}\n  - name: a\n    name: b\nstages: 1\n");
    ok(root == NULL && diags.errors == 3, "every duplicate key is reported in one pass");
    is_diag(0, 2, 18, "key 'x' appears twice (first at line 2)", "in a flow mapping");
    is_diag(1, 4, 5, "key 'name' appears twice (first at line 3)", "in a nested block mapping");
    is_diag(2, 5, 1, "key 'stages' appears twice (first at line 1)", "at the top level");

    root = load("a: 1\n'a': 2\n");
    ok(root == NULL && diags.errors == 1, "a quoted key equal to a plain one is a duplicate");

    root = load("a: {b: 1}\nc: {b: 1}\n");
    ok(root != NULL && diags.count == 0, "equal keys in different mappings are fine");
    ynode_free(root);

    /* many keys: the check is linear, and the one duplicate is found */
    {
        size_t n = 20000, cap = n * 16 + 32, used = 0;
        char *text = malloc(cap);
        for (size_t i = 0; i < n; i++)
            used += (size_t)snprintf(text + used, cap - used, "k%zu: %zu\n", i, i);
        used += (size_t)snprintf(text + used, cap - used, "k777: dup\n");
        root = load(text);
        ok(root == NULL && diags.errors == 1, "one duplicate among 20000 keys");
        is_diag(0, 20001, 1, "key 'k777' appears twice (first at line 778)", "its place");
        diag_free(&diags);
        diag_init(&diags, "t.yaml", NULL, 0);
        free(text);
    }

    /* a run of duplicates, then new keys: the table grows past them all at
     * once (a single doubling hung in a full table; the fuzzer found it) */
    {
        size_t n = 100, cap = n * 8 + 64, used = 0;
        char *text = malloc(cap);
        used += (size_t)snprintf(text + used, cap - used, "a: 0\n");
        for (size_t i = 0; i < n; i++)
            used += (size_t)snprintf(text + used, cap - used, "a: %zu\n", i);
        used += (size_t)snprintf(text + used, cap - used, "b: 1\nc: 2\n");
        root = load(text);
        ok(root == NULL && diags.errors == 100, "100 duplicates, then new keys: each reported");
        ynode_free(root);
        free(text);
    }
}

static void test_refused(void)
{
    struct ynode *root;

    root = load("a: &x 1\nb: *x\n");
    ok(root == NULL && diags.errors == 2, "an anchor and an alias are both refused");
    is_diag(0, 1, 4, "anchors ('&x') are not allowed", "the anchor");
    is_diag(1, 2, 4, "aliases ('*x') are not allowed", "the alias");

    root = load("base: &b {x: 1}\nmore:\n  <<: *b\n");
    ok(root == NULL && diags.errors == 2, "merge keys (anchor + alias) are refused");

    root = load("a: !!str 5\n");
    ok(root == NULL && diags.errors == 1, "a tag is refused");
    is_diag(0, 1, 4, "tags ('tag:yaml.org,2002:str') are not allowed", "the tag");

    root = load("? [a, b]\n: 1\n");
    ok(root == NULL && diags.errors == 1, "a sequence as a key is refused");
    is_diag(0, 1, 3, "a mapping key must be a scalar, not a sequence", "at the key");

    root = load("{{a: 1}: 2, c: 3, c: 4}\n");
    ok(root == NULL && diags.errors == 2, "a mapping as a key, then a duplicate");
    is_diag(0, 1, 2, "a mapping key must be a scalar, not a mapping", "the mapping key");
    is_diag(1, 1, 19, "key 'c' appears twice", "and the duplicate after it");
}

static void test_syntax(void)
{
    struct ynode *root;

    root = load("a: 1\n  b: 2\n");
    ok(root == NULL && diags.errors == 1, "a syntax error");
    is_diag(0, 2, 4, "YAML syntax error: mapping values are not allowed in this context",
            "at libyaml's problem mark, 1-based");

    root = load("a: [1, 2\nb: 3\n");
    ok(root == NULL && diags.errors == 1, "an unclosed flow sequence");
    ok(diags.count && strstr(diags.items[0].message, "YAML syntax error: ") &&
           strstr(diags.items[0].message, "(while parsing a flow sequence at line 1)"),
       "the context names where the flow sequence started");

    root = load("a:\n\t- 1\n");
    ok(root == NULL && diags.errors == 1, "a tab as indentation");
    is_diag(0, 2, 1, "found character that cannot start any token", "at the tab");
    ok(diags.count && diags.items[0].hint && strstr(diags.items[0].hint, "spaces"),
       "the hint says YAML indents with spaces");

    root = load("a: \"x\xff\"\n");
    ok(root == NULL && diags.errors == 1, "invalid UTF-8");
    ok(diags.count && diags.items[0].line == 1 && strstr(diags.items[0].message, "UTF-8"),
       "reported on its line");

    root = load("a: 1\nb: \x01\n");
    ok(root == NULL && diags.errors == 1 && diags.items[0].line == 2,
       "a control character, on its line");
}

static void test_documents(void)
{
    struct ynode *root;

    root = load("");
    ok(root == NULL && diags.errors == 1, "an empty file");
    is_diag(0, 1, 1, "no YAML document", "reported at 1:1");
    root = load("# only a comment\n\n");
    ok(root == NULL && diags.errors == 1, "a file of comments");
    root = load("---\n");
    ok(root == NULL && diags.errors == 1, "a document of nothing");
    root = load("--- ~\n");
    ok(root == NULL && diags.errors == 1, "a document that is null");

    root = load("a: 1\n---\nb: [\n");
    ok(root != NULL && diags.count == 0 && ynode_get(root, "a") && !ynode_get(root, "b"),
       "only the first document is read (a broken second one does not matter)");
    ynode_free(root);

    root = load("just a string\n");
    ok(root != NULL && root->kind == YNODE_SCALAR, "a document of one scalar loads");
    ynode_free(root);

    root = load("a: \"x\\0y\"\n");
    ok(root && ynode_get(root, "a")->length == 3 && ynode_get(root, "a")->value[1] == '\0',
       "a NUL from an escape is kept, with the length");
    ynode_free(root);
}

static char *nest(int depth, const char *open, const char *close)
{
    size_t lo = strlen(open), lc = strlen(close);
    char *s = malloc((size_t)depth * (lo + lc) + 2);
    size_t n = 0;

    for (int i = 0; i < depth; i++) {
        memcpy(s + n, open, lo);
        n += lo;
    }
    for (int i = 0; i < depth; i++) {
        memcpy(s + n, close, lc);
        n += lc;
    }
    s[n++] = '\n';
    s[n] = '\0';
    return s;
}

static void test_depth(void)
{
    struct ynode *root;
    char *text;

    text = nest(64, "[", "]");
    root = load(text);
    ok(root != NULL && diags.count == 0, "64 levels of nesting are fine");
    ynode_free(root);
    free(text);

    text = nest(65, "[", "]");
    root = load(text);
    ok(root == NULL && diags.errors == 1, "65 levels are refused");
    is_diag(0, 1, 65, "nested more than 64 levels deep", "at the 65th level");
    free(text);

    text = nest(100000, "{a: ", "}");
    root = load(text);
    ok(root == NULL && diags.errors == 1, "100000 levels are refused without trouble");
    free(text);

    text = nest(200000, "- ", "");
    root = load(text);
    ok(root == NULL && diags.errors >= 1, "a deep block sequence is refused");
    free(text);
}

/* Pseudo-random YAML-ish text: the loader must never crash, and must
 * either return a tree or report an error. */
static void test_garbage(void)
{
    static const char *const pieces[] = {
        "a", ":", " ", "\n", "- ", "[", "]", "{", "}", ",", "'", "\"", "\\", "&x", "*x",
        "!!str", "? ", "#", "|", ">", "---", "...", "\t", "  ", "\xc3", "\xa9", "\xff",
        "%YAML 1.2", "<<", "\0", "b: ", "1", "~", "\r"};
    unsigned long long state = 88172645463325252ULL;
    int bad = 0;

    for (int round = 0; round < 20000; round++) {
        char text[256];
        size_t len = 0;
        int n;
        struct ynode *root;

        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        n = (int)(state % 40);
        for (int i = 0; i < n; i++) {
            const char *p;
            size_t pl;
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            p = pieces[state % (sizeof pieces / sizeof *pieces)];
            pl = p[0] ? strlen(p) : 1;
            if (len + pl >= sizeof text)
                break;
            memcpy(text + len, p, pl);
            len += pl;
        }
        diag_free(&diags);
        diag_init(&diags, "t.yaml", text, len);
        root = yaml_load(text, len, &diags);
        if ((root == NULL) != (diags.errors > 0))
            bad++;
        ynode_free(root);
    }
    is_int(bad, 0, "20000 garbage inputs: a tree exactly when there is no error");
}

/* Where byte `at` of a scalar is in the file. */
static void place_is(const struct ynode *n, size_t at, int line, int col, const char *what)
{
    bool good = n && n->places && at <= n->length && n->places[at].line == line &&
                n->places[at].col == col;

    ok(good, "%s at %d:%d", what, line, col);
    if (!good && n && n->places && at <= n->length)
        diag("got %d:%d", n->places[at].line, n->places[at].col);
    else if (!good)
        diag("no places");
}

static void test_places(void)
{
    const char *text = "a: >\n"                 /* 1 */
                       "  y = x +\n"            /* 2 */
                       "  sofmax(x)\n"          /* 3 */
                       "b: |-\n"                /* 4 */
                       "    z = y *\n"          /* 5 */
                       "\n"                     /* 6 */
                       "      (\xc3\xa9 + 1))\n" /* 7: a two-byte character */
                       "c: w = x +\n"           /* 8 */
                       "     nope\n"            /* 9 */
                       "d: 'v = x +\n"          /* 10 */
                       "     ''s'''\n"          /* 11 */
                       "e: \"t\\tab\n"          /* 12 */
                       "   x\"\n"               /* 13 */
                       "f: [a, {k: v}]\n"
                       "g: {k: [1]}\n"
                       "h:\n"
                       "  - one line\n";
    struct ynode *root = load(text);
    const struct ynode *a, *b, *c, *d, *e;

    ok(root && diags.count == 0, "multi-line scalars load");
    if (!root)
        return;
    a = ynode_get(root, "a");
    ok(a && strcmp(a->value, "y = x + sofmax(x)\n") == 0, "folded: lines joined by a space");
    place_is(a, 0, 2, 3, "folded: the first character");
    place_is(a, 8, 3, 3, "folded: a token on the second line");
    b = ynode_get(root, "b");
    ok(b && strcmp(b->value, "z = y *\n\n  (\xc3\xa9 + 1))") == 0, "literal: lines kept");
    place_is(b, 0, 5, 5, "literal: after its indentation");
    place_is(b, 11, 7, 7, "literal: past an empty line and more indentation");
    place_is(b, 12, 7, 8, "literal: a two-byte character is one column");
    place_is(b, 13, 7, 8, "... both of its bytes");
    place_is(b, 19, 7, 14, "literal: past the two-byte character");
    c = ynode_get(root, "c");
    ok(c && strcmp(c->value, "w = x + nope") == 0, "plain over two lines");
    place_is(c, 8, 9, 6, "plain: the second line's token");
    d = ynode_get(root, "d");
    ok(d && strcmp(d->value, "v = x + 's'") == 0, "single-quoted over two lines");
    place_is(d, 8, 11, 6, "single-quoted: '' is the quote's second character");
    e = ynode_get(root, "e");
    ok(e && strcmp(e->value, "t\tab x") == 0 && !e->places,
       "double-quoted with an escape: no places (it does not map)");
    ok(!ynode_get(root, "a")->flow && ynode_get(root, "f")->flow &&
           ynode_get(root, "f")->items[1]->flow && ynode_get(root, "g")->flow &&
           ynode_get(ynode_get(root, "g"), "k")->flow && !ynode_get(root, "h")->flow,
       "flow style is recorded for sequences and mappings");
    ok(ynode_get(root, "h")->items[0]->single_line && !ynode_get(root, "h")->items[0]->places,
       "a one-line scalar has no places");
    ynode_free(root);
}

int main(void)
{
    diag_init(&diags, "t.yaml", NULL, 0);
    test_block_positions();
    test_multiline();
    test_places();
    test_duplicates();
    test_refused();
    test_syntax();
    test_documents();
    test_depth();
    test_garbage();
    diag_free(&diags);
    return done_testing();
}
