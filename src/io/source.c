/*
 * source.c - where an input's bytes come from: a regular file mapped whole
 * (read-only, adopted by the tensors that view it), or a stream read in
 * order (a pipe, or zstd frames decompressed from a mapping or a pipe).
 */
#include "io_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "source_impl.h"

#define READ_CHUNK (UINT64_C(1) << 20)

static void unmap(void *data, void *ctx)
{
    tio__guard_unregister(data);
    munmap(data, (size_t)(uintptr_t)ctx);
}

tr_status tio__source_open(struct tio__source *src, const char *path)
{
    struct stat st;

    memset(src, 0, sizeof *src);
    src->fd = -1;
    src->path = path;
    if (strcmp(path, "-") == 0) {
        src->fd = STDIN_FILENO;
    } else {
        src->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (src->fd < 0)
            return tio__error(TR_ERR_IO, "cannot open: %s", strerror(errno));
        src->owns_fd = true;
    }
    if (fstat(src->fd, &st) != 0)
        return tio__error(TR_ERR_IO, "cannot stat: %s", strerror(errno));
    if (S_ISDIR(st.st_mode))
        return tio__error(TR_ERR_IO, "is a directory");
    /* standard input may be a file someone read part of: then it is read
     * from there on, as a stream, not mapped from its start */
    src->regular = S_ISREG(st.st_mode) &&
                   (src->owns_fd || lseek(src->fd, 0, SEEK_CUR) == 0);
    src->file_size = src->regular ? (uint64_t)st.st_size : 0;
    return TR_OK;
}

tr_status tio__source_map(struct tio__source *src, bool header_only)
{
    struct tr_blob blob = {0};
    int64_t shape[1];
    void *p;

    if (src->file_size == 0)
        return TR_OK; /* nothing to map: an empty file */
    if (src->file_size > SIZE_MAX || src->file_size > INT64_MAX)
        return tio__error(TR_ERR_IO, "the file is too large to map");
    p = mmap(NULL, (size_t)src->file_size, PROT_READ, MAP_SHARED, src->fd, 0);
    if (p == MAP_FAILED)
        return tio__error(errno == ENOMEM ? TR_ERR_OOM : TR_ERR_IO, "cannot map: %s",
                          strerror(errno));
    madvise(p, (size_t)src->file_size, header_only ? MADV_RANDOM : MADV_SEQUENTIAL);
    tio__guard_register(p, src->file_size, src->path);
    blob.data = p;
    blob.nbytes = src->file_size;
    blob.deleter = unmap;
    blob.deleter_ctx = (void *)(uintptr_t)src->file_size;
    blob.flags = TR_FLAG_READONLY | TR_FLAG_MAPPED;
    shape[0] = (int64_t)src->file_size;
    src->map = tr_from_blob(&blob, TR_DTYPE_U8, 1, shape, NULL, TR_CPU);
    if (!src->map) {
        tio__guard_unregister(p);
        munmap(p, (size_t)src->file_size);
        return tr_last_status();
    }
    tr_detach(src->map);
    src->mapped = p;
    return TR_OK;
}

tr_status tio__source_start_zstd(struct tio__source *src)
{
    src->zstd = ZSTD_createDStream();
    if (!src->zstd)
        return tio__error(TR_ERR_OOM, "out of memory for a zstd decoder");
    ZSTD_initDStream(src->zstd);
    if (src->mapped) {
        src->in = src->mapped;
        src->in_size = src->file_size;
    } else {
        src->in_buf = malloc(ZSTD_DStreamInSize());
        if (!src->in_buf)
            return tio__error(TR_ERR_OOM, "out of memory for a zstd decoder");
        src->in = src->in_buf;
        src->in_size = 0;
    }
    src->in_pos = 0;
    return TR_OK;
}

uint64_t tio__source_zstd_content_size(const struct tio__source *src)
{
    uint64_t total = 0, pos = 0;

    /* the sum over the frames, each of which must declare its size */
    while (src->mapped && pos < src->file_size) {
        unsigned long long n = ZSTD_getFrameContentSize(src->mapped + pos,
                                                        (size_t)(src->file_size - pos));
        size_t frame = ZSTD_findFrameCompressedSize(src->mapped + pos,
                                                    (size_t)(src->file_size - pos));
        if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR ||
            ZSTD_isError(frame) || __builtin_add_overflow(total, n, &total))
            return TIO_SIZE_UNKNOWN;
        pos += frame;
    }
    return src->mapped ? total : TIO_SIZE_UNKNOWN;
}

/* read(2) until len bytes or the end; *got says how many. */
static tr_status read_fd(struct tio__source *src, void *buf, uint64_t len, uint64_t *got)
{
    *got = 0;
    while (*got < len) {
        ssize_t n = read(src->fd, (char *)buf + *got,
                         len - *got > READ_CHUNK ? READ_CHUNK : len - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return tio__error(TR_ERR_IO, "read error: %s", strerror(errno));
        if (n == 0)
            break;
        *got += (uint64_t)n;
        src->fd_bytes += (uint64_t)n;
    }
    return TR_OK;
}

/* Decompresses into buf until len bytes or the end of the input. */
static tr_status read_zstd(struct tio__source *src, void *buf, uint64_t len, uint64_t *got)
{
    ZSTD_outBuffer out = {buf, (size_t)len, 0};

    while (out.pos < out.size) {
        ZSTD_inBuffer in = {src->in, (size_t)src->in_size, (size_t)src->in_pos};
        size_t rc;

        if (in.pos == in.size && !src->mapped && !src->in_eof) {
            uint64_t n;
            TR_FORWARD_IF_ERROR(read_fd(src, src->in_buf, ZSTD_DStreamInSize(), &n));
            src->in_size = n;
            src->in_pos = 0;
            src->in_eof = n == 0;
            continue;
        }
        if (in.pos == in.size) {
            /* no input left: a frame cut short, or the clean end */
            if (src->frame_open)
                return tio__error(TR_ERR_FORMAT, "truncated zstd frame");
            break;
        }
        rc = ZSTD_decompressStream(src->zstd, &out, &in);
        src->in_pos = in.pos;
        if (ZSTD_isError(rc))
            return tio__error(TR_ERR_FORMAT, "corrupt zstd data: %s", ZSTD_getErrorName(rc));
        src->frame_open = rc != 0;
    }
    *got = out.pos;
    return TR_OK;
}

/* The pushed-back bytes first, then the file descriptor. */
static tr_status read_plain(struct tio__source *src, void *buf, uint64_t len, uint64_t *got)
{
    uint64_t back = src->pushback_len < len ? src->pushback_len : len, more = 0;
    tr_status s = TR_OK;

    memcpy(buf, src->pushback, back);
    memmove(src->pushback, src->pushback + back, src->pushback_len - back);
    src->pushback_len -= back;
    if (back < len)
        s = read_fd(src, (char *)buf + back, len - back, &more);
    *got = back + more;
    return s;
}

tr_status tio__source_read(struct tio__source *src, void *buf, uint64_t len, uint64_t *got)
{
    tr_status s = src->zstd ? read_zstd(src, buf, len, got) : read_plain(src, buf, len, got);

    if (s == TR_OK)
        src->consumed += *got;
    return s;
}

tr_status tio__source_unread(struct tio__source *src, const void *buf, size_t len)
{
    if (len > sizeof src->pushback || src->pushback_len || src->zstd)
        return tio__error(TR_ERR_STATE, "cannot give %zu bytes back to the stream", len);
    memcpy(src->pushback, buf, len);
    src->pushback_len = len;
    src->consumed -= len;
    return TR_OK;
}

tr_status tio__source_drain(struct tio__source *src, uint64_t *total)
{
    char buf[1 << 16];
    uint64_t got;

    do {
        TR_FORWARD_IF_ERROR(tio__source_read(src, buf, sizeof buf, &got));
    } while (got == sizeof buf);
    *total = src->consumed;
    return TR_OK;
}

void tio__source_close(struct tio__source *src)
{
    ZSTD_freeDStream(src->zstd);
    free(src->in_buf);
    tr_release(src->map);
    if (src->owns_fd && src->fd >= 0)
        close(src->fd);
    memset(src, 0, sizeof *src);
    src->fd = -1;
}
