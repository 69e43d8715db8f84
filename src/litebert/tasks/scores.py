"""Logits made scores: the softmax every kind of task, pipeline and decoder shares."""

from __future__ import annotations

import numpy as np


def softmax(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Softmax over ``axis`` (None: the whole array)."""
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)
