/*
 * source_impl.h - an input's bytes, mapped or streamed (source.c).
 */
#ifndef TR_IO_SOURCE_IMPL_H
#define TR_IO_SOURCE_IMPL_H

#include "io_impl.h"

struct ZSTD_DCtx_s;

struct tio__source {
    const char *path;            /* as opened; the caller's, valid while open */
    int fd;
    bool owns_fd;
    bool regular;                /* a regular file (mappable), not a pipe */
    uint64_t file_size;          /* bytes on disk; 0 for a pipe */
    struct tr_tensor *map;       /* u8 view of the whole mapping (free-standing) */
    const uint8_t *mapped;       /* its bytes */
    struct ZSTD_DCtx_s *zstd;    /* set when the bytes are zstd frames */
    const uint8_t *in;           /* compressed input: the mapping or in_buf */
    uint8_t *in_buf;
    uint64_t in_size, in_pos;
    bool in_eof;                 /* the pipe of compressed bytes has ended */
    bool frame_open;             /* inside a zstd frame */
    uint64_t consumed;           /* bytes delivered by tio__source_read */
    uint64_t fd_bytes;           /* bytes read from the file descriptor */
    uint8_t pushback[16];        /* bytes given back by tio__source_unread */
    size_t pushback_len;
};

/* Opens path ("-": standard input) and learns whether it is a regular file. */
tr_status tio__source_open(struct tio__source *src, const char *path);
/* Maps a regular file whole, read-only (nothing for an empty file), with a
 * hint for reading it in order, or, when only its header will be read, for
 * reading nothing ahead. */
tr_status tio__source_map(struct tio__source *src, bool header_only);
/* From now on tio__source_read decompresses zstd frames (from the mapping
 * when there is one, else from the file descriptor). */
tr_status tio__source_start_zstd(struct tio__source *src);
/* The decompressed size the frames of a mapped file declare, or
 * TIO_SIZE_UNKNOWN. */
uint64_t tio__source_zstd_content_size(const struct tio__source *src);
/* The next bytes of the stream, up to len; *got < len only at the end. */
tr_status tio__source_read(struct tio__source *src, void *buf, uint64_t len, uint64_t *got);
/* Gives the first len (at most 16) bytes read back, to be read again; only
 * before anything else was read and without zstd. */
tr_status tio__source_unread(struct tio__source *src, const void *buf, size_t len);
/* Reads the rest of the stream, keeping nothing; *total is the whole
 * stream's length. */
tr_status tio__source_drain(struct tio__source *src, uint64_t *total);
void tio__source_close(struct tio__source *src);

#endif /* TR_IO_SOURCE_IMPL_H */
