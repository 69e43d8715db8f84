"""The callbacks' Trainer-style hooks and control (`litebert.engine.callbacks.TrainerControl`, as HF's
``TrainerControl``): ``on_train_begin`` once, ``on_epoch_end`` after each pass over the training examples,
``on_log`` for each logged train line and evaluation, and a callback's ``should_evaluate``, ``should_save``,
``should_log`` and ``should_training_stop`` acted on at the read where it was set. The expected events are worked
out by hand from the documented intervals (reads every ``log_every`` = 2 steps and at every ``save_every`` = 3rd
step's checkpoint; two steps an epoch)."""

from __future__ import annotations

import pytest

from litebert import Callback, FinetuneConfig, finetune

pytestmark = pytest.mark.usefixtures("one_thread")


class Asker(Callback):
    def __init__(self):
        self.events = []

    def on_train_begin(self, step):
        self.events.append(("begin", step))

    def on_step(self, step, record):
        if step == 2:
            self.control.should_evaluate = True  # eval_every is beyond the run: only this and the end evaluate
        if step == 3:
            self.control.should_log = True  # read for the checkpoint, but not a log_every step
        if step == 4:
            self.control.should_save = True  # not a save_every step
        if step == 5:
            self.control.should_training_stop = True  # read with step 6: the run stops after step 6

    def on_epoch_end(self, epoch, step):
        self.events.append(("epoch", epoch, step))

    def on_log(self, step, logs):
        self.events.append(("log", step, logs["split"]))
        assert ("loss" in logs) == (logs["split"] == "train")

    def on_evaluate(self, step, metrics):
        self.events.append(("evaluate", step))

    def on_save(self, step, path):
        self.events.append(("save", step, path.parent.name == "checkpoints"))


def test_control_asks_for_evaluation_save_log_and_stop(separable_task, tmp_path):
    model, data = separable_task
    asker = Asker()
    result = finetune("classify", model, data, tmp_path / "ft", progress=False, log=None, callbacks=[asker],
                      config=FinetuneConfig(max_steps=12, batch_size=8, eval_every=100, log_every=2, read_every=1,
                                            save_every=3, max_train_examples=16, max_eval_examples=8, lr=2e-3,
                                            seed=1))
    events = asker.events
    assert events[0] == ("begin", 0) and events.count(("begin", 0)) == 1
    assert [e for e in events if e[0] == "epoch"] == [("epoch", 0, 2), ("epoch", 1, 4), ("epoch", 2, 6)]
    assert [e[1] for e in events if e[:1] == ("log",) and e[2] == "train"] == [2, 3, 4, 6]
    assert [e[1] for e in events if e[0] == "evaluate"] == [2, 6]  # asked at 2; the stopped run's last at 6
    assert [e[1] for e in events if e[:1] == ("log",) and e[2] == "eval"] == [2, 6]
    assert [e[1] for e in events if e[0] == "save" and e[2]] == [2, 3, 4]  # 2: an evaluation, 3: save_every, 4: asked

    assert result.stopped_early and result.steps == 6
