"""Reading text input: the one place where litebert opens the files a user gives it.

* `expand_inputs`: files, directories (every file below, recursively, hidden ones skipped) and globs (also when the
  shell did not expand them, e.g. ``'corpus/*.xz'`` quoted) to a sorted, de-duplicated list of files.
* `open_binary`: gzip, xz and bz2 are decompressed transparently, recognised by their magic bytes, so compressed
  files need no special name.
* `iter_lines`: ``(line number, byte offset, text)`` of each line, decoded as UTF-8.
* `open_text`: the same lines as a text stream, for ``csv`` and ``json.load``.
* `iter_jsonl` and `text_field`: JSON lines and the text field of a record.

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
import glob
import gzip
import io
import json
import lzma
import os
import re
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from litebert.errors import DataError, literal as _literal
from litebert.files import json_kind

ENCODING_ERRORS = ("strict", "replace")
COMPRESSED_SUFFIXES = (".gz", ".xz", ".bz2")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_MAGIC = {b"\x1f\x8b": gzip.GzipFile, b"\xfd7zXZ\x00": lzma.LZMAFile, b"BZh": bz2.BZ2File}
_BOM = b"\xef\xbb\xbf"
# A \uD800-\uDFFF escape in JSON text (JSON spells escapes with a lowercase u, their hex digits in either case). Only
# text holding one can decode to a lone surrogate, so only such text has its strings walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def expand_inputs(inputs: list[str | os.PathLike]) -> list[Path]:
    """Files, directories and globs to a list of files: each argument's files sorted, in the order the arguments were
    given, each file once. A directory gives every regular file below it whose path (below the directory) has no
    hidden part; a glob is expanded here (``**`` reaches into subdirectories), a directory it matches like a
    directory. An argument that matches no file is a `DataError`."""
    files: list[Path] = []
    for spec in inputs:
        spec = str(spec)
        path = Path(spec)
        if path.is_dir():
            found = _files_below(path)
        elif path.is_file():
            found = [path]
        elif glob.has_magic(spec):
            found = sorted(f for match in glob.glob(spec, recursive=True)
                           for f in (_files_below(Path(match)) if Path(match).is_dir() else [Path(match)]))
        else:
            raise DataError(f"input {spec!r} does not exist (give a file, a directory or a glob such as "
                            f"'corpus/*.txt')")
        if not found:
            raise DataError(f"input {spec!r} matches no files")
        files.extend(found)
    seen: set[Path] = set()
    unique = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def _files_below(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def format_suffix(path: str | os.PathLike) -> str:
    """The suffix that names the file's format, after any compression suffix: ``'a.jsonl.gz'`` -> ``'.jsonl'``."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def is_jsonl(path: str | os.PathLike) -> bool:
    """Whether the name says JSON lines: ``*.jsonl``, ``*.json`` or ``*.ndjson``, optionally compressed."""
    return format_suffix(path) in JSONL_SUFFIXES


def compression(path: str | os.PathLike) -> str | None:
    """``'gzip'``, ``'lzma'`` (xz) or ``'bz2'`` by the file's magic bytes, or None."""
    with open(path, "rb") as f:
        head = f.read(6)
    return next((cls.__module__ for magic, cls in _MAGIC.items() if head.startswith(magic)), None)


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """Open a file for reading bytes, decompressing gzip, xz and bz2 (recognised by their magic bytes)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot open ({e.strerror or e})") from None
    head = f.peek(6)[:6]
    for magic, cls in _MAGIC.items():
        if head.startswith(magic):
            return cls(fileobj=f) if cls is gzip.GzipFile else cls(f)  # type: ignore[return-value]
    return f


def _check_encoding_errors(encoding_errors: str) -> None:
    if encoding_errors not in ENCODING_ERRORS:
        raise DataError(f"encoding errors must be one of {', '.join(ENCODING_ERRORS)}, not {encoding_errors!r}")


def _lines(f: BinaryIO, path: str | os.PathLike, encoding_errors: str) -> Iterator[tuple[int, int, str]]:
    """``(line number, byte offset, text with its line ending)`` of the open file ``f`` (closed at the end), with
    the errors of the module docstring."""
    offset = 0
    with f:
        where = "byte offset" if isinstance(f, io.BufferedReader) else "decompressed byte offset"
        try:
            for lineno, raw in enumerate(f, start=1):  # binary lines end at b"\n" only, as in `wc -l` and editors
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


# A corrupt or truncated compressed stream: gzip raises BadGzipFile (an OSError), zlib.error or EOFError; xz
# LZMAError or EOFError; bz2 OSError or EOFError.
_DECOMPRESS_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)


def _corrupt(path: str | os.PathLike, f: BinaryIO, offset: int, e: BaseException) -> DataError:
    if isinstance(f, io.BufferedReader):
        return DataError(f"{path}: cannot read past byte offset {offset}: {e}")
    kind = {"gzip": "gzip", "lzma": "xz", "bz2": "bz2"}.get(type(f).__module__, "compressed")
    return DataError(f"{path}: corrupt or truncated {kind} file (cannot decompress past byte {offset} of its "
                     f"content: {e}); compress it again or give the uncompressed file")


def _check_decompresses(f: BinaryIO, path: str | os.PathLike, offset: int) -> None:
    """Read the rest of the compressed stream ``f``: a `DataError` if it is corrupt (its checksum or framing)."""
    try:
        while f.read(1 << 20):
            pass
    except _DECOMPRESS_ERRORS as e:
        raise _corrupt(path, f, offset, e) from None


def iter_lines(path: str | os.PathLike, encoding_errors: str = "strict") -> Iterator[tuple[int, int, str]]:
    """``(line number, byte offset, text)`` of each line of ``path``, the text without its line ending; numbers
    from 1, offsets of the line's first byte (in the decompressed stream for compressed files)."""
    _check_encoding_errors(encoding_errors)
    for lineno, offset, text in _lines(open_binary(path), path, encoding_errors):
        yield lineno, offset, text.rstrip("\r\n")


class TextStream(io.TextIOBase):
    """A read-only text stream over `iter_lines`' decoding: lines keep their endings (as with ``newline=""``, which
    ``csv`` wants), and a bad byte is reported with its file, line and byte offset."""

    def __init__(self, path: str | os.PathLike, encoding_errors: str = "strict"):
        _check_encoding_errors(encoding_errors)
        self.name = str(path)
        self._lines = _lines(open_binary(path), path, encoding_errors)
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


def open_text(path: str | os.PathLike, encoding_errors: str = "strict") -> TextStream:
    """``path`` as a text stream (see `TextStream`), decompressed and decoded like `iter_lines`."""
    return TextStream(path, encoding_errors)


def iter_jsonl(path: str | os.PathLike, encoding_errors: str = "strict") -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of each non-blank line of a JSON-lines file (see `parse_json_line`)."""
    for lineno, _, line in iter_lines(path, encoding_errors):
        if line.strip():
            yield lineno, parse_json_line(line, path, lineno, encoding_errors)


def parse_json_line(line: str, path: str | os.PathLike, lineno: int, encoding_errors: str = "strict") -> dict:
    """One line of a JSON-lines file, which must hold a JSON object; otherwise a `DataError` naming file and line.
    A lone surrogate in its strings is an error too, or U+FFFD with ``encoding_errors="replace"``
    (`mend_lone_surrogates`)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise DataError(f"{path}:{lineno}: JSON nested too deeply") from None
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
