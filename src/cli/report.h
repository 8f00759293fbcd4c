/*
 * report.h - the statistics of tensorrun(1), STATISTICS: one line per stage and a
 * total, as a text table or as JSON Lines.
 */
#ifndef TR_CLI_REPORT_H
#define TR_CLI_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensorrun.h"

enum report_mode { REPORT_TEXT, REPORT_JSON, REPORT_NONE };

struct stage_report {
    const char *stage;
    int index;
    struct tr_device device;
    double wall_ms;
    uint64_t peak_active_bytes;  /* this stage alone */
    uint64_t active_bytes;       /* after its scope closed */
    uint64_t cached_bytes;       /* idle in the pool, before the release */
    uint64_t pending_bytes;      /* of those, freed before the device's work was done */
    uint64_t released_bytes;     /* what the release gave back */
    uint64_t alloc_count;        /* this stage alone */
    uint64_t cache_hit_count;
    const char *const *kept;     /* the values that outlive it */
    size_t nkept;
    int64_t blocks;              /* a foreach stage's blocks (0 for no rows); -1 for
                                    another stage */
    int shard_k, shard_n;        /* --shard K/N; 0/0 unsharded */
};

#define REPORT_MAX_DEVICES 8

struct run_report {
    double wall_ms;
    uint64_t peak_active_bytes;  /* CPU pool, over the run */
    /* every device's pool the run used (the CPU's first), and its peak */
    struct tr_device devices[REPORT_MAX_DEVICES];
    uint64_t device_peaks[REPORT_MAX_DEVICES];
    size_t ndevices;
    uint64_t released_bytes;     /* every release of the run */
    uint64_t mapped_bytes, read_bytes, written_bytes;
    const char *const *output_names;
    const char *const *output_paths;
    size_t noutputs;
    int shard_k, shard_n;        /* --shard K/N; 0/0 unsharded */
};

struct report {
    FILE *out;
    enum report_mode mode;
    int name_width;              /* the text table's first column */
    bool header_done;
};

/* A report to out; name_width fits the longest stage name. */
void report_init(struct report *r, FILE *out, enum report_mode mode, int name_width);
void report_stage(struct report *r, const struct stage_report *s);
void report_run(struct report *r, const struct run_report *run);

/* "12.4 ms", "1.84 s", "2 min 3 s". */
char *report_format_time(double ms, char *buf, size_t size);

#endif /* TR_CLI_REPORT_H */
