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
                string is a paragraph, split into sentences. Texts given in Python
                (`litebert.inputs.columnar.TextSource`)
                are read the same way, each string a document.
``auto``        ``jsonl`` for ``*.jsonl`` / ``*.json`` / ``*.ndjson`` (optionally compressed), for tables and for texts
                given in Python; ``official`` otherwise.

Opening, decompressing and decoding the files, with the errors that name file, line (or row) and byte offset, is
`litebert.inputs.text`'s; expanding directories and globs into files too (`litebert.inputs.text.expand_inputs`).

Sentence splitting of ``paragraphs``/``files``/``jsonl`` text is done later, in the tokenizing workers: a reader
yields :class:`RawDocument` with ``split=True`` and the paragraphs as ``parts``.

Memory is bounded whatever the input's shape. A line is read with at most ``max_line_bytes`` bytes held (a longer
one is refused, `litebert.inputs.text`), and no document holds more than ``max_document_chars`` characters: a longer
one is cut, before the line (sentence, or paragraph) that would take it past the limit, into consecutive documents,
each marked with where it was cut (`RawDocument.cut_at`). A corpus with a sentence a line and no blank line at all
(common) is one document in the official format; cut, it streams in pieces of bounded size instead of being held
whole. A single line longer than the limit makes a document alone. Characters, not bytes, are counted, so the same
text is cut in the same places whatever its encoding, compression or format.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from litebert.errors import DataError
from litebert.inputs.columnar import WHAT, TextSource
from litebert.inputs.text import (
    is_records,
    iter_lines,
    iter_record_texts,
    parse_json_line,
    table_kind,
    text_field,
    where,
)

FORMATS = ("auto", "official", "paragraphs", "files", "jsonl")
# The most characters a document holds before it is cut: a Wikipedia article or a novel is well below it.
MAX_DOCUMENT_CHARS = 1 << 22
# The longest line of a corpus, in bytes: tighter than `litebert.inputs.text.MAX_LINE_BYTES` (whole JSON files on
# one line), as a line is a sentence or a paragraph that no cut divides, and tokenizing one costs about 25 bytes of
# memory a byte (Python lists of ids; bench/prepare_memory.py). A book as a JSON line is a few MB.
CORPUS_MAX_LINE_BYTES = 8 << 20


@dataclass
class RawDocument:
    """One document before tokenization.

    ``parts`` are sentences (``split=False``, official format) or paragraphs still to be split (``split=True``).
    ``nbytes`` is how many input bytes the reader consumed for it (drives the progress bar). ``cut_at`` is None for
    a document that starts where its text does, and for one cut from the document before it (longer than
    ``max_document_chars``) where it starts (``file:line``, ``file: row N``).
    """

    parts: list[str]
    split: bool
    nbytes: int = 0
    cut_at: str | None = None


# A part of a document as `_bounded` takes it: (text, or None for a break between documents; input bytes; where it
# is: a line number, or a record's place).
_Part = tuple["str | None", int, object]


def _bounded(parts: Iterable[_Part], max_chars: int) -> Iterator[tuple[list[str], int, object, bool]]:
    """The documents of ``parts``, none of more than ``max_chars`` characters (a part counts its length + 1, as the
    store's blocks do): ``(texts, input bytes, where the first starts, whether it was cut from the one before)``. A
    document is cut before the part that would take it past ``max_chars``; a part longer than that is one alone."""
    group: list[str] = []
    nbytes = chars = 0
    start: object = None
    cut = False
    for text, n, at in parts:
        if text is None:
            nbytes += n  # a blank line's bytes go with the document it ends (or the next one)
            if group:
                yield group, nbytes, start, cut
                group, nbytes, chars = [], 0, 0
            continue
        if group and chars + len(text) + 1 > max_chars:
            yield group, nbytes, start, cut
            group, nbytes, chars, start, cut = [], 0, 0, at, True
        elif not group:
            start, cut = at, False
        group.append(text)
        nbytes += n
        chars += len(text) + 1
    if group:
        yield group, nbytes, start, cut


def _blank_separated(path: Path, encoding_errors: str, max_line_bytes: int | None,
                     max_chars: int) -> Iterator[tuple[list[str], int, int, bool]]:
    """Groups of non-blank lines separated by blank lines, cut at ``max_chars`` characters (`_bounded`), with the
    number of their first line."""
    lines = ((line.strip() or None, len(line) + 1, lineno)
             for lineno, _, line in iter_lines(path, encoding_errors, max_line_bytes))
    return _bounded(lines, max_chars)


def _record_documents(paragraphs: list[str], nbytes: int, at: str, max_chars: int) -> Iterator[RawDocument]:
    """The documents of one record's paragraphs: one, or several when it holds more than ``max_chars`` characters."""
    for k, (parts, _, start, cut) in enumerate(_bounded(((p, 0, at) for p in paragraphs), max_chars)):
        yield RawDocument(parts, split=True, nbytes=nbytes if k == 0 else 0, cut_at=start if cut else None)


def _read_jsonl(path: Path, encoding_errors: str, field: str, max_line_bytes: int | None,
                max_chars: int) -> Iterator[RawDocument]:
    for lineno, _, line in iter_lines(path, encoding_errors, max_line_bytes):
        if line.strip():
            text = text_field(parse_json_line(line, path, lineno, encoding_errors), field, path, lineno)
            yield from _record_documents(_paragraphs(text), len(line) + 1, f"{path}:{lineno}", max_chars)


def _read_records(source: Path | TextSource, encoding_errors: str, field: str, max_line_bytes: int | None,
                  max_chars: int) -> Iterator[RawDocument]:
    """The documents of a table or of texts given in Python: each text a document, as a JSON line's."""
    for number, text in iter_record_texts(source, field, encoding_errors, max_line_bytes):
        yield from _record_documents(_paragraphs(text), len(text) + 1, where(source, number), max_chars)


def _paragraphs(text: str) -> list[str]:
    return [p for p in text.splitlines() if p.strip()]


def detect_format(path: Path | TextSource) -> str:
    return "jsonl" if is_records(path) else "official"


def read_documents(path: Path | TextSource, fmt: str = "auto", encoding_errors: str = "strict",
                   text_field: str = "text", max_line_bytes: int | None = CORPUS_MAX_LINE_BYTES,
                   max_document_chars: int = MAX_DOCUMENT_CHARS) -> Iterator[RawDocument]:
    """Stream the documents of one input in the given format (see the module docstring): a file, a `datasets`
    folder or texts given in Python. Empty documents are skipped; an empty file yields nothing. A line of more than
    ``max_line_bytes`` bytes is a `DataError`; a document of more than ``max_document_chars`` characters is cut into
    consecutive documents (`RawDocument.cut_at`)."""
    if fmt not in FORMATS:
        raise DataError(f"unknown input format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if isinstance(max_document_chars, bool) or not isinstance(max_document_chars, int) or max_document_chars < 1:
        raise DataError("{max_document_chars}: expected an integer >= 1", max_document_chars=max_document_chars)
    bound = (max_line_bytes, max_document_chars)
    if fmt == "auto":
        fmt = detect_format(path)
    kind = "texts" if isinstance(path, TextSource) else table_kind(path)
    if kind is not None:
        if fmt != "jsonl":
            what = "texts given in Python" if kind == "texts" else WHAT[kind]
            raise DataError(f"{path}: {what}, records rather than lines of text; read them with the format auto or "
                            f"jsonl (a document a record), not {fmt}")
        yield from _read_records(path, encoding_errors, text_field, *bound)
    elif fmt == "jsonl":
        yield from _read_jsonl(path, encoding_errors, text_field, *bound)
    elif fmt == "official":
        for group, nbytes, start, cut in _blank_separated(path, encoding_errors, *bound):
            yield RawDocument(group, split=False, nbytes=nbytes, cut_at=f"{path}:{start}" if cut else None)
    elif fmt == "paragraphs":
        for group, nbytes, start, cut in _blank_separated(path, encoding_errors, *bound):
            yield RawDocument([" ".join(group)], split=True, nbytes=nbytes, cut_at=f"{path}:{start}" if cut else None)
    else:  # files: the file's paragraphs (each cut like a document) are its document, cut in turn
        paragraphs = ((" ".join(group), nbytes, start)
                      for group, nbytes, start, _ in _blank_separated(path, encoding_errors, *bound))
        for parts, nbytes, start, cut in _bounded(paragraphs, max_document_chars):
            yield RawDocument(parts, split=True, nbytes=nbytes, cut_at=f"{path}:{start}" if cut else None)
