"""The demo's data and pretraining recipe (scripts/demo.py), for the tests that run the demo's model for real."""

import sys
from pathlib import Path

from helpers import REPO
from litebert import TrainConfig, pretrain, train_tokenizer
from litebert.data.store import prepare_store


def build_demo_stores(work: Path) -> dict:
    """The bundled corpus split as scripts/demo.py splits it, its 8,000-piece vocabulary, and the train and held-out
    stores, under ``work``: {"train": store, "heldout": store, "config": the demo's model config}."""
    sys.path.insert(0, str(REPO / "scripts"))
    import demo

    corpus = demo.split_corpus(sorted((REPO / "data" / "corpus").glob("*.txt.xz")), work / "corpus")
    tok = train_tokenizer([corpus["train"]], work / "tokenizer", vocab_size=demo.VOCAB, num_threads=2, progress=False)
    for name in ("train", "heldout"):
        prepare_store([corpus[name]], tok, work / f"store-{name}", workers=1, progress=False)
    return {"train": work / "store-train", "heldout": work / "store-heldout", "config": demo.model_config(8000)}


def demo_run(demo_stores: dict, out: Path, lr: float):
    """The demo's model and recipe (LAMB, batch 16 x 128, warmup 100 of 1,100 steps, seed 1) for 200 steps, the
    plateau guard checking at warmup + 100 and stopping the run on a plateau."""
    cfg = TrainConfig(optimizer="lamb", lr=lr, batch_size=16, micro_batch=16, max_steps=1100, warmup_steps=100,
                      seq_len=128, max_predictions=20, seed=1, eval_every=0, eval_examples=64, save_every=1000,
                      on_plateau="stop", plateau_check_steps=100, report_to="none")
    return pretrain(demo_stores["train"], out, model=demo_stores["config"], train=cfg,
                    eval_data=demo_stores["heldout"], progress=False, stop_after=200)
