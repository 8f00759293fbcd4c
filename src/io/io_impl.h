/*
 * io_impl.h - what the io files share: the format modules' parsers and
 * header writers, and the byte sinks the writers stream into.
 */
#ifndef TR_IO_IMPL_H
#define TR_IO_IMPL_H

#include "config.h"

#include "tensorrun_io.h"

/* A stream whose length is not known yet (a pipe, a zstd frame that does
 * not declare its size): the parsers then make every check but those
 * against the stream's end. */
#define TIO_SIZE_UNKNOWN UINT64_MAX

/* Records a TR_ERR_* status and a printf-formatted message, as the engine's
 * own functions do; returns status. */
#define tio__error tr_set_error

/* Frees what an entry owns (its name and wide shape) and zeroes those. */
void tio__entry_clear(struct tio_entry *entry);

/* ------------------------------------------------------------ .npy (npy.c) */

/* True when buf (len bytes) starts with the .npy magic "\x93NUMPY". */
bool tio__npy_magic(const uint8_t *buf, uint64_t len);
/* From the first bytes of a .npy stream (at least 12, or all there are),
 * the size of the whole header, data offset included.  TR_ERR_FORMAT for a
 * bad magic or version, a truncated preamble, or a header over
 * TIO_NPY_HEADER_MAX. */
tr_status tio__npy_header_size(const uint8_t *buf, uint64_t len, uint64_t *size);
/*
 * Parses a .npy header: buf holds at least its first tio__npy_header_size
 * bytes, and the stream is stream_size bytes long.  Fills *entry (name NULL,
 * offset = where the data starts, strides in elements for C or Fortran
 * order, byteswap for big-endian data, supported false for a dtype the
 * engine lacks, with dtype_text as written; a structured dtype is spelt as
 * NumPy's dtype.str, "|V" and its item size; a rank past TR_MAX_DIMS, up
 * to NumPy's 64, is kept in the wide fields, which the caller frees with
 * tio__entry_clear).  Checks that the data fits:
 * "truncated: header says N <dtype> values (B bytes) after offset O, file
 * has M bytes".  The dict literal is parsed strictly, never evaluated.
 */
tr_status tio__npy_parse(const uint8_t *buf, uint64_t len, uint64_t stream_size,
                         struct tio_entry *entry);
/*
 * The header NumPy writes for a C-ordered array of dtype and shape:
 * version 1.0 (2.0 when the dict needs more than 65535 bytes), the dict
 * padded with spaces and a newline so that the data starts at a multiple
 * of 64 bytes.  *out is malloc'ed, *len its length.  TR_ERR_DTYPE for bf16,
 * which .npy cannot hold.
 */
tr_status tio__npy_header(enum tr_dtype dtype, int ndim, const int64_t *shape, char **out,
                          size_t *len);

/* ---------------------------------------------- .safetensors (safetensors.c) */

struct tio__safetensors {
    size_t count;
    struct tio_entry *entries;    /* in data-offset order; names malloc'ed */
    bool has_metadata;
    size_t metadata_count;
    char **metadata_keys;         /* malloc'ed */
    char **metadata_values;
    uint64_t data_end;            /* 8 + header length + the last data offset:
                                     where the data ends (the stream's length) */
};

/* True when buf plausibly starts a safetensors stream: an 8-byte header
 * length that fits the stream, then '{' after any JSON blanks. */
bool tio__safetensors_magic(const uint8_t *buf, uint64_t len, uint64_t stream_size);
/* From the first 8 bytes, the whole header's size (8 + the JSON length).
 * TR_ERR_FORMAT for a stream under 8 bytes or a header over the limit or
 * past the stream's end. */
tr_status tio__safetensors_header_size(const uint8_t *buf, uint64_t len, uint64_t stream_size,
                                       uint64_t *size);
/*
 * Parses and validates a safetensors header: buf holds at least its first
 * tio__safetensors_header_size bytes of a stream of stream_size bytes.
 * Rejects what the reference implementation rejects (invalid UTF-8 or
 * JSON, duplicate names, unknown dtype strings, data offsets that, taken in
 * offset order, leave a hole, overlap, do not start at 0 or do not end at
 * the stream's end, a size that does not match shape x dtype, overflow),
 * each with TR_ERR_FORMAT and a message that names the tensor.  Entries of
 * dtypes the format defines but the engine lacks (F8_E4M3, ...) are kept
 * with supported = false.  On success the caller frees *out with
 * tio__safetensors_free.
 */
tr_status tio__safetensors_parse(const uint8_t *buf, uint64_t len, uint64_t stream_size,
                                 struct tio__safetensors *out);
void tio__safetensors_free(struct tio__safetensors *st);
/* The format's dtype string for an engine dtype ("F32"). */
const char *tio__safetensors_dtype_name(enum tr_dtype dtype);
/*
 * The header the reference writer produces for these tensors: the 8-byte
 * length and the JSON text, padded with spaces to a multiple of 8, with the
 * tensors laid out in the reference writer's order (by dtype alignment,
 * largest first, then by name).  order[i] receives the index (into the
 * arguments) of the i-th tensor whose data follows the header.  *out is
 * malloc'ed.  TR_ERR_INVALID for duplicate or empty names.
 */
tr_status tio__safetensors_header(size_t n, const char *const *names,
                                  const enum tr_dtype *dtypes, const int *ndims,
                                  const int64_t (*shapes)[TR_MAX_DIMS],
                                  const struct tio_metadata *metadata, char **out,
                                  size_t *len, size_t *order);

/* ------------------------------------------------------------ .npz (npz.c) */

/* Where a member of an .npz archive keeps its .npy stream. */
struct tio__npz_member {
    const char *name;             /* the tensor's name (owned by its entry) */
    uint64_t data;                /* offset of its (compressed) bytes in the archive */
    uint64_t csize, usize;        /* compressed and inflated sizes, in bytes */
    uint32_t crc;                 /* CRC-32 of the inflated bytes */
    bool deflated;                /* else stored */
};

/* True when buf starts like a zip archive: a member's local header, or
 * the end record of an archive of no member. */
bool tio__npz_magic(const uint8_t *buf, uint64_t len);
/*
 * Parses an .npz archive held whole in buf (size bytes): its zip directory
 * (zip64 included) and each member's .npy header, inflating only as much
 * of a deflated member as its header takes.  out receives one entry per
 * member, named without ".npy", in directory order; a stored member's
 * offset counts from the archive's start, a deflated one's from the start
 * of its inflated bytes.  *members (malloc'ed, one per entry) says where
 * each member's bytes are.  TR_ERR_FORMAT for anything malformed: a
 * missing or truncated record, a field out of bounds, encryption, a method
 * other than stored or deflated, a member not called NAME.npy, duplicate
 * names, a member claiming more than deflate can produce.  On success the
 * caller frees out with tio__safetensors_free and *members with free.
 */
tr_status tio__npz_parse(const uint8_t *buf, uint64_t size, struct tio__safetensors *out,
                         struct tio__npz_member **members);
/*
 * Inflates a deflated member of archive into dst: its first want bytes
 * (fewer when the data ends sooner; *got says how many), or, with whole,
 * all m->usize bytes (want is then ignored), checking that the stream ends
 * exactly there and that the CRC-32 matches.
 */
tr_status tio__npz_inflate(const uint8_t *archive, const struct tio__npz_member *m, uint8_t *dst,
                           uint64_t want, bool whole, uint64_t *got);

/* ------------------------------------------------------------ raw (raw.c) */

/* Checks a raw layout against a stream of stream_size bytes (shape and
 * strides sane, every element inside the stream) and describes it. */
tr_status tio__raw_describe(const struct tio_raw_layout *layout, uint64_t stream_size,
                            struct tio_entry *entry);

/* ------------------------------------------------------------ guard.c */

/* Records a read-only mapping of the input at path (copied), so that a
 * SIGBUS inside it (the file shrank) is survived: see tio_guard_inputs.
 * A full registry leaves the mapping unguarded. */
void tio__guard_register(const void *base, uint64_t length, const char *path);
/* Forgets the mapping at base, before it is unmapped; a no-op for one
 * never registered. */
void tio__guard_unregister(const void *base);
/* When addr lies in a registered mapping: treats it as a fault there (zero
 * pages over the mapping, the input marked as changed) and returns true.
 * For a system call that read a mapping and failed with EFAULT. */
bool tio__guard_claim(const void *addr);

/* ------------------------------------------------------------ sinks */

/* Where a writer's bytes go: a file descriptor, possibly through a zstd
 * compressor.  write_all reports TR_ERR_IO with errno's reason. */
struct tio__sink;
struct tio__sink *tio__sink_fd(int fd, enum tio_compression compression, int level,
                               int threads);
/* Announces how many bytes will be written in all, before the first write:
 * a zstd frame then records its content size, which readers use to check
 * a header's claims without decompressing everything. */
void tio__sink_pledge(struct tio__sink *sink, uint64_t total);
tr_status tio__sink_write(struct tio__sink *sink, const void *buf, size_t len);
/* Flushes everything (ends the zstd frame); the fd stays open. */
tr_status tio__sink_finish(struct tio__sink *sink);
uint64_t tio__sink_bytes(const struct tio__sink *sink); /* before compression */
void tio__sink_free(struct tio__sink *sink);

#endif /* TR_IO_IMPL_H */
