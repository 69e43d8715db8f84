"""litebert's model outputs answer as HF's ``ModelOutput`` does (`litebert.outputs`): the same weights, run by HF's
class and by litebert's on the same batch, give outputs whose index access, key access, ``to_tuple()`` and ``keys()``
agree, with and without a loss; and a litebert model trains inside ``transformers.Trainer`` itself (on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import litebert

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]
CONFIG = dict(vocab_size=101, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=37, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              classifier_dropout_prob=0.0)
HEADS = {"AlbertForSequenceClassification": {"labels": torch.tensor([0, 1])},
         "AlbertForTokenClassification": {"labels": torch.tensor([[0, 1, -100, 1, 0, 1], [1, 1, 0, 0, 1, -100]])},
         "AlbertForQuestionAnswering": {"start_positions": torch.tensor([1, 2]), "end_positions": torch.tensor([3, 2])},
         "AlbertForMaskedLM": {"labels": torch.tensor([[-100, 5, -100, 7, -100, -100], [-100] * 5 + [9]])},
         "AlbertForPreTraining": {"labels": torch.tensor([[-100, 5, -100, 7, -100, -100], [-100] * 5 + [9]]),
                                  "sentence_order_label": torch.tensor([0, 1])},
         "AlbertModel": {}}


def _same(ref, got):
    if isinstance(ref, tuple):
        assert isinstance(got, tuple) and len(got) == len(ref)
        for a, b in zip(ref, got):
            _same(a, b)
    else:
        assert got.shape == ref.shape and torch.allclose(ref, got, atol=1e-5)


@pytest.mark.parametrize("with_labels", [False, True])
@pytest.mark.parametrize("arch", list(HEADS))
def test_outputs_answer_as_hf_model_output(arch, with_labels, tmp_path):
    torch.manual_seed(0)
    hf = getattr(transformers, arch)(transformers.AlbertConfig(**CONFIG)).eval()
    hf.save_pretrained(tmp_path)
    ours = getattr(litebert, arch).from_pretrained(tmp_path).eval()
    ids = torch.randint(5, 101, (2, 6), generator=torch.Generator().manual_seed(1))
    labels = HEADS[arch] if with_labels else {}
    with torch.no_grad():
        ref, got = hf(ids, **labels), ours(ids, **labels)
    extra = ["mlm_loss", "sop_loss"] if with_labels and arch == "AlbertForPreTraining" else []  # litebert's, last
    assert list(got.keys()) == list(ref.keys()) + extra
    _same(ref.to_tuple(), got.to_tuple()[:len(ref)])
    _same(ref[0], got[0])  # the loss when given, else the first output
    _same(ref[1:], got[1:len(ref)])
    for key in ref.keys():
        _same(ref[key], got[key])
        assert key in got
    assert len(got.to_tuple()) == len(got) and list(got) == got.keys()
    if not with_labels and arch != "AlbertModel":
        with pytest.raises(KeyError):
            ref["loss"]
        with pytest.raises(KeyError):
            got["loss"]
        assert got.get("loss") is None and "loss" not in got


def test_a_litebert_model_trains_inside_transformers_trainer(tmp_path):
    """transformers.Trainer, unchanged, trains and evaluates litebert's sequence classifier: it reads the loss as
    ``outputs[0]`` and the logits as ``outputs[1:]``; the parameters move, the loss falls on a separable task and
    ``compute_metrics`` gets the logits."""
    torch.manual_seed(0)
    model = litebert.AlbertForSequenceClassification(litebert.AlbertConfig(**CONFIG, num_labels=2))
    rng = np.random.default_rng(0)
    data = [{"input_ids": torch.tensor([2, *(rng.integers(5, 50, 6) + 50 * (i % 2)), 3]),
             "attention_mask": torch.ones(8, dtype=torch.long), "labels": torch.tensor(i % 2)} for i in range(32)]
    before = [p.detach().clone() for p in model.parameters()]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=40, per_device_train_batch_size=8,
        learning_rate=3e-3, save_strategy="no", logging_steps=1, disable_tqdm=True, eval_strategy="steps",
        eval_steps=40, per_device_eval_batch_size=8, seed=0)
    seen = []

    def accuracy(p):
        seen.append(p.predictions.shape)
        return {"acc": float((p.predictions.argmax(-1) == p.label_ids).mean())}

    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, eval_dataset=data,
                                   compute_metrics=accuracy)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 40
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.1, losses
    evaluation = trainer.evaluate()
    assert seen[-1] == (32, 2) and evaluation["eval_acc"] > 0.9, evaluation
