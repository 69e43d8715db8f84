"""Pretraining data: corpus readers, the sharded token store, and SOP/NSP examples with whole-word n-gram masking.

    litebert data prepare --input corpus/ --tokenizer tok/ --out store/     # see docs/data.md
    from litebert.data import TokenStore, PretrainingDataset, collate_pretraining
"""

from litebert.data.pretraining import PretrainingDataset, collate_pretraining
from litebert.data.store import TokenizerFacts, TokenStore, prepare_store

__all__ = ["PretrainingDataset", "TokenStore", "TokenizerFacts", "collate_pretraining", "prepare_store"]
