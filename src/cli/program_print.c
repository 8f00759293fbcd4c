/*
 * program_print.c - the program as `tensorrun validate` and `--dry-run`
 * print it (tensorrun(1), THE PROGRAM): for people, one line per
 * instruction with its values, their dtypes, shapes and pool bytes, and
 * where each value dies; for scripts, the same as one JSON object.
 */
#include "config.h"

#include "program_print.h"

#include <jansson.h>
#include <string.h>

#include "tensorrun_fused.h"

static bool is_view_result(const struct program *prog, const struct value *v)
{
    const struct instr *in;

    if (v->origin != ORIGIN_RESULT)
        return false;
    in = &prog->instrs[v->def];
    return in->kind == INSTR_INDEX || (in->kind == INSTR_OP && op_is_view(in->op));
}

/* ------------------------------------------------------------ text */

static void print_operand(const struct program *prog, const struct operand *o, FILE *out)
{
    char buf[200];

    switch (o->kind) {
    case OPERAND_VALUE:
        fprintf(out, "%%%u", o->value);
        break;
    case OPERAND_LIST:
        fputc('[', out);
        for (size_t i = 0; i < o->count; i++) {
            if (i)
                fputs(", ", out);
            print_operand(prog, &o->items[i], out);
        }
        fputc(']', out);
        break;
    default:
        fputs(plan_describe(&o->meta, buf, sizeof buf), out);
    }
}

/* op(%1, %2, dim=-1): tensors and lists by position, the rest by name. */
/* in's call, with its operands (args) or subscripts (subs). */
static void print_call(const struct program *prog, const struct instr *in,
                       const struct operand *args, const struct subscript *subs, FILE *out)
{
    static const char *const sub_words[] = {"", "", "None", "..."};

    if (in->kind == INSTR_INDEX) {
        fprintf(out, "%%%u[", in->args[0].value);
        for (size_t s = 0; s < in->nsubs; s++) {
            const struct subscript *sub = &subs[s];
            if (s)
                fputs(", ", out);
            if (sub->kind == SUB_INDEX)
                print_operand(prog, &sub->part[0], out);
            else if (sub->kind != SUB_SLICE)
                fputs(sub_words[sub->kind], out);
            for (int k = 0; sub->kind == SUB_SLICE && k < 3; k++) {
                bool given = sub->part[k].kind != OPERAND_CONST ||
                             sub->part[k].meta.kind != TR_VALUE_NONE;
                if (k == 1 || (k == 2 && given))
                    fputc(':', out);
                if (given)
                    print_operand(prog, &sub->part[k], out);
            }
        }
        fputc(']', out);
        return;
    }
    fprintf(out, "%s(", in->op->name);
    for (int i = 0; i < in->nargs; i++) {
        const struct operand *o = &args[i];
        if (i)
            fputs(", ", out);
        if (o->kind == OPERAND_CONST && in->op->params[i].kind != TR_PARAM_TENSOR &&
            in->op->params[i].kind != TR_PARAM_TENSORS)
            fprintf(out, "%s=", in->op->params[i].name);
        print_operand(prog, o, out);
    }
    fputc(')', out);
}

static void print_dies(const struct instr *in, FILE *out)
{
    if (!in->ndies)
        return;
    fputs(" frees", out);
    for (size_t i = 0; i < in->ndies; i++)
        fprintf(out, "%s %%%u", i ? "," : "", in->dies[i]);
}

/* What instruction in is in a shorter last block, when it differs: its
 * call (a constant made from the block's length) and its results' types. */
static void print_last_block(const struct plan *plan, const struct instr *in, const char *indent,
                             FILE *out)
{
    const struct program *prog = plan->program;
    char call[400] = "", types[400] = "";
    bool shapes = false;
    size_t used = 0;

    for (int r = 0; r < in->nresults; r++) {
        const struct value *v = &prog->values[in->results[r]];
        char a[200];
        if (!v->has_last || v->fused)
            continue;
        shapes = true;
        plan_describe(&v->last_meta, a, sizeof a);
        used += (size_t)snprintf(types + used, used < sizeof types ? sizeof types - used : 0,
                                 "%s%%%u %s", used ? ", " : "", in->results[r], a);
    }
    if (in->last_args || in->last_subs) {
        FILE *mem = fmemopen(call, sizeof call, "w");
        if (mem) {
            print_call(prog, in, in->last_args ? in->last_args : in->args,
                       in->last_subs ? in->last_subs : in->subs, mem);
            fclose(mem);
        }
    }
    if (!shapes && !call[0])
        return;
    fprintf(out, "%s  (the last block: %s%s%s)\n", indent, call, call[0] && shapes ? ", " : "",
            types);
}

/* One instruction's lines: one per result, with indent before each. */
static void print_op(const struct plan *plan, size_t at, const char *indent, FILE *out)
{
    const struct program *prog = plan->program;
    const struct instr *in = &prog->instrs[at];
    char call[400], id[64], type[200], bytes[32];
    FILE *mem = fmemopen(call, sizeof call, "w");

    if (mem) {
        print_call(prog, in, in->args, in->subs, mem);
        fclose(mem);
    } else {
        snprintf(call, sizeof call, "?");
    }
    for (int r = 0; r < in->nresults; r++) {
        const struct value *v = &prog->values[in->results[r]];
        snprintf(id, sizeof id, "%%%u%s%s", in->results[r], v->name ? " " : "",
                 v->name ? v->name : "");
        plan_describe(&v->meta, type, sizeof type);
        if (r == 0 && in->dest_group >= 0)
            snprintf(bytes, sizeof bytes, "into %s", prog->groups[in->dest_group].path);
        else if (r == 0 && in->into_join)
            snprintf(bytes, sizeof bytes, "into its join");
        else if (v->fused)
            snprintf(bytes, sizeof bytes, "not stored");
        else if (is_view_result(prog, v))
            snprintf(bytes, sizeof bytes, "view");
        else if (r == 0 && in->in_place >= 0)
            snprintf(bytes, sizeof bytes, "in place of %%%u", in->args[in->in_place].value);
        else
            tr_format_bytes(v->block_bytes, bytes, sizeof bytes);
        fprintf(out, "%s%-12s = %-48s %-18s %-*s", indent, id,
                r == 0 ? call : "  (its next result)", type,
                r == in->nresults - 1 && in->ndies ? 10 : 0, bytes);
        if (r == in->nresults - 1)
            print_dies(in, out);
        fputc('\n', out);
    }
    print_last_block(plan, in, indent, out);
}

static void print_instr(const struct plan *plan, size_t at, FILE *out)
{
    const struct program *prog = plan->program;
    const struct instr *in = &prog->instrs[at];

    if (in->fused_into >= 0)
        return; /* with its chain */
    if (in->kind == INSTR_WRITE) {
        const struct output_group *g = &prog->groups[in->group];
        fprintf(out, "    write %s:", g->path);
        for (size_t m = 0; m < g->nmembers; m++)
            fprintf(out, " %s (%%%u)", plan->pipeline->outputs[g->members[m]].name,
                    in->wargs[m]);
        print_dies(in, out);
        fputc('\n', out);
        return;
    }
    if (in->kind == INSTR_FUSED) {
        int n = in->chain->nsteps + in->chain->has_tail;
        fprintf(out, "    fused group %d, %d ops in one pass over memory:\n", in->fused_group, n);
        for (size_t i = 0; i < at; i++)
            if (prog->instrs[i].fused_into == (ptrdiff_t)at)
                print_op(plan, i, "    | ", out);
        print_op(plan, at, "    | ", out);
        return;
    }
    print_op(plan, at, "    ", out);
}

/* Whether output o's file holds the value its write writes (the output's
 * value, or its clone) as that value's own memory. */
static bool computed_into_file(const struct program *prog, size_t o)
{
    for (size_t g = 0; g < prog->ngroups; g++) {
        const struct instr *w = &prog->instrs[prog->groups[g].write];
        for (size_t m = 0; m < prog->groups[g].nmembers; m++) {
            const struct value *v = &prog->values[w->wargs[m]];
            if (prog->groups[g].members[m] == o)
                return v->origin == ORIGIN_RESULT && prog->instrs[v->def].dest_group == (ptrdiff_t)g;
        }
    }
    return false;
}

/* A foreach stage's parts (foreach.h): what runs once before the blocks,
 * the block and the builtins with what runs for each block, what runs
 * after them, and where each joined value goes. */
static void print_foreach(const struct plan *plan, size_t s, FILE *out)
{
    const struct program *prog = plan->program;
    const struct program_stage *pst = &prog->stages[s];
    size_t once_end = pst->first + pst->nonce, block_end = once_end + pst->nblock;
    char a[200];

    if (pst->nonce)
        fprintf(out, "  once, before the blocks:\n");
    for (size_t i = pst->first; i < once_end; i++)
        print_instr(plan, i, out);
    fprintf(out, "  each block:\n");
    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        char id[64];
        if (pv->origin != ORIGIN_BUILTIN || pv->stage != (int)s)
            continue;
        snprintf(id, sizeof id, "%%%zu %s", v, pv->name);
        if (stage_block_index(pst, (uint32_t)v) >= 0) {
            fprintf(out, "    %-12s = %-48s %-18s view\n", id, "(each block of the foreach)",
                    plan_describe(&pv->meta, a, sizeof a));
            if (pv->has_last)
                fprintf(out, "      (the last block: %%%zu %s)\n", v,
                        plan_describe(&pv->last_meta, a, sizeof a));
        } else
            fprintf(out, "    %-12s = %-48s int\n", id, "(set as each block runs)");
    }
    for (size_t i = once_end; i < block_end; i++)
        print_instr(plan, i, out);
    if (block_end < pst->first + pst->count)
        fprintf(out, "  after the blocks:\n");
    for (size_t i = block_end; i < pst->first + pst->count; i++)
        print_instr(plan, i, out);
    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        if (pv->join == JOIN_NONE || pv->stage != (int)s)
            continue;
        fprintf(out, "  joins %%%zu%s%s %s ", v, pv->name ? " " : "", pv->name ? pv->name : "",
                plan_describe(&pv->joined_meta, a, sizeof a));
        if (pv->join == JOIN_FILE)
            fprintf(out, "into %s, each block at its rows\n", prog->groups[pv->join_group].path);
        else if (pv->join == JOIN_OVER)
            fprintf(out, "as the value the blocks are cut from, nothing made\n");
        else
            fprintf(out, "in the pool, made before the first block\n");
    }
}

/* A stage's pool on one device: its peak (what the run reports as
 * peak_active_bytes), where it is reached, and what the stage starts
 * with and hands on. */
static void print_stage_memory(const struct plan *plan, const struct stage_memory *m, FILE *out)
{
    const struct program *prog = plan->program;
    char peak[32], start[32], end[32], dev[TR_DEVICE_NAME_MAX], at[96] = "at the start";

    if (m->peak_at != SIZE_MAX) {
        const struct instr *in = &prog->instrs[m->peak_at];
        if (in->kind == INSTR_WRITE && in->stage < 0)
            snprintf(at, sizeof at, "writing %s", prog->groups[in->group].path);
        else if (in->kind == INSTR_WRITE)
            snprintf(at, sizeof at, "writing %s, line %d", prog->groups[in->group].path, in->line);
        else
            snprintf(at, sizeof at, "at %%%u, line %d", in->results[0], in->line);
    }
    fprintf(out, "  pool on %s: peak %s (%llu bytes) %s; %s at the start, %s after\n",
            tr_device_format(m->device, dev, sizeof dev),
            tr_format_bytes(m->peak_bytes, peak, sizeof peak),
            (unsigned long long)m->peak_bytes, at,
            tr_format_bytes(m->start_bytes, start, sizeof start),
            tr_format_bytes(m->end_bytes, end, sizeof end));
}

void program_print(const struct plan *plan, FILE *out)
{
    const struct pipeline *p = plan->pipeline;
    const struct program *prog = plan->program;
    char a[200], b[32], dev[TR_DEVICE_NAME_MAX];
    size_t peak_stage = 0;
    uint64_t peak = 0;

    fprintf(out, "pipeline %s%s%s%s (format %d)\n", p->path, p->name ? " \"" : "",
            p->name ? p->name : "", p->name ? "\"" : "", p->version);
    for (size_t v = 0, n = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        if (pv->origin != ORIGIN_CONSTANT || pv->stage >= 0)
            continue;
        if (n++ == 0)
            fprintf(out, "params:\n");
        fprintf(out, "    %%%-3zu %-14s %s\n", v, pv->name, plan_describe(&pv->meta, a, sizeof a));
    }
    for (size_t v = 0, n = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        const struct plan_input *in;
        if (pv->origin != ORIGIN_INPUT)
            continue;
        in = &plan->inputs[pv->input];
        if (n++ == 0)
            fprintf(out, "inputs (mapped inputs are read in place, not pool memory):\n");
        fprintf(out, "    %%%-3zu %-14s %-24s %s%s%s", v, pv->name,
                plan_describe(&pv->meta, a, sizeof a), in->input->path,
                in->mapped_bytes ? ", mapped " : "",
                in->mapped_bytes ? tr_format_bytes(in->mapped_bytes, b, sizeof b) : "");
        if (pv->stream_bytes)
            fprintf(out, ", read into the pool %s", tr_format_bytes(pv->stream_bytes, b, sizeof b));
        if (pv->streamed)
            fprintf(out, ", read a block at a time by its foreach stage");
        if (pv->copy_bytes)
            fprintf(out, ", copied into the pool %s", tr_format_bytes(pv->copy_bytes, b, sizeof b));
        if (pv->last_use == LIVE_UNUSED)
            fprintf(out, "   (unused)");
        fputc('\n', out);
    }
    if (prog->nprologue || prog->before.peak_bytes)
        fprintf(out, "before the stages:\n");
    for (size_t i = 0; i < prog->nprologue; i++)
        print_instr(plan, i, out);
    if (prog->nprologue || prog->before.peak_bytes)
        print_stage_memory(plan, &prog->before, out);
    for (size_t s = 0; s < plan->nstages; s++) {
        const struct plan_stage *ps = &plan->stages[s];
        const struct program_stage *pst = &prog->stages[s];
        fprintf(out, "stage %zu \"%s\" on %s%s", s + 1, ps->stage->name ? ps->stage->name : "?",
                tr_device_format(ps->device, dev, sizeof dev), pst->has_fallback ? " (auto)" : "");
        if (ps->stage->has_foreach) {
            fprintf(out, ", foreach ");
            for (size_t c = 0; c < ps->stage->nover; c++)
                fprintf(out, "%s%s", c ? ", " : "", ps->stage->foreach_over[c].name);
            if (plan->pipeline->shard_n)
                fprintf(out, " by %lld rows (blocks %lld to %lld of %lld: shard %d of %d)",
                        (long long)pst->block_rows, (long long)pst->first_block + 1,
                        (long long)(pst->first_block + pst->nblocks), (long long)pst->all_blocks,
                        plan->pipeline->shard_k, plan->pipeline->shard_n);
            else
                fprintf(out, " by %lld rows (%lld block%s)", (long long)pst->block_rows,
                        (long long)pst->nblocks, pst->nblocks == 1 ? "" : "s");
        }
        fprintf(out, ":\n");
        if (pst->nover > 0)
            print_foreach(plan, s, out);
        else
            for (size_t i = pst->first; i < pst->first + pst->count; i++)
                print_instr(plan, i, out);
        for (size_t v = 0; v < prog->nvalues; v++) {
            const struct value *pv = &prog->values[v];
            if (pv->origin == ORIGIN_CONSTANT && pv->stage == (int)s)
                fprintf(out, "    %%%-3zu %-7s = %s\n", v, pv->name,
                        plan_describe(&pv->meta, a, sizeof a));
        }
        fprintf(out, "  keeps:");
        for (size_t k = 0, n = 0; k < pst->nkeeps; k++) {
            const struct value *pv = &prog->values[pst->keeps[k]];
            if (pv->origin == ORIGIN_INPUT)
                continue;
            fprintf(out, "%s %%%u%s%s %s", n++ ? "," : "", pst->keeps[k], pv->name ? " " : "",
                    pv->name ? pv->name : "",
                    plan_describe(pv->joined ? &pv->joined_meta : &pv->meta, a, sizeof a));
            if (pv->joined)
                fprintf(out, " (the blocks' joined)");
        }
        fprintf(out, "%s\n", ps->nlive ? "" : " nothing");
        for (size_t k = 0; k < pst->nmemory; k++) {
            const struct stage_memory *m = &pst->memory[k];
            print_stage_memory(plan, m, out);
            if (m->peak_bytes > peak) {
                peak = m->peak_bytes;
                peak_stage = s;
            }
        }
        if (pst->has_fallback)
            fprintf(out, "  pool on cpu, should it fall back: peak %s (%llu bytes)\n",
                    tr_format_bytes(pst->fallback_peak_bytes, b, sizeof b),
                    (unsigned long long)pst->fallback_peak_bytes);
    }
    if (p->noutputs)
        fprintf(out, "outputs:\n");
    for (size_t o = 0; o < p->noutputs; o++) {
        const struct output *out_ = &p->outputs[o];
        uint32_t id = prog->outputs[o];
        struct tr_value meta = id == VALUE_NONE        ? (struct tr_value){0}
                               : prog->values[id].joined ? prog->values[id].joined_meta
                                                         : prog->values[id].meta;
        char ref[16] = "";
        if (out_->dtype != TR_DTYPE_COUNT)
            meta.dtype = out_->dtype;
        if (id != VALUE_NONE)
            snprintf(ref, sizeof ref, "%%%u", id);
        fprintf(out, "    %-6s %-14s %-24s -> %s%s%s%s\n", ref, out_->name,
                id != VALUE_NONE ? plan_describe(&meta, a, sizeof a) : "?",
                out_->as_text ? "standard output, as text" : out_->path,
                out_->key ? " key " : "", out_->key ? out_->key : "",
                id != VALUE_NONE && computed_into_file(prog, o) ? " (computed into the file)"
                    : "");
    }
    fprintf(out, "total: pool peak %s", tr_format_bytes(peak, b, sizeof b));
    if (plan->nstages)
        fprintf(out, " (stage \"%s\")", plan->stages[peak_stage].stage->name);
    fprintf(out, ", mapped %s\n", tr_format_bytes(plan->mapped_bytes, b, sizeof b));
}

/* ------------------------------------------------------------ JSON */

static json_t *json_meta(const struct tr_value *v)
{
    json_t *o = json_object();
    char buf[400];

    if (v->kind == TR_VALUE_TENSOR) {
        json_t *shape = json_array();
        char dev[TR_DEVICE_NAME_MAX];
        for (int d = 0; d < v->ndim; d++)
            json_array_append_new(shape, json_integer(v->shape[d]));
        json_object_set_new(o, "dtype", json_string(tr_dtype_name(v->dtype)));
        json_object_set_new(o, "shape", shape);
        json_object_set_new(o, "device", json_string(tr_device_format(v->device, dev, sizeof dev)));
        if (v->weak)
            json_object_set_new(o, "weak", json_true());
    } else if (v->kind == TR_VALUE_INT && !v->known) {
        json_object_set_new(o, "constant", json_null());
    } else {
        json_object_set_new(o, "constant", json_string(plan_describe(v, buf, sizeof buf)));
    }
    return o;
}

static json_t *json_operand(const struct operand *o)
{
    char buf[400];

    if (o->kind == OPERAND_VALUE)
        return json_pack("{s:I}", "value", (json_int_t)o->value);
    if (o->kind == OPERAND_LIST) {
        json_t *items = json_array();
        for (size_t i = 0; i < o->count; i++)
            json_array_append_new(items, json_operand(&o->items[i]));
        return json_pack("{s:o}", "list", items);
    }
    return json_pack("{s:s}", "constant", plan_describe(&o->meta, buf, sizeof buf));
}

static const char *const origin_words[] = {"input", "constant", "result", "builtin"};
static const char *const kind_words[] = {"op", "index", "write", "fused"};

static json_t *json_ids(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static json_t *json_instr(const struct plan *plan, size_t at)
{
    const struct program *prog = plan->program;
    const struct instr *in = &prog->instrs[at];
    json_t *o = json_object(), *args = json_array();

    json_object_set_new(o, "index", json_integer((json_int_t)at));
    json_object_set_new(o, "kind", json_string(kind_words[in->kind]));
    if (in->kind == INSTR_OP || in->kind == INSTR_FUSED)
        json_object_set_new(o, "op", json_string(in->op->name));
    json_object_set_new(o, "fused_into", in->fused_into >= 0 ? json_integer(in->fused_into)
                                                              : json_null());
    if (in->kind == INSTR_FUSED) {
        json_object_set_new(o, "fused_group", json_integer(in->fused_group));
        json_object_set_new(o, "chain_inputs", json_ids(in->finputs, (size_t)in->nfinputs));
    }
    if (in->kind == INSTR_WRITE) {
        json_object_set_new(o, "path", json_string(prog->groups[in->group].path));
        json_object_set_new(o, "values", json_ids(in->wargs, in->nwargs));
    } else {
        for (int i = 0; i < in->nargs; i++) {
            json_t *arg = json_operand(&in->args[i]);
            if (in->kind == INSTR_OP || in->kind == INSTR_FUSED)
                json_object_set_new(arg, "param", json_string(in->op->params[i].name));
            json_array_append_new(args, arg);
        }
        for (size_t s = 0; s < in->nsubs; s++) {
            static const char *const sub_words[] = {"index", "slice", "newaxis", "ellipsis"};
            json_t *sub = json_pack("{s:s}", "subscript", sub_words[in->subs[s].kind]);
            json_t *parts = json_array();
            for (int k = 0; k < (in->subs[s].kind == SUB_SLICE ? 3 : in->subs[s].kind == SUB_INDEX);
                 k++)
                json_array_append_new(parts, json_operand(&in->subs[s].part[k]));
            json_object_set_new(sub, "parts", parts);
            json_array_append_new(args, sub);
        }
        json_object_set_new(o, "results", json_ids(in->results, (size_t)in->nresults));
    }
    json_object_set_new(o, "args", args);
    json_object_set_new(o, "frees", json_ids(in->dies, in->ndies));
    json_object_set_new(o, "destination",
                        in->dest_group >= 0 ? json_string(prog->groups[in->dest_group].path)
                                            : json_null());
    json_object_set_new(o, "part", in->part == PART_STAGE ? json_null()
                                   : json_string(in->part == PART_ONCE    ? "once"
                                                 : in->part == PART_BLOCK ? "block"
                                                                          : "after"));
    json_object_set_new(o, "in_place_of", in->in_place >= 0
                                              ? json_integer(in->args[in->in_place].value)
                                              : json_null());
    json_object_set_new(o, "into_join", json_boolean(in->into_join));
    if (in->last_args) {
        json_t *last = json_array();
        for (int i = 0; i < in->nargs; i++)
            json_array_append_new(last, json_operand(&in->last_args[i]));
        json_object_set_new(o, "last_block_args", last);
    }
    json_object_set_new(o, "line", json_integer(in->line));
    json_object_set_new(o, "col", json_integer(in->col));
    return o;
}

static json_t *json_joins(const struct program *prog, size_t s)
{
    json_t *a = json_array();

    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        json_t *o;
        if (pv->join == JOIN_NONE || pv->stage != (int)s)
            continue;
        o = json_meta(&pv->joined_meta);
        json_object_set_new(o, "value", json_integer((json_int_t)v));
        json_object_set_new(o, "into", json_string(pv->join == JOIN_FILE   ? "file"
                                                   : pv->join == JOIN_OVER ? "over"
                                                                           : "pool"));
        json_object_set_new(o, "path", pv->join == JOIN_FILE
                                           ? json_string(prog->groups[pv->join_group].path)
                                           : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *json_memory(const struct program *prog, const struct stage_memory *m)
{
    json_t *o = json_object();
    char dev[TR_DEVICE_NAME_MAX];

    json_object_set_new(o, "device", json_string(tr_device_format(m->device, dev, sizeof dev)));
    json_object_set_new(o, "start_bytes", json_integer((json_int_t)m->start_bytes));
    json_object_set_new(o, "peak_bytes", json_integer((json_int_t)m->peak_bytes));
    json_object_set_new(o, "peak_at", m->peak_at != SIZE_MAX ? json_integer((json_int_t)m->peak_at)
                                                            : json_null());
    json_object_set_new(o, "peak_line", m->peak_at != SIZE_MAX
                                            ? json_integer(prog->instrs[m->peak_at].line)
                                            : json_null());
    json_object_set_new(o, "end_bytes", json_integer((json_int_t)m->end_bytes));
    return o;
}

static json_t *json_stage_memory(const struct program *prog, const struct program_stage *st)
{
    json_t *a = json_array();

    for (size_t k = 0; k < st->nmemory; k++)
        json_array_append_new(a, json_memory(prog, &st->memory[k]));
    return a;
}

/* Each fused chain of a stage: its group number, its instructions (the
 * steps, then the chain's own), the values it reads and its result. */
static json_t *json_fused_groups(const struct program *prog, const struct program_stage *st)
{
    json_t *groups = json_array();

    for (size_t at = st->first; at < st->first + st->count; at++) {
        const struct instr *in = &prog->instrs[at];
        json_t *members;
        if (in->kind != INSTR_FUSED)
            continue;
        members = json_array();
        for (size_t i = st->first; i <= at; i++)
            if (i == at || prog->instrs[i].fused_into == (ptrdiff_t)at)
                json_array_append_new(members, json_integer((json_int_t)i));
        json_array_append_new(groups, json_pack("{s:i, s:o, s:o, s:I, s:b}", "group",
                                                in->fused_group, "instructions", members,
                                                "inputs", json_ids(in->finputs,
                                                                   (size_t)in->nfinputs),
                                                "result", (json_int_t)in->results[0], "tail",
                                                in->chain->has_tail));
    }
    return groups;
}

void program_print_json(const struct plan *plan, FILE *out)
{
    const struct pipeline *p = plan->pipeline;
    const struct program *prog = plan->program;
    json_t *root = json_object(), *values = json_array(), *stages = json_array();
    json_t *outputs = json_array(), *prologue = json_array(), *peaks = json_object();
    char dev[TR_DEVICE_NAME_MAX];

    json_object_set_new(root, "pipeline", json_string(p->path));
    json_object_set_new(root, "shard", p->shard_n ? json_pack("[ii]", p->shard_k, p->shard_n)
                                                  : json_null());
    for (size_t v = 0; v < prog->nvalues; v++) {
        const struct value *pv = &prog->values[v];
        json_t *o = json_meta(&pv->meta);
        json_object_set_new(o, "id", json_integer((json_int_t)v));
        json_object_set_new(o, "name", pv->name ? json_string(pv->name) : json_null());
        json_object_set_new(o, "origin", json_string(origin_words[pv->origin]));
        json_object_set_new(o, "stage", pv->stage >= 0 ? json_integer(pv->stage) : json_null());
        json_object_set_new(o, "line", json_integer(pv->line));
        json_object_set_new(o, "col", json_integer(pv->col));
        json_object_set_new(o, "pool_bytes", json_integer((json_int_t)pv->block_bytes));
        json_object_set_new(o, "view", json_boolean(is_view_result(prog, pv)));
        json_object_set_new(o, "freed_after",
                            pv->last_use < prog->ninstrs ? json_integer((json_int_t)pv->last_use)
                                                         : json_null());
        json_object_set_new(o, "lives_to_end", json_boolean(pv->last_use == LIVE_FOREVER));
        if (pv->origin == ORIGIN_INPUT)
            json_object_set_new(o, "read_by_blocks", json_boolean(pv->streamed));
        if (pv->has_last)
            json_object_set_new(o, "last_block", json_meta(&pv->last_meta));
        json_array_append_new(values, o);
    }
    for (size_t i = 0; i < prog->nprologue; i++)
        json_array_append_new(prologue, json_instr(plan, i));
    for (size_t s = 0; s < plan->nstages; s++) {
        const struct plan_stage *ps = &plan->stages[s];
        const struct program_stage *pst = &prog->stages[s];
        json_t *o = json_object(), *instrs = json_array();
        for (size_t i = pst->first; i < pst->first + pst->count; i++)
            json_array_append_new(instrs, json_instr(plan, i));
        json_object_set_new(o, "name", json_string(ps->stage->name ? ps->stage->name : "?"));
        json_object_set_new(o, "device", json_string(tr_device_format(ps->device, dev, sizeof dev)));
        json_object_set_new(o, "auto", json_boolean(pst->automatic));
        if (pst->has_fallback)
            json_object_set_new(o, "fallback_peak_bytes",
                                json_integer((json_int_t)pst->fallback_peak_bytes));
        json_object_set_new(o, "instructions", instrs);
        json_object_set_new(o, "keeps", json_ids(pst->keeps, pst->nkeeps));
        json_object_set_new(o, "fused_groups", json_fused_groups(prog, pst));
        json_object_set_new(o, "peak_bytes", json_integer((json_int_t)pst->memory[0].peak_bytes));
        json_object_set_new(o, "memory", json_stage_memory(prog, pst));
        for (size_t k = 0; k < pst->nmemory; k++) {
            const char *name = tr_device_format(pst->memory[k].device, dev, sizeof dev);
            json_t *had = json_object_get(peaks, name);
            if (!had || json_integer_value(had) < (json_int_t)pst->memory[k].peak_bytes)
                json_object_set_new(peaks, name, json_integer((json_int_t)pst->memory[k].peak_bytes));
        }
        if (ps->stage->has_foreach) {
            json_t *over = json_array();
            for (size_t c = 0; c < ps->stage->nover; c++)
                json_array_append_new(over, json_string(ps->stage->foreach_over[c].name));
            json_object_set_new(o, "foreach_over", over);
            json_object_set_new(o, "foreach_size", json_integer(pst->block_rows));
            json_object_set_new(o, "foreach_blocks", json_integer(pst->nblocks));
            json_object_set_new(o, "foreach_first_block", json_integer(pst->first_block));
            json_object_set_new(o, "foreach_all_blocks", json_integer(pst->all_blocks));
            json_object_set_new(o, "joins", json_joins(prog, s));
        }
        json_array_append_new(stages, o);
    }
    for (size_t o = 0; o < p->noutputs; o++) {
        const struct output *po = &p->outputs[o];
        uint32_t id = prog->outputs[o];
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(po->name));
        json_object_set_new(j, "path", po->as_text ? json_null() : json_string(po->path));
        json_object_set_new(j, "value", id != VALUE_NONE ? json_integer(id) : json_null());
        json_object_set_new(j, "as_text", json_boolean(po->as_text));
        json_array_append_new(outputs, j);
    }
    json_object_set_new(root, "values", values);
    json_object_set_new(root, "before_stages", prologue);
    json_object_set_new(root, "stages", stages);
    json_object_set_new(root, "outputs", outputs);
    json_object_set_new(root, "peak_bytes", peaks);
    json_object_set_new(root, "before_stages_memory", json_memory(prog, &prog->before));
    json_object_set_new(root, "mapped_bytes", json_integer((json_int_t)plan->mapped_bytes));
    json_dumpf(root, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
    json_decref(root);
}
