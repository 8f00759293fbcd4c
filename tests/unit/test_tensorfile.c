/*
 * test_tensorfile.c - what reading a file makes: views of one read-only
 * mapping where the data can be viewed in place, pool copies where it
 * cannot, and a mapping that lives exactly as long as its views.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensorrun_io.h"
#include "tap.h"

static char dir[] = "/tmp/test_tensorfile.XXXXXX";

static void write_file(const char *name, const void *bytes, size_t len, char *path, size_t size)
{
    FILE *f;

    snprintf(path, size, "%s/%s", dir, name);
    f = fopen(path, "wb");
    fwrite(bytes, 1, len, f);
    fclose(f);
}

/* Whether path is mapped into this process now. */
static bool mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    bool found = false;

    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, path) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* A version 1.0 .npy of the given descr, shape text and order, data after. */
static size_t npy(char *out, const char *descr, const char *shape, bool fortran,
                  const void *data, size_t len)
{
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                     descr, fortran ? "True" : "False", shape);
    size_t header = 128;

    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(header - 10);
    out[9] = 0;
    memset(out + 10, ' ', header - 10);
    memcpy(out + 10, dict, (size_t)n);
    out[header - 1] = '\n';
    memcpy(out + header, data, len);
    return header + len;
}

static void test_npy_views(void)
{
    float values[6] = {0, 1, 2, 3, 4, 5};
    char bytes[256], path[128];
    size_t len = npy(bytes, "<f4", "(2, 3)", false, values, sizeof values);
    struct tio_file *f;
    struct tr_tensor *t, *u;
    double v;

    write_file("c.npy", bytes, len, path, sizeof path);
    f = tio_open(path, NULL);
    t = tio_file_load(f, 0);
    ok(t && tr_tensor_storage_kind(t) == TR_STORAGE_ADOPTED, "npy: the tensor adopts the mapping");
    ok(tr_tensor_flags(t) == (TR_FLAG_READONLY | TR_FLAG_MAPPED), "npy: read-only, mapped");
    ok(tr_tensor_offset(t) == 128, "npy: a view at the data's offset, no copy");
    u = tio_file_load(f, 0);
    ok(u && tr_tensor_shares_storage(t, u), "npy: loading twice gives views of one mapping");
    tr_release(u);
    tio_close(f);
    ok(mapped(path), "npy: closing the file leaves the mapping to the tensor");
    ok(tr_tensor_item(t, (int64_t[]){1, 2}, &v) == TR_OK && v == 5, "npy: values read through it");
    tr_release(t);
    ok(!mapped(path), "npy: unmapped with the last view");

    /* Fortran order: a strided view of the same bytes */
    len = npy(bytes, "<f4", "(2, 3)", true, values, sizeof values);
    write_file("f.npy", bytes, len, path, sizeof path);
    f = tio_open(path, NULL);
    t = tio_file_load(f, 0);
    ok(t && !tr_tensor_is_contiguous(t) && tr_tensor_storage_kind(t) == TR_STORAGE_ADOPTED &&
           tr_tensor_strides(t)[0] == 1 && tr_tensor_strides(t)[1] == 2,
       "npy: Fortran order is a strided view of the mapping");
    ok(tr_tensor_item(t, (int64_t[]){1, 0}, &v) == TR_OK && v == 1, "npy: read column-major");
    tr_release(t);
    tio_close(f);

    /* big-endian: converted into the pool */
    uint32_t be[2] = {0x0000803f, 0x00000040}; /* 1.0f and 2.0f, big-endian bytes */
    len = npy(bytes, ">f4", "(2,)", false, be, sizeof be);
    write_file("be.npy", bytes, len, path, sizeof path);
    f = tio_open(path, NULL);
    t = tio_file_load(f, 0);
    ok(t && tr_tensor_storage_kind(t) == TR_STORAGE_POOL && tr_tensor_flags(t) == 0,
       "npy: big-endian data is copied into the pool");
    ok(tr_tensor_item(t, (int64_t[]){1}, &v) == TR_OK && v == 2, "npy: and put in order");
    tr_release(t);
    tio_close(f);
}

static void test_safetensors_views(void)
{
    char path[512];
    struct tio_file *f;
    struct tr_tensor *tensors[9];
    int borrowed = 0, copied = 0, shared = 1;
    const char *src = getenv("TR_SRCDIR");

    snprintf(path, sizeof path, "%s/tests/data/safetensors-reference/overall.safetensors",
             src ? src : ".");
    f = tio_open(path, NULL);
    ok(f && tio_file_count(f) == 9, "safetensors: nine tensors");
    for (size_t i = 0; f && i < 9; i++) {
        const struct tio_entry *e = tio_file_entry(f, i);
        bool aligned = e->offset % tr_dtype_size(e->dtype) == 0;
        tensors[i] = tio_file_load(f, i);
        if (tr_tensor_storage_kind(tensors[i]) == TR_STORAGE_ADOPTED && aligned)
            borrowed++;
        else if (tr_tensor_storage_kind(tensors[i]) == TR_STORAGE_POOL && !aligned)
            copied++;
        if (i > 0 && aligned && tr_tensor_storage_kind(tensors[0]) == TR_STORAGE_ADOPTED &&
            !tr_tensor_shares_storage(tensors[0], tensors[i]))
            shared = 0;
    }
    is_int(borrowed + copied, 9, "safetensors: aligned tensors are views, misaligned ones copies");
    ok(borrowed > 0 && copied > 0, "safetensors: (the file has both: %d views, %d copies)",
       borrowed, copied);
    ok(shared, "safetensors: every view shares the file's one mapping");
    tio_close(f);
    for (size_t i = 0; i < 9; i++)
        tr_release(tensors[i]);
}

/* Pages of [p, p + len) in the page cache (p need not be aligned). */
static size_t resident_pages(const void *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), count = 0;
    uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
    size_t n = ((uintptr_t)p + len - start + page - 1) / page;
    unsigned char *vec = malloc(n);

    if (vec && mincore((void *)start, n * page, vec) == 0)
        for (size_t i = 0; i < n; i++)
            count += vec[i] & 1;
    free(vec);
    return count;
}

/* tio_readahead_next has the kernel read all of a 32 MiB range, not only
 * its first read-ahead window, before anything touches it. */
static void test_readahead_whole_range(void)
{
    const size_t data = (size_t)32 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    char header[128], path[128];
    struct tio_file *f;
    struct tr_tensor *t;
    struct tio_readahead *ra;
    FILE *out;
    char *zeros = calloc(1, 1 << 20);
    size_t got = 0;
    int fd;

    npy(header, "<f4", "(8388608,)", false, "", 0);
    snprintf(path, sizeof path, "%s/ra.npy", dir);
    out = fopen(path, "wb");
    fwrite(header, 1, sizeof header, out);
    for (size_t i = 0; zeros && i < data >> 20; i++)
        fwrite(zeros, 1, 1 << 20, out);
    fclose(out);
    free(zeros);
    /* out of the page cache, where the file system lets it go */
    fd = open(path, O_RDONLY);
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    f = tio_open(path, NULL);
    t = tio_file_load(f, 0);
    tio_close(f);
    if (!t || resident_pages(tr_tensor_data(t), data) > data / page / 2) {
        skip("this file system keeps the file in memory (tmpfs?)");
        tr_release(t);
        unlink(path);
        return;
    }
    ra = tio_readahead_open(t, path, sizeof header, UINT64_MAX);
    tio_readahead_next(ra, tr_tensor_data(t), data);
    /* all of it but for a page or two that a busy machine (valgrind, the
     * other suites of CI beside it) has evicted again; without the pieces
     * it was a quarter (one read-ahead window) */
    for (int tries = 0; tries < 500 && got < data / page; tries++) {
        got = resident_pages(tr_tensor_data(t), data);
        if (got < data / page)
            usleep(10000);
    }
    ok(got >= data / page * 99 / 100, "read-ahead of 32 MiB reads all of it: %zu of %zu pages",
       got, data / page);
    tio_readahead_close(ra);
    tr_release(t);
    unlink(path);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a directory\n");
        return 1;
    }
    test_npy_views();
    test_safetensors_views();
    test_readahead_whole_range();
    for (const char *const *n = (const char *const[]){"c.npy", "f.npy", "be.npy", NULL}; *n; n++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, *n);
        unlink(path);
    }
    rmdir(dir);
    return done_testing();
}
