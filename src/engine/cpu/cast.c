/*
 * cpu/cast.c - the elementwise dtype conversion kernel: every one of the
 * 13 x 13 source and destination dtypes, with the rules of tr_copy_into.
 *
 * A source element is loaded into the widest value of its kind, and a
 * destination element is stored from that value by the functions of
 * convert_scalar.h, chosen here with _Generic per pair of dtypes.
 */
#include <math.h>
#include <string.h>

#include "../convert_scalar.h"
#include "../kernel_impl.h"

#define STORE(prefix, v)                                                     \
    _Generic((v), uint64_t: tr__cv_##prefix##_from_u, int64_t: tr__cv_##prefix##_from_i, \
             double: tr__cv_##prefix##_from_f)(v)

/* --------------------------------------------------------------- loops */

#define LOOP(SRC_T, LOAD, DST_T, PREFIX)                                     \
    for (int64_t i = 0; i < n; i++) {                                        \
        SRC_T x;                                                             \
        DST_T y;                                                             \
        memcpy(&x, src + i * ss, sizeof x);                                  \
        y = STORE(PREFIX, LOAD(x));                                          \
        memcpy(dst + i * ds, &y, sizeof y);                                  \
    }

#define TO_EACH_DESTINATION(SRC_T, LOAD)                                     \
    switch (to) {                                                            \
    case TR_DTYPE_BOOL: LOOP(SRC_T, LOAD, uint8_t, boolean); break;             \
    case TR_DTYPE_U8: LOOP(SRC_T, LOAD, uint8_t, uint8_t); break;            \
    case TR_DTYPE_U16: LOOP(SRC_T, LOAD, uint16_t, uint16_t); break;         \
    case TR_DTYPE_U32: LOOP(SRC_T, LOAD, uint32_t, uint32_t); break;         \
    case TR_DTYPE_U64: LOOP(SRC_T, LOAD, uint64_t, uint64_t); break;         \
    case TR_DTYPE_I8: LOOP(SRC_T, LOAD, int8_t, int8_t); break;              \
    case TR_DTYPE_I16: LOOP(SRC_T, LOAD, int16_t, int16_t); break;           \
    case TR_DTYPE_I32: LOOP(SRC_T, LOAD, int32_t, int32_t); break;           \
    case TR_DTYPE_I64: LOOP(SRC_T, LOAD, int64_t, int64_t); break;           \
    case TR_DTYPE_F16: LOOP(SRC_T, LOAD, uint16_t, f16); break;              \
    case TR_DTYPE_BF16: LOOP(SRC_T, LOAD, uint16_t, bf16); break;            \
    case TR_DTYPE_F32: LOOP(SRC_T, LOAD, float, f32); break;                 \
    case TR_DTYPE_F64: LOOP(SRC_T, LOAD, double, f64); break;                \
    default: break;                                                          \
    }

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>

/* The F16C instructions convert eight values at a time, rounding to
 * nearest even, with subnormals, infinities and NaN (quieted, payload's top
 * bits kept) exactly as tr_f32_to_f16 and tr_f16_to_f32 do. */
static bool f16c;

static void detect_f16c(void)
{
    unsigned a, b, c, d, xcr0, xcr0_high;

    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX) &&
        (c & bit_F16C)) {
        /* and the OS saves the AVX registers (XCR0 bits 1 and 2) */
        __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
        f16c = (xcr0 & 6) == 6;
    }
}

static bool have_f16c(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, detect_f16c);
    return f16c;
}

__attribute__((target("avx,f16c")))
static void f32_to_f16_f16c(char *dst, const char *src, int64_t n)
{
    int64_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps((const float *)(const void *)(src + 4 * i));
        _mm_storeu_si128((__m128i *)(void *)(dst + 2 * i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) {
        float x;
        uint16_t y;
        memcpy(&x, src + 4 * i, sizeof x);
        y = tr_f32_to_f16(x);
        memcpy(dst + 2 * i, &y, sizeof y);
    }
}

__attribute__((target("avx,f16c")))
static void f16_to_f32_f16c(char *dst, const char *src, int64_t n)
{
    int64_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
        _mm256_storeu_ps((float *)(void *)(dst + 4 * i), _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) {
        uint16_t x;
        float y;
        memcpy(&x, src + 2 * i, sizeof x);
        y = tr_f16_to_f32(x);
        memcpy(dst + 4 * i, &y, sizeof y);
    }
}
#endif

/* The pairs that move the most data get loops of their own, without the
 * detour through double. */
static bool fast_row(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                     enum tr_dtype from, enum tr_dtype to)
{
#if defined(__x86_64__)
    if (from == TR_DTYPE_F32 && to == TR_DTYPE_F16 && ss == 4 && ds == 2 && have_f16c()) {
        f32_to_f16_f16c(dst, src, n);
        return true;
    }
    if (from == TR_DTYPE_F16 && to == TR_DTYPE_F32 && ss == 2 && ds == 4 && have_f16c()) {
        f16_to_f32_f16c(dst, src, n);
        return true;
    }
#endif
    if (from == TR_DTYPE_F32 && (to == TR_DTYPE_F16 || to == TR_DTYPE_BF16)) {
        uint16_t (*narrow)(float) = to == TR_DTYPE_F16 ? tr_f32_to_f16 : tr_f32_to_bf16;
        for (int64_t i = 0; i < n; i++) {
            float x;
            uint16_t y;
            memcpy(&x, src + i * ss, sizeof x);
            y = narrow(x);
            memcpy(dst + i * ds, &y, sizeof y);
        }
        return true;
    }
    if ((from == TR_DTYPE_F16 || from == TR_DTYPE_BF16) && to == TR_DTYPE_F32) {
        float (*widen)(uint16_t) = from == TR_DTYPE_F16 ? tr_f16_to_f32 : tr_bf16_to_f32;
        for (int64_t i = 0; i < n; i++) {
            uint16_t x;
            float y;
            memcpy(&x, src + i * ss, sizeof x);
            y = widen(x);
            memcpy(dst + i * ds, &y, sizeof y);
        }
        return true;
    }
    return false;
}

/* Converts n elements, src and dst stepping ss and ds bytes. */
/* n items of type T from src to dst, stepping ss and ds bytes (either may
 * be 0: a broadcast value, a repeated store). */
#define COPY_STRIDED(T)                                                      \
    for (int64_t i = 0; i < n; i++) {                                        \
        T v;                                                                 \
        memcpy(&v, src + i * ss, sizeof v);                                  \
        memcpy(dst + i * ds, &v, sizeof v);                                  \
    }

static void cast_row(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                     enum tr_dtype from, enum tr_dtype to)
{
    if (from == to) {
        size_t item = tr_dtype_size(from);
        if (ds == (int64_t)item && ss == (int64_t)item) {
            memcpy(dst, src, (size_t)n * item);
            return;
        }
        switch (item) {
        case 1: COPY_STRIDED(uint8_t); break;
        case 2: COPY_STRIDED(uint16_t); break;
        case 4: COPY_STRIDED(uint32_t); break;
        default: COPY_STRIDED(uint64_t); break;
        }
        return;
    }
    if (fast_row(dst, ds, src, ss, n, from, to))
        return;
    switch (from) {
    case TR_DTYPE_BOOL: TO_EACH_DESTINATION(uint8_t, tr__cv_load_bool); break;
    case TR_DTYPE_U8: TO_EACH_DESTINATION(uint8_t, tr__cv_load_u8); break;
    case TR_DTYPE_U16: TO_EACH_DESTINATION(uint16_t, tr__cv_load_u16); break;
    case TR_DTYPE_U32: TO_EACH_DESTINATION(uint32_t, tr__cv_load_u32); break;
    case TR_DTYPE_U64: TO_EACH_DESTINATION(uint64_t, tr__cv_load_u64); break;
    case TR_DTYPE_I8: TO_EACH_DESTINATION(int8_t, tr__cv_load_i8); break;
    case TR_DTYPE_I16: TO_EACH_DESTINATION(int16_t, tr__cv_load_i16); break;
    case TR_DTYPE_I32: TO_EACH_DESTINATION(int32_t, tr__cv_load_i32); break;
    case TR_DTYPE_I64: TO_EACH_DESTINATION(int64_t, tr__cv_load_i64); break;
    case TR_DTYPE_F16: TO_EACH_DESTINATION(uint16_t, tr__cv_load_f16); break;
    case TR_DTYPE_BF16: TO_EACH_DESTINATION(uint16_t, tr__cv_load_bf16); break;
    case TR_DTYPE_F32: TO_EACH_DESTINATION(float, tr__cv_load_f32); break;
    case TR_DTYPE_F64: TO_EACH_DESTINATION(double, tr__cv_load_f64); break;
    default: break;
    }
}

void tr__cpu_cast_row(char *dst, int64_t ds, enum tr_dtype to, const char *src, int64_t ss,
                      enum tr_dtype from, int64_t n)
{
    cast_row(dst, ds, src, ss, n, from, to);
}

#define BLOCK_ELEMENTS 16384
#define PARALLEL_ELEMENTS 65536

void tr__cpu_cast(char *dst, const int64_t *dst_strides, enum tr_dtype to, const char *src,
                  const int64_t *src_strides, enum tr_dtype from, int ndim,
                  const int64_t *shape)
{
    const int64_t *strides[2] = {dst_strides, src_strides};
    struct tr__iter it;
    int64_t rows, len, blocks_per_row, blocks, ds, ss;

    tr__iter_init(&it, ndim, shape, 2, strides);
    rows = tr__iter_rows(&it);
    len = it.shape[it.ndim - 1];
    ds = it.strides[0][it.ndim - 1];
    ss = it.strides[1][it.ndim - 1];
    blocks_per_row = (len + BLOCK_ELEMENTS - 1) / BLOCK_ELEMENTS;
    blocks = rows * blocks_per_row;

#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (rows * len > PARALLEL_ELEMENTS)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t row = b / blocks_per_row, first = b % blocks_per_row * BLOCK_ELEMENTS;
        int64_t n = len - first < BLOCK_ELEMENTS ? len - first : BLOCK_ELEMENTS;
        int64_t off[2];

        tr__iter_row_offsets(&it, row, off);
        cast_row(dst + off[0] + first * ds, ds, src + off[1] + first * ss, ss, n, from, to);
    }
}
