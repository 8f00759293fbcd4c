/*
 * report.c - the statistics table and its JSON Lines form.  Every figure
 * comes from the pool's own accounting (tr_memory_stats); nothing here
 * measures or estimates.
 */
#include "config.h"

#include "report.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#define JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12))

void report_init(struct report *r, FILE *out, enum report_mode mode, int name_width)
{
    memset(r, 0, sizeof *r);
    r->out = out;
    r->mode = mode;
    r->name_width = name_width < 5 ? 5 : name_width;
}

char *report_format_time(double ms, char *buf, size_t size)
{
    if (ms < 1.0)
        snprintf(buf, size, "%.0f us", ms * 1000.0);
    else if (ms < 1000.0)
        snprintf(buf, size, "%.*f ms", ms < 10.0 ? 2 : 1, ms);
    else if (ms < 60000.0)
        snprintf(buf, size, "%.*f s", ms < 10000.0 ? 2 : 1, ms / 1000.0);
    else
        snprintf(buf, size, "%d min %d s", (int)(ms / 60000.0), (int)fmod(ms / 1000.0, 60.0));
    return buf;
}

static json_t *milliseconds(double ms)
{
    return json_real(round(ms * 1000.0) / 1000.0);
}

static void print_json(struct report *r, json_t *o)
{
    char *text = json_dumps(o, JSON_FLAGS);

    if (text)
        fprintf(r->out, "%s\n", text);
    free(text);
    json_decref(o);
    fflush(r->out);
}

static void header(struct report *r)
{
    fprintf(r->out, "%-*s  %-7s %-9s %-12s %-9s %-9s %-9s %-7s %s\n", r->name_width, "stage",
            "device", "time", "peak active", "active", "cached", "released", "allocs", "hits");
    r->header_done = true;
}

void report_stage(struct report *r, const struct stage_report *s)
{
    char dev[TR_DEVICE_NAME_MAX], t[32], peak[32], act[32], cac[32], rel[32];

    if (r->mode == REPORT_NONE)
        return;
    tr_device_format(s->device, dev, sizeof dev);
    if (r->mode == REPORT_JSON) {
        json_t *o = json_object(), *kept = json_array();
        json_object_set_new(o, "event", json_string("stage"));
        json_object_set_new(o, "stage", json_string(s->stage));
        json_object_set_new(o, "index", json_integer(s->index));
        json_object_set_new(o, "device", json_string(dev));
        json_object_set_new(o, "wall_ms", milliseconds(s->wall_ms));
        json_object_set_new(o, "peak_active_bytes", json_integer((json_int_t)s->peak_active_bytes));
        json_object_set_new(o, "active_bytes", json_integer((json_int_t)s->active_bytes));
        json_object_set_new(o, "cached_bytes", json_integer((json_int_t)s->cached_bytes));
        if (s->device.kind != TR_DEV_CPU)
            json_object_set_new(o, "pending_bytes", json_integer((json_int_t)s->pending_bytes));
        json_object_set_new(o, "released_bytes", json_integer((json_int_t)s->released_bytes));
        json_object_set_new(o, "alloc_count", json_integer((json_int_t)s->alloc_count));
        json_object_set_new(o, "cache_hit_count", json_integer((json_int_t)s->cache_hit_count));
        for (size_t i = 0; i < s->nkept; i++)
            json_array_append_new(kept, json_string(s->kept[i]));
        json_object_set_new(o, "kept", kept);
        if (s->blocks >= 0)
            json_object_set_new(o, "blocks", json_integer((json_int_t)s->blocks));
        if (s->shard_n > 0)
            json_object_set_new(o, "shard", json_pack("[ii]", s->shard_k, s->shard_n));
        print_json(r, o);
        return;
    }
    if (!r->header_done)
        header(r);
    fprintf(r->out, "%-*s  %-7s %-9s %-12s %-9s %-9s %-9s %-7llu %llu", r->name_width, s->stage,
            dev, report_format_time(s->wall_ms, t, sizeof t),
            tr_format_bytes(s->peak_active_bytes, peak, sizeof peak),
            tr_format_bytes(s->active_bytes, act, sizeof act),
            tr_format_bytes(s->cached_bytes, cac, sizeof cac),
            tr_format_bytes(s->released_bytes, rel, sizeof rel), (unsigned long long)s->alloc_count,
            (unsigned long long)s->cache_hit_count);
    if (s->blocks >= 0)
        fprintf(r->out, "%*s%lld block%s", s->cache_hit_count < 10 ? 5 : 3, "",
                (long long)s->blocks, s->blocks == 1 ? "" : "s");
    if (s->blocks >= 0 && s->shard_n > 0)
        fprintf(r->out, " (shard %d of %d)", s->shard_k, s->shard_n);
    fputc('\n', r->out);
    fflush(r->out);
}

void report_run(struct report *r, const struct run_report *run)
{
    char t[32], peak[32], rel[32], mapped[32], read[32], written[32];

    if (r->mode == REPORT_NONE)
        return;
    if (r->mode == REPORT_JSON) {
        json_t *o = json_object(), *peaks = json_object(), *outputs = json_object();
        json_object_set_new(o, "event", json_string("run"));
        json_object_set_new(o, "wall_ms", milliseconds(run->wall_ms));
        json_object_set_new(peaks, "cpu", json_integer((json_int_t)run->peak_active_bytes));
        for (size_t i = 0; i < run->ndevices; i++) {
            char dev[TR_DEVICE_NAME_MAX];
            if (run->devices[i].kind == TR_DEV_CPU)
                continue;
            json_object_set_new(peaks, tr_device_format(run->devices[i], dev, sizeof dev),
                                json_integer((json_int_t)run->device_peaks[i]));
        }
        json_object_set_new(o, "peak_active_bytes", peaks);
        json_object_set_new(o, "released_bytes", json_integer((json_int_t)run->released_bytes));
        json_object_set_new(o, "mapped_bytes", json_integer((json_int_t)run->mapped_bytes));
        json_object_set_new(o, "read_bytes", json_integer((json_int_t)run->read_bytes));
        json_object_set_new(o, "written_bytes", json_integer((json_int_t)run->written_bytes));
        for (size_t i = 0; i < run->noutputs; i++)
            json_object_set_new(outputs, run->output_names[i], json_string(run->output_paths[i]));
        json_object_set_new(o, "outputs", outputs);
        if (run->shard_n > 0)
            json_object_set_new(o, "shard", json_pack("[ii]", run->shard_k, run->shard_n));
        print_json(r, o);
        return;
    }
    if (!r->header_done)
        header(r);
    fprintf(r->out, "%-*s  %-7s %-9s %-12s %-9s %-9s %-9s %-7s mapped %s, read %s, written %s\n",
            r->name_width, "total", "", report_format_time(run->wall_ms, t, sizeof t),
            tr_format_bytes(run->peak_active_bytes, peak, sizeof peak), "", "",
            tr_format_bytes(run->released_bytes, rel, sizeof rel), "",
            tr_format_bytes(run->mapped_bytes, mapped, sizeof mapped),
            tr_format_bytes(run->read_bytes, read, sizeof read),
            tr_format_bytes(run->written_bytes, written, sizeof written));
    fflush(r->out);
}
