/*
 * fuzz_open.c - libFuzzer target for the whole reading path: the input is
 * a file's bytes (any format, zstd-compressed or not), opened through
 * tio_open by content alone, and every tensor in it loaded and read.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensorrun_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    struct tio_file *f;

    if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    f = tio_open(path, NULL);
    for (size_t i = 0; f && i < tio_file_count(f); i++) {
        struct tr_tensor *t = tio_file_load(f, i);
        if (t && tr_tensor_nbytes(t) <= (1u << 20)) {
            struct tr_tensor *c = tr_contiguous(t); /* reads every element */
            tr_release(c);
        }
        tr_release(t);
    }
    tio_close(f);
    close(fd);
    tr_release_cached(TR_CPU);
    return 0;
}
