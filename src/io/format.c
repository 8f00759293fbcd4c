/*
 * format.c - format names, and the format a path's name implies.
 */
#include "io_impl.h"

#include <string.h>

static const char *const names[] = {
    [TIO_FORMAT_UNKNOWN] = "unknown",
    [TIO_FORMAT_NPY] = "npy",
    [TIO_FORMAT_SAFETENSORS] = "safetensors",
    [TIO_FORMAT_RAW] = "raw",
    [TIO_FORMAT_NPZ] = "npz",
};

const char *tio_format_name(enum tio_format format)
{
    return (unsigned)format <= TIO_FORMAT_NPZ ? names[format] : "unknown";
}

tr_status tio_format_parse(const char *name, enum tio_format *out)
{
    for (int f = TIO_FORMAT_NPY; name && f <= TIO_FORMAT_NPZ; f++) {
        if (strcmp(name, names[f]) == 0) {
            *out = (enum tio_format)f;
            return TR_OK;
        }
    }
    return tio__error(TR_ERR_INVALID, "unknown format '%s' (expected npy, safetensors, raw or "
                                      "npz)",
                      name ? name : "(null)");
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);

    return len >= n && strncmp(s + len - n, suffix, n) == 0;
}

void tio_format_from_path(const char *path, enum tio_format *format,
                          enum tio_compression *compression)
{
    size_t len = strlen(path);

    *compression = TIO_COMPRESSION_NONE;
    if (ends_with(path, len, ".zst")) {
        *compression = TIO_COMPRESSION_ZSTD;
        len -= 4;
    }
    if (ends_with(path, len, ".npy"))
        *format = TIO_FORMAT_NPY;
    else if (ends_with(path, len, ".safetensors"))
        *format = TIO_FORMAT_SAFETENSORS;
    else if (ends_with(path, len, ".bin") || ends_with(path, len, ".raw"))
        *format = TIO_FORMAT_RAW;
    else if (ends_with(path, len, ".npz"))
        *format = TIO_FORMAT_NPZ;
    else
        *format = TIO_FORMAT_UNKNOWN;
}
