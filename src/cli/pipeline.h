/*
 * pipeline.h - a pipeline file checked against the schema of
 * tensorrun-pipeline(5): its params, inputs, stages (with their statements parsed) and
 * outputs, every item with its place in the file.
 */
#ifndef TR_CLI_PIPELINE_H
#define TR_CLI_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "expr.h"
#include "param.h"
#include "tensorrun.h"
#include "tensorrun_io.h"
#include "yaml_tree.h"

#define PIPELINE_FORMAT 1 /* the `tensorrun:` version this program reads */

struct input {
    char *name;
    int line, col;          /* of the name */
    char *path;             /* resolved: relative to the pipeline's directory, or as
                               given on the command line; "-" for standard input */
    int path_line, path_col;
    char *key;              /* safetensors tensor, or NULL */
    int key_line, key_col;
    enum tio_format format; /* UNKNOWN: by content, then by name */
    bool has_raw;           /* dtype and shape given */
    bool given;             /* by -i NAME=PATH[:KEY], which replaces the whole source */
    struct tio_raw_layout raw;
};

/* A name and where it is written. */
struct name_at {
    char *name;
    int line, col;
};

#define FOREACH_MAX_OVER 8 /* the values one foreach cuts into blocks together */

struct stage {
    char *name;
    int line, col;
    bool has_device;
    struct tr_device device;
    bool device_auto;       /* device: auto */
    struct statement **statements;
    size_t nstatements;
    struct name_at *keep;
    size_t nkeep;
    bool keep_cache;
    bool matmul_high;       /* matmul_precision: high (TF32 allowed on CUDA) */
    bool has_foreach;
    bool foreach_broken;    /* a foreach: key with errors (already reported) */
    struct name_at foreach_over[FOREACH_MAX_OVER]; /* row-aligned: the same dim 0 */
    size_t nover;
    int foreach_line, foreach_col; /* of over: */
    int64_t foreach_size;   /* rows a block, or 0 when given in bytes */
    uint64_t foreach_bytes; /* size: in bytes (64M), turned into rows of over */
};

struct output {
    char *name;             /* the value written */
    int line, col;
    char *path;             /* resolved as inputs are; "-" for standard output */
    enum tr_dtype dtype;    /* TR_DTYPE_COUNT: the value's own */
    int dtype_line, dtype_col;
    char *key;              /* name inside a safetensors file, or NULL */
    enum tio_format format; /* format:, else from the path's name (npy for "-");
                               UNKNOWN only after an error about it */
    enum tio_compression compression; /* .zst in format: or in the path */
    int format_line, format_col;
    bool text_if_scalar;    /* eval's standard output: a rank-0 value goes as text */
    bool as_text;           /* so it does (the planner decides): a number and a newline */
};

struct pipeline {
    char *path;             /* as named */
    char *dir;              /* its directory, for relative paths */
    char *text;             /* the file's text */
    size_t len;
    struct ynode *root;
    int version;
    char *name;             /* NULL when not given */
    bool has_device;
    struct tr_device device;
    bool device_auto;
    /* from the command line (run_loaded sets them before planning) */
    bool has_force_device;         /* --force-device: every stage on force_device */
    struct tr_device force_device;
    int threads;                   /* --threads; 0: every online core */
    int shard_k, shard_n;          /* --shard K/N: the K-th of N ranges of every
                                      foreach stage's blocks; 0/0 unsharded */
    const char *print_name;        /* eval's value printed at the end, or NULL */
    struct param *params;
    size_t nparams;
    struct input *inputs;
    size_t ninputs;
    struct stage *stages;
    size_t nstages;
    struct output *outputs;
    size_t noutputs;
};

/* Command-line overrides: -D NAME=VALUE, -i NAME=PATH, -o NAME=PATH. */
struct override {
    const char *name;
    const char *value;
    bool used;
};

struct overrides {
    struct override *sets, *inputs, *outputs;
    size_t nsets, ninputs, noutputs;
};

/*
 * Reads and checks the pipeline at path.  Every error found goes to diags
 * (initialised by the caller with path; this sets its text to the
 * pipeline's own, so print diags before pipeline_free).  The pipeline is
 * returned as far as it could be read (root NULL and nothing else filled
 * when the file is not YAML), or NULL when the file cannot be read at all
 * (path "-" included: exit code 2).  After errors, an item may lack what
 * was wrong in it: a NULL path, stage name or foreach; its statements are
 * the ones that parsed.  Overrides: -D sets a param, its value typed as
 * param.h says and of the param's kind (see set_param in pipeline.c; a
 * name that is no param, or a value of another kind, is an error with
 * exit code 2); -i replaces an input's path (an unknown input: exit code
 * 2); -o replaces an output's path, or adds an output for any other name
 * (whether a statement binds it is the planner's question).  Paths from
 * the command line are taken as they are, relative to the working
 * directory.
 */
/* -i's PATH[:KEY] into *path and *key (NULL when none), both allocated:
 * value is the path when it names an existing file or has no ':'; else
 * the text after the last ':' is the key.  false when out of memory. */
bool split_input_source(const char *value, char **path, char **key);

struct pipeline *pipeline_load(const char *path, const struct overrides *overrides,
                               struct diag_list *diags);
void pipeline_free(struct pipeline *p);

#endif /* TR_CLI_PIPELINE_H */
