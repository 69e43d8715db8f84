"""Read TensorFlow checkpoints (the V2 "tensor bundle" format) in pure Python + NumPy, without TensorFlow.

A checkpoint with prefix ``P`` (e.g. ``model.ckpt-best``) is

* ``P.index``: a LevelDB-style SSTable mapping keys to protobufs. Key ``""`` holds a ``BundleHeaderProto``
  (number of shards, endianness); every other key is a variable name holding a ``BundleEntryProto``
  (dtype, shape, shard id, byte offset and size in that shard, masked CRC32C of the bytes, partition slices).
* ``P.data-00000-of-0000N`` ... : the raw tensor bytes, concatenated.

The table layout (blocks of prefix-compressed entries, 5-byte block trailers with a masked CRC32C, a 48-byte footer
ending in a magic number) is LevelDB's, as reused by ``tensorflow/core/lib/io/table*``; the protobuf field numbers
are those of ``tensorflow/core/protobuf/tensor_bundle.proto``. Every checksum the format stores is verified.

Partitioned (sliced) variables -- stored as one entry per slice under binary keys -- are detected and reported as
unsupported; official ALBERT checkpoints do not use them.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from litebert.errors import CheckpointError, CheckpointNotFoundError
from litebert.protobuf import BYTES, FIXED32, VARINT, fields, int64, varint

# ------------------------------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), vectorised with NumPy so multi-hundred-MB tensors check in seconds.
# ------------------------------------------------------------------------------------------------------------------

_POLY = 0x82F63B78  # reflected Castagnoli polynomial


def _make_tables() -> np.ndarray:
    """Slicing-by-4 tables, shape [4, 256] uint32: T[0] is the classic byte table, T[k] advances k more bytes."""
    t0 = np.zeros(256, dtype=np.uint64)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t0[i] = c
    tables = [t0]
    for _ in range(3):
        prev = tables[-1]
        tables.append((prev >> np.uint64(8)) ^ t0[(prev & np.uint64(0xFF)).astype(np.int64)])
    return np.stack(tables).astype(np.uint32)


_T = _make_tables()


class _Linear32:
    """A GF(2)-linear map on 32-bit values, stored as 4 byte-indexed tables (x -> XOR of t[b][byte_b(x)])."""

    def __init__(self, columns: np.ndarray):  # columns[k] = image of the bit 1 << k, shape [32] uint32
        self.tables = np.zeros((4, 256), dtype=np.uint32)
        for b in range(4):
            t = self.tables[b]
            for bit in range(8):
                t[1 << bit : 2 << bit] = t[: 1 << bit] ^ columns[8 * b + bit]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        t = self.tables
        return t[0][x & 0xFF] ^ t[1][(x >> 8) & 0xFF] ^ t[2][(x >> 16) & 0xFF] ^ t[3][x >> 24]

    def squared(self) -> "_Linear32":
        basis = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32))
        return _Linear32(self(self(basis)))


def _zero_byte_map() -> _Linear32:
    """The register update for one zero byte: r -> T[r & 0xFF] ^ (r >> 8)."""
    basis = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32))
    return _Linear32(_T[0][basis & 0xFF] ^ (basis >> 8))


_SHIFTS: list[_Linear32] = []  # _SHIFTS[i] advances the register over 2**i zero bytes


def _shift(i: int) -> _Linear32:
    while len(_SHIFTS) <= i:
        _SHIFTS.append(_SHIFTS[-1].squared() if _SHIFTS else _zero_byte_map())
    return _SHIFTS[i]


def crc32c(data: bytes | bytearray | memoryview | np.ndarray) -> int:
    """Standard CRC32C of ``data`` (init and final XOR 0xFFFFFFFF); ``crc32c(b"123456789") == 0xE3069283``.

    The register without init/final XOR, R(data), is linear: R(a + b) = Z_len(b)(R(a)) ^ R(b), with Z_n the map
    "advance over n zero bytes", and leading zero bytes leave R at 0. So we left-pad with zeros to equal chunks,
    run all chunks at once (one NumPy op per 4-byte column), then fold neighbours pairwise in log2(chunks) steps.
    """
    buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    buf = buf.reshape(-1).view(np.uint8)
    n = buf.size
    log_chunk = 10 if n > (1 << 18) else 6  # chunk of 1 KiB (big tensors) or 64 B
    chunk = 1 << log_chunk
    pad = (-n) % chunk
    if pad:
        buf = np.concatenate([np.zeros(pad, dtype=np.uint8), buf])
    words = buf.view("<u4").reshape(-1, chunk // 4)  # [chunks, words per chunk]
    reg = np.zeros(words.shape[0], dtype=np.uint32)
    t0, t1, t2, t3 = _T
    for j in range(words.shape[1]):
        reg ^= words[:, j]
        reg = t3[reg & 0xFF] ^ t2[(reg >> 8) & 0xFF] ^ t1[(reg >> 16) & 0xFF] ^ t0[reg >> 24]
    level = log_chunk
    while reg.size > 1:  # fold pairs: R(a + b) = Z_|b|(R(a)) ^ R(b), chunks double in length each round
        if reg.size % 2:
            reg = np.concatenate([np.zeros(1, dtype=np.uint32), reg])  # a leading zero chunk changes nothing
        reg = _shift(level)(reg[0::2]) ^ reg[1::2]
        level += 1
    raw = np.uint32(reg[0]) if reg.size else np.uint32(0)
    # Contribution of the 0xFFFFFFFF initial register, advanced over the n real bytes: Z_n(init).
    init = np.array([0xFFFFFFFF], dtype=np.uint32)
    for i in range(n.bit_length()):
        if n >> i & 1:
            init = _shift(i)(init)
    return int((init[0] ^ raw) ^ np.uint32(0xFFFFFFFF))


def unmask_crc(masked: int) -> int:
    """Undo LevelDB/TF's checksum masking: masked = rotr15(crc) + 0xA282EAD8 (mod 2**32)."""
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# ------------------------------------------------------------------------------------------------------------------
# Bundle protos (tensorflow/core/protobuf/tensor_bundle.proto), decoded with litebert.protobuf
# ------------------------------------------------------------------------------------------------------------------

# tensorflow/core/framework/types.proto DataType -> (name, numpy dtype or None when we cannot read it)
_DTYPES: dict[int, tuple[str, str | None]] = {
    1: ("float32", "f4"), 2: ("float64", "f8"), 3: ("int32", "i4"), 4: ("uint8", "u1"), 5: ("int16", "i2"),
    6: ("int8", "i1"), 7: ("string", None), 9: ("int64", "i8"), 10: ("bool", "?"), 14: ("bfloat16", "u2"),
    17: ("uint16", "u2"), 19: ("float16", "f2"), 22: ("uint32", "u4"), 23: ("uint64", "u8"),
}

_NUMPY_CODES = {name: code for name, code in _DTYPES.values() if code is not None}


@dataclass(frozen=True)
class TensorEntry:
    """One variable of the bundle (a decoded ``BundleEntryProto``)."""

    name: str
    dtype: str  # "float32", "bfloat16", ... or "dtype_<enum>" when unknown
    shape: tuple[int, ...]
    shard_id: int = 0
    offset: int = 0
    size: int = 0  # bytes
    crc32c: int | None = None  # masked, as stored
    slices: tuple = field(default=())  # non-empty for a partitioned variable: [(start, length) per dim] per slice

    @property
    def partitioned(self) -> bool:
        return bool(self.slices)


# BundleEntryProto's fields (number: wire type): dtype, shape, shard_id, offset, size, crc32c (fixed32), slices
BUNDLE_ENTRY = {1: VARINT, 2: BYTES, 3: VARINT, 4: VARINT, 5: VARINT, 6: FIXED32, 7: BYTES}


def _parse_entry(name: str, buf: bytes) -> TensorEntry:
    dtype, shape, shard, offset, size, crc, slices = 0, [], 0, 0, 0, None, []
    for num, v in fields(buf, BUNDLE_ENTRY):
        if num == 1:
            dtype = v
        elif num == 2:  # TensorShapeProto: repeated Dim dim = 2 { int64 size = 1 }
            for dnum, dim in fields(v, {2: BYTES}):
                if dnum == 2:
                    shape.append(int64(dict(fields(dim, {1: VARINT})).get(1, 0)))
        elif num == 3:
            shard = v
        elif num == 4:
            offset = int64(v)
        elif num == 5:
            size = int64(v)
        elif num == 6:
            crc = v
        elif num == 7:  # TensorSliceProto: repeated Extent extent = 1 { int64 start = 1; int64 length = 2 }
            extents = []
            for enum_, ext in fields(v, {1: BYTES}):
                if enum_ == 1:
                    e = dict(fields(ext, {1: VARINT, 2: VARINT}))
                    extents.append((int64(e.get(1, 0)), int64(e[2]) if 2 in e else -1))
            slices.append(tuple(extents))
    dname = _DTYPES.get(dtype, (f"dtype_{dtype}", None))[0]
    return TensorEntry(name, dname, tuple(shape), shard, offset, size, crc, tuple(slices))


# ------------------------------------------------------------------------------------------------------------------
# The SSTable (.index)
# ------------------------------------------------------------------------------------------------------------------

_FOOTER_LEN = 48  # two BlockHandles padded to 40 bytes + 8-byte magic
_TABLE_MAGIC = 0xDB4775248B80FB57


def _read_block(raw: bytes, offset: int, size: int, where: str) -> bytes:
    """A block is ``contents[size] + type(1) + masked crc32c(contents + type)(4)``."""
    if offset + size + 5 > len(raw):
        raise CheckpointError(f"{where}: block at byte {offset} (+{size}) runs past the end of the file; "
                              "it is truncated")
    contents, btype = raw[offset : offset + size], raw[offset + size]
    (stored,) = struct.unpack_from("<I", raw, offset + size + 1)
    if crc32c(raw[offset : offset + size + 1]) != unmask_crc(stored):
        raise CheckpointError(f"{where}: checksum mismatch in the block at byte {offset}; the file is corrupt")
    if btype != 0:
        raise CheckpointError(f"{where}: block at byte {offset} is compressed (type {btype}); only uncompressed "
                              "tables are supported (TensorFlow writes checkpoint indexes uncompressed)")
    return contents


def _block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """Entries of one block: ``varint shared, varint non_shared, varint value_len, key_delta, value``,
    followed by the restart array (uint32 each) and its length (uint32), which we skip."""
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * num_restarts
    if end < 0:
        raise ValueError(f"{num_restarts} restart points do not fit in a block of {len(block)} bytes")
    out, pos, key = [], 0, b""
    while pos < end:
        shared, pos = varint(block, pos)
        non_shared, pos = varint(block, pos)
        vlen, pos = varint(block, pos)
        if shared > len(key) or pos + non_shared + vlen > end:  # lengths are bounded by the block, never trusted
            raise ValueError(f"entry at byte {pos} of a block claims more bytes than the block holds")
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    return out


def _read_table(path: Path) -> list[tuple[bytes, bytes]]:
    raw = path.read_bytes()
    if len(raw) < _FOOTER_LEN:
        raise CheckpointError(f"{path}: {len(raw)} bytes is too short for a checkpoint index (truncated?)")
    footer = raw[-_FOOTER_LEN:]
    if struct.unpack_from("<Q", footer, 40)[0] != _TABLE_MAGIC:
        raise CheckpointError(f"{path}: not a TensorFlow checkpoint index (bad magic number; truncated or wrong file)")
    try:
        _, pos = varint(footer, 0)  # metaindex handle: unused by bundles
        _, pos = varint(footer, pos)
        index_off, pos = varint(footer, pos)
        index_size, pos = varint(footer, pos)
        entries = []
        for _, handle in _block_entries(_read_block(raw, index_off, index_size, str(path))):
            off, p = varint(handle, 0)
            size, _ = varint(handle, p)
            entries += _block_entries(_read_block(raw, off, size, str(path)))
    except (ValueError, struct.error, IndexError) as e:
        raise CheckpointError(f"{path}: malformed checkpoint index ({e})") from None
    return entries


# ------------------------------------------------------------------------------------------------------------------
# The bundle
# ------------------------------------------------------------------------------------------------------------------


def resolve_prefix(path: str | os.PathLike) -> Path:
    """Accept ``.../model.ckpt-best``, ``.../model.ckpt-best.index``, a ``.data-*`` shard, a folder with a
    ``checkpoint`` state file or exactly one ``*.index``, or a TF-Hub module folder (``variables/variables.index``)."""
    p = Path(path)
    if p.name.endswith(".index"):
        return p.with_name(p.name[: -len(".index")])
    if ".data-" in p.name:
        return p.with_name(p.name.split(".data-")[0])
    if p.is_dir():
        if (p / "variables" / "variables.index").is_file():
            return p / "variables" / "variables"
        state = p / "checkpoint"
        if state.is_file():  # text proto: model_checkpoint_path: "model.ckpt-1000"
            for line in state.read_text(errors="replace").splitlines():
                if line.startswith("model_checkpoint_path:"):
                    name = line.split(":", 1)[1].strip().strip('"')
                    return Path(name) if os.path.isabs(name) else p / name
        found = sorted(p.glob("*.index"))
        if len(found) == 1:
            return found[0].with_name(found[0].name[: -len(".index")])
        if found:
            names = ", ".join(f.name[: -len(".index")] for f in found)
            raise CheckpointError(f"{p}: holds several checkpoints ({names}); pass the prefix of one of them")
        raise CheckpointNotFoundError(f"{p}: no TensorFlow checkpoint (*.index) in this folder")
    return p


class TFCheckpoint:
    """A TF V2 checkpoint opened for reading: ``ckpt.names()``, ``ckpt.entry(name)``, ``ckpt.read(name)``.

    Opening checks that every data shard exists and is long enough for the entries it holds, so a missing or
    truncated shard is reported up front with the file and the variables affected, and that every readable entry's
    shape matches its byte size, so nothing is ever sized by an index that lies.
    """

    def __init__(self, path: str | os.PathLike):
        self.prefix = resolve_prefix(path)
        index = self.prefix.with_name(self.prefix.name + ".index")
        if not index.is_file():
            raise CheckpointNotFoundError(f"{index}: checkpoint index not found (pass the prefix, e.g. "
                                          "path/model.ckpt-best, of files model.ckpt-best.index/.data-*)")
        self.index_path = index
        self.num_shards, self.big_endian = 1, False
        self._entries: dict[str, TensorEntry] = {}
        self._slice_keys = 0
        for key, value in _read_table(index):
            if key == b"":  # BundleHeaderProto: int32 num_shards = 1; Endianness endianness = 2
                try:
                    header = dict(fields(value, {1: VARINT, 2: VARINT}))
                except ValueError as e:
                    raise CheckpointError(f"{index}: malformed checkpoint header ({e})") from None
                self.num_shards, self.big_endian = header.get(1, 1), header.get(2, 0) == 1
            elif key[:1] == b"\x00":  # slice of a partitioned variable (binary OrderedCode key)
                self._slice_keys += 1
            else:
                name = key.decode("utf-8", errors="replace")
                try:
                    self._entries[name] = _parse_entry(name, value)
                except (ValueError, KeyError, struct.error) as e:
                    raise CheckpointError(f"{index}: malformed entry for variable {name!r} ({e})") from None
        # Every count and size below comes from the index, which may lie (its checksums only prove it was not
        # damaged after writing): each is checked against the files on disk before anything is sized by it.
        for e in self._entries.values():
            self._check_shape(e)
        self._check_shards(self._shard_sizes())

    def shard_path(self, shard: int) -> Path:
        return self.prefix.with_name(f"{self.prefix.name}.data-{shard:05d}-of-{self.num_shards:05d}")

    def _check_shape(self, e: TensorEntry) -> None:
        """A readable entry's shape must hold exactly ``size`` bytes of its dtype, and be one NumPy can make."""
        if e.partitioned or e.dtype not in _NUMPY_CODES:  # never read (`check_supported`), so never sized by shape
            return
        itemsize = np.dtype(_NUMPY_CODES[e.dtype]).itemsize
        # Python ints, not int64: a crafted [2**32, 2**32] must not wrap around to 0 elements. NumPy refuses any
        # shape whose non-zero dimensions span more than sys.maxsize bytes, even with no elements ([2**62, 0]).
        span = math.prod(d for d in e.shape if d) * itemsize
        if any(d < 0 for d in e.shape) or math.prod(e.shape) * itemsize != e.size or span > sys.maxsize:
            raise CheckpointError(f"checkpoint {self.prefix}: variable {e.name!r} {e.dtype}{list(e.shape)} should "
                                  f"take {max(math.prod(e.shape), 0) * itemsize} bytes but the index says {e.size}; "
                                  f"corrupt index {self.index_path}")

    def _shard_sizes(self) -> dict[int, int]:
        """Byte size of each data shard, by id; a missing shard is reported with the variables it holds.

        The shard ids present are found by listing the folder, never by counting up to the header's num_shards: a
        corrupt header may claim 2**31 shards, and a list or a loop that long would never end.
        """
        n = self.num_shards
        if n < 1:
            raise CheckpointError(f"{self.index_path}: the header gives num_shards = {n}; a checkpoint has at least "
                                  "one data shard, so the index is corrupt")
        pattern = re.compile(re.escape(self.prefix.name) + r"\.data-(\d+)-of-\d+")
        sizes = {}
        for item in os.scandir(self.prefix.parent):
            m = pattern.fullmatch(item.name)
            if m and int(m[1]) < n and item.name == self.shard_path(int(m[1])).name and item.is_file():
                sizes[int(m[1])] = item.stat().st_size
        if len(sizes) < n:
            first = itertools.islice((i for i in range(n) if i not in sizes), 3)  # stops after len(sizes) + 3 ids
            shown = ", ".join(str(self.shard_path(i)) for i in first)
            more = f" and {n - len(sizes) - 3} more" if n - len(sizes) > 3 else ""
            lost = sorted(e.name for e in self._entries.values() if e.shard_id not in sizes)
            affected = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
            raise CheckpointNotFoundError(
                f"checkpoint {self.prefix}: missing data shard(s) {shown}{more} (the index lists {n} shard(s), "
                f"{len(sizes)} found); variables affected: {affected or 'none'}")
        return sizes

    def _check_shards(self, sizes: dict[int, int]) -> None:
        """Every readable entry's bytes lie inside its shard file, so reading one allocates no more than is on disk."""
        for e in sorted(self._entries.values(), key=lambda e: (e.shard_id, e.offset + e.size)):
            if e.partitioned:
                continue
            if e.shard_id not in sizes:
                raise CheckpointError(f"{self.index_path}: variable {e.name!r} is in shard {e.shard_id} but the "
                                      f"header lists {self.num_shards} shard(s); the index is corrupt")
            if e.offset < 0 or e.size < 0:
                raise CheckpointError(f"{self.index_path}: variable {e.name!r} has offset {e.offset} and size "
                                      f"{e.size}; negative values mean the index is corrupt")
            have = sizes[e.shard_id]
            if e.offset + e.size > have:
                raise CheckpointError(
                    f"{self.shard_path(e.shard_id)}: truncated: {have} bytes, but variable {e.name!r} {list(e.shape)} "
                    f"needs bytes {e.offset}..{e.offset + e.size}; copy the file again")

    def names(self) -> list[str]:
        """Variable names, sorted (as ``tf.train.list_variables`` gives them)."""
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, name: str) -> TensorEntry:
        try:
            return self._entries[name]
        except KeyError:
            raise CheckpointError(f"checkpoint {self.prefix}: no variable {name!r}") from None

    def check_supported(self, name: str) -> None:
        """Raise a clear `CheckpointError` if ``name`` cannot be read (partitioned, or a non-numeric dtype)."""
        e = self.entry(name)
        if e.partitioned:
            raise CheckpointError(
                f"checkpoint {self.prefix}: variable {name!r} {list(e.shape)} is partitioned into {len(e.slices)} "
                "slices (saved with a variable partitioner); partitioned variables are unsupported -- re-save the "
                "checkpoint without partitioning (e.g. restore it in TensorFlow and save with a plain Saver)")
        if e.dtype not in _NUMPY_CODES:
            raise CheckpointError(f"checkpoint {self.prefix}: variable {name!r} has dtype {e.dtype}, which this "
                                  "reader does not support (numeric tensors only)")

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        """The variable as a NumPy array of its stored dtype (bfloat16, which NumPy lacks, is widened to float32)."""
        e = self.entry(name)
        self.check_supported(name)
        dtype = np.dtype(_NUMPY_CODES[e.dtype]).newbyteorder(">" if self.big_endian else "<")
        path = self.shard_path(e.shard_id)
        with open(path, "rb") as f:
            f.seek(e.offset)
            raw = f.read(e.size)
        if len(raw) != e.size:
            raise CheckpointError(f"{path}: truncated while reading variable {name!r}")
        if verify and e.crc32c is not None and crc32c(raw) != unmask_crc(e.crc32c):
            raise CheckpointError(f"{path}: checksum mismatch for variable {name!r} (bytes {e.offset}.."
                                  f"{e.offset + e.size}); the data file is corrupt -- copy it again")
        arr = np.frombuffer(raw, dtype=dtype).reshape(e.shape)
        if e.dtype == "bfloat16":  # bfloat16 is the top half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(arr.dtype.newbyteorder("=")) if self.big_endian else arr.copy()

    def __repr__(self) -> str:
        return f"TFCheckpoint({str(self.prefix)!r}, {len(self)} variables, {self.num_shards} shard(s))"
