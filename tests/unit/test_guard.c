/*
 * test_guard.c - an input that shrinks while it is read: the SIGBUS of a
 * read past its new end is survived with zeros and the input is named,
 * while any other SIGBUS still kills the process (and leaves no temporary
 * file).  Each case runs in a child process of its own.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_impl.h"
#include "tap.h"

#define PAGES 64

static char dir[] = "/tmp/test_guard.XXXXXX";

/* A file of PAGES pages of 0x5a bytes at path, mapped read-only. */
static const volatile unsigned char *map_file(const char *path, size_t *len)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *buf;
    void *p;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

    *len = (size_t)page * PAGES;
    buf = malloc(*len);
    if (fd < 0 || !buf)
        exit(90);
    memset(buf, 0x5a, *len);
    if (write(fd, buf, *len) != (ssize_t)*len)
        exit(91);
    free(buf);
    p = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        exit(92);
    return p;
}

/* Runs fn in a child; its wait status. */
static int in_child(int (*fn)(void))
{
    int status;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0)
        _exit(fn());
    waitpid(pid, &status, 0);
    return status;
}

/* A registered mapping truncated under a read: the read gives zeros, the
 * input is named, and reads of every page of it go on working. */
static int survive(void)
{
    char path[256];
    size_t len;
    const volatile unsigned char *p;
    unsigned sum = 0;

    snprintf(path, sizeof path, "%s/input.npy", dir);
    p = map_file(path, &len);
    if (tio_guard_inputs() != TR_OK)
        return 10;
    tio__guard_register((const void *)p, len, path);
    if (tio_input_changed() || p[len - 1] != 0x5a)
        return 11; /* nothing changed yet */
    if (truncate(path, 100) != 0)
        return 12;
    if (p[len - 1] != 0)
        return 13; /* the faulting read completed, with a zero */
    for (size_t i = 0; i < len; i++)
        sum += p[i];
    if (sum != 0)
        return 14; /* the whole mapping reads as zeros now */
    if (!tio_input_changed() || strcmp(tio_input_changed(), path) != 0)
        return 15;
    /* the name outlives the mapping's registration */
    tio__guard_unregister((const void *)p);
    munmap((void *)p, len);
    if (!tio_input_changed() || strcmp(tio_input_changed(), path) != 0)
        return 16;
    return 0;
}

/* A fault in a mapping that is not registered (any more) kills with
 * SIGBUS, after removing the temporary files of open outputs. */
static int die(void)
{
    char path[256], out_path[256];
    size_t len;
    const volatile unsigned char *p;
    struct tio_output *out;

    snprintf(path, sizeof path, "%s/other.bin", dir);
    snprintf(out_path, sizeof out_path, "%s/out.npy", dir);
    p = map_file(path, &len);
    if (tio_guard_inputs() != TR_OK)
        return 20;
    tio__guard_register((const void *)p, len, path);
    tio__guard_unregister((const void *)p);
    out = tio_output_open(out_path, NULL);
    if (!out)
        return 21;
    if (truncate(path, 0) != 0)
        return 22;
    return p[len / 2] + 23; /* SIGBUS here */
}

/* A SIGBUS sent by another process is not a fault: it kills too. */
static int sent(void)
{
    if (tio_guard_inputs() != TR_OK)
        return 30;
    kill(getpid(), SIGBUS);
    return 31;
}

/* tio__guard_claim: an EFAULT of a system call that read a mapping. */
static int claim(void)
{
    char path[256];
    size_t len;
    const volatile unsigned char *p;
    int local = 0;

    snprintf(path, sizeof path, "%s/claimed.bin", dir);
    p = map_file(path, &len);
    tio__guard_register((const void *)p, len, path);
    if (tio__guard_claim(&local))
        return 40; /* not in a mapping */
    if (tio_input_changed())
        return 41;
    if (!tio__guard_claim((const void *)(p + 10)) || p[10] != 0)
        return 42;
    if (!tio_input_changed() || strcmp(tio_input_changed(), path) != 0)
        return 43;
    return 0;
}

static bool has_temporary(void)
{
    char cmd[300];

    snprintf(cmd, sizeof cmd, "ls -A %s | grep -q tmp-", dir);
    return system(cmd) == 0;
}

int main(void)
{
    int status;

    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }

    status = in_child(survive);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a truncated input reads as zeros and is named (child status %d)", status);

    status = in_child(die);
    ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
       "a fault in an unregistered mapping still kills with SIGBUS (status %d)", status);
    ok(!has_temporary(), "and leaves no temporary file");

    status = in_child(sent);
    ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
       "a SIGBUS sent with kill kills (status %d)", status);

    status = in_child(claim);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "an address in a mapping is claimed, one outside is not (child status %d)", status);

    ok(tio_input_changed() == NULL, "the parent saw no change");
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            diag("could not remove %s", dir);
    }
    return done_testing();
}
