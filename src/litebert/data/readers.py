"""Corpus readers: the documents (lists of sentences) of one input file, streaming.

Formats (``--format``):

``official``    the format of the official ``create_pretraining_data.py``: one sentence per line, a blank (or
                whitespace-only) line between documents. Unlike the official code, the end of a file also ends the
                current document (the official reader runs documents on across file boundaries).
``paragraphs``  plain text, one document per paragraph (paragraphs are separated by blank lines; lines inside a
                paragraph are joined), split into sentences by :func:`litebert.data.splitter.split_sentences`.
``files``       plain text, one document per file; each paragraph is split into sentences.
``jsonl``       one JSON object per line with a string field (``text`` by default) holding one document; each line
                of that string is a paragraph, split into sentences.
``auto``        ``jsonl`` for ``*.jsonl`` / ``*.json`` / ``*.ndjson`` (optionally compressed), ``official`` otherwise.

Opening, decompressing and decoding the files, with the errors that name file, line and byte offset, is
`litebert.text_input`'s; expanding directories and globs into files too (`litebert.text_input.expand_inputs`).

Sentence splitting of ``paragraphs``/``files``/``jsonl`` text is done later, in the tokenizing workers: a reader
yields :class:`RawDocument` with ``split=True`` and the paragraphs as ``parts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from litebert.errors import DataError
from litebert.text_input import is_jsonl, iter_lines, parse_json_line, text_field

FORMATS = ("auto", "official", "paragraphs", "files", "jsonl")


@dataclass
class RawDocument:
    """One document before tokenization.

    ``parts`` are sentences (``split=False``, official format) or paragraphs still to be split (``split=True``).
    ``nbytes`` is how many input bytes the reader consumed for it (drives the progress bar).
    """

    parts: list[str]
    split: bool
    nbytes: int = 0


def _blank_separated(path: Path, encoding_errors: str) -> Iterator[tuple[list[str], int]]:
    """Groups of non-blank lines separated by blank lines, with the bytes they span."""
    group: list[str] = []
    nbytes = 0
    for _, _, line in iter_lines(path, encoding_errors):
        nbytes += len(line) + 1
        stripped = line.strip()
        if stripped:
            group.append(stripped)
        elif group:
            yield group, nbytes
            group, nbytes = [], 0
    if group:
        yield group, nbytes


def _read_jsonl(path: Path, encoding_errors: str, field: str) -> Iterator[RawDocument]:
    for lineno, _, line in iter_lines(path, encoding_errors):
        if line.strip():
            text = text_field(parse_json_line(line, path, lineno, encoding_errors), field, path, lineno)
            paragraphs = [p for p in text.splitlines() if p.strip()]
            yield RawDocument(paragraphs, split=True, nbytes=len(line) + 1)


def detect_format(path: Path) -> str:
    return "jsonl" if is_jsonl(path) else "official"


def read_documents(path: Path, fmt: str = "auto", encoding_errors: str = "strict",
                   text_field: str = "text") -> Iterator[RawDocument]:
    """Stream the documents of one file in the given format (see the module docstring). Empty documents are
    skipped; an empty file yields nothing."""
    if fmt not in FORMATS:
        raise DataError(f"unknown input format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "jsonl":
        yield from _read_jsonl(path, encoding_errors, text_field)
    elif fmt == "official":
        for group, nbytes in _blank_separated(path, encoding_errors):
            yield RawDocument(group, split=False, nbytes=nbytes)
    elif fmt == "paragraphs":
        for group, nbytes in _blank_separated(path, encoding_errors):
            yield RawDocument([" ".join(group)], split=True, nbytes=nbytes)
    else:  # files
        paragraphs, total = [], 0
        for group, nbytes in _blank_separated(path, encoding_errors):
            paragraphs.append(" ".join(group))
            total += nbytes
        if paragraphs:
            yield RawDocument(paragraphs, split=True, nbytes=total)
