"""The ALBERT tokenizer: SentencePiece with the official normalization (`tokenizer.py`, `normalize.py`), vocabulary
training with the official settings (`train.py`) and the ``litebert tokenizer`` command (`cli.py`)."""

from litebert.tokenizer.normalize import normalize_with_spans, preprocess_text
from litebert.tokenizer.tokenizer import CONFIG_NAME, MODEL_NAME, SPECIAL_PIECES, AlbertTokenizer
from litebert.tokenizer.train import corpus_lines, train_tokenizer

__all__ = ["AlbertTokenizer", "CONFIG_NAME", "MODEL_NAME", "SPECIAL_PIECES", "corpus_lines", "normalize_with_spans",
           "preprocess_text", "train_tokenizer"]
