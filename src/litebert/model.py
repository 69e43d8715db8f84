"""The ALBERT encoder (Lan et al., ICLR 2020): the reference model, in plain PyTorch, read top to bottom.

Embeddings in E dimensions -> (E->H projection) -> a schedule of post-LN transformer blocks -> pooler. ALBERT's two
architectural ideas are both visible here:

- factorized embeddings (Section 3.1): tokens are embedded in E dimensions and projected to H once, so the vocabulary
  costs V*E + E*H parameters instead of V*H;
- cross-layer sharing (Section 3.1, Table 4): the encoder owns a few *unique* attention and FFN blocks and a
  *schedule* (`AlbertConfig.schedule`) saying which of them runs at each step of depth.

Three savings change no output that is read: the last depth step runs only at the rows a head reads (masked
positions, [CLS]); the caller can skip padding by passing a `Packing` of the mask (`litebert.padding`); the MLM head
runs only at masked positions (`litebert.heads`). Parameter names follow HF `modeling_albert.py` inside each block, so
the checkpoint key map
(`litebert.io.keymap`) is a short list of renames. Every layer is an ordinary module called as one, so forward hooks,
`torch.ao.quantization.quantize_dynamic` and `torch.compile` see the model as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from litebert.config import AlbertConfig
from litebert.errors import InputError
from litebert.outputs import ModelOutputAccess
from litebert.padding import Packing
from litebert.pretrained import PretrainedMixin

ACT = {  # hidden_act -> activation; "gelu_new" is the official BERT/ALBERT gelu (its tanh approximation)
    "gelu_new": lambda: nn.GELU(approximate="tanh"),
    "gelu": nn.GELU,
    "relu": nn.ReLU,
    "silu": nn.SiLU,
}


def maybe_dropout(p: float) -> nn.Module:
    """No dropout op at all when p == 0 (the v2 and xxlarge presets)."""
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
        if position_ids is None:
            position_ids = self.position_ids[:input_ids.shape[1]]  # [L], broadcast over the batch
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # a single segment
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # [B, L, E]
        x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class Attention(nn.Module):
    """Multi-head self-attention with a post-LN residual: LN(x + dropout(dense(attention(x))))."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dense = nn.Linear(h, h)
        self.LayerNorm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.attention_dropout = config.attention_probs_dropout_prob
        self.output_dropout = maybe_dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor], packing: Optional[Packing] = None,
                rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``x``: [B, L, H], or the real tokens [N, H] with ``packing``. ``bias``: [B, 1, 1, L] (see
        `attention_bias`), None when nothing is masked or when the packing attends varlen. ``rows`` [B, S]: only
        these rows of ``x`` (indices into its flattened tokens) are wanted; the output is then [B, S, H]. Keys and
        values still come from every token; queries and all that follows only from those rows."""
        b, l = (packing.batch, packing.length) if packing is not None else x.shape[:2]
        h = x.shape[-1]
        residual = x if rows is None else x.reshape(-1, h)[rows]  # [B, S, H] with rows
        q, k, v = self.query(residual), self.key(x), self.value(x)
        p = self.attention_dropout if self.training else 0.0
        if packing is not None and packing.varlen:  # GPU: flash attention straight on the packed rows
            context = packing.varlen_attention(q, k, v, self.num_heads)
        else:
            if packing is not None:  # attention needs the padded layout: [N, H] -> [B, L, H], padding rows zero
                k, v = packing.unpack(k), packing.unpack(v)
                q = q if rows is not None else packing.unpack(q)
            # [B, Lq, H] -> [B, heads, Lq, H/heads]
            q, k, v = (t.reshape(b, -1, self.num_heads, h // self.num_heads).transpose(1, 2) for t in (q, k, v))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)  # [B, heads, Lq, d]
            context = context.transpose(1, 2).reshape(b, -1, h)  # [B, Lq, H]
            if packing is not None and rows is None:
                context = packing.pack(context)  # [B, L, H] -> [N, H]
        return self.LayerNorm(residual + self.output_dropout(self.dense(context)))


class FeedForward(nn.Module):
    """Position-wise FFN with a post-LN residual: LN(x + dropout(W2 act(W1 x))).

    The official `ffn` applies hidden dropout before the residual; HF's AlbertLayer defines that dropout but never
    calls it. In eval mode (and with the v2 presets' p = 0) the two agree; in training we follow the official code.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT[config.hidden_act]()
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = maybe_dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., H]
        return self.full_layer_layer_norm(x + self.dropout(self.ffn_output(self.act(self.ffn(x)))))


class Encoder(nn.Module):
    """The E->H projection, then ``len(schedule)`` depth steps, each running one attention and one FFN block.

    ``schedule[s] = (a, f)``: step s runs ``attention_blocks[a]`` then ``ffn_blocks[f]``. All-shared ALBERT has one
    block of each, visited 12 times; BERT has 12 of each, visited once. A shared block's weight gradient is the sum
    over the steps that ran it, which autograd adds up.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        # Only when E != H in the official code; HF always has it (see AlbertConfig.has_embedding_projection).
        self.embedding_hidden_mapping_in = (nn.Linear(config.embedding_size, config.hidden_size)
                                            if config.has_embedding_projection else nn.Identity())
        attention_ids, ffn_ids = config.schedule()
        self.attention_blocks = nn.ModuleList(Attention(config) for _ in range(max(attention_ids) + 1))
        self.ffn_blocks = nn.ModuleList(FeedForward(config) for _ in range(max(ffn_ids) + 1))
        self.schedule = list(zip(attention_ids, ffn_ids))
        self.steps_per_layer = config.inner_group_num
        self.gradient_checkpointing = False

    def step(self, x: torch.Tensor, bias: Optional[torch.Tensor], s: int, packing: Optional[Packing] = None,
             rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        a, f = self.schedule[s]
        return self.ffn_blocks[f](self.attention_blocks[a](x, bias, packing, rows))

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor], packing: Optional[Packing] = None,
                rows: Optional[torch.Tensor] = None, output_hidden_states: bool = False):
        """``rows`` [B, S] (see `Attention.forward`): the last step runs only there; the output is then [B, S, H]."""
        x = self.embedding_hidden_mapping_in(x)  # [B, L, E] -> [B, L, H] (or packed [N, E] -> [N, H])
        hidden_states = [x] if output_hidden_states else None
        last = len(self.schedule) - 1
        for s in range(len(self.schedule)):
            args = (x, bias, s, packing, rows if s == last else None)
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(self.step, *args, use_reentrant=False)  # backward recomputes the step from its input
            else:
                x = self.step(*args)
            if hidden_states is not None and (s + 1) % self.steps_per_layer == 0:
                hidden_states.append(x)  # one entry per layer (after all its inner-group blocks)
        return x, hidden_states


@dataclass
class EncoderOutput(ModelOutputAccess):
    last_hidden_state: torch.Tensor  # [B, L, H], or [B, P, H] when output_positions were given
    pooler_output: Optional[torch.Tensor] = None  # [B, H]: tanh(W h[CLS] + b)
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None  # embeddings (after projection), then each layer


class AlbertModel(PretrainedMixin, nn.Module):
    """The bare encoder with (optionally) the pooler. HF's ``albert.`` prefix is this module; HF class AlbertModel."""

    HF_ARCHITECTURE = "AlbertModel"
    LOSS_READS_PADDING = True  # no loss of its own: a caller's loss may read any position

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.pooler_activation = nn.Tanh()
        self.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, position_ids: Optional[torch.Tensor] = None,
                output_hidden_states: bool = False, output_positions: Optional[torch.Tensor] = None,
                packing: Optional[Packing] = None) -> EncoderOutput:
        """``output_positions`` [B, P]: only the hidden states at these positions are wanted (e.g. the masked tokens
        in pretraining); ``last_hidden_state`` is then [B, P, H] and the last depth step runs only there (and at
        [CLS] for the pooler): the same values, about one step's work less.

        ``packing`` (`litebert.padding.Packing.from_mask` of ``attention_mask``): skip the padding. The dense layers
        run on the real tokens only and the outputs at padded positions are zeros instead of values nothing should
        read; with the packing's varlen offsets, attention runs flash attention's variable-length kernel (CUDA). The
        caller decides, once: without a packing the padded layout is computed, as HF does."""
        check_inputs(self.config, input_ids, token_type_ids)
        b, l = input_ids.shape
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # [B, L, E]
        # The mask reaches attention as an additive bias, or as the packing's sequence offsets (varlen).
        if packing is None:
            bias = attention_bias(attention_mask, x.dtype)
        else:
            bias = None if packing.varlen else packing.attention_bias(x.dtype)
            x = packing.pack(x)  # [N, E]
        rows = None
        if output_positions is not None and not output_hidden_states:
            rows = output_rows(output_positions, packing, b, l, with_cls=self.pooler is not None)
        x, hidden_states = self.encoder(x, bias, packing, rows, output_hidden_states)
        if rows is not None:
            cls, x = (x[:, 0], x[:, 1:]) if self.pooler is not None else (None, x)  # row 0 was [CLS]
        else:
            if packing is not None:
                x = packing.unpack(x)
                hidden_states = hidden_states and [packing.unpack(t) for t in hidden_states]
            cls = x[:, 0]
            if output_positions is not None:
                x = torch.gather(x, 1, output_positions.long().unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        pooled = self.pooler_activation(self.pooler(cls)) if self.pooler is not None else None
        return EncoderOutput(x, pooled, tuple(hidden_states) if hidden_states is not None else None)


def output_rows(positions: torch.Tensor, packing: Optional[Packing], b: int, l: int, with_cls: bool) -> torch.Tensor:
    """[B, P] positions -> [B, P(+1)] indices into the encoder's flattened tokens ([CLS] first when ``with_cls``).
    The positions' values are checked where that costs nothing: on the host (see `check_inputs`)."""
    positions = positions.long()
    validate = _host(positions)
    if validate and positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= l):
        raise InputError(f"output positions must lie in [0, {l}), got min {int(positions.min())}, "
                         f"max {int(positions.max())}")
    if with_cls:
        positions = torch.cat([positions.new_zeros(b, 1), positions], 1)
    rows = positions + torch.arange(b, device=positions.device)[:, None] * l  # into the B*L positions
    if packing is not None:
        rows = packing.rows(rows)  # into the N real tokens
        if validate and bool((rows < 0).any()):
            raise InputError("an output position points at padding (attention_mask 0) while padding is skipped")
    return rows


def attention_bias(attention_mask: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
    """[B, L] of 1 (attend) / 0 (padding) -> additive bias [B, 1, 1, L] (0 or dtype min), or None if nothing is
    masked. Additive rather than boolean: a row whose keys are all masked then attends uniformly instead of giving
    NaN. No bias at all when nothing is padded lets SDPA take its mask-free kernel: known for free of a mask on the
    host (reading a device mask would make the host wait for the device; litebert's loops drop a mask of all ones
    before it moves)."""
    if attention_mask is None or (_host(attention_mask) and bool(attention_mask.all())):
        return None
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def check_inputs(config: AlbertConfig, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor]) -> None:
    """Clear errors for the input mistakes that otherwise surface as an index error deep inside torch. The shape
    always; the id ranges only for inputs on the host, where reading them is free: on a GPU it would stall every
    call until the batch is there, so the ids of a device batch are checked where they are made (the tokenizer, the
    token store's verification, the fine-tuning features)."""
    if _tracing():  # export / compile: value checks would be baked in as constants
        return
    if input_ids.dim() != 2:
        raise InputError(f"input_ids must be [batch, seq_len], got shape {tuple(input_ids.shape)}")
    if input_ids.shape[1] > config.max_position_embeddings:
        raise InputError(f"input has {input_ids.shape[1]} tokens but the model takes at most "
                         f"max_position_embeddings = {config.max_position_embeddings}; truncate the text "
                         "(tokenizer max_length) or use a sliding window")
    if not _host(input_ids):
        return
    if input_ids.numel() and (int(input_ids.max()) >= config.vocab_size or int(input_ids.min()) < 0):
        raise InputError(f"input_ids contain ids outside [0, vocab_size = {config.vocab_size}): "
                         f"min {int(input_ids.min())}, max {int(input_ids.max())}; is the tokenizer the model's?")
    if token_type_ids is not None and token_type_ids.numel() and int(token_type_ids.max()) >= config.type_vocab_size:
        raise InputError(f"token_type_ids contain {int(token_type_ids.max())} but type_vocab_size = "
                         f"{config.type_vocab_size}")


def _host(t: torch.Tensor) -> bool:
    """Whether ``t``'s values can be read without waiting for a device (and are not being traced)."""
    return t.device.type == "cpu" and not _tracing()


def _tracing() -> bool:
    """Export or compile: data-dependent shortcuts (skip the bias, pack padding) would be baked in as constants."""
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
