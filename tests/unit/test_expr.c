/*
 * test_expr.c - the expression tokenizer and parser: precedence and
 * associativity (trees printed in prefix form), every construct, the
 * places of nodes and targets, bare expressions, and malformed input,
 * which must give exactly one error at the right column and never crash.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "tap.h"

/* ------------------------------------------------------------ printing */

struct out {
    char text[8192];
    size_t len;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->len >= sizeof o->text - 1)
        return;
    va_start(ap, fmt);
    n = vsnprintf(o->text + o->len, sizeof o->text - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n < sizeof o->text - o->len ? (size_t)n : sizeof o->text - o->len - 1;
}

static void put_float(struct out *o, double v)
{
    char buf[64];

    if (isnan(v)) {
        put(o, "nan");
        return;
    }
    if (isinf(v)) {
        put(o, v > 0 ? "inf" : "-inf");
        return;
    }
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, sizeof buf, "%.17g", v);
    /* a float always shows that it is one */
    put(o, "%s%s", buf, strpbrk(buf, ".e") ? "" : ".0");
}

static void print_expr(struct out *o, const struct expr *e);

static void print_args(struct out *o, const struct expr *e)
{
    for (size_t i = 0; i < e->nargs; i++) {
        put(o, " ");
        if (e->args[i].keyword)
            put(o, "%s=", e->args[i].keyword);
        print_expr(o, e->args[i].value);
    }
}

static void print_part(struct out *o, const struct expr *e)
{
    if (e)
        print_expr(o, e);
    else
        put(o, "_");
}

/* Prefix form: (add a (mul b c)), (index x (slice 1 _ _) ...), (.T x). */
static void print_expr(struct out *o, const struct expr *e)
{
    switch (e->kind) {
    case EXPR_NAME:
        put(o, "%s", e->v.name);
        break;
    case EXPR_INT:
        put(o, "%lld", (long long)e->v.integer);
        break;
    case EXPR_FLOAT:
        put_float(o, e->v.number);
        break;
    case EXPR_STRING:
        put(o, "\"%s\"", e->v.name);
        break;
    case EXPR_BOOL:
        put(o, "%s", e->v.boolean ? "true" : "false");
        break;
    case EXPR_NONE:
        put(o, "None");
        break;
    case EXPR_DTYPE:
        put(o, "%s", tr_dtype_name(e->v.dtype));
        break;
    case EXPR_LIST:
        put(o, "(list");
        print_args(o, e);
        put(o, ")");
        break;
    case EXPR_CALL:
        put(o, "(%s%s", e->op, e->from_operator ? "" : "!");
        print_args(o, e);
        put(o, ")");
        break;
    case EXPR_INDEX:
        put(o, "(index ");
        print_expr(o, e->base);
        print_args(o, e);
        put(o, ")");
        break;
    case EXPR_ATTR:
        put(o, "(.%s ", e->v.name);
        print_expr(o, e->base);
        put(o, ")");
        break;
    case EXPR_SLICE:
        put(o, "(slice ");
        print_part(o, e->slice[0]);
        put(o, " ");
        print_part(o, e->slice[1]);
        put(o, " ");
        print_part(o, e->slice[2]);
        put(o, ")");
        break;
    case EXPR_ELLIPSIS:
        put(o, "...");
        break;
    }
}

/* The statement in prefix form: "v i = (topk! x 3)". */
static void print_statement(struct out *o, const struct statement *s)
{
    for (size_t i = 0; i < s->ntargets; i++)
        put(o, "%s ", s->targets[i]);
    put(o, "= ");
    print_expr(o, s->value);
}

/* ------------------------------------------------------------ checks */

/* text as a TAP description can show it: one line, printable, short
 * (one of two static buffers, so that two may be shown at once). */
static const char *shown(const char *text)
{
    static char bufs[2][128];
    static int which;
    char *buf = bufs[which ^= 1];
    size_t n = 0;

    for (const unsigned char *c = (const unsigned char *)text; *c && n < 100; c++) {
        if (*c == '\n')
            n += (size_t)snprintf(buf + n, sizeof bufs[0] - n, "\\n");
        else if (*c == '\t')
            n += (size_t)snprintf(buf + n, sizeof bufs[0] - n, "\\t");
        else if (*c == '#')
            n += (size_t)snprintf(buf + n, sizeof bufs[0] - n, "\\#");
        else if (*c < 0x20 || *c >= 0x7f)
            n += (size_t)snprintf(buf + n, sizeof bufs[0] - n, "\\x%02X", *c);
        else
            buf[n++] = (char)*c;
    }
    if (strlen(text) > 100)
        n += (size_t)snprintf(buf + n, sizeof bufs[0] - n, "...");
    buf[n < sizeof bufs[0] ? n : sizeof bufs[0] - 1] = '\0';
    return buf;
}

/* Parses text (line 1, column 1) and compares the printed statement. */
static void check_parse(const char *text, const char *bare, const char *want)
{
    struct diag_list d;
    struct statement *s;
    struct out o = {.len = 0};

    diag_init(&d, "test.yaml", NULL, 0);
    s = expr_parse(text, 1, 1, true, bare, &d);
    if (s)
        print_statement(&o, s);
    if (!ok(s && d.count == 0 && strcmp(o.text, want) == 0, "parse: %s", shown(text))) {
        printf("#   got  '%s'\n#   want '%s'\n", s ? shown(o.text) : "(NULL)", shown(want));
        for (size_t i = 0; i < d.count; i++)
            printf("#   %d:%d: %s\n", d.items[i].line, d.items[i].col, d.items[i].message);
    }
    statement_free(s);
    diag_free(&d);
}

/* A bare expression's tree. */
static void check_tree(const char *text, const char *want)
{
    char full[512];

    snprintf(full, sizeof full, "out = %s", want);
    check_parse(text, "out", full);
}

/* text must fail with exactly one error at col (line 7), whose message
 * contains want. */
static void check_error_bare(const char *text, const char *bare, int col, const char *want)
{
    struct diag_list d;
    struct statement *s;
    bool good;

    diag_init(&d, "test.yaml", NULL, 0);
    s = expr_parse(text, 7, 1, true, bare, &d);
    good = !s && d.count == 1 && d.errors == 1 && d.items[0].line == 7 &&
           d.items[0].col == col && strstr(d.items[0].message, want) != NULL &&
           d.items[0].exit_code == 3;
    if (!ok(good, "error: %s -> col %d '%s'", shown(text), col, want)) {
        printf("#   returned %s, %zu diagnostics\n", s ? "a statement" : "NULL", d.count);
        for (size_t i = 0; i < d.count; i++)
            printf("#   %d:%d: %s (hint: %s)\n", d.items[i].line, d.items[i].col,
                   d.items[i].message, d.items[i].hint ? d.items[i].hint : "-");
    }
    statement_free(s);
    diag_free(&d);
}

static void check_error(const char *text, int col, const char *want)
{
    check_error_bare(text, NULL, col, want);
}

/* The hint of text's one error contains want. */
static void check_hint(const char *text, const char *want)
{
    struct diag_list d;
    struct statement *s;

    diag_init(&d, "test.yaml", NULL, 0);
    s = expr_parse(text, 1, 1, true, NULL, &d);
    ok(!s && d.count == 1 && d.items[0].hint && strstr(d.items[0].hint, want),
       "hint of '%s' says '%s'", shown(text), want);
    statement_free(s);
    diag_free(&d);
}

/* ------------------------------------------------------------ tests */

static void test_precedence(void)
{
    check_tree("a+b*c", "(add a (mul b c))");
    check_tree("a*b+c", "(add (mul a b) c)");
    check_tree("a-b-c", "(sub (sub a b) c)");
    check_tree("a/b/c", "(div (div a b) c)");
    check_tree("a*b/c@d", "(matmul (div (mul a b) c) d)");
    check_tree("a+b-c+d", "(add (sub (add a b) c) d)");
    check_tree("-a**2", "(neg (pow a 2))");
    check_tree("-2**2", "(neg (pow 2 2))");
    check_tree("2**-1", "(pow 2 (neg 1))");
    check_tree("a**b**c", "(pow a (pow b c))");
    check_tree("a**-b**c", "(pow a (neg (pow b c)))");
    check_tree("(a**b)**c", "(pow (pow a b) c)");
    check_tree("a*b**c", "(mul a (pow b c))");
    check_tree("--a", "(neg (neg a))");
    check_tree("a--b", "(sub a (neg b))");
    check_tree("-a*b", "(mul (neg a) b)");
    check_tree("a@b.T", "(matmul a (.T b))");
    check_tree("-x.T", "(neg (.T x))");
    check_tree("x.mT @ y", "(matmul (.mT x) y)");
    check_tree("x.T.mT", "(.mT (.T x))");
    check_tree("x.sum()", "(sum! x)");
    check_tree("-x.softmax(-1).T", "(neg (.T (softmax! x (neg 1))))");
    check_tree("(a + b).cast(f16)", "(cast! (add a b) f16)");
    check_tree("x.shape[0]", "(index (.shape x) 0)");
    check_tree("a < b + 1", "(lt a (add b 1))");
    check_tree("a+1 <= b*2", "(le (add a 1) (mul b 2))");
    check_tree("a > b", "(gt a b)");
    check_tree("a >= b", "(ge a b)");
    check_tree("a == -b", "(eq a (neg b))");
    check_tree("a != b", "(ne a b)");
    check_tree("(a < b) == (c > d)", "(eq (lt a b) (gt c d))");
    check_tree("(a)", "a");
    check_tree("((((a))))", "a");
    check_tree("(a+b)*c", "(mul (add a b) c)");
    check_tree("a*(b+c)", "(mul a (add b c))");
    check_tree("-(a+b)", "(neg (add a b))");
    check_tree("f(x)**2", "(pow (f! x) 2)");
    check_tree("x[0]**2", "(pow (index x 0) 2)");
    /* the operators Python has beyond these, with its precedence */
    check_tree("a // b * c % d", "(remainder (mul (floor_divide a b) c) d)");
    check_tree("a + b // c", "(add a (floor_divide b c))");
    check_tree("-a % b", "(remainder (neg a) b)");
    check_tree("a % b ** c", "(remainder a (pow b c))");
    check_tree("a & b | c ^ d", "(bitwise_or (bitwise_and a b) (bitwise_xor c d))");
    check_tree("a | b & c", "(bitwise_or a (bitwise_and b c))");
    check_tree("a ^ b | c", "(bitwise_or (bitwise_xor a b) c)");
    check_tree("a & b ^ c & d", "(bitwise_xor (bitwise_and a b) (bitwise_and c d))");
    check_tree("a & b + c", "(bitwise_and a (add b c))");
    check_tree("a | b < c", "(lt (bitwise_or a b) c)");
    check_tree("(x > 0) & (x < 1)", "(bitwise_and (gt x 0) (lt x 1))");
    check_tree("a == b | c", "(eq a (bitwise_or b c))");
    check_tree("~a & b", "(bitwise_and (bitwise_not a) b)");
    check_tree("~~a", "(bitwise_not (bitwise_not a))");
    check_tree("-~a", "(neg (bitwise_not a))");
    check_tree("~a ** 2", "(bitwise_not (pow a 2))");
    check_tree("a | b | c", "(bitwise_or (bitwise_or a b) c)");
    check_tree("a // b // c", "(floor_divide (floor_divide a b) c)");
    /* method calls: x.f(args) is f(x, args) */
    check_tree("x.sum(dim=0)", "(sum! x dim=0)");
    check_tree("x.abs().sum(1) // 2", "(floor_divide (sum! (abs! x) 1) 2)");
    check_tree("(a & b).any()", "(any! (bitwise_and a b))");
    check_tree("x[i].flip(0)", "(flip! (index x i) 0)");
    check_tree("x.nan_to_num(nan=0.0, posinf=1)", "(nan_to_num! x nan=0.0 posinf=1)");
}

static void test_literals(void)
{
    check_tree("inf", "inf");
    check_tree("-inf", "(neg inf)");
    check_tree("nan", "nan");
    check_tree("1e-6", "1e-06");
    check_tree("1.0e-6", "1e-06");
    check_tree("2E+3", "2000.0");
    check_tree(".5", "0.5");
    check_tree("1.", "1.0");
    check_tree("1.5", "1.5");
    check_tree("0", "0");
    check_tree("007", "7");
    check_tree("42", "42");
    check_tree("9223372036854775807", "9223372036854775807");
    check_tree("1e-400", "0.0");
    check_tree("\"s\"", "\"s\"");
    check_tree("'tanh'", "\"tanh\"");
    check_tree("\"a\\\"b\\\\c\\td\\'e\"", "\"a\"b\\c\td'e\"");
}

static void test_constructs(void)
{
    check_tree("[1, 2.5, \"s\", f32, None, true]", "(list 1 2.5 \"s\" f32 None true)");
    check_tree("[]", "(list)");
    check_tree("[a,]", "(list a)");
    check_tree("[[1, 2], [3]]", "(list (list 1 2) (list 3))");
    check_tree("false", "false");
    check_tree("None", "None");
    check_tree("[float32, bfloat16, int64, uint32, bool, u8, i16, bf16, f64]",
               "(list f32 bf16 i64 u32 bool u8 i16 bf16 f64)");
    check_tree("f(a, b=1,)", "(f! a b=1)");
    check_tree("f()", "(f!)");
    check_tree("g(a)", "(g! a)");
    check_tree("norm(q, dim=-1, keepdim=true)", "(norm! q dim=(neg 1) keepdim=true)");
    check_tree("cast(x, dtype=float16)", "(cast! x dtype=f16)");
    check_tree("to(x, \"cuda\")", "(to! x \"cuda\")");
    check_tree("f(g(h(x)))", "(f! (g! (h! x)))");
    check_tree("concat([a, b], 0)", "(concat! (list a b) 0)");
    check_tree("f(x)[0].T", "(.T (index (f! x) 0))");
    check_tree("x[1:, ::-1, ..., None, 0]",
               "(index x (slice 1 _ _) (slice _ _ (neg 1)) ... None 0)");
    check_tree("x[:]", "(index x (slice _ _ _))");
    check_tree("x[::]", "(index x (slice _ _ _))");
    check_tree("x[a:b:c]", "(index x (slice a b c))");
    check_tree("x[:b]", "(index x (slice _ b _))");
    check_tree("x[::2]", "(index x (slice _ _ 2))");
    check_tree("x[1:-1]", "(index x (slice 1 (neg 1) _))");
    check_tree("x[None:None:None]", "(index x (slice _ _ _))");
    check_tree("x[n-1]", "(index x (sub n 1))");
    check_tree("x[...]", "(index x ...)");
    check_tree("x[..., 0]", "(index x ... 0)");
    check_tree("x[0,]", "(index x 0)");
    check_tree("x[i][j]", "(index (index x i) j)");
    check_tree("x[0:2].mT", "(.mT (index x (slice 0 2 _)))");
    check_tree("  a\t+ b  # a comment", "(add a b)");
    check_tree("a +\n b", "(add a b)");
    check_tree("a_1 + _b", "(add a_1 _b)");
    check_tree("float32x", "float32x");
    check_tree("infinity + nan_count", "(add infinity nan_count)");
}

static void test_statements(void)
{
    check_parse("v, i = topk(x, 3)", NULL, "v i = (topk! x 3)");
    check_parse("a = b", NULL, "a = b");
    check_parse("a=b==c", NULL, "a = (eq b c)");
    check_parse("q, scale = quantize(x, dtype=i8, dim=0)", NULL,
                "q scale = (quantize! x dtype=i8 dim=0)");
    check_parse("y = f(x=1)", "out", "y = (f! x=1)");
    check_parse("f(x=1)", "out", "out = (f! x=1)");
    check_parse("sum(x)", "out", "out = (sum! x)");
    check_parse("a == b", "out", "out = (eq a b)");
    check_parse("a # = b", "out", "out = a");
}

/* Columns of nodes and targets. */
static void test_columns(void)
{
    struct diag_list d;
    struct statement *s;
    const char *text = "v, i = topk(en @ qn.T, k, dim=0)";

    diag_init(&d, "test.yaml", NULL, 0);
    s = expr_parse(text, 14, 9, true, NULL, &d);
    if (!ok(s != NULL, "columns: parsed")) {
        diag_free(&d);
        return;
    }
    is_int(s->line, 14, "columns: statement line");
    is_int(s->col, 9, "columns: statement col");
    is_int(s->ntargets, 2, "columns: two targets");
    is_int(s->target_cols[0], 9, "columns: target v");
    is_int(s->target_cols[1], 12, "columns: target i");
    is_int(s->value->line, 14, "columns: call line");
    is_int(s->value->col, 16, "columns: call at its name");
    is_int(s->value->nargs, 3, "columns: three arguments");
    is_int(s->value->args[0].col, 21, "columns: first argument at its first token");
    is_int(s->value->args[0].value->col, 24, "columns: matmul at '@'");
    is_int(s->value->args[0].value->args[0].value->col, 21, "columns: en");
    is_int(s->value->args[0].value->args[1].value->col, 28, "columns: .T at '.'");
    is_int(s->value->args[0].value->args[1].value->base->col, 26, "columns: qn");
    is_int(s->value->args[1].col, 32, "columns: k");
    is_int(s->value->args[2].col, 35, "columns: keyword dim");
    is_int(s->value->args[2].value->col, 39, "columns: keyword's value");
    statement_free(s);

    s = expr_parse("y = x[1:2, -a]", 3, 5, true, NULL, &d);
    ok(s != NULL, "columns: index parsed");
    if (s) {
        const struct expr *ix = s->value;
        is_int(ix->col, 10, "columns: index at '['");
        is_int(ix->base->col, 9, "columns: indexed name");
        is_int(ix->args[0].value->col, 11, "columns: slice at its start");
        is_int(ix->args[0].value->slice[1]->col, 13, "columns: slice stop");
        is_int(ix->args[1].col, 16, "columns: second subscript");
        is_int(ix->args[1].value->col, 16, "columns: neg at '-'");
        is_int(ix->args[1].value->args[0].value->col, 17, "columns: neg's operand");
    }
    statement_free(s);

    s = expr_parse("y = [a, 1]", 2, 1, true, NULL, &d);
    ok(s && s->value->col == 5 && s->value->args[1].col == 9 &&
       s->value->args[1].value->col == 9, "columns: list at '[', items at theirs");
    statement_free(s);

    /* spread over several lines: everything at the statement's place */
    s = expr_parse("v, i = topk(en @ qn.T, k, dim=0)", 20, 7, false, NULL, &d);
    ok(s != NULL, "columns: single_line false parsed");
    if (s) {
        ok(s->target_cols[0] == 7 && s->target_cols[1] == 7, "columns: targets at the statement");
        ok(s->value->col == 7 && s->value->line == 20 && s->value->args[0].value->col == 7 &&
           s->value->args[2].col == 7 && s->value->args[2].value->col == 7 &&
           s->value->args[2].value->line == 20,
           "columns: nodes at the statement");
    }
    statement_free(s);

    /* single_line, but the text has a newline: exact up to it */
    s = expr_parse("a = b +\n  c", 4, 3, true, NULL, &d);
    ok(s && s->value->col == 9 && s->value->args[0].value->col == 7 &&
       s->value->args[1].value->col == 3 && s->value->args[1].value->line == 4,
       "columns: tokens after a newline at the statement's place");
    statement_free(s);

    /* with the place of every byte: every token at its own line and column */
    {
        static const char placed[] = "a = b +\n c";
        struct diag_place places[sizeof placed];
        for (size_t i = 0; i < sizeof placed; i++)
            places[i] = (struct diag_place){i < 8 ? 6 : 7, i < 8 ? 9 + (int)i : (int)i - 3};
        s = expr_parse_placed(placed, places, NULL, &d);
        ok(s && s->line == 6 && s->col == 9 && s->target_cols[0] == 9 &&
               s->value->line == 6 && s->value->col == 15 &&
               s->value->args[1].value->line == 7 && s->value->args[1].value->col == 6,
           "columns: placed tokens at their own lines and columns");
        statement_free(s);
        s = expr_parse_placed("y = f(\n  2))", (struct diag_place[14]){
            {3, 5}, {3, 6}, {3, 7}, {3, 8}, {3, 9}, {3, 10}, {3, 11}, {4, 1},
            {4, 2}, {4, 3}, {4, 4}, {4, 5}, {4, 6}, {4, 7}}, NULL, &d);
        ok(!s && d.count == 1 && d.items[0].line == 4 && d.items[0].col == 5,
           "columns: a placed error at its token's line and column");
        statement_free(s);
        diag_free(&d);
        diag_init(&d, "t.yaml", NULL, 0);
    }

    /* a bare expression's target sits at the statement */
    s = expr_parse("sum(x)", 1, 12, true, "out", &d);
    ok(s && s->ntargets == 1 && strcmp(s->targets[0], "out") == 0 && s->target_cols[0] == 12 &&
       s->value->col == 12 && s->value->args[0].col == 16,
       "columns: bare expression");
    statement_free(s);
    is_int(d.count, 0, "columns: no diagnostics");
    diag_free(&d);
}

/* Literal values and the node kinds. */
static void test_values(void)
{
    struct diag_list d;
    struct statement *s;

    diag_init(&d, "test.yaml", NULL, 0);
    s = expr_parse("x = [7, 2.5, 'a\\nb', true, false, None, bf16, inf, nan, f(1)]", 1, 1, true,
                   NULL, &d);
    ok(s && s->value->kind == EXPR_LIST && s->value->nargs == 10, "values: a list of 10");
    if (s && s->value->nargs == 10) {
        const struct expr_arg *a = s->value->args;
        ok(a[0].value->kind == EXPR_INT && a[0].value->v.integer == 7, "values: int");
        ok(a[1].value->kind == EXPR_FLOAT && a[1].value->v.number == 2.5, "values: float");
        ok(a[2].value->kind == EXPR_STRING && strcmp(a[2].value->v.name, "a\nb") == 0,
           "values: string with an escape");
        ok(a[3].value->kind == EXPR_BOOL && a[3].value->v.boolean, "values: true");
        ok(a[4].value->kind == EXPR_BOOL && !a[4].value->v.boolean, "values: false");
        ok(a[5].value->kind == EXPR_NONE, "values: None");
        ok(a[6].value->kind == EXPR_DTYPE && a[6].value->v.dtype == TR_DTYPE_BF16, "values: bf16");
        ok(a[7].value->kind == EXPR_FLOAT && isinf(a[7].value->v.number), "values: inf");
        ok(a[8].value->kind == EXPR_FLOAT && isnan(a[8].value->v.number), "values: nan");
        ok(a[9].value->kind == EXPR_CALL && !a[9].value->from_operator &&
           strcmp(a[9].value->op, "f") == 0 && a[9].value->v.name == NULL,
           "values: a call by name");
        ok(a[0].keyword == NULL, "values: list items are positional");
    }
    statement_free(s);

    s = expr_parse("x = a + b", 1, 1, true, NULL, &d);
    ok(s && s->value->kind == EXPR_CALL && s->value->from_operator &&
       strcmp(s->value->op, "add") == 0 && s->value->nargs == 2 &&
       s->value->args[0].keyword == NULL && s->value->args[1].keyword == NULL,
       "values: an operator is a call with two positional operands");
    statement_free(s);

    s = expr_parse("x = -9223372036854775807", 1, 1, true, NULL, &d);
    ok(s && s->value->args[0].value->v.integer == INT64_MAX, "values: largest int");
    statement_free(s);

    s = expr_parse("x = y.T", 1, 1, true, NULL, &d);
    ok(s && s->value->kind == EXPR_ATTR && strcmp(s->value->v.name, "T") == 0 &&
       s->value->base->kind == EXPR_NAME, "values: attribute");
    statement_free(s);
    is_int(d.count, 0, "values: no diagnostics");
    diag_free(&d);
}

static void test_words(void)
{
    const char *reserved[] = {"true", "false", "None", "inf", "nan", "bool", "u8", "u16", "u32",
                              "u64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64",
                              "float32", "float16", "bfloat16", "int64", "uint32", "uint8"};
    const char *plain[] = {"x", "_", "emb", "True", "none", "Inf", "f33", "float", "int",
                           "chunk_start", "T", "mT", "dtype"};
    const char *not_ident[] = {"", "1x", "a-b", "a b", "é", "a.b"};

    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        ok(expr_is_reserved(reserved[i]) && !expr_is_identifier(reserved[i]),
           "reserved: %s", reserved[i]);
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        ok(!expr_is_reserved(plain[i]) && expr_is_identifier(plain[i]), "identifier: %s", plain[i]);
    for (size_t i = 0; i < sizeof not_ident / sizeof *not_ident; i++)
        ok(!expr_is_identifier(not_ident[i]), "not an identifier: '%s'", not_ident[i]);
    ok(!expr_is_reserved(NULL) && !expr_is_identifier(NULL), "NULL is neither");
}

static void test_errors(void)
{
    check_error("a = ", 4, "expected an expression after '='");
    check_error("= b", 1, "expected a target name before '='");
    check_error("a = b +", 8, "expected an expression after '+'");
    check_error("a = (b", 7, "expected ')' to close the '(' opened at column 5");
    check_error("a = (b c", 8, "expected ')' to close the '(' opened at column 5, found 'c'");
    check_error("a = b)", 6, "unexpected ')'");
    check_error("a = b]", 6, "unexpected ']'");
    check_error("a = b c", 7, "unexpected 'c'");
    check_error("a = b = c", 7, "unexpected '='");
    check_error("a = f(x=1, 2)", 12, "positional argument follows keyword argument");
    check_error("a = f(x=1, x=2)", 12, "keyword 'x' given twice");
    check_error("a = f(nan=1, nan=2)", 14, "keyword 'nan' given twice");
    check_error("a = b // // c", 10, "expected an expression after '//'");
    check_error("a = b % ", 8, "expected an expression after '%'");
    check_error("a = b && c", 8, "expected an expression after '&'");
    check_error("a = b | ", 8, "expected an expression after '|'");
    check_error("a = b ^ ^ c", 9, "expected an expression after '^'");
    check_error("a = ~", 6, "expected an expression after '~'");
    check_error("a = b ~ c", 7, "unexpected '~'");
    check_error("a = x > 0 & x < 1", 15, "comparisons cannot be chained");
    check_error("a = x.sum(", 11, "expected an expression after '('");
    check_error("a = x.sum(dim=)", 15, "expected an expression after '='");
    check_error("a = x.3()", 6, "unexpected '.3'");
    check_error("a = x.foo", 7, "unknown attribute 'foo' (expected .T, .mT, .shape, .ndim or .dtype)");
    check_error("a = x.t", 7, "unknown attribute 't'");
    check_error("a = x.", 7, "expected an attribute name after '.'");
    check_error("a = x.(1)", 7, "expected an attribute name after '.'");
    check_error("a = 1 < 2 < 3", 11, "comparisons cannot be chained");
    check_error("a = 1 == 2 != 3", 12, "comparisons cannot be chained");
    check_error("a = \"abc", 5, "unterminated string");
    check_error("a = 'abc\"", 5, "unterminated string");
    check_error("a = 'ab\\", 5, "unterminated string");
    check_error("a = 'a\\qb'", 7, "unknown escape '\\q'");
    check_error("a = 'it''s'", 9, "unexpected ''s''");
    check_error("f32 = x", 1, "cannot assign to reserved word 'f32'");
    check_error("a, None = x", 4, "cannot assign to reserved word 'None'");
    check_error("a, = x", 4, "expected a target name after ','");
    check_error("a, a = f(x)", 4, "'a' is assigned twice");
    check_error("a b = c", 3, "expected '=' after the targets");
    check_error("x.T = y", 2, "expected '=' after the targets");
    check_error("x[0] = y", 2, "expected '=' after the targets");
    check_error("1 = y", 1, "expected a target name, found '1'");
    check_error("a", 2, "expected '=' after the targets");
    check_error("a + b", 3, "expected '=' after the targets");
    check_error("a = 99999999999999999999", 5, "integer '99999999999999999999' does not fit");
    check_error("a = -9223372036854775808", 6, "does not fit in 64 bits");
    check_error("a = 1e999", 5, "too large for f64");
    check_error("a = 0x1F", 5, "malformed number '0x1F'");
    check_error("a = 1e", 5, "malformed number '1e'");
    check_error("a = 1e+", 5, "malformed number '1e'");
    check_error("a = 2x", 5, "malformed number '2x'");
    check_error("a = 1..2", 5, "malformed number '1..2'");
    check_error("a = 1.T", 5, "malformed number '1.T'");
    check_error("a = x[...,...]", 11, "only one '...' is allowed");
    check_error("a = x[]", 7, "empty subscript");
    check_error("a = x[1:2:3:4]", 12, "expected ',' or ']' in the subscript opened at column 6");
    check_error("a = x[1", 8, "expected ']' to close the subscript opened at column 6");
    check_error("a = [1, 2", 10, "expected ']' to close the list opened at column 5");
    check_error("a = [1 2]", 8, "expected ',' or ']' in the list");
    check_error("y = norm(x, dim=1", 18,
                "expected ')' to close the call of 'norm' opened at column 9");
    check_error("a = f(1 2)", 9, "expected ',' or ')' in the call of 'f'");
    check_error("a = f(,)", 7, "expected an expression after '(', found ','");
    check_error("a = f(x=)", 9, "expected an expression after '=', found ')'");
    check_error("a = ()", 6, "expected an expression after '(', found ')'");
    check_error("a = x.T(1)", 8, "only an op's name can be called");
    check_error("a = (f)(b)", 8, "only an op's name can be called");
    check_error("a = f(x)(y)", 9, "only an op's name can be called");
    check_error("a = f32(x)", 8, "a dtype cannot be called");
    check_error("a = 1(2)", 6, "only an op's name can be called");
    check_error("a = ...", 5, "expected an expression after '=', found '...'");
    check_error("a = x[1:...]", 9, "expected an expression after ':'");
    check_error("a = $", 5, "unexpected character '$'");
    check_error("a = b; c = d", 6, "unexpected character ';'");
    check_error("a = b && c", 8, "expected an expression after '&'");
    check_error("a = !b", 5, "unexpected character '!'");
    check_error("a = \x01", 5, "unexpected byte 0x01");
    check_error("a = \xc3\xa9", 5, "unexpected byte 0xC3");
    check_error("a = b\x0c", 6, "unexpected byte 0x0C");
    check_error("", 1, "empty statement");
    check_error("   ", 1, "empty statement");
    check_error("  # only a comment", 1, "empty statement");
    check_error_bare("", "out", 1, "empty statement");
    check_error_bare("a +", "out", 4, "expected an expression after '+'");
    check_error_bare(")", "out", 1, "expected an expression, found ')'");
    check_error_bare("x.T = y", "out", 2, "expected '=' after the targets");
    check_error_bare("a = ", "out", 4, "expected an expression after '='");
    /* the leftmost error is the one reported */
    check_error("a = ) 'abc", 5, "expected an expression after '=', found ')'");
    check_error("a = (b $", 8, "unexpected character '$'");
    check_error("= 0x", 1, "expected a target name before '='");

    check_hint("a = 1 < 2 < 3", "logical_and");
    check_hint("a = f(x=1, x=2)", "column 7");
    check_hint("f32 = x", "reserved words");
    check_hint("a = 'x\\q'", "the escapes are");
    check_hint("a = x.foo", ".mT");
    check_hint("a = f32(x)", "cast(x, f32)");
    check_hint("a = f(x=1, 2)", "positional arguments first");
}

/* Errors in text spread over several lines sit at the statement. */
static void test_error_places(void)
{
    struct diag_list d;
    struct statement *s;

    diag_init(&d, "test.yaml", NULL, 0);
    s = expr_parse("a = f(x,\n  y", 9, 5, false, NULL, &d);
    ok(!s && d.count == 1 && d.items[0].line == 9 && d.items[0].col == 5 &&
       strcmp(d.items[0].message, "expected ')' to close the call of 'f'") == 0,
       "error places: multi-line text points at the statement, no 'opened at'");
    diag_free(&d);

    s = expr_parse("a = f(x=1,\n x=2)", 9, 5, false, NULL, &d);
    ok(!s && d.count == 1 && d.items[0].hint == NULL, "error places: no column in the hint");
    diag_free(&d);

    s = expr_parse("a = b +", 3, 11, true, NULL, &d);
    ok(!s && d.count == 1 && d.items[0].line == 3 && d.items[0].col == 18,
       "error places: offset by the statement's column");
    diag_free(&d);

    /* the column saturates instead of overflowing */
    s = expr_parse("a = b )", 1, INT32_MAX - 2, true, NULL, &d);
    ok(!s && d.count == 1 && d.items[0].col == INT32_MAX, "error places: column saturates");
    diag_free(&d);
}

/* Nesting past the limit is an error, not a stack overflow. */
static void test_depth(void)
{
    size_t n = 100000;
    char *text = malloc(n + 8);
    char *p;

    if (!text)
        return;
    memcpy(text, "a = ", 4);
    memset(text + 4, '(', n);
    text[4 + n] = '\0';
    check_error(text, 4 + 257, "nested too deeply");

    memset(text + 4, '[', n);
    check_error(text, 4 + 257, "nested too deeply");

    memset(text + 4, '-', n);
    check_error(text, 4 + 257, "nested too deeply");

    /* f(f(f(...))) */
    p = text + 4;
    for (size_t i = 0; i + 2 < n; i += 2) {
        *p++ = 'f';
        *p++ = '(';
    }
    *p = '\0';
    check_error(text, 4 + 257, "nested too deeply");

    /* a long chain: a+a+a+... */
    p = text + 4;
    for (size_t i = 0; i + 2 < n; i += 2) {
        *p++ = 'a';
        *p++ = '+';
    }
    *p++ = 'a';
    *p = '\0';
    check_error(text, 4 + 2 * 256 + 1, "nested too deeply");

    /* x.T.T.T... */
    p = text + 4;
    *p++ = 'x';
    for (size_t i = 0; i + 3 < n; i += 2) {
        *p++ = '.';
        *p++ = 'T';
    }
    *p = '\0';
    check_error(text, 4 + 2 * 256, "nested too deeply");

    /* a**a**a... */
    p = text + 4;
    for (size_t i = 0; i + 4 < n; i += 3) {
        *p++ = 'a';
        *p++ = '*';
        *p++ = '*';
    }
    *p++ = 'a';
    *p = '\0';
    check_error(text, 4 + 3 * 256 + 1, "nested too deeply");

    /* just inside the limit parses */
    memcpy(text, "a = ", 4);
    memset(text + 4, '(', 200);
    text[204] = 'x';
    memset(text + 205, ')', 200);
    text[405] = '\0';
    check_parse(text, NULL, "a = x");

    /* wide is fine: a list of 20000 items */
    p = text;
    memcpy(p, "a = [", 5);
    p += 5;
    for (int i = 0; i < 20000; i++) {
        memcpy(p, "1,", 2);
        p += 2;
    }
    *p++ = ']';
    *p = '\0';
    {
        struct diag_list d;
        struct statement *s;
        diag_init(&d, "test.yaml", NULL, 0);
        s = expr_parse(text, 1, 1, true, NULL, &d);
        ok(s && s->value->nargs == 20000, "depth: a list of 20000 items");
        statement_free(s);
        diag_free(&d);
    }
    free(text);
}

/* Random statements made of tokens and bytes: each parses with no
 * diagnostic, or fails with exactly one error. */
static void test_garbage(void)
{
    static const char *const pieces[] = {
        "a", "b", "f", "x", "topk", "f32", "None", "true", "inf", "nan", "1", "2.5", ".5",
        "1e3", "'s'", "\"t\"", "(", ")", "[", "]", ",", "=", ".", "T", "mT", ":", "...",
        "+", "-", "*", "/", "**", "@", "<", "<=", ">", ">=", "==", "!=", " ", "\t", "#",
        "\n", "'", "\\", "x=", "\x80", "\xff", "$", "0x", "1e", ";", "..", "99999999999999999999",
    };
    unsigned seed = 12345;
    int bad = 0, parsed = 0, runs = 20000;

    for (int r = 0; r < runs; r++) {
        char text[256];
        size_t len = 0;
        int n;
        struct diag_list d;
        struct statement *s;

        seed = seed * 1103515245u + 12345u;
        n = (int)((seed >> 16) % 24);
        for (int i = 0; i < n; i++) {
            const char *piece;
            size_t plen;
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 8 == 0) {
                /* a raw byte, never NUL */
                text[len++] = (char)(1 + (seed >> 8) % 255);
                continue;
            }
            piece = pieces[(seed >> 16) % (sizeof pieces / sizeof *pieces)];
            plen = strlen(piece);
            if (len + plen >= sizeof text - 1)
                break;
            memcpy(text + len, piece, plen);
            len += plen;
        }
        text[len] = '\0';
        diag_init(&d, "test.yaml", NULL, 0);
        s = expr_parse(text, 1, 1, (r & 1) != 0, (r & 2) ? "out" : NULL, &d);
        if (s ? d.count != 0 : d.errors != 1) {
            if (bad++ < 5)
                diag("garbage: '%s' gave %s with %zu diagnostics", shown(text), s ? "a tree" : "NULL",
                     d.count);
        }
        for (size_t i = 0; i < d.count; i++) {
            if (d.items[i].line != 1 || d.items[i].col < 1 || d.items[i].col > (int)len + 1) {
                if (bad++ < 5)
                    diag("garbage: '%s' error at %d:%d", shown(text), d.items[i].line, d.items[i].col);
            }
        }
        parsed += s != NULL;
        statement_free(s);
        diag_free(&d);
    }
    ok(bad == 0, "garbage: %d random statements, %d parsed, the rest one error each", runs, parsed);
}

/* ------------------------------------------------------------ out of memory */

#ifdef TR_TEST_WRAP_MALLOC
/*
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,
 * every allocation of the objects linked in goes through these, and the
 * n-th one can be made to fail.  The real allocator stays the one behind
 * (the sanitizer's or valgrind's), so frees still match.
 */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
char *__wrap_strdup(const char *s);

static long fail_countdown = -1;  /* allocations left before one fails; -1: never */
static bool failed_one;

static bool fail_now(void)
{
    if (fail_countdown < 0)
        return false;
    if (fail_countdown-- > 0)
        return false;
    failed_one = true;
    return true;
}

void *__wrap_malloc(size_t size)
{
    return fail_now() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *ptr, size_t size)
{
    return fail_now() ? NULL : __real_realloc(ptr, size);
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : __real_strdup(s);
}

/* Fails each allocation of parsing text in turn: every failure must give
 * NULL, freeing everything (the sanitizers and valgrind check that). */
static void check_oom(const char *text, const char *bare, const char *want)
{
    int bad = 0;
    long k;

    for (k = 0; k < 100000; k++) {
        struct diag_list d;
        struct statement *s;
        struct out o = {.len = 0};

        diag_init(&d, "test.yaml", NULL, 0);
        failed_one = false;
        fail_countdown = k;
        s = expr_parse(text, 1, 1, true, bare, &d);
        fail_countdown = -1;
        if (!failed_one) {
            /* the run that needed no failure: the full result ("" for an error) */
            if (s)
                print_statement(&o, s);
            if (want[0] ? !s || strcmp(o.text, want) != 0 : s || d.errors != 1)
                bad++;
            statement_free(s);
            diag_free(&d);
            break;
        }
        if (s || d.errors > 1 || (d.count == 1 && d.items[0].exit_code != 5 &&
                                  d.items[0].exit_code != 3))
            bad++;
        statement_free(s);
        diag_free(&d);
    }
    ok(bad == 0 && k > 0, "out of memory: each of %ld allocations of '%s' fails cleanly", k,
       shown(text));
}

static void test_oom(void)
{
    check_oom("v, i = topk(en @ qn.T, k, dim=-1, largest=true)", NULL,
              "v i = (topk! (matmul en (.T qn)) k dim=(neg 1) largest=true)");
    check_oom("x[1:, ::-1, ..., None, 0] + [1, 2.5, 's', f32][0] < -a**2", "out",
              "out = (lt (add (index x (slice 1 _ _) (slice _ _ (neg 1)) ... None 0) "
              "(index (list 1 2.5 \"s\" f32) 0)) (neg (pow a 2)))");
    check_oom("y = [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t]", NULL,
              "y = (list a b c d e f g h i j k l m n o p q r s t)");
    check_oom("a, b, c, d, e, f, g, h = f(a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9)", NULL,
              "a b c d e f g h = (f! a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9)");
    check_oom("a = (b $", NULL, "");
    check_oom("a = 'unterminated", NULL, "");
}
#else
static void test_oom(void)
{
    skip("out of memory: needs -DTR_TEST_WRAP_MALLOC and -Wl,--wrap=malloc,...");
}
#endif

int main(void)
{
    test_precedence();
    test_literals();
    test_constructs();
    test_statements();
    test_columns();
    test_values();
    test_words();
    test_errors();
    test_error_places();
    test_depth();
    test_garbage();
    test_oom();
    return done_testing();
}
