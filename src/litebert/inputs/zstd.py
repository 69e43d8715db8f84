"""Reading zstd-compressed files (``*.zst``, recognised by their magic bytes ``28 B5 2F FD``) as a stream.

Decompression is the `zstandard` package's (in the ``datasets`` extra), imported only when such a file is
opened. Its stream reader ends silently when a file is cut short inside a frame, where gzip, xz and bz2 raise; so
at the end of the stream the frames are walked (their headers and block headers, RFC 8878 §3.1) to check that the
file ends where its last frame does, and a cut file raises `EOFError` like the other codecs.
"""

from __future__ import annotations

import io
from typing import BinaryIO

from litebert.errors import DataError
from litebert.extras import install_hint

MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE = 0x184D2A50  # skippable frames: magic 0x184D2A50..5F, a 4-byte size, then that many bytes


class ZstdFile(io.BufferedReader):
    """The decompressed content of the open zstd file ``f`` (closed with it), all its frames in order. A corrupt
    stream raises `OSError`, a truncated one `EOFError`, as `gzip.GzipFile` does."""

    codec = "zstd"

    def __init__(self, f: BinaryIO):
        super().__init__(_ZstdRaw(f), buffer_size=1 << 16)


class _ZstdRaw(io.RawIOBase):
    def __init__(self, f: BinaryIO):
        try:
            import zstandard
        except ImportError:
            f.close()
            hint = install_hint("datasets", "zstandard")
            raise DataError(f"{getattr(f, 'name', 'input')}: a zstd-compressed file; reading it needs zstandard "
                            f"({hint})") from None
        self._f = f
        self._error = zstandard.ZstdError
        self._reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True, closefd=False)
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            n = self._reader.readinto(buffer)
        except self._error as e:
            raise OSError(str(e)) from None
        if n == 0 and len(buffer) and not self._ended:
            self._ended = True
            if frames_end_past(self._f):
                raise EOFError("the file ends inside a zstd frame")
        return n

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
            self._f.close()
        super().close()


def frames_end_past(f: BinaryIO) -> bool:
    """Whether the zstd file open as ``f`` (read to its end: it is seeked) is cut short: its last frame, by its
    headers, would end past the file's end. A stream that cannot seek (a URL served without its size) is not
    checked: False."""
    try:
        size = f.seek(0, io.SEEK_END)
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return False
    try:
        pos = 0
        while pos < size:
            f.seek(pos)
            head = f.read(8)
            if len(head) < 5:
                return True
            magic = int.from_bytes(head[:4], "little")
            if magic & 0xFFFFFFF0 == _SKIPPABLE:
                pos += 8 + int.from_bytes(head[4:8], "little")
            elif head[:4] == MAGIC:
                pos = _frame_end(f, pos, head[4])
            else:
                return False  # not a frame: the decompressor reports what it makes of it
        return pos > size
    finally:
        f.seek(size)  # where the decompressor left it: at the end


def _frame_end(f: BinaryIO, pos: int, descriptor: int) -> int:
    """The offset just past the zstd frame at ``pos`` whose header descriptor byte is ``descriptor``."""
    single_segment = descriptor >> 5 & 1
    content_size = (single_segment, 2, 4, 8)[descriptor >> 6]  # Frame_Content_Size field bytes
    pos += 4 + 1 + (1 - single_segment) + (0, 1, 2, 4)[descriptor & 3] + content_size
    last = False
    while not last:
        f.seek(pos)
        header = f.read(3)
        if len(header) < 3:
            return pos + 3  # past the end: the file stops inside the frame
        value = int.from_bytes(header, "little")
        last, kind, size = value & 1, value >> 1 & 3, value >> 3
        pos += 3 + (1 if kind == 1 else size)  # an RLE block (kind 1) stores one byte
    return pos + (4 if descriptor & 4 else 0)  # the content checksum
