/*
 * mapped_sum.c - the floor for a pass over a mapped tensor file: map a
 * little-endian f32 .npy the way tensorrun maps its inputs (read-only,
 * MAP_SHARED, MADV_SEQUENTIAL), sum every element, print the sum and the
 * seconds from before the mmap to after the sum.  Nothing is allocated, so
 * what a process that reads the file once costs is exec, the page faults of
 * the mapping and the memory traffic.
 *
 * The sum runs on every OpenMP thread (OMP_NUM_THREADS, like tensorrun's
 * --threads) with eight independent 4-lane accumulators per thread, so that
 * the loop waits on memory rather than on the latency of one addition chain
 * (one scalar chain reaches about 4 GB/s, below the memory bandwidth of a
 * server core).
 *
 * Usage: mapped_sum FILE.npy
 */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_sum.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The offset of the data in a .npy (format 1.x: a 2-byte header length,
 * 2.x and 3.x: 4 bytes); 0 when p is not a .npy. */
static size_t npy_data_offset(const unsigned char *p, size_t size)
{
    if (size < 12 || memcmp(p, "\x93NUMPY", 6) != 0)
        return 0;
    if (p[6] == 1)
        return 10 + (size_t)(p[8] | p[9] << 8);
    return 12 + (size_t)((uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 |
                         (uint32_t)p[11] << 24);
}

int main(int argc, char **argv)
{
    struct stat st;
    double t0, sum;
    size_t off, n;
    int fd;
    void *p;

    if (argc != 2) {
        fprintf(stderr, "usage: mapped_sum FILE.npy (little-endian f32)\n");
        return 2;
    }
    t0 = now();
    fd = open(argv[1], O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(argv[1]);
        return 1;
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
    off = npy_data_offset(p, (size_t)st.st_size);
    if (off == 0 || off > (size_t)st.st_size || off % 4 != 0) {
        fprintf(stderr, "mapped_sum: %s is not a .npy with aligned data\n", argv[1]);
        return 1;
    }
    n = ((size_t)st.st_size - off) / sizeof(float);
    sum = bench_sum_f32((const float *)((const char *)p + off), n);
    printf("%.9g %.6f %d\n", sum, now() - t0, bench_threads());
    munmap(p, (size_t)st.st_size);
    close(fd);
    return 0;
}
