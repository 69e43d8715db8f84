"""The label-efficiency experiment's report (`litebert.experiments.label_efficiency`): per arm and number of
labelled examples, the mean and sample standard deviation over seeds of dev and test accuracy; results.json,
results.md and label-efficiency.png (test accuracy against N on a log axis, a band of one standard deviation)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional

from litebert.files import atomic_write, write_json

NAMES = {"pretrained": "pretrained", "tapt": "pretrained + task-adaptive", "control": "from scratch (control)",
         "bag_of_words": "bag of words"}


def _stats(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else None,
            "seeds": len(values), "values": values}


def summarize(s, task, cells: list[dict], tapt: Optional[dict]) -> dict:
    """results.json's content: the settings, each cell, and per arm and size the statistics over seeds."""
    from litebert.tasks.baselines import majority

    arms = [*s.arms, *(["bag_of_words"] if s.bag_of_words else [])]
    sizes = list(dict.fromkeys(c["size"] for c in cells))
    table = {}
    for arm in arms:
        table[arm] = {}
        for size in sizes:
            rows = [c[arm] for c in cells if c["size"] == size]
            table[arm][size] = {"n": next(c["n"] for c in cells if c["size"] == size),
                                "test": _stats([r["test"] for r in rows]), "dev": _stats([r["dev"] for r in rows]),
                                **({"lrs": [r["lr"] for r in rows], "added": sorted({a for r in rows
                                                                                    for a in r["added"]}),
                                    "minutes": round(sum(r["minutes"] for r in rows), 2)} if arm != "bag_of_words"
                                   else {"C": [r["C"] for r in rows]})}
    constant = majority({split: [e.label for e in task.examples[split]] for split in ("dev", "test")})
    return {"experiment": "label-efficiency", "settings": s.to_json(), "metric": task.metric,
            "examples": {k: len(v) for k, v in task.examples.items()}, "majority": constant,
            "tapt": {k: v for k, v in (tapt or {}).items() if k != "model"} or None,
            "statistic": "mean and sample standard deviation over seeds (each seed: its own subset, initialisation "
                         "and data order)", "table": table, "cells": cells}


def _pm(st: dict) -> str:
    return f"{100 * st['mean']:.1f}" + (f" ± {100 * st['sd']:.1f}" if st["sd"] is not None else "")


def markdown(summary: dict) -> str:
    s, table = summary["settings"], summary["table"]
    arms = list(table)
    sizes = list(next(iter(table.values())))
    ex = summary["examples"]
    lines = [f"# Label efficiency: {s['task']}", "",
             f"Training examples drawn from {ex['train']:,}; dev {ex['dev']:,} (chooses rates, checkpoints and C), "
             f"test {ex['test']:,} (scored once). {summary['metric'].capitalize()} in %, mean ± standard deviation "
             f"over seeds; runs last {s['epochs']:g} epochs of their examples and at least {s['min_steps']} steps of "
             f"{s['batch_size']}.", ""]
    for split in ("test", "dev"):
        lines += [f"| {split} | " + " | ".join(NAMES[a] for a in arms) + " |",
                  "|---|" + "---|" * len(arms)]
        for size in sizes:
            first = table[arms[0]][size]
            label = f"{first['n']:,}" + (" (all)" if size == "all" else "") + f", {first['test']['seeds']} seed(s)"
            lines.append(f"| {label} | " + " | ".join(_pm(table[a][size][split]) for a in arms) + " |")
        lines.append("")
    m = summary["majority"]
    lines += [f"Best constant guess: dev {100 * m['dev_accuracy']:.1f}%, test {100 * m['test_accuracy']:.1f}%.", "",
              "| rates chosen on dev (added beyond the grid) | " + " | ".join(
                  NAMES[a] for a in arms if a != "bag_of_words") + " |",
              "|---|" + "---|" * len([a for a in arms if a != "bag_of_words"])]
    for size in sizes:
        cells = []
        for a in arms:
            if a == "bag_of_words":
                continue
            r = table[a][size]
            added = f" (+{', '.join(f'{x:g}' for x in r['added'])})" if r["added"] else ""
            cells.append(", ".join(f"{x:g}" for x in r["lrs"]) + added + f"; {r['minutes']:.1f} min")
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    if summary.get("tapt"):
        t = summary["tapt"]
        lines += ["", f"Task-adaptive pretraining: {t['steps']} MLM steps on the {t['texts']:,} training texts "
                      f"({t['store_tokens']:,} tokens), {t['minutes']:.1f} min, before any fine-tuning."]
    return "\n".join(lines) + "\n"


def plot(summary: dict, out: Path) -> None:
    from litebert.plot import Panel, draw

    table = summary["table"]
    panel = Panel(f"{summary['settings']['task']}: test {summary['metric']} against labelled examples",
                  ylabel=f"test {summary['metric']} (%)", xlabel="labelled training examples (log scale)",
                  xscale="log")
    for arm, rows in table.items():
        xs = [r["n"] for r in rows.values()]
        mean = [100 * r["test"]["mean"] for r in rows.values()]
        sd = [100 * (r["test"]["sd"] or 0.0) for r in rows.values()]
        panel.lines[NAMES[arm]] = (xs, mean)
        panel.bands[NAMES[arm]] = (xs, [m - d for m, d in zip(mean, sd)], [m + d for m, d in zip(mean, sd)])
    panel.hlines["best constant guess"] = 100 * summary["majority"]["test_accuracy"]
    draw([panel], out, size=(8.0, 5.0), what="the label-efficiency plot")


def write(out: Path, summary: dict) -> None:
    from litebert.experiments.report import can_plot

    write_json(out / "results.json", summary)
    atomic_write(out / "results.md", markdown(summary))
    if can_plot():
        plot(summary, out / "label-efficiency.png")


def cell_line(row: dict, arms) -> str:
    parts = [f"{NAMES[a]} {100 * row[a]['test']:.1f}" for a in [*arms, "bag_of_words"] if a in row]
    return f"label efficiency: {row['size']} examples, seed {row['seed']}: test " + ", ".join(parts)
