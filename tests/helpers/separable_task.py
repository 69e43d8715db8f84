"""The fine-tuning inputs of the session fixture ``separable_task`` (tests/conftest.py): the "tiny" preset
(randomly initialised) with a 1,000-piece vocabulary trained on the bundled sentiment snippets, and a separable
two-class task written here; and the argv and readers of the tests that fine-tune on it."""

import gzip
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from helpers import REPO


def build_separable_task(root: Path) -> tuple[Path, Path]:
    """(model folder, data folder with train.jsonl/dev.jsonl) under ``root``."""
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import train_tokenizer

    corpus = root / "corpus.txt"
    with gzip.open(REPO / "data" / "finetune" / "sentiment" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        corpus.write_text("".join(line.split("\t")[0] + "\n" for line in f), encoding="utf-8")
    tok = train_tokenizer([corpus], root / "model", vocab_size=1000, progress=False)
    torch.manual_seed(0)
    cfg = AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size)
    AlbertForPreTraining(cfg).save_pretrained(root / "model")
    data = root / "data"
    data.mkdir()
    write_separable(data / "train.jsonl", 96, 0)
    write_separable(data / "dev.jsonl", 24, 1)
    return root / "model", data


def write_separable(path: Path, n: int, seed: int, text: str = "text", label: str = "label"):
    """``n`` JSON lines of a two-class task a bag of words separates: filler words around one sentiment word, the
    text under ``text``, "pos"/"neg" under ``label``."""
    rng = np.random.default_rng(seed)
    pos, neg = ["great", "wonderful", "excellent", "funny"], ["awful", "boring", "terrible", "dull"]
    filler = "the movie was and a plot with actors in story film it".split()
    with open(path, "w") as f:
        for _ in range(n):
            y = int(rng.integers(2))
            words = list(rng.choice(filler, int(rng.integers(4, 12))))
            words.insert(int(rng.integers(len(words) + 1)), str(rng.choice(pos if y else neg)))
            f.write(json.dumps({text: " ".join(words), label: ["neg", "pos"][y]}) + "\n")


LR = 2e-3  # the peak learning rate of the runs on the separable task


def finetune(task, out, *extra, dev=True):
    """``litebert finetune classify`` on the separable task (with its dev split unless ``dev`` is false)."""
    model, data = task
    return ["finetune", "classify", "--model", str(model), "--data", str(data if dev else data / "train.jsonl"),
            "--out", str(out), "--lr", str(LR), "--threads", "1", "--no-progress", *extra]


def run_finetune(task, out, settings: dict, **kw):
    """`litebert.finetune` of what `finetune`'s argv runs with the flags of ``settings`` ({`FinetuneConfig` field:
    value}, `helpers.flags`), but for ``--threads`` (the caller sets torch's threads); ``kw``: its other arguments
    (resume, stop_after...). Returns its `FinetuneResult`."""
    from litebert import FinetuneConfig
    from litebert import finetune as finetune_

    model, data = task
    return finetune_("classify", model, data, out, config=FinetuneConfig(**{"lr": LR, **settings}), progress=False,
                     **kw)


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(Path(folder) / "model.safetensors")


def records(folder, split):
    """The rows of ``folder``'s metrics.jsonl of one split."""
    rows = [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == split]
