"""Reading package files without unpacking them or installing their tools: Debian packages (an ar archive holding
data.tar.*), npm tarballs, and R's serialized data (an R package's lazy-load database). Used by
build_corpus_large.py."""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


class PackageError(Exception):
    """A package file that cannot be read: the message says which and why."""


def read_deb(path: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    """The files of a Debian package whose path (without the leading ./) ``wanted`` accepts, read from its
    data.tar.* member without unpacking to disk (a .deb is an ar archive)."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise PackageError(f"{path}: not a Debian package (no ar header); delete it and build again")
        while header := f.read(60):
            name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58])
            if name.startswith("data.tar"):
                mode = {".xz": "r|xz", ".gz": "r|gz", ".bz2": "r|bz2", "": "r|"}.get(name[8:])
                if mode is None:
                    raise PackageError(f"{path}: {name} is compressed in a way Python's tarfile cannot read")
                out = {}
                with tarfile.open(fileobj=io.BytesIO(f.read(size)), mode=mode) as tar:
                    for member in tar:
                        rel = member.name.removeprefix("./")
                        if member.isfile() and wanted(rel):
                            out[rel] = tar.extractfile(member).read()
                return out
            f.seek(size + size % 2, 1)
    raise PackageError(f"{path}: no data.tar member")


def read_tgz(path: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile() and wanted(m.name)}


# --------------------------------------------------------------------------------------------- R's serialization


class _RReader:
    """Just enough of R's XDR serialization format (R Internals, section 1.8) for character vectors and lists."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.refs = data, 0, []

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind in (254, 253, 242, 241, 251, 247):  # NULL, global/empty/base env, missing arg, base namespace
            return None
        if kind == 255:  # a reference to an earlier symbol
            return self.refs[(flags >> 8 or self.int()) - 1]
        if kind == 1:  # symbol
            value = self.item()
            self.refs.append(value)
            return value
        if kind == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            self.pos += n
            return self.data[self.pos - n:self.pos].decode("utf-8", errors="replace")
        if kind == 2:  # pairlist: [(tag, value)]
            items = []
            while True:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else None
                items.append((tag, self.item()))
                flags = self.int()
                if flags & 0xFF != 2:
                    self.pos -= 4
                    self.item()  # the terminating NULL
                    return items
                has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)
        if kind in (10, 13):  # logical, integer
            n = self.int()
            value = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
        elif kind == 14:  # double
            n = self.int()
            value = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
        elif kind in (16, 19):  # character vector, list
            value = [self.item() for _ in range(self.int())]
        else:
            raise PackageError(f"R data: unsupported object type {kind} at byte {self.pos}")
        if has_attr:
            return RObject(value, dict(self.item()))
        return value


@dataclass
class RObject:
    value: list
    attributes: dict


def unserialize_r(data: bytes):
    if data[:2] != b"X\n":
        raise PackageError("R data: not in XDR serialization format")
    reader = _RReader(data)
    reader.pos = 2
    version = reader.int()
    reader.int(), reader.int()  # the R versions that wrote and can read it
    if version == 3:
        n = reader.int()
        reader.pos += n  # the native encoding's name
    return reader.item()


def r_lazyload(rdx: bytes, rdb: bytes) -> dict:
    """The objects of an R package's lazy-load database (``data/Rdata.rdx`` + ``.rdb``): name -> object."""
    index = unserialize_r(gzip.decompress(rdx) if rdx[:2] == b"\x1f\x8b" else zlib.decompress(rdx[4:]))
    variables = dict(zip(index.attributes["names"], index.value))["variables"]
    out = {}
    for name, (offset, length) in zip(variables.attributes["names"], variables.value):
        blob = rdb[offset:offset + length]
        out[name] = unserialize_r(zlib.decompress(blob[4:]))  # 4-byte length, then zlib (compress = TRUE)
    return out
