#!/usr/bin/python3
"""Prints the NumPy-written .npy headers that tests/unit/test_npy.c embeds.

Run with a Python that has NumPy 1.24 (Debian 12's python3-numpy):

    /usr/bin/python3 tests/data/make-npy-headers.py

and paste the output between the "generated" markers of test_npy.c.  The
test itself never runs Python: it compares against these bytes.
"""
import io
import math

import numpy as np
from numpy.lib import format as npformat

TYPES = ["b1", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8"]
ENUM = {"b1": "BOOL", "u1": "U8", "u2": "U16", "u4": "U32", "u8": "U64",
        "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64",
        "f2": "F16", "f4": "F32", "f8": "F64"}


def c_literal(data, indent, width=76):
    """data as C string literals, HDR(...) around them; octal escapes have
    at most three digits, so no following character can extend one."""
    lines, cur = [], ""
    for x in data:
        ch = chr(x)
        if ch == "\n":
            piece = "\\n"
        elif 0x20 <= x < 0x7F and ch not in '"\\?':
            piece = ch
        else:
            piece = "\\%03o" % x
        if len(cur) + len(piece) > width:
            lines.append(cur)
            cur = ""
        cur += piece
    lines.append(cur)
    body = "\n".join(indent + ' "' + p + '"' for p in lines)
    return indent + "HDR(\n" + body + ")"


def header_of(arr, version=None):
    """The header bytes np.save (write_array) writes for arr."""
    buf = io.BytesIO()
    npformat.write_array(buf, arr, version=version, allow_pickle=True)
    data = buf.getvalue()
    f = io.BytesIO(data)
    major, minor = npformat.read_magic(f)
    npformat._read_array_header(f, (major, minor))
    return data[:f.tell()]


def dict_header(descr, shape):
    """What np.save writes for a C-ordered array of descr and shape, also
    for shapes too large to allocate (the same function np.save calls)."""
    buf = io.BytesIO()
    npformat._write_array_header(
        buf, {"descr": descr, "fortran_order": False, "shape": shape}, None)
    return buf.getvalue()


def main():
    print("/* every dtype x C/Fortran order x versions 1.0, 2.0, 3.0; shape (2, 3) */")
    print("static const struct npy_case numpy_headers[] = {")
    for t in TYPES:
        for fortran in (False, True):
            for version in ((1, 0), (2, 0), (3, 0)):
                a = np.zeros((2, 3), dtype=np.dtype(t))
                if fortran:
                    a = np.asfortranarray(a)
                print('    {"%s %s %d.%d", TR_DTYPE_%s, %s,\n%s},'
                      % (t, "F" if fortran else "C", version[0], version[1], ENUM[t],
                         "true" if fortran else "false",
                         c_literal(header_of(a, version), "     ")))
    print("};\n")

    print("/* big-endian: np.save of zeros((2, 3), '>..') */")
    print("static const struct npy_case numpy_big_endian[] = {")
    for t in TYPES:
        if t[1] == "1":
            continue
        a = np.zeros((2, 3), dtype=np.dtype(">" + t))
        print('    {">%s", TR_DTYPE_%s, false,\n%s},'
              % (t, ENUM[t], c_literal(header_of(a), "     ")))
    print("};\n")

    print("/* zero-size and rank-0 arrays */")
    for name, a in [("zero_1d", np.zeros((0,), "<f4")),
                    ("zero_3d", np.zeros((2, 0, 3), "<i8")),
                    ("rank0", np.array(1.5, "<f8"))]:
        print("static const struct npy_bytes numpy_%s = {\n%s};"
              % (name, c_literal(header_of(a), "   ")))
    print()

    print("/* dtypes the engine lacks: type string and item size */")
    print("static const struct unsupported_case numpy_unsupported[] = {")
    cases = [("<c8", np.zeros((2, 3), "<c8"), 8),
             ("<f16", np.zeros((2, 3), np.longdouble), 16),
             ("<M8[ns]", np.zeros((2, 3), "<M8[ns]"), 8),
             ("<m8[s]", np.zeros((2, 3), "<m8[s]"), 8),
             ("|S10", np.zeros((2, 3), "S10"), 10),
             ("<U3", np.zeros((2, 3), "<U3"), 12),
             ("|V8", np.zeros((2, 3), "V8"), 8),
             ("|O", np.zeros((2, 3), object), 0),
             (">c16", np.zeros((2, 3), ">c16"), 16)]
    for typestr, a, itemsize in cases:
        assert a.dtype.str == typestr, (a.dtype.str, typestr)
        print('    {"%s", %d,\n%s},' % (typestr, itemsize, c_literal(header_of(a), "     ")))
    print("};\n")

    print("/* the headers np.save writes (tio__npy_header must match) */")
    print("static const struct write_case numpy_written[] = {")
    rows = [(ENUM[t], (2, 3), np.dtype(t).str) for t in TYPES]
    rows += [("F32", s, "<f4") for s in [
        (), (0,), (3,), (2, 0, 3), (1, 2, 3, 4, 5, 6, 7, 8),
        (9223372036854775807,), (1, 9223372036854775807),
        # the text reaches a multiple of 64 by itself: NumPy adds 64 spaces
        (1, 1, 1000, 100000, 100000, 100000, 100000)]]
    for e, shape, descr in rows:
        h = dict_header(descr, shape)
        if math.prod(shape) < 10**6:
            assert h == header_of(np.zeros(shape, descr)), (e, shape)
        print("    {TR_DTYPE_%s, %d, {%s},\n%s},"
              % (e, len(shape), ", ".join(str(x) for x in shape) or "0",
                 c_literal(h, "     ")))
    print("};")


if __name__ == "__main__":
    main()
