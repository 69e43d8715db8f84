"""litebert: ALBERT (Lan et al., ICLR 2020) done completely, in plain PyTorch.

The heavy modules (torch models, tokenizer, data pipeline) are imported lazily so that ``import litebert`` and the
CLI's ``--help`` stay fast.
"""

__version__ = "0.1.0"

_LAZY = {
    "AlbertConfig": "litebert.config",
    "PRESETS": "litebert.config",
    "AlbertModel": "litebert.model",
    "AlbertForPreTraining": "litebert.heads",
    "AlbertForMaskedLM": "litebert.heads",
    "AlbertForSequenceClassification": "litebert.heads",
    "AlbertForTokenClassification": "litebert.heads",
    "AlbertForQuestionAnswering": "litebert.heads",
    "AlbertForMultipleChoice": "litebert.heads",
    "AlbertTokenizer": "litebert.tokenizer",
    "train_tokenizer": "litebert.tokenizer",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'litebert' has no attribute {name!r}")


__all__ = sorted(_LAZY) + ["__version__"]
