/*
 * tensor_reader.h - one tensor of an open file, read in row-major order a
 * run of elements at a time, as compact host memory of a dtype of the
 * caller's choosing: what `compare` and `concat` stream through.
 *
 * - A compact view of a mapping of that dtype is given where it lies,
 *   with read-ahead of the next run and, past drop_above bytes, the runs
 *   already read dropped from memory (tio_readahead).
 * - A stream opened with defer_data (a pipe, zstd) whose tensor
 *   tio_file_streams_rows is read a run at a time into one pool block.
 * - Anything else (Fortran order, another dtype) is loaded as the file
 *   allows (a view, or a copy for big-endian data) and each run copied,
 *   converted, into a pool block.
 * The pool blocks (at most two, of the run's size) are the reader's only
 * memory, so --memory-limit bounds it.
 */
#ifndef TR_CLI_TENSOR_READER_H
#define TR_CLI_TENSOR_READER_H

#include <stdint.h>

#include "tensorrun_io.h"

struct tensor_reader;

/* Starts reading tensor index of file (opened from path) as dtype, runs
 * of at most run elements.  NULL on failure, with the engine's or io's
 * error set. */
struct tensor_reader *tensor_reader_open(struct tio_file *file, size_t index, const char *path,
                                         enum tr_dtype dtype, int64_t run, uint64_t drop_above);
/* The next n (at most the run) elements, valid until the next call or the
 * close.  NULL on failure (a stream that ends early, out of memory). */
const void *tensor_reader_next(struct tensor_reader *r, int64_t n);
/* Elements read so far. */
int64_t tensor_reader_position(const struct tensor_reader *r);
void tensor_reader_close(struct tensor_reader *r);

/* A stream is read in data order only: when the tensors index[0..n), read
 * in that order, would go back (or read one twice), file is read whole
 * first.  TR_OK, or the failure of that read (its error set). */
tr_status tensor_reader_order(struct tio_file *file, const size_t *index, size_t n);

/* The drop-behind threshold: TENSORRUN_DROP_BEHIND, else a quarter of
 * RAM.  false, after saying so, when the variable is not a size. */
bool drop_behind_threshold(uint64_t *out);

#endif /* TR_CLI_TENSOR_READER_H */
