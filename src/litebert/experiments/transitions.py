"""Figure 2 of the paper: how much each layer changes its input. For every layer l, over held-out tokens (padding
excluded), the mean L2 distance ``||h_l - h_(l-1)||`` and the mean cosine similarity of ``h_l`` and ``h_(l-1)`` (also
as an angle in degrees, the paper's y-axis), where ``h_0`` is the embedding output after the E -> H projection.
The paper finds ALBERT's (all-shared) transitions much smoother than BERT's (not-shared): the distances and angles
oscillate instead of converging to 0.
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch
from tqdm import tqdm

from litebert.errors import ConfigError
from litebert.files import atomic_write

COLUMNS = ("model", "layer", "l2_distance", "cosine_similarity", "angle_degrees", "tokens")


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
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("the plot needs matplotlib: pip install matplotlib (or litebert[plot]); the numbers are in "
                          "the CSV") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, rows in rows_by_model.items():
        x = [r["layer"] for r in rows]
        left.plot(x, [r["l2_distance"] for r in rows], marker="o", label=name)
        right.plot(x, [r["angle_degrees"] for r in rows], marker="o", label=name)
    left.set(xlabel="layer", ylabel="L2 distance", title="L2 distance of input and output embeddings")
    right.set(xlabel="layer", ylabel="cosine similarity (degrees)", title="angle between input and output")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    suffix = Path(path).suffix.lstrip(".") or "png"
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format=suffix))
    plt.close(fig)

