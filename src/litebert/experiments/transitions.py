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

import torch
from tqdm import tqdm

from litebert import hub
from litebert.arguments import checked
from litebert.errors import ConfigError
from litebert.extras import install_hint
from litebert.files import atomic_write

COLUMNS = ("model", "layer", "l2_distance", "cosine_similarity", "angle_degrees", "tokens")
PLOT_FORMATS = (".png", ".pdf", ".svg")


@dataclass
class TransitionsResult:
    rows: dict  # model name -> per-layer rows (`layer_transitions`)
    plot: Path
    csv: Path


@checked
def analyze_transitions(models: Sequence[str | os.PathLike], data: str | os.PathLike, out: str | os.PathLike, *,
                        names: Optional[Sequence[str]] = None, examples: int = 256, seq_len: Optional[int] = None,
                        seed: int = 12345, batch_size: int = 16, device: Optional[str] = None,
                        progress: bool = True, overwrite: bool = False) -> TransitionsResult:
    """Figure 2 for the encoders of ``models`` on the held-out token store ``data``: the plot ``out`` (.png, .pdf or
    .svg) and the numbers beside it (the same name with .csv). ``names``: one curve name per model. Existing files
    there are replaced only with ``overwrite``."""
    from litebert.data.store import TokenStore
    from litebert.experiments.intrinsic import _check_counts, model_names
    from litebert.folders import plan_file
    from litebert.model import AlbertModel
    from litebert.engine.device import resolve_device

    out = Path(out)
    names = model_names(models, names)  # from what the user gave (a hub id's name, not its cache folder's)
    models = [hub.local(m, "model") for m in models]
    if out.suffix.lower() not in PLOT_FORMATS:
        raise ConfigError("{out}: the plot is written as " + ", ".join(PLOT_FORMATS) + " (the numbers go beside it, "
                          "as .csv); give one of these names", out=out)
    _check_counts(examples=examples, batch_size=batch_size, **({} if seq_len is None else {"seq_len": seq_len}))
    from litebert.experiments.report import can_plot

    if not can_plot():
        raise ConfigError("the plot needs matplotlib: " + install_hint("plot", "matplotlib"))
    for path in (out, out.with_suffix(".csv")):
        plan_file(path, name="out", overwrite=overwrite, inputs={"models": list(models), "data": data})
    dev, store = resolve_device(device), TokenStore(data)
    rows = {}
    for name, path in zip(names, models):
        model = AlbertModel.from_pretrained(path).to(dev)
        if model.config.vocab_size != store.facts.vocab_size:
            raise ConfigError(f"{path}: vocabulary of {model.config.vocab_size} pieces, but the store was prepared "
                              f"with {store.facts.vocab_size}; use a store made with the model's tokenizer")
        rows[name] = layer_transitions(model, store, examples=examples, seed=seed, batch_size=batch_size,
                                       seq_len=model.config.sequence_length(seq_len, 128), progress=progress)
    write_csv(out.with_suffix(".csv"), rows)
    plot(out, rows)
    return TransitionsResult(rows, out, out.with_suffix(".csv"))


@torch.no_grad()
def layer_transitions(model, store, *, examples: int = 256, seq_len: int = 128, seed: int = 12345,
                      batch_size: int = 16, progress: bool = False) -> list[dict]:
    """Per layer: ``{"layer", "l2_distance", "cosine_similarity", "angle_degrees", "tokens"}`` of an ALBERT encoder
    (``model.albert`` or the encoder itself) on the first ``examples`` unmasked examples of the held-out ``store``."""
    from litebert.data.pretraining import PretrainingDataset, collate_pretraining

    encoder = getattr(model, "albert", model)
    device = next(encoder.parameters()).device
    encoder.eval()
    ds = PretrainingDataset(store, max_seq_length=seq_len, seed=seed, masked_lm_prob=0.0, short_seq_prob=0.0)
    n = min(examples, ds.num_examples)
    layers = encoder.config.num_hidden_layers
    sums = torch.zeros(layers, 3, dtype=torch.float64)  # l2, cosine, angle
    tokens = 0
    for start in tqdm(range(0, n, batch_size), desc="layer transitions", disable=not progress, leave=False):
        batch = collate_pretraining([ds.example(0, i) for i in range(start, min(start + batch_size, n))])
        mask = batch["attention_mask"].bool().to(device)
        out = encoder(batch["input_ids"].to(device), batch["attention_mask"].to(device),
                      batch["token_type_ids"].to(device), output_hidden_states=True)
        states = [h.float()[mask] for h in out.hidden_states]  # [tokens, H] per layer boundary
        for layer in range(layers):
            a, b = states[layer].double(), states[layer + 1].double()
            cos = torch.nn.functional.cosine_similarity(a, b, dim=-1).clamp(-1, 1)
            sums[layer, 0] += (b - a).norm(dim=-1).sum().item()
            sums[layer, 1] += cos.sum().item()
            sums[layer, 2] += torch.rad2deg(torch.arccos(cos)).sum().item()
        tokens += int(mask.sum())
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

