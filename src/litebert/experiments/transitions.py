"""Figure 2 of the paper: how much each layer changes its input. For every layer l, over held-out tokens (padding
excluded), the mean L2 distance ``||h_l - h_(l-1)||`` and the mean cosine similarity of ``h_l`` and ``h_(l-1)`` (also
as an angle in degrees, the paper's y-axis), where ``h_0`` is the embedding output after the E -> H projection.
The paper finds ALBERT's (all-shared) transitions much smoother than BERT's (not-shared): the distances and angles
oscillate instead of converging to 0.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from litebert import hub
from litebert.arguments import checked
from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.errors import ConfigError
from litebert.extras import install_hint
from litebert.files import atomic_write

COLUMNS = ("model", "layer", "l2_distance", "cosine_similarity", "angle_degrees", "tokens")
PLOT_FORMATS = (".png", ".pdf", ".svg")
ENCODER_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "packing")  # not the pretraining batch's MLM keys


@dataclass
class TransitionsResult:
    rows: dict  # model name -> per-layer rows (`layer_transitions`)
    plot: Path
    csv: Path


@checked(examples=AT_LEAST_1, seq_len=AT_LEAST_1, batch_size=AT_LEAST_1, seed=AT_LEAST_0)
def analyze_transitions(models: Sequence[str | os.PathLike], data: str | os.PathLike, out: str | os.PathLike, *,
                        names: Optional[Sequence[str]] = None, examples: int = 256, seq_len: Optional[int] = None,
                        seed: int = 12345, batch_size: int = 16, device: Optional[str] = None,
                        precision: str = "auto", attention: str = "auto", progress: bool = True,
                        overwrite: bool = False) -> TransitionsResult:
    """Figure 2 for the encoders of ``models`` on the held-out token store ``data``: the plot ``out`` (.png, .pdf or
    .svg) and the numbers beside it (the same name with .csv). ``names``: one curve name per model. ``device``,
    ``precision`` and ``attention``: as for every command (`litebert.engine.runtime.Runtime`). Existing files there
    are replaced only with ``overwrite``."""
    from litebert.data.store import TokenStore
    from litebert.engine.device import resolve_device
    from litebert.engine.runtime import Runtime
    from litebert.experiments.intrinsic import model_names
    from litebert.folders import plan_file
    from litebert.model import AlbertModel

    out = Path(out)
    names = model_names(models, names)  # from what the user gave (a hub id's name, not its cache folder's)
    models = [hub.local(m, "model") for m in models]
    if out.suffix.lower() not in PLOT_FORMATS:
        raise ConfigError("{out}: the plot is written as " + ", ".join(PLOT_FORMATS) + " (the numbers go beside it, "
                          "as .csv); give one of these names", out=out)
    from litebert.experiments.report import can_plot

    if not can_plot():
        raise ConfigError("the plot needs matplotlib: " + install_hint("plot", "matplotlib"))
    for path in (out, out.with_suffix(".csv")):
        plan_file(path, name="out", overwrite=overwrite, inputs={"models": list(models), "data": data})
    resolve_device(device)  # a device this machine lacks is refused before the store is read
    store = TokenStore(data)
    rows = {}
    for name, path in zip(names, models):
        model = AlbertModel.from_pretrained(path)
        if model.config.vocab_size != store.facts.vocab_size:
            raise ConfigError(f"{path}: vocabulary of {model.config.vocab_size} pieces, but the store was prepared "
                              f"with {store.facts.vocab_size}; use a store made with the model's tokenizer")
        runtime = Runtime.for_inference(model.config, device, precision, attention)
        runtime.place(model)
        rows[name] = layer_transitions(model, store, examples=examples, seed=seed, batch_size=batch_size,
                                       seq_len=model.config.sequence_length(seq_len, 128), progress=progress,
                                       runtime=runtime)
    write_csv(out.with_suffix(".csv"), rows)
    plot(out, rows)
    return TransitionsResult(rows, out, out.with_suffix(".csv"))


def layer_transitions(model, store, *, examples: int = 256, seq_len: int = 128, seed: int = 12345,
                      batch_size: int = 16, progress: bool = False, runtime=None) -> list[dict]:
    """Per layer: ``{"layer", "l2_distance", "cosine_similarity", "angle_degrees", "tokens"}`` of an ALBERT encoder
    (``model.albert`` or the encoder itself) on the first ``examples`` unmasked examples of the held-out ``store``,
    through the inference loop (`litebert.inference.loop.run_batches`) under ``runtime`` (default: the encoder's own
    device, fp32)."""
    from litebert.data.pretraining import PretrainingDataset, collate_pretraining
    from litebert.inference.loop import run_batches

    encoder = getattr(model, "albert", model)
    ds = PretrainingDataset(store, max_seq_length=seq_len, seed=seed, masked_lm_prob=0.0, short_seq_prob=0.0)
    feats = [ds.example(0, i) for i in range(min(examples, ds.num_examples))]
    layers = encoder.config.num_hidden_layers

    def take(out, batch) -> dict:  # per sequence: [layers, 3] sums over its real tokens (l2, cosine, angle)
        mask = batch.get("attention_mask")
        states = out.hidden_states  # [B, L, H] per layer boundary
        real = torch.ones(states[0].shape[:2], dtype=torch.bool, device=states[0].device) if mask is None \
            else mask.bool()
        sums = []
        for layer in range(layers):
            a, b = states[layer].double(), states[layer + 1].double()
            cos = torch.nn.functional.cosine_similarity(a, b, dim=-1).clamp(-1, 1)  # [B, L]
            per_token = torch.stack([(b - a).norm(dim=-1), cos, torch.rad2deg(torch.arccos(cos))], -1)  # [B, L, 3]
            sums.append((per_token * real.unsqueeze(-1)).sum(1))  # [B, 3]
        return {"sums": torch.stack(sums, 1), "tokens": real.sum(1)}  # [B, layers, 3], [B]

    rows = run_batches(encoder, feats, take, runtime=runtime, batch_size=batch_size, collate=collate_pretraining,
                       inputs=ENCODER_INPUTS, options={"output_hidden_states": True}, progress=progress,
                       desc="layer transitions")
    sums = sum((r["sums"] for r in rows), np.zeros((layers, 3)))
    tokens = int(sum(int(r["tokens"]) for r in rows))
    means = (sums / max(tokens, 1)).tolist()
    return [{"layer": i + 1, "l2_distance": m[0], "cosine_similarity": m[1], "angle_degrees": m[2], "tokens": tokens}
            for i, m in enumerate(means)]


def write_csv(path: str | Path, rows_by_model: dict[str, list[dict]]) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            for name, rows in rows_by_model.items():
                for r in rows:
                    w.writerow({"model": name, **r})

    atomic_write(path, write)


def plot(path: str | Path, rows_by_model: dict[str, list[dict]]) -> None:
    """Two panels as in Figure 2: L2 distance and cosine similarity (in degrees) per layer, a curve per model."""
    from litebert.plot import Panel, draw

    l2 = Panel("L2 distance of input and output embeddings", "L2 distance", "layer")
    angle = Panel("angle between input and output", "cosine similarity (degrees)", "layer")
    for name, rows in rows_by_model.items():
        layers = [r["layer"] for r in rows]
        l2.lines[name] = (layers, [r["l2_distance"] for r in rows])
        angle.lines[name] = (layers, [r["angle_degrees"] for r in rows])
        for panel in (l2, angle):
            panel.styles[name] = {"marker": "o", "markersize": 6}
    draw([l2, angle], path, columns=2, size=(10, 4), dpi=120, what="the plot (the numbers are in the CSV)")

