"""`torchrun --nproc_per_node 2` (gloo, CPU) gives the same weights as one process with the same global batch.

Global batch 16 = micro-batch 4 x accumulation 2 x 2 processes, against 4 x 4 x 1: both see the same micro-batches
(the loop shards the global batch by rank), so only the order of floating-point sums differs. The SOP head's
dropout is turned off (with dropout, each process draws its own masks, as TPU cores do).
"""

import dataclasses
import subprocess

import pytest
import torch
from safetensors.torch import load_file

from helpers import PYTHON
from litebert.config import AlbertConfig
from litebert.engine.metrics_log import read_metrics


def command(paths, model_config, out):
    return ["pretrain", "--model-config", str(model_config), "--data", str(paths["store"]),
            "--eval-data", str(paths["eval_store"]), "--out", str(out), "--max-steps", "6", "--batch-size", "16",
            "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10", "--lr", "0.005", "--warmup-steps", "2",
            "--eval-examples", "16", "--save-every", "0", "--threads", "1", "--no-progress"]


def test_two_processes_equal_one(tiny_setup, tmp_path):
    paths = tiny_setup
    cfg_file = tmp_path / "model.json"
    dataclasses.replace(AlbertConfig.from_preset("tiny"), classifier_dropout_prob=0.0).to_json(cfg_file)
    one = subprocess.Popen([PYTHON, "-m", "litebert.cli", *command(paths, cfg_file, tmp_path / "one")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    two = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "litebert.cli", *command(paths, cfg_file, tmp_path / "two")],
                         capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    _, err = one.communicate(timeout=300)
    assert one.returncode == 0, err[-3000:]
    assert "16 = 4 x 2 x 2 process(es)" in two.stderr and "16 = 4 x 4 x 1 process(es)" in err

    a, b = read_metrics(tmp_path / "one"), read_metrics(tmp_path / "two")
    assert [r["step"] for r in b] == list(range(1, 7))
    assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-5)
    assert [r["tokens"] for r in b] == [r["tokens"] for r in a]  # the same examples were seen
    wa = load_file(tmp_path / "one" / "model" / "model.safetensors")
    wb = load_file(tmp_path / "two" / "model" / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-5, msg=k)
    moved = max((wa[k] - w0).abs().max().item() for k, w0 in _initial(cfg_file, paths).items() if k in wa)
    assert moved > 1e-3  # the weights really trained, so the comparison means something
    # only rank 0 wrote: one metrics file, one model folder, checkpoints only from rank 0's process
    assert not list((tmp_path / "two").glob("*rank*"))


def _initial(cfg_file, paths):
    """The initial weights both runs started from (the CLI seeds with --seed before building the model)."""
    from litebert.data.store import TokenStore
    from litebert.heads import AlbertForPreTraining
    from litebert.pretraining.config import TrainConfig

    cfg = AlbertConfig.from_json(cfg_file)
    cfg = dataclasses.replace(cfg, vocab_size=TokenStore(paths["store"]).facts.vocab_size)
    torch.manual_seed(TrainConfig().seed)
    with torch.device("cpu"):
        m = AlbertForPreTraining(cfg)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        m.save_pretrained(d)
        return load_file(f"{d}/model.safetensors")


def test_two_processes_resume_as_one(tiny_setup, tmp_path):
    """A two-process run continued with --resume restores the checkpoint on every rank: it ends where one process
    continued the same way ends (every rank steps from the checkpoint's step, with its optimizer state)."""
    paths = tiny_setup
    cfg_file = tmp_path / "model.json"
    dataclasses.replace(AlbertConfig.from_preset("tiny"), classifier_dropout_prob=0.0).to_json(cfg_file)

    def run(out, launcher, *extra):
        argv = command(paths, cfg_file, out)
        argv = [a for i, a in enumerate(argv) if a != "--max-steps" and argv[i - 1] != "--max-steps"]
        argv = [a for i, a in enumerate(argv) if a != "--save-every" and argv[i - 1] != "--save-every"]
        done = subprocess.run([*launcher, "-m", "litebert.cli", *argv, "--save-every", "3", *extra],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    two = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    for out, launcher in ((tmp_path / "one", [PYTHON]), (tmp_path / "two", two)):
        run(out, launcher, "--max-steps", "3")
        err = run(out, launcher, "--max-steps", "6", "--resume")
        assert "resuming at step 3" in err or "from step 3" in err, err[-2000:]
    a, b = read_metrics(tmp_path / "one"), read_metrics(tmp_path / "two")
    assert [r["step"] for r in b] == [r["step"] for r in a] == list(range(1, 7))
    assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-5)
    wa = load_file(tmp_path / "one" / "model" / "model.safetensors")
    wb = load_file(tmp_path / "two" / "model" / "model.safetensors")
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-5, msg=k)
