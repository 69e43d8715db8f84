"""The official learning-rate schedule: polynomial decay counted from step 0, with linear warmup overriding it; and
the schedules fine-tuning may choose instead, as Hugging Face's ``lr_scheduler_type`` names them (`SCHEDULES`).

google-research/albert ``optimization.create_optimizer``:

    decayed(t) = (lr - end) · (1 - min(t, T)/T)^power + end        # tf.train.polynomial_decay, end = 0, cycle=False
    lr(t)      = lr · (t - s)/W   if t - s < W  else decayed(t)    # warmup from start_warmup_step s, W steps

``t`` is the number of updates already applied (TF's global_step read before the increment), so the first update uses
lr(0) = 0 when there is warmup — as in the official code. Note the decay does not restart after warmup: at t = W it is
already lr·(1 - W/T), which is the point of "decay counted from step 0".
"""

from __future__ import annotations

import math

import torch

from litebert.errors import ConfigError


def lr_at(step: int, peak_lr: float, total_steps: int, warmup_steps: int = 0, power: float = 1.0,
          end_lr: float = 0.0, start_warmup_step: int = 0) -> float:
    """Learning rate for the update that follows ``step`` completed updates."""
    if total_steps <= 0:
        raise ConfigError(f"schedule: total_steps must be > 0, got {total_steps}")
    if warmup_steps < 0:
        raise ConfigError(f"schedule: warmup_steps must be >= 0, got {warmup_steps}")
    t = min(step, total_steps)
    lr = (peak_lr - end_lr) * (1.0 - t / total_steps) ** power + end_lr
    if warmup_steps:
        since = step - start_warmup_step
        if since < warmup_steps:
            # The official code casts to int32 then float: negative `since` (before the warmup start) gives a
            # negative rate there too; we keep it at 0, the only sensible reading.
            lr = peak_lr * max(since, 0) / warmup_steps
    return lr


def build_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int = 0, power: float = 1.0,
                    end_lr: float = 0.0) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` applying :func:`lr_at` as a factor of each group's initial lr (so per-group lrs are kept)."""
    if end_lr:
        base = {g["lr"] for g in optimizer.param_groups}
        if len(base) != 1:
            raise ConfigError("schedule: end_lr needs all parameter groups to share one peak lr")
        peak = base.pop()
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: lr_at(s, peak, total_steps, warmup_steps, power, end_lr) / peak if peak else 0.0)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(s, 1.0, total_steps, warmup_steps, power))


# Fine-tuning's ``lr_scheduler_type``: "official" is `lr_at` (power 1: linear decay counted from step 0, so at the end
# of warmup the rate is already lr·(1 - W/T)); the others are transformers' curves (``optimization.py``, 4.57) of the
# same names, whose decay starts at the end of warmup. "constant" has no warmup, as HF's has none.
SCHEDULES = ("official", "linear", "cosine", "constant", "constant_with_warmup")


def schedule_at(name: str, step: int, peak_lr: float, total_steps: int, warmup_steps: int = 0) -> float:
    """Learning rate of the schedule ``name`` (`SCHEDULES`) for the update that follows ``step`` completed updates:
    the rate a ``torch.optim.lr_scheduler.LambdaLR`` of HF's ``get_scheduler(name, ...)`` gives after ``step``
    calls of its ``step()``."""
    if name == "official":
        return lr_at(step, peak_lr, total_steps, warmup_steps)
    if name not in SCHEDULES:
        raise ConfigError("{lr_scheduler_type}: choose one of " + ", ".join(repr(s) for s in SCHEDULES),
                          lr_scheduler_type=name)
    if name == "constant":
        return peak_lr
    if step < warmup_steps:
        return peak_lr * (float(step) / float(max(1, warmup_steps)))
    if name == "constant_with_warmup":
        return peak_lr
    if name == "linear":
        return peak_lr * max(0.0, float(total_steps - step) / float(max(1, total_steps - warmup_steps)))
    progress = float(step - warmup_steps) / float(max(1, total_steps - warmup_steps))  # cosine: half a cycle
    return peak_lr * max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
