"""Just enough of the protobuf wire format to read two kinds of message without a protobuf dependency:
SentencePiece's ``ModelProto`` (piece types and the normalizer's charsmap, in `litebert.tokenizer.tokenizer`) and
TensorFlow's tensor-bundle protos and SSTable varints (in `litebert.io.tf_checkpoint`). It is a low layer that
both use, so it lives at the top of the package rather than in ``io/``. The few writers at the bottom build the
SentencePiece ``ModelProto`` that `litebert.tokenizer.hf_json` rebuilds from an HF ``tokenizer.json``.

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


# The wire type of each kind of field a schema names (`fields`' ``schema``).
VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5


def fields(buf: bytes, schema: dict[int, int] | None = None) -> list[tuple[int, int | bytes]]:
    """Decode one message into [(field number, value)]: ints for varint and fixed64/fixed32 fields (little-endian,
    unsigned), bytes for length-delimited ones (strings, bytes, sub-messages, packed repeats).

    ``schema`` ({field number: wire type} of the fields the caller reads) is the message's declaration: a field it
    names with another wire type (an int where a sub-message is declared) is malformed input, refused here once for
    every reader, rather than a value of the wrong type handed to code that trusts the declaration. Fields the
    schema does not name pass, as protobuf keeps unknown fields."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):  # a caller's schema let an int through
        raise ValueError(f"expected a message, found the number {buf!r}")
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
        if schema is not None and schema.get(num, wire) != wire:
            raise ValueError(f"field {num} has wire type {wire}, declared {schema[num]}")
        out.append((num, value))
    return out


# ---------------------------------------------------------------- writing (SentencePiece ModelProto, hf_json.py)
def encode_varint(value: int) -> bytes:
    """Base-128 varint; a negative value is written as protobuf's 10-byte two's-complement ``int32``/``int64``."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint_field(num: int, value: int) -> bytes:
    """An int/enum/bool field (wire type 0)."""
    return encode_varint(num << 3) + encode_varint(int(value))


def float_field(num: int, value: float) -> bytes:
    """A ``float`` field (wire type 5, little-endian IEEE single)."""
    return encode_varint(num << 3 | 5) + struct.pack("<f", value)


def bytes_field(num: int, value: bytes | str) -> bytes:
    """A string, bytes or sub-message field (wire type 2)."""
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return encode_varint(num << 3 | 2) + encode_varint(len(data)) + data
