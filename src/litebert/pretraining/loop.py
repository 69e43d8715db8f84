"""The pretraining loop: one plain PyTorch function, ``train``, to be read top to bottom.

One optimizer step consumes one *global batch* of ``batch_size`` sequences, split as micro-batches over processes and
accumulation steps: global = micro_batch x accumulation x world_size (the paper's 4096 = e.g. 32 x 16 x 8 GPUs).
Example ``c`` of the run (counted over all steps) is ``dataset.example(c // N, c % N)`` for N examples per epoch (the
dataset shuffles each epoch from its seed), and within a step process ``r`` takes the ``r``-th contiguous slice. So
the data a step sees depends only on (seed, step) — not on the number of processes, and not on whether the run was
interrupted — which is what makes resume exact and 2 processes equal to 1.

Per step (`litebert.engine.step.train_step`): forward/backward every micro-batch, clip the global gradient norm
(official ``clip_by_global_norm``), the optimizer step at the official schedule's learning rate (a non-finite step
is skipped: the engine's policy). Then the callbacks (`litebert.engine.callbacks`: the progress bar, the metrics files
and trackers, the caller's), evaluation and checkpoints at their intervals, and on SIGTERM/SIGINT a checkpoint and a
clean exit. Where the run starts (a checkpoint, or step 0) and what it runs with (runtime, batch
split, micro-batch, trackers) is the caller's plan (`litebert.engine.plan`); the loop obeys it.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import torch
from tqdm import tqdm

from litebert.data.pretraining import collate_pretraining
from litebert.engine import distributed as D
from litebert.engine.callbacks import Callback, Callbacks, Progress
from litebert.engine.metrics_log import MetricsWriter, flops_per_sequence, metric_columns, peak_tflops_of
from litebert.engine.plan import RunPlan, local_plan
from litebert.engine.readout import Read, Readout, StepNumbers, read_interval
from litebert.engine.runtime import Runtime
from litebert.engine.signals import StopSignals
from litebert.engine.step import MicroBatch, TrainState, due, setup, train_step
from litebert.optim import build_optimizer, lr_at
from litebert.padding import packs_in_training, prepare_batch
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.feed import Feed
from litebert.pretraining.identity import run_identity
from litebert.pretraining.plateau import PlateauGuard, Probe, advice, check_after, probe, unigram_of_store

PARTS = ("mlm_loss", "sop_loss")  # the loss's parts each step reports beside it
PROBE_EXAMPLES = 64  # held-out sequences the plateau guard probes (~1,000 masked positions at 20 per sequence)


@dataclass
class LoopResult:
    step: int
    interrupted: bool  # stopped by SIGTERM/SIGINT (or ``stop_after``): checkpoint saved, resumable
    time_limited: bool  # ended early by ``time_limit``, as a finished run (checkpoint, evaluation, model)
    signal: Optional[int]
    skipped_steps: int
    tokens_seen: int
    elapsed_s: float
    final_eval: Optional[dict]
    plateau: Optional[dict] = None  # the plateau guard's verdict when it fired (`litebert.pretraining.plateau`)
    stopped_on_plateau: bool = False  # ended by ``on_plateau="stop"``: checkpoint saved, resumable
    stopped_early: bool = False  # ended by a callback's stop, as ``time_limit`` ends a run


def train(model: torch.nn.Module, train_data, eval_data, cfg: TrainConfig, out_dir: str | Path, *,
          plan: Optional[RunPlan] = None, init: Optional[dict] = None, progress: bool = True,
          stop_after: Optional[int] = None, time_limit: Optional[float] = None, collate: Callable = collate_pretraining,
          run_config: Optional[dict] = None, callbacks: Sequence[Callback] = ()) -> LoopResult:
    """Pretrain ``model`` (an ``AlbertForPreTraining``) to ``cfg.max_steps``, writing metrics, checkpoints and the
    final model (HF folder format, ``out_dir/model``) under ``out_dir``.

    ``train_data``/``eval_data``: ``example(epoch, index) -> dict of arrays`` and ``num_examples`` or ``len()``.
    ``plan``: where the run starts and what it runs with (`litebert.engine.plan`: the runtime, the batch split and
    micro-batch, the checkpoint to continue from, the trackers, what checkpoints record); default: a new run on
    this process (`plan.local_plan`; ``init``, where the starting weights came from, ``{"path", "sha256"}``, is then
    recorded in the checkpoints). ``stop_after``: leave (with a checkpoint) after this many steps in this call, as
    on SIGTERM. ``time_limit``: seconds; past it, end as if ``max_steps`` were reached (the schedule is not
    rescaled). ``run_config``: the settings sent once to a new tracker run (default: ``cfg`` and the model config).
    ``callbacks``: called after each step, evaluation and save (`litebert.engine.callbacks`: on rank 0; a stop they
    ask for ends the run as ``time_limit`` does), after the progress bar and the metrics files, which are callbacks
    too."""
    plan = plan or local_plan(cfg, model.config, identity=run_identity(model, cfg, train_data, init),
                              max_steps=cfg.max_steps)
    rt, micro, out = plan.runtime, plan.micro, Path(out_dir)
    d = rt.dist
    state, wrapped = _setup(model, cfg, rt, micro)
    torch.manual_seed(cfg.seed + d.rank)  # dropout masks differ per process, as on TPU cores
    if plan.checkpoint is not None:
        state.restore(plan.checkpoint.state, d, cfg.seed)
    stop, deadline = StopSignals(), time.perf_counter() + (time_limit if time_limit is not None else float("inf"))
    guard = _guard(cfg, train_data, eval_data, collate, rt)
    log, calls = _callbacks(model, cfg, plan, out, state, guard, progress, run_config, callbacks)
    peak, first_step = _peak_tflops(cfg, d.device), state.step
    flops_at = functools.lru_cache(maxsize=None)(  # training FLOPs of one sequence of each length
        lambda length: flops_per_sequence(model.config, length, cfg.max_predictions))
    result = LoopResult(step=state.step, interrupted=False, time_limited=False, signal=None, skipped_steps=0,
                        tokens_seen=0, elapsed_s=0.0, final_eval=None)
    feed = _feed(train_data, collate, cfg, plan.split.per_process, d)
    run_eval = functools.partial(_evaluation, model, eval_data, collate, cfg, rt, micro, guard, calls)
    evaluated: dict = {}  # the last evaluation: {"step", "metrics"}
    readout = Readout(d, PARTS, cfg.max_bad_steps, warn=not state.scaler.is_enabled())
    every = read_interval(cfg.read_every, cfg.log_every)
    calls.begin(state.step)
    try:
        result.stopped_early = asked = state.step == 0 and eval_data is not None and run_eval(0, evaluated)
        while state.step < cfg.max_steps and not asked:
            readout.start()
            host = [0.0, 0.0]  # this process's real tokens and model FLOPs: counted as the batches are made
            step = train_step(state, wrapped,
                              lambda size: _micro_batches(feed, cfg, state, rt, size, micro.per_process, host,
                                                          flops_at),
                              runtime=rt, lr=lr_at(state.step, cfg.lr, cfg.max_steps, cfg.warmup_steps, cfg.poly_power),
                              max_grad_norm=cfg.max_grad_norm, parts=PARTS, micro=micro)
            state.counters["data_step"] += 1
            readout.add(state.step, step, host)
            calls.advance(state.step)
            _news(micro, d)
            flags = [stop.signal is not None, time.perf_counter() > deadline]  # this process's: agreed at the read
            steps_this_call = state.step - first_step
            if not _reads_here(cfg, every, guard, state.step, steps_this_call == stop_after, flags, d):
                continue  # no read: the next step is queued while the device still runs this one
            read = readout.read(state, flags)
            records = [{**_train_record(n, read, cfg, peak, d.world_size, state), **_h1(guard)} for n in read.steps]
            asked = calls.steps([(n.step, r) for n, r in zip(read.steps, records)])
            if read.error is not None:
                raise read.error
            if eval_data is not None and due(cfg.eval_every, state.step, cfg.max_steps):
                asked = run_eval(state.step, evaluated) or asked
            result.interrupted, result.time_limited = _ending(read, steps_this_call == stop_after,
                                                              state.step < cfg.max_steps)
            if guard is not None and _watch_all(guard, read, records, model, cfg, rt, log, result):
                result.interrupted = result.stopped_on_plateau = True
            result.stopped_early = asked and not result.interrupted and state.step < cfg.max_steps
            if result.interrupted or due(cfg.save_every, state.step, cfg.max_steps):
                _checkpoint(state, out, plan.identity, rt, cfg.keep_last, calls, fatal=result.interrupted)
            if result.interrupted or result.time_limited:
                break
        if not result.interrupted:  # the end (a time limit, a callback's stop): a checkpoint, evaluation, the model
            _checkpoint(state, out, plan.identity, rt, cfg.keep_last, calls, fatal=True)
            result.final_eval = _finish(model, eval_data, run_eval, evaluated, state.step, out, calls, d)
    finally:
        feed.close()
        stop.restore()
        calls.end(state.step)
    result.step, result.signal, result.skipped_steps = state.step, stop.signal, state.skipped_steps
    result.tokens_seen, result.elapsed_s = state.counters["tokens_seen"], state.elapsed_s
    return result


def _callbacks(model, cfg: TrainConfig, plan: RunPlan, out: Path, state: TrainState, guard: Optional[PlateauGuard],
               progress: bool, run_config: Optional[dict],
               given: Sequence[Callback]) -> tuple[MetricsWriter, Callbacks]:
    """The run's metrics files (in ``out``) and trackers, and its callbacks: the progress bar, those files, the
    caller's (their state restored from the checkpoint)."""
    d = plan.runtime.dist
    log = MetricsWriter(out, enabled=d.is_main, resume_step=plan.resume_step,
                        trackers=plan.trackers, columns=metric_columns(cfg.objective), every=cfg.log_every,
                        config=run_config or {"model": model.config.to_dict(), **cfg.to_dict()})
    bar = Progress("pretrain", cfg.max_steps, state.step, functools.partial(_postfix, guard=guard),
                   enabled=progress and d.is_main)
    calls = Callbacks([bar, log, *given], d, log_every=cfg.log_every, last=cfg.max_steps)
    calls.restore(state.counters["callbacks"])
    return log, calls


def _ending(read: Read, leaving: bool, more_to_go: bool) -> tuple[bool, bool]:
    """Whether the run stops after this read: (interrupted: a SIGTERM/SIGINT on any process or the call's
    ``stop_after``; ended by the time limit, on any process, with steps still to go)."""
    interrupted = read.flags[0] > 0 or leaving
    return interrupted, not interrupted and read.flags[1] > 0 and more_to_go


def _reads_here(cfg: TrainConfig, every: int, guard: Optional[PlateauGuard], step: int, leaving: bool, flags: list,
                d) -> bool:
    """Whether the loop reads the device after ``step`` (`litebert.engine.readout`): every ``every`` steps, at the
    last step, an evaluation, a checkpoint, a plateau check, or when the call leaves here (``leaving``: its
    ``stop_after``); in one process also when a signal or the time limit (``flags``) says so."""
    return (step % every == 0 or step >= cfg.max_steps or leaving or due(cfg.eval_every, step, cfg.max_steps)
            or due(cfg.save_every, step, cfg.max_steps) or (guard is not None and guard.due(step))
            or (not d.enabled and any(flags)))


def _watch_all(guard: PlateauGuard, read: Read, records: list, model, cfg: TrainConfig, rt: Runtime,
               log: MetricsWriter, result: LoopResult) -> bool:
    """`_watch` for every step of a read, in order (the guard sees each step's MLM loss; its check can only fall on
    the read's last step, a read point of its own). True: stop here."""
    return any([_watch(guard, r, model, cfg, rt, log, n.step, result) for n, r in zip(read.steps, records)])


def _news(micro: MicroBatch, d) -> None:
    """Rank 0 says which micro-batch ``auto`` chose, when it chose one."""
    news = micro.news()
    if news and d.is_main:
        print(news, file=sys.stderr, flush=True)


def _evaluation(model, eval_data, collate: Callable, cfg: TrainConfig, rt: Runtime, micro: MicroBatch,
                guard: Optional[PlateauGuard], calls: Callbacks, step: int, evaluated: dict) -> bool:
    """The held-out evaluation at ``step`` (kept in ``evaluated``), given to the callbacks (the metrics files among
    them) with H1 beside it; True when one of them asks the run to stop."""
    metrics = evaluate(model, eval_data, collate, cfg, rt, batch=micro.size)
    evaluated.update(step=step, metrics=metrics)
    return calls.evaluate(step, {**metrics, **_h1(guard)})


def _finish(model, eval_data, run_eval: Callable[[int, dict], bool], evaluated: dict, step: int, out: Path,
            calls: Callbacks, d) -> Optional[dict]:
    """The end of the run: the final evaluation (returned; the step's own when it was just evaluated) and, on rank
    0, the model in the HF folder format."""
    if eval_data is not None and evaluated.get("step") != step:
        run_eval(step, evaluated)  # a stop asked here changes nothing: the run ends
    if d.is_main:
        model.save_pretrained(out / "model")
    calls.save(step, out / "model")
    return evaluated.get("metrics") if eval_data is not None else None


def _peak_tflops(cfg: TrainConfig, device: torch.device) -> Optional[float]:
    """One device's peak TFLOP/s for the MFU estimate: the config's, else the known figure of this GPU, else None."""
    if cfg.peak_tflops:
        return cfg.peak_tflops
    return peak_tflops_of(torch.cuda.get_device_name(device)) if device.type == "cuda" else None


def _guard(cfg: TrainConfig, train_data, eval_data, collate: Callable, rt: Runtime) -> Optional[PlateauGuard]:
    """The plateau guard of the run (None when ``on_plateau`` is off, or the data is not a token store's): the
    unigram statistics counted from the training store, and the probe batch (the first held-out examples, else the
    first training examples of epoch 0) ready on the device."""
    store = getattr(train_data, "store", None)
    if cfg.on_plateau == "off" or store is None:
        return None
    unigram = unigram_of_store(store)
    source = eval_data if eval_data is not None else train_data
    n = min(PROBE_EXAMPLES, _num_examples(source))
    batch = prepare_batch(collate([source.example(0, i) for i in range(n)]), rt.dist.device, pack=True,
                          varlen=rt.varlen)
    interval = check_after(cfg.warmup_steps, cfg.max_steps, cfg.plateau_check_steps)
    guard = PlateauGuard(unigram, cfg.warmup_steps, check_after=interval, action=cfg.on_plateau,
                         batch=batch)
    if rt.dist.is_main:
        print(guard_notice(guard, cfg.max_steps), file=sys.stderr, flush=True)
    return guard


def guard_notice(guard: PlateauGuard, max_steps: Optional[int]) -> str:
    """The plateau guard's line at the start of a run: what it counted, and when it checks; or, for a run that ends
    before the first check, that the run is too short for one."""
    first = guard.warmup + guard.check_after
    if max_steps is not None and first > max_steps:
        return (f"plateau guard: {guard.unigram.describe()}; this run ({max_steps:,} steps) is too short for a check "
                f"(the first would be at step {first:,}: warmup {guard.warmup} + {guard.check_after})")
    return (f"plateau guard: {guard.unigram.describe()}; checks at step {first} (warmup {guard.warmup} + "
            f"{guard.check_after}) and every {guard.check_after} after; on a plateau: {guard.action}")


def _h1(guard: Optional[PlateauGuard]) -> dict:
    """The unigram entropy beside a record's MLM loss."""
    return {"unigram_entropy": round(guard.unigram.entropy, 4)} if guard is not None else {}


def _postfix(record: dict, guard: Optional[PlateauGuard]) -> dict:
    """The progress line: the loss, the MLM loss beside H1 (with the plateau guard), tokens/s."""
    mlm = {"mlm": f"{record['mlm_loss']:.2f}", "H1": f"{guard.unigram.entropy:.2f}"} if guard is not None else {}
    return {"loss": f"{record['loss']:.3f}", **mlm, "tok_s": f"{record['tokens_per_s']:.0f}"}


def _watch(guard: PlateauGuard, record: dict, model, cfg: TrainConfig, rt: Runtime, log: MetricsWriter, step: int,
           result: LoopResult) -> bool:
    """Feed the guard this step's MLM loss; at its checks, probe the model, log a ``guard`` record and, when the
    run sits on the plateau, say so in one line. True: the run should stop here (``on_plateau="stop"``)."""
    guard.observe(record["mlm_loss"])
    if not guard.due(step):
        return False
    found: Probe = probe(model, guard.batch, rt.autocast())
    verdict = guard.check(step, found)
    plateau = bool(D.broadcast_int(int(verdict.plateau), rt.dist))  # rank 0's verdict on every rank
    log.log("guard", {"step": step, "mlm_loss": round(verdict.loss, 4), **_h1(guard), **found.to_dict(),
                      "plateau": plateau})
    if not plateau:
        return False
    result.plateau = {"step": step, "mlm_loss": verdict.loss, "unigram_entropy": guard.unigram.entropy,
                      **found.to_dict()}
    if rt.dist.is_main:
        tip = advice(cfg.lr, cfg.warmup_steps, cfg.batch_size, cfg.optimizer, cfg.bias_correction)
        stop = (" Stopping (--on-plateau stop): the checkpoint is saved; --resume continues the run." if
                cfg.on_plateau == "stop" else "")
        tqdm.write(verdict.line(tip) + stop, file=sys.stderr)
    return cfg.on_plateau == "stop"


def _setup(model: torch.nn.Module, cfg: TrainConfig, rt: Runtime,
           micro: MicroBatch) -> tuple[TrainState, torch.nn.Module]:
    """The train state and the model as the processes run it (`engine.setup`), with the config's optimizer."""
    def optimizer(m: torch.nn.Module) -> torch.optim.Optimizer:
        return build_optimizer(m, cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay,
                               bias_correction=cfg.bias_correction)

    # "none" trains no sentence head: DDP must not wait for its gradients
    return setup(model, rt, micro, optimizer, {"data_step": 0, "tokens_seen": 0, "callbacks": {}},
                 gradient_checkpointing=cfg.gradient_checkpointing, compile=cfg.compile,
                 find_unused_parameters=cfg.objective == "none")


def _micro_batches(feed: Feed, cfg: TrainConfig, state: TrainState, rt: Runtime, size: int, per_process: int,
                   host: list, flops_at: Callable[[int], float]) -> Iterator[tuple[dict, float]]:
    """This process's micro-batches of ``size`` sequences of the step (``per_process`` in all, see the module
    docstring), on the device, each weighted by its share of the global batch; counts their real tokens and model
    FLOPs into ``host`` (from 0: a step run again at a smaller micro-batch counts once)."""
    pack = packs_in_training(state.model, cfg.skip_padding, cfg.compile)
    accum = per_process // size
    host[:] = [0.0, 0.0]
    for batch in feed.step(state.counters["data_step"], size):
        lengths = batch["attention_mask"].numpy().sum(1).tolist()  # on the host, before the batch moves
        host[0] += sum(lengths)
        host[1] += sum(flops_at(int(k)) for k in lengths)
        if cfg.objective == "none":  # MLM only: no sentence-level loss
            batch.pop("sentence_order_label")
        yield prepare_batch(batch, rt.dist.device, pack=pack, varlen=rt.varlen), 1 / (accum * rt.dist.world_size)


def _feed(data, collate: Callable, cfg: TrainConfig, per: int, dist) -> Feed:
    """The run's batches on the host: process ``r`` takes the ``r``-th contiguous slice (``per`` examples) of each
    global batch, in micro-batches of the size the step asks for."""
    def starts(step: int, size: int) -> list[int]:
        accum = per // size
        first = step * cfg.batch_size + dist.rank * accum * size  # run-wide number of the slice's first example
        return [first + j * size for j in range(accum)]

    return Feed(data, _num_examples(data), collate, starts, workers=cfg.data_workers, seed=cfg.seed,
                pin=dist.device.type == "cuda")


def _train_record(n: StepNumbers, read: Read, cfg: TrainConfig, peak: Optional[float], world: int,
                  state: TrainState) -> dict:
    """A step's line in metrics.jsonl / train.csv (its tokens added to the run's count). Its own loss, parts and
    gradient norm; throughput and TFLOP/s are its read interval's (`litebert.engine.readout`)."""
    state.counters["tokens_seen"] += int(n.host[0])
    record = {"step": n.step, "loss": n.loss, "mlm_loss": n.parts["mlm_loss"]}
    if cfg.objective != "none":
        record[f"{cfg.objective}_loss"] = n.parts["sop_loss"]
    record.update({"lr": n.lr, "grad_norm": n.grad_norm, "tokens_per_s": read.rate(0),
                   "tokens": state.counters["tokens_seen"], "elapsed_s": round(n.elapsed_s, 3),
                   "tflops": read.rate(1) / 1e12, "skipped_steps": n.skipped_steps})
    if peak:
        record["mfu"] = record["tflops"] / (peak * world)
    return record


def _checkpoint(state: TrainState, out: Path, identity: dict, rt: Runtime, keep_last: int, calls: Callbacks,
                fatal: bool) -> None:
    """A checkpoint of the current step in ``out/checkpoints`` (`TrainState.checkpoint`); a failed periodic one (a
    full disk) is a warning: training goes on."""
    state.checkpoint(out / "checkpoints", identity, rt.dist, keep_last, calls, fatal=fatal)


@torch.no_grad()
def evaluate(model, dataset, collate: Callable, cfg: TrainConfig, rt: Runtime, batch: Optional[int] = None) -> dict:
    """Official eval metrics (run_pretraining ``metric_fn``) on the first ``eval_examples`` held-out examples:
    MLM loss/accuracy weighted by ``mlm_weights`` (padded predictions count 0), SOP loss/accuracy per sequence.
    ``batch``: sequences per forward (default: the config's micro-batch; 32 for auto)."""
    d, n = rt.dist, min(cfg.eval_examples, _num_examples(dataset))
    size = batch or (cfg.micro_batch if isinstance(cfg.micro_batch, int) else 32)
    sums = torch.zeros(6, dtype=torch.float64, device=d.device)  # mlm nll, mlm correct, mlm weight, sop nll,
    # sop correct, sequences: summed on the device, read once at the end
    was_training = model.training
    model.eval()
    for b, start in enumerate(range(0, n, size)):
        if b % d.world_size != d.rank:  # batches round-robin over processes, sums reduced below
            continue
        batch = prepare_batch(collate([dataset.example(0, i) for i in range(start, min(start + size, n))]),
                              d.device, pack=True, varlen=rt.varlen)
        with rt.autocast():
            out = model(**batch)
        logits = out.prediction_logits.float()  # [B, P, V]
        w = batch["mlm_weights"].float()  # [B, P]
        nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["mlm_ids"].flatten(), reduction="none")
        sop_logits, sop_y = out.sop_logits.float(), batch["sentence_order_label"].view(-1)
        sums += torch.stack([t.double() for t in (  # each batch's fp32 sums, added up in fp64
            (nll * w.flatten()).sum(), ((logits.argmax(-1) == batch["mlm_ids"]).float() * w).sum(), w.sum(),
            torch.nn.functional.cross_entropy(sop_logits, sop_y, reduction="sum"),
            (sop_logits.argmax(-1) == sop_y).sum(),
            torch.tensor(sop_y.numel(), device=d.device))])
    model.train(was_training)
    nll, correct, weight, sop_nll, sop_correct, sequences = D.all_reduce_sum(sums, d).tolist()
    mlm_w, seqs = max(weight, 1e-9), max(sequences, 1)
    out = {"mlm_loss": nll / mlm_w, "mlm_accuracy": correct / mlm_w}
    if cfg.objective != "none":  # the sentence task's metrics under its own name: sop_* or nsp_*
        out.update({f"{cfg.objective}_loss": sop_nll / seqs, f"{cfg.objective}_accuracy": sop_correct / seqs})
    return {**out, "examples": int(sequences)}


def _num_examples(dataset) -> int:
    """Examples per epoch over all processes (``PretrainingDataset.num_examples``; ``len`` for other datasets)."""
    n = getattr(dataset, "num_examples", None)
    return int(n if n is not None else len(dataset))
