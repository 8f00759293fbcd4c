/*
 * auto.h - where a stage with device: auto runs: on the accelerator when
 * its planned work is large enough to pay for starting one and the
 * accelerator has a kernel for every op of it, else on the CPU.
 */
#ifndef TR_CLI_AUTO_H
#define TR_CLI_AUTO_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "program.h"

/* A stage goes to the accelerator when its ops read and write at least
 * AUTO_MIN_ELEMENTS tensor elements in all, or its products (matmul,
 * cdist) do at least AUTO_MIN_MACS multiply-adds: below both, starting
 * CUDA (about 70 ms) costs more than the CPU takes.  tensorrun(1),
 * DEVICES, says so. */
#define AUTO_MIN_ELEMENTS (UINT64_C(1) << 26)
#define AUTO_MIN_MACS (UINT64_C(1) << 30)

/* Stage s's planned work: the elements its instructions' tensor operands
 * and results hold (views touch none), and the multiply-adds of its
 * products; a foreach stage's, all of it once per block.  Saturates. */
void auto_stage_work(const struct program *prog, size_t s, uint64_t *elements,
                     uint64_t *macs);

/*
 * Places every stage marked automatic (program_stage.automatic, lowered on
 * the CPU): on the accelerator, when its work passes the thresholds (only
 * then is a driver asked) and the accelerator has a kernel for each of its
 * ops; a stage whose work passes but which has an op the accelerator
 * cannot run stays on the CPU, with a warning in d naming the op.  The
 * accelerator is CUDA device 0, or fake:0 when TENSORRUN_FAKE_DEVICES is
 * set (tests).  A stage moved there has its results made there (every
 * value it makes on the CPU but those of to() and of numbers alone); the
 * other stages are left as they are.  Runs after the lowering, before
 * place_transfers.  pinned[s] (NULL: none) keeps stage s on the CPU.
 */
void auto_place(struct program *prog, const char *const *stage_names, const bool *pinned,
                struct diag_list *d);

#endif /* TR_CLI_AUTO_H */
