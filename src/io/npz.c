/*
 * npz.c - NumPy's .npz archives (np.savez, np.savez_compressed): a zip
 * file whose members NAME.npy are .npy streams, stored as they are or
 * deflated.
 *
 * The zip layout (PKWARE's APPNOTE.TXT), as far as a reader needs it:
 *
 *   local header  "PK\3\4", 30 bytes, the name, an extra field, the data
 *   ...           one per member
 *   central dir   "PK\1\2", 46 bytes, name, extra, comment; per member:
 *                 method, sizes, CRC-32, where its local header is
 *   zip64 end     "PK\6\6" and its locator "PK\6\7", when a size, an
 *                 offset or the count does not fit the 32 (16) bits below
 *   end record    "PK\5\6", 22 bytes and a comment: where the central
 *                 directory is and how many members it lists
 *
 * NumPy writes zip64 for members of 2 GiB and more (its zipfile is opened
 * with allowZip64 and force_zip64 for large arrays).  Every field is
 * hostile: each offset and size is checked against the archive before it
 * is followed, and a member's claimed inflated size against what deflate
 * can produce from its compressed size.
 */
#include "io_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END 0x06054b50u
#define SIG_END64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u

#define LOCAL_SIZE 30
#define CENTRAL_SIZE 46
#define END_SIZE 22
#define END64_SIZE 56
#define LOCATOR64_SIZE 20
#define COMMENT_MAX 0xffff

#define METHOD_STORED 0
#define METHOD_DEFLATED 8
#define FLAG_ENCRYPTED 0x0001
#define FLAG_STRONG_ENCRYPTION 0x0040

/* deflate codes at most 258 bytes in a length/distance pair of at least 2
 * bits: no stream inflates to more than about 1032 times its size */
#define DEFLATE_MAX_RATIO 1032
#define DEFLATE_SLACK 1024

/* Inflating a member's .npy header: at most the header limit and its
 * 12-byte preamble. */
#define NPY_PREFIX_MAX (TIO_NPY_HEADER_MAX + 12)

static uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
    return le16(p) | (uint32_t)le16(p + 2) << 16;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* True when [offset, offset + len) lies inside a size-byte archive. */
static bool inside(uint64_t offset, uint64_t len, uint64_t size)
{
    return offset <= size && len <= size - offset;
}

bool tio__npz_magic(const uint8_t *buf, uint64_t len)
{
    /* a member's local header first, or, for an archive of no member,
     * the end record alone */
    return buf && len >= 4 && (le32(buf) == SIG_LOCAL || (len >= END_SIZE && le32(buf) == SIG_END));
}

/* ------------------------------------------------------------ directory */

struct directory {
    uint64_t count;   /* members */
    uint64_t offset;  /* of the central directory */
    uint64_t size;    /* its bytes */
    uint64_t limit;   /* where the records after it begin */
};

/* The zip64 end record that the locator before the end record at end
 * points to, which replaces the end record's fields. */
static tr_status read_end64(const uint8_t *buf, uint64_t end, struct directory *d)
{
    const uint8_t *loc, *rec;
    uint64_t at;

    if (end < LOCATOR64_SIZE || le32(buf + end - LOCATOR64_SIZE) != SIG_LOCATOR64)
        return tio__error(TR_ERR_FORMAT, "malformed .npz: the end record asks for zip64 but "
                                         "no zip64 locator precedes it");
    loc = buf + end - LOCATOR64_SIZE;
    if (le32(loc + 4) != 0 || le32(loc + 16) > 1)
        return tio__error(TR_ERR_FORMAT, "malformed .npz: a zip archive of several disks");
    at = le64(loc + 8);
    if (!inside(at, END64_SIZE, end - LOCATOR64_SIZE))
        return tio__error(TR_ERR_FORMAT, "malformed .npz: the zip64 end record's offset %" PRIu64
                                         " is outside the archive",
                          at);
    rec = buf + at;
    if (le32(rec) != SIG_END64)
        return tio__error(TR_ERR_FORMAT,
                          "malformed .npz: no zip64 end record at offset %" PRIu64, at);
    if (le32(rec + 16) != 0 || le32(rec + 20) != 0 || le64(rec + 24) != le64(rec + 32))
        return tio__error(TR_ERR_FORMAT, "malformed .npz: a zip archive of several disks");
    d->count = le64(rec + 32);
    d->size = le64(rec + 40);
    d->offset = le64(rec + 48);
    d->limit = at;
    return TR_OK;
}

/* Finds the end record (the last 22 bytes, or before a comment of up to
 * 64 KiB) and, through it, the central directory. */
static tr_status find_directory(const uint8_t *buf, uint64_t size, struct directory *d)
{
    uint64_t end = UINT64_MAX, lowest;
    const uint8_t *rec;
    uint32_t count_disk, count;
    tr_status s;

    if (size < END_SIZE)
        return tio__error(TR_ERR_FORMAT, "malformed .npz: %" PRIu64 " bytes, too short for a "
                                         "zip archive's end record (22 bytes)",
                          size);
    lowest = size - END_SIZE > COMMENT_MAX ? size - END_SIZE - COMMENT_MAX : 0;
    for (uint64_t at = size - END_SIZE + 1; at-- > lowest;) {
        if (le32(buf + at) == SIG_END && at + END_SIZE + le16(buf + at + 20) == size) {
            end = at;
            break;
        }
    }
    if (end == UINT64_MAX)
        return tio__error(TR_ERR_FORMAT, "malformed .npz: no zip end record (the archive is "
                                         "truncated or not a zip file)");
    rec = buf + end;
    if (le16(rec + 4) != 0 || le16(rec + 6) != 0)
        return tio__error(TR_ERR_FORMAT, "malformed .npz: a zip archive of several disks");
    count_disk = le16(rec + 8);
    count = le16(rec + 10);
    d->count = count;
    d->size = le32(rec + 12);
    d->offset = le32(rec + 16);
    d->limit = end;
    if (count == 0xffff || count_disk == 0xffff || d->size == 0xffffffffu ||
        d->offset == 0xffffffffu) {
        s = read_end64(buf, end, d);
        if (s != TR_OK)
            return s;
    } else if (count_disk != count) {
        return tio__error(TR_ERR_FORMAT, "malformed .npz: a zip archive of several disks");
    }
    if (!inside(d->offset, d->size, d->limit))
        return tio__error(TR_ERR_FORMAT, "malformed .npz: the central directory (%" PRIu64
                                         " bytes at offset %" PRIu64 ") runs past its end "
                                         "(offset %" PRIu64 ")",
                          d->size, d->offset, d->limit);
    /* every entry takes 46 bytes at least: a count beyond that is a lie */
    if (d->count > d->size / CENTRAL_SIZE)
        return tio__error(TR_ERR_FORMAT, "malformed .npz: %" PRIu64 " members cannot fit a "
                                         "central directory of %" PRIu64 " bytes",
                          d->count, d->size);
    return TR_OK;
}

/* The zip64 extended information of a central entry's extra field: each
 * field that is all ones in the entry is there, in this order. */
static tr_status read_zip64_extra(const uint8_t *extra, uint32_t len, const char *name,
                                  uint64_t *usize, uint64_t *csize, uint64_t *local)
{
    uint32_t at = 0;

    while (at + 4 <= len) {
        uint32_t id = le16(extra + at), n = le16(extra + at + 2), used = 0;
        uint64_t *want[3] = {*usize == 0xffffffffu ? usize : NULL,
                             *csize == 0xffffffffu ? csize : NULL,
                             *local == 0xffffffffu ? local : NULL};

        if (n > len - at - 4)
            return tio__error(TR_ERR_FORMAT,
                              "malformed .npz: member '%s.npy': an extra field runs past its "
                              "end",
                              name);
        if (id == 0x0001) {
            for (int k = 0; k < 3; k++) {
                if (!want[k])
                    continue;
                if (used + 8 > n)
                    return tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy': its "
                                                     "zip64 field is too short",
                                      name);
                *want[k] = le64(extra + at + 4 + used);
                used += 8;
            }
            return TR_OK;
        }
        at += 4 + n;
    }
    if (*usize == 0xffffffffu || *csize == 0xffffffffu || *local == 0xffffffffu)
        return tio__error(TR_ERR_FORMAT,
                          "malformed .npz: member '%s.npy' needs a zip64 field and has none",
                          name);
    return TR_OK;
}

/* A member's name as a C string: its bytes without ".npy", which every
 * member NumPy writes ends with.  NUL bytes are refused. */
static tr_status member_name(const uint8_t *p, uint32_t len, char **out)
{
    char shown[80];

    *out = NULL;
    if (memchr(p, '\0', len))
        return tio__error(TR_ERR_FORMAT, "malformed .npz: a member's name holds a NUL byte");
    if (len < 4 || memcmp(p + len - 4, ".npy", 4) != 0) {
        snprintf(shown, sizeof shown, "%.*s%s", len > 64 ? 64 : (int)len, (const char *)p,
                 len > 64 ? "..." : "");
        return tio__error(TR_ERR_FORMAT, "member '%s' is not a .npy array (an .npz holds "
                                         "NAME.npy members only)",
                          shown);
    }
    *out = malloc(len - 3);
    if (!*out)
        return tio__error(TR_ERR_OOM, "out of memory reading an .npz directory");
    memcpy(*out, p, len - 4);
    (*out)[len - 4] = '\0';
    return TR_OK;
}

/* ------------------------------------------------------------ inflating */

/* zlib counts in uInt: feed it at most this much at a time */
#define ZLIB_STEP (UINT32_C(1) << 30)

static uint32_t crc_of(const uint8_t *p, uint64_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);

    for (uint64_t at = 0; at < n;) {
        uInt step = n - at > ZLIB_STEP ? ZLIB_STEP : (uInt)(n - at);
        crc = crc32(crc, p + at, step);
        at += step;
    }
    return (uint32_t)crc;
}

/* One inflate call over what is left of the input into out[0, out_len). */
static int inflate_step(z_stream *z, const uint8_t **in, uint64_t *in_left, uint8_t *out,
                        uint64_t out_len, uint64_t *produced)
{
    uInt in_step = *in_left > ZLIB_STEP ? ZLIB_STEP : (uInt)*in_left;
    uInt out_step = out_len > ZLIB_STEP ? ZLIB_STEP : (uInt)out_len;
    int rc;

    z->next_in = (Bytef *)*in;
    z->avail_in = in_step;
    z->next_out = out;
    z->avail_out = out_step;
    rc = inflate(z, Z_NO_FLUSH);
    *in += in_step - z->avail_in;
    *in_left -= in_step - z->avail_in;
    *produced = out_step - z->avail_out;
    return rc;
}

tr_status tio__npz_inflate(const uint8_t *archive, const struct tio__npz_member *m, uint8_t *dst,
                           uint64_t want, bool whole, uint64_t *got)
{
    z_stream z;
    const uint8_t *in = archive + m->data;
    uint64_t in_left = m->csize, pos = 0, n = 0;
    uint8_t extra;
    const char *why;
    int rc = Z_OK;

    *got = 0;
    if (whole)
        want = m->usize;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
        return tio__error(TR_ERR_OOM, "out of memory for a zlib decoder");
    while (pos < want && rc == Z_OK) {
        rc = inflate_step(&z, &in, &in_left, dst + pos, want - pos, &n);
        pos += n;
    }
    /* a whole member must end exactly where the directory says */
    if (whole && rc == Z_OK && pos == want) {
        rc = inflate_step(&z, &in, &in_left, &extra, 1, &n);
        if (n > 0)
            pos++;
    }
    why = z.msg ? z.msg : "inflate failed";
    inflateEnd(&z);
    *got = pos < want ? pos : want;
    /* Z_BUF_ERROR: no progress, the compressed bytes ran out */
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return tio__error(rc == Z_MEM_ERROR ? TR_ERR_OOM : TR_ERR_FORMAT,
                          "member '%s.npy': corrupt deflate data (%s)", m->name, why);
    if (!whole)
        return TR_OK;
    if (rc != Z_STREAM_END || pos != m->usize)
        return tio__error(TR_ERR_FORMAT,
                          "member '%s.npy': its deflated data %s the %" PRIu64
                          " bytes the archive's directory says",
                          m->name, pos < m->usize ? "ends before" : "goes on past", m->usize);
    if (crc_of(dst, pos) != m->crc)
        return tio__error(TR_ERR_FORMAT,
                          "member '%s.npy': CRC-32 mismatch (the data is damaged)", m->name);
    return TR_OK;
}

/* ------------------------------------------------------------ parse */

/* The .npy header of member m: parsed from the archive's bytes when it is
 * stored, from its first inflated bytes when deflated. */
static tr_status parse_member(const uint8_t *buf, const struct tio__npz_member *m,
                              struct tio_entry *e)
{
    uint8_t *head;
    uint64_t want, got, hsize;
    tr_status s;

    if (!m->deflated) {
        s = tio__npy_parse(buf + m->data, m->usize, m->usize, e);
        if (s == TR_OK)
            e->offset += m->data; /* from the start of the archive */
        return s;
    }
    want = m->usize < NPY_PREFIX_MAX ? m->usize : NPY_PREFIX_MAX;
    head = malloc(want ? want : 1);
    if (!head)
        return tio__error(TR_ERR_OOM, "out of memory reading an .npz member's header");
    /* the preamble first: it says how much more the header takes */
    s = tio__npz_inflate(buf, m, head, want < 12 ? want : 12, false, &got);
    if (s == TR_OK)
        s = tio__npy_header_size(head, got, &hsize);
    if (s == TR_OK && hsize > got)
        s = tio__npz_inflate(buf, m, head, hsize < want ? hsize : want, false, &got);
    if (s == TR_OK && hsize > got && hsize <= m->usize)
        s = tio__error(TR_ERR_FORMAT, "its deflated data ends within its .npy header (%" PRIu64
                                      " of %" PRIu64 " bytes)",
                       got, hsize);
    if (s == TR_OK)
        s = tio__npy_parse(head, got, m->usize, e);
    free(head);
    return s;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Two members of one name would make a key mean either. */
static tr_status check_unique(const struct tio__safetensors *st)
{
    const char **names = malloc((st->count ? st->count : 1) * sizeof *names);
    tr_status s = TR_OK;

    if (!names)
        return tio__error(TR_ERR_OOM, "out of memory reading an .npz directory");
    for (size_t i = 0; i < st->count; i++)
        names[i] = st->entries[i].name;
    qsort(names, st->count, sizeof *names, by_name);
    for (size_t i = 1; i < st->count && s == TR_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: two members are called '%s.npy'",
                           names[i]);
    free(names);
    return s;
}

/* Prefixes the error recorded for member name with its name. */
static tr_status member_error(const char *name)
{
    char msg[512];
    tr_status s = tr_last_status();

    if (strncmp(tr_last_error(), "member '", 8) == 0)
        return s;
    snprintf(msg, sizeof msg, "%s", tr_last_error());
    return tio__error(s, "member '%s.npy': %s", name, msg);
}

tr_status tio__npz_parse(const uint8_t *buf, uint64_t size, struct tio__safetensors *out,
                         struct tio__npz_member **members_out)
{
    struct directory d = {0};
    struct tio__npz_member *members = NULL;
    uint64_t at;
    tr_status s;

    memset(out, 0, sizeof *out);
    *members_out = NULL;
    s = find_directory(buf, size, &d);
    if (s != TR_OK)
        return s;
    out->entries = calloc(d.count ? d.count : 1, sizeof *out->entries);
    members = calloc(d.count ? d.count : 1, sizeof *members);
    if (!out->entries || !members) {
        s = tio__error(TR_ERR_OOM, "out of memory reading an .npz directory");
        goto fail;
    }
    at = d.offset;
    for (uint64_t i = 0; i < d.count; i++) {
        const uint8_t *c = buf + at, *local;
        struct tio__npz_member *m = &members[i];
        struct tio_entry *e = &out->entries[i];
        uint32_t flags, method, nlen, xlen, clen;
        uint64_t usize, csize, lofs, data, bound;
        char *name = NULL;

        if (!inside(at, CENTRAL_SIZE, d.offset + d.size) || le32(c) != SIG_CENTRAL) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: central directory entry %" PRIu64
                                          " of %" PRIu64 " is missing at offset %" PRIu64,
                           i + 1, d.count, at);
            goto fail;
        }
        flags = le16(c + 8);
        method = le16(c + 10);
        csize = le32(c + 20);
        usize = le32(c + 24);
        nlen = le16(c + 28);
        xlen = le16(c + 30);
        clen = le16(c + 32);
        lofs = le32(c + 42);
        if (!inside(at + CENTRAL_SIZE, (uint64_t)nlen + xlen + clen, d.offset + d.size)) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: central directory entry %" PRIu64
                                          " runs past the directory's end",
                           i + 1);
            goto fail;
        }
        s = member_name(c + CENTRAL_SIZE, nlen, &name);
        if (s != TR_OK)
            goto fail;
        e->name = name;
        out->count = i + 1; /* from here on the entry's name is freed with it */
        m->name = name;
        s = read_zip64_extra(c + CENTRAL_SIZE + nlen, xlen, name, &usize, &csize, &lofs);
        if (s != TR_OK)
            goto fail;
        if (le16(c + 34) != 0) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy' is on another disk",
                           name);
            goto fail;
        }
        if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION)) {
            s = tio__error(TR_ERR_FORMAT, "member '%s.npy' is encrypted", name);
            goto fail;
        }
        if (method != METHOD_STORED && method != METHOD_DEFLATED) {
            s = tio__error(TR_ERR_FORMAT, "member '%s.npy' uses zip compression method %u; "
                                          "only stored (0) and deflated (8) members are read",
                           name, method);
            goto fail;
        }
        if (method == METHOD_STORED && csize != usize) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy' is stored, yet its "
                                          "sizes differ (%" PRIu64 " and %" PRIu64 " bytes)",
                           name, csize, usize);
            goto fail;
        }
        if (method == METHOD_DEFLATED && usize > DEFLATE_SLACK &&
            (__builtin_mul_overflow(csize, DEFLATE_MAX_RATIO, &bound) ||
             usize - DEFLATE_SLACK > bound)) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy' claims %" PRIu64
                                          " bytes inflated from %" PRIu64 ", more than "
                                          "deflate can produce",
                           name, usize, csize);
            goto fail;
        }
        if (usize > (uint64_t)INT64_MAX) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy' is too large", name);
            goto fail;
        }
        /* the local header: where the data really starts */
        if (!inside(lofs, LOCAL_SIZE, d.offset)) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy': its local header "
                                          "offset %" PRIu64 " is outside the archive's data",
                           name, lofs);
            goto fail;
        }
        local = buf + lofs;
        if (le32(local) != SIG_LOCAL) {
            s = tio__error(TR_ERR_FORMAT, "malformed .npz: member '%s.npy': no local header "
                                          "at offset %" PRIu64,
                           name, lofs);
            goto fail;
        }
        data = lofs + LOCAL_SIZE + le16(local + 26) + le16(local + 28);
        if (!inside(data, csize, d.offset)) {
            s = tio__error(TR_ERR_FORMAT, "truncated .npz: member '%s.npy' has %" PRIu64
                                          " bytes at offset %" PRIu64 ", past the archive's "
                                          "data (%" PRIu64 " bytes)",
                           name, csize, data, d.offset);
            goto fail;
        }
        m->data = data;
        m->csize = csize;
        m->usize = usize;
        m->crc = le32(c + 16);
        m->deflated = method == METHOD_DEFLATED;
        /* parse_member fills the whole entry: keep the name aside */
        e->name = NULL;
        s = parse_member(buf, m, e);
        e->name = name;
        if (s != TR_OK) {
            s = member_error(name);
            goto fail;
        }
        at += CENTRAL_SIZE + (uint64_t)nlen + xlen + clen;
    }
    s = check_unique(out);
    if (s != TR_OK)
        goto fail;
    *members_out = members;
    return TR_OK;
fail:
    free(members);
    tio__safetensors_free(out);
    return s;
}
