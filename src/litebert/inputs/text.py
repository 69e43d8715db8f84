"""Reading input: the one place where litebert opens the files a user gives it, and decides what they hold.

* `expand_inputs`: files, directories (every file below, recursively, hidden ones skipped) and globs (also when the
  shell did not expand them, e.g. ``'corpus/*.xz'`` quoted) to a sorted, de-duplicated list of files. A `datasets`
  ``save_to_disk`` folder is one input (of a ``DatasetDict``, its "train" split); `corpus_sources` also takes a
  ``datasets.Dataset`` or an iterable of strings in place of files (`litebert.inputs.columnar.text_source`). A URL
  (``s3://``, ``https://``...) is a file, folder or glob too, listed and streamed through fsspec
  (`litebert.inputs.remote`): everything below reads it as it reads a local file.
* `open_binary`: gzip, xz, bz2 and zstd are decompressed transparently, recognised by their magic bytes, so
  compressed files need no special name. What is not text is recognised by its first bytes and refused in one line
  naming the format (a zip archive, a PDF, a Parquet file named ``.txt``, or bytes with a NUL among the first
  KiB), never decoded, with or without ``encoding_errors="replace"``.
* `iter_lines`: ``(line number, byte offset, text)`` of each line, decoded as UTF-8. A line longer than
  ``max_line_bytes`` (`MAX_LINE_BYTES`, 64 MiB, by default) is refused in one line naming the file, the line and the
  argument to raise, after reading at most that many bytes of it: a file without line breaks (a 500 MB line in a
  42 kB ``.zst``, text with old Mac ``\\r`` endings, a minified JSON array) is found at a bounded cost instead of
  being held whole.
* `open_text`: the same lines as a text stream, for ``csv`` and ``json.load``.
* Records: `iter_records` and `iter_record_texts` read JSON lines (`iter_jsonl`, `text_field`) and tables alike:
  Parquet and Arrow files named ``*.parquet``, ``*.arrow`` or ``*.feather`` (and holding one, by their magic bytes)
  and `datasets` folders, through `litebert.inputs.columnar`; a record's line number is a table's row number (`where`).

Every problem is a `DataError` naming the file and line: invalid UTF-8 gives the byte offset of the bad byte (in the
decompressed stream for compressed files) unless ``encoding_errors="replace"`` substitutes U+FFFD; a corrupt or
truncated compressed stream and bad JSON are named likewise. A UTF-8 byte order mark at the start of a file is
dropped (it would otherwise stick to the first word or the first column name). JSON is the one way valid UTF-8 can
still give text that is not Unicode: an escape ``\\ud800`` without its other UTF-16 half decodes to a lone surrogate,
which SentencePiece and every UTF-8 writer refuse; `mend_lone_surrogates` reports it (file, line and field) or, with
``"replace"``, makes it U+FFFD like a bad byte.
"""

from __future__ import annotations

import bz2
import functools
import glob
import gzip
import io
import lzma
import os
import re
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Union

from litebert.errors import DataError
from litebert.errors import literal as _literal
from litebert.files import BOM as _BOM
from litebert.files import json_kind, parse_json
from litebert.inputs import columnar, urls
from litebert.inputs.columnar import TextSource
from litebert.inputs.hub_datasets import DatasetSplit
from litebert.inputs.remote import ReadFailure, RemotePath, as_path, is_url
from litebert.inputs.zstd import MAGIC as _ZSTD_MAGIC
from litebert.inputs.zstd import ZstdFile

ENCODING_ERRORS = ("strict", "replace")
COMPRESSED_SUFFIXES = (".gz", ".xz", ".bz2", ".zst")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
TABLE_SUFFIXES = (".parquet", ".arrow", ".feather")
_MAGIC = {b"\x1f\x8b": gzip.GzipFile, b"\xfd7zXZ\x00": lzma.LZMAFile, b"BZh": bz2.BZ2File, _ZSTD_MAGIC: ZstdFile}
_CODECS = {gzip.GzipFile: "gzip", lzma.LZMAFile: "xz", bz2.BZ2File: "bz2", ZstdFile: "zstd"}
_SNIFF_BYTES = 1024  # a NUL among the first KiB of a file makes it binary
# The longest line read, in bytes before decoding (the memory a line costs, whatever it then becomes). Generous: a
# whole book as one JSON line is a few MB, a whole SQuAD training file on one line 42 MB.
MAX_LINE_BYTES = 64 << 20
# A \uD800-\uDFFF escape in JSON text (JSON spells escapes with a lowercase u, their hex digits in either case). Only
# text holding one can decode to a lone surrogate, so only such text has its strings walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def expand_inputs(inputs: list[str | os.PathLike], split: str = "train") -> list[Path]:
    """Files, directories and globs to a list of files: each argument's files sorted, in the order the arguments were
    given, each file once. A directory gives every regular file below it whose path (below the directory) has no
    hidden part; a glob is expanded here (``**`` reaches into subdirectories), a directory it matches like a
    directory. A `datasets` ``save_to_disk`` folder, given or met below a directory, is one input: of a ``Dataset``
    the folder, of a ``DatasetDict`` the folder of its ``split`` split (or of its only one). An argument that matches
    no file is a `DataError`."""
    files: list[Path] = []
    for spec in inputs:
        if isinstance(spec, TextSource):  # already a source: as `corpus_sources` gave it
            files.append(spec)  # type: ignore[arg-type]
            continue
        if is_url(spec):  # read through fsspec (`litebert.inputs.remote`)
            files.extend(urls.expand(spec, split))
            continue
        if not isinstance(spec, (str, os.PathLike)):
            raise DataError(f"inputs: a list of files, folders and globs holds a {_literal(type(spec).__name__)}; give "
                            "a datasets.Dataset or an iterable of texts alone, not in a list")
        spec = str(spec)
        path = Path(spec)
        if path.is_dir():
            found = _files_below(path, split)
        elif path.is_file():
            found = [path]
        elif glob.has_magic(spec):
            found = sorted(f for match in glob.glob(spec, recursive=True)
                           for f in (_files_below(Path(match), split) if Path(match).is_dir() else [Path(match)]))
        else:
            raise DataError(f"input {spec!r} does not exist (give a file, a directory or a glob such as "
                            f"'corpus/*.txt'{_TEXTS_HINT if any(c.isspace() for c in spec) else ''})")
        if not found:
            raise DataError(f"input {spec!r} matches no files")
        files.extend(found)
    return _unique(files)


# A missing input that looks like text rather than a file name: a list of strings was meant as texts.
_TEXTS_HINT = "; to read strings as texts, pass an iterator of them, iter(texts), not a list, which names files"


def _unique(files: list[Path]) -> list[Path]:
    """``files`` without repeats, and without the files inside a `datasets` folder that is itself an input (a glob
    such as ``'data/**'`` matches both)."""
    folders = {f.resolve() for f in files if isinstance(f, Path) and f.is_dir()}
    seen: set = set()
    unique = []
    for f in files:
        key = f.resolve() if isinstance(f, Path) else f
        if key not in seen and not (folders and any(p in folders for p in getattr(key, "parents", ()))):
            seen.add(key)
            unique.append(f)
    return unique


def _files_below(folder: Path, split: str) -> list[Path]:
    """The regular files below ``folder`` with no hidden part (below it), sorted; a `datasets` folder is one input
    (`expand_inputs`)."""
    if columnar.dataset_folder(folder):
        return [_dataset_input(folder, split)]
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        base = Path(root)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for d in [d for d in dirs if columnar.dataset_folder(base / d)]:
            dirs.remove(d)  # read as a table, not as the files it holds
            found.append(_dataset_input(base / d, split))
        found.extend(base / n for n in names if not n.startswith(".") and (base / n).is_file())
    return sorted(found)


def _dataset_input(folder: Path, split: str) -> Path:
    if columnar.dataset_folder(folder) == "dataset_dict":
        return columnar.split_folder(folder, (split,))
    return folder


# What a corpus command reads (`corpus_sources`): a path, a list or tuple of paths, or texts held in Python.
Corpus = Union[str, os.PathLike, Iterable]


def corpus_sources(inputs: Corpus, text_field: str = "text") -> list[Path | TextSource]:
    """What a corpus command reads: ``inputs`` as files (a path, or a list or tuple of files, folders and globs:
    `expand_inputs`), or, given in Python, texts (a ``datasets.Dataset``, ``IterableDataset`` or ``DatasetDict``, a
    pandas ``DataFrame``, or any other iterable of strings: `litebert.inputs.columnar.text_source`)."""
    if isinstance(inputs, (str, os.PathLike)):
        return expand_inputs([inputs])
    if isinstance(inputs, (list, tuple)):
        return expand_inputs(list(inputs))
    return [columnar.text_source(inputs, text_field)]


def format_suffix(path: str | os.PathLike) -> str:
    """The suffix that names the file's format, after any compression suffix: ``'a.jsonl.gz'`` -> ``'.jsonl'``."""
    suffixes = [s.lower() for s in getattr(as_path(path), "suffixes", ())]  # texts or a split in memory: none
    while suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def is_jsonl(path: str | os.PathLike) -> bool:
    """Whether the name says JSON lines: ``*.jsonl``, ``*.json`` or ``*.ndjson``, optionally compressed."""
    return format_suffix(path) in JSONL_SUFFIXES


def compression(path: str | os.PathLike) -> str | None:
    """``'gzip'``, ``'xz'``, ``'bz2'`` or ``'zstd'`` by the file's magic bytes, or None."""
    return _codec(_read_head(as_path(path))[:6])


def _codec(head: bytes) -> str | None:
    return next((_CODECS[cls] for magic, cls in _MAGIC.items() if head.startswith(magic)), None)


def input_bytes(source: Path | TextSource) -> int | None:
    """The bytes that reading ``source`` counts (a progress bar's total): a plain file's size; None when unknown (a
    compressed file, a table, texts in memory)."""
    if isinstance(source, TextSource) or table_kind(source) or compression(source):
        return None
    return source.size if isinstance(source, RemotePath) else Path(source).stat().st_size


# ------------------------------------------------------------------------------------------------------ tables
def table_kind(path: str | os.PathLike | TextSource) -> str | None:
    """How `litebert.inputs.columnar` reads ``path`` as a table: ``"parquet"``, ``"arrow"`` (the IPC file format),
    ``"arrow-stream"`` or ``"dataset"`` (a `datasets` folder); None for what is not a table. The name decides (a
    folder, ``*.parquet``, ``*.arrow``, ``*.feather``) and the magic bytes must agree: a file so named that holds
    anything else, or a compressed one, is a `DataError`."""
    if isinstance(path, TextSource):
        return None
    if isinstance(path, DatasetSplit):
        return "split"
    path = as_path(path)
    if path.is_dir():
        return "dataset" if columnar.dataset_folder(path) else None
    if format_suffix(path) not in TABLE_SUFFIXES:
        return None
    head = _read_head(path)
    kind = _table_magic(head)
    if kind is not None:
        return kind
    codec = _codec(head)
    if codec is not None:
        raise DataError(f"{path}: a {codec}-compressed table; decompress it first (Parquet and Arrow compress "
                        "their columns themselves)")
    found = _binary_format(head)
    raise DataError(f"{path}: named as a table but not a Parquet or Arrow file"
                    + (f" ({found[0]})" if found else " (it holds text?)"))


def is_records(path: str | os.PathLike | TextSource) -> bool:
    """Whether ``path`` is read as records: JSON lines (by name), a table (`table_kind`) or texts in memory."""
    return isinstance(path, TextSource) or is_jsonl(path) or table_kind(path) is not None


def where(path: str | os.PathLike | TextSource, number: int) -> str:
    """Where record ``number`` of ``path`` is, for messages: ``file.jsonl:12`` (a line) or ``file.parquet: row 12``
    (a table's row, counted from 0)."""
    table = (isinstance(path, (TextSource, DatasetSplit)) or format_suffix(path) in TABLE_SUFFIXES
             or as_path(path).is_dir())
    return f"{path}: row {number}" if table else f"{path}:{number}"


def _read_head(path: Path) -> bytes:
    with _open_file(path) as f:
        try:
            return f.read(_SNIFF_BYTES)
        except OSError as e:
            raise DataError(f"{path}: cannot read ({e.strerror or e})") from None


def _open_file(path) -> BinaryIO:
    """``path`` opened for reading bytes, buffered (``peek`` works): a local file, or a URL through
    `litebert.inputs.remote` (whose failures are one-line errors naming it). A `DataError` when it cannot be opened."""
    if isinstance(path, DatasetSplit):
        raise DataError(f"{path}: a dataset split, read as records; this reads files (give the data's "
                        "files, or a task that reads tables)")
    path = as_path(path)
    if isinstance(path, RemotePath):
        return path.open()
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: a folder, not a file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot open ({e.strerror or e})") from None


def _table_magic(head: bytes) -> str | None:
    """The table format that ``head`` starts, or None. An Arrow stream starts with a message: the continuation
    marker 0xFFFFFFFF, then the metadata's length (little-endian int32), positive and padded to 8 bytes."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1"):
        return "arrow"
    if head.startswith(b"\xff\xff\xff\xff") and len(head) >= 8:
        length = int.from_bytes(head[4:8], "little", signed=True)
        if length > 0 and length % 8 == 0:
            return "arrow-stream"
    return None


# --------------------------------------------------------------------------------------------------- not text
# Formats recognised by their first bytes that are not text: (bytes, at offset, what the file is, what to do).
_NOT_TEXT = (
    (b"PK\x03\x04", 0, "a zip archive", "unpack it first"),
    (b"PK\x05\x06", 0, "an empty zip archive", "unpack it first"),
    (b"7z\xbc\xaf\x27\x1c", 0, "a 7z archive", "unpack it first"),
    (b"Rar!\x1a\x07", 0, "a RAR archive", "unpack it first"),
    (b"ustar", 257, "a tar archive", "unpack it first"),
    (b"%PDF", 0, "a PDF document", "extract its text first (e.g. with pdftotext)"),
    (b"SQLite format 3\x00", 0, "an SQLite database", "export its text to JSON lines, CSV or Parquet first"),
    (b"\x93NUMPY", 0, "a NumPy array (.npy)", "litebert reads text, not arrays"),
    (b"\x89HDF\r\n\x1a\n", 0, "an HDF5 file", "export its text to JSON lines, CSV or Parquet first"),
    (b"FEA1", 0, "a Feather v1 file", "convert it to Parquet or Arrow (Feather v2) first"),
    (b"\x04\x22\x4d\x18", 0, "an LZ4-compressed file", "decompress it first (gzip, xz, bz2 and zstd are read as "
                                                       "they are)"),
    (b"\x89PNG\r\n\x1a\n", 0, "a PNG image", "litebert reads text"),
    (b"\xff\xd8\xff", 0, "a JPEG image", "litebert reads text"),
    (b"GIF8", 0, "a GIF image", "litebert reads text"),
    (b"\xff\xfe", 0, "UTF-16 text", "convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff", 0, "UTF-16 text", "convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"),
)
_TABLES = {"parquet": ("a Parquet file", "*.parquet"), "arrow": ("an Arrow IPC file", "*.arrow"),
           "arrow-stream": ("an Arrow IPC stream", "*.arrow")}


_GIVE_TEXT = "give text (UTF-8)"


def _binary_format(head: bytes) -> tuple[str, str] | None:
    """(what the file is, what to do) when ``head``, a file's first bytes, is not the start of text; None if it
    may be."""
    table = _table_magic(head)
    if table is not None:
        return _TABLES[table][0], f"name it {_TABLES[table][1]} to read it as a table"
    for magic, offset, what, advice in _NOT_TEXT:
        if head[offset:offset + len(magic)] == magic:
            return what, advice
    nul = head.find(b"\x00", 0, _SNIFF_BYTES)
    if nul >= 0:
        return f"binary data (a NUL byte at byte {nul})", _GIVE_TEXT
    return None


def _not_text(path, codec: str | None, found: tuple[str, str]) -> DataError:
    what, advice = found
    if codec is None and format_suffix(path) in TABLE_SUFFIXES and "table" in advice:
        advice = "this input is read as text, and tables are read only where records are (as JSON lines)"
    elif codec is not None and "table" in advice:
        advice = f"decompress it and {advice}"
    inside = f"{'an' if codec == 'xz' else 'a'} {codec}-compressed file holding " if codec else ""
    return DataError(f"{path}: {inside}{what}, not {'UTF-8 ' if what.endswith('text') else ''}text; {advice}")


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """Open a file for reading bytes, decompressing gzip, xz, bz2 and zstd (recognised by their magic bytes). A file
    whose (decompressed) first bytes are not text is a `DataError` naming what it is (`_binary_format`). ``path``
    may be a URL (`litebert.inputs.remote`), streamed."""
    f = _open_file(path)
    stream: BinaryIO = f
    head = _peek(f, path)[:6]
    cls = next((cls for magic, cls in _MAGIC.items() if head.startswith(magic)), None)
    codec = _CODECS.get(cls)
    try:
        if cls is not None:
            stream = cls(fileobj=f) if cls is gzip.GzipFile else cls(f)  # type: ignore[assignment]
        found = _binary_format(_peek(stream, path))
        if found is not None and codec is not None and found[1] == _GIVE_TEXT:
            _check_decompresses(stream, path, 0)  # a NUL from a damaged stream is not the file's content
    except BaseException:
        stream.close()
        raise
    if found is not None:
        stream.close()
        raise _not_text(path, codec, found)
    return stream


def _peek(f: BinaryIO, path) -> bytes:
    """The first bytes of ``f`` (as many as one read gives, up to `_SNIFF_BYTES`), left unread."""
    try:
        return f.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]  # type: ignore[attr-defined]
    except _DECOMPRESS_ERRORS as e:
        raise _corrupt(path, f, 0, e) from None


def _check_encoding_errors(encoding_errors: str) -> None:
    if encoding_errors not in ENCODING_ERRORS:
        raise DataError(f"encoding errors must be one of {', '.join(ENCODING_ERRORS)}, not {encoding_errors!r}")


def _check_max_line_bytes(max_line_bytes: int | None) -> None:
    if max_line_bytes is not None and (isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int)
                                       or max_line_bytes < 1):
        raise DataError("{max_line_bytes}: expected an integer >= 1", max_line_bytes=max_line_bytes)


def _bounded(f: BinaryIO, max_line_bytes: int | None) -> Iterator[bytes]:
    """The binary lines of ``f``, each read with at most ``max_line_bytes + 1`` bytes held: a longer line comes out
    as its first ``max_line_bytes + 1`` bytes, without a line ending, for the caller to refuse."""
    return iter(f) if max_line_bytes is None else iter(functools.partial(f.readline, max_line_bytes + 1), b"")


def _lines(f: BinaryIO, path: str | os.PathLike, encoding_errors: str,
           max_line_bytes: int | None = MAX_LINE_BYTES) -> Iterator[tuple[int, int, str]]:
    """``(line number, byte offset, text with its line ending)`` of the open file ``f`` (closed at the end), with
    the errors of the module docstring; a line of more than ``max_line_bytes`` bytes (its ending not counted) is a
    `DataError`, None reads lines of any length."""
    offset = 0
    with f:
        where = "byte offset" if type(f) is io.BufferedReader else "decompressed byte offset"
        try:
            # Binary lines end at b"\n" only, as in `wc -l` and editors.
            for lineno, raw in enumerate(_bounded(f, max_line_bytes), start=1):
                if max_line_bytes is not None and len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                    raise _too_long(path, lineno, offset, where, max_line_bytes)
                skip = len(_BOM) if offset == 0 and raw.startswith(_BOM) else 0
                try:
                    text = raw[skip:].decode("utf-8", errors=encoding_errors)
                except UnicodeDecodeError as e:
                    bad = skip + e.start
                    if where != "byte offset":  # garbage from a damaged compressed stream is not the text's fault
                        _check_decompresses(f, path, offset)
                    raise DataError(f"{_literal(path)}:{lineno}: invalid UTF-8 at {where} {offset + bad} "
                                    f"(byte 0x{raw[bad]:02x}); fix the file or pass " + "{encoding_errors} to read "
                                    "it as U+FFFD", encoding_errors="replace") from None
                yield lineno, offset, text
                offset += len(raw)
        except _DECOMPRESS_ERRORS as e:
            raise _corrupt(path, f, offset, e) from None


def _too_long(path, lineno: int, offset: int, where: str, max_line_bytes: int) -> DataError:
    return DataError(f"{_literal(path)}:{lineno}: a line longer than " + "{max_line_bytes:value}" + f" bytes (it "
                     f"starts at {where} {offset}; a file without line breaks, or with \\r alone ending its lines?); "
                     "give text with a line per sentence or record, or raise {max_line_bytes:flag}",
                     max_line_bytes=max_line_bytes)


# A corrupt or truncated compressed stream: gzip raises BadGzipFile (an OSError), zlib.error or EOFError; xz
# LZMAError or EOFError; bz2 OSError or EOFError; zstd (`litebert.inputs.zstd`) OSError or EOFError.
_DECOMPRESS_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)


def _corrupt(path: str | os.PathLike, f: BinaryIO, offset: int, e: BaseException) -> DataError:
    if isinstance(e, ReadFailure):  # the network failed, not the file
        where = "byte offset" if type(f) is io.BufferedReader else "decompressed byte offset"
        return DataError(f"{path}: {e} at {where} {offset}")
    if type(f) is io.BufferedReader:
        return DataError(f"{path}: cannot read past byte offset {offset}: {e}")
    kind = _CODECS.get(type(f), "compressed")
    return DataError(f"{path}: corrupt or truncated {kind} file (cannot decompress past byte {offset} of its "
                     f"content: {e}); compress it again or give the uncompressed file")


def _check_decompresses(f: BinaryIO, path: str | os.PathLike, offset: int) -> None:
    """Read the rest of the compressed stream ``f``: a `DataError` if it is corrupt (its checksum or framing)."""
    try:
        while f.read(1 << 20):
            pass
    except _DECOMPRESS_ERRORS as e:
        raise _corrupt(path, f, offset, e) from None


def iter_lines(path: str | os.PathLike, encoding_errors: str = "strict",
               max_line_bytes: int | None = MAX_LINE_BYTES) -> Iterator[tuple[int, int, str]]:
    """``(line number, byte offset, text)`` of each line of ``path``, the text without its line ending; numbers
    from 1, offsets of the line's first byte (in the decompressed stream for compressed files). A line of more than
    ``max_line_bytes`` bytes is a `DataError` (None: no limit)."""
    _check_encoding_errors(encoding_errors)
    _check_max_line_bytes(max_line_bytes)
    for lineno, offset, text in _lines(open_binary(path), path, encoding_errors, max_line_bytes):
        yield lineno, offset, text.rstrip("\r\n")


class TextStream(io.TextIOBase):
    """A read-only text stream over `iter_lines`' decoding: lines keep their endings (as with ``newline=""``, which
    ``csv`` wants), and a bad byte is reported with its file, line and byte offset, a line longer than
    ``max_line_bytes`` likewise."""

    def __init__(self, path: str | os.PathLike, encoding_errors: str = "strict",
                 max_line_bytes: int | None = MAX_LINE_BYTES):
        _check_encoding_errors(encoding_errors)
        _check_max_line_bytes(max_line_bytes)
        self.name = str(path)
        self._lines = _lines(open_binary(path), path, encoding_errors, max_line_bytes)
        self._pending = ""  # the unread rest of a line that read(size) cut

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        line, self._pending = self._pending, ""
        if not line:
            line = next(self._lines, (0, 0, ""))[2]
        if size is not None and 0 <= size < len(line):
            line, self._pending = line[:size], line[size:]
        return line

    def read(self, size: int | None = -1) -> str:
        if size is None or size < 0:
            rest, self._pending = self._pending, ""
            return rest + "".join(text for _, _, text in self._lines)
        parts, n = [], 0
        while n < size:
            line = self.readline(size - n)
            if not line:
                break
            parts.append(line)
            n += len(line)
        return "".join(parts)

    def close(self) -> None:
        self._lines.close()
        super().close()


def open_text(path: str | os.PathLike, encoding_errors: str = "strict",
              max_line_bytes: int | None = MAX_LINE_BYTES) -> TextStream:
    """``path`` as a text stream (see `TextStream`), decompressed and decoded like `iter_lines`."""
    return TextStream(path, encoding_errors, max_line_bytes)


def iter_jsonl(path: str | os.PathLike, encoding_errors: str = "strict",
               max_line_bytes: int | None = MAX_LINE_BYTES) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of each non-blank line of a JSON-lines file (see `parse_json_line`)."""
    for lineno, _, line in iter_lines(path, encoding_errors, max_line_bytes):
        if line.strip():
            yield lineno, parse_json_line(line, path, lineno, encoding_errors)


def iter_records(path: str | os.PathLike, encoding_errors: str = "strict",
                 columns: list[str] | None = None) -> Iterator[tuple[int, dict]]:
    """``(number, record)`` of each record of a JSON-lines file (line numbers: `iter_jsonl`) or a table (row numbers
    from 0, only ``columns`` when given: `litebert.inputs.columnar.iter_rows`)."""
    kind = table_kind(path)
    if kind is not None:
        yield from columnar.iter_rows(path, kind, columns)
    else:
        yield from iter_jsonl(path, encoding_errors)


def iter_record_texts(source: str | os.PathLike | TextSource, field: str, encoding_errors: str = "strict",
                      max_line_bytes: int | None = MAX_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """``(number, text)`` of each record of ``source``: the string ``field`` of a JSON-lines record (`text_field`)
    or a table's row, or a text given in Python, in which a lone surrogate is refused (or, with
    ``encoding_errors="replace"``, made U+FFFD) as in JSON."""
    _check_encoding_errors(encoding_errors)
    if isinstance(source, TextSource):
        for row, text in source.rows():
            yield row, _mend_text(text, where(source, row), encoding_errors)
        return
    kind = table_kind(source)
    if kind is not None:
        yield from columnar.iter_texts(source, kind, field)
        return
    for lineno, record in iter_jsonl(source, encoding_errors, max_line_bytes):
        yield lineno, text_field(record, field, source, lineno)


def _mend_text(text: str, at: str, encoding_errors: str) -> str:
    """``text`` (a Python string) without lone surrogates: a `DataError` naming ``at``, or U+FFFD with
    ``encoding_errors="replace"``."""
    found = _SURROGATE.search(text)
    if found is None:
        return text
    if encoding_errors == "replace":
        return _SURROGATE.sub("\ufffd", text)
    raise DataError(f"{_literal(at)}: holds a lone surrogate \\u{ord(found.group()):04x} (one half of a UTF-16 pair "
                    "without the other, so not Unicode text); fix it or pass {encoding_errors} to read it as U+FFFD",
                    encoding_errors="replace")


def parse_json_line(line: str, path: str | os.PathLike, lineno: int, encoding_errors: str = "strict") -> dict:
    """One line of a JSON-lines file, which must hold a JSON object; otherwise a `DataError` naming file and line.
    A lone surrogate in its strings is an error too, or U+FFFD with ``encoding_errors="replace"``
    (`mend_lone_surrogates`)."""
    obj = parse_json(line, path, DataError, lineno)
    if not isinstance(obj, dict):
        raise DataError(f"{path}:{lineno}: expected a JSON object, got {json_kind(type(obj))}")
    if "\\" in line:  # only an escape gives a lone surrogate: a line without one costs a byte search, no more
        obj = mend_lone_surrogates(obj, line, f"{path}:{lineno}", encoding_errors)
    return obj


def mend_lone_surrogates(value: Any, raw: str, where: str, encoding_errors: str = "strict") -> Any:
    """``value``, parsed from the JSON text ``raw`` read at ``where`` (``path:line``, or ``path`` for a whole
    document), with no lone surrogate left in its strings or keys: an escape such as ``\\ud800`` that is not half of a
    UTF-16 pair is valid JSON but decodes to a string that is not Unicode (SentencePiece and UTF-8 writers raise on
    it). ``encoding_errors="strict"``: a `DataError` naming ``where`` and the field; ``"replace"``: each becomes
    U+FFFD, as a bad UTF-8 byte does. Containers are mended in place (``value`` is fresh from ``json.loads``)."""
    if not _SURROGATE_ESCAPE.search(raw):
        return value  # the usual case: without such an escape every string is valid Unicode
    if encoding_errors == "replace":
        return _replace_lone_surrogates(value)
    found = _first_lone_surrogate(value)
    if found is not None:
        field, char = found
        raise DataError(f"{_literal(where)}: {_literal(field)} holds a lone surrogate \\u{ord(char):04x} (an escape "
                        "that is one half of a UTF-16 pair without the other, so not Unicode text); fix the file or "
                        "pass {encoding_errors} to read it as U+FFFD", encoding_errors="replace")
    return value


def _first_lone_surrogate(value: Any) -> tuple[str, str] | None:
    """(which string of ``value`` holds it, as ``field answers[0].text``, and the surrogate) of the first lone
    surrogate in its strings and keys, in document order; None if there is none. Iterative: JSON nests as deep as
    ``json.loads`` allows, which a recursive walk might not."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            found = _SURROGATE.search(node)
            if found:
                return (f"field {at}" if at else "the JSON text"), found.group()
        elif isinstance(node, dict):
            for key in node:
                found = _SURROGATE.search(key)
                if found:  # repr: the message must not carry the surrogate itself, which no terminal can print
                    return f"the key {key!r}" + (f" in field {at}" if at else ""), found.group()
            stack.extend((v, _member(at, k)) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, f"{at}[{i}]") for i, v in reversed(list(enumerate(node))))
    return None


def _member(at: str, key: str) -> str:
    """The path of ``key`` in the object at path ``at``: ``answers[0]`` + ``text`` -> ``answers[0].text``."""
    if key.isidentifier():
        return f"{at}.{key}" if at else key
    return f"{at}[{key!r}]"


def _replace_lone_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings and keys replaced by U+FFFD, its containers in place."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            items = list(node.items())
            node.clear()  # re-inserted in order: a mended key keeps its place
            for k, v in items:
                node[_SURROGATE.sub("\ufffd", k)] = _SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v
                if isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, str):
                    node[i] = _SURROGATE.sub("\ufffd", v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
    return value


def text_field(obj: dict[str, Any], field: str, path: str | os.PathLike, lineno: int) -> str:
    """``obj[field]``, which must be a string; otherwise a `DataError` naming the file, line and field."""
    if field not in obj:
        raise DataError(f"{_literal(path)}:{lineno}: no {_literal(repr(field))} field (the record has "
                        f"{_literal(sorted(obj)[:8])}); choose the field holding the text with " + "{text_field:flag}",
                        text_field=field)
    text = obj[field]
    if not isinstance(text, str):
        raise DataError(f"{_literal(path)}:{lineno}: field {_literal(repr(field))} is a JSON "
                        f"{json_kind(type(text))}, expected a string; choose the field holding the text with "
                        + "{text_field:flag}", text_field=field)
    return text
