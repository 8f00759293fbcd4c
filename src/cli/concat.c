/*
 * concat.c - `tensorrun concat OUT IN...`: tensor files joined along one
 * dimension, streamed: each input is read a run at a time (in place when
 * mapped) and its runs go out in the output's order, so that memory is a
 * run per input and one output buffer whatever the sizes.  Safetensors
 * files are joined name by name.  The output is atomic, as every output.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "msg.h"
#include "tensor_reader.h"
#include "tensorrun_io.h"

/* Elements read from an input at a time, and the output buffer. */
#define RUN (INT64_C(1) << 20)
#define BUFFER_BYTES (UINT64_C(4) << 20)

struct concat_args {
    const char *out;
    char **ins;
    int nins;
    int64_t dim;
    enum tr_dtype dtype;            /* TR_DTYPE_COUNT: the inputs' own */
    enum tio_format format;         /* of the output; UNKNOWN: from its name */
    bool zstd;
    int level;
    bool fsync;
    uint64_t memory_limit;
    bool raw;
    struct tio_raw_layout layout;
    bool has_dtype, has_shape;
};

struct input {
    const char *path;
    struct tio_file *f;
    bool collection;
};

/* One tensor of the output: the input tensor of each file it joins. */
struct joined {
    const char *name;
    size_t *index;                  /* in each input */
    enum tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int dim;                        /* joined along */
};

static void print_help(void)
{
    fputs("Usage: tensorrun concat OUT IN... [OPTIONS]\n"
          "\n"
          "Join the tensors of IN... along one dimension into OUT, in the order given,\n"
          "streaming: memory is a few MiB whatever the sizes.  Every dimension but the\n"
          "joined one must match.  .safetensors (and .npz) inputs are joined name by name\n"
          "into a .safetensors output.  Inputs may be '-' or pipes, and any of them zstd.\n"
          "\n"
          "Options:\n"
          "  --dim D             the dimension joined (default 0; negative counts from the end)\n"
          "  --dtype T           the output dtype (inputs of different dtypes need it); for\n"
          "                      collections, floating-point tensors only, as in convert\n"
          "  --format F          the output format: npy, safetensors or raw, each optionally\n"
          "                      followed by .zst\n"
          "  --level N           zstd compression level (default 3)\n"
          "  --memory-limit SIZE cap on the pool's bytes\n"
          "  --input-dtype T     the raw inputs' dtype\n"
          "  --shape D0,D1,...   the raw inputs' shape\n"
          "  --fsync             flush the output and its directory to disk first\n"
          "\n"
          "Exit status: 0 success, 2 usage error, 4 a missing or malformed file, or shapes\n"
          "or dtypes that do not line up, 5 out of memory.\n",
          stdout);
}

static int parse_args(int argc, char **argv, struct concat_args *a)
{
    enum { OPT_DIM = 256, OPT_DTYPE, OPT_FORMAT, OPT_LEVEL, OPT_MEMORY_LIMIT, OPT_INPUT_DTYPE,
           OPT_SHAPE, OPT_FSYNC };
    static const struct option options[] = {
        {"dim", required_argument, NULL, OPT_DIM},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"level", required_argument, NULL, OPT_LEVEL},
        {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
        {"input-dtype", required_argument, NULL, OPT_INPUT_DTYPE},
        {"shape", required_argument, NULL, OPT_SHAPE},
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
        case OPT_DIM:
            if (!parse_int(optarg, -TR_MAX_DIMS, TR_MAX_DIMS - 1, &a->dim))
                return usage_error("concat: --dim: '%s' is not a dimension (-%d to %d)", optarg,
                                   TR_MAX_DIMS, TR_MAX_DIMS - 1);
            break;
        case OPT_DTYPE:
            if (tr_dtype_parse(optarg, &a->dtype) != TR_OK)
                return usage_error("concat: --dtype: unknown dtype '%s'", optarg);
            break;
        case OPT_FORMAT:
            if (!parse_output_format(optarg, &a->format, &a->zstd) ||
                a->format == TIO_FORMAT_NPZ)
                return usage_error("concat: --format: unknown format '%s' (expected npy, "
                                   "safetensors or raw, each optionally followed by .zst)",
                                   optarg);
            break;
        case OPT_LEVEL:
            if (!parse_int(optarg, -7, 22, &v))
                return usage_error("concat: --level: '%s' is not a level from -7 to 22",
                                   optarg);
            a->level = (int)v;
            break;
        case OPT_MEMORY_LIMIT:
            if (!parse_size(optarg, &a->memory_limit) || a->memory_limit == 0)
                return usage_error("concat: --memory-limit: '%s' is not a size (such as 512M, "
                                   "2G or 1.5GiB)", optarg);
            warn_memory_limit(optarg, a->memory_limit, true);
            break;
        case OPT_INPUT_DTYPE:
            if (tr_dtype_parse(optarg, &a->layout.dtype) != TR_OK)
                return usage_error("concat: --input-dtype: unknown dtype '%s'", optarg);
            a->has_dtype = true;
            break;
        case OPT_SHAPE:
            if (!parse_int_list(optarg, a->layout.shape, TR_MAX_DIMS, &n, false))
                return usage_error("concat: --shape: '%s' is not a list of at most %d sizes "
                                   "like 1024,768", optarg, TR_MAX_DIMS);
            a->layout.ndim = n;
            a->has_shape = true;
            break;
        case OPT_FSYNC:
            a->fsync = true;
            break;
        case 'h':
            print_help();
            return EXIT_OK;
        default:
            return option_error("concat", c, argc, argv, options, false);
        }
    }
    if (argc - optind < 2)
        return usage_error("concat: expected OUT and at least one IN, got %d argument%s",
                           argc - optind, argc - optind == 1 ? "" : "s");
    a->out = argv[optind];
    a->ins = argv + optind + 1;
    a->nins = argc - optind - 1;
    a->raw = a->has_dtype || a->has_shape;
    if (a->raw && !(a->has_dtype && a->has_shape))
        return usage_error("concat: raw inputs need both --input-dtype and --shape");
    return EXIT_OK;
}

static int open_input(const struct concat_args *a, struct input *in, const char *path)
{
    struct tio_open_options oo = {.defer_data = true, .raw = a->raw ? &a->layout : NULL};
    enum tio_format by_name;
    enum tio_compression compression;

    in->path = path;
    if (strcmp(path, "-") == 0 && stdin_is_terminal("concat"))
        return EXIT_USAGE;
    tio_format_from_path(path, &by_name, &compression);
    if (by_name == TIO_FORMAT_RAW && !a->raw)
        return usage_error("concat: %s is raw: describe it with --input-dtype and --shape",
                           path);
    in->f = tio_open(path, &oo);
    if (!in->f) {
        if (check_inputs_unchanged() != EXIT_OK)
            return EXIT_IO;
        msg_error(path, "%s", tr_last_error());
        return tr_last_status() == TR_ERR_OOM ? EXIT_OOM : EXIT_IO;
    }
    in->collection = tio_file_format(in->f) == TIO_FORMAT_SAFETENSORS ||
                     tio_file_format(in->f) == TIO_FORMAT_NPZ;
    return EXIT_OK;
}

/* "tensor 'w': " for a named tensor, "" otherwise: what a message is
 * about. */
static const char *which(const struct tio_entry *e, char *buf, size_t size)
{
    if (e->name)
        snprintf(buf, size, "tensor '%s': ", e->name);
    else
        buf[0] = '\0';
    return buf;
}

/* How a message names the first file's side: "a.npy's is" for a single
 * tensor, "in a.safetensors it is" for a named one. */
static const char *theirs(const struct tio_entry *e, const char *path, const char *verb,
                          char *buf, size_t size)
{
    if (e->name)
        snprintf(buf, size, "in %s it %s", path, verb);
    else
        snprintf(buf, size, "%s's %s", path, verb);
    return buf;
}

/* Checks that tensor j lines up in every input and fills in its output
 * shape and dtype; EXIT_OK or EXIT_IO, said. */
static int line_up(const struct concat_args *a, const struct input *ins, bool by_name,
                   struct joined *j)
{
    const struct tio_entry *first = tio_file_entry(ins[0].f, j->index[0]);
    char w[300], w0[300];
    int64_t dim = a->dim;

    for (int i = 0; i < a->nins; i++) {
        const struct tio_entry *e = tio_file_entry(ins[i].f, j->index[i]);
        if (e->wide_ndim) {
            msg_error(ins[i].path, "%s%d dimensions, more than the %d tensorrun takes",
                      which(e, w, sizeof w), e->wide_ndim, TR_MAX_DIMS);
            return EXIT_IO;
        }
        if (!e->supported) {
            msg_error(ins[i].path, "%sdtype '%s', which tensorrun cannot join",
                      which(e, w, sizeof w), e->dtype_text);
            return EXIT_IO;
        }
    }
    if (first->ndim == 0) {
        msg_error(ins[0].path, "%sa 0-d tensor has no dimension to join along",
                  which(first, w, sizeof w));
        return EXIT_IO;
    }
    if (dim < -first->ndim || dim >= first->ndim) {
        msg_error(ins[0].path, "%s%d dimensions: there is no dimension %lld to join along",
                  which(first, w, sizeof w), first->ndim, (long long)dim);
        return EXIT_IO;
    }
    j->dim = (int)(dim < 0 ? dim + first->ndim : dim);
    j->ndim = first->ndim;
    memcpy(j->shape, first->shape, sizeof j->shape);
    j->dtype = first->dtype;
    for (int i = 1; i < a->nins; i++) {
        const struct tio_entry *e = tio_file_entry(ins[i].f, j->index[i]);
        if (e->ndim != first->ndim) {
            msg_error(ins[i].path, "%s%d dimensions, and %s%s%s %d", which(e, w, sizeof w),
                      e->ndim, first->name ? "in " : "", ins[0].path,
                      first->name ? " it has" : " has", first->ndim);
            return EXIT_IO;
        }
        for (int d = 0; d < e->ndim; d++) {
            if (d == j->dim || e->shape[d] == first->shape[d])
                continue;
            msg_error(ins[i].path, "%sdimension %d is %lld, and %s %lld (only dimension %d, "
                                   "joined, may differ)",
                      which(e, w, sizeof w), d, (long long)e->shape[d],
                      theirs(first, ins[0].path, "is", w0, sizeof w0),
                      (long long)first->shape[d], j->dim);
            return EXIT_IO;
        }
        if (__builtin_add_overflow(j->shape[j->dim], e->shape[j->dim], &j->shape[j->dim])) {
            msg_error(ins[i].path, "the joined dimension passes 2^63");
            return EXIT_IO;
        }
        if (e->dtype != first->dtype && a->dtype == TR_DTYPE_COUNT) {
            msg_error(ins[i].path, "%sthe dtype is %s, and %s %s", which(e, w, sizeof w),
                      tr_dtype_name(e->dtype), theirs(first, ins[0].path, "is", w0, sizeof w0),
                      tr_dtype_name(first->dtype));
            if (!by_name || tr_dtype_is_float(first->dtype))
                msg_hint("give --dtype to join them as one dtype");
            else
                msg_hint("--dtype converts a collection's floating-point tensors only: convert "
                         "this one to %s first (tensorrun convert --dtype-all)",
                         tr_dtype_name(first->dtype));
            return EXIT_IO;
        }
    }
    /* as convert: a collection's integer and bool tensors keep their dtype */
    if (a->dtype != TR_DTYPE_COUNT && (!by_name || tr_dtype_is_float(first->dtype)))
        j->dtype = a->dtype;
    if (j->dtype != a->dtype) {
        for (int i = 1; i < a->nins; i++) {
            const struct tio_entry *e = tio_file_entry(ins[i].f, j->index[i]);
            if (e->dtype != first->dtype) {
                msg_error(ins[i].path, "%sthe dtype is %s, and %s %s (--dtype converts a "
                                       "collection's floating-point tensors only)",
                          which(e, w, sizeof w), tr_dtype_name(e->dtype),
                          theirs(first, ins[0].path, "is", w0, sizeof w0),
                          tr_dtype_name(first->dtype));
                return EXIT_IO;
            }
        }
    }
    return EXIT_OK;
}

/* The output's tensors: the one of each input, or name by name. */
static struct joined *plan_joins(const struct concat_args *a, const struct input *ins,
                                 size_t *count, bool *by_name, int *status)
{
    bool all = true;
    size_t n;
    struct joined *js;

    for (int i = 0; i < a->nins; i++)
        all &= ins[i].collection;
    *by_name = all;
    n = all ? tio_file_count(ins[0].f) : 1;
    for (int i = 0; i < a->nins && !all; i++) {
        if (tio_file_count(ins[i].f) != 1) {
            *status = usage_error("concat: %s holds %zu tensors: several tensors are joined "
                                  "name by name, and only when every input is a .safetensors "
                                  "or .npz file", ins[i].path, tio_file_count(ins[i].f));
            return NULL;
        }
    }
    js = calloc(n ? n : 1, sizeof *js);
    for (size_t t = 0; js && t < n; t++) {
        js[t].index = calloc((size_t)a->nins, sizeof *js[t].index);
        if (!js[t].index) {
            *count = t;
            free(js);
            js = NULL;
        }
    }
    if (!js) {
        msg_error(NULL, "out of memory");
        *status = EXIT_OOM;
        return NULL;
    }
    *count = n;
    for (size_t t = 0; t < n; t++) {
        js[t].name = all ? tio_file_entry(ins[0].f, t)->name : NULL;
        js[t].index[0] = t;
    }
    for (int i = 1; all && i < a->nins; i++) {
        for (size_t t = 0; t < n; t++) {
            ptrdiff_t k = tio_file_find(ins[i].f, js[t].name);
            if (k < 0) {
                msg_error(ins[i].path, "no tensor '%s', which %s holds", js[t].name, ins[0].path);
                *status = EXIT_IO;
                return js;
            }
            js[t].index[i] = (size_t)k;
        }
        for (size_t k = 0; k < tio_file_count(ins[i].f); k++) {
            const char *name = tio_file_entry(ins[i].f, k)->name;
            if (tio_file_find(ins[0].f, name) < 0) {
                msg_error(ins[i].path, "tensor '%s' is not in %s", name, ins[0].path);
                *status = EXIT_IO;
                return js;
            }
        }
    }
    for (size_t t = 0; t < n && *status == EXIT_OK; t++)
        *status = line_up(a, ins, all, &js[t]);
    return js;
}

/* Input i's tensors in the output's order, to tensor_reader_order;
 * EXIT_OK or the failure's status, said. */
static int order_stream(const struct input *in, int i, const struct joined *js,
                        const size_t *order, size_t n)
{
    size_t *index = calloc(n ? n : 1, sizeof *index);
    tr_status st;

    if (!index) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    for (size_t t = 0; t < n; t++)
        index[t] = js[order[t]].index[i];
    st = tensor_reader_order(in->f, index, n);
    free(index);
    if (st == TR_OK)
        return EXIT_OK;
    msg_error(in->path, "%s", tr_last_error());
    return st == TR_ERR_OOM ? EXIT_OOM : EXIT_IO;
}

/* The output's bytes, gathered into a buffer so that small runs (a join
 * along a late dimension) do not become small writes. */
struct appender {
    struct tio_output *out;
    char *buf;
    uint64_t used, cap;
};

static tr_status flush(struct appender *ap)
{
    tr_status s = ap->used ? tio_output_append(ap->out, ap->buf, (size_t)ap->used) : TR_OK;

    ap->used = 0;
    return s;
}

static tr_status append(struct appender *ap, const void *p, uint64_t bytes)
{
    if (ap->used + bytes > ap->cap)
        TR_FORWARD_IF_ERROR(flush(ap));
    if (bytes >= ap->cap)
        return tio_output_append(ap->out, p, (size_t)bytes);
    memcpy(ap->buf + ap->used, p, (size_t)bytes);
    ap->used += bytes;
    return TR_OK;
}

/* Elements of an input's tensor from the joined dimension on. */
static int64_t inner_of(const struct tio_entry *e, int dim)
{
    int64_t n = 1;

    for (int d = dim; d < e->ndim; d++)
        n *= e->shape[d];
    return n;
}

/* Writes tensor j: for each index of the dimensions before the joined
 * one, each input's slab in turn.  Readers stay open across the slabs
 * when there are several; along dimension 0 there is one slab each, and
 * one reader at a time.  failed is the path to blame. */
static tr_status write_joined(const struct concat_args *a, const struct input *ins,
                              const struct joined *j, uint64_t drop_above, struct appender *ap,
                              const char **failed)
{
    struct tensor_reader **r = calloc((size_t)a->nins, sizeof *r);
    int64_t outer = 1;
    size_t item = tr_dtype_size(j->dtype);
    tr_status s = TR_OK;

    if (!r)
        return tr_set_error(TR_ERR_OOM, "out of memory");
    for (int d = 0; d < j->dim; d++)
        outer *= j->shape[d];
    for (int64_t o = 0; o < outer && s == TR_OK; o++) {
        for (int i = 0; i < a->nins && s == TR_OK; i++) {
            const struct tio_entry *e = tio_file_entry(ins[i].f, j->index[i]);
            int64_t inner = inner_of(e, j->dim);
            *failed = ins[i].path;
            if (!r[i] && inner > 0) {
                r[i] = tensor_reader_open(ins[i].f, j->index[i], ins[i].path, j->dtype,
                                          inner < RUN ? inner : RUN, drop_above);
                if (!r[i]) {
                    s = tr_last_status();
                    break;
                }
            }
            for (int64_t done = 0; done < inner && s == TR_OK;) {
                int64_t n = inner - done < RUN ? inner - done : RUN;
                const void *p = tensor_reader_next(r[i], n);
                s = p ? TR_OK : tr_last_status();
                if (s == TR_OK) {
                    *failed = a->out;
                    s = append(ap, p, (uint64_t)n * item);
                    if (s == TR_OK)
                        *failed = ins[i].path;
                }
                done += n;
            }
            if (outer == 1) {
                tensor_reader_close(r[i]);
                r[i] = NULL;
            }
        }
    }
    for (int i = 0; i < a->nins; i++)
        tensor_reader_close(r[i]);
    free(r);
    return s;
}

/* Writes every tensor, in the output's order, and commits. */
static int write_output(const struct concat_args *a, const struct input *ins,
                        const struct joined *js, size_t n, enum tio_format format,
                        enum tio_compression compression, uint64_t drop_above)
{
    struct tio_write_options wo = {.format = format, .compression = compression,
                                   .level = a->level, .fsync = a->fsync};
    const struct tio_file *f0 = ins[0].f;
    size_t nmeta = tio_file_metadata_count(f0);
    const char **names = calloc(n, sizeof *names), **keys = calloc(nmeta + 1, sizeof *keys);
    const char **values = calloc(nmeta + 1, sizeof *values);
    enum tr_dtype *dtypes = calloc(n, sizeof *dtypes);
    int *ndims = calloc(n, sizeof *ndims);
    int64_t (*shapes)[TR_MAX_DIMS] = calloc(n, sizeof *shapes);
    size_t *order = calloc(n, sizeof *order);
    struct tio_metadata meta = {nmeta, keys, values};
    struct tr_tensor *buffer = NULL;
    struct appender ap = {0};
    struct tio_output *out = NULL;
    const char *failed = a->out;
    int status = EXIT_OK;
    tr_status s = TR_OK;

    if (!names || !keys || !values || !dtypes || !ndims || !shapes || !order)
        s = tr_set_error(TR_ERR_OOM, "out of memory");
    for (size_t t = 0; t < n && s == TR_OK; t++) {
        names[t] = js[t].name ? js[t].name : NULL;
        dtypes[t] = js[t].dtype;
        ndims[t] = js[t].ndim;
        memcpy(shapes[t], js[t].shape, sizeof shapes[t]);
    }
    for (size_t k = 0; k < nmeta && s == TR_OK; k++) {
        keys[k] = tio_file_metadata_key(f0, k);
        values[k] = tio_file_metadata_value(f0, k);
    }
    if (s == TR_OK) {
        /* no larger than the output's data: small files take a small block */
        uint64_t room = 0;
        for (size_t t = 0; t < n; t++) {
            uint64_t bytes = tr_dtype_size(js[t].dtype);
            for (int d = 0; d < js[t].ndim; d++) /* saturating at the buffer's size */
                bytes = bytes && (uint64_t)js[t].shape[d] > BUFFER_BYTES / bytes
                            ? BUFFER_BYTES
                            : bytes * (uint64_t)js[t].shape[d];
            room = room + bytes > BUFFER_BYTES ? BUFFER_BYTES : room + bytes;
        }
        buffer = tr_empty(TR_DTYPE_U8, 1, (int64_t[]){room ? (int64_t)room : 1}, TR_CPU);
        s = buffer ? TR_OK : tr_last_status();
        failed = NULL;
    }
    if (s == TR_OK) {
        failed = a->out;
        out = tio_output_open(a->out, &wo);
        s = out ? tio_output_begin(out, n, n == 1 && !js[0].name ? NULL : names, dtypes, ndims,
                                   (const int64_t(*)[TR_MAX_DIMS])shapes,
                                   tio_file_has_metadata(f0) ? &meta : NULL, order)
                : tr_last_status();
    }
    for (int i = 0; i < a->nins && s == TR_OK && status == EXIT_OK; i++)
        status = order_stream(&ins[i], i, js, order, n);
    ap.out = out;
    ap.buf = buffer ? tr_tensor_data_mut(buffer) : NULL;
    ap.cap = buffer ? (uint64_t)tr_tensor_nbytes(buffer) : 0;
    for (size_t t = 0; t < n && s == TR_OK && status == EXIT_OK; t++)
        s = write_joined(a, ins, &js[order[t]], drop_above, &ap, &failed);
    if (s == TR_OK && status == EXIT_OK) {
        failed = a->out;
        s = flush(&ap);
        if (s == TR_OK)
            s = tio_output_end(out);
    }
    for (int i = 0; i < a->nins && s == TR_OK && status == EXIT_OK; i++) {
        failed = ins[i].path;
        s = tio_file_finish(ins[i].f);
    }
    if (status == EXIT_OK && check_inputs_unchanged() != EXIT_OK) {
        status = EXIT_IO;
    } else if (status == EXIT_OK) {
        if (s == TR_OK) {
            failed = a->out;
            hold_interrupts();
            s = tio_output_commit(out);
        }
        if (s != TR_OK && failed == a->out && strcmp(a->out, "-") == 0)
            exit_if_stdout_closed();
        if (s != TR_OK) {
            msg_error(failed, "%s", tr_last_error());
            status = s == TR_ERR_INVALID && failed == a->out ? EXIT_USAGE
                     : s == TR_ERR_OOM                        ? EXIT_OOM
                                                              : EXIT_IO;
        }
    }
    tio_output_close(out);
    tr_release(buffer);
    free(order);
    free(shapes);
    free(ndims);
    free(dtypes);
    free(values);
    free(keys);
    free(names);
    return status;
}

int cmd_concat(int argc, char **argv)
{
    struct concat_args a;
    struct input *ins = NULL;
    struct joined *js = NULL;
    struct tr_scope *scope;
    enum tio_format format;
    enum tio_compression compression;
    size_t njoined = 0;
    bool by_name = false;
    uint64_t drop_above;
    int status = parse_args(argc, argv, &a), stdins = 0;

    if (status != EXIT_OK || !a.out)
        return status;
    for (int i = 0; i < a.nins; i++)
        stdins += strcmp(a.ins[i], "-") == 0;
    if (stdins > 1)
        return usage_error("concat: standard input can be only one of the inputs");
    tio_format_from_path(a.out, &format, &compression);
    if (a.format != TIO_FORMAT_UNKNOWN) {
        format = a.format;
        compression = a.zstd ? TIO_COMPRESSION_ZSTD : compression;
    }
    if (format == TIO_FORMAT_UNKNOWN && strcmp(a.out, "-") == 0)
        format = TIO_FORMAT_NPY;
    if (format == TIO_FORMAT_UNKNOWN)
        return usage_error("concat: cannot tell the format of %s from its name (use --format "
                           "npy, safetensors or raw)", a.out);
    if (format == TIO_FORMAT_NPZ)
        return usage_error("concat: %s: .npz is read only in tensorrun: write .safetensors",
                           a.out);
    if (format == TIO_FORMAT_NPY && a.dtype == TR_DTYPE_BF16)
        return usage_error("concat: .npy cannot hold bf16 (NumPy has no such dtype)");
    if (!drop_behind_threshold(&drop_above))
        return EXIT_USAGE;
    if (a.memory_limit && tr_memory_set_limit(TR_CPU, a.memory_limit) != TR_OK) {
        msg_error(NULL, "%s", tr_last_error());
        return EXIT_RUNTIME;
    }
    ins = calloc((size_t)a.nins, sizeof *ins);
    if (!ins) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    scope = tr_scope_begin();
    for (int i = 0; i < a.nins && status == EXIT_OK; i++)
        status = open_input(&a, &ins[i], a.ins[i]);
    if (status == EXIT_OK)
        js = plan_joins(&a, ins, &njoined, &by_name, &status);
    if (status == EXIT_OK && by_name && format != TIO_FORMAT_SAFETENSORS && njoined != 1)
        status = usage_error("concat: %s is %s, which holds one tensor, and the inputs hold %zu "
                             "(write .safetensors)", a.out, tio_format_name(format), njoined);
    for (size_t t = 0; status == EXIT_OK && t < njoined && format == TIO_FORMAT_NPY; t++)
        if (js[t].dtype == TR_DTYPE_BF16)
            status = usage_error("concat: .npy cannot hold bf16: give --dtype f32, or write "
                                 ".safetensors");
    if (status == EXIT_OK)
        status = write_output(&a, ins, js, njoined, format, compression, drop_above);
    for (size_t t = 0; js && t < njoined; t++)
        free(js[t].index);
    free(js);
    for (int i = 0; i < a.nins; i++)
        tio_close(ins[i].f);
    free(ins);
    tr_scope_end(scope, NULL, 0);
    return status;
}
