/*
 * tensorrun_io.h - tensor files: .npy, .safetensors and raw, each possibly
 * zstd-compressed.  Readers turn a file into engine tensors that borrow one
 * read-only mapping of it; writers stream tensors to a temporary file beside
 * the destination and rename it into place only when told to.
 *
 * Errors follow the engine's rules (tr_last_status, tr_last_error):
 * TR_ERR_IO when a file cannot be opened, read or written, TR_ERR_FORMAT
 * when it is malformed, TR_ERR_DTYPE when a tensor's dtype cannot be used.
 * Messages say what is wrong but not which file: the caller knows the path
 * and puts it first ("data/x.npy: truncated: ...").
 *
 * Handles: the tensors tio_file_load returns follow the engine's rules (they
 * join the caller's innermost scope).  A tio_file itself holds no handle in
 * any scope, and a loaded tensor stays valid after tio_close: the mapping
 * lives until the last tensor viewing it is released.
 */
#ifndef TENSORRUN_IO_H
#define TENSORRUN_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensorrun.h"
#include "tensorrun_ops.h" /* struct tr_sink */

#ifdef __cplusplus
extern "C" {
#endif

enum tio_format {
    TIO_FORMAT_UNKNOWN,
    TIO_FORMAT_NPY,
    TIO_FORMAT_SAFETENSORS,
    TIO_FORMAT_RAW,
    TIO_FORMAT_NPZ                /* read only */
};

enum tio_compression { TIO_COMPRESSION_NONE, TIO_COMPRESSION_ZSTD };

/* "npy", "safetensors", "raw", "npz" ("unknown" for TIO_FORMAT_UNKNOWN). */
const char *tio_format_name(enum tio_format format);
/* The inverse of tio_format_name; TR_ERR_INVALID for any other word. */
tr_status tio_format_parse(const char *name, enum tio_format *out);
/* Format and compression that a path's name implies: .npy, .safetensors,
 * .bin, .raw and .npz, each optionally followed by .zst.  UNKNOWN when
 * none. */
void tio_format_from_path(const char *path, enum tio_format *format,
                          enum tio_compression *compression);

/* The largest .npy header read (tensorrun(1), TENSOR FILES), and the largest
 * safetensors header (the reference implementation's limit). */
#define TIO_NPY_HEADER_MAX (UINT64_C(1) << 20)
#define TIO_SAFETENSORS_HEADER_MAX UINT64_C(100000000)

/* ------------------------------------------------------------ reading */

/* A raw file has no header: its layout comes from the caller. */
struct tio_raw_layout {
    enum tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    bool has_strides;             /* false: C order */
    int64_t strides[TR_MAX_DIMS]; /* in elements, may be 0 or negative */
    int64_t offset;               /* bytes from the start of the file to element 0 */
};

struct tio_open_options {
    enum tio_format format;            /* UNKNOWN: by magic, then by name (or,
                                          when raw is given, raw) */
    const struct tio_raw_layout *raw;  /* required for raw files */
    bool header_only;                  /* read what describing the file needs and
                                          nothing more (no data page is touched) */
    bool defer_data;                   /* a stream (a pipe, zstd frames) of .npy,
                                          raw or safetensors: its data is read by
                                          tio_file_load, or a block of rows at a
                                          time by tio_file_read_next, not at open */
};

/* One tensor as a file's header describes it. */
struct tio_entry {
    char *name;                   /* NULL in single-tensor formats */
    char dtype_text[24];          /* as the file spells it: "<f4", "F8_E4M3" */
    bool supported;               /* dtype is one of the engine's */
    enum tr_dtype dtype;          /* meaningful when supported */
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int64_t strides[TR_MAX_DIMS]; /* in elements (Fortran order shows here) */
    uint64_t offset;              /* bytes from the start of the (decompressed)
                                     stream to the tensor's first byte */
    uint64_t nbytes;              /* bytes of data */
    bool byteswap;                /* stored big-endian: converted on load */
    bool big_endian;              /* stored most significant byte first (whether
                                     supported or not; false for single bytes) */
    int wide_ndim;                /* a rank past TR_MAX_DIMS (then ndim is 0 and
                                     supported false), else 0 */
    int64_t *wide_shape;          /* then its wide_ndim sizes and wide_ndim
                                     strides in elements (owned by the entry) */
};

struct tio_file;

/*
 * Opens a tensor file ("-" is standard input: mapped when it is a regular
 * file, read into the CPU pool when it is a pipe) and reads its header.
 * Every size, shape and offset in it is checked against the file before
 * anything is mapped or read.  NULL on failure.
 */
struct tio_file *tio_open(const char *path, const struct tio_open_options *options);
/* Closes the file; tensors loaded from it stay valid.  NULL is a no-op. */
void tio_close(struct tio_file *file);

/* The format and compression found (by content, then by name). */
enum tio_format tio_file_format(const struct tio_file *file);
enum tio_compression tio_file_compression(const struct tio_file *file);
/* Bytes of the file as stored (compressed bytes for .zst). */
uint64_t tio_file_size(const struct tio_file *file);
/* Bytes of the file mapped from disk (0 for a pipe or a .zst). */
uint64_t tio_file_mapped_bytes(const struct tio_file *file);
/* The tensors the header describes, in data order; an entry stays valid
 * until tio_close, and is NULL for an index past the last. */
size_t tio_file_count(const struct tio_file *file);
const struct tio_entry *tio_file_entry(const struct tio_file *file, size_t index);
/* The index of the tensor called name, or -1. */
ptrdiff_t tio_file_find(const struct tio_file *file, const char *name);
/* The file's string metadata (safetensors __metadata__), key by key;
 * has_metadata is false when the file has none (always for .npy). */
bool tio_file_has_metadata(const struct tio_file *file);
size_t tio_file_metadata_count(const struct tio_file *file);
const char *tio_file_metadata_key(const struct tio_file *file, size_t index);
const char *tio_file_metadata_value(const struct tio_file *file, size_t index);

/*
 * The bytes of CPU pool memory (before the pool's rounding) that reading
 * the index-th tensor takes, as the header says, also for a file opened
 * header_only: for a stream that is not mapped (zstd, a pipe), the block
 * the whole stream is read into when the file is opened; and the copy
 * tio_file_load makes of a tensor it cannot view where it lies (a deflated
 * .npz member, big-endian or misaligned data).  0 for an index past the
 * last.  The two parts apart: tio_file_stream_bytes, the stream's block
 * (0 for a mapping), which lives until the file is closed or as long as a
 * tensor that views it; tio_file_copy_bytes, the tensor's own copy.
 */
uint64_t tio_file_pool_bytes(const struct tio_file *file, size_t index);
uint64_t tio_file_stream_bytes(const struct tio_file *file);
uint64_t tio_file_copy_bytes(const struct tio_file *file, size_t index);
/* Whether the index-th tensor is a deflated .npz member (inflated into
 * the pool when it is loaded). */
bool tio_file_is_deflated(const struct tio_file *file, size_t index);

/*
 * The index-th tensor on the CPU: a read-only view of the file's mapping
 * when it can be one (little-endian data aligned to its item size), else a
 * copy in the CPU pool.  TR_ERR_DTYPE, naming the dtype, for a tensor of a
 * dtype the engine lacks; TR_ERR_FORMAT for a file opened header_only.
 */
struct tr_tensor *tio_file_load(struct tio_file *file, size_t index);

/*
 * A stream opened with defer_data, read a block of rows at a time:
 * tio_file_streams_rows says whether tensor index can be (a stream of
 * .npy, raw or safetensors, opened with defer_data or for its header
 * only, nothing read past the tensor's first byte, so that the tensors
 * of a safetensors stream can be read one after another in data order;
 * the tensor supported, little-endian, in C order); tio_file_read_deferred reads the data whole now, as an open
 * without defer_data would have (nothing for another file);
 * tio_file_read_next copies
 * the next n bytes of its data into dst, in order (the first call skips
 * to its first byte), an error (TR_ERR_FORMAT) when the stream ends
 * before them; tio_file_finish reads and checks the rest as a whole read
 * would.  A file read so cannot be loaded whole.
 */
bool tio_file_streams_rows(const struct tio_file *file, size_t index);
tr_status tio_file_read_deferred(struct tio_file *file);
tr_status tio_file_read_next(struct tio_file *file, size_t index, void *dst, uint64_t n);
tr_status tio_file_finish(struct tio_file *file);

/* ------------------------------------------------------------ writing */

struct tio_metadata {
    size_t count;
    const char *const *keys;
    const char *const *values;
};

struct tio_write_options {
    enum tio_format format;           /* UNKNOWN: from the path's name */
    enum tio_compression compression; /* used when format is given; otherwise
                                         from the path's name too */
    int level;                        /* zstd level; 0 means 3 */
    int threads;                      /* zstd workers; 0 means all cores */
    bool fsync;                       /* flush file and directory before rename */
};

/*
 * Page-cache hints for a tensor that views a mapped input file (flag
 * TR_FLAG_MAPPED, compact) and is read once, in order, a block of rows at
 * a time (a foreach stage over it):
 * - tio_readahead_next asks the kernel to read [p, p + len) ahead
 *   (madvise MADV_WILLNEED), while the block before it computes;
 * - when the tensor is larger than drop_above bytes (the default,
 *   tio_readahead_default_threshold, is a quarter of the machine's RAM),
 *   tio_readahead_done drops every whole page read up to p + len: first
 *   from this process (MADV_DONTNEED), then from the page cache
 *   (POSIX_FADV_DONTNEED through path, which fadvise alone would skip
 *   while the pages are mapped), so that a file larger than RAM does not
 *   evict everything else.  Such a tensor must not be read again.
 * path is the file (standard input for "-"), offset the file offset of the
 * tensor's first byte.  NULL (and every call a no-op) for a tensor that
 * is not a compact view of a mapping.
 */
struct tio_readahead;
struct tio_readahead *tio_readahead_open(const struct tr_tensor *t, const char *path,
                                         uint64_t offset, uint64_t drop_above);
uint64_t tio_readahead_default_threshold(void);
/* Whether tio_readahead_done drops pages. */
bool tio_readahead_drops(const struct tio_readahead *ra);
void tio_readahead_next(struct tio_readahead *ra, const void *p, uint64_t len);
void tio_readahead_done(struct tio_readahead *ra, const void *p, uint64_t len);
void tio_readahead_close(struct tio_readahead *ra);

struct tio_output;

/*
 * Starts an output: a new temporary file in path's directory (or standard
 * output for "-", or the destination itself when it exists and is not a
 * regular file: a device or a pipe, which are streamed and cannot be
 * taken back).  A regular destination is not touched until
 * tio_output_commit.  TR_ERR_IO when
 * the directory does not exist or is not writable.
 */
struct tio_output *tio_output_open(const char *path, const struct tio_write_options *options);
/*
 * What tio_output_open(path) would fail with, found without creating,
 * opening or writing anything: TR_OK when it would start, else TR_ERR_IO
 * with the same message (a directory that does not exist or cannot be
 * written, a destination that is a directory, a device that cannot be
 * opened for writing).
 */
tr_status tio_output_check(const char *path);
/*
 * Writes the output's one file: n tensors with their names (names may be
 * NULL for a single tensor; safetensors then calls it "tensor"), converted to
 * dtype unless dtype is TR_DTYPE_COUNT, with metadata (safetensors only; may
 * be NULL).  npy and raw take exactly one tensor.  Strided tensors are
 * streamed in blocks, never copied whole.  Call once per output.
 */
tr_status tio_output_write(struct tio_output *out, size_t n, const char *const *names,
                           const struct tr_tensor *const *tensors, enum tr_dtype dtype,
                           const struct tio_metadata *metadata);
/* As tio_output_write, with a dtype for each tensor: dtypes[i] for
 * tensors[i] (TR_DTYPE_COUNT keeps that tensor's own). */
tr_status tio_output_write_each(struct tio_output *out, size_t n, const char *const *names,
                                const struct tr_tensor *const *tensors,
                                const enum tr_dtype *dtypes, const struct tio_metadata *metadata);
/* Whether an output at path is written through a file of its own (a new
 * or regular file, replaced atomically), which tio_output_map can map;
 * false for standard output and for a device or a pipe, which are written
 * into as they are. */
bool tio_output_is_file(const char *path);
/* The CPU pool bytes (before the pool's rounding) that writing a tensor
 * described by t as dtype (TR_DTYPE_COUNT: its own) takes while it is
 * written: none when its bytes are written as they lie (compact, on the
 * CPU, of that dtype), else one buffer of at most 4 MiB that converts it
 * block by block.  tio_output_write takes it for one tensor at a time. */
uint64_t tio_write_pool_bytes(const struct tr_value *t, enum tr_dtype dtype);
/*
 * The data of a one-tensor .npy or raw output, mapped to be computed in
 * place: writes the header for dtype and shape and maps the file
 * (read-write, shared), its blocks not yet reserved.  Returns a compact,
 * writable tensor over the mapping (unmapped with its last view), to be
 * filled either through memory, after tio_output_reserve, or by
 * tio_output_store; tio_output_write given a tensor whose data is that
 * mapping's then writes nothing more, and any other tensor is written as
 * usual, over it.  NULL, with no error, when the output cannot be mapped:
 * standard output, compression, safetensors, or a file system without
 * that much free room.
 */
struct tr_tensor *tio_output_map(struct tio_output *out, enum tr_dtype dtype, int ndim,
                                 const int64_t *shape);
/* Reserves the mapped output's blocks, so that stores into the mapping
 * cannot fail (a store into a hole the disk cannot fill kills the
 * process): 0, or an errno (then nothing is stored through memory, and
 * the output is written as usual). */
int tio_output_reserve(struct tio_output *out);
/* Writes n bytes at byte offset of the mapped output's data, by a call
 * rather than through memory (no page faults, no zeroed pages): 0 or an
 * errno.  Safe from several threads at once, at different offsets. */
int tio_output_store(struct tio_output *out, uint64_t offset, const void *src, size_t n);
/* The mapped output as the engine's sink (tensorrun_ops.h): store is
 * tio_output_store, reserve tio_output_reserve, ctx out.  With the
 * tensor tio_output_map gave, the destination of an op's result
 * (struct tr_dest). */
struct tr_sink tio_output_sink(struct tio_output *out);
/*
 * An output written a piece at a time, for data that is never whole in
 * memory (concat): tio_output_begin writes the header of n tensors (npy
 * and raw take one; safetensors names them, names NULL for one called
 * "tensor") and sets order[0..n) to the order their data follows, which
 * for safetensors is the header's; tio_output_append writes the next
 * len bytes of that data (C order, the declared dtypes); tio_output_end
 * checks that exactly the declared bytes came and finishes the file for
 * tio_output_commit.  TR_ERR_INVALID for declared tensors that do not
 * fit the format, TR_ERR_STATE for more or fewer bytes than declared.
 */
tr_status tio_output_begin(struct tio_output *out, size_t n, const char *const *names,
                           const enum tr_dtype *dtypes, const int *ndims,
                           const int64_t (*shapes)[TR_MAX_DIMS],
                           const struct tio_metadata *metadata, size_t *order);
tr_status tio_output_append(struct tio_output *out, const void *data, size_t len);
tr_status tio_output_end(struct tio_output *out);
/* Bytes written so far (before compression: the file's own size). */
uint64_t tio_output_bytes(const struct tio_output *out);
/* Renames the written temporary file into place (after fsync of the file,
 * and then of the directory, when asked).  For "-", flushes. */
tr_status tio_output_commit(struct tio_output *out);
/* Frees the output; if it was not committed, its temporary file is removed
 * and the destination stays exactly as it was.  NULL is a no-op. */
void tio_output_close(struct tio_output *out);

/* ------------------------------------------------------------ shrinking inputs */

/*
 * Catches SIGBUS for the whole process (once; later calls do nothing).  A
 * fault inside a mapped input (another process truncated the file while it
 * was read) is survived: zero pages are mapped over that input's mapping,
 * the read completes with zeros, and tio_input_changed names the input from
 * then on; whatever was computed since is worthless and must be discarded.
 * Any other SIGBUS kills the process as before, after removing every
 * temporary file.
 */
tr_status tio_guard_inputs(void);
/* The path (as opened; "-" for standard input) of an input that changed
 * size while being read, or NULL while none has.  Valid until the next
 * call into io. */
const char *tio_input_changed(void);

/* Removes every temporary file of every open output.  Safe to call from a
 * signal handler (it only calls unlink). */
void tio_remove_temporaries(void);

#ifdef __cplusplus
}
#endif

#endif /* TENSORRUN_IO_H */
