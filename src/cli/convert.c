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
    const char *name;               /* --name: of the one tensor written */
    enum tr_dtype dtype;            /* TR_DTYPE_COUNT: keep each tensor's */
    bool dtype_all;                 /* --dtype-all: integers and bool too */
    enum tio_format format;         /* of the output; UNKNOWN: from its name */
    bool zstd;                      /* --format F.zst */
    int level;
    bool fsync;
    bool raw;                       /* the input is described on the command line */
    struct tio_raw_layout layout;
    bool has_dtype, has_shape, has_offset;
    int strides_count;
};

static void print_help(void)
{
    fputs("Usage: tensorrun convert IN OUT [OPTIONS]\n"
          "\n"
          "Copy a tensor from IN to OUT (either may be '-'), between .npy, .safetensors and\n"
          "raw, each optionally zstd-compressed (.zst), converting its dtype on the way;\n"
          ".npz archives are read too.  A safetensors or .npz file converted to a\n"
          "safetensors file keeps all its tensors.\n"
          "\n"
          "Options:\n"
          "  --dtype T           the output dtype (bool u8 ... f16 bf16 f32 f64); when every\n"
          "                      tensor of a collection is written, only the floating-point\n"
          "                      ones are converted, integer and bool ones copied unchanged\n"
          "  --dtype-all T       convert every tensor to T, integer and bool ones too\n"
          "  --key K             the tensor of a safetensors or .npz input to take\n"
          "  --name NAME         the name of the one tensor written to a .safetensors output\n"
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
    enum { OPT_DTYPE = 256, OPT_DTYPE_ALL, OPT_KEY, OPT_NAME, OPT_FORMAT, OPT_LEVEL,
           OPT_INPUT_DTYPE, OPT_SHAPE, OPT_OFFSET, OPT_STRIDES, OPT_FSYNC };
    static const struct option options[] = {
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"dtype-all", required_argument, NULL, OPT_DTYPE_ALL},
        {"name", required_argument, NULL, OPT_NAME},
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
        case OPT_DTYPE_ALL:
            if (a->dtype != TR_DTYPE_COUNT)
                return usage_error("convert: give one of --dtype and --dtype-all, once");
            if (tr_dtype_parse(optarg, &a->dtype) != TR_OK)
                return usage_error("convert: %s: unknown dtype '%s'",
                                   c == OPT_DTYPE_ALL ? "--dtype-all" : "--dtype", optarg);
            a->dtype_all = c == OPT_DTYPE_ALL;
            break;
        case OPT_NAME:
            if (optarg[0] == '\0')
                return usage_error("convert: --name: a tensor's name cannot be empty");
            a->name = optarg;
            break;
        case OPT_KEY:
            a->key = optarg;
            break;
        case OPT_FORMAT:
            if (!parse_output_format(optarg, &a->format, &a->zstd))
                return usage_error("convert: --format: unknown format '%s' (expected npy, "
                                   "safetensors or raw, each optionally followed by .zst)",
                                   optarg);
            break;
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
            a->has_offset = true;
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
        default:
            return option_error("convert", c, argc, argv, options, false);
        }
    }
    if (argc - optind != 2)
        return usage_error("convert: expected IN and OUT, got %d argument%s", argc - optind,
                           argc - optind == 1 ? "" : "s");
    a->in = argv[optind];
    a->out = argv[optind + 1];
    a->raw = a->has_dtype || a->has_shape || a->has_offset || a->layout.has_strides;
    if (a->raw && a->has_shape && a->layout.has_strides && a->strides_count != a->layout.ndim)
        return usage_error("convert: --strides gives %d strides for a shape of %d dimensions",
                           a->strides_count, a->layout.ndim);
    return EXIT_OK;
}

/* The raw layout options given for a file that has a header of its own. */
static int raw_options_error(const char *in, const struct tio_file *f)
{
    return usage_error("convert: %s is a .%s file, which describes itself: --input-dtype, "
                       "--shape, --offset and --strides describe raw input only",
                       in, tio_format_name(tio_file_format(f)));
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

/* Which dtype each chosen tensor is written as: --dtype's for a tensor
 * picked alone, and when every tensor of a collection is written, for its
 * floating-point ones only (integer ids, counters and bool masks would be
 * rounded), unless --dtype-all.  Returns how many are kept as they are. */
static size_t choose_dtypes(const struct convert_args *a, const struct tio_file *f, size_t first,
                            size_t count, bool collection, enum tr_dtype *dtypes)
{
    size_t kept = 0;

    for (size_t i = 0; i < count; i++) {
        const struct tio_entry *e = tio_file_entry(f, first + i);
        bool convert = a->dtype != TR_DTYPE_COUNT &&
                       (a->dtype_all || !collection || !e->supported ||
                        tr_dtype_is_float(e->dtype));
        dtypes[i] = convert ? a->dtype : TR_DTYPE_COUNT;
        if (!convert && a->dtype != TR_DTYPE_COUNT)
            kept++;
    }
    return kept;
}

/* The report of a collection converted with --dtype or --dtype-all. */
static void report_dtypes(const struct convert_args *a, size_t count, size_t kept)
{
    size_t converted = count - kept;

    if (a->dtype_all)
        msg_note(NULL, "converted all %zu tensor%s to %s (--dtype-all)", converted,
                 converted == 1 ? "" : "s", tr_dtype_name(a->dtype));
    else
        msg_note(NULL, "converted %zu floating-point tensor%s to %s; copied %zu integer and "
                       "bool tensor%s unchanged (--dtype-all converts them too)",
                 converted, converted == 1 ? "" : "s", tr_dtype_name(a->dtype), kept,
                 kept == 1 ? "" : "s");
}

/* Reads the chosen tensors and writes them to the output; returns the
 * exit status. */
static int copy(const struct convert_args *a, struct tio_file *f, enum tio_format out_format,
                enum tio_compression compression, size_t first, size_t count, bool collection)
{
    struct tio_write_options wo = {.format = out_format, .compression = compression,
                                   .level = a->level, .fsync = a->fsync};
    const struct tr_tensor **tensors = calloc(count ? count : 1, sizeof *tensors);
    const char **names = calloc(count ? count : 1, sizeof *names);
    enum tr_dtype *dtypes = calloc(count ? count : 1, sizeof *dtypes);
    const char **keys = calloc(tio_file_metadata_count(f) + 1, sizeof *keys);
    const char **values = calloc(tio_file_metadata_count(f) + 1, sizeof *values);
    struct tio_metadata meta = {tio_file_metadata_count(f), keys, values};
    struct tio_output *out = NULL;
    const char *failed = a->in;
    size_t kept = 0;
    tr_status s = TR_OK;

    if (!tensors || !names || !dtypes || !keys || !values)
        s = tr_set_error(TR_ERR_OOM, "out of memory");
    for (size_t i = 0; i < count && s == TR_OK; i++) {
        const struct tio_entry *e = tio_file_entry(f, first + i);
        names[i] = a->name ? a->name : e->name ? e->name : "tensor";
        tensors[i] = tio_file_load(f, first + i);
        if (!tensors[i])
            s = tr_last_status();
    }
    if (s == TR_OK)
        kept = choose_dtypes(a, f, first, count, collection, dtypes);
    for (size_t i = 0; i < meta.count; i++) {
        keys[i] = tio_file_metadata_key(f, i);
        values[i] = tio_file_metadata_value(f, i);
    }
    if (s == TR_OK) {
        failed = a->out;
        out = tio_output_open(a->out, &wo);
        s = out ? tio_output_write_each(out, count, names, tensors, dtypes,
                                        tio_file_has_metadata(f) ? &meta : NULL)
                : tr_last_status();
    }
    /* an input that shrank while it was copied gave zeros: not committed
     * (check_inputs_unchanged has said so) */
    if (check_inputs_unchanged() != EXIT_OK) {
        s = TR_ERR_IO;
    } else {
        if (s == TR_OK) {
            /* from the rename on, an interruption must not say "nothing was
             * replaced": it waits, and the command ends normally */
            hold_interrupts();
            s = tio_output_commit(out);
        }
        if (s != TR_OK && failed == a->out && strcmp(a->out, "-") == 0)
            exit_if_stdout_closed();
        if (s != TR_OK)
            msg_error(failed, "%s", tr_last_error());
        else if (collection && a->dtype != TR_DTYPE_COUNT)
            report_dtypes(a, count, kept);
    }
    tio_output_close(out);
    free(dtypes);
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
    bool collection;
    int status = parse_args(argc, argv, &a);

    if (status != EXIT_OK || !a.in)
        return status;
    if (strcmp(a.in, "-") == 0 && stdin_is_terminal("convert"))
        return EXIT_USAGE;
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
    if (out_format == TIO_FORMAT_NPZ)
        return usage_error("convert: %s: .npz is read only in tensorrun: write .safetensors "
                           "for several tensors, or .npy for one", a.out);
    if (a.raw && !(a.has_dtype && a.has_shape)) {
        /* a headered file takes no layout; anything else needs all of it */
        oo.header_only = true;
        f = tio_open(a.in, &oo);
        if (f && tio_file_format(f) != TIO_FORMAT_RAW)
            status = raw_options_error(a.in, f);
        else
            status = usage_error("convert: a raw input needs both --input-dtype and --shape");
        tio_close(f);
        return status;
    }
    if (a.raw) {
        /* detected by content only: a raw file may have any name */
        oo.raw = &a.layout;
    }
    f = tio_open(a.in, &oo);
    if (f && a.raw && tio_file_format(f) != TIO_FORMAT_RAW) {
        status = raw_options_error(a.in, f);
        tio_close(f);
        return status;
    }
    if (!f) {
        if (check_inputs_unchanged() != EXIT_OK)
            return EXIT_IO;
        if (tr_last_status() == TR_ERR_INVALID)
            return usage_error("convert: %s", tr_last_error());
        msg_error(a.in, "%s", tr_last_error());
        return exit_for_status(tr_last_status());
    }
    status = choose(&a, f, out_format, &first, &count);
    /* the output receives every tensor of a collection */
    collection = !a.key && out_format == TIO_FORMAT_SAFETENSORS &&
                 (tio_file_format(f) == TIO_FORMAT_SAFETENSORS ||
                  tio_file_format(f) == TIO_FORMAT_NPZ);
    if (status == EXIT_OK && a.name && out_format != TIO_FORMAT_SAFETENSORS)
        status = usage_error("convert: --name names the tensor of a .safetensors output; %s "
                             "is %s", a.out, tio_format_name(out_format));
    else if (status == EXIT_OK && a.name && count != 1)
        status = usage_error("convert: --name names one tensor, and %s holds %zu (pick one "
                             "with --key)", a.in, count);
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
        status = copy(&a, f, out_format, out_compression, first, count, collection);
        tr_scope_end(scope, NULL, 0);
    }
    tio_close(f);
    return status;
}
