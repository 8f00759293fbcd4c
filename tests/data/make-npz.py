#!/usr/bin/python3
"""Writes .npz archives into the directory argv[1].

    /usr/bin/python3 tests/data/make-npz.py DIR [--bad]

Without --bad: well-formed archives, NumPy's own (np.savez,
np.savez_compressed) and zip64 ones built by hand as NumPy's zipfile writes
them for members of 4 GiB and more (sizes and offsets of all ones in the
central directory, the real values in a zip64 extra field, a zip64 end
record and its locator), with DIR/values.npz holding the arrays they hold.

With --bad: a corpus of malformed archives, one file per case, and
DIR/expected.txt with one line per file: its name, a tab, and a part of the
error message tensorrun must give for it (exit status 4).
"""
import io
import os
import struct
import sys
import zipfile
import zlib

import numpy as np
from numpy.lib import format as npformat


def npy_bytes(arr):
    buf = io.BytesIO()
    npformat.write_array(buf, arr)
    return buf.getvalue()


def build_zip(members, zip64=False, comment=b"", mangle=None):
    """A zip archive of (name, data, method) members, written by hand so
    that every field can be chosen.  mangle(kind, index, fields) may change
    the fields of a record before it is packed."""
    out = bytearray()
    central = []
    for i, (name, data, method) in enumerate(members):
        name = name.encode()
        if method == zipfile.ZIP_DEFLATED:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            comp = c.compress(data) + c.flush()
        else:
            comp = data
        crc = zlib.crc32(data) & 0xFFFFFFFF
        f = dict(sig=0x04034B50, version=45 if zip64 else 20, flags=0, method=method,
                 time=0, date=0x21, crc=crc, csize=len(comp), usize=len(data),
                 name=name, extra=b"", data=comp, offset=len(out))
        if zip64:
            f["csize"] = f["usize"] = 0xFFFFFFFF
            f["extra"] = struct.pack("<HHQQ", 1, 16, len(data), len(comp))
        if mangle:
            mangle("local", i, f)
        out += struct.pack("<IHHHHHIIIHH", f["sig"], f["version"], f["flags"], f["method"],
                           f["time"], f["date"], f["crc"], f["csize"], f["usize"],
                           len(f["name"]), len(f["extra"]))
        out += f["name"] + f["extra"] + f["data"]
        central.append(dict(sig=0x02014B50, made=45 if zip64 else 20,
                            version=45 if zip64 else 20, flags=0, method=method, time=0,
                            date=0x21, crc=crc, csize=len(comp), usize=len(data), name=name,
                            extra=b"", comment=b"", disk=0, iattr=0, eattr=0,
                            offset=f["offset"]))
    cd_offset = len(out)
    for i, c in enumerate(central):
        if zip64:
            c["extra"] = struct.pack("<HHQQQ", 1, 24, c["usize"], c["csize"], c["offset"])
            c["usize"] = c["csize"] = c["offset"] = 0xFFFFFFFF
        if mangle:
            mangle("central", i, c)
        out += struct.pack("<IHHHHHHIIIHHHHHII", c["sig"], c["made"], c["version"], c["flags"],
                           c["method"], c["time"], c["date"], c["crc"], c["csize"], c["usize"],
                           len(c["name"]), len(c["extra"]), len(c["comment"]), c["disk"],
                           c["iattr"], c["eattr"], c["offset"])
        out += c["name"] + c["extra"] + c["comment"]
    cd_size = len(out) - cd_offset
    n = len(central)
    if zip64:
        e64 = dict(sig=0x06064B50, size=44, made=45, version=45, disk=0, cd_disk=0,
                   count_disk=n, count=n, cd_size=cd_size, cd_offset=cd_offset)
        loc = dict(sig=0x07064B50, disk=0, offset=len(out), disks=1)
        if mangle:
            mangle("end64", 0, e64)
            mangle("locator", 0, loc)
        out += struct.pack("<IQHHIIQQQQ", e64["sig"], e64["size"], e64["made"], e64["version"],
                           e64["disk"], e64["cd_disk"], e64["count_disk"], e64["count"],
                           e64["cd_size"], e64["cd_offset"])
        out += struct.pack("<IIQI", loc["sig"], loc["disk"], loc["offset"], loc["disks"])
        end = dict(sig=0x06054B50, disk=0, cd_disk=0, count_disk=0xFFFF, count=0xFFFF,
                   cd_size=0xFFFFFFFF, cd_offset=0xFFFFFFFF, comment=comment)
    else:
        end = dict(sig=0x06054B50, disk=0, cd_disk=0, count_disk=n, count=n, cd_size=cd_size,
                   cd_offset=cd_offset, comment=comment)
    if mangle:
        mangle("end", 0, end)
    out += struct.pack("<IHHHHIIH", end["sig"], end["disk"], end["cd_disk"], end["count_disk"],
                       end["count"], end["cd_size"], end["cd_offset"], len(end["comment"]))
    out += end["comment"]
    return bytes(out)


def odd_npy(arr):
    """A .npy whose data starts at byte 100, not a multiple of 8: a valid
    header, though not one np.save pads."""
    text = ("{'descr': '%s', 'fortran_order': False, 'shape': %r, }" %
            (arr.dtype.str, arr.shape)).encode()
    text += b" " * (100 - 10 - 1 - len(text)) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + arr.tobytes()


def arrays():
    rng = np.random.default_rng(9)
    return {
        "w": rng.standard_normal((3, 5)).astype("<f4"),
        "ids": np.arange(70000, 70010, dtype="<i8"),
        "mask": np.array([True, False, True]),
        "be": np.arange(6, dtype=">f8").reshape(2, 3),
        "fortran": np.asfortranarray(np.arange(12, dtype="<i2").reshape(3, 4)),
        "scalar": np.array(2.5, dtype="<f8"),
        "empty": np.zeros((0, 4), dtype="<u1"),
        "layers/0.weight": np.arange(4, dtype="<u4"),
    }


def good(directory):
    a = arrays()
    np.savez(os.path.join(directory, "savez.npz"), **a)
    np.savez_compressed(os.path.join(directory, "savez_compressed.npz"), **a)
    np.savez(os.path.join(directory, "positional.npz"), a["w"], a["ids"])
    np.savez(os.path.join(directory, "nothing.npz"))
    members = [(k + ".npy", npy_bytes(v), zipfile.ZIP_STORED if i % 2 else
                zipfile.ZIP_DEFLATED) for i, (k, v) in enumerate(a.items())]
    with open(os.path.join(directory, "zip64.npz"), "wb") as f:
        f.write(build_zip(members, zip64=True))
    with open(os.path.join(directory, "comment.npz"), "wb") as f:
        f.write(build_zip(members[:2], comment=b"made by hand"))
    odd = odd_npy((np.arange(5) / 4).astype(">f8"))
    with open(os.path.join(directory, "odd.npz"), "wb") as f:
        f.write(build_zip([("stored.npy", odd, zipfile.ZIP_STORED),
                           ("deflated.npy", odd, zipfile.ZIP_DEFLATED)]))
    np.savez(os.path.join(directory, "values.npz"), **a)


def bad_cases():
    a = arrays()
    w = npy_bytes(a["w"])
    ids = npy_bytes(a["ids"])
    stored = [("w.npy", w, zipfile.ZIP_STORED), ("ids.npy", ids, zipfile.ZIP_STORED)]
    deflated = [("w.npy", w, zipfile.ZIP_DEFLATED), ("ids.npy", ids, zipfile.ZIP_DEFLATED)]
    ok = build_zip(stored)
    okd = build_zip(deflated)
    out = []

    def add(name, data, expected):
        out.append((name, data, expected))

    def mangled(kind, field, value, members=stored, zip64=False, index=0):
        def m(k, i, f):
            if k == kind and i == index:
                f[field] = value(f) if callable(value) else value
        return build_zip(members, zip64=zip64, mangle=m)

    add("empty.npz", b"", "too short for a zip archive's end record")
    add("local-header-only.npz", ok[:30], "no zip end record")
    add("truncated-end.npz", ok[:-5], "no zip end record")
    add("truncated-half.npz", ok[: len(ok) // 2], "no zip end record")
    add("no-end-record.npz", ok[:-22] + b"\0" * 22, "no zip end record")
    add("comment-length-lies.npz", mangled("end", "comment", b"x" * 5)[:-2],
        "no zip end record")
    add("several-disks.npz", mangled("end", "disk", 1), "a zip archive of several disks")
    add("count-mismatch-disks.npz", mangled("end", "count_disk", 1),
        "a zip archive of several disks")
    add("directory-past-end.npz", mangled("end", "cd_offset", 0x7FFFFFF0),
        "the central directory")
    add("directory-size-lies.npz", mangled("end", "cd_size", lambda f: f["cd_size"] + 1000),
        "runs past its end")
    def lie_count(k, i, f):
        if k == "end":
            f["count"] = f["count_disk"] = 2000
    add("count-lies.npz", build_zip(stored, mangle=lie_count),
        "members cannot fit a central directory")
    add("count-too-small-entry.npz", mangled("central", "sig", 0x12345678, index=1),
        "central directory entry 2 of 2 is missing")
    # the first central entry's name length (at byte 28 of the entry) too long
    cd_offset = struct.unpack("<I", ok[-6:-2])[0]
    long_name = bytearray(ok)
    long_name[cd_offset + 28:cd_offset + 30] = struct.pack("<H", 3000)
    add("name-past-directory.npz", bytes(long_name), "runs past the directory's end")
    add("local-offset-past-data.npz", mangled("central", "offset", 0x7FFFFF00),
        "local header offset 2147483392 is outside the archive's data")
    add("no-local-header.npz", mangled("central", "offset", 5), "no local header at offset 5")
    add("member-past-data.npz", mangled("central", "csize", 0x7FFF0000, members=deflated),
        "past the archive's data")
    add("stored-sizes-differ.npz", mangled("central", "usize", lambda f: f["usize"] - 1),
        "is stored, yet its sizes differ")
    add("encrypted.npz", mangled("central", "flags", 1), "member 'w.npy' is encrypted")
    add("bzip2.npz", mangled("central", "method", 12),
        "member 'w.npy' uses zip compression method 12")
    add("not-npy-name.npz", mangled("central", "name", b"readme.txt"),
        "member 'readme.txt' is not a .npy array")
    add("nul-in-name.npz", mangled("central", "name", b"w\0x.npy"), "holds a NUL byte")
    add("duplicate-names.npz", mangled("central", "name", b"ids.npy", index=0),
        "two members are called 'ids.npy'")
    add("zip-bomb-claim.npz",
        mangled("central", "usize", 0xFFFFFF00, members=deflated),
        "more than deflate can produce")
    add("deflate-corrupt.npz",
        mangled("local", "data", lambda f: b"\xff" * len(f["data"]), members=deflated),
        "corrupt deflate data")
    def claim_more(k, i, f):
        if k in ("local", "central"):
            f["usize"] = len(w)
    add("deflate-truncated-header.npz",
        build_zip([("w.npy", w[:50], zipfile.ZIP_DEFLATED)], mangle=claim_more),
        "its deflated data ends within its .npy header (50 of 128 bytes)")
    add("deflate-short-member.npz", build_zip([("w.npy", w[:50], zipfile.ZIP_DEFLATED)]),
        "member 'w.npy': truncated: the preamble says the header ends at offset 128, file "
        "has 50 bytes")
    add("member-not-npy.npz",
        build_zip([("w.npy", b"PK\x03\x04 not an array at all" * 8, zipfile.ZIP_STORED)]),
        "member 'w.npy': not a .npy file")
    add("member-npy-truncated.npz", build_zip([("w.npy", w[:-4], zipfile.ZIP_STORED)]),
        "member 'w.npy': truncated: header says 15 float32 values (60 bytes)")
    add("deflated-npy-truncated.npz", build_zip([("w.npy", w[:-4], zipfile.ZIP_DEFLATED)]),
        "member 'w.npy': truncated: header says 15 float32 values (60 bytes)")
    add("zip64-no-locator.npz",
        mangled("locator", "sig", 0, zip64=True), "no zip64 locator precedes it")
    add("zip64-record-past-end.npz",
        mangled("locator", "offset", 1 << 40, zip64=True),
        "the zip64 end record's offset 1099511627776 is outside the archive")
    add("zip64-record-missing.npz",
        mangled("locator", "offset", 0, zip64=True), "no zip64 end record at offset 0")
    add("zip64-several-disks.npz", mangled("locator", "disks", 3, zip64=True),
        "a zip archive of several disks")
    add("zip64-extra-missing.npz", mangled("central", "extra", b"", zip64=True),
        "member 'w.npy' needs a zip64 field and has none")
    add("zip64-extra-short.npz",
        mangled("central", "extra", struct.pack("<HHQ", 1, 8, 5), zip64=True),
        "its zip64 field is too short")
    add("extra-past-end.npz",
        mangled("central", "extra", struct.pack("<HH", 9, 500)),
        "an extra field runs past its end")
    add("zip64-directory-past-end.npz",
        mangled("end64", "cd_offset", 1 << 50, zip64=True), "the central directory")
    return out


def bad(directory):
    lines = []
    for name, data, expected in bad_cases():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
        lines.append("%s\t%s\n" % (name, expected))
    with open(os.path.join(directory, "expected.txt"), "w") as f:
        f.writelines(lines)


def main():
    args = [a for a in sys.argv[1:] if a != "--bad"]
    if len(args) != 1:
        sys.exit("usage: make-npz.py DIR [--bad]")
    os.makedirs(args[0], exist_ok=True)
    (bad if "--bad" in sys.argv else good)(args[0])


if __name__ == "__main__":
    main()
