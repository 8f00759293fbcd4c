/*
 * test_backend.c - the backend table: every backend fills in the whole
 * interface; the CPU's kernel slots are kernels.def's, CUDA's are all
 * empty (supports() says no), the fake device's are the CPU's but one;
 * and the kernel tr_op_run picks is that of its operands' device.
 */
#include "config.h"

#include <string.h>

#include "backend_impl.h"
#include "op_test.h"
#include "tap.h"

static void test_tables_complete(void)
{
    for (int k = 0; k < TR__DEVICE_KINDS; k++) {
        const struct tr__backend *b = tr__backend_of((enum tr_device_kind)k);
        ok(b && b->name && b->device_count && b->unavailable_reason && b->pool_backend &&
               b->upload && b->download && b->fill_zero && b->gather && b->supports &&
               b->synchronize && b->event_record && b->event_query && b->event_wait,
           "backend %d (%s): every function of the interface", k, b ? b->name : "?");
    }
    ok(tr__backend_of((enum tr_device_kind)TR__DEVICE_KINDS) == NULL,
       "no backend past the last kind");
    ok(tr__backend_of(TR_DEV_CPU)->host_memory && tr__backend_of(TR_DEV_FAKE)->host_memory &&
           !tr__backend_of(TR_DEV_CUDA)->host_memory,
       "the CPU's and the fake device's memory is the host's, CUDA's is not");
}

static void test_kernel_slots(void)
{
    const struct tr__backend *cpu = tr__backend_of(TR_DEV_CPU);
    const struct tr__backend *cuda = tr__backend_of(TR_DEV_CUDA);
    const struct tr__backend *fake = tr__backend_of(TR_DEV_FAKE);
    int cpu_same = 0, cuda_agrees = 0, cuda_kernels = 0, fake_like = 0, fake_missing = 0;
    int with_kernel = 0, cuda_cpu_kernel_data = 0;

    for (int id = 0; id < TR_OP_COUNT; id++) {
        tr__kernel_fn k = tr__kernel_for((enum tr_op_id)id);
        with_kernel += k != NULL;
        cpu_same += cpu->kernels[id] == k &&
                    cpu->supports(cpu, (enum tr_op_id)id, NULL, 0) == (k != NULL);
        /* the column (supports() of no tensor operand) and the slots agree */
        cuda_agrees += (cuda->kernels[id] != NULL) == cuda->supports(cuda, (enum tr_op_id)id,
                                                                     NULL, 0);
        cuda_kernels += cuda->kernels[id] != NULL;
        /* a CPU kernel in a CUDA slot only where it never reads the data */
        cuda_cpu_kernel_data += cuda->kernels[id] && cuda->kernels[id] == k &&
                                tr_op_get((enum tr_op_id)id)->group_id != TR_GROUP_VIEWS &&
                                id != TR_OP_TO && id != TR_OP_CAST;
        fake_like += (fake->kernels[id] != NULL) == (k != NULL);
        fake_missing += k != NULL && fake->kernels[id] == NULL;
    }
    is_int(cpu_same, TR_OP_COUNT, "cpu: its slots are kernels.def's (%d ops have one)",
           with_kernel);
    is_int(cuda_agrees, TR_OP_COUNT, "cuda: an op has a kernel exactly where the cuda column "
                                      "names dtypes (%d ops)", cuda_kernels);
    ok(cuda->kernels[TR_OP_TO] == tr__kernel_for(TR_OP_TO) &&
           cuda->kernels[TR_OP_RESHAPE] == tr__kernel_for(TR_OP_RESHAPE),
       "cuda: to() and the views are the CPU's kernels (they only copy through the backend "
       "or describe memory)");
    ok(cuda->kernels[TR_OP_ADD] && cuda->kernels[TR_OP_ADD] != tr__kernel_for(TR_OP_ADD) &&
           cuda->kernels[TR_OP_CLONE] != tr__kernel_for(TR_OP_CLONE),
       "cuda: the elementwise ops and the copies have kernels of their own");
    is_int(cuda_cpu_kernel_data, 0, "cuda: no other CUDA slot holds a CPU kernel");
    ok(cuda->kernels[TR_OP_SUM] && cuda->kernels[TR_OP_MATMUL] && !cuda->kernels[TR_OP_PROD],
       "cuda: sum and matmul have kernels; prod none yet");
    is_int(fake_missing, 1, "fake: one op the CPU runs is left out");
    ok(fake->kernels[TR_OP_CUMSUM] == NULL && cpu->kernels[TR_OP_CUMSUM] != NULL,
       "fake: the one left out is cumsum");
    is_int(fake_like, TR_OP_COUNT - 1, "fake: every other op as on the CPU");
}

static void test_select(void)
{
    int64_t n = 4;
    struct tr_tensor *x = tr_zeros(TR_DTYPE_F32, 1, &n, TR_CPU);
    struct tr_arg a[2] = {tensor_arg(x), float_arg(2.0)};
    struct tr_value out[1];
    tr__kernel_fn k = NULL;

    struct tr_arg shape[1] = {int_arg(3)};
    struct tr_arg z[2] = {list_arg(shape, 1), dtype_arg(TR_DTYPE_F32)};
    struct tr_tensor *made;

    out[0] = tr_value_of(x);
    ok(tr__kernel_select(tr_op_get(TR_OP_MUL), a, out, &k) == TR_OK &&
           k == tr__kernel_for(TR_OP_MUL),
       "select: a CPU operand gets the CPU's kernel");
    ok(tr__kernel_select(tr_op_get(TR_OP_ZEROS), z, out, &k) == TR_OK &&
           k == tr__kernel_for(TR_OP_ZEROS),
       "select: an op without tensor operands runs where its result goes (the CPU)");
    out[0].device = TR_CUDA(63); /* missing with a GPU too */
    ok(tr__kernel_select(tr_op_get(TR_OP_ZEROS), z, out, &k) == TR_ERR_DEVICE,
       "select: a result on a missing device: %s", tr_last_error());
    out[0].device = TR_CPU;
    out[0].dtype = TR_DTYPE_F64;
    ok(tr__kernel_select(tr_op_get(TR_OP_MUL), a, out, &k) == TR_OK &&
           k == tr__kernel_for(TR_OP_MUL),
       "select: the operands' device decides, not the result's description");
    made = run("zeros", z, 2);
    ok(made && tr_device_equal(tr_tensor_device(made), TR_CPU), "zeros runs, on the CPU");
    tr_release(made);
    tr_release(x);
}

int main(void)
{
    test_tables_complete();
    test_kernel_slots();
    test_select();
    return done_testing();
}
