"""The one map between litebert parameter names and HF transformers' (``AlbertForPreTraining`` and friends).

Inside each block our names already are HF's; the only difference is where blocks live:

    ours: albert.encoder.attention_blocks.{b}.<rest>          (b = unique block id from AlbertConfig.schedule)
    HF:   albert.encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.<rest>
    ours: albert.encoder.ffn_blocks.{b}.<ffn|ffn_output|full_layer_layer_norm>.<rest>
    HF:   albert.encoder.albert_layer_groups.{g}.albert_layers.{i}.<ffn|ffn_output|full_layer_layer_norm>.<rest>

with b = `AlbertConfig.block_id` (g, i) = g * inner_group_num + i. That holds whenever attention and FFN share the same
way (sharing 'all' or 'none');
HF cannot express the per-sub-block modes, which are then saved under our own names.

HF quirks, all kept here:
- the MLM decoder is tied to the word embeddings and its bias to ``predictions.bias``; HF files may or may not carry
  ``predictions.decoder.*`` copies, which we neither need nor write;
- older HF files carry the ``embeddings.position_ids`` / ``token_type_ids`` buffers;
- HF always has the E->H projection; a litebert model without one (E == H, as the official BERT-style configs) is
  written with an identity projection so that HF computes exactly the same function.
"""

from __future__ import annotations

import re

import torch

from litebert.config import AlbertConfig

_OURS_TO_HF = [
    (re.compile(r"^albert\.encoder\.attention_blocks\.(\d+)\.(.+)$"), "attention.{rest}"),
    (re.compile(r"^albert\.encoder\.ffn_blocks\.(\d+)\.(.+)$"), "{rest}"),
]
_HF_BLOCK = re.compile(r"^albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)$")
_HF_PREFIX = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}."

# Keys HF files may hold that carry nothing we need (tied copies and buffers).
IGNORED_HF_KEYS = {
    "predictions.decoder.weight", "predictions.decoder.bias",
    "albert.embeddings.position_ids", "albert.embeddings.token_type_ids",
}
PROJECTION = ("albert.encoder.embedding_hidden_mapping_in.weight", "albert.encoder.embedding_hidden_mapping_in.bias")


def name_to_hf(key: str, config: AlbertConfig) -> str:
    """One of our (``albert.``-prefixed) names -> HF's: a parameter (``...attention_blocks.0.query.weight``), a
    module (``...attention_blocks.0.query``), or what an adapter hangs on one (``...query.lora_A.weight``); names
    outside the encoder's blocks are the same in both."""
    for pattern, template in _OURS_TO_HF:
        m = pattern.match(key)
        if m:
            (g, i), rest = config.block_place(int(m.group(1))), m.group(2)
            return _HF_PREFIX.format(g=g, i=i) + template.format(rest=rest)
    return key


def name_from_hf(key: str, config: AlbertConfig) -> str:
    """The inverse of `name_to_hf`: an HF (``albert.``-prefixed) name -> ours; our own names pass through."""
    m = _HF_BLOCK.match(key)
    if not m:
        return key
    b, rest = config.block_id(int(m.group(1)), int(m.group(2))), m.group(3)
    if rest.startswith("attention."):
        return f"albert.encoder.attention_blocks.{b}.{rest[len('attention.'):]}"
    return f"albert.encoder.ffn_blocks.{b}.{rest}"


def to_hf(state: dict[str, torch.Tensor], config: AlbertConfig) -> dict[str, torch.Tensor]:
    """Our (``albert.``-prefixed) state dict -> HF names. Only for configs HF can express."""
    if not config.hf_compatible:
        raise ValueError(f"sharing={config.sharing!r} has no HF transformers equivalent")
    out = {name_to_hf(key, config): tensor for key, tensor in state.items()}
    if not config.has_embedding_projection:  # identity E -> H (E == H) so HF's always-present projection is a no-op
        out[PROJECTION[0]] = torch.eye(config.hidden_size, dtype=out["albert.embeddings.word_embeddings.weight"].dtype)
        out[PROJECTION[1]] = torch.zeros(config.hidden_size, dtype=out[PROJECTION[0]].dtype)
    return out


def from_hf(state: dict[str, torch.Tensor], config: AlbertConfig) -> dict[str, torch.Tensor]:
    """HF names (``albert.``-prefixed) -> ours. Keys already in our naming pass through unchanged, so this also
    reads litebert-native files. Dropped: the keys in IGNORED_HF_KEYS, and the identity projection written by
    `to_hf` for models that have none."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if key in IGNORED_HF_KEYS or (not config.has_embedding_projection and key in PROJECTION):
            continue
        out[name_from_hf(key, config)] = tensor
    return out
