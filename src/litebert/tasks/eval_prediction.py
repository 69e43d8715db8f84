"""What a user's ``compute_metrics`` receives at each dev evaluation of `litebert.finetune`, in one of two forms, chosen
by its signature (`takes_eval_prediction`):

* ``compute_metrics(p)`` (one parameter): an `EvalPrediction`, as ``transformers.Trainer`` gives its own:
  ``p.predictions`` the model's raw outputs on the dev features as NumPy arrays (``logits`` [N, C]; token
  classification [N, L, C]; multiple choice [N, K]; regression [N, 1]; SQuAD a tuple (start [N, L], end [N, L])),
  rows of different lengths padded with -100 as Trainer pads them, and ``p.label_ids`` the features' label ids ([N];
  [N, L] with -100 at pieces not scored; SQuAD: (start, end positions) when the features carry them, else None).
  AUC, log-loss, top-k accuracy and calibration need these.
* ``compute_metrics(predictions, labels)`` (two parameters): the dev examples' predictions and gold labels as
  ``litebert evaluate --output`` writes them (label names, answer strings).

Either returns a dict of new metric names to numbers, merged into the task's own.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np

from litebert.errors import ConfigError

PAD = -100  # what Trainer pads predictions and labels of different lengths with


@dataclass
class EvalPrediction:
    """HF's ``transformers.EvalPrediction``: ``predictions`` and ``label_ids``, also unpacked as
    ``predictions, label_ids = p``."""

    predictions: Union[np.ndarray, tuple[np.ndarray, ...]]
    label_ids: Union[np.ndarray, tuple[np.ndarray, ...], None]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.predictions, self.label_ids))

    def __getitem__(self, index: int) -> Any:
        return (self.predictions, self.label_ids)[index]

    def __len__(self) -> int:
        return 2


def takes_eval_prediction(compute_metrics: Callable) -> bool:
    """True when ``compute_metrics`` takes one argument (an `EvalPrediction`, as Trainer's), False when two
    (predictions and labels as strings); anything else is a one-line `ConfigError`."""
    try:
        params = inspect.signature(compute_metrics).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the original two-argument form
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) == 1 or (not required and len(positional) == 1):
        return True
    if len(required) == 2 or (not required and (len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL
                                                                              for p in params))):
        return False
    name = getattr(compute_metrics, "__name__", type(compute_metrics).__name__)
    raise ConfigError("{compute_metrics}: takes " + str(len(required)) + " required arguments; give a function of one "
                      "(an EvalPrediction, as Trainer's) or of two (predictions, labels)", compute_metrics=name)


def eval_prediction(features: list[dict], outputs: list[dict[str, np.ndarray]]) -> EvalPrediction:
    """The `EvalPrediction` of the dev ``features`` and the model's ``outputs`` on them (one dict of float32 arrays
    per feature, `litebert.inference.finetuned.predict_outputs`)."""
    if outputs and "logits" in outputs[0]:
        predictions: Any = _stack([o["logits"] for o in outputs])
    else:
        predictions = tuple(_stack([o[k] for o in outputs]) for k in ("start_logits", "end_logits"))
    return EvalPrediction(predictions, _labels(features))


def _labels(features: list[dict]) -> Optional[Union[np.ndarray, tuple[np.ndarray, ...]]]:
    if features and all("labels" in f for f in features):
        return _stack([np.asarray(f["labels"]) for f in features])
    if features and all("start_positions" in f for f in features):
        return tuple(np.asarray([f[k] for f in features]) for k in ("start_positions", "end_positions"))
    return None


def _stack(rows: list[np.ndarray]) -> np.ndarray:
    """[N, ...]: rows of different first dimensions (per-piece outputs) padded at the end with `PAD`."""
    rows = [np.asarray(r) for r in rows]
    if not rows or all(r.shape == rows[0].shape for r in rows):
        return np.stack(rows) if rows else np.zeros((0,))
    width = max(r.shape[0] for r in rows)
    out = np.full((len(rows), width, *rows[0].shape[1:]), PAD, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, :r.shape[0]] = r
    return out
