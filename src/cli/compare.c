/*
 * compare.c - `tensorrun compare A B`: whether the tensors of A (the
 * result) are close to those of B (the reference), NumPy's isclose rule
 * with PyTorch's default tolerances, read a run of elements at a time
 * from both files in parallel, so that any size compares in a few MiB.
 * Exit 0 when everything is close, 1 when anything differs.
 */
#include "config.h"

#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "closeness.h"
#include "msg.h"
#include "tensor_reader.h"
#include "tensorrun_io.h"

/* Elements read from each file at a time: 4 MiB of f32. */
#define RUN (INT64_C(1) << 20)
#define MAX_REPORT_MAX 1000000

struct compare_args {
    const char *a, *b;
    bool has_rtol, has_atol;
    double rtol, atol;
    bool exact, no_equal_nan, ignore_dtype, json, quiet;
    const char **keys;
    size_t nkeys;
    int64_t max_report;
    int threads;
    uint64_t memory_limit;
    bool raw;
    struct tio_raw_layout layout;
    bool has_dtype, has_shape;
    int strides_count;
};

struct side {
    const char *path;
    struct tio_file *f;
    bool collection;             /* safetensors or .npz: tensors have names */
};

/* A tensor of A and its counterpart in B: -1 where one has none. */
struct pair {
    const char *name;
    ptrdiff_t a, b;
};

enum verdict { CLOSE, VALUES, DTYPE, SHAPE, ONLY_A, ONLY_B };

static const char *const verdict_words[] = {"close", "values", "dtype", "shape", "only_in_a",
                                            "only_in_b"};

struct outcome {
    enum verdict verdict;
    enum tr_dtype as;            /* the dtype the values were compared in */
    struct tolerance tol;
    struct closeness c;
    int64_t numel;
};

static void print_help(void)
{
    fputs("Usage: tensorrun compare A B [OPTIONS]\n"
          "\n"
          "Whether the tensors of A (the result) are close to those of B (the reference):\n"
          "|a - b| <= atol + rtol * |b| for every element, in f64.  Single-tensor files\n"
          "compare their one tensor; .safetensors and .npz files compare every tensor by\n"
          "name.  Either file may be '-' or a pipe, and either may be zstd-compressed.\n"
          "\n"
          "Options:\n"
          "  --rtol R            relative tolerance (default by dtype: f16 1e-3, bf16 1.6e-2,\n"
          "                      f32 1.3e-6, f64 1e-7; integers and bool 0)\n"
          "  --atol A            absolute tolerance (f16, bf16, f32 1e-5, f64 1e-7; else 0)\n"
          "  --exact             the same bits (-0.0 differs from 0.0, NaNs by payload)\n"
          "  --no-equal-nan      NaN differs from NaN (by default they are equal)\n"
          "  --key K             compare only the tensor K (repeatable)\n"
          "  --ignore-dtype      compare values in f64 whatever the dtypes\n"
          "  --max-report N      differing elements listed per tensor (default 10)\n"
          "  --json              one JSON object per tensor, then one summary object\n"
          "  -q, --quiet         print nothing: the exit status says it\n"
          "  --threads N         CPU threads (default: every online core)\n"
          "  --memory-limit SIZE cap on the pool's bytes (the runs read from pipes and .zst)\n"
          "  --input-dtype T     a raw input's dtype\n"
          "  --shape D0,D1,...   a raw input's shape\n"
          "  --offset BYTES      where a raw input's first element is (default 0)\n"
          "  --strides S0,S1,... a raw input's strides in elements (default C order)\n"
          "\n"
          "Exit status: 0 everything is close, 1 something differs, 2 usage error,\n"
          "4 a missing or malformed file, 5 out of memory.\n",
          stdout);
}

/* A tolerance: a finite number, at least 0. */
static bool parse_tolerance(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);

    if (end == text || *end != '\0' || !isfinite(v) || v < 0)
        return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, struct compare_args *a)
{
    enum { OPT_RTOL = 256, OPT_ATOL, OPT_EXACT, OPT_NO_EQUAL_NAN, OPT_KEY, OPT_IGNORE_DTYPE,
           OPT_MAX_REPORT, OPT_JSON, OPT_THREADS, OPT_MEMORY_LIMIT, OPT_INPUT_DTYPE, OPT_SHAPE,
           OPT_OFFSET, OPT_STRIDES };
    static const struct option options[] = {
        {"rtol", required_argument, NULL, OPT_RTOL},
        {"atol", required_argument, NULL, OPT_ATOL},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"no-equal-nan", no_argument, NULL, OPT_NO_EQUAL_NAN},
        {"key", required_argument, NULL, OPT_KEY},
        {"ignore-dtype", no_argument, NULL, OPT_IGNORE_DTYPE},
        {"max-report", required_argument, NULL, OPT_MAX_REPORT},
        {"json", no_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, 'q'},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
        {"input-dtype", required_argument, NULL, OPT_INPUT_DTYPE},
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"offset", required_argument, NULL, OPT_OFFSET},
        {"strides", required_argument, NULL, OPT_STRIDES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t v;
    int n;

    memset(a, 0, sizeof *a);
    a->max_report = 10;
    a->keys = calloc((size_t)argc, sizeof *a->keys);
    if (!a->keys) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, ":hq", options, NULL);
        if (c == -1)
            break;
        switch (c) {
        case OPT_RTOL:
        case OPT_ATOL:
            if (!parse_tolerance(optarg, c == OPT_RTOL ? &a->rtol : &a->atol))
                return usage_error("compare: --%s: '%s' is not a tolerance (a number, at "
                                   "least 0)", c == OPT_RTOL ? "rtol" : "atol", optarg);
            *(c == OPT_RTOL ? &a->has_rtol : &a->has_atol) = true;
            break;
        case OPT_EXACT:
            a->exact = true;
            break;
        case OPT_NO_EQUAL_NAN:
            a->no_equal_nan = true;
            break;
        case OPT_KEY: {
            bool seen = false;
            if (optarg[0] == '\0')
                return usage_error("compare: --key: a tensor's name cannot be empty");
            for (size_t k = 0; k < a->nkeys && !seen; k++)
                seen = strcmp(a->keys[k], optarg) == 0;
            if (!seen) /* a key given twice is compared once */
                a->keys[a->nkeys++] = optarg;
            break;
        }
        case OPT_IGNORE_DTYPE:
            a->ignore_dtype = true;
            break;
        case OPT_MAX_REPORT:
            if (!parse_int(optarg, 0, MAX_REPORT_MAX, &a->max_report))
                return usage_error("compare: --max-report: '%s' is not a count from 0 to %d",
                                   optarg, MAX_REPORT_MAX);
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case 'q':
            a->quiet = true;
            break;
        case OPT_THREADS:
            if (!parse_int(optarg, 1, 4096, &v))
                return usage_error("compare: --threads: '%s' is not a number of threads (1 to "
                                   "4096)", optarg);
            a->threads = (int)v;
            break;
        case OPT_MEMORY_LIMIT:
            if (!parse_size(optarg, &a->memory_limit) || a->memory_limit == 0)
                return usage_error("compare: --memory-limit: '%s' is not a size (such as 512M, "
                                   "2G or 1.5GiB)", optarg);
            warn_memory_limit(optarg, a->memory_limit, true);
            break;
        case OPT_INPUT_DTYPE:
            if (tr_dtype_parse(optarg, &a->layout.dtype) != TR_OK)
                return usage_error("compare: --input-dtype: unknown dtype '%s'", optarg);
            a->has_dtype = true;
            break;
        case OPT_SHAPE:
            if (!parse_int_list(optarg, a->layout.shape, TR_MAX_DIMS, &n, false))
                return usage_error("compare: --shape: '%s' is not a list of at most %d sizes "
                                   "like 1024,768", optarg, TR_MAX_DIMS);
            a->layout.ndim = n;
            a->has_shape = true;
            break;
        case OPT_OFFSET:
            if (!parse_int(optarg, 0, INT64_MAX, &v))
                return usage_error("compare: --offset: '%s' is not a byte count", optarg);
            a->layout.offset = v;
            a->raw = true;
            break;
        case OPT_STRIDES:
            if (!parse_int_list(optarg, a->layout.strides, TR_MAX_DIMS, &n, true))
                return usage_error("compare: --strides: '%s' is not a list of strides",
                                   optarg);
            a->layout.has_strides = true;
            a->strides_count = n;
            break;
        case 'h':
            print_help();
            return EXIT_OK;
        default:
            return option_error("compare", c, argc, argv, options, false);
        }
    }
    if (argc - optind != 2)
        return usage_error("compare: expected A and B, got %d argument%s", argc - optind,
                           argc - optind == 1 ? "" : "s");
    a->a = argv[optind];
    a->b = argv[optind + 1];
    if (a->exact && (a->has_rtol || a->has_atol))
        return usage_error("compare: --exact compares bits; it takes no --rtol or --atol");
    if (a->exact && a->ignore_dtype)
        return usage_error("compare: --exact compares bits, which --ignore-dtype cannot: "
                           "give one of them");
    if (a->exact && a->no_equal_nan)
        return usage_error("compare: --exact compares bits, NaNs too: --no-equal-nan has "
                           "nothing to change");
    a->raw |= a->has_dtype || a->has_shape || a->layout.has_strides;
    if (a->raw && !(a->has_dtype && a->has_shape))
        return usage_error("compare: a raw input needs both --input-dtype and --shape");
    if (a->raw && a->layout.has_strides && a->strides_count != a->layout.ndim)
        return usage_error("compare: --strides gives %d strides for a shape of %d dimensions",
                           a->strides_count, a->layout.ndim);
    return EXIT_OK;
}

/* Opens one side; EXIT_OK or the failure's status, said. */
static int open_side(const struct compare_args *a, struct side *s, const char *path)
{
    struct tio_open_options oo = {.defer_data = true, .raw = a->raw ? &a->layout : NULL};
    enum tio_format by_name;
    enum tio_compression compression;

    s->path = path;
    if (strcmp(path, "-") == 0 && stdin_is_terminal("compare"))
        return EXIT_USAGE;
    tio_format_from_path(path, &by_name, &compression);
    if (by_name == TIO_FORMAT_RAW && !a->raw)
        return usage_error("compare: %s is raw: describe it with --input-dtype and --shape",
                           path);
    s->f = tio_open(path, &oo);
    if (!s->f) {
        if (check_inputs_unchanged() != EXIT_OK)
            return EXIT_IO;
        msg_error(path, "%s", tr_last_error());
        return tr_last_status() == TR_ERR_OOM ? EXIT_OOM : EXIT_IO;
    }
    s->collection = tio_file_format(s->f) == TIO_FORMAT_SAFETENSORS ||
                    tio_file_format(s->f) == TIO_FORMAT_NPZ;
    return EXIT_OK;
}

static ptrdiff_t find(const struct side *s, const char *name)
{
    return s->collection ? tio_file_find(s->f, name) : -1;
}

/* The one tensor a side holds, or the one --key names; -1 after saying
 * why not (with *status). */
static ptrdiff_t single(const struct compare_args *a, const struct side *s, int *status)
{
    ptrdiff_t i;

    if (a->nkeys == 1 && s->collection) {
        i = tio_file_find(s->f, a->keys[0]);
        if (i < 0) {
            msg_error(s->path, "no tensor '%s'", a->keys[0]);
            *status = EXIT_IO;
        }
        return i;
    }
    if (tio_file_count(s->f) == 1)
        return 0;
    *status = usage_error("compare: %s holds %zu tensors and the other file one: pick one "
                          "with --key", s->path, tio_file_count(s->f));
    return -1;
}

/* Which tensors are compared with which: by name when both files name
 * them, else the one tensor of each.  *npairs 0 after a failure (status). */
static struct pair *pair_up(const struct compare_args *a, const struct side *sa,
                            const struct side *sb, size_t *npairs, int *status)
{
    size_t na = tio_file_count(sa->f), nb = tio_file_count(sb->f), n = 0;
    struct pair *p = calloc(na + nb + a->nkeys + 1, sizeof *p);

    *npairs = 0;
    if (!p) {
        msg_error(NULL, "out of memory");
        *status = EXIT_OOM;
        return NULL;
    }
    if (!sa->collection || !sb->collection) {
        if (a->nkeys > (sa->collection || sb->collection ? 1u : 0u)) {
            *status = usage_error("compare: --key picks %s of a .safetensors or .npz file",
                                  sa->collection || sb->collection ? "one tensor" : "tensors");
            free(p);
            return NULL;
        }
        p[0].a = sa->collection ? single(a, sa, status) : 0;
        p[0].b = p[0].a >= 0 ? (sb->collection ? single(a, sb, status) : 0) : -1;
        if (p[0].a < 0 || p[0].b < 0) {
            free(p);
            return NULL;
        }
        p[0].name = sa->collection ? tio_file_entry(sa->f, (size_t)p[0].a)->name
                  : sb->collection ? tio_file_entry(sb->f, (size_t)p[0].b)->name
                                   : sa->path;
        *npairs = 1;
        return p;
    }
    if (a->nkeys) {
        for (size_t k = 0; k < a->nkeys; k++) {
            p[n] = (struct pair){a->keys[k], find(sa, a->keys[k]), find(sb, a->keys[k])};
            if (p[n].a < 0 && p[n].b < 0) {
                msg_error(NULL, "no tensor '%s' in %s or %s", a->keys[k], sa->path, sb->path);
                *status = EXIT_IO;
                free(p);
                return NULL;
            }
            n++;
        }
    } else {
        for (size_t i = 0; i < na; i++) {
            const char *name = tio_file_entry(sa->f, i)->name;
            p[n++] = (struct pair){name, (ptrdiff_t)i, find(sb, name)};
        }
        for (size_t i = 0; i < nb; i++) {
            const char *name = tio_file_entry(sb->f, i)->name;
            if (find(sa, name) < 0)
                p[n++] = (struct pair){name, -1, (ptrdiff_t)i};
        }
    }
    *npairs = n;
    return p;
}

/* The tensors of one side that the pairs compare, in their order, to
 * tensor_reader_order; EXIT_OK or the failure's status, said. */
static int order_stream(const struct side *s, const struct pair *p, size_t n, bool side_a)
{
    size_t *index = calloc(n ? n : 1, sizeof *index), m = 0;
    tr_status st;

    if (!index) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i].a >= 0 && p[i].b >= 0)
            index[m++] = (size_t)(side_a ? p[i].a : p[i].b);
    st = tensor_reader_order(s->f, index, m);
    free(index);
    if (st == TR_OK)
        return EXIT_OK;
    msg_error(s->path, "%s", tr_last_error());
    return st == TR_ERR_OOM ? EXIT_OOM : EXIT_IO;
}

/* Whether two entries can be compared element by element, as dtype:
 * the verdict when they cannot. */
static enum verdict comparable(const struct compare_args *a, const struct tio_entry *ea,
                               const struct tio_entry *eb, struct tolerance *tol,
                               enum tr_dtype *dtype)
{
    double rtol_b, atol_b;

    if (ea->dtype != eb->dtype && !a->ignore_dtype)
        return DTYPE;
    if (ea->ndim != eb->ndim ||
        memcmp(ea->shape, eb->shape, (size_t)ea->ndim * sizeof *ea->shape) != 0)
        return SHAPE;
    closeness_default(ea->dtype, &tol->rtol, &tol->atol);
    closeness_default(eb->dtype, &rtol_b, &atol_b);
    /* --ignore-dtype: the looser of the two */
    tol->rtol = rtol_b > tol->rtol ? rtol_b : tol->rtol;
    tol->atol = atol_b > tol->atol ? atol_b : tol->atol;
    if (a->has_rtol)
        tol->rtol = a->rtol;
    if (a->has_atol)
        tol->atol = a->atol;
    tol->exact = a->exact;
    tol->equal_nan = !a->no_equal_nan;
    if (ea->dtype != eb->dtype)
        *dtype = TR_DTYPE_F64;
    else if (closeness_native(ea->dtype, tol))
        *dtype = ea->dtype;
    else
        *dtype = TR_DTYPE_F32; /* f16 and bf16 widen exactly */
    return CLOSE;
}

/* Compares the values of two tensors of count elements into c; EXIT_OK
 * or the failure's status, said. */
static int compare_values(const struct side *sa, size_t ia, const struct side *sb, size_t ib,
                          enum tr_dtype dtype, int64_t count, const struct tolerance *tol,
                          uint64_t drop_above, struct closeness *c)
{
    struct tensor_reader *ra = tensor_reader_open(sa->f, ia, sa->path, dtype, RUN, drop_above);
    struct tensor_reader *rb = ra ? tensor_reader_open(sb->f, ib, sb->path, dtype, RUN,
                                                       drop_above)
                                  : NULL;
    const char *failed = ra ? sb->path : sa->path;
    int threads = tr_num_threads();
    bool ok = ra && rb;

    for (int64_t pos = 0; ok && pos < count; pos += RUN) {
        int64_t n = count - pos < RUN ? count - pos : RUN;
        const void *pa = tensor_reader_next(ra, n), *pb = pa ? tensor_reader_next(rb, n) : NULL;
        failed = pa ? sb->path : sa->path;
        ok = pa && pb;
        if (ok && !closeness_add(c, dtype, pa, pb, n, pos, tol, threads)) {
            tr_set_error(TR_ERR_OOM, "out of memory");
            failed = NULL;
            ok = false;
        }
    }
    tensor_reader_close(ra);
    tensor_reader_close(rb);
    if (check_inputs_unchanged() != EXIT_OK)
        return EXIT_IO;
    if (ok)
        return EXIT_OK;
    msg_error(failed, "%s", tr_last_error());
    return tr_last_status() == TR_ERR_OOM ? EXIT_OOM : EXIT_IO;
}

/* ------------------------------------------------------------ reports */

/* "[17,4]": the row-major index at in shape. */
static const char *index_text(int64_t at, const struct tio_entry *e, char *buf, size_t size)
{
    int64_t idx[TR_MAX_DIMS];
    size_t used = 1;

    for (int d = e->ndim - 1; d >= 0; d--) {
        idx[d] = e->shape[d] ? at % e->shape[d] : 0;
        at = e->shape[d] ? at / e->shape[d] : 0;
    }
    snprintf(buf, size, "[");
    for (int d = 0; d < e->ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "",
                                 (long long)idx[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* Whether an integer item compared as dtype is signed, and its value. */
static bool is_signed_int(enum tr_dtype dtype)
{
    return dtype == TR_DTYPE_I8 || dtype == TR_DTYPE_I16 || dtype == TR_DTYPE_I32 ||
           dtype == TR_DTYPE_I64;
}

static int64_t signed_of(uint64_t bits, enum tr_dtype dtype)
{
    switch (dtype) {
    case TR_DTYPE_I8: return (int8_t)bits;
    case TR_DTYPE_I16: return (int16_t)bits;
    case TR_DTYPE_I32: return (int32_t)bits;
    default: return (int64_t)bits;
    }
}

/* One side of a difference, exactly: integers from their bits (f64 holds
 * only 53 of them), floats as compared. */
static long double exact_of(uint64_t bits, double v, enum tr_dtype as)
{
    if (tr_dtype_is_float(as))
        return v;
    return is_signed_int(as) ? (long double)signed_of(bits, as) : (long double)bits;
}

/* A value as the file's dtype shows it (compared as as): integers whole
 * and exact, f64 to 17 digits, others to 9, NaN without a sign. */
static const char *value_text(uint64_t bits, double v, enum tr_dtype shown, enum tr_dtype as,
                              char *buf, size_t size)
{
    if (!tr_dtype_is_float(as) && is_signed_int(as))
        snprintf(buf, size, "%lld", (long long)signed_of(bits, as));
    else if (!tr_dtype_is_float(as))
        snprintf(buf, size, "%llu", (unsigned long long)bits);
    else if (isnan(v))
        snprintf(buf, size, "nan");
    else if (!tr_dtype_is_float(shown))
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, shown == TR_DTYPE_F64 ? "%.17g" : "%.9g", v);
    return buf;
}

/* The absolute and relative differences of d, exactly for integers. */
static void differences(const struct difference *d, enum tr_dtype as, double *abs_out,
                        double *rel_out)
{
    long double a = exact_of(d->bits_a, d->a, as), b = exact_of(d->bits_b, d->b, as);

    if (a == b) {
        *abs_out = *rel_out = 0;
        return;
    }
    *abs_out = (double)fabsl(a - b);
    *rel_out = (double)(fabsl(a - b) / fabsl(b));
}

/* A difference to two digits: "3.1e-03", "inf", "nan". */
static const char *diff_text(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "nan");
    else
        snprintf(buf, size, "%.1e", v);
    return buf;
}


static void print_text(const struct pair *p, const struct side *sa, const struct side *sb,
                       const struct outcome *o)
{
    const struct tio_entry *ea = p->a >= 0 ? tio_file_entry(sa->f, (size_t)p->a) : NULL;
    const struct tio_entry *eb = p->b >= 0 ? tio_file_entry(sb->f, (size_t)p->b) : NULL;
    char x[256], y[256];

    switch (o->verdict) {
    case CLOSE:
        return;
    case ONLY_A:
    case ONLY_B:
        printf("%s: only in %s\n", p->name, o->verdict == ONLY_A ? sa->path : sb->path);
        return;
    case DTYPE:
        printf("%s: dtype %s against %s\n", p->name, tr_dtype_name(ea->dtype), tr_dtype_name(eb->dtype));
        return;
    case SHAPE:
        printf("%s: shape %s against %s\n", p->name, tr_format_shape(ea->shape, ea->ndim, x, sizeof x),
               tr_format_shape(eb->shape, eb->ndim, y, sizeof y));
        return;
    case VALUES:
        break;
    }
    printf("%s: %lld of %lld differ", p->name, (long long)o->c.differ, (long long)o->numel);
    if (o->c.max_abs_at >= 0 && o->c.max_rel_at >= 0)
        printf(" (max abs %.1e at %s, max rel %.1e at %s)", o->c.max_abs,
               index_text(o->c.max_abs_at, ea, x, sizeof x), o->c.max_rel,
               index_text(o->c.max_rel_at, ea, y, sizeof y));
    else if (o->c.max_abs_at >= 0)
        printf(" (max abs %.1e at %s)", o->c.max_abs, index_text(o->c.max_abs_at, ea, x, sizeof x));
    else if (o->tol.exact)
        printf(" (no difference in value: signed zeros or NaNs)");
    else
        printf(" (each a NaN against %s)", o->tol.equal_nan ? "a number" : "a number or a NaN");
    printf("\n");
    for (size_t i = 0; i < o->c.nfirst; i++) {
        const struct difference *d = &o->c.first[i];
        char va[64], vb[64], da[32], dr[32];
        double abs_d, rel_d;
        differences(d, o->as, &abs_d, &rel_d);
        printf("  at %s: %s against %s (abs %s, rel %s)\n", index_text(d->at, ea, x, sizeof x),
               value_text(d->bits_a, d->a, ea->dtype, o->as, va, sizeof va),
               value_text(d->bits_b, d->b, eb->dtype, o->as, vb, sizeof vb),
               diff_text(abs_d, da, sizeof da), diff_text(rel_d, dr, sizeof dr));
    }
}

/* A number for JSON: NaN and the infinities, which JSON lacks, as strings. */
static json_t *json_number(double v);

/* One side of a difference for JSON: integers exact (a u64 past 2^63,
 * which jansson cannot write, as a string of its digits). */
static json_t *json_value(uint64_t bits, double v, enum tr_dtype as)
{
    char text[32];

    if (tr_dtype_is_float(as))
        return json_number(v);
    if (is_signed_int(as))
        return json_integer(signed_of(bits, as));
    if (bits <= INT64_MAX)
        return json_integer((json_int_t)bits);
    snprintf(text, sizeof text, "%llu", (unsigned long long)bits);
    return json_string(text);
}

static json_t *json_number(double v)
{
    if (isnan(v))
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static json_t *json_index(int64_t at, const struct tio_entry *e)
{
    json_t *list = json_array();
    int64_t idx[TR_MAX_DIMS];

    for (int d = e->ndim - 1; d >= 0; d--) {
        idx[d] = e->shape[d] ? at % e->shape[d] : 0;
        at = e->shape[d] ? at / e->shape[d] : 0;
    }
    for (int d = 0; d < e->ndim; d++)
        json_array_append_new(list, json_integer(idx[d]));
    return list;
}

static json_t *json_shape(const struct tio_entry *e)
{
    json_t *list = json_array();

    for (int d = 0; d < e->ndim; d++)
        json_array_append_new(list, json_integer(e->shape[d]));
    return list;
}

static void print_json(const struct pair *p, const struct side *sa, const struct side *sb,
                       const struct outcome *o)
{
    const struct tio_entry *ea = p->a >= 0 ? tio_file_entry(sa->f, (size_t)p->a) : NULL;
    const struct tio_entry *eb = p->b >= 0 ? tio_file_entry(sb->f, (size_t)p->b) : NULL;
    json_t *obj = json_object();
    char *text;

    json_object_set_new(obj, "name", json_string(p->name));
    json_object_set_new(obj, "close", json_boolean(o->verdict == CLOSE));
    json_object_set_new(obj, "difference", o->verdict == CLOSE ? json_null()
                                                               : json_string(verdict_words[o->verdict]));
    json_object_set_new(obj, "dtype", json_pack("[oo]", ea ? json_string(tr_dtype_name(ea->dtype)) : json_null(),
                                                eb ? json_string(tr_dtype_name(eb->dtype)) : json_null()));
    json_object_set_new(obj, "shape", json_pack("[oo]", ea ? json_shape(ea) : json_null(),
                                                eb ? json_shape(eb) : json_null()));
    if (o->verdict == CLOSE || o->verdict == VALUES) {
        json_t *first = json_array();
        json_object_set_new(obj, "elements", json_integer(o->numel));
        json_object_set_new(obj, "differ", json_integer(o->c.differ));
        if (o->tol.exact) {
            json_object_set_new(obj, "exact", json_true());
        } else {
            json_object_set_new(obj, "rtol", json_real(o->tol.rtol));
            json_object_set_new(obj, "atol", json_real(o->tol.atol));
            json_object_set_new(obj, "equal_nan", json_boolean(o->tol.equal_nan));
        }
        json_object_set_new(obj, "max_abs", json_number(o->c.max_abs));
        json_object_set_new(obj, "max_abs_at", o->c.max_abs_at >= 0 ? json_index(o->c.max_abs_at, ea)
                                                                      : json_null());
        json_object_set_new(obj, "max_rel", json_number(o->c.max_rel));
        json_object_set_new(obj, "max_rel_at", o->c.max_rel_at >= 0 ? json_index(o->c.max_rel_at, ea)
                                                                      : json_null());
        for (size_t i = 0; i < o->c.nfirst; i++) {
            const struct difference *d = &o->c.first[i];
            double abs_d, rel_d;
            differences(d, o->as, &abs_d, &rel_d);
            json_array_append_new(first, json_pack("{s:o,s:o,s:o,s:o,s:o}", "at", json_index(d->at, ea),
                                                   "a", json_value(d->bits_a, d->a, o->as),
                                                   "b", json_value(d->bits_b, d->b, o->as),
                                                   "abs", json_number(abs_d), "rel", json_number(rel_d)));
        }
        json_object_set_new(obj, "first", first);
    }
    text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(obj);
}

/* ------------------------------------------------------------ the command */

/* Decides one pair into o; EXIT_OK or the failure's status. */
static int decide(const struct compare_args *a, const struct pair *p, const struct side *sa,
                  const struct side *sb, uint64_t drop_above, struct outcome *o)
{
    const struct tio_entry *ea, *eb;
    enum tr_dtype dtype = TR_DTYPE_F64;
    int status;

    memset(o, 0, sizeof *o);
    o->c.max_abs_at = o->c.max_rel_at = -1;
    if (p->a < 0 || p->b < 0) {
        o->verdict = p->a < 0 ? ONLY_B : ONLY_A;
        return EXIT_OK;
    }
    ea = tio_file_entry(sa->f, (size_t)p->a);
    eb = tio_file_entry(sb->f, (size_t)p->b);
    for (int k = 0; k < 2; k++) {
        const struct tio_entry *e = k ? eb : ea;
        if (!e->supported || e->wide_ndim) {
            char what[300] = "";
            if (e->name)
                snprintf(what, sizeof what, "tensor '%s': ", e->name);
            if (e->wide_ndim)
                msg_error(k ? sb->path : sa->path, "%s%d dimensions, more than the %d tensorrun "
                                                   "takes", what, e->wide_ndim, TR_MAX_DIMS);
            else
                msg_error(k ? sb->path : sa->path, "%sdtype '%s', which tensorrun cannot "
                                                   "compare", what, e->dtype_text);
            return EXIT_IO;
        }
    }
    o->verdict = comparable(a, ea, eb, &o->tol, &dtype);
    o->as = dtype;
    if (o->verdict != CLOSE)
        return EXIT_OK;
    o->numel = 1;
    for (int d = 0; d < ea->ndim; d++)
        o->numel *= ea->shape[d];
    if (!closeness_init(&o->c, (size_t)a->max_report)) {
        msg_error(NULL, "out of memory");
        return EXIT_OOM;
    }
    status = compare_values(sa, (size_t)p->a, sb, (size_t)p->b, dtype, o->numel, &o->tol,
                            drop_above, &o->c);
    if (status == EXIT_OK && o->c.differ > 0)
        o->verdict = VALUES;
    return status;
}

static int run_compare(const struct compare_args *a, struct side *sa, struct side *sb)
{
    size_t npairs = 0, differ = 0;
    int status = EXIT_OK;
    uint64_t drop_above;
    struct pair *pairs;

    if (!drop_behind_threshold(&drop_above))
        return EXIT_USAGE;
    pairs = pair_up(a, sa, sb, &npairs, &status);
    if (!pairs)
        return status;
    status = order_stream(sa, pairs, npairs, true);
    if (status == EXIT_OK)
        status = order_stream(sb, pairs, npairs, false);
    for (size_t i = 0; i < npairs && status == EXIT_OK; i++) {
        struct outcome o;
        status = decide(a, &pairs[i], sa, sb, drop_above, &o);
        if (status == EXIT_OK) {
            differ += o.verdict != CLOSE;
            if (a->json && !a->quiet)
                print_json(&pairs[i], sa, sb, &o);
            else if (!a->quiet)
                print_text(&pairs[i], sa, sb, &o);
        }
        closeness_free(&o.c);
    }
    for (int k = 0; k < 2 && status == EXIT_OK; k++) {
        struct side *s = k ? sb : sa;
        if (tio_file_finish(s->f) != TR_OK) {
            msg_error(s->path, "%s", tr_last_error());
            status = EXIT_IO;
        }
    }
    if (status == EXIT_OK && a->json && !a->quiet)
        printf("{\"tensors\":%zu,\"differ\":%zu,\"close\":%s}\n", npairs, differ,
               differ ? "false" : "true");
    else if (status == EXIT_OK && !a->quiet)
        printf("%zu of %zu tensor%s differ%s\n", differ, npairs, npairs == 1 ? "" : "s",
               npairs == 1 ? "s" : "");
    free(pairs);
    return status != EXIT_OK ? status : differ ? EXIT_RUNTIME : EXIT_OK;
}

int cmd_compare(int argc, char **argv)
{
    struct compare_args a;
    struct side sa = {0}, sb = {0};
    struct tr_scope *scope;
    int status = parse_args(argc, argv, &a);

    if (status != EXIT_OK || !a.a) {
        free(a.keys);
        return status;
    }
    if (strcmp(a.a, "-") == 0 && strcmp(a.b, "-") == 0) {
        free(a.keys);
        return usage_error("compare: standard input can be only one of A and B");
    }
    tr_set_num_threads(a.threads);
    if (a.memory_limit && tr_memory_set_limit(TR_CPU, a.memory_limit) != TR_OK) {
        msg_error(NULL, "%s", tr_last_error());
        free(a.keys);
        return EXIT_RUNTIME;
    }
    scope = tr_scope_begin();
    status = open_side(&a, &sa, a.a);
    if (status == EXIT_OK)
        status = open_side(&a, &sb, a.b);
    if (status == EXIT_OK && a.raw && tio_file_format(sa.f) != TIO_FORMAT_RAW &&
        tio_file_format(sb.f) != TIO_FORMAT_RAW)
        status = usage_error("compare: --input-dtype, --shape, --offset and --strides "
                             "describe raw input, and %s and %s describe themselves", a.a, a.b);
    if (status == EXIT_OK)
        status = run_compare(&a, &sa, &sb);
    tio_close(sa.f);
    tio_close(sb.f);
    tr_scope_end(scope, NULL, 0);
    free(a.keys);
    return status;
}
