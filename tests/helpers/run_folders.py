"""Short runs of the commands that write folders, for the tests of what they leave on disk
(tests/system/test_run_folders.py, test_write_faults.py): their argv on the shared fixtures (``tiny_setup`` of
tests/conftest.py, ``word_cycle_task`` of tests/system/conftest.py) and the inputs of ``word_cycle_task``."""

import json
import subprocess
import sys
from pathlib import Path

import torch

from helpers import REPO, flags

FIXTURES = REPO / "tests" / "fixtures" / "tf"


def dead_pid() -> int:
    """The id of a process that has exited (a writer killed before it could clean up)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# The settings of the tiny pretraining runs (`TrainConfig` fields), saving every 2 steps: one dict, given as flags to
# ``litebert pretrain`` (`pretrain`) and as a `TrainConfig` to `litebert.pretrain` (`run_pretrain`)
TINY_RUN = {"batch_size": 4, "micro_batch": 4, "seq_len": 64, "max_predictions": 10, "lr": 0.005, "warmup_steps": 1,
            "save_every": 2, "keep_last": 2, "seed": 3}


def pretrain(setup, out, *extra, steps=4):
    """``litebert pretrain`` of the tiny preset on ``tiny_setup`` (`TINY_RUN`)."""
    return ["pretrain", "--preset", "tiny", "--data", str(setup["store"]), "--out", str(out), "--max-steps",
            str(steps), *flags(TINY_RUN), "--no-progress", *extra]


def run_pretrain(setup, out, *, steps=4, **kw):
    """`litebert.pretrain` of what `pretrain`'s argv runs (``kw``: its other arguments: resume, overwrite,
    stop_after...); returns its `PretrainResult`."""
    from litebert import TrainConfig
    from litebert import pretrain as pretrain_

    return pretrain_(setup["store"], out, model="tiny", train=TrainConfig(max_steps=steps, **TINY_RUN), progress=False,
                     **kw)


def build_word_cycle_task(root: Path) -> tuple[Path, Path]:
    """(model folder, data folder): a 45-piece vocabulary trained on lines cycling through 16 words, the tiny preset,
    and 24 train / 8 dev rows of those lines labelled neg, pos, neg, ... (nothing to learn: the runs are for their
    folders)."""
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import train_tokenizer

    words = "the a film movie plot great awful good bad actors story was is and of it".split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8)) for i in range(300)]
    (root / "corpus.txt").write_text("\n".join(lines) + "\n")
    tok = train_tokenizer([root / "corpus.txt"], root / "model", vocab_size=45, progress=False, num_threads=1)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(root / "model")
    data = root / "data"
    data.mkdir()
    for split, n in (("train", 24), ("dev", 8)):
        (data / f"{split}.jsonl").write_text("".join(
            json.dumps({"text": lines[i], "label": ["neg", "pos"][i % 2]}) + "\n" for i in range(n)))
    return root / "model", data


def finetune(task, out, *extra):
    """``litebert finetune classify`` on ``word_cycle_task``: 4 steps, evaluated every 2."""
    model, data = task
    return ["finetune", "classify", "--model", str(model), "--data", str(data), "--out", str(out),
            "--max-steps", "4", "--eval-every", "2", "--batch-size", "4", "--no-progress", *extra]


def convert(out, *extra):
    """``litebert convert tf`` of the bundled official-layout classifier checkpoint."""
    return ["convert", "tf", "--checkpoint", str(FIXTURES / "classifier" / "model.ckpt-best"),
            "--config", str(FIXTURES / "classifier" / "albert_config.json"), "--out", str(out), *extra]
