"""Tokenizers: `load_tokenizer` reads any tokenizer folder and returns the tokenizer it holds, each with the interface
of `TokenizerBase` (`base.py`: HF-shaped calls, pairs, truncation, padding; outputs in `batch.py`).

- `AlbertTokenizer` (`tokenizer.py`, `normalize.py`): SentencePiece with the official ALBERT normalization, from
  ``spiece.model`` or a Unigram ``tokenizer.json`` as transformers 5 saves it (`hf_json.py`).
- `WordPieceTokenizer` (`wordpiece.py`): BERT-style ``vocab.txt`` (or a WordPiece ``tokenizer.json``), as the
  Chinese ALBERTs ship it; needs the ``tokenizers`` library (the ``wordpiece`` extra).

Vocabulary training with the official settings is `train.py`, the ``litebert tokenizer`` command `cli.py`."""

from __future__ import annotations

import os
from pathlib import Path

from litebert.arguments import checked
from litebert.errors import TokenizerError
from litebert.files import read_json
from litebert.tokenizer.base import TokenizerBase
from litebert.tokenizer.batch import BatchEncoding
from litebert.tokenizer.normalize import normalize_with_spans, preprocess_text
from litebert.tokenizer.tokenizer import (
    CONFIG_NAME,
    HF_JSON_NAME,
    MODEL_INPUT_NAMES,
    MODEL_NAME,
    SPECIAL_PIECES,
    AlbertTokenizer,
)
from litebert.tokenizer.train import corpus_lines, train_tokenizer
from litebert.tokenizer.wordpiece import VOCAB_NAME, WordPieceTokenizer  # imports `tokenizers` only when one is built

TOKENIZER_FILES = (MODEL_NAME, VOCAB_NAME, HF_JSON_NAME)  # what a folder holds to hold a tokenizer


def tokenizer_format(path: str | os.PathLike) -> str | None:
    """What the existing folder or file ``path`` holds: "sentencepiece" (``spiece.model``, a Unigram
    ``tokenizer.json``, or a file of another kind, read as a SentencePiece model), "wordpiece" (``vocab.txt``, a
    WordPiece ``tokenizer.json``, a ``.txt`` file), or None for a folder with none of those files. A folder's
    ``spiece.model`` comes first, then ``vocab.txt``, then ``tokenizer.json``, as HF's slow tokenizers read them."""
    path = Path(path)
    if path.is_dir():
        found = next((path / name for name in TOKENIZER_FILES if (path / name).is_file()), None)
        return None if found is None else tokenizer_format(found)
    if path.suffix == ".json":
        model = read_json(path, TokenizerError).get("model")
        return "wordpiece" if isinstance(model, dict) and model.get("type") == "WordPiece" else "sentencepiece"
    return "wordpiece" if path.suffix == ".txt" else "sentencepiece"


@checked
def load_tokenizer(path: str | os.PathLike, **options) -> TokenizerBase:
    """The tokenizer of ``path``: a folder (or a hub id, `litebert.hub.local`) holding ``spiece.model``, a BERT-style
    ``vocab.txt`` or only ``tokenizer.json`` (Unigram as transformers 5 saves an ALBERT one, or WordPiece), or one of
    those files itself (a SentencePiece ``.model``, a ``vocab.txt``, a ``tokenizer.json``). ``options`` override the
    folder's ``tokenizer_config.json`` (``do_lower_case``, ``split_special_tokens``, and ``keep_accents`` for
    SentencePiece or ``strip_accents`` / ``tokenize_chinese_chars`` for WordPiece). A path holding no tokenizer is a
    one-line `TokenizerError`."""
    from litebert import hub

    path = hub.local(path, "tokenizer")
    if not path.exists():
        raise TokenizerError(f"{path}: no such tokenizer folder or file (a folder holding "
                             f"{', '.join(TOKENIZER_FILES)}, or one of those files)")
    kind = tokenizer_format(path)
    if kind is None:
        raise TokenizerError(f"{path}: no {MODEL_NAME}, {VOCAB_NAME} or {HF_JSON_NAME} in this folder, so no "
                             "tokenizer; pass the folder of the pretrained model, or save one with "
                             f"`transformers.AutoTokenizer.from_pretrained(NAME).save_pretrained(\"{path}\")`")
    if kind == "wordpiece":
        return WordPieceTokenizer.from_pretrained(path, **options)
    return AlbertTokenizer.from_pretrained(path, **options)


__all__ = ["AlbertTokenizer", "BatchEncoding", "CONFIG_NAME", "HF_JSON_NAME", "MODEL_INPUT_NAMES", "MODEL_NAME",
           "SPECIAL_PIECES", "TOKENIZER_FILES", "TokenizerBase", "VOCAB_NAME", "WordPieceTokenizer", "corpus_lines",
           "load_tokenizer", "normalize_with_spans", "preprocess_text", "tokenizer_format", "train_tokenizer"]
