/*
 * inspect.c - `tensorrun inspect FILE... [--json]`: what is in tensor
 * files, from their headers alone.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "msg.h"
#include "tensorrun_io.h"

/* The length of the well-formed UTF-8 character at p (left bytes remain),
 * or 0 when there is none: not a lead byte, cut short, overlong, a
 * surrogate or past U+10FFFF. */
static size_t utf8_char(const unsigned char *p, size_t left)
{
    size_t n = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3
             : (p[0] >> 3) == 30 ? 4 : 0;
    uint32_t c;

    if (n <= 1 || n > left)
        return n > left ? 0 : n;
    c = p[0] & (0x7f >> n);
    for (size_t k = 1; k < n; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[k] & 0x3f);
    }
    if ((n == 2 && c < 0x80) || (n == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
        (n == 4 && (c < 0x10000 || c > 0x10ffff)))
        return 0;
    return n;
}

/* A JSON string of text, whose bytes that are not UTF-8 (a path can hold
 * any) become U+FFFD; jansson refuses invalid UTF-8 outright. */
static json_t *text_json(const char *text)
{
    size_t len = strlen(text), used = 0;
    char *clean = malloc(3 * len + 1);
    json_t *s;

    if (!clean)
        return json_null();
    for (size_t i = 0; i < len;) {
        size_t n = utf8_char((const unsigned char *)text + i, len - i);
        if (n) {
            memcpy(clean + used, text + i, n);
            used += n;
            i += n;
        } else {
            memcpy(clean + used, "\xef\xbf\xbd", 3);
            used += 3;
            i++;
        }
    }
    s = json_stringn(clean, used);
    free(clean);
    return s ? s : json_null();
}

/* Text for a terminal: control characters of a hostile file shown as
 * \xNN rather than sent to the terminal. */
static const char *printable(const char *text, char *buf, size_t size)
{
    size_t used = 0;

    for (const unsigned char *p = (const unsigned char *)text; *p && used + 5 < size; p++) {
        if (*p < 0x20 || *p == 0x7f)
            used += (size_t)snprintf(buf + used, size - used, "\\x%02x", *p);
        else
            buf[used++] = (char)*p;
    }
    buf[used] = '\0';
    return buf;
}

static json_t *int_array(const int64_t *v, int n)
{
    json_t *a = json_array();

    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *file_json(const char *path, const struct tio_file *f)
{
    json_t *o = json_object(), *tensors = json_array(), *meta = json_null();

    json_object_set_new(o, "path", text_json(path));
    json_object_set_new(o, "format", json_string(tio_format_name(tio_file_format(f))));
    json_object_set_new(o, "compression", tio_file_compression(f) == TIO_COMPRESSION_ZSTD
                                              ? json_string("zstd")
                                              : json_null());
    json_object_set_new(o, "size_bytes", json_integer((json_int_t)tio_file_size(f)));
    if (tio_file_has_metadata(f)) {
        meta = json_object();
        for (size_t i = 0; i < tio_file_metadata_count(f); i++)
            json_object_set_new(meta, tio_file_metadata_key(f, i),
                                text_json(tio_file_metadata_value(f, i)));
    }
    json_object_set_new(o, "metadata", meta);
    for (size_t i = 0; i < tio_file_count(f); i++) {
        const struct tio_entry *e = tio_file_entry(f, i);
        json_t *t = json_object();
        json_object_set_new(t, "name", e->name ? text_json(e->name) : json_null());
        json_object_set_new(t, "dtype",
                            text_json(e->supported ? tr_dtype_name(e->dtype) : e->dtype_text));
        if (e->wide_ndim) {
            json_object_set_new(t, "shape", int_array(e->wide_shape, e->wide_ndim));
            json_object_set_new(t, "strides",
                                int_array(e->wide_shape + e->wide_ndim, e->wide_ndim));
        } else {
            json_object_set_new(t, "shape", int_array(e->shape, e->ndim));
            json_object_set_new(t, "strides", int_array(e->strides, e->ndim));
        }
        json_object_set_new(t, "offset_bytes", json_integer((json_int_t)e->offset));
        json_object_set_new(t, "nbytes", json_integer((json_int_t)e->nbytes));
        json_object_set_new(t, "byte_order", json_string(e->big_endian ? "big" : "little"));
        if (!e->supported)
            json_object_set_new(t, "supported", json_false());
        json_array_append_new(tensors, t);
    }
    json_object_set_new(o, "tensors", tensors);
    return o;
}

static void print_json(const char *path, const struct tio_file *f)
{
    json_t *o = file_json(path, f);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(o);
}

static void print_text(const char *path, const struct tio_file *f)
{
    char size[32], shape[200], strides[200], bytes[32], a[256], b[1024];
    size_t n = tio_file_count(f);

    printf("%s: %s%s, %s, %zu tensor%s\n", printable(path, b, sizeof b),
           tio_format_name(tio_file_format(f)),
           tio_file_compression(f) == TIO_COMPRESSION_ZSTD ? " (zstd)" : "",
           tr_format_bytes(tio_file_size(f), size, sizeof size), n, n == 1 ? "" : "s");
    for (size_t i = 0; i < tio_file_metadata_count(f); i++)
        printf("  metadata  %s = %s\n", printable(tio_file_metadata_key(f, i), a, sizeof a),
               printable(tio_file_metadata_value(f, i), b, sizeof b));
    for (size_t i = 0; i < n; i++) {
        const struct tio_entry *e = tio_file_entry(f, i);
        const char *why = e->supported     ? ""
                          : e->wide_ndim   ? "  (unsupported: too many dimensions)"
                                           : "  (unsupported dtype)";
        if (e->wide_ndim) {
            tr_format_shape(e->wide_shape, e->wide_ndim, shape, sizeof shape);
            tr_format_shape(e->wide_shape + e->wide_ndim, e->wide_ndim, strides,
                            sizeof strides);
        } else {
            tr_format_shape(e->shape, e->ndim, shape, sizeof shape);
            tr_format_shape(e->strides, e->ndim, strides, sizeof strides);
        }
        printf("  %-20s %-8s %-16s strides %-14s offset %-10" PRIu64 " %s%s%s\n",
               e->name ? printable(e->name, a, sizeof a) : "-",
               e->supported ? tr_dtype_name(e->dtype) : printable(e->dtype_text, b, sizeof b),
               shape, strides, e->offset, tr_format_bytes(e->nbytes, bytes, sizeof bytes), why,
               e->big_endian ? "  (big-endian)" : "");
    }
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct tio_open_options open_options = {.header_only = true};
    bool json = false;
    int c, status = EXIT_OK, stdin_seen = 0;

    opterr = 0;
    optind = 1;
    for (;;) {
        c = getopt_long(argc, argv, ":jh", options, NULL);
        if (c == -1)
            break;
        switch (c) {
        case 'j':
            json = true;
            break;
        case 'h':
            printf("Usage: tensorrun inspect FILE... [--json]\n");
            return EXIT_OK;
        default:
            return option_error("inspect", c, argc, argv, options, false);
        }
    }
    if (optind >= argc)
        return usage_error("inspect: no file given");
    for (int i = optind; i < argc; i++)
        stdin_seen += strcmp(argv[i], "-") == 0;
    if (stdin_seen > 1)
        return usage_error("inspect: '-' is named twice; standard input can be read once");
    if (stdin_seen && stdin_is_terminal("inspect"))
        return EXIT_USAGE;
    for (int i = optind; i < argc; i++) {
        struct tio_file *f = tio_open(argv[i], &open_options);
        if (!f) {
            msg_error(argv[i], "%s", tr_last_error());
            status = exit_for_status(tr_last_status());
            continue;
        }
        if (json)
            print_json(argv[i], f);
        else
            print_text(argv[i], f);
        tio_close(f);
    }
    return status;
}
