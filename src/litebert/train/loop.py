"""The pretraining loop: one plain PyTorch function, ``train``, to be read top to bottom.

One optimizer step consumes one *global batch* of ``global_batch`` sequences, split as micro-batches over processes and
accumulation steps: global = micro_batch x accumulation x world_size (the paper's 4096 = e.g. 32 x 16 x 8 GPUs).
Example ``c`` of the run (counted over all steps) is ``dataset.example(c // N, c % N)`` for N examples per epoch (the
dataset shuffles each epoch from its seed), and within a step process ``r`` takes the ``r``-th contiguous slice. So the data a step sees
depends only on (seed, step) — not on the number of processes, and not on whether the run was interrupted — which
is what makes resume exact and 2 processes equal to 1.

Per step: forward/backward every micro-batch (loss / accumulation; DDP syncs gradients on the last), clip the global
gradient norm to 1.0 (official ``clip_by_global_norm``), skip the step if the norm is not finite, set the learning
rate from the official schedule for this step, optimizer step. Then metrics, evaluation and checkpoints at their
intervals, and on SIGTERM/SIGINT a checkpoint and a clean exit.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from litebert.errors import CheckpointError, ConfigError, LitebertError
from litebert.padding import prepare_batch, resolve_attention
from litebert.optim import build_optimizer, lr_at
from litebert.train import distributed as D
from litebert.train.checkpoint import (check_compatible, checkpoint_path, latest_valid, list_checkpoints,
                                      load_checkpoint, save_checkpoint)
from litebert.train.config import TrainConfig
from litebert.train.device import autocast_dtype
from litebert.train.metrics import MetricsWriter, flops_per_sequence, metric_columns, peak_tflops_of
from litebert.train.signals import StopSignals


class TrainingError(LitebertError, RuntimeError):
    """Training cannot go on (e.g. the loss is NaN/inf step after step)."""


def run_identity(model: torch.nn.Module, cfg: TrainConfig, train_data, init: dict | None = None) -> dict:
    """What a checkpoint records of its run, compared on resume (`check_compatible`): model config, the training
    settings that shape the trajectory, the data fingerprint, the weights the run started from (``init``:
    ``{"path", "sha256"}`` of an ``--init-from`` model, None for a random start) and the ``max_steps`` in force."""
    return {"model_config": model.config.to_dict(), "train": cfg.trajectory(), "data": data_fingerprint(train_data),
            "init": init, "max_steps": cfg.max_steps}


def data_fingerprint(dataset) -> str:
    """sha256 identifying the training data. For a dataset on a token store (``dataset.store.manifest``): the
    checksums the store recorded for every file, its counts and tokenizer, and every setting that shapes examples
    (seq_len, objective, seed, masking, dupe_factor...), so any change of the corpus is seen. For other datasets: the
    size and the first examples."""
    store = getattr(dataset, "store", None)
    manifest = getattr(store, "manifest", None)
    if isinstance(manifest, dict):
        settings = {key: getattr(dataset, key, None) for key in (
            "max_seq_length", "objective", "seed", "masked_lm_prob", "max_predictions_per_seq", "max_ngram",
            "short_seq_prob", "dupe_factor", "shuffle", "num_examples")}
        files = {r["name"]: r["sha256"] for s in manifest["shards"] for r in s["files"].values()}
        files.update({name: r["sha256"] for name, r in manifest["aux_files"].items()})
        data = {"tokenizer": manifest["tokenizer"], "dtype": manifest["dtype"], "files": files, "settings": settings,
                **{key: manifest[key] for key in ("num_tokens", "num_sentences", "num_documents")}}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    h = hashlib.sha256(str(_num_examples(dataset)).encode())
    for i in range(min(4, _num_examples(dataset))):
        for key, value in sorted(dataset.example(0, i).items()):
            h.update(key.encode())
            h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()


def _num_examples(dataset) -> int:
    """Examples per epoch over all processes (``PretrainingDataset.num_examples``; ``len`` for other datasets)."""
    n = getattr(dataset, "num_examples", None)
    return int(n if n is not None else len(dataset))


def _precision(cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for fp32 (`litebert.train.device.autocast_dtype`)."""
    try:
        return autocast_dtype(cfg.precision, device)
    except ConfigError as e:
        raise TrainingError(str(e).replace("--precision", "precision", 1)) from None


def _check_compilable(device: torch.device) -> None:
    """torch.compile on CPU generates C++: fail at the start with a clear message, not at the first step."""
    import shutil

    if device.type == "cpu" and not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        raise ConfigError("TrainConfig.compile: torch.compile on the CPU needs a C++ compiler (g++ or clang++) on "
                          "PATH; install one or train without --compile")


def _rng_state(device: torch.device) -> torch.Tensor:
    state = torch.get_rng_state()
    if device.type == "cuda":
        state = torch.cat([state, torch.cuda.get_rng_state(device)])
    return state


def _set_rng_state(state: torch.Tensor, device: torch.device) -> None:
    n = torch.get_rng_state().numel()
    torch.set_rng_state(state[:n].clone())
    if device.type == "cuda":
        torch.cuda.set_rng_state(state[n:].clone(), device)


@torch.no_grad()
def evaluate(model, dataset, collate: Callable, cfg: TrainConfig, d: D.Distributed, amp: torch.dtype | None,
             varlen: bool = False) -> dict:
    """Official eval metrics (run_pretraining ``metric_fn``) on the first ``eval_examples`` held-out examples:
    MLM loss/accuracy weighted by ``mlm_weights`` (padded predictions count 0), SOP loss/accuracy per sequence."""
    n = min(cfg.eval_examples, _num_examples(dataset))
    sums = torch.zeros(6, dtype=torch.float64)  # mlm nll, mlm correct, mlm weight, sop nll, sop correct, sequences
    was_training = model.training
    model.eval()
    for b, start in enumerate(range(0, n, cfg.micro_batch)):
        if b % d.world_size != d.rank:  # batches round-robin over processes, sums reduced below
            continue
        batch = prepare_batch(collate([dataset.example(0, i) for i in range(start, min(start + cfg.micro_batch, n))]),
                              d.device, pack=True, varlen=varlen)
        with torch.autocast(d.device.type, dtype=amp, enabled=amp is not None):
            out = model(**batch)
        logits = out.prediction_logits.float()  # [B, P, V]
        w = batch["mlm_weights"].float()  # [B, P]
        nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["mlm_ids"].flatten(), reduction="none")
        sop_logits, sop_y = out.sop_logits.float(), batch["sentence_order_label"].view(-1)
        sums += torch.tensor([
            (nll * w.flatten()).sum().item(), ((logits.argmax(-1) == batch["mlm_ids"]).float() * w).sum().item(),
            w.sum().item(), torch.nn.functional.cross_entropy(sop_logits, sop_y, reduction="sum").item(),
            (sop_logits.argmax(-1) == sop_y).sum().item(), sop_y.numel()], dtype=torch.float64)
    model.train(was_training)
    sums = D.all_reduce_sum(sums.to(d.device), d).cpu()
    mlm_w, seqs = max(sums[2].item(), 1e-9), max(sums[5].item(), 1)
    out = {"mlm_loss": sums[0].item() / mlm_w, "mlm_accuracy": sums[1].item() / mlm_w}
    if cfg.objective != "none":  # the sentence task's metrics under its own name: sop_* or nsp_*
        out.update({f"{cfg.objective}_loss": sums[3].item() / seqs, f"{cfg.objective}_accuracy": sums[4].item() / seqs})
    return {**out, "examples": int(sums[5].item())}


def train(model: torch.nn.Module, train_data, eval_data, cfg: TrainConfig, out_dir: str | Path, *,
          collate: Callable | None = None, dist: D.Distributed | None = None, resume: bool = False,
          progress: bool = True, stop_after: int | None = None, time_limit: float | None = None,
          resume_from: tuple | None = None, init: dict | None = None, stale_model: bool = False) -> dict:
    """Pretrain ``model`` (an ``AlbertForPreTraining``) and return a summary; writes everything under ``out_dir``.

    ``train_data``/``eval_data``: ``example(epoch, index) -> dict of arrays`` and ``num_examples`` or ``len()``
    (a ``PretrainingDataset`` built with rank 0 of world size 1: the loop itself shares examples out to processes).
    ``resume``: continue from the newest valid checkpoint in ``out_dir/checkpoints`` (a fresh start if there is no
    checkpoint; `CheckpointError`, before anything is written, if there are checkpoints and none verifies; a run
    already at ``max_steps`` returns at once with ``already_complete``). ``resume_from``: the (step, path, state) of
    `latest_valid`, when the caller has already chosen and checked it (``litebert pretrain`` does, before it writes).
    ``stop_after``: leave (with a checkpoint) after this many steps in this call, as on SIGTERM — for tests.
    ``time_limit``: seconds; past it, end early as if ``max_steps`` were reached (checkpoint, final evaluation, export;
    the schedule is not rescaled) — a safety net for time-boxed demos.
    ``init``: where the weights ``model`` holds came from (``{"path", "sha256"}`` of ``--init-from``), recorded in the
    checkpoints and checked on resume. ``max_steps`` may be larger than the checkpoint's: the run goes on under the
    schedule of the new ``max_steps``. ``stale_model``: ``out_dir/model`` is from an earlier end of the run (a finished
    run extended by a larger ``max_steps``), so it does not make a run at ``max_steps`` complete.
    The final model is written to ``out_dir/model`` in the HF folder format.
    """
    if collate is None:
        from litebert.data.pretraining import collate_pretraining as collate
    d = dist or D.Distributed()
    out, ckpt_dir = Path(out_dir), Path(out_dir) / "checkpoints"
    accum = cfg.accumulation(d.world_size)
    amp = _precision(cfg, d.device)
    model.to(d.device)
    if cfg.gradient_checkpointing:
        model.set_gradient_checkpointing(True)
    if cfg.compile:
        _check_compilable(d.device)
        model.compile()  # in place: parameter names, state_dict and checkpoints stay those of the plain model
    optimizer = build_optimizer(model, cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                bias_correction=cfg.bias_correction)
    scaler = torch.amp.GradScaler(d.device.type, enabled=amp is torch.float16)
    identity = run_identity(model, cfg, train_data, init)

    # ---- start or resume. Rank 0 picks the checkpoint (skipping corrupt ones) and every rank loads that one.
    step = data_step = skipped = bad_in_row = 0
    tokens_seen, elapsed = 0, 0.0
    torch.manual_seed(cfg.seed + d.rank)  # dropout masks differ per process, as on TPU cores
    found = None
    if resume and d.is_main:
        found = resume_from if resume_from is not None else latest_valid(ckpt_dir)
    # -1: start at step 0; -2: checkpoints exist but none verifies (refused on every rank, nothing written)
    start_step = D.broadcast_int(found[0] if found else (-2 if resume and d.is_main and list_checkpoints(ckpt_dir)
                                                        else -1), d)
    if start_step == -2:
        raise CheckpointError(f"--resume: none of the checkpoints in {ckpt_dir} verifies (see the warnings above); "
                              f"nothing was changed. Restore a good checkpoint, or start again with --overwrite")
    if start_step >= 0:
        state = found[2] if found else load_checkpoint(checkpoint_path(ckpt_dir, start_step))
        check_compatible(state, identity, checkpoint_path(ckpt_dir, start_step))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        step, data_step, skipped = state["step"], state["data_step"], state["skipped_steps"]
        tokens_seen, elapsed = state["tokens_seen"], state["elapsed_s"]
        rngs = state["rng"]
        if len(rngs) == d.world_size:
            _set_rng_state(rngs[d.rank], d.device)
        else:  # resuming on a different number of processes: data order is unchanged, dropout masks are not
            torch.manual_seed(cfg.seed + d.rank + 1_000_003 * step)
    elif resume and d.is_main:
        warnings.warn(f"--resume: no checkpoint in {ckpt_dir} yet; starting from step 0", stacklevel=2)
    if start_step >= 0 and step >= cfg.max_steps and (out / "model" / "config.json").is_file() and not stale_model:
        # a finished run: nothing to train, nothing to append (without its final model, the end is done again)
        return {"step": step, "interrupted": False, "time_limited": False, "signal": None, "skipped_steps": skipped,
                "tokens_seen": tokens_seen, "elapsed_s": elapsed, "final_eval": None, "already_complete": True}
    wrapped = D.wrap(model, d, find_unused_parameters=cfg.objective == "none")  # "none": the SOP head is unused
    log = MetricsWriter(out, enabled=d.is_main, resume_step=step if start_step >= 0 else None,
                        columns=metric_columns(cfg.objective))

    def checkpoint() -> None:
        rngs = D.all_gather(_rng_state(d.device), d)  # collective: every rank takes part, rank 0 writes
        error = None
        if d.is_main:
            try:
                save_checkpoint(ckpt_dir, step, {
                    **identity, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scaler": scaler.state_dict(), "rng": rngs, "data_step": data_step, "skipped_steps": skipped,
                    "tokens_seen": tokens_seen, "elapsed_s": elapsed}, keep_last=cfg.keep_last)
            except CheckpointError as e:
                error = e
        D.barrier(d)  # reached by every rank, whether the write failed or not
        if error is not None:
            raise error

    # ---- SIGTERM/SIGINT: finish the current step, save, leave. The flag is combined over ranks every step.
    stop = StopSignals()

    n_train = _num_examples(train_data)
    flops_at = functools.lru_cache(maxsize=None)(  # training FLOPs of one sequence of each length
        lambda length: flops_per_sequence(model.config, length, cfg.max_predictions))
    peak = cfg.peak_tflops or (peak_tflops_of(torch.cuda.get_device_name(d.device)) if d.device.type == "cuda" else None)
    final_eval, interrupted, time_limited, call_start = None, False, False, time.perf_counter()
    bar = tqdm(total=cfg.max_steps, initial=step, desc="pretrain", disable=not (progress and d.is_main),
               dynamic_ncols=True)
    # The dense layers skip padded tokens (MLM and SOP losses never read them); compiled: the padded layout
    skipping = cfg.skip_padding and not model.LOSS_READS_PADDING and not cfg.compile
    varlen = resolve_attention("auto", d.device, amp, model.config, training=True) == "varlen"
    try:
        if step == 0 and eval_data is not None:
            log.log("eval", {"step": 0, **evaluate(model, eval_data, collate, cfg, d, amp, varlen)})
        steps_this_call = 0
        while step < cfg.max_steps:
            t0 = time.perf_counter()
            # [loss, mlm loss, sop loss, non-pad tokens, stop flag, time-up flag, model FLOPs], summed over
            # micro-batches then processes: every rank takes the same decision to stop
            stats = torch.zeros(7, dtype=torch.float64)
            losses = torch.zeros(3, dtype=torch.float64, device=d.device)  # read once per step, not per micro-batch
            first = data_step * cfg.global_batch + d.rank * accum * cfg.micro_batch
            for j in range(accum):
                c0 = first + j * cfg.micro_batch  # run-wide index of the micro-batch's first example
                examples = [train_data.example(c // n_train, c % n_train) for c in range(c0, c0 + cfg.micro_batch)]
                batch = collate(examples)
                lengths = batch["attention_mask"].sum(1).tolist()  # on the CPU, before the batch moves
                if cfg.objective == "none":  # MLM only: no sentence-level loss
                    batch.pop("sentence_order_label")
                batch = prepare_batch(batch, d.device, pack=skipping, varlen=varlen)
                with D.no_sync(wrapped, sync=j == accum - 1), \
                        torch.autocast(d.device.type, dtype=amp, enabled=amp is not None):
                    out_ = wrapped(**batch)
                    loss = out_.loss / accum  # mean over the micro-batches of the global batch
                scaler.scale(loss).backward()
                parts = [out_.loss, out_.mlm_loss, out_.sop_loss if out_.sop_loss is not None else out_.loss * 0]
                losses += torch.stack([t.detach() for t in parts]).double()
                stats[3] += sum(lengths)
                stats[6] += sum(flops_at(int(n)) for n in lengths)
            stats[:3] = losses.cpu()
            stats[4] = 1.0 if stop.signal is not None else 0.0
            stats[5] = 1.0 if time_limit is not None and time.perf_counter() - call_start > time_limit else 0.0
            stats = D.all_reduce_sum(stats.to(d.device), d).cpu()
            scaler.unscale_(optimizer)
            # Official: tf.clip_by_global_norm(grads, 1.0) over all parameters, after the cross-replica average.
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm).item()
            data_step += 1
            if not math.isfinite(grad_norm) and not scaler.is_enabled():
                # NaN/inf: drop this batch's gradients and move on to the next batch (same on every rank: the norm
                # is computed from the already-averaged gradients).
                optimizer.zero_grad(set_to_none=True)
                skipped, bad_in_row = skipped + 1, bad_in_row + 1
                warnings.warn(f"step {step + 1}: non-finite loss/gradient norm ({grad_norm}); step skipped "
                              f"({bad_in_row} in a row)", stacklevel=2)
                if bad_in_row >= cfg.max_bad_steps:
                    raise TrainingError(
                        f"{bad_in_row} steps in a row had a non-finite loss or gradient (last at step {step + 1}); "
                        f"stopping. Lower --lr, raise --warmup-steps, or use --precision fp32; resume from the last "
                        f"checkpoint in {ckpt_dir} with --resume")
                continue
            bad_in_row = 0
            lr = lr_at(step, cfg.lr, cfg.max_steps, cfg.warmup_steps, cfg.poly_power)
            for group in optimizer.param_groups:
                group["lr"] = lr
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            steps_this_call += 1

            dt = time.perf_counter() - t0
            elapsed += dt
            tokens_seen += int(stats[3].item())
            n_micro = accum * d.world_size
            record = {"step": step, "loss": stats[0].item() / n_micro, "mlm_loss": stats[1].item() / n_micro}
            if cfg.objective != "none":
                record[f"{cfg.objective}_loss"] = stats[2].item() / n_micro
            record.update({"lr": lr, "grad_norm": grad_norm, "tokens_per_s": stats[3].item() / dt,
                           "tokens": tokens_seen, "elapsed_s": round(elapsed, 3),
                           "tflops": stats[6].item() / dt / 1e12, "skipped_steps": skipped})
            if peak:
                record["mfu"] = record["tflops"] / (peak * d.world_size)
            if step % cfg.log_every == 0:
                log.log("train", record)
            bar.update(1)
            bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)

            if eval_data is not None and cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.max_steps:
                log.log("eval", {"step": step, **evaluate(model, eval_data, collate, cfg, d, amp, varlen)})
            stopping = stats[4].item() > 0 or (stop_after is not None and steps_this_call >= stop_after)
            if stopping or (cfg.save_every and step % cfg.save_every == 0 and step < cfg.max_steps):
                try:
                    checkpoint()
                except CheckpointError as e:  # e.g. a full disk: the earlier checkpoints are intact
                    if stopping:
                        raise
                    print(f"warning: {e}; training continues", file=sys.stderr, flush=True)
            if stopping:
                interrupted = True
                break
            if stats[5].item() > 0 and step < cfg.max_steps:
                time_limited = True
                break
        if not interrupted:
            checkpoint()
            if eval_data is not None:
                final_eval = evaluate(model, eval_data, collate, cfg, d, amp, varlen)
                log.log("eval", {"step": step, **final_eval})
            if d.is_main:
                model.save_pretrained(out / "model")
    finally:
        bar.close()
        log.close()
        stop.restore()
    return {"step": step, "interrupted": interrupted, "time_limited": time_limited, "signal": stop.signal,
            "skipped_steps": skipped, "tokens_seen": tokens_seen, "elapsed_s": elapsed, "final_eval": final_eval,
            "already_complete": False}
