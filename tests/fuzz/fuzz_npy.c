/*
 * fuzz_npy.c - libFuzzer target for the .npy preamble and header parser.
 *
 * Feeds arbitrary bytes, as a whole stream, to tio__npy_header_size and
 * tio__npy_parse, and checks what a successful parse promises: the tensor
 * lies inside the stream, its shape and strides are sane, and a header the
 * writer makes from it reads back the same.  Any broken promise aborts, so
 * libFuzzer reports it as a crash.
 *
 * Build with clang and the engine's sources, -fsanitize=fuzzer,address,undefined
 * (make fuzz), then run with a corpus of .npy files:
 *
 *   ./fuzz_npy -max_total_time=300 CORPUS_DIR
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "io_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool cond)
{
    if (!cond)
        abort();
}

/* A successful parse describes a tensor inside the stream. */
static void check_entry(const struct tio_entry *e, uint64_t header_size, uint64_t stream_size)
{
    uint64_t numel = 1;

    check(e->name == NULL);
    check(e->ndim >= 0 && e->ndim <= TR_MAX_DIMS);
    check(memchr(e->dtype_text, '\0', sizeof e->dtype_text) != NULL);
    check(e->offset == header_size);
    check(e->offset <= stream_size && e->nbytes <= stream_size - e->offset);
    for (int i = 0; i < e->ndim; i++) {
        check(e->shape[i] >= 0 && e->strides[i] >= 1);
        numel *= (uint64_t)e->shape[i];
    }
    if (e->supported) {
        check((unsigned)e->dtype < TR_DTYPE_COUNT && e->dtype != TR_DTYPE_BF16);
        check(e->nbytes == numel * tr_dtype_size(e->dtype));
    } else {
        check(!e->byteswap);
    }
}

/* The writer's header for the same dtype and shape reads back the same. */
static void check_round_trip(const struct tio_entry *e)
{
    struct tio_entry back;
    char *hdr = NULL;
    size_t len = 0;

    if (!e->supported)
        return;
    check(tio__npy_header(e->dtype, e->ndim, e->shape, &hdr, &len) == TR_OK);
    check(len % 64 == 0);
    check(tio__npy_parse((const uint8_t *)hdr, len, len + e->nbytes, &back) == TR_OK);
    check(back.dtype == e->dtype && back.ndim == e->ndim && back.nbytes == e->nbytes);
    check(memcmp(back.shape, e->shape, sizeof e->shape) == 0);
    free(hdr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tio_entry entry;
    uint64_t header_size = 0;
    tr_status size_status, status;

    (void)tio__npy_magic(data, size);
    size_status = tio__npy_header_size(data, size, &header_size);
    status = tio__npy_parse(data, size, size, &entry);
    /* the parser fails wherever the preamble does, and sets an error */
    check(size_status == TR_OK || status != TR_OK);
    check(status == TR_OK || (tr_last_status() == status && tr_last_error()[0] != '\0'));
    if (status == TR_OK) {
        check_entry(&entry, header_size, size);
        check_round_trip(&entry);
        tio__entry_clear(&entry);
    }
    /* the same stream claimed to be longer: only the data check changes */
    status = tio__npy_parse(data, size, UINT64_MAX, &entry);
    if (status == TR_OK) {
        check_entry(&entry, header_size, UINT64_MAX);
        tio__entry_clear(&entry);
    }
    tr_clear_error();
    return 0;
}
