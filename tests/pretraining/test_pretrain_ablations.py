"""The paper's ablations on the command line: shape flags override the preset (--hidden-size brings H/64 heads and a
4H FFN), and the sentence objective names its metrics (sop_*, nsp_*; none: MLM only, no sentence loss)."""

import csv
import json

import pytest

from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.engine.metrics_log import read_metrics
from litebert.params import count_parameters

ARGS = ["--preset", "tiny", "--batch-size", "4", "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10",
        "--lr", "0.005", "--warmup-steps", "1", "--seed", "3", "--max-steps", "3", "--eval-examples", "8",
        "--no-progress"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


def run(tiny_setup, out, *extra):
    return main(["pretrain", "--data", str(tiny_setup["store"]), "--eval-data", str(tiny_setup["eval_store"]),
                 "--out", str(out), *ARGS, *extra])


def test_shape_flags_override_the_preset(tiny_setup, tmp_path):
    assert run(tiny_setup, tmp_path / "r", "--sharing", "none", "--embedding-size", "8", "--hidden-size", "128",
               "--num-layers", "3") == 0
    cfg = AlbertConfig.from_json(tmp_path / "r" / "model" / "config.json")
    assert (cfg.sharing, cfg.embedding_size, cfg.hidden_size, cfg.num_hidden_layers) == ("none", 8, 128, 3)
    assert (cfg.num_attention_heads, cfg.intermediate_size) == (2, 512)  # H/64 and 4H
    # not-shared: three layers' blocks in the weights (a hand count of the encoder's parameters)
    h, i, e = 128, 512, 8
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    embeddings = 1000 * e + 128 * e + 2 * e + 2 * e + (e * h + h)
    assert count_parameters(cfg) == embeddings + 3 * layer + (h * h + h)


@pytest.mark.parametrize("objective", ["nsp", "none"])
def test_metrics_are_named_after_the_objective(tiny_setup, tmp_path, objective):
    out = tmp_path / objective
    assert run(tiny_setup, out, "--objective", objective, "--log-every", "1") == 0
    train, evals = read_metrics(out, "train"), read_metrics(out, "eval")
    header = next(csv.reader(open(out / "eval.csv")))
    if objective == "nsp":
        assert "nsp_loss" in train[0] and "sop_loss" not in train[0]
        assert {"nsp_loss", "nsp_accuracy"} <= set(evals[-1]) and "nsp_accuracy" in header
    else:  # MLM only: the loss is the MLM loss, and no sentence metric is reported
        assert all(r["loss"] == pytest.approx(r["mlm_loss"]) for r in train)
        assert not any(k.startswith(("sop_", "nsp_")) for r in train + evals for k in r)
        assert not any(c.startswith(("sop_", "nsp_")) for c in header)
    assert json.loads((out / "train_config.json").read_text())["objective"] == objective


def test_shape_flags_against_init_from(tiny_setup, tmp_path, capsys):
    assert run(tiny_setup, tmp_path / "base") == 0
    argv = ["pretrain", "--data", str(tiny_setup["store"]), "--out", str(tmp_path / "c"), "--init-from",
            str(tmp_path / "base" / "model"), *ARGS[2:]]
    assert main(argv + ["--hidden-size", "64"]) == 2
    assert "keeps the model's shape" in capsys.readouterr().err
    assert main(argv + ["--hidden-size", "32"]) == 2  # 32/64 -> 1 head, the model has 4
    assert "num_attention_heads is 4, the flags ask for 1" in capsys.readouterr().err
    assert main(argv + ["--hidden-size", "32", "--num-heads", "4", "--intermediate-size", "64", "--sharing",
                        "all"]) == 0  # the model's own values: accepted
