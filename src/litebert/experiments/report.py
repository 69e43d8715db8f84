"""The outputs of ``litebert experiment`` read by people: results.md (a table laid out like the paper's Tables 3-5)
and curves.png (learning curves from each run's metrics.jsonl)."""

from __future__ import annotations

from pathlib import Path

from litebert.experiments import paper

COLUMNS = ("Model", "Parameters", "MLM", "NSP", "SOP", "Sentiment", "MC", "Avg")


def percent(score: dict | None) -> str:
    """``52.3 [49.1, 55.4]``: accuracy and its 95% interval in percent; "-" when not measured."""
    if not score:
        return "-"
    return f"{100 * score['accuracy']:.1f} [{100 * score['low']:.1f}, {100 * score['high']:.1f}]"


def parameters(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.1f}K"


def row(arm: dict) -> list[str]:
    i, d = arm["intrinsic"], arm["downstream"]
    return [arm["name"], parameters(arm["parameters"]), percent(i.get("mlm")), percent(i.get("nsp")),
            percent(i.get("sop")), percent(d.get("sentiment")), percent(d.get("mc")),
            f"{100 * arm['downstream_average']:.1f}"]


def control_rows(controls: dict | None) -> list[list[str]]:
    """The downstream control rows under the arms: the best constant guess, the bag of words (sentiment only) and the
    first arm's shape from random weights; "-" where a row does not apply (no intrinsic scores; no MC bag of
    words). Avg only where both downstream scores exist."""
    if not controls:
        return []
    names = {"majority": "majority class (dev's most frequent label)",
             "bag_of_words": "bag of words (TF-IDF + logistic regression, C on dev)",
             "from_scratch": f"from random weights ({controls['shape_of']} shape, lr chosen on dev from a from-scratch "
                             f"grid)"}
    rows = []
    for key, name in names.items():
        sent, mc = controls["sentiment"].get(key), controls["mc"].get(key)
        avg = f"{100 * (sent['accuracy'] + mc['accuracy']) / 2:.1f}" if sent and mc else "-"
        rows.append([name, "-", "-", "-", "-", percent(sent), percent(mc), avg])
    return rows


def markdown(summary: dict) -> str:
    s = summary["settings"]
    lines = [f"# {summary['experiment']}", "",
             f"Each arm: {summary['arms'][0]['steps'] if summary['arms'] else '?'} pretraining steps of {s['batch']} "
             f"x {s['seq_len']} tokens, seed {s['seed']}, base shape H={s['hidden_size']}, {s['num_layers']} layers "
             f"(parameters: encoder, as the paper counts them). Accuracy in % with its 95% Wilson interval; MLM, "
             f"NSP, SOP on {s['eval_examples']} held-out examples; Sentiment and MC: dev accuracy after "
             f"{s['sentiment_steps']} / {s['mc_steps']} fine-tuning steps; Avg: the mean of the two downstream "
             f"scores.", ""]
    if summary.get("steps_from_minutes"):
        t = summary["steps_from_minutes"]
        lines += [f"Steps chosen from --minutes {s['minutes']:g}: {t['seconds_per_step']:.3f} s/step measured on "
                  f"the slowest arm ({t['timed_arm']}) -> {t['steps']} steps for every arm.", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(a)) + " |" for a in summary["arms"]]
    lines += ["| " + " | ".join(r) + " |" for r in control_rows(summary.get("baselines"))]
    if summary.get("baselines"):
        lines += ["", "The last rows are controls on the same dev examples: an arm's downstream score means something "
                  "only above them. MC has no bag-of-words row: a bag of words scores one text, not a choice among a "
                  "question's answers."]
    lines += ["", "| Model | E | sharing | objective | steps | train time (s) | final train loss |",
              "|---|---|---|---|---|---|---|"]
    for a in summary["arms"]:
        t = a.get("train_seconds")
        loss = a.get("final_train_loss")
        lines.append(f"| {a['name']} | {a['shape']['embedding_size']} | {a['sharing']} | {a['objective']} | "
                     f"{a['steps']} | {'-' if t is None else f'{t:.0f}'} | {'-' if loss is None else f'{loss:.3f}'} |")
    text = "\n".join(lines) + "\n"
    reference = paper.markdown(summary["experiment"])
    return text + ("\n" + reference if reference else "")


def curves(run: Path) -> dict[str, list[tuple[int, float]]]:
    """``{"mlm_loss": [(step, value)...], "sop_loss"/"nsp_loss": ...}`` from a run's train records."""
    from litebert.engine.metrics_log import read_metrics

    out: dict[str, list[tuple[int, float]]] = {}
    for r in read_metrics(run):
        for key in ("mlm_loss", "sop_loss", "nsp_loss"):
            if r.get(key) is not None:
                out.setdefault(key, []).append((r["step"], r[key]))
    return out


def smooth(points: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    """Steps and the running mean of the values over the last 2% of the points (per-step losses are noisy)."""
    window = max(1, len(points) // 50)
    steps, values = [p[0] for p in points], [p[1] for p in points]
    means, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        means.append(total / min(i + 1, window))
    return steps, means


def can_plot() -> bool:
    """Whether matplotlib (an optional dependency: the ``plot`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def plot_curves(path: Path, runs: dict[str, Path]) -> None:
    """Two panels: MLM loss and the sentence loss (SOP or NSP, where the arm has one) against the step."""
    from litebert.plot import Panel, draw

    mlm = Panel("masked LM loss (train, running mean over 2% of the steps)", "MLM loss")
    sentence = Panel("sentence loss (train), where trained", "loss")
    for name, run in runs.items():
        c = curves(run)
        if c.get("mlm_loss"):
            mlm.lines[name] = smooth(c["mlm_loss"])
        for key in ("sop_loss", "nsp_loss"):
            if c.get(key):
                sentence.lines[f"{name} ({key[:3].upper()})"] = smooth(c[key])
    draw([mlm, sentence], path, columns=2, size=(11, 4), dpi=110,
         what="curves.png (the numbers are in each run's metrics.jsonl)")
