/*
 * fuzz_safetensors.c - libFuzzer target for the .safetensors header
 * reader: any bytes are a whole stream.  A stream that parses must describe
 * tensors that lie inside it, in offset order, covering the data section
 * exactly; the supported ones must survive the writer and parse again.
 *
 * Build with clang -fsanitize=fuzzer,address,undefined, this file,
 * src/io/safetensors.c and the engine's sources, linked with -ljansson;
 * seed it with tests/data/safetensors-reference.
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

/* Writes a header for the supported tensors of st and parses it back
 * (with the data section the header promises, all zero). */
static void rewrite(const struct tio__safetensors *st)
{
    const char **names = calloc(st->count + 1, sizeof *names);
    enum tr_dtype *dtypes = calloc(st->count + 1, sizeof *dtypes);
    int *ndims = calloc(st->count + 1, sizeof *ndims);
    int64_t (*shapes)[TR_MAX_DIMS] = calloc(st->count + 1, sizeof *shapes);
    size_t *order = calloc(st->count + 1, sizeof *order);
    size_t n = 0, len = 0;
    uint64_t data_size = 0;
    char *header = NULL;
    struct tio__safetensors back;

    CHECK(names != NULL && dtypes != NULL && ndims != NULL && shapes != NULL && order != NULL);
    for (size_t i = 0; i < st->count; i++) {
        const struct tio_entry *e = &st->entries[i];

        if (!e->supported || e->name[0] == '\0')
            continue;
        names[n] = e->name;
        dtypes[n] = e->dtype;
        ndims[n] = e->ndim;
        memcpy(shapes[n], e->shape, sizeof shapes[n]);
        data_size += e->nbytes;
        n++;
    }
    /* Names from a parsed header are unique, UTF-8 and not __metadata__,
     * and their sizes fit: the writer must take them. */
    CHECK(tio__safetensors_header(n, names, dtypes, ndims,
                                  (const int64_t(*)[TR_MAX_DIMS])shapes, NULL, &header, &len,
                                  order) == TR_OK);
    {
        /* Only the header is needed: parse checks sizes against the
         * stream's size, not its bytes. */
        uint64_t stream = len + data_size;

        CHECK((len - 8) % 8 == 0);
        CHECK(tio__safetensors_parse((const uint8_t *)header, len, stream, &back) == TR_OK);
        CHECK(back.count == n);
        for (size_t k = 0; k < n; k++) {
            const struct tio_entry *e = &back.entries[k];
            size_t i = order[k];

            CHECK(strcmp(e->name, names[i]) == 0);
            CHECK(e->dtype == dtypes[i] && e->ndim == ndims[i]);
            CHECK(memcmp(e->shape, shapes[i], (size_t)ndims[i] * sizeof(int64_t)) == 0);
            CHECK(e->nbytes == 0 || e->offset % tr_dtype_size(e->dtype) == 0);
        }
        tio__safetensors_free(&back);
    }
    free(header);
    free(names);
    free(dtypes);
    free(ndims);
    free(shapes);
    free(order);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tio__safetensors st;
    uint64_t header_size, end;

    (void)tio__safetensors_magic(data, size, size);
    if (tio__safetensors_header_size(data, size, size, &header_size) != TR_OK)
        return 0;
    CHECK(header_size >= 8 && header_size <= size);
    if (tio__safetensors_parse(data, size, size, &st) != TR_OK) {
        CHECK(st.count == 0 && st.entries == NULL && st.metadata_count == 0);
        CHECK(tr_last_status() == TR_ERR_FORMAT || tr_last_status() == TR_ERR_OOM);
        return 0;
    }
    end = header_size;
    for (size_t i = 0; i < st.count; i++) {
        const struct tio_entry *e = &st.entries[i];

        CHECK(e->name != NULL);
        CHECK(e->offset == end);
        CHECK(e->nbytes <= size - e->offset);
        CHECK(e->ndim >= 0 && e->ndim <= TR_MAX_DIMS);
        CHECK(!e->byteswap);
        CHECK(!e->supported || e->dtype < TR_DTYPE_COUNT);
        if (e->supported) {
            uint64_t numel = 1;

            for (int d = 0; d < e->ndim; d++)
                numel *= (uint64_t)e->shape[d];
            CHECK(numel * tr_dtype_size(e->dtype) == e->nbytes);
        }
        end = e->offset + e->nbytes;
    }
    CHECK(end == size);
    CHECK(st.has_metadata || st.metadata_count == 0);
    for (size_t i = 0; i < st.metadata_count; i++)
        CHECK(st.metadata_keys[i] != NULL && st.metadata_values[i] != NULL);
    rewrite(&st);
    tio__safetensors_free(&st);
    return 0;
}
