"""A pretraining model whose loss is NaN on chosen forward calls: the non-finite policy's test subject."""

from __future__ import annotations

from litebert.heads import AlbertForPreTraining


class NaNModel(AlbertForPreTraining):
    """Returns a NaN loss on the forward calls listed in ``bad`` (counted across every instance: set ``calls`` to 0
    and ``bad`` before a run)."""

    bad: set = set()
    calls = 0

    def forward(self, *a, **k):
        out = super().forward(*a, **k)
        NaNModel.calls += 1
        if NaNModel.calls in NaNModel.bad:
            out.loss = out.loss * float("nan")
        return out
