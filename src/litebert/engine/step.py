"""The training engine shared by pretraining, fine-tuning and the speedup experiment: where a run executes
(`Runtime`, from `litebert.engine.runtime`), the micro-batch it steps with (`MicroBatch`), what its checkpoints
restore (`TrainState`) and one optimizer step (`train_step`). Where a run starts, and with what, is its plan
(`litebert.engine.plan`); when the host reads what the steps computed is `litebert.engine.readout`.

One step consumes one batch, cut into micro-batches (accumulation, and processes under torchrun). Each micro-batch's
loss is weighted by its share of the batch; forward and backward run under autocast, gradients are synchronised once
(on the last micro-batch), unscaled (fp16), clipped to the global norm (official ``clip_by_global_norm``), and the
optimizer steps at the learning rate the schedule gives this step.

**A step reads nothing back from the device.** Its losses, gradient norm and non-finite flag stay there, in
`StepResult.values`, until the loop reads a whole interval of steps at once (`litebert.engine.readout`): a read of a
device value makes the host wait until the device has finished everything queued, so the next step's work could not
be queued ahead and the device would idle for the host's time between steps.

The non-finite policy, the same for every loop: a step whose gradient norm is not finite applies no update (fp16's
loss scaler lowers its scale), decided on the device (`litebert.optim`'s ``step(finite=...)`` leaves weights and
moments as they were). It still counts as a step: the schedule and the data move on to the next batch, as with fp16
loss scaling, and it is counted in ``skipped_steps`` (and warned about, except for fp16's routine skips) when the
interval is read. ``max_bad_steps`` such steps in a row stop the run with a `TrainingError` at that read: a loss that
stays NaN is not cured by skipping.
"""

from __future__ import annotations

import functools
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

import torch
from torch import nn

from litebert.engine import distributed as D
from litebert.engine.checkpoint import checkpoint_path, save_checkpoint
from litebert.engine.runtime import Runtime
from litebert.errors import CheckpointError, LitebertError


class TrainingError(LitebertError, RuntimeError):
    """Training cannot go on (e.g. the loss is NaN/inf step after step)."""


# ---------------------------------------------------------------------------------------------------- micro-batch
AUTO_CPU_CAP = 32  # micro_batch "auto" on a CPU: the per-process batch, up to this (no probing: no OOM to catch)
OutOfMemory = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
# A training loss other than the model's own: (the model's outputs, the batch's labels) -> the micro-batch's loss
LossFn = Callable[[object, torch.Tensor], torch.Tensor]

PROBED = ("cuda",)  # device types where auto starts at the per-process batch and halves on out-of-memory


@dataclass
class MicroBatch:
    """The micro-batch a run steps with, decided where it starts: the one given, or ``auto``.

    ``auto`` on CUDA starts at the per-process batch; a step that runs out of memory is run again, with the same
    data and RNG, at half the micro-batch (the largest divisor of the per-process batch not above half, so the
    global batch is kept by accumulation), until it fits or 1 does not (`train_step`). On a CPU ``auto`` is the
    per-process batch up to ``AUTO_CPU_CAP``, without probing. A resumed run continues at the value its checkpoint
    recorded (``saved``); all processes take the smallest of their values."""

    size: int
    per_process: int
    auto: bool = False  # halve on out-of-memory (auto on CUDA)
    halvings: int = 0
    origin: str = "given"
    reported: Optional[int] = None  # the size last announced by `news`

    @classmethod
    def resolve(cls, given: int | str, per_process: int, dist: D.Distributed,
                saved: Optional[int] = None) -> "MicroBatch":
        if given != "auto":
            return cls(int(given), per_process)
        if isinstance(saved, int) and saved >= 1 and per_process % saved == 0:
            size, origin = saved, "the resumed run's"
        elif dist.device.type in PROBED:
            size, origin = per_process, "the per-process batch fits"
        else:
            size = _largest_divisor(per_process, AUTO_CPU_CAP)
            origin = f"on the CPU: the per-process batch, at most {AUTO_CPU_CAP}"
        return cls(D.min_int(size, dist), per_process, auto=dist.device.type in PROBED, origin=origin)

    @property
    def accumulation(self) -> int:
        """Micro-batches per process per step."""
        return self.per_process // self.size

    def halve(self) -> None:
        """The next smaller micro-batch after an out-of-memory step; below 1, a `TrainingError`."""
        smaller = _largest_divisor(self.per_process, self.size // 2)
        if smaller is None:
            raise TrainingError("micro-batch auto: a step runs out of GPU memory even at micro-batch 1; lower "
                                "{seq_len:flag} or use a smaller model", seq_len=None)
        self.size, self.halvings = smaller, self.halvings + 1

    def news(self) -> Optional[str]:
        """The log line when ``auto`` chose a value not yet announced (after the first step, after a halving)."""
        if self.origin == "given" or self.size == self.reported:
            return None
        self.reported = self.size
        why = (f"{self.halvings} halving{'s' if self.halvings > 1 else ''} after out of memory" if self.halvings
               else self.origin)
        return f"micro-batch auto: {self.size} ({why})"


def _largest_divisor(n: int, at_most: int) -> Optional[int]:
    """The largest divisor of ``n`` not above ``at_most`` (None when ``at_most`` is below 1)."""
    return next((d for d in range(min(n, at_most), 0, -1) if n % d == 0), None)


# ---------------------------------------------------------------------------------------------------- the state
@dataclass
class TrainState:
    """What a checkpoint restores: the model, optimizer and loss scaler, the step counters, each process's RNG, and
    the loop's own counters (``counters``: data position, tokens seen, best dev metrics...)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    step: int = 0
    skipped_steps: int = 0
    bad_in_row: int = 0
    elapsed_s: float = 0.0
    counters: dict = field(default_factory=dict)

    def restore(self, saved: dict, dist: D.Distributed, seed: int) -> None:
        """Continue from a checkpoint's ``saved`` state (chosen and verified by the run's plan,
        `litebert.engine.plan`)."""
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scaler.load_state_dict(saved["scaler"])
        self.step, self.skipped_steps = saved["step"], saved["skipped_steps"]
        self.elapsed_s = saved["elapsed_s"]
        self.counters.update({k: saved[k] for k in self.counters if k in saved})
        rngs = saved["rng"]
        if len(rngs) == dist.world_size:
            set_rng_state(rngs[dist.rank], dist.device)
        else:  # another number of processes: the data order is unchanged, the dropout masks are not
            torch.manual_seed(seed + dist.rank + 1_000_003 * self.step)

    def save(self, folder: Path, identity: dict, dist: D.Distributed, keep_last: int) -> None:
        """Write checkpoint ``step`` (every process takes part: their RNG states are gathered; rank 0 writes)."""
        rngs = D.all_gather(rng_state(dist.device), dist)
        error = None
        if dist.is_main:
            try:
                save_checkpoint(folder, self.step, {
                    **identity, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scaler": self.scaler.state_dict(), "rng": rngs, "skipped_steps": self.skipped_steps,
                    "elapsed_s": self.elapsed_s, **self.counters}, keep_last=keep_last)
            except CheckpointError as e:
                error = e
        D.barrier(dist)  # reached by every rank, whether the write failed or not
        if error is not None:
            raise error

    def checkpoint(self, folder: Path, identity: dict, dist: D.Distributed, keep_last: int, calls, *,
                   fatal: bool) -> None:
        """`save`, with the callbacks' state (``calls``: `litebert.engine.callbacks.Callbacks`) among the counters,
        then their ``on_save``: what both loops do at a checkpoint. A failed write (a full disk) is a warning, and
        training goes on, unless ``fatal`` (the run is leaving)."""
        self.counters["callbacks"] = calls.state()
        try:
            self.save(folder, identity, dist, keep_last)
        except CheckpointError as e:
            if fatal:
                raise
            print(f"warning: {e}; training continues", file=sys.stderr, flush=True)
            return
        calls.save(self.step, checkpoint_path(folder, self.step))


def setup(model: nn.Module, runtime: Runtime, micro: MicroBatch,
          optimizer: Callable[[nn.Module], torch.optim.Optimizer], counters: dict, *, gradient_checkpointing: bool,
          compile: bool, find_unused_parameters: bool) -> tuple[TrainState, nn.Module]:
    """The model on its device (checkpointed, compiled as asked: the run's plan has checked the compiler), its
    ``optimizer(model)`` and loss scaler in a train state with the loop's ``counters`` and the micro-batch; and the
    model as the processes run it (DDP when there are several, unless auto micro-batching averages the gradients
    itself: `train_step`)."""
    model.to(runtime.dist.device)
    if gradient_checkpointing:
        model.set_gradient_checkpointing(True)
    if compile:
        model.compile()  # in place: parameter names, state_dict and checkpoints stay those of the plain model
    built = optimizer(model)
    scaler = torch.amp.GradScaler(runtime.dist.device.type, enabled=runtime.amp is torch.float16)
    state = TrainState(model, built, scaler, counters={**counters, "micro_batch": micro.size})
    if micro.auto:
        return state, model
    return state, D.wrap(model, runtime.dist, find_unused_parameters=find_unused_parameters)


def rng_state(device: torch.device) -> torch.Tensor:
    state = torch.get_rng_state()
    if device.type == "cuda":
        state = torch.cat([state, torch.cuda.get_rng_state(device)])
    return state


def set_rng_state(state: torch.Tensor, device: torch.device) -> None:
    n = torch.get_rng_state().numel()
    torch.set_rng_state(state[:n].clone())
    if device.type == "cuda":
        torch.cuda.set_rng_state(state[n:].clone(), device)


# ---------------------------------------------------------------------------------------------------- one step
@dataclass
class StepResult:
    """One step's numbers, left on the device: ``values`` = [loss, its named parts (this process's weighted sums, not
    yet summed over processes), the gradient norm, 1.0 if the step was skipped (non-finite) else 0.0, the loss scale
    the step ran at (NaN without fp16)], float64. `litebert.engine.readout.Readout` reads them, an interval at a
    time."""

    lr: float
    values: torch.Tensor


def train_step(state: TrainState, wrapped: nn.Module,
               micro_batches: Iterable[tuple[dict, float]] | Callable[[int], Iterable[tuple[dict, float]]], *,
               runtime: Runtime, lr: float, max_grad_norm: float, parts: tuple[str, ...] = (),
               micro: Optional[MicroBatch] = None, loss: Optional[LossFn] = None) -> StepResult:
    """One optimizer step on ``micro_batches``: this process's ``(batch on the device, weight)`` pairs, the weights
    summing, over all processes, to 1 (each micro-batch's share of the batch's mean loss). They are produced one
    ahead of the one that runs, on CUDA on a side stream (`_ahead`): the next micro-batch's host-to-device copy
    overlaps the forward pass. ``parts``: output fields reported beside the loss (e.g. ``mlm_loss``). ``loss``: the
    training loss as a function of the model's outputs and the batch's ``labels`` (popped from the batch, so the model
    computes none: as ``transformers.Trainer``'s ``compute_loss_func``); default: the model's own ``loss``.

    With ``micro`` (`MicroBatch`), ``micro_batches(size)`` makes the step's micro-batches of that size; an ``auto``
    one that runs out of memory is halved and the step's forward and backward passes run again (`_fitting`). The
    size the step ran at is kept in ``state.counters["micro_batch"]``. Nothing is read back from the device (the
    module docstring); the step's numbers are in the returned `StepResult`."""
    if micro is None:
        losses = _backward(state, wrapped, micro_batches, runtime, parts, loss)
    elif not micro.auto:
        losses = _backward(state, wrapped, micro_batches(micro.size), runtime, parts, loss)
    else:
        losses = _fitting(state, wrapped, micro_batches, micro, runtime, parts, loss)
    scaler = state.scaler
    scale = scaler._get_scale_async().double() if scaler.is_enabled() else None  # copied before update() moves it
    scaler.unscale_(state.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(state.model.parameters(), max_grad_norm)
    finite = torch.isfinite(grad_norm)
    for group in state.optimizer.param_groups:
        group["lr"] = lr
    _update(state.optimizer, finite)
    if scaler.is_enabled():
        scaler.update()  # fp16: the scale halves after a step with inf/NaN gradients (found by unscale_)
    state.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    if micro is not None:
        state.counters["micro_batch"] = micro.size  # checkpoints record it: a resumed auto run continues at it
    nan = torch.full((1,), float("nan"), dtype=torch.float64, device=losses.device)
    values = torch.cat([losses, grad_norm.detach().double().view(1), (~finite).double().view(1),
                        scale.view(1) if scale is not None else nan])
    return StepResult(lr, values)


def _update(optimizer: torch.optim.Optimizer, finite: torch.Tensor) -> None:
    """The optimizer step, or none where the gradient norm is not finite: decided on the device by litebert's
    optimizers (``step(finite=...)``); another optimizer's step needs the host to read the flag."""
    if _gated(type(optimizer)):
        optimizer.step(finite=finite)
    elif bool(finite):
        optimizer.step()


def _backward(state: TrainState, wrapped: nn.Module, micro_batches: Iterable[tuple[dict, float]], runtime: Runtime,
              parts: tuple[str, ...], loss_fn: Optional[LossFn] = None) -> torch.Tensor:
    """Forward and backward of every micro-batch, gradients accumulated (synced by DDP on the last); the weighted
    loss and its parts, [1 + parts]."""
    d = runtime.dist
    losses = torch.zeros(1 + len(parts), dtype=torch.float64, device=d.device)  # read with the interval's steps
    batches = _ahead(iter(micro_batches), d.device)
    upcoming = next(batches, None)
    while upcoming is not None:
        batch, weight = upcoming
        upcoming = next(batches, None)
        with D.no_sync(wrapped, sync=upcoming is None), runtime.autocast():  # gradients synced on the last
            if loss_fn is None:
                out = wrapped(**batch)
                loss = out.loss.float()
            else:
                labels = batch.pop("labels")
                out = wrapped(**batch)
                loss = loss_fn(out, labels).float()
        # DDP averages gradients over processes: x world_size makes the result the sum of the weighted losses
        state.scaler.scale(loss * (weight * d.world_size)).backward()
        values = [loss] + [getattr(out, p).float() if getattr(out, p) is not None else loss * 0 for p in parts]
        losses += torch.stack([v.detach() for v in values]).double() * weight
        del batch, out, loss
    return losses


def _fitting(state: TrainState, wrapped: nn.Module, make: Callable[[int], Iterable[tuple[dict, float]]],
             micro: MicroBatch, runtime: Runtime, parts: tuple[str, ...],
             loss_fn: Optional[LossFn] = None) -> torch.Tensor:
    """`_backward` at ``micro.size``; on CUDA out-of-memory (on any process) every process drops the step's
    gradients, frees the cached memory, restores the RNG (the same dropout masks) and runs the step again at the
    halved size. So the step equals one run at that micro-batch from the start. Several processes run the plain
    model here (no DDP: a process that ran out of memory must be able to say so before any process waits in a
    gradient all-reduce) and average the gradients once all backward passes are done."""
    d = runtime.dist
    rng = rng_state(d.device)
    while True:
        losses = None
        try:
            losses = _backward(state, wrapped, make(micro.size), runtime, parts, loss_fn)
        except OutOfMemory:
            pass  # leaving the handler releases the failed attempt's activations (its frames)
        if not D.any_rank(losses is None, d):
            D.average_gradients(state.model, d)
            return losses
        state.optimizer.zero_grad(set_to_none=True)
        if d.device.type == "cuda":
            torch.cuda.empty_cache()
        set_rng_state(rng, d.device)
        micro.halve()


def _ahead(batches: Iterator[tuple[dict, float]], device: torch.device) -> Iterator[tuple[dict, float]]:
    """``batches`` as they come; on CUDA each one is made (its host-to-device copies issued) on a side stream, so
    that the copy of the next micro-batch runs while the current one computes. Before a batch is used the compute
    stream waits for its copies, and its tensors are marked as used there (the allocator then does not hand their
    memory to the copy stream while the compute stream may still read it). Elsewhere: ``batches`` unchanged."""
    if device.type != "cuda":
        yield from batches
        return
    copies, compute = _copy_stream(device), torch.cuda.current_stream(device)
    while True:
        with torch.cuda.stream(copies):
            item = next(batches, None)
        if item is None:
            return
        compute.wait_stream(copies)
        for t in _tensors(item[0]):
            t.record_stream(compute)
        yield item


@functools.lru_cache(maxsize=None)
def _gated(kind: type) -> bool:
    """Whether an optimizer class's ``step`` takes the device flag ``finite``."""
    try:
        return "finite" in inspect.signature(kind.step).parameters
    except (TypeError, ValueError):
        return False


_COPY_STREAMS: dict = {}


def _copy_stream(device: torch.device):
    """One side stream per CUDA device for the batches' copies."""
    if device not in _COPY_STREAMS:
        _COPY_STREAMS[device] = torch.cuda.Stream(device)
    return _COPY_STREAMS[device]


def _tensors(batch: dict) -> Iterator[torch.Tensor]:
    """The device tensors of a prepared batch, a `Packing`'s included."""
    for v in batch.values():
        if isinstance(v, torch.Tensor):
            yield v
        elif hasattr(v, "__dataclass_fields__"):
            yield from (getattr(v, f) for f in v.__dataclass_fields__ if isinstance(getattr(v, f), torch.Tensor))


def due(every: int, step: int, before: int) -> bool:
    """Whether an action done every ``every`` steps (0: never) falls on ``step``, a step before ``before``."""
    return bool(every) and step % every == 0 and step < before
