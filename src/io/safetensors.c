/*
 * safetensors.c - the .safetensors header: parsed and validated by the
 * rules of the reference implementation (huggingface/safetensors,
 * safetensors/src/tensor.rs), and written byte for byte as its writer
 * writes it.
 *
 * A file is an 8-byte little-endian length N, N bytes of UTF-8 JSON, then
 * the data section.  The JSON is an object: "__metadata__" maps to an
 * object of strings, every other key names a tensor
 * {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, with the
 * offsets relative to the data section.  Taken in offset order (whatever
 * the JSON order), the tensors must cover the data section exactly: the
 * first starts at 0, each starts where the previous one ends, the last ends
 * at the end of the file, and each holds shape x dtype bits, a whole number
 * of bytes.
 *
 * The JSON goes through jansson (duplicate keys rejected).  The writer
 * emits its JSON itself: the reference (serde_json) escapes control
 * characters as \u00xx in lower case, jansson in upper case, and the header
 * must match the reference byte for byte.
 */
#include "config.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_impl.h"

/*
 * X(name, bits, engine dtype): every dtype the format defines, in the
 * reference's enum order (increasing alignment), which is the writer's sort
 * key.  TR_DTYPE_COUNT marks a dtype the engine lacks.
 */
#define TIO__ST_DTYPE_MAP(X)                                                 \
    X(BOOL, 8, TR_DTYPE_BOOL)                                                \
    X(F4, 4, TR_DTYPE_COUNT)                                                 \
    X(F6_E2M3, 6, TR_DTYPE_COUNT)                                            \
    X(F6_E3M2, 6, TR_DTYPE_COUNT)                                            \
    X(U8, 8, TR_DTYPE_U8)                                                    \
    X(I8, 8, TR_DTYPE_I8)                                                    \
    X(F8_E5M2, 8, TR_DTYPE_COUNT)                                            \
    X(F8_E4M3, 8, TR_DTYPE_COUNT)                                            \
    X(F8_E8M0, 8, TR_DTYPE_COUNT)                                            \
    X(F8_E4M3FNUZ, 8, TR_DTYPE_COUNT)                                        \
    X(F8_E5M2FNUZ, 8, TR_DTYPE_COUNT)                                        \
    X(I16, 16, TR_DTYPE_I16)                                                 \
    X(U16, 16, TR_DTYPE_U16)                                                 \
    X(F16, 16, TR_DTYPE_F16)                                                 \
    X(BF16, 16, TR_DTYPE_BF16)                                               \
    X(I32, 32, TR_DTYPE_I32)                                                 \
    X(U32, 32, TR_DTYPE_U32)                                                 \
    X(F32, 32, TR_DTYPE_F32)                                                 \
    X(C64, 64, TR_DTYPE_COUNT)                                               \
    X(F64, 64, TR_DTYPE_F64)                                                 \
    X(I64, 64, TR_DTYPE_I64)                                                 \
    X(U64, 64, TR_DTYPE_U64)

struct st_dtype {
    const char *name;
    unsigned bits;          /* per element */
    enum tr_dtype dtype;    /* TR_DTYPE_COUNT: not an engine dtype */
};

static const struct st_dtype st_dtypes[] = {
#define TIO__ST_DTYPE_ROW(name, bits, dtype) {#name, bits, dtype},
    TIO__ST_DTYPE_MAP(TIO__ST_DTYPE_ROW)
#undef TIO__ST_DTYPE_ROW
};

#define ST_DTYPE_COUNT (sizeof st_dtypes / sizeof st_dtypes[0])
#define ST_METADATA_KEY "__metadata__"

/* Room for one quoted name or token in a message (names are cut). */
#define ST_QUOTE_MAX 160
/* Room for a formatted shape: 8 dims of 20 digits, commas, brackets. */
#define ST_SHAPE_MAX (TR_MAX_DIMS * 21 + 4)

/* ------------------------------------------------------------ helpers */

static uint64_t read_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The length of the well-formed UTF-8 character at p (avail bytes left),
 * or 0 when it is not one: the rules of Rust's str::from_utf8 (no overlong
 * forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_char_len(const uint8_t *p, size_t avail)
{
    uint8_t c = p[0], lo = 0x80, hi = 0xbf;
    size_t n;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (avail < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    }
    return n;
}

/* True when the len bytes at p are valid UTF-8; *bad receives the offset
 * of the first invalid byte otherwise. */
static bool utf8_valid(const uint8_t *p, size_t len, size_t *bad)
{
    size_t i = 0;

    while (i < len) {
        size_t n = utf8_char_len(p + i, len - i);

        if (n == 0) {
            if (bad != NULL)
                *bad = i;
            return false;
        }
        i += n;
    }
    return true;
}

/* Writes s (from a file: anything) into buf for a message, between single
 * quotes, with control characters and bytes that are not UTF-8 shown as
 * \xNN, cut with "..." when long.  Returns buf. */
static const char *quote(const char *s, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = (const uint8_t *)s;
    size_t o = 0, avail = strlen(s);

    buf[o++] = '\'';
    while (*p != '\0') {
        size_t n = utf8_char_len(p, avail);
        bool escape = n == 0 || *p < 0x20 || *p == 0x7f;
        size_t need = escape ? 4 : n;

        if (o + need + 5 > size) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (escape) {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
            n = 1;
        } else {
            memcpy(buf + o, p, n);
            o += n;
        }
        p += n;
        avail -= n;
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a fractional number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = malloc(n);

    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

/* ------------------------------------------------------------ public bits */

const char *tio__safetensors_dtype_name(enum tr_dtype dtype)
{
    for (size_t i = 0; i < ST_DTYPE_COUNT; i++) {
        if (st_dtypes[i].dtype == dtype && dtype != TR_DTYPE_COUNT)
            return st_dtypes[i].name;
    }
    return NULL;
}

bool tio__safetensors_magic(const uint8_t *buf, uint64_t len, uint64_t stream_size)
{
    uint64_t n;

    if (buf == NULL || len < 9 || stream_size < 9)
        return false;
    n = read_le64(buf);
    if (n < 2 || n > TIO_SAFETENSORS_HEADER_MAX || n > stream_size - 8)
        return false;
    /* JSON may start with blanks, and the reference reader takes them */
    for (uint64_t i = 8; i < len && i < 8 + n; i++) {
        if (buf[i] == '{')
            return true;
        if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r')
            return false;
    }
    return false;
}

tr_status tio__safetensors_header_size(const uint8_t *buf, uint64_t len, uint64_t stream_size,
                                       uint64_t *size)
{
    uint64_t n;

    if (stream_size < 8)
        return tio__error(TR_ERR_FORMAT,
                          "file too short for a safetensors header: %" PRIu64
                          " bytes, the 8-byte header length alone needs 8",
                          stream_size);
    if (buf == NULL || size == NULL || len < 8)
        return tio__error(TR_ERR_INVALID, "safetensors header size: need the first 8 bytes");
    n = read_le64(buf);
    if (n > TIO_SAFETENSORS_HEADER_MAX)
        return tio__error(TR_ERR_FORMAT,
                          "header length %" PRIu64 " is over the limit of %" PRIu64 " bytes",
                          n, TIO_SAFETENSORS_HEADER_MAX);
    if (stream_size != TIO_SIZE_UNKNOWN && n > stream_size - 8)
        return tio__error(TR_ERR_FORMAT,
                          "header length %" PRIu64 " runs past the end of the file (%" PRIu64
                          " bytes follow the 8-byte length)",
                          n, stream_size - 8);
    *size = 8 + n;
    return TR_OK;
}

/* ------------------------------------------------------------ parsing */

/* One tensor while the header is checked. */
struct st_item {
    const char *name;        /* the JSON key: lives as long as the JSON */
    size_t json_index;       /* position in the JSON object */
    size_t dtype_index;      /* into st_dtypes */
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    uint64_t begin, end;     /* data_offsets */
};

static int item_offset_cmp(const void *a, const void *b)
{
    const struct st_item *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    if (x->json_index != y->json_index)
        return x->json_index < y->json_index ? -1 : 1;
    return 0;
}

/* A non-negative JSON integer, or an error naming what it is. */
static tr_status get_count(const json_t *v, const char *tensor, const char *what, uint64_t *out)
{
    char qn[ST_QUOTE_MAX];

    if (!json_is_integer(v))
        return tio__error(TR_ERR_FORMAT, "tensor %s: %s is %s, not a non-negative integer",
                          quote(tensor, qn, sizeof qn), what, json_type_name(v));
    if (json_integer_value(v) < 0)
        return tio__error(TR_ERR_FORMAT, "tensor %s: %s is %lld, not a non-negative integer",
                          quote(tensor, qn, sizeof qn), what,
                          (long long)json_integer_value(v));
    *out = (uint64_t)json_integer_value(v);
    return TR_OK;
}

/* Fills item from a tensor entry: an object with dtype, shape and
 * data_offsets (other keys ignored, as the reference ignores them), or
 * the same three as an array, which the reference's serde also accepts. */
static tr_status parse_item(const char *name, const json_t *v, struct st_item *item)
{
    char qn[ST_QUOTE_MAX], qd[ST_QUOTE_MAX], field[32];
    const json_t *dtype, *shape, *offsets;
    const char *text;
    size_t text_len, i;
    uint64_t count;
    tr_status status;

    item->name = name;
    if (json_is_object(v)) {
        dtype = json_object_get(v, "dtype");
        shape = json_object_get(v, "shape");
        offsets = json_object_get(v, "data_offsets");
        if (dtype == NULL || shape == NULL || offsets == NULL)
            return tio__error(TR_ERR_FORMAT, "tensor %s has no \"%s\"",
                              quote(name, qn, sizeof qn),
                              dtype == NULL ? "dtype"
                              : shape == NULL ? "shape" : "data_offsets");
    } else if (json_is_array(v) && json_array_size(v) == 3) {
        dtype = json_array_get(v, 0);
        shape = json_array_get(v, 1);
        offsets = json_array_get(v, 2);
    } else {
        return tio__error(TR_ERR_FORMAT,
                          "tensor %s is %s, not an object with dtype, shape and data_offsets",
                          quote(name, qn, sizeof qn), json_type_name(v));
    }

    if (!json_is_string(dtype))
        return tio__error(TR_ERR_FORMAT, "tensor %s: dtype is %s, not a string",
                          quote(name, qn, sizeof qn), json_type_name(dtype));
    text = json_string_value(dtype);
    text_len = json_string_length(dtype);
    for (i = 0; i < ST_DTYPE_COUNT; i++) {
        if (strlen(st_dtypes[i].name) == text_len && memcmp(st_dtypes[i].name, text, text_len) == 0)
            break;
    }
    if (i == ST_DTYPE_COUNT)
        return tio__error(TR_ERR_FORMAT,
                          "tensor %s has unknown dtype %s (the safetensors format defines BOOL, "
                          "F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, "
                          "F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)",
                          quote(name, qn, sizeof qn), quote(text, qd, sizeof qd));
    item->dtype_index = i;

    if (!json_is_array(shape))
        return tio__error(TR_ERR_FORMAT, "tensor %s: shape is %s, not an array",
                          quote(name, qn, sizeof qn), json_type_name(shape));
    if (json_array_size(shape) > TR_MAX_DIMS)
        return tio__error(TR_ERR_FORMAT,
                          "tensor %s has %zu dimensions; this program handles at most %d",
                          quote(name, qn, sizeof qn), json_array_size(shape), TR_MAX_DIMS);
    item->ndim = (int)json_array_size(shape);
    for (int d = 0; d < item->ndim; d++) {
        snprintf(field, sizeof field, "shape[%d]", d);
        status = get_count(json_array_get(shape, (size_t)d), name, field, &count);
        if (status != TR_OK)
            return status;
        item->shape[d] = (int64_t)count;
    }

    if (!json_is_array(offsets) || json_array_size(offsets) != 2)
        return tio__error(TR_ERR_FORMAT,
                          "tensor %s: data_offsets is %s, not an array of two integers",
                          quote(name, qn, sizeof qn),
                          json_is_array(offsets) ? "an array of another length"
                                                 : json_type_name(offsets));
    status = get_count(json_array_get(offsets, 0), name, "data_offsets[0]", &item->begin);
    if (status != TR_OK)
        return status;
    return get_count(json_array_get(offsets, 1), name, "data_offsets[1]", &item->end);
}

/* Keeps __metadata__: an object of strings, or null (no metadata). */
static tr_status parse_metadata(const json_t *v, struct tio__safetensors *st)
{
    char qk[ST_QUOTE_MAX];
    const char *key;
    json_t *value;
    size_t n, i = 0;

    if (json_is_null(v))
        return TR_OK;
    if (!json_is_object(v))
        return tio__error(TR_ERR_FORMAT, "__metadata__ is %s, not an object of strings",
                          json_type_name(v));
    n = json_object_size(v);
    json_object_foreach((json_t *)v, key, value) {
        if (!json_is_string(value))
            return tio__error(TR_ERR_FORMAT,
                              "__metadata__ value of key %s is %s, not a string",
                              quote(key, qk, sizeof qk), json_type_name(value));
        if (strlen(json_string_value(value)) != json_string_length(value))
            return tio__error(TR_ERR_FORMAT,
                              "__metadata__ value of key %s contains a NUL character (\\u0000), "
                              "which this program cannot keep",
                              quote(key, qk, sizeof qk));
    }
    st->has_metadata = true;
    if (n == 0)
        return TR_OK;
    st->metadata_keys = calloc(n, sizeof *st->metadata_keys);
    st->metadata_values = calloc(n, sizeof *st->metadata_values);
    if (st->metadata_keys == NULL || st->metadata_values == NULL)
        return tio__error(TR_ERR_OOM, "out of memory reading __metadata__");
    json_object_foreach((json_t *)v, key, value) {
        st->metadata_keys[i] = copy_string(key);
        st->metadata_values[i] = copy_string(json_string_value(value));
        st->metadata_count = ++i;
        if (st->metadata_keys[i - 1] == NULL || st->metadata_values[i - 1] == NULL)
            return tio__error(TR_ERR_OOM, "out of memory reading __metadata__");
    }
    return TR_OK;
}

/* numel x bits of a shape, folded left to right as the reference does (so
 * [0, 2^62, 2^62] is 0 bits and [2^62, 2^62, 0] overflows); *numel gets
 * the element count.  0: the element count overflows 64 bits, -1: the bit
 * count does. */
static int shape_bits(const int64_t *shape, int ndim, unsigned bits, uint64_t *numel,
                      uint64_t *nbits)
{
    *numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (__builtin_mul_overflow(*numel, (uint64_t)shape[d], numel))
            return 0;
    }
    if (__builtin_mul_overflow(*numel, (uint64_t)bits, nbits))
        return -1;
    return 1;
}

/* The reference's checks, tensor by tensor in offset order, then that the
 * data section is covered exactly. */
static tr_status check_layout(const struct st_item *items, size_t count, uint64_t data_size)
{
    char qn[ST_QUOTE_MAX], qp[ST_QUOTE_MAX], sh[ST_SHAPE_MAX];
    uint64_t start = 0;

    for (size_t k = 0; k < count; k++) {
        const struct st_item *it = &items[k];
        const struct st_dtype *dt = &st_dtypes[it->dtype_index];
        uint64_t numel, nbits;
        int fits;

        if (it->begin != start || it->end < it->begin) {
            quote(it->name, qn, sizeof qn);
            if (it->begin == start)
                return tio__error(TR_ERR_FORMAT,
                                  "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                                  "] end before they begin",
                                  qn, it->begin, it->end);
            if (k == 0)
                return tio__error(TR_ERR_FORMAT,
                                  "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                                  "] do not start at 0, where the first tensor's data must "
                                  "start",
                                  qn, it->begin, it->end);
            quote(items[k - 1].name, qp, sizeof qp);
            if (it->begin > start)
                return tio__error(TR_ERR_FORMAT,
                                  "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                                  "] leave a hole of %" PRIu64 " bytes after tensor %s, "
                                  "which ends at %" PRIu64,
                                  qn, it->begin, it->end, it->begin - start, qp, start);
            return tio__error(TR_ERR_FORMAT,
                              "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                              "] overlap tensor %s, which ends at %" PRIu64,
                              qn, it->begin, it->end, qp, start);
        }
        start = it->end;

        fits = shape_bits(it->shape, it->ndim, dt->bits, &numel, &nbits);
        if (fits == 0)
            return tio__error(TR_ERR_FORMAT,
                              "tensor %s: shape %s overflows: its element count does not "
                              "fit in 64 bits",
                              quote(it->name, qn, sizeof qn),
                              tr_format_shape(it->shape, it->ndim, sh, sizeof sh));
        if (fits < 0)
            return tio__error(TR_ERR_FORMAT,
                              "tensor %s: shape %s of %s overflows: its size in bits does not "
                              "fit in 64 bits",
                              quote(it->name, qn, sizeof qn),
                              tr_format_shape(it->shape, it->ndim, sh, sizeof sh), dt->name);
        if (nbits % 8 != 0)
            return tio__error(TR_ERR_FORMAT,
                              "tensor %s: %" PRIu64 " %s values take %" PRIu64
                              " bits, not a whole number of bytes",
                              quote(it->name, qn, sizeof qn), numel, dt->name, nbits);
        if (it->end - it->begin != nbits / 8)
            return tio__error(TR_ERR_FORMAT,
                              "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                              " bytes, but shape %s of %s needs %" PRIu64,
                              quote(it->name, qn, sizeof qn), it->begin, it->end,
                              it->end - it->begin,
                              tr_format_shape(it->shape, it->ndim, sh, sizeof sh), dt->name,
                              nbits / 8);
    }
    if (data_size == TIO_SIZE_UNKNOWN)
        return TR_OK; /* the caller checks the end once it knows it */
    if (start < data_size)
        return tio__error(TR_ERR_FORMAT,
                          "the tensors' data ends %" PRIu64 " bytes into the data section, "
                          "which has %" PRIu64 " bytes: the last %" PRIu64
                          " are not covered by any tensor",
                          start, data_size, data_size - start);
    if (start > data_size)
        return tio__error(TR_ERR_FORMAT,
                          "truncated: the header says %" PRIu64
                          " bytes of data follow it, the file has %" PRIu64,
                          start, data_size);
    return TR_OK;
}

/* Fills entry from a checked item; header_end is 8 + N. */
static tr_status fill_entry(const struct st_item *it, uint64_t header_end,
                            struct tio_entry *entry)
{
    const struct st_dtype *dt = &st_dtypes[it->dtype_index];
    int64_t stride = 1;

    memset(entry, 0, sizeof *entry);
    entry->name = copy_string(it->name);
    if (entry->name == NULL)
        return tio__error(TR_ERR_OOM, "out of memory reading a safetensors header");
    memcpy(entry->dtype_text, dt->name, strlen(dt->name) + 1);
    entry->supported = dt->dtype != TR_DTYPE_COUNT;
    entry->dtype = dt->dtype;
    entry->ndim = it->ndim;
    for (int d = it->ndim - 1; d >= 0; d--) {
        entry->shape[d] = it->shape[d];
        entry->strides[d] = stride;
        /* Only a tensor of no elements has dimensions whose product
         * overflows (the others fit in their bytes); the reference accepts
         * it, and any strides suit it: the outer ones become 0. */
        if (__builtin_mul_overflow(stride, it->shape[d], &stride))
            stride = 0;
    }
    entry->offset = header_end + it->begin;
    entry->nbytes = it->end - it->begin;
    entry->byteswap = false;
    return TR_OK;
}

static tr_status json_failure(const json_error_t *error)
{
    char token[ST_QUOTE_MAX];

    /* jansson's text may quote a piece of the header: show it safely. */
    quote(error->text, token, sizeof token);
    token[strlen(token) - 1] = '\0';
    if (json_error_code(error) == json_error_duplicate_key)
        return tio__error(TR_ERR_FORMAT,
                          "duplicate key in header at line %d, column %d: %s", error->line,
                          error->column, token + 1);
    return tio__error(TR_ERR_FORMAT, "invalid JSON in header at line %d, column %d: %s",
                      error->line, error->column, token + 1);
}

tr_status tio__safetensors_parse(const uint8_t *buf, uint64_t len, uint64_t stream_size,
                                 struct tio__safetensors *out)
{
    struct st_item *items = NULL;
    json_t *root = NULL, *value;
    json_error_t error;
    const char *key;
    uint64_t size, n;
    size_t bad, count = 0, k = 0;
    tr_status status;

    if (out == NULL)
        return tio__error(TR_ERR_INVALID, "safetensors parse: no result given");
    memset(out, 0, sizeof *out);
    status = tio__safetensors_header_size(buf, len, stream_size, &size);
    if (status != TR_OK)
        return status;
    if (len < size)
        return tio__error(TR_ERR_INVALID,
                          "safetensors parse: %" PRIu64 " bytes given, the header has %" PRIu64,
                          len, size);
    n = size - 8;
    if (!utf8_valid(buf + 8, (size_t)n, &bad))
        return tio__error(TR_ERR_FORMAT,
                          "header is not valid UTF-8 (byte %zu of the JSON text)", bad);

    root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
                      &error);
    if (root == NULL)
        return json_failure(&error);
    if (!json_is_object(root)) {
        status = tio__error(TR_ERR_FORMAT, "header is %s, not a JSON object",
                            json_type_name(root));
        goto done;
    }

    count = json_object_size(root);
    if (json_object_get(root, ST_METADATA_KEY) != NULL)
        count--;
    if (count > 0) {
        items = calloc(count, sizeof *items);
        if (items == NULL) {
            status = tio__error(TR_ERR_OOM, "out of memory reading a safetensors header");
            goto done;
        }
    }
    json_object_foreach(root, key, value) {
        if (strcmp(key, ST_METADATA_KEY) == 0) {
            status = parse_metadata(value, out);
        } else {
            items[k].json_index = k;
            status = parse_item(key, value, &items[k]);
            k++;
        }
        if (status != TR_OK)
            goto done;
    }

    if (count > 1)
        qsort(items, count, sizeof *items, item_offset_cmp);
    status = check_layout(items, count,
                          stream_size == TIO_SIZE_UNKNOWN ? TIO_SIZE_UNKNOWN : stream_size - size);
    if (status != TR_OK)
        goto done;

    if (count > 0) {
        out->entries = calloc(count, sizeof *out->entries);
        if (out->entries == NULL) {
            status = tio__error(TR_ERR_OOM, "out of memory reading a safetensors header");
            goto done;
        }
    }
    for (k = 0; k < count; k++) {
        out->count = k + 1;
        status = fill_entry(&items[k], size, &out->entries[k]);
        if (status != TR_OK)
            goto done;
    }
    /* checked: the offsets are contiguous from 0, so the last ends them all */
    out->data_end = size + (count > 0 ? items[count - 1].end : 0);

done:
    free(items);
    json_decref(root);
    if (status != TR_OK)
        tio__safetensors_free(out);
    return status;
}

void tio__safetensors_free(struct tio__safetensors *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->count; i++)
        tio__entry_clear(&st->entries[i]);
    free(st->entries);
    for (size_t i = 0; i < st->metadata_count; i++) {
        free(st->metadata_keys[i]);
        free(st->metadata_values[i]);
    }
    free(st->metadata_keys);
    free(st->metadata_values);
    memset(st, 0, sizeof *st);
}

/* ------------------------------------------------------------ writing */

/* A growing byte buffer; a failed allocation sticks. */
struct st_buf {
    char *data;
    size_t len, cap;
    bool failed;
};

static void buf_add(struct st_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap > 0 ? b->cap : 256;
        char *p;

        while (n > cap - b->len) {
            if (__builtin_mul_overflow(cap, (size_t)2, &cap)) {
                b->failed = true;
                return;
            }
        }
        p = realloc(b->data, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

static void buf_text(struct st_buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void buf_u64(struct st_buf *b, uint64_t v)
{
    char digits[24];
    size_t i = sizeof digits;

    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    buf_add(b, digits + i, sizeof digits - i);
}

/* A JSON string as serde_json writes it: " and \ escaped, \b \t \n \f \r
 * short, other control characters \u00xx in lower case, the rest (DEL and
 * non-ASCII included) as is. */
static void buf_json_string(struct st_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s;

    buf_add(b, "\"", 1);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t esc_len = 2;

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\t': esc[1] = 't'; break;
        case '\n': esc[1] = 'n'; break;
        case '\f': esc[1] = 'f'; break;
        case '\r': esc[1] = 'r'; break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            esc_len = 6;
            break;
        }
        buf_add(b, run, (size_t)(s - run));
        buf_add(b, esc, esc_len);
        run = s + 1;
    }
    buf_add(b, run, (size_t)(s - run));
    buf_add(b, "\"", 1);
}

/* One tensor in the writer's order. */
struct st_out {
    const char *name;
    size_t rank;        /* index in st_dtypes */
    size_t index;       /* into the arguments */
};

static int out_order_cmp(const void *a, const void *b)
{
    const struct st_out *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank > y->rank ? -1 : 1;   /* larger alignment first */
    return strcmp(x->name, y->name);         /* bytewise, as Rust's String */
}

static int string_ptr_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* TR_ERR_INVALID when two of the n strings are equal; NULL strings are
 * the caller's to reject first. */
static tr_status check_unique(const char *const *strings, size_t n, const char *what)
{
    const char **sorted;
    char q[ST_QUOTE_MAX];
    tr_status status = TR_OK;

    if (n < 2)
        return TR_OK;
    sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL)
        return tio__error(TR_ERR_OOM, "out of memory writing a safetensors header");
    memcpy(sorted, strings, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, string_ptr_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            status = tio__error(TR_ERR_INVALID, "%s %s appears more than once", what,
                                quote(sorted[i], q, sizeof q));
            break;
        }
    }
    free(sorted);
    return status;
}

static size_t dtype_rank(enum tr_dtype dtype)
{
    for (size_t i = 0; i < ST_DTYPE_COUNT; i++) {
        if (st_dtypes[i].dtype == dtype)
            return i;
    }
    return ST_DTYPE_COUNT;
}

static tr_status check_text(const char *s, const char *what)
{
    if (s == NULL)
        return tio__error(TR_ERR_INVALID, "%s is missing (NULL)", what);
    if (!utf8_valid((const uint8_t *)s, strlen(s), NULL))
        return tio__error(TR_ERR_INVALID, "%s is not valid UTF-8", what);
    return TR_OK;
}

tr_status tio__safetensors_header(size_t n, const char *const *names,
                                  const enum tr_dtype *dtypes, const int *ndims,
                                  const int64_t (*shapes)[TR_MAX_DIMS],
                                  const struct tio_metadata *metadata, char **out,
                                  size_t *len, size_t *order)
{
    struct st_buf b = {0};
    struct st_out *sorted = NULL;
    char q[ST_QUOTE_MAX];
    uint64_t offset = 0, json_len;
    tr_status status = TR_OK;

    if (out == NULL || len == NULL)
        return tio__error(TR_ERR_INVALID, "safetensors header: no result given");
    *out = NULL;
    *len = 0;
    if (n > 0 && (names == NULL || dtypes == NULL || ndims == NULL || shapes == NULL))
        return tio__error(TR_ERR_INVALID, "safetensors header: tensors without descriptions");
    if (metadata != NULL && metadata->count > 0 &&
        (metadata->keys == NULL || metadata->values == NULL))
        return tio__error(TR_ERR_INVALID, "safetensors header: metadata without keys or values");

    for (size_t i = 0; i < n; i++) {
        status = check_text(names[i], "a tensor name");
        if (status != TR_OK)
            return status;
        if (strcmp(names[i], ST_METADATA_KEY) == 0)
            return tio__error(TR_ERR_INVALID,
                              "'__metadata__' cannot name a tensor: safetensors reserves it");
        if ((unsigned)dtypes[i] >= TR_DTYPE_COUNT)
            return tio__error(TR_ERR_INVALID, "tensor %s: not a dtype (%d)",
                              quote(names[i], q, sizeof q), (int)dtypes[i]);
        if (ndims[i] < 0 || ndims[i] > TR_MAX_DIMS)
            return tio__error(TR_ERR_INVALID, "tensor %s: %d dimensions (0 to %d allowed)",
                              quote(names[i], q, sizeof q), ndims[i], TR_MAX_DIMS);
        for (int d = 0; d < ndims[i]; d++) {
            if (shapes[i][d] < 0)
                return tio__error(TR_ERR_INVALID, "tensor %s: dimension %d is negative",
                                  quote(names[i], q, sizeof q), d);
        }
    }
    status = check_unique(names, n, "tensor name");
    if (status != TR_OK)
        return status;
    if (metadata != NULL) {
        for (size_t i = 0; i < metadata->count; i++) {
            status = check_text(metadata->keys[i], "a metadata key");
            if (status == TR_OK)
                status = check_text(metadata->values[i], "a metadata value");
            if (status != TR_OK)
                return status;
        }
        status = check_unique(metadata->keys, metadata->count, "metadata key");
        if (status != TR_OK)
            return status;
    }

    if (n > 0) {
        sorted = malloc(n * sizeof *sorted);
        if (sorted == NULL)
            return tio__error(TR_ERR_OOM, "out of memory writing a safetensors header");
    }
    for (size_t i = 0; i < n; i++) {
        sorted[i].name = names[i];
        sorted[i].rank = dtype_rank(dtypes[i]);
        sorted[i].index = i;
    }
    if (n > 1)
        qsort(sorted, n, sizeof *sorted, out_order_cmp);

    buf_add(&b, "\0\0\0\0\0\0\0\0{", 9);
    if (metadata != NULL) {
        buf_text(&b, "\"" ST_METADATA_KEY "\":{");
        for (size_t i = 0; i < metadata->count; i++) {
            if (i > 0)
                buf_add(&b, ",", 1);
            buf_json_string(&b, metadata->keys[i]);
            buf_add(&b, ":", 1);
            buf_json_string(&b, metadata->values[i]);
        }
        buf_add(&b, "}", 1);
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = sorted[k].index;
        uint64_t numel, nbits;

        /* As the reader will count it, or the file would not read back. */
        if (shape_bits(shapes[i], ndims[i], st_dtypes[sorted[k].rank].bits, &numel,
                       &nbits) != 1) {
            status = tio__error(TR_ERR_INVALID, "tensor %s: its size overflows 64 bits",
                                quote(names[i], q, sizeof q));
            goto done;
        }
        if (k > 0 || metadata != NULL)
            buf_add(&b, ",", 1);
        buf_json_string(&b, names[i]);
        buf_text(&b, ":{\"dtype\":\"");
        buf_text(&b, st_dtypes[sorted[k].rank].name);
        buf_text(&b, "\",\"shape\":[");
        for (int d = 0; d < ndims[i]; d++) {
            if (d > 0)
                buf_add(&b, ",", 1);
            buf_u64(&b, (uint64_t)shapes[i][d]);
        }
        buf_text(&b, "],\"data_offsets\":[");
        buf_u64(&b, offset);
        buf_add(&b, ",", 1);
        if (__builtin_add_overflow(offset, nbits / 8, &offset)) {
            status = tio__error(TR_ERR_INVALID,
                                "the tensors' total size overflows 64 bits at tensor %s",
                                quote(names[i], q, sizeof q));
            goto done;
        }
        buf_u64(&b, offset);
        buf_text(&b, "]}");
        if (order != NULL)
            order[k] = i;
    }
    buf_add(&b, "}", 1);
    while (!b.failed && (b.len - 8) % 8 != 0)
        buf_add(&b, " ", 1);
    if (b.failed) {
        status = tio__error(TR_ERR_OOM, "out of memory writing a safetensors header");
        goto done;
    }
    json_len = b.len - 8;
    if (json_len > TIO_SAFETENSORS_HEADER_MAX) {
        status = tio__error(TR_ERR_INVALID,
                            "the safetensors header would be %" PRIu64
                            " bytes, over the format's limit of %" PRIu64,
                            json_len, TIO_SAFETENSORS_HEADER_MAX);
        goto done;
    }
    for (int i = 0; i < 8; i++)
        b.data[i] = (char)(uint8_t)(json_len >> (8 * i));
    *out = b.data;
    *len = b.len;
    b.data = NULL;

done:
    free(b.data);
    free(sorted);
    return status;
}
