/*
 * test_pipeline.c - the pipeline schema: a full valid pipeline read into
 * the struct, every class of error with its place and message, command
 * line overrides (-D, -i, -o) and their exit codes, path resolution.
 */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline.h"
#include "tap.h"

static char tmpdir[] = "/tmp/test_pipeline.XXXXXX";
static char file[256];
static struct diag_list diags;

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", path);
        exit(1);
    }
}

static struct pipeline *load_at(const char *path, const char *text, const struct overrides *ov)
{
    if (text)
        write_text(path, text);
    diag_free(&diags);
    diag_init(&diags, path, NULL, 0);
    return pipeline_load(path, ov, &diags);
}

static struct pipeline *load_ov(const char *text, const struct overrides *ov)
{
    return load_at(file, text, ov);
}

static struct pipeline *load(const char *text)
{
    return load_ov(text, NULL);
}

/* The index of the first diagnostic whose message holds part, or -1. */
static int find(const char *part)
{
    for (size_t i = 0; i < diags.count; i++)
        if (diags.items[i].message && strstr(diags.items[i].message, part))
            return (int)i;
    return -1;
}

static void show_diags(void)
{
    for (size_t i = 0; i < diags.count; i++) {
        const struct diag *d = &diags.items[i];
        diag("  %d:%d %s%s%s", d->line, d->col, d->message, d->hint ? " | hint: " : "",
             d->hint ? d->hint : "");
    }
}

/* An error holding part at line:col (col 0: any column). */
static void has_error(int line, int col, const char *part, const char *what)
{
    bool found = false;

    for (size_t i = 0; i < diags.count && !found; i++) {
        const struct diag *d = &diags.items[i];
        found = d->kind == DIAG_ERROR && d->message && strstr(d->message, part) &&
                d->line == line && (col == 0 || d->col == col);
    }
    if (!ok(found, "%s", what))
        show_diags();
}

static void hint_has(const char *message_part, const char *hint_part, const char *what)
{
    int i = find(message_part);

    if (!ok(i >= 0 && diags.items[i].hint && strstr(diags.items[i].hint, hint_part), "%s", what))
        show_diags();
}

static void error_count(size_t n, const char *what)
{
    if (!ok(diags.errors == n, "%s: %zu error%s", what, n, n == 1 ? "" : "s")) {
        diag("got %zu", diags.errors);
        show_diags();
    }
}

static char *in_dir(const char *name)
{
    static char buf[512];

    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static const char full[] =
    "tensorrun: 1                   # the format version\n"          /* 1 */
    "name: embedding-search\n"                                          /* 2 */
    "device: auto\n"                                                    /* 3 */
    "params:\n"                                                         /* 4 */
    "  k: 10\n"                                                         /* 5 */
    "  eps: 1.0e-6\n"                                                   /* 6 */
    "  flag: true\n"                                                    /* 7 */
    "  label: \"10\"\n"                                                 /* 8 */
    "  word: no\n"                                                      /* 9 */
    "  big: -.inf\n"                                                    /* 10 */
    "inputs:\n"                                                         /* 11 */
    "  emb: data/emb.npy\n"                                             /* 12 */
    "  w:   {path: model.safetensors, key: \"layers.0.weight\"}\n"     /* 13 */
    "  raw: {path: blob.bin, dtype: f32, shape: [1024, 768], offset: 4096, strides: [800, 1]}\n"
    "  q:   {path: \"-\", format: npy}\n"                              /* 15 */
    "  abs: /srv/data/a.npy\n"                                          /* 16 */
    "stages:\n"                                                         /* 17 */
    "  - name: normalise\n"                                             /* 18 */
    "    do:\n"                                                         /* 19 */
    "      - qn = q / norm(q, dim=-1, keepdim=true)\n"                  /* 20 */
    "  - name: search\n"                                                /* 21 */
    "    device: cpu\n"                                                 /* 22 */
    "    foreach: {over: emb, size: 65536}\n"                           /* 23 */
    "    do:\n"                                                         /* 24 */
    "      - en = emb / norm(emb, dim=-1, keepdim=true)\n"              /* 25 */
    "      - v, i = topk(en @ qn.T, k, dim=0)\n"                        /* 26 */
    "      - i = i + chunk_start\n"                                     /* 27 */
    "    keep: [v, i]\n"                                                /* 28 */
    "    keep_cache: false\n"                                           /* 29 */
    "    matmul_precision: highest\n"                                   /* 30 */
    "  - name: merge\n"                                                 /* 31 */
    "    device: cuda:1\n"                                              /* 32 */
    "    keep_cache: true\n"                                            /* 33 */
    "    matmul_precision: high\n"                                      /* 34 */
    "    do:\n"                                                         /* 35 */
    "      - best, j = topk(v, k, dim=0)\n"                             /* 36 */
    "      - \"ids = gather(i, 0, j)\"\n"                               /* 37 */
    "outputs:\n"                                                        /* 38 */
    "  best: out/scores.npy\n"                                          /* 39 */
    "  ids: {path: out/ids.npy, dtype: i32}\n"                          /* 40 */
    "  qn: {path: out/q.safetensors, key: queries}\n"                   /* 41 */
    "  v: {path: out/q.safetensors}\n"                                  /* 42 */
    "  en: out/en.bin.zst\n"                                            /* 43 */
    "  i: {path: out/i.dat, format: raw}\n"                             /* 44 */
    "  j: {path: \"-\", format: safetensors.zst, dtype: bf16}\n"        /* 45 */
    "  k2: out/k2.npy\n";                                               /* 46 */

static void test_full(void)
{
    struct pipeline *p;
    char want[512];
    const struct stage *st;

    mkdir(in_dir("sub"), 0755);
    p = load_at(in_dir("sub/full.yaml"), full, NULL);
    ok(p != NULL, "the full pipeline loads");
    error_count(0, "the full pipeline");
    if (!p)
        return;
    ok(diags.text == p->text && diags.len == strlen(full), "diags hold the file's text");
    is_int(p->version, 1, "version 1");
    ok(p->name && strcmp(p->name, "embedding-search") == 0, "name");
    ok(p->has_device && p->device_auto, "device: auto");
    ok(strcmp(p->dir, in_dir("sub")) == 0, "dir is the file's directory");

    is_int(p->nparams, 6, "six params");
    if (p->nparams == 6) {
        ok(strcmp(p->params[0].name, "k") == 0 && p->params[0].kind == PARAM_INT &&
               p->params[0].integer == 10 && p->params[0].line == 5 && p->params[0].col == 3,
           "k: 10 is an integer, at its name");
        ok(p->params[1].kind == PARAM_FLOAT && p->params[1].number == 1.0e-6,
           "eps: 1.0e-6 is a float");
        ok(p->params[2].kind == PARAM_BOOL && p->params[2].boolean, "flag: true is a bool");
        ok(p->params[3].kind == PARAM_STRING && strcmp(p->params[3].string, "10") == 0,
           "label: \"10\" (quoted) is a string");
        ok(p->params[4].kind == PARAM_STRING && strcmp(p->params[4].string, "no") == 0,
           "word: no is a string (YAML 1.2), not a bool");
        ok(p->params[5].kind == PARAM_FLOAT && p->params[5].number < -1e308,
           "big: -.inf is a float");
    }

    is_int(p->ninputs, 5, "five inputs");
    if (p->ninputs == 5) {
        const struct input *in = p->inputs;
        snprintf(want, sizeof want, "%s/data/emb.npy", in_dir("sub"));
        ok(strcmp(in[0].name, "emb") == 0 && strcmp(in[0].path, want) == 0,
           "a relative path resolves from the file's directory");
        ok(in[0].line == 12 && in[0].col == 3 && in[0].path_line == 12 && in[0].path_col == 8,
           "the input's name and path keep their places");
        ok(in[0].format == TIO_FORMAT_UNKNOWN && !in[0].has_raw && !in[0].key,
           "short form: format by content");
        ok(in[1].key && strcmp(in[1].key, "layers.0.weight") == 0 && in[1].key_line == 13 &&
               in[1].key_col == 40,
           "long form: key, at its text");
        ok(in[2].has_raw && in[2].format == TIO_FORMAT_RAW && in[2].raw.dtype == TR_DTYPE_F32 &&
               in[2].raw.ndim == 2 && in[2].raw.shape[0] == 1024 && in[2].raw.shape[1] == 768 &&
               in[2].raw.offset == 4096 && in[2].raw.has_strides &&
               in[2].raw.strides[0] == 800 && in[2].raw.strides[1] == 1,
           "raw: dtype, shape, offset, strides");
        ok(strcmp(in[3].path, "-") == 0 && in[3].format == TIO_FORMAT_NPY,
           "'-' stays standard input, format npy");
        ok(strcmp(in[4].path, "/srv/data/a.npy") == 0, "an absolute path stays");
    }

    is_int(p->nstages, 3, "three stages");
    if (p->nstages == 3) {
        st = &p->stages[0];
        ok(strcmp(st->name, "normalise") == 0 && st->line == 18 && st->col == 11,
           "stage name and its place");
        ok(!st->has_device && !st->has_foreach && st->nkeep == 0 && !st->keep_cache,
           "defaults");
        is_int(st->nstatements, 1, "one statement");
        if (st->nstatements == 1)
            ok(st->statements[0]->line == 20 && st->statements[0]->col == 9 &&
                   st->statements[0]->ntargets == 1 &&
                   strcmp(st->statements[0]->targets[0], "qn") == 0,
               "the statement starts where its text does");
        st = &p->stages[1];
        ok(st->has_device && !st->device_auto && st->device.kind == TR_DEV_CPU, "device: cpu");
        ok(st->has_foreach && st->nover == 1 && strcmp(st->foreach_over[0].name, "emb") == 0 &&
               st->foreach_size == 65536 && st->foreach_line == 23 && st->foreach_col == 21,
           "foreach over emb, size 65536, at the name");
        is_int(st->nstatements, 3, "three statements");
        if (st->nstatements == 3)
            ok(st->statements[1]->ntargets == 2 &&
                   strcmp(st->statements[1]->targets[1], "i") == 0 &&
                   st->statements[1]->target_cols[1] == 12,
               "two targets, the second at its column");
        ok(st->nkeep == 2 && strcmp(st->keep[0].name, "v") == 0 &&
               strcmp(st->keep[1].name, "i") == 0 && st->keep[1].line == 28 &&
               st->keep[1].col == 15,
           "keep: [v, i]");
        ok(!st->keep_cache && !st->matmul_high, "keep_cache false, precision highest");
        st = &p->stages[2];
        ok(st->has_device && st->device.kind == TR_DEV_CUDA && st->device.index == 1,
           "device: cuda:1");
        ok(st->keep_cache && st->matmul_high, "keep_cache true, precision high");
        is_int(st->nstatements, 2, "two statements");
        if (st->nstatements == 2)
            ok(st->statements[1]->line == 37 && st->statements[1]->col == 10,
               "a quoted statement starts after its quote");
    }

    is_int(p->noutputs, 8, "eight outputs");
    if (p->noutputs == 8) {
        const struct output *o = p->outputs;
        snprintf(want, sizeof want, "%s/out/scores.npy", in_dir("sub"));
        ok(strcmp(o[0].name, "best") == 0 && strcmp(o[0].path, want) == 0 &&
               o[0].format == TIO_FORMAT_NPY && o[0].compression == TIO_COMPRESSION_NONE &&
               o[0].dtype == TR_DTYPE_COUNT && o[0].line == 39 && o[0].col == 3,
           "short form output: resolved path, npy from the name, the value's dtype");
        ok(o[1].dtype == TR_DTYPE_I32 && o[1].dtype_line == 40 && o[1].dtype_col == 35,
           "dtype: i32 at its place");
        ok(o[2].format == TIO_FORMAT_SAFETENSORS && o[2].key &&
               strcmp(o[2].key, "queries") == 0,
           "safetensors with a key");
        ok(o[3].format == TIO_FORMAT_SAFETENSORS && !o[3].key,
           "a second tensor of the same safetensors file");
        ok(o[4].format == TIO_FORMAT_RAW && o[4].compression == TIO_COMPRESSION_ZSTD,
           ".bin.zst: raw, zstd");
        ok(o[5].format == TIO_FORMAT_RAW && o[5].compression == TIO_COMPRESSION_NONE &&
               o[5].format_line == 44,
           "format: raw for a name that says nothing");
        ok(strcmp(o[6].path, "-") == 0 && o[6].format == TIO_FORMAT_SAFETENSORS &&
               o[6].compression == TIO_COMPRESSION_ZSTD && o[6].dtype == TR_DTYPE_BF16,
           "'-' with format: safetensors.zst, bf16 allowed there");
        ok(strstr(o[7].path, "/out/k2.npy") && o[7].format == TIO_FORMAT_NPY,
           "a plain .npy beside '-' (two outputs to '-' need safetensors)");
    }
    pipeline_free(p);
}

static void test_cwd_paths(void)
{
    char old[1024];
    struct pipeline *p;

    if (!getcwd(old, sizeof old) || chdir(tmpdir) != 0) {
        skip("cannot change directory");
        return;
    }
    write_text("here.yaml", "tensorrun: 1\ninputs: {x: data/x.npy}\n"
                            "stages: [{name: s, do: [y = x]}]\noutputs: {y: y.npy}\n");
    p = load_at("here.yaml", NULL, NULL);
    ok(p && strcmp(p->dir, ".") == 0 && p->ninputs == 1 &&
           strcmp(p->inputs[0].path, "data/x.npy") == 0 &&
           strcmp(p->outputs[0].path, "y.npy") == 0,
       "a file in the working directory: paths stay as written");
    error_count(0, "flow style pipeline");
    pipeline_free(p);
    mkdir("d2", 0755);
    write_text("d2/there.yaml", "tensorrun: 1\ninputs: {x: ../x.npy}\n"
                                "stages: [{name: s, do: [y = x]}]\n");
    p = load_at("d2/there.yaml", NULL, NULL);
    ok(p && p->ninputs == 1 && strcmp(p->inputs[0].path, "d2/../x.npy") == 0,
       "a relative file: paths relative to its directory");
    pipeline_free(p);
    if (chdir(old) != 0)
        diag("cannot go back to %s", old);
}

static void test_files(void)
{
    struct pipeline *p;

    diag_free(&diags);
    diag_init(&diags, "-", NULL, 0);
    p = pipeline_load("-", NULL, &diags);
    ok(p == NULL && diags.errors == 1 && diag_exit_code(&diags) == 2,
       "a pipeline from standard input is a usage error");

    diag_free(&diags);
    diag_init(&diags, in_dir("missing.yaml"), NULL, 0);
    p = pipeline_load(in_dir("missing.yaml"), NULL, &diags);
    ok(p == NULL && diags.errors == 1 && diag_exit_code(&diags) == 4 &&
           diags.items[0].line == 0 && strstr(diags.items[0].message, "No such file"),
       "a missing file: exit code 4, with the reason");

    diag_free(&diags);
    diag_init(&diags, tmpdir, NULL, 0);
    p = pipeline_load(tmpdir, NULL, &diags);
    ok(p == NULL && diag_exit_code(&diags) == 4 && strstr(diags.items[0].message, "directory"),
       "a directory: exit code 4");

    p = load("tensorrun: 1\nstages:\n  - name: a\n    do: [x = 1\n");
    ok(p && !p->root, "a YAML syntax error: the pipeline comes back without a tree");
    error_count(1, "a syntax error");
    has_error(5, 1, "YAML syntax error: did not find expected ',' or ']'", "at its place");
    ok(diags.text && p && diags.text == p->text, "the text stays for the source line");
    is_int(diag_exit_code(&diags), 3, "exit code 3");
    pipeline_free(p);

    p = load("tensorrun: 1\nstages:\n  - name: a\n  b: 2\n");
    has_error(4, 3, "YAML syntax error: did not find expected '-' indicator (while parsing a block "
                    "collection at line 3)",
              "a bad indent, at its line");
    pipeline_free(p);

    p = load("");
    ok(p && !p->root, "an empty file");
    has_error(1, 1, "no YAML document", "an empty file is an error");
    pipeline_free(p);

    p = load("- a\n- b\n");
    has_error(1, 1, "expected a mapping (tensorrun:, stages:, ...) at the top of the file",
              "a sequence at the top");
    error_count(1, "nothing else is said about a sequence");
    pipeline_free(p);
}

static void test_version(void)
{
    struct pipeline *p;

    p = load("name: x\nstages:\n  - name: a\n    do: [y = 1]\n");
    error_count(1, "no version");
    has_error(1, 1, "missing 'tensorrun: 1' (the format version)", "missing version at 1:1");
    pipeline_free(p);

    p = load("tensorrun: 2\nstages:\n  - name: a\n    do: [y = 1]\n    newkey: 3\nwhatever: 1\n");
    error_count(1, "a future version is the only error reported");
    has_error(1, 12, "this file needs tensorrun format 2; this program reads format 1",
              "future version at its value");
    is_int(diag_exit_code(&diags), 3, "exit code 3");
    pipeline_free(p);

    p = load("tensorrun: one\nstages: [{name: a, do: [y = 1]}]\n");
    has_error(1, 12, "expected the integer 1 for 'tensorrun', found 'one'", "a word as version");
    pipeline_free(p);

    p = load("tensorrun: 1\n");
    error_count(1, "no stages");
    has_error(1, 1, "missing 'stages'", "missing stages");
    pipeline_free(p);

    p = load("tensorrun: 1\nstages: []\n");
    error_count(1, "empty stages");
    has_error(2, 9, "'stages' is empty", "empty stages at the node");
    pipeline_free(p);

    p = load("tensorrun: 1\nstages:\n");
    has_error(2, 8, "expected a sequence for 'stages', found nothing", "stages: with nothing");
    pipeline_free(p);
}

static void test_unknown_keys(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"                                           /* 1 */
             "stages:\n"                                                /* 2 */
             "  - name: a\n"                                            /* 3 */
             "    kepp: [y]\n"                                          /* 4 */
             "    foreach: {over: x, size: 4, sizes: 5}\n"              /* 5 */
             "    do: [y = x]\n"                                        /* 6 */
             "inputs:\n"                                                /* 7 */
             "  x: {path: x.npy, kye: t}\n"                             /* 8 */
             "outputs:\n"                                               /* 9 */
             "  y: {path: y.npy, dtyp: f32}\n"                          /* 10 */
             "outptus: {}\n"                                            /* 11 */
             "zzzz: 1\n");                                              /* 12 */
    error_count(6, "six unknown keys");
    has_error(4, 5, "unknown key 'kepp' (did you mean 'keep'?)", "in a stage");
    hint_has("'kepp'", "the keys of a stage are name, do, device, keep, keep_cache, "
                       "matmul_precision, foreach",
             "the hint lists a stage's keys");
    has_error(5, 33, "unknown key 'sizes' (did you mean 'size'?)", "in foreach");
    hint_has("'sizes'", "the keys of foreach are over, size", "foreach's keys");
    has_error(8, 20, "unknown key 'kye' (did you mean 'key'?)", "in an input");
    hint_has("'kye'", "the keys of an input are path, key, format, dtype, shape, offset, strides",
             "an input's keys");
    has_error(10, 20, "unknown key 'dtyp' (did you mean 'dtype'?)", "in an output");
    hint_has("'dtyp'", "path, dtype, key, format", "an output's keys");
    has_error(11, 1, "unknown key 'outptus' (did you mean 'outputs'?)", "at the top level");
    hint_has("'outptus'", "tensorrun, name, device, params, inputs, stages, outputs",
             "the top level's keys");
    has_error(12, 1, "unknown key 'zzzz'", "no suggestion when nothing is close");
    ok(find("'zzzz' (did you mean") < 0, "no 'did you mean' for zzzz");
    ok(diags.count == 6 && diags.items[0].line == 4 && diags.items[5].line == 12,
       "reported in file order");
    pipeline_free(p);
}

static void test_stages(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"
             "stages:\n"
             "  - name: a\n"            /* 3 */
             "    do: [y = 1]\n"
             "  - name: b\n"            /* 5 */
             "    do: [z = 1]\n"
             "  - name: a\n"            /* 7 */
             "    do: [w = 1]\n");
    error_count(1, "a duplicate stage name");
    has_error(7, 11, "duplicate stage name 'a' (first at line 3)", "at the second name");
    ok(p && p->nstages == 3 && p->stages[2].nstatements == 1,
       "the stage is kept with its statements");
    pipeline_free(p);

    p = load("tensorrun: 1\n"
             "stages:\n"
             "  - do: [y = 1]\n"                          /* 3 */
             "  - name: b\n"                              /* 4 */
             "  - name: 'c d'\n"                          /* 5 */
             "    do: []\n"                               /* 6 */
             "  - name: e\n"                              /* 7 */
             "    do: y = 1\n"                            /* 8 */
             "  - just a string\n"                        /* 9 */
             "  - name: f\n"                              /* 10 */
             "    device: gpu\n"                          /* 11 */
             "    keep_cache: yes\n"                      /* 12 */
             "    matmul_precision: hihg\n"               /* 13 */
             "    keep: v\n"                              /* 14 */
             "    foreach: {over: 3x, size: 0}\n"         /* 15 */
             "    do:\n"                                  /* 16 */
             "      - [y, 1]\n"                           /* 17 */
             "      -\n"                                  /* 18 */
             "      - y = 1\n"                            /* 19 */
             "  - name: g\n"                              /* 20 */
             "    device: cuda:99\n"                      /* 21 */
             "    foreach: {size: 2}\n"                   /* 22 */
             "    keep: [ok, 'not ok', f32]\n"            /* 23 */
             "    do: [y = 2]\n");                        /* 24 */
    has_error(3, 5, "this stage has no 'name'", "a stage without a name");
    has_error(4, 5, "this stage has no 'do'", "a stage without statements");
    has_error(5, 12, "stage name 'c d' is not valid", "a bad stage name");
    has_error(6, 9, "'do' is empty", "an empty do");
    has_error(8, 9, "expected a sequence for 'do', found 'y = 1'", "do as a string");
    hint_has("found 'y = 1'", "- NAME = EXPR", "the hint shows a statement list");
    has_error(9, 5, "expected a mapping for 'a stage', found 'just a string'",
              "a stage that is a string");
    has_error(11, 13, "unknown device 'gpu'", "a bad device");
    has_error(12, 17, "expected true or false for 'keep_cache', found 'yes'", "a bad bool");
    has_error(13, 23, "unknown matmul_precision 'hihg' (did you mean 'high'?)",
              "a bad precision");
    has_error(14, 11, "expected a sequence for 'keep', found 'v'", "keep as a string");
    has_error(15, 21, "value name '3x' is not a valid name", "a bad foreach name");
    has_error(15, 31, "'size' must be at least 1, not 0", "a zero foreach size");
    has_error(17, 9, "expected a statement (NAME = EXPR), found a sequence",
              "a statement that is a sequence");
    has_error(18, 8, "expected a statement (NAME = EXPR), found nothing", "an empty statement");
    has_error(21, 13, "cuda:99", "a CUDA device out of range");
    has_error(22, 14, "'foreach' has no 'over'", "foreach without over");
    has_error(23, 17, "value name 'not ok' is not a valid name", "a bad keep name");
    has_error(23, 26, "value name 'f32' is not a valid name", "a reserved word in keep");
    error_count(18, "every stage error in one pass");
    ok(p && p->nstages == 7, "every stage is kept");
    if (p && p->nstages == 7) {
        ok(p->stages[0].name == NULL && p->stages[0].nstatements == 1,
           "a nameless stage keeps its statements");
        ok(p->stages[5].nstatements == 1 && !p->stages[5].has_foreach,
           "a stage's good statements are kept; a bad foreach is not");
        ok(p->stages[6].nkeep == 1 && strcmp(p->stages[6].keep[0].name, "ok") == 0,
           "good keep names are kept");
    }
    pipeline_free(p);

    p = load("tensorrun: 1\nstages:\n"
             "  - name: a\n"                                  /* 3 */
             "    foreach: {over: [f, labels], size: 8}\n"    /* 4 */
             "    do: [y = f]\n"                              /* 5 */
             "  - name: b\n"                                  /* 6 */
             "    foreach: {over: [f, g, f], size: 8}\n"      /* 7 */
             "    do: [y = f]\n"                              /* 8 */
             "  - name: c\n"                                  /* 9 */
             "    foreach: {over: [], size: 8}\n"             /* 10 */
             "    do: [y = f]\n"                              /* 11 */
             "  - name: d\n"                                  /* 12 */
             "    foreach: {over: [f, [g]], size: 8}\n"       /* 13 */
             "    do: [y = f]\n");                            /* 14 */
    ok(p && p->nstages == 4 && p->stages[0].has_foreach && p->stages[0].nover == 2 &&
           strcmp(p->stages[0].foreach_over[1].name, "labels") == 0 &&
           p->stages[0].foreach_over[1].line == 4 && p->stages[0].foreach_over[1].col == 25,
       "over: [f, labels], each name at its place");
    has_error(7, 28, "over names 'f' twice", "a name cut twice");
    has_error(10, 21, "over lists 0 values; it takes 1 to 8", "an empty over");
    has_error(13, 25, "expected a value name for 'over', found a sequence", "a list in over");
    error_count(3, "each bad over");
    ok(p && !p->stages[1].has_foreach && !p->stages[2].has_foreach &&
           !p->stages[3].has_foreach,
       "a bad over is no foreach");
    pipeline_free(p);

    p = load("tensorrun: 1\nstages:\n  - name: a\n    do:\n      - no equals here\n"
             "      - y = 1\n");
    ok(diags.errors >= 1 && diags.items[0].line == 5, "a statement's syntax error, on its line");
    ok(p && p->nstages == 1 && p->stages[0].nstatements == 1, "the other statement is kept");
    pipeline_free(p);
}

/* One typing rule, YAML 1.2's core schema, for the file and for -D. */
static void test_core_schema(void)
{
    static const struct {
        const char *text;
        enum param_kind kind;
        int64_t integer;
        double number;
    } cases[] = {
        {"0x10", PARAM_INT, 16, 0},       {"0o17", PARAM_INT, 15, 0},
        {"017", PARAM_INT, 17, 0},        {"-12", PARAM_INT, -12, 0},
        {"+3", PARAM_INT, 3, 0},          {"0xFF", PARAM_INT, 255, 0},
        {"0x7fffffffffffffff", PARAM_INT, INT64_MAX, 0},
        {"-9223372036854775808", PARAM_INT, INT64_MIN, 0},
        {"true", PARAM_BOOL, 1, 0},       {"True", PARAM_BOOL, 1, 0},
        {"TRUE", PARAM_BOOL, 1, 0},       {"false", PARAM_BOOL, 0, 0},
        {"False", PARAM_BOOL, 0, 0},      {"FALSE", PARAM_BOOL, 0, 0},
        {"yes", PARAM_STRING, 0, 0},      {"no", PARAM_STRING, 0, 0},
        {"on", PARAM_STRING, 0, 0},       {"off", PARAM_STRING, 0, 0},
        {"tRUE", PARAM_STRING, 0, 0},     {"inf", PARAM_STRING, 0, 0},
        {"nan", PARAM_STRING, 0, 0},      {"-0x10", PARAM_STRING, 0, 0},
        {"0x", PARAM_STRING, 0, 0},       {"0o8", PARAM_STRING, 0, 0},
        {"1_000", PARAM_STRING, 0, 0},    {"None", PARAM_STRING, 0, 0},
        {"1.5", PARAM_FLOAT, 0, 1.5},     {"1.", PARAM_FLOAT, 0, 1.0},
        {".5", PARAM_FLOAT, 0, 0.5},      {"-2e3", PARAM_FLOAT, 0, -2000.0},
        {"1E-2", PARAM_FLOAT, 0, 0.01},   {".inf", PARAM_FLOAT, 0, INFINITY},
        {"-.inf", PARAM_FLOAT, 0, -INFINITY}, {"+.Inf", PARAM_FLOAT, 0, INFINITY},
        {".INF", PARAM_FLOAT, 0, INFINITY},
        {"~", PARAM_NONE, 0, 0},          {"null", PARAM_NONE, 0, 0},
        {"Null", PARAM_NONE, 0, 0},       {"NULL", PARAM_NONE, 0, 0},
        {"", PARAM_NONE, 0, 0},           {"\"0x10\"", PARAM_STRING, 0, 0},
        {"'true'", PARAM_STRING, 0, 0},
    };
    static const char *const nans[] = {".nan", ".NaN", ".NAN"};
    char yaml[256];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct param d;
        struct pipeline *p;
        bool same;

        memset(&d, 0, sizeof d);
        diag_free(&diags);
        diag_init(&diags, "-D", NULL, 0);
        same = param_from_text(&d, cases[i].text, "k", &diags) && d.kind == cases[i].kind &&
               (d.kind != PARAM_INT || d.integer == cases[i].integer) &&
               (d.kind != PARAM_BOOL || d.boolean == (cases[i].integer != 0)) &&
               (d.kind != PARAM_FLOAT || d.number == cases[i].number);
        ok(same, "-D k=%s is %s", cases[i].text, param_kind_name(cases[i].kind));
        /* the same text in a file: the same value */
        snprintf(yaml, sizeof yaml, "tensorrun: 1\nparams:\n  k: %s\nstages: [{name: s, do: [y = k]}]\n",
                 cases[i].text);
        p = load(yaml);
        ok(p && p->nparams == 1 && p->params[0].kind == d.kind &&
               p->params[0].integer == d.integer && p->params[0].boolean == d.boolean &&
               (d.kind != PARAM_FLOAT || p->params[0].number == d.number),
           "k: %s in a file is the same", cases[i].text);
        pipeline_free(p);
        param_clear(&d);
    }
    for (size_t i = 0; i < 3; i++) {
        struct param d;
        memset(&d, 0, sizeof d);
        ok(param_from_text(&d, nans[i], "k", &diags) && d.kind == PARAM_FLOAT &&
               d.number != d.number,
           "%s is NaN", nans[i]);
        param_clear(&d);
    }
    {
        struct param d;
        memset(&d, 0, sizeof d);
        diag_free(&diags);
        diag_init(&diags, "-D", NULL, 0);
        ok(param_from_text(&d, "[2, 0x8, [true, x], \"y\"]", "shape", &diags) &&
               d.kind == PARAM_LIST && d.nitems == 4 && d.items[1].integer == 8 &&
               d.items[2].kind == PARAM_LIST && d.items[2].items[0].kind == PARAM_BOOL &&
               d.items[2].items[1].kind == PARAM_STRING && d.items[3].kind == PARAM_STRING &&
               strcmp(d.string, "[2, 0x8, [true, x], \"y\"]") == 0,
           "-D shape=[...]: a flow sequence, its items typed by the same rule");
        param_clear(&d);
        ok(!param_from_text(&d, "[1, 2", "shape", &diags) && diag_exit_code(&diags) == 2,
           "-D shape=[1, 2: exit 2");
        has_error(0, 0, "-D shape=[1, 2: YAML syntax error", "it says why");
        ok(!param_from_text(&d, "[{a: 1}]", "m", &diags), "-D m=[{a: 1}]: no mappings");
        has_error(0, 0, "-D m=[{a: 1}]: expected a number", "it says what it found");
        ok(!param_from_text(&d, "0x10000000000000000", "h", &diags), "a hex integer too large");
        has_error(0, 0, "-D h=0x10000000000000000: integer 0x10000000000000000 is out of range",
                  "is an error");
        ok(param_from_text(&d, "[[[[[[[[1]]]]]]]]", "deep", &diags) && d.kind == PARAM_LIST,
           "lists nested 8 deep");
        param_clear(&d);
        ok(!param_from_text(&d, "[[[[[[[[[1]]]]]]]]]", "deep", &diags), "not 9");
        has_error(0, 0, "lists nest at most 8 deep", "and it says so");
    }
}

static void test_params(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"
             "params:\n"
             "  a: 1\n"
             "  b-c: 2\n"                 /* 4 */
             "  true: 3\n"                /* 5 */
             "  d: [1, 2]\n"              /* 6 */
             "  e:\n"                     /* 7 */
             "  f: 99999999999999999999\n"  /* 8 */
             "  g: 1e3\n"
             "  h: .5\n"
             "  i: +7\n"
             "  j: 0x10\n"
             "  k: FALSE\n"
             "  l: .NaN\n"
             "  m: {x: 1}\n"              /* 15 */
             "  n: [1, {x: 1}]\n"         /* 16 */
             "  o: [[1, 2], [3, \"s\"], []]\n"
             "  q: 0x8000000000000000\n"  /* 18 */
             "stages: [{name: s, do: [y = a]}]\n");
    has_error(4, 3, "param name 'b-c' is not a valid name", "a name with a dash");
    hint_has("'b-c'", "letters, digits and '_'", "the hint says what names are");
    has_error(5, 3, "param name 'true' is not a valid name", "a reserved word");
    has_error(8, 6, "param 'f': integer 99999999999999999999 is out of range",
              "an integer too large");
    has_error(15, 6, "param 'm': expected a number, true or false, a string or a list, found a "
                     "mapping",
              "a mapping as a param");
    has_error(16, 10, "param 'n': expected a number", "a mapping inside a list");
    has_error(18, 6, "param 'q': integer 0x8000000000000000 is out of range",
              "a hexadecimal integer too large");
    error_count(6, "param errors");
    ok(p && p->nparams == 10, "the good params are kept");
    if (p && p->nparams == 10) {
        const struct param *d = &p->params[1], *o = &p->params[9];
        ok(d->kind == PARAM_LIST && d->nitems == 2 && d->items[0].kind == PARAM_INT &&
               d->items[1].integer == 2 && strcmp(d->string, "[1, 2]") == 0,
           "[1, 2] is a list of integers");
        ok(p->params[2].kind == PARAM_NONE, "an empty value is None");
        ok(p->params[3].kind == PARAM_FLOAT && p->params[3].number == 1000.0,
           "1e3 is a float");
        ok(p->params[4].kind == PARAM_FLOAT && p->params[4].number == 0.5, ".5 is a float");
        ok(p->params[5].kind == PARAM_INT && p->params[5].integer == 7, "+7 is an integer");
        ok(p->params[6].kind == PARAM_INT && p->params[6].integer == 16,
           "0x10 is the integer 16 (YAML 1.2 core schema)");
        ok(p->params[7].kind == PARAM_BOOL && !p->params[7].boolean, "FALSE is a bool");
        ok(p->params[8].kind == PARAM_FLOAT && p->params[8].number != p->params[8].number,
           ".NaN is a float");
        ok(o->kind == PARAM_LIST && o->nitems == 3 && o->items[0].kind == PARAM_LIST &&
               o->items[1].items[1].kind == PARAM_STRING &&
               strcmp(o->items[1].items[1].string, "s") == 0 && o->items[2].nitems == 0 &&
               strcmp(o->string, "[[1, 2], [3, \"s\"], []]") == 0,
           "nested lists, a quoted string in one, an empty one");
    }
    pipeline_free(p);

    p = load("tensorrun: 1\n"
             "inputs:\n"
             "  x: x.npy\n"
             "params:\n"
             "  x: 1\n"
             "stages: [{name: s, do: [y = x]}]\n");
    has_error(5, 3, "'x' is already an input (line 3)", "a param named like an input");
    error_count(1, "one namespace");
    pipeline_free(p);
}

static const char small[] = "tensorrun: 1\n"
                            "params: {k: 10, eps: 0.5, flag: true, label: hi}\n"
                            "inputs: {x: x.npy, z: z.npy}\n"
                            "stages: [{name: s, do: [y = x]}]\n"
                            "outputs: {y: y.npy}\n";

static void test_overrides(void)
{
    struct override sets[] = {{"k", "12", false},      {"eps", "3", false},
                              {"flag", "false", false}, {"label", "x=y", false},
                              {"kk", "1", false},      {"k", "2.5", false},
                              {"flag", "yes", false},   {"eps", "abc", false}};
    struct override inputs[] = {{"x", "other/x2.npy", false}, {"q", "q.npy", false},
                                {"z", "", false}};
    struct override outputs[] = {{"y", "-", false}, {"w", "w.safetensors", false},
                                 {"bad-name", "b.npy", false}, {"u", "u.weird", false}};
    struct overrides ov = {sets, inputs, outputs, 8, 3, 4};
    struct pipeline *p = load_ov(small, &ov);

    ok(p != NULL, "a pipeline with overrides loads");
    if (!p)
        return;
    ok(p->params[0].integer == 12 && strcmp(p->params[0].string, "12") == 0 && sets[0].used,
       "-D k=12 sets an int param");
    ok(p->params[1].kind == PARAM_FLOAT && p->params[1].number == 3.0,
       "-D eps=3: an integer is a number for a float param");
    ok(p->params[2].kind == PARAM_BOOL && !p->params[2].boolean, "-D flag=false");
    ok(p->params[3].kind == PARAM_STRING && strcmp(p->params[3].string, "x=y") == 0,
       "-D label=x=y: a string takes anything");
    has_error(0, 0, "-D: no param 'kk' (params: k, eps, flag, label)", "-D for an unknown param");
    hint_has("'kk'", "did you mean 'k'?", "with a suggestion");
    ok(!sets[4].used, "the unknown -D is not used");
    has_error(0, 0, "-D k=2.5: param 'k' takes an integer", "-D: a float for an int param");
    has_error(0, 0, "-D flag=yes: param 'flag' takes true or false", "-D: a word for a bool");
    has_error(0, 0, "-D eps=abc: param 'eps' takes a number", "-D: a word for a float");
    ok(p->params[0].integer == 12, "a refused -D leaves the value alone");
    ok(find("-D k=2.5") >= 0 && strstr(diags.items[find("-D k=2.5")].message, "not a number"),
       "the mismatch says what the -D value was read as");

    ok(strcmp(p->inputs[0].path, "other/x2.npy") == 0 && p->inputs[0].path_line == 0,
       "-i x=PATH: the path as given, no place in the file");
    has_error(0, 0, "-i: no input 'q' (inputs: x, z)", "-i for an unknown input");
    has_error(0, 0, "-i z=: the path is empty", "-i with an empty path");

    ok(p->noutputs == 3, "-o adds an output");
    if (p->noutputs == 3) {
        ok(strcmp(p->outputs[0].path, "-") == 0 && p->outputs[0].format == TIO_FORMAT_NPY,
           "-o y=-: standard output, npy");
        ok(strcmp(p->outputs[1].name, "w") == 0 &&
               strcmp(p->outputs[1].path, "w.safetensors") == 0 &&
               p->outputs[1].format == TIO_FORMAT_SAFETENSORS && p->outputs[1].line == 0,
           "-o w=w.safetensors: a new output");
        ok(strcmp(p->outputs[2].name, "u") == 0, "-o u=u.weird is added...");
    }
    has_error(0, 0, "-o bad-name=...: 'bad-name' is not a value name", "-o with a bad name");
    has_error(0, 0, "-o u=u.weird: cannot tell the format from the name",
              "... and its format is unknown");
    error_count(8, "override errors");
    for (size_t i = 0; i < diags.count; i++)
        if (diags.items[i].exit_code != 2)
            diag("exit code %d for %s", diags.items[i].exit_code, diags.items[i].message);
    is_int(diag_exit_code(&diags), 2, "override errors exit with 2");
    pipeline_free(p);

    {
        struct override typed[] = {{"k", "0x20", false},   {"flag", "True", false},
                                   {"label", "0x10", false}, {"eps", ".inf", false},
                                   {"shape", "[4, 0o10]", false}, {"none", "[1]", false}};
        struct overrides ov2 = {typed, NULL, NULL, 6, 0, 0};
        p = load_ov("tensorrun: 1\n"
                    "params: {k: 10, eps: 0.5, flag: false, label: hi, shape: [2], none: ~}\n"
                    "stages: [{name: s, do: [y = k]}]\n",
                    &ov2);
        error_count(0, "-D typed by the core schema");
        ok(p && p->nparams == 6, "six params");
        if (p && p->nparams == 6) {
            ok(p->params[0].kind == PARAM_INT && p->params[0].integer == 32, "-D k=0x20 is 32");
            ok(p->params[1].kind == PARAM_FLOAT && isinf(p->params[1].number), "-D eps=.inf");
            ok(p->params[2].kind == PARAM_BOOL && p->params[2].boolean, "-D flag=True is true");
            ok(p->params[3].kind == PARAM_STRING && strcmp(p->params[3].string, "0x10") == 0,
               "-D label=0x10 for a string param is its text");
            ok(p->params[4].kind == PARAM_LIST && p->params[4].nitems == 2 &&
                   p->params[4].items[1].integer == 8 && p->params[4].line == 2,
               "-D shape=[4, 0o10] replaces a list, keeping the param's place");
            ok(p->params[5].kind == PARAM_LIST, "a param that is None takes anything");
        }
        pipeline_free(p);
    }
    {
        struct override bad[] = {{"shape", "4", false}, {"k", "[1]", false}, {"k", "~", false}};
        struct overrides ov3 = {bad, NULL, NULL, 3, 0, 0};
        p = load_ov("tensorrun: 1\nparams: {k: 10, shape: [2]}\n"
                    "stages: [{name: s, do: [y = k]}]\n",
                    &ov3);
        has_error(0, 0, "-D shape=4: param 'shape' takes a list (it is [2] at line 2), not an "
                        "integer",
                  "-D: an integer for a list");
        has_error(0, 0, "-D k=[1]: param 'k' takes an integer", "-D: a list for an integer");
        has_error(0, 0, "-D k=~: param 'k' takes an integer (it is 10 at line 2), not None",
                  "-D: None for an integer");
        is_int(diag_exit_code(&diags), 2, "exit code 2");
        pipeline_free(p);
    }
    {
        struct override one[] = {{"nope", "1", false}};
        struct overrides ov1 = {one, NULL, NULL, 1, 0, 0};
        p = load_ov("tensorrun: 1\nstages: [{name: s, do: [y = 1]}]\n", &ov1);
        has_error(0, 0, "-D: no param 'nope' (params: none)", "-D when there are no params");
        is_int(diag_exit_code(&diags), 2, "exit code 2");
        pipeline_free(p);
    }
}

static void test_inputs(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"
             "inputs:\n"
             "  a: {path: a.bin, dtype: f32}\n"                                     /* 3 */
             "  b: {path: b.bin, shape: [2, 3]}\n"                                  /* 4 */
             "  c: {path: c.bin, dtype: f33, shape: [2, -3]}\n"                     /* 5 */
             "  d: {path: d.bin, dtype: u8, shape: [2, 3], strides: [1]}\n"         /* 6 */
             "  e: {path: e.npy, offset: 8, strides: [1]}\n"                        /* 7 */
             "  f: {key: t}\n"                                                      /* 8 */
             "  g: {path: g.npy, format: npx}\n"                                    /* 9 */
             "  h: [a, b]\n"                                                        /* 10 */
             "  i: {path: i.bin, dtype: f32, shape: [1,2,3,4,5,6,7,8,9]}\n"         /* 11 */
             "  j: {path: j.bin, format: raw}\n"                                    /* 12 */
             "  k: {path: k.bin, dtype: i8, shape: [4], format: npy, key: x}\n"     /* 13 */
             "  l: ''\n"                                                            /* 14 */
             "  2l: x.npy\n"                                                        /* 15 */
             "  m: {path: m.bin, dtype: i8, shape: [4], offset: -1}\n"              /* 16 */
             "  n: {path: m.bin, dtype: i8, shape: 4}\n"                            /* 17 */
             "stages: [{name: s, do: [y = a]}]\n");
    has_error(3, 27, "a raw input needs both 'dtype' and 'shape'; 'shape' is missing",
              "dtype without shape");
    has_error(4, 27, "'dtype' is missing", "shape without dtype");
    has_error(5, 27, "unknown dtype 'f33' (did you mean 'f32'?)", "an unknown dtype");
    has_error(5, 43, "'shape' cannot be negative (-3)", "a negative dimension");
    has_error(6, 55, "'strides' has 1 entries but 'shape' has 2", "strides of another length");
    has_error(7, 28, "'offset' applies to raw inputs only", "offset without raw");
    has_error(7, 40, "'strides' applies to raw inputs only", "strides without raw");
    has_error(8, 6, "input 'f' has no 'path'", "no path");
    has_error(9, 28, "unknown format 'npx' (did you mean 'npy'?)", "an unknown format");
    has_error(10, 6, "expected a path or a mapping for input 'h', found a sequence",
              "a sequence as an input");
    has_error(11, 39, "'shape' has 9 dimensions; at most 8", "too many dimensions");
    has_error(12, 28, "a raw input needs 'dtype' and 'shape'", "format: raw without a layout");
    has_error(13, 51, "'dtype' and 'shape' describe a raw file, but the format is npy",
              "a layout with format npy");
    has_error(13, 61, "'key' picks one tensor of a .safetensors file; this input is raw",
              "a key for a raw input");
    has_error(14, 7, "'path' is empty", "an empty path");
    has_error(15, 3, "input name '2l' is not a valid name", "a bad input name");
    has_error(16, 51, "'offset' cannot be negative", "a negative offset");
    has_error(17, 38, "expected a sequence for 'shape', found '4'", "a shape that is a number");
    error_count(18, "every input error");
    pipeline_free(p);
}

static void test_outputs(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"
             "stages: [{name: s, do: [y = 1]}]\n"
             "outputs:\n"
             "  a: {path: a.npy, dtype: bf16}\n"                           /* 4 */
             "  b: b.dat\n"                                                /* 5 */
             "  c: {path: c.npy, key: t}\n"                                /* 6 */
             "  d: {path: a.npy}\n"                                        /* 7 */
             "  e: {path: s.safetensors, key: t}\n"                        /* 8 */
             "  f: {path: s.safetensors, key: t}\n"                        /* 9 */
             "  t: {path: s.safetensors}\n"                                /* 10 */
             "  g: {path: g.npy, dtype: float99}\n"                        /* 11 */
             "  h: {dtype: f32}\n"                                         /* 12 */
             "  i: {path: i.x, format: safetensors.zst, dtype: bfloat16}\n" /* 13 */
             "  j: {path: j.npy.zst, dtype: bf16}\n"                       /* 14 */
             "  k: 7\n");                                                  /* 15 */
    has_error(4, 27, "bf16 cannot be written to .npy", "bf16 to .npy, at the dtype");
    hint_has("bf16 cannot", "cast to f32 first, or write .safetensors", "with the hint");
    has_error(5, 6, "cannot tell the format of output 'b' from its name", "an unknown extension");
    has_error(6, 25, "'key' names a tensor inside a .safetensors file; this output is npy",
              "a key for a .npy output");
    has_error(7, 13, "outputs 'a' and 'd' both write", "two outputs into one .npy");
    has_error(9, 13, "outputs 'e' and 'f' both write the tensor 't'", "one tensor twice");
    has_error(10, 13, "outputs 'e' and 't' both write the tensor 't'",
              "a key equal to another output's name");
    has_error(11, 27, "unknown dtype 'float99'", "an unknown dtype");
    has_error(12, 6, "output 'h' has no 'path'", "no path");
    has_error(14, 31, "bf16 cannot be written to .npy", "bf16 to .npy.zst");
    error_count(10, "output errors");
    {
        bool sorted = true;
        for (size_t i = 1; i < diags.count; i++)
            if (diags.items[i].line < diags.items[i - 1].line)
                sorted = false;
        ok(sorted, "reported in file order");
    }
    ok(find("from its name 'b.dat'") >= 0, "the path as written in the file");
    if (p && p->noutputs == 12) {
        ok(p->outputs[9].format == TIO_FORMAT_SAFETENSORS &&
               p->outputs[9].compression == TIO_COMPRESSION_ZSTD &&
               p->outputs[9].dtype == TR_DTYPE_BF16,
           "format: safetensors.zst and the long dtype name");
        ok(p->outputs[10].format == TIO_FORMAT_NPY &&
               p->outputs[10].compression == TIO_COMPRESSION_ZSTD,
           ".npy.zst: npy, zstd");
        ok(p->outputs[11].path && strstr(p->outputs[11].path, "/7"),
           "a number is a path like any other");
    } else {
        ok(0, "outputs kept");
    }
    pipeline_free(p);
}

static void test_types(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"
             "name: [x]\n"                               /* 2 */
             "device: {a: 1}\n"                          /* 3 */
             "params: [1]\n"                             /* 4 */
             "inputs: x.npy\n"                           /* 5 */
             "stages:\n"
             "  - name: s\n"
             "    do: [y = 1]\n"
             "    keep_cache: 1\n"                       /* 9 */
             "    foreach: {over: x, size: big}\n"       /* 10 */
             "    matmul_precision: [high]\n"            /* 11 */
             "outputs: [y]\n");                          /* 12 */
    has_error(2, 7, "expected a string for 'name', found a sequence", "a string");
    has_error(3, 9, "expected a string for 'device', found a mapping", "a device");
    has_error(4, 9, "expected a mapping for 'params', found a sequence", "a mapping");
    has_error(5, 9, "expected a mapping for 'inputs', found 'x.npy'", "inputs as a string");
    has_error(9, 17, "expected true or false for 'keep_cache', found '1'", "true or false");
    has_error(10, 30, "expected rows (an integer) or bytes a block (such as 64M) for 'size', found 'big'",
              "an integer");
    has_error(11, 23, "expected a string for 'matmul_precision', found a sequence",
              "a word");
    has_error(12, 10, "expected a mapping for 'outputs', found a sequence", "outputs");
    error_count(8, "type errors");
    pipeline_free(p);

    p = load("tensorrun: 1\nparams:\ninputs:\noutputs:\nstages: [{name: s, do: [y = 1]}]\n");
    error_count(0, "empty optional sections are allowed");
    pipeline_free(p);
}

static void test_two_errors(void)
{
    struct pipeline *p;

    p = load("tensorrun: 1\n"
             "stages:\n"
             "  - name: a\n"
             "    devise: cpu\n"           /* 4 */
             "    do: [y = x]\n"
             "outputs:\n"
             "  y: {path: y.npy, dtype: bf16}\n"); /* 7 */
    error_count(2, "two errors in one file");
    has_error(4, 5, "unknown key 'devise' (did you mean 'device'?)", "the first");
    has_error(7, 27, "bf16 cannot be written to .npy", "and the second");
    ok(diags.count == 2 && diags.items[0].line < diags.items[1].line, "in file order");
    is_int(diag_exit_code(&diags), 3, "exit code 3");
    pipeline_free(p);
}

/* The printed form: FILE:LINE:COL, the source line and the caret. */
static void test_printed(void)
{
    struct pipeline *p;
    char *buf = NULL;
    size_t len = 0;
    FILE *out;

    p = load("tensorrun: 1\nstages:\n  - name: a\n    kepp: [y]\n    do: [y = 1]\n");
    out = open_memstream(&buf, &len);
    diag_print(&diags, out);
    fclose(out);
    ok(buf && strstr(buf, ":4:5: error: unknown key 'kepp' (did you mean 'keep'?)\n") &&
           strstr(buf, "    4 |     kepp: [y]\n") && strstr(buf, "      |     ^\n") &&
           strstr(buf, "hint: the keys of a stage are"),
       "printed with place, source line, caret and hint");
    if (buf)
        diag("%s", buf);
    free(buf);
    pipeline_free(p);
}

static void remove_tree(const char *dir)
{
    char cmd[600];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp failed\n");
        return 1;
    }
    snprintf(file, sizeof file, "%s/p.yaml", tmpdir);
    diag_init(&diags, file, NULL, 0);
    test_full();
    test_cwd_paths();
    test_files();
    test_version();
    test_unknown_keys();
    test_stages();
    test_params();
    test_core_schema();
    test_overrides();
    test_inputs();
    test_outputs();
    test_types();
    test_two_errors();
    test_printed();
    diag_free(&diags);
    remove_tree(tmpdir);
    return done_testing();
}
