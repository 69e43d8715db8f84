"""Skipping padding: the dense layers run on the real tokens only.

A padded batch [B, L, D] holds N <= B*L real tokens (attention mask 1). Every part of a transformer block except
attention treats tokens one by one, so it can run on the packed [N, D] rows: attention unpacks its keys, values and
queries to [B, L, .] (the padding rows zero, hidden from every query by the attention bias) and packs its output
again. Real positions get exactly the values of the padded computation; padded positions get zeros instead of values
that nothing reads. This is an algorithm every device shares, not a kernel: the work saved is the padding's share of
the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Packing:
    index: torch.Tensor  # [N] positions of the real tokens among the B*L (row-major)
    batch: int
    length: int

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "Packing":
        """From an attention mask [B, L] of 1 (real token) / 0 (padding)."""
        b, l = attention_mask.shape
        return cls(attention_mask.flatten().nonzero().squeeze(1), b, l)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[B, L, D] -> [N, D]: the real tokens' rows."""
        return x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """[N, D] -> [B, L, D], zeros at the padded positions."""
        out = x.new_zeros(self.batch * self.length, x.shape[-1]).index_copy(0, self.index, x)
        return out.view(self.batch, self.length, -1)

    def rows(self, positions: torch.Tensor) -> torch.Tensor:
        """Indices into the B*L positions -> indices into the N packed rows (-1 where a position is padding)."""
        slot = torch.full((self.batch * self.length,), -1, dtype=torch.long, device=positions.device)
        slot[self.index] = torch.arange(self.index.numel(), device=positions.device)
        return slot[positions]
