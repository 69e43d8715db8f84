"""`litebert params`: exact parameter counts of every preset, beside the paper's figures.

Counts follow from the config alone (no module is built, so a shape too large for memory can be counted before
anything is allocated); tests/test_config.py checks them against the parameters of the real modules for every
sharing schedule. "encoder" = embeddings + projection + unique blocks + pooler (the paper's convention); "+ heads"
adds the MLM head (its decoder is tied to the word embeddings: only the H->E transform, LayerNorm and the V-sized bias
are new) and the SOP classifier.
"""

from __future__ import annotations

import argparse
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
    attention_ids, ffn_ids = config.schedule()
    embeddings = (v + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e  # + LayerNorm
    projection = e * h + h if config.has_embedding_projection else 0
    attention = 4 * (h * h + h) + 2 * h  # query, key, value, dense; LayerNorm
    ffn = (h * i + i) + (i * h + h) + 2 * h  # in, out; LayerNorm
    pooler = h * h + h
    total = (embeddings + projection + (max(attention_ids) + 1) * attention + (max(ffn_ids) + 1) * ffn + pooler)
    if heads:
        total += (h * e + e) + 2 * e + v + (2 * h + 2)  # MLM transform, LayerNorm, decoder bias; SOP classifier
    return total


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
