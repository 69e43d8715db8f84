"""Which parameters get weight decay and the LAMB trust ratio (official ``exclude_from_weight_decay``).

The official ALBERT code excludes every variable whose name matches ``LayerNorm``, ``layer_norm`` or ``bias`` from
weight decay, and (``exclude_from_layer_adaptation`` defaulting to the same list) from LAMB's trust ratio. We match the
same patterns on PyTorch parameter names and, so that a renamed module cannot slip through, also exclude every
parameter owned by an ``nn.LayerNorm``.
"""

from __future__ import annotations

import re

import torch
from torch import nn

EXCLUDE_PATTERNS = ("LayerNorm", "layer_norm", "bias")


def is_excluded(name: str, module: nn.Module | None = None) -> bool:
    """True for parameters the official code keeps out of weight decay and layer adaptation."""
    if isinstance(module, nn.LayerNorm):
        return True
    return any(re.search(p, name) for p in EXCLUDE_PATTERNS)


def param_groups(model: nn.Module, weight_decay: float = 0.01) -> list[dict]:
    """Two optimizer groups: decayed + adapted, and excluded (no decay, trust ratio 1).

    Shared parameters (ALBERT's cross-layer sharing, tied embeddings) appear once: ``named_parameters`` de-duplicates.
    """
    owner: dict[int, nn.Module] = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            owner[id(p)] = module
    decay: list[torch.nn.Parameter] = []
    excluded: list[torch.nn.Parameter] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (excluded if is_excluded(name, owner.get(id(p))) else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay, "adapt": True},
              {"params": excluded, "weight_decay": 0.0, "adapt": False}]
    return [g for g in groups if g["params"]]


def build_optimizer(model: nn.Module, name: str = "lamb", lr: float = 1e-3, weight_decay: float = 0.01,
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                    bias_correction: bool = False) -> torch.optim.Optimizer:
    """The official optimizer setup (β1 0.9, β2 0.999, ε 1e-6, decay 0.01, LayerNorm/bias excluded)."""
    from litebert.errors import ConfigError
    from litebert.optim.lamb import AdamW, Lamb

    groups = param_groups(model, weight_decay)
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, bias_correction=bias_correction)
    if name == "adamw":
        for g in groups:
            g.pop("adapt")
        return AdamW(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, bias_correction=bias_correction)
    raise ConfigError(f"optimizer: unknown name {name!r}; choose 'lamb' or 'adamw'")
