"""A learning-rate grid chosen on dev (`litebert.finetuning.grid`): the chosen rate is the one whose run scored best on
dev (read from each rate's own folder), ``OUT`` holds that run's model and `evaluate` reads it to the same dev scores,
grid.json lists every rate; a stopped grid resumes to the same result; bad grids are refused before anything is
written. A grid whose best lies at an edge adds rates beyond it until the best is bracketed (or the cap), one whose best
lies inside adds none; a stopped extended grid continues with its added rates."""

from __future__ import annotations

import json

import pytest

from litebert import FinetuneConfig, evaluate, finetune
from litebert.cli import main
from litebert.errors import ConfigError, DataError
from litebert.folders import read_marker

pytestmark = pytest.mark.usefixtures("one_thread")

RATES = [1e-5, 3e-3, 1e-3]  # on the fixture's task after 60 steps: 1e-5 has not learnt; the other two differ


def config(**kw) -> FinetuneConfig:
    return FinetuneConfig(**{**dict(max_steps=60, batch_size=8, eval_every=20, seed=1), **kw})


@pytest.fixture(scope="module")
def grid(separable_task, tmp_path_factory):
    model, data = separable_task
    out = tmp_path_factory.mktemp("grid") / "out"
    return out, finetune("classify", model, data, out, config=config(), lr_grid=RATES, lr_grid_extend=0,
                         progress=False, log=None)  # the rates given alone


def test_the_best_rate_on_dev_is_chosen(grid, separable_task):
    out, result = grid
    runs = {lr: json.loads((out / f"lr-{lr:g}" / "finetune.json").read_text()) for lr in RATES}
    scores = {lr: meta["dev_metrics"]["accuracy"] for lr, meta in runs.items()}
    assert len(set(scores.values())) > 1  # the rates differ on dev, so the choice means something
    best = max(RATES, key=lambda lr: scores[lr])  # the first of equals
    assert all(runs[lr]["complete"] and runs[lr]["train"]["lr"] == lr for lr in RATES)
    assert result.complete and result.lr == best and result.best_metrics == runs[best]["dev_metrics"]
    # OUT is the chosen run's model, a complete fine-tuned folder that evaluate reads
    assert (out / "model.safetensors").read_bytes() == (out / f"lr-{best:g}" / "model.safetensors").read_bytes()
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["train"]["lr"] == best and meta["complete"] is True and read_marker(out)["complete"] is True
    scored = evaluate(out, separable_task[1] / "dev.jsonl", progress=False)
    assert scored.metrics["accuracy"] == pytest.approx(scores[best])
    listed = json.loads((out / "grid.json").read_text())
    assert listed["metric"] == "accuracy" and listed["lr"] == best and listed["folder"] == f"lr-{best:g}"
    assert [(r["lr"], r["folder"], r["score"], r["best_step"]) for r in listed["runs"]] == [
        (lr, f"lr-{lr:g}", scores[lr], runs[lr]["best_step"]) for lr in RATES]
    assert result.grid == listed["runs"]


def test_a_stopped_grid_resumes_to_the_same_result(grid, separable_task, tmp_path):
    model, data = separable_task
    out = tmp_path / "out"
    part = finetune("classify", model, data, out, config=config(), lr_grid=RATES, lr_grid_extend=0, progress=False,
                    log=None, stop_after=10)  # the first rate's run stops at step 10
    assert part.interrupted and part.lr == RATES[0] and read_marker(out)["complete"] is False
    assert not (out / "grid.json").exists() and not (out / f"lr-{RATES[1]:g}").exists()
    with pytest.raises(ConfigError, match=r"lr_grid = '1e-05,0.003': the grid in .* trains the rates "
                                          r"1e-05,0.003,0.001; give the same"):
        finetune("classify", model, data, out, config=config(), lr_grid=RATES[:2], lr_grid_extend=0, resume=True)
    with pytest.raises(ConfigError, match=r"holds a learning-rate grid \(1e-05, 0.003, 0.001\); continue it with "
                                          r"the same lr_grid"):
        finetune("classify", model, data, out, config=config(lr=1e-3), resume=True)
    done = finetune("classify", model, data, out, config=config(), lr_grid=RATES, lr_grid_extend=0, progress=False,
                    log=None, resume=True)
    assert done.action == "resume" and done.complete and done.lr == grid[1].lr
    assert (out / "model.safetensors").read_bytes() == (grid[0] / "model.safetensors").read_bytes()
    assert json.loads((out / "grid.json").read_text()) == json.loads((grid[0] / "grid.json").read_text())
    again = finetune("classify", model, data, out, config=config(), lr_grid=RATES, lr_grid_extend=0, progress=False,
                     log=None, resume=True)
    assert again.action == "finished" and again.lr == done.lr


@pytest.mark.parametrize("kw, error, message", [
    (dict(lr_grid=[]), ConfigError, "lr_grid = '': give one or more learning rates"),
    (dict(lr_grid=[1e-4, 0.0]), ConfigError, "lr_grid = '0.0001,0': 0 is not a learning rate (> 0)"),
    (dict(lr_grid=[1e-4, 0.0001]), ConfigError, "lr_grid = '0.0001,0.0001': 0.0001 is given twice"),
    (dict(lr_grid=[1e-4, 3e-4], config=FinetuneConfig(lr=1e-4)), ConfigError,
     "lr_grid = '0.0001,0.0003' and FinetuneConfig.lr = 0.0001 both set the learning rate"),
    (dict(lr_grid=[1e-4, 3e-4], train_only=True), DataError,
     "lr_grid = '0.0001,0.0003': a learning-rate grid chooses its rate on dev data"),
])
def test_bad_grids_are_refused_before_writing(separable_task, tmp_path, kw, error, message):
    model, data = separable_task
    if kw.pop("train_only", False):
        data = data / "train.jsonl"
    with pytest.raises(error) as e:
        finetune("classify", model, data, tmp_path / "out", **kw)
    assert str(e.value).startswith(message), str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_single_run_is_not_continued_as_a_grid(separable_task, tmp_path):
    model, data = separable_task
    out = tmp_path / "out"
    assert finetune("classify", model, data, out, config=config(max_steps=4), progress=False, log=None,
                    stop_after=2).interrupted
    with pytest.raises(ConfigError, match="holds a single fine-tuning run, not a learning-rate grid"):
        finetune("classify", model, data, out, config=config(max_steps=4), lr_grid=[1e-4, 3e-4], resume=True)


def test_cli_lr_list_is_a_grid(separable_task, tmp_path, capsys):
    model, data = separable_task
    base = ["finetune", "classify", "--model", str(model), "--data", str(data), "--max-steps", "2",
            "--batch-size", "8", "--threads", "1", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "g"), "--lr", "1e-4,3e-4", "--lr-grid-extend", "0"]) == 0
    assert sorted(p.name for p in (tmp_path / "g").glob("lr-*")) == ["lr-0.0001", "lr-0.0003"]
    assert json.loads((tmp_path / "g" / "grid.json").read_text())["lr"] in (1e-4, 3e-4)
    assert main([*base, "--out", str(tmp_path / "x"), "--lr", "1e-4,3e-4", "--lr-grid-extend", "1"]) == 0
    listed = json.loads((tmp_path / "x" / "grid.json").read_text())  # an edge's best adds a rate, the cap one
    assert len(listed["added"]) == 1 and len(list((tmp_path / "x").glob("lr-*"))) == 3
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "h"), "--lr", "1e-4,1e-4"]) == 2
    assert capsys.readouterr().err.strip() == ("litebert finetune: error: --lr 0.0001,0.0001: 0.0001 is given twice")
    for bad in ("1e-4,x", "1e-4,", ",1e-4", "1e-4,,3e-4"):  # a part that is not a number, an empty one
        with pytest.raises(SystemExit) as e:  # argparse's usage error
            main([*base, "--out", str(tmp_path / "h"), "--lr", bad])
        assert e.value.code == 2 and f"argument --lr: invalid value '{bad}'" in capsys.readouterr().err
    assert not (tmp_path / "h").exists()
    assert main([*base, "--out", str(tmp_path / "one"), "--lr", "3e-4"]) == 0  # one rate: one run, as before
    assert json.loads((tmp_path / "one" / "finetune.json").read_text())["train"]["lr"] == 3e-4
    assert not list((tmp_path / "one").glob("lr-*")) and not (tmp_path / "one" / "grid.json").exists()


# ------------------------------------------------------------------------------------- a grid that brackets its choice
@pytest.mark.parametrize("best, rates, ratio, expected", [
    (1e-3, [1e-5, 1e-4, 1e-3], 10, 1e-2),  # the highest: one step up
    (1e-5, [1e-5, 3e-5, 1e-4], 3, 3.33e-6),  # the lowest: one step down, by the ratio there (3 figures)
    (3e-5, [1e-5, 3e-5, 1e-4], None, None),  # inside: bracketed
    (1e-4, [1e-4], None, None),  # one rate: no ratio
])
def test_the_rate_beyond_an_edge(best, rates, ratio, expected):
    from litebert.finetuning.grid import beyond

    got = beyond(rates, {"lr": best, "score": 0.5})
    if expected is None:
        assert got is None
    else:
        assert got["lr"] == pytest.approx(expected) and f"{best:g}" in got["why"]
    assert beyond([1e-5, 1e-4], {"lr": 1e-4, "score": float("nan")}) is None  # no finite score: nothing to chase


def peaked(lr: float, at: float = 1e-4) -> float:
    """A dev score that peaks at ``at``, falling by 0.1 per decade either side."""
    import math

    return 0.9 - 0.1 * abs(math.log10(lr) - math.log10(at))


@pytest.fixture
def scored_runs(grid, monkeypatch):
    """Each rate's run made in no time: a copy of the module grid's first finished run, its dev accuracy set to
    `peaked` of its rate (the chosen model files are then real ones)."""
    import shutil

    import litebert.finetuning.grid as G

    source = grid[0] / f"lr-{RATES[0]:g}"
    trained = []

    def run_one(run, opening, publish, dist):
        out, lr = opening.folder.out, run.cfg.lr
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(source, out)
        meta = json.loads((out / "finetune.json").read_text())
        meta["train"]["lr"], meta["dev_metrics"] = lr, {**meta["dev_metrics"], "accuracy": peaked(lr)}
        (out / "finetune.json").write_text(json.dumps(meta))
        trained.append(lr)
        return G.FinetuneResult(out=out, task="classify", action="new", steps=1, complete=True, lr=lr)

    monkeypatch.setattr(G, "run_one", run_one)
    return trained


@pytest.mark.parametrize("given, added", [
    ([1e-6, 1e-5], [1e-4, 1e-3]),  # the best climbs to the peak, then one more shows it falling: bracketed
    ([1e-2, 1e-3], [1e-4, 1e-5]),  # from above: down to the peak and one beyond
    ([1e-5, 1e-4, 1e-3], []),  # the peak inside: nothing added
    ([1e-9, 1e-8], [1e-7, 1e-6, 1e-5]),  # still at an edge after the cap (3): it stops there, and says so
])
def test_a_grid_extends_until_its_best_is_bracketed(separable_task, tmp_path, scored_runs, given, added):
    model, data = separable_task
    out = tmp_path / "out"
    done = finetune("classify", model, data, out, config=config(), lr_grid=given, progress=False, log=None)
    assert scored_runs == pytest.approx(given + added)
    listed = json.loads((out / "grid.json").read_text())
    assert listed["given"] == given and [a["lr"] for a in listed["added"]] == pytest.approx(added)
    assert all("was the" in a["why"] for a in listed["added"])
    tried = given + added
    assert done.lr == pytest.approx(max(tried, key=peaked)) and listed["lr"] == done.lr
    assert [r["lr"] for r in done.grid] == pytest.approx(tried)
    assert [bool(r.get("added")) for r in done.grid] == [False] * len(given) + [True] * len(added)
    if added and len(added) < 3:  # bracketed: the chosen rate has a tried rate on each side
        assert min(tried) < done.lr < max(tried)


def test_the_cap_is_the_callers(separable_task, tmp_path, scored_runs):
    model, data = separable_task
    done = finetune("classify", model, data, tmp_path / "out", config=config(), lr_grid=[1e-6, 1e-5],
                    lr_grid_extend=1, progress=False, log=None)
    assert scored_runs == pytest.approx([1e-6, 1e-5, 1e-4]) and done.lr == pytest.approx(1e-4)
    with pytest.raises(ConfigError, match=r"lr_grid_extend = -1: must be >= 0"):
        finetune("classify", model, data, tmp_path / "x", config=config(), lr_grid=[1e-6, 1e-5], lr_grid_extend=-1)
    assert not (tmp_path / "x").exists()


def test_a_stopped_extended_grid_continues_with_its_added_rates(separable_task, tmp_path, scored_runs, monkeypatch):
    """A grid stopped while training an added rate: its marker keeps the rates added so far, and resume (with the
    rates first given) trains on from there to the same choice."""
    import litebert.finetuning.grid as G

    model, data = separable_task
    out = tmp_path / "out"
    real = G.run_one

    def stop_at_the_second_added(run, opening, publish, dist):
        if run.cfg.lr == pytest.approx(1e-3):
            return G.FinetuneResult(out=opening.folder.out, task="classify", action="new", steps=1, complete=False,
                                    interrupted=True, lr=run.cfg.lr)
        return real(run, opening, publish, dist)

    monkeypatch.setattr(G, "run_one", stop_at_the_second_added)
    part = finetune("classify", model, data, out, config=config(), lr_grid=[1e-6, 1e-5], progress=False, log=None)
    assert part.interrupted and [a["lr"] for a in read_marker(out)["added"]] == pytest.approx([1e-4, 1e-3])
    monkeypatch.setattr(G, "run_one", real)
    done = finetune("classify", model, data, out, config=config(), lr_grid=[1e-6, 1e-5], progress=False, log=None,
                    resume=True)
    assert done.complete and done.lr == pytest.approx(1e-4)
    assert [a["lr"] for a in json.loads((out / "grid.json").read_text())["added"]] == pytest.approx([1e-4, 1e-3])
