/*
 * print.c - tensors as text.  Each float is written with the fewest digits
 * that read back as the same value of its own dtype (so an f16 0.1 prints
 * as 0.1, not 0.0999755859375), integers exactly, and a tensor of more than
 * PRINT_THRESHOLD values shows only EDGE_ITEMS at each end of every
 * dimension, as NumPy does.
 */
#include "config.h"

#include "print.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRINT_THRESHOLD 1000
#define EDGE_ITEMS 3

/* Whether text reads back as x's value in dtype. */
static bool reads_back(const char *text, double x, enum tr_dtype dtype)
{
    double back = strtod(text, NULL);

    switch (dtype) {
    case TR_DTYPE_F16: return tr_f64_to_f16(back) == tr_f64_to_f16(x);
    case TR_DTYPE_BF16: return tr_f64_to_bf16(back) == tr_f64_to_bf16(x);
    case TR_DTYPE_F32: return (float)back == (float)x;
    default: return back == x;
    }
}

/* Shortest text of x that reads back as the same value of dtype: the
 * fewest significant digits that do, written positionally between 1e-4
 * and 1e16 (as NumPy prints), in scientific notation elsewhere. */
static void format_float(double x, enum tr_dtype dtype, char *buf, size_t size)
{
    char sci[40], digits[24], out[48]; /* positional: at most 17 digits, 4 zeros, 16 places */
    size_t n = 0, used = 0;
    int exponent;
    const char *p;

    if (isnan(x)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, size, x < 0 ? "-inf" : "inf");
        return;
    }
    for (int d = 1; d <= 17; d++) {
        snprintf(sci, sizeof sci, "%.*e", d - 1, x);
        if (reads_back(sci, x, dtype))
            break;
    }
    /* sci is "-D.DDDDe+XX": its digits, and the power of ten of the first */
    for (p = sci; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && n < sizeof digits - 1)
            digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
    exponent = *p == 'e' ? (int)strtol(p + 1, NULL, 10) : 0;
    if (x != 0 && (fabs(x) < 1e-4 || fabs(x) >= 1e16)) {
        snprintf(buf, size, "%s%c%s%se%c%02d", signbit(x) ? "-" : "", digits[0],
                 n > 1 ? "." : "", digits + 1, exponent < 0 ? '-' : '+', abs(exponent));
        return;
    }
    /* positional: the digits, with zeros up to the point or after it */
    if (signbit(x))
        out[used++] = '-';
    if (exponent < 0) {
        out[used++] = '0';
        out[used++] = '.';
        for (int i = 0; i < -exponent - 1; i++)
            out[used++] = '0';
        for (size_t i = 0; i < n; i++)
            out[used++] = digits[i];
    } else {
        for (int i = 0; i <= exponent; i++)
            out[used++] = (size_t)i < n ? digits[i] : '0';
        out[used++] = '.';
        for (size_t i = (size_t)exponent + 1; i < n; i++)
            out[used++] = digits[i];
    }
    out[used] = '\0';
    snprintf(buf, size, "%s", out);
}

static void format_element(const struct tr_tensor *t, const int64_t *index, char *buf, size_t size)
{
    enum tr_dtype d = tr_tensor_dtype(t);
    const char *base = tr_tensor_data(t);
    const int64_t *strides = tr_tensor_strides(t);
    int64_t at = 0;
    double x = 0;

    for (int i = 0; i < tr_tensor_ndim(t); i++)
        at += index[i] * strides[i];
    base += at * (int64_t)tr_dtype_size(d);
    switch (d) {
    case TR_DTYPE_I8: snprintf(buf, size, "%d", *(const int8_t *)base); return;
    case TR_DTYPE_I16: snprintf(buf, size, "%d", *(const int16_t *)(const void *)base); return;
    case TR_DTYPE_I32: snprintf(buf, size, "%" PRId32, *(const int32_t *)(const void *)base); return;
    case TR_DTYPE_I64: snprintf(buf, size, "%" PRId64, *(const int64_t *)(const void *)base); return;
    case TR_DTYPE_U8: snprintf(buf, size, "%u", *(const uint8_t *)base); return;
    case TR_DTYPE_U16: snprintf(buf, size, "%u", *(const uint16_t *)(const void *)base); return;
    case TR_DTYPE_U32: snprintf(buf, size, "%" PRIu32, *(const uint32_t *)(const void *)base); return;
    case TR_DTYPE_U64: snprintf(buf, size, "%" PRIu64, *(const uint64_t *)(const void *)base); return;
    case TR_DTYPE_BOOL: snprintf(buf, size, "%s", *base ? "true" : "false"); return;
    default:
        tr_tensor_item(t, index, &x);
        format_float(x, d, buf, size);
    }
}

struct printer {
    const struct tr_tensor *t;
    FILE *out;
    bool elide;
    int indent;                  /* columns before the outermost '[' */
    int64_t index[TR_MAX_DIMS];
};

static void print_dim(struct printer *p, int dim)
{
    int ndim = tr_tensor_ndim(p->t);
    int64_t n = tr_tensor_shape(p->t)[dim];
    char text[64];

    fputc('[', p->out);
    for (int64_t i = 0; i < n; i++) {
        if (p->elide && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) {
            fputs(dim == ndim - 1 ? "…, " : "…,\n", p->out);
            if (dim < ndim - 1)
                fprintf(p->out, "%*s", p->indent + dim + 1, "");
            i = n - EDGE_ITEMS - 1;
            continue;
        }
        p->index[dim] = i;
        if (dim == ndim - 1) {
            format_element(p->t, p->index, text, sizeof text);
            fputs(text, p->out);
        } else {
            print_dim(p, dim + 1);
        }
        if (i < n - 1) {
            if (dim == ndim - 1) {
                fputs(", ", p->out);
            } else {
                fputc(',', p->out);
                for (int k = dim; k < ndim - 2; k++)
                    fputc('\n', p->out);
                fprintf(p->out, "\n%*s", p->indent + dim + 1, "");
            }
        }
    }
    fputc(']', p->out);
}

void print_tensor(const struct tr_tensor *t, FILE *out)
{
    struct printer p = {.t = t, .out = out};
    char head[256];
    int64_t index[TR_MAX_DIMS] = {0};

    if (tr_tensor_ndim(t) == 0) {
        format_element(t, index, head, sizeof head);
        fprintf(out, "%s\n", head);
        return;
    }
    p.elide = tr_tensor_numel(t) > PRINT_THRESHOLD;
    snprintf(head, sizeof head, "%s[", tr_dtype_name(tr_tensor_dtype(t)));
    for (int i = 0; i < tr_tensor_ndim(t); i++)
        snprintf(head + strlen(head), sizeof head - strlen(head), "%s%" PRId64, i ? ", " : "",
                 tr_tensor_shape(t)[i]);
    strncat(head, "]", sizeof head - strlen(head) - 1);
    fprintf(out, "%s ", head);
    p.indent = (int)strlen(head) + 1;
    if (tr_tensor_numel(t) == 0)
        fputs("[]", out);
    else
        print_dim(&p, 0);
    fputc('\n', out);
}

/* A constant as the expression language writes it. */
static void format_constant(const struct tr_value *v, char *buf, size_t size)
{
    switch (v->kind) {
    case TR_VALUE_INT:
        snprintf(buf, size, "%" PRId64, v->integer);
        break;
    case TR_VALUE_FLOAT:
        format_float(v->number, TR_DTYPE_F64, buf, size);
        break;
    case TR_VALUE_BOOL:
        snprintf(buf, size, "%s", v->boolean ? "true" : "false");
        break;
    case TR_VALUE_STRING:
        snprintf(buf, size, "\"%s\"", v->string);
        break;
    case TR_VALUE_DTYPE:
        snprintf(buf, size, "%s", tr_dtype_name(v->dtype));
        break;
    default:
        snprintf(buf, size, "None");
    }
}

/* A list's items, nested lists as lists. */
static void print_list(const struct tr_arg *arg, FILE *out)
{
    char text[512];

    fputc('[', out);
    for (size_t i = 0; i < arg->value.count; i++) {
        const struct tr_arg *item = &arg->items[i];
        fputs(i ? ", " : "", out);
        if (item->value.kind == TR_VALUE_LIST && !item->tensor) {
            print_list(item, out);
            continue;
        }
        if (item->tensor)
            snprintf(text, sizeof text, "%s tensor", tr_dtype_name(tr_tensor_dtype(item->tensor)));
        else
            format_constant(&item->value, text, sizeof text);
        fputs(text, out);
    }
    fputc(']', out);
}

void print_arg(const struct tr_arg *arg, FILE *out)
{
    char text[512];

    if (arg->tensor) {
        print_tensor(arg->tensor, out);
        return;
    }
    if (arg->value.kind != TR_VALUE_LIST) {
        format_constant(&arg->value, text, sizeof text);
        fprintf(out, "%s\n", text);
        return;
    }
    print_list(arg, out);
    fputc('\n', out);
}
