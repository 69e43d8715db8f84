"""The fine-tuning loop: AdamW, linear warmup then linear decay, dynamic padding with length-grouped batches,
evaluation every N steps keeping the best dev checkpoint, early stopping, progress bars.

The optimizer and schedule are the official ones (``litebert.optim``: AdamW without bias correction, LayerNorm and
biases excluded from weight decay 0.01, lr warms up linearly and decays linearly to 0 at the last step, gradients
clipped to global norm 1.0 — google-research/albert ``optimization.py``). One plain loop, no callbacks.

It runs on any device and on many processes with the pretraining loop's machinery (`litebert.train.distributed`,
`litebert.train.checkpoint`, `litebert.train.metrics`), in its vocabulary: ``batch_size`` examples per optimizer
step = ``micro_batch`` x accumulation x processes. The batches of epoch ``e`` are drawn from an rng seeded with
(seed, e), so step ``s``'s examples depend only on (seed, s): resume is exact, and each step's batch is cut into
``accumulation x processes`` contiguous micro-batches, process ``r`` taking the ``r``-th run of them. Each
micro-batch's loss (a mean over its examples, or over its labelled tokens for token classification) is weighted by
its share of the step's examples (tokens), so micro-batching gives the gradient of one big batch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from litebert.checks import AT_LEAST_0, AT_LEAST_1, POSITIVE, check_fields
from litebert.errors import CheckpointError, ConfigError
from litebert.finetune.features import IGNORE, collate, length_grouped_batches, length_of, random_batches, sorted_batches
from litebert.padding import prepare_batch, resolve_attention
from litebert.optim import build_optimizer, build_scheduler
from litebert.train import distributed as D
from litebert.train.checkpoint import check_compatible, checkpoint_path, resume_checkpoint, save_checkpoint
from litebert.train.device import autocast_dtype
from litebert.train.loop import _rng_state, _set_rng_state
from litebert.train.metrics import MetricsWriter
from litebert.train.signals import StopSignals

TRAIN_COLUMNS = ["step", "loss", "lr", "grad_norm", "examples_per_s", "examples", "elapsed_s", "skipped_steps",
                 "loss_scale"]  # loss_scale: fp16 only


@dataclass
class TrainArgs:
    lr: float
    batch_size: int  # examples per optimizer step, over all processes (the presets' hyperparameter)
    train_steps: int
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    eval_every: int = 100
    patience: int | None = None  # stop after this many evaluations without improvement (None: never)
    seed: int = 0
    group_by_length: bool = True
    pad_to: int | None = None  # fixed pad-to-max-length batches (the common HF recipe) instead of dynamic padding
    skip_padding: bool = True  # dense layers on real tokens only when the loss never reads padding (False: as HF)
    eval_batch_size: int = 64
    progress: bool = True
    micro_batch: int | None = None  # examples per forward/backward on one process (None: batch_size / processes)
    precision: str = "auto"  # autocast: auto | fp32 | bf16 | fp16 (`litebert.train.device.autocast_dtype`)
    log_every: int = 10  # a train record in metrics.jsonl every N steps
    save_every: int = 0  # a checkpoint every N steps (0: only at evaluations and on SIGTERM/SIGINT)

    # Fields that shape the trajectory: resuming with any of them changed is refused (micro_batch is not one: it
    # changes only the order of floating-point sums).
    TRAJECTORY = ("lr", "batch_size", "train_steps", "warmup_steps", "weight_decay", "max_grad_norm", "eval_every",
                  "patience", "seed", "group_by_length", "pad_to", "skip_padding", "precision")

    def __post_init__(self) -> None:
        check_fields(self, {"lr": POSITIVE, "batch_size": AT_LEAST_1, "train_steps": AT_LEAST_1,
                            "warmup_steps": AT_LEAST_0, "weight_decay": AT_LEAST_0, "max_grad_norm": POSITIVE,
                            "eval_every": AT_LEAST_1, "patience": AT_LEAST_1, "seed": AT_LEAST_0,
                            "pad_to": AT_LEAST_1, "eval_batch_size": AT_LEAST_1, "micro_batch": AT_LEAST_1,
                            "log_every": AT_LEAST_1, "save_every": AT_LEAST_0})

    def accumulation(self, world_size: int) -> tuple[int, int]:
        """(micro batch, micro-batches per process per step); the batch must split evenly."""
        micro = self.micro_batch or max(1, self.batch_size // world_size)
        per_step = micro * world_size
        if self.batch_size % per_step:
            raise ConfigError(f"--batch-size {self.batch_size} is not a multiple of --micro-batch {micro} x "
                              f"{world_size} process(es) = {per_step}; change --batch-size or --micro-batch")
        return micro, self.batch_size // per_step


def steps_for(n_examples: int, batch_size: int, epochs: float) -> int:
    return max(1, math.ceil(n_examples / batch_size * epochs))


def run_identity(model: torch.nn.Module, args: TrainArgs, features: list[dict], extra: dict | None = None) -> dict:
    """What a checkpoint records of its run, compared on resume (`check_compatible`): the model config, the
    settings that shape the trajectory (``extra``: e.g. task and labels), and a fingerprint of the features."""
    h = hashlib.sha256()
    for f in features:
        h.update(json.dumps(f, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
                 .encode())
    return {"model_config": model.config.to_dict(),
            "train": {**{k: getattr(args, k) for k in args.TRAJECTORY}, **(extra or {})}, "data": h.hexdigest()}


def choose_checkpoint(out_dir: str | Path, identity: dict, dist: D.Distributed) -> tuple | None:
    """Rank 0 picks the newest checkpoint in ``out_dir/checkpoints`` that verifies and checks it against
    ``identity``, before anything is written; every rank raises if it refuses. None: no checkpoint yet."""
    return resume_checkpoint(Path(out_dir) / "checkpoints",
                             lambda found: check_compatible(found[2], identity, found[1]), dist)


def _plain(x):
    """Metrics as plain JSON values (numpy floats become floats), so that checkpoints load with weights_only."""
    return json.loads(json.dumps(x, default=float))


def _weight(f: dict) -> int:
    """What a feature counts for in its head's mean loss: its labelled tokens (token classification), else 1."""
    labels = f.get("labels")
    return sum(1 for y in labels if y != IGNORE) if isinstance(labels, list) else 1


def train(model: torch.nn.Module, features: list[dict], args: TrainArgs,
          evaluate: Callable[[torch.nn.Module], dict] | None = None, metric: str | None = None,
          save: Callable[[torch.nn.Module, int, dict], None] | None = None, pad_id: int = 0,
          log: Callable[[str], None] = print, *, out_dir: str | Path | None = None, dist: D.Distributed | None = None,
          identity: dict | None = None, resume_from: tuple | None = None, stop_after: int | None = None,
          keep_checkpoints: bool = False) -> dict:
    """Train for ``args.train_steps`` updates; every ``eval_every`` steps (and at the end) call ``evaluate(model)``
    (rank 0 only, under the training autocast) and, when ``metrics[metric]`` improves, ``save(model, step, metrics)``.
    Without ``evaluate`` the final model is saved.

    ``out_dir``: the run folder for ``metrics.jsonl``/CSV and ``checkpoints/`` (None: neither). Checkpoints are
    written after every evaluation, every ``save_every`` steps and on SIGTERM/SIGINT (which then end the call after
    the current step); with ``keep_checkpoints`` also at the end. ``resume_from``: the (step, path, state) of
    `choose_checkpoint` to continue from. ``identity``: what checkpoints record (`run_identity`). ``stop_after``:
    leave (with a checkpoint) after this many steps in this call, as on SIGTERM — for tests.
    Returns ``{"best_step", "best_metrics", "history", "steps", "stopped_early", "interrupted", "signal"}``."""
    if not features:
        raise ValueError("no training features")
    _check_ids(features, model)  # here, once: on a GPU the loop skips the model's own value checks
    d = dist or D.Distributed()
    micro, accum = args.accumulation(d.world_size)
    amp = autocast_dtype(args.precision, d.device)
    model.to(d.device)
    lengths = [length_of(f) for f in features]
    weights = [_weight(f) for f in features]
    optimizer = build_optimizer(model, "adamw", lr=args.lr, weight_decay=args.weight_decay)
    scheduler = build_scheduler(optimizer, args.train_steps, args.warmup_steps)
    scaler = torch.amp.GradScaler(d.device.type, enabled=amp is torch.float16)
    history, best, best_step, bad_evals, step, skipped, elapsed = [], None, None, 0, 0, 0, 0.0
    stopped_early = False
    torch.manual_seed(args.seed + d.rank)  # dropout masks (differ per process, as pretraining's)
    if resume_from is not None:
        state = resume_from[2]
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        step, skipped, elapsed = state["step"], state["skipped_steps"], state["elapsed_s"]
        best, best_step, bad_evals, history = state["best_metrics"], state["best_step"], state["bad_evals"], \
            state["history"]
        if len(state["rng"]) == d.world_size:
            _set_rng_state(state["rng"][d.rank], d.device)
        else:  # another number of processes: batches are unchanged, dropout masks are not
            torch.manual_seed(args.seed + d.rank + 1_000_003 * step)
    wrapped = D.wrap(model, d, find_unused_parameters=True)
    ckpt_dir = Path(out_dir) / "checkpoints" if out_dir is not None else None
    writer = MetricsWriter(Path(out_dir), enabled=d.is_main, resume_step=step if resume_from else None,
                           columns={"train": TRAIN_COLUMNS, "eval": None}) if out_dir is not None else None

    @functools.lru_cache(maxsize=2)
    def epoch_batches(epoch: int) -> list[list[int]]:
        rng = np.random.default_rng([args.seed, epoch])  # batch order from (seed, epoch): exact on resume
        return (length_grouped_batches(lengths, args.batch_size, rng) if args.group_by_length
                else random_batches(len(features), args.batch_size, rng))

    per_epoch = math.ceil(len(features) / args.batch_size)  # batches per epoch, for both orders

    def step_batch(s: int) -> list[int]:
        return epoch_batches(s // per_epoch)[s % per_epoch]

    def record(split: str, values: dict) -> None:
        if writer is not None:
            writer.log(split, values)

    def run_eval() -> bool:
        """Rank 0 evaluates and saves; True (on every rank) when early stopping says stop."""
        nonlocal best, best_step, bad_evals
        stop_now = False
        if d.is_main:
            with torch.autocast(d.device.type, dtype=amp, enabled=amp is not None):
                metrics = _plain(evaluate(model))
            model.train()
            history.append({"step": step, **metrics})
            record("eval", {"step": step, **metrics})
            value = metrics[metric]
            improved = best is None or value > best[metric]
            log(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
                + (" (best)" if improved else ""))
            if improved:
                best, best_step, bad_evals = metrics, step, 0
                if save is not None:
                    save(model, step, metrics)
            else:
                bad_evals += 1
            stop_now = args.patience is not None and bad_evals >= args.patience
        return bool(D.broadcast_int(int(stop_now), d))

    def checkpoint() -> None:
        if ckpt_dir is None:
            return
        rngs = D.all_gather(_rng_state(d.device), d)  # collective: every rank takes part, rank 0 writes
        error = None
        if d.is_main:
            try:
                save_checkpoint(ckpt_dir, step, {
                    **(identity or {}), "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": rngs,
                    "best_metrics": best, "best_step": best_step, "bad_evals": bad_evals, "history": history,
                    "skipped_steps": skipped, "elapsed_s": elapsed}, keep_last=2)
            except CheckpointError as e:
                error = e
        D.barrier(d)
        if error is not None:
            raise error

    # ---- SIGTERM/SIGINT: finish the current step, save, leave. The flag is combined over ranks every step.
    stop = StopSignals()

    interrupted, steps_this_call = False, 0
    # Heads whose loss never reads padded tokens (all but SQuAD's) skip them: same loss and gradients, less work.
    try:
        skipping = args.skip_padding and not model.LOSS_READS_PADDING
        varlen = resolve_attention("auto", d.device, amp, model.config, training=True) == "varlen"
        if True:
            model.train()
            bar = tqdm(total=args.train_steps, initial=step, desc="fine-tuning",
                       disable=not (args.progress and d.is_main), dynamic_ncols=True)
            loss_ema = None
            while step < args.train_steps:
                t0 = time.perf_counter()
                idx = step_batch(step)
                total = sum(weights[i] for i in idx)  # the step's loss is a mean over all of these
                # [weighted loss, examples, stop flag], summed over micro-batches then processes
                stats = torch.zeros(3, dtype=torch.float64)
                loss_sum = torch.zeros((), dtype=torch.float64, device=d.device)
                parts = np.array_split(np.asarray(idx), accum * d.world_size)[d.rank * accum:(d.rank + 1) * accum]
                for j, part in enumerate(parts):
                    # a batch shorter than accumulation x processes (an epoch's last) leaves some parts empty:
                    # they run one example with weight 0, so that every process takes part in the gradient sync
                    share = sum(weights[i] for i in part) / max(total, 1)
                    batch = prepare_batch(collate([features[i] for i in (part if len(part) else idx[:1])], pad_id,
                                                  args.pad_to), d.device, pack=skipping, varlen=varlen)
                    with D.no_sync(wrapped, sync=j == accum - 1), \
                            torch.autocast(d.device.type, dtype=amp, enabled=amp is not None):
                        loss = wrapped(**batch).loss.float()
                    # DDP averages gradients over processes; x world_size makes it the sum of the weighted shares
                    scaler.scale(loss * (share * d.world_size)).backward()
                    loss_sum = loss_sum + loss.detach().double() * share
                    stats[1] += len(part)
                stats[0] = loss_sum.item()  # one read per step, not per micro-batch
                stats[2] = 1.0 if stop.signal is not None else 0.0
                stats = D.all_reduce_sum(stats.to(d.device), d).cpu()
                scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm).item()
                scale = scaler.get_scale() if scaler.is_enabled() else None
                if math.isfinite(grad_norm) or scaler.is_enabled():
                    scaler.step(optimizer)  # fp16: skipped (and the scale lowered) when a gradient is inf/NaN
                    scaler.update()
                if not math.isfinite(grad_norm):
                    skipped += 1
                    if not scaler.is_enabled():
                        warnings.warn(f"step {step + 1}: non-finite loss/gradient norm ({grad_norm}); step skipped",
                                      stacklevel=2)
                lr = scheduler.get_last_lr()[0]
                optimizer.zero_grad(set_to_none=True)
                with warnings.catch_warnings():  # an fp16 step the scaler skipped still advances the schedule
                    warnings.simplefilter("ignore", UserWarning)
                    scheduler.step()
                step += 1
                steps_this_call += 1
                dt = time.perf_counter() - t0
                elapsed += dt
                loss_value = stats[0].item()
                loss_ema = loss_value if loss_ema is None else 0.98 * loss_ema + 0.02 * loss_value
                if step % args.log_every == 0 or step == args.train_steps:
                    record("train", {"step": step, "loss": loss_value, "lr": lr, "grad_norm": grad_norm,
                                     "examples_per_s": stats[1].item() / dt, "examples": int(stats[1].item()),
                                     "elapsed_s": round(elapsed, 3), "skipped_steps": skipped,
                                     **({"loss_scale": scale} if scale is not None else {})})
                bar.update(1)
                bar.set_postfix(loss=f"{loss_ema:.4f}")
                evaluated = evaluate is not None and step % args.eval_every == 0 and step < args.train_steps
                if evaluated and run_eval():
                    stopped_early = True
                    break
                stopping = stats[2].item() > 0 or (stop_after is not None and steps_this_call >= stop_after)
                if stopping or evaluated or (args.save_every and step % args.save_every == 0):
                    try:
                        checkpoint()
                    except CheckpointError as e:  # e.g. a full disk: the earlier checkpoints are intact
                        if stopping:
                            raise
                        print(f"warning: {e}; training continues", file=sys.stderr, flush=True)
                if stopping and step < args.train_steps:
                    interrupted = True
                    break
            bar.close()
            if not interrupted:
                if evaluate is not None and not stopped_early:
                    run_eval()
                elif evaluate is None:
                    best, best_step = {}, step
                    if save is not None and d.is_main:
                        save(model, step, {})
                if keep_checkpoints:
                    checkpoint()
    finally:
        if writer is not None:
            writer.close()
        stop.restore()
    return {"best_step": best_step, "best_metrics": best, "history": history, "steps": step,
            "stopped_early": stopped_early, "interrupted": interrupted, "signal": stop.signal}


@torch.no_grad()
def predict_outputs(model: torch.nn.Module, features: list[dict], batch_size: int = 64, pad_id: int = 0,
                    progress: bool = False, amp: torch.dtype | None = None,
                    max_tokens: int | None = None) -> list[dict[str, np.ndarray]]:
    """Run the model over ``features`` (batched by length, order restored) on the model's device, under
    ``torch.autocast(amp)`` when ``amp`` is a dtype. ``max_tokens``: batches are cut by size, up to ``batch_size``
    rows of at most this many tokens together (`features.sorted_batches`). Per feature, each output array (float32 numpy) is trimmed to the
    feature's own length: ``logits`` ([C], [L, C] tokens, [K] choices) or ``start_logits``/``end_logits`` [L]
    (+ ``na_logits`` scalar for SQuAD v2)."""
    model.eval()
    device = next(model.parameters()).device
    results: list[dict | None] = [None] * len(features)
    lengths = [length_of(f) for f in features]
    rows = [len(f["input_ids"]) if f["input_ids"] and isinstance(f["input_ids"][0], list) else 1
            for f in features]  # sequences per feature (the choices of multiple choice)
    batches = sorted_batches(lengths, batch_size, max_tokens, rows)
    _check_ids(features, model)
    # Every output is trimmed to its input's length below, so the dense layers (and, on a GPU, attention: varlen)
    # run on the real tokens only. Outputs stay on the device until every batch is queued: a GPU is never waited for
    # between batches (features come from litebert's tokenizer: no value checks either).
    pending = []
    varlen = resolve_attention("auto", device, amp or next(model.parameters()).dtype, model.config,
                               training=False) == "varlen"
    if True:
        for idx in tqdm(batches, desc="evaluating", disable=not progress, leave=False):
            batch = collate([features[i] for i in idx], pad_id)
            for key in ("labels", "start_positions", "end_positions", "is_impossible"):
                batch.pop(key, None)
            batch = prepare_batch(batch, device, pack=True, varlen=varlen)
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                out = model(**batch)
            names = ("logits", "start_logits", "end_logits", "na_logits")
            pending.append((idx, {n: _to_host(getattr(out, n).float()) for n in names
                                  if getattr(out, n, None) is not None}))
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the copies to the host are complete
    for idx, outs in pending:
        _collect(outs, idx, lengths, results)
    return results


def _to_host(t: torch.Tensor) -> torch.Tensor:
    """A GPU tensor's copy into pinned host memory, queued behind the GPU's work rather than waited for (read it
    after a synchronize); other tensors as they are."""
    if not t.is_cuda:
        return t
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    return host.copy_(t, non_blocking=True)


def _check_ids(features: list[dict], model: torch.nn.Module) -> None:
    """The encoder's input check, done once here on the host (the loop below skips it on a GPU)."""
    config = getattr(getattr(model, "module", model), "config", None)
    if config is None or not features:
        return
    flat = [i for f in features for row in (f["input_ids"] if isinstance(f["input_ids"][0], list)
                                           else [f["input_ids"]]) for i in row]
    if flat and (max(flat) >= config.vocab_size or min(flat) < 0):
        raise ValueError(f"input_ids contain ids outside [0, vocab_size = {config.vocab_size}): min {min(flat)}, "
                         f"max {max(flat)}; is the tokenizer the model's?")


def _collect(outs: dict, idx: list[int], lengths: list[int], results: list) -> None:
    """Per feature of the batch ``idx``, its outputs as float32 numpy arrays, per-token ones trimmed to its length."""
    arrays = {n: t.cpu().numpy() for n, t in outs.items()}
    for row, i in enumerate(idx):
        r = {}
        for n, a in arrays.items():
            v = a[row]
            if n in ("start_logits", "end_logits") or (n == "logits" and v.ndim == 2):
                v = v[:lengths[i]]  # per-token outputs: drop the padding
            r[n] = v
        results[i] = r
