"""A learning-rate grid chosen on dev (`litebert.finetuning.grid`): the chosen rate is the one whose run scored best on
dev
(read from each rate's own folder), ``OUT`` holds that run's model and `evaluate` reads it to the same dev scores,
grid.json lists every rate; a stopped grid resumes to the same result; bad grids are refused before anything is
written."""

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
    return out, finetune("classify", model, data, out, config=config(), lr_grid=RATES, progress=False, log=None)


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
    part = finetune("classify", model, data, out, config=config(), lr_grid=RATES, progress=False, log=None,
                    stop_after=10)  # the first rate's run stops at step 10
    assert part.interrupted and part.lr == RATES[0] and read_marker(out)["complete"] is False
    assert not (out / "grid.json").exists() and not (out / f"lr-{RATES[1]:g}").exists()
    with pytest.raises(ConfigError, match=r"lr_grid = '1e-05,0.003': the grid in .* trains the rates "
                                          r"1e-05,0.003,0.001; give the same"):
        finetune("classify", model, data, out, config=config(), lr_grid=RATES[:2], resume=True)
    with pytest.raises(ConfigError, match=r"holds a learning-rate grid \(1e-05, 0.003, 0.001\); continue it with "
                                          r"the same lr_grid"):
        finetune("classify", model, data, out, config=config(lr=1e-3), resume=True)
    done = finetune("classify", model, data, out, config=config(), lr_grid=RATES, progress=False, log=None,
                    resume=True)
    assert done.action == "resume" and done.complete and done.lr == grid[1].lr
    assert (out / "model.safetensors").read_bytes() == (grid[0] / "model.safetensors").read_bytes()
    assert json.loads((out / "grid.json").read_text()) == json.loads((grid[0] / "grid.json").read_text())
    again = finetune("classify", model, data, out, config=config(), lr_grid=RATES, progress=False, log=None,
                     resume=True)
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
    assert main([*base, "--out", str(tmp_path / "g"), "--lr", "1e-4,3e-4"]) == 0
    assert sorted(p.name for p in (tmp_path / "g").glob("lr-*")) == ["lr-0.0001", "lr-0.0003"]
    assert json.loads((tmp_path / "g" / "grid.json").read_text())["lr"] in (1e-4, 3e-4)
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "h"), "--lr", "1e-4,1e-4"]) == 2
    assert capsys.readouterr().err.strip() == ("litebert finetune: error: --lr 0.0001,0.0001: 0.0001 is given twice")
    with pytest.raises(SystemExit) as e:  # argparse's usage error
        main([*base, "--out", str(tmp_path / "h"), "--lr", "1e-4,x"])
    assert e.value.code == 2 and "argument --lr: invalid value '1e-4,x'" in capsys.readouterr().err
    assert not (tmp_path / "h").exists()
    assert main([*base, "--out", str(tmp_path / "one"), "--lr", "3e-4"]) == 0  # one rate: one run, as before
    assert json.loads((tmp_path / "one" / "finetune.json").read_text())["train"]["lr"] == 3e-4
    assert not list((tmp_path / "one").glob("lr-*")) and not (tmp_path / "one" / "grid.json").exists()
