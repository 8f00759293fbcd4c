/*
 * tensorfile.c - opening a tensor file: finding its format (by content
 * first, by name second), reading its header, and making its tensors.
 *
 * A regular file is mapped whole and every tensor is a view of that one
 * mapping.  Anything that must be read in order (a pipe, zstd frames) is
 * read up to its header, which says how many bytes the data needs; only
 * then is one pool block of exactly that size taken and filled, so a lying
 * header can never make the reader grow without bound.
 */
#include "io_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source_impl.h"

#define PREFIX_BYTES (UINT64_C(64) << 10)
#define NPZ_FIRST_BLOCK (UINT64_C(1) << 20)

static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

struct tio_file {
    struct tio__source src;
    enum tio_format format;
    enum tio_compression compression;
    bool header_only;
    uint64_t mapped_bytes;
    struct tr_tensor *bytes;       /* the whole (decompressed) stream, u8, free-standing */
    struct tio__safetensors parsed; /* entries and metadata, whatever the format */
    struct tio_raw_layout raw;
    bool has_raw;
    struct tio__npz_member *members; /* .npz: one per entry */
    /* a stream's data not read yet (tio_open_options.defer_data): its
     * first have bytes, read with the header, the length known at open,
     * and the stream offset tio_file_read_next delivers next */
    bool deferred;
    uint8_t *head;
    uint64_t have, stream_size, pos;
};

/* ------------------------------------------------------------ headers */

/* A zstd frame, or a skippable frame (magic 0x184D2A50 to 0x184D2A5F,
 * which pzstd writes first). */
static bool is_zstd(const uint8_t *p, uint64_t len)
{
    return len >= 4 && (memcmp(p, zstd_magic, 4) == 0 ||
                        ((p[0] & 0xf0) == 0x50 && p[1] == 0x2a && p[2] == 0x4d && p[3] == 0x18));
}

static enum tio_format detect(const struct tio_file *f, const char *path, const uint8_t *p,
                              uint64_t len, uint64_t stream_size)
{
    enum tio_format by_name;
    enum tio_compression ignored;

    if (tio__npy_magic(p, len))
        return TIO_FORMAT_NPY;
    if (tio__safetensors_magic(p, len, stream_size))
        return TIO_FORMAT_SAFETENSORS;
    if (tio__npz_magic(p, len))
        return TIO_FORMAT_NPZ;
    if (f->has_raw)
        return TIO_FORMAT_RAW; /* a layout given: the name does not matter */
    tio_format_from_path(path, &by_name, &ignored);
    return by_name;
}

/* The bytes from the stream's start that parsing the header needs. */
static tr_status header_size(const struct tio_file *f, const uint8_t *p, uint64_t len,
                             uint64_t stream_size, uint64_t *size)
{
    switch (f->format) {
    case TIO_FORMAT_NPY:
        return tio__npy_header_size(p, len, size);
    case TIO_FORMAT_SAFETENSORS:
        return tio__safetensors_header_size(p, len, stream_size, size);
    default:
        *size = 0;
        return TR_OK;
    }
}

static void forget_header(struct tio_file *f)
{
    tio__safetensors_free(&f->parsed);
    memset(&f->parsed, 0, sizeof f->parsed);
    free(f->members);
    f->members = NULL;
}

/* Parses the header in p (len bytes of a stream_size-byte stream) into
 * f->parsed, replacing what an earlier parse left there. */
static tr_status parse(struct tio_file *f, const uint8_t *p, uint64_t len, uint64_t stream_size)
{
    struct tio_entry *e;
    tr_status s;

    forget_header(f);
    if (f->format == TIO_FORMAT_SAFETENSORS)
        return tio__safetensors_parse(p, len, stream_size, &f->parsed);
    if (f->format == TIO_FORMAT_NPZ)
        return tio__npz_parse(p, len, &f->parsed, &f->members);
    e = calloc(1, sizeof *e);
    if (!e)
        return tio__error(TR_ERR_OOM, "out of memory reading a header");
    if (f->format == TIO_FORMAT_NPY)
        s = tio__npy_parse(p, len, stream_size, e);
    else if (f->has_raw)
        s = tio__raw_describe(&f->raw, stream_size, e);
    else
        s = tio__error(TR_ERR_FORMAT, "a raw file has no header to describe it: its dtype "
                                      "and shape must be given (convert --input-dtype, "
                                      "--shape)");
    if (s != TR_OK) {
        free(e);
        return s;
    }
    f->parsed.entries = e;
    f->parsed.count = 1;
    return TR_OK;
}

/* The bytes an entry's elements occupy, [*first, *end) from the stream's
 * start.  Entries come from checked headers: nothing here overflows. */
static void entry_span(const struct tio_entry *e, uint64_t *first, uint64_t *end)
{
    int64_t lo = 0, hi = 0, item = e->supported ? (int64_t)tr_dtype_size(e->dtype) : 0;

    if (!e->supported || e->nbytes == 0) {
        *first = e->offset;
        *end = e->offset + e->nbytes;
        return;
    }
    for (int i = 0; i < e->ndim; i++) {
        int64_t r = (e->shape[i] - 1) * e->strides[i];
        if (r < 0)
            lo += r;
        else
            hi += r;
    }
    *first = (uint64_t)((int64_t)e->offset + lo * item);
    *end = (uint64_t)((int64_t)e->offset + (hi + 1) * item);
}

/* The stream bytes the data needs: up to the end of the last tensor. */
static uint64_t data_end(const struct tio_file *f)
{
    uint64_t need = f->parsed.data_end, first, end;

    for (size_t i = 0; i < f->parsed.count; i++) {
        entry_span(&f->parsed.entries[i], &first, &end);
        if (end > need)
            need = end;
    }
    return need;
}

/* ------------------------------------------------------------ opening */

static tr_status open_mapped(struct tio_file *f, const char *path)
{
    static const uint8_t nothing[1];
    const uint8_t *p = f->src.mapped ? f->src.mapped : nothing;
    uint64_t size = f->src.file_size;
    bool detected = f->format == TIO_FORMAT_UNKNOWN;

    if (detected)
        f->format = detect(f, path, p, size, size);
    if (f->format == TIO_FORMAT_UNKNOWN && size == 0)
        return tio__error(TR_ERR_FORMAT, "the file is empty");
    if (f->format == TIO_FORMAT_UNKNOWN)
        return tio__error(TR_ERR_FORMAT, "not a .npy or .safetensors file (a raw file needs "
                                         "its dtype and shape)");
    if (parse(f, p, size, size) != TR_OK) {
        if (!detected || !f->has_raw || f->format == TIO_FORMAT_RAW)
            return tr_last_status();
        /* raw bytes that only look like a header at first sight */
        tr_clear_error();
        f->format = TIO_FORMAT_RAW;
        TR_FORWARD_IF_ERROR(parse(f, p, size, size));
    }
    f->mapped_bytes = size;
    f->bytes = f->src.map;
    f->src.map = NULL;
    if (!f->bytes) {
        /* an empty file: zero-size tensors are views of an empty storage */
        int64_t none = 0;
        f->bytes = tr_empty(TR_DTYPE_U8, 1, &none, TR_CPU);
        if (!f->bytes)
            return tr_last_status();
        tr_detach(f->bytes);
    }
    return TR_OK;
}

/* Reads from the stream until buf holds want bytes (or the stream ends). */
static tr_status fill(struct tio_file *f, uint8_t *buf, uint64_t *have, uint64_t want)
{
    uint64_t got;

    if (*have >= want)
        return TR_OK;
    TR_FORWARD_IF_ERROR(tio__source_read(&f->src, buf + *have, want - *have, &got));
    *have += got;
    return TR_OK;
}

/* After the stream turned out shorter or longer than the header says:
 * learn its true length and parse again, for the parser's own message. */
static tr_status wrong_length(struct tio_file *f, const uint8_t *p, uint64_t len)
{
    uint64_t total, need = data_end(f);

    TR_FORWARD_IF_ERROR(tio__source_drain(&f->src, &total));
    TR_FORWARD_IF_ERROR(parse(f, p, len < total ? len : total, total));
    return tio__error(TR_ERR_FORMAT, "the stream holds %llu bytes, not the %llu its header "
                                     "describes",
                      (unsigned long long)total, (unsigned long long)need);
}

/* An .npz stream (a pipe, zstd frames): its directory is at its end, so
 * the whole of it is read into pool memory (a block that doubles as it
 * fills; the pool's memory limit applies), then parsed there. */
static tr_status read_whole_npz(struct tio_file *f, const uint8_t *head, uint64_t have,
                                bool detected)
{
    int64_t cap = (int64_t)(have > NPZ_FIRST_BLOCK ? have : NPZ_FIRST_BLOCK);
    uint64_t n = have;
    struct tr_tensor *block = tr_empty(TR_DTYPE_U8, 1, &cap, TR_CPU);
    tr_status s = block ? TR_OK : tr_last_status();

    if (block)
        memcpy(tr_tensor_data_mut(block), head, have);
    while (s == TR_OK) {
        struct tr_tensor *bigger;
        int64_t more;

        s = fill(f, tr_tensor_data_mut(block), &n, (uint64_t)cap);
        if (s != TR_OK || n < (uint64_t)cap)
            break;
        if (__builtin_mul_overflow(cap, 2, &more)) {
            s = tio__error(TR_ERR_FORMAT, "the .npz stream is too long");
            break;
        }
        bigger = tr_empty(TR_DTYPE_U8, 1, &more, TR_CPU);
        if (!bigger) {
            s = tr_last_status();
            break;
        }
        memcpy(tr_tensor_data_mut(bigger), tr_tensor_data(block), n);
        tr_release(block);
        block = bigger;
        cap = more;
    }
    if (s == TR_OK)
        s = parse(f, tr_tensor_data(block), n, n);
    if (s == TR_ERR_FORMAT && detected && f->has_raw) {
        /* raw bytes that only look like a zip archive at first sight */
        tr_clear_error();
        f->format = TIO_FORMAT_RAW;
        s = parse(f, tr_tensor_data(block), n, n);
    }
    if (s != TR_OK) {
        tr_release(block);
        return s;
    }
    tr_detach(block);
    f->bytes = block;
    return TR_OK;
}

/* Whether a pool block for bytes, beside what the CPU pool holds, would
 * pass its memory limit. */
static bool past_limit(uint64_t bytes)
{
    struct tr_memory_stats st;

    return tr_memory_stats(TR_CPU, &st) == TR_OK && st.limit_bytes &&
           (st.reserved_bytes >= st.limit_bytes ||
            tr_memory_block_size(bytes) > st.limit_bytes - st.reserved_bytes);
}

static tr_status read_whole(struct tio_file *f);

/* A stream: its header read and parsed; then its data read whole, or, with
 * defer, left for tio_file_read_next or a later tio_file_load. */
static tr_status open_streamed(struct tio_file *f, const char *path, uint64_t stream_size,
                               bool defer)
{
    uint8_t *head = NULL;
    uint64_t have = 0, hsize = 0, need, got;
    bool detected = f->format == TIO_FORMAT_UNKNOWN;
    tr_status s;

    head = malloc(PREFIX_BYTES);
    if (!head)
        return tio__error(TR_ERR_OOM, "out of memory reading a header");
    s = fill(f, head, &have, PREFIX_BYTES);
    if (s == TR_OK && have < PREFIX_BYTES)
        stream_size = have; /* it all fit: now the length is known */
    if (s == TR_OK && detected)
        f->format = detect(f, path, head, have, stream_size);
    if (s == TR_OK && f->format == TIO_FORMAT_UNKNOWN && have == 0)
        s = tio__error(TR_ERR_FORMAT, "the stream is empty");
    else if (s == TR_OK && f->format == TIO_FORMAT_UNKNOWN)
        s = tio__error(TR_ERR_FORMAT, "not a .npy or .safetensors stream (a raw stream needs "
                                      "its dtype and shape)");
    if (s == TR_OK && f->format == TIO_FORMAT_NPZ) {
        s = read_whole_npz(f, head, have, detected);
        free(head);
        return s;
    }
    if (s == TR_OK)
        s = header_size(f, head, have, stream_size, &hsize);
    if (s == TR_OK && hsize > have) {
        uint8_t *bigger = realloc(head, hsize); /* bounded by the format's limit */
        if (!bigger)
            s = tio__error(TR_ERR_OOM, "out of memory reading a header");
        else
            head = bigger;
        if (s == TR_OK)
            s = fill(f, head, &have, hsize);
        if (s == TR_OK && have < hsize)
            stream_size = have;
    }
    if (s == TR_OK)
        s = parse(f, head, have, stream_size);
    if (s == TR_ERR_FORMAT && detected && f->has_raw && f->format != TIO_FORMAT_RAW) {
        /* raw bytes that only look like a header at first sight */
        tr_clear_error();
        f->format = TIO_FORMAT_RAW;
        s = parse(f, head, have, stream_size);
    }
    if (s == TR_OK && f->header_only && !f->src.regular && stream_size == TIO_SIZE_UNKNOWN &&
        f->format != TIO_FORMAT_RAW) {
        /* a pipe is read to its end anyway (its writer must not block):
         * counting it gives its true size, and the checks against it */
        uint64_t total;
        s = tio__source_drain(&f->src, &total);
        if (s == TR_OK)
            s = parse(f, head, have, total);
    }
    if (s == TR_OK && f->header_only && !f->src.regular && f->format == TIO_FORMAT_RAW) {
        /* a raw layout says how much it needs and no more: read that far
         * (the stream may be endless), checking that it is there */
        uint8_t skip[1 << 16];
        uint64_t n = have;
        need = data_end(f);
        for (got = 1; s == TR_OK && n < need && got > 0; n += got)
            s = tio__source_read(&f->src, skip,
                                 need - n < sizeof skip ? need - n : sizeof skip, &got);
        if (s == TR_OK && n < need)
            s = parse(f, head, have, n); /* for its "truncated" message */
    }
    if (s != TR_OK || f->header_only) {
        free(head);
        return s;
    }
    f->head = head;
    f->have = have;
    f->stream_size = stream_size;
    if (defer && (f->format == TIO_FORMAT_NPY || f->format == TIO_FORMAT_RAW ||
                  f->format == TIO_FORMAT_SAFETENSORS)) {
        f->deferred = true;
        return TR_OK;
    }
    return read_whole(f);
}

/* A stream's data after its header (f->head, f->have): one pool block of
 * exactly what the header says it needs, filled from the stream, which is
 * then read to its end and checked. */
static tr_status read_whole(struct tio_file *f)
{
    uint8_t *head = f->head;
    uint64_t have = f->have, stream_size = f->stream_size, need, got;
    int64_t shape[1];
    uint8_t *data;
    struct tr_tensor *block = NULL;
    tr_status s = TR_OK;

    f->head = NULL;
    f->deferred = false;
    need = data_end(f);
    shape[0] = (int64_t)need;
    block = tr_empty(TR_DTYPE_U8, 1, shape, TR_CPU);
    if (!block && tr_last_status() == TR_ERR_OOM && (stream_size != TIO_SIZE_UNKNOWN ||
                                                     past_limit(need))) {
        /* the header was checked against the stream's declared length, or
         * the memory limit refuses it whatever the stream holds: no reason
         * to read (and decompress) the rest first */
        char size[16], oom[512];
        snprintf(oom, sizeof oom, "%s", tr_last_error());
        s = tio__error(TR_ERR_OOM, "its data takes %s (%llu bytes, as its header says) in "
                                   "memory: %s",
                       tr_format_bytes(need, size, sizeof size), (unsigned long long)need, oom);
    } else if (!block && tr_last_status() == TR_ERR_OOM) {
        /* a header claiming more than the stream holds is a malformed
         * file, not a lack of memory: find out which */
        char oom[512];
        uint64_t total;
        snprintf(oom, sizeof oom, "%s", tr_last_error());
        s = tio__source_drain(&f->src, &total);
        if (s == TR_OK && total < need)
            s = wrong_length(f, head, have);
        else if (s == TR_OK)
            s = tio__error(TR_ERR_OOM, "%s", oom);
    } else if (!block) {
        s = tr_last_status();
    }
    if (block) {
        uint64_t n = have < need ? have : need;
        tr_detach(block);
        data = tr_tensor_data_mut(block);
        if (need > 0)
            memcpy(data, head, n);
        s = fill(f, data, &n, need);
        if (s == TR_OK && n < need)
            s = wrong_length(f, head, have);
    }
    /* safetensors data must end exactly where the stream does; after the
     * others, the rest is read too: the end of a zstd frame and its
     * checksum are checked there, and a pipe's writer is not left blocked */
    if (s == TR_OK && f->format == TIO_FORMAT_SAFETENSORS) {
        got = 0;
        if (have <= need)
            s = tio__source_read(&f->src, &(uint8_t){0}, 1, &got);
        if (s == TR_OK && (have > need || got))
            s = wrong_length(f, head, have);
    } else if (s == TR_OK && f->format != TIO_FORMAT_RAW) {
        uint64_t total;
        s = tio__source_drain(&f->src, &total);
    }
    /* a raw layout ends where it says: nothing after it is read, so an
     * endless stream (/dev/zero, yes) ends there too */
    free(head);
    if (s != TR_OK) {
        tr_release(block);
        return s;
    }
    f->bytes = block;
    return TR_OK;
}

struct tio_file *tio_open(const char *path, const struct tio_open_options *options)
{
    struct tio_file *f = calloc(1, sizeof *f);
    struct tio_open_options none = {0};
    enum tio_format by_name;
    enum tio_compression compression;
    uint8_t magic[4];
    uint64_t got = 0, stream_size = TIO_SIZE_UNKNOWN;
    tr_status s;

    if (!f) {
        tio__error(TR_ERR_OOM, "out of memory opening a file");
        return NULL;
    }
    if (!options)
        options = &none;
    f->format = options->format;
    f->header_only = options->header_only;
    if (options->raw) {
        f->raw = *options->raw;
        f->has_raw = true;
    }
    tio_format_from_path(path, &by_name, &compression);
    s = tio__source_open(&f->src, path);
    if (s == TR_OK && f->src.regular)
        s = tio__source_map(&f->src, f->header_only);
    if (s != TR_OK)
        goto fail;

    if (f->src.regular) {
        if (!is_zstd(f->src.mapped, f->src.file_size)) {
            s = open_mapped(f, path);
            goto done;
        }
        /* the declared size needs a walk over every frame: not for a header */
        stream_size = f->header_only ? TIO_SIZE_UNKNOWN
                                     : tio__source_zstd_content_size(&f->src);
        f->compression = TIO_COMPRESSION_ZSTD;
        s = tio__source_start_zstd(&f->src);
    } else {
        /* a pipe: its first bytes say whether it is compressed */
        s = tio__source_read(&f->src, magic, sizeof magic, &got);
        if (s == TR_OK && is_zstd(magic, got)) {
            f->compression = TIO_COMPRESSION_ZSTD;
            s = tio__source_start_zstd(&f->src);
            if (s == TR_OK) {
                memcpy(f->src.in_buf, magic, sizeof magic);
                f->src.in_size = sizeof magic;
                f->src.consumed = 0;
            }
        } else if (s == TR_OK) {
            s = tio__source_unread(&f->src, magic, got);
        }
    }
    if (s == TR_OK)
        s = open_streamed(f, path, stream_size, options->defer_data);
done:
    if (s == TR_OK)
        return f;
fail:
    tio_close(f); /* keeps the error: releasing and closing record none */
    return NULL;
}

void tio_close(struct tio_file *f)
{
    if (!f)
        return;
    forget_header(f);
    free(f->head);
    tr_release(f->bytes);
    tio__source_close(&f->src);
    free(f);
}

/* ------------------------------------------------------------ queries */

void tio__entry_clear(struct tio_entry *e)
{
    free(e->name);
    free(e->wide_shape);
    e->name = NULL;
    e->wide_shape = NULL;
    e->wide_ndim = 0;
}

enum tio_format tio_file_format(const struct tio_file *f)
{
    return f->format;
}

enum tio_compression tio_file_compression(const struct tio_file *f)
{
    return f->compression;
}

uint64_t tio_file_size(const struct tio_file *f)
{
    return f->src.regular ? f->src.file_size : f->src.fd_bytes;
}

uint64_t tio_file_mapped_bytes(const struct tio_file *f)
{
    return f->mapped_bytes;
}

size_t tio_file_count(const struct tio_file *f)
{
    return f->parsed.count;
}

const struct tio_entry *tio_file_entry(const struct tio_file *f, size_t index)
{
    return f && index < f->parsed.count ? &f->parsed.entries[index] : NULL;
}

ptrdiff_t tio_file_find(const struct tio_file *f, const char *name)
{
    for (size_t i = 0; i < f->parsed.count; i++)
        if (f->parsed.entries[i].name && strcmp(f->parsed.entries[i].name, name) == 0)
            return (ptrdiff_t)i;
    return -1;
}

bool tio_file_has_metadata(const struct tio_file *f)
{
    return f->parsed.has_metadata;
}

size_t tio_file_metadata_count(const struct tio_file *f)
{
    return f->parsed.metadata_count;
}

const char *tio_file_metadata_key(const struct tio_file *f, size_t index)
{
    return index < f->parsed.metadata_count ? f->parsed.metadata_keys[index] : NULL;
}

const char *tio_file_metadata_value(const struct tio_file *f, size_t index)
{
    return index < f->parsed.metadata_count ? f->parsed.metadata_values[index] : NULL;
}

/* The pool block tio_file_load copies tensor e into (a deflated member
 * inflated, big-endian or misaligned data put in order), 0 when it views
 * the file's bytes. */
static uint64_t copy_bytes(const struct tio_file *f, const struct tio_entry *e, size_t index)
{
    uint64_t first, end;

    if (f->members && f->members[index].deflated)
        return f->members[index].usize;
    if (!e->supported || e->nbytes == 0 ||
        (!e->byteswap && e->offset % tr_dtype_size(e->dtype) == 0))
        return 0; /* viewed in place (a mapping, and a stream's block, start aligned) */
    entry_span(e, &first, &end);
    return end - first;
}

/* The block a stream that is not mapped is read into (0 for a mapping). */
static uint64_t stream_bytes(const struct tio_file *f)
{
    if (f->mapped_bytes)
        return 0;
    return f->bytes ? tr_tensor_nbytes(f->bytes) : data_end(f);
}

uint64_t tio_file_pool_bytes(const struct tio_file *f, size_t index)
{
    const struct tio_entry *e = tio_file_entry(f, index);

    return e ? stream_bytes(f) + copy_bytes(f, e, index) : 0;
}

uint64_t tio_file_stream_bytes(const struct tio_file *f)
{
    return stream_bytes(f);
}

bool tio_file_is_deflated(const struct tio_file *f, size_t index)
{
    return tio_file_entry(f, index) && f->members && f->members[index].deflated;
}

uint64_t tio_file_copy_bytes(const struct tio_file *f, size_t index)
{
    const struct tio_entry *e = tio_file_entry(f, index);

    return e ? copy_bytes(f, e, index) : 0;
}

/* ------------------------------------------------------------ loading */

static void byteswap(uint8_t *p, uint64_t bytes, size_t item)
{
    for (uint64_t i = 0; i + item <= bytes; i += item)
        for (size_t a = 0, b = item - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* A deflated .npz member, inflated whole into a pool block (the pool's
 * memory limit applies), its data put in order and aligned there. */
static struct tr_tensor *load_inflated(const struct tio_entry *e,
                                       const struct tio__npz_member *m, const uint8_t *archive,
                                       uint64_t item)
{
    int64_t size = (int64_t)m->usize; /* bounded by the parser */
    uint64_t offset = e->offset, got;
    struct tr_tensor *block, *view;
    uint8_t *data;

    block = tr_empty(TR_DTYPE_U8, 1, &size, TR_CPU);
    if (!block)
        return NULL;
    data = tr_tensor_data_mut(block);
    if (tio__npz_inflate(archive, m, data, 0, true, &got) != TR_OK) {
        tr_release(block);
        return NULL;
    }
    if (offset % item != 0) {
        memmove(data, data + offset, (size_t)e->nbytes);
        offset = 0;
    }
    if (e->byteswap)
        byteswap(data + offset, e->nbytes, (size_t)item);
    view = tr_as_strided(block, e->dtype, e->ndim, e->shape, e->strides, (int64_t)offset);
    tr_release(block);
    return view;
}

struct tr_tensor *tio_file_load(struct tio_file *f, size_t index)
{
    const struct tio_entry *e = tio_file_entry(f, index);
    const uint8_t *base;
    uint64_t first, end, item;
    int64_t span;
    struct tr_tensor *copy, *view;

    if (!e) {
        tio__error(TR_ERR_INVALID, "no tensor %zu in the file", index);
        return NULL;
    }
    if (e->wide_ndim) {
        tio__error(TR_ERR_DTYPE, "%s%s%s has %d dimensions; tensorrun computes with at most %d",
                   e->name ? "tensor '" : "the tensor", e->name ? e->name : "",
                   e->name ? "'" : "", e->wide_ndim, TR_MAX_DIMS);
        return NULL;
    }
    if (!e->supported) {
        tio__error(TR_ERR_DTYPE, "%s%s%s has dtype %s, which tensorrun cannot compute with",
                   e->name ? "tensor '" : "the tensor", e->name ? e->name : "",
                   e->name ? "'" : "", e->dtype_text);
        return NULL;
    }
    if (f->header_only) {
        tio__error(TR_ERR_STATE, "the file was opened for its header only");
        return NULL;
    }
    if (f->deferred && (f->pos > 0 || read_whole(f) != TR_OK)) {
        if (f->pos > 0)
            tio__error(TR_ERR_STATE, "the stream is being read a block at a time");
        return NULL;
    }
    item = tr_dtype_size(e->dtype);
    base = tr_tensor_data(f->bytes);
    if (f->members && f->members[index].deflated)
        return load_inflated(e, &f->members[index], base, item);
    if (!e->byteswap && (e->nbytes == 0 || ((uintptr_t)base + e->offset) % item == 0))
        return tr_as_strided(f->bytes, e->dtype, e->ndim, e->shape, e->strides,
                             (int64_t)e->offset);
    /* misaligned or big-endian: the bytes it spans, copied to an aligned
     * pool block (and put in order there) */
    entry_span(e, &first, &end);
    span = (int64_t)(end - first);
    copy = tr_empty(TR_DTYPE_U8, 1, &span, TR_CPU);
    if (!copy)
        return NULL;
    if (span > 0) {
        memcpy(tr_tensor_data_mut(copy), base + first, (size_t)span);
        if (e->byteswap)
            byteswap(tr_tensor_data_mut(copy), (uint64_t)span, item);
    }
    view = tr_as_strided(copy, e->dtype, e->ndim, e->shape, e->strides,
                         (int64_t)(e->offset - first));
    tr_release(copy);
    return view;
}

/* ------------------------------------------------------------ rows */

bool tio_file_streams_rows(const struct tio_file *f, size_t index)
{
    const struct tio_entry *e = tio_file_entry(f, index);
    int64_t stride = 1;

    if (!e || !(f->deferred || (f->header_only && !f->mapped_bytes)) || f->pos > e->offset ||
        (f->format != TIO_FORMAT_NPY && f->format != TIO_FORMAT_RAW &&
         f->format != TIO_FORMAT_SAFETENSORS) ||
        !e->supported || e->byteswap || e->wide_ndim || e->ndim == 0)
        return false;
    for (int d = e->ndim - 1; d >= 0; d--) {
        if (e->shape[d] != 1 && e->strides[d] != stride)
            return false; /* Fortran order: rows are not runs of the stream */
        stride *= e->shape[d];
    }
    return true;
}

/* Moves the stream on by n bytes to dst (NULL: discarded), from the bytes
 * read with the header first. */
static tr_status take(struct tio_file *f, uint8_t *dst, uint64_t n)
{
    uint8_t skip[1 << 14];

    while (n > 0) {
        uint64_t got, m;
        if (f->pos < f->have) {
            m = f->have - f->pos < n ? f->have - f->pos : n;
            if (dst)
                memcpy(dst, f->head + f->pos, (size_t)m);
        } else {
            m = dst ? n : n < sizeof skip ? n : sizeof skip;
            TR_FORWARD_IF_ERROR(tio__source_read(&f->src, dst ? dst : skip, m, &got));
            if (got < m)
                return tio__error(TR_ERR_FORMAT, "the stream ends after %llu bytes, before "
                                                 "the %llu its header describes",
                                  (unsigned long long)(f->pos + got),
                                  (unsigned long long)data_end(f));
        }
        f->pos += m;
        n -= m;
        if (dst)
            dst += m;
    }
    return TR_OK;
}

tr_status tio_file_read_deferred(struct tio_file *f)
{
    if (!f->deferred)
        return TR_OK;
    if (f->pos > 0)
        return tio__error(TR_ERR_STATE, "the stream is being read a block at a time");
    return read_whole(f);
}

tr_status tio_file_read_next(struct tio_file *f, size_t index, void *dst, uint64_t n)
{
    const struct tio_entry *e = tio_file_entry(f, index);

    if (!e || !f->deferred)
        return tio__error(TR_ERR_STATE, "the stream is not read a block at a time");
    if (f->pos < e->offset)
        TR_FORWARD_IF_ERROR(take(f, NULL, e->offset - f->pos));
    if (f->pos < e->offset || n > e->offset + e->nbytes - f->pos)
        return tio__error(TR_ERR_STATE, "%llu bytes past the tensor's data",
                          (unsigned long long)n);
    return take(f, dst, n);
}

tr_status tio_file_finish(struct tio_file *f)
{
    uint64_t need = data_end(f), total, got = 0;

    if (!f->deferred)
        return TR_OK;
    if (f->pos < need)
        TR_FORWARD_IF_ERROR(take(f, NULL, need - f->pos));
    /* as read_whole ends: safetensors data ends where the stream does; a
     * zstd frame's end and checksum are read, a pipe's writer is not left
     * blocked; a raw layout ends where it says */
    if (f->format == TIO_FORMAT_SAFETENSORS) {
        if (f->pos >= f->have)
            TR_FORWARD_IF_ERROR(tio__source_read(&f->src, &(uint8_t){0}, 1, &got));
        if (f->pos < f->have || got)
            return tio__error(TR_ERR_FORMAT, "the stream goes on after the %llu bytes its "
                                             "header describes",
                              (unsigned long long)need);
        return TR_OK;
    }
    if (f->format != TIO_FORMAT_RAW)
        return tio__source_drain(&f->src, &total);
    return TR_OK;
}
