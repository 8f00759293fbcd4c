/*
 * last_block.h - a foreach stage whose last block is shorter than the
 * others: the lowering types the stage's statements twice, for a full
 * block and for the last one, and this pairs the two, so that one list of
 * instructions runs every block and the last block has only what differs
 * (a result's shape, a constant made from the block's length).
 */
#ifndef TR_CLI_LAST_BLOCK_H
#define TR_CLI_LAST_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "program.h"

enum last_block_pairing {
    LAST_BLOCK_PAIRED,    /* the same instructions: differences recorded */
    LAST_BLOCK_DIFFERENT, /* other instructions, or a differing count */
    LAST_BLOCK_NO_MEMORY
};

/*
 * The full-block typing is instructions [first, mid) making values
 * [vfirst, vmid); the last block's is [mid, end) and [vmid, vend), made by
 * the same statements in the same order.  Each pair of instructions must
 * be of one kind and op, with the same operands, except that a value of
 * the last block's range stands for the one of the full block's at the
 * same offset, and that constants may differ; a constant that differs
 * gives the full-block instruction last_args (or last_subs) in full-block
 * value ids, and a tensor value whose shape or dtype differs gets
 * has_last and last_meta.  Nothing is changed unless the typings pair up.
 * The last block's instructions and values stay where they are (the
 * caller drops them with program_truncate).
 */
enum last_block_pairing last_block_pair(struct program *prog, size_t first, size_t mid,
                                        size_t end, uint32_t vfirst, uint32_t vmid,
                                        uint32_t vend);

#endif /* TR_CLI_LAST_BLOCK_H */
