"""The callback protocol both training loops report through (`litebert.engine.callbacks`): a recording callback sees
every step, evaluation and save, in order, in pretraining and in fine-tuning (the expected order written out from
the documented intervals, and the records checked against the metrics files the run wrote); a stop it asks for ends
the run at that step with its model written; `EarlyStopping` stops where ``FinetuneConfig.patience`` stops (both
against the step worked out by hand from the run's dev history); ``compute_metrics`` is merged into the dev metrics
and can choose the checkpoint kept; a callback's state comes back on resume. And the progress bar and trackers'
output: each step's progress line once in a log file, no TensorBoard notice when ``report_to`` is ``auto``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from litebert import Callback, EarlyStopping, FinetuneConfig, TrainConfig, finetune, pretrain
from litebert.cli import main
from litebert.errors import ArgumentError, ConfigError
from litebert.folders import read_marker

pytestmark = pytest.mark.usefixtures("one_thread")


class Recorder(Callback):
    """Every call, in order: ("step", step), ("evaluate", step), ("save", step, path relative to ``root``, whether
    it exists), ("end", step); the records and metrics it was given."""

    def __init__(self, root: Path, stop_at_step: int | None = None):
        self.root, self.stop_at_step = Path(root), stop_at_step
        self.events, self.records, self.metrics = [], [], []

    def on_step(self, step, record):
        self.events.append(("step", step))
        self.records.append(dict(record))
        return step == self.stop_at_step

    def on_evaluate(self, step, metrics):
        self.events.append(("evaluate", step))
        self.metrics.append({"step": step, **metrics})

    def on_save(self, step, path):
        self.events.append(("save", step, str(path.relative_to(self.root)), path.exists()))

    def on_end(self, step):
        self.events.append(("end", step))


def jsonl(folder: Path, split: str) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "split"} for r in rows if r["split"] == split]


def steps(*numbers: int) -> list[tuple]:
    return [("step", s) for s in numbers]


def checkpoint(step: int) -> tuple:
    return ("save", step, f"checkpoints/step-{step:08d}.pt", True)


# ------------------------------------------------------------------------------------------------- pretraining
@pytest.fixture(scope="module")
def stores(tiny_setup):
    return tiny_setup


def pretraining(**kw) -> TrainConfig:
    return TrainConfig(**{**dict(max_steps=6, batch_size=8, micro_batch=4, lr=5e-3, warmup_steps=2, seq_len=64,
                                 max_predictions=10, eval_every=2, eval_examples=16, save_every=2, seed=3), **kw})


def test_pretraining_calls_every_hook_in_order(stores, tmp_path):
    out = tmp_path / "run"
    rec = Recorder(out)
    done = pretrain(stores["store"], out, model="tiny", train=pretraining(), eval_data=stores["eval_store"],
                    progress=False, callbacks=[rec])
    assert done.complete and not done.stopped_early
    # evaluation at step 0 and every 2 steps; checkpoints every 2 (after that step's evaluation) and at the end;
    # then the final evaluation and the model
    assert rec.events == [("evaluate", 0), *steps(1, 2), ("evaluate", 2), checkpoint(2), *steps(3, 4),
                          ("evaluate", 4), checkpoint(4), *steps(5, 6), checkpoint(6), ("evaluate", 6),
                          ("save", 6, "model", True), ("end", 6)]
    assert rec.records == jsonl(out, "train")  # log_every 1: every step's record is the file's line
    assert rec.metrics == jsonl(out, "eval")


def test_pretraining_stop_ends_the_run_with_its_model_and_resume_continues(stores, tmp_path):
    """``read_every=1`` (with ``log_every`` 1): the steps are read back one by one, so a stop asked at step 3 ends
    the run at step 3."""
    out = tmp_path / "run"
    rec = Recorder(out, stop_at_step=3)
    done = pretrain(stores["store"], out, model="tiny", train=pretraining(read_every=1),
                    eval_data=stores["eval_store"], progress=False, callbacks=[rec])
    assert (done.step, done.stopped_early, done.interrupted, done.complete) == (3, True, False, False)
    assert rec.events[-4:] == [checkpoint(3), ("evaluate", 3), ("save", 3, "model", True), ("end", 3)]
    last = jsonl(out, "eval")[-1]  # the final evaluation's record (with H1 beside it), once
    assert (out / "model" / "model.safetensors").is_file() and last["step"] == 3
    assert done.final_eval == {k: v for k, v in last.items() if k not in ("step", "unigram_entropy")}
    assert read_marker(out)["complete"] is False and read_marker(out)["model_step"] == 3
    again = pretrain(stores["store"], out, model="tiny", train=pretraining(), eval_data=stores["eval_store"],
                     progress=False, resume=True)
    assert again.action == "resume" and again.complete and again.step == 6
    assert [r["step"] for r in jsonl(out, "train")] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("read_every, ends, early", [(10, 8, False), (3, 3, True), (4, 4, True)])
def test_pretraining_stop_takes_effect_at_the_read(stores, tmp_path, read_every, ends, early):
    """A stop asked at step 3 ends the run at the read that delivered step 3's record: with ``read_every`` 3 at step
    3 itself, with 4 at step 4; by default (10) the first read is the last step, 8, where the run ends anyway. Every
    step's record was delivered, in order."""
    out = tmp_path / "run"
    rec = Recorder(out, stop_at_step=3)
    done = pretrain(stores["store"], out, model="tiny", train=pretraining(read_every=read_every, eval_every=0,
                                                                         save_every=0, max_steps=8),
                    eval_data=stores["eval_store"], progress=False, callbacks=[rec])
    assert (done.step, done.stopped_early) == (ends, early)
    assert [e[1] for e in rec.events if e[0] == "step"] == list(range(1, done.step + 1))


# ------------------------------------------------------------------------------------------------- fine-tuning
def fine_tuning(**kw) -> FinetuneConfig:
    return FinetuneConfig(**{**dict(max_steps=6, batch_size=8, eval_every=3, log_every=1, lr=2e-3, seed=1), **kw})


def improvements(history: list[dict], metric: str) -> list[int]:
    """The steps whose evaluation beat every one before it (the first always does): where the best model is saved."""
    best, out = None, []
    for h in history:
        if best is None or h[metric] > best:
            best = h[metric]
            out.append(h["step"])
    return out


def test_finetuning_calls_every_hook_in_order(separable_task, tmp_path):
    model, data = separable_task
    out = tmp_path / "ft"
    rec = Recorder(out)
    done = finetune("classify", model, data, out, config=fine_tuning(), progress=False, log=None, callbacks=[rec])
    history = [{"step": m["step"], **{k: v for k, v in m.items() if k != "step"}} for m in rec.metrics]
    saved = improvements(history, "accuracy")
    # evaluation every 3 steps and at the end; the best model saved when it improved; a checkpoint after each
    # evaluation during the run (the last one ends it: no checkpoint kept)
    expected = [*steps(1, 2, 3), ("evaluate", 3), ("save", 3, ".", True), checkpoint(3), *steps(4, 5, 6),
                ("evaluate", 6), *([("save", 6, ".", True)] if 6 in saved else []), ("end", 6)]
    assert rec.events == expected and saved[0] == 3
    assert rec.records == jsonl(out, "train") and rec.metrics == jsonl(out, "eval")
    assert done.best_step == saved[-1] and json.loads((out / "finetune.json").read_text())["best_step"] == saved[-1]


def test_finetuning_stop_ends_the_run_as_early_stopping(separable_task, tmp_path):
    """A stop at step 5 (no evaluation there): the run evaluates that step, keeps the best model, and is complete."""
    model, data = separable_task
    out = tmp_path / "ft"
    rec = Recorder(out, stop_at_step=5)
    done = finetune("classify", model, data, out, config=fine_tuning(max_steps=20, eval_every=4, read_every=1),
                    progress=False, log=None, callbacks=[rec])
    assert (done.steps, done.stopped_early, done.complete, done.interrupted) == (5, True, True, False)
    assert [e for e in rec.events if e[0] == "evaluate"] == [("evaluate", 4), ("evaluate", 5)]
    assert rec.events[-1] == ("end", 5) and ("step", 6) not in rec.events
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["complete"] is True and read_marker(out)["complete"] is True and (out / "model.safetensors").is_file()
    assert meta["best_step"] == improvements(jsonl(out, "eval"), "accuracy")[-1]
    again = finetune("classify", model, data, out, config=fine_tuning(max_steps=20, eval_every=4), progress=False,
                     log=None, resume=True)
    assert again.action == "finished"


def stopped_by_patience(history: list[dict], metric: str, patience: int) -> int | None:
    """The step at which ``patience`` evaluations in a row have not beaten the best (None: never)."""
    best, bad = None, 0
    for h in history:
        if best is None or h[metric] > best:
            best, bad = h[metric], 0
        else:
            bad += 1
        if bad >= patience:
            return h["step"]
    return None


def test_early_stopping_stops_where_patience_does(separable_task, tmp_path):
    model, data = separable_task
    common = dict(max_steps=60, eval_every=2, lr=3e-3)
    a = finetune("classify", model, data, tmp_path / "patience", config=fine_tuning(patience=2, **common),
                 progress=False, log=None)
    b = finetune("classify", model, data, tmp_path / "callback", config=fine_tuning(**common), progress=False,
                 log=None, callbacks=[EarlyStopping("accuracy", patience=2)])
    history = jsonl(tmp_path / "patience", "eval")
    stop = stopped_by_patience(history, "accuracy", 2)
    assert stop is not None and stop < 60  # the fixture does stop early
    assert a.stopped_early and b.stopped_early and a.steps == b.steps == stop
    assert jsonl(tmp_path / "callback", "eval") == history and a.best_step == b.best_step


def test_early_stopping_counts_by_hand():
    def run(cb, values):
        return [cb.on_evaluate(i, {"loss": v}) for i, v in enumerate(values)]

    # mode min, min_delta 0.1: 1.0 best; 0.95 is not 0.1 better (bad 1); 0.85 is (best, bad 0); 0.8, 0.9: bad 1, 2
    assert run(EarlyStopping("loss", 2, min_delta=0.1, mode="min"), [1.0, 0.95, 0.85, 0.8, 0.9]) == [
        False, False, False, False, True]
    assert run(EarlyStopping("loss", 1), [1.0, 1.0]) == [False, True]  # equal is no improvement
    assert run(EarlyStopping("loss", 1), [1.0, float("nan")]) == [False, True]
    with pytest.raises(ConfigError, match=r"EarlyStopping\(metric = 'acc'\): the evaluation at step 0 has no such "
                                          r"metric; it has loss"):
        EarlyStopping("acc", 1).on_evaluate(0, {"loss": 1.0})
    for kw, message in ((dict(patience=0), "patience = 0"), (dict(patience=2, mode="up"), "mode = 'up'"),
                        (dict(patience=2, min_delta=-1), "min_delta = -1")):
        with pytest.raises(ConfigError, match=re.escape(f"EarlyStopping({message})")):
            EarlyStopping("loss", **kw)


def test_compute_metrics_is_merged_and_can_choose_the_checkpoint(separable_task, tmp_path):
    model, data = separable_task
    gold = [json.loads(line)["label"] for line in (data / "dev.jsonl").read_text().splitlines()]
    seen = []

    def neg_recall(predictions, labels):  # the recall of "neg": another metric than the task's
        seen.append((list(predictions), list(labels)))
        hits = sum(p == y == "neg" for p, y in zip(predictions, labels))
        return {"neg_recall": hits / labels.count("neg")}

    out = tmp_path / "ft"
    done = finetune("classify", model, data, out, config=fine_tuning(max_steps=12, metric="neg_recall"),
                    progress=False, log=None, compute_metrics=neg_recall)
    assert all(labels == gold for _, labels in seen) and len(seen) == 4  # steps 3, 6, 9 and 12
    history = jsonl(out, "eval")
    for (predictions, labels), h in zip(seen, history):
        assert set(h) == {"step", "accuracy", "matthews", "f1", "neg_recall"}
        assert h["neg_recall"] == pytest.approx(neg_recall(predictions, labels)["neg_recall"])
        assert h["accuracy"] == pytest.approx(sum(p == y for p, y in zip(predictions, labels)) / len(labels))
    assert done.best_step == improvements(history, "neg_recall")[-1] and done.metric == "neg_recall"
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["metric"] == "neg_recall" and meta["dev_metrics"]["neg_recall"] == done.best_metrics["neg_recall"]


def test_compute_metrics_and_metric_refusals(separable_task, tmp_path):
    model, data = separable_task
    cases = [(dict(compute_metrics=lambda p, y: {"accuracy": 1.0}),
              "compute_metrics = '<lambda>': returned 'accuracy', a metric the task computes already"),
             (dict(compute_metrics=lambda p, y: 0.5), "compute_metrics = '<lambda>': returned 0.5; return a dict"),
             (dict(config=fine_tuning(metric="recall")), "metric = 'recall': the classify task's dev metrics are "
                                                         "accuracy, matthews, f1")]  # refused before any data
    for i, (kw, message) in enumerate(cases):
        kw = {"config": fine_tuning(), **kw}
        with pytest.raises(ConfigError) as e:
            finetune("classify", model, data, tmp_path / str(i), progress=False, log=None, **kw)
        assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(ArgumentError, match=r"^callbacks = .*expected list or tuple of Callback"):
        finetune("classify", model, data, tmp_path / "x", callbacks=[print])
    assert not (tmp_path / "x").exists()


class CountEvaluations(Callback):
    """A callback with state: how many evaluations it has seen, kept in checkpoints."""

    def __init__(self):
        self.seen = 0

    def on_evaluate(self, step, metrics):
        self.seen += 1

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = state["seen"]


def test_a_callbacks_state_comes_back_on_resume(separable_task, tmp_path):
    model, data = separable_task
    out, first = tmp_path / "ft", CountEvaluations()
    part = finetune("classify", model, data, out, config=fine_tuning(max_steps=12), progress=False, log=None,
                    callbacks=[first], stop_after=7)  # evaluations at 3 and 6, then the checkpoint at 7
    assert part.interrupted and first.seen == 2
    second = CountEvaluations()
    finetune("classify", model, data, out, config=fine_tuning(max_steps=12), progress=False, log=None,
             callbacks=[second], resume=True)
    assert second.seen == 4  # 2 restored, then 9 and 12


# ---------------------------------------------------------------------------------------------- what the CLI shows
def test_each_progress_line_once_in_a_log_file(separable_task, tmp_path, capsys):
    """stderr is not a terminal here (a log file, where each of tqdm's redraws stays as a line): each step's count
    is drawn at most once, the last one exactly once (the postfix used to be a second draw of every step)."""
    model, data = separable_task
    assert main(["finetune", "classify", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o"),
                 "--max-steps", "8", "--batch-size", "8", "--eval-every", "4", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    drawn = [line for line in re.split(r"[\r\n]", err) if line.startswith("fine-tuning:")]
    counts = [re.search(r"\| (\d+)/8 \[", line).group(1) for line in drawn]
    assert counts.count("8") == 1 and all(counts.count(str(k)) <= 1 for k in range(9)), drawn


def test_auto_trackers_without_tensorboard_say_nothing(separable_task, tmp_path, capsys, monkeypatch):
    import litebert.engine.trackers as trackers

    monkeypatch.setattr(trackers, "_installed", lambda name: False)  # as where TensorBoard is not installed
    model, data = separable_task
    out = tmp_path / "o"
    finetune("classify", model, data, out, config=fine_tuning(max_steps=2), progress=False, log=None)
    assert "TensorBoard" not in capsys.readouterr().err
    assert [r["step"] for r in jsonl(out, "train")] == [1, 2] and (out / "train.csv").is_file()


# ------------------------------------------------------------------------------------------ NaN and NumPy answers
def test_improves_by_hand_and_nan_never_blocks():
    from hypothesis import given
    from hypothesis import strategies as st

    from litebert.engine.callbacks import improves

    nan = float("nan")
    assert improves(0.5, None) and improves(0.5, nan) and improves(-1e9, nan)
    assert not improves(nan, None) and not improves(nan, 0.5) and not improves(nan, nan)
    assert improves(0.6, 0.5) and not improves(0.5, 0.5) and not improves(0.55, 0.5, min_delta=0.1)
    assert improves(0.4, 0.5, mode="min") and not improves(0.6, 0.5, mode="min")

    @given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32), st.just(nan)),
                    min_size=1, max_size=12))
    def the_best_is_the_largest_number(values):
        best = None
        for v in values:
            if improves(v, best):
                best = v
        numbers = [v for v in values if v == v]
        assert (best is None) == (not numbers) and (not numbers or best == max(numbers))

    the_best_is_the_largest_number()


def test_a_nan_dev_score_first_never_blocks_a_later_best(separable_task, tmp_path):
    """compute_metrics gives NaN at the first evaluation, then numbers: the best model is a later one (the NaN
    evaluation's is kept only until a number comes), and early stopping with patience 2 is not fooled either."""
    model, data = separable_task
    scores = iter([float("nan"), 0.2, 0.7, 0.5, 0.4, 0.3])

    def mine(predictions, gold):
        return {"mine": next(scores)}

    done = finetune("classify", model, data, tmp_path / "ft", config=fine_tuning(max_steps=18, metric="mine",
                                                                                 patience=2),
                    compute_metrics=mine, progress=False, log=None)
    history = [r["mine"] for r in jsonl(tmp_path / "ft", "eval")]
    assert done.best_step == 9 and done.best_metrics["mine"] == 0.7  # steps 3, 6, 9, 12, 15: 0.7 at step 9
    assert done.stopped_early and done.steps == 15  # 0.5, 0.4: two without improvement after 0.7
    assert history[0] != history[0] and history[1:5] == [0.2, 0.7, 0.5, 0.4]  # the first one was NaN


def test_a_numpy_true_from_a_callback_stops_the_run(separable_task, tmp_path):
    class NumpyStop(Callback):
        def on_step(self, step, record):
            return np.float64(step) >= 4  # a comparison of NumPy values: numpy.True_

    model, data = separable_task
    done = finetune("classify", model, data, tmp_path / "ft", config=fine_tuning(max_steps=10, read_every=1),
                    progress=False, log=None, callbacks=[NumpyStop()])
    assert done.stopped_early and done.steps == 4
