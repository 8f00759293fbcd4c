/*
 * expr.c - the tokenizer and precedence-climbing parser of the expression
 * language (tensorrun-pipeline(5), EXPRESSIONS).
 *
 * The whole statement is tokenized first, so that the parser can look for
 * a top-level '=' (statement or bare expression?) and for NAME '=' (a
 * keyword argument).  A character the tokenizer cannot read ends the token
 * list with a TOK_ERROR token carrying that error; the parser reports it
 * only when it gets there, so that of several errors the leftmost one is
 * the one reported.  Exactly one error is reported per statement.
 *
 * Places: an operator call sits at its operator; x[...] at its '[' and
 * x.T at its '.', since they are postfix operators and errors about them
 * (index out of range, .T of a 1-d value) belong there; a call by name at
 * the name; a list at its '['; a slice at its first token.  An argument,
 * list item or subscript (struct expr_arg) sits at its first token, so a
 * caret under "argument 2" points at where the argument starts, not at
 * an operator inside it.
 *
 * Choices the man page does not spell out: None as a slice part (x[None:3]) means
 * absent, as in NumPy, and becomes NULL; trailing commas are accepted in
 * calls, lists and subscripts; '#' starts a comment to the end of its line;
 * a target named twice in one statement (a, a = ...) is an error.
 *
 * Ownership: every parse function returns a tree it owns to its caller, or
 * NULL after reporting an error, having freed whatever it had built.
 * Helpers that take subtrees (make_call, push_arg) consume them, on
 * failure too.
 */
#include "config.h"

#include "expr.h"
#include "tensorrun_ops.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How deep expressions may nest (brackets, calls, unary minus, '**', and
 * each link of a chain like a+b+c or x.T[0]) before the parser refuses
 * them: the bound keeps the parser's recursion, and that of everything
 * that walks the tree later, far from the end of the stack. */
#define MAX_DEPTH 256

/* Longest piece of a token quoted in a message. */
#define QUOTE_MAX 40

#define STATEMENT_HINT "a statement is TARGET[, TARGET]... = EXPR"

enum tok_kind {
    TOK_END,
    TOK_ERROR,   /* the tokenizer's error (parser.lex_message); always last */
    TOK_NAME,    /* identifiers and reserved words */
    TOK_INT,
    TOK_FLOAT,
    TOK_STRING,
    TOK_LPAREN, TOK_RPAREN, TOK_LBRACKET, TOK_RBRACKET,
    TOK_COMMA, TOK_ASSIGN, TOK_DOT, TOK_COLON, TOK_ELLIPSIS,
    TOK_PLUS, TOK_MINUS, TOK_STAR, TOK_SLASH, TOK_FLOORDIV, TOK_PERCENT, TOK_POW, TOK_AT,
    TOK_AMP, TOK_PIPE, TOK_CARET, TOK_TILDE,
    TOK_LT, TOK_LE, TOK_GT, TOK_GE, TOK_EQ, TOK_NE
};

struct token {
    enum tok_kind kind;
    size_t off, len;     /* in bytes, of the statement's text */
    int line, col;
    bool exact;          /* col is the token's own column (not the statement's) */
    int64_t integer;     /* TOK_INT */
    double number;       /* TOK_FLOAT */
    char *str;           /* TOK_STRING: the text with escapes resolved */
};

struct parser {
    const char *text;
    size_t len;
    size_t first_newline;     /* offset of the text's first '\n'; len when none */
    int line, col;            /* of the statement */
    bool single_line;
    const struct diag_place *places; /* of every byte, or NULL */
    struct diag_list *diags;

    struct token *toks;
    size_t ntoks, captoks;
    size_t pos;               /* the current token */

    int depth;                /* see MAX_DEPTH */
    bool failed;              /* an error has been reported */
    char lex_message[256];    /* the error TOK_ERROR stands for */
    const char *lex_hint;
};

/* ------------------------------------------------------------ errors */

static void oom(struct parser *p)
{
    if (p->failed)
        return;
    p->failed = true;
    diag_error_code(p->diags, 5, p->line, p->col, NULL, "out of memory while parsing the statement");
}

/*
 * Reports an error at token t, unless one was reported already.  At
 * TOK_ERROR, whatever the parser expected there, the tokenizer's own error
 * is the one to give.
 */
__attribute__((format(printf, 4, 5)))
static void fail(struct parser *p, const struct token *t, const char *hint, const char *fmt, ...)
{
    char message[512];
    va_list ap;

    if (p->failed)
        return;
    p->failed = true;
    if (t->kind == TOK_ERROR) {
        diag_error(p->diags, t->line, t->col, p->lex_hint, "%s", p->lex_message);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    diag_error(p->diags, t->line, t->col, hint, "%s", message);
}

/* Length of t's text as quoted in messages ("%.*s"). */
static int qlen(const struct token *t)
{
    return t->len > QUOTE_MAX ? QUOTE_MAX : (int)t->len;
}

static const char *qtext(const struct parser *p, const struct token *t)
{
    return p->text + t->off;
}

/* " opened at column N" where the token's column is its own, else "". */
static const char *opened_at(const struct token *open, char *buf, size_t size)
{
    if (!open->exact)
        return "";
    snprintf(buf, size, " opened at column %d", open->col);
    return buf;
}

/* ------------------------------------------------------------ words */

enum word {
    WORD_PLAIN, WORD_TRUE, WORD_FALSE, WORD_NONE, WORD_INF, WORD_NAN, WORD_DTYPE, WORD_PACKED
};

/*
 * What kind of word w is.  tr_dtype_parse records an error for a word
 * that is no dtype; nothing reads the engine's last error after parsing,
 * so that is harmless, and it keeps the dtype table the one authority.
 */
static enum word classify(const char *w, enum tr_dtype *dtype)
{
    static const struct {
        const char *text;
        enum word word;
    } words[] = {
        {"true", WORD_TRUE}, {"false", WORD_FALSE}, {"None", WORD_NONE},
        {"inf", WORD_INF}, {"nan", WORD_NAN},
    };
    enum tr_dtype ignored;

    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(w, words[i].text) == 0)
            return words[i].word;
    if (tr_dtype_parse(w, dtype ? dtype : &ignored) == TR_OK)
        return WORD_DTYPE;
    if (tr_packed_dtype_word(w))
        return WORD_PACKED; /* i4 u4: the quantise ops' packed dtypes */
    return WORD_PLAIN;
}

bool expr_is_reserved(const char *word)
{
    return word && classify(word, NULL) != WORD_PLAIN;
}

static bool is_ident_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ident_char(char c)
{
    return is_ident_start(c) || is_digit(c);
}

bool expr_is_identifier(const char *word)
{
    if (!word || !is_ident_start(word[0]))
        return false;
    for (const char *c = word + 1; *c; c++)
        if (!is_ident_char(*c))
            return false;
    return !expr_is_reserved(word);
}

/* A NUL-terminated copy of t's text, or NULL (out of memory, reported). */
static char *tok_strdup(struct parser *p, const struct token *t)
{
    char *s = malloc(t->len + 1);

    if (!s) {
        oom(p);
        return NULL;
    }
    memcpy(s, p->text + t->off, t->len);
    s[t->len] = '\0';
    return s;
}

/* classify() of a NAME token.  Reserved words are short, so a long word
 * is plain without a copy. */
static enum word tok_word(const struct parser *p, const struct token *t, enum tr_dtype *dtype)
{
    char buf[32];

    if (t->len >= sizeof buf)
        return WORD_PLAIN;
    memcpy(buf, p->text + t->off, t->len);
    buf[t->len] = '\0';
    return classify(buf, dtype);
}

/* ------------------------------------------------------------ tokenizer */

/* Line and column of the byte at off (see expr_parse in expr.h). */
static void place(const struct parser *p, size_t off, struct token *t)
{
    if (p->places) {
        t->line = p->places[off > p->len ? p->len : off].line;
        t->col = p->places[off > p->len ? p->len : off].col;
        t->exact = true;
        return;
    }
    t->line = p->line;
    t->col = p->col;
    t->exact = p->single_line && off <= p->first_newline;
    if (t->exact)
        t->col = off > (size_t)(INT_MAX - p->col) ? INT_MAX : p->col + (int)off;
}

static struct token *push_token(struct parser *p, enum tok_kind kind, size_t off, size_t len)
{
    struct token *t;

    if (p->ntoks == p->captoks) {
        size_t cap = p->captoks ? p->captoks * 2 : 16;
        struct token *toks = realloc(p->toks, cap * sizeof *toks);
        if (!toks) {
            oom(p);
            return NULL;
        }
        p->toks = toks;
        p->captoks = cap;
    }
    t = &p->toks[p->ntoks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->off = off;
    t->len = len;
    place(p, off, t);
    return t;
}

/* Ends the token list with the error at off.  Returns false, since no
 * token follows; tokenize() tells this from running out of memory by
 * p->failed. */
__attribute__((format(printf, 4, 5)))
static bool lex_error(struct parser *p, size_t off, const char *hint, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(p->lex_message, sizeof p->lex_message, fmt, ap);
    va_end(ap);
    p->lex_hint = hint;
    push_token(p, TOK_ERROR, off, 1);
    return false;
}

/* Operators and punctuation, longest first so that '**' wins over '*'. */
static const struct {
    const char *text;
    enum tok_kind kind;
} punctuation[] = {
    {"...", TOK_ELLIPSIS}, {"**", TOK_POW}, {"//", TOK_FLOORDIV}, {"<=", TOK_LE}, {">=", TOK_GE},
    {"==", TOK_EQ}, {"!=", TOK_NE}, {"(", TOK_LPAREN}, {")", TOK_RPAREN},
    {"[", TOK_LBRACKET}, {"]", TOK_RBRACKET}, {",", TOK_COMMA}, {"=", TOK_ASSIGN},
    {".", TOK_DOT}, {":", TOK_COLON}, {"+", TOK_PLUS}, {"-", TOK_MINUS},
    {"*", TOK_STAR}, {"/", TOK_SLASH}, {"@", TOK_AT}, {"<", TOK_LT}, {">", TOK_GT},
    {"%", TOK_PERCENT}, {"&", TOK_AMP}, {"|", TOK_PIPE}, {"^", TOK_CARET}, {"~", TOK_TILDE},
};

/* Length of the punctuation at s (and its kind), or 0. */
static size_t match_punctuation(const char *s, enum tok_kind *kind)
{
    for (size_t i = 0; i < sizeof punctuation / sizeof punctuation[0]; i++) {
        size_t n = strlen(punctuation[i].text);
        if (strncmp(s, punctuation[i].text, n) == 0) {
            *kind = punctuation[i].kind;
            return n;
        }
    }
    return 0;
}

/* A hint for a character that starts no token. */
static const char *stray_hint(char c)
{
    switch (c) {
    case ';':
        return "a statement holds one assignment; write the next one as its own statement";
    case '!':
        return "write ~a or logical_not(a); '!=' compares";
    default:
        return (unsigned char)c >= 0x80 ? "outside strings, expressions are ASCII" : NULL;
    }
}

/* The end of the number starting at i: digits [. digits] [e [+-] digits],
 * or a leading '.' with digits.  Sets *is_float; returns 0 when an
 * exponent has no digits. */
static size_t scan_number(const char *s, size_t i, bool *is_float)
{
    *is_float = false;
    while (is_digit(s[i]))
        i++;
    if (s[i] == '.') {
        *is_float = true;
        i++;
        while (is_digit(s[i]))
            i++;
    }
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-')
            j++;
        if (!is_digit(s[j]))
            return 0;
        while (is_digit(s[j]))
            j++;
        *is_float = true;
        i = j;
    }
    return i;
}

static bool lex_number(struct parser *p, size_t start, size_t *next)
{
    const char *s = p->text;
    bool is_float;
    size_t end = scan_number(s, start, &is_float);
    int quoted;
    char *stop;
    int64_t integer = 0;
    double number = 0;
    struct token *t;

    if (end == 0 || is_ident_char(s[end]) || s[end] == '.') {
        /* quote the whole run: 0x1F, 2e, 1..2, 3px */
        end = start;
        while (is_ident_char(s[end]) || s[end] == '.')
            end++;
        quoted = end - start > QUOTE_MAX ? QUOTE_MAX : (int)(end - start);
        return lex_error(p, start, "numbers are decimal: 12, 1.5, .5, 1e-6",
                         "malformed number '%.*s'", quoted, s + start);
    }
    quoted = end - start > QUOTE_MAX ? QUOTE_MAX : (int)(end - start);
    errno = 0;
    if (is_float) {
        number = strtod(s + start, &stop);
        if (errno == ERANGE && isinf(number))
            return lex_error(p, start, "write inf for infinity",
                             "number '%.*s' is too large for f64", quoted, s + start);
    } else {
        long long v = strtoll(s + start, &stop, 10);
        if (errno == ERANGE)
            return lex_error(p, start, "integers are 64-bit (at most 9223372036854775807); "
                             "a float such as 1e20 can be larger",
                             "integer '%.*s' does not fit in 64 bits", quoted, s + start);
        integer = v;
    }
    /* strtod and strtoll must read exactly what the scan found */
    if (stop != s + end)
        return lex_error(p, start, NULL, "malformed number '%.*s'", quoted, s + start);
    t = push_token(p, is_float ? TOK_FLOAT : TOK_INT, start, end - start);
    if (!t)
        return false;
    t->integer = integer;
    t->number = number;
    *next = end;
    return true;
}

/* The escape character \c stands for, or 0 for none. */
static char unescape(char c)
{
    switch (c) {
    case '\\': return '\\';
    case '"':  return '"';
    case '\'': return '\'';
    case 'n':  return '\n';
    case 't':  return '\t';
    default:   return 0;
    }
}

static bool lex_string(struct parser *p, size_t start, size_t *next)
{
    const char *s = p->text;
    char quote = s[start];
    size_t i = start + 1, n = 0;
    struct token *t;
    char *out;

    /* first pass: find the end and check the escapes */
    for (;;) {
        if (s[i] == '\0' || s[i] == '\n')
            return lex_error(p, start, quote == '"' ? "close it with \"" : "close it with '",
                             "unterminated string");
        if (s[i] == quote)
            break;
        if (s[i] == '\\') {
            if (s[i + 1] == '\0' || s[i + 1] == '\n')
                return lex_error(p, start, NULL, "unterminated string");
            if (!unescape(s[i + 1]))
                return lex_error(p, i, "the escapes are \\\\ \\\" \\' \\n \\t",
                                 (unsigned char)s[i + 1] >= 0x20 && (unsigned char)s[i + 1] < 0x7f
                                     ? "unknown escape '\\%c' in a string"
                                     : "unknown escape '\\x%02X' in a string",
                                 (unsigned char)s[i + 1]);
            i++;
        }
        i++;
        n++;
    }
    out = malloc(n + 1);
    if (!out) {
        oom(p);
        return false;
    }
    n = 0;
    for (size_t j = start + 1; j < i; j++) {
        if (s[j] == '\\')
            out[n++] = unescape(s[++j]);
        else
            out[n++] = s[j];
    }
    out[n] = '\0';
    t = push_token(p, TOK_STRING, start, i + 1 - start);
    if (!t) {
        free(out);
        return false;
    }
    t->str = out;
    *next = i + 1;
    return true;
}

/* One token at i (not whitespace); false when the token list has ended
 * (TOK_ERROR pushed) or memory ran out. */
static bool lex_one(struct parser *p, size_t i, size_t *next)
{
    const char *s = p->text;
    enum tok_kind kind;
    size_t n;

    if (is_ident_start(s[i])) {
        size_t j = i + 1;
        while (is_ident_char(s[j]))
            j++;
        *next = j;
        return push_token(p, TOK_NAME, i, j - i) != NULL;
    }
    if (is_digit(s[i]) || (s[i] == '.' && is_digit(s[i + 1])))
        return lex_number(p, i, next);
    if (s[i] == '"' || s[i] == '\'')
        return lex_string(p, i, next);
    n = match_punctuation(s + i, &kind);
    if (n > 0) {
        *next = i + n;
        return push_token(p, kind, i, n) != NULL;
    }
    if ((unsigned char)s[i] >= 0x21 && (unsigned char)s[i] < 0x7f)
        lex_error(p, i, stray_hint(s[i]), "unexpected character '%c'", s[i]);
    else
        lex_error(p, i, stray_hint(s[i]), "unexpected byte 0x%02X", (unsigned char)s[i]);
    return false;
}

/* Tokenizes the whole text; the list ends with TOK_END or TOK_ERROR.
 * False only when out of memory. */
static bool tokenize(struct parser *p)
{
    const char *s = p->text;
    size_t i = 0, end_off = 0;

    while (s[i]) {
        if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
            i++;
        } else if (s[i] == '#') {
            /* a comment runs to the end of its line */
            while (s[i] && s[i] != '\n')
                i++;
        } else if (lex_one(p, i, &i)) {
            end_off = i;
        } else {
            return !p->failed;  /* TOK_ERROR ends the list */
        }
    }
    /* the end sits just after the last token, where a missing one belongs */
    return push_token(p, TOK_END, end_off, 0) != NULL;
}

static void free_tokens(struct parser *p)
{
    for (size_t i = 0; i < p->ntoks; i++)
        free(p->toks[i].str);
    free(p->toks);
    p->toks = NULL;
    p->ntoks = p->captoks = 0;
}

/* ------------------------------------------------------------ tokens */

static const struct token *cur(const struct parser *p)
{
    return &p->toks[p->pos];
}

static const struct token *peek2(const struct parser *p)
{
    return p->pos + 1 < p->ntoks ? &p->toks[p->pos + 1] : cur(p);
}

static bool at(const struct parser *p, enum tok_kind kind)
{
    return cur(p)->kind == kind;
}

/* Moves past the current token, and returns it.  Never moves past the
 * last token (TOK_END or TOK_ERROR). */
static const struct token *advance(struct parser *p)
{
    const struct token *t = cur(p);

    if (p->pos + 1 < p->ntoks)
        p->pos++;
    return t;
}

/* The token before the current one, or NULL at the start. */
static const struct token *previous(const struct parser *p)
{
    return p->pos > 0 ? &p->toks[p->pos - 1] : NULL;
}

/* One more level of nesting; false (reported) past MAX_DEPTH. */
static bool deeper(struct parser *p)
{
    if (p->depth < MAX_DEPTH) {
        p->depth++;
        return true;
    }
    fail(p, cur(p), "split it into several statements",
         "expression nested too deeply (more than %d levels)", MAX_DEPTH);
    return false;
}

/* ------------------------------------------------------------ nodes */

void expr_free(struct expr *e)
{
    if (!e)
        return;
    if (e->kind == EXPR_NAME || e->kind == EXPR_STRING || e->kind == EXPR_ATTR)
        free(e->v.name);
    free(e->op);
    for (size_t i = 0; i < e->nargs; i++) {
        free(e->args[i].keyword);
        expr_free(e->args[i].value);
    }
    free(e->args);
    expr_free(e->base);
    for (int i = 0; i < 3; i++)
        expr_free(e->slice[i]);
    free(e);
}

void statement_free(struct statement *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntargets; i++)
        free(s->targets[i]);
    free(s->targets);
    free(s->target_cols);
    expr_free(s->value);
    free(s);
}

static struct expr *node_new(struct parser *p, enum expr_kind kind, const struct token *t)
{
    struct expr *e = calloc(1, sizeof *e);

    if (!e) {
        oom(p);
        return NULL;
    }
    e->kind = kind;
    e->line = t->line;
    e->col = t->col;
    return e;
}

/*
 * Makes room in *array (of n elements of size each) for one more.  The
 * capacity is not stored: it is the next power of two from 4 up, so a
 * resize is due exactly when n is 0 or such a power.
 */
static bool grow(void **array, size_t n, size_t size)
{
    size_t cap;
    void *bigger;

    if (n != 0 && (n < 4 || (n & (n - 1)) != 0))
        return true;
    cap = n == 0 ? 4 : n * 2;
    if (cap > SIZE_MAX / size)
        return false;
    bigger = realloc(*array, cap * size);
    if (!bigger)
        return false;
    *array = bigger;
    return true;
}

/* Appends an argument to e, taking keyword and value, which are freed
 * on failure. */
static bool push_arg(struct parser *p, struct expr *e, char *keyword, int line, int col,
                     struct expr *value)
{
    struct expr_arg *a;

    if (!grow((void **)&e->args, e->nargs, sizeof *e->args)) {
        oom(p);
        free(keyword);
        expr_free(value);
        return false;
    }
    a = &e->args[e->nargs++];
    a->keyword = keyword;
    a->line = line;
    a->col = col;
    a->value = value;
    return true;
}

/* The call op(lhs[, rhs]) for an operator at t; takes lhs and rhs. */
static struct expr *make_call(struct parser *p, const char *op, const struct token *t,
                              struct expr *lhs, struct expr *rhs)
{
    struct expr *e = node_new(p, EXPR_CALL, t);

    if (e)
        e->op = strdup(op);
    if (!e || !e->op) {
        oom(p);
        expr_free(e);
        expr_free(lhs);
        expr_free(rhs);
        return NULL;
    }
    e->from_operator = true;
    if (!push_arg(p, e, NULL, lhs->line, lhs->col, lhs)) {
        expr_free(rhs);
        expr_free(e);
        return NULL;
    }
    if (rhs && !push_arg(p, e, NULL, rhs->line, rhs->col, rhs)) {
        expr_free(e);
        return NULL;
    }
    return e;
}

/* ------------------------------------------------------------ parser */

static struct expr *parse_expr(struct parser *p);
static struct expr *parse_unary(struct parser *p);

/* Reports that an expression was expected at the current token. */
static void expected_expression(struct parser *p)
{
    const struct token *t = cur(p), *prev = previous(p);
    const char *hint = t->kind == TOK_ELLIPSIS ? "'...' is allowed only inside x[...]" : NULL;

    if (!prev)
        fail(p, t, hint, "expected an expression, found '%.*s'", qlen(t), qtext(p, t));
    else if (t->kind == TOK_END)
        fail(p, t, hint, "expected an expression after '%.*s'", qlen(prev), qtext(p, prev));
    else
        fail(p, t, hint, "expected an expression after '%.*s', found '%.*s'", qlen(prev),
             qtext(p, prev), qlen(t), qtext(p, t));
}

/* Reports a missing closing bracket at the current token: what closes
 * what ("the call of 'norm'", "the list", ...), opened at open. */
static void expected_close(struct parser *p, const struct token *open, char close,
                           const char *what)
{
    const struct token *t = cur(p);
    char at_col[48];

    if (t->kind == TOK_END)
        fail(p, t, NULL, "expected '%c' to close %s%s", close, what,
             opened_at(open, at_col, sizeof at_col));
    else
        fail(p, t, NULL, "expected ',' or '%c' in %s%s, found '%.*s'", close, what,
             opened_at(open, at_col, sizeof at_col), qlen(t), qtext(p, t));
}

/* A reserved word or identifier at a NAME token. */
static struct expr *parse_word(struct parser *p, const struct token *t, bool *callable)
{
    enum tr_dtype dtype = TR_DTYPE_F32;
    enum word word = tok_word(p, t, &dtype);
    struct expr *e;

    switch (word) {
    case WORD_TRUE:
    case WORD_FALSE:
        e = node_new(p, EXPR_BOOL, t);
        if (e)
            e->v.boolean = word == WORD_TRUE;
        return e;
    case WORD_NONE:
        return node_new(p, EXPR_NONE, t);
    case WORD_INF:
    case WORD_NAN:
        e = node_new(p, EXPR_FLOAT, t);
        if (e)
            e->v.number = word == WORD_INF ? INFINITY : NAN;
        return e;
    case WORD_DTYPE:
        e = node_new(p, EXPR_DTYPE, t);
        if (e)
            e->v.dtype = dtype;
        return e;
    case WORD_PACKED:
        /* no tensor dtype: the string a qdtype parameter takes
         * (tr_packed_dtype_word), refused by every other op */
        e = node_new(p, EXPR_STRING, t);
        if (e)
            e->v.name = tok_strdup(p, t);
        if (e && !e->v.name) {
            free(e);
            return NULL;
        }
        return e;
    case WORD_PLAIN:
        break;
    }
    e = node_new(p, EXPR_NAME, t);
    if (!e)
        return NULL;
    e->v.name = tok_strdup(p, t);
    if (!e->v.name) {
        free(e);
        return NULL;
    }
    *callable = true;
    return e;
}

/* '[' [expr (',' expr)* [',']] ']', after the '['. */
static struct expr *parse_list(struct parser *p, const struct token *open)
{
    struct expr *list = node_new(p, EXPR_LIST, open);

    while (list && !at(p, TOK_RBRACKET)) {
        const struct token *first = cur(p);
        struct expr *item = parse_expr(p);
        if (!item || !push_arg(p, list, NULL, first->line, first->col, item))
            goto fail;
        if (at(p, TOK_COMMA)) {
            advance(p);
        } else if (!at(p, TOK_RBRACKET)) {
            expected_close(p, open, ']', "the list");
            goto fail;
        }
    }
    if (list)
        advance(p);
    return list;
fail:
    expr_free(list);
    return NULL;
}

/* '(' expr ')', after the '('.  The parentheses leave no node. */
static struct expr *parse_group(struct parser *p, const struct token *open)
{
    struct expr *e = parse_expr(p);
    char at_col[48];

    if (!e)
        return NULL;
    if (!at(p, TOK_RPAREN)) {
        const struct token *t = cur(p);
        if (t->kind == TOK_END)
            fail(p, t, NULL, "expected ')' to close the '('%s", opened_at(open, at_col, sizeof at_col));
        else
            fail(p, t, NULL, "expected ')' to close the '('%s, found '%.*s'",
                 opened_at(open, at_col, sizeof at_col), qlen(t), qtext(p, t));
        expr_free(e);
        return NULL;
    }
    advance(p);
    return e;
}

/* primary; *callable says whether it is a plain name that may be called. */
static struct expr *parse_primary(struct parser *p, bool *callable)
{
    const struct token *t = cur(p);
    struct expr *e;

    *callable = false;
    switch (t->kind) {
    case TOK_NAME:
        advance(p);
        return parse_word(p, t, callable);
    case TOK_INT:
        advance(p);
        e = node_new(p, EXPR_INT, t);
        if (e)
            e->v.integer = t->integer;
        return e;
    case TOK_FLOAT:
        advance(p);
        e = node_new(p, EXPR_FLOAT, t);
        if (e)
            e->v.number = t->number;
        return e;
    case TOK_STRING:
        advance(p);
        e = node_new(p, EXPR_STRING, t);
        if (e)
            e->v.name = strdup(t->str);
        if (e && !e->v.name) {
            oom(p);
            free(e);
            return NULL;
        }
        return e;
    case TOK_LBRACKET:
        advance(p);
        return parse_list(p, t);
    case TOK_LPAREN:
        advance(p);
        return parse_group(p, t);
    default:
        expected_expression(p);
        return NULL;
    }
}

/* Whether the current token ends a slice part (':' ',' ']'). */
static bool at_slice_end(const struct parser *p)
{
    return at(p, TOK_COLON) || at(p, TOK_COMMA) || at(p, TOK_RBRACKET);
}

/* A part of a slice; None stands for an absent part, as in NumPy, so it
 * becomes NULL. */
static bool parse_slice_part(struct parser *p, struct expr **part)
{
    *part = parse_expr(p);
    if (!*part)
        return false;
    if ((*part)->kind == EXPR_NONE) {
        expr_free(*part);
        *part = NULL;
    }
    return true;
}

/* subscript := expr | [expr] ':' [expr] [':' [expr]] | '...' | 'None' */
static struct expr *parse_subscript(struct parser *p, int *ellipses)
{
    const struct token *t = cur(p);
    struct expr *start = NULL, *slice;

    if (t->kind == TOK_ELLIPSIS) {
        if (*ellipses > 0) {
            fail(p, t, NULL, "only one '...' is allowed in a subscript");
            return NULL;
        }
        ++*ellipses;
        advance(p);
        return node_new(p, EXPR_ELLIPSIS, t);
    }
    if (!at(p, TOK_COLON)) {
        start = parse_expr(p);
        if (!start || !at(p, TOK_COLON))
            return start;
    }
    slice = node_new(p, EXPR_SLICE, t);
    if (!slice) {
        expr_free(start);
        return NULL;
    }
    if (start && start->kind == EXPR_NONE) {
        expr_free(start);
        start = NULL;
    }
    slice->slice[0] = start;
    advance(p); /* ':' */
    if (!at_slice_end(p) && !parse_slice_part(p, &slice->slice[1]))
        goto fail;
    if (at(p, TOK_COLON)) {
        advance(p);
        if (!at_slice_end(p) && !parse_slice_part(p, &slice->slice[2]))
            goto fail;
    }
    return slice;
fail:
    expr_free(slice);
    return NULL;
}

/* base '[' subscripts ']', at the '['; takes base. */
static struct expr *parse_index(struct parser *p, struct expr *base)
{
    const struct token *open = advance(p);
    struct expr *e = node_new(p, EXPR_INDEX, open);
    int ellipses = 0;

    if (!e) {
        expr_free(base);
        return NULL;
    }
    e->base = base;
    if (at(p, TOK_RBRACKET)) {
        fail(p, cur(p), "x[:] selects everything", "empty subscript");
        goto fail;
    }
    while (!at(p, TOK_RBRACKET)) {
        const struct token *first = cur(p);
        struct expr *sub = parse_subscript(p, &ellipses);
        if (!sub || !push_arg(p, e, NULL, first->line, first->col, sub))
            goto fail;
        if (at(p, TOK_COMMA)) {
            advance(p);
        } else if (!at(p, TOK_RBRACKET)) {
            expected_close(p, open, ']', "the subscript");
            goto fail;
        }
    }
    advance(p);
    return e;
fail:
    expr_free(e);
    return NULL;
}

/* The attributes of a tensor: the views x.T and x.mT, and the constants
 * x.shape, x.ndim and x.dtype. */
static bool is_attribute(const char *text, size_t len)
{
    static const char *const names[] = {"T", "mT", "shape", "ndim", "dtype"};

    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == len && strncmp(text, names[i], len) == 0)
            return true;
    return false;
}

/* base '.' NAME, at the '.'; takes base. */
static struct expr *parse_attr(struct parser *p, struct expr *base)
{
    const struct token *dot = advance(p), *name = cur(p);
    struct expr *e;

    if (name->kind != TOK_NAME) {
        fail(p, name, "x.T reverses the dimensions, x.mT swaps the last two",
             "expected an attribute name after '.'");
        expr_free(base);
        return NULL;
    }
    if (!is_attribute(qtext(p, name), name->len)) {
        fail(p, name, "x.T reverses the dimensions, x.mT swaps the last two; x.shape, x.ndim "
                      "and x.dtype are constants; other operations are calls: op(x, ...)",
             "unknown attribute '%.*s' (expected .T, .mT, .shape, .ndim or .dtype)", qlen(name),
             qtext(p, name));
        expr_free(base);
        return NULL;
    }
    advance(p);
    e = node_new(p, EXPR_ATTR, dot);
    if (e)
        e->v.name = tok_strdup(p, name);
    if (!e || !e->v.name) {
        free(e);
        expr_free(base);
        return NULL;
    }
    e->base = base;
    return e;
}

/* Whether the call e already has the keyword at t. */
static const struct expr_arg *find_keyword(const struct parser *p, const struct expr *e,
                                           const struct token *t)
{
    for (size_t i = 0; i < e->nargs; i++) {
        const char *k = e->args[i].keyword;
        if (k && strlen(k) == t->len && memcmp(k, qtext(p, t), t->len) == 0)
            return &e->args[i];
    }
    return NULL;
}

/* arg := expr | NAME '=' expr, appended to the call e. */
static bool parse_arg(struct parser *p, struct expr *e, bool *seen_keyword)
{
    const struct token *t = cur(p);
    struct expr *value;
    char *keyword = NULL;

    if (t->kind == TOK_NAME && peek2(p)->kind == TOK_ASSIGN) {
        const struct expr_arg *first = find_keyword(p, e, t);
        char hint[64];
        /* a keyword may be a reserved word: nan_to_num(x, nan=0.0) */
        if (first) {
            snprintf(hint, sizeof hint, "the first is at column %d", first->col);
            fail(p, t, t->exact ? hint : NULL, "keyword '%.*s' given twice", qlen(t), qtext(p, t));
            return false;
        }
        keyword = tok_strdup(p, t);
        if (!keyword)
            return false;
        advance(p);
        advance(p);
        *seen_keyword = true;
    } else if (*seen_keyword) {
        fail(p, t, "put positional arguments first: f(a, b, key=value)",
             "positional argument follows keyword argument");
        return false;
    }
    value = parse_expr(p);
    if (!value) {
        free(keyword);
        return false;
    }
    return push_arg(p, e, keyword, t->line, t->col, value);
}

/* NAME '(' args ')', at the '('; takes name (an EXPR_NAME). */
static struct expr *parse_call(struct parser *p, struct expr *name)
{
    const struct token *open = advance(p);
    bool seen_keyword = false;
    char what[QUOTE_MAX + 32];

    /* the name node becomes the call: same place, its name the op */
    name->kind = EXPR_CALL;
    name->op = name->v.name;
    name->v.name = NULL;
    snprintf(what, sizeof what, "the call of '%.*s'", QUOTE_MAX, name->op);
    while (!at(p, TOK_RPAREN)) {
        if (!parse_arg(p, name, &seen_keyword))
            goto fail;
        if (at(p, TOK_COMMA)) {
            advance(p);
        } else if (!at(p, TOK_RPAREN)) {
            expected_close(p, open, ')', what);
            goto fail;
        }
    }
    advance(p);
    return name;
fail:
    expr_free(name);
    return NULL;
}

/* Whether the parser is at '.' NAME '(' with NAME no attribute: a method
 * call. */
static bool at_method(const struct parser *p)
{
    const struct token *name = peek2(p);

    return at(p, TOK_DOT) && name->kind == TOK_NAME && p->pos + 2 < p->ntoks &&
           p->toks[p->pos + 2].kind == TOK_LPAREN && !is_attribute(qtext(p, name), name->len) &&
           tok_word(p, name, NULL) == WORD_PLAIN;
}

/* base '.' NAME '(' args ')', at the '.': the call NAME(base, args), as
 * NumPy and PyTorch methods are; takes base. */
static struct expr *parse_method(struct parser *p, struct expr *base)
{
    const struct token *name;
    struct expr *call;

    advance(p);
    name = advance(p);
    call = node_new(p, EXPR_NAME, name);
    if (call)
        call->v.name = tok_strdup(p, name);
    if (!call || !call->v.name) {
        free(call);
        expr_free(base);
        return NULL;
    }
    if (!push_arg(p, call, NULL, base->line, base->col, base)) {
        expr_free(call);
        return NULL;
    }
    return parse_call(p, call);
}

/* Reports a call of something that is not an op's name. */
static void not_callable(struct parser *p, const struct expr *base)
{
    char hint[64];

    if (base->kind == EXPR_DTYPE) {
        snprintf(hint, sizeof hint, "to convert, write cast(x, %s)", tr_dtype_name(base->v.dtype));
        fail(p, cur(p), hint, "a dtype cannot be called");
    } else {
        fail(p, cur(p), "only an op's name is called: op(x, ...)", "only an op's name can be called");
    }
}

/* postfix := primary ( '[' subscripts ']' | '.' NAME | '.' NAME '(' args ')'
 *                     | '(' args ')' )* */
static struct expr *parse_postfix(struct parser *p)
{
    bool callable;
    struct expr *e = parse_primary(p, &callable);
    int links = 0;

    while (e && (at(p, TOK_LBRACKET) || at(p, TOK_DOT) || at(p, TOK_LPAREN))) {
        if (!deeper(p)) {
            expr_free(e);
            e = NULL;
            break;
        }
        links++;
        if (at(p, TOK_LBRACKET)) {
            e = parse_index(p, e);
        } else if (at_method(p)) {
            e = parse_method(p, e);
        } else if (at(p, TOK_DOT)) {
            e = parse_attr(p, e);
        } else if (callable) {
            e = parse_call(p, e);
        } else {
            not_callable(p, e);
            expr_free(e);
            e = NULL;
        }
        callable = false;
    }
    p->depth -= links;
    return e;
}

/* power := postfix ('**' unary)?   (right-associative through unary) */
static struct expr *parse_power(struct parser *p)
{
    struct expr *base = parse_postfix(p), *exponent;
    const struct token *op;

    if (!base || !at(p, TOK_POW))
        return base;
    op = advance(p);
    exponent = parse_unary(p);
    if (!exponent) {
        expr_free(base);
        return NULL;
    }
    return make_call(p, "pow", op, base, exponent);
}

/* unary := ('-' | '~') unary | power.  Every level of recursion passes
 * here, so this is where the depth is counted. */
static struct expr *parse_unary(struct parser *p)
{
    struct expr *e;

    if (!deeper(p))
        return NULL;
    if (at(p, TOK_MINUS) || at(p, TOK_TILDE)) {
        const struct token *op = advance(p);
        e = parse_unary(p);
        if (e)
            e = make_call(p, op->kind == TOK_MINUS ? "neg" : "bitwise_not", op, e, NULL);
    } else {
        e = parse_power(p);
    }
    p->depth--;
    return e;
}

struct binop {
    enum tok_kind kind;
    const char *op;
};

static const struct binop term_ops[] = {
    {TOK_STAR, "mul"}, {TOK_SLASH, "div"}, {TOK_FLOORDIV, "floor_divide"},
    {TOK_PERCENT, "remainder"}, {TOK_AT, "matmul"}, {TOK_END, NULL}};
static const struct binop sum_ops[] = {{TOK_PLUS, "add"}, {TOK_MINUS, "sub"}, {TOK_END, NULL}};
static const struct binop and_ops[] = {{TOK_AMP, "bitwise_and"}, {TOK_END, NULL}};
static const struct binop xor_ops[] = {{TOK_CARET, "bitwise_xor"}, {TOK_END, NULL}};
static const struct binop or_ops[] = {{TOK_PIPE, "bitwise_or"}, {TOK_END, NULL}};
static const struct binop cmp_ops[] = {
    {TOK_LT, "lt"}, {TOK_LE, "le"}, {TOK_GT, "gt"}, {TOK_GE, "ge"},
    {TOK_EQ, "eq"}, {TOK_NE, "ne"}, {TOK_END, NULL}};

/* The op of the current token in table, or NULL. */
static const char *binop_at(const struct parser *p, const struct binop *table)
{
    for (; table->op; table++)
        if (at(p, table->kind))
            return table->op;
    return NULL;
}

/* A left-associative chain: operand (op operand)*.  Each link makes the
 * tree one level deeper, so each counts as one level of nesting. */
static struct expr *parse_chain(struct parser *p, const struct binop *ops,
                                struct expr *(*operand)(struct parser *))
{
    struct expr *lhs = operand(p), *rhs;
    int links = 0;

    while (lhs && binop_at(p, ops)) {
        const char *op = binop_at(p, ops);
        const struct token *t;
        if (!deeper(p)) {
            expr_free(lhs);
            lhs = NULL;
            break;
        }
        links++;
        t = advance(p);
        rhs = operand(p);
        if (!rhs) {
            expr_free(lhs);
            lhs = NULL;
            break;
        }
        lhs = make_call(p, op, t, lhs, rhs);
    }
    p->depth -= links;
    return lhs;
}

static struct expr *parse_term(struct parser *p)
{
    return parse_chain(p, term_ops, parse_unary);
}

static struct expr *parse_sum(struct parser *p)
{
    return parse_chain(p, sum_ops, parse_term);
}

/* Python's precedence: & binds tighter than ^, ^ than |, and all three
 * tighter than comparisons, so (x > 0) & (x < 1) needs its parentheses. */
static struct expr *parse_band(struct parser *p)
{
    return parse_chain(p, and_ops, parse_sum);
}

static struct expr *parse_bxor(struct parser *p)
{
    return parse_chain(p, xor_ops, parse_band);
}

static struct expr *parse_bor(struct parser *p)
{
    return parse_chain(p, or_ops, parse_bxor);
}

/* cmp := bor (cmpop bor)?   -- one comparison; a < b < c is an error */
static struct expr *parse_expr(struct parser *p)
{
    struct expr *lhs = parse_bor(p), *rhs, *e;
    const char *op = lhs ? binop_at(p, cmp_ops) : NULL;
    const struct token *t;

    if (!op)
        return lhs;
    t = advance(p);
    rhs = parse_bor(p);
    if (!rhs) {
        expr_free(lhs);
        return NULL;
    }
    e = make_call(p, op, t, lhs, rhs);
    if (e && binop_at(p, cmp_ops)) {
        fail(p, cur(p), "write logical_and(a < b, b < c)", "comparisons cannot be chained");
        expr_free(e);
        return NULL;
    }
    return e;
}

/* ------------------------------------------------------------ statements */

/* Whether the statement has an '=' outside all brackets (an assignment,
 * not a bare expression). */
static bool has_assignment(const struct parser *p)
{
    int depth = 0;

    for (size_t i = 0; i < p->ntoks; i++) {
        switch (p->toks[i].kind) {
        case TOK_LPAREN:
        case TOK_LBRACKET:
            depth++;
            break;
        case TOK_RPAREN:
        case TOK_RBRACKET:
            depth--;
            break;
        case TOK_ASSIGN:
            if (depth == 0)
                return true;
            break;
        default:
            break;
        }
    }
    return false;
}

static bool push_target(struct parser *p, struct statement *s, char *name, int col)
{
    if (!grow((void **)&s->targets, s->ntargets, sizeof *s->targets) ||
        !grow((void **)&s->target_cols, s->ntargets, sizeof *s->target_cols)) {
        free(name);
        oom(p);
        return false;
    }
    s->targets[s->ntargets] = name;
    s->target_cols[s->ntargets] = col;
    s->ntargets++;
    return true;
}

/* Reports that a target name was expected at the current token. */
static void expected_target(struct parser *p, bool first)
{
    const struct token *t = cur(p);

    if (!first)
        fail(p, t, STATEMENT_HINT, "expected a target name after ','");
    else if (t->kind == TOK_ASSIGN)
        fail(p, t, STATEMENT_HINT, "expected a target name before '='");
    else
        fail(p, t, STATEMENT_HINT, "expected a target name, found '%.*s'", qlen(t), qtext(p, t));
}

/* TARGET (',' TARGET)* '=' */
static bool parse_targets(struct parser *p, struct statement *s)
{
    for (;;) {
        const struct token *t = cur(p);
        char *name;
        if (t->kind != TOK_NAME) {
            expected_target(p, s->ntargets == 0);
            return false;
        }
        if (tok_word(p, t, NULL) != WORD_PLAIN) {
            fail(p, t, "reserved words: true false None inf nan, the dtype names, i4 and u4",
                 "cannot assign to reserved word '%.*s'", qlen(t), qtext(p, t));
            return false;
        }
        name = tok_strdup(p, t);
        if (!name)
            return false;
        for (size_t i = 0; i < s->ntargets; i++) {
            if (strcmp(s->targets[i], name) == 0) {
                fail(p, t, NULL, "'%.*s' is assigned twice in one statement", qlen(t), qtext(p, t));
                free(name);
                return false;
            }
        }
        if (!push_target(p, s, name, t->col))
            return false;
        advance(p);
        if (at(p, TOK_ASSIGN)) {
            advance(p);
            return true;
        }
        if (!at(p, TOK_COMMA)) {
            fail(p, cur(p), STATEMENT_HINT "; targets are plain names",
                 "expected '=' after the targets");
            return false;
        }
        advance(p);
    }
}

/* Reports what is left after a complete statement. */
static void trailing(struct parser *p)
{
    const struct token *t = cur(p);
    const char *hint = NULL;

    if (t->kind == TOK_RPAREN || t->kind == TOK_RBRACKET)
        hint = "it closes nothing";
    else if (t->kind == TOK_ASSIGN)
        hint = "a statement has one '='; '==' compares";
    else if (t->kind != TOK_ERROR)
        hint = "an operator or a ',' may be missing before it";
    fail(p, t, hint, "unexpected '%.*s'", qlen(t), qtext(p, t));
}

static struct statement *parse_statement(struct parser *p, const char *bare_name)
{
    struct statement *s = calloc(1, sizeof *s);

    if (!s) {
        oom(p);
        return NULL;
    }
    s->line = p->line;
    s->col = p->col;
    if (bare_name && !has_assignment(p)) {
        char *name = strdup(bare_name);
        if (!name) {
            oom(p);
            goto fail;
        }
        if (!push_target(p, s, name, p->col))
            goto fail;
    } else if (!parse_targets(p, s)) {
        goto fail;
    }
    s->value = parse_expr(p);
    if (!s->value)
        goto fail;
    if (!at(p, TOK_END)) {
        trailing(p);
        goto fail;
    }
    return s;
fail:
    statement_free(s);
    return NULL;
}

static struct statement *parse(const char *text, int line, int col, bool single_line,
                               const struct diag_place *places, const char *bare_name,
                               struct diag_list *diags);

struct statement *expr_parse(const char *text, int line, int col, bool single_line,
                             const char *bare_name, struct diag_list *diags)
{
    return parse(text, line, col, single_line, NULL, bare_name, diags);
}

struct statement *expr_parse_placed(const char *text, const struct diag_place *places,
                                    const char *bare_name, struct diag_list *diags)
{
    return parse(text, places[0].line, places[0].col, false, places, bare_name, diags);
}

static struct statement *parse(const char *text, int line, int col, bool single_line,
                               const struct diag_place *places, const char *bare_name,
                               struct diag_list *diags)
{
    struct parser p;
    struct statement *s = NULL;
    const char *nl;

    memset(&p, 0, sizeof p);
    p.text = text ? text : "";
    p.len = strlen(p.text);
    nl = strchr(p.text, '\n');
    p.first_newline = nl ? (size_t)(nl - p.text) : p.len;
    p.line = line;
    p.col = col;
    p.single_line = single_line;
    p.places = text ? places : NULL;
    p.diags = diags;

    if (!tokenize(&p)) {
        free_tokens(&p);
        return NULL;
    }
    if (p.toks[0].kind == TOK_END)
        fail(&p, &p.toks[0], STATEMENT_HINT, "empty statement");
    else
        s = parse_statement(&p, bare_name);
    free_tokens(&p);
    return s;
}
