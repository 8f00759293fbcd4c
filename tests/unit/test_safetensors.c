/*
 * test_safetensors.c - the .safetensors header: the reference files,
 * every rule the reference implementation rejects by, the writer's bytes
 * against the reference writer's, round trips, and the malformed-file
 * corpus of tests/data/make-bad-safetensors.py.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_impl.h"
#include "tap.h"

/* ------------------------------------------------------------ helpers */

/* A path under the source tree: $TR_SRCDIR/rel, else rel from here. */
static void src_path(char *buf, size_t size, const char *rel)
{
    const char *dir = getenv("TR_SRCDIR");

    if (dir == NULL || dir[0] == '\0')
        dir = ".";
    snprintf(buf, size, "%s/%s", dir, rel);
}

/* The whole file, malloc'ed; NULL when it cannot be read. */
static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t cap = 0, n = 0;

    if (f == NULL)
        return NULL;
    for (;;) {
        size_t got;

        if (n == cap) {
            uint8_t *p;

            cap = cap > 0 ? cap * 2 : 4096;
            p = realloc(data, cap);
            if (p == NULL) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = p;
        }
        got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *len = n;
    return data;
}

/* A file in memory: the 8-byte length of json, json, then data_len bytes
 * of data (0, 1, 2, ...). */
static uint8_t *make_file(const char *json, size_t data_len, size_t *len)
{
    size_t n = strlen(json);
    uint8_t *buf = malloc(8 + n + data_len + 1);

    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, json, n);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + n + i] = (uint8_t)i;
    *len = 8 + n + data_len;
    return buf;
}

/* Parses the file built from json and data_len; the status. */
static tr_status parse_json(const char *json, size_t data_len, struct tio__safetensors *st)
{
    size_t len;
    uint8_t *buf = make_file(json, data_len, &len);
    tr_status status;

    tr_clear_error();
    status = tio__safetensors_parse(buf, len, len, st);
    free(buf);
    return status;
}

/* The header json with data_len bytes of data must be rejected with
 * TR_ERR_FORMAT and a message containing want. */
static void reject(const char *label, const char *json, size_t data_len, const char *want)
{
    struct tio__safetensors st;
    tr_status status = parse_json(json, data_len, &st);

    if (!ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), want) != NULL,
            "rejects %s", label))
        diag("status %s, message \"%s\", wanted \"%s\"", tr_status_name(status),
             tr_last_error(), want);
    ok(st.count == 0 && st.entries == NULL && st.metadata_keys == NULL && !st.has_metadata,
       "%s: nothing left in the result", label);
    tio__safetensors_free(&st);
}

/* The header json with data_len bytes of data must parse. */
static bool accept(const char *label, const char *json, size_t data_len,
                   struct tio__safetensors *st)
{
    tr_status status = parse_json(json, data_len, st);

    if (!ok(status == TR_OK, "accepts %s", label)) {
        diag("status %s, message \"%s\"", tr_status_name(status), tr_last_error());
        return false;
    }
    return true;
}

static bool bytes_equal(const char *got, size_t got_len, const char *want, size_t want_len)
{
    if (got_len == want_len && memcmp(got, want, want_len) == 0)
        return true;
    diag("got %zu bytes, want %zu", got_len, want_len);
    for (size_t i = 0; i < got_len && i < want_len; i++) {
        if (got[i] != want[i]) {
            diag("first difference at byte %zu: got 0x%02x, want 0x%02x", i,
                 (unsigned char)got[i], (unsigned char)want[i]);
            break;
        }
    }
    return false;
}

/* ------------------------------------------------------------ reference files */

struct ref_tensor {
    const char *name;
    const char *dtype_text;
    enum tr_dtype dtype;
    uint64_t begin, end; /* data_offsets in overall.safetensors */
};

/* overall.safetensors, in offset order; the single files hold one each. */
static const struct ref_tensor ref_tensors[] = {
    {"B", "U8", TR_DTYPE_U8, 0, 6},      {"H", "U16", TR_DTYPE_U16, 6, 18},
    {"I", "U32", TR_DTYPE_U32, 18, 42},  {"b", "I8", TR_DTYPE_I8, 42, 48},
    {"d", "F64", TR_DTYPE_F64, 48, 96},  {"e", "F16", TR_DTYPE_F16, 96, 108},
    {"f", "F32", TR_DTYPE_F32, 108, 132}, {"h", "I16", TR_DTYPE_I16, 132, 144},
    {"i", "I32", TR_DTYPE_I32, 144, 168},
};

/* Element k of the tensor's data as a double (the values are -3 .. 2,
 * wrapped for unsigned types). */
static double ref_value(const uint8_t *p, enum tr_dtype dtype, int k)
{
    size_t size = tr_dtype_size(dtype);
    uint8_t b[8];

    memcpy(b, p + (size_t)k * size, size);
    switch (dtype) {
    case TR_DTYPE_U8: return b[0];
    case TR_DTYPE_I8: return (int8_t)b[0];
    case TR_DTYPE_U16: { uint16_t v; memcpy(&v, b, 2); return v; }
    case TR_DTYPE_I16: { int16_t v; memcpy(&v, b, 2); return v; }
    case TR_DTYPE_U32: { uint32_t v; memcpy(&v, b, 4); return v; }
    case TR_DTYPE_I32: { int32_t v; memcpy(&v, b, 4); return v; }
    case TR_DTYPE_F16: { uint16_t v; memcpy(&v, b, 2); return tr_f16_to_f32(v); }
    case TR_DTYPE_F32: { float v; memcpy(&v, b, 4); return v; }
    case TR_DTYPE_F64: { double v; memcpy(&v, b, 8); return v; }
    default: return -1e300;
    }
}

static double ref_expected(enum tr_dtype dtype, int k)
{
    double v = k - 3;

    if (v >= 0)
        return v;
    switch (dtype) {
    case TR_DTYPE_U8: return v + 256.0;
    case TR_DTYPE_U16: return v + 65536.0;
    case TR_DTYPE_U32: return v + 4294967296.0;
    default: return v;
    }
}

/* Checks one entry of a reference file whose JSON is header_len bytes. */
static void check_ref_entry(const char *file, const uint8_t *buf, uint64_t header_len,
                            const struct tio_entry *e, const struct ref_tensor *want,
                            uint64_t begin)
{
    uint64_t nbytes = want->end - want->begin;
    bool values_ok = true;

    ok(e->name != NULL && strcmp(e->name, want->name) == 0, "%s: tensor %s is named %s",
       file, want->name, e->name != NULL ? e->name : "(null)");
    ok(strcmp(e->dtype_text, want->dtype_text) == 0, "%s: %s has dtype text %s", file,
       want->name, want->dtype_text);
    ok(e->supported, "%s: %s is supported", file, want->name);
    is_int(e->dtype, want->dtype, "%s: %s has engine dtype %s", file, want->name,
           tr_dtype_name(want->dtype));
    is_int(e->ndim, 1, "%s: %s has one dimension", file, want->name);
    is_int(e->shape[0], 6, "%s: %s has shape [6]", file, want->name);
    is_int(e->strides[0], 1, "%s: %s has strides [1]", file, want->name);
    is_int(e->offset, 8 + header_len + begin, "%s: %s starts at byte 8 + %llu + %llu", file,
           want->name, (unsigned long long)header_len, (unsigned long long)begin);
    is_int(e->nbytes, nbytes, "%s: %s holds %llu bytes", file, want->name,
           (unsigned long long)nbytes);
    ok(!e->byteswap, "%s: %s is little-endian", file, want->name);
    for (int k = 0; k < 6; k++) {
        double got = ref_value(buf + e->offset, want->dtype, k);

        if (got != ref_expected(want->dtype, k)) {
            diag("element %d: got %g, want %g", k, got, ref_expected(want->dtype, k));
            values_ok = false;
        }
    }
    ok(values_ok, "%s: %s holds -3 .. 2 at its offset", file, want->name);
}

static void check_ref_metadata(const char *file, const struct tio__safetensors *st)
{
    ok(st->has_metadata, "%s: has metadata", file);
    is_int(st->metadata_count, 1, "%s: one metadata entry", file);
    ok(st->metadata_count == 1 && strcmp(st->metadata_keys[0], "test") == 0 &&
           strcmp(st->metadata_values[0], "a") == 0,
       "%s: metadata is {\"test\": \"a\"}", file);
}

static void test_reference_files(void)
{
    char path[4096], rel[256], file[32];
    struct tio__safetensors st;
    uint64_t size;

    for (size_t i = 0; i <= sizeof ref_tensors / sizeof ref_tensors[0]; i++) {
        bool overall = i == sizeof ref_tensors / sizeof ref_tensors[0];
        size_t len = 0;
        uint8_t *buf;
        tr_status status;

        snprintf(file, sizeof file, "%s.safetensors", overall ? "overall" : ref_tensors[i].name);
        snprintf(rel, sizeof rel, "tests/data/safetensors-reference/%s", file);
        src_path(path, sizeof path, rel);
        buf = read_all(path, &len);
        if (!ok(buf != NULL, "%s: read", file)) {
            diag("cannot read %s: %s", path, strerror(errno));
            continue;
        }
        ok(tio__safetensors_magic(buf, len, len), "%s: magic recognised", file);
        status = tio__safetensors_header_size(buf, len, len, &size);
        is_int(status, TR_OK, "%s: header size read", file);
        status = tio__safetensors_parse(buf, len, len, &st);
        if (!ok(status == TR_OK, "%s: parses", file)) {
            diag("%s", tr_last_error());
            free(buf);
            continue;
        }
        if (overall) {
            is_int(size, 8 + 526, "%s: header is 8 + 526 bytes", file);
            is_int(st.count, 9, "%s: nine tensors", file);
            for (size_t k = 0; k < st.count && k < 9; k++)
                check_ref_entry(file, buf, 526, &st.entries[k], &ref_tensors[k],
                                ref_tensors[k].begin);
        } else {
            uint64_t header_len = ref_tensors[i].dtype_text[1] == '8' ? 81 : 83;

            is_int(size, 8 + header_len, "%s: header is 8 + %llu bytes", file,
                   (unsigned long long)header_len);
            is_int(st.count, 1, "%s: one tensor", file);
            if (st.count == 1)
                check_ref_entry(file, buf, header_len, &st.entries[0], &ref_tensors[i], 0);
        }
        check_ref_metadata(file, &st);
        tio__safetensors_free(&st);
        ok(st.count == 0 && st.entries == NULL, "%s: free clears the result", file);
        free(buf);
    }
}

/* ------------------------------------------------------------ preamble */

static void test_preamble(void)
{
    uint8_t buf[64] = {0};
    uint64_t size = 0;
    struct tio__safetensors st;
    tr_status status;

    /* Under 8 bytes. */
    for (uint64_t n = 0; n < 8; n++) {
        tr_clear_error();
        status = tio__safetensors_header_size(buf, n, n, &size);
        ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), "too short") != NULL,
           "header size of a %llu-byte file: too short", (unsigned long long)n);
        status = tio__safetensors_parse(buf, n, n, &st);
        ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), "too short") != NULL,
           "parse of a %llu-byte file: too short", (unsigned long long)n);
        ok(!tio__safetensors_magic(buf, n, n), "no magic in a %llu-byte file",
           (unsigned long long)n);
    }

    /* Header length over the limit, with the file long enough or not. */
    {
        uint64_t n = TIO_SAFETENSORS_HEADER_MAX + 1;

        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)(n >> (8 * i));
        buf[8] = '{';
        status = tio__safetensors_header_size(buf, 9, UINT64_C(1) << 40, &size);
        ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), "over the limit") != NULL,
           "header length 100000001: over the limit (%s)", tr_last_error());
        ok(!tio__safetensors_magic(buf, 9, UINT64_C(1) << 40), "no magic past the limit");
        n = TIO_SAFETENSORS_HEADER_MAX;
        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)(n >> (8 * i));
        status = tio__safetensors_header_size(buf, 9, UINT64_C(1) << 40, &size);
        ok(status == TR_OK && size == 8 + TIO_SAFETENSORS_HEADER_MAX,
           "header length 100000000: at the limit, accepted");
        memset(buf, 0xff, 8);
        status = tio__safetensors_header_size(buf, 9, UINT64_MAX, &size);
        ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), "over the limit") != NULL,
           "header length 2^64-1: over the limit");
    }

    /* Header length past the end of the file. */
    memset(buf, 0, sizeof buf);
    buf[0] = 60;
    memcpy(buf + 8, "{}", 2);
    status = tio__safetensors_header_size(buf, 20, 20, &size);
    ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), "past the end") != NULL,
       "header length 60 in a 20-byte file: past the end (%s)", tr_last_error());
    status = tio__safetensors_parse(buf, 20, 20, &st);
    ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), "past the end") != NULL,
       "parse: past the end");
    ok(!tio__safetensors_magic(buf, 20, 20), "no magic when the length runs past the end");
    buf[0] = 2;
    ok(tio__safetensors_magic(buf, 20, 10), "magic: 8-byte length, then '{'");
    ok(!tio__safetensors_magic(buf, 8, 10), "no magic from 8 bytes alone");
    buf[8] = ' ';
    ok(!tio__safetensors_magic(buf, 20, 10), "no magic without '{'");

    /* Length 8 exactly: header "{}" + 6 spaces, no data. */
    {
        static const uint8_t file[] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}',
                                       ' ', ' ', ' ', ' ', ' ', ' '};

        status = tio__safetensors_header_size(file, sizeof file, sizeof file, &size);
        ok(status == TR_OK && size == 16, "empty padded header: size 16");
        status = tio__safetensors_parse(file, sizeof file, sizeof file, &st);
        ok(status == TR_OK && st.count == 0 && !st.has_metadata,
           "empty padded header: no tensors, no metadata");
        tio__safetensors_free(&st);
        status = tio__safetensors_parse(file, 12, sizeof file, &st);
        is_int(status, TR_ERR_INVALID, "parse given fewer bytes than the header: invalid");
    }
}

/* ------------------------------------------------------------ rules */

static void test_text_rules(void)
{
    struct tio__safetensors st;
    static const char *const bad_utf8[] = {
        "{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
        "{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",   /* overlong */
        "{\"\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", /* surrogate */
        "{\"\xf4\x90\x80\x80\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}  \xe2\x82",
    };

    for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
        char label[64];

        snprintf(label, sizeof label, "invalid UTF-8 (case %zu)", i + 1);
        reject(label, bad_utf8[i], 1, "not valid UTF-8");
    }
    reject("an empty header", "", 0, "invalid JSON");
    reject("truncated JSON", "{\"a\":", 0, "invalid JSON");
    reject("trailing garbage after the object", "{} x", 0, "invalid JSON");
    reject("a second object after the first", "{}{}", 0, "invalid JSON");
    reject("a number as the header", "3", 0, "invalid JSON");
    reject("an array as the header", "[]", 0, "not a JSON object");
    reject("a JSON string with a raw control character", "{\"a\x01\":1}", 0, "invalid JSON");
    reject("an integer too big for 64 bits",
           "{\"t\":{\"dtype\":\"I32\",\"shape\":[2,18446744073709551614],"
           "\"data_offsets\":[0,16]}}",
           16, "invalid JSON");
    reject("duplicate tensor names",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
           "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
           2, "duplicate key");
    reject("duplicate fields in a tensor",
           "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
           "duplicate key");

    if (accept("trailing JSON whitespace (\\r \\t \\n)", "{}\r \t\n", 0, &st))
        is_int(st.count, 0, "trailing whitespace: no tensors");
    tio__safetensors_free(&st);
    if (accept("leading whitespace, as the reference does", "  {}", 0, &st))
        is_int(st.count, 0, "leading whitespace: no tensors");
    tio__safetensors_free(&st);
    if (accept("non-ASCII names", "{\"\xc3\xa9t\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],"
               "\"data_offsets\":[0,1]}}", 1, &st))
        ok(strcmp(st.entries[0].name, "\xc3\xa9t\xc3\xa9") == 0, "non-ASCII name kept");
    tio__safetensors_free(&st);
    if (accept("an empty name", "{\"\":{\"dtype\":\"U8\",\"shape\":[1],"
               "\"data_offsets\":[0,1]}}", 1, &st))
        ok(st.count == 1 && st.entries[0].name[0] == '\0', "empty name kept");
    tio__safetensors_free(&st);
    reject("a NUL in a name (\\u0000)",
           "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
           "invalid JSON");
}

static void test_metadata_rules(void)
{
    struct tio__safetensors st;

    if (accept("no __metadata__", "{}", 0, &st))
        ok(!st.has_metadata && st.metadata_count == 0, "no __metadata__: has_metadata false");
    tio__safetensors_free(&st);
    if (accept("__metadata__ null, as serde reads None", "{\"__metadata__\":null}", 0, &st))
        ok(!st.has_metadata, "__metadata__ null: has_metadata false");
    tio__safetensors_free(&st);
    if (accept("empty __metadata__", "{\"__metadata__\":{}}", 0, &st))
        ok(st.has_metadata && st.metadata_count == 0, "empty __metadata__: present, no keys");
    tio__safetensors_free(&st);
    if (accept("__metadata__ after the tensors, keys in JSON order",
               "{\"t\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
               "\"__metadata__\":{\"z\":\"1\",\"a\":\"\\u00e9\\n\"}}",
               2, &st)) {
        ok(st.count == 1 && strcmp(st.entries[0].name, "t") == 0, "the tensor is t");
        ok(st.has_metadata && st.metadata_count == 2 && strcmp(st.metadata_keys[0], "z") == 0 &&
               strcmp(st.metadata_values[0], "1") == 0 &&
               strcmp(st.metadata_keys[1], "a") == 0 &&
               strcmp(st.metadata_values[1], "\xc3\xa9\n") == 0,
           "metadata z=1, a=\"\\u00e9\\n\" (decoded) in JSON order");
    }
    tio__safetensors_free(&st);
    reject("a metadata value that is a number", "{\"__metadata__\":{\"a\":1}}", 0,
           "not a string");
    reject("a metadata value that is an object", "{\"__metadata__\":{\"a\":{}}}", 0,
           "not a string");
    reject("a metadata value that is null", "{\"__metadata__\":{\"a\":null}}", 0,
           "not a string");
    reject("__metadata__ that is an array", "{\"__metadata__\":[\"a\"]}", 0,
           "not an object of strings");
    reject("__metadata__ that is a string", "{\"__metadata__\":\"a\"}", 0,
           "not an object of strings");
    reject("a metadata value with a NUL", "{\"__metadata__\":{\"a\":\"x\\u0000y\"}}", 0,
           "NUL");
    reject("duplicate metadata keys", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0,
           "duplicate key");
}

static void test_field_rules(void)
{
    struct tio__safetensors st;

    reject("a tensor without dtype", "{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
           "tensor 't' has no \"dtype\"");
    reject("a tensor without shape", "{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1,
           "tensor 't' has no \"shape\"");
    reject("a tensor without data_offsets", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1,
           "tensor 't' has no \"data_offsets\"");
    reject("a tensor that is a string", "{\"t\":\"U8\"}", 0, "tensor 't' is a string");
    reject("a tensor that is a number", "{\"t\":1}", 0, "tensor 't' is an integer");
    reject("a tensor that is an array of two", "{\"t\":[\"U8\",[1]]}", 1,
           "tensor 't' is an array");
    reject("a dtype that is a number", "{\"t\":{\"dtype\":1,\"shape\":[1],"
           "\"data_offsets\":[0,1]}}", 1, "tensor 't': dtype is an integer, not a string");
    reject("unknown dtype F33", "{\"t\":{\"dtype\":\"F33\",\"shape\":[1],"
           "\"data_offsets\":[0,4]}}", 4, "tensor 't' has unknown dtype 'F33'");
    reject("lower-case dtype f32", "{\"t\":{\"dtype\":\"f32\",\"shape\":[1],"
           "\"data_offsets\":[0,4]}}", 4, "unknown dtype 'f32'");
    reject("dtype with a NUL", "{\"t\":{\"dtype\":\"F32\\u0000\",\"shape\":[1],"
           "\"data_offsets\":[0,4]}}", 4, "unknown dtype");
    reject("a shape that is a number", "{\"t\":{\"dtype\":\"U8\",\"shape\":1,"
           "\"data_offsets\":[0,1]}}", 1, "shape is an integer, not an array");
    reject("a negative dimension", "{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],"
           "\"data_offsets\":[0,1]}}", 1, "shape[0] is -1");
    reject("a fractional dimension", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1.0],"
           "\"data_offsets\":[0,1]}}", 1, "shape[0] is a fractional number");
    reject("a dimension that is a string", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1,\"2\"],"
           "\"data_offsets\":[0,2]}}", 2, "shape[1] is a string");
    reject("nine dimensions", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
           "\"data_offsets\":[0,1]}}", 1, "has 9 dimensions; this program handles at most 8");
    reject("data_offsets of three", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
           "\"data_offsets\":[0,1,1]}}", 1, "data_offsets is an array of another length");
    reject("data_offsets of one", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
           "\"data_offsets\":[1]}}", 1, "not an array of two integers");
    reject("data_offsets as an object", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
           "\"data_offsets\":{\"0\":0}}}", 1, "data_offsets is an object");
    reject("a negative data offset", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
           "\"data_offsets\":[-1,0]}}", 1, "data_offsets[0] is -1");
    reject("a fractional data offset", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
           "\"data_offsets\":[0,1.5]}}", 1, "data_offsets[1] is a fractional number");

    if (accept("eight dimensions", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1,2,1,1,1,1,1,3],"
               "\"data_offsets\":[0,6]}}", 6, &st)) {
        static const int64_t want[8] = {6, 3, 3, 3, 3, 3, 3, 1};
        bool same = st.entries[0].ndim == 8;

        for (int d = 0; d < 8 && same; d++)
            same = st.entries[0].strides[d] == want[d];
        ok(same, "eight dimensions: C-order strides 6,3,3,3,3,3,3,1");
    }
    tio__safetensors_free(&st);
    if (accept("unknown keys in a tensor, which the reference ignores",
               "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[{}]}}", 1,
               &st))
        ok(st.count == 1, "unknown keys: one tensor");
    tio__safetensors_free(&st);
    if (accept("a tensor as [dtype, shape, data_offsets], which serde also reads",
               "{\"t\":[\"I16\",[2,2],[0,8]]}", 8, &st))
        ok(st.count == 1 && st.entries[0].dtype == TR_DTYPE_I16 && st.entries[0].ndim == 2 &&
               st.entries[0].nbytes == 8,
           "array form: I16 [2,2], 8 bytes");
    tio__safetensors_free(&st);
    if (accept("rank 0 (shape [])", "{\"t\":{\"dtype\":\"I32\",\"shape\":[],"
               "\"data_offsets\":[0,4]}}", 4, &st))
        ok(st.entries[0].ndim == 0 && st.entries[0].nbytes == 4, "rank 0: one I32");
    tio__safetensors_free(&st);
    if (accept("a zero-size tensor", "{\"t\":{\"dtype\":\"I32\",\"shape\":[2,0],"
               "\"data_offsets\":[0, 0]}}", 0, &st))
        ok(st.entries[0].ndim == 2 && st.entries[0].shape[1] == 0 && st.entries[0].nbytes == 0 &&
               st.entries[0].offset == 8 + strlen("{\"t\":{\"dtype\":\"I32\",\"shape\":[2,0],"
                                                  "\"data_offsets\":[0, 0]}}"),
           "zero-size: shape [2,0], 0 bytes at the end of the header");
    tio__safetensors_free(&st);
    if (accept("a zero-size tensor with huge dimensions, as the reference does",
               "{\"t\":{\"dtype\":\"U8\",\"shape\":[0,4611686018427387904,"
               "4611686018427387904],\"data_offsets\":[0,0]}}",
               0, &st))
        ok(st.entries[0].strides[2] == 1 && st.entries[0].strides[1] == INT64_C(1) << 62 &&
               st.entries[0].strides[0] == 0,
           "huge zero-size tensor: strides that do not overflow (0, 2^62, 1)");
    tio__safetensors_free(&st);
}

static void test_dtype_rules(void)
{
    struct tio__safetensors st;
    static const struct {
        const char *text;
        enum tr_dtype dtype;
        size_t bytes_for_4;  /* bytes of 4 elements */
    } all[] = {
        {"BOOL", TR_DTYPE_BOOL, 4},     {"F4", TR_DTYPE_COUNT, 2},
        {"F6_E2M3", TR_DTYPE_COUNT, 3}, {"F6_E3M2", TR_DTYPE_COUNT, 3},
        {"U8", TR_DTYPE_U8, 4},         {"I8", TR_DTYPE_I8, 4},
        {"F8_E5M2", TR_DTYPE_COUNT, 4}, {"F8_E4M3", TR_DTYPE_COUNT, 4},
        {"F8_E8M0", TR_DTYPE_COUNT, 4}, {"F8_E4M3FNUZ", TR_DTYPE_COUNT, 4},
        {"F8_E5M2FNUZ", TR_DTYPE_COUNT, 4}, {"I16", TR_DTYPE_I16, 8},
        {"U16", TR_DTYPE_U16, 8},       {"F16", TR_DTYPE_F16, 8},
        {"BF16", TR_DTYPE_BF16, 8},     {"I32", TR_DTYPE_I32, 16},
        {"U32", TR_DTYPE_U32, 16},      {"F32", TR_DTYPE_F32, 16},
        {"C64", TR_DTYPE_COUNT, 32},    {"F64", TR_DTYPE_F64, 32},
        {"I64", TR_DTYPE_I64, 32},      {"U64", TR_DTYPE_U64, 32},
    };

    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char json[128], label[64];
        bool supported = all[i].dtype != TR_DTYPE_COUNT;

        snprintf(json, sizeof json, "{\"t\":{\"dtype\":\"%s\",\"shape\":[4],"
                 "\"data_offsets\":[0,%zu]}}", all[i].text, all[i].bytes_for_4);
        snprintf(label, sizeof label, "four %s values in %zu bytes", all[i].text,
                 all[i].bytes_for_4);
        if (accept(label, json, all[i].bytes_for_4, &st))
            ok(strcmp(st.entries[0].dtype_text, all[i].text) == 0 &&
                   st.entries[0].supported == supported &&
                   (!supported || st.entries[0].dtype == all[i].dtype) &&
                   st.entries[0].nbytes == all[i].bytes_for_4,
               "%s: dtype text kept, supported %s", all[i].text, supported ? "true" : "false");
        tio__safetensors_free(&st);
        if (supported)
            ok(strcmp(tio__safetensors_dtype_name(all[i].dtype), all[i].text) == 0,
               "dtype name of %s is %s", tr_dtype_name(all[i].dtype), all[i].text);
    }
    ok(tio__safetensors_dtype_name(TR_DTYPE_COUNT) == NULL, "no dtype name outside the enum");

    reject("three F4 values (12 bits)", "{\"t\":{\"dtype\":\"F4\",\"shape\":[3],"
           "\"data_offsets\":[0,1]}}", 1, "not a whole number of bytes");
    reject("one F6_E2M3 value (6 bits)", "{\"t\":{\"dtype\":\"F6_E2M3\",\"shape\":[1],"
           "\"data_offsets\":[0,1]}}", 1, "not a whole number of bytes");
    if (accept("an F8_E4M3 tensor among others",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"s\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,2],\"data_offsets\":[4,8]}}",
               8, &st))
        ok(st.count == 2 && st.entries[1].supported == false &&
               strcmp(st.entries[1].dtype_text, "F8_E4M3") == 0 &&
               st.entries[1].nbytes == 4 && st.entries[1].strides[0] == 2 &&
               st.entries[0].supported,
           "F8_E4M3 kept with supported = false, F32 beside it supported");
    tio__safetensors_free(&st);
}

static void test_offset_rules(void)
{
    struct tio__safetensors st;
    const char *const two_f32 = "\"dtype\":\"F32\",\"shape\":[2]";
    char json[512];

    if (accept("JSON order different from offset order",
               "{\"z\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[12,14]},"
               "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
               "\"m\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
               14, &st)) {
        size_t header = 8 + strlen("{\"z\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":"
                                   "[12,14]},\"a\":{\"dtype\":\"F64\",\"shape\":[1],"
                                   "\"data_offsets\":[0,8]},\"m\":{\"dtype\":\"I16\","
                                   "\"shape\":[2],\"data_offsets\":[8,12]}}");

        ok(st.count == 3 && strcmp(st.entries[0].name, "a") == 0 &&
               strcmp(st.entries[1].name, "m") == 0 && strcmp(st.entries[2].name, "z") == 0,
           "entries come in offset order: a, m, z");
        ok(st.entries[0].offset == header && st.entries[1].offset == header + 8 &&
               st.entries[2].offset == header + 12,
           "offsets from the start of the stream");
    }
    tio__safetensors_free(&st);
    if (accept("zero-size tensors sharing an offset",
               "{\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
               "\"c\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[2,2]},"
               "\"d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
               3, &st))
        ok(st.count == 4 && strcmp(st.entries[0].name, "a") == 0 &&
               strcmp(st.entries[1].name, "b") == 0 && strcmp(st.entries[2].name, "c") == 0 &&
               strcmp(st.entries[3].name, "d") == 0,
           "ties in offset keep the JSON order");
    tio__safetensors_free(&st);

    snprintf(json, sizeof json, "{\"t\":{%s,\"data_offsets\":[4,12]}}", two_f32);
    reject("a first tensor not at offset 0", json, 12, "tensor 't': data_offsets [4, 12] do "
           "not start at 0");
    snprintf(json, sizeof json, "{\"a\":{%s,\"data_offsets\":[0,8]},"
             "\"b\":{%s,\"data_offsets\":[12,20]}}", two_f32, two_f32);
    reject("a hole between tensors", json, 20, "tensor 'b': data_offsets [12, 20] leave a "
           "hole of 4 bytes after tensor 'a', which ends at 8");
    snprintf(json, sizeof json, "{\"a\":{%s,\"data_offsets\":[0,8]},"
             "\"b\":{%s,\"data_offsets\":[4,12]}}", two_f32, two_f32);
    reject("overlapping tensors", json, 12, "tensor 'b': data_offsets [4, 12] overlap "
           "tensor 'a', which ends at 8");
    snprintf(json, sizeof json, "{\"a\":{%s,\"data_offsets\":[0,8]},"
             "\"b\":{%s,\"data_offsets\":[0,8]}}", two_f32, two_f32);
    reject("two tensors at the same offsets", json, 8, "overlap");
    reject("offsets that end before they begin",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
           "\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,0]}}",
           1, "tensor 'c': data_offsets [1, 0] end before they begin");
    snprintf(json, sizeof json, "{\"t\":{%s,\"data_offsets\":[0,8]}}", two_f32);
    reject("data ending before the end of the file", json, 9, "which has 9 bytes: the last 1 "
           "are not covered");
    reject("data ending after the end of the file", json, 7, "truncated: the header says 8 "
           "bytes of data follow it, the file has 7");
    reject("an empty header with a byte of data", "{}", 1, "not covered");
    reject("the reference's polyglot case",
           "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 50,
           "not covered");
    snprintf(json, sizeof json, "{\"t\":{%s,\"data_offsets\":[0,12]}}", two_f32);
    reject("a size not matching shape x dtype", json, 12, "tensor 't': data_offsets [0, 12] "
           "hold 12 bytes, but shape [2] of F32 needs 8");
    reject("the reference's invalid-info case",
           "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0, 4]}}", 4,
           "needs 16");
    reject("a shape whose element count overflows",
           "{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
           "\"data_offsets\":[0,16]}}", 16, "element count does not fit in 64 bits");
    reject("the reference's overflow case (2 x 2^63-1 I32)",
           "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,9223372036854775807],"
           "\"data_offsets\":[0,16]}}", 16, "size in bits does not fit in 64 bits");
    reject("a zero-size shape that overflows before its 0, as the reference does",
           "{\"t\":{\"dtype\":\"U8\",\"shape\":[4611686018427387904,"
           "4611686018427387904,0],\"data_offsets\":[0,0]}}", 0,
           "element count does not fit in 64 bits");
    reject("an overflow after a valid tensor, named",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
           "\"b\\n\":{\"dtype\":\"F64\",\"shape\":[3,3074457345618258603],"
           "\"data_offsets\":[1,9]}}", 9, "tensor 'b\\x0a': shape [3,3074457345618258603]");
}

/* ------------------------------------------------------------ writer */

/* The bytes the reference writer produces, derived by hand from prepare()
 * in safetensors/src/tensor.rs and checked against Python's
 * json.dumps(..., separators=(",", ":"), ensure_ascii=False) of the same
 * dict; the first four are the reference's own test vectors. */
static void test_writer_vectors(void)
{
    char *out = NULL;
    size_t len = 0, order[16];
    tr_status status;

    /* test_empty */
    status = tio__safetensors_header(0, NULL, NULL, NULL, NULL, NULL, &out, &len, NULL);
    ok(status == TR_OK && bytes_equal(out, len, "\x08\0\0\0\0\0\0\0{}      ", 16),
       "writer: no tensors is {} padded to 8");
    free(out);
    {
        static const char *const keys[] = {"framework"}, *const values[] = {"pt"};
        struct tio_metadata md = {1, keys, values};
        static const char want[] = "\x28\0\0\0\0\0\0\0"
                                   "{\"__metadata__\":{\"framework\":\"pt\"}}     ";

        status = tio__safetensors_header(0, NULL, NULL, NULL, NULL, &md, &out, &len, NULL);
        ok(status == TR_OK && bytes_equal(out, len, want, sizeof want - 1),
           "writer: metadata only, as the reference's test_empty");
        free(out);
    }
    {
        static const char *const names[] = {"attn.0"};
        static const enum tr_dtype dtypes[] = {TR_DTYPE_F32};
        static const int ndims[] = {3};
        static const int64_t shapes[][TR_MAX_DIMS] = {{1, 2, 3}};
        static const char want[] =
            "\x40\0\0\0\0\0\0\0"
            "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";

        status = tio__safetensors_header(1, names, dtypes, ndims, shapes, NULL, &out, &len,
                                         order);
        ok(status == TR_OK && bytes_equal(out, len, want, sizeof want - 1) && order[0] == 0,
           "writer: the reference's test_serialization");
        free(out);
    }
    {
        static const char *const names[] = {"attn0"};
        static const enum tr_dtype dtypes[] = {TR_DTYPE_F32};
        static const int ndims[] = {4};
        static const int64_t shapes[][TR_MAX_DIMS] = {{1, 1, 2, 3}};
        static const char want[] =
            "\x48\0\0\0\0\0\0\0"
            "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       ";

        status = tio__safetensors_header(1, names, dtypes, ndims, shapes, NULL, &out, &len,
                                         order);
        ok(status == TR_OK && bytes_equal(out, len, want, sizeof want - 1),
           "writer: the reference's test_serialization_forced_alignement");
        free(out);
    }
    {
        /* Sorted by the reference's Dtype order, largest first (U64 I64 F64
         * F32 BF16 U16 I16 U8 BOOL here), then by name. */
        static const char *const names[] = {"b", "a", "c", "d", "e", "f", "g", "a2", "h", "i"};
        static const enum tr_dtype dtypes[] = {
            TR_DTYPE_U8,   TR_DTYPE_F32,  TR_DTYPE_F64, TR_DTYPE_I64, TR_DTYPE_BF16,
            TR_DTYPE_BOOL, TR_DTYPE_U64,  TR_DTYPE_F32, TR_DTYPE_U16, TR_DTYPE_I16};
        static const int ndims[] = {1, 1, 1, 1, 1, 1, 1, 2, 1, 0};
        static const int64_t shapes[][TR_MAX_DIMS] = {{3}, {2}, {1}, {1}, {2},
                                                      {2}, {0}, {1, 1}, {2}, {0}};
        static const char *const keys[] = {"k", "format"}, *const values[] = {"v", "np"};
        struct tio_metadata md = {2, keys, values};
        static const size_t want_order[] = {6, 3, 2, 1, 7, 4, 8, 9, 0, 5};
        static const char want[] =
            "\x50\x02\0\0\0\0\0\0"
            "{\"__metadata__\":{\"k\":\"v\",\"format\":\"np\"},"
            "\"g\":{\"dtype\":\"U64\",\"shape\":[0],\"data_offsets\":[0,0]},"
            "\"d\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
            "\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
            "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
            "\"a2\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[24,28]},"
            "\"e\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[28,32]},"
            "\"h\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[32,36]},"
            "\"i\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[36,38]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[38,41]},"
            "\"f\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[41,43]}}    ";
        bool order_ok = true;

        status = tio__safetensors_header(10, names, dtypes, ndims, shapes, &md, &out, &len,
                                         order);
        for (size_t i = 0; i < 10; i++)
            order_ok = order_ok && order[i] == want_order[i];
        ok(status == TR_OK && bytes_equal(out, len, want, sizeof want - 1),
           "writer: ten tensors in the reference's order, metadata first");
        ok(order_ok, "writer: order gives the argument index of each tensor in data order");
        free(out);
    }
    {
        /* serde_json's escapes: \" \\ \b \t \n \f \r short, other control
         * characters \u00xx in lower case; '/', DEL and non-ASCII as is. */
        static const char *const names[] = {"\xc3\xa9\x01\"\\/\x7f\n\x1f\b\f\r\t",
                                            "Z", "\xe2\x80\xa8"};
        static const enum tr_dtype dtypes[] = {TR_DTYPE_F16, TR_DTYPE_F16, TR_DTYPE_F16};
        static const int ndims[] = {1, 1, 1};
        static const int64_t shapes[][TR_MAX_DIMS] = {{1}, {1}, {1}};
        static const char *const keys[] = {"\x1b[0m"}, *const values[] = {"\xf0\x9f\x98\x80"};
        struct tio_metadata md = {1, keys, values};
        static const char want[] =
            "\xe8\0\0\0\0\0\0\0"
            "{\"__metadata__\":{\"\\u001b[0m\":\"\xf0\x9f\x98\x80\"},"
            "\"Z\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]},"
            "\"\xc3\xa9\\u0001\\\"\\\\/\x7f\\n\\u001f\\b\\f\\r\\t\":{\"dtype\":\"F16\","
            "\"shape\":[1],\"data_offsets\":[2,4]},"
            "\"\xe2\x80\xa8\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[4,6]}}"
            "     ";

        status = tio__safetensors_header(3, names, dtypes, ndims, shapes, &md, &out, &len,
                                         order);
        ok(status == TR_OK && bytes_equal(out, len, want, sizeof want - 1),
           "writer: JSON escapes as serde_json writes them");
        free(out);
    }
}

static void test_writer_errors(void)
{
    static const enum tr_dtype f32s[] = {TR_DTYPE_F32, TR_DTYPE_F32, TR_DTYPE_F32};
    static const int ones[] = {1, 1, 1};
    static const int64_t shapes[][TR_MAX_DIMS] = {{2}, {2}, {2}};
    static char sentinel[] = "x";
    char *out = sentinel;
    size_t len = 7;
    tr_status status;

    {
        static const char *const names[] = {"a", "b", "a"};

        status = tio__safetensors_header(3, names, f32s, ones, shapes, NULL, &out, &len, NULL);
        ok(status == TR_ERR_INVALID && strstr(tr_last_error(), "'a' appears more than once"),
           "writer: duplicate names are refused (%s)", tr_last_error());
        ok(out == NULL && len == 0, "writer: nothing returned on failure");
    }
    {
        static const char *const names[] = {"a", ""};
        size_t order2[2];
        struct tio__safetensors back;

        /* the reference reads and writes an empty name: so does tensorrun */
        status = tio__safetensors_header(2, names, f32s, ones, shapes, NULL, &out, &len, order2);
        ok(status == TR_OK, "writer: an empty name is written (%s)", tr_last_error());
        if (status == TR_OK) {
            uint8_t *file = calloc(1, len + 16);
            memcpy(file, out, len);
            status = tio__safetensors_parse(file, len + 16, len + 16, &back);
            ok(status == TR_OK && back.count == 2 &&
                   (strcmp(back.entries[0].name, "") == 0 ||
                    strcmp(back.entries[1].name, "") == 0),
               "writer: and the empty name reads back (%s)", tr_last_error());
            if (status == TR_OK)
                tio__safetensors_free(&back);
            free(file);
            free(out);
            out = NULL;
        }
    }
    {
        static const char *const names[] = {"a", NULL};

        status = tio__safetensors_header(2, names, f32s, ones, shapes, NULL, &out, &len, NULL);
        is_int(status, TR_ERR_INVALID, "writer: a NULL name is refused");
    }
    {
        static const char *const names[] = {"__metadata__"};

        status = tio__safetensors_header(1, names, f32s, ones, shapes, NULL, &out, &len, NULL);
        ok(status == TR_ERR_INVALID && strstr(tr_last_error(), "reserves"),
           "writer: a tensor called __metadata__ is refused");
    }
    {
        static const char *const names[] = {"a\xff"};

        status = tio__safetensors_header(1, names, f32s, ones, shapes, NULL, &out, &len, NULL);
        ok(status == TR_ERR_INVALID && strstr(tr_last_error(), "UTF-8"),
           "writer: a name that is not UTF-8 is refused");
    }
    {
        static const char *const names[] = {"a"};
        static const enum tr_dtype bad[] = {TR_DTYPE_COUNT};
        static const int nine[] = {9};
        static const int64_t negative[][TR_MAX_DIMS] = {{-1}};
        static const int64_t huge[][TR_MAX_DIMS] = {{INT64_C(1) << 62, 4}};
        static const int two[] = {2};

        status = tio__safetensors_header(1, names, bad, ones, shapes, NULL, &out, &len, NULL);
        is_int(status, TR_ERR_INVALID, "writer: a dtype outside the enum is refused");
        status = tio__safetensors_header(1, names, f32s, nine, shapes, NULL, &out, &len, NULL);
        is_int(status, TR_ERR_INVALID, "writer: nine dimensions are refused");
        status = tio__safetensors_header(1, names, f32s, ones, negative, NULL, &out, &len,
                                         NULL);
        is_int(status, TR_ERR_INVALID, "writer: a negative dimension is refused");
        status = tio__safetensors_header(1, names, f32s, two, huge, NULL, &out, &len, NULL);
        ok(status == TR_ERR_INVALID && strstr(tr_last_error(), "overflows"),
           "writer: a size over 64 bits is refused");
        {
            static const int three[] = {3};
            static const int64_t zero_first[][TR_MAX_DIMS] = {
                {0, INT64_C(1) << 62, INT64_C(1) << 62}};
            static const int64_t zero_last[][TR_MAX_DIMS] = {
                {INT64_C(1) << 62, INT64_C(1) << 62, 0}};

            status = tio__safetensors_header(1, names, f32s, three, zero_first, NULL, &out,
                                             &len, NULL);
            ok(status == TR_OK && strstr(out + 8, "\"data_offsets\":[0,0]") != NULL,
               "writer: [0, 2^62, 2^62] is 0 bytes, as the reader counts it");
            free(out);
            status = tio__safetensors_header(1, names, f32s, three, zero_last, NULL, &out,
                                             &len, NULL);
            ok(status == TR_ERR_INVALID,
               "writer: [2^62, 2^62, 0] is refused, as the reader would refuse it");
        }
    }
    {
        static const char *const names[] = {"a"};
        static const char *const keys[] = {"k", "k"}, *const values[] = {"1", "2"};
        static const char *const bad_values[] = {"1", "\xc3"};
        struct tio_metadata md = {2, keys, values};

        status = tio__safetensors_header(1, names, f32s, ones, shapes, &md, &out, &len, NULL);
        ok(status == TR_ERR_INVALID && strstr(tr_last_error(), "metadata key 'k'"),
           "writer: duplicate metadata keys are refused");
        md.keys = (const char *const[]){"k", "l"};
        md.values = bad_values;
        status = tio__safetensors_header(1, names, f32s, ones, shapes, &md, &out, &len, NULL);
        ok(status == TR_ERR_INVALID && strstr(tr_last_error(), "UTF-8"),
           "writer: a metadata value that is not UTF-8 is refused");
    }
}

/* header() then parse() gives back what went in, with every tensor's data
 * aligned to its item size. */
static void test_round_trip(void)
{
    static const char *const names[] = {"weight", "bias", "mask", "steps", "half", "idx",
                                        "x.y.z", "empty", "scalar", "bf", "u", "s8"};
    static const enum tr_dtype dtypes[] = {
        TR_DTYPE_F32, TR_DTYPE_F32, TR_DTYPE_BOOL, TR_DTYPE_I64, TR_DTYPE_F16, TR_DTYPE_U32,
        TR_DTYPE_F64, TR_DTYPE_I32, TR_DTYPE_U64,  TR_DTYPE_BF16, TR_DTYPE_U16, TR_DTYPE_I8};
    static const int ndims[] = {2, 1, 3, 1, 2, 1, 4, 2, 0, 1, 1, 1};
    static const int64_t shapes[][TR_MAX_DIMS] = {
        {3, 5}, {5}, {2, 3, 7}, {3}, {3, 3}, {5}, {1, 2, 1, 3}, {0, 4}, {0}, {7}, {3}, {11}};
    static const char *const keys[] = {"format", "note"}, *const values[] = {"pt", "r\xc3\xa9"};
    struct tio_metadata md = {2, keys, values};
    const size_t n = sizeof names / sizeof names[0];
    struct tio__safetensors st;
    size_t len, order[16], data = 0;
    char *header = NULL;
    uint8_t *file;
    tr_status status;
    bool all_ok = true, aligned = true, ordered = true;

    status = tio__safetensors_header(n, names, dtypes, ndims, shapes, &md, &header, &len,
                                     order);
    if (!ok(status == TR_OK, "round trip: header written")) {
        diag("%s", tr_last_error());
        return;
    }
    ok((len - 8) % 8 == 0, "round trip: header padded to a multiple of 8");
    for (size_t i = 0; i < n; i++) {
        size_t nbytes = tr_dtype_size(dtypes[i]);

        for (int d = 0; d < ndims[i]; d++)
            nbytes *= (size_t)shapes[i][d];
        data += nbytes;
    }
    file = calloc(1, len + data);
    memcpy(file, header, len);
    status = tio__safetensors_parse(file, len + data, len + data, &st);
    if (!ok(status == TR_OK, "round trip: parses")) {
        diag("%s", tr_last_error());
        free(file);
        free(header);
        return;
    }
    is_int(st.count, n, "round trip: every tensor back");
    ok(st.has_metadata && st.metadata_count == 2 && strcmp(st.metadata_keys[1], "note") == 0 &&
           strcmp(st.metadata_values[1], "r\xc3\xa9") == 0,
       "round trip: metadata back");
    for (size_t k = 0; k < st.count && k < n; k++) {
        const struct tio_entry *e = &st.entries[k];
        size_t i = order[k];
        uint64_t nbytes = tr_dtype_size(dtypes[i]);

        for (int d = 0; d < ndims[i]; d++)
            nbytes *= (uint64_t)shapes[i][d];
        if (strcmp(e->name, names[i]) != 0 || !e->supported || e->dtype != dtypes[i] ||
            e->ndim != ndims[i] || e->nbytes != nbytes ||
            strcmp(e->dtype_text, tio__safetensors_dtype_name(dtypes[i])) != 0) {
            diag("tensor %zu (%s) differs", k, names[i]);
            all_ok = false;
        }
        for (int d = 0; d < ndims[i]; d++)
            all_ok = all_ok && e->shape[d] == shapes[i][d];
        if (e->nbytes > 0 && e->offset % tr_dtype_size(e->dtype) != 0)
            aligned = false;
        if (k > 0 && e->offset != st.entries[k - 1].offset + st.entries[k - 1].nbytes)
            ordered = false;
    }
    ok(all_ok, "round trip: names, dtypes, shapes and sizes back, in the writer's order");
    ok(ordered && st.count > 0 && st.entries[0].offset == len,
       "round trip: offsets contiguous from the end of the header");
    ok(aligned, "round trip: every tensor's data aligned to its item size");
    tio__safetensors_free(&st);
    tio__safetensors_free(NULL);
    free(file);
    free(header);
}

/* ------------------------------------------------------------ corpus */

/* Runs tests/data/make-bad-safetensors.py into a temporary directory and
 * checks that every file it writes is rejected with its expected message. */
static void test_bad_corpus(void)
{
    char script[4096], dir[] = "/tmp/tr-bad-st-XXXXXX", path[4200], line[1024];
    FILE *expected;
    pid_t pid;
    int wstatus, files = 0;

    src_path(script, sizeof script, "tests/data/make-bad-safetensors.py");
    if (access(script, R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0) {
        skip("malformed-file corpus: no script or no /usr/bin/python3");
        return;
    }
    if (mkdtemp(dir) == NULL) {
        skip("malformed-file corpus: mkdtemp failed");
        return;
    }
    pid = fork();
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", script, dir, (char *)NULL);
        _exit(127);
    }
    if (!ok(pid > 0 && waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus) &&
                WEXITSTATUS(wstatus) == 0,
            "malformed-file corpus: script ran"))
        return;
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    expected = fopen(path, "r");
    if (!ok(expected != NULL, "malformed-file corpus: expected.txt written"))
        return;
    while (fgets(line, sizeof line, expected) != NULL) {
        char *tab = strchr(line, '\t'), *nl = strchr(line, '\n');
        struct tio__safetensors st;
        uint64_t size;
        size_t len = 0;
        uint8_t *buf;
        tr_status status;

        if (tab == NULL)
            continue;
        *tab = '\0';
        if (nl != NULL)
            *nl = '\0';
        snprintf(path, sizeof path, "%s/%s", dir, line);
        buf = read_all(path, &len);
        if (buf == NULL) {
            ok(0, "corpus %s: read", line);
            continue;
        }
        /* The way a reader goes: the size from the preamble, then the
         * header. */
        tr_clear_error();
        status = tio__safetensors_header_size(buf, len, len, &size);
        if (status == TR_OK)
            status = tio__safetensors_parse(buf, len, len, &st);
        if (!ok(status == TR_ERR_FORMAT && strstr(tr_last_error(), tab + 1) != NULL,
                "corpus %s: rejected with \"%s\"", line, tab + 1))
            diag("status %s, message \"%s\"", tr_status_name(status), tr_last_error());
        if (status == TR_OK)
            tio__safetensors_free(&st);
        free(buf);
        unlink(path);
        files++;
    }
    fclose(expected);
    ok(files >= 15, "malformed-file corpus: %d files checked", files);
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_reference_files();
    test_preamble();
    test_text_rules();
    test_metadata_rules();
    test_field_rules();
    test_dtype_rules();
    test_offset_rules();
    test_writer_vectors();
    test_writer_errors();
    test_round_trip();
    test_bad_corpus();
    return done_testing();
}
