"""The fine-tuning loop: AdamW, linear warmup then linear decay, dynamic padding with length-grouped batches,
evaluation every N steps (or each epoch) keeping the best dev checkpoint, early stopping, progress bars.

By default the optimizer and schedule are the official ones (``litebert.optim``: AdamW without bias correction,
LayerNorm and biases excluded from weight decay 0.01, lr warms up linearly and decays linearly to 0 at the last step,
gradients clipped to global norm 1.0 — google-research/albert ``optimization.py``); `TrainArgs` may choose LAMB,
another decay, HF's schedules and a loss with label smoothing or class weights (`litebert.finetuning.loss`). One
plain loop; what it reports (progress, metrics files, trackers) and early stopping are callbacks
(`litebert.engine.callbacks`), as the caller's are.

It runs on any device and on many processes with the pretraining loop's engine (`litebert.engine.step`: the train
state, the optimizer step and its non-finite policy), in its vocabulary: ``batch_size`` examples per optimizer
step = ``micro_batch`` x accumulation x processes. The batches of epoch ``e`` are drawn from an rng seeded with
(seed, e), so step ``s``'s examples depend only on (seed, s): resume is exact, and each step's batch is cut into
``accumulation x processes`` contiguous micro-batches, process ``r`` taking the ``r``-th run of them. Each
micro-batch's loss (a mean over its examples, or over its labelled tokens for token classification) is weighted by
its share of the step's examples (tokens), so micro-batching gives the gradient of one big batch.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from litebert.engine import distributed as D
from litebert.engine.callbacks import Callback, Callbacks, EarlyStopping, Progress, improves
from litebert.engine.metrics_log import MetricsWriter
from litebert.engine.plan import RunPlan, local_plan
from litebert.engine.readout import Read, Readout, StepNumbers, read_interval
from litebert.engine.runtime import Runtime
from litebert.engine.signals import StopSignals
from litebert.engine.step import LossFn, MicroBatch, TrainingError, TrainState, due, setup, train_step
from litebert.errors import ConfigError, DataError, literal
from litebert.finetuning.config import TrainArgs
from litebert.finetuning.loss import example_weight, training_loss
from litebert.optim import build_optimizer, schedule_at
from litebert.padding import packs_in_training, prepare_batch
from litebert.tasks.features import collate, length_grouped_batches, length_of, random_batches

TRAIN_COLUMNS = ["step", "loss", "lr", "grad_norm", "examples_per_s", "examples", "elapsed_s", "skipped_steps",
                 "loss_scale"]  # loss_scale: fp16 only


def run_identity(model: torch.nn.Module, args: TrainArgs, features: list[dict], extra: dict | None = None) -> dict:
    """What a checkpoint records of its run, compared on resume (`check_compatible`): the model config, the
    settings that shape the trajectory (``extra``: e.g. task and labels), and a fingerprint of the features."""
    h = hashlib.sha256()
    for f in features:
        h.update(json.dumps(f, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
                 .encode())
    return {"model_config": model.config.to_dict(),
            "train": {**{k: getattr(args, k) for k in args.TRAJECTORY}, **(extra or {})}, "data": h.hexdigest(),
            "added": dict(args.ADDED)}


def _plain(x):
    """Metrics as plain JSON values (numpy floats become floats), so that checkpoints load with weights_only."""
    return json.loads(json.dumps(x, default=float))


@dataclass
class LoopResult:
    best_step: Optional[int]
    best_metrics: Optional[dict]
    history: list = field(default_factory=list)
    steps: int = 0
    stopped_early: bool = False  # ended by early stopping or another callback's stop: the best model kept
    interrupted: bool = False  # stopped by SIGTERM/SIGINT (or ``stop_after``): checkpoint saved, resumable
    signal: Optional[int] = None


def train(model: torch.nn.Module, features: list[dict], args: TrainArgs,
          evaluate: Callable[[torch.nn.Module], dict] | None = None, metric: str | None = None,
          save: Callable[[torch.nn.Module, int, dict], Optional[Path]] | None = None, pad_id: int = 0,
          log: Callable[[str], None] = print, *, out_dir: str | Path | None = None, plan: Optional[RunPlan] = None,
          stop_after: int | None = None, keep_checkpoints: bool = False, run_config: dict | None = None,
          callbacks: Sequence[Callback] = (), loss: Optional[LossFn] = None) -> LoopResult:
    """Train for ``args.train_steps`` updates; every ``eval_every`` steps (and at the end) call ``evaluate(model)``
    (rank 0 only, under the training autocast) and, when ``metrics[metric]`` improves (higher is better),
    ``save(model, step, metrics)`` (which returns the folder it wrote, for the callbacks). Without ``evaluate`` the
    final model is saved.

    ``out_dir``: the run folder for ``metrics.jsonl``/CSV and ``checkpoints/`` (None: neither). Checkpoints are
    written after every evaluation, every ``save_every`` steps and on SIGTERM/SIGINT (which then end the call after
    the current step); with ``keep_checkpoints`` also at the end. ``plan``: where the run starts and what it runs
    with (`litebert.engine.plan`: the runtime, the batch split and micro-batch, the checkpoint to continue from, the
    trackers, what checkpoints record); default: a new run on this process (`plan.local_plan`). ``stop_after``: leave
    (with a checkpoint) after this many steps in this call, as on SIGTERM. ``run_config``: the settings sent once to
    a new tracker run (default: ``args``). ``callbacks``: called after each step, evaluation and save
    (`litebert.engine.callbacks`: on rank 0), after the progress bar and the metrics files, and before the
    `EarlyStopping` that ``args.patience`` makes; a stop they ask for ends the run as early stopping does (the last
    evaluation unless this step's was, the best model kept). ``loss``: the training loss in place of the model's own
    (`litebert.finetuning.loss`: a caller's ``compute_loss``); default: the model's, or the cross-entropy
    ``args.label_smoothing_factor`` and ``args.class_weights`` ask for."""
    if not features:
        raise DataError("no training examples: nothing to fine-tune on")
    plan = plan or local_plan(args, model.config, identity={}, max_steps=args.train_steps)
    rt, micro = plan.runtime, plan.micro
    d = rt.dist
    state, wrapped, ckpt_dir = _setup(model, args, rt, out_dir, micro)
    torch.manual_seed(args.seed + d.rank)  # dropout masks (differ per process, as pretraining's)
    if plan.checkpoint is not None:
        state.restore(plan.checkpoint.state, d, args.seed)
    calls = _callbacks(args, plan, state.step, out_dir, run_config, callbacks, metric if evaluate else None)
    calls.restore(state.counters["callbacks"])
    batches = _Batches(features, args, pack=packs_in_training(model, args.skip_padding, args.compile))
    loss = loss if loss is not None else training_loss(args.label_smoothing_factor, args.class_weights)
    stop, first_step = StopSignals(), state.step
    result, evaluated = LoopResult(None, None), False  # evaluated: at the last step run (the same on every rank)

    def run_eval() -> bool:  # rank 0 evaluates and saves; True (on every rank) when a callback says stop
        return _evaluate_and_keep(state, evaluate, metric, save, rt, log, calls)

    model.train()
    calls.begin(state.step)
    epochs_ended: list[int] = []  # epochs whose last step ran since the last read
    readout = Readout(d, (), args.max_bad_steps, warn=not state.scaler.is_enabled())
    every = read_interval(args.read_every, args.log_every)
    try:
        while state.step < args.train_steps:
            readout.start()
            idx = batches.of_step(state.step)
            step = train_step(state, wrapped, lambda size: batches.micro(idx, micro.per_process // size, rt, pad_id),
                              runtime=rt, lr=schedule_at(args.lr_scheduler_type, state.step, args.lr,
                                                         args.train_steps, args.warmup_steps),
                              max_grad_norm=args.max_grad_norm, micro=micro, loss=loss)
            readout.add(state.step, step, [batches.examples])
            calls.advance(state.step)
            news = micro.news()
            if news:
                log(news)
            evaluated = evaluate is not None and due(batches.per_epoch if args.eval_strategy == "epoch"
                                                     else args.eval_every, state.step, args.train_steps)
            steps_this_call = state.step - first_step
            if state.step % batches.per_epoch == 0:  # told at the next read: the host reads nothing more for it
                epochs_ended.append(state.step // batches.per_epoch - 1)
            flags = [stop.signal is not None]  # this process's: agreed at the read
            if not _reads_here(args, every, state.step, evaluated or steps_this_call == stop_after, flags, d):
                continue  # no read: the next step is queued while the device still runs this one
            read = readout.read(state, flags)
            records = [(n.step, _record(n, read)) for n in read.steps]
            asked = calls.steps(records)
            if read.error is not None:
                raise read.error
            for epoch in epochs_ended:
                asked = calls.epoch_end(epoch, (epoch + 1) * batches.per_epoch) or asked
            epochs_ended.clear()
            wants_eval, wants_save, wants_log = calls.requests()  # the callbacks' control, agreed on every rank
            if wants_log:
                calls.log(*records[-1])
            evaluated = evaluated or (wants_eval and evaluate is not None)
            result.stopped_early = (evaluated and run_eval()) or (asked and state.step < args.train_steps)
            if result.stopped_early:
                break
            stopping = read.flags[0] > 0 or steps_this_call == stop_after
            if stopping or evaluated or wants_save or due(args.save_every, state.step, args.train_steps + 1):
                _checkpoint(state, ckpt_dir, plan.identity, d, calls, args.save_total_limit, fatal=stopping)
            result.interrupted = stopping and state.step < args.train_steps
            if result.interrupted:
                break
        if not result.interrupted:
            _end(state, evaluate, save, run_eval, calls, d, evaluated)
            if keep_checkpoints:
                _checkpoint(state, ckpt_dir, plan.identity, d, calls, args.save_total_limit, fatal=True)
    finally:
        stop.restore()
        calls.end(state.step)
    result.best_step, result.best_metrics = state.counters["best_step"], state.counters["best_metrics"]
    result.history, result.steps, result.signal = state.counters["history"], state.step, stop.signal
    return result


def _reads_here(args: TrainArgs, every: int, step: int, forced: bool, flags: list, d) -> bool:
    """Whether the loop reads the device after ``step`` (`litebert.engine.readout`): every ``every`` steps, at the
    last step, a checkpoint, or when ``forced`` (an evaluation, the call's ``stop_after``); in one process also when
    a signal (``flags``) says so."""
    return (step % every == 0 or step >= args.train_steps or forced or due(args.save_every, step, args.train_steps + 1)
            or (not d.enabled and any(flags)))


def _callbacks(args: TrainArgs, plan: RunPlan, step: int, out_dir, run_config: dict | None,
               given: Sequence[Callback], metric: Optional[str]) -> Callbacks:
    """The run's callbacks: the progress bar (the loss smoothed), the metrics files and trackers (with a run
    folder: the train record every ``log_every`` steps and at the last), the caller's, and early stopping on
    ``metric`` when ``args.patience`` asks for it and the run evaluates."""
    d = plan.runtime.dist
    smoothed: list[float] = []

    def postfix(record: dict) -> dict:
        smoothed[:] = [_ema(smoothed[0] if smoothed else None, record["loss"])]
        return {"loss": f"{smoothed[0]:.4f}"}

    files = [] if out_dir is None else [  # first: a tracker that cannot start leaves no progress bar behind
        MetricsWriter(Path(out_dir), enabled=d.is_main, resume_step=plan.resume_step, trackers=plan.trackers,
                      columns={"train": TRAIN_COLUMNS, "eval": None}, config=run_config or dataclasses.asdict(args),
                      every=args.log_every, last=args.train_steps)]
    bar = Progress("fine-tuning", args.train_steps, step, postfix, enabled=args.progress and d.is_main)
    early = [EarlyStopping(metric, args.patience)] if args.patience is not None and metric is not None else []
    return Callbacks([bar, *files, *given, *early], d, log_every=args.log_every, last=args.train_steps)


def _ema(average: Optional[float], value: float) -> float:
    """The progress bar's smoothed loss."""
    return value if average is None else 0.98 * average + 0.02 * value


def _record(n: StepNumbers, read: Read) -> dict:
    """A step's numbers: a train line of metrics.jsonl. Its own loss and gradient norm; examples/s is its read
    interval's (`litebert.engine.readout`)."""
    return {"step": n.step, "loss": n.loss, "lr": n.lr, "grad_norm": n.grad_norm, "examples_per_s": read.rate(0),
            "examples": int(n.host[0]), "elapsed_s": round(n.elapsed_s, 3), "skipped_steps": n.skipped_steps,
            **({"loss_scale": n.loss_scale} if n.loss_scale is not None else {})}


def _end(state: TrainState, evaluate, save, run_eval: Callable[[], bool], calls: Callbacks,
         d: D.Distributed, evaluated: bool) -> None:
    """The end of the run: the last evaluation unless this step's is done (``evaluated``, known on every process:
    the history is rank 0's alone), keeping the best model; or without dev data the final model."""
    if evaluate is not None:
        if not evaluated:
            run_eval()  # a stop asked here changes nothing: the run ends
        return
    state.counters.update(best_metrics={}, best_step=state.step)
    if save is not None and d.is_main:
        path = save(state.model, state.step, {})
        if path is not None:
            calls.save(state.step, path)


def _setup(model: torch.nn.Module, args: TrainArgs, rt: Runtime, out_dir,
           micro: MicroBatch) -> tuple[TrainState, torch.nn.Module, Optional[Path]]:
    """The train state and the model as the processes run it (`engine.setup`, as pretraining's), with AdamW; and
    the checkpoint folder (None without a run folder)."""
    def optimizer(m: torch.nn.Module) -> torch.optim.Optimizer:
        return build_optimizer(m, args.optim, lr=args.lr, weight_decay=args.weight_decay,
                               bias_correction=args.bias_correction)

    counters = {"best_metrics": None, "best_step": None, "history": [], "callbacks": {}}
    # Every trainable parameter gets a gradient in every task's loss (the heads that do not read the pooler are built
    # without one), so DDP need not search the graph for unused ones (tests/engine/test_micro_batch_auto.py checks
    # each kind)
    state, wrapped = setup(model, rt, micro, optimizer, counters, gradient_checkpointing=args.gradient_checkpointing,
                           compile=args.compile, find_unused_parameters=False)
    return state, wrapped, Path(out_dir) / "checkpoints" if out_dir is not None else None


class _Batches:
    """The batches of the run: epoch ``e``'s from an rng seeded with (seed, e), so step ``s``'s examples depend only
    on (seed, s); each cut into micro-batches weighted by their share of the step's examples (labelled tokens)."""

    def __init__(self, features: list[dict], args: TrainArgs, pack: bool):
        self.features, self.args, self.pack = features, args, pack
        self.of_epoch = functools.lru_cache(maxsize=2)(self._of_epoch)
        self.lengths = [length_of(f) for f in features]
        self.weights = [example_weight(f, args.class_weights) for f in features]
        self.per_epoch = math.ceil(len(features) / args.batch_size)  # batches per epoch, for both orders
        self.examples = 0

    def _of_epoch(self, epoch: int) -> list[list[int]]:
        rng = np.random.default_rng([self.args.seed, epoch])  # batch order from (seed, epoch): exact on resume
        return (length_grouped_batches(self.lengths, self.args.batch_size, rng) if self.args.group_by_length
                else random_batches(len(self.features), self.args.batch_size, rng))

    def of_step(self, step: int) -> list[int]:
        return self.of_epoch(step // self.per_epoch)[step % self.per_epoch]

    def micro(self, idx: list[int], accum: int, rt: Runtime, pad_id: int):
        """This process's micro-batches of the batch ``idx``, on the device, with their weights."""
        d = rt.dist
        total = sum(self.weights[i] for i in idx)  # the step's loss is a mean over all of these
        parts = np.array_split(np.asarray(idx), accum * d.world_size)[d.rank * accum:(d.rank + 1) * accum]
        self.examples = 0
        for part in parts:
            # a batch shorter than accumulation x processes (an epoch's last) leaves some parts empty: they run one
            # example with weight 0, so that every process takes part in the gradient sync
            share = sum(self.weights[i] for i in part) / (total or 1)
            self.examples += len(part)
            rows = [self.features[i] for i in (part if len(part) else idx[:1])]
            yield prepare_batch(collate(rows, pad_id, self.args.pad_to), d.device, pack=self.pack,
                                varlen=rt.varlen), share


def _evaluate_and_keep(state: TrainState, evaluate, metric, save, rt: Runtime, log, calls: Callbacks) -> bool:
    """Rank 0 evaluates, logs and keeps the best model; the callbacks see the evaluation, then the save. True (on
    every rank) when a callback asks the run to stop. An evaluation that fails on rank 0 fails on every rank."""
    d, c = rt.dist, state.counters
    metrics, saved, error = None, None, None
    if d.is_main:
        try:
            with rt.autocast():
                metrics = _plain(evaluate(state.model))
            state.model.train()
            if metric not in metrics:
                raise ConfigError("{metric}: not among the dev metrics (" + literal(", ".join(metrics)) + "); choose "
                                  "one of them", metric=metric)
        except BaseException as e:
            error = e
    if D.broadcast_int(int(error is not None), d):
        raise error if error is not None else TrainingError("the evaluation failed on rank 0 (see its message)")
    if d.is_main:
        c["history"].append({"step": state.step, **metrics})
        value = float(metrics[metric])
        # the first evaluation's model is kept even with a NaN score (a folder always holds a model), and any later
        # number replaces a NaN best (`improves`)
        best = None if c["best_metrics"] is None else float(c["best_metrics"][metric])
        improved = c["best_metrics"] is None or improves(value, best)
        log(f"step {state.step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
            + (" (best)" if improved else ""))
        if math.isnan(value):
            log(f"warning: step {state.step}: the dev metric {metric} is NaN; any later number replaces it as the best")
        if improved:
            c.update(best_metrics=metrics, best_step=state.step)
            saved = save(state.model, state.step, metrics) if save is not None else None
    stop = calls.evaluate(state.step, metrics)
    if saved is not None:
        calls.save(state.step, saved)
    return stop


def _checkpoint(state: TrainState, folder: Optional[Path], identity: dict, d: D.Distributed, calls: Callbacks,
                keep_last: int, fatal: bool) -> None:
    """A checkpoint of the current step, with the callbacks' state (none without a run folder), the newest
    ``keep_last`` kept (`litebert.engine.checkpoint.save_checkpoint` deletes only its own step files); a failed one (a
    full disk) is a warning unless the run is leaving."""
    if folder is not None:
        state.checkpoint(folder, identity, d, keep_last, calls, fatal=fatal)
