"""`litebert.finetuning.loss` against hand computations: label smoothing as (1 - ε)·nll + ε·mean over classes of
-log p (and torch's ``cross_entropy(label_smoothing=...)``), class weights as sum w[y]·nll / sum w[y], "balanced" as
scikit-learn's n_samples / (n_classes x count), and the refusals of settings a task cannot take."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from litebert.errors import ConfigError
from litebert.finetuning.loss import check_loss, example_weight, resolve_class_weights, training_loss
from litebert.tasks.presets import get_preset

IGNORE = -100


def by_hand(logits: torch.Tensor, labels: torch.Tensor, eps: float = 0.0, weights=None) -> torch.Tensor:
    """The smoothed, weighted cross-entropy written out (torch's documented definition): the target distribution
    q = (1 - ε)·onehot(y) + ε/C, each class's term weighted, -Σ_c w_c·q_c·log p_c, summed over the targets not
    ignored and divided by the sum of their w[y]. Without weights: (1 - ε)·nll + ε·mean_c(-log p_c)."""
    logits, labels = logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1)
    keep = labels != IGNORE
    logp = logits[keep].log_softmax(-1)
    y, c = labels[keep], logits.shape[-1]
    w = torch.ones(c, dtype=torch.float64) if weights is None else torch.tensor(weights, dtype=torch.float64)
    q = torch.full_like(logp, eps / c)
    q[torch.arange(len(y)), y] += 1 - eps
    return -(q * w * logp).sum() / w[y].sum()


def outputs(logits):
    return SimpleNamespace(logits=logits)


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_label_smoothing_on_sequence_logits(eps):
    g = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(8, 3, generator=g), torch.randint(0, 3, (8,), generator=g)
    loss = training_loss(eps, None)(outputs(logits), labels)
    assert loss.item() == pytest.approx(by_hand(logits, labels, eps).item(), rel=1e-6)
    assert loss.item() == pytest.approx(F.cross_entropy(logits, labels, label_smoothing=eps).item(), rel=1e-6)
    assert abs(loss.item() - F.cross_entropy(logits, labels).item()) > 1e-4  # smoothing did something


def test_label_smoothing_and_class_weights_on_token_logits_skip_ignored_positions():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 4, generator=g)  # [B, L, C]
    labels = torch.tensor([[IGNORE, 0, 3, 3, IGNORE], [IGNORE, 1, 2, IGNORE, IGNORE]])
    weights = [0.5, 2.0, 1.0, 3.0]
    loss = training_loss(0.2, weights)(outputs(logits), labels)
    assert loss.item() == pytest.approx(by_hand(logits, labels, 0.2, weights).item(), rel=1e-6)
    keep = labels.flatten() != IGNORE
    unsmoothed = training_loss(0.0, weights)(outputs(logits), labels)
    nll = -logits.flatten(0, 1)[keep].double().log_softmax(-1)[torch.arange(int(keep.sum())), labels.flatten()[keep]]
    w = torch.tensor(weights, dtype=torch.float64)[labels.flatten()[keep]]
    assert unsmoothed.item() == pytest.approx(((w * nll).sum() / w.sum()).item(), rel=1e-6)


def test_class_weights_are_a_weighted_mean():
    g = torch.Generator().manual_seed(2)
    logits, labels = torch.randn(6, 2, generator=g), torch.tensor([0, 1, 1, 0, 1, 1])
    loss = training_loss(0.0, [1.0, 3.0])(outputs(logits), labels)
    nll = -logits.double().log_softmax(-1)[torch.arange(6), labels]
    w = torch.tensor([1.0, 3.0, 3.0, 1.0, 3.0, 3.0], dtype=torch.float64)
    assert loss.item() == pytest.approx(((w * nll).sum() / w.sum()).item(), rel=1e-6)


def test_no_setting_keeps_the_models_own_loss_and_compute_loss_is_used_as_given():
    assert training_loss(0.0, None) is None

    def mine(o, labels):
        return o.logits.sum()

    assert training_loss(0.0, None, mine) is mine


def test_balanced_weights_follow_sklearns_formula():
    """Counts 6, 2, 4 of 12: 12 / (3 x count) = 2/3, 2, 1 (``compute_class_weight("balanced")``)."""
    feats = [{"labels": y} for y in [0] * 6 + [1] * 2 + [2] * 4]
    assert resolve_class_weights("balanced", ["a", "b", "c"], feats) == pytest.approx([2 / 3, 2.0, 1.0])
    # token features count their labelled tokens: 0 x3, 1 x1 of 4
    tokens = [{"labels": [IGNORE, 0, 0, IGNORE]}, {"labels": [0, 1, IGNORE]}]
    assert resolve_class_weights("balanced", ["O", "B"], tokens) == pytest.approx([4 / (2 * 3), 4 / (2 * 1)])
    sklearn = pytest.importorskip("sklearn.utils.class_weight")
    ys = [f["labels"] for f in feats]
    assert resolve_class_weights("balanced", ["a", "b", "c"], feats) == pytest.approx(
        list(sklearn.compute_class_weight("balanced", classes=np.arange(3), y=np.array(ys))))


def test_class_weights_are_checked_against_the_labels():
    feats = [{"labels": 0}, {"labels": 0}]
    with pytest.raises(ConfigError, match=r"^class_weights = 'balanced': the label 'pos' has no training example"):
        resolve_class_weights("balanced", ["neg", "pos"], feats)
    with pytest.raises(ConfigError, match=r"^class_weights = \[1.0, 2.0, 3.0\]: 3 weights for 2 labels \(neg, pos\); "
                                          r"give one per label, in that order$"):
        resolve_class_weights([1.0, 2.0, 3.0], ["neg", "pos"], feats)
    assert resolve_class_weights([1, 2], ["neg", "pos"], feats) == [1.0, 2.0]
    assert resolve_class_weights(None, ["neg", "pos"], feats) is None


def test_a_micro_batch_counts_its_share_of_the_class_weights():
    assert example_weight({"labels": 1}, None) == 1
    assert example_weight({"labels": 1}, [0.5, 4.0]) == 4.0
    assert example_weight({"labels": [IGNORE, 1, 0, IGNORE]}, None) == 2
    assert example_weight({"labels": [IGNORE, 1, 0, 1]}, [0.5, 4.0]) == 8.5
    assert example_weight({"input_ids": [1]}, None) == 1  # QA features: no labels


@pytest.mark.parametrize("task, setting, message", [
    ("stsb", dict(label_smoothing_factor=0.1), r"^label_smoothing_factor = 0.1: the regression task's loss is not"),
    ("squad1", dict(label_smoothing_factor=0.1), r"^label_smoothing_factor = 0.1: the squad task's loss"),
    ("race", dict(class_weights=[1.0, 2.0]), r"^class_weights = \[1.0, 2.0\]: the multiple_choice task has no named"),
    ("stsb", dict(class_weights="balanced"), r"^class_weights = 'balanced': the regression task has no named"),
    ("squad1", dict(compute_loss=lambda o, y: o.loss), r"^compute_loss = .*: the squad task's batches have no"),
    ("sst-2", dict(compute_loss=5), r"^compute_loss = 5: expected a function of \(outputs, labels\)"),
    ("sst-2", dict(compute_loss=lambda o, y: o.loss, class_weights=[1.0, 2.0]),
     r"^compute_loss = .* replaces the loss, so class_weights = \[1.0, 2.0\] would do nothing"),
])
def test_settings_a_task_cannot_take_are_refused_in_one_line(task, setting, message):
    kind = get_preset(task).kind
    args = {"label_smoothing_factor": 0.0, "class_weights": None, "compute_loss": None, **setting}
    with pytest.raises(ConfigError, match=message) as e:
        check_loss(kind, args["label_smoothing_factor"], args["class_weights"], args["compute_loss"])
    assert "\n" not in str(e.value)


def test_settings_a_task_takes_pass():
    for task in ("sst-2", "conll", "race"):
        check_loss(get_preset(task).kind, 0.1, None, None)
    for task in ("sst-2", "conll"):
        check_loss(get_preset(task).kind, 0.0, "balanced", None)
    for task in ("sst-2", "conll", "race", "stsb"):
        check_loss(get_preset(task).kind, 0.0, None, lambda o, y: o.logits.sum())
