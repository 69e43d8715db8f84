"""Corpus readers: the documents (lists of sentences) of one input file, streaming.

Formats (``--format``):

``official``    the format of the official ``create_pretraining_data.py``: one sentence per line, a blank (or
                whitespace-only) line between documents. Unlike the official code, the end of a file also ends the
                current document (the official reader runs documents on across file boundaries).
``paragraphs``  plain text, one document per paragraph (paragraphs are separated by blank lines; lines inside a
                paragraph are joined), split into sentences by :func:`litebert.data.splitter.split_sentences`.
``files``       plain text, one document per file; each paragraph is split into sentences.
``jsonl``       one record per document: a JSON object per line, or a row of a table (Parquet, Arrow, a `datasets`
                folder), whose string field or column (``text`` by default) holds the document; each line of that
                string is a paragraph, split into sentences. Texts given in Python (`litebert.columnar.TextSource`)
                are read the same way, each string a document.
``auto``        ``jsonl`` for ``*.jsonl`` / ``*.json`` / ``*.ndjson`` (optionally compressed), for tables and for texts
                given in Python; ``official`` otherwise.

Opening, decompressing and decoding the files, with the errors that name file, line (or row) and byte offset, is
`litebert.text_input`'s; expanding directories and globs into files too (`litebert.text_input.expand_inputs`).

Sentence splitting of ``paragraphs``/``files``/``jsonl`` text is done later, in the tokenizing workers: a reader
yields :class:`RawDocument` with ``split=True`` and the paragraphs as ``parts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from litebert.columnar import WHAT, TextSource
from litebert.errors import DataError
from litebert.text_input import is_records, iter_lines, iter_record_texts, parse_json_line, table_kind, text_field

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
            yield RawDocument(_paragraphs(text), split=True, nbytes=len(line) + 1)


def _read_records(source: Path | TextSource, encoding_errors: str, field: str) -> Iterator[RawDocument]:
    """The documents of a table or of texts given in Python: each text a document, as a JSON line's."""
    for _, text in iter_record_texts(source, field, encoding_errors):
        yield RawDocument(_paragraphs(text), split=True, nbytes=len(text) + 1)


def _paragraphs(text: str) -> list[str]:
    return [p for p in text.splitlines() if p.strip()]


def detect_format(path: Path | TextSource) -> str:
    return "jsonl" if is_records(path) else "official"


def read_documents(path: Path | TextSource, fmt: str = "auto", encoding_errors: str = "strict",
                   text_field: str = "text") -> Iterator[RawDocument]:
    """Stream the documents of one input in the given format (see the module docstring): a file, a `datasets`
    folder or texts given in Python. Empty documents are skipped; an empty file yields nothing."""
    if fmt not in FORMATS:
        raise DataError(f"unknown input format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "auto":
        fmt = detect_format(path)
    kind = "texts" if isinstance(path, TextSource) else table_kind(path)
    if kind is not None:
        if fmt != "jsonl":
            what = "texts given in Python" if kind == "texts" else WHAT[kind]
            raise DataError(f"{path}: {what}, records rather than lines of text; read them with the format auto or "
                            f"jsonl (a document a record), not {fmt}")
        yield from _read_records(path, encoding_errors, text_field)
    elif fmt == "jsonl":
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
