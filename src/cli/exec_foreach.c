/*
 * exec_foreach.c - running a foreach stage (tensorrun-pipeline(5),
 * FOREACH): the instructions before the blocks once, then the blocks'
 * instructions once per block of the value cut into blocks, each block in
 * a scope of its own with the block bound to a view of its rows, then the
 * instructions after the last block.
 *
 * A joined value's whole is made before the first block, in the pool or
 * in its output file's mapping (foreach.h); each block computes its part
 * straight into its rows when the memory pass said so (instr.into_join),
 * or copies it there, and after the last block the whole is the value.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exec_impl.h"
#include "liveness.h"
#include "msg.h"
#include "progress.h"

/* The rows [start, start + n) of t: a view. */
static struct tr_tensor *rows_of(const struct tr_tensor *t, int64_t start, int64_t n)
{
    struct tr_value bounds[3], sub;

    memset(bounds, 0, sizeof bounds);
    for (int k = 0; k < 2; k++) {
        bounds[k].kind = TR_VALUE_INT;
        bounds[k].known = true;
    }
    bounds[0].integer = start;
    bounds[1].integer = start + n;
    bounds[2].kind = TR_VALUE_NONE;
    memset(&sub, 0, sizeof sub);
    sub.kind = TR_VALUE_LIST;
    sub.count = 3;
    sub.items = bounds;
    return tr_index_view(t, &sub, 1);
}

/* The whole of joined value v, made before the first block: in its output
 * file's mapping when its join says so and the file's blocks can be
 * reserved, else in the pool. */
static struct tr_tensor *make_whole(struct exec *x, const struct value *v)
{
    const struct tr_value *m = &v->joined_meta;

    if (v->join == JOIN_FILE) {
        struct tio_output *file = x->files[v->join_group].file;
        struct tr_tensor *t = tio_output_map(file, m->dtype, m->ndim, m->shape);
        if (t) /* the file is mapped once: a second run of the stage cannot */
            exec_no_fall_back(x, "it has given an output its values already");
        if (t && tio_output_reserve(file) == 0)
            return t;
        tr_release(t); /* the disk cannot take it: the pool serves */
    }
    return tr_empty(m->dtype, m->ndim, m->shape, m->device);
}

/* Sets the builtins of stage s for block b of nblocks starting at row start. */
static void set_builtins(struct exec *x, size_t s, int64_t start, int64_t b, int64_t nblocks)
{
    for (size_t v = 0; v < x->prog->nvalues; v++) {
        struct value *pv = &x->prog->values[v];
        if (pv->origin != ORIGIN_BUILTIN || pv->stage != (int)s ||
            pv->meta.kind != TR_VALUE_INT)
            continue;
        pv->meta.known = true;
        pv->meta.integer = strcmp(pv->name, "chunk_start") == 0   ? start
                           : strcmp(pv->name, "chunk_index") == 0 ? b
                                                                  : nblocks;
    }
}

/* Releases the handles of what block-local values are still alive at the
 * end of a block, and the joined rows. */
static void end_block(struct exec *x, size_t s)
{
    for (size_t v = 0; v < x->prog->nvalues; v++) {
        if (liveness_block_local(x->prog, s, (uint32_t)v) && x->tensors[v]) {
            tr_release(x->tensors[v]);
            x->tensors[v] = NULL;
        }
        if (x->join_rows[v]) {
            tr_release(x->join_rows[v]);
            x->join_rows[v] = NULL;
        }
    }
}

/* One value the blocks are cut from, for the whole loop. */
struct cut {
    uint32_t block;               /* the value each block is */
    struct tr_tensor *over;       /* the value cut, or NULL for a stream */
    struct plan_input *stream;    /* an input read a block at a time (value.streamed) */
    struct tr_tensor *buffer;     /* its block's pool memory */
    struct tio_readahead *ra;     /* hints for a mapped over */
    uint64_t row_bytes;
};

/* What the blocks are cut from: row-aligned values, the same rows each. */
struct blocks {
    const struct stage *st;
    struct cut cut[FOREACH_MAX_OVER];
    size_t ncut;
    int64_t rows, size, nblocks;
    int64_t first, end;           /* the blocks run: [first, end) of the whole's */
    uint64_t row_bytes;           /* of all the cuts together */
};

/* Runs block b (counted from the first block run, so that a shard's
 * parts start its wholes), rows [start, start + n) of each cut (of over
 * itself, or of the block read from a stream into its buffer). */
static int run_block(struct exec *x, size_t s, const struct blocks *bl,
                     struct tr_tensor *const *wholes, int64_t b, int64_t start, int64_t n)
{
    const struct program_stage *pst = &x->prog->stages[s];
    size_t first = pst->first + pst->nonce, end = first + pst->nblock;
    struct tr_scope *scope = tr_scope_begin();
    bool bound = true;
    int status = EXIT_OK;

    if (!scope) {
        msg_error(NULL, "stage '%s': %s", bl->st->name, tr_last_error());
        return exit_for_status(tr_last_status());
    }
    for (size_t c = 0; c < bl->ncut && bound; c++) {
        const struct cut *cut = &bl->cut[c];
        x->tensors[cut->block] = rows_of(cut->stream ? cut->buffer : cut->over,
                                         cut->stream ? 0 : start, n);
        bound = x->tensors[cut->block] != NULL;
    }
    for (size_t v = 0; v < x->prog->nvalues && bound; v++) {
        /* a block's part of a joined value has the rows its typing says
         * (k of a topk, twice the block's of a reshape), at b times the
         * full blocks' */
        const struct value *pv = &x->prog->values[v];
        int64_t part = pv->meta.shape[0];
        if (!wholes[v])
            continue;
        x->join_rows[v] = rows_of(wholes[v], b * part,
                                  x->last_block && pv->has_last ? pv->last_meta.shape[0] : part);
        bound = x->join_rows[v] != NULL;
    }
    if (!bound) {
        msg_error(NULL, "stage '%s': %s", bl->st->name, tr_last_error());
        status = exit_for_status(tr_last_status());
    }
    for (size_t i = first; i < end && status == EXIT_OK; i++)
        status = exec_instr(x, bl->st, i);
    end_block(x, s);
    tr_scope_end(scope, NULL, 0);
    return status;
}

/* Read-ahead and drop-behind for a cut value over when it is a mapped
 * input (NULL when it is not, or is not compact). */
static struct tio_readahead *open_readahead(struct exec *x, uint32_t value,
                                            const struct tr_tensor *over)
{
    const struct value *ov = &x->prog->values[value];
    const struct plan_input *pi;

    if (ov->origin != ORIGIN_INPUT || !over)
        return NULL;
    pi = &x->plan->inputs[ov->input];
    return tio_readahead_open(over, pi->input->path, pi->data_offset, x->drop_behind);
}

/* The cuts, the joined wholes, then each stream's buffer (in the memory
 * pass's order), and the hints. */
static int begin_blocks(struct exec *x, size_t s, struct tr_tensor **wholes, struct blocks *bl)
{
    const struct program_stage *pst = &x->prog->stages[s];

    bl->ncut = pst->nover;
    for (size_t c = 0; c < bl->ncut; c++) {
        struct cut *cut = &bl->cut[c];
        const struct value *ov = &x->prog->values[pst->over[c]];
        /* over's own description, or, for a stream, its header's (a value
         * joined by an earlier stage is described as one of its blocks) */
        struct tr_value m = x->tensors[pst->over[c]] ? tr_value_of(x->tensors[pst->over[c]])
                                                     : ov->meta;
        cut->block = pst->block[c];
        cut->over = x->tensors[pst->over[c]];
        cut->row_bytes = tr_dtype_size(m.dtype);
        for (int d = 1; d < m.ndim; d++)
            cut->row_bytes *= (uint64_t)m.shape[d];
        bl->row_bytes += cut->row_bytes;
        bl->rows = m.shape[0]; /* lower.c: the same for every cut */
    }
    for (size_t v = 0; v < x->prog->nvalues; v++) {
        const struct value *pv = &x->prog->values[v];
        if (pv->stage != (int)s || (pv->join != JOIN_POOL && pv->join != JOIN_FILE))
            continue;
        wholes[v] = make_whole(x, pv);
        if (!wholes[v])
            goto failed;
    }
    for (size_t c = 0; c < bl->ncut; c++) {
        struct cut *cut = &bl->cut[c];
        const struct value *ov = &x->prog->values[pst->over[c]];
        struct tr_value m = ov->meta;
        if (!ov->streamed)
            continue;
        cut->stream = &x->plan->inputs[ov->input];
        if (bl->nblocks == 0)
            continue; /* no rows: none to read (end_blocks checks the stream ends) */
        m.shape[0] = bl->rows < bl->size ? bl->rows : bl->size;
        cut->buffer = tr_empty(m.dtype, m.ndim, m.shape, TR_CPU);
        if (!cut->buffer)
            goto failed;
    }
    for (size_t c = 0; c < bl->ncut; c++)
        bl->cut[c].ra = open_readahead(x, pst->over[c], bl->cut[c].over);
    return EXIT_OK;
failed:
    if (tr_last_status() == TR_ERR_OOM && exec_may_fall_back(x)) {
        x->failed_at = pst->first + (pst->nblock ? pst->nonce : 0); /* the blocks' first */
        return EXEC_FALL_BACK;
    }
    msg_error(NULL, "stage '%s': %s", bl->st->name, tr_last_error());
    return exit_for_status(tr_last_status());
}

/* Block b, rows [start, start + n) of each cut: read from its stream, or
 * the next block hinted. */
static int fetch_block(const struct blocks *bl, int64_t b, int64_t start, int64_t n)
{
    int64_t after = bl->rows - start - n;

    for (size_t c = 0; c < bl->ncut; c++) {
        const struct cut *cut = &bl->cut[c];
        if (cut->stream) {
            if (tio_file_read_next(cut->stream->file, cut->stream->index,
                                   tr_tensor_data_mut(cut->buffer),
                                   (uint64_t)n * cut->row_bytes) == TR_OK)
                continue;
            msg_error(cut->stream->input->path, "input '%s': %s", cut->stream->input->name,
                      tr_last_error());
            return exit_for_status(tr_last_status());
        }
        if (cut->ra && b + 1 < bl->end)
            tio_readahead_next(cut->ra,
                               (const char *)tr_tensor_data(cut->over) +
                                   (uint64_t)(start + n) * cut->row_bytes,
                               (uint64_t)(after < bl->size ? after : bl->size) * cut->row_bytes);
    }
    return EXIT_OK;
}

/* A shard's streams, moved on past the rows of the blocks before its own
 * (read into the block buffer and dropped: a stream cannot seek). */
static int skip_blocks(const struct blocks *bl)
{
    for (size_t c = 0; c < bl->ncut; c++) {
        const struct cut *cut = &bl->cut[c];
        int64_t left = bl->first * bl->size;
        while (cut->stream && left > 0) {
            int64_t n = left < bl->size ? left : bl->size;
            if (tio_file_read_next(cut->stream->file, cut->stream->index,
                                   tr_tensor_data_mut(cut->buffer),
                                   (uint64_t)n * cut->row_bytes) != TR_OK) {
                msg_error(cut->stream->input->path, "input '%s': %s", cut->stream->input->name,
                          tr_last_error());
                return exit_for_status(tr_last_status());
            }
            left -= n;
        }
    }
    return EXIT_OK;
}

/* Block rows [start, start + n) of each mapped cut are consumed. */
static void done_block(const struct blocks *bl, int64_t start, int64_t n)
{
    for (size_t c = 0; c < bl->ncut; c++)
        if (bl->cut[c].over)
            tio_readahead_done(bl->cut[c].ra,
                               (const char *)tr_tensor_data(bl->cut[c].over) +
                                   (uint64_t)start * bl->cut[c].row_bytes,
                               (uint64_t)n * bl->cut[c].row_bytes);
}

/* After the last block: each stream read to its end and checked. */
static int end_blocks(struct blocks *bl, int status)
{
    for (size_t c = 0; c < bl->ncut; c++) {
        struct cut *cut = &bl->cut[c];
        tio_readahead_close(cut->ra);
        tr_release(cut->buffer);
        if (status != EXIT_OK || !cut->stream || tio_file_finish(cut->stream->file) == TR_OK)
            continue;
        msg_error(cut->stream->input->path, "input '%s': %s", cut->stream->input->name,
                  tr_last_error());
        status = exit_for_status(tr_last_status());
    }
    return status;
}

int exec_foreach(struct exec *x, size_t s)
{
    const struct program_stage *pst = &x->prog->stages[s];
    const struct plan_stage *ps = &x->plan->stages[s];
    size_t once_end = pst->first + pst->nonce, blocks_end = once_end + pst->nblock;
    struct blocks bl = {.st = ps->stage, .size = pst->block_rows, .nblocks = pst->nblocks,
                        .first = pst->first_block, .end = pst->first_block + pst->nblocks};
    struct tr_tensor **wholes;
    int64_t to;
    int status = EXIT_OK;

    x->held = pst; /* the part before the blocks may read the cut values last */
    for (size_t i = pst->first; i < once_end && status == EXIT_OK; i++)
        status = exec_instr(x, bl.st, i);
    x->held = NULL;
    if (status != EXIT_OK)
        return status;
    wholes = calloc(x->prog->nvalues + 1, sizeof *wholes);
    x->join_rows = calloc(x->prog->nvalues + 1, sizeof *x->join_rows);
    if (!wholes || !x->join_rows) {
        free(wholes);
        free(x->join_rows);
        x->join_rows = NULL;
        msg_error(NULL, "stage '%s': out of memory", bl.st->name);
        return EXIT_OOM;
    }
    status = begin_blocks(x, s, wholes, &bl);
    if (status == EXIT_OK && bl.nblocks > 0)
        status = skip_blocks(&bl);
    /* the rows of the blocks run, a shard's or all (the last block's end
     * is the rows': end * size may pass INT64_MAX) */
    to = bl.end == pst->all_blocks ? bl.rows : bl.end * bl.size;
    progress_blocks(x->progress, bl.st->name, (size_t)bl.nblocks,
                    (uint64_t)(bl.nblocks ? to - bl.first * bl.size : 0) * bl.row_bytes);
    x->block_stage = (int)s;
    for (int64_t b = bl.first; b < bl.end && status == EXIT_OK; b++) {
        int64_t start = b * bl.size, n = bl.rows - start < bl.size ? bl.rows - start : bl.size;
        double t0 = exec_now_ms();
        x->last_block = b == pst->all_blocks - 1 && n < (bl.rows < bl.size ? bl.rows : bl.size);
        set_builtins(x, s, start, b, pst->all_blocks);
        status = fetch_block(&bl, b, start, n);
        if (status == EXIT_OK)
            status = run_block(x, s, &bl, wholes, b - bl.first, start, n);
        done_block(&bl, start, n);
        if (status == EXIT_OK && x->o->verbosity > 0) {
            char t[32];
            msg_note(NULL, "stage '%s', block %lld of %lld (rows %lld to %lld): %s", bl.st->name,
                     (long long)b + 1, (long long)pst->all_blocks, (long long)start,
                     (long long)(start + n), report_format_time(exec_now_ms() - t0, t, sizeof t));
        }
        progress_block(x->progress, (size_t)(b - bl.first) + 1,
                       (uint64_t)(start + n - bl.first * bl.size) * bl.row_bytes);
    }
    status = end_blocks(&bl, status);
    x->block_stage = -1;
    x->last_block = false;
    /* each joined value is its whole now; a block itself, all of its cut */
    for (size_t v = 0; v < x->prog->nvalues; v++) {
        const struct value *pv = &x->prog->values[v];
        int c = stage_block_index(pst, (uint32_t)v);
        if (wholes[v])
            x->tensors[v] = wholes[v];
        else if (pv->join == JOIN_OVER && c >= 0 && status == EXIT_OK && bl.cut[c].over)
            x->tensors[v] = tr_index_view(bl.cut[c].over, NULL, 0);
    }
    /* what the blocks read but did not make dies after the last one, and
     * a cut value too when the part before them read it last; when the
     * stage is to run again on the CPU (EXEC_FALL_BACK), what it read from
     * before it stays for that */
    for (size_t i = once_end; i < blocks_end; i++) {
        const struct instr *in = &x->prog->instrs[i];
        for (size_t k = 0; k < in->ndies; k++) {
            if (liveness_block_local(x->prog, s, in->dies[k]) ||
                (status == EXEC_FALL_BACK && x->prog->values[in->dies[k]].stage != (int)s))
                continue;
            tr_release(x->tensors[in->dies[k]]);
            x->tensors[in->dies[k]] = NULL;
        }
    }
    for (size_t c = 0; c < pst->nover && status != EXEC_FALL_BACK; c++) {
        if (x->prog->values[pst->over[c]].last_use < once_end) {
            tr_release(x->tensors[pst->over[c]]);
            x->tensors[pst->over[c]] = NULL;
        }
    }
    free(wholes);
    free(x->join_rows);
    x->join_rows = NULL;
    for (size_t i = blocks_end; i < pst->first + pst->count && status == EXIT_OK; i++)
        status = exec_instr(x, bl.st, i);
    return status;
}
