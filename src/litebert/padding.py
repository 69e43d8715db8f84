"""Skipping padding: the dense layers run on the real tokens only.

A padded batch [B, L, D] holds N <= B*L real tokens (attention mask 1). Every part of a transformer block except
attention treats tokens one by one, so it can run on the packed [N, D] rows. Attention then has two ways:

- everywhere: unpack keys, values and queries to [B, L, .] (the padding rows zero, hidden from every query by the
  attention bias), run SDPA, and pack its output again;
- on CUDA in bf16/fp16 (``varlen``): attend on the packed rows directly with flash attention's variable-length
  kernel (`torch.nn.attention.varlen`), each sequence's tokens a contiguous run given by ``cu_seqlens``: no padded
  layout at all, in attention either.

Real positions get the values of the padded computation (within the rounding of the kernel); padded positions get
zeros instead of values that nothing reads. The work saved is the padding's share of the batch.

A `Packing` made from a mask on the CPU (`from_mask(mask, device=...)`, as the training loops do before moving a
batch) costs the GPU no host synchronisation; one made from a mask already on the GPU needs one (``nonzero``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Optional

import torch

HALF = (torch.float16, torch.bfloat16)


def varlen_available() -> bool:
    """Whether this torch has the variable-length flash attention entry point (torch >= 2.9, CUDA builds)."""
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


@lru_cache(maxsize=None)
def _flash_capable(device_index: int) -> bool:
    return varlen_available() and torch.cuda.get_device_capability(device_index) >= (8, 0)  # flash: Ampere or newer


def varlen_applies(x: torch.Tensor, config, training: bool) -> bool:
    """Whether attention on ``x``'s device can run the variable-length flash kernel: a CUDA GPU of compute
    capability >= 8.0, half precision (autocast or half weights), a head size flash takes (<= 256, a multiple of 8)
    and no attention dropout while training (the kernel's entry point has none)."""
    if not x.is_cuda or (training and config.attention_probs_dropout_prob > 0):
        return False
    d = config.hidden_size // config.num_attention_heads
    dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else x.dtype
    return dtype in HALF and d <= 256 and d % 8 == 0 and _flash_capable(x.device.index or 0)


def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """CPU -> GPU through pinned memory, so that the copy is queued rather than waited for."""
    if t.device.type == "cpu" and device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


@dataclass(frozen=True)
class Packing:
    index: torch.Tensor  # [N] positions of the real tokens among the B*L (row-major)
    batch: int
    length: int
    cu_seqlens: Optional[torch.Tensor] = None  # [B+1] int32 offsets of each sequence's run in the N rows (varlen)
    max_len: int = 0  # the longest sequence's real tokens (varlen)

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor, device: Optional[torch.device] = None,
                  varlen: bool = False) -> "Packing":
        """From an attention mask [..., L] of 1 (real token) / 0 (padding); leading dimensions are flattened into
        the batch (multiple choice: [B, C, L]). ``device``: where the indices go (default: the mask's). ``varlen``:
        also the sequence offsets for `varlen_attention` (only where every sequence has a real token)."""
        mask = attention_mask.reshape(-1, attention_mask.shape[-1])
        b, l = mask.shape
        device = torch.device(device) if device is not None else mask.device
        index = mask.flatten().nonzero().squeeze(1)
        cu_seqlens, max_len = None, 0
        if varlen:
            lengths = mask.sum(1)
            if bool((lengths > 0).all()):
                cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
                cu_seqlens = _to(cu_seqlens, device)
                max_len = int(lengths.max())
        return cls(_to(index, device), b, l, cu_seqlens, max_len)

    @property
    def varlen(self) -> bool:
        return self.cu_seqlens is not None

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

    def attention_bias(self, dtype: torch.dtype) -> torch.Tensor:
        """The additive attention bias [B, 1, 1, L] of the mask this packing came from (no host synchronisation)."""
        bias = torch.full((self.batch * self.length,), torch.finfo(dtype).min, dtype=dtype, device=self.index.device)
        bias[self.index] = 0
        return bias.view(self.batch, 1, 1, self.length)

    def padded(self) -> "Packing":
        """The same packing without the varlen offsets: attention then runs on the padded layout."""
        return replace(self, cu_seqlens=None, max_len=0)

    def varlen_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
        """Attention of the packed queries over the packed keys of their own sequence.

        ``k``, ``v``: [N, H]. ``q``: [N, H] (every token), or [B, S, H] (S query rows per sequence, the last depth
        step's `output_rows`). Returns the context in ``q``'s shape."""
        from torch.nn.attention.varlen import varlen_attn

        h = k.shape[-1]
        d = h // num_heads
        if q.dim() == 3:  # S queries per sequence: their offsets are 0, S, 2S, ...
            s = q.shape[1]
            if s == 0:
                return q
            cu_q = torch.arange(0, (self.batch + 1) * s, s, dtype=torch.int32, device=q.device)
            max_q = s
        else:
            cu_q, max_q = self.cu_seqlens, self.max_len
        context = varlen_attn(q.reshape(-1, num_heads, d), k.view(-1, num_heads, d), v.view(-1, num_heads, d),
                              cu_q, self.cu_seqlens, max_q, self.max_len)  # [Nq, heads, d]
        return context.reshape(q.shape)


def prepare_batch(batch: dict, device: torch.device, skip_padding: bool) -> dict:
    """Move a collated batch (tensors on the CPU) to ``device`` without reading anything back from it.

    When the model skips padding (``skip_padding``: `litebert.heads.training_skips_padding` said so), the batch gets
    its `Packing` (key ``packing``), made here from the CPU mask, with the offsets for the varlen kernel.
    A mask with nothing masked is dropped: the model would otherwise have to read it back to find that out."""
    mask = batch.get("attention_mask")
    out = {k: _to(v, device) for k, v in batch.items() if k != "attention_mask"}
    if mask is None or bool(mask.all()):
        return out
    if skip_padding:
        out["packing"] = Packing.from_mask(mask, device, varlen=True)  # the model decides whether varlen applies
    out["attention_mask"] = _to(mask, device)
    return out
