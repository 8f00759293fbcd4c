/*
 * test_plan.c - plans built from made-up input headers (plan_build_from,
 * the way fuzz_pipeline plans), and the lowering's fixes for what the
 * fuzzer found: where an output of a foreach block is written, and the
 * joined rows of a foreach stage past int64.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auto.h"
#include "plan.h"
#include "tap.h"

static char file[] = "/tmp/test_plan.XXXXXX";
static struct diag_list diags;

struct headers {
    size_t n;
    struct tio_entry e[2];
};

static bool describe(void *ctx, size_t index, const struct input *in, struct tio_entry *e,
                     const char **why)
{
    const struct headers *h = ctx;

    (void)in;
    if (index >= h->n) {
        *why = "made up: no header";
        return false;
    }
    *e = h->e[index];
    int64_t stride = 1;
    for (int d = e->ndim - 1; d >= 0; d--) { /* C order, as a reader says */
        e->strides[d] = stride;
        if (__builtin_mul_overflow(stride, e->shape[d] > 1 ? e->shape[d] : 1, &stride))
            stride = INT64_MAX;
    }
    return true;
}

/* a: f32[], b: f32[8] (or as h says), then whatever the test names */
static struct headers h;
static struct plan_input_source src = {describe, &h};

static void reset_headers(void)
{
    memset(&h, 0, sizeof h);
    h.n = 2;
    for (int i = 0; i < 2; i++) {
        h.e[i].supported = true;
        h.e[i].dtype = TR_DTYPE_F32;
        h.e[i].ndim = i;
        h.e[i].shape[0] = 8;
    }
}

static struct pipeline *loaded;

static struct plan *plan_text(const char *text)
{
    FILE *f = fopen(file, "w");

    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", file);
        exit(1);
    }
    diag_free(&diags);
    pipeline_free(loaded);
    diag_init(&diags, file, NULL, 0);
    loaded = pipeline_load(file, NULL, &diags);
    if (!loaded || diags.errors) {
        printf("Bail out! the pipeline does not load\n");
        exit(1);
    }
    return plan_build_from(loaded, &diags, &src);
}

static int find(const char *part)
{
    for (size_t i = 0; i < diags.count; i++)
        if (diags.items[i].message && strstr(diags.items[i].message, part))
            return (int)i;
    return -1;
}

#define INPUTS "tensorrun: 1\ninputs:\n  a: /nonexistent/a.npy\n  b: /nonexistent/b.npy\n"

static void test_headers(void)
{
    struct plan *plan;
    const struct plan_value *b;

    reset_headers();
    h.e[1].dtype = TR_DTYPE_I16;
    h.e[1].ndim = 2;
    h.e[1].shape[0] = 0;
    h.e[1].shape[1] = INT64_MAX / 2; /* as large as an i16 tensor can be */
    plan = plan_text(INPUTS "stages:\n  - name: s\n    do:\n      - y = b + 1\n");
    b = plan_lookup(plan, "b");
    ok(diag_exit_code(&diags) == 0 && b && b->meta.dtype == TR_DTYPE_I16 &&
           b->meta.ndim == 2 && b->meta.shape[0] == 0 && b->meta.shape[1] == INT64_MAX / 2,
       "the source's header is the input's: i16[0, INT64_MAX / 2], no file opened");
    ok(plan->inputs[1].file == NULL && plan->mapped_bytes == 0, "nothing is opened or mapped");
    plan_free(plan);

    h.n = 1;
    plan = plan_text(INPUTS "stages:\n  - name: s\n    do:\n      - y = a + 1\n");
    ok(find("input 'b': /nonexistent/b.npy: made up: no header") >= 0 &&
           diag_exit_code(&diags) == 4,
       "no header: the source's reason, as a file that cannot be opened (exit 4)");
    plan_free(plan);

    reset_headers();
    h.e[1].supported = false;
    snprintf(h.e[1].dtype_text, sizeof h.e[1].dtype_text, "F8_E4M3");
    plan = plan_text(INPUTS "stages:\n  - name: s\n    do:\n      - y = a + 1\n"
                            "outputs:\n  b: /nonexistent/b2.npy\n");
    ok(find("input of dtype F8_E4M3") >= 0, "an unsupported dtype is reported where used");
    plan_free(plan);
}

/* The write of group g and its instruction. */
static const struct instr *write_of(const struct plan *plan, size_t g)
{
    return &plan->program->instrs[plan->program->groups[g].write];
}

static void test_block_outputs(void)
{
    struct plan *plan;
    const struct program *prog;

    reset_headers();
    plan = plan_text(INPUTS "stages:\n  - name: s\n    foreach: {over: b, size: 2}\n"
                            "    do:\n      - y = b * 2\n    keep: [b]\n"
                            "outputs:\n  b: /nonexistent/b.bin\n");
    prog = plan->program;
    ok(diag_exit_code(&diags) == 0 && prog->ngroups == 1 && prog->nprologue == 0 &&
           write_of(plan, 0)->stage == 0 &&
           prog->groups[0].write == prog->stages[0].first + prog->stages[0].count - 1,
       "an output of the foreach block is written at the end of its stage, not before it");
    plan_free(plan);

    plan = plan_text(INPUTS "stages:\n  - name: s0\n    do:\n      - y = b * 2\n"
                            "  - name: s1\n    foreach: {over: b, size: 2}\n"
                            "    do:\n      - k = 3\n"
                            "outputs:\n  b: /nonexistent/b.bin\n  y: /nonexistent/y.npy\n");
    prog = plan->program;
    ok(diag_exit_code(&diags) == 0 && prog->ngroups == 2 && write_of(plan, 0)->stage == 1 &&
           write_of(plan, 1)->stage == 0 && prog->groups[1].write < prog->groups[0].write &&
           prog->stages[1].count == 1,
       "a block of a stage without instructions is written in that stage, after the "
       "earlier stage's writes");
    plan_free(plan);
}

static void test_foreach_rows(void)
{
    struct plan *plan;

    reset_headers();
    plan = plan_text(INPUTS "stages:\n  - name: s\n"
                            "    foreach: {over: b, size: 9223372036854775807}\n"
                            "    do:\n      - y = b * 2\n    keep: [y]\n");
    ok(diag_exit_code(&diags) == 0 && plan->program->stages[0].nblocks == 1 &&
           plan_lookup(plan, "y")->meta.shape[0] == 8,
       "foreach size INT64_MAX over 8 rows is one block of 8");
    plan_free(plan);

    /* 2^61 - 1 rows of f32 are a tensor; 8 blocks of them are not */
    plan = plan_text(INPUTS "stages:\n  - name: s\n    foreach: {over: b, size: 1}\n"
                            "    do:\n      - y = expand(b[0], [2305843009213693951])\n"
                            "    keep: [y]\n");
    ok(find("'y' of the 8 blocks joined has more than 9223372036854775807 rows") >= 0,
       "blocks whose joined rows pass int64 are an error: %s",
       diags.count ? diags.items[0].message : "none");
    plan_free(plan);

    plan = plan_text(INPUTS "stages:\n  - name: s\n    do:\n      - k = 2 * 3\n");
    ok(diag_exit_code(&diags) == 0 && plan->program->ninstrs == 0 &&
           plan->program->stages[0].memory[0].peak_bytes == 0,
       "a stage of constants only has no instructions and takes nothing");
    plan_free(plan);
}

static void test_auto_work(void)
{
    struct plan *plan, *twin;
    uint64_t n, macs;

    reset_headers();
    plan = plan_text(INPUTS "stages:\n  - name: s\n    do:\n      - y = b + 1\n"
                            "      - m = matmul(unsqueeze(b, 1), unsqueeze(b, 0))\n"
                            "      - v = reshape(b, [2, 4])\n"
                            "  - name: f\n    foreach: {over: b, size: 2}\n"
                            "    do:\n      - z = b * 2\n");
    auto_stage_work(plan->program, 0, &n, &macs);
    /* b + 1: 8 read, 8 written; matmul: 8 + 8 read, 64 written, 64
     * multiply-adds; the views (unsqueeze, reshape) touch nothing */
    is_int((long long)n, 96, "work: the elements non-view ops read and write");
    is_int((long long)macs, 64, "work: matmul's multiply-adds");
    auto_stage_work(plan->program, 1, &n, &macs);
    is_int((long long)n, 16, "work: a foreach stage's, once per block (4 of 2 + 2)");
    ok(plan->program->stages[0].automatic && plan->stages[0].device.kind == TR_DEV_CPU &&
           !plan->program->stages[0].has_fallback,
       "below the thresholds an auto stage is on the CPU");
    plan_free(plan);

    /* 2^26 elements read and 2^26 written: on the accelerator, fake:0 */
    h.e[1].ndim = 2;
    h.e[1].shape[0] = h.e[1].shape[1] = 8192;
    plan = plan_text(INPUTS "stages:\n  - name: s\n    do:\n      - y = b + 1\n"
                            "  - name: c\n    device: cpu\n    do:\n      - z = b * 2\n");
    ok(plan->stages[0].device.kind == TR_DEV_FAKE && plan->program->stages[0].automatic,
       "past the thresholds an auto stage is on the accelerator");
    ok(plan->stages[1].device.kind == TR_DEV_CPU && !plan->program->stages[1].automatic,
       "a stage given a device stays there, whatever its work");
    ok(plan->program->stages[0].has_fallback &&
           plan->program->stages[0].fallback_peak_bytes == 256u << 20,
       "its fallback's CPU peak: y alone (b is mapped)");
    is_int((long long)plan->program->stages[0].memory[0].peak_bytes, 512ll << 20,
           "on the device: b's copy and y");
    twin = plan_pin_cpu(plan, 0);
    ok(twin && twin->stages[0].device.kind == TR_DEV_CPU && twin->pinned[0] &&
           twin->program->stages[0].memory[0].peak_bytes == 256u << 20,
       "plan_pin_cpu: the stage on the CPU, its peak the fallback's");
    bool alike = twin && twin->program->nlowered == plan->program->nlowered &&
                 plan->program->nlowered > 0;
    for (size_t v = 0; alike && v < plan->program->nlowered; v++) {
        const struct value *a = &plan->program->values[v], *b = &twin->program->values[v];
        alike = a->origin == b->origin && a->stage == b->stage && a->meta.kind == b->meta.kind &&
                a->meta.dtype == b->meta.dtype && a->meta.ndim == b->meta.ndim &&
                (a->name == b->name || (a->name && b->name && strcmp(a->name, b->name) == 0));
    }
    ok(alike, "and the values of the lowering numbered alike in both");
    plan_free(twin);
    plan_free(plan);
}

int main(void)
{
    int fd = mkstemp(file);

    if (fd < 0) {
        printf("Bail out! mkstemp failed\n");
        return 1;
    }
    close(fd);
    setenv("TENSORRUN_FAKE_DEVICES", "1", 1); /* the accelerator of auto */
    test_headers();
    test_block_outputs();
    test_foreach_rows();
    test_auto_work();
    pipeline_free(loaded);
    diag_free(&diags);
    unlink(file);
    return done_testing();
}
