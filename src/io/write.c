/*
 * write.c - outputs: a temporary file beside the destination, written in
 * the destination's format, renamed into place only on commit; standard
 * output streamed.  Tensors are written block by block through one reused
 * buffer, so a strided or converted tensor is never copied whole.
 */
#include "io_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Bytes converted and written at a time. */
#define BLOCK_BYTES (UINT64_C(4) << 20)
#define MAX_TEMPORARIES 1024

struct tio_output {
    char *path;         /* the destination */
    char *tmp_path;     /* the temporary file beside it; NULL when streamed */
    int fd;
    bool own_fd;        /* fd is to be closed: a temporary file, or a device
                           or pipe opened by name */
    int slot;           /* in the temporaries registry; -1 when none */
    enum tio_format format;
    struct tio_write_options options;
    struct tio__sink *sink;
    uint64_t bytes;
    bool written, committed;
    bool failed;        /* the write failed: nothing may be committed */
    const char *mapped; /* tio_output_map's data, and the file's length */
    uint64_t mapped_bytes;
    uint64_t mapped_header; /* bytes before the data */
    bool reserved;      /* tio_output_reserve has reserved the mapped blocks */
    bool resized;       /* tio_output_map may have left the file longer than
                           a write: it is cut to what was written */
    uint64_t expected;  /* tio_output_begin: the data bytes still to come */
    bool begun;
};

/* ---------------------------------------------------------- temporaries */

/* Every live temporary file, for tio_remove_temporaries, which a signal
 * handler may call at any moment: a path is complete before it is
 * published and unpublished before it is freed; the slots are atomic, as
 * C11 requires of what a signal handler reads. */
static _Atomic(char *) temporaries[MAX_TEMPORARIES];
static pthread_mutex_t temporaries_lock = PTHREAD_MUTEX_INITIALIZER;

/* Blocks SIGINT and SIGTERM on the calling thread while a temporary file
 * changes hands (created and not yet published, renamed and not yet
 * unpublished), so that an interruption finds the registry true. */
static void hold_signals(sigset_t *old)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

static void release_signals(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Records path as a live temporary; -1 when the registry is full. */
static int publish(char *path)
{
    int slot = -1;

    pthread_mutex_lock(&temporaries_lock);
    for (int i = 0; i < MAX_TEMPORARIES && slot < 0; i++)
        if (!atomic_load(&temporaries[i])) {
            atomic_store(&temporaries[i], path);
            slot = i;
        }
    pthread_mutex_unlock(&temporaries_lock);
    return slot;
}

static void unpublish(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&temporaries_lock);
    atomic_store(&temporaries[slot], NULL);
    pthread_mutex_unlock(&temporaries_lock);
}

void tio_remove_temporaries(void)
{
    for (int i = 0; i < MAX_TEMPORARIES; i++) {
        char *p = atomic_load(&temporaries[i]);
        if (p)
            unlink(p);
    }
}

/* -------------------------------------------------------------- opening */

/* The process's umask, read where Linux shows it, so that it never has to
 * be changed (umask(2) alone can only read it by setting it, which would
 * race with other threads creating files). */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    unsigned mask = 022;

    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return (mode_t)mask;
}

/* The mode a new file gets: the destination's own when it exists, else
 * what the umask leaves of 0666. */
static mode_t new_file_mode(const char *path)
{
    struct stat st;

    if (stat(path, &st) == 0)
        return st.st_mode & 07777;
    return 0666 & ~current_umask();
}

static char *dir_of(const char *path)
{
    char *copy = strdup(path), *dir;

    if (!copy)
        return NULL;
    dir = strdup(dirname(copy));
    free(copy);
    return dir;
}

static tr_status make_temporary(struct tio_output *out)
{
    char *dir = dir_of(out->path), *base_copy = strdup(out->path);
    const char *base = base_copy ? basename(base_copy) : NULL;
    size_t len;
    sigset_t held;
    tr_status s = TR_OK;

    if (!dir || !base) {
        s = tio__error(TR_ERR_OOM, "out of memory starting an output");
        goto done;
    }
    len = strlen(dir) + strlen(base) + 32;
    out->tmp_path = malloc(len);
    if (!out->tmp_path) {
        s = tio__error(TR_ERR_OOM, "out of memory starting an output");
        goto done;
    }
    /* ".NAME.tmp-XXXXXX", NAME shortened so the whole fits in NAME_MAX */
    snprintf(out->tmp_path, len, "%s/.%.*s.tmp-XXXXXX", dir, NAME_MAX - 12, base);
    hold_signals(&held);
    out->fd = mkostemp(out->tmp_path, O_CLOEXEC);
    if (out->fd >= 0)
        out->slot = publish(out->tmp_path);
    release_signals(&held);
    if (out->fd < 0) {
        s = tio__error(TR_ERR_IO, "cannot create a file in %s: %s", dir, strerror(errno));
        free(out->tmp_path);
        out->tmp_path = NULL;
        goto done;
    }
    if (out->slot < 0)
        s = tio__error(TR_ERR_IO, "too many outputs open at once (at most %d)",
                       MAX_TEMPORARIES);
    else if (fchmod(out->fd, new_file_mode(out->path)) != 0)
        s = tio__error(TR_ERR_IO, "cannot set the mode of a new file in %s: %s", dir,
                       strerror(errno));
done:
    free(dir);
    free(base_copy);
    return s;
}

tr_status tio_output_check(const char *path)
{
    struct stat st;
    char *dir;
    tr_status s = TR_OK;

    if (strcmp(path, "-") == 0)
        return TR_OK;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return tio__error(TR_ERR_IO, "is a directory");
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (access(path, W_OK) != 0)
            return tio__error(TR_ERR_IO, "cannot open for writing: %s", strerror(errno));
        return TR_OK;
    }
    dir = dir_of(path);
    if (!dir)
        return tio__error(TR_ERR_OOM, "out of memory checking an output");
    /* make_temporary's mkostemp needs to write and search the directory */
    if (access(dir, W_OK | X_OK) != 0)
        s = tio__error(TR_ERR_IO, "cannot create a file in %s: %s", dir, strerror(errno));
    free(dir);
    return s;
}

bool tio_output_is_file(const char *path)
{
    struct stat st;

    return strcmp(path, "-") != 0 && (stat(path, &st) != 0 || S_ISREG(st.st_mode));
}

/* A destination that is a symbolic link to a file (/dev/stdout redirected
 * to one, a link into a data directory) is replaced where the link points,
 * as cp and the shell's > write through it: the link stays a link. */
static tr_status follow_link(struct tio_output *out)
{
    struct stat lst;
    char *target;

    if (lstat(out->path, &lst) != 0 || !S_ISLNK(lst.st_mode))
        return TR_OK;
    target = realpath(out->path, NULL);
    if (!target)
        return tio__error(TR_ERR_IO, "cannot follow the link: %s", strerror(errno));
    free(out->path);
    out->path = target;
    return TR_OK;
}

struct tio_output *tio_output_open(const char *path, const struct tio_write_options *options)
{
    struct tio_output *out = calloc(1, sizeof *out);
    enum tio_format by_name;
    enum tio_compression compression;
    struct stat st;
    bool exists;

    if (out)
        out->path = strdup(path);
    if (!out || !out->path) {
        free(out);
        tio__error(TR_ERR_OOM, "out of memory starting an output");
        return NULL;
    }
    out->fd = -1;
    out->slot = -1;
    if (options)
        out->options = *options;
    tio_format_from_path(path, &by_name, &compression);
    out->format = out->options.format;
    if (out->format == TIO_FORMAT_UNKNOWN) {
        out->format = by_name;
        out->options.compression = compression;
    }
    if (out->format == TIO_FORMAT_UNKNOWN && strcmp(path, "-") == 0)
        out->format = TIO_FORMAT_NPY;
    if (out->format == TIO_FORMAT_UNKNOWN) {
        tio__error(TR_ERR_INVALID, "cannot tell the format from the name (expected .npy, "
                                   ".safetensors, .bin or .raw, optionally with .zst)");
        tio_output_close(out);
        return NULL;
    }
    if (out->format == TIO_FORMAT_NPZ) {
        tio__error(TR_ERR_INVALID, ".npz is read only in tensorrun: write .safetensors for "
                                   "several tensors, or .npy for one");
        tio_output_close(out);
        return NULL;
    }
    exists = strcmp(path, "-") != 0 && stat(path, &st) == 0;
    if (exists && S_ISREG(st.st_mode) && follow_link(out) != TR_OK) {
        tio_output_close(out);
        return NULL;
    }
    if (strcmp(path, "-") == 0) {
        out->fd = STDOUT_FILENO;
    } else if (exists && S_ISDIR(st.st_mode)) {
        tio__error(TR_ERR_IO, "is a directory");
        tio_output_close(out);
        return NULL;
    } else if (exists && !S_ISREG(st.st_mode)) {
        /* a device or a pipe (/dev/null, /dev/stdout, a FIFO) is written
         * into as standard output is: replacing it by a rename would put a
         * regular file in its place */
        out->fd = open(path, O_WRONLY | O_CLOEXEC);
        if (out->fd < 0) {
            tio__error(TR_ERR_IO, "cannot open for writing: %s", strerror(errno));
            tio_output_close(out);
            return NULL;
        }
        out->own_fd = true;
    } else if (make_temporary(out) != TR_OK) {
        tio_output_close(out);
        return NULL;
    } else {
        out->own_fd = true;
    }
    out->sink = tio__sink_fd(out->fd, out->options.compression, out->options.level,
                             out->options.threads);
    if (!out->sink) {
        tio_output_close(out);
        return NULL;
    }
    return out;
}

/* --------------------------------------------------------------- mapping */

static void unmap_file(void *data, void *ctx)
{
    munmap(data, (size_t)(uintptr_t)ctx);
}

struct tr_tensor *tio_output_map(struct tio_output *out, enum tr_dtype dtype, int ndim,
                                 const int64_t *shape)
{
    uint64_t numel = 1, data_bytes, total;
    struct statvfs fs;
    char *header = NULL;
    size_t len = 0;
    void *base;
    struct tr_blob blob;
    struct tr_tensor *t;

    if (!out->tmp_path || out->written || out->mapped || out->options.compression ||
        (out->format != TIO_FORMAT_NPY && out->format != TIO_FORMAT_RAW))
        return NULL;
    for (int i = 0; i < ndim; i++)
        numel *= (uint64_t)shape[i];
    data_bytes = numel * tr_dtype_size(dtype);
    if (data_bytes == 0 || data_bytes > SIZE_MAX / 2)
        return NULL;
    if (out->format == TIO_FORMAT_NPY &&
        tio__npy_header(dtype, ndim, shape, &header, &len) != TR_OK)
        return NULL;
    total = len + data_bytes;
    /* Not at all where the file system lacks the room: a file system may
     * fill itself up to the failure of the reservation, and all else
     * writing there (this program's own messages too) would fail. */
    if (fstatvfs(out->fd, &fs) != 0 || (uint64_t)fs.f_bavail < total / fs.f_frsize + 1) {
        free(header);
        return NULL;
    }
    /* pwrite leaves the file offset at 0 for a write as usual */
    out->resized = true;
    if (len && pwrite(out->fd, header, len, 0) != (ssize_t)len) {
        free(header);
        return NULL;
    }
    free(header);
    base = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, out->fd, 0);
    if (base == MAP_FAILED)
        return NULL;
    blob = (struct tr_blob){.data = base,
                            .nbytes = (size_t)total,
                            .offset = (int64_t)len,
                            .deleter = unmap_file,
                            .deleter_ctx = (void *)(uintptr_t)total,
                            .flags = 0};
    t = tr_from_blob(&blob, dtype, ndim, shape, NULL, TR_CPU);
    if (!t) {
        munmap(base, (size_t)total);
        return NULL;
    }
    out->mapped = (const char *)base + len;
    out->mapped_bytes = total;
    out->mapped_header = len;
    return t;
}

int tio_output_reserve(struct tio_output *out)
{
    int rc;

    if (!out->mapped)
        return EINVAL;
    if (out->reserved)
        return 0;
    rc = posix_fallocate(out->fd, 0, (off_t)out->mapped_bytes);
    if (rc != 0) {
        /* what was reserved goes back at once (failing that, when the
         * output is written and cut to size) */
        int cut = ftruncate(out->fd, (off_t)out->mapped_header);
        (void)cut;
        return rc;
    }
    out->reserved = true;
    return 0;
}

int tio_output_store(struct tio_output *out, uint64_t offset, const void *src, size_t n)
{
    const char *p = src;

    if (!out->mapped || offset > out->mapped_bytes - out->mapped_header ||
        n > out->mapped_bytes - out->mapped_header - offset)
        return EINVAL;
    while (n > 0) {
        ssize_t done = pwrite(out->fd, p, n, (off_t)(out->mapped_header + offset));
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return done < 0 ? errno : EIO;
        p += done;
        offset += (uint64_t)done;
        n -= (size_t)done;
    }
    return 0;
}

static int sink_reserve(void *ctx)
{
    return tio_output_reserve(ctx);
}

static int sink_store(void *ctx, uint64_t offset, const void *src, size_t n)
{
    return tio_output_store(ctx, offset, src, n);
}

struct tr_sink tio_output_sink(struct tio_output *out)
{
    struct tr_sink sink = {.store = sink_store, .reserve = sink_reserve, .ctx = out};

    return sink;
}

/* Whether t is the tensor tio_output_map made, as written. */
static bool is_mapped(const struct tio_output *out, const struct tr_tensor *t, enum tr_dtype dtype)
{
    return out->mapped && tr_tensor_data(t) == out->mapped && tr_tensor_dtype(t) == dtype &&
           tr_tensor_is_contiguous(t);
}

/* -------------------------------------------------------------- writing */

/* The block of t that starts at index: dimensions before k at their index,
 * dimension k from index[k], at most chunk long (k = -1: the scalar t). */
static struct tr_tensor *block_at(const struct tr_tensor *t, int k, const int64_t *index,
                                  int64_t chunk)
{
    struct tr_tensor *v = tr_expand(t, tr_tensor_shape(t), tr_tensor_ndim(t)); /* an alias */

    for (int d = 0; d < k && v; d++)
        v = tr_select(v, 0, index[d]);
    return k < 0 || !v ? v : tr_slice(v, 0, index[k], index[k] + chunk, 1);
}

/* Drops the pages wholly inside [p, p + len) from this process's memory.
 * Only for shared file mappings (TR_FLAG_MAPPED) read once, in order: the
 * data stays in the page cache, and a later read faults it back in. */
static void release_pages(const void *p, uint64_t len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)p + len) & ~(page - 1);

    if (end > start)
        madvise((void *)start, end - start, MADV_DONTNEED);
}

/* Writes a compact CPU tensor's bytes as they are; a file mapping is
 * written block by block, each block's pages given back once written, so
 * that streaming a file costs no more resident memory than a block. */
static tr_status write_compact(struct tio__sink *sink, const struct tr_tensor *t)
{
    const char *p = tr_tensor_data(t);
    uint64_t bytes = tr_tensor_nbytes(t);
    tr_status s = TR_OK;

    if (!(tr_tensor_flags(t) & TR_FLAG_MAPPED))
        return tio__sink_write(sink, p, (size_t)bytes);
    for (uint64_t done = 0; done < bytes && s == TR_OK; done += BLOCK_BYTES) {
        uint64_t n = bytes - done < BLOCK_BYTES ? bytes - done : BLOCK_BYTES;
        s = tio__sink_write(sink, p + done, (size_t)n);
        release_pages(p + done, n);
    }
    return s;
}

/* The buffer write_values converts through: none when t is written as
 * it lies, else at most BLOCK_BYTES (no larger than the values, so that a
 * small output costs a small block). */
static uint64_t buffer_bytes_for(bool as_it_lies, int64_t numel, enum tr_dtype dtype)
{
    uint64_t item = tr_dtype_size(dtype);

    if (numel == 0 || as_it_lies)
        return 0;
    return (uint64_t)numel < BLOCK_BYTES / item ? (uint64_t)numel * item : BLOCK_BYTES;
}

uint64_t tio_write_pool_bytes(const struct tr_value *t, enum tr_dtype dtype)
{
    int64_t numel = 1;

    if (t->kind != TR_VALUE_TENSOR)
        return 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0)
            return 0;
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(numel, t->shape[i], &numel))
            numel = INT64_MAX; /* past any buffer: BLOCK_BYTES */
    if (dtype == TR_DTYPE_COUNT)
        dtype = t->dtype;
    return buffer_bytes_for(t->device.kind == TR_DEV_CPU && t->dtype == dtype && !t->strided,
                            numel, dtype);
}

/* Writes t's values in C order as dtype: as they are when they already are
 * those bytes, else through a pool buffer (buffer_bytes_for). */
static tr_status write_values(struct tio__sink *sink, const struct tr_tensor *t,
                              enum tr_dtype dtype)
{
    struct tr_tensor *buffer;
    int64_t buffer_bytes;
    uint8_t *buf;
    int ndim = tr_tensor_ndim(t), k;
    const int64_t *shape = tr_tensor_shape(t);
    uint64_t item = tr_dtype_size(dtype), inner = item;
    int64_t index[TR_MAX_DIMS] = {0}, chunk, total = tr_tensor_numel(t);
    tr_status s = TR_OK;
    bool streamed = tr_tensor_device(t).kind == TR_DEV_CPU && tr_tensor_is_contiguous(t) &&
                    (tr_tensor_flags(t) & TR_FLAG_MAPPED);

    if (total == 0)
        return TR_OK;
    if (tr_tensor_device(t).kind == TR_DEV_CPU && tr_tensor_dtype(t) == dtype &&
        tr_tensor_is_contiguous(t))
        return write_compact(sink, t);
    buffer_bytes = (int64_t)buffer_bytes_for(false, total, dtype);
    buffer = tr_empty(TR_DTYPE_U8, 1, &buffer_bytes, TR_CPU);
    if (!buffer)
        return tr_last_status();
    buf = tr_tensor_data_mut(buffer);

    /* blocks: dimension k is cut into chunks whose trailing dimensions fit
     * the buffer; the dimensions before k are stepped one index at a time */
    for (k = ndim - 1; k > 0 && inner * (uint64_t)shape[k] <= BLOCK_BYTES; k--)
        inner *= (uint64_t)shape[k];
    if (ndim == 0) {
        k = -1;
        chunk = 1;
    } else {
        chunk = (int64_t)(BLOCK_BYTES / inner);
        chunk = chunk < 1 ? 1 : chunk;
    }
    for (int64_t done = 0; done < total && s == TR_OK;) {
        struct tr_scope *scope = tr_scope_begin();
        struct tr_tensor *block = block_at(t, k, index, chunk);
        struct tr_tensor *host = block && tr_tensor_device(block).kind != TR_DEV_CPU
                                     ? tr_to(block, TR_CPU) : block;
        int64_t n = block ? tr_tensor_numel(block) : 0;
        struct tr_blob blob = {.data = buf, .nbytes = (uint64_t)buffer_bytes};
        struct tr_tensor *dst = host ? tr_from_blob(&blob, dtype, tr_tensor_ndim(host),
                                                    tr_tensor_shape(host), NULL, TR_CPU)
                                     : NULL;

        if (!dst || tr_copy_into(dst, host) != TR_OK)
            s = tr_last_status();
        else
            s = tio__sink_write(sink, buf, (size_t)((uint64_t)n * item));
        if (streamed && block)
            release_pages(tr_tensor_data(block), tr_tensor_nbytes(block));
        tr_scope_end(scope, NULL, 0);
        done += n;
        /* the next block: along k, then carrying into the dimensions before */
        if (k >= 0) {
            index[k] += chunk;
            for (int d = k; d > 0 && index[d] >= shape[d]; d--) {
                index[d] = 0;
                index[d - 1]++;
            }
        }
    }
    tr_release(buffer);
    return s;
}

static const struct tr_tensor *const *one(const struct tr_tensor *const *tensors, size_t n,
                                          const char *format)
{
    if (n != 1) {
        tio__error(TR_ERR_INVALID, "a %s file holds one tensor, not %zu", format, n);
        return NULL;
    }
    return tensors;
}

static tr_status write_npy(struct tio_output *out, const struct tr_tensor *t,
                           enum tr_dtype dtype)
{
    char *header;
    size_t len;
    tr_status s = tio__npy_header(dtype, tr_tensor_ndim(t), tr_tensor_shape(t), &header, &len);

    if (s != TR_OK)
        return s;
    tio__sink_pledge(out->sink, len + (uint64_t)tr_tensor_numel(t) * tr_dtype_size(dtype));
    s = tio__sink_write(out->sink, header, len);
    free(header);
    return s == TR_OK ? write_values(out->sink, t, dtype) : s;
}

static tr_status write_safetensors(struct tio_output *out, size_t n, const char *const *names,
                                   const struct tr_tensor *const *tensors,
                                   enum tr_dtype dtype, const enum tr_dtype *each,
                                   const struct tio_metadata *metadata)
{
    static const char *const default_name[1] = {"tensor"};
    enum tr_dtype *dtypes = calloc(n ? n : 1, sizeof *dtypes);
    int *ndims = calloc(n ? n : 1, sizeof *ndims);
    int64_t (*shapes)[TR_MAX_DIMS] = calloc(n ? n : 1, sizeof *shapes);
    size_t *order = calloc(n ? n : 1, sizeof *order), len;
    char *header = NULL;
    tr_status s = TR_OK;

    if (!dtypes || !ndims || !shapes || !order)
        s = tio__error(TR_ERR_OOM, "out of memory writing a header");
    if (!names && n == 1)
        names = default_name;
    if (s == TR_OK && !names)
        s = tio__error(TR_ERR_INVALID, "the tensors of a safetensors file need names");
    for (size_t i = 0; i < n && s == TR_OK; i++) {
        enum tr_dtype want = each ? each[i] : dtype;
        dtypes[i] = want == TR_DTYPE_COUNT ? tr_tensor_dtype(tensors[i]) : want;
        ndims[i] = tr_tensor_ndim(tensors[i]);
        memcpy(shapes[i], tr_tensor_shape(tensors[i]), (size_t)ndims[i] * sizeof(int64_t));
    }
    if (s == TR_OK)
        s = tio__safetensors_header(n, names, dtypes, ndims, (const int64_t(*)[TR_MAX_DIMS])shapes,
                                    metadata, &header, &len, order);
    if (s == TR_OK) {
        uint64_t total = len;
        for (size_t i = 0; i < n; i++)
            total += (uint64_t)tr_tensor_numel(tensors[i]) * tr_dtype_size(dtypes[i]);
        tio__sink_pledge(out->sink, total);
        s = tio__sink_write(out->sink, header, len);
    }
    for (size_t i = 0; i < n && s == TR_OK; i++)
        s = write_values(out->sink, tensors[order[i]], dtypes[order[i]]);
    free(header);
    free(order);
    free(shapes);
    free(ndims);
    free(dtypes);
    return s;
}

/* The file's last steps once every byte went to the sink (s: how that
 * went): flush, fsync when asked, close. */
static tr_status close_written(struct tio_output *out, tr_status s)
{
    if (s == TR_OK && out->tmp_path && out->options.fsync && fsync(out->fd) != 0)
        s = tio__error(TR_ERR_IO, "cannot flush to disk: %s", strerror(errno));
    if (out->own_fd && out->fd >= 0) {
        if (close(out->fd) != 0 && s == TR_OK)
            s = tio__error(TR_ERR_IO, "write error: %s", strerror(errno));
        out->fd = -1;
    }
    out->failed = s != TR_OK;
    return s;
}

static tr_status finish(struct tio_output *out, tr_status s)
{
    if (s == TR_OK)
        s = tio__sink_finish(out->sink);
    out->bytes = tio__sink_bytes(out->sink);
    if (s == TR_OK && out->resized && ftruncate(out->fd, (off_t)out->bytes) != 0)
        s = tio__error(TR_ERR_IO, "write error: %s", strerror(errno));
    return close_written(out, s);
}

/* dtype for every tensor, or, when each is given, each[i] for tensor i
 * (TR_DTYPE_COUNT: keep the tensor's own). */
static tr_status output_write(struct tio_output *out, size_t n, const char *const *names,
                              const struct tr_tensor *const *tensors, enum tr_dtype dtype,
                              const enum tr_dtype *each, const struct tio_metadata *metadata)
{
    const struct tr_tensor *const *single;
    tr_status s;

    TR_RETURN_ERROR_IF(out->written, TR_ERR_STATE, "the output was written already");
    if (each && n > 0 && out->format != TIO_FORMAT_SAFETENSORS) {
        dtype = each[0];
        each = NULL;
    }
    out->written = true;
    if (n == 1 &&
        is_mapped(out, tensors[0], dtype == TR_DTYPE_COUNT ? tr_tensor_dtype(tensors[0]) : dtype)) {
        /* computed in place: header and values are in the file already,
         * unless the mapping was neither reserved nor stored into */
        struct stat st;
        s = fstat(out->fd, &st) == 0 && (uint64_t)st.st_size == out->mapped_bytes
                ? TR_OK
                : tio__error(TR_ERR_STATE, "the mapped output was never filled");
        out->bytes = out->mapped_bytes;
        goto written;
    }
    switch (out->format) {
    case TIO_FORMAT_NPY:
        single = one(tensors, n, "npy");
        s = single ? write_npy(out, single[0],
                               dtype == TR_DTYPE_COUNT ? tr_tensor_dtype(single[0]) : dtype)
                   : tr_last_status();
        break;
    case TIO_FORMAT_RAW:
        single = one(tensors, n, "raw");
        if (single)
            tio__sink_pledge(out->sink, (uint64_t)tr_tensor_numel(single[0]) *
                                            tr_dtype_size(dtype == TR_DTYPE_COUNT
                                                              ? tr_tensor_dtype(single[0])
                                                              : dtype));
        s = single ? write_values(out->sink, single[0],
                                  dtype == TR_DTYPE_COUNT ? tr_tensor_dtype(single[0]) : dtype)
                   : tr_last_status();
        break;
    default:
        s = write_safetensors(out, n, names, tensors, dtype, each, metadata);
    }
    return finish(out, s);
written:
    return close_written(out, s);
}

tr_status tio_output_write(struct tio_output *out, size_t n, const char *const *names,
                           const struct tr_tensor *const *tensors, enum tr_dtype dtype,
                           const struct tio_metadata *metadata)
{
    return output_write(out, n, names, tensors, dtype, NULL, metadata);
}

tr_status tio_output_write_each(struct tio_output *out, size_t n, const char *const *names,
                                const struct tr_tensor *const *tensors,
                                const enum tr_dtype *dtypes, const struct tio_metadata *metadata)
{
    return output_write(out, n, names, tensors, TR_DTYPE_COUNT, dtypes, metadata);
}

tr_status tio_output_begin(struct tio_output *out, size_t n, const char *const *names,
                           const enum tr_dtype *dtypes, const int *ndims,
                           const int64_t (*shapes)[TR_MAX_DIMS],
                           const struct tio_metadata *metadata, size_t *order)
{
    static const char *const default_name[1] = {"tensor"};
    char *header = NULL;
    size_t len = 0;
    uint64_t data = 0;
    tr_status s = TR_OK;

    TR_RETURN_ERROR_IF(out->written, TR_ERR_STATE, "the output was written already");
    out->written = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = tr_dtype_size(dtypes[i]);
        for (int d = 0; d < ndims[i]; d++)
            if (__builtin_mul_overflow(bytes, (uint64_t)shapes[i][d], &bytes))
                s = tio__error(TR_ERR_INVALID, "a tensor of more than 2^64 bytes");
        if (__builtin_add_overflow(data, bytes, &data))
            s = tio__error(TR_ERR_INVALID, "tensors of more than 2^64 bytes");
        order[i] = i;
    }
    if (s == TR_OK && out->format == TIO_FORMAT_SAFETENSORS)
        s = tio__safetensors_header(n, names ? names : n == 1 ? default_name : NULL, dtypes,
                                    ndims, shapes, metadata, &header, &len, order);
    else if (s == TR_OK && n != 1)
        s = tio__error(TR_ERR_INVALID, "a %s file holds one tensor, not %zu",
                       tio_format_name(out->format), n);
    else if (s == TR_OK && out->format == TIO_FORMAT_NPY)
        s = tio__npy_header(dtypes[0], ndims[0], shapes[0], &header, &len);
    if (s == TR_OK) {
        tio__sink_pledge(out->sink, len + data);
        s = len ? tio__sink_write(out->sink, header, len) : TR_OK;
    }
    free(header);
    out->expected = data;
    out->begun = s == TR_OK;
    out->failed = s != TR_OK;
    return s;
}

tr_status tio_output_append(struct tio_output *out, const void *data, size_t len)
{
    tr_status s;

    TR_RETURN_ERROR_IF(!out->begun || out->failed, TR_ERR_STATE,
                       "the output was not begun, or has failed");
    TR_RETURN_ERROR_IF(len > out->expected, TR_ERR_STATE,
                       "%zu bytes past the declared tensors' data", len);
    s = tio__sink_write(out->sink, data, len);
    out->expected -= len;
    out->failed = s != TR_OK;
    return s;
}

tr_status tio_output_end(struct tio_output *out)
{
    TR_RETURN_ERROR_IF(!out->begun || out->failed, TR_ERR_STATE,
                       "the output was not begun, or has failed");
    out->begun = false;
    if (out->expected != 0)
        return close_written(out, tio__error(TR_ERR_STATE, "%llu bytes of the declared data "
                                                           "never came",
                                             (unsigned long long)out->expected));
    return finish(out, TR_OK);
}

uint64_t tio_output_bytes(const struct tio_output *out)
{
    return out->bytes;
}

/* Flushes the directory holding path to disk, so that a rename in it
 * survives a crash. */
static tr_status sync_dir(const char *path)
{
    char *dir = dir_of(path);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    tr_status s = TR_OK;

    if (fd < 0 || fsync(fd) != 0)
        s = tio__error(TR_ERR_IO, "cannot flush the directory %s to disk: %s", dir ? dir : "",
                       strerror(errno));
    if (fd >= 0)
        close(fd);
    free(dir);
    return s;
}

tr_status tio_output_commit(struct tio_output *out)
{
    sigset_t held;
    int rc;

    TR_RETURN_ERROR_IF(!out->written || out->failed || out->begun, TR_ERR_STATE,
                       "the output was not written completely: nothing to commit");
    if (!out->tmp_path) {
        out->committed = true;
        return TR_OK;
    }
    hold_signals(&held);
    rc = rename(out->tmp_path, out->path);
    if (rc == 0) {
        unpublish(out->slot);
        out->slot = -1;
        out->committed = true;
    }
    release_signals(&held);
    if (rc != 0)
        return tio__error(TR_ERR_IO, "cannot rename the finished file into place: %s",
                          strerror(errno));
    return out->options.fsync ? sync_dir(out->path) : TR_OK;
}

void tio_output_close(struct tio_output *out)
{
    if (!out)
        return;
    if (out->own_fd && out->fd >= 0)
        close(out->fd);
    if (out->tmp_path && !out->committed)
        unlink(out->tmp_path);
    unpublish(out->slot);
    tio__sink_free(out->sink);
    free(out->tmp_path);
    free(out->path);
    free(out);
}
