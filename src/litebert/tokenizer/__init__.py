"""The ALBERT tokenizer: SentencePiece with the official normalization (`tokenizer.py`, `normalize.py`), HF-shaped
outputs (`batch.py`), folders saved by transformers 5 that hold only ``tokenizer.json`` (`hf_json.py`), vocabulary
training with the official settings (`train.py`) and the ``litebert tokenizer`` command (`cli.py`)."""

from __future__ import annotations

import os

from litebert.tokenizer.batch import BatchEncoding
from litebert.tokenizer.normalize import normalize_with_spans, preprocess_text
from litebert.tokenizer.tokenizer import (CONFIG_NAME, HF_JSON_NAME, MODEL_INPUT_NAMES, MODEL_NAME, SPECIAL_PIECES,
                                          AlbertTokenizer)
from litebert.tokenizer.train import corpus_lines, train_tokenizer


def load_tokenizer(path: str | os.PathLike, **options) -> AlbertTokenizer:
    """The tokenizer of ``path``: a folder holding ``spiece.model`` or only ``tokenizer.json`` (as transformers 5
    saves it), a SentencePiece ``.model`` file or a ``tokenizer.json`` file. A folder with neither file is a one-line
    ``TokenizerError``. ``options`` override ``tokenizer_config.json`` (``do_lower_case``, ``keep_accents``, ...)."""
    return AlbertTokenizer.from_pretrained(path, **options)


__all__ = ["AlbertTokenizer", "BatchEncoding", "CONFIG_NAME", "HF_JSON_NAME", "MODEL_INPUT_NAMES", "MODEL_NAME",
           "SPECIAL_PIECES", "corpus_lines", "load_tokenizer", "normalize_with_spans", "preprocess_text",
           "train_tokenizer"]
