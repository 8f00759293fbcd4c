/*
 * test_npz.c - .npz archives (the committed fuzz seeds, written by NumPy
 * and by tests/data/make-npz.py): what each member becomes when loaded (a
 * view of the mapping, a pool copy, an inflated pool block), the values,
 * and the zip parser's checks on hand-made archives.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_impl.h"
#include "tap.h"

static const char *seed(const char *name)
{
    static char path[1024];
    const char *src = getenv("TR_SRCDIR");

    snprintf(path, sizeof path, "%s/tests/fuzz/seeds-npz/%s", src ? src : ".", name);
    return path;
}

/* The values of tensor name of f, as doubles, in C order (up to n). */
static size_t values(struct tio_file *f, const char *name, double *out, size_t n)
{
    ptrdiff_t i = tio_file_find(f, name);
    struct tr_tensor *t = i < 0 ? NULL : tio_file_load(f, (size_t)i);
    int64_t idx[TR_MAX_DIMS] = {0};
    size_t k = 0;

    if (!t)
        return 0;
    for (; k < n && k < (size_t)tr_tensor_numel(t); k++) {
        int64_t rest = (int64_t)k;
        for (int d = tr_tensor_ndim(t) - 1; d >= 0; d--) {
            idx[d] = rest % tr_tensor_shape(t)[d];
            rest /= tr_tensor_shape(t)[d];
        }
        if (tr_tensor_item(t, idx, &out[k]) != TR_OK)
            break;
    }
    tr_release(t);
    return k;
}

static void test_storage(void)
{
    struct tio_file *f = tio_open(seed("savez.npz"), NULL);
    int borrowed = 0, copied = 0;

    ok(f && tio_file_format(f) == TIO_FORMAT_NPZ && tio_file_count(f) == 8,
       "savez: an npz of 8 tensors (%s)", f ? "" : tr_last_error());
    for (size_t i = 0; f && i < tio_file_count(f); i++) {
        const struct tio_entry *e = tio_file_entry(f, i);
        struct tr_tensor *t = tio_file_load(f, i);
        bool aligned = e->nbytes == 0 || e->offset % tr_dtype_size(e->dtype) == 0;

        if (!t)
            continue;
        if (tr_tensor_storage_kind(t) == TR_STORAGE_ADOPTED && aligned && !e->byteswap &&
            (e->nbytes == 0 || tr_tensor_offset(t) == (int64_t)e->offset))
            borrowed++;
        else if (tr_tensor_storage_kind(t) == TR_STORAGE_POOL && (!aligned || e->byteswap))
            copied++;
        tr_release(t);
    }
    is_int(borrowed + copied, 8, "savez: aligned members are views, the others pool copies");
    ok(borrowed > 0 && copied > 0, "savez: (the archive has both: %d views, %d copies)",
       borrowed, copied);
    tio_close(f);

    f = tio_open(seed("savez_compressed.npz"), NULL);
    ok(f && tio_file_count(f) == 8, "savez_compressed: 8 tensors");
    if (f) {
        ptrdiff_t i = tio_file_find(f, "ids");
        struct tr_memory_stats before, after;
        struct tr_tensor *t;

        tr_memory_stats(TR_CPU, &before);
        t = tio_file_load(f, (size_t)i);
        tr_memory_stats(TR_CPU, &after);
        ok(t && tr_tensor_storage_kind(t) == TR_STORAGE_POOL && tr_tensor_flags(t) == 0,
           "a deflated member is inflated into the pool");
        ok(after.active_bytes >= before.active_bytes + 128 + 80,
           "and its whole inflated member counts as pool memory (%llu more bytes)",
           (unsigned long long)(after.active_bytes - before.active_bytes));
        tr_release(t);
    }
    tio_close(f);
}

static void test_values(void)
{
    static const char *const archives[] = {"savez.npz", "savez_compressed.npz", "zip64.npz"};
    double v[16];

    for (size_t a = 0; a < 3; a++) {
        struct tio_file *f = tio_open(seed(archives[a]), NULL);

        ok(f != NULL, "%s opens (%s)", archives[a], f ? "" : tr_last_error());
        if (!f)
            continue;
        ok(values(f, "ids", v, 16) == 10 && v[0] == 70000 && v[9] == 70009,
           "%s: ids 70000..70009", archives[a]);
        ok(values(f, "be", v, 16) == 6 && v[0] == 0 && v[5] == 5,
           "%s: a big-endian member is put in order", archives[a]);
        ok(values(f, "fortran", v, 16) == 12 && v[1] == 1 && v[4] == 4 && v[11] == 11,
           "%s: a Fortran-ordered member reads in C order", archives[a]);
        ok(values(f, "scalar", v, 16) == 1 && v[0] == 2.5, "%s: rank 0", archives[a]);
        ok(values(f, "mask", v, 16) == 3 && v[0] == 1 && v[1] == 0, "%s: bool", archives[a]);
        ok(values(f, "layers/0.weight", v, 16) == 4 && v[3] == 3,
           "%s: a name with a slash", archives[a]);
        ok(tio_file_find(f, "empty") >= 0 && tio_file_entry(f, (size_t)tio_file_find(f, "empty"))
                                                     ->nbytes == 0,
           "%s: an empty member", archives[a]);
        tio_close(f);
    }
}

/* A stored one-member archive of a given name around the .npy bytes. */
static size_t stored_zip(uint8_t *out, const char *name, const uint8_t *npy, size_t len,
                         uint32_t crc)
{
    size_t n = strlen(name), at = 0, cd, cd_size;

#define PUT16(v) (out[at] = (uint8_t)(v), out[at + 1] = (uint8_t)((v) >> 8), at += 2)
#define PUT32(v) (PUT16((v) & 0xffff), PUT16((uint32_t)(v) >> 16))
    PUT32(0x04034b50u); PUT16(20); PUT16(0); PUT16(0); PUT16(0); PUT16(0);
    PUT32(crc); PUT32(len); PUT32(len); PUT16(n); PUT16(0);
    memcpy(out + at, name, n), at += n;
    memcpy(out + at, npy, len), at += len;
    cd = at;
    PUT32(0x02014b50u); PUT16(20); PUT16(20); PUT16(0); PUT16(0); PUT16(0); PUT16(0);
    PUT32(crc); PUT32(len); PUT32(len); PUT16(n); PUT16(0); PUT16(0); PUT16(0); PUT16(0);
    PUT32(0); PUT32(0);
    memcpy(out + at, name, n), at += n;
    cd_size = at - cd;
    PUT32(0x06054b50u); PUT16(0); PUT16(0); PUT16(1); PUT16(1);
    PUT32(cd_size); PUT32(cd); PUT16(0);
#undef PUT32
#undef PUT16
    return at;
}

static void test_parser(void)
{
    uint8_t npy[128 + 8], zip[512];
    struct tio__safetensors st;
    struct tio__npz_member *m;
    size_t len, n;
    const char *dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }";

    memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(npy + 10, ' ', 118);
    memcpy(npy + 10, dict, strlen(dict));
    npy[127] = '\n';
    memcpy(npy + 128, "\x2a\0\0\0\0\0\0\0", 8);

    /* 30 + 6 + 128 = 164: a multiple of 4 but not of 8 */
    len = stored_zip(zip, "ab.npy", npy, sizeof npy, 0);
    ok(tio__npz_parse(zip, len, &st, &m) == TR_OK && st.count == 1 &&
           strcmp(st.entries[0].name, "ab") == 0 && st.entries[0].offset == 164 &&
           m[0].data == 36 && !m[0].deflated && st.entries[0].dtype == TR_DTYPE_I64,
       "a stored member: named without .npy, offset from the archive's start (%s)",
       tr_last_error());
    if (st.count)
        tio__safetensors_free(&st), free(m);

    for (n = 0; n < len; n++) {
        tr_status s = tio__npz_parse(zip, n, &st, &m);
        if (s == TR_OK || tr_last_status() != TR_ERR_FORMAT || st.count || m)
            break;
    }
    is_int((long long)n, (long long)len, "every truncation of an archive is malformed, nothing "
                                         "left allocated");

    len = stored_zip(zip, "a", npy, sizeof npy, 0);
    ok(tio__npz_parse(zip, len, &st, &m) == TR_ERR_FORMAT &&
           strstr(tr_last_error(), "member 'a' is not a .npy array") != NULL,
       "a member not called NAME.npy: %s", tr_last_error());
    ok(tio__npz_magic(zip, len) && !tio__npz_magic(npy, sizeof npy) &&
           tio__npz_magic((const uint8_t *)"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22),
       "the magic: a local header, or the end record of an empty archive");
}

int main(void)
{
    test_storage();
    test_values();
    test_parser();
    return done_testing();
}
