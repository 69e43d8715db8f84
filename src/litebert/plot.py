"""``litebert plot``: the curves of training runs, from each run folder's ``metrics.jsonl``, in one figure.

    litebert plot runs/base runs/large --out curves.png      # .png, .pdf or .svg
    from litebert import plot_runs
    data = plot_runs(["runs/base", "runs/large"], "curves.png")   # also returns what it drew

Three panels share the step axis: the training loss; the held-out accuracy of a pretraining run (MLM, and SOP or NSP
where trained) or the dev metric of a fine-tuning run (the task's, as ``finetune.json`` names it); the learning rate.
One line per run (and metric), labelled by the run folder's name. Values are drawn as logged (no smoothing), so the
figure shows exactly what ``metrics.jsonl`` holds. Matplotlib is optional (the ``plot``
extra).

`draw` is the one place line figures are made (this command, the experiments' curves and layer transitions, the
demos' pretraining figures): panels of lines, with reference lines, written atomically. Every text it draws (titles,
axis labels, line labels: run folders' names among them) goes through `plain_text`, so a name with ``$``, ``_``,
``^`` or ``\\`` is drawn as written, never read as mathtext or TeX. Matplotlib's config and font
cache go to a temporary folder, removed at exit, unless ``MPLCONFIGDIR`` names one: a figure writes nothing under
HOME.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from litebert.arguments import checked
from litebert.errors import ConfigError, DataError, literal, printable
from litebert.extras import install_hint

FORMATS = ("png", "pdf", "svg")
PANELS = ("loss", "accuracy", "learning rate")
FIGSIZE, DPI = (8.0, 9.0), 100  # a png of 800 x 900 pixels

Curves = dict[str, dict[str, tuple[list[int], list[float]]]]  # panel -> line label -> (steps, values)


@dataclass
class Panel:
    """One axes of a figure: ``lines`` ``{label: (xs, values)}`` (``styles[label]``: matplotlib keywords for that
    line), ``hlines`` ``{label: y}`` drawn dashed (``styles`` too), ``bands`` ``{label: (xs, low, high)}`` shaded in
    the colour of the line of that label, the y-axis limits ``ylim``, the x-axis scale ``xscale`` (linear, log)."""
    title: str
    ylabel: str = ""
    xlabel: str = "step"
    lines: dict[str, tuple[Sequence[int], Sequence[float]]] = field(default_factory=dict)
    hlines: dict[str, float] = field(default_factory=dict)
    styles: dict[str, dict] = field(default_factory=dict)
    ylim: Optional[tuple[float, float]] = None
    bands: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]] = field(default_factory=dict)
    xscale: str = "linear"


def _pyplot(what: str):
    """matplotlib.pyplot (Agg), imported the first time with its config and font cache in a temporary folder
    (matplotlib reads ``MPLCONFIGDIR`` once, on import; it would write them under ~/.config and ~/.cache)."""
    temporary = None
    if "matplotlib" not in sys.modules and "MPLCONFIGDIR" not in os.environ:
        temporary = tempfile.mkdtemp(prefix="litebert-matplotlib-")
        atexit.register(shutil.rmtree, temporary, ignore_errors=True)
        os.environ["MPLCONFIGDIR"] = temporary
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(f"{what} needs matplotlib: {install_hint('plot', 'matplotlib')}") from None
    finally:
        if temporary is not None:
            os.environ.pop("MPLCONFIGDIR", None)
    return plt


def draw(panels: Sequence[Panel], out: str | os.PathLike, *, columns: int = 1, size: tuple[float, float] = FIGSIZE,
         dpi: int = DPI, share_steps: bool = False, what: str = "this figure") -> None:
    """Draw ``panels`` (``columns`` side by side, in rows) into ``out`` (the format from its extension), written
    atomically. Lines of fewer than 30 points get markers. ``what`` names the figure in the error
    when matplotlib is not installed."""
    from litebert.files import atomic_write

    plt = _pyplot(what)

    # No TeX, whatever a matplotlibrc says: text is drawn as given (`plain_text`), never compiled.
    with plt.rc_context({"text.usetex": False}):
        rows = -(-len(panels) // columns)
        fig, axes = plt.subplots(rows, columns, figsize=size, sharex=share_steps, squeeze=False)
        try:
            for ax, panel in zip(axes.flat, panels):
                _draw_panel(ax, panel)
            if share_steps:  # one step axis for the column: named once, at the bottom
                for ax in axes.flat[:-columns]:
                    ax.set_xlabel("")
            fig.tight_layout()
            atomic_write(Path(out), lambda tmp: fig.savefig(tmp, dpi=dpi, format=Path(out).suffix.lstrip(".").lower()))
        finally:
            plt.close(fig)


def _draw_panel(ax, panel: Panel) -> None:
    handles, names = [], []  # given to the legend as they are: it would drop a label that starts with "_"
    for label, (steps, values) in panel.lines.items():
        style = {"linewidth": 1, "marker": "o" if len(steps) < 30 else None, "markersize": 3,
                 **panel.styles.get(label, {})}
        names.append(plain_text(label))
        handles += ax.plot(steps, values, label=names[-1], **style)
        if label in panel.bands:
            xs, low, high = panel.bands[label]
            ax.fill_between(xs, low, high, color=handles[-1].get_color(), alpha=0.15, linewidth=0)
    for label, y in panel.hlines.items():
        names.append(plain_text(label))
        handles.append(ax.axhline(y, label=names[-1], **{"linestyle": "--", "color": "gray", "linewidth": 0.8,
                                                         **panel.styles.get(label, {})}))
    ax.set(title=plain_text(panel.title), ylabel=plain_text(panel.ylabel), xlabel=plain_text(panel.xlabel),
           xscale=panel.xscale)
    if panel.ylim is not None:
        ax.set_ylim(*panel.ylim)
    ax.grid(alpha=0.3)
    if handles:
        ax.legend(handles, names, fontsize=7)


def plain_text(text: str) -> str:
    """``text`` (a run folder's name, a label: anything a user chose) as matplotlib draws it letter for letter: control
    characters shown escaped (`litebert.errors.printable`), and every ``$`` escaped, so that no part of it is read
    as mathtext (``$x_1$``, or an odd ``$``, which matplotlib refuses with a ValueError). Matplotlib turns ``\\$``
    back into ``$`` in text without mathtext; every other character, ``_``, ``^`` and ``\\`` included, is drawn as
    it is outside mathtext."""
    return printable(str(text)).replace("$", r"\$")


def run_curves(run: str | os.PathLike, label: str) -> Curves:
    """The lines one run contributes to each panel, from its ``metrics.jsonl`` (`DataError` naming the folder when
    there is none)."""
    from litebert import folders
    from litebert.engine.metrics_log import read_metrics
    from litebert.tasks.meta import read_meta

    run = Path(run)
    if not (run / folders.METRICS_JSONL).is_file():
        raise DataError(f"{literal(run)}: no metrics.jsonl; give the folder of a `litebert pretrain` or "
                        f"`litebert finetune` run")
    train, evals = read_metrics(run, "train"), read_metrics(run, "eval")

    def line(records: list[dict], key: str) -> tuple[list[int], list[float]]:
        points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        return [s for s, _ in points], [float(v) for _, v in points]

    accuracy = {}
    if folders.output_kind(run) == "fine-tuned-model" and (run / folders.FINETUNE_META).is_file():
        metric = read_meta(run).get("metric")
        keys = [metric] if isinstance(metric, str) else []
    else:  # a pretraining run: held-out MLM accuracy, and the sentence task's where trained
        keys = [k for k in ("mlm_accuracy", "sop_accuracy", "nsp_accuracy") if any(k in r for r in evals)]
    for key in keys:
        name = key.removesuffix("_accuracy").upper() + " accuracy" if key.endswith("_accuracy") else key
        accuracy[f"{label} ({name})"] = line(evals, key)
    curves = {"loss": {label: line(train, "loss")}, "accuracy": accuracy, "learning rate": {label: line(train, "lr")}}
    return {panel: {k: v for k, v in lines.items() if v[0]} for panel, lines in curves.items()}


def labels(runs: Sequence[str | os.PathLike]) -> list[str]:
    """Each run's folder name; the path as given where two runs share a name."""
    names = [Path(r).resolve().name for r in runs]
    return [str(r) if names.count(n) > 1 else n for r, n in zip(runs, names)]


@checked
def plot_runs(runs: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike, *,
              overwrite: bool = False) -> Curves:
    """Draw the curves of the run folders ``runs`` (one folder, or a list of them) into ``out`` (.png, .pdf or .svg,
    by its extension) and return what was drawn: ``{panel: {line label: (steps, values)}}`` with the panels "loss",
    "accuracy" and "learning rate". ``overwrite``: replace an existing ``out``. Everything is read before ``out`` is
    written."""
    from litebert.folders import plan_file

    runs = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)  # a path is one run, not its characters
    out = Path(out)
    kind = out.suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise ConfigError("{out}: " + f"cannot draw a {literal(repr(out.suffix or 'file without extension'))}; give "
                          f"a file name ending in .png, .pdf or .svg", out=out)
    if not runs:
        raise ConfigError("give at least one run folder")
    plan_file(out, name="out", overwrite=overwrite, inputs={"runs": list(runs)})
    data: Curves = {panel: {} for panel in PANELS}
    styles: dict[str, dict] = {}
    for k, (run, label) in enumerate(zip(runs, labels(runs))):
        for panel, lines in run_curves(run, label).items():
            data[panel].update(lines)
            # one colour per run in every panel (a run with two accuracy lines would otherwise shift the colours of
            # the runs after it); a run's second and third metric differ by the line's dash
            for j, line in enumerate(lines):
                styles[line] = {"color": f"C{k % 10}", "linestyle": ("-", "--", ":")[j % 3]}
    titles = {"loss": ("training loss", "loss"), "accuracy": ("held-out accuracy / dev metric", "metric"),
              "learning rate": ("learning rate", "lr")}
    draw([Panel(*titles[p], lines=data[p], styles=styles) for p in PANELS], out, share_steps=True,
         what="litebert plot")
    return data


# ------------------------------------------------------------------------------------------------ the command
def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders (of litebert pretrain or finetune)")
    parser.add_argument("--out", required=True, type=Path, help="the figure: .png, .pdf or .svg")
    parser.add_argument("--overwrite", action="store_true", help="--out exists: replace it")


def run(args: argparse.Namespace) -> int:
    import sys

    plot_runs(args.runs, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
