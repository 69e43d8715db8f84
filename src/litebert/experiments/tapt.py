"""Task-adaptive pretraining (TAPT; Gururangan et al. 2020, "Don't Stop Pretraining", Section 4): continue a
pretrained model's masked-LM training on the task's own unlabelled training texts before fine-tuning it.

`task_texts` writes the texts as a corpus (official format: a snippet per line, documents of `SNIPPETS_PER_DOCUMENT`
snippets in a seeded order, so that sequences fill up as in pretraining); `adapt` tokenizes it into a token store and
runs `litebert.pretrain` from the model (``init_from``) with the MLM objective only, as the paper's TAPT does. Only
training texts are read: dev and test never reach the model before they are scored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from litebert.checks import AT_LEAST_0, AT_LEAST_1, LEARNING_RATE, PROBABILITY, check_values
from litebert.errors import ConfigError
from litebert.files import atomic_write, read_json, write_json

SNIPPETS_PER_DOCUMENT = 8
TAPT_FILE = "tapt.json"


@dataclass(frozen=True)
class TaptSettings:
    """The continued pretraining: ``steps`` of ``batch_size`` sequences of at most ``seq_len`` pieces (capped by the
    model's positions when it has fewer), LAMB at peak ``lr`` with ``warmup_proportion`` of the steps warming up, MLM
    only."""

    steps: int
    lr: float = 1e-3
    batch_size: int = 16
    seq_len: int = 128
    warmup_proportion: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:  # named as the experiment's flags: --tapt-steps ...
        check_values(allow_none=False, tapt_steps=(self.steps, AT_LEAST_1, int),
                     tapt_batch_size=(self.batch_size, AT_LEAST_1, int), tapt_seq_len=(self.seq_len, AT_LEAST_1, int),
                     tapt_seed=(self.seed, AT_LEAST_0, int), tapt_lr=(self.lr, LEARNING_RATE),
                     tapt_warmup_proportion=(self.warmup_proportion, PROBABILITY))


def task_texts(examples: Sequence, out: Path, seed: int) -> int:
    """Write the examples' texts (text_a, and text_b where there is one, as the next line) to ``out`` as a corpus of
    documents of `SNIPPETS_PER_DOCUMENT` examples each, in an order drawn from ``seed``; returns the examples
    written."""
    order = np.random.default_rng(seed).permutation(len(examples))
    lines, docs = [], []
    for i in order:
        e = examples[int(i)]
        lines.extend(" ".join(t.split()) for t in (e.text_a, getattr(e, "text_b", None)) if t and t.strip())
        if len(lines) >= SNIPPETS_PER_DOCUMENT:
            docs.append("\n".join(lines))
            lines = []
    if lines:
        docs.append("\n".join(lines))
    if not docs:
        raise ConfigError("{data}: the training split has no text to adapt the model to", data=str(out))
    atomic_write(out, "\n\n".join(docs) + "\n")
    return len(examples)


def adapt(model: Path, tokenizer: Path, examples: Sequence, folder: Path, settings: TaptSettings, *,
          device: Optional[str] = None, progress: bool = True, log=print) -> dict:
    """The model adapted to the task's texts in ``folder`` (text/, store/, run/; reused when finished earlier):
    returns {"model": the adapted model folder, "minutes": wall time of tokenizing and training, "tokens": tokens
    the run saw (of this call: a continued run counts its own), the settings}. A stopped run continues when called
    again."""
    from litebert import TokenStore, TrainConfig, load_tokenizer, prepare_store, pretrain
    from litebert.io.hf_folder import load_config

    log = log or (lambda *_: None)
    record = folder / TAPT_FILE
    source = {"model": str(Path(model).resolve()), "tokenizer": str(Path(tokenizer).resolve())}
    if record.is_file():
        done = read_json(record, ConfigError)
        if done.get("settings") != settings.__dict__ or done.get("source") != source:
            raise ConfigError("{folder}: adapted earlier from another model, tokenizer or settings (tapt.json); "
                              "give a new folder", folder=str(folder))
        if Path(folder / "run" / "model").is_dir():
            log(f"task-adaptive pretraining finished earlier ({done['minutes']:.1f} min), reused")
            return {**done, "model": str(folder / "run" / "model")}
    started = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "text" / "train.txt"
    text.parent.mkdir(exist_ok=True)
    task_texts(examples, text, settings.seed)
    store_dir = folder / "store"
    store = TokenStore(store_dir) if (store_dir / "manifest.json").is_file() else prepare_store(
        [text], load_tokenizer(tokenizer), store_dir, progress=False)
    train = TrainConfig(optimizer="lamb", lr=settings.lr, batch_size=settings.batch_size,
                        micro_batch=settings.batch_size,
                        max_steps=settings.steps, warmup_steps=int(settings.warmup_proportion * settings.steps),
                        seq_len=min(settings.seq_len, load_config(model).max_position_embeddings),
                        objective="none", seed=settings.seed, eval_every=0,
                        save_every=max(1, settings.steps // 4), log_every=max(1, min(50, settings.steps // 10)),
                        report_to="none")
    log(f"task-adaptive pretraining: {settings.steps} MLM steps of {settings.batch_size} x {settings.seq_len} on "
        f"{len(examples):,} training texts ({store.num_tokens:,} tokens), LAMB lr {settings.lr:g}")
    result = pretrain(store.path, folder / "run", init_from=model, train=train, tokenizer=tokenizer, resume=True,
                      device=device, progress=progress)
    if result.interrupted:
        raise KeyboardInterrupt
    minutes = (time.perf_counter() - started) / 60
    done = {"settings": settings.__dict__, "source": source, "minutes": round(minutes, 2), "steps": settings.steps,
            "tokens": int(result.tokens_seen),
            "texts": len(examples), "store_tokens": int(store.num_tokens)}
    write_json(record, done)
    return {**done, "model": str(folder / "run" / "model")}
