"""The ALBERT encoder (Lan et al., ICLR 2020), standing alone: it imports torch and the config, nothing else.

Read top to bottom: embeddings in E space -> (E->H projection) -> a schedule of post-LN transformer blocks -> pooler.
ALBERT's two architectural ideas are both visible here:

- factorized embeddings (Section 3.1): tokens are embedded in E dimensions and projected to H once, so the vocabulary
  costs V*E + E*H parameters instead of V*H;
- cross-layer sharing (Section 3.1, Table 5): the encoder owns a few *unique* attention and FFN blocks and a
  *schedule* (from `AlbertConfig.schedule`) saying which of them runs at each step of depth.

Parameter names follow HF `modeling_albert.py` inside each block (query/key/value/dense/LayerNorm, ffn/ffn_output/
full_layer_layer_norm), so the checkpoint key map (`litebert.io.keymap`) is a short list of renames.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from litebert.config import AlbertConfig

# 0.5 x (1 + tanh(z)) = x sigmoid(2z), with z = sqrt(2/pi) (x + 0.044715 x^3): the same function, but on CPU sigmoid
# is ~3.5x faster than tanh (torch's vectorized tanh is the slow 1-ulp SLEEF one).
_GELU_C1 = 2 * math.sqrt(2 / math.pi)
_GELU_C3 = _GELU_C1 * 0.044715


def gelu_tanh(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The official BERT/ALBERT gelu (tanh approximation, HF's ``gelu_new``).

    Without autograd on a CPU fp32 tensor (inference), computed as x * sigmoid(x (c1 + c3 x^2)) in four passes, the
    last three in place (into ``out`` if given, a buffer shaped like ``x``): 1.5x faster than
    ``F.gelu(approximate="tanh")`` on this CPU and equal to it within 1e-6. Under ``torch.compile`` the same sigmoid
    form, which inductor fuses into one loop forward and one backward (2.3x faster than the tanh form, which it cannot
    speed up). Everywhere else (GPUs, other dtypes, ONNX export) it is ``F.gelu``; eager CPU training goes through
    `GeluMLP`, which uses the sigmoid form forward and the one-pass ``gelu_backward``.
    """
    if torch.compiler.is_compiling():  # inductor fuses the sigmoid form (forward and backward) into one fast loop
        return x * torch.sigmoid(x * (_GELU_C1 + _GELU_C3 * x * x))
    if (x.device.type != "cpu" or x.dtype != torch.float32 or (x.requires_grad and torch.is_grad_enabled())
            or _tracing()):
        return F.gelu(x, approximate="tanh")
    return _gelu_sigmoid_form(x, out)


def _gelu_sigmoid_form(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    y = torch.addcmul(x.new_full((), _GELU_C1), x, x, value=_GELU_C3, out=out)  # c1 + c3 x^2
    return y.mul_(x).sigmoid_().mul_(x)


class GeluMLP(torch.autograd.Function):
    """W2 gelu_tanh(W1 x + b1) + b2 on 2-D ``x``, for eager fp32 training on CPU.

    Same values and gradients as the composition of `F.linear` and `F.gelu`; faster by ~4 ms per [1024, 768] call
    (1.5% of an ALBERT-base step): the forward GELU runs in its sigmoid form (no SLEEF tanh), and the backward
    overwrites the [N, 3072] gradient in place instead of allocating a second one. It saves what autograd would: the
    input, the pre-activation and the activation. With a `GradSink` (a shared block), the weight and bias gradients
    are added into the sink's buffers (names ``ffn.*`` and ``ffn_output.*``) instead of being returned.
    """

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, sink=None):
        h = torch.addmm(b1, x, w1.t())  # [N, F]
        a = _gelu_sigmoid_form(h)
        ctx.save_for_backward(x, w1, h, a, w2)
        ctx.sink = sink
        return torch.addmm(b2, a, w2.t())

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, w1, h, a, w2 = ctx.saved_tensors
        sink = ctx.sink
        grad = grad.contiguous()
        if sink is None:
            grad_w2, grad_b2 = grad.t() @ a, grad.sum(0)
        else:
            sink.addmm("ffn_output.weight", grad.t(), a)
            sink.add("ffn_output.bias", grad.sum(0))
        grad_h = grad @ w2  # [N, F], turned into the pre-activation's gradient in place:
        torch.ops.aten.gelu_backward.grad_input(grad_h, h, approximate="tanh", grad_input=grad_h)
        grad_x = grad_h @ w1 if ctx.needs_input_grad[0] else None
        if sink is None:
            return grad_x, grad_h.t() @ x, grad_h.sum(0), grad_w2, grad_b2, None
        sink.addmm("ffn.weight", grad_h.t(), x)
        sink.add("ffn.bias", grad_h.sum(0))
        return grad_x, None, None, None, None, None


class GradSink:
    """The weight gradients of a block that runs at several depth steps, summed by the backward GEMMs themselves.

    With cross-layer sharing, ALBERT-base uses each weight at 12 steps. Plain autograd computes 12 gradient tensors
    and sums them (12 GEMMs into fresh memory, then 11 passes adding them up). Here each step's backward adds its
    product onto one buffer per weight (``addmm`` with beta = 1): fewer passes over memory, and the GEMM runs at its
    best throughput. `_GradGate` hands the buffers to autograd once every step's backward has run.
    """

    def __init__(self, shapes: dict[str, torch.Size]):
        self.shapes = shapes
        self.grads: dict[str, torch.Tensor] = {}

    def _target(self, name: str, rows: Optional[slice], like: torch.Tensor) -> Optional[torch.Tensor]:
        """The buffer (rows) to add into, or None if ``name`` has none yet and the whole tensor is written."""
        if name not in self.grads:
            if rows is None:
                return None
            self.grads[name] = like.new_zeros(self.shapes[name])
        return self.grads[name] if rows is None else self.grads[name][rows]

    def addmm(self, name: str, a: torch.Tensor, b: torch.Tensor, rows: Optional[slice] = None) -> None:
        """grad[name][rows] += a @ b."""
        target = self._target(name, rows, a)
        if target is None:
            self.grads[name] = torch.mm(a, b)
        else:
            torch.addmm(target, a, b, out=target)  # out= (not addmm_): FLOP counters see it

    def add(self, name: str, t: torch.Tensor, rows: Optional[slice] = None) -> None:
        """grad[name][rows] += t."""
        target = self._target(name, rows, t)
        if target is None:
            self.grads[name] = t
        else:
            target.add_(t)


class _GradGate(torch.autograd.Function):
    """Returns aliases of a shared block's weights; its backward runs once the backward of every step that used them
    has, and hands autograd the gradients those steps added into the sink (plus any that reached the aliases the
    ordinary way)."""

    @staticmethod
    def forward(ctx, sink, names, *tensors):
        ctx.sink, ctx.names = sink, names
        ctx.set_materialize_grads(False)
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        out = []
        for name, grad in zip(ctx.names, grads):
            summed = ctx.sink.grads.pop(name, None)
            out.append(grad if summed is None else summed if grad is None else summed + grad)
        return (None, None, *out)


class SinkLinear(torch.autograd.Function):
    """F.linear(x, weight[rows], bias[rows]) whose backward adds the weight and bias gradients into a `GradSink`
    (as ``name.weight`` / ``name.bias``, at ``rows``) instead of returning them."""

    @staticmethod
    def forward(ctx, x, weight, bias, sink, name, rows):
        w, b = (weight, bias) if rows is None else (weight[rows], bias[rows])
        x2 = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(x2, weight)
        ctx.sink, ctx.name, ctx.rows, ctx.shape = sink, name, rows, x.shape
        return torch.addmm(b, x2, w.t()).view(*x.shape[:-1], w.shape[0])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x2, weight = ctx.saved_tensors
        w = weight if ctx.rows is None else weight[ctx.rows]
        grad = grad.reshape(-1, grad.shape[-1]).contiguous()
        ctx.sink.addmm(ctx.name + ".weight", grad.t(), x2, ctx.rows)
        ctx.sink.add(ctx.name + ".bias", grad.sum(0), ctx.rows)
        grad_x = (grad @ w).view(ctx.shape) if ctx.needs_input_grad[0] else None
        return grad_x, None, None, None, None, None


@dataclass
class SharedWeights:
    """A block's weights as every depth step of one forward uses them, built once per forward, not per step (the
    attention block's fused Q/K/V weight is a concatenation). ``sink``: in eager CPU fp32 training, the tensors are
    aliases made by `_GradGate` and the steps' backward sums their gradients in the sink (see `GradSink`)."""

    tensors: dict[str, torch.Tensor]
    sink: Optional[GradSink] = None

    @classmethod
    def make(cls, tensors: dict[str, torch.Tensor], sum_in_gemms: bool) -> "SharedWeights":
        if not sum_in_gemms:
            return cls(tensors)
        sink = GradSink({name: t.shape for name, t in tensors.items()})
        names = tuple(tensors)
        return cls(dict(zip(names, _GradGate.apply(sink, names, *tensors.values()))), sink)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.tensors[name]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, sink: Optional[GradSink] = None,
           name: str = "", rows: Optional[slice] = None) -> torch.Tensor:
    """F.linear(x, weight[rows], bias[rows]); with a sink, through `SinkLinear`."""
    if sink is not None:
        return SinkLinear.apply(x, weight, bias, sink, name, rows)
    if rows is not None:
        weight, bias = weight[rows], bias[rows]
    return F.linear(x, weight, bias)


def _fused_mlp_applies(x: torch.Tensor) -> bool:
    return (x.requires_grad and torch.is_grad_enabled() and x.device.type == "cpu" and x.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu") and not _tracing())


class Workspace:
    """Scratch memory for the intermediates of inference forwards, kept between calls (one workspace per thread).

    A fresh [N, 3072] intermediate at every step costs more than its elementwise work on CPU: the allocator hands
    back newly mapped pages and the first write to each faults (~6,700 page faults per ALBERT-base layer at N = 1135),
    and how often that happens depends on the heap's history. So every role (Q/K/V, scores, FFN pre-activation, ...)
    is a view of one of two flat buffers that only grow (by at least 1.5x): after the largest batch so far, inference
    allocates nothing big. Roles in the same slot are never alive at once within a depth step (see `SLOTS`), which
    keeps the memory held between calls at about 2 x tokens x max(3H, F) floats of the largest batch (~100 MB for
    ALBERT-base at 32 x 128); `release_workspace` frees it. Only used without autograd (nothing saved for backward may
    alias a buffer) and only for intermediates no caller ever sees.
    """

    # In the order a depth step writes them: each role's tensor is dead before the next role of its slot is written.
    SLOTS = {"qkv": 0, "heads": 1, "scores": 0, "merged": 0, "attention_out": 1, "ffn": 0, "act": 1, "ffn_out": 0}

    def __init__(self) -> None:
        self.buffers: list[Optional[torch.Tensor]] = [None, None]
        self.memos: dict = {}

    def begin(self) -> "Workspace":
        """Start a forward: memos are forgotten."""
        self.memos.clear()
        return self

    def get(self, role: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """A [shape] view of ``role``'s slot, of ``like``'s dtype and device, with whatever it last held."""
        slot, numel = self.SLOTS[role], math.prod(shape)
        buf = self.buffers[slot]
        if buf is None or buf.numel() < numel or buf.dtype != like.dtype or buf.device != like.device:
            grown = numel if buf is None or buf.dtype != like.dtype else max(numel, buf.numel() * 3 // 2)
            self.buffers[slot] = None  # free the old buffer before making the new one
            buf = self.buffers[slot] = torch.empty(grown, dtype=like.dtype, device=like.device)
        return buf[:numel].view(shape)

    def memo(self, key, compute):
        """``compute()``, once per forward (index tensors every depth step shares)."""
        if key not in self.memos:
            self.memos[key] = compute()
        return self.memos[key]

    @staticmethod
    def applies(x: torch.Tensor) -> bool:
        return (not torch.is_grad_enabled() and x.device.type == "cpu" and not torch.is_autocast_enabled("cpu")
                and not _tracing())

    @staticmethod
    def for_this_thread() -> "Workspace":
        workspace = getattr(_THREAD, "workspace", None)
        if workspace is None:
            workspace = _THREAD.workspace = Workspace()
        return workspace.begin()


_THREAD = threading.local()


def release_workspace() -> None:
    """Free the inference scratch buffers this thread keeps between forwards (see `Workspace`)."""
    _THREAD.workspace = None


ACT = {
    "gelu_new": gelu_tanh,
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": F.silu,
}


def maybe_dropout(p: float) -> nn.Module:
    """No dropout op at all when p == 0 (v2 and xxlarge presets): saves a pass over the activations."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


class Embeddings(nn.Module):
    """word + position + token type, LayerNorm, dropout — all in E dimensions (official `embedding_postprocessor`)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        # padding_idx as HF: the pad row starts at zero and gets no gradient.
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.embedding_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.dropout = maybe_dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings), persistent=False)

    def forward(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:seq_len]  # [L], broadcast over the batch
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # [B, L, E]
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # all segment 0
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class Attention(nn.Module):
    """Multi-head self-attention with a post-LN residual: LN(x + dropout(dense(attend(x)))).

    Q, K and V are kept as three Linear modules (HF names) but computed as one fused [H -> 3H] matmul.
    ``x`` is either padded [B, L, H] or, when the encoder skips padding, packed [N, H] (the N real tokens) with
    ``packing = (index [N], B, L)``: the dense layers then run on real tokens only, and just the attention itself
    sees the padded layout.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dense = nn.Linear(h, h)
        self.LayerNorm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.attention_dropout = config.attention_probs_dropout_prob
        self.output_dropout = maybe_dropout(config.hidden_dropout_prob)

    def fused_qkv(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The [3H, H] weight and [3H] bias of the fused Q/K/V projection."""
        return (torch.cat([self.query.weight, self.key.weight, self.value.weight]),
                torch.cat([self.query.bias, self.key.bias, self.value.bias]))

    def shared_weights(self, sum_in_gemms: bool) -> SharedWeights:
        """The weights every step of one forward uses (see `SharedWeights`)."""
        weight, bias = self.fused_qkv()
        return SharedWeights.make({"qkv.weight": weight, "qkv.bias": bias, "dense.weight": self.dense.weight,
                                   "dense.bias": self.dense.bias}, sum_in_gemms)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor], packing=None,
                shared: Optional[SharedWeights] = None, select: Optional[torch.Tensor] = None,
                workspace: Optional[Workspace] = None) -> torch.Tensor:
        """``shared``: the weights when the caller built them already (a shared block reuses them at every depth
        step). ``select`` [B, S]: only these rows of ``x`` (indices into its flattened leading dimensions) are wanted at
        the output, which is then [B, S, H]: keys and values are still computed for every token, queries and all
        that follows attention only for the selected rows. ``workspace``: inference scratch memory; the step then
        runs `_forward_inference` (except at a ``select`` step, which allocates its own)."""
        h = x.shape[-1]
        shared = shared or self.shared_weights(False)
        weight, bias, sink = shared["qkv.weight"], shared["qkv.bias"], shared.sink
        if workspace is not None and select is None and not (self.training and self._has_dropout()):
            return self._forward_inference(x, mask, packing, weight, bias, workspace)
        d = h // self.num_heads
        if packing is None:
            b, l = x.shape[:2]
        else:
            index, b, l = packing
        if select is None:
            qkv_out, width, residual = linear(x, weight, bias, sink, "qkv"), 3, x  # [B, L, 3H] or [N, 3H]
        else:
            residual = x.reshape(-1, h).index_select(0, select.flatten()).view(*select.shape, h)  # [B, S, H]
            qkv_out, width = linear(x, weight, bias, sink, "qkv", slice(h, None)), 2  # keys, values only: [.., 2H]
        if packing is not None:  # unpack: [N, .] -> [B*L, .]; the padding rows stay zero
            qkv_out = qkv_out.new_zeros(b * l, width * h).index_copy_(0, index, qkv_out)
        p = self.attention_dropout if self.training else 0.0
        if select is None and p == 0 and _short_attention_applies(qkv_out, l):
            context = QKVAttention.apply(qkv_out.view(b, l, 3 * h), mask, self.num_heads)  # [B, L, H]
            if packing is not None:
                context = context.view(b * l, h).index_select(0, index)  # pack: [B*L, H] -> [N, H]
            out = linear(context, shared["dense.weight"], shared["dense.bias"], sink, "dense")
            return self.LayerNorm(residual + self.output_dropout(out))
        # [B, L, width*H] -> width x [B, heads, L, H/heads]
        parts = qkv_out.view(b, l, width, self.num_heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        if select is None:
            q, k, v = parts
        else:
            k, v = parts
            q = linear(residual, weight, bias, sink, "qkv", slice(0, h)).view(b, -1, self.num_heads, d).transpose(1, 2)
        context = attend(q, k, v, mask, p)  # [B, heads, Lq, H/heads]
        if select is not None:
            context = context.transpose(1, 2).reshape(residual.shape)
        elif packing is not None:
            context = context.transpose(1, 2).reshape(b * l, h).index_select(0, index)  # pack: [B*L, H] -> [N, H]
        else:
            context = context.transpose(1, 2).reshape(b, l, h)
        out = linear(context, shared["dense.weight"], shared["dense.bias"], sink, "dense")
        return self.LayerNorm(residual + self.output_dropout(out))

    def _has_dropout(self) -> bool:
        return self.attention_dropout > 0 or isinstance(self.output_dropout, nn.Dropout)

    def _forward_inference(self, x: torch.Tensor, mask: Optional[torch.Tensor], packing, weight: torch.Tensor,
                           bias: torch.Tensor, workspace: Workspace) -> torch.Tensor:
        """`forward` without autograd or dropout, every intermediate in the workspace. Q/K/V go straight into a
        head-major [3, B, heads, L, d] layout (packed tokens by one gather of d-float rows), attention at short
        lengths is explicit (batched matmuls and an in-place softmax: faster than SDPA's flash kernel there), and
        the output projection accumulates onto residual + bias in place."""
        h = x.shape[-1]
        heads_n = self.num_heads
        d = h // heads_n
        if packing is None:
            b, l = x.shape[:2]
            qkv_out = _linear(x, weight, bias, workspace, "qkv")  # [B, L, 3H]
            heads = workspace.get("heads", (3, b, heads_n, l, d), x)
            heads.copy_(qkv_out.view(b, l, 3, heads_n, d).permute(2, 0, 3, 1, 4))
        else:
            index, b, l = packing
            n = index.numel()
            qkv_out = workspace.get("qkv", (n + 1, 3 * h), x)  # row n stays zero: the padding positions' Q/K/V
            qkv_out[n].zero_()
            torch.addmm(bias, x, weight.t(), out=qkv_out[:n])
            unpack, pack = workspace.memo(("heads", heads_n), lambda: _head_gather(index, b, l, heads_n))
            heads = torch.index_select(qkv_out.view(-1, d), 0, unpack,
                                       out=workspace.get("heads", (3 * b * heads_n * l, d), x))
        q, k, v = heads.view(3, b * heads_n, l, d).unbind(0)
        if l * l <= _EXPLICIT_INFERENCE_ATTENTION:
            scores = workspace.get("scores", (b * heads_n, l, l), x)
            if mask is None:
                torch.baddbmm(scores, q, k.transpose(1, 2), beta=0, alpha=d ** -0.5, out=scores)
            else:
                scores.view(b, heads_n, l, l).copy_(mask.expand(b, heads_n, l, l))
                torch.baddbmm(scores, q, k.transpose(1, 2), alpha=d ** -0.5, out=scores)
            torch.ops.aten._softmax.out(scores, -1, False, out=scores)
            context = torch.bmm(scores, v, out=q)  # q is no longer needed
        else:
            context = F.scaled_dot_product_attention(*(t.view(b, heads_n, l, d) for t in (q, k, v)), attn_mask=mask)
        if packing is None:  # [B, heads, L, d] -> [B, L, H]
            merged = workspace.get("merged", (b, l, heads_n, d), x)
            context = merged.copy_(context.view(b, heads_n, l, d).transpose(1, 2))
        else:  # -> the N real tokens [N, H], again one gather of d-float rows
            context = torch.index_select(context.reshape(-1, d), 0, pack,
                                         out=workspace.get("merged", (pack.numel(), d), x))
        out = _residual_linear(x, context.view(*x.shape[:-1], h), self.dense, workspace, "attention_out")
        return self.LayerNorm(out)


def _head_gather(index: torch.Tensor, b: int, l: int, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices for moving N packed tokens (``index`` [N] into the B*L positions) between the packed [N, 3H] Q/K/V
    (plus one zero row at N) and the head-major [3, B, heads, L, d] layout, and back from [B, heads, L, d] to [N, H];
    each row is d floats."""
    n = index.numel()
    slot = torch.full((b * l,), n, dtype=torch.long, device=index.device)  # packed row of each position; n: padding
    slot[index] = torch.arange(n, device=index.device)
    part = torch.arange(3, device=index.device).view(3, 1, 1, 1)
    head = torch.arange(heads, device=index.device).view(1, 1, heads, 1)
    unpack = (slot.view(1, b, 1, l) * (3 * heads) + part * heads + head).flatten()
    pack = ((index // l * heads)[:, None] + head.view(1, heads)) * l + (index % l)[:, None]
    return unpack, pack.flatten()


# Inference at Lq * Lk up to this runs attention as explicit batched matmuls: on this project's 2-core CPU they are
# 1.4x faster than SDPA's flash kernel at length 32, 1.08x at 128 and 160, 0.94x at 192 (docs/BENCHMARKS.md).
_EXPLICIT_INFERENCE_ATTENTION = 160 * 160


def _residual_linear(residual: torch.Tensor, x: torch.Tensor, linear: nn.Linear, workspace: Workspace,
                     name: str) -> torch.Tensor:
    """residual + linear(x), as one GEMM accumulating onto (residual + bias) in a workspace buffer."""
    out = workspace.get(name, (residual.numel() // residual.shape[-1], residual.shape[-1]), residual)
    torch.add(residual.reshape(out.shape), linear.bias, out=out)
    torch.addmm(out, x.reshape(-1, x.shape[-1]), linear.weight.t(), out=out)  # out= (not addmm_): FLOP counters see it
    return out.view(residual.shape)


class FeedForward(nn.Module):
    """Position-wise FFN with a post-LN residual: LN(x + dropout(W2 act(W1 x))).

    The official `ffn` applies hidden dropout before the residual; HF's AlbertLayer defines that dropout but never
    calls it. In eval mode (and with the v2 presets' p = 0) the two agree; in training we follow the official code.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.act = ACT[config.hidden_act]
        self.dropout = maybe_dropout(config.hidden_dropout_prob)

    def shared_weights(self, sum_in_gemms: bool) -> SharedWeights:
        """The weights every step of one forward uses (see `SharedWeights`)."""
        return SharedWeights.make({f"{m}.{p}": getattr(getattr(self, m), p) for m in ("ffn", "ffn_output")
                                   for p in ("weight", "bias")}, sum_in_gemms)

    def forward(self, x: torch.Tensor, shared: Optional[SharedWeights] = None,
                workspace: Optional[Workspace] = None) -> torch.Tensor:
        """``shared``: the weights when the caller built them already (a block visited at several depth steps)."""
        if workspace is not None and not (self.training and isinstance(self.dropout, nn.Dropout)):
            # inference: the [.., F] intermediates go to reused buffers, the output GEMM accumulates onto x + b2
            h = _linear(x, self.ffn.weight, self.ffn.bias, workspace, "ffn")
            a = gelu_tanh(h, out=workspace.get("act", h.shape, h)) if self.act is gelu_tanh else self.act(h)
            return self.full_layer_layer_norm(_residual_linear(x, a, self.ffn_output, workspace, "ffn_out"))
        shared = shared or self.shared_weights(False)
        w1, b1, w2, b2 = (shared[f"{m}.{p}"] for m in ("ffn", "ffn_output") for p in ("weight", "bias"))
        if self.act is gelu_tanh and _fused_mlp_applies(x):
            y = GeluMLP.apply(x.reshape(-1, x.shape[-1]), w1, b1, w2, b2, shared.sink).view(x.shape)
        else:
            y = linear(self.act(linear(x, w1, b1, shared.sink, "ffn")), w2, b2, shared.sink, "ffn_output")
        return self.full_layer_layer_norm(x + self.dropout(y))


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, workspace: Workspace,
            name: str) -> torch.Tensor:
    """F.linear, written into the workspace's view for role ``name``."""
    x2 = x.reshape(-1, x.shape[-1])
    out = workspace.get(name, (x2.shape[0], weight.shape[0]), x)
    return torch.addmm(bias, x2, weight.t(), out=out).view(*x.shape[:-1], weight.shape[0])


def _short_attention_applies(qkv: torch.Tensor, length: int) -> bool:
    """CPU training at Lq * Lk <= 128 * 128 (see `attend`)."""
    return (length * length <= 128 * 128 and qkv.requires_grad and torch.is_grad_enabled()
            and qkv.device.type == "cpu" and not _tracing())


class QKVAttention(torch.autograd.Function):
    """softmax(q k^T / sqrt(d) + mask) v from the fused projection's output [B, L, 3H] to the context [B, L, H], and
    back: CPU training at short lengths, without dropout.

    The same computation as `attend` on the split heads, without moving data between layouts: each sequence's heads
    are strided views of the [L, 3, heads, d] rows (MKL's batched GEMMs read and write them in place), the 1/sqrt(d)
    and the mask are folded into one ``baddbmm``, the softmax runs in place, and the backward writes the Q/K/V
    gradients straight into the [B, L, 3H] layout the projection's backward reads. Versus the permute / matmul
    composition: ~2.5 ms less per ALBERT-base layer at 8 x 128 (forward + backward ~19.5 -> ~17 ms).
    """

    @staticmethod
    def forward(ctx, qkv, mask, heads):
        b, l, h = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        d = h // heads
        parts = qkv.view(b, l, 3, heads, d)
        probs = qkv.new_empty(b, heads, l, l)
        out = qkv.new_empty(b, l, h)
        for i in range(b):  # one sequence at a time: its heads are one strided batch
            q, k, v = (parts[i, :, j].transpose(0, 1) for j in range(3))  # [heads, L, d]
            scores = probs[i]
            if mask is None:
                torch.baddbmm(scores, q, k.transpose(1, 2), beta=0, alpha=d ** -0.5, out=scores)
            else:
                scores.copy_(mask[i].expand(heads, l, l))
                torch.baddbmm(scores, q, k.transpose(1, 2), alpha=d ** -0.5, out=scores)
            torch.ops.aten._softmax.out(scores, -1, False, out=scores)
            torch.bmm(scores, v, out=out[i].view(l, heads, d).transpose(0, 1))
        ctx.save_for_backward(qkv, probs)
        ctx.heads = heads
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        qkv, probs = ctx.saved_tensors
        heads = ctx.heads
        b, l, h = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        d = h // heads
        grad = grad.contiguous()
        parts = qkv.view(b, l, 3, heads, d)
        grad_qkv = torch.empty_like(qkv)
        grad_parts = grad_qkv.view(b, l, 3, heads, d)
        grad_probs = qkv.new_empty(heads, l, l)
        for i in range(b):
            q, k, v = (parts[i, :, j].transpose(0, 1) for j in range(3))
            grad_q, grad_k, grad_v = (grad_parts[i, :, j].transpose(0, 1) for j in range(3))
            grad_out, p = grad[i].view(l, heads, d).transpose(0, 1), probs[i]
            torch.bmm(p.transpose(1, 2), grad_out, out=grad_v)
            torch.bmm(grad_out, v.transpose(1, 2), out=grad_probs)
            torch.ops.aten._softmax_backward_data.out(grad_probs, p, -1, p.dtype, grad_input=grad_probs)  # scores'
            torch.baddbmm(grad_q, grad_probs, k, beta=0, alpha=d ** -0.5, out=grad_q)
            torch.baddbmm(grad_k, grad_probs.transpose(1, 2), q, beta=0, alpha=d ** -0.5, out=grad_k)
        return grad_qkv, None, None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor], p: float) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v, with dropout p on the probabilities.

    SDPA (its flash CPU kernel), except when training on CPU at short lengths (Lq * Lk <= 128 * 128): there the
    explicit matmuls and softmax are faster forward + backward (15.3 vs 17.4 ms per ALBERT-base layer at 8 x 128);
    from 256 on SDPA wins and the explicit form would store the L x L probabilities.
    """
    if (q.shape[-2] * k.shape[-2] <= 128 * 128 and q.requires_grad and torch.is_grad_enabled()
            and q.device.type == "cpu" and not _tracing()):
        scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)
        if mask is not None:
            scores = scores + mask
        probs = torch.softmax(scores, dim=-1)
        return F.dropout(probs, p) @ v if p > 0 else probs @ v
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)


class Encoder(nn.Module):
    """The E->H projection, then ``len(schedule)`` steps, each running one attention block and one FFN block.

    ``schedule[s] = (a, f)``: step s runs ``attention_blocks[a]`` then ``ffn_blocks[f]``. All-shared ALBERT has
    one block of each visited 12 times; BERT has 12 of each visited once.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        # Only when E != H in the official code; HF always has it (see AlbertConfig.embedding_projection).
        self.embedding_hidden_mapping_in = (nn.Linear(config.embedding_size, config.hidden_size)
                                            if config.embedding_projection else nn.Identity())
        attention_ids, ffn_ids = config.schedule()
        self.attention_blocks = nn.ModuleList(Attention(config) for _ in range(max(attention_ids) + 1))
        self.ffn_blocks = nn.ModuleList(FeedForward(config) for _ in range(max(ffn_ids) + 1))
        self.schedule = list(zip(attention_ids, ffn_ids))
        self.repeated_attention = sorted({a for a in attention_ids if attention_ids.count(a) > 1})
        self.repeated_ffn = sorted({f for f in ffn_ids if ffn_ids.count(f) > 1})
        self.steps_per_layer = config.inner_group_num
        self.gradient_checkpointing = False

    def step(self, x: torch.Tensor, mask: Optional[torch.Tensor], s: int, packing=None, shared=(None, None),
             select: Optional[torch.Tensor] = None, workspace: Optional[Workspace] = None) -> torch.Tensor:
        """Depth step ``s``; ``shared``: the `SharedWeights` of its attention and FFN blocks, or None for each."""
        a, f = self.schedule[s]
        x = self.attention_blocks[a](x, mask, packing, shared[0], select, workspace)
        return self.ffn_blocks[f](x, shared[1], workspace)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor], output_hidden_states: bool = False,
                packing=None, select: Optional[torch.Tensor] = None):
        """``select`` [B, S] (see `Attention.forward`): the last step runs only for these rows; the output is then
        [B, S, H]. Not combined with ``output_hidden_states`` (the caller computes everything then)."""
        x = self.embedding_hidden_mapping_in(x)  # [B, L, E] -> [B, L, H] (or packed [N, E] -> [N, H])
        hidden_states = [x] if output_hidden_states else None
        # A block visited at several steps (sharing) gets its weights (its fused Q/K/V) built once per forward, not
        # per step; in eager CPU fp32 training, the steps' backward sums their gradients in the GEMMs (`GradSink`).
        sum_in_gemms = _fused_mlp_applies(x)
        attention = {a: self.attention_blocks[a].shared_weights(sum_in_gemms) for a in self.repeated_attention}
        ffn = {f: self.ffn_blocks[f].shared_weights(sum_in_gemms) for f in self.repeated_ffn}
        workspace = Workspace.for_this_thread() if Workspace.applies(x) else None  # inference: scratch buffers
        last = len(self.schedule) - 1
        for s, (a, f) in enumerate(self.schedule):
            args = (x, mask, s, packing, (attention.get(a), ffn.get(f)), select if s == last else None, workspace)
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                # Recompute each step in backward: activations kept per step are just its input [B, L, H].
                x = checkpoint(self.step, *args, use_reentrant=False)
            else:
                x = self.step(*args)
            if hidden_states is not None and (s + 1) % self.steps_per_layer == 0:
                hidden_states.append(x)  # one entry per layer (after all its inner-group blocks)
        return x, hidden_states


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor  # [B, L, H], or [B, P, H] when output_positions were given
    pooler_output: Optional[torch.Tensor] = None  # [B, H]: tanh(W h[CLS] + b)
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None  # embeddings (after projection), then each layer


class AlbertModel(nn.Module):
    """The bare encoder with (optionally) the pooler. HF's ``albert.`` prefix is this module."""

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        # Skip padding: run the dense layers on real tokens only. Off by default because the outputs at padded
        # positions (meaningless either way) are then zeros instead of HF's values.
        self.skip_padding = False
        self.apply(lambda m: init_weights(m, config.initializer_range))

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        self.encoder.gradient_checkpointing = enabled

    def set_skip_padding(self, enabled: bool = True) -> None:
        self.skip_padding = enabled

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                output_hidden_states: bool = False, output_positions: Optional[torch.Tensor] = None) -> EncoderOutput:
        """``output_positions`` [B, P]: only the hidden states at these positions are wanted (e.g. the masked tokens in
        pretraining); ``last_hidden_state`` is then [B, P, H]. The last layer runs only there (and at [CLS] for the
        pooler) - same values, less work: at 12 layers about 6% of the encoder's FLOPs."""
        check_inputs(self.config, input_ids, token_type_ids)
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # [B, L, E]
        mask = attention_bias(attention_mask, x.dtype)
        b, l = input_ids.shape
        packing = None
        if self.skip_padding and mask is not None and not _tracing():
            index = attention_mask.flatten().nonzero().squeeze(1)  # [N] real tokens among the B*L positions
            packing = (index, b, l)
            x = x.flatten(0, 1).index_select(0, index)  # [N, E]
        select = None
        if output_positions is not None and not output_hidden_states:
            select = self._rows(output_positions, packing, b, l)
        x, hidden_states = self.encoder(x, mask, output_hidden_states, packing, select)
        if packing is not None and select is None:
            x, hidden_states = _unpack(x, packing), hidden_states and [_unpack(t, packing) for t in hidden_states]
        cls = x[:, 0]
        if select is not None and self.pooler is not None:
            x = x[:, 1:]  # row 0 was [CLS], for the pooler
        elif output_positions is not None and select is None:
            x = torch.gather(x, 1, output_positions.long().unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        pooled = torch.tanh(self.pooler(cls)) if self.pooler is not None else None
        return EncoderOutput(x, pooled, tuple(hidden_states) if hidden_states is not None else None)

    def _rows(self, positions: torch.Tensor, packing, b: int, l: int):
        """[B, P] positions -> [B, P(+1)] row indices into the encoder's flattened activations ([CLS] first when the
        pooler needs it)."""
        positions = positions.long()
        if not _tracing() and positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= l):
            raise ValueError(f"output positions must lie in [0, {l}), got min {int(positions.min())}, "
                             f"max {int(positions.max())}")
        if self.pooler is not None:
            positions = torch.cat([positions.new_zeros(b, 1), positions], 1)
        rows = positions + torch.arange(b, device=positions.device)[:, None] * l  # into B*L
        if packing is not None:
            index = packing[0]
            packed = torch.full((b * l,), -1, dtype=torch.long, device=rows.device)
            packed[index] = torch.arange(index.numel(), device=rows.device)
            rows = packed[rows]  # into the N real tokens
            if not _tracing() and bool((rows < 0).any()):
                raise ValueError("an output position points at padding (attention_mask 0) while padding is skipped")
        return rows


def _unpack(x: torch.Tensor, packing) -> torch.Tensor:
    index, b, l = packing  # [N, D] -> [B, L, D] with zeros at padded positions
    return x.new_zeros(b * l, x.shape[-1]).index_copy(0, index, x).view(b, l, -1)


def attention_bias(attention_mask: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
    """[B, L] of 1 (attend) / 0 (padding) -> additive bias [B, 1, 1, L] (0 or dtype min), or None if nothing is masked.

    An additive bias rather than a boolean mask: a row with every key masked then gives uniform attention instead of
    NaN. Skipping the mask entirely when there is no padding lets SDPA take its fastest kernel.
    """
    if attention_mask is None or (not _tracing() and bool(attention_mask.all())):
        return None
    bias = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
    return bias


def check_inputs(config: AlbertConfig, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor]) -> None:
    """Clear errors for the input mistakes that otherwise surface as an index error deep inside torch."""
    if _tracing():  # export / compile: value checks would be baked in as constants
        return
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq_len], got shape {tuple(input_ids.shape)}")
    if input_ids.shape[1] > config.max_position_embeddings:
        raise ValueError(f"input has {input_ids.shape[1]} tokens but the model takes at most "
                         f"max_position_embeddings = {config.max_position_embeddings}; truncate the text "
                         "(tokenizer max_length) or use a sliding window")
    if input_ids.numel() and (int(input_ids.max()) >= config.vocab_size or int(input_ids.min()) < 0):
        raise ValueError(f"input_ids contain ids outside [0, vocab_size = {config.vocab_size}): "
                         f"min {int(input_ids.min())}, max {int(input_ids.max())}; is the tokenizer the model's?")
    if token_type_ids is not None and token_type_ids.numel() and int(token_type_ids.max()) >= config.type_vocab_size:
        raise ValueError(f"token_type_ids contain {int(token_type_ids.max())} but type_vocab_size = "
                         f"{config.type_vocab_size}")


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.compiler.is_compiling() or torch.onnx.is_in_onnx_export()


@torch.no_grad()
def init_weights(module: nn.Module, std: float) -> None:
    """Truncated normal (at 2 std, as TF's truncated_normal_initializer) for weights and embeddings, zero biases,
    unit LayerNorms — the official `create_initializer`."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.zero_()
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        module.weight.fill_(1.0)
        module.bias.zero_()
