"""Intrinsic evaluation (evaluate-pretraining) and the layer-transition analysis (analyze transitions, Figure 2):
Wilson intervals against hand-computed values, accuracies against independent counts (the dataset's own labels,
the pretraining loop's evaluation), transitions against HF transformers' hidden states."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch

from helpers.tiny_setup import tiny_model_config
from litebert.cli import main
from litebert.data.pretraining import PretrainingDataset, collate_pretraining
from litebert.errors import CheckpointError, ConfigError
from litebert.experiments.intrinsic import (
    accuracy,
    intrinsic_accuracy,
    load_for_evaluation,
    parse_objectives,
    wilson_interval,
)
from litebert.experiments.transitions import layer_transitions
from litebert.heads import AlbertForMaskedLM, AlbertForPreTraining


@pytest.fixture(scope="module")
def setup(tiny_setup, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exp")
    paths = tiny_setup
    torch.manual_seed(0)
    model = AlbertForPreTraining(tiny_model_config(vocab_size=1000))
    model.save_pretrained(tmp / "model")
    return {**paths, "model": tmp / "model", "tmp": tmp}


def test_wilson_interval_hand_values():
    # hand-computed: p = 0.5, n = 100 -> 0.5 +- 1.96 * sqrt(0.25/100 + 1.96^2/40000) / (1 + 1.96^2/100)
    low, high = wilson_interval(50, 100)
    assert low == pytest.approx(0.40383, abs=1e-4) and high == pytest.approx(0.59617, abs=1e-4)
    low, high = wilson_interval(0, 10)  # z^2 / (n + z^2) = 3.8415 / 13.8415
    assert low == 0.0 and high == pytest.approx(0.27753, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    a = accuracy(79, 100)
    assert a.accuracy == 0.79 and a.low < 0.79 < a.high and a.total == 100


def test_parse_objectives():
    assert parse_objectives("MLM, sop") == ("mlm", "sop") == parse_objectives(["mlm", "sop"])
    for bad, message in (("mlm,itm", "subset of mlm,sop,nsp"), ("sop,sop", "twice"), ("mlm,MLM", "each once"),
                         ("mlm,", "an empty item")):
        with pytest.raises(ConfigError, match=message):
            parse_objectives(bad)


def test_sentence_accuracy_counts_the_datasets_labels(setup):
    """A sentence head fixed to answer 0 ("in order") scores the share of label-0 examples, counted from the dataset."""
    model = AlbertForPreTraining.from_pretrained(setup["model"])
    with torch.no_grad():
        model.sop_classifier.classifier.weight.zero_()
        model.sop_classifier.classifier.bias.copy_(torch.tensor([5.0, -5.0]))
    scores = intrinsic_accuracy(model, setup["eval_store"], ("sop", "nsp"), examples=60, seq_len=64, seed=3)
    for objective in ("sop", "nsp"):
        ds = PretrainingDataset(setup["eval_store"], max_seq_length=64, objective=objective, seed=3,
                                short_seq_prob=0.0)
        n = min(60, ds.num_examples)
        zeros = sum(int(ds.example(0, i)["sentence_order_label"]) == 0 for i in range(n))
        assert scores[objective].total == n and scores[objective].correct == zeros


def test_mlm_accuracy_equals_the_pretraining_loops_evaluation(setup):
    from litebert.engine.distributed import Distributed
    from litebert.engine.runtime import Runtime
    from litebert.pretraining.config import TrainConfig
    from litebert.pretraining.loop import evaluate

    model = AlbertForPreTraining.from_pretrained(setup["model"])
    with torch.no_grad():  # a model that predicts something better than chance: tie the bias to frequent ids
        model.predictions.bias.copy_(torch.linspace(3, 0, model.config.vocab_size))
    scores = intrinsic_accuracy(model, setup["eval_store"], ("mlm", "sop"), examples=48, seq_len=64, seed=5,
                                batch_size=7)
    ds = PretrainingDataset(setup["eval_store"], max_seq_length=64, objective="sop", seed=5, short_seq_prob=0.0)
    ref = evaluate(model, ds, collate_pretraining, TrainConfig(eval_examples=48, micro_batch=8, batch_size=8),
                   Runtime(Distributed(), None, "sdpa"))
    assert scores["mlm"].accuracy == pytest.approx(ref["mlm_accuracy"], abs=1e-12)
    assert scores["sop"].accuracy == pytest.approx(ref["sop_accuracy"], abs=1e-12)
    assert scores["sop"].total == ref["examples"] == 48


def test_model_without_sentence_head_and_wrong_vocabulary(setup):
    mlm_only = setup["tmp"] / "mlm_only"
    AlbertForMaskedLM(tiny_model_config(vocab_size=1000)).save_pretrained(mlm_only)
    with pytest.raises(CheckpointError, match="evaluate it with objectives mlm"):
        load_for_evaluation(mlm_only, ("mlm", "sop"), 1000)
    assert load_for_evaluation(mlm_only, ("mlm",), 1000) is not None
    with pytest.raises(ConfigError, match="vocabulary of 1000 pieces"):
        load_for_evaluation(setup["model"], ("mlm",), 30000)


def test_transitions_match_hf_hidden_states(setup):
    """L2 distance and cosine of each layer's input and output, recomputed from transformers' hidden states."""
    transformers = pytest.importorskip("transformers")
    folder = setup["tmp"] / "not_shared"
    torch.manual_seed(1)
    AlbertForPreTraining(tiny_model_config(vocab_size=1000, sharing="none")).save_pretrained(folder)
    ours = AlbertForPreTraining.from_pretrained(folder)
    rows = layer_transitions(ours, setup["eval_store"], examples=10, seq_len=64, seed=2, batch_size=4)
    hf = transformers.AlbertModel.from_pretrained(folder).eval()
    ds = PretrainingDataset(setup["eval_store"], max_seq_length=64, seed=2, masked_lm_prob=0.0, short_seq_prob=0.0)
    batch = collate_pretraining([ds.example(0, i) for i in range(10)])
    with torch.no_grad():
        states = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"], output_hidden_states=True).hidden_states
    mask = batch["attention_mask"].bool()
    assert len(rows) == 4 and rows[0]["tokens"] == int(mask.sum())
    for layer, row in enumerate(rows):
        a, b = states[layer][mask].double(), states[layer + 1][mask].double()
        cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
        assert row["l2_distance"] == pytest.approx((b - a).norm(dim=-1).mean().item(), rel=1e-4)
        assert row["cosine_similarity"] == pytest.approx(cos.mean().item(), abs=1e-5)
        assert row["angle_degrees"] == pytest.approx(np.degrees(np.arccos(cos.clamp(-1, 1).numpy())).mean(), abs=1e-2)


def test_cli_commands(setup, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["evaluate-pretraining", str(setup["model"]), "--data", str(setup["eval_store"]), "--examples", "40",
                 "--seq-len", "64", "--output", str(out), "--no-progress"])
    assert code == 0
    report = json.loads(out.read_text())
    scores = report["models"]["model"]
    assert set(scores) == {"model", "mlm", "sop", "nsp"} and scores["sop"]["total"] == 40
    for o in ("mlm", "sop", "nsp"):
        s = scores[o]
        assert s["low"] <= s["accuracy"] <= s["high"]
        assert (s["low"], s["high"]) == pytest.approx(wilson_interval(s["correct"], s["total"]))
    fig = tmp_path / "fig.png"
    assert main(["analyze", "transitions", str(setup["model"]), "--data", str(setup["eval_store"]), "--examples",
                 "8", "--out", str(fig), "--names", "tiny", "--no-progress"]) == 0
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(open(fig.with_suffix(".csv"))))
    assert [r["layer"] for r in rows] == ["1", "2", "3", "4"] and {r["model"] for r in rows} == {"tiny"}
    assert all(math.isfinite(float(r["l2_distance"])) for r in rows)
    code = main(["evaluate-pretraining", str(setup["model"]), "--data", str(setup["eval_store"]),
                 "--objectives", "mlm,foo"])
    assert code == 2 and "subset of mlm,sop,nsp" in capsys.readouterr().err
