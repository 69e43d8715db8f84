"""The fine-tuning loop: AdamW, linear warmup then linear decay, dynamic padding with length-grouped batches,
evaluation every N steps keeping the best dev checkpoint, early stopping, progress bars.

The optimizer and schedule are the official ones (``litebert.optim``: AdamW without bias correction, LayerNorm and
biases excluded from weight decay 0.01, lr warms up linearly and decays linearly to 0 at the last step, gradients
clipped to global norm 1.0 — google-research/albert ``optimization.py``). One plain loop, no callbacks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from litebert.checks import AT_LEAST_0, AT_LEAST_1, POSITIVE, check_fields
from litebert.finetune.features import collate, length_grouped_batches, length_of, random_batches, sorted_batches
from litebert.heads import training_skips_padding
from litebert.optim import build_optimizer, build_scheduler


@dataclass
class TrainArgs:
    lr: float
    batch_size: int
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

    def __post_init__(self) -> None:
        check_fields(self, {"lr": POSITIVE, "batch_size": AT_LEAST_1, "train_steps": AT_LEAST_1,
                            "warmup_steps": AT_LEAST_0, "weight_decay": AT_LEAST_0, "max_grad_norm": POSITIVE,
                            "eval_every": AT_LEAST_1, "patience": AT_LEAST_1, "seed": AT_LEAST_0,
                            "pad_to": AT_LEAST_1, "eval_batch_size": AT_LEAST_1})


def steps_for(n_examples: int, batch_size: int, epochs: float) -> int:
    return max(1, math.ceil(n_examples / batch_size * epochs))


def train(model: torch.nn.Module, features: list[dict], args: TrainArgs,
          evaluate: Callable[[torch.nn.Module], dict] | None = None, metric: str | None = None,
          save: Callable[[torch.nn.Module, int, dict], None] | None = None, pad_id: int = 0,
          log: Callable[[str], None] = print) -> dict:
    """Train for ``args.train_steps`` updates; every ``eval_every`` steps (and at the end) call ``evaluate(model)``
    and, when ``metrics[metric]`` improves, ``save(model, step, metrics)``. Without ``evaluate`` the final model is
    saved. Returns ``{"best_step", "best_metrics", "history", "steps", "stopped_early"}``."""
    if not features:
        raise ValueError("no training features")
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)  # dropout masks
    lengths = [length_of(f) for f in features]
    optimizer = build_optimizer(model, "adamw", lr=args.lr, weight_decay=args.weight_decay)
    scheduler = build_scheduler(optimizer, args.train_steps, args.warmup_steps)
    history, best, best_step, bad_evals, step = [], None, None, 0, 0
    stopped_early = False

    def batches():
        while True:  # epochs until the step budget is spent; each epoch reshuffles from the same rng
            order = (length_grouped_batches(lengths, args.batch_size, rng) if args.group_by_length
                     else random_batches(len(features), args.batch_size, rng))
            yield from order

    def run_eval():
        nonlocal best, best_step, bad_evals
        metrics = evaluate(model)
        model.train()
        history.append({"step": step, **metrics})
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
        return args.patience is not None and bad_evals >= args.patience

    # Heads whose loss never reads padded tokens (all but SQuAD's) skip them: same loss and gradients, less work.
    with training_skips_padding(model, args.skip_padding):
        model.train()
        bar = tqdm(total=args.train_steps, desc="fine-tuning", disable=not args.progress, dynamic_ncols=True)
        loss_ema = None
        for idx in batches():
            batch = collate([features[i] for i in idx], pad_id, args.pad_to)
            out = model(**batch)
            loss = out.loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            loss_ema = loss.item() if loss_ema is None else 0.98 * loss_ema + 0.02 * loss.item()
            bar.update(1)
            bar.set_postfix(loss=f"{loss_ema:.4f}")
            if evaluate is not None and step % args.eval_every == 0 and step < args.train_steps:
                if run_eval():
                    stopped_early = True
                    break
            if step >= args.train_steps:
                break
        bar.close()
        if evaluate is not None and not stopped_early:
            run_eval()
        elif evaluate is None and save is not None:
            save(model, step, {})
    return {"best_step": best_step, "best_metrics": best, "history": history, "steps": step,
            "stopped_early": stopped_early}


@torch.no_grad()
def predict_outputs(model: torch.nn.Module, features: list[dict], batch_size: int = 64, pad_id: int = 0,
                    progress: bool = False, amp: torch.dtype | None = None) -> list[dict[str, np.ndarray]]:
    """Run the model over ``features`` (batched by length, order restored) on the model's device, under
    ``torch.autocast(amp)`` when ``amp`` is a dtype. Per feature, each output array (float32 numpy) is trimmed to the
    feature's own length: ``logits`` ([C], [L, C] tokens, [K] choices) or ``start_logits``/``end_logits`` [L]
    (+ ``na_logits`` scalar for SQuAD v2)."""
    model.eval()
    device = next(model.parameters()).device
    results: list[dict | None] = [None] * len(features)
    lengths = [length_of(f) for f in features]
    for idx in tqdm(sorted_batches(lengths, batch_size), desc="evaluating", disable=not progress, leave=False):
        batch = collate([features[i] for i in idx], pad_id)
        for key in ("labels", "start_positions", "end_positions", "is_impossible"):
            batch.pop(key, None)
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            out = model(**batch)
        names = [n for n in ("logits", "start_logits", "end_logits", "na_logits") if getattr(out, n, None) is not None]
        arrays = {n: getattr(out, n).float().cpu().numpy() for n in names}
        for row, i in enumerate(idx):
            r = {}
            for n, a in arrays.items():
                v = a[row]
                if n in ("start_logits", "end_logits") or (n == "logits" and v.ndim == 2):
                    v = v[:lengths[i]]  # per-token outputs: drop the padding
                r[n] = v
            results[i] = r
    return results
