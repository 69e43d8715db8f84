"""Just enough of the protobuf wire format to read two kinds of message without a protobuf dependency:
SentencePiece's ``ModelProto`` (piece types and the normalizer's charsmap, in `litebert.tokenizer.tokenizer`) and
TensorFlow's tensor-bundle protos and SSTable varints (in `litebert.io.tf_checkpoint`). It is a low layer that
both use, so it lives at the top of the package rather than in ``io/``.

Malformed input raises ``ValueError``; the callers turn it into an error naming the file.
"""

from __future__ import annotations

import struct


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the base-128 varint at ``pos``."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def int64(v: int) -> int:
    """A varint read as protobuf's two's-complement ``int64``."""
    return v - (1 << 64) if v >= 1 << 63 else v


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """Decode one message into [(field number, value)]: ints for varint and fixed64/fixed32 fields (little-endian,
    unsigned), bytes for length-delimited ones (strings, bytes, sub-messages, packed repeats)."""
    out, pos = [], 0
    while pos < len(buf):
        tag, pos = varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise ValueError("truncated fixed-width field")
            value, pos = struct.unpack_from("<Q" if wire == 1 else "<I", buf, pos)[0], pos + size
        elif wire == 2:
            length, pos = varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated length-delimited field")
            value, pos = bytes(buf[pos:pos + length]), pos + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((num, value))
    return out
