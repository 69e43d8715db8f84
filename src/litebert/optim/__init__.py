"""Optimizers (official LAMB and AdamW), parameter groups, and the official learning-rate schedule."""

from litebert.optim.lamb import AdamW, Lamb
from litebert.optim.param_groups import build_optimizer, is_excluded, param_groups
from litebert.optim.schedule import SCHEDULES, build_scheduler, lr_at, schedule_at

__all__ = ["SCHEDULES", "AdamW", "Lamb", "build_optimizer", "build_scheduler", "is_excluded", "lr_at", "param_groups",
           "schedule_at"]
