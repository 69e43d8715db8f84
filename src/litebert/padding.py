"""Skipping padding: the dense layers run on the real tokens only.

A padded batch [B, L, D] holds N <= B*L real tokens (attention mask 1). Every part of a transformer block except
attention treats tokens one by one, so it can run on the packed [N, D] rows. Attention then has two ways:

- everywhere: unpack keys, values and queries to [B, L, .] (the padding rows zero, hidden from every query by the
  attention bias), run SDPA, and pack its output again;
- on CUDA in bf16/fp16 (``varlen``): attend on the packed rows directly with flash attention's variable-length
  kernel (`torch.nn.attention.varlen`), each sequence's tokens a contiguous run given by ``cu_seqlens``: no padded
  layout at all, in attention either.

Which one runs is the run's ``attention`` setting (``auto``/``sdpa``/``varlen``), resolved once where the run starts
(`resolve_attention`); whether to skip padding at all is the caller's choice too (`prepare_batch`'s ``pack``): the
model does what the packing it is given says.

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


def packs_in_training(model: torch.nn.Module, skip_padding: bool, compile: bool) -> bool:
    """Whether a training loop packs its batches (the rule both loops follow): the run's ``skip_padding`` is on, the
    model's loss never reads a padded position (its ``LOSS_READS_PADDING``), and the model is not compiled (a packed
    batch's varying shapes would recompile it, so a compiled model keeps the padded layout)."""
    return skip_padding and not model.LOSS_READS_PADDING and not compile


@lru_cache(maxsize=None)
def _flash_capable(device_index: int) -> bool:
    return varlen_available() and torch.cuda.get_device_capability(device_index) >= (8, 0)  # flash: Ampere or newer


ATTENTION = ("auto", "sdpa", "varlen")


def resolve_attention(choice: str, device: torch.device, dtype: Optional[torch.dtype], config,
                      training: bool) -> str:
    """The attention a run uses, decided once where it starts and carried from there (never re-decided per call):

    - ``sdpa``: PyTorch's scaled_dot_product_attention on the padded layout, everywhere;
    - ``varlen``: flash attention's variable-length kernel on the packed real tokens. It needs a CUDA GPU of compute
      capability >= 8.0, half precision (``dtype``: the autocast dtype, else the weights'), a head size flash takes
      (<= 256, a multiple of 8) and, when ``training``, no attention dropout (the kernel's entry point has none).

    ``auto`` is varlen where it applies, else sdpa; ``varlen`` where it does not apply is a `ConfigError` saying why.
    """
    from litebert.errors import ConfigError

    if choice not in ATTENTION:
        raise ConfigError("{attention}: choose one of " + ", ".join(ATTENTION), attention=choice)
    if choice == "sdpa":
        return "sdpa"
    why = _varlen_obstacle(device, dtype, config, training)
    if why is None:
        return "varlen"
    if choice == "varlen":
        raise ConfigError("{attention}: the variable-length flash kernel needs " + why + "; use sdpa (or auto)",
                          attention=choice)
    return "sdpa"


def _varlen_obstacle(device: torch.device, dtype: Optional[torch.dtype], config, training: bool) -> Optional[str]:
    """What keeps the varlen kernel from running here (None: nothing)."""
    d = config.hidden_size // config.num_attention_heads
    if device.type != "cuda" or not varlen_available():
        return "a CUDA GPU and a torch with torch.nn.attention.varlen (torch >= 2.9)"
    if not _flash_capable(device.index or 0):
        return "a GPU of compute capability 8.0 or newer"
    if dtype not in HALF:
        return "half precision (bf16 or fp16)"
    if d > 256 or d % 8:
        return f"a head size <= 256 that is a multiple of 8 (this model's is {d})"
    if training and config.attention_probs_dropout_prob > 0:
        return "no attention dropout while training (attention_probs_dropout_prob is " \
               f"{config.attention_probs_dropout_prob})"
    return None


def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """CPU -> GPU through pinned memory, so that the copy is queued rather than waited for."""
    if t.device.type == "cpu" and device.type == "cuda" and not t.is_pinned():  # a data worker's batch is pinned
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
            counts = lengths.cpu().numpy()  # a host mask: no read (a device mask: one)
            if (counts > 0).all():
                cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
                cu_seqlens = _to(cu_seqlens, device)
                max_len = int(counts.max())
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


def _all_ones(mask: torch.Tensor) -> bool:
    """Whether nothing is masked: read through NumPy for a host mask (no tensor read), else one read."""
    return bool(mask.numpy().all()) if mask.device.type == "cpu" else bool(mask.all())


def prepare_batch(batch: dict, device: torch.device, pack: bool = False, varlen: bool = False) -> dict:
    """Move a collated batch (tensors on the CPU) to ``device`` without reading anything back from it.

    ``pack``: skip the padding: the batch gets its `Packing` (key ``packing``), made here from the CPU mask; with
    ``varlen`` (the run's attention, `resolve_attention`) it carries the offsets of the variable-length kernel.
    A mask with nothing masked is dropped: the model would otherwise have to read it back to find that out."""
    mask = batch.get("attention_mask")
    out = {k: _to(v, device) for k, v in batch.items() if k != "attention_mask"}
    if mask is None or _all_ones(mask):
        return out
    if pack:
        out["packing"] = Packing.from_mask(mask, device, varlen=varlen)
    out["attention_mask"] = _to(mask, device)
    return out
