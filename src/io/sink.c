/*
 * sink.c - where a writer's bytes go: a file descriptor, directly or
 * through a multithreaded zstd compressor.
 */
#include "io_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

struct tio__sink {
    int fd;
    ZSTD_CCtx *zstd;   /* NULL: no compression */
    uint8_t *out;      /* compressed bytes on their way to fd */
    size_t out_size;
    uint64_t bytes;    /* before compression */
};

static tr_status write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EFAULT && tio__guard_claim(p))
            return tio__error(TR_ERR_IO, "an input changed size while being read");
        if (n < 0)
            return tio__error(TR_ERR_IO, "write error: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return TR_OK;
}

struct tio__sink *tio__sink_fd(int fd, enum tio_compression compression, int level, int threads)
{
    struct tio__sink *s = calloc(1, sizeof *s);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    if (!s) {
        tio__error(TR_ERR_OOM, "out of memory starting an output");
        return NULL;
    }
    s->fd = fd;
    if (compression != TIO_COMPRESSION_ZSTD)
        return s;
    s->zstd = ZSTD_createCCtx();
    s->out_size = ZSTD_CStreamOutSize();
    s->out = malloc(s->out_size);
    if (!s->zstd || !s->out) {
        tio__sink_free(s);
        tio__error(TR_ERR_OOM, "out of memory for a zstd compressor");
        return NULL;
    }
    ZSTD_CCtx_setParameter(s->zstd, ZSTD_c_compressionLevel, level ? level : 3);
    ZSTD_CCtx_setParameter(s->zstd, ZSTD_c_checksumFlag, 1);
    /* without multithreading support in the library this fails: one thread */
    ZSTD_CCtx_setParameter(s->zstd, ZSTD_c_nbWorkers,
                           threads > 0 ? threads : (int)(cores > 0 ? cores : 1));
    return s;
}

/* Feeds the compressor; mode ZSTD_e_end also closes the frame. */
static tr_status compress(struct tio__sink *s, const void *buf, size_t len,
                          ZSTD_EndDirective mode)
{
    ZSTD_inBuffer in = {buf, len, 0};
    size_t left;

    do {
        ZSTD_outBuffer out = {s->out, s->out_size, 0};
        left = ZSTD_compressStream2(s->zstd, &out, &in, mode);
        if (ZSTD_isError(left))
            return tio__error(TR_ERR_IO, "zstd compression failed: %s",
                              ZSTD_getErrorName(left));
        TR_FORWARD_IF_ERROR(write_all(s->fd, s->out, out.pos));
    } while (mode == ZSTD_e_end ? left != 0 : in.pos < in.size);
    return TR_OK;
}

void tio__sink_pledge(struct tio__sink *s, uint64_t total)
{
    if (s->zstd && s->bytes == 0)
        ZSTD_CCtx_setPledgedSrcSize(s->zstd, total);
}

tr_status tio__sink_write(struct tio__sink *s, const void *buf, size_t len)
{
    s->bytes += len;
    if (!s->zstd)
        return write_all(s->fd, buf, len);
    return compress(s, buf, len, ZSTD_e_continue);
}

tr_status tio__sink_finish(struct tio__sink *s)
{
    return s->zstd ? compress(s, NULL, 0, ZSTD_e_end) : TR_OK;
}

uint64_t tio__sink_bytes(const struct tio__sink *s)
{
    return s->bytes;
}

void tio__sink_free(struct tio__sink *s)
{
    if (!s)
        return;
    ZSTD_freeCCtx(s->zstd);
    free(s->out);
    free(s);
}
