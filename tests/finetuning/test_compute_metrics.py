"""`finetune`'s ``compute_metrics`` in Trainer's form (`litebert.tasks.eval_prediction`): a function of one argument
gets an `EvalPrediction` whose ``predictions`` are the dev logits (checked against transformers' own
AlbertForSequenceClassification run on the kept folder, and against the task's accuracy) and whose ``label_ids`` are
the gold labels' ids, so that AUC and log-loss can be computed; the two-argument form keeps getting strings; a
function of neither shape is refused up front in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from litebert import EvalPrediction, FinetuneConfig, finetune
from litebert.errors import ConfigError
from litebert.tasks.eval_prediction import eval_prediction, takes_eval_prediction

pytestmark = pytest.mark.usefixtures("one_thread")


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC by its definition: the chance a positive outscores a negative (ties half)."""
    pos, neg = scores[positive], scores[~positive]
    return float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                 / (len(pos) * len(neg)))


def test_an_eval_prediction_carries_the_dev_logits_and_label_ids(separable_task, tmp_path):
    transformers = pytest.importorskip("transformers")
    from litebert.tokenizer import AlbertTokenizer

    model, data = separable_task
    seen: list[EvalPrediction] = []

    def scores(p):  # Trainer's shape: one argument
        seen.append(p)
        logits, label_ids = p
        z = logits - logits.max(-1, keepdims=True)
        probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)  # [N, 2]
        pos = label_ids == 1
        return {"auc": auc(probs[:, 1], pos), "log_loss": -float(np.log(probs[np.arange(len(pos)), label_ids]).mean())}

    out = tmp_path / "ft"
    done = finetune("classify", model, data, out, progress=False, log=None, compute_metrics=scores,
                    config=FinetuneConfig(max_steps=9, batch_size=8, eval_every=3, lr=2e-3, seed=1, metric="auc"))
    assert len(seen) == 3 and all(isinstance(p, EvalPrediction) for p in seen)
    meta = json.loads((out / "finetune.json").read_text())
    labels = meta["labels"]
    gold = [labels.index(json.loads(line)["label"]) for line in (data / "dev.jsonl").read_text().splitlines()]
    history = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if r["split"] == "eval"]
    assert [h["step"] for h in history] == [3, 6, 9]
    kept = seen[[h["step"] for h in history].index(done.best_step)]
    assert kept.predictions.shape == (len(gold), 2) and kept.predictions.dtype == np.float32
    assert kept.label_ids.tolist() == gold
    # the logits are the kept model's, as transformers' own class computes them on the dev texts
    hf = transformers.AlbertForSequenceClassification.from_pretrained(out).eval()
    tok = AlbertTokenizer.from_pretrained(out)
    texts = [json.loads(line)["text"] for line in (data / "dev.jsonl").read_text().splitlines()]
    with torch.no_grad():
        ref = np.stack([hf(torch.tensor([tok(t)["input_ids"]])).logits[0].numpy() for t in texts])
    np.testing.assert_allclose(kept.predictions, ref, atol=1e-4)
    for p, h in zip(seen, history):  # the task's accuracy is the argmax of these logits
        assert h["accuracy"] == pytest.approx(float((p.predictions.argmax(-1) == p.label_ids).mean()))
        assert 0 <= h["auc"] <= 1 and h["log_loss"] > 0
    assert meta["dev_metrics"]["auc"] == done.best_metrics["auc"]


def test_token_and_qa_predictions_are_padded_as_trainer_pads_them():
    feats = [{"input_ids": [2, 7, 3], "labels": [-100, 1, -100]}, {"input_ids": [2, 7, 8, 9, 3],
                                                                     "labels": [-100, 0, 1, 1, -100]}]
    outs = [{"logits": np.ones((3, 2), np.float32)}, {"logits": np.zeros((5, 2), np.float32)}]
    p = eval_prediction(feats, outs)
    assert p.predictions.shape == (2, 5, 2) and (p.predictions[0, 3:] == -100).all()
    assert p.label_ids.tolist() == [[-100, 1, -100, -100, -100], [-100, 0, 1, 1, -100]]
    qa = eval_prediction([{"input_ids": [2, 3]}], [{"start_logits": np.zeros(2), "end_logits": np.ones(2)}])
    assert isinstance(qa.predictions, tuple) and len(qa.predictions) == 2 and qa.label_ids is None


def test_which_form_by_the_signature(separable_task, tmp_path):
    assert takes_eval_prediction(lambda p: {}) and takes_eval_prediction(lambda p=None: {})
    assert not takes_eval_prediction(lambda preds, gold: {}) and not takes_eval_prediction(lambda *a: {})
    model, data = separable_task
    with pytest.raises(ConfigError, match="^compute_metrics = '<lambda>': takes 3 required arguments; give a "
                                          "function of one") as e:
        finetune("classify", model, data, tmp_path / "x", progress=False, log=None,
                 compute_metrics=lambda a, b, c: {}, config=FinetuneConfig(max_steps=2, batch_size=8))
    assert "\n" not in str(e.value)
