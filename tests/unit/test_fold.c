/*
 * test_fold.c - arithmetic on constants: exact 64-bit integers, doubles,
 * and the cases that have no result.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "fold.h"
#include "tap.h"

static struct tr_value integer(int64_t i)
{
    return (struct tr_value){.kind = TR_VALUE_INT, .integer = i, .known = true, .weak = true};
}

static struct tr_value number(double f)
{
    return (struct tr_value){.kind = TR_VALUE_FLOAT, .number = f, .known = true, .weak = true};
}

static enum fold_result fold2(const char *op, struct tr_value a, struct tr_value b,
                              struct tr_value *out)
{
    struct tr_value args[2] = {a, b};

    return fold_constants(op, args, 2, out);
}

static bool integer_is(struct tr_value v, int64_t want)
{
    return v.kind == TR_VALUE_INT && v.known && v.weak && v.integer == want;
}

static bool double_is(struct tr_value v, double want)
{
    return v.kind == TR_VALUE_FLOAT && v.known && v.weak &&
           memcmp(&v.number, &want, sizeof want) == 0;
}

int main(void)
{
    struct tr_value r, unknown = {.kind = TR_VALUE_INT};

    ok(fold2("pow", integer(2), integer(25), &r) == FOLD_OK && integer_is(r, 33554432),
       "2 ** 25 is the integer 33554432");
    ok(fold2("pow", integer(2), integer(3), &r) == FOLD_OK && integer_is(r, 8),
       "2 ** 3 is the integer 8, not a float");
    ok(fold2("pow", integer(-3), integer(3), &r) == FOLD_OK && integer_is(r, -27),
       "(-3) ** 3 is -27");
    ok(fold2("pow", integer(7), integer(0), &r) == FOLD_OK && integer_is(r, 1), "7 ** 0 is 1");
    ok(fold2("pow", integer(2), integer(62), &r) == FOLD_OK &&
           integer_is(r, INT64_C(4611686018427387904)),
       "2 ** 62 fits");
    ok(fold2("pow", integer(2), integer(63), &r) == FOLD_ERROR &&
           strstr(tr_last_error(), "64-bit"),
       "2 ** 63 overflows: %s", tr_last_error());
    ok(fold2("pow", integer(-2), integer(63), &r) == FOLD_OK && integer_is(r, INT64_MIN),
       "(-2) ** 63 is INT64_MIN, which fits");
    ok(fold2("pow", integer(-2), integer(64), &r) == FOLD_ERROR, "(-2) ** 64 overflows");
    ok(fold2("pow", integer(1), integer(INT64_MAX), &r) == FOLD_OK && integer_is(r, 1),
       "1 ** INT64_MAX is 1, at once");
    ok(fold2("pow", integer(2), integer(-1), &r) == FOLD_ERROR &&
           strstr(tr_last_error(), "negative"),
       "2 ** -1 has no integer result: %s", tr_last_error());
    ok(fold2("pow", integer(2), number(-1), &r) == FOLD_OK && double_is(r, 0.5),
       "2 ** -1.0 is 0.5");
    ok(fold2("add", integer(INT64_MAX), integer(1), &r) == FOLD_ERROR, "INT64_MAX + 1 overflows");
    ok(fold2("sub", integer(INT64_MIN), integer(1), &r) == FOLD_ERROR, "INT64_MIN - 1 overflows");
    ok(fold2("mul", integer(INT64_C(1) << 32), integer(INT64_C(1) << 31), &r) == FOLD_ERROR,
       "2**32 * 2**31 overflows");
    ok(fold2("mul", integer(INT64_C(3037000499)), integer(INT64_C(3037000499)), &r) == FOLD_OK &&
           integer_is(r, INT64_C(9223372030926249001)),
       "3037000499 ** 2 is exact");
    ok(fold_constants("neg", (struct tr_value[]){integer(INT64_MIN)}, 1, &r) == FOLD_ERROR,
       "-(INT64_MIN) overflows");
    ok(fold_constants("neg", (struct tr_value[]){integer(5)}, 1, &r) == FOLD_OK &&
           integer_is(r, -5),
       "-5 is the integer -5");
    /* Python's // and %: rounded down, the remainder with the divisor's sign */
    ok(fold2("floor_divide", integer(-7), integer(2), &r) == FOLD_OK && integer_is(r, -4),
       "-7 // 2 is -4");
    ok(fold2("remainder", integer(-7), integer(2), &r) == FOLD_OK && integer_is(r, 1),
       "-7 %% 2 is 1");
    ok(fold2("remainder", integer(7), integer(-2), &r) == FOLD_OK && integer_is(r, -1),
       "7 %% -2 is -1");
    ok(fold2("floor_divide", integer(7), integer(0), &r) == FOLD_ERROR &&
           strstr(tr_last_error(), "division by zero"),
       "7 // 0 has no result: %s", tr_last_error());
    ok(fold2("remainder", integer(7), integer(0), &r) == FOLD_ERROR, "7 %% 0 has no result");
    ok(fold2("floor_divide", integer(INT64_MIN), integer(-1), &r) == FOLD_ERROR,
       "INT64_MIN // -1 overflows");
    ok(fold2("remainder", integer(INT64_MIN), integer(-1), &r) == FOLD_OK && integer_is(r, 0),
       "INT64_MIN %% -1 is 0");
    ok(fold2("floor_divide", number(-7.5), integer(2), &r) == FOLD_OK && double_is(r, -4.0),
       "-7.5 // 2 is -4.0");
    ok(fold2("remainder", number(-7.5), integer(2), &r) == FOLD_OK && double_is(r, 0.5),
       "-7.5 %% 2 is 0.5");
    ok(fold2("remainder", number(6.0), number(-3.0), &r) == FOLD_OK && double_is(r, 0.0),
       "6.0 %% -3.0 is 0.0, with 6.0's sign as remainder(x, y) gives it");
    ok(fold2("remainder", number(-6.0), number(3.0), &r) == FOLD_OK && double_is(r, -0.0),
       "-6.0 %% 3.0 is -0.0");
    ok(fold2("floor_divide", number(1.0), number(0.0), &r) == FOLD_OK && isinf(r.number),
       "1.0 // 0.0 is inf, as in NumPy");
    ok(fold2("bitwise_and", integer(12), integer(10), &r) == FOLD_OK && integer_is(r, 8),
       "12 & 10 is 8");
    ok(fold2("bitwise_or", integer(12), integer(10), &r) == FOLD_OK && integer_is(r, 14),
       "12 | 10 is 14");
    ok(fold2("bitwise_xor", integer(12), integer(10), &r) == FOLD_OK && integer_is(r, 6),
       "12 ^ 10 is 6");
    ok(fold_constants("bitwise_not", (struct tr_value[]){integer(5)}, 1, &r) == FOLD_OK &&
           integer_is(r, -6),
       "~5 is -6");
    ok(fold2("bitwise_and", number(1.5), integer(1), &r) == FOLD_NO,
       "1.5 & 1 is left to the op, which refuses floats");
    ok(fold2("add", integer((INT64_C(1) << 53) + 1), integer(0), &r) == FOLD_OK &&
           integer_is(r, (INT64_C(1) << 53) + 1),
       "integers past 2**53 stay exact");
    ok(fold2("div", integer(1), integer(3), &r) == FOLD_OK && double_is(r, 1.0 / 3.0),
       "1 / 3 is the double nearest 1/3");
    ok(fold2("div", integer(6), integer(3), &r) == FOLD_OK && double_is(r, 2.0),
       "6 / 3 is the float 2.0 (true division)");
    ok(fold2("div", integer(1), integer(0), &r) == FOLD_OK && r.kind == TR_VALUE_FLOAT &&
           isinf(r.number) && r.number > 0,
       "1 / 0 is inf, as tensor division gives");
    ok(fold2("add", number(0.1), number(0.2), &r) == FOLD_OK && double_is(r, 0.1 + 0.2),
       "0.1 + 0.2 in double precision");
    ok(fold2("mul", integer(3), number(0.5), &r) == FOLD_OK && double_is(r, 1.5),
       "an integer and a float give a float");
    ok(fold2("maximum", integer(-5), integer(2), &r) == FOLD_OK && integer_is(r, 2),
       "maximum of integers");
    ok(fold2("minimum", number(NAN), number(1), &r) == FOLD_OK && r.kind == TR_VALUE_FLOAT &&
           isnan(r.number),
       "NaN propagates through minimum");
    ok(fold2("add", integer(1), unknown, &r) == FOLD_NO, "an unknown integer is not folded");
    ok(fold2("matmul", integer(1), integer(2), &r) == FOLD_NO, "other ops are not folded");
    ok(fold2("add", (struct tr_value){.kind = TR_VALUE_TENSOR}, integer(2), &r) == FOLD_NO,
       "a tensor is not folded");
    /* regression (fuzz_pipeline): numel of a view of an empty tensor, whose
     * sizes taken in order pass int64 */
    {
        struct tr_value t = {.kind = TR_VALUE_TENSOR, .dtype = TR_DTYPE_F32, .ndim = 3}, items[8];
        t.shape[0] = t.shape[1] = INT64_MAX;
        t.shape[2] = 0;
        ok(fold_attribute("numel", &t, &r, items) && integer_is(r, 0),
           "numel of [INT64_MAX, INT64_MAX, 0] is 0");
        t.shape[2] = 2;
        ok(!fold_attribute("numel", &t, &r, items) && strstr(tr_last_error(), "more than"),
           "numel past int64 is an error: %s", tr_last_error());
        t.shape[0] = t.shape[1] = 3;
        ok(fold_attribute("numel", &t, &r, items) && integer_is(r, 18), "numel of [3, 3, 2] is 18");
    }
    /* regression (fuzz_pipeline): steps at int64's ends */
    {
        int64_t first, by, count;
        ok(fold_list_slice(8, TR_SLICE_NONE, TR_SLICE_NONE, INT64_MAX, &first, &by, &count) ==
                   FOLD_OK && first == 0 && count == 1,
           "[::INT64_MAX] of 8 items is the first");
        ok(fold_list_slice(8, TR_SLICE_NONE, TR_SLICE_NONE, -INT64_MAX, &first, &by, &count) ==
                   FOLD_OK && first == 7 && count == 1,
           "[::-INT64_MAX] of 8 items is the last");
        ok(fold_list_slice(8, 6, TR_SLICE_NONE, -2, &first, &by, &count) == FOLD_OK &&
               first == 6 && count == 4,
           "[6::-2] of 8 items is 4 of them");
    }
    return done_testing();
}
