"""The sharded, memory-mapped token store that ``litebert data prepare`` writes and the pretraining dataset reads.

Layout of a store directory::

    manifest.json              format, tokenizer facts and fingerprint, counts, every file's size and sha256
    tokenizer/                 the tokenizer the store was prepared with (``save_pretrained``: spiece.model or
                               vocab.txt, tokenizer_config.json, tokenizer.json), so that `pretrain` can save it
                               beside the model
    word_start.npy             bool[vocab]: piece starts a word (official ``_is_start_piece``), for whole-word masking
    normal_ids.npy             int32[n]: ids of normal pieces, the pool for the 10% random replacements
    shard-00000.tokens         uint16 (vocab <= 65536) or uint32, little-endian: all token ids of the shard, flat
    shard-00000.sentences      int64 LE [num_sentences + 1]: token offset where each sentence starts (+ the end)
    shard-00000.documents      int64 LE [num_documents + 1]: sentence offset where each document starts (+ the end)
    shard-00001.* ...

Documents never span shards. The manifest is written last and the whole directory is built under a temporary name
and renamed into place, so a store either is complete or has no manifest; a store whose files do not have the sizes
the manifest records (truncated, half-copied) is refused with a :class:`DataError`, and ``verify=True`` also checks
the sha256 of every file. Stores prepared before the tokenizer was kept inside have no ``tokenizer/`` and still load
(`TokenStore.tokenizer` is then None).

Preparation streams: a reader process feeds blocks of documents to ``workers`` tokenizing processes with a bounded
number of blocks in flight, and one writer appends their output to the current shard. Peak memory depends on the
block size and worker count, not on the corpus size (see ``bench/bench_data.py`` and docs/BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing
import os
import re
import shutil
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Protocol, runtime_checkable

import numpy as np
from tqdm import tqdm

from litebert import folders
from litebert.arguments import checked
from litebert.checks import AT_LEAST_1
from litebert.data.documents import CORPUS_MAX_LINE_BYTES, MAX_DOCUMENT_CHARS, RawDocument, read_documents
from litebert.data.splitter import split_sentences
from litebert.errors import DataError, LitebertError, WriteError, literal
from litebert.files import io_failure, read_json, remove_stale_temporaries_of, sha256_file, write_json
from litebert.folders import OutputError
from litebert.inputs.text import Corpus, corpus_sources, input_bytes

FORMAT = "litebert-token-store"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TOKENIZER_FOLDER = "tokenizer"
TOKEN_DTYPES = ("<u2", "<u4")
_TOKENIZER_FILES = ("spiece.model", "vocab.txt", "tokenizer_config.json", "tokenizer.json",
                    "special_tokens_map.json")
_COUNTS = ("num_tokens", "num_sentences", "num_documents")  # the counts of a store and of each shard
_SCAN_ITEMS = 1 << 22  # elements per chunk when scanning token ids and offsets (32 MiB of int64 at most)


@dataclass(frozen=True)
class TokenizerFacts:
    """What the data pipeline needs to know about a tokenizer; saved in the store so training needs no tokenizer."""

    vocab_size: int
    pad_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    fingerprint: str
    word_start: np.ndarray = field(repr=False)  # bool [vocab_size]
    normal_ids: np.ndarray = field(repr=False)  # int32 [n]: candidates for the 10% random replacement

    @classmethod
    def from_tokenizer(cls, tok) -> "TokenizerFacts":
        if isinstance(tok, TokenizerFacts):
            return tok
        word_start = np.asarray(tok.word_start_mask(), dtype=bool)
        normal_ids = np.asarray(tok.normal_piece_ids(), dtype=np.int32)
        if word_start.shape != (tok.vocab_size,):
            raise DataError(f"tokenizer word_start_mask() has shape {word_start.shape}, expected ({tok.vocab_size},)")
        if normal_ids.size == 0:
            raise DataError("tokenizer has no normal pieces to draw random replacements from")
        return cls(int(tok.vocab_size), int(tok.pad_token_id), int(tok.cls_token_id), int(tok.sep_token_id),
                   int(tok.mask_token_id), str(tok.fingerprint()), word_start, normal_ids)

    def to_json(self) -> dict:
        return {"vocab_size": self.vocab_size, "pad_id": self.pad_id, "cls_id": self.cls_id, "sep_id": self.sep_id,
                "mask_id": self.mask_id, "fingerprint": self.fingerprint}


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


# ----------------------------------------------------------------------------------------------------- tokenizing

def encode_block(docs: list[RawDocument], tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Tokenize a block of documents.

    Returns ``(tokens uint32 [T], sentence_lengths int64 [S], document_sentence_counts int64 [D], dropped_docs,
    input_bytes)``.
    As in the official reader, sentences that tokenize to nothing are dropped, then documents left empty.
    """
    sentences: list[str] = []
    counts: list[int] = []
    for doc in docs:
        parts = [s for p in doc.parts for s in split_sentences(p)] if doc.split else doc.parts
        sentences.extend(parts)
        counts.append(len(parts))
    ids = tokenizer.encode_batch_ids(sentences) if sentences else []
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    doc_of = np.repeat(np.arange(len(counts)), counts)
    keep = lengths > 0
    doc_counts = np.bincount(doc_of[keep], minlength=len(counts)).astype(np.int64)
    tokens = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint32, count=int(lengths.sum()))
    dropped_docs = int((doc_counts == 0).sum())
    return tokens, lengths[keep], doc_counts[doc_counts > 0], dropped_docs, sum(d.nbytes for d in docs)


# Each tokenizing worker process holds its own tokenizer, set once by the pool initializer (inherited by fork).
_worker_tokenizer = None


def _init_worker(tokenizer) -> None:
    global _worker_tokenizer
    if hasattr(tokenizer, "num_threads"):  # one thread per worker process: the processes are the parallelism
        tokenizer.num_threads = 1
    _worker_tokenizer = tokenizer


def _encode_in_worker(docs: list[RawDocument]):
    return encode_block(docs, _worker_tokenizer)


# ------------------------------------------------------------------------------------------------------- writing

class _HashedFile:
    """An append-only binary file that tracks its size and sha256 as it is written."""

    def __init__(self, path: Path):
        self.path, self.f, self.sha, self.size = path, open(path, "wb"), hashlib.sha256(), 0

    def write(self, array: np.ndarray) -> None:
        data = array.tobytes()
        self.f.write(data)
        self.sha.update(data)
        self.size += len(data)

    def close(self) -> dict:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        return {"name": self.path.name, "bytes": self.size, "sha256": self.sha.hexdigest()}


class _ShardWriter:
    def __init__(self, directory: Path, index: int, dtype: np.dtype):
        prefix = f"shard-{index:05d}"
        self.prefix, self.dtype = prefix, dtype
        self.tokens = _HashedFile(directory / f"{prefix}.tokens")
        self.sentences = _HashedFile(directory / f"{prefix}.sentences")
        self.documents = _HashedFile(directory / f"{prefix}.documents")
        self.num_tokens = self.num_sentences = self.num_documents = 0
        self.sentences.write(np.zeros(1, "<i8"))
        self.documents.write(np.zeros(1, "<i8"))

    def add(self, tokens: np.ndarray, lengths: np.ndarray, doc_counts: np.ndarray) -> None:
        self.tokens.write(tokens.astype(self.dtype, copy=False))
        self.sentences.write((self.num_tokens + np.cumsum(lengths)).astype("<i8"))
        self.documents.write((self.num_sentences + np.cumsum(doc_counts)).astype("<i8"))
        self.num_tokens += int(tokens.size)
        self.num_sentences += int(lengths.size)
        self.num_documents += int(doc_counts.size)

    def close(self) -> dict:
        return {"prefix": self.prefix, "num_tokens": self.num_tokens, "num_sentences": self.num_sentences,
                "num_documents": self.num_documents,
                "files": {"tokens": self.tokens.close(), "sentences": self.sentences.close(),
                          "documents": self.documents.close()}}


def _blocks(files: list[Path], fmt: str, errors: str, text_field: str, block_chars: int,
            empty_files: list[str], bound: tuple[int | None, int]) -> Iterator[list[RawDocument]]:
    """Group the documents of all files into blocks of roughly ``block_chars`` characters. The characters of the
    text are counted, not the input's bytes, so that the same text gives the same blocks (and shards) whatever the
    format it comes in. ``bound`` is ``(max_line_bytes, max_document_chars)`` (`read_documents`); when a document
    is cut, one warning at the end says how many were and where the first was."""
    block: list[RawDocument] = []
    chars = 0
    cuts: list = [0, None]  # documents cut from the one before, where the first was
    for path in files:
        n = 0
        for doc in read_documents(path, fmt, errors, text_field, *bound):
            n += 1
            if doc.cut_at is not None:
                cuts = [cuts[0] + 1, cuts[1] or doc.cut_at]
            block.append(doc)
            chars += sum(len(part) + 1 for part in doc.parts)
            if chars >= block_chars:
                yield block
                block, chars = [], 0
        if n == 0:
            empty_files.append(str(path))
    if block:
        yield block
    if cuts[0]:
        warnings.warn(f"documents longer than {bound[1]} characters were cut into consecutive documents ({cuts[0]} "
                      f"cut(s), the first at {cuts[1]}); separate documents with blank lines, or raise "
                      f"max_document_chars (--max-document-chars) to keep them whole", stacklevel=2)


def _watch_stripped_marks(blocks: Iterator[list[RawDocument]], tokenizer) -> Iterator[list[RawDocument]]:
    """``blocks``, passed through; when ``tokenizer`` strips accents, the text they hold is measured on the way
    for combining marks that its script needs and stripping removes (one warning, `StrippedMarksCheck`)."""
    if hasattr(tokenizer, "strip_accents"):  # WordPiece: BERT's rule, strip_accents None follows do_lower_case
        strips = tokenizer.do_lower_case if tokenizer.strip_accents is None else tokenizer.strip_accents
        advice = "prepare with a tokenizer whose tokenizer_config.json sets \"strip_accents\": false to keep them"
    else:  # SentencePiece; anything else normalizes in its own way (TokenizerFacts)
        strips = not getattr(tokenizer, "keep_accents", True)
        advice = "prepare with a tokenizer trained with --keep-accents (keep_accents=True) to keep them"
    if not strips:
        yield from blocks
        return
    from litebert.tokenizer.normalize import StrippedMarksCheck

    check = StrippedMarksCheck(advice)
    for block in blocks:
        if not check.done:
            for doc in block:
                for part in doc.parts:
                    check.add(part)
        yield block
    check.finish()


def _bounded_map(pool, fn, items: Iterable, in_flight: int) -> Iterator:
    """Like ``pool.imap`` (ordered), but never more than ``in_flight`` items submitted ahead: ``imap`` itself would
    read the whole input iterator into memory as fast as it can."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.apply_async(fn, (item,)))
        if len(pending) >= in_flight:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


@runtime_checkable
class StoreTokenizer(Protocol):
    """What a store needs of a tokenizer object: an `AlbertTokenizer`, a `WordPieceTokenizer`, or any object with these
    (``isinstance`` checks that the names exist)."""

    vocab_size: int
    pad_token_id: int
    cls_token_id: int
    sep_token_id: int
    mask_token_id: int

    def encode_batch_ids(self, texts: list[str]) -> list[list[int]]: ...

    def word_start_mask(self) -> np.ndarray: ...

    def normal_piece_ids(self) -> np.ndarray: ...

    def fingerprint(self) -> str: ...


@checked(workers=AT_LEAST_1, block_chars=AT_LEAST_1)
def prepare_store(inputs: Corpus, tokenizer: StoreTokenizer | str | os.PathLike, out: str | os.PathLike,
                  workers: int = 1, *,
                  fmt: str = "auto", encoding_errors: str = "strict", text_field: str = "text",
                  shard_tokens: int = 1 << 26, block_chars: int = 1 << 20, overwrite: bool = False,
                  progress: bool = True, max_line_bytes: int | None = CORPUS_MAX_LINE_BYTES,
                  max_document_chars: int = MAX_DOCUMENT_CHARS) -> "TokenStore":
    """Tokenize ``inputs`` (files, directories, globs) with ``tokenizer`` (a tokenizer, or what
    `litebert.tokenizer.load_tokenizer` reads: its folder or file, a hub id) into a new store at ``out`` (an existing
    store is replaced only with ``overwrite``).

    ``workers`` tokenizing processes run in parallel (1 = in this process); the output does not depend on it.
    A new shard starts once the current one holds ``shard_tokens`` tokens (at a document boundary).

    Memory does not grow with the input: a line of more than ``max_line_bytes`` bytes is refused (a `DataError`
    naming the file and line), and a document of more than ``max_document_chars`` characters is cut into
    consecutive documents, with one warning (`litebert.data.documents`).

    ``inputs`` may also be texts held in Python (`litebert.inputs.text.corpus_sources`): a ``datasets.Dataset`` or
    ``IterableDataset`` (its ``text_field`` column), or an iterator of strings; each text is a document whose lines
    are paragraphs, as a JSON line's text is. A list always names files.
    """
    out = Path(out)
    if shard_tokens < 1:
        raise DataError("{shard_tokens}: expected an integer >= 1", shard_tokens=shard_tokens)
    for name, value in (("max_line_bytes", max_line_bytes), ("max_document_chars", max_document_chars)):
        if not (value is None and name == "max_line_bytes") and (type(value) is not int or value < 1):
            raise DataError("{%s}: expected an integer >= 1" % name, **{name: value})
    if isinstance(tokenizer, (str, os.PathLike)):
        check_store_out(out, overwrite)  # before the tokenizer loads
        from litebert.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(tokenizer)
    files, facts = _check_before_writing(inputs, tokenizer, out, workers, overwrite, text_field)
    dtype = token_dtype(facts.vocab_size)
    tmp = _writable(lambda: _fresh_temporary(out), out)
    empty_files: list[str] = []  # filled by _blocks as it reads the inputs
    try:
        _writable(lambda: _build(tmp, out, files, facts, dtype, tokenizer, empty_files, fmt, encoding_errors,
                                 text_field, block_chars, workers, shard_tokens, progress,
                                 (max_line_bytes, max_document_chars)), out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # Not read back: its ids were checked against the vocabulary as they were written and its offsets come from the
    # lengths. Scanning it here would read a large store twice and map all of it, so that the peak memory of
    # `data prepare` would grow with the corpus; a reader (pretrain, data inspect) checks it in full when it opens it.
    return TokenStore(out, verify=False, _check_content=False)


def _writable(write, out: Path):
    """``write()``, with a failure of the file system (a full disk, a read-only folder, no permission) turned into
    a one-line `WriteError` naming the store; nothing of the store is left half-written (the caller removes its
    temporary folder)."""
    try:
        return write()
    except OSError as e:
        if isinstance(e, LitebertError):
            raise
        raise WriteError("{out}: cannot write the token store (" + literal(io_failure(e) or e) + ")",
                         out=out) from None


def _build(tmp: Path, out: Path, files, facts, dtype, tokenizer, empty_files: list, fmt: str, encoding_errors: str,
           text_field: str, block_chars: int, workers: int, shard_tokens: int, progress: bool,
           bound: tuple[int | None, int]) -> None:
    """The store built in ``tmp`` (aux files, shards, manifest, marker), then swapped into place at ``out``."""
    aux_files, tokenizer_folder = _write_aux_files(tmp, tokenizer, facts)
    blocks = _watch_stripped_marks(_blocks(files, fmt, encoding_errors, text_field, block_chars, empty_files,
                                           bound), tokenizer)
    shards, dropped_docs = _tokenize_into_shards(files, blocks, tokenizer, facts, tmp, dtype, workers, shard_tokens,
                                                 progress)
    manifest = _manifest(tmp, facts, dtype, shards, aux_files, tokenizer_folder, files=files, fmt=fmt,
                         encoding_errors=encoding_errors, empty_files=empty_files, dropped_docs=dropped_docs)
    write_json(tmp / MANIFEST, manifest, indent=1)
    folders.mark(tmp, folders.STORE.kind, format=FORMAT, complete=True)
    _swap_into_place(tmp, out)


def _check_before_writing(inputs, tokenizer, out: Path, workers: int, overwrite: bool,
                          text_field: str = "text") -> tuple[list, TokenizerFacts]:
    """Check the arguments, ``out`` and the tokenizer before anything is written; returns the input files and facts."""
    check_store_out(out, overwrite)
    files = corpus_sources(inputs, text_field)
    if out.exists():
        inside = [f for f in files if isinstance(f, Path) and _is_within(f, out)]
        if inside:
            raise OutputError("{inputs} lies inside {out}, which would be replaced; choose a folder outside the "
                              "corpus", inputs=inside[0], out=out)
    return files, TokenizerFacts.from_tokenizer(tokenizer)


def _fresh_temporary(out: Path) -> Path:
    """Create the empty folder ``.NAME.tmp-PID`` beside ``out`` that the store is built in, and return it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def _write_aux_files(tmp: Path, tokenizer, facts: TokenizerFacts) -> tuple[list[str], str | None]:
    """Write the aux files into ``tmp``; returns their names and the tokenizer folder (None if none is kept)."""
    # np.save is written once, small; the arrays come from the tokenizer, never from untrusted input.
    np.save(tmp / "word_start.npy", facts.word_start)
    np.save(tmp / "normal_ids.npy", facts.normal_ids)
    aux_files = ["word_start.npy", "normal_ids.npy"]
    if not hasattr(tokenizer, "save_pretrained"):  # bare TokenizerFacts, not an AlbertTokenizer
        return aux_files, None
    tokenizer.save_pretrained(tmp / TOKENIZER_FOLDER)
    aux_files += sorted(f"{TOKENIZER_FOLDER}/{p.name}" for p in (tmp / TOKENIZER_FOLDER).iterdir())
    return aux_files, TOKENIZER_FOLDER


def _start_encoding(blocks: Iterator[list[RawDocument]], tokenizer, workers: int) -> tuple[object, Iterator]:
    """Start encoding ``blocks`` (in a pool if ``workers`` > 1); returns the pool, or None, and the encoded blocks."""
    if workers > 1:
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        pool = ctx.Pool(workers, initializer=_init_worker, initargs=(tokenizer,))
        return pool, _bounded_map(pool, _encode_in_worker, blocks, in_flight=2 * workers)
    return None, (encode_block(b, tokenizer) for b in blocks)


def _tokenize_into_shards(files: list[Path], blocks: Iterator[list[RawDocument]], tokenizer, facts: TokenizerFacts,
                          tmp: Path, dtype: np.dtype, workers: int, shard_tokens: int,
                          progress: bool) -> tuple[list[dict], int]:
    """Tokenize ``blocks`` into shards in ``tmp``; returns the shard records and the count of dropped documents."""
    # The bar counts input bytes; its total is unknown when some input is compressed.
    sizes = [input_bytes(f) for f in files]
    total = None if None in sizes else sum(sizes)
    bar = tqdm(total=total, unit="B", unit_scale=True, desc="prepare", disable=not progress)
    pool, encoded = _start_encoding(blocks, tokenizer, workers)
    shards: list[dict] = []
    dropped_docs = 0
    writer = _ShardWriter(tmp, 0, dtype)
    try:
        for tokens, lengths, doc_counts, dropped, nbytes in encoded:
            dropped_docs += dropped
            if tokens.size and int(tokens.max()) >= facts.vocab_size:
                raise DataError(f"tokenizer produced id {int(tokens.max())} >= vocab_size {facts.vocab_size}")
            writer.add(tokens, lengths, doc_counts)
            bar.update(nbytes)
            if writer.num_tokens >= shard_tokens:
                shards.append(writer.close())
                writer = _ShardWriter(tmp, len(shards), dtype)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        bar.close()
    _close_last_shard(writer, shards)
    return shards, dropped_docs


def _close_last_shard(writer: _ShardWriter, shards: list[dict]) -> None:
    """Append the last shard's record to ``shards``, or delete its files if it is an empty one after a full shard."""
    if writer.num_documents or not shards:
        shards.append(writer.close())
    else:  # the last shard filled exactly: drop the empty one that was opened after it
        for f in (writer.tokens, writer.sentences, writer.documents):
            f.close()
            f.path.unlink()


def _manifest(tmp: Path, facts: TokenizerFacts, dtype: np.dtype, shards: list[dict], aux_files: list[str],
              tokenizer_folder: str | None, *, files: list[Path], fmt: str, encoding_errors: str,
              empty_files: list[str], dropped_docs: int) -> dict:
    """The manifest of the store built in ``tmp``, with its own checksum; raises if the inputs held no text."""
    totals = {k: sum(s[k] for s in shards) for k in _COUNTS}
    if totals["num_documents"] == 0:
        raise DataError(f"no text found in {len(files)} input file(s): every file is empty or blank")
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "dtype": dtype.str,
        "tokenizer": facts.to_json(), **totals, "shards": shards,
        "aux_files": {name: _file_record(tmp, name) for name in aux_files},
        "tokenizer_folder": tokenizer_folder,
        "inputs": [str(f) for f in files], "input_format": fmt, "encoding_errors": encoding_errors,
        "empty_inputs": empty_files, "dropped_empty_documents": dropped_docs,
    }
    manifest["manifest_sha256"] = manifest_checksum(manifest)
    return manifest


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished store ``tmp`` to ``out``, replacing the store already there (overwrite)."""
    if out.is_dir() and any(out.iterdir()):  # move the old store aside first so a crash never leaves neither
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


def check_store_out(out: str | os.PathLike, overwrite: bool = False) -> folders.FolderPlan:
    """The plan for a store at ``out`` (`litebert.folders.plan`): a new or empty folder, or an existing token store
    with ``overwrite``; anything else is an `OutputError`, with nothing written. Removes what killed preparations
    of ``out`` left beside it."""
    out = Path(out)
    for tag in ("tmp", "old"):
        remove_stale_temporaries_of(out, tag)
    return folders.plan(out, folders.STORE, overwrite=overwrite)


def _is_within(path: Path, folder: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def manifest_checksum(manifest: dict) -> str:
    """sha256 of a manifest's content without its own ``manifest_sha256`` field (key order and spacing ignored)."""
    rest = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    # surrogatepass: an input's name may hold undecodable bytes (Python's lone surrogates, JSON escapes in the file)
    return hashlib.sha256(json.dumps(rest, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
                          ).hexdigest()


def _file_record(folder: Path, name: str) -> dict:
    return {"name": name, "bytes": (folder / name).stat().st_size, "sha256": sha256_file(folder / name)}


# ------------------------------------------------------------------------------------------------------- reading

class TokenStore:
    """Read-only view of a prepared store; token arrays are memory-mapped.

    Opening a store checks it before anything reads it: the manifest's schema (every field's type and range, and its
    own checksum), every file's size, the sha256 recorded for every file at preparation (``verify=True``, the
    default; ``verify=False`` skips only this hashing), every token id below the vocabulary size, sentence and
    document offsets starting at 0, strictly increasing and ending at the recorded counts, and the word-start and
    normal-id arrays. Any damage raises a one-line :class:`DataError` naming the store and the file.

    Sentences and documents are numbered globally across shards (0 .. num_sentences-1, 0 .. num_documents-1).
    """

    def __init__(self, path: str | os.PathLike, tokenizer=None, verify: bool = True, *, _check_content: bool = True):
        self.path = Path(path)
        mpath = self.path / MANIFEST
        if not self.path.is_dir():
            raise DataError(f"{self.path} is not a store directory (create one with `litebert data prepare`)")
        if not mpath.exists():
            raise DataError(f"{self.path} has no {MANIFEST}: it is not a store, or its preparation did not finish; "
                            f"run `litebert data prepare` again")
        try:
            self.manifest = read_json(mpath, DataError)
        except DataError as e:
            raise self._damaged(str(e).replace(str(mpath), MANIFEST)) from None
        m = self.manifest
        if m.get("format") != FORMAT or m.get("format_version") != FORMAT_VERSION:
            raise DataError(f"{mpath}: not a {FORMAT} v{FORMAT_VERSION} manifest "
                            f"(format={m.get('format')!r}, version={m.get('format_version')!r})")
        self._check_manifest()
        self._check_files(verify)
        t = m["tokenizer"]
        self.facts = TokenizerFacts(t["vocab_size"], t["pad_id"], t["cls_id"], t["sep_id"], t["mask_id"],
                                    t["fingerprint"], *self._load_aux(t["vocab_size"]))
        if tokenizer is not None:
            self.check_tokenizer(tokenizer)
        self.dtype = np.dtype(m["dtype"])
        self._tokens, self._sentences, self._documents = [], [], []
        for s in m["shards"]:
            f = s["files"]
            self._tokens.append(self._memmap(f["tokens"]["name"], self.dtype, s["num_tokens"]))
            self._sentences.append(self._memmap(f["sentences"]["name"], np.dtype("<i8"), s["num_sentences"] + 1))
            self._documents.append(self._memmap(f["documents"]["name"], np.dtype("<i8"), s["num_documents"] + 1))
        if _check_content:
            for k, s in enumerate(m["shards"]):
                self._check_shard(k, s)
        # Global numbering: shard k holds sentences [sent_base[k], sent_base[k+1]) and documents likewise.
        self.sent_base = np.concatenate([[0], np.cumsum([s["num_sentences"] for s in m["shards"]])]).astype(np.int64)
        self.doc_base = np.concatenate([[0], np.cumsum([s["num_documents"] for s in m["shards"]])]).astype(np.int64)

    def __getstate__(self) -> dict:
        # Pickle by path (DataLoader workers under the "spawn" start method): pickling the memmaps would copy
        # every token into the pickle. The store was checked when it was opened; a worker re-checks only sizes.
        return {"path": str(self.path)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], verify=False, _check_content=False)

    def _damaged(self, what: str) -> DataError:
        return DataError(f"store {self.path} is damaged: {what}; prepare it again")

    def _memmap(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        if count == 0:
            return np.zeros(0, dtype)
        try:
            return np.memmap(self.path / name, dtype=dtype, mode="r", shape=(count,))
        except (OSError, ValueError) as e:
            raise self._damaged(f"{name} cannot be mapped ({e})") from None

    # ---------------------------------------------------------------------------------------------- checks
    def _check_manifest(self) -> None:
        """Types and ranges of every manifest field the readers use, so that no edit ends in a KeyError,
        IndexError or a wrong read. Field paths in messages look like ``shards[2].files.tokens.bytes``."""
        m = self.manifest
        if "manifest_sha256" in m and m["manifest_sha256"] != manifest_checksum(m):  # absent in older stores
            raise self._damaged(f"{MANIFEST} does not match its checksum (manifest_sha256): it was edited or damaged")
        dtype = self._check_manifest_facts(m)
        totals = {key: self._count(m, key, key) for key in _COUNTS}
        names: set[str] = set()  # the files named so far, so that no file is named twice
        sums = self._check_manifest_shards(m, dtype, names)
        self._check_manifest_totals(totals, sums)
        self._check_manifest_aux(m, names)
        self._check_manifest_inputs(m)

    def _field(self, obj: dict, key: str, where: str, kind: type | tuple, optional: bool = False):
        """Manifest field ``where`` (``obj[key]``), checked to be a ``kind``; None if ``optional`` and absent/null."""
        if key not in obj:
            if optional:
                return None
            raise self._damaged(f"{MANIFEST} has no field {where}")
        value = obj[key]
        if optional and value is None:
            return None
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is int)
        if not ok:
            names = {int: "an integer", str: "a string", dict: "an object", list: "an array"}
            raise self._damaged(f"{MANIFEST} field {where} is {json.dumps(value)[:40]}, expected "
                                f"{names.get(kind, kind)}")
        return value

    def _count(self, obj: dict, key: str, where: str, low: int = 0, high: int = 1 << 62) -> int:
        """The value of manifest field ``where`` (``obj[key]``), which must be an integer in ``[low, high]``."""
        value = self._field(obj, key, where, int)
        if not low <= value <= high:
            raise self._damaged(f"{MANIFEST} field {where} is {value}, expected an integer in [{low}, {high}]")
        return value

    def _check_manifest_facts(self, m: dict) -> str:
        """Check the token dtype and the tokenizer facts (vocabulary size, special ids); returns the dtype."""
        bad = self._damaged
        dtype = self._field(m, "dtype", "dtype", str)
        if dtype not in TOKEN_DTYPES:
            raise bad(f"{MANIFEST} field dtype is {dtype!r}, expected one of {', '.join(TOKEN_DTYPES)}")
        t = self._field(m, "tokenizer", "tokenizer", dict)
        vocab = self._count(t, "vocab_size", "tokenizer.vocab_size", 5, 1 << 32)
        if token_dtype(vocab).str != dtype:
            raise bad(f"{MANIFEST} field dtype is {dtype!r}, but tokenizer.vocab_size {vocab} needs "
                      f"{token_dtype(vocab).str!r}")
        ids = [self._count(t, key, f"tokenizer.{key}", 0, vocab - 1)
               for key in ("pad_id", "cls_id", "sep_id", "mask_id")]
        if len(set(ids)) != 4:
            raise bad(f"{MANIFEST} field tokenizer: pad/cls/sep/mask ids {ids} are not distinct")
        self._field(t, "fingerprint", "tokenizer.fingerprint", str)
        return dtype

    def _check_manifest_shards(self, m: dict, dtype: str, names: set[str]) -> dict[str, int]:
        """Check every entry of ``shards`` and its file records; returns the counts summed over the shards."""
        shards = self._field(m, "shards", "shards", list)
        if not shards:
            raise self._damaged(f"{MANIFEST} field shards is empty")
        sums = dict.fromkeys(_COUNTS, 0)
        for k, s in enumerate(shards):
            n = self._check_manifest_shard(k, s, dtype, names)
            for key in sums:
                sums[key] += n[key]
        return sums

    def _check_manifest_shard(self, k: int, s: dict, dtype: str, names: set[str]) -> dict[str, int]:
        """Check entry ``shards[k]``: its prefix, its counts and its three file records; returns its counts."""
        bad = self._damaged
        where = f"shards[{k}]"
        if not isinstance(s, dict):
            raise bad(f"{MANIFEST} field {where} is not an object")
        prefix = f"shard-{k:05d}"
        if self._field(s, "prefix", f"{where}.prefix", str) != prefix:
            raise bad(f"{MANIFEST} field {where}.prefix is {s['prefix']!r}, expected {prefix!r}")
        n = {key: self._count(s, key, f"{where}.{key}", 1) for key in _COUNTS}
        if not n["num_documents"] <= n["num_sentences"] <= n["num_tokens"]:
            raise bad(f"{MANIFEST} field {where}: {n['num_documents']} documents, {n['num_sentences']} "
                      f"sentences and {n['num_tokens']} tokens are impossible (every document has a sentence, "
                      f"every sentence a token)")
        files = self._field(s, "files", f"{where}.files", dict)
        sizes = {"tokens": n["num_tokens"] * np.dtype(dtype).itemsize,
                 "sentences": (n["num_sentences"] + 1) * 8, "documents": (n["num_documents"] + 1) * 8}
        for kind, size in sizes.items():
            r = self._record(self._field(files, kind, f"{where}.files.{kind}", dict), f"{where}.files.{kind}",
                             f"{prefix}.{kind}", names)
            if r["bytes"] != size:
                raise bad(f"{MANIFEST} field {where}.files.{kind}.bytes is {r['bytes']}, but {where}'s counts "
                          f"make {size}")
        return n

    def _check_manifest_totals(self, totals: dict[str, int], sums: dict[str, int]) -> None:
        """Check that every total count of the manifest is the sum of the shards' counts."""
        for key in totals:
            if totals[key] != sums[key]:
                raise self._damaged(f"{MANIFEST} field {key} is {totals[key]}, but its shards add up to {sums[key]}")

    def _check_manifest_aux(self, m: dict, names: set[str]) -> None:
        """Check ``tokenizer_folder`` and ``aux_files``: the needed files are there, and only files of a store."""
        bad = self._damaged
        aux = self._field(m, "aux_files", "aux_files", dict)
        folder = self._field(m, "tokenizer_folder", "tokenizer_folder", str, optional=True)
        if folder is not None and folder != TOKENIZER_FOLDER:
            raise bad(f"{MANIFEST} field tokenizer_folder is {folder!r}, expected {TOKENIZER_FOLDER!r} or null")
        needed = ["word_start.npy", "normal_ids.npy"]
        if folder and f"{TOKENIZER_FOLDER}/vocab.txt" not in aux:  # a WordPiece tokenizer's folder holds vocab.txt
            needed.append(f"{TOKENIZER_FOLDER}/spiece.model")
        for name in needed:
            if name not in aux:
                raise bad(f"{MANIFEST} field aux_files has no {name}")
        for name, r in aux.items():
            allowed = name in ("word_start.npy", "normal_ids.npy") or (
                folder is not None and name.startswith(f"{TOKENIZER_FOLDER}/")
                and name.split("/", 1)[1] in _TOKENIZER_FILES)
            if not allowed:
                raise bad(f"{MANIFEST} field aux_files names {name[:60]!r}, which is no file of a store")
            self._record(r if isinstance(r, dict) else self._field(aux, name, f"aux_files.{name}", dict),
                         f"aux_files.{name}", name, names)

    def _check_manifest_inputs(self, m: dict) -> None:
        """Check the input bookkeeping: input and empty-input paths, format, encoding errors, dropped documents."""
        for key in ("inputs", "empty_inputs"):
            if not all(isinstance(x, str) for x in self._field(m, key, key, list)):
                raise self._damaged(f"{MANIFEST} field {key} holds something other than strings")
        for key in ("input_format", "encoding_errors"):
            self._field(m, key, key, str)
        self._count(m, "dropped_empty_documents", "dropped_empty_documents")

    def _record(self, r: dict, where: str, name: str, seen: set[str]) -> dict:
        """Check a file record ``{"name", "bytes", "sha256"}`` that must name ``name``."""
        bad = self._damaged
        if r.get("name") != name:
            raise bad(f"{MANIFEST} field {where}.name is {json.dumps(r.get('name'))[:60]}, expected {name!r}")
        if name in seen:
            raise bad(f"{MANIFEST} names {name} twice")
        seen.add(name)
        size = r.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise bad(f"{MANIFEST} field {where}.bytes is {json.dumps(size)[:40]}, expected an integer >= 0")
        sha = r.get("sha256")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise bad(f"{MANIFEST} field {where}.sha256 is {json.dumps(sha)[:40]}, expected 64 hex digits")
        return r

    def _check_files(self, verify: bool) -> None:
        records = [r for s in self.manifest["shards"] for r in s["files"].values()]
        records += list(self.manifest["aux_files"].values())
        for r in records:
            p = self.path / r["name"]
            if not p.is_file():
                raise self._damaged(f"{r['name']} is missing")
            size = p.stat().st_size
            if size != r["bytes"]:
                raise self._damaged(f"{r['name']} has {size} bytes, the manifest records {r['bytes']} (half-written "
                                    f"or truncated copy?)")
            if verify:
                try:
                    digest = sha256_file(p)
                except OSError as e:
                    raise self._damaged(f"{r['name']} cannot be read ({e.strerror or e})") from None
                if digest != r["sha256"]:
                    raise self._damaged(f"{r['name']} does not match its sha256 checksum")

    def _load_aux(self, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        arrays = []
        for name in ("word_start.npy", "normal_ids.npy"):
            try:  # memory-mapped first, so a damaged header cannot make np.load allocate what it declares
                a = np.load(self.path / name, mmap_mode="r", allow_pickle=False)
            except Exception as e:  # noqa: BLE001 - np.load raises ValueError, OSError, EOFError... on bad files
                raise self._damaged(f"{name} is not a valid .npy file ({str(e).splitlines()[0][:80]})") from None
            arrays.append(a)
        word_start, normal = arrays
        if word_start.dtype != np.bool_ or word_start.shape != (vocab_size,):
            raise self._damaged(f"word_start.npy holds {word_start.dtype}{list(word_start.shape)}, expected "
                                f"bool[{vocab_size}] (tokenizer.vocab_size)")
        if normal.dtype.kind not in "iu" or normal.ndim != 1 or normal.size == 0:
            raise self._damaged(f"normal_ids.npy holds {normal.dtype}{list(normal.shape)}, expected a non-empty "
                                f"list of integer ids")
        normal = np.array(normal, dtype=np.int64)
        if normal.min() < 0 or normal.max() >= vocab_size:
            raise self._damaged(f"normal_ids.npy holds ids outside [0, {vocab_size})")
        return np.array(word_start), normal.astype(np.int32)

    def _check_shard(self, k: int, s: dict) -> None:
        """Token ids below the vocabulary size; offsets from 0, strictly increasing, ending at the counts.
        Read in chunks of ``_SCAN_ITEMS`` elements, so memory stays bounded whatever the shard size."""
        tokens, sentences, documents = self._tokens[k], self._sentences[k], self._documents[k]
        files, vocab = s["files"], self.facts.vocab_size
        for i in range(0, tokens.size, _SCAN_ITEMS):
            top = int(tokens[i:i + _SCAN_ITEMS].max())
            if top >= vocab:
                at = i + int(np.argmax(tokens[i:i + _SCAN_ITEMS] >= vocab))
                raise self._damaged(f"{files['tokens']['name']} holds token id {int(tokens[at])} at position {at}, "
                                    f"not below the vocabulary size {vocab}")
        for offsets, name, end, unit in ((sentences, files["sentences"]["name"], s["num_tokens"], "tokens"),
                                         (documents, files["documents"]["name"], s["num_sentences"], "sentences")):
            if offsets[0] != 0 or offsets[-1] != end:
                raise self._damaged(f"{name} runs from {int(offsets[0])} to {int(offsets[-1])}, expected 0 to {end} "
                                    f"(the shard's {unit})")
            for i in range(0, offsets.size - 1, _SCAN_ITEMS):
                chunk = np.asarray(offsets[i:i + _SCAN_ITEMS + 1])
                step = np.diff(chunk)
                if step.size and step.min() <= 0:
                    at = i + int(np.argmax(step <= 0))
                    raise self._damaged(f"{name} offsets do not increase at entry {at + 1} "
                                        f"({int(offsets[at])} then {int(offsets[at + 1])})")

    @property
    def tokenizer_path(self) -> Path | None:
        """The folder of the tokenizer the store was prepared with (HF layout), or None if the store holds none."""
        folder = self.manifest.get("tokenizer_folder")
        return self.path / folder if folder else None

    def tokenizer(self):
        """The tokenizer the store was prepared with, or None if the store holds none (prepared by an older
        litebert, or with a tokenizer that cannot save itself)."""
        if self.tokenizer_path is None:
            return None
        from litebert.tokenizer import load_tokenizer

        tok = load_tokenizer(self.tokenizer_path)
        self.check_tokenizer(tok)
        return tok

    def check_tokenizer(self, tokenizer) -> None:
        """Raise :class:`DataError` unless ``tokenizer`` (or its facts) is the one the store was made with."""
        got = tokenizer.fingerprint if isinstance(tokenizer, TokenizerFacts) else tokenizer.fingerprint()
        if got != self.facts.fingerprint:
            raise DataError(f"store {self.path} was prepared with a different tokenizer (vocabulary sha256 "
                            f"{self.facts.fingerprint[:12]}..., this one {got[:12]}...); prepare the corpus again "
                            f"with this tokenizer or use the original one")

    # counts
    @property
    def num_tokens(self) -> int:
        return int(self.manifest["num_tokens"])

    @property
    def num_sentences(self) -> int:
        return int(self.manifest["num_sentences"])

    @property
    def num_documents(self) -> int:
        return int(self.manifest["num_documents"])

    @property
    def num_shards(self) -> int:
        return len(self._tokens)

    # access
    def shard_arrays(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Memory-mapped ``(tokens, sentence_token_offsets, document_sentence_offsets)`` of shard ``k`` (local ids)."""
        return self._tokens[k], self._sentences[k], self._documents[k]

    def document_sentences(self, doc: int) -> tuple[int, int]:
        """Global sentence range ``[start, end)`` of global document ``doc``."""
        k = int(np.searchsorted(self.doc_base, doc, side="right")) - 1
        d = self._documents[k]
        local = doc - int(self.doc_base[k])
        base = int(self.sent_base[k])
        return base + int(d[local]), base + int(d[local + 1])

    def sentence_tokens(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokens of global sentences ``[start, end)`` (within one shard) and their lengths:
        ``(ids [T], lengths [end - start])``."""
        k = int(np.searchsorted(self.sent_base, start, side="right")) - 1
        base = int(self.sent_base[k])
        offs = np.asarray(self._sentences[k][start - base:end - base + 1])
        return np.asarray(self._tokens[k][offs[0]:offs[-1]]), np.diff(offs)

    def __repr__(self) -> str:
        return (f"TokenStore({str(self.path)!r}: {self.num_documents} documents, {self.num_sentences} sentences, "
                f"{self.num_tokens} tokens in {self.num_shards} shard(s), {self.dtype.name})")
