#!/usr/bin/python3
"""Writes a corpus of malformed .safetensors files into the directory
argv[1], one file per case, and expected.txt there: one line per file,
"filename<TAB>a substring of the error message it must be rejected with".

Each case breaks one rule of the reference implementation
(huggingface/safetensors, safetensors/src/tensor.rs); everything else in
the file is as the reference writer would write it.  Standard library only.
"""

import json
import os
import struct
import sys


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def header_bytes(header):
    """The JSON text as the reference writes it (compact, padded with
    spaces to a multiple of 8), from a dict or from raw text/bytes."""
    if isinstance(header, dict):
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    else:
        text = header
    data = text.encode("utf-8") if isinstance(text, str) else text
    return data + b" " * (-len(data) % 8)


def safetensors(header, data_len, length=None):
    """A whole file: the 8-byte length (or the one given), the header, and
    data_len bytes of data."""
    body = header_bytes(header)
    n = len(body) if length is None else length
    return struct.pack("<Q", n) + body + bytes(i % 251 for i in range(data_len))


F32x2 = ("F32", [2])


def cases():
    """(filename, file bytes, expected message substring)."""
    ok_header = {"__metadata__": {"format": "pt"}, "a": tensor("F32", [2], 0, 8)}

    yield "empty.safetensors", b"", "too short"
    yield "short.safetensors", b"\x02\x00\x00\x00\x00", "too short"
    yield ("header-too-large.safetensors",
           safetensors(ok_header, 8, length=100_000_001), "over the limit")
    yield ("header-length-huge.safetensors",
           b"\xff" * 8 + header_bytes(ok_header) + bytes(8), "over the limit")
    yield ("header-past-end.safetensors",
           safetensors(ok_header, 8, length=1000), "past the end")
    yield ("invalid-utf8.safetensors",
           safetensors(b'{"a\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),
           "not valid UTF-8")
    yield ("invalid-utf8-surrogate.safetensors",
           safetensors(b'{"\xed\xa0\x80":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),
           "not valid UTF-8")
    yield ("invalid-json.safetensors",
           safetensors('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', 8),
           "invalid JSON")
    yield ("trailing-garbage.safetensors",
           safetensors('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x', 8),
           "invalid JSON")
    yield ("not-an-object.safetensors", safetensors("[]", 0), "not a JSON object")
    yield ("duplicate-names.safetensors",
           safetensors('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                       '"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', 16),
           "duplicate key")
    yield ("hole.safetensors",
           safetensors({"a": tensor(*F32x2, 0, 8), "b": tensor(*F32x2, 12, 20)}, 20),
           "leave a hole")
    yield ("overlap.safetensors",
           safetensors({"a": tensor(*F32x2, 0, 8), "b": tensor(*F32x2, 4, 12)}, 12),
           "overlap")
    yield ("first-offset-not-zero.safetensors",
           safetensors({"a": tensor(*F32x2, 4, 12)}, 12), "do not start at 0")
    yield ("offsets-reversed.safetensors",
           safetensors({"a": tensor("U8", [1], 0, 1), "b": tensor("U8", [1], 1, 0)}, 1),
           "end before they begin")
    yield ("data-ends-before-file.safetensors",
           safetensors({"a": tensor(*F32x2, 0, 8)}, 9), "not covered")
    yield ("data-ends-after-file.safetensors",
           safetensors({"a": tensor(*F32x2, 0, 8)}, 7), "truncated")
    yield ("size-mismatch.safetensors",
           safetensors({"a": tensor("F32", [3], 0, 8)}, 8), "needs 12")
    yield ("shape-overflow.safetensors",
           safetensors({"a": tensor("U8", [4294967296, 4294967296], 0, 16)}, 16),
           "does not fit in 64 bits")
    yield ("shape-overflow-bits.safetensors",
           safetensors({"a": tensor("I32", [2, 9223372036854775807], 0, 16)}, 16),
           "size in bits does not fit in 64 bits")
    yield ("shape-too-big-integer.safetensors",
           safetensors({"a": tensor("I32", [2, 18446744073709551614], 0, 16)}, 16),
           "invalid JSON")
    yield ("unknown-dtype.safetensors",
           safetensors({"a": tensor("F33", [2], 0, 8)}, 8), "unknown dtype 'F33'")
    yield ("f4-odd-count.safetensors",
           safetensors({"a": tensor("F4", [3], 0, 1)}, 1), "not a whole number of bytes")
    yield ("metadata-not-string.safetensors",
           safetensors({"__metadata__": {"epochs": 3}, "a": tensor(*F32x2, 0, 8)}, 8),
           "not a string")
    yield ("metadata-not-object.safetensors",
           safetensors({"__metadata__": ["pt"], "a": tensor(*F32x2, 0, 8)}, 8),
           "not an object of strings")
    yield ("missing-dtype.safetensors",
           safetensors({"a": {"shape": [2], "data_offsets": [0, 8]}}, 8), 'has no "dtype"')
    yield ("dtype-not-string.safetensors",
           safetensors({"a": {"dtype": 32, "shape": [2], "data_offsets": [0, 8]}}, 8),
           "dtype is an integer, not a string")
    yield ("negative-dimension.safetensors",
           safetensors({"a": tensor("F32", [-2], 0, 8)}, 8), "shape[0] is -2")
    yield ("too-many-dimensions.safetensors",
           safetensors({"a": tensor("F32", [1] * 9, 0, 4)}, 4), "at most 8")
    yield ("offsets-three.safetensors",
           safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}}, 8),
           "not an array of two integers")
    yield ("tensor-not-object.safetensors",
           safetensors({"a": "F32"}, 0), "tensor 'a' is a string")
    yield ("nul-in-name.safetensors",
           safetensors('{"a\\u0000":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8),
           "invalid JSON")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: make-bad-safetensors.py DIRECTORY\n")
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, data, expected in cases():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        lines.append("%s\t%s\n" % (name, expected))
    with open(os.path.join(out, "expected.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
