"""Measured statistics of pretraining examples, to check a prepared corpus against the paper's recipe.

``litebert data inspect STORE --sample N`` prints them; each figure has a target from ALBERT §4.1 / the official code.
"""

from __future__ import annotations

import numpy as np

from litebert.data.masking import ngram_probabilities
from litebert.data.pretraining import PretrainingDataset


def example_statistics(ds: PretrainingDataset, epoch: int, indices) -> dict:
    """Aggregate statistics over ``ds.example(epoch, i)`` for ``i`` in ``indices``."""
    facts = ds.facts
    lengths, n_pred, labels = [], [], []
    ngram_words = np.zeros(ds.max_ngram + 1, np.int64)
    kinds = np.zeros(3, np.int64)  # [MASK] / kept / replaced
    special_hits = budget_hits = 0
    for i in indices:
        e = ds.example(epoch, int(i), spans=True)
        ids, pos, orig = e["input_ids"], e["mlm_positions"], e["mlm_ids"]
        L = ids.size
        lengths.append(L)
        n_pred.append(pos.size)
        labels.append(int(e["sentence_order_label"]))
        seps = np.flatnonzero(e["token_type_ids"][1:] != e["token_type_ids"][:-1])  # last token of segment A
        special = {0, L - 1, int(seps[0]) if seps.size else -1}
        special_hits += sum(int(p) in special for p in pos)
        budget = min(ds.max_predictions_per_seq, max(1, int(round(L * ds.masked_lm_prob))))
        budget_hits += pos.size == budget
        np.add.at(ngram_words, e["mlm_spans"][:, 2], 1)
        got = ids[pos]
        kinds += [(got == facts.mask_id).sum(), ((got == orig) & (got != facts.mask_id)).sum(),
                  ((got != orig) & (got != facts.mask_id)).sum()]
    lengths, n_pred, labels = np.array(lengths), np.array(n_pred), np.array(labels)
    ngram = ngram_words[1:] / max(1, ngram_words[1:].sum())
    return {
        "examples": int(lengths.size),
        "length_min": int(lengths.min()), "length_mean": float(lengths.mean()), "length_max": int(lengths.max()),
        "short_fraction": float((lengths < ds.max_seq_length).mean()),
        "masked_fraction": float(n_pred.sum() / lengths.sum()), "predictions_mean": float(n_pred.mean()),
        "predictions_max": int(n_pred.max()), "budget_filled_fraction": float(budget_hits / lengths.size),
        "ngram_words": ngram.tolist(), "ngram_expected": ngram_probabilities(ds.max_ngram).tolist(),
        "mask_keep_random": (kinds / max(1, kinds.sum())).tolist(),
        "label1_fraction": float(labels.mean()), "masked_special_tokens": int(special_hits),
    }


def format_statistics(s: dict, ds: PretrainingDataset) -> str:
    """A readable table: each measured figure beside the recipe's target."""
    ng = ", ".join(f"{x:.3f}" for x in s["ngram_words"])
    ex = ", ".join(f"{x:.3f}" for x in s["ngram_expected"])
    mkr = ", ".join(f"{x:.3f}" for x in s["mask_keep_random"])
    what = "swapped" if ds.objective == "sop" else "B random"
    rows = [
        ("examples sampled", f"{s['examples']}", ""),
        ("length min / mean / max", f"{s['length_min']} / {s['length_mean']:.1f} / {s['length_max']}",
         f"<= {ds.max_seq_length}"),
        ("masked fraction of tokens", f"{s['masked_fraction']:.4f}",
         f"~{ds.masked_lm_prob} (capped at {ds.max_predictions_per_seq})"),
        ("predictions mean / max", f"{s['predictions_mean']:.2f} / {s['predictions_max']}",
         f"<= {ds.max_predictions_per_seq}"),
        ("n-gram length in words", ng, f"~[{ex}] (p(n) ∝ 1/n)"),
        ("[MASK] / kept / random", mkr, "~[0.8, 0.1, 0.1]"),
        (f"label 1 ({what})", f"{s['label1_fraction']:.3f}", "~0.5"),
        ("[CLS]/[SEP] masked", f"{s['masked_special_tokens']}", "0"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return "\n".join(f"  {a.ljust(w0)}  {b.ljust(w1)}  {c}" for a, b, c in rows)
