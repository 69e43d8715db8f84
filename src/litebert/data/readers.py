"""Corpus readers: files, directories and globs in, documents (lists of sentences) out, streaming.

Formats (``--format``):

``official``    the format of the official ``create_pretraining_data.py``: one sentence per line, a blank (or
                whitespace-only) line between documents. Unlike the official code, the end of a file also ends the
                current document (the official reader runs documents on across file boundaries).
``paragraphs``  plain text, one document per paragraph (paragraphs are separated by blank lines; lines inside a
                paragraph are joined), split into sentences by :func:`litebert.data.splitter.split_sentences`.
``files``       plain text, one document per file; each paragraph is split into sentences.
``jsonl``       one JSON object per line with a string field (``text`` by default) holding one document; each line
                of that string is a paragraph, split into sentences.
``auto``        ``jsonl`` for ``*.jsonl`` / ``*.json`` (optionally ``.gz``/``.xz``/``.bz2``), ``official`` otherwise.

Gzip (and xz, bz2) is detected by its magic bytes, so compressed files need no special name. Bytes are decoded as
UTF-8; invalid bytes raise a :class:`DataError` naming the file, line and byte offset (in the decompressed stream
for compressed files), unless ``errors="replace"`` is asked for explicitly.

Sentence splitting of ``paragraphs``/``files``/``jsonl`` text is done later, in the tokenizing workers: a reader
yields :class:`RawDocument` with ``split=True`` and the paragraphs as ``parts``.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import json
import lzma
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from litebert.errors import DataError

FORMATS = ("auto", "official", "paragraphs", "files", "jsonl")
_JSON_SUFFIXES = tuple(f".{a}{b}" for a in ("jsonl", "json") for b in ("", ".gz", ".xz", ".bz2"))


@dataclass
class RawDocument:
    """One document before tokenization.

    ``parts`` are sentences (``split=False``, official format) or paragraphs still to be split (``split=True``).
    ``nbytes`` is how many input bytes the reader consumed for it (drives the progress bar).
    """

    parts: list[str]
    split: bool
    nbytes: int = 0


def expand_inputs(inputs: list[str | os.PathLike]) -> list[Path]:
    """Resolve files, directories (all regular files below, recursively) and globs into a sorted, de-duplicated
    list of files, keeping the order in which the arguments were given."""
    files: list[Path] = []
    for spec in inputs:
        spec = str(spec)
        p = Path(spec)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith("."))
        elif p.is_file():
            found = [p]
        elif glob.has_magic(spec):
            found = sorted(Path(q) for q in glob.glob(spec, recursive=True) if Path(q).is_file())
        else:
            raise DataError(f"input {spec!r} does not exist "
                            f"(give a file, a directory or a glob such as 'corpus/*.txt')")
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


_MAGIC = {b"\x1f\x8b": gzip.GzipFile, b"\xfd7zXZ\x00": lzma.LZMAFile, b"BZh": bz2.BZ2File}


def compression(path: Path) -> str | None:
    """'gzip', 'xz', 'bz2' (by magic bytes) or None."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, cls in _MAGIC.items():
        if head.startswith(magic):
            return cls.__module__
    return None


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, decompressing gzip (and xz, bz2) transparently, detected by magic bytes."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"{path}: cannot open: {e.strerror}") from e
    head = f.peek(6)[:6]
    for magic, cls in _MAGIC.items():
        if head.startswith(magic):
            return cls(fileobj=f) if cls is gzip.GzipFile else cls(f)  # type: ignore[return-value]
    return f


def iter_lines(path: Path, errors: str = "strict") -> Iterator[tuple[int, int, str]]:
    """Yield ``(line_number, byte_offset, text)`` for each line of ``path`` (text without its line ending).

    Invalid UTF-8 raises :class:`DataError` with the file, line and byte offset, unless ``errors == "replace"``
    (each bad byte becomes U+FFFD).
    """
    if errors not in ("strict", "replace"):
        raise DataError(f"encoding errors must be 'strict' or 'replace', not {errors!r}")
    offset = 0
    with open_binary(path) as f:
        try:
            for lineno, raw in enumerate(f, start=1):
                try:
                    text = raw.decode("utf-8", errors=errors)
                except UnicodeDecodeError as e:
                    compressed = isinstance(f, tuple(_MAGIC.values()))
                    where = "decompressed byte offset" if compressed else "byte offset"
                    raise DataError(
                        f"{path}:{lineno}: invalid UTF-8 at {where} {offset + e.start} "
                        f"(byte 0x{raw[e.start]:02x}); fix the file or pass --encoding-errors replace "
                        f"to substitute U+FFFD") from None
                offset += len(raw)
                yield lineno, offset - len(raw), text.rstrip("\r\n")
        except (OSError, EOFError, lzma.LZMAError) as e:  # e.g. a truncated or corrupt compressed stream
            raise DataError(f"{path}: read failed after byte {offset}: {e}") from e


def _blank_separated(path: Path, errors: str) -> Iterator[tuple[list[str], int]]:
    """Groups of non-blank lines separated by blank lines, with the bytes they span."""
    group: list[str] = []
    nbytes = 0
    for _, _, line in iter_lines(path, errors):
        nbytes += len(line) + 1
        stripped = line.strip()
        if stripped:
            group.append(stripped)
        elif group:
            yield group, nbytes
            group, nbytes = [], 0
    if group:
        yield group, nbytes


def _read_jsonl(path: Path, errors: str, text_field: str) -> Iterator[RawDocument]:
    for lineno, _, line in iter_lines(path, errors):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict) or text_field not in obj:
            have = sorted(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
            raise DataError(f"{path}:{lineno}: no {text_field!r} field (found {have}); choose it with --text-field")
        text = obj[text_field]
        if not isinstance(text, str):
            raise DataError(f"{path}:{lineno}: field {text_field!r} is {type(text).__name__}, expected a string")
        paragraphs = [p for p in text.splitlines() if p.strip()]
        yield RawDocument(paragraphs, split=True, nbytes=len(line) + 1)


def detect_format(path: Path) -> str:
    return "jsonl" if path.name.lower().endswith(_JSON_SUFFIXES) else "official"


def read_documents(path: Path, fmt: str = "auto", errors: str = "strict",
                   text_field: str = "text") -> Iterator[RawDocument]:
    """Stream the documents of one file in the given format (see the module docstring). Empty documents are
    skipped; an empty file yields nothing."""
    if fmt not in FORMATS:
        raise DataError(f"unknown input format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "jsonl":
        yield from _read_jsonl(path, errors, text_field)
    elif fmt == "official":
        for group, nbytes in _blank_separated(path, errors):
            yield RawDocument(group, split=False, nbytes=nbytes)
    elif fmt == "paragraphs":
        for group, nbytes in _blank_separated(path, errors):
            yield RawDocument([" ".join(group)], split=True, nbytes=nbytes)
    else:  # files
        paragraphs, total = [], 0
        for group, nbytes in _blank_separated(path, errors):
            paragraphs.append(" ".join(group))
            total += nbytes
        if paragraphs:
            yield RawDocument(paragraphs, split=True, nbytes=total)
