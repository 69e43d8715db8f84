"""The tiny pretraining setup of the training tests (the session fixture ``tiny_setup`` of tests/conftest.py builds
it once with the default documents; tests that need other documents or their own folder call ``build_tiny_setup``).

A fixed small English corpus (the first chapters of the bundled Moby-Dick), a 1000-piece SentencePiece vocabulary
trained on it with fixed settings (one thread: deterministic), a token store, and the `tiny` model preset.
"""

from __future__ import annotations

import dataclasses
import lzma
from pathlib import Path

from helpers import REPO

CORPUS = REPO / "data" / "corpus" / "moby_dick.txt.xz"


def corpus_documents() -> list[str]:
    return lzma.decompress(CORPUS.read_bytes()).decode("utf-8").split("\n\n")


def build_tiny_setup(folder: Path, train_docs=slice(2, 40), eval_docs=slice(120, 126)) -> dict:
    """Corpus files, tokenizer and stores under ``folder``; returns their paths."""
    import sentencepiece as spm

    from litebert.data.store import prepare_store
    from litebert.tokenizer import AlbertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    docs = corpus_documents()
    train_txt, eval_txt = folder / "train.txt", folder / "eval.txt"
    train_txt.write_text("\n\n".join(docs[train_docs]) + "\n")
    eval_txt.write_text("\n\n".join(docs[eval_docs]) + "\n")
    tok_dir = folder / "tokenizer"
    tok_dir.mkdir(exist_ok=True)
    lower = folder / "lower.txt"
    lower.write_text(train_txt.read_text().lower())
    # The official ALBERT vocabulary's special pieces: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4.
    spm.SentencePieceTrainer.train(
        input=str(lower), model_prefix=str(tok_dir / "spiece"), vocab_size=1000, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        num_threads=1, shuffle_input_sentence=False, character_coverage=1.0, minloglevel=2)
    tok = AlbertTokenizer.from_pretrained(tok_dir / "spiece.model")
    prepare_store([train_txt], tok, folder / "store", progress=False)
    prepare_store([eval_txt], tok, folder / "eval_store", progress=False)
    return {"tokenizer": tok_dir / "spiece.model", "store": folder / "store", "eval_store": folder / "eval_store"}


def tiny_model_config(**overrides):
    from litebert.config import AlbertConfig

    return dataclasses.replace(AlbertConfig.from_preset("tiny"), **overrides)


def datasets(paths: dict, seq_len: int = 64, seed: int = 7):
    from litebert.data.pretraining import PretrainingDataset

    kw = dict(max_seq_length=seq_len, max_predictions_per_seq=10, seed=seed)
    return PretrainingDataset(paths["store"], **kw), PretrainingDataset(paths["eval_store"], **kw)
