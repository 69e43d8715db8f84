"""The label-efficiency experiment (`litebert.experiments.label_efficiency`) and task-adaptive pretraining: subsets
against the task's own reader, statistics against hand values, a whole tiny run on the separable task (the bag of
words separates it; every arm sees the same subset; a re-run trains nothing; other settings are refused)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.battery import cli
from helpers.separable_task import write_separable
from litebert.errors import ConfigError, DataError
from litebert.experiments import label_efficiency as le
from litebert.experiments.label_report import _stats
from litebert.experiments.tapt import SNIPPETS_PER_DOCUMENT, task_texts
from litebert.tasks.presets import PRESETS


@given(total=st.integers(2, 500), data=st.data())
def test_subset_indices_are_a_seeded_sample_without_replacement(total, data):
    n = data.draw(st.integers(1, total - 1))
    seed = data.draw(st.integers(0, 2**31))
    idx = le.subset_indices(total, n, seed)
    assert len(idx) == n == len(set(idx.tolist()))
    assert list(idx) == sorted(idx) and 0 <= idx.min() and idx.max() < total
    assert np.array_equal(idx, le.subset_indices(total, n, seed))


def test_subsets_of_different_seeds_differ_and_cover_the_split():
    seen = [set(le.subset_indices(1000, 100, seed).tolist()) for seed in range(20)]
    assert len({frozenset(s) for s in seen}) == 20
    counts = np.bincount([i for s in seen for i in s], minlength=1000)
    assert counts.sum() == 2000 and (counts > 0).mean() > 0.8  # 1 - (0.9)^20 = 0.88 expected


@pytest.mark.parametrize("name,header", [("train.jsonl", False), ("train.tsv", True)])
def test_a_subset_reads_back_as_the_chosen_examples(tmp_path, name, header):
    kind = PRESETS["classify" if name.endswith("jsonl") else "sentiment"].kind
    src = tmp_path / name
    if header:
        rows = [f"snippet number {i} is {'good' if i % 2 else 'bad'}\t{i % 2}" for i in range(30)]
        src.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    else:
        write_separable(src, 30, 3)
    examples = kind.read(src)
    idx = le.subset_indices(len(examples), 7, 5)
    out = le.write_subset(src, examples, idx, tmp_path / "sub" / name)
    again = kind.read(out)
    assert [(e.text_a, e.label) for e in again] == [(examples[i].text_a, examples[i].label) for i in idx]


def test_a_file_whose_examples_span_lines_is_refused(tmp_path):
    src = tmp_path / "train.csv"
    src.write_text('text,label\n"one\ntwo",pos\nthree,neg\n')
    kind = PRESETS["classify"].kind
    with pytest.raises(DataError, match="one example per line"):
        le.write_subset(src, kind.read(src), np.array([0]), tmp_path / "sub.csv")


def test_statistics_are_the_mean_and_sample_standard_deviation():
    s = _stats([0.70, 0.74, 0.78])
    assert s["mean"] == pytest.approx(0.74) and s["sd"] == pytest.approx(0.04)
    assert _stats([0.5])["sd"] is None


def test_tapt_texts_hold_every_training_text_once_in_documents(tmp_path):
    class E:
        def __init__(self, a, b=None):
            self.text_a, self.text_b = a, b

    examples = [E(f"text {i}", f"pair {i}" if i % 3 == 0 else None) for i in range(21)]
    task_texts(examples, tmp_path / "t.txt", seed=1)
    docs = (tmp_path / "t.txt").read_text().strip().split("\n\n")
    lines = [line for d in docs for line in d.split("\n")]
    assert sorted(lines) == sorted([e.text_a for e in examples] + [e.text_b for e in examples if e.text_b])
    assert all(len(d.split("\n")) >= SNIPPETS_PER_DOCUMENT for d in docs[:-1])


@pytest.fixture(scope="module")
def task_folder(separable_task, tmp_path_factory):
    model, data = separable_task
    folder = tmp_path_factory.mktemp("le") / "data"
    shutil.copytree(data, folder)
    write_separable(folder / "test.jsonl", 40, 2)
    return model, folder


SMALL = dict(task="classify", sizes=(16, None), seeds=2, full_seeds=1, lrs=(2e-3,), control_lrs=(2e-3,),
             min_steps=4, evaluations=1, batch_size=8, seq_len=32, tapt_steps=2, tapt_batch_size=4)


def test_a_tiny_experiment_end_to_end(task_folder, tmp_path):
    model, data = task_folder
    out = tmp_path / "le"
    summary = le.label_efficiency(model, out, data=data, settings=le.LabelSettings(**SMALL), progress=False,
                                  log=None)
    table = summary["table"]
    assert list(table) == ["pretrained", "tapt", "control", "bag_of_words"]
    assert table["bag_of_words"]["all"]["test"]["mean"] >= 0.9  # the task is separable by its sentiment words
    for arm in table:
        assert table[arm]["16"]["test"]["seeds"] == 2 and table[arm]["all"]["test"]["seeds"] == 1
        assert table[arm]["16"]["n"] == 16 and table[arm]["all"]["n"] == 96
    # every arm of a cell trains on the same subset file; the seeds' subsets differ
    for seed in (0, 1):
        used = {json.loads((out / "runs" / arm / f"n16-seed{seed}" / "finetune.json").read_text())["train"]["data"]
                for arm in ("pretrained", "tapt", "control")}
        assert used == {str(out / "subsets" / f"n16-seed{seed}.jsonl")}
    assert (out / "subsets" / "n16-seed0.jsonl").read_text() != (out / "subsets" / "n16-seed1.jsonl").read_text()
    assert summary["tapt"]["steps"] == 2 and summary["tapt"]["minutes"] >= 0
    assert "| 16, 2 seed(s) |" in (out / "results.md").read_text()
    assert (out / "label-efficiency.png").stat().st_size > 1000
    # a re-run reuses every finished cell: nothing is trained again
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*.json")}
    le.label_efficiency(model, out, data=data, settings=le.LabelSettings(**SMALL), progress=False, log=None)
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*.json")} == before
    with pytest.raises(ConfigError, match="other settings"):
        le.label_efficiency(model, out, data=data, settings=le.LabelSettings(**{**SMALL, "seeds": 3}),
                            progress=False, log=None)


def test_refusals_come_before_the_folder(task_folder, tmp_path, capsys):
    model, data = task_folder
    out = tmp_path / "le"
    with pytest.raises(ConfigError, match="not a subset of the 96"):
        le.label_efficiency(model, out, data=data, settings=le.LabelSettings(**{**SMALL, "sizes": (96,)}), log=None)
    with pytest.raises(ConfigError, match="sentence-classification"):
        le.label_efficiency(model, out, data=data, settings=le.LabelSettings(**{**SMALL, "task": "squad1"}), log=None)
    with pytest.raises(DataError, match="no such folder"):
        le.label_efficiency(model, out, data=data.parent / "missing", settings=le.LabelSettings(**SMALL), log=None)
    no_test = tmp_path / "no-test"
    shutil.copytree(data, no_test, ignore=shutil.ignore_patterns("test*"))
    with pytest.raises(DataError, match="no test file"):
        le.label_efficiency(model, out, data=no_test, settings=le.LabelSettings(**SMALL), log=None)
    assert not out.exists()
    for argv, says in [(["--model", str(model), "--steps", "3"], "pretrains nothing"),
                       (["--sizes", "10,", "--model", str(model)], "an empty item"),
                       (["--sizes", "10,al", "--model", str(model)], "neither a whole number"),
                       ([], "--model")]:
        code, err = cli(capsys, ["experiment", "label-efficiency", "--out", out, "--sentiment-data", data, *argv])
        assert code == 2 and "Traceback" not in err and says in err.strip().splitlines()[-1], err
    assert not out.exists()


@pytest.mark.parametrize("bad", [dict(sizes=(0,)), dict(seeds=0), dict(lrs=()), dict(control_lrs=(2.0,)),
                                 dict(epochs=float("nan")), dict(tapt_steps=-1), dict(sizes=(True,))])
def test_bad_settings_name_the_field(bad):
    with pytest.raises(ConfigError, match=next(iter(bad))):
        le.LabelSettings(**bad)


@given(field=st.sampled_from(["steps", "lr", "batch_size", "seq_len", "warmup_proportion", "seed"]),
       value=st.sampled_from([None, "3", float("nan"), -1, 0.5, True]))
def test_bad_tapt_settings_name_their_flag(field, value):
    from litebert.experiments.tapt import TaptSettings

    good = {"steps": 3, "lr": 1e-3, "batch_size": 4, "seq_len": 32, "warmup_proportion": 0.1, "seed": 0}
    valid = {"lr": value == 0.5, "warmup_proportion": value == 0.5}.get(field, False)
    if valid:
        assert TaptSettings(**{**good, field: value}).__dict__[field] == value
        return
    with pytest.raises(ConfigError) as e:
        TaptSettings(**{**good, field: value})
    assert str(e.value).startswith(f"tapt_{field}") and "\n" not in str(e.value)


def test_changed_settings_lists_each_difference(tmp_path):
    from litebert.files import write_json

    s = le.LabelSettings(**SMALL)
    assert le.changed_settings(tmp_path, s) == []  # no experiment.json: nothing recorded
    write_json(tmp_path / "experiment.json", {"settings": s.to_json()})
    assert le.changed_settings(tmp_path, s) == []
    other = le.LabelSettings(**{**SMALL, "seeds": SMALL.get("seeds", 1) + 1, "lr_grid_extend": 0})
    changed = le.changed_settings(tmp_path, other)
    assert [k for k, _, _ in changed] == sorted(k for k in s.to_json() if s.to_json()[k] != other.to_json()[k])
    assert ("seeds", s.to_json()["seeds"], other.to_json()["seeds"]) in changed


@pytest.mark.slow
def test_more_labels_help_on_the_real_task(separable_task, tmp_path):
    """The curve's shape on the bundled sentiment task (the demo's data), three seeds a size: the bag of words, whose
    fit has no randomness but the subset, gains with 20x the labels far beyond its spread over seeds (measured: ~60%
    at 100 snippets, ~72% at 2,000), and every arm's table row holds its three seeds. A few minutes on 2 cores."""
    from helpers import REPO

    model, _ = separable_task
    s = le.LabelSettings(sizes=(100, 2000), seeds=3, lrs=(1e-3,), lr_grid_extend=0, min_steps=20, epochs=0.5,
                         evaluations=1, batch_size=32, seq_len=64, control=False)
    summary = le.label_efficiency(model, tmp_path / "le", data=REPO / "data" / "finetune" / "sentiment", settings=s,
                                  progress=False, log=None)
    bow = summary["table"]["bag_of_words"]
    small, large = bow["100"]["test"], bow["2000"]["test"]
    assert large["mean"] - small["mean"] > 0.05 and large["mean"] - small["mean"] > 2 * max(small["sd"], large["sd"])
    assert all(summary["table"]["pretrained"][n]["test"]["seeds"] == 3 for n in ("100", "2000"))


def test_tapt_runs_quietly_and_is_reused(task_folder, tmp_path, capsys):
    """`adapt` with no log (the demo's call) prints nothing of its own, a second call reuses the finished run, and a
    call from another model or with other settings is refused, not answered with the first model's adaptation."""
    import shutil

    from litebert.experiments.tapt import TaptSettings, adapt

    model, data = task_folder
    examples = PRESETS["classify"].kind.read(data / "train.jsonl")
    first = adapt(model, model, examples, tmp_path / "tapt", TaptSettings(2, batch_size=4), progress=False, log=None)
    assert first["steps"] == 2 and (tmp_path / "tapt" / "run" / "model" / "config.json").is_file()
    assert "task-adaptive" not in capsys.readouterr().out
    again = adapt(model, model, examples, tmp_path / "tapt", TaptSettings(2, batch_size=4), progress=False, log=None)
    assert again["minutes"] == first["minutes"]  # read back from tapt.json, not trained again
    other = shutil.copytree(model, tmp_path / "other-model")
    for source, settings in ((other, TaptSettings(2, batch_size=4)), (model, TaptSettings(3, batch_size=4))):
        with pytest.raises(ConfigError, match="adapted earlier from another model, tokenizer or settings"):
            adapt(source, source, examples, tmp_path / "tapt", settings, progress=False, log=None)
