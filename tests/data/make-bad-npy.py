#!/usr/bin/python3
"""Writes a corpus of malformed .npy files into the directory argv[1].

    /usr/bin/python3 tests/data/make-bad-npy.py DIR

One file per case, named after the case, and DIR/expected.txt with one line
per file: the file's name, a tab, and a part of the error message tensorrun
must give for it (exit status 4).  The cases are NumPy's own malformed files
(numpy/lib/tests/test_format.py: bad magic, bad versions, truncated magic,
empty file, a header longer than the file, wrong keys, data cut short, a
header over the limit) and malformed dict literals.
"""
import io
import os
import struct
import sys

import numpy as np
from numpy.lib import format as npformat

MAGIC = b"\x93NUMPY"


def saved(arr, version=None):
    """The bytes np.save writes for arr."""
    buf = io.BytesIO()
    npformat.write_array(buf, arr, version=version)
    return buf.getvalue()


def npy(text, version=(1, 0), data=b""):
    """A file of this header text, padded as NumPy pads it: spaces and a
    newline up to a multiple of 64 bytes."""
    text = text.encode("latin-1") if isinstance(text, str) else text
    preamble = 10 if version[0] == 1 else 12
    pad = 64 - (preamble + len(text) + 1) % 64
    header = text + b" " * pad + b"\n"
    fmt = "<H" if version[0] == 1 else "<I"
    return MAGIC + bytes(version) + struct.pack(fmt, len(header)) + header + data


def dict_text(descr="'<f4'", fortran="False", shape="(3,)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def with_version(data, major, minor):
    return data[:6] + bytes([major, minor]) + data[8:]


def cases():
    good = saved(np.arange(12, dtype="<f4").reshape(3, 4))  # 128 + 48 bytes
    f4x3 = b"\0" * 12
    out = []

    def add(name, data, expected):
        out.append((name, data, expected))

    # NumPy's own malformed files
    add("bad-magic.npy", b"\x93NUMPX" + good[6:], "not a .npy file")
    add("bad-magic-png.npy", b"\x89PNG\r\n\x1a\n" + b"\0" * 120, "not a .npy file")
    for major, minor in [(1, 1), (0, 0), (0, 1), (2, 2), (255, 255)]:
        add("version-%d.%d.npy" % (major, minor), with_version(good, major, minor),
            "unsupported .npy format version %d.%d" % (major, minor))
    add("truncated-magic.npy", MAGIC[:4], "truncated: 4 bytes")
    add("truncated-version.npy", MAGIC + b"\x01", "truncated: 7 bytes")
    add("truncated-preamble.npy", MAGIC + b"\x01\x00\x76", "truncated: 9 bytes")
    add("truncated-preamble-2.0.npy", MAGIC + b"\x02\x00\x74\x00", "truncated: 10 bytes")
    add("empty.npy", b"", "empty file")
    add("header-length-past-data.npy", good[:8] + struct.pack("<H", 5000) + good[10:],
        "truncated: the preamble says the header ends at offset 5010, file has 176 bytes")
    add("header-cut-short.npy", good[:100],
        "truncated: the preamble says the header ends at offset 128, file has 100 bytes")
    add("missing-key-shape.npy",
        npy("{'descr': '<f4', 'fortran_order': False, }", data=f4x3),
        "missing key 'shape'")
    add("missing-key-descr.npy",
        npy("{'fortran_order': False, 'shape': (3,), }", data=f4x3),
        "missing key 'descr'")
    add("missing-key-fortran_order.npy",
        npy("{'descr': '<f4', 'shape': (3,), }", data=f4x3),
        "missing key 'fortran_order'")
    add("extra-key.npy",
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1, }",
            data=f4x3),
        "unexpected key 'extra'")
    add("duplicate-key.npy",
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,), }",
            data=f4x3),
        "duplicate key 'shape'")
    add("data-one-byte-short.npy", good[:-1],
        "truncated: header says 12 float32 values (48 bytes) after offset 128, "
        "file has 175 bytes")
    add("data-missing.npy", good[:128],
        "truncated: header says 12 float32 values (48 bytes) after offset 128, "
        "file has 128 bytes")
    add("data-one-byte-short-big-endian.npy",
        saved(np.arange(6, dtype=">i8"))[:-1],
        "truncated: header says 6 int64 values (48 bytes)")
    # a header of 1 MiB + 1 bytes, present in full, then one of exactly 1 MiB
    # declared by a 3.0 preamble on a short file
    big = dict_text(shape="(0,)").encode() + b" " * ((1 << 20) - 57) + b"\n"
    assert len(big) == (1 << 20) + 1
    add("header-over-limit.npy", MAGIC + b"\x02\x00" + struct.pack("<I", len(big)) + big,
        "the .npy header is 1048577 bytes long, over the limit of 1048576 bytes")
    add("header-over-limit-declared.npy",
        MAGIC + b"\x03\x00" + struct.pack("<I", 0xFFFFFFFF) + b"{}",
        "the .npy header is 4294967295 bytes long, over the limit")

    # malformed dict literals
    add("unterminated-string.npy", npy("{'descr': '<f4"),
        "malformed .npy header: unterminated string at column 11")
    add("unterminated-string-eol.npy", npy("{'descr': '<f4', 'shape: (3,), }"),
        "malformed .npy header: unterminated string at column 18")
    add("missing-colon.npy", npy("{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }"),
        "expected ':' after the key 'descr'")
    add("bad-bool.npy", npy(dict_text(fortran="false"), data=f4x3),
        "expected True or False as the value of 'fortran_order', found 'false'")
    add("bool-as-int.npy", npy(dict_text(fortran="1"), data=f4x3),
        "expected True or False as the value of 'fortran_order', found '1'")
    add("negative-dim.npy", npy(dict_text(shape="(-1, 3)")),
        "negative dimension '-1' in 'shape'")
    add("float-dim.npy", npy(dict_text(shape="(3.0,)")),
        "dimension '3.0' in 'shape' is not a decimal integer")
    add("nested-junk.npy", npy(dict_text(shape="((3, 4),)")),
        "expected a dimension (a non-negative integer) in 'shape', found '('")
    add("shape-not-tuple.npy", npy(dict_text(shape="[3]")),
        "expected a tuple such as (2, 3) as the value of 'shape'")
    add("shape-one-no-comma.npy", npy(dict_text(shape="(3)"), data=f4x3),
        "'shape' is not a tuple")
    add("missing-closing-brace.npy",
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), ", data=f4x3),
        "expected a quoted key or '}', found the end of the header")
    add("missing-closing-paren.npy",
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, }", data=f4x3),
        "expected a dimension (a non-negative integer) in 'shape', found '}'")
    add("trailing-garbage.npy",
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } junk", data=f4x3),
        "unexpected 'junk' after the dict")
    add("too-many-dims.npy", npy(dict_text(shape="(" + "1, " * 65 + ")"), data=b"\0" * 4),
        "'shape' has more than 64 dimensions (NumPy's limit)")
    add("many-dims-truncated.npy", npy(dict_text(shape="(" + "2, " * 9 + ")"), data=f4x3),
        "truncated: header says 512 float32 values (2048 bytes)")
    add("overflowing-dim.npy", npy(dict_text(shape="(9223372036854775808,)")),
        "dimension '9223372036854775808' in 'shape' is too large")
    add("overflowing-size.npy", npy(dict_text(shape="(4611686018427387904, 4)")),
        "shape (4611686018427387904, 4) of float32 values is too large")
    add("overflowing-size-empty.npy", npy(dict_text(shape="(0, 4294967296, 4294967296)")),
        "is too large")
    add("not-a-dict.npy", npy("[('descr', '<f4'), ('fortran_order', False), ('shape', (3,))]"),
        "expected '{' (the header is a dict)")
    add("bad-typestr.npy", npy(dict_text(descr="'<f3'"), data=f4x3),
        "'descr' is '<f3', not a NumPy type string")
    add("bad-descr-name.npy", npy(dict_text(descr="'float32'"), data=f4x3),
        "'descr' is 'float32', not a NumPy type string")
    add("escape-in-string.npy", npy(dict_text(descr="'\\x3cf4'"), data=f4x3),
        "escape sequences in strings are not supported")
    add("non-ascii.npy", npy(dict_text(descr="'<f4\xe9'"), data=f4x3),
        "unexpected byte 0xe9 in a string")
    add("structured-dtype-truncated.npy",
        saved(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))[:-1],
        "truncated: header says 3 |V8 values (24 bytes)")
    add("structured-bad-field-type.npy", npy(dict_text(descr="[('a', '<f3')]"), data=f4x3),
        "a field's type '<f3' is not a NumPy type string")
    add("structured-unclosed.npy", npy(dict_text(descr="[('a', '<f4'), "), data=f4x3),
        "expected a field ('name', type) in the list of fields")
    add("structured-too-deep.npy",
        npy(dict_text(descr="[('a', " * 20 + "'<f4'" + ")]" * 20), data=f4x3),
        "structured dtype nested more than 16 deep")
    add("unquoted-key.npy", npy("{descr: '<f4', 'fortran_order': False, 'shape': (3,), }"),
        "expected a quoted key or '}', found 'descr'")
    add("eval-attempt.npy",
        npy("{'descr': __import__('os').system('false'), 'fortran_order': False, "
            "'shape': (3,), }"),
        "expected a quoted type string such as '<f4' as the value of 'descr'")
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make-bad-npy.py DIR")
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    lines = []
    for name, data, expected in cases():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
        lines.append("%s\t%s\n" % (name, expected))
    with open(os.path.join(directory, "expected.txt"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
