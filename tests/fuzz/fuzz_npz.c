/*
 * fuzz_npz.c - libFuzzer target for the .npz reader: any bytes are a
 * whole archive.  An archive that parses must describe members whose
 * bytes lie inside it and whose tensors fit their members; every deflated
 * member of modest size is then inflated whole (its end and CRC-32
 * checked), and a stored one's tensor must lie inside the archive.
 *
 * Build with clang -fsanitize=fuzzer,address,undefined, this file,
 * src/io/npz.c, src/io/npy.c and the engine's sources, linked with -lz;
 * seed it with tests/fuzz/seeds-npz.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "io_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond))                                                         \
            __builtin_trap();                                                \
    } while (0)

/* members inflated whole only up to this size, so that one input cannot
 * take the fuzzer's memory */
#define INFLATE_MAX (UINT64_C(16) << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tio__safetensors st;
    struct tio__npz_member *members = NULL;
    tr_status s;

    (void)tio__npz_magic(data, size);
    s = tio__npz_parse(data, size, &st, &members);
    if (s != TR_OK) {
        CHECK(st.count == 0 && st.entries == NULL && members == NULL);
        CHECK(tr_last_status() == TR_ERR_FORMAT || tr_last_status() == TR_ERR_OOM);
        CHECK(tr_last_error()[0] != '\0');
        tr_clear_error();
        return 0;
    }
    CHECK(!st.has_metadata && st.metadata_count == 0);
    for (size_t i = 0; i < st.count; i++) {
        const struct tio_entry *e = &st.entries[i];
        const struct tio__npz_member *m = &members[i];

        CHECK(e->name != NULL && m->name == e->name);
        CHECK(m->data <= size && m->csize <= size - m->data);
        CHECK(m->deflated || m->csize == m->usize);
        CHECK(e->ndim >= 0 && e->ndim <= TR_MAX_DIMS);
        CHECK(e->wide_ndim == 0 || (e->wide_shape != NULL && !e->supported));
        if (m->deflated) {
            /* a tensor inside its inflated member */
            CHECK(e->offset <= m->usize && e->nbytes <= m->usize - e->offset);
            if (m->usize <= INFLATE_MAX) {
                uint8_t *buf = malloc(m->usize ? m->usize : 1);
                uint64_t got = 0;

                CHECK(buf != NULL);
                s = tio__npz_inflate(data, m, buf, 0, true, &got);
                CHECK(s == TR_OK || tr_last_status() == TR_ERR_FORMAT);
                CHECK(got <= m->usize);
                CHECK(s != TR_OK || got == m->usize);
                free(buf);
                tr_clear_error();
            }
        } else {
            /* a tensor inside its stored member, inside the archive */
            CHECK(e->offset >= m->data && e->offset <= m->data + m->usize);
            CHECK(e->nbytes <= m->data + m->usize - e->offset);
        }
        if (e->supported) {
            uint64_t numel = 1;

            for (int d = 0; d < e->ndim; d++)
                numel *= (uint64_t)e->shape[d];
            CHECK(numel * tr_dtype_size(e->dtype) == e->nbytes);
        }
        for (size_t k = 0; k < i; k++)
            CHECK(strcmp(st.entries[k].name, e->name) != 0);
    }
    free(members);
    tio__safetensors_free(&st);
    return 0;
}
