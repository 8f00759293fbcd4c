/*
 * npy.c - the .npy format: the preamble (magic string, version, header
 * length), a strict parser of the header's Python dict literal, and the
 * header that NumPy's np.save writes.
 *
 * The layout (numpy/lib/format.py):
 *
 *   "\x93NUMPY" major minor   8 bytes; versions 1.0, 2.0 and 3.0 exist
 *   header length             uint16 LE in 1.0, uint32 LE in 2.0 and 3.0
 *   header                    {'descr': '<f4', 'fortran_order': False,
 *                             'shape': (3, 4), } padded with spaces and
 *                             ended by '\n' (latin-1 in 1.0 and 2.0,
 *                             UTF-8 in 3.0)
 *   data                      from the header's end to the file's end
 *
 * NumPy evaluates the header with ast.literal_eval.  We parse it instead:
 * a hand-written grammar of exactly the dict NumPy writes (three keys,
 * strings, True/False, a tuple of decimal integers), so nothing in a file
 * can make the parser do more than walk the bytes once.  Every byte the
 * grammar accepts is ASCII, which is why the latin-1 and UTF-8 headers need
 * no decoding: any other byte is an error.
 */
#include "io_impl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93" "NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64          /* np.save aligns the data to this */
#define NPY_GROWTH_DIGITS 21  /* NumPy 1.24 leaves room for a first
                                 dimension of this many digits */
#define NPY_MAX_DIMS 64       /* NumPy 2's limit (32 before) */
#define NPY_MAX_NESTING 16    /* of structured dtypes' field lists */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NPY_HOST_BIG_ENDIAN 1
#else
#define NPY_HOST_BIG_ENDIAN 0
#endif

/* The engine's dtypes as NumPy spells them: kind letter and size make the
 * type string ("<f4"), the long name appears in messages ("float32"). */
struct npy_dtype {
    char kind;
    unsigned size;
    const char *long_name;
};

static const struct npy_dtype npy_dtypes[TR_DTYPE_COUNT] = {
#define NPY_DTYPE_ROW(e, name, size, kind, long_name)                        \
    [TR_DTYPE_##e] = {kind, size, long_name},
    TR_DTYPE_MAP(NPY_DTYPE_ROW)
#undef NPY_DTYPE_ROW
};

/* bf16 shares kind 'f' and size 2 with f16 in the table, but NumPy has no
 * bfloat16: its 'f2' is IEEE half precision. */
static bool npy_has_dtype(enum tr_dtype dtype)
{
    return (unsigned)dtype < TR_DTYPE_COUNT && dtype != TR_DTYPE_BF16;
}

static bool npy_lookup(char kind, uint64_t size, enum tr_dtype *out)
{
    for (int i = 0; i < TR_DTYPE_COUNT; i++) {
        if (npy_has_dtype((enum tr_dtype)i) && npy_dtypes[i].kind == kind &&
            npy_dtypes[i].size == size) {
            *out = (enum tr_dtype)i;
            return true;
        }
    }
    return false;
}

/* Appends to buf as snprintf would, never past size; returns the new length. */
__attribute__((format(printf, 4, 5)))
static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (used >= size)
        return used;
    va_start(ap, fmt);
    n = vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
    if (n < 0)
        return used;
    return (size_t)n < size - used ? used + (size_t)n : size;
}

/* A shape as Python's repr prints a tuple: (), (3,), (2, 3). */
static char *format_tuple(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = append(buf, size, 0, "(");

    for (int i = 0; i < ndim; i++)
        used = append(buf, size, used, "%s%" PRId64, i ? ", " : "", shape[i]);
    append(buf, size, used, "%s)", ndim == 1 ? "," : "");
    return buf;
}

/* Bytes as a Python bytes literal would show them, without the b: printable
 * ASCII as itself, the rest as \xNN.  out must hold 4 * n + 1 bytes. */
static char *escape_bytes(const uint8_t *p, size_t n, char *out, size_t size)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n && used + 5 <= size; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != '\'')
            out[used++] = (char)p[i];
        else
            used += (size_t)snprintf(out + used, size - used, "\\x%02x", p[i]);
        out[used] = '\0';
    }
    return out;
}

/* ------------------------------------------------------------ preamble */

bool tio__npy_magic(const uint8_t *buf, uint64_t len)
{
    return buf && len >= NPY_MAGIC_LEN && memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) == 0;
}

tr_status tio__npy_header_size(const uint8_t *buf, uint64_t len, uint64_t *size)
{
    size_t have = len < NPY_MAGIC_LEN ? (size_t)len : NPY_MAGIC_LEN;
    char shown[4 * NPY_MAGIC_LEN + 1];
    unsigned major, minor;
    uint64_t preamble, header_len;

    *size = 0;
    if (len == 0)
        return tio__error(TR_ERR_FORMAT,
                          "empty file: expected a .npy file, which starts with '\\x93NUMPY'");
    if (memcmp(buf, NPY_MAGIC, have) != 0)
        return tio__error(TR_ERR_FORMAT,
                          "not a .npy file: it starts with '%s' instead of the magic "
                          "string '\\x93NUMPY'",
                          escape_bytes(buf, have, shown, sizeof shown));
    if (len < NPY_MAGIC_LEN + 2)
        return tio__error(TR_ERR_FORMAT,
                          "truncated: %" PRIu64 " bytes, too short for the .npy magic "
                          "string and version (8 bytes)",
                          len);
    major = buf[6];
    minor = buf[7];
    if (minor != 0 || major < 1 || major > 3)
        return tio__error(TR_ERR_FORMAT,
                          "unsupported .npy format version %u.%u (versions 1.0, 2.0 and "
                          "3.0 exist)",
                          major, minor);
    preamble = major == 1 ? 10 : 12;
    if (len < preamble)
        return tio__error(TR_ERR_FORMAT,
                          "truncated: %" PRIu64 " bytes, too short for the %" PRIu64
                          "-byte preamble of a version %u.0 .npy file",
                          len, preamble, major);
    if (major == 1)
        header_len = (uint64_t)buf[8] | (uint64_t)buf[9] << 8;
    else
        header_len = (uint64_t)buf[8] | (uint64_t)buf[9] << 8 | (uint64_t)buf[10] << 16 |
                     (uint64_t)buf[11] << 24;
    /* NumPy refuses headers over 10000 bytes because it evaluates them;
     * we only walk them, and allow far more (1 MiB: tensorrun(1), TENSOR FILES). */
    if (header_len > TIO_NPY_HEADER_MAX)
        return tio__error(TR_ERR_FORMAT,
                          "the .npy header is %" PRIu64 " bytes long, over the limit of %"
                          PRIu64 " bytes",
                          header_len, (uint64_t)TIO_NPY_HEADER_MAX);
    *size = preamble + header_len;
    return TR_OK;
}

/* ------------------------------------------------------------ dict parser */

/* The header text being parsed; pos is an index into text. */
struct cursor {
    const uint8_t *text;
    size_t len;
    size_t pos;
    unsigned major; /* format version: 1.0 and 2.0 headers may be Python 2's */
};

enum npy_key { KEY_DESCR, KEY_FORTRAN_ORDER, KEY_SHAPE, KEY_COUNT };

static const char *const key_names[KEY_COUNT] = {"descr", "fortran_order", "shape"};

/* What the parse found. */
struct header {
    bool seen[KEY_COUNT];
    size_t descr_start, descr_len; /* the type string, without its quotes */
    size_t descr_pos;              /* its opening quote */
    char order, kind;              /* of the type string */
    uint64_t itemsize;             /* 0 when unknown (object arrays) */
    bool fortran_order;
    bool structured;               /* 'descr' is a list of fields */
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
};

static bool is_space(uint8_t ch)
{
    /* Python's blanks, and the newlines it allows inside brackets */
    return ch == ' ' || ch == '\t' || ch == '\f' || ch == '\r' || ch == '\n';
}

static bool is_digit(uint8_t ch)
{
    return ch >= '0' && ch <= '9';
}

static bool is_word(uint8_t ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

/* Characters shown together as one token in messages ("-1", "3.0", "true"). */
static bool is_token(uint8_t ch)
{
    return is_word(ch) || ch == '.' || ch == '-' || ch == '+';
}

static void skip_space(struct cursor *c)
{
    while (c->pos < c->len && is_space(c->text[c->pos]))
        c->pos++;
}

/* "line 2, column 5" of pos, or "column 5" in a one-line header. */
static char *where(const struct cursor *c, size_t pos, char *buf, size_t size)
{
    size_t line = 1, line_start = 0;

    for (size_t i = 0; i < pos && i < c->len; i++) {
        if (c->text[i] == '\n') {
            line++;
            line_start = i + 1;
        }
    }
    if (line == 1)
        snprintf(buf, size, "column %zu", pos + 1);
    else
        snprintf(buf, size, "line %zu, column %zu", line, pos - line_start + 1);
    return buf;
}

/* The token at pos as a message shows it, quoted, at most 24 characters. */
static char *token(const struct cursor *c, size_t pos, char *buf, size_t size)
{
    size_t end = pos;
    uint8_t ch;

    if (pos >= c->len) {
        snprintf(buf, size, "the end of the header");
        return buf;
    }
    ch = c->text[pos];
    if (!is_token(ch)) {
        if (ch == '\n')
            snprintf(buf, size, "a newline");
        else if (ch >= 0x20 && ch < 0x7f)
            snprintf(buf, size, "'%c'", ch);
        else
            snprintf(buf, size, "byte 0x%02x", ch);
        return buf;
    }
    while (end < c->len && end - pos < 24 && is_token(c->text[end]))
        end++;
    snprintf(buf, size, "'%.*s%s'", (int)(end - pos), (const char *)c->text + pos,
             end < c->len && is_token(c->text[end]) ? "..." : "");
    return buf;
}

/* Records "malformed .npy header: <what> at column N" (at line L, column N
 * in a header of several lines; nothing at its end). */
__attribute__((format(printf, 3, 4)))
static tr_status malformed(const struct cursor *c, size_t pos, const char *fmt, ...)
{
    char what[384], at[48];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* "found the end of the header" says where by itself */
    if (pos >= c->len)
        return tio__error(TR_ERR_FORMAT, "malformed .npy header: %s", what);
    return tio__error(TR_ERR_FORMAT, "malformed .npy header: %s at %s", what,
                      where(c, pos, at, sizeof at));
}

/*
 * A quoted string, single or double, on one line.  Only printable ASCII
 * without backslashes is accepted: no key or type string needs more, and
 * refusing escapes keeps the text exactly what the file says.
 */
static tr_status parse_string(struct cursor *c, const char *expected, size_t *start,
                              size_t *len)
{
    size_t open = c->pos;
    char found[48];
    uint8_t quote;

    if (c->pos >= c->len || (c->text[c->pos] != '\'' && c->text[c->pos] != '"'))
        return malformed(c, c->pos, "expected %s, found %s", expected,
                         token(c, c->pos, found, sizeof found));
    quote = c->text[c->pos++];
    *start = c->pos;
    for (;;) {
        uint8_t ch;

        if (c->pos >= c->len || c->text[c->pos] == '\n' || c->text[c->pos] == '\r')
            return malformed(c, open, "unterminated string");
        ch = c->text[c->pos];
        if (ch == quote)
            break;
        if (ch == '\\')
            return malformed(c, c->pos, "escape sequences in strings are not supported");
        if (ch < 0x20 || ch >= 0x7f)
            return malformed(c, c->pos, "unexpected byte 0x%02x in a string", ch);
        c->pos++;
    }
    *len = c->pos - *start;
    c->pos++;
    return TR_OK;
}

/* Checks a NumPy type string: byte order, kind letter, size (and a unit for
 * dates and times).  Sets the order, kind and item size (0 for objects,
 * whose data is pickled); false when NumPy would not understand it. */
static bool parse_typestr(const uint8_t *s, size_t n, struct header *h)
{
    static const char *const units[] = {"Y", "M",  "W",  "D",  "h",  "m", "s",
                                        "ms", "us", "ns", "ps", "fs", "as"};
    size_t i = 2, digits;
    uint64_t num = 0;

    if (n < 2 || (s[0] != '<' && s[0] != '>' && s[0] != '|' && s[0] != '='))
        return false;
    h->order = (char)s[0];
    h->kind = (char)s[1];
    while (i < n && is_digit(s[i])) {
        if (__builtin_mul_overflow(num, 10, &num) || __builtin_add_overflow(num, s[i] - '0', &num))
            return false;
        i++;
    }
    digits = i - 2;
    if (digits > 1 && s[2] == '0')
        return false;
    h->itemsize = num;
    switch (h->kind) {
    case 'b':
        if (num != 1)
            return false;
        break;
    case 'i':
    case 'u':
        if (num != 1 && num != 2 && num != 4 && num != 8)
            return false;
        break;
    case 'f': /* f12 and f16 are x86's long double */
        if (num != 2 && num != 4 && num != 8 && num != 12 && num != 16)
            return false;
        break;
    case 'c':
        if (num != 8 && num != 16 && num != 24 && num != 32)
            return false;
        break;
    case 'm':
    case 'M': /* M8, M8[ns], M8[10ms] */
        if (num != 8)
            return false;
        if (i < n && s[i] == '[') {
            size_t unit_start;
            bool known = false;

            i++;
            while (i < n && is_digit(s[i]))
                i++;
            unit_start = i;
            while (i < n && s[i] != ']')
                i++;
            if (i >= n)
                return false;
            for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
                if (strlen(units[u]) == i - unit_start &&
                    memcmp(units[u], s + unit_start, i - unit_start) == 0)
                    known = true;
            if (!known)
                return false;
            i++;
        }
        break;
    case 'O': /* objects: the data is pickled, of no fixed size */
        if (digits > 0 && num != 4 && num != 8)
            return false;
        h->itemsize = 0;
        break;
    case 'S':
    case 'a':
    case 'V':
        if (digits == 0)
            return false;
        break;
    case 'U': /* the count is of UCS-4 characters */
        if (digits == 0 || __builtin_mul_overflow(num, 4, &h->itemsize))
            return false;
        break;
    default:
        return false;
    }
    return i == n;
}

static tr_status parse_fields(struct cursor *c, int depth, uint64_t *size);
static tr_status parse_shape(struct cursor *c, struct header *h);

/* A field's type: a type string or a nested list of fields; *size its
 * item size (objects count as the pointers NumPy stores). */
static tr_status parse_field_type(struct cursor *c, int depth, uint64_t *size)
{
    struct header t;
    size_t pos = c->pos, start, len;

    if (c->pos < c->len && c->text[c->pos] == '[')
        return parse_fields(c, depth + 1, size);
    memset(&t, 0, sizeof t);
    TR_FORWARD_IF_ERROR(parse_string(c, "a field's type string such as '<f4'", &start, &len));
    if (!parse_typestr(c->text + start, len, &t))
        return malformed(c, pos, "a field's type '%.*s%s' is not a NumPy type string",
                         len > 32 ? 32 : (int)len, (const char *)c->text + start,
                         len > 32 ? "..." : "");
    *size = t.kind == 'O' ? 8 : t.itemsize;
    return TR_OK;
}

/* A field's optional subarray shape, a tuple of dimensions: its element
 * count multiplies *size. */
static tr_status parse_field_shape(struct cursor *c, uint64_t *size)
{
    struct header t;
    size_t pos = c->pos;

    memset(&t, 0, sizeof t);
    TR_FORWARD_IF_ERROR(parse_shape(c, &t));
    for (int i = 0; i < t.ndim; i++)
        if (__builtin_mul_overflow(*size, (uint64_t)t.shape[i], size) ||
            *size > (uint64_t)INT64_MAX)
            return malformed(c, pos, "a field's shape is too large");
    return TR_OK;
}

/*
 * A structured dtype: a list of fields ('name', type[, shape]), where the
 * name may be a (title, name) pair and the type a nested list.  Walked
 * only to learn the item size (NumPy's descr spells padding as fields of
 * its own, so the sizes add up); the names are not kept.
 */
static tr_status parse_fields(struct cursor *c, int depth, uint64_t *size)
{
    char found[48];
    size_t start, len;

    *size = 0;
    if (depth > NPY_MAX_NESTING)
        return malformed(c, c->pos, "structured dtype nested more than %d deep",
                         NPY_MAX_NESTING);
    c->pos++; /* the '[' */
    skip_space(c);
    while (c->pos >= c->len || c->text[c->pos] != ']') {
        uint64_t field = 0;

        if (c->pos >= c->len || c->text[c->pos] != '(')
            return malformed(c, c->pos, "expected a field ('name', type) in the list of "
                             "fields, found %s",
                             token(c, c->pos, found, sizeof found));
        c->pos++;
        skip_space(c);
        if (c->pos < c->len && c->text[c->pos] == '(') {
            /* (title, name) */
            c->pos++;
            skip_space(c);
            TR_FORWARD_IF_ERROR(parse_string(c, "a field's title", &start, &len));
            skip_space(c);
            if (c->pos >= c->len || c->text[c->pos] != ',')
                return malformed(c, c->pos, "expected ',' after a field's title, found %s",
                                 token(c, c->pos, found, sizeof found));
            c->pos++;
            skip_space(c);
            TR_FORWARD_IF_ERROR(parse_string(c, "a field's name", &start, &len));
            skip_space(c);
            if (c->pos >= c->len || c->text[c->pos] != ')')
                return malformed(c, c->pos, "expected ')' after a field's name, found %s",
                                 token(c, c->pos, found, sizeof found));
            c->pos++;
        } else {
            TR_FORWARD_IF_ERROR(parse_string(c, "a field's name", &start, &len));
        }
        skip_space(c);
        if (c->pos >= c->len || c->text[c->pos] != ',')
            return malformed(c, c->pos, "expected ',' after a field's name, found %s",
                             token(c, c->pos, found, sizeof found));
        c->pos++;
        skip_space(c);
        TR_FORWARD_IF_ERROR(parse_field_type(c, depth, &field));
        skip_space(c);
        if (c->pos < c->len && c->text[c->pos] == ',') {
            c->pos++;
            skip_space(c);
            if (c->pos < c->len && c->text[c->pos] == '(') {
                TR_FORWARD_IF_ERROR(parse_field_shape(c, &field));
                skip_space(c);
                if (c->pos < c->len && c->text[c->pos] == ',') {
                    c->pos++;
                    skip_space(c);
                }
            }
        }
        if (c->pos >= c->len || c->text[c->pos] != ')')
            return malformed(c, c->pos, "expected ')' to end a field, found %s",
                             token(c, c->pos, found, sizeof found));
        c->pos++;
        if (__builtin_add_overflow(*size, field, size) || *size > (uint64_t)INT64_MAX)
            return malformed(c, c->pos, "a structured dtype is too large");
        skip_space(c);
        if (c->pos < c->len && c->text[c->pos] == ',') {
            c->pos++;
            skip_space(c);
        } else if (c->pos >= c->len || c->text[c->pos] != ']') {
            return malformed(c, c->pos, "expected ',' or ']' in the list of fields, found %s",
                             token(c, c->pos, found, sizeof found));
        }
    }
    c->pos++;
    return TR_OK;
}

static tr_status parse_descr(struct cursor *c, struct header *h)
{
    tr_status status;

    if (c->pos < c->len && c->text[c->pos] == '[') {
        h->descr_pos = c->pos;
        h->structured = true;
        h->order = '|';
        h->kind = 'V';
        return parse_fields(c, 0, &h->itemsize);
    }
    if (c->pos < c->len && c->text[c->pos] == '(')
        return tio__error(TR_ERR_FORMAT,
                          "subarray dtypes are not supported (the header's 'descr' is a "
                          "tuple)");
    h->descr_pos = c->pos;
    status = parse_string(c, "a quoted type string such as '<f4' as the value of 'descr'",
                          &h->descr_start, &h->descr_len);
    if (status != TR_OK)
        return status;
    if (!parse_typestr(c->text + h->descr_start, h->descr_len, h))
        return malformed(c, h->descr_pos, "'descr' is '%.*s%s', not a NumPy type string "
                         "such as '<f4'",
                         h->descr_len > 32 ? 32 : (int)h->descr_len,
                         (const char *)c->text + h->descr_start,
                         h->descr_len > 32 ? "..." : "");
    return TR_OK;
}

static tr_status parse_bool(struct cursor *c, bool *out)
{
    size_t start = c->pos, end = c->pos;
    char found[48];

    while (end < c->len && is_word(c->text[end]))
        end++;
    if (end - start == 4 && memcmp(c->text + start, "True", 4) == 0) {
        *out = true;
    } else if (end - start == 5 && memcmp(c->text + start, "False", 5) == 0) {
        *out = false;
    } else {
        return malformed(c, start, "expected True or False as the value of 'fortran_order', "
                         "found %s",
                         token(c, start, found, sizeof found));
    }
    c->pos = end;
    return TR_OK;
}

/* One dimension: a non-negative decimal integer that fits int64. */
static tr_status parse_dim(struct cursor *c, int64_t *out)
{
    size_t start = c->pos;
    int64_t value = 0;
    bool overflow = false;
    char found[48];

    if (c->pos < c->len && c->text[c->pos] == '-')
        return malformed(c, start, "negative dimension %s in 'shape'",
                         token(c, start, found, sizeof found));
    if (c->pos >= c->len || !is_digit(c->text[c->pos]))
        return malformed(c, start, "expected a dimension (a non-negative integer) in "
                         "'shape', found %s",
                         token(c, start, found, sizeof found));
    while (c->pos < c->len && is_digit(c->text[c->pos])) {
        int digit = c->text[c->pos] - '0';

        if (!overflow)
            overflow = __builtin_mul_overflow(value, 10, &value) ||
                       __builtin_add_overflow(value, digit, &value);
        c->pos++;
    }
    /* Python 2 wrote longs as 3L; NumPy strips the L from 1.0 and 2.0
     * headers (format.py's _filter_header), so we accept it there too. */
    if (c->major < 3 && c->pos < c->len && (c->text[c->pos] == 'L' || c->text[c->pos] == 'l'))
        c->pos++;
    if (c->pos < c->len && is_token(c->text[c->pos]))
        return malformed(c, start, "dimension %s in 'shape' is not a decimal integer",
                         token(c, start, found, sizeof found));
    if (c->pos - start > 1 && c->text[start] == '0')
        return malformed(c, start, "dimension %s in 'shape' has a leading zero",
                         token(c, start, found, sizeof found));
    if (overflow)
        return malformed(c, start, "dimension %s in 'shape' is too large (over %" PRId64 ")",
                         token(c, start, found, sizeof found), INT64_MAX);
    *out = value;
    return TR_OK;
}

/* A tuple of dimensions: (), (3,), (2, 3), (2, 3,). */
static tr_status parse_shape(struct cursor *c, struct header *h)
{
    size_t open = c->pos;
    char found[48];
    tr_status status;

    h->ndim = 0;
    if (c->pos >= c->len || c->text[c->pos] != '(')
        return malformed(c, c->pos, "expected a tuple such as (2, 3) as the value of "
                         "'shape', found %s",
                         token(c, c->pos, found, sizeof found));
    c->pos++;
    skip_space(c);
    if (c->pos < c->len && c->text[c->pos] == ')') {
        c->pos++;
        return TR_OK;
    }
    for (;;) {
        if (h->ndim == NPY_MAX_DIMS)
            return malformed(c, c->pos, "'shape' has more than %d dimensions (NumPy's "
                             "limit)", NPY_MAX_DIMS);
        status = parse_dim(c, &h->shape[h->ndim]);
        if (status != TR_OK)
            return status;
        h->ndim++;
        skip_space(c);
        if (c->pos < c->len && c->text[c->pos] == ',') {
            c->pos++;
            skip_space(c);
            if (c->pos < c->len && c->text[c->pos] == ')')
                break;
            continue;
        }
        if (c->pos < c->len && c->text[c->pos] == ')') {
            /* (3) is the number 3 in Python, not a tuple */
            if (h->ndim == 1)
                return malformed(c, open, "'shape' is not a tuple: a one-dimensional "
                                 "shape is written (%" PRId64 ",)", h->shape[0]);
            break;
        }
        return malformed(c, c->pos, "expected ',' or ')' in 'shape', found %s",
                         token(c, c->pos, found, sizeof found));
    }
    c->pos++;
    return TR_OK;
}

static tr_status parse_key(struct cursor *c, struct header *h, enum npy_key *out)
{
    size_t pos = c->pos, start, len;
    tr_status status = parse_string(c, "a quoted key or '}'", &start, &len);

    if (status != TR_OK)
        return status;
    for (int k = 0; k < KEY_COUNT; k++) {
        if (strlen(key_names[k]) == len && memcmp(key_names[k], c->text + start, len) == 0) {
            if (h->seen[k])
                return malformed(c, pos, "duplicate key '%s'", key_names[k]);
            h->seen[k] = true;
            *out = (enum npy_key)k;
            return TR_OK;
        }
    }
    return malformed(c, pos, "unexpected key '%.*s%s' (the keys are 'descr', "
                     "'fortran_order' and 'shape')",
                     len > 32 ? 32 : (int)len, (const char *)c->text + start,
                     len > 32 ? "..." : "");
}

/* The whole header: the dict, then only blanks (NumPy pads with spaces and
 * ends with '\n'; like NumPy we do not insist on the newline). */
static tr_status parse_dict(struct cursor *c, struct header *h)
{
    char found[48];

    skip_space(c);
    if (c->pos >= c->len || c->text[c->pos] != '{')
        return malformed(c, c->pos, "expected '{' (the header is a dict), found %s",
                         token(c, c->pos, found, sizeof found));
    c->pos++;
    skip_space(c);
    while (c->pos >= c->len || c->text[c->pos] != '}') {
        enum npy_key key = KEY_DESCR;
        tr_status status = parse_key(c, h, &key);

        if (status != TR_OK)
            return status;
        skip_space(c);
        if (c->pos >= c->len || c->text[c->pos] != ':')
            return malformed(c, c->pos, "expected ':' after the key '%s', found %s",
                             key_names[key], token(c, c->pos, found, sizeof found));
        c->pos++;
        skip_space(c);
        if (key == KEY_DESCR)
            status = parse_descr(c, h);
        else if (key == KEY_FORTRAN_ORDER)
            status = parse_bool(c, &h->fortran_order);
        else
            status = parse_shape(c, h);
        if (status != TR_OK)
            return status;
        skip_space(c);
        if (c->pos < c->len && c->text[c->pos] == ',') {
            c->pos++;
            skip_space(c);
        } else if (c->pos >= c->len || c->text[c->pos] != '}') {
            return malformed(c, c->pos, "expected ',' or '}' after the value of '%s', "
                             "found %s",
                             key_names[key], token(c, c->pos, found, sizeof found));
        }
    }
    c->pos++;
    skip_space(c);
    if (c->pos < c->len)
        return malformed(c, c->pos, "unexpected %s after the dict",
                         token(c, c->pos, found, sizeof found));
    for (int k = 0; k < KEY_COUNT; k++)
        if (!h->seen[k])
            return tio__error(TR_ERR_FORMAT, "malformed .npy header: missing key '%s'",
                              key_names[k]);
    return TR_OK;
}

/* ------------------------------------------------------------ parse */

tr_status tio__npy_parse(const uint8_t *buf, uint64_t len, uint64_t stream_size,
                         struct tio_entry *entry)
{
    struct header h;
    struct cursor c;
    uint64_t size, preamble, numel = 1, span, stride;
    const char *type_name;
    char tuple[NPY_MAX_DIMS * 22 + 8];
    int64_t *strides;
    bool file_big;
    tr_status status;

    memset(entry, 0, sizeof *entry);
    entry->dtype = TR_DTYPE_COUNT;
    status = tio__npy_header_size(buf, len, &size);
    if (status != TR_OK)
        return status;
    preamble = buf[6] == 1 ? 10 : 12;
    if (size > stream_size)
        return tio__error(TR_ERR_FORMAT,
                          "truncated: the preamble says the header ends at offset %" PRIu64
                          ", file has %" PRIu64 " bytes",
                          size, stream_size);
    if (size > len)
        return tio__error(TR_ERR_INVALID,
                          "npy: the header takes %" PRIu64 " bytes, only %" PRIu64
                          " were given to parse",
                          size, len);

    memset(&h, 0, sizeof h);
    c = (struct cursor){buf + preamble, (size_t)(size - preamble), 0, buf[6]};
    status = parse_dict(&c, &h);
    if (status != TR_OK)
        return status;

    entry->name = NULL;
    if (h.structured) {
        /* NumPy's own short spelling of a structured dtype */
        snprintf(entry->dtype_text, sizeof entry->dtype_text, "|V%" PRIu64, h.itemsize);
    } else if (h.descr_len < sizeof entry->dtype_text) {
        memcpy(entry->dtype_text, c.text + h.descr_start, h.descr_len);
        entry->dtype_text[h.descr_len] = '\0';
    } else {
        memcpy(entry->dtype_text, c.text + h.descr_start, sizeof entry->dtype_text - 1);
        entry->dtype_text[sizeof entry->dtype_text - 1] = '\0';
    }
    /* '<' little-endian, '>' big-endian, '=' the host's order, '|' not
     * applicable (single bytes; NumPy reads wider types as the host's) */
    file_big = h.order == '>' || (h.order != '<' && NPY_HOST_BIG_ENDIAN);
    entry->big_endian = file_big && h.itemsize > 1;
    entry->supported = !h.structured && h.ndim <= TR_MAX_DIMS &&
                       npy_lookup(h.kind, h.itemsize, &entry->dtype);
    if (entry->supported) {
        entry->byteswap = h.itemsize > 1 && file_big != NPY_HOST_BIG_ENDIAN;
        type_name = npy_dtypes[entry->dtype].long_name;
    } else {
        /* never loaded, so never swapped: byteswap stays false; a
         * supported dtype in too many dimensions is still named in full */
        enum tr_dtype d;
        entry->dtype = TR_DTYPE_COUNT;
        type_name = !h.structured && npy_lookup(h.kind, h.itemsize, &d)
                        ? npy_dtypes[d].long_name
                        : entry->dtype_text;
    }

    /* The dimensions other than 0 must multiply out within int64 bytes, as
     * the engine requires of every shape, so that no stride or extent
     * derived from them can overflow, even in an empty array. */
    span = h.itemsize ? h.itemsize : 1;
    for (int i = 0; i < h.ndim; i++) {
        uint64_t dim = (uint64_t)h.shape[i];

        if (__builtin_mul_overflow(span, dim ? dim : 1, &span) || span > (uint64_t)INT64_MAX)
            return tio__error(TR_ERR_FORMAT,
                              "malformed .npy header: shape %s of %s values is too large "
                              "(its size passes 2^63 bytes)",
                              format_tuple(h.ndim, h.shape, tuple, sizeof tuple), type_name);
        numel *= dim;
    }
    if (h.ndim <= TR_MAX_DIMS) {
        entry->ndim = h.ndim;
        memcpy(entry->shape, h.shape, (size_t)h.ndim * sizeof h.shape[0]);
        strides = entry->strides;
    } else {
        /* beyond the engine's rank: kept so that inspect can show it */
        entry->wide_shape = malloc(2 * (size_t)h.ndim * sizeof *entry->wide_shape);
        if (!entry->wide_shape)
            return tio__error(TR_ERR_OOM, "out of memory reading a header");
        entry->wide_ndim = h.ndim;
        memcpy(entry->wide_shape, h.shape, (size_t)h.ndim * sizeof h.shape[0]);
        strides = entry->wide_shape + h.ndim;
    }
    /* strides in elements, counting empty dimensions as 1 like the engine's
     * own contiguous strides; Fortran order is the column-major view */
    stride = 1;
    for (int k = 0; k < h.ndim; k++) {
        int i = h.fortran_order ? k : h.ndim - 1 - k;

        strides[i] = (int64_t)stride;
        stride *= h.shape[i] > 1 ? (uint64_t)h.shape[i] : 1;
    }
    entry->offset = size;
    entry->nbytes = numel * h.itemsize; /* no overflow: bounded by span */
    if (entry->nbytes > stream_size - size) {
        tio__entry_clear(entry);
        return tio__error(TR_ERR_FORMAT,
                          "truncated: header says %" PRIu64 " %s value%s (%" PRIu64
                          " bytes) after offset %" PRIu64 ", file has %" PRIu64 " bytes",
                          numel, type_name, numel == 1 ? "" : "s", entry->nbytes, size,
                          stream_size);
    }
    return TR_OK;
}

/* ------------------------------------------------------------ writing */

tr_status tio__npy_header(enum tr_dtype dtype, int ndim, const int64_t *shape, char **out,
                          size_t *len)
{
    char dict[TR_MAX_DIMS * 22 + 128], tuple[TR_MAX_DIMS * 22 + 8], digits[24];
    size_t text_len, dict_len, header_len, pad, preamble, total;
    int n;
    char *p;

    *out = NULL;
    *len = 0;
    if (dtype == TR_DTYPE_BF16)
        return tio__error(TR_ERR_DTYPE,
                          ".npy cannot hold bf16 (NumPy has no bfloat16): cast to f32 or "
                          "f16 first, or write .safetensors");
    if (!npy_has_dtype(dtype))
        return tio__error(TR_ERR_DTYPE, "npy: invalid dtype %d", (int)dtype);
    if (ndim < 0 || ndim > TR_MAX_DIMS || (ndim > 0 && !shape))
        return tio__error(TR_ERR_INVALID, "npy: invalid rank %d", ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return tio__error(TR_ERR_INVALID, "npy: negative dimension %" PRId64, shape[i]);

    /* np.save's text: sorted keys, repr of each value, ", " after each */
    n = snprintf(dict, sizeof dict, "{'descr': '%c%c%u', 'fortran_order': False, 'shape': %s, }",
                 npy_dtypes[dtype].size == 1 ? '|' : '<', npy_dtypes[dtype].kind,
                 npy_dtypes[dtype].size, format_tuple(ndim, shape, tuple, sizeof tuple));
    if (n < 0 || (size_t)n >= sizeof dict)
        return tio__error(TR_ERR_INVALID, "npy: header text too long");
    text_len = (size_t)n;
    dict_len = text_len;
    /* NumPy 1.24 leaves spaces for the first dimension to grow to 21 digits,
     * so that appending to the file can rewrite the header in place */
    if (ndim > 0) {
        n = snprintf(digits, sizeof digits, "%" PRId64, shape[0]);
        dict_len += NPY_GROWTH_DIGITS - (size_t)n;
    }
    /* then pads with spaces and a '\n' so the data starts at a multiple of
     * 64; when it is already there, NumPy still adds a full 64 spaces */
    header_len = dict_len + 1;
    preamble = 10;
    pad = NPY_ALIGN - (preamble + header_len) % NPY_ALIGN;
    if (header_len + pad > UINT16_MAX) {
        preamble = 12;
        pad = NPY_ALIGN - (preamble + header_len) % NPY_ALIGN;
    }
    total = preamble + header_len + pad;
    p = malloc(total);
    if (!p)
        return tio__error(TR_ERR_OOM, "npy: out of memory for a %zu-byte header", total);
    memcpy(p, NPY_MAGIC, NPY_MAGIC_LEN);
    p[6] = preamble == 10 ? 1 : 2;
    p[7] = 0;
    for (size_t i = 0; i < preamble - 8; i++)
        p[8 + i] = (char)(((header_len + pad) >> (8 * i)) & 0xff);
    memset(p + preamble, ' ', header_len + pad - 1);
    memcpy(p + preamble, dict, text_len);
    p[total - 1] = '\n';
    *out = p;
    *len = total;
    return TR_OK;
}
