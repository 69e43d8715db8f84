"""Callbacks: what a training loop tells the code around it, and how that code asks it to stop.

Both loops (pretraining's `litebert.pretraining.loop.train`, fine-tuning's `litebert.finetuning.loop.train`) call the
same hooks of each `Callback` in a list, in the list's order:

    on_train_begin(step)        once, before the first step of this call (``step``: where the run starts; a resumed
                                run's checkpoint step)
    on_step(step, record)       for every optimizer step, when the loop reads the steps' numbers back from the
                                device (`litebert.engine.readout`: every ``read_every`` steps, rounded up to a
                                multiple of ``log_every``, and at evaluations, checkpoints and the end), the
                                interval's steps in order. ``record``: the step's numbers, the keys of a ``train``
                                line of metrics.jsonl (loss, lr, grad_norm, throughput...), every step (the file
                                keeps every ``log_every``-th)
    on_evaluate(step, metrics)  after every evaluation: pretraining's held-out MLM/SOP metrics, fine-tuning's dev
                                metrics (with what ``compute_metrics`` adds)
    on_log(step, logs)          for each train line the metrics files write (every ``log_every`` steps and the
                                last; ``logs``: {"split": "train", **record}), each evaluation ({"split": "eval",
                                **metrics}), and a step's record when a callback asked for a log (fine-tuning)
    on_epoch_end(epoch, step)   fine-tuning: for each pass over the training examples (``epoch`` counted from 0)
                                whose last step ``step`` ran, at the loop's first read after it (between reads the
                                host reads nothing back)
    on_save(step, path)         after a checkpoint file or a model folder was written
    on_end(step)                once, when the loop leaves (finished, stopped, interrupted, or on an error): close
                                what the callback opened

``on_step`` and ``on_evaluate`` return True (or NumPy's ``True_``) to stop the run (anything else: go on): after
the step of that read (the last of the records delivered together; ``read_every=1`` with ``log_every=1`` makes it
this very step) or of that evaluation. Every callback still sees the event; the run then ends as a run that finished
early, its model kept:
pretraining as with ``time_limit`` (a checkpoint, the final evaluation, the model in ``model/``; the run is not
complete, and ``resume=True`` continues it to ``max_steps``), fine-tuning as with early stopping (the best dev model
is kept and the run is complete; a resume finds it finished).

litebert's own progress bar (`Progress`), metrics files and trackers (`litebert.engine.metrics_log.MetricsWriter`)
and early stopping (`EarlyStopping`, which ``FinetuneConfig.patience`` builds) are callbacks in the same list: the
loop has no other way out. They come first; the caller's follow, in the order given.

The control object (HF's ``TrainerControl``): every callback's ``self.control`` is the run's `TrainerControl`, shared
by all of them. In any hook a callback may set ``should_training_stop`` (as returning True), and in fine-tuning
``should_evaluate``, ``should_save`` (a checkpoint) and ``should_log`` (an ``on_log`` of the step's record): the loop
acts on them at that read (after its last step) and resets them, as Trainer does.

Processes: only rank 0 calls the callbacks (it alone evaluates in fine-tuning, writes files and logs); a stop asked
there is broadcast, so that every process leaves after the same step. A callback whose state must survive a resume
returns it from ``state_dict`` (JSON values): it is kept in each checkpoint and given back to ``load_state_dict``
when the run resumes, matched by the callback's class name (and its place among callbacks of that class).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from litebert.errors import ConfigError, literal


@dataclass
class TrainerControl:
    """What the callbacks ask of the loop (HF's ``TrainerControl``), reset once the loop has acted on it."""

    should_training_stop: bool = False
    should_evaluate: bool = False
    should_save: bool = False
    should_log: bool = False


class Callback:
    """Hooks a training loop calls (module docstring). Subclass it and override the hooks you need; each default
    does nothing. ``self.control``: the run's `TrainerControl` (set when the loop starts)."""

    control: TrainerControl = TrainerControl()  # a stand-in until a loop hands the run's own

    def on_train_begin(self, step: int) -> None:
        """Before the first step this call runs; ``step``: where the run starts."""

    def on_log(self, step: int, logs: dict) -> None:
        """A train line or an evaluation was logged at ``step`` (``logs["split"]``: "train" or "eval")."""

    def on_epoch_end(self, epoch: int, step: int) -> None:
        """Fine-tuning: the pass ``epoch`` over the training examples ended with step ``step``."""

    def on_step(self, step: int, record: dict) -> Optional[bool]:
        """After optimizer step ``step``; ``record``: its numbers. Return True to stop the run here."""
        return None

    def on_evaluate(self, step: int, metrics: dict) -> Optional[bool]:
        """After the evaluation at ``step``. Return True to stop the run here."""
        return None

    def on_save(self, step: int, path: Path) -> None:
        """After ``path`` (a checkpoint file, or a model folder) was written at ``step``."""

    def on_end(self, step: int) -> None:
        """The loop leaves at ``step`` (finished, stopped, interrupted or failing)."""

    def state_dict(self) -> dict:
        """What a checkpoint keeps of this callback (JSON values) to give back on resume."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (what `state_dict` returned when the checkpoint was written)."""


class Callbacks:
    """The callbacks of one run, as the loop calls them: in order, on rank 0 only (``dist``: the run's processes);
    a stop asked there is returned on every rank."""

    def __init__(self, callbacks: Sequence[Callback], dist, log_every: Optional[int] = None,
                 last: Optional[int] = None) -> None:
        """``log_every``, ``last``: the steps whose records the metrics files write, for ``on_log``."""
        self.items, self.dist, self.log_every, self.last = list(callbacks), dist, log_every, last
        self.control = TrainerControl()
        for c in self.items:
            c.control = self.control

    def begin(self, step: int) -> None:
        if self.dist.is_main:
            for c in self.items:
                c.on_train_begin(step)

    def step(self, step: int, record: dict) -> bool:
        return self.steps([(step, record)])

    def steps(self, records: list[tuple[int, dict]]) -> bool:
        """``on_step`` of every callback for each ``(step, record)`` of one read, in order, and ``on_log`` of those
        the metrics files write; one stop decision for them all."""
        logged = [(s, r) for s, r in records if self.log_every and (s % self.log_every == 0 or s == self.last)]
        return self._ask(*[lambda c, s=step, r=record: c.on_step(s, r) for step, record in records],
                         *[lambda c, s=step, r=record: c.on_log(s, {"split": "train", **r}) for step, record in logged])

    def log(self, step: int, record: dict) -> None:
        """``on_log`` of a record a callback asked for (``should_log``)."""
        if self.dist.is_main:
            for c in self.items:
                c.on_log(step, {"split": "train", **record})

    def epoch_end(self, epoch: int, step: int) -> bool:
        return self._ask(lambda c: c.on_epoch_end(epoch, step))

    def requests(self) -> tuple[bool, bool, bool]:
        """(evaluate, save, log): what rank 0's callbacks asked through the control, on every rank; reset."""
        from litebert.engine import distributed as D

        ctl = self.control
        bits = int(ctl.should_evaluate) | int(ctl.should_save) << 1 | int(ctl.should_log) << 2
        bits = D.broadcast_int(bits if self.dist.is_main else 0, self.dist)
        ctl.should_evaluate = ctl.should_save = ctl.should_log = False
        return bool(bits & 1), bool(bits & 2), bool(bits & 4)

    def advance(self, step: int) -> None:
        """A step was queued (its numbers not read yet): the progress bars move their count."""
        if self.dist.is_main:
            for c in self.items:
                if isinstance(c, Progress):
                    c.advance(step)

    def evaluate(self, step: int, metrics: Optional[dict]) -> bool:
        """``metrics``: rank 0's (other ranks may have none)."""
        return self._ask(lambda c: c.on_evaluate(step, metrics),
                         lambda c: c.on_log(step, {"split": "eval", **metrics}))

    def save(self, step: int, path: Path) -> None:
        if self.dist.is_main:
            for c in self.items:
                c.on_save(step, Path(path))

    def end(self, step: int) -> None:
        """Every callback's ``on_end``, even when one of them fails (the first failure is raised after)."""
        if not self.dist.is_main:
            return
        failure = None
        for c in self.items:
            try:
                c.on_end(step)
            except Exception as e:  # the others still close their files
                failure = failure or e
        if failure is not None:
            raise failure

    def state(self) -> dict:
        """{name: state} of the callbacks that keep one, for the checkpoint."""
        return {name: s for name, c in self._named() if (s := c.state_dict())}

    def restore(self, saved: dict) -> None:
        for name, c in self._named():
            if name in saved:
                c.load_state_dict(saved[name])

    def _named(self) -> list[tuple[str, Callback]]:
        """Each callback's name in checkpoints: its class's, with ``#N`` from the second of a class on."""
        seen: dict[str, int] = {}
        out = []
        for c in self.items:
            base = type(c).__name__
            seen[base] = seen.get(base, 0) + 1
            out.append((base if seen[base] == 1 else f"{base}#{seen[base]}", c))
        return out

    def _ask(self, *calls: Callable[[Callback], Optional[bool]]) -> bool:
        """Each of ``calls`` on every callback in order (rank 0); whether any asked to stop, on every rank."""
        from litebert.engine import distributed as D

        stop = False
        if self.dist.is_main:
            for call in calls:
                for c in self.items:
                    stop = _asks_to_stop(call(c)) or stop
            stop, self.control.should_training_stop = stop or self.control.should_training_stop, False
        return bool(D.broadcast_int(int(stop), self.dist))


def _asks_to_stop(answer) -> bool:
    """A hook's answer: True (Python's or NumPy's: a comparison of NumPy values gives ``numpy.True_``) stops the run;
    anything else goes on."""
    return answer is True or (isinstance(answer, np.bool_) and bool(answer))


def improves(value: float, best: Optional[float], min_delta: float = 0.0, mode: str = "max") -> bool:
    """Whether ``value`` is a new best over ``best`` (None: nothing yet) by more than ``min_delta``, higher better
    (``mode`` max) or lower (min). A NaN value never improves, and a NaN best is beaten by any number: the first
    evaluation's NaN must not block every later one (the checkpoint kept, early stopping, a grid's choice)."""
    if math.isnan(value):
        return False
    if best is None or math.isnan(best):
        return True
    return (value - best if mode == "max" else best - value) > min_delta


class EarlyStopping(Callback):
    """Stop when ``metric`` of the evaluations has not improved by more than ``min_delta`` for ``patience``
    evaluations in a row. ``mode``: ``max`` (higher is better, as every fine-tuning task's metric) or ``min``
    (a loss). The first evaluation with a number sets the best (a NaN never improves, nor blocks a later number:
    `improves`); ``FinetuneConfig(patience=N)`` is ``EarlyStopping(the task's
    metric, N)``."""

    def __init__(self, metric: str, patience: int, min_delta: float = 0.0, mode: str = "max") -> None:
        def refuse(name: str, value, problem: str) -> ConfigError:
            return ConfigError("EarlyStopping({" + name + "}): " + problem, **{name: value})

        if not isinstance(metric, str) or not metric:
            raise refuse("metric", metric, "name the metric to watch (a key of the evaluation's metrics)")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise refuse("patience", patience, "expected an integer >= 1 (evaluations without improvement)")
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not min_delta >= 0:
            raise refuse("min_delta", min_delta, "expected a number >= 0")
        if mode not in ("max", "min"):
            raise refuse("mode", mode, "expected 'max' (higher is better) or 'min' (lower is better)")
        self.metric, self.patience, self.min_delta, self.mode = metric, patience, float(min_delta), mode
        self.best: Optional[float] = None
        self.bad = 0  # evaluations in a row without improvement

    def on_evaluate(self, step: int, metrics: dict) -> bool:
        if self.metric not in metrics:
            raise ConfigError("EarlyStopping({metric}): the evaluation at step " + str(step) + " has no such metric; "
                              "it has " + literal(", ".join(metrics)), metric=self.metric)
        value = float(metrics[self.metric])
        if improves(value, self.best, self.min_delta, self.mode):
            self.best, self.bad = value, 0
        else:  # a NaN never improves, and is never the best a later score must beat
            self.bad += 1
        return self.bad >= self.patience

    def state_dict(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad = state.get("best"), int(state.get("bad", 0))


class Progress(Callback):
    """litebert's progress bar (tqdm, on stderr): a step advances it with ``postfix(record)`` beside the count.
    The postfix is set before the bar moves, so a step draws one line (in a log file, where tqdm's redraws are
    separate lines, each step is there at most once), and the last step is drawn once, by closing the bar."""

    def __init__(self, desc: str, total: int, initial: int, postfix: Callable[[dict], dict],
                 enabled: bool = True) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True)
        self.postfix = postfix

    def advance(self, step: int) -> None:
        """Step ``step`` was queued: the count moves every step, the postfix at the reads (the last step is drawn by
        `on_step`, closing the bar)."""
        if step < self.bar.total and step > self.bar.n:
            self.bar.update(step - self.bar.n)

    def on_step(self, step: int, record: dict) -> None:
        self.bar.set_postfix(self.postfix(record), refresh=False)
        if step >= self.bar.total:
            self.bar.n = step  # close() draws the final line (update() first would draw it twice)
            self.bar.close()
        elif step > self.bar.n:
            self.bar.update(step - self.bar.n)

    def on_end(self, step: int) -> None:
        self.bar.close()
