/*
 * inject.c - an LD_PRELOAD shim that makes system calls fail on demand, for
 * testing the error paths of outputs that no real disk fails on cue:
 *
 *   TR_FAIL_WRITE=N    write(2) to a file descriptor above 2 fails with ENOSPC
 *                      once N bytes have gone to such descriptors
 *   TR_FAIL_PWRITE=N   pwrite(2) likewise, counting its own bytes (an output
 *                      computed and stored into its file)
 *   TR_FAIL_FSYNC=1    fsync(2) fails with EIO
 *   TR_FAIL_CLOSE=1    close(2) of a descriptor above 2 fails with EIO
 *                      (after closing it, as Linux does)
 *   TR_FAIL_RENAME=1   rename(2) fails with EXDEV
 *   TR_INTERRUPT_RENAME=N  the Nth rename(2) first sends the process SIGINT
 *                      and gives a signal handler 200 ms to run (an
 *                      interruption while outputs are renamed into place)
 *   TR_FAIL_FALLOCATE=1  posix_fallocate(3) fails with ENOSPC (a file that
 *                      cannot be mapped and computed in place)
 *   TR_FAIL_CREATE=1   mkostemp(3) fails with EACCES, and so does access(2)
 *                      asking for W_OK: a directory that is not writable,
 *                      even for root
 *   TR_TRUNCATE=PATH, TR_TRUNCATE_AT=N  the Nth write(2) or pwrite(2) to a
 *                      descriptor above 2 first cuts the file PATH to
 *                      TR_TRUNCATE_SIZE bytes (default 0): an input that
 *                      another process truncates while it is read
 *   TR_LOG_ADVICE=PATH   appends a line to PATH for every madvise(2) with
 *                      MADV_WILLNEED or MADV_DONTNEED ("madvise WILLNEED
 *                      LEN") and posix_fadvise(2) with POSIX_FADV_DONTNEED
 *                      ("fadvise DONTNEED OFFSET LEN"), then makes the call
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_llong written, pwritten, writes;

static long long limit(const char *name)
{
    const char *v = getenv(name);

    return v && *v ? strtoll(v, NULL, 10) : -1;
}

/* TR_TRUNCATE: counts a write to fd and cuts the file at the Nth. */
static void count_write(int fd)
{
    const char *path = getenv("TR_TRUNCATE");
    long long size = limit("TR_TRUNCATE_SIZE");

    if (fd > 2 && path && *path &&
        atomic_fetch_add(&writes, 1) + 1 == limit("TR_TRUNCATE_AT"))
        truncate(path, size > 0 ? size : 0);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static ssize_t (*real)(int, const void *, size_t);
    long long max = limit("TR_FAIL_WRITE");

    if (!real)
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    count_write(fd);
    if (fd > 2 && max >= 0 && atomic_fetch_add(&written, (long long)len) + (long long)len > max) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t offset)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    long long max = limit("TR_FAIL_PWRITE");

    if (!real)
        real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    count_write(fd);
    if (fd > 2 && max >= 0 && atomic_fetch_add(&pwritten, (long long)len) + (long long)len > max) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t offset)
{
    return pwrite(fd, buf, len, offset);
}

int fsync(int fd)
{
    static int (*real)(int);

    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (limit("TR_FAIL_FSYNC") == 1) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

int close(int fd)
{
    static int (*real)(int);
    int rc;

    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "close");
    rc = real(fd);
    if (rc == 0 && fd > 2 && limit("TR_FAIL_CLOSE") == 1) {
        errno = EIO;
        return -1;
    }
    return rc;
}

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    static atomic_llong renames;

    if (!real)
        real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    if (limit("TR_FAIL_RENAME") == 1) {
        errno = EXDEV;
        return -1;
    }
    if (atomic_fetch_add(&renames, 1) + 1 == limit("TR_INTERRUPT_RENAME")) {
        struct timespec wait = {0, 200 * 1000 * 1000};
        kill(getpid(), SIGINT);
        nanosleep(&wait, NULL);
    }
    return real(from, to);
}

int posix_fallocate(int fd, off_t offset, off_t len)
{
    static int (*real)(int, off_t, off_t);

    if (!real)
        real = (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, "posix_fallocate");
    if (limit("TR_FAIL_FALLOCATE") == 1)
        return ENOSPC;
    return real(fd, offset, len);
}

int posix_fallocate64(int fd, off_t offset, off_t len)
{
    return posix_fallocate(fd, offset, len);
}

int mkostemp(char *template, int flags)
{
    static int (*real)(char *, int);

    if (!real)
        real = (int (*)(char *, int))dlsym(RTLD_NEXT, "mkostemp");
    if (limit("TR_FAIL_CREATE") == 1) {
        errno = EACCES;
        return -1;
    }
    return real(template, flags);
}

int access(const char *path, int mode)
{
    static int (*real)(const char *, int);

    if (!real)
        real = (int (*)(const char *, int))dlsym(RTLD_NEXT, "access");
    if ((mode & W_OK) && limit("TR_FAIL_CREATE") == 1) {
        errno = EACCES;
        return -1;
    }
    return real(path, mode);
}

/* TR_LOG_ADVICE: one line per hint, written with the real write(2). */
static void log_advice(const char *line)
{
    static ssize_t (*real_write)(int, const void *, size_t);
    const char *path = getenv("TR_LOG_ADVICE");
    int fd;

    if (!path || !*path)
        return;
    if (!real_write)
        real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (real_write(fd, line, strlen(line)) < 0)
        errno = 0;
    syscall(SYS_close, fd);
}

int madvise(void *addr, size_t len, int advice)
{
    static int (*real)(void *, size_t, int);
    char line[96];

    if (!real)
        real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    if (advice == MADV_WILLNEED || advice == MADV_DONTNEED) {
        snprintf(line, sizeof line, "madvise %s %zu\n",
                 advice == MADV_WILLNEED ? "WILLNEED" : "DONTNEED", len);
        log_advice(line);
    }
    return real(addr, len, advice);
}

static int fadvise_logged(int fd, off_t offset, off_t len, int advice, const char *name)
{
    int (*real)(int, off_t, off_t, int) =
        (int (*)(int, off_t, off_t, int))dlsym(RTLD_NEXT, name);
    char line[96];

    if (advice == POSIX_FADV_DONTNEED) {
        snprintf(line, sizeof line, "fadvise DONTNEED %lld %lld\n", (long long)offset,
                 (long long)len);
        log_advice(line);
    }
    return real ? real(fd, offset, len, advice) : ENOSYS;
}

int posix_fadvise(int fd, off_t offset, off_t len, int advice)
{
    return fadvise_logged(fd, offset, len, advice, "posix_fadvise");
}

int posix_fadvise64(int fd, off_t offset, off_t len, int advice)
{
    return fadvise_logged(fd, offset, len, advice, "posix_fadvise64");
}
