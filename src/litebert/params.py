"""`litebert params`: exact parameter counts of every preset, beside the paper's figures.

Counts follow from the config alone (no module is built, so a shape too large for memory can be counted before
anything is allocated); tests/test_config.py checks them against the parameters of the real modules for every
sharing schedule. "encoder" = embeddings + projection + unique blocks + pooler (the paper's convention); "+ heads"
adds the MLM head (its decoder is tied to the word embeddings: only the H->E transform, LayerNorm and the V-sized bias
are new) and the SOP classifier.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses

from litebert.config import PRESETS, SHARING, AlbertConfig

# Paper figures (Lan et al. 2020): Table 3 (embedding size E) and Table 4 (cross-layer sharing), ALBERT-base shape.
PAPER_GRID = {
    ("none", 64): "87M", ("none", 128): "89M", ("none", 256): "93M", ("none", 768): "108M",
    ("all", 64): "10M", ("all", 128): "12M", ("all", 256): "16M", ("all", 768): "31M",
    ("attention", 128): "64M", ("attention", 768): "83M", ("ffn", 128): "38M", ("ffn", 768): "57M",
}


def count_parameters(config: AlbertConfig, heads: bool = False) -> int:
    """Parameters of `litebert.model.AlbertModel` (with its pooler) for ``config``; with ``heads``, of
    ``AlbertForPreTraining`` (+ the MLM transform H->E, its LayerNorm and V-sized bias, and the SOP classifier)."""
    v, e, h, i = config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size
    n_attention, n_ffn = config.unique_blocks()
    embeddings = (v + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e  # + LayerNorm
    projection = e * h + h if config.has_embedding_projection else 0
    attention = 4 * (h * h + h) + 2 * h  # query, key, value, dense; LayerNorm
    ffn = (h * i + i) + (i * h + h) + 2 * h  # in, out; LayerNorm
    pooler = h * h + h
    total = embeddings + projection + n_attention * attention + n_ffn * ffn + pooler
    if heads:
        total += (h * e + e) + 2 * e + v + (2 * h + 2)  # MLM transform, LayerNorm, decoder bias; SOP classifier
    return total


def memory_bytes(config: AlbertConfig, batch: int, seq_len: int, training: bool = True) -> int:
    """A lower bound on the memory a model needs in fp32, from its config alone: the weights (with their gradients
    and the optimizer's two moments when ``training``) and the activations no implementation can do without at
    ``batch`` x ``seq_len`` (training: each depth step's input, kept for the backward pass even with gradient
    checkpointing; inference: one step's hidden states and attention scores)."""
    h, steps = config.hidden_size, config.num_hidden_layers * config.inner_group_num
    weights = count_parameters(config, heads=True) * 4 * (4 if training else 1)
    tokens = batch * seq_len
    one_step = tokens * (3 * h + config.intermediate_size) + batch * config.num_attention_heads * seq_len * seq_len
    activations = (steps * tokens * h + one_step) if training else one_step
    return weights + activations * 4


# The fields a mistaken shape usually comes from, and a size of each no model needs to exceed (ALBERT-xxlarge's,
# or a 256k vocabulary): the one that brings the estimate down most when capped there is named in the error.
_SHAPE_FIELDS = {"vocab_size": 256_000, "embedding_size": 4096, "hidden_size": 4096, "intermediate_size": 16384,
                 "num_hidden_layers": 48, "inner_group_num": 1, "num_attention_heads": 64,
                 "max_position_embeddings": 512}


def check_memory(config: AlbertConfig, batch: int, seq_len: int, available: int, training: bool = True,
                 source=None) -> None:
    """Refuse, before anything is allocated, a shape whose `memory_bytes` exceed ``available`` bytes: a one-line
    `ConfigError` naming the config field most responsible (as a field of ``source``, the file the config was read
    from, when it was) and the sizes."""
    from litebert.errors import ConfigError, Field

    need = memory_bytes(config, batch, seq_len, training)
    if need <= available:
        return
    drops = {}
    for name, cap in _SHAPE_FIELDS.items():
        if getattr(config, name) > cap:
            smaller = copy.copy(config)  # unchecked: the capped shape only measures this field's share
            object.__setattr__(smaller, name, cap)
            if name == "num_hidden_layers":
                object.__setattr__(smaller, "num_hidden_groups", 1)
            drops[name] = need - memory_bytes(smaller, batch, seq_len, training)
    culprit = max(drops, key=drops.get) if drops else "hidden_size"
    raise ConfigError("{" + culprit + "}: " + f"this shape needs at least {_gb(need)} "
                      f"({'training' if training else 'inference'} at batch {batch} x {seq_len} tokens), more than "
                      f"the {_gb(available)} available; lower it",
                      **{culprit: Field("AlbertConfig", getattr(config, culprit), source)})


def _gb(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n < 2**60 else f"{n:.2e} bytes"


def available_memory(device) -> int:
    """Bytes a run on ``device`` may use: the GPU's free memory, or the host's available memory (Linux's
    MemAvailable; the physical memory elsewhere)."""
    import os

    if getattr(device, "type", "cpu") == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def preset_table() -> list[tuple[str, int, int, str]]:
    return [(name, count_parameters(p_cfg := AlbertConfig.from_preset(name)), count_parameters(p_cfg, heads=True),
             preset.paper_params or "-") for name, preset in PRESETS.items()]


def sharing_grid() -> list[tuple[int, dict[str, int]]]:
    base = AlbertConfig.from_preset("albert-base-v2")
    rows = []
    for e in (64, 128, 256, 768):
        counts = {}
        for sharing in SHARING:
            config = dataclasses.replace(base, embedding_size=e, sharing=sharing)
            counts[sharing] = count_parameters(config)
        rows.append((e, counts))
    return rows


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", help="show one preset only (default: all presets and the sharing grid)")


def run(args: argparse.Namespace) -> int:
    if args.preset:
        config = AlbertConfig.from_preset(args.preset)
        print(f"{args.preset}: encoder {count_parameters(config):,}  with pretraining heads "
              f"{count_parameters(config, heads=True):,}")
        return 0
    print("Parameters per preset (encoder = embeddings + E->H projection + unique blocks + pooler)\n")
    print(f"{'preset':<20}{'encoder':>15}{'+ MLM/SOP heads':>18}{'paper (Table 1)':>18}")
    for name, encoder, with_heads, paper in preset_table():
        print(f"{name:<20}{encoder:>15,}{with_heads:>18,}{paper:>18}")
    print("\nALBERT-base shape: embedding size E x cross-layer sharing (encoder parameters; paper Tables 3-4 in "
          "brackets)\n")
    print(f"{'E':>5}" + "".join(f"{s:>22}" for s in ("all-shared", "shared-attention", "shared-FFN", "not-shared")))
    for e, counts in sharing_grid():
        cells = []
        for sharing in SHARING:
            paper = PAPER_GRID.get((sharing, e))
            cells.append(f"{counts[sharing]:,}" + (f" [{paper}]" if paper else ""))
        print(f"{e:>5}" + "".join(f"{c:>22}" for c in cells))
    return 0
