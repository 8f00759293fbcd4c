/*
 * test_write.c - outputs through the io library: what a write may and may
 * not do to the tensor it writes, and the commit protocol.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
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

/* The whole file at path, its length in *len. */
static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;

    *len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)*len + 1)) != NULL &&
        fread(buf, 1, (size_t)*len, f) != (size_t)*len) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

/* Whether the files a and b hold the same bytes. */
static bool same_file(const char *a, const char *b)
{
    long la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, (size_t)la) == 0;

    free(x);
    free(y);
    return same;
}

/* t written the usual way to dir/name. */
static void write_plain(const char *name, const struct tr_tensor *t)
{
    char path[64];
    struct tio_output *out;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    out = tio_output_open(path, NULL);
    if (out && tio_output_write(out, 1, NULL, (const struct tr_tensor *const[]){t},
                                TR_DTYPE_COUNT, NULL) == TR_OK)
        tio_output_commit(out);
    tio_output_close(out);
}

/* An output mapped and computed in place, through memory once reserved
 * or by stores, is the file a plain write makes; another tensor written
 * instead replaces what the mapping held; a mapping never filled is not
 * committed. */
static void test_mapped_output(void)
{
    static const char *const names[] = {"m.npy", "m.bin", "plain.npy", "plain.bin", "other.npy",
                                        "plain-other.npy", "stored.npy", "empty.npy"};
    int64_t shape[2] = {3, 4}, two = 2;
    double d[2] = {1.5, -2};
    struct tr_tensor *m, *other = tr_from_data(d, TR_DTYPE_F64, 1, &two, TR_CPU), *plain;
    struct tio_output *out;
    char path[64], want[64];

    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        out = tio_output_open(path, NULL);
        m = out ? tio_output_map(out, TR_DTYPE_F32, 2, shape) : NULL;
        ok(m && tr_tensor_is_contiguous(m) && !(tr_tensor_flags(m) & TR_FLAG_READONLY) &&
               tio_output_reserve(out) == 0 && tio_output_reserve(out) == 0,
           "%s: mapped, compact and writable once reserved", names[f]);
        for (int i = 0; m && i < 12; i++)
            ((float *)tr_tensor_data(m))[i] = (float)i / 4;
        ok(m && tio_output_write(out, 1, NULL, (const struct tr_tensor *const[]){m},
                                 TR_DTYPE_COUNT, NULL) == TR_OK &&
               tio_output_bytes(out) == (f ? 48u : 128u + 48u) && tio_output_commit(out) == TR_OK,
           "%s: written in place: header and values, no more", names[f]);
        plain = m ? tr_clone(m) : NULL;
        tr_release(m);
        tio_output_close(out);
        write_plain(names[f + 2], plain);
        snprintf(want, sizeof want, "%s/%s", dir, names[f + 2]);
        ok(plain && same_file(path, want), "%s: the same bytes as a plain write", names[f]);
        if (f == 0) {
            /* the same values stored by calls, out of order, from a copy */
            snprintf(path, sizeof path, "%s/%s", dir, names[6]);
            out = tio_output_open(path, NULL);
            m = out ? tio_output_map(out, TR_DTYPE_F32, 2, shape) : NULL;
            const char *v = plain ? tr_tensor_data(plain) : NULL;
            ok(m && v && tio_output_store(out, 16, v + 16, 32) == 0 &&
                   tio_output_store(out, 0, v, 16) == 0 &&
                   tio_output_store(out, 40, v, 16) == EINVAL &&
                   tio_output_write(out, 1, NULL, (const struct tr_tensor *const[]){m},
                                    TR_DTYPE_COUNT, NULL) == TR_OK &&
                   tio_output_commit(out) == TR_OK && same_file(path, want),
               "stored by calls: the same bytes, and no store past the end");
            tr_release(m);
            tio_output_close(out);
        }
        tr_release(plain);
    }

    snprintf(path, sizeof path, "%s/%s", dir, names[7]);
    out = tio_output_open(path, NULL);
    m = out ? tio_output_map(out, TR_DTYPE_F32, 2, shape) : NULL;
    ok(m && tio_output_write(out, 1, NULL, (const struct tr_tensor *const[]){m}, TR_DTYPE_COUNT,
                             NULL) == TR_ERR_STATE &&
           tio_output_commit(out) != TR_OK,
       "a mapping neither reserved nor stored into is refused: %s", tr_last_error());
    tr_release(m);
    tio_output_close(out);
    ok(access(path, F_OK) != 0, "and nothing is left in its place");

    snprintf(path, sizeof path, "%s/other.npy", dir);
    out = tio_output_open(path, NULL);
    m = out ? tio_output_map(out, TR_DTYPE_F32, 2, shape) : NULL;
    ok(m && tio_output_reserve(out) == 0 &&
           tio_output_write(out, 1, NULL, (const struct tr_tensor *const[]){other}, TR_DTYPE_COUNT,
                            NULL) == TR_OK &&
           tio_output_commit(out) == TR_OK,
       "mapped and reserved, then another tensor written instead");
    tr_release(m);
    tio_output_close(out);
    write_plain("plain-other.npy", other);
    snprintf(want, sizeof want, "%s/plain-other.npy", dir);
    ok(same_file(path, want), "the file is that tensor's, shorter than the mapping");

    for (int i = 0; i < 3; i++) {
        static const char *const refused[] = {"r.npy.zst", "r.safetensors", "-"};
        if (i < 2)
            snprintf(path, sizeof path, "%s/%s", dir, refused[i]);
        out = tio_output_open(i < 2 ? path : "-", NULL);
        m = out ? tio_output_map(out, TR_DTYPE_F32, 2, shape) : NULL;
        ok(out && !m, "%s: not mapped (written as usual)", refused[i]);
        tr_release(m);
        tio_output_close(out);
    }
    is_int(temporaries(), 0, "no temporary file left");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    tr_release(other);
}

/* An output written a piece at a time is the file one write makes, in
 * npy and safetensors (whose data follows the order it returns); too few
 * or too many bytes are refused, and such an output is never committed. */
static void test_pieces(void)
{
    static const char *const names[] = {"b", "a"};
    int64_t n = 1000;
    struct tr_tensor *x = tr_zeros(TR_DTYPE_F32, 1, &n, TR_CPU), *y = tr_zeros(TR_DTYPE_I64, 1, &n, TR_CPU);
    const struct tr_tensor *both[2] = {x, y};
    enum tr_dtype dtypes[2] = {TR_DTYPE_F32, TR_DTYPE_I64};
    int ndims[2] = {1, 1};
    int64_t shapes[2][TR_MAX_DIMS] = {{1000}, {1000}};
    size_t order[2];
    char path[64], plain[64];
    struct tio_output *out;
    bool ok = true;

    for (int64_t i = 0; i < n; i++) {
        ((float *)tr_tensor_data_mut(x))[i] = (float)i / 7;
        ((int64_t *)tr_tensor_data_mut(y))[i] = -i;
    }
    /* npy: the values in three pieces */
    write_plain("whole.npy", x);
    snprintf(path, sizeof path, "%s/pieces.npy", dir);
    snprintf(plain, sizeof plain, "%s/whole.npy", dir);
    out = tio_output_open(path, NULL);
    ok &= out && tio_output_begin(out, 1, NULL, dtypes, ndims, (const int64_t(*)[TR_MAX_DIMS])shapes,
                                  NULL, order) == TR_OK && order[0] == 0;
    ok &= ok && tio_output_append(out, tr_tensor_data(x), 1000) == TR_OK &&
          tio_output_append(out, (const char *)tr_tensor_data(x) + 1000, 3000) == TR_OK &&
          tio_output_append(out, tr_tensor_data(x), 0) == TR_OK && tio_output_end(out) == TR_OK &&
          tio_output_commit(out) == TR_OK;
    tio_output_close(out);
    ok(ok && same_file(path, plain), "an .npy written in pieces is the file one write makes");

    /* safetensors: two tensors, their data in the order begin gives */
    snprintf(path, sizeof path, "%s/whole.safetensors", dir);
    out = tio_output_open(path, NULL);
    ok = out && tio_output_write(out, 2, names, both, TR_DTYPE_COUNT, NULL) == TR_OK &&
         tio_output_commit(out) == TR_OK;
    tio_output_close(out);
    snprintf(plain, sizeof plain, "%s/pieces.safetensors", dir);
    out = tio_output_open(plain, NULL);
    ok &= out && tio_output_begin(out, 2, names, dtypes, ndims,
                                  (const int64_t(*)[TR_MAX_DIMS])shapes, NULL, order) == TR_OK;
    for (int k = 0; k < 2 && ok; k++)
        ok &= tio_output_append(out, tr_tensor_data(both[order[k]]),
                                (size_t)tr_tensor_nbytes(both[order[k]])) == TR_OK;
    ok &= ok && tio_output_end(out) == TR_OK && tio_output_commit(out) == TR_OK;
    tio_output_close(out);
    ok(ok && same_file(path, plain),
       "a safetensors file written in pieces, in the order given back, is the file one write "
       "makes");

    /* too few bytes, too many */
    snprintf(path, sizeof path, "%s/short.npy", dir);
    out = tio_output_open(path, NULL);
    ok = out && tio_output_begin(out, 1, NULL, dtypes, ndims,
                                 (const int64_t(*)[TR_MAX_DIMS])shapes, NULL, order) == TR_OK &&
         tio_output_append(out, tr_tensor_data(x), 3999) == TR_OK;
    ok &= tio_output_commit(out) != TR_OK;
    ok &= tio_output_append(out, tr_tensor_data(x), 2) == TR_ERR_STATE;
    ok &= tio_output_end(out) != TR_OK && tio_output_commit(out) != TR_OK;
    tio_output_close(out);
    ok(ok && access(path, F_OK) != 0 && temporaries() == 0,
       "an output given more or fewer bytes than it declared is refused and never committed");
    tr_release(x);
    tr_release(y);
    unlink(path);
    for (int k = 0; k < 4; k++) {
        static const char *const made[] = {"whole.npy", "pieces.npy", "whole.safetensors",
                                           "pieces.safetensors"};
        snprintf(path, sizeof path, "%s/%s", dir, made[k]);
        unlink(path);
    }
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a directory\n");
        return 1;
    }
    test_readonly_memory_survives();
    test_commit_protocol();
    test_mapped_output();
    test_pieces();
    char path[64];
    snprintf(path, sizeof path, "%s/ro.npy", dir);
    unlink(path);
    rmdir(dir);
    return done_testing();
}
