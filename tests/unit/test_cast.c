/*
 * test_cast.c - dtype conversion by tr_copy_into and tr_cast: rounding,
 * saturation, wrapping, bool, NaN, and strided operands.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorrun.h"
#include "tap.h"

/* Converts n values of dtype `from` at src into dtype `to` at dst. */
static tr_status convert(const void *src, enum tr_dtype from, void *dst, enum tr_dtype to,
                         int64_t n)
{
    struct tr_tensor *a = tr_from_data(src, from, 1, &n, TR_CPU);
    struct tr_tensor *b = a ? tr_cast(a, to) : NULL;
    tr_status s = b ? tr_copy_to_host(b, dst, (size_t)n * tr_dtype_size(to)) : tr_last_status();

    tr_release(b);
    tr_release(a);
    return s;
}

static void test_float_to_int(void)
{
    const double in[] = {2.9, -2.9, 127.5, 128.0, -129.0, 1e30, -1e30, NAN, -0.5, INFINITY};
    const int8_t want8[] = {2, -2, 127, 127, -128, 127, -128, 0, 0, 127};
    const uint8_t wantu8[] = {2, 0, 127, 128, 0, 255, 0, 0, 0, 255};
    const int64_t want64[] = {2, -2, 127, 128, -129, INT64_MAX, INT64_MIN, 0, 0, INT64_MAX};
    int8_t got8[10];
    uint8_t gotu8[10];
    int64_t got64[10];
    uint64_t gotu64[3];
    const double big[] = {18446744073709551616.0, 18446744073709549568.0, -1.0};

    ok(convert(in, TR_DTYPE_F64, got8, TR_DTYPE_I8, 10) == TR_OK &&
           memcmp(got8, want8, sizeof want8) == 0,
       "f64 -> i8: truncates toward zero, saturates, NaN is 0");
    ok(convert(in, TR_DTYPE_F64, gotu8, TR_DTYPE_U8, 10) == TR_OK &&
           memcmp(gotu8, wantu8, sizeof wantu8) == 0,
       "f64 -> u8: negatives saturate at 0");
    ok(convert(in, TR_DTYPE_F64, got64, TR_DTYPE_I64, 10) == TR_OK &&
           memcmp(got64, want64, sizeof want64) == 0,
       "f64 -> i64: saturates at the 64-bit limits");
    ok(convert(big, TR_DTYPE_F64, gotu64, TR_DTYPE_U64, 3) == TR_OK &&
           gotu64[0] == UINT64_MAX && gotu64[1] == UINT64_C(18446744073709549568) &&
           gotu64[2] == 0,
       "f64 -> u64: 2^64 saturates, the largest double below converts exactly");
}

static void test_int_to_int(void)
{
    const int32_t in[] = {300, -1, -129, 65535, INT32_MIN};
    const int8_t want8[] = {44, -1, 127, -1, 0};
    const uint16_t want16[] = {300, 65535, 65407, 65535, 0};
    const uint8_t wantb[] = {1, 1, 1, 1, 1};
    int8_t got8[5];
    uint16_t got16[5];
    uint8_t gotb[5];
    const uint64_t big = UINT64_MAX;
    int64_t gotbig;

    ok(convert(in, TR_DTYPE_I32, got8, TR_DTYPE_I8, 5) == TR_OK &&
           memcmp(got8, want8, sizeof want8) == 0,
       "i32 -> i8 wraps (two's complement)");
    ok(convert(in, TR_DTYPE_I32, got16, TR_DTYPE_U16, 5) == TR_OK &&
           memcmp(got16, want16, sizeof want16) == 0,
       "i32 -> u16 wraps");
    ok(convert(in, TR_DTYPE_I32, gotb, TR_DTYPE_BOOL, 5) == TR_OK &&
           memcmp(gotb, wantb, sizeof wantb) == 0,
       "i32 -> bool is 'not zero'");
    ok(convert(&big, TR_DTYPE_U64, &gotbig, TR_DTYPE_I64, 1) == TR_OK && gotbig == -1,
       "u64 max -> i64 wraps to -1");
}

static void test_to_float(void)
{
    /* 1 + 2^-11 + 2^-40 lies just above the midpoint of two f16 values;
     * rounding through f32 first would land on the midpoint and then on
     * the even side, 1.0 */
    const double tricky[] = {1.0 + 0x1p-11 + 0x1p-40, 65520.0, -0.0, NAN};
    uint16_t h[4], b[2];
    const float f[] = {1.0f + 0x1p-8f, 3.0f};
    const int64_t big = (INT64_C(1) << 53) + 1;
    double d;
    float g;
    const uint8_t bools[2] = {0, 7};
    float fb[2];
    uint16_t nan16 = 0x7e00;
    uint8_t nanb;

    ok(convert(tricky, TR_DTYPE_F64, h, TR_DTYPE_F16, 4) == TR_OK,
       "f64 -> f16 converts");
    is_int(h[0], 0x3c01, "f64 -> f16 rounds once (no double rounding through f32)");
    is_int(h[1], 0x7c00, "f64 -> f16: 65520 rounds to infinity");
    is_int(h[2], 0x8000, "f64 -> f16 keeps the sign of zero");
    ok((h[3] & 0x7c00) == 0x7c00 && (h[3] & 0x3ff), "f64 -> f16 keeps NaN");
    ok(convert(f, TR_DTYPE_F32, b, TR_DTYPE_BF16, 2) == TR_OK && b[0] == 0x3f80 && b[1] == 0x4040,
       "f32 -> bf16: a tie rounds to even");
    ok(convert(&big, TR_DTYPE_I64, &d, TR_DTYPE_F64, 1) == TR_OK && d == 0x1p53,
       "i64 -> f64 rounds to nearest even");
    ok(convert(&big, TR_DTYPE_I64, &g, TR_DTYPE_F32, 1) == TR_OK && g == 0x1p53f,
       "i64 -> f32 rounds once");
    ok(convert(bools, TR_DTYPE_BOOL, fb, TR_DTYPE_F32, 2) == TR_OK && fb[0] == 0 && fb[1] == 1,
       "bool -> f32 is 0 or 1");
    ok(convert(&nan16, TR_DTYPE_F16, &nanb, TR_DTYPE_BOOL, 1) == TR_OK && nanb == 1,
       "f16 NaN -> bool is true");
}

static void test_every_pair(void)
{
    /* 0..5 survive every conversion exactly */
    const double values[6] = {0, 1, 2, 3, 4, 5};
    char buf[6 * 8], back[6 * 8];
    double round[6];
    int bad = 0, pairs = 0;

    for (int from = 0; from < TR_DTYPE_COUNT; from++) {
        if (convert(values, TR_DTYPE_F64, buf, (enum tr_dtype)from, 6) != TR_OK)
            bad++;
        for (int to = 0; to < TR_DTYPE_COUNT; to++) {
            pairs++;
            if (convert(buf, (enum tr_dtype)from, back, (enum tr_dtype)to, 6) != TR_OK ||
                convert(back, (enum tr_dtype)to, round, TR_DTYPE_F64, 6) != TR_OK)
                bad++;
            else
                for (int i = 0; i < 6; i++)
                    if (round[i] != (from == TR_DTYPE_BOOL || to == TR_DTYPE_BOOL
                                         ? (double)(i != 0) : values[i]))
                        bad++;
        }
    }
    is_int(bad, 0, "all %d dtype pairs convert small integers exactly", pairs);
}

static void test_strided(void)
{
    float src[12];
    int64_t shape[2] = {3, 4}, tshape[2] = {4, 3};
    struct tr_tensor *a, *t, *c, *dst;
    int16_t got[12];
    bool right = true;

    for (int i = 0; i < 12; i++)
        src[i] = (float)i + 0.75f;
    a = tr_from_data(src, TR_DTYPE_F32, 2, shape, TR_CPU);
    t = tr_transpose(a, 0, 1);
    c = tr_cast(t, TR_DTYPE_I16);
    ok(c && tr_tensor_is_contiguous(c) && tr_copy_to_host(c, got, sizeof got) == TR_OK,
       "cast of a transposed view");
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 3; k++)
            right = right && got[r * 3 + k] == k * 4 + r;
    ok(right, "reads the view in its own order");
    dst = tr_empty(TR_DTYPE_F64, 2, shape, TR_CPU);
    ok(tr_copy_into(dst, t) == TR_ERR_SHAPE, "copy_into refuses other shapes: %s",
       tr_last_error());
    tr_release(dst);
    dst = tr_empty(TR_DTYPE_F64, 2, tshape, TR_CPU);
    ok(tr_copy_into(dst, t) == TR_OK, "copy_into with conversion");
    tr_release(dst);
    dst = tr_cast(a, TR_DTYPE_F32);
    ok(dst && tr_tensor_shares_storage(dst, a), "cast to its own dtype of a compact tensor is a view");
    tr_release(dst);
    tr_release(c);
    tr_release(t);
    tr_release(a);
}

static void test_readonly(void)
{
    float buf[2] = {1, 2};
    int64_t n = 2;
    struct tr_blob blob = {.data = buf, .nbytes = sizeof buf, .flags = TR_FLAG_READONLY};
    struct tr_tensor *ro = tr_from_blob(&blob, TR_DTYPE_F32, 1, &n, NULL, TR_CPU);
    struct tr_tensor *src = tr_zeros(TR_DTYPE_F64, 1, &n, TR_CPU);

    is_int(tr_copy_into(ro, src), TR_ERR_READONLY, "copy_into never writes read-only memory");
    ok(buf[0] == 1 && buf[1] == 2, "and the memory is unchanged");
    tr_release(src);
    tr_release(ro);
}

/* The vector path (F16C, where the CPU has it) against the scalar
 * conversions, over every f16 and many f32 bit patterns. */
static void test_f16_paths(void)
{
    int64_t n = 1 << 20, h = 1 << 16;
    float *f = malloc((size_t)n * sizeof *f), *back = malloc((size_t)h * sizeof *back);
    uint16_t *half = malloc((size_t)n * sizeof *half), *all = malloc((size_t)h * sizeof *all);
    uint64_t state = 88172645463325252u;
    int64_t bad = 0;

    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        /* half random bit patterns, half values near the f16 range */
        bits = i % 2 ? (uint32_t)state : (uint32_t)(0x33000000u + (state % 0x15000000u));
        memcpy(&f[i], &bits, sizeof bits);
    }
    ok(convert(f, TR_DTYPE_F32, half, TR_DTYPE_F16, n) == TR_OK, "f32 -> f16 of 2^20 values");
    for (int64_t i = 0; i < n; i++)
        bad += half[i] != tr_f32_to_f16(f[i]);
    is_int(bad, 0, "the bulk f32 -> f16 path rounds exactly as tr_f32_to_f16");
    for (int64_t i = 0; i < h; i++)
        all[i] = (uint16_t)i;
    bad = 0;
    ok(convert(all, TR_DTYPE_F16, back, TR_DTYPE_F32, h) == TR_OK, "f16 -> f32 of every f16");
    for (int64_t i = 0; i < h; i++) {
        float want = tr_f16_to_f32((uint16_t)i);
        bad += memcmp(&back[i], &want, sizeof want) != 0;
    }
    is_int(bad, 0, "the bulk f16 -> f32 path widens exactly as tr_f16_to_f32");
    free(f);
    free(back);
    free(half);
    free(all);
}

int main(void)
{
    test_float_to_int();
    test_int_to_int();
    test_to_float();
    test_every_pair();
    test_strided();
    test_readonly();
    test_f16_paths();
    return done_testing();
}
