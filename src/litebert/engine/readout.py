"""When the host reads what the training steps computed: an interval of steps at a time, never inside one.

A read of a device value (``.item()``, ``.cpu()``, ``bool()`` of a tensor) makes the host wait until the device has
finished everything queued. A loop that read its loss every step would never queue the next step ahead, and the GPU
would idle for the host's own time between steps (the Python of the loop, the data, the callbacks). So a step leaves
its numbers on the device (`litebert.engine.step.StepResult`: its losses, gradient norm, skip flag and loss scale),
the loop keeps them here with what it counted on the host as the batches were made (tokens, examples), and reads
them all at once at a *read point*, in one copy:

    every ``read_every`` steps, rounded up to a multiple of ``log_every`` (`read_interval`), so that no read falls
        between two log points;
    a step that evaluates, checkpoints, checks the plateau, or is the run's last;
    a step after which the run leaves: ``stop_after``, and in one process a SIGTERM/SIGINT or the time limit (host
        values, seen every step; with several processes they are agreed on at the read points, in the same
        all-reduce as the losses).

Every step still has its own numbers: the loss, its parts, the gradient norm, whether it was skipped. What a step
cannot have on its own is its duration (the host queues steps faster than the device runs them), so each step's
``elapsed_s`` is its share of the interval's wall time, and rates (tokens/s, examples/s, TFLOP/s) are the interval's.
The callbacks (`litebert.engine.callbacks`) receive the interval's records, in order, at the read; a stop they ask for
takes effect there.

At the read the non-finite policy does its bookkeeping (`litebert.engine.step`): each skipped step is counted (and
warned about), and ``max_bad_steps`` in a row stop the run with a `TrainingError` once the steps before it have been
delivered.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from litebert.engine import distributed as D
from litebert.engine.step import StepResult, TrainingError, TrainState

READ_EVERY = 10  # the default interval between reads, in steps (`read_interval`)


def read_interval(read_every: int, log_every: int) -> int:
    """The steps between two reads: ``read_every`` rounded up to a multiple of ``log_every``."""
    return log_every * -(-read_every // log_every)


@dataclass
class StepNumbers:
    """One step's numbers on the host."""

    step: int
    lr: float
    loss: float
    parts: dict  # the named parts of the loss (e.g. mlm_loss, sop_loss)
    grad_norm: float
    skipped: bool  # not finite: no update applied
    loss_scale: Optional[float]  # fp16's scale at this step (None without fp16)
    host: list  # the caller's host numbers of this step (tokens, examples...), summed over processes
    skipped_steps: int  # skipped steps of the run so far, this one included
    elapsed_s: float  # the run's training time at the end of this step (its share of the interval's)


@dataclass
class Read:
    """What one read brought back: the steps' numbers, the interval's wall time, the caller's flags summed over
    processes, and the non-finite policy's error to raise once ``steps`` (those before it) are delivered."""

    steps: list
    seconds: float
    flags: list
    error: Optional[TrainingError] = None

    def rate(self, i: int) -> float:
        """The interval's total of host number ``i`` per second."""
        return sum(s.host[i] for s in self.steps) / self.seconds if self.seconds > 0 else 0.0


class Readout:
    """The steps run since the last read, their numbers still on the device (module docstring). ``parts``: the
    names of the loss's parts in each `StepResult`; ``warn``: warn about each skipped step (not under fp16, whose
    skips are routine)."""

    def __init__(self, dist: D.Distributed, parts: tuple[str, ...], max_bad_steps: int, warn: bool = True):
        self.dist, self.parts, self.max_bad_steps, self.warn = dist, parts, max_bad_steps, warn
        self._steps: list[tuple[int, StepResult, list]] = []
        self._t0: Optional[float] = None

    def start(self) -> None:
        """A step begins: the interval's clock starts with its first step (so that evaluations and checkpoints
        after a read are not counted as training time)."""
        if self._t0 is None:
            self._t0 = time.perf_counter()

    def add(self, step: int, result: StepResult, host: Sequence[float] = ()) -> None:
        """Step ``step`` was queued: its device numbers and this process's host numbers."""
        self._steps.append((step, result, [float(h) for h in host]))

    def __len__(self) -> int:
        return len(self._steps)

    def read(self, state: TrainState, flags: Sequence[float] = ()) -> Read:
        """Read the interval's numbers in one copy from the device (every process takes part: with several, the
        losses, host numbers and ``flags`` are summed over them in one all-reduce first), do the non-finite policy's
        bookkeeping on ``state``, add the interval's wall time to ``state.elapsed_s``, and start a new interval."""
        pending, self._steps = self._steps, []
        m, h, n = 1 + len(self.parts), len(pending[0][2]) if pending else 0, len(pending)
        flags = [float(f) for f in flags]
        if n:
            values = torch.stack([r.values for _, r, _ in pending])  # [n, m + 3] on the device
            rows, host, flags = self._fetch(values, [x for _, _, hs in pending for x in hs], flags, m)
        else:
            rows, host, flags = [], [], self._sum_flags(flags)
        t0, self._t0 = self._t0, None
        seconds = time.perf_counter() - t0 if t0 is not None else 0.0
        out = Read([], seconds, flags)
        base = state.elapsed_s
        for i, ((step, result, _), row) in enumerate(zip(pending, rows)):
            skipped = row[m + 1] > 0
            if skipped:
                state.skipped_steps += 1
                state.bad_in_row += 1
                if self.warn:
                    warnings.warn(f"step {step}: non-finite loss/gradient norm ({row[m]}); step skipped "
                                  f"({state.bad_in_row} in a row)", stacklevel=3)
                if state.bad_in_row >= self.max_bad_steps:
                    out.error = TrainingError(
                        "{bad:value} steps in a row had a non-finite loss or gradient (last at step {step:value}); "
                        "stopping. Lower {lr:flag}, raise {warmup_steps:flag}, or use {precision:flag} fp32; resume "
                        "from the last checkpoint", bad=state.bad_in_row, step=step, lr=None, warmup_steps=None,
                        precision=None)
                    break
            else:
                state.bad_in_row = 0
            scale = row[m + 2]
            out.steps.append(StepNumbers(
                step, result.lr, row[0], dict(zip(self.parts, row[1:m])), row[m], skipped,
                None if scale != scale else scale, host[i * h:(i + 1) * h], state.skipped_steps,
                base + seconds * (i + 1) / n))
        state.elapsed_s = base + seconds
        return out

    def _fetch(self, values: torch.Tensor, host: list, flags: list, m: int) -> tuple[list, list, list]:
        """The one read: every step's row of ``values`` (the first ``m`` columns summed over processes), and the
        host numbers and flags summed over processes."""
        d = self.dist
        if not d.enabled:
            return values.tolist(), host, flags
        n = values.shape[0]
        summed = torch.cat([values[:, :m].reshape(-1),
                            torch.tensor(host + flags, dtype=torch.float64).to(values.device)])
        D.all_reduce_sum(summed, d)  # on the device group: queued, not waited for
        flat = torch.cat([summed, values[:, m:].reshape(-1)]).tolist()
        losses, rest = flat[:n * m], flat[n * m + len(host) + len(flags):]
        k = values.shape[1] - m
        rows = [losses[i * m:(i + 1) * m] + rest[i * k:(i + 1) * k] for i in range(n)]
        return rows, flat[n * m:n * m + len(host)], flat[n * m + len(host):n * m + len(host) + len(flags)]

    def _sum_flags(self, flags: list) -> list:
        """``flags`` of any process (1.0 where one had it), with no steps to read (on the host group)."""
        if not self.dist.enabled or not flags:
            return flags
        return [float(D.any_rank(f > 0, self.dist)) for f in flags]
