"""The training loss of a fine-tuning run where it is not the model's own: the classification heads' cross-entropy
with label smoothing and class weights (``torch.nn.functional.cross_entropy``'s ``label_smoothing`` and ``weight``,
as ``transformers.Trainer`` applies its ``label_smoothing_factor``), or the caller's ``compute_loss(outputs,
labels)`` (Trainer's ``compute_loss_func``).

Which tasks take which is decided by the task's kind before anything is read (`check_loss`): smoothing needs a
softmax over labels (classification, token and multiple-choice tasks), class weights named labels (classification and
token tasks); a custom loss needs labels in the batch (every task but SQuAD, whose targets are positions).

A micro-batch's loss is a mean over its examples (labelled tokens), weighted in the step by its share of them
(`litebert.finetuning.loop`); with class weights a mean weighted by them, as ``cross_entropy(weight=...)`` takes it
(sum of w[y]·nll / sum of w[y]; with smoothing too, each class's term of the smoothed target weighted by its w, as
torch defines it), and a micro-batch's share is its share of the weights (`example_weight`), so the step's gradient
is still that of one big batch. A custom loss is taken to be a mean over the micro-batch's examples.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

from litebert.engine.step import LossFn
from litebert.errors import ConfigError, literal
from litebert.tasks.features import IGNORE

SMOOTHED = ("classification", "token", "multiple_choice")  # kinds whose loss is a cross-entropy over labels
WEIGHTED = ("classification", "token")  # ... whose labels are named (the label order of class_weights)


def check_loss(kind, label_smoothing_factor: float, class_weights, compute_loss: Optional[Callable]) -> None:
    """Refuse, in one line, a loss setting the task's ``kind`` (`litebert.tasks.kinds.TaskKind`) cannot take, and a
    ``compute_loss`` beside the settings it would replace."""
    if compute_loss is not None:
        if not callable(compute_loss):
            raise ConfigError("{compute_loss}: expected a function of (outputs, labels) returning the loss",
                              compute_loss=compute_loss)
        if kind.name not in SMOOTHED + ("regression",):
            raise ConfigError("{compute_loss}: " + f"the {literal(kind.name)} task's batches have no labels (its "
                              "targets are answer positions); leave it out", compute_loss=compute_loss)
        given = {"label_smoothing_factor": label_smoothing_factor or None, "class_weights": class_weights}
        name = next((n for n, v in given.items() if v is not None), None)
        if name is not None:
            raise ConfigError("{compute_loss} replaces the loss, so {" + name + "} would do nothing; apply it in "
                              "compute_loss or leave it out", compute_loss=compute_loss, **{name: given[name]})
    if label_smoothing_factor and kind.name not in SMOOTHED:
        raise ConfigError("{label_smoothing_factor}: " + f"the {literal(kind.name)} task's loss is not a "
                          "cross-entropy over labels; label smoothing applies to classification, token and "
                          "multiple-choice tasks", label_smoothing_factor=label_smoothing_factor)
    if class_weights is not None and kind.name not in WEIGHTED:
        raise ConfigError("{class_weights}: " + f"the {literal(kind.name)} task has no named labels to weight; "
                          "class weights apply to classification and token tasks", class_weights=class_weights)


def label_counts(features: Sequence[dict], n_labels: int) -> list[int]:
    """How often each label (by index) is a target in ``features``: once per example, or per labelled token."""
    counts = [0] * n_labels
    for f in features:
        labels = f["labels"]
        for y in (labels if isinstance(labels, list) else [labels]):
            if y != IGNORE:
                counts[int(y)] += 1
    return counts


def resolve_class_weights(given, labels: Optional[Sequence[str]], features: Sequence[dict]) -> Optional[list[float]]:
    """The class weights a run trains with, one per label of ``labels`` (in that order): ``given`` (checked against
    the number of labels), or for "balanced" n_samples / (n_labels x count) from the training ``features`` (as
    scikit-learn's ``compute_class_weight("balanced")``); None for none."""
    if given is None:
        return None
    labels = list(labels or [])
    if given == "balanced":
        counts = label_counts(features, len(labels))
        missing = next((label for label, c in zip(labels, counts) if c == 0), None)
        if missing is not None:
            raise ConfigError("{class_weights}: " + f"the label {literal(repr(missing))} has no training example to "
                              "count; give the weights as a list", class_weights=given)
        return [sum(counts) / (len(labels) * c) for c in counts]
    if len(given) != len(labels):
        raise ConfigError("{class_weights}: " + f"{len(given)} weights for {len(labels)} labels "
                          f"({literal(', '.join(labels))}); give one per label, in that order", class_weights=given)
    return [float(w) for w in given]


def example_weight(feature: dict, class_weights: Optional[Sequence[float]]) -> float:
    """What a training feature counts for in its micro-batch's share of the step's mean loss: its labelled tokens
    (token classification), else 1; with class weights, the sum of its targets' weights."""
    labels = feature.get("labels")
    targets = [y for y in labels if y != IGNORE] if isinstance(labels, list) else None
    if class_weights is None:
        return len(targets) if targets is not None else 1
    return sum(class_weights[y] for y in targets) if targets is not None else class_weights[int(labels)]


def training_loss(label_smoothing_factor: float, class_weights: Optional[Sequence[float]],
                  compute_loss: Optional[Callable] = None) -> Optional[LossFn]:
    """The loss the loop trains with in place of the model's own (`litebert.engine.step.train_step`): the caller's
    ``compute_loss``, or the cross-entropy with ``label_smoothing_factor`` and ``class_weights``; None (the model's
    own loss) when none is asked for."""
    if compute_loss is not None:
        return compute_loss
    if not label_smoothing_factor and class_weights is None:
        return None
    weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float32)
    on_device: dict[torch.device, torch.Tensor] = {}

    def loss(outputs, labels: torch.Tensor) -> torch.Tensor:
        # [B, C] (sequence), [B, L, C] (token), [B, K] (multiple choice); in fp32, as autocast runs the cross-entropy
        logits = outputs.logits.float()
        w = None
        if weights is not None:
            w = on_device.get(logits.device)
            if w is None:
                w = on_device.setdefault(logits.device, weights.to(logits.device))
        return F.cross_entropy(logits.flatten(0, -2), labels.reshape(-1).long(), weight=w, ignore_index=IGNORE,
                               label_smoothing=label_smoothing_factor)

    return loss
