"""A search over several fine-tuning settings with Optuna (`litebert.finetuning.search`): every trial is a run of its
own whose settings are the ones search.json lists, the best by dev is copied into ``OUT`` (read back by `evaluate`),
the same seed draws the same trials, a stopped search resumes without training its finished trials again and ends as
an uninterrupted one, a pruner stops a trial at its evaluation (and its other seeds never run), seeds are replicated
into a mean ± sd, and bad spaces, or a missing Optuna, are refused in one line before anything is written."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import sys

import pytest

from litebert import Callback, FinetuneConfig, evaluate, finetune
from litebert.cli import main
from litebert.errors import ConfigError, DataError
from litebert.folders import FINETUNED, foreign, read_marker

optuna = pytest.importorskip("optuna")  # the search extra (in dev): the test needs it, litebert's core does not

pytestmark = pytest.mark.usefixtures("one_thread")

SPACE = "lr=1e-5:3e-3:log,batch_size=8|16"


def config(**kw) -> FinetuneConfig:
    return FinetuneConfig(**{**dict(max_steps=40, eval_every=10, seed=1), **kw})


def search(task, out, space=SPACE, trials=4, **kw):
    model, data = task
    kw = {"config": config(), "search_pruner": "none", "progress": False, "log": None, **kw}
    return finetune("classify", model, data, out, search=space, trials=trials, **kw)


def listed(out) -> dict:
    return json.loads((out / "search.json").read_text())


@pytest.fixture(scope="module")
def searched(separable_task, tmp_path_factory):
    out = tmp_path_factory.mktemp("search") / "out"
    return out, search(separable_task, out)


def test_every_trial_is_listed_and_the_best_is_in_out(searched, separable_task):
    out, result = searched
    record = listed(out)
    assert record["metric"] == "accuracy" and record["space"] == "lr=1e-05:0.003:log,batch_size=8|16"
    assert [t["number"] for t in record["trials"]] == [0, 1, 2, 3] and "running" not in record
    for t in record["trials"]:  # each trial's params are what its run trained with, its score that run's best dev
        meta = json.loads((out / f"trial-{t['number']}" / "finetune.json").read_text())
        assert t["state"] == "complete" and set(t["params"]) == {"lr", "batch_size"}
        assert meta["train"]["lr"] == t["params"]["lr"] and meta["train"]["batch_size"] == t["params"]["batch_size"]
        assert 1e-5 <= t["params"]["lr"] <= 3e-3 and t["params"]["batch_size"] in (8, 16)
        assert t["score"] == meta["dev_metrics"]["accuracy"] and t["runs"][0]["best_step"] == meta["best_step"]
        assert [int(s) for s in t["evaluations"]] == [10, 20, 30, 40]
    scores = [t["score"] for t in record["trials"]]
    assert len(set(scores)) > 1  # the trials differ on dev, so the choice means something
    best = max(record["trials"], key=lambda t: t["score"])  # the first of equals
    assert record["best"] == {"number": best["number"], "params": best["params"], "score": best["score"],
                              "sd": None, "folder": f"trial-{best['number']}"}
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["train"]["lr"] == best["params"]["lr"] and meta["complete"] is True
    chosen = out / record["best"]["folder"]
    assert (out / "model.safetensors").read_bytes() == (chosen / "model.safetensors").read_bytes()
    assert read_marker(out)["complete"] is True and read_marker(out)["search"] == record["space"]
    assert result.complete and result.lr == best["params"]["lr"] and result.search == record
    assert evaluate(out, separable_task[1] / "dev.jsonl", progress=False).metrics["accuracy"] == \
        pytest.approx(best["score"])
    assert foreign(out, FINETUNED) == []  # litebert knows every file of a search as its own (overwrite may clear it)


class _Interrupt(Callback):
    """SIGTERM to this process as the ``at``-th run begins (the loop saves a checkpoint and leaves); counts runs."""

    def __init__(self, at=None):
        self.at, self.begun = at, 0

    def on_train_begin(self, step):
        self.begun += 1
        if self.begun == self.at:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_stopped_search_resumes_to_the_same_trials(searched, separable_task, tmp_path):
    out = tmp_path / "out"
    part = search(separable_task, out, callbacks=[_Interrupt(at=3)])  # trial 2's run stops at its first read
    assert part.interrupted and read_marker(out)["complete"] is False
    record = listed(out)
    assert [t["number"] for t in record["trials"]] == [0, 1] and record["running"]["number"] == 2
    assert part.search["running"]["folder"] == "trial-2" and (out / "trial-2" / "checkpoints").is_dir()
    with pytest.raises(ConfigError, match=r"the search in .* draws from 'lr=1e-05:0.003:log,batch_size=8\|16'"):
        search(separable_task, out, space="lr=1e-5:3e-3:log", resume=True)
    with pytest.raises(ConfigError, match="holds a search; continue it with the same search"):
        finetune("classify", *separable_task, out, config=config(), resume=True)
    count = _Interrupt()
    done = search(separable_task, out, resume=True, callbacks=[count])
    assert done.complete and count.begun == 2  # trial 2 resumed, trial 3 run; trials 0 and 1 not trained again
    ours, whole = listed(out), listed(searched[0])
    assert [(t["params"], t["score"]) for t in ours["trials"]] == [(t["params"], t["score"]) for t in whole["trials"]]
    assert ours["best"] == whole["best"]
    again = search(separable_task, out, resume=True)
    assert again.action == "finished" and again.lr == done.lr
    more = _Interrupt()
    extended = search(separable_task, out, trials=5, resume=True, callbacks=[more])  # a finished search, 1 more trial
    assert extended.complete and more.begun == 1 and [t["number"] for t in listed(out)["trials"]] == [0, 1, 2, 3, 4]
    assert listed(out)["trials"][:4] == ours["trials"] and listed(out)["n_trials"] == 5


def test_the_seed_decides_the_trials(searched, separable_task, tmp_path):
    other = search(separable_task, tmp_path / "other", trials=1, config=config(seed=2, max_steps=2))
    same = search(separable_task, tmp_path / "same", trials=1, config=config(max_steps=2))
    first = listed(searched[0])["trials"][0]["params"]
    assert same.search["trials"][0]["params"] == first  # trial 0 is drawn before any score: the seed alone decides
    assert other.search["trials"][0]["params"] != first


class _PruneTrialOne(optuna.pruners.BasePruner):
    """Prunes trial 1 at its first report, nothing else: a pruner whose decision a test knows."""

    def prune(self, study, trial):
        return trial.number == 1


def test_pruning_stops_a_trial_and_seeds_are_replicated(separable_task, tmp_path):
    out = tmp_path / "out"
    result = search(separable_task, out, space="lr=1e-3|3e-3,seed=0|1", trials=None, search_pruner=_PruneTrialOne())
    record = listed(out)
    assert record["sampler"] == "grid" and len(record["trials"]) == 2  # a list-only space: each configuration once
    kept, pruned = record["trials"]
    assert pruned["state"] == "pruned" and pruned["pruned_at"] == 10 and list(pruned["evaluations"]) == ["10"]
    assert [r["folder"] for r in pruned["runs"]] == ["trial-1-seed-0"] and not (out / "trial-1-seed-1").exists()
    assert json.loads((out / "trial-1-seed-0" / "finetune.json").read_text())["best_step"] == 10
    assert kept["state"] == "complete" and [r["seed"] for r in kept["runs"]] in ([0, 1], [1, 0])
    scores = [r["score"] for r in kept["runs"]]
    assert kept["score"] == pytest.approx(statistics.fmean(scores)) and kept["sd"] == pytest.approx(
        statistics.stdev(scores))
    for r in kept["runs"]:  # each seed's run trained with its seed and the trial's settings
        train = json.loads((out / r["folder"] / "finetune.json").read_text())["train"]
        assert train["seed"] == r["seed"] and train["lr"] == kept["params"]["lr"]
    assert record["best"]["number"] == kept["number"] and record["best"]["sd"] == kept["sd"]  # never the pruned one
    assert record["best"]["folder"] == kept["runs"][0]["folder"] and kept["runs"][0]["score"] == max(scores)
    assert result.search["best"] == record["best"]


@pytest.mark.parametrize("kw, message", [
    (dict(space=""), "search = '': give one or more settings to search"),
    (dict(space="lr"), "search = 'lr': 'lr': expected NAME=VALUES"),
    (dict(space="lr=1e-4,foo=1"), "search = 'lr=1e-4,foo=1': 'foo=1': foo is not a setting a search varies; it "
                                  "varies lr, batch_size"),
    (dict(space="lr=1e-5:x"), "search = 'lr=1e-5:x': 'lr=1e-5:x': 'x' is not a number"),
    (dict(space="lr=1e-3:1e-5"), "search = 'lr=1e-3:1e-5': 'lr=1e-3:1e-5': the range's low end 0.001 is not below"),
    (dict(space="lr=0:1e-3:log"), "search = 'lr=0:1e-3:log': 'lr=0:1e-3:log': a log range needs a low end > 0"),
    (dict(space="lr=1e-5:1e-3:lin"), "search = 'lr=1e-5:1e-3:lin': 'lr=1e-5:1e-3:lin': a range is LOW:HIGH"),
    (dict(space="seed=0:3"), "search = 'seed=0:3': 'seed=0:3': list the seeds (seed=0|1|2)"),
    (dict(space="batch_size=8|8"), "search = 'batch_size=8|8': 'batch_size=8|8': 8 is given twice"),
    (dict(space="batch_size=8.5|16"), "search = 'batch_size=8.5|16': 'batch_size=8.5|16': '8.5' is not a whole"),
    (dict(space="lr=1e-4,lr=1e-3"), "search = 'lr=1e-4,lr=1e-3': 'lr=1e-3': lr is given twice"),
    (dict(space="lr=-1|1e-3"), "search = 'lr=-1|0.001': 'lr=-1|0.001': FinetuneConfig.lr = -1.0"),
    (dict(space="warmup_proportion=0:0.2", config=config(warmup_steps=2)),
     "search = 'warmup_proportion=0:0.2': 'warmup_proportion=0:0.2': warmup_steps and warmup_proportion both"),
    (dict(space="lr=1e-4|1e-3", config=config(lr=1e-4)),
     "search = 'lr=0.0001|0.001' searches lr, which FinetuneConfig.lr = 0.0001 sets too"),
    (dict(space="epochs=1:3"), "search = 'epochs=1:3' searches epochs, but FinetuneConfig.max_steps = 40 decides "
                               "the steps"),
    (dict(space="epochs=1|2,max_steps=10|20", config=config(max_steps=None)),
     "search = 'epochs=1|2,max_steps=10|20' searches both epochs and max_steps, which decide the same thing"),
    (dict(trials=None), "trials = None: a space with a range needs a number of trials"),
    (dict(space="lr=1e-4|1e-3", trials=3), "trials = 3: the space lr=0.0001|0.001 holds 2 configuration(s)"),
    (dict(trials=0), "trials = 0: must be >= 1"),
    (dict(lr_grid=[1e-4, 1e-3]), "lr_grid = '0.0001,0.001' and search = "),
    (dict(search_pruner="hyperband"), "search_pruner = 'hyperband': expected median or none"),
])
def test_bad_searches_are_refused_in_one_line_before_writing(separable_task, tmp_path, kw, message):
    with pytest.raises(ConfigError) as e:
        search(separable_task, tmp_path / "out", **kw)
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_search_needs_dev_data(separable_task, tmp_path):
    model, data = separable_task
    with pytest.raises(DataError, match=re.escape("search = 'lr=0.0001|0.001': a search chooses on dev data")):
        search((model, data / "train.jsonl"), tmp_path / "out", space="lr=1e-4|1e-3", trials=None)
    assert not (tmp_path / "out").exists()


def test_without_optuna_the_hint_says_how_to_install_it(separable_task, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    with pytest.raises(ConfigError) as e:
        search(separable_task, tmp_path / "out")
    assert str(e.value).startswith("search needs Optuna, which is not installed: pip install 'optuna>=4'")
    assert "\n" not in str(e.value) and not (tmp_path / "out").exists()


def test_cli_search(separable_task, tmp_path, capsys):
    model, data = separable_task
    base = ["finetune", "classify", "--model", str(model), "--data", str(data), "--max-steps", "2",
            "--batch-size", "8", "--threads", "1", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "s"), "--search", "lr=1e-4|3e-4,seed=0|1", "--pruner", "none"]) == 0
    record = listed(tmp_path / "s")
    assert len(record["trials"]) == 2 and sorted(p.name for p in (tmp_path / "s").glob("trial-*")) == [
        "trial-0-seed-0", "trial-0-seed-1", "trial-1-seed-0", "trial-1-seed-1"]
    assert "best trial" in capsys.readouterr().out
    assert main([*base, "--out", str(tmp_path / "x"), "--search", "lr=1e-4:x"]) == 2
    assert capsys.readouterr().err.strip() == ("litebert finetune: error: --search lr=1e-4:x: 'lr=1e-4:x': 'x' is "
                                               "not a number")
    assert main([*base, "--out", str(tmp_path / "x"), "--search", "lr=1e-4:1e-3"]) == 2
    assert capsys.readouterr().err.strip() == ("litebert finetune: error: --trials: a space with a range needs a "
                                               "number of trials")
    assert main([*base, "--out", str(tmp_path / "x"), "--lr", "1e-4", "--search", "lr=1e-4|1e-3"]) == 2
    assert "searches lr, which --lr 0.0001 sets too" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "x"), "--trials", "3"]) == 2
    assert "--trials 3 is the number of a search's trials: give --search too" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
