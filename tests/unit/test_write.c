/*
 * test_write.c - outputs through the io library: what a write may and may
 * not do to the tensor it writes, and the commit protocol.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensorrun_io.h"
#include "tap.h"

static char dir[] = "/tmp/test_write.XXXXXX";

static int temporaries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    while (d && (e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Read-only memory that is not a file mapping (anonymous, here) must come
 * out of a write exactly as it went in: only file mappings may have their
 * pages dropped while they are written. */
static void test_readonly_memory_survives(void)
{
    int64_t n = 4 << 20;
    size_t bytes = (size_t)n * sizeof(float);
    float *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct tr_blob blob = {.data = mem, .nbytes = bytes, .flags = TR_FLAG_READONLY};
    char path[64];
    struct tr_tensor *t;
    struct tio_output *out;
    const struct tr_tensor *one[1];
    int64_t bad = 0;

    for (int64_t i = 0; i < n; i++)
        mem[i] = (float)i;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 1, &n, NULL, TR_CPU);
    one[0] = t;
    snprintf(path, sizeof path, "%s/ro.npy", dir);
    out = tio_output_open(path, NULL);
    ok(out && tio_output_write(out, 1, NULL, one, TR_DTYPE_COUNT, NULL) == TR_OK &&
           tio_output_commit(out) == TR_OK,
       "a read-only anonymous buffer is written");
    for (int64_t i = 0; i < n; i++)
        bad += mem[i] != (float)i;
    is_int(bad, 0, "and is unchanged afterwards");
    tio_output_close(out);
    tr_release(t);
    munmap(mem, bytes);
}

static void test_commit_protocol(void)
{
    int64_t n = 3;
    struct tr_tensor *t = tr_zeros(TR_DTYPE_F64, 1, &n, TR_CPU);
    const struct tr_tensor *one[1] = {t};
    char path[64];
    struct tio_output *out;
    FILE *f;

    snprintf(path, sizeof path, "%s/dest.npy", dir);
    f = fopen(path, "w");
    fputs("precious", f);
    fclose(f);
    out = tio_output_open(path, NULL);
    is_int(temporaries(), 1, "an open output has a temporary file");
    is_int(tio_output_commit(out), TR_ERR_STATE, "nothing written: nothing to commit");
    ok(tio_output_write(out, 1, NULL, one, TR_DTYPE_COUNT, NULL) == TR_OK, "written");
    is_int(tio_output_write(out, 1, NULL, one, TR_DTYPE_COUNT, NULL), TR_ERR_STATE,
           "an output is written once");
    tio_output_close(out);
    is_int(temporaries(), 0, "closed without a commit: the temporary file is gone");
    f = fopen(path, "r");
    char text[16] = "";
    ok(f && fgets(text, sizeof text, f) && strcmp(text, "precious") == 0,
       "and the destination is as it was");
    if (f)
        fclose(f);

    out = tio_output_open(path, NULL);
    ok(tio_output_write(out, 2, NULL, (const struct tr_tensor *const[]){t, t}, TR_DTYPE_COUNT,
                        NULL) == TR_ERR_INVALID,
       "two tensors do not fit a .npy: %s", tr_last_error());
    is_int(tio_output_commit(out), TR_ERR_STATE, "a failed write cannot be committed");
    tio_output_close(out);
    is_int(temporaries(), 0, "and leaves no temporary file");
    unlink(path);
    tr_release(t);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a directory\n");
        return 1;
    }
    test_readonly_memory_survives();
    test_commit_protocol();
    char path[64];
    snprintf(path, sizeof path, "%s/ro.npy", dir);
    unlink(path);
    rmdir(dir);
    return done_testing();
}
