"""`litebert plot` / `plot_runs`: the curves of real tiny runs, checked against their metrics.jsonl, and the file
checked to be the image its extension names."""

import json
import shutil
import struct
import sys

import pytest
from hypothesis import given, settings

from helpers.hostile import examples, file_names, hostile_text
from helpers.separable_task import finetune
from litebert.cli import main
from litebert.errors import ConfigError, DataError, printable

pytestmark = pytest.mark.usefixtures("one_thread")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_setup, separable_task):
    """Two pretraining runs (lr 5e-3 and 2e-3) and one fine-tuning run."""
    from litebert import TrainConfig, pretrain

    root = tmp_path_factory.mktemp("plot")
    stores = tiny_setup
    out = []
    for name, lr in (("lr-5e-3", 5e-3), ("lr-2e-3", 2e-3)):
        cfg = TrainConfig(max_steps=6, batch_size=8, micro_batch=4, lr=lr, warmup_steps=2, seq_len=64,
                          max_predictions=10, eval_every=3, eval_examples=16, seed=3, report_to="none")
        pretrain(stores["store"], root / name, model="tiny", train=cfg, eval_data=stores["eval_store"],
                 progress=False)
        out.append(root / name)
    assert main(finetune(separable_task, root / "sentiment", "--max-steps", "4", "--batch-size", "8",
                         "--eval-every", "2", "--log-every", "1", "--report-to", "none")) == 0
    return out + [root / "sentiment"]


def records(run, split):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == split]


def line(rows, key):
    return [r["step"] for r in rows], [r[key] for r in rows]


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_draws_what_metrics_jsonl_holds(runs, tmp_path, capsys):
    from litebert import plot_runs

    a, b, ft = runs
    data = plot_runs(runs, tmp_path / "curves.png")
    assert png_size(tmp_path / "curves.png") == (800, 900)
    assert set(data) == {"loss", "accuracy", "learning rate"}
    for run in (a, b):
        train, evals = records(run, "train"), records(run, "eval")
        assert data["loss"][run.name] == line(train, "loss")
        assert data["learning rate"][run.name] == line(train, "lr")
        assert data["accuracy"][f"{run.name} (MLM accuracy)"] == line(evals, "mlm_accuracy")
        assert data["accuracy"][f"{run.name} (SOP accuracy)"] == line(evals, "sop_accuracy")
        assert data["accuracy"][f"{run.name} (MLM accuracy)"][0] == [0, 3, 6]
    # the two pretraining runs differ only by their peak lr (5e-3, 2e-3): the lr curves are in that ratio
    lr_a, lr_b = data["learning rate"][a.name][1], data["learning rate"][b.name][1]
    assert lr_a == pytest.approx([2.5 * x for x in lr_b]) and max(lr_a) > 0
    # fine-tuning: the task's dev metric, as finetune.json names it
    metric = json.loads((ft / "finetune.json").read_text())["metric"]
    assert data["accuracy"][f"sentiment ({metric})"] == line(records(ft, "eval"), metric)
    assert data["loss"]["sentiment"] == line(records(ft, "train"), "loss") and len(data["loss"]["sentiment"][0]) == 4
    # the command draws the same; pdf and svg by extension
    assert main(["plot", str(a), str(ft), "--out", str(tmp_path / "two.pdf")]) == 0
    assert (tmp_path / "two.pdf").read_bytes()[:5] == b"%PDF-"
    assert main(["plot", str(a), "--out", str(tmp_path / "one.svg")]) == 0
    svg = (tmp_path / "one.svg").read_text()
    assert "<svg" in svg and "lr-5e-3" in svg and "lr-2e-3" not in svg


def test_plot_refusals_are_one_line(runs, tmp_path, capsys):
    from litebert import plot_runs

    a = runs[0]
    assert main(["plot", str(a), "--out", str(tmp_path / "curves.jpg")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "litebert plot: error: --out " + str(tmp_path / "curves.jpg") + ": cannot draw a '.jpg'; give a file name "
        "ending in .png, .pdf or .svg"]
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    assert main(["plot", str(a), str(empty), "--out", str(tmp_path / "c.png")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"litebert plot: error: {empty}: no metrics.jsonl; give the folder of a `litebert pretrain` or "
        f"`litebert finetune` run"]
    assert not (tmp_path / "c.png").exists()
    (tmp_path / "mine.png").write_bytes(b"the user's own file")
    with pytest.raises(Exception, match="exists; pass overwrite"):
        plot_runs([a], tmp_path / "mine.png")
    assert (tmp_path / "mine.png").read_bytes() == b"the user's own file"
    plot_runs([a], tmp_path / "mine.png", overwrite=True)
    assert png_size(tmp_path / "mine.png") == (800, 900)
    with pytest.raises(DataError, match="no metrics.jsonl"):
        plot_runs([tmp_path / "missing"], tmp_path / "x.svg")
    with pytest.raises(ConfigError, match="out = .*: cannot draw a 'file without extension'"):
        plot_runs([a], tmp_path / "curves")


def test_one_path_is_one_run(runs, tmp_path):
    from litebert import plot_runs

    a = runs[0]
    listed = plot_runs([a], tmp_path / "listed.svg")
    assert plot_runs(str(a), tmp_path / "str.svg") == listed  # not the folders "/", "t", "m", "p", ...
    assert plot_runs(a, tmp_path / "path.svg") == listed
    assert list(listed["loss"]) == [a.name]


def test_a_run_keeps_its_colour_in_every_panel(runs, tmp_path, monkeypatch):
    """The lines matplotlib drew: each run one colour across the three panels, no two runs the same colour. The
    first run has two accuracy lines (MLM and SOP); with matplotlib's colour cycle per axes the next run would take
    the third colour in that panel and the second elsewhere."""
    import matplotlib.figure

    drawn = []
    save = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):
        drawn.extend((ax.get_title(), line.get_label(), line.get_color()) for ax in fig.axes for line in ax.get_lines())
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    from litebert import plot_runs

    plot_runs(runs, tmp_path / "curves.png")
    names = [r.name for r in runs]
    colours = {name: {colour for _, label, colour in drawn if label == name or label.startswith(name + " (")}
               for name in names}
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(names), colours
    panels = {title for title, _, _ in drawn}
    assert len(panels) == 3 and all(any(l.startswith(n) for t, l, _ in drawn if t == p)
                                    for n in names[:2] for p in panels)


def test_without_matplotlib_the_error_names_the_package(monkeypatch):
    from litebert import plot

    for name in ("matplotlib", "matplotlib.pyplot"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: importing it raises ImportError
    with pytest.raises(ConfigError, match=r"^litebert plot needs matplotlib: pip install 'matplotlib>=3\.7'"):
        plot._pyplot("litebert plot")


# ------------------------------------------------------------------------------------------ names that mean something
@given(text=hostile_text())
def test_plain_text_is_drawn_letter_for_letter(text):
    """matplotlib's own reading of what `plain_text` gives it: no mathtext, and the text shown is the name (its
    control characters escaped)."""
    from matplotlib.text import Text

    from litebert.plot import plain_text

    assert Text(text=plain_text(text))._preprocess_math(plain_text(text)) == (printable(text), False)


@settings(max_examples=examples(4))
@given(name=file_names())
def test_plot_draws_a_run_whose_folder_name_is_mathtext(runs, tmp_path_factory, name):
    """plot-02: a run folder named like ``$x_1$`` or ``a$b`` (matplotlib's ValueError before), ``_run`` (dropped
    from the legend before): drawn, and named in the legend as it is named on disk."""
    import matplotlib.figure

    folder = tmp_path_factory.mktemp("hostile") / name
    shutil.copytree(runs[0], folder)
    legends = []
    save = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):
        legends.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        return save(fig, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", record)
        assert main(["plot", str(folder), "--out", str(folder.parent / "curves.png")]) == 0
    assert png_size(folder.parent / "curves.png") == (800, 900)
    assert [t.replace(r"\$", "$") for t in legends][:1] == [printable(name)]  # the loss panel's one line
