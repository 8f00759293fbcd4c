/*
 * fused_bench.c - what fusing saves on `y = x * 2.0 + 1.0; s = sum(y)`
 * over a large f32 x (1 GiB by default, from rand): the chain run fused
 * (tr_fused_run: one pass, no temporary) against the same ops run one by
 * one through tr_op_run (x * 2.0 makes a full-size temporary, + 1.0 is
 * computed over it in place, then sum reads it), beside two floors
 * measured in the same run: sum(x) alone through tr_op_run, and a
 * STREAM-style read of x (a plain OpenMP loop summing it).
 *
 * Each trial runs the four in turn; the report gives medians over the
 * trials, each job's read bandwidth (x's bytes over its time), the pool's
 * peak above x for the fused and the unfused chain, and checks that both
 * give the same bits.  Usage: fused_bench [MIB [TRIALS]]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorrun_fused.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "fused_bench: %s: %s\n", what, tr_last_error());
    exit(1);
}

static struct tr_arg tensor(struct tr_tensor *t, bool consumable)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.tensor = t;
    a.value = tr_value_of(t);
    a.consumable = consumable;
    return a;
}

static struct tr_arg number(double v)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_FLOAT;
    a.value.number = v;
    a.value.known = a.value.weak = true;
    return a;
}

/* op(args..., defaults for the rest) */
static struct tr_tensor *run(enum tr_op_id id, const struct tr_arg *given, int n)
{
    const struct tr_op_info *op = tr_op_get(id);
    struct tr_arg args[TR_OP_MAX_PARAMS];
    struct tr_tensor *r[TR_OP_MAX_RESULTS] = {NULL};

    for (int i = 0; i < op->nparams; i++) {
        memset(&args[i], 0, sizeof args[i]);
        if (i < n)
            args[i] = given[i];
        else
            args[i].value = op->params[i].default_value;
    }
    if (tr_op_run(op, args, NULL, r) != TR_OK)
        die(op->name);
    return r[0];
}

static float item(const struct tr_tensor *t)
{
    float v;

    if (tr_copy_to_host(t, &v, sizeof v) != TR_OK)
        die("reading a result");
    return v;
}

static uint64_t peak_above(uint64_t base)
{
    struct tr_memory_stats st;

    tr_memory_stats(TR_CPU, &st);
    return st.peak_active_bytes - base;
}

static void reset_peak(uint64_t *active)
{
    struct tr_memory_stats st;

    tr_memory_reset_peak(TR_CPU);
    tr_memory_stats(TR_CPU, &st);
    *active = st.active_bytes;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int64_t mib = argc > 1 ? strtoll(argv[1], NULL, 10) : 1024;
    int trials = argc > 2 ? atoi(argv[2]) : 7;
    int64_t n = mib * 1024 * 1024 / 4;
    double bytes = (double)n * 4, t_fused[64], t_unfused[64], t_sum[64], t_stream[64];
    uint64_t base, peak_fused = 0, peak_unfused = 0;
    struct tr_arg args[2];
    struct tr_fused chain;
    struct tr_tensor *x;
    struct tr_value dims[1];
    float fused_value = 0, unfused_value = 0;
    double stream_value = 0;

    if (mib < 1 || trials < 1 || trials > 64) {
        fprintf(stderr, "usage: fused_bench [MIB [TRIALS (1 to 64)]]\n");
        return 2;
    }
    /* x = rand([n]) */
    memset(dims, 0, sizeof dims);
    dims[0].kind = TR_VALUE_INT;
    dims[0].integer = n;
    dims[0].known = true;
    memset(args, 0, sizeof args);
    args[0].value.kind = TR_VALUE_LIST;
    args[0].value.count = 1;
    args[0].value.items = dims;
    args[0].value.known = true;
    x = run(TR_OP_RAND, args, 1);

    memset(&chain, 0, sizeof chain);
    chain.ninputs = 1;
    chain.nsteps = 2;
    chain.steps[0].op = TR_OP_MUL;
    chain.steps[0].args[0].ref = TR_FUSED_INPUT;
    chain.steps[0].args[1].value = number(2.0).value;
    chain.steps[1].op = TR_OP_ADD;
    chain.steps[1].args[0].ref = TR_FUSED_STEP;
    chain.steps[1].args[1].value = number(1.0).value;
    chain.has_tail = true;
    chain.tail.op = TR_OP_SUM;
    for (int i = 1; i < tr_op_get(TR_OP_SUM)->nparams; i++)
        chain.tail.args[i].value = tr_op_get(TR_OP_SUM)->params[i].default_value;

    for (int t = 0; t < trials; t++) {
        struct tr_tensor *y, *s;
        double t0, acc = 0;
        const float *xd = tr_tensor_data(x);

        reset_peak(&base);
        t0 = now();
        if (tr_fused_run(&chain, &x, NULL, &s) != TR_OK)
            die("fused");
        t_fused[t] = now() - t0;
        peak_fused = peak_above(base);
        fused_value = item(s);
        tr_release(s);

        reset_peak(&base);
        t0 = now();
        args[0] = tensor(x, false);
        args[1] = number(2.0);
        y = run(TR_OP_MUL, args, 2);
        args[0] = tensor(y, true);
        args[1] = number(1.0);
        s = run(TR_OP_ADD, args, 2);
        tr_release(y);
        y = s;
        args[0] = tensor(y, false);
        s = run(TR_OP_SUM, args, 1);
        tr_release(y);
        t_unfused[t] = now() - t0;
        peak_unfused = peak_above(base);
        unfused_value = item(s);
        tr_release(s);
        tr_release_cached(TR_CPU);

        t0 = now();
        args[0] = tensor(x, false);
        s = run(TR_OP_SUM, args, 1);
        t_sum[t] = now() - t0;
        tr_release(s);

        t0 = now();
#pragma omp parallel for simd reduction(+ : acc) schedule(static)
        for (int64_t i = 0; i < n; i++)
            acc += xd[i];
        t_stream[t] = now() - t0;
        stream_value = acc;
    }
    {
        double f = median(t_fused, trials), u = median(t_unfused, trials);
        double s = median(t_sum, trials), st = median(t_stream, trials);
        printf("fused_bench: sum(x * 2.0 + 1.0), x %lld f32 (%lld MiB), %d threads, median of %d\n",
               (long long)n, (long long)mib, tr_num_threads(), trials);
        printf("  fused      %8.3f s  %6.2f GB/s  pool peak above x %llu bytes\n", f,
               bytes / f / 1e9, (unsigned long long)peak_fused);
        printf("  unfused    %8.3f s  %6.2f GB/s  pool peak above x %llu bytes\n", u,
               bytes / u / 1e9, (unsigned long long)peak_unfused);
        printf("  sum(x)     %8.3f s  %6.2f GB/s  (the floor: one read and sum)\n", s,
               bytes / s / 1e9);
        printf("  stream     %8.3f s  %6.2f GB/s  (a plain OpenMP read loop; %.6g)\n", st,
               bytes / st / 1e9, stream_value);
        printf("  fused/unfused %.2fx, fused/sum(x) %.2fx, fused reaches %.0f%% of the "
               "stream loop's bandwidth\n",
               f / u, f / s, 100 * st / f);
        printf("  same bits: %s (%.9g)\n",
               memcmp(&fused_value, &unfused_value, sizeof fused_value) == 0 ? "yes" : "NO",
               (double)fused_value);
    }
    tr_release(x);
    return memcmp(&fused_value, &unfused_value, sizeof fused_value) != 0;
}
