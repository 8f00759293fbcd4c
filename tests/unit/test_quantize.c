/*
 * test_quantize.c - the quantise ops' edge cases: the nibble order of i4
 * and u4 (element 2k in the low nibble of byte k, 2k+1 in the high one,
 * i4 as two's complement), i16's range, quantize_affine's zero point and
 * range widened to 0, groups along the last dimension, a zero scale, and
 * the refusals.  The symmetric i8 cases live in test_select.c.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

static void release3(struct tr_tensor **r)
{
    for (int i = 0; i < 3; i++) {
        tr_release(r[i]);
        r[i] = NULL;
    }
}

/* The bytes of a compact u8 tensor. */
static bool bytes_are(const struct tr_tensor *t, const uint8_t *want, int64_t n)
{
    return t && tr_tensor_dtype(t) == TR_DTYPE_U8 && tr_tensor_numel(t) == n &&
           memcmp(tr_tensor_data(t), want, (size_t)n) == 0;
}

static void test_nibbles(void)
{
    /* max |x| = 7: scale 1, q = x */
    float v[8] = {1, -2, 7, -7, 0, 3, -1, 5};
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 2, (int64_t[]){2, 4}, TR_CPU);
    struct tr_tensor *r[3] = {NULL, NULL, NULL}, *back;

    run2("quantize", (struct tr_arg[]){tensor_arg(x), string_arg("i4")}, 2, r);
    /* (1, -2) -> 0xE1, (7, -7) -> 0x97, (0, 3) -> 0x30, (-1, 5) -> 0x5F */
    ok(is(r[0], TR_DTYPE_U8, 2, (int64_t[]){2, 2}) &&
           bytes_are(r[0], (const uint8_t[]){0xE1, 0x97, 0x30, 0x5F}, 4) && flat(r[1], 0) == 1,
       "i4: element 2k in the low nibble, 2k+1 in the high one, two's complement");
    back = r[0] ? run("dequantize", (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1]),
                                                      none_arg(), none_arg(), none_arg(),
                                                      string_arg("i4")},
                      6)
                : NULL;
    ok(is(back, TR_DTYPE_F32, 2, (int64_t[]){2, 4}) &&
           values(back, (double[]){1, -2, 7, -7, 0, 3, -1, 5}, 8),
       "dequantize i4 reads the nibbles back in the same order");
    tr_release(back);
    release3(r);
    tr_release(x);

    {
        /* lo 0, hi 15: scale 1, zero point 0, q = x */
        float u[4] = {15, 0, 1, 14};
        struct tr_tensor *xu = tr_from_data(u, TR_DTYPE_F32, 1, (int64_t[]){4}, TR_CPU);
        run2("quantize_affine", (struct tr_arg[]){tensor_arg(xu), string_arg("u4")}, 2, r);
        ok(is(r[0], TR_DTYPE_U8, 1, (int64_t[]){2}) &&
               bytes_are(r[0], (const uint8_t[]){0x0F, 0xE1}, 2) && flat(r[1], 0) == 1 &&
               is(r[2], TR_DTYPE_U8, 0, NULL) && flat(r[2], 0) == 0,
           "u4: (15, 0) -> 0x0F, (1, 14) -> 0xE1");
        back = r[0] ? run("dequantize", (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1]),
                                                          tensor_arg(r[2]), none_arg(), none_arg(),
                                                          string_arg("u4")},
                          6)
                    : NULL;
        ok(back && values(back, (double[]){15, 0, 1, 14}, 4), "and back");
        tr_release(back);
        release3(r);
        tr_release(xu);
    }
    {
        /* a strided packed q: every other byte column of a [1, 4] u8 */
        uint8_t b[4] = {0x21, 0xFF, 0x43, 0xFF};
        struct tr_tensor *raw = tr_from_data(b, TR_DTYPE_U8, 2, (int64_t[]){1, 4}, TR_CPU);
        struct tr_tensor *every = tr_slice(raw, 1, 0, 4, 2);
        back = run("dequantize", (struct tr_arg[]){tensor_arg(every), float_arg(1), none_arg(),
                                                   none_arg(), none_arg(), string_arg("u4")},
                   6);
        ok(is(back, TR_DTYPE_F32, 2, (int64_t[]){1, 4}) && values(back, (double[]){1, 2, 3, 4}, 4),
           "dequantize u4 of a strided q reads byte k at k's stride");
        tr_release(back);
        tr_release(every);
        tr_release(raw);
    }
}

static void test_i16(void)
{
    double v[3] = {-32767.0 * 3, 1.5 * 3, 2.5 * 3}; /* scale 3 */
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F64, 1, (int64_t[]){3}, TR_CPU);
    struct tr_tensor *r[3] = {NULL, NULL, NULL};

    run2("quantize", (struct tr_arg[]){tensor_arg(x), dtype_arg(TR_DTYPE_I16)}, 2, r);
    ok(is(r[0], TR_DTYPE_I16, 1, (int64_t[]){3}) && flat(r[1], 0) == 3 &&
           values(r[0], (double[]){-32767, 2, 2}, 3),
       "i16: scale max|x| / 32767, halves to even");
    release3(r);
    tr_release(x);
}

static void test_affine(void)
{
    /* lo -1, hi 2: scale 3 / 255, zero point round(85) = 85 */
    float v[4] = {-1, 2, 0, 0.5f};
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 1, (int64_t[]){4}, TR_CPU);
    struct tr_tensor *r[3] = {NULL, NULL, NULL};
    float scale = 3.0f / 255.0f;
    double want[4];

    for (int i = 0; i < 4; i++) {
        double q = nearbyintf(v[i] / scale) + 85;
        want[i] = q < 0 ? 0 : q > 255 ? 255 : q;
    }
    run2("quantize_affine", (struct tr_arg[]){tensor_arg(x)}, 1, r);
    ok(is(r[0], TR_DTYPE_U8, 1, (int64_t[]){4}) && is(r[1], TR_DTYPE_F32, 0, NULL) &&
           flat(r[1], 0) == (double)scale && is(r[2], TR_DTYPE_U8, 0, NULL) && flat(r[2], 0) == 85 &&
           values(r[0], want, 4) && flat(r[0], 0) == 0 && flat(r[0], 1) == 255,
       "quantize_affine: scale (hi - lo) / 255, zero point round(-lo / scale), ends at 0 and 255");
    release3(r);
    tr_release(x);
    {
        /* all positive: lo widens to 0, so the zero point is 0 */
        float p[3] = {1, 2, 5.1f};
        struct tr_tensor *xp = tr_from_data(p, TR_DTYPE_F32, 1, (int64_t[]){3}, TR_CPU);
        run2("quantize_affine", (struct tr_arg[]){tensor_arg(xp)}, 1, r);
        ok(r[0] && flat(r[2], 0) == 0 && flat(r[1], 0) == (double)(5.1f / 255.0f) &&
               flat(r[0], 2) == 255,
           "the range includes 0: positive values have zero point 0");
        release3(r);
        tr_release(xp);
    }
    {
        /* all negative: hi widens to 0, so the zero point is qmax */
        float n[2] = {-3, -1};
        struct tr_tensor *xn = tr_from_data(n, TR_DTYPE_F32, 1, (int64_t[]){2}, TR_CPU);
        run2("quantize_affine", (struct tr_arg[]){tensor_arg(xn), string_arg("u4")}, 2, r);
        /* scale 3 / 15 = 0.2: -3 -> -15 + 15 = 0, -1 -> -5 + 15 = 10 */
        ok(r[0] && flat(r[2], 0) == 15 && bytes_are(r[0], (const uint8_t[]){0xA0}, 1),
           "negative values have zero point qmax");
        release3(r);
        tr_release(xn);
    }
    {
        struct tr_tensor *z = tr_zeros(TR_DTYPE_BF16, 2, (int64_t[]){2, 4}, TR_CPU);
        run2("quantize_affine", (struct tr_arg[]){tensor_arg(z), dtype_arg(TR_DTYPE_U8), int_arg(0)}, 3,
             r);
        ok(r[0] && values(r[1], (double[]){0, 0}, 2) && values(r[2], (double[]){0, 0}, 2) &&
               values(r[0], (double[]){0, 0, 0, 0, 0, 0, 0, 0}, 8),
           "all zeros: scale 0, zero point 0 and q 0 (no NaN)");
        release3(r);
        tr_release(z);
    }
}

static void test_groups(void)
{
    /* [2, 6] in groups of 3: scales max|x| / 127 of each three */
    float v[12] = {127, 1, -2, 254, 0, 0, 0, 0, 0, -1.27f, 0.5f, 0};
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 2, (int64_t[]){2, 6}, TR_CPU);
    struct tr_tensor *r[3] = {NULL, NULL, NULL}, *back;

    run2("quantize", (struct tr_arg[]){tensor_arg(x), dtype_arg(TR_DTYPE_I8), none_arg(), int_arg(3)},
         4, r);
    ok(is(r[1], TR_DTYPE_F32, 2, (int64_t[]){2, 2}) &&
           values(r[1], (double[]){1, 2, 0, (double)(float)((double)1.27f / 127)}, 4) &&
           values(r[0], (double[]){127, 1, -2, 127, 0, 0, 0, 0, 0, -127, 50, 0}, 12),
       "groups of 3 along the last dimension: one scale each, a zero group's scale 0");
    back = r[0] ? run("dequantize", (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1]),
                                                      none_arg(), none_arg(), int_arg(3)},
                      5)
                : NULL;
    ok(back && flat(back, 3) == 254 && flat(back, 6) == 0 && flat(back, 0) == 127,
       "dequantize by the same groups");
    tr_release(back);
    release3(r);
    tr_release(x);
}

/* A call tr_op_infer must refuse with status, its message beginning with
 * the op's name. */
static void refused(const char *name, const struct tr_arg *args, int n, tr_status status,
                    const char *what)
{
    struct tr_tensor *r[3] = {NULL, NULL, NULL};

    run2(name, args, n, r);
    ok(!r[0] && tr_last_status() == status && strncmp(tr_last_error(), name, strlen(name)) == 0,
       "%s: %s", what, tr_last_error());
    release3(r);
}

static void test_refusals(void)
{
    struct tr_tensor *odd = tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){2, 3}, TR_CPU);
    struct tr_tensor *s0 = tr_zeros(TR_DTYPE_F32, 0, NULL, TR_CPU);
    struct tr_tensor *q8 = tr_zeros(TR_DTYPE_I8, 2, (int64_t[]){2, 4}, TR_CPU);
    struct tr_arg x = tensor_arg(odd);

    refused("quantize", (struct tr_arg[]){x, string_arg("i4")}, 2, TR_ERR_SHAPE,
            "i4 needs an even last dimension");
    refused("quantize", (struct tr_arg[]){tensor_arg(s0), string_arg("i4")}, 2, TR_ERR_SHAPE,
            "i4 of a 0-d tensor");
    refused("quantize", (struct tr_arg[]){x, string_arg("u4")}, 2, TR_ERR_DTYPE,
            "quantize does not make u4");
    refused("quantize", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_U8)}, 2, TR_ERR_DTYPE,
            "quantize does not make u8");
    refused("quantize_affine", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I8)}, 2, TR_ERR_DTYPE,
            "quantize_affine does not make i8");
    refused("quantize", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I8), int_arg(0), int_arg(3)}, 4,
            TR_ERR_INVALID, "dim and group together");
    refused("quantize", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_I8), none_arg(), int_arg(2)}, 4,
            TR_ERR_SHAPE, "a group that does not divide the last dimension");
    refused("quantize_affine", (struct tr_arg[]){x, dtype_arg(TR_DTYPE_U8), none_arg(), int_arg(0)},
            4, TR_ERR_INVALID, "group 0");
    refused("quantize", (struct tr_arg[]){tensor_arg(s0), dtype_arg(TR_DTYPE_I8), none_arg(), int_arg(1)},
            4, TR_ERR_SHAPE, "a group of a 0-d tensor");
    refused("quantize", (struct tr_arg[]){x, string_arg("i3")}, 2, TR_ERR_INVALID,
            "a string that is no packed dtype");
    refused("cast", (struct tr_arg[]){x, string_arg("i4")}, 2, TR_ERR_DTYPE,
            "i4 is no dtype for cast");
    refused("dequantize", (struct tr_arg[]){tensor_arg(q8), float_arg(1), none_arg(), none_arg(),
                                            none_arg(), string_arg("i4")},
            6, TR_ERR_DTYPE, "packed values come in u8");
    refused("dequantize", (struct tr_arg[]){tensor_arg(q8), float_arg(1), none_arg(), none_arg(),
                                            none_arg(), dtype_arg(TR_DTYPE_I8)},
            6, TR_ERR_DTYPE, "dtype names a packed dtype or None");
    refused("dequantize", (struct tr_arg[]){tensor_arg(q8), tensor_arg(odd), none_arg(), none_arg(),
                                            int_arg(2)},
            5, TR_ERR_SHAPE, "a group scale of the wrong shape");
    refused("dequantize", (struct tr_arg[]){tensor_arg(q8), float_arg(1), tensor_arg(odd)}, 3,
            TR_ERR_SHAPE, "a zero point of the wrong shape");
    tr_release(q8);
    tr_release(s0);
    tr_release(odd);
}

int main(void)
{
    test_nibbles();
    test_i16();
    test_affine();
    test_groups();
    test_refusals();
    return done_testing();
}
