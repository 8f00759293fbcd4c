/*
 * test_dtype.c - the dtype table (sizes, names, parsing, classification) and
 * the f16/bf16 <-> f32 conversions, each checked against a reference written
 * here from the IEEE 754 definitions and computed in double.
 *
 * Set TR_VALGRIND=1 to shrink the random and sweep loops (the exhaustive
 * 65536-pattern checks always run in full).
 */
#include <math.h>
#include <string.h>

#include "tensorrun.h"
#include "tap.h"

/* ------------------------------------------------------------- helpers */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* xorshift64: a fixed sequence, the same on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t rng32(void)
{
    uint64_t x = rng_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return (uint32_t)(x >> 32);
}

/* Counts comparisons of one check and remembers its first mismatch. */
struct tally {
    long n;
    long bad;
    char first[160];
};

__attribute__((format(printf, 3, 4)))
static void tally_check(struct tally *t, int pass, const char *fmt, ...)
{
    va_list ap;

    t->n++;
    if (pass)
        return;
    if (t->bad++ == 0) {
        va_start(ap, fmt);
        vsnprintf(t->first, sizeof t->first, fmt, ap);
        va_end(ap);
    }
}

static void tally_ok(const struct tally *t, const char *what)
{
    if (!ok(t->n > 0 && t->bad == 0, "%s (%ld values)", what, t->n)) {
        if (t->bad)
            diag("  %ld mismatches; first: %s", t->bad, t->first);
        else
            diag("  nothing was compared");
    }
}

/* ------------------------------------------------------- reference f16 */

static bool f16_is_nan(uint16_t h)
{
    return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

/* The value of a finite f16 from the definition: (-1)^s * 2^(e-15) * 1.m,
 * or m * 2^-24 when e is 0. */
static double f16_value(uint16_t h)
{
    unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    double v = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);

    return (h & 0x8000u) ? -v : v;
}

/* f32 bits expected from tr_f16_to_f32. */
static uint32_t ref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (h & 0x8000u) ? 0x80000000u : 0;
    unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

    if (e == 0x1f && m == 0)
        return sign | 0x7f800000u;
    if (e == 0x1f) /* quiet NaN, payload on top of the f32 mantissa */
        return sign | 0x7f800000u | 0x00400000u | ((uint32_t)m << 13);
    return f2u((float)f16_value(h)); /* exact: f16 values fit in f32 */
}

/* Magnitudes of the non-negative f16 patterns 0x0000..0x7bff, increasing,
 * plus 65536 at 0x7c00: the next value the format would have, so that
 * rounding to it means overflow to infinity. */
static double f16_mag[0x7c01];

static void f16_table_init(void)
{
    for (unsigned i = 0; i < 0x7c00; i++)
        f16_mag[i] = f16_value((uint16_t)i);
    f16_mag[0x7c00] = 65536.0;
}

/* f16 bits expected from tr_f32_to_f16 for a non-NaN x: the nearest entry
 * of f16_mag by binary search, ties to the even pattern. */
static uint16_t ref_f32_to_f16(float x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0;
    double a = fabs((double)x);
    unsigned lo = 0, hi = 0x7c00, i;

    if (a >= 65536.0) /* includes infinity */
        return sign | 0x7c00u;
    /* largest i with f16_mag[i] <= a */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (f16_mag[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    i = lo;
    if (f16_mag[i] != a) {
        double below = a - f16_mag[i], above = f16_mag[i + 1] - a; /* exact */
        if (above < below || (above == below && (i & 1)))
            i++;
    }
    return (uint16_t)(sign | i);
}

/* ------------------------------------------------------ reference bf16 */

/* f32 bits expected from tr_bf16_to_f32 (for bits that are not NaN, the
 * value from the definition: 8-bit exponent bias 127, 7-bit mantissa). */
static uint32_t ref_bf16_to_f32(uint16_t b)
{
    uint32_t sign = (b & 0x8000u) ? 0x80000000u : 0;
    unsigned e = (b >> 7) & 0xffu, m = b & 0x7fu;
    double v;

    if (e == 0xff && m == 0)
        return sign | 0x7f800000u;
    if (e == 0xff)
        return sign | 0x7f800000u | 0x00400000u | ((uint32_t)m << 16);
    v = e ? ldexp(128 + m, (int)e - 134) : ldexp(m, -133);
    return sign | f2u((float)v);
}

/* bf16 bits expected from tr_f32_to_bf16 for a non-NaN x: of the two bf16
 * values around |x| (multiples of the quantum of its binade), the nearest,
 * ties to the even multiple; 2^128 and above is infinity. */
static uint16_t ref_f32_to_bf16(float x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0;
    double a = fabs((double)x), q, n, r;
    int e;

    if (isinf(x))
        return sign | 0x7f80u;
    frexp(a, &e);                       /* a = f * 2^e, f in [0.5, 1) */
    q = ldexp(1.0, e - 8 < -133 ? -133 : e - 8); /* 8 significant bits */
    n = floor(a / q);
    r = a - n * q; /* exact */
    if (r > q / 2 || (r == q / 2 && fmod(n, 2.0) != 0))
        n += 1;
    r = n * q;
    if (r >= 0x1p128)
        return sign | 0x7f80u;
    return (uint16_t)(sign | (f2u((float)r) >> 16));
}

/* -------------------------------------------------------- dtype table */

static void test_table(void)
{
    static const struct {
        enum tr_dtype dtype;
        const char *name, *alias;
        size_t size;
        bool is_float, is_integer, is_signed;
    } want[] = {
        {TR_DTYPE_BOOL, "bool", "bool", 1, false, false, false},
        {TR_DTYPE_U8, "u8", "uint8", 1, false, true, false},
        {TR_DTYPE_U16, "u16", "uint16", 2, false, true, false},
        {TR_DTYPE_U32, "u32", "uint32", 4, false, true, false},
        {TR_DTYPE_U64, "u64", "uint64", 8, false, true, false},
        {TR_DTYPE_I8, "i8", "int8", 1, false, true, true},
        {TR_DTYPE_I16, "i16", "int16", 2, false, true, true},
        {TR_DTYPE_I32, "i32", "int32", 4, false, true, true},
        {TR_DTYPE_I64, "i64", "int64", 8, false, true, true},
        {TR_DTYPE_F16, "f16", "float16", 2, true, false, true},
        {TR_DTYPE_BF16, "bf16", "bfloat16", 2, true, false, true},
        {TR_DTYPE_F32, "f32", "float32", 4, true, false, true},
        {TR_DTYPE_F64, "f64", "float64", 8, true, false, true},
    };
    static const char *const bad_names[] = {
        "", "f33", "Float32", "F32", "FLOAT32", " f32", "f32 ", "f3", "int128", "?",
    };
    int n = (int)(sizeof want / sizeof want[0]);
    bool all_named = true, all_sized = true, all_parsed = true, all_aliased = true,
         all_kinds = true, still_clear = true, all_rejected = true;

    is_int(TR_DTYPE_COUNT, n, "13 dtypes");
    for (int i = 0; i < n; i++) {
        enum tr_dtype d = want[i].dtype, got;

        if (tr_dtype_size(d) != want[i].size) {
            all_sized = false;
            diag("  tr_dtype_size(%s) = %zu, want %zu", want[i].name, tr_dtype_size(d),
                 want[i].size);
        }
        if (strcmp(tr_dtype_name(d), want[i].name) != 0) {
            all_named = false;
            diag("  tr_dtype_name(%d) = \"%s\", want \"%s\"", (int)d, tr_dtype_name(d),
                 want[i].name);
        }
        tr_clear_error();
        got = TR_DTYPE_COUNT;
        if (tr_dtype_parse(want[i].name, &got) != TR_OK || got != d) {
            all_parsed = false;
            diag("  tr_dtype_parse(\"%s\") gave %d", want[i].name, (int)got);
        }
        got = TR_DTYPE_COUNT;
        if (tr_dtype_parse(want[i].alias, &got) != TR_OK || got != d) {
            all_aliased = false;
            diag("  tr_dtype_parse(\"%s\") gave %d", want[i].alias, (int)got);
        }
        if (tr_last_status() != TR_OK)
            still_clear = false;
        if (tr_dtype_is_float(d) != want[i].is_float ||
            tr_dtype_is_integer(d) != want[i].is_integer ||
            tr_dtype_is_signed(d) != want[i].is_signed) {
            all_kinds = false;
            diag("  %s: is_float %d is_integer %d is_signed %d, want %d %d %d", want[i].name,
                 tr_dtype_is_float(d), tr_dtype_is_integer(d), tr_dtype_is_signed(d),
                 want[i].is_float, want[i].is_integer, want[i].is_signed);
        }
    }
    ok(all_sized, "tr_dtype_size of every dtype");
    ok(all_named, "tr_dtype_name of every dtype");
    ok(all_parsed, "tr_dtype_parse round-trips every canonical name");
    ok(all_aliased, "tr_dtype_parse accepts every long alias");
    ok(still_clear, "successful parses record no error");
    ok(all_kinds, "is_float / is_integer / is_signed of every dtype");

    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        enum tr_dtype got = TR_DTYPE_F32;
        tr_status st;
        char quoted[32];

        tr_clear_error();
        st = tr_dtype_parse(bad_names[i], &got);
        snprintf(quoted, sizeof quoted, "'%s'", bad_names[i]);
        if (st != TR_ERR_DTYPE || tr_last_status() != TR_ERR_DTYPE ||
            strstr(tr_last_error(), quoted) == NULL) {
            all_rejected = false;
            diag("  tr_dtype_parse(\"%s\"): status %d, last %d, message \"%s\"", bad_names[i],
                 (int)st, (int)tr_last_status(), tr_last_error());
        }
    }
    ok(all_rejected, "bad names are TR_ERR_DTYPE with a message quoting them");

    tr_clear_error();
    is_int(tr_dtype_parse(NULL, &(enum tr_dtype){TR_DTYPE_F32}), TR_ERR_DTYPE,
           "a NULL name is TR_ERR_DTYPE");
    is_int(tr_last_status(), TR_ERR_DTYPE, "and is recorded");
    ok(tr_last_error()[0] != '\0', "with a message: %s", tr_last_error());
    tr_clear_error();

    {
        const enum tr_dtype outside[] = {TR_DTYPE_COUNT, (enum tr_dtype)(TR_DTYPE_COUNT + 1),
                                         (enum tr_dtype)-1, (enum tr_dtype)1000};
        bool all_outside = true;

        for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
            enum tr_dtype d = outside[i];
            if (tr_dtype_size(d) != 0 || strcmp(tr_dtype_name(d), "?") != 0 ||
                tr_dtype_is_float(d) || tr_dtype_is_integer(d) || tr_dtype_is_signed(d)) {
                all_outside = false;
                diag("  dtype %d: size %zu, name \"%s\"", (int)d, tr_dtype_size(d),
                     tr_dtype_name(d));
            }
        }
        ok(all_outside, "values outside the enum: size 0, name \"?\", no kind");
    }
}

/* ------------------------------------------------------------------ f16 */

static void test_f16_to_f32(void)
{
    struct tally t = {0};

    for (uint32_t h = 0; h <= 0xffffu; h++) {
        uint32_t got = f2u(tr_f16_to_f32((uint16_t)h)), want = ref_f16_to_f32((uint16_t)h);
        tally_check(&t, got == want, "f16 0x%04x -> 0x%08x, want 0x%08x", (unsigned)h,
                    (unsigned)got, (unsigned)want);
    }
    tally_ok(&t, "f16 -> f32, every bit pattern");
    diag("f16 -> f32: all %ld patterns compared bit for bit", t.n);
}

/* One f32 -> f16 comparison against the reference (NaN excluded). */
static void check_to_f16(struct tally *t, float x)
{
    uint16_t got = tr_f32_to_f16(x), want = ref_f32_to_f16(x);

    tally_check(t, got == want, "f32 0x%08x (%.9g) -> f16 0x%04x, want 0x%04x",
                (unsigned)f2u(x), (double)x, got, want);
}

/* What a NaN must become: NaN, quiet, same sign, top payload bits kept. */
static bool f16_nan_ok(uint32_t x, uint16_t h)
{
    return f16_is_nan(h) && (h & 0x200u) && (h & 0x8000u) == ((x >> 16) & 0x8000u) &&
           (h & 0x1ffu) == ((x >> 13) & 0x1ffu);
}

static void test_f32_to_f16(bool quick)
{
    struct tally exact = {0}, mids = {0}, rnd = {0}, near = {0}, sweep = {0}, sub = {0},
                 nan = {0}, special = {0};
    long n_random = quick ? 40000 : 400000;
    uint32_t sweep_step = quick ? 16 : 1;

    /* every finite f16 value, both signs: exact, back to the same bits */
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        if ((h & 0x7c00u) == 0x7c00u)
            continue;
        float x = (float)f16_value((uint16_t)h);
        uint16_t got = tr_f32_to_f16(x), back = tr_f32_to_f16(tr_f16_to_f32((uint16_t)h));
        tally_check(&exact, got == h && back == h, "f16 0x%04x: via double 0x%04x, round trip 0x%04x",
                    (unsigned)h, got, back);
    }
    tally_ok(&exact, "f32 -> f16 keeps every finite f16 value exactly");

    /* the midpoint between neighbours (0x7bff/0x7c00 is 65504/65520/65536)
     * and the f32 on each side of it, both signs */
    for (unsigned i = 0; i < 0x7c00; i++) {
        float mid = (float)((f16_mag[i] + f16_mag[i + 1]) / 2); /* exact in f32 */
        float around[3] = {nextafterf(mid, 0.0f), mid, nextafterf(mid, INFINITY)};

        if ((double)mid != (f16_mag[i] + f16_mag[i + 1]) / 2)
            tally_check(&mids, 0, "midpoint after 0x%04x is not an f32", i);
        for (int k = 0; k < 3; k++) {
            check_to_f16(&mids, around[k]);
            check_to_f16(&mids, -around[k]);
        }
        /* and which way each goes, spelled out without the reference */
        tally_check(&mids, tr_f32_to_f16(around[0]) == i &&
                               tr_f32_to_f16(mid) == ((i & 1) ? i + 1 : i) &&
                               tr_f32_to_f16(around[2]) == i + 1,
                    "around the midpoint after 0x%04x: 0x%04x 0x%04x 0x%04x", i,
                    tr_f32_to_f16(around[0]), tr_f32_to_f16(mid), tr_f32_to_f16(around[2]));
    }
    tally_ok(&mids, "f32 -> f16 at every midpoint and one f32 ulp either side");

    /* random bit patterns, and random ones with exponents near the f16 range */
    for (long k = 0; k < n_random; k++) {
        uint32_t x = rng32();
        if ((x & 0x7fffffffu) > 0x7f800000u)
            continue;
        check_to_f16(&rnd, u2f(x));
    }
    tally_ok(&rnd, "f32 -> f16, random bit patterns");
    for (long k = 0; k < n_random; k++) {
        uint32_t r = rng32();
        uint32_t e = 100 + (r >> 8) % 46; /* 2^-27 .. 2^18 */
        check_to_f16(&near, u2f((r & 0x80000000u) | (e << 23) | (rng32() & 0x7fffffu)));
    }
    tally_ok(&near, "f32 -> f16, random values with exponents 2^-27..2^18");

    /* every sign/exponent/top mantissa combination with low 13 bits that sit
     * on, next to and around the normal rounding point */
    {
        static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
        for (uint32_t top = 0; top < (1u << 19); top += sweep_step) {
            for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
                uint32_t x = (top << 13) | lows[k];
                if ((x & 0x7fffffffu) > 0x7f800000u)
                    continue;
                check_to_f16(&sweep, u2f(x));
            }
        }
        tally_ok(&sweep, "f32 -> f16, all high 19 bits x 6 low patterns");
    }

    /* f32 subnormals go to a signed zero */
    for (uint32_t m = 1; m < 0x800000u; m = m * 3 + 1) {
        uint32_t xs[] = {m, m | 0x80000000u, 0x7fffffu - m + 1, (0x7fffffu - m + 1) | 0x80000000u};
        for (int k = 0; k < 4; k++)
            tally_check(&sub, tr_f32_to_f16(u2f(xs[k])) == ((xs[k] >> 16) & 0x8000u),
                        "f32 subnormal 0x%08x -> 0x%04x", (unsigned)xs[k],
                        tr_f32_to_f16(u2f(xs[k])));
    }
    for (int k = 0; k < 2000; k++) {
        uint32_t x = rng32() & 0x807fffffu;
        tally_check(&sub, tr_f32_to_f16(u2f(x)) == ((x >> 16) & 0x8000u),
                    "f32 subnormal 0x%08x -> 0x%04x", (unsigned)x, tr_f32_to_f16(u2f(x)));
    }
    tally_ok(&sub, "f32 subnormals -> signed zero");

    /* zeros, infinities, the largest finite values and the boundaries */
    {
        static const struct { uint32_t x; uint16_t h; } cases[] = {
            {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, /* +-0 */
            {0x7f800000u, 0x7c00}, {0xff800000u, 0xfc00}, /* +-inf */
            {0x7f7fffffu, 0x7c00}, {0xff7fffffu, 0xfc00}, /* FLT_MAX */
            {0x477fe000u, 0x7bff}, {0xc77fe000u, 0xfbff}, /* 65504 */
            {0x477fefffu, 0x7bff},                        /* just under 65520 */
            {0x477ff000u, 0x7c00}, {0xc77ff000u, 0xfc00}, /* 65520: tie, to inf */
            {0x47800000u, 0x7c00},                        /* 65536 */
            {0x33000000u, 0x0000}, {0xb3000000u, 0x8000}, /* 2^-25: tie, to 0 */
            {0x33000001u, 0x0001}, {0xb3000001u, 0x8001}, /* just above 2^-25 */
            {0x33800000u, 0x0001},                        /* 2^-24 */
            {0x33c00000u, 0x0002},                        /* 1.5 * 2^-24: tie, to even */
            {0x387fc000u, 0x03ff},                        /* largest subnormal */
            {0x387fe000u, 0x0400},                        /* tie with 2^-14: to even */
            {0x387fdfffu, 0x03ff},
            {0x38800000u, 0x0400},                        /* 2^-14 */
            {0x3f800000u, 0x3c00}, {0xbf800000u, 0xbc00}, /* +-1 */
            {0x3f801000u, 0x3c00},                        /* 1 + 2^-11: tie, to even */
            {0x3f803000u, 0x3c02},                        /* 1 + 3 * 2^-11: tie, to even */
            {0x3f801001u, 0x3c01},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            uint16_t got = tr_f32_to_f16(u2f(cases[k].x));
            tally_check(&special, got == cases[k].h, "f32 0x%08x -> 0x%04x, want 0x%04x",
                        (unsigned)cases[k].x, got, cases[k].h);
            check_to_f16(&special, u2f(cases[k].x)); /* the reference agrees */
        }
        tally_ok(&special, "f32 -> f16, zeros, infinities and boundary values");
    }

    /* NaNs: signalling ones with a payload only in the low bits must not turn
     * into infinity */
    {
        static const uint32_t fixed[] = {0x7f800001u, 0x7f801fffu, 0x7f802000u, 0x7fc00000u,
                                         0x7fffffffu, 0x7fa00000u, 0xff800001u, 0xffc00000u,
                                         0xffffffffu, 0x7fbfe000u};
        for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
            uint16_t h = tr_f32_to_f16(u2f(fixed[k]));
            tally_check(&nan, f16_nan_ok(fixed[k], h), "NaN 0x%08x -> 0x%04x", (unsigned)fixed[k], h);
        }
        for (uint32_t m = 1; m < 0x800000u; m += quick ? 4099 : 257) {
            for (int s = 0; s < 2; s++) {
                uint32_t x = (s ? 0xff800000u : 0x7f800000u) | m;
                uint16_t h = tr_f32_to_f16(u2f(x));
                tally_check(&nan, f16_nan_ok(x, h), "NaN 0x%08x -> 0x%04x", (unsigned)x, h);
            }
        }
        /* an f16 NaN through f32 and back comes out as its quiet self */
        for (uint32_t h = 0; h <= 0xffffu; h++) {
            if (!f16_is_nan((uint16_t)h))
                continue;
            uint16_t back = tr_f32_to_f16(tr_f16_to_f32((uint16_t)h));
            tally_check(&nan, back == (h | 0x200u), "f16 NaN 0x%04x -> f32 -> 0x%04x",
                        (unsigned)h, back);
        }
        tally_ok(&nan, "f32 -> f16 NaNs: quiet NaN, sign and top payload bits kept");
    }

    diag("f32 -> f16: %ld exact, %ld at midpoints, %ld random, %ld near range, "
         "%ld swept, %ld subnormal, %ld special, %ld NaN",
         exact.n, mids.n, rnd.n, near.n, sweep.n, sub.n, special.n, nan.n);
}

static void test_f16_native(bool quick)
{
#ifdef __FLT16_MAX__
    struct tally t = {0};
    long n = quick ? 20000 : 200000;

    for (long k = 0; k < 2 * n; k++) {
        /* half of them with exponents near the f16 range */
        uint32_t x = rng32();
        if (k & 1)
            x = (x & 0x807fffffu) | ((100 + (rng32() >> 8) % 46) << 23);
        if ((x & 0x7fffffffu) > 0x7f800000u)
            continue;
        _Float16 c = (_Float16)u2f(x);
        uint16_t want, got = tr_f32_to_f16(u2f(x));
        memcpy(&want, &c, sizeof want);
        tally_check(&t, got == want, "f32 0x%08x -> 0x%04x, (_Float16) gives 0x%04x",
                    (unsigned)x, got, want);
    }
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        uint16_t hh = (uint16_t)h;
        _Float16 c;
        float got = tr_f16_to_f32(hh);
        if (f16_is_nan(hh))
            continue;
        memcpy(&c, &hh, sizeof c);
        tally_check(&t, f2u((float)c) == f2u(got), "f16 0x%04x -> 0x%08x, (float) gives 0x%08x",
                    (unsigned)h, (unsigned)f2u(got), (unsigned)f2u((float)c));
    }
    tally_ok(&t, "f16 conversions agree with the compiler's _Float16");
    diag("_Float16 cross-check: %ld values", t.n);
#else
    (void)quick;
    skip("the compiler has no _Float16");
#endif
}

/* ----------------------------------------------------------------- bf16 */

static void test_bf16(bool quick)
{
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    struct tally widen = {0}, narrow = {0}, nan = {0}, special = {0};

    (void)quick;
    for (uint32_t b = 0; b <= 0xffffu; b++) {
        uint32_t got = f2u(tr_bf16_to_f32((uint16_t)b)), want = ref_bf16_to_f32((uint16_t)b);
        tally_check(&widen, got == want, "bf16 0x%04x -> 0x%08x, want 0x%08x", (unsigned)b,
                    (unsigned)got, (unsigned)want);
    }
    tally_ok(&widen, "bf16 -> f32, every bit pattern");

    for (uint32_t hi = 0; hi <= 0xffffu; hi++) {
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
            uint32_t x = (hi << 16) | lows[k];
            uint16_t got = tr_f32_to_bf16(u2f(x));

            if ((x & 0x7fffffffu) > 0x7f800000u) {
                /* NaN, quiet, sign and top payload bits kept */
                bool good = (got & 0x7f80u) == 0x7f80u && (got & 0x40u) &&
                            (got & 0x8000u) == (hi & 0x8000u) && (got & 0x3fu) == (hi & 0x3fu);
                tally_check(&nan, good, "NaN 0x%08x -> bf16 0x%04x", (unsigned)x, got);
            } else {
                uint16_t want = ref_f32_to_bf16(u2f(x));
                tally_check(&narrow, got == want, "f32 0x%08x -> bf16 0x%04x, want 0x%04x",
                            (unsigned)x, got, want);
            }
        }
    }
    tally_ok(&narrow, "f32 -> bf16, all high halves x 6 low halves");
    for (uint32_t b = 0; b <= 0xffffu; b++) {
        uint16_t bb = (uint16_t)b, back;
        if ((bb & 0x7f80u) != 0x7f80u || (bb & 0x7fu) == 0)
            continue;
        back = tr_f32_to_bf16(tr_bf16_to_f32(bb));
        tally_check(&nan, back == (bb | 0x40u), "bf16 NaN 0x%04x -> f32 -> 0x%04x",
                    (unsigned)b, back);
    }
    tally_ok(&nan, "f32 -> bf16 NaNs: quiet NaN, sign and top payload bits kept");

    {
        static const struct { uint32_t x; uint16_t b; } cases[] = {
            {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, /* +-0 */
            {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, /* +-inf */
            {0x7f7fffffu, 0x7f80}, {0xff7fffffu, 0xff80}, /* FLT_MAX overflows */
            {0x7f7f7fffu, 0x7f7f},                        /* largest bf16, below the tie */
            {0x7f7f8000u, 0x7f80},                        /* tie with 2^128: to even, inf */
            {0x3f808000u, 0x3f80},                        /* 1 + 2^-8: tie, to even */
            {0x3f818000u, 0x3f82},                        /* tie, to even, up */
            {0x00008000u, 0x0000},                        /* tie with the smallest subnormal */
            {0x00018000u, 0x0002},
            {0x007fffffu, 0x0080},                        /* rounds up into the normals */
            {0x7f800001u, 0x7fc0}, {0xff800001u, 0xffc0}, /* NaN with a low payload */
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            uint16_t got = tr_f32_to_bf16(u2f(cases[k].x));
            tally_check(&special, got == cases[k].b, "f32 0x%08x -> bf16 0x%04x, want 0x%04x",
                        (unsigned)cases[k].x, got, cases[k].b);
        }
        tally_ok(&special, "f32 -> bf16, zeros, infinities and boundary values");
    }
    diag("bf16: %ld widened, %ld narrowed, %ld NaN, %ld special", widen.n, narrow.n, nan.n,
         special.n);
}

int main(void)
{
    const char *vg = getenv("TR_VALGRIND");
    bool quick = vg && vg[0] && strcmp(vg, "0") != 0;

    if (quick)
        diag("TR_VALGRIND set: shorter random and sweep loops");
    f16_table_init();
    test_table();
    test_f16_to_f32();
    test_f32_to_f16(quick);
    test_f16_native(quick);
    test_bf16(quick);
    return done_testing();
}
