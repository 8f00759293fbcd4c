/*
 * convert.c - `tensorrun convert IN OUT`: one tensor (or every tensor of a
 * safetensors file) from any input form to any output form, with dtype
 * conversion and zstd on either side.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "msg.h"
#include "tensorrun_io.h"

struct convert_args {
    const char *in, *out, *key;
    enum tr_dtype dtype;            /* TR_DTYPE_COUNT: keep each tensor's */
    enum tio_format format;         /* of the output; UNKNOWN: from its name */
    bool zstd;                      /* --format F.zst */
    int level;
    bool fsync;
    bool raw;                       /* the input is described on the command line */
    struct tio_raw_layout layout;
    bool has_dtype, has_shape;
    int strides_count;
};

static void print_help(void)
{
    fputs("Usage: tensorrun convert IN OUT [OPTIONS]\n"
          "\n"
          "Copy a tensor from IN to OUT (either may be '-'), between .npy, .safetensors and\n"
          "raw, each optionally zstd-compressed (.zst), converting its dtype on the way.\n"
          "A safetensors file converted to a safetensors file keeps all its tensors.\n"
          "\n"
          "Options:\n"
          "  --dtype T           the output dtype (bool u8 ... f16 bf16 f32 f64)\n"
          "  --key K             the tensor of a safetensors input to take\n"
          "  --format F          the output format: npy, safetensors or raw\n"
          "  --level N           zstd compression level (default 3)\n"
          "  --input-dtype T     a raw input's dtype\n"
          "  --shape D0,D1,...   a raw input's shape\n"
          "  --offset BYTES      where a raw input's first element is (default 0)\n"
          "  --strides S0,S1,... a raw input's strides in elements (default C order)\n"
          "  --fsync             flush the output and its directory to disk first\n",
          stdout);
}

/* Parses the command line into *a; returns EXIT_OK or the usage error's
 * status (EXIT_OK with a->in NULL after --help). */
static int parse_args(int argc, char **argv, struct convert_args *a)
{
    enum { OPT_DTYPE = 256, OPT_KEY, OPT_FORMAT, OPT_LEVEL, OPT_INPUT_DTYPE, OPT_SHAPE,
           OPT_OFFSET, OPT_STRIDES, OPT_FSYNC };
    static const struct option options[] = {
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"key", required_argument, NULL, OPT_KEY},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"level", required_argument, NULL, OPT_LEVEL},
        {"input-dtype", required_argument, NULL, OPT_INPUT_DTYPE},
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"offset", required_argument, NULL, OPT_OFFSET},
        {"strides", required_argument, NULL, OPT_STRIDES},
        {"fsync", no_argument, NULL, OPT_FSYNC},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t v;
    int n;

    memset(a, 0, sizeof *a);
    a->dtype = TR_DTYPE_COUNT;
    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, ":h", options, NULL);
        if (c == -1)
            break;
        switch (c) {
        case OPT_DTYPE:
            if (tr_dtype_parse(optarg, &a->dtype) != TR_OK)
                return usage_error("convert: --dtype: unknown dtype '%s'", optarg);
            break;
        case OPT_KEY:
            a->key = optarg;
            break;
        case OPT_FORMAT: {
            char name[32];
            size_t len = strlen(optarg);
            a->zstd = len > 4 && strcmp(optarg + len - 4, ".zst") == 0;
            snprintf(name, sizeof name, "%.*s", (int)(a->zstd ? len - 4 : len), optarg);
            if (tio_format_parse(name, &a->format) != TR_OK)
                return usage_error("convert: --format: unknown format '%s' (expected npy, "
                                   "safetensors or raw, each optionally followed by .zst)",
                                   optarg);
            break;
        }
        case OPT_LEVEL:
            if (!parse_int(optarg, -7, 22, &v))
                return usage_error("convert: --level: '%s' is not a level from -7 to 22",
                                   optarg);
            a->level = (int)v;
            break;
        case OPT_INPUT_DTYPE:
            if (tr_dtype_parse(optarg, &a->layout.dtype) != TR_OK)
                return usage_error("convert: --input-dtype: unknown dtype '%s'", optarg);
            a->has_dtype = true;
            break;
        case OPT_SHAPE:
            if (!parse_int_list(optarg, a->layout.shape, TR_MAX_DIMS, &n, false))
                return usage_error("convert: --shape: '%s' is not a list of at most %d sizes "
                                   "like 1024,768", optarg, TR_MAX_DIMS);
            a->layout.ndim = n;
            a->has_shape = true;
            break;
        case OPT_OFFSET:
            if (!parse_int(optarg, 0, INT64_MAX, &v))
                return usage_error("convert: --offset: '%s' is not a byte count", optarg);
            a->layout.offset = v;
            break;
        case OPT_STRIDES:
            if (!parse_int_list(optarg, a->layout.strides, TR_MAX_DIMS, &n, true))
                return usage_error("convert: --strides: '%s' is not a list of strides", optarg);
            a->layout.has_strides = true;
            a->strides_count = n;
            break;
        case OPT_FSYNC:
            a->fsync = true;
            break;
        case 'h':
            print_help();
            return EXIT_OK;
        case ':':
            return usage_error("convert: option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("convert: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return usage_error("convert: expected IN and OUT, got %d argument%s", argc - optind,
                           argc - optind == 1 ? "" : "s");
    a->in = argv[optind];
    a->out = argv[optind + 1];
    a->raw = a->has_dtype || a->has_shape;
    if (a->raw && !(a->has_dtype && a->has_shape))
        return usage_error("convert: a raw input needs both --input-dtype and --shape");
    if (a->layout.has_strides && a->strides_count != a->layout.ndim)
        return usage_error("convert: --strides gives %d strides for a shape of %d dimensions",
                           a->strides_count, a->layout.ndim);
    return EXIT_OK;
}

/* "a, b, c" into buf: the names of the file's tensors, ending in "..."
 * when they do not all fit. */
static const char *name_list(const struct tio_file *f, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < tio_file_count(f); i++) {
        const char *name = tio_file_entry(f, i)->name;
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                         name ? name : "(unnamed)");
        if (n < 0 || (size_t)n >= size - used) {
            memcpy(buf + (used < size - 4 ? used : size - 4), "...", 4);
            break;
        }
        used += (size_t)n;
    }
    return buf;
}

/* Which tensors of the input to write: all (safetensors to safetensors
 * without --key) or one.  Returns EXIT_OK or the failure's status. */
static int choose(const struct convert_args *a, const struct tio_file *f,
                  enum tio_format out_format, size_t *first, size_t *count)
{
    char names[1024];
    ptrdiff_t i;

    if (a->key) {
        i = tio_file_find(f, a->key);
        if (i < 0) {
            msg_error(a->in, "no tensor '%s' (the file holds: %s)", a->key,
                      name_list(f, names, sizeof names));
            return EXIT_IO;
        }
        *first = (size_t)i;
        *count = 1;
        return EXIT_OK;
    }
    if (out_format == TIO_FORMAT_SAFETENSORS || tio_file_count(f) == 1) {
        *first = 0;
        *count = tio_file_count(f);
        return EXIT_OK;
    }
    if (tio_file_count(f) == 0) {
        msg_error(a->in, "the file holds no tensor");
        return EXIT_IO;
    }
    return usage_error("convert: %s holds %zu tensors; choose one with --key (%s)", a->in,
                       tio_file_count(f), name_list(f, names, sizeof names));
}

/* Reads the chosen tensors and writes them to the output; returns the
 * exit status. */
static int copy(const struct convert_args *a, struct tio_file *f, enum tio_format out_format,
                enum tio_compression compression, size_t first, size_t count)
{
    struct tio_write_options wo = {.format = out_format, .compression = compression,
                                   .level = a->level, .fsync = a->fsync};
    const struct tr_tensor **tensors = calloc(count ? count : 1, sizeof *tensors);
    const char **names = calloc(count ? count : 1, sizeof *names);
    const char **keys = calloc(tio_file_metadata_count(f) + 1, sizeof *keys);
    const char **values = calloc(tio_file_metadata_count(f) + 1, sizeof *values);
    struct tio_metadata meta = {tio_file_metadata_count(f), keys, values};
    struct tio_output *out = NULL;
    const char *failed = a->in;
    tr_status s = TR_OK;

    if (!tensors || !names || !keys || !values)
        s = tr_set_error(TR_ERR_OOM, "out of memory");
    for (size_t i = 0; i < count && s == TR_OK; i++) {
        const struct tio_entry *e = tio_file_entry(f, first + i);
        names[i] = e->name ? e->name : "tensor";
        tensors[i] = tio_file_load(f, first + i);
        if (!tensors[i])
            s = tr_last_status();
    }
    for (size_t i = 0; i < meta.count; i++) {
        keys[i] = tio_file_metadata_key(f, i);
        values[i] = tio_file_metadata_value(f, i);
    }
    if (s == TR_OK) {
        failed = a->out;
        out = tio_output_open(a->out, &wo);
        s = out ? tio_output_write(out, count, names, tensors, a->dtype,
                                   tio_file_has_metadata(f) ? &meta : NULL)
                : tr_last_status();
    }
    /* an input that shrank while it was copied gave zeros: not committed */
    if (check_inputs_unchanged() != EXIT_OK) {
        s = TR_ERR_IO;
    } else if (s == TR_OK) {
        /* from the rename on, an interruption must not say "nothing was
         * replaced": it waits, and the command ends normally */
        hold_interrupts();
        s = tio_output_commit(out);
        if (s != TR_OK)
            msg_error(failed, "%s", tr_last_error());
    } else {
        msg_error(failed, "%s", tr_last_error());
    }
    tio_output_close(out);
    free(values);
    free(keys);
    free(names);
    free(tensors);
    if (s == TR_ERR_DTYPE)
        return EXIT_IO; /* a dtype the file holds but tensorrun lacks */
    return s == TR_ERR_INVALID ? EXIT_USAGE : exit_for_status(s);
}

int cmd_convert(int argc, char **argv)
{
    struct convert_args a;
    struct tio_open_options oo = {0};
    enum tio_format in_by_name, out_format;
    enum tio_compression in_compression, out_compression;
    struct tio_file *f;
    struct tr_scope *scope;
    size_t first = 0, count = 0;
    int status = parse_args(argc, argv, &a);

    if (status != EXIT_OK || !a.in)
        return status;
    tio_format_from_path(a.in, &in_by_name, &in_compression);
    if (in_by_name == TIO_FORMAT_RAW && !a.raw)
        return usage_error("convert: %s is raw: describe it with --input-dtype and --shape",
                           a.in);
    tio_format_from_path(a.out, &out_format, &out_compression);
    if (a.format != TIO_FORMAT_UNKNOWN) {
        out_format = a.format;
        out_compression = a.zstd ? TIO_COMPRESSION_ZSTD : out_compression;
    }
    if (out_format == TIO_FORMAT_UNKNOWN && strcmp(a.out, "-") == 0)
        out_format = TIO_FORMAT_NPY;
    if (out_format == TIO_FORMAT_UNKNOWN)
        return usage_error("convert: cannot tell the format of %s from its name (use "
                           "--format npy, safetensors or raw)", a.out);
    if (a.raw) {
        /* the description given wins over whatever the bytes look like */
        oo.raw = &a.layout;
        oo.format = TIO_FORMAT_RAW;
    }
    f = tio_open(a.in, &oo);
    if (!f) {
        if (check_inputs_unchanged() != EXIT_OK)
            return EXIT_IO;
        if (tr_last_status() == TR_ERR_INVALID)
            return usage_error("convert: %s", tr_last_error());
        msg_error(a.in, "%s", tr_last_error());
        return exit_for_status(tr_last_status());
    }
    status = choose(&a, f, out_format, &first, &count);
    for (size_t i = 0; status == EXIT_OK && i < count && out_format == TIO_FORMAT_NPY; i++) {
        const struct tio_entry *e = tio_file_entry(f, first + i);
        enum tr_dtype d = a.dtype != TR_DTYPE_COUNT ? a.dtype : e->dtype;
        if (e->supported && d == TR_DTYPE_BF16) {
            msg_error(NULL, "convert: .npy cannot hold bf16 (NumPy has no such dtype)");
            msg_hint("convert with --dtype f32, or write .safetensors");
            status = EXIT_USAGE;
        }
    }
    if (status == EXIT_OK) {
        scope = tr_scope_begin();
        status = copy(&a, f, out_format, out_compression, first, count);
        tr_scope_end(scope, NULL, 0);
    }
    tio_close(f);
    return status;
}
