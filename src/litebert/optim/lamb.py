"""LAMB and AdamW exactly as the official ALBERT code updates weights.

Official reference: google-research/albert ``lamb_optimizer.py`` (LAMBOptimizer) and ``optimization.py``
(AdamWeightDecayOptimizer). For each parameter ``w`` with gradient ``g`` (already clipped to global norm 1.0 by the
loop):

    m = β1·m + (1-β1)·g                      # no bias correction (the official code has none)
    v = β2·v + (1-β2)·g²
    u = m / (sqrt(v) + ε)                    # ε outside the sqrt, 1e-6
    u = u + λ·w          unless w is excluded from weight decay  (decoupled decay, inside the update)
    r = ‖w‖/‖u‖          unless w is excluded from layer adaptation; r = 1 when either norm is 0; no clamp
    w = w - lr·r·u                           # AdamW: r ≡ 1

The official code excludes ``LayerNorm``/``layer_norm``/``bias`` from weight decay, and, because its
``exclude_from_layer_adaptation`` defaults to the same list, from the trust ratio too. Which parameters are excluded is
decided once, when the parameter groups are built (``param_groups.py``): each group carries ``weight_decay`` and
``adapt`` flags, so the optimizer itself knows nothing of names.

``bias_correction=True`` divides m and v by (1-β1^t) and (1-β2^t) as in Adam/the LAMB paper; it is off by default
because the official ALBERT recipe has none.

The step runs each parameter group as a few ``torch._foreach_*`` calls over all its tensors (bucketed by device and
dtype): moments, direction, decay, per-tensor norms (``_foreach_norm``), trust ratios as one stacked tensor through
``torch.where`` and the update, with no host synchronisation; ``foreach=False`` keeps the per-tensor loop, the
reference the foreach path is tested against.

``step(finite=...)`` is the training engine's non-finite policy decided on the device (`litebert.engine.step`): given
a boolean tensor that is False when the step's gradient norm was not finite, the step leaves the weights, both moments
and the step count exactly as they were, without the host ever reading the flag (which would make it wait for the
device every step). Where the flag is True the arithmetic is the plain step's, bit for bit: the gradients pass
through ``torch.where``, the moments' decay factors and the update are multiplied by tensors holding the plain
step's values (β, 1.0), and the step count, then a tensor on the device, feeds the bias correction with the same
values. Where it is False the gradients are zeros, the decay factors 1.0 and the update times 0.0.
"""

from __future__ import annotations

from typing import Optional

import torch

from litebert.errors import ConfigError


def _check(lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    if not lr >= 0.0:
        raise ConfigError(f"optimizer: lr must be >= 0, got {lr}")
    if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
        raise ConfigError(f"optimizer: betas must lie in [0, 1), got {betas}")
    if not eps > 0.0:
        raise ConfigError(f"optimizer: eps must be > 0, got {eps}")
    if not weight_decay >= 0.0:
        raise ConfigError(f"optimizer: weight_decay must be >= 0, got {weight_decay}")


class Lamb(torch.optim.Optimizer):
    """Layer-wise Adaptive Moments (You et al. 2019) in the official ALBERT form (see module docstring).

    Param-group options: ``lr``, ``betas``, ``eps``, ``weight_decay``, ``adapt`` (apply the trust ratio; False for
    LayerNorm/bias in the official setup), ``bias_correction``. ``foreach`` (not a group option, so checkpoints do not
    record it): None or True runs the multi-tensor step, False the per-tensor reference loop; both give the same
    result and the same state (``step``, ``exp_avg``, ``exp_avg_sq`` per parameter).
    """

    layer_adaptation = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.01, adapt: bool = True, bias_correction: bool = False,
                 foreach: bool | None = None):
        _check(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=adapt,
                        bias_correction=bias_correction)
        super().__init__(params, defaults)
        self.foreach = foreach is None or bool(foreach)

    @torch.no_grad()
    def step(self, closure=None, *, finite: Optional[torch.Tensor] = None):
        """One update of every parameter with a gradient. ``finite``: a 0-dim boolean tensor on the parameters'
        device; where it is False nothing changes (the module docstring), decided without reading it."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if self.foreach:
                self._step_group_foreach(group, finite)
            else:
                self._step_group_reference(group, finite)
        return loss

    def _step_group_reference(self, group: dict, finite: Optional[torch.Tensor] = None) -> None:
        """One tensor at a time: the plain transcription of the official update."""
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("Lamb does not support sparse gradients")
            gate = _Gate.of(finite, p, beta1, beta2)
            update = _adam_direction(self.state[p], p, group, beta1, beta2, gate)
            if group["weight_decay"] != 0.0:
                update.add_(p.to(update.dtype), alpha=group["weight_decay"])
            if self.layer_adaptation and group["adapt"]:
                update.mul_(_trust_ratio(p, update))
            if gate is not None:
                update.mul_(gate.keep)
            p.add_(update.to(p.dtype), alpha=-group["lr"])

    def _step_group_foreach(self, group: dict, finite: Optional[torch.Tensor] = None) -> None:
        """The same arithmetic as ``_step_group_reference``, op for op, over all tensors of a (device, dtype) bucket."""
        buckets: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("Lamb does not support sparse gradients")
            buckets.setdefault((p.device, p.dtype), []).append(p)
        for params in buckets.values():
            self._step_bucket(group, params, _Gate.of(finite, params[0], *group["betas"]))

    def _step_bucket(self, group: dict, params: list[torch.Tensor], gate: Optional["_Gate"] = None) -> None:
        beta1, beta2 = group["betas"]
        dtype = torch.promote_types(params[0].dtype, torch.float32)  # moments in >= fp32, as in _adam_direction
        cast = params[0].dtype != dtype
        states = [self.state[p] for p in params]
        for p, state in zip(params, states):
            _init_state(state, p, dtype, gate)
        if gate is None:
            for state in states:
                state["step"] += 1
            grads = [p.grad.to(dtype) for p in params]  # .to is a no-op (no copy) when the dtype already matches
        else:
            # a list of tensors: the one-Tensor form reads its value on a CPU
            torch._foreach_add_([s["step"] for s in states], [gate.count] * len(states))
            grads = [gate.grad(p.grad.to(dtype)) for p in params]
        ms = [s["exp_avg"] for s in states]
        vs = [s["exp_avg_sq"] for s in states]
        torch._foreach_mul_(ms, beta1 if gate is None else gate.beta1)
        torch._foreach_add_(ms, grads, alpha=1.0 - beta1)
        torch._foreach_mul_(vs, beta2 if gate is None else gate.beta2)
        torch._foreach_addcmul_(vs, grads, grads, value=1.0 - beta2)
        del grads
        if group["bias_correction"]:  # per-tensor factors: Python floats of int steps, or device tensors (gated)
            m_hat = torch._foreach_div(ms, [_correction(beta1, s["step"], dtype) for s in states])
            denom = torch._foreach_div(vs, [_correction(beta2, s["step"], dtype) for s in states])
            torch._foreach_sqrt_(denom)
        else:
            m_hat = ms
            denom = torch._foreach_sqrt(vs)
        torch._foreach_add_(denom, group["eps"])
        updates = torch._foreach_div(m_hat, denom)
        del m_hat, denom
        weights = [p.to(dtype) for p in params] if cast else params
        if group["weight_decay"] != 0.0:
            torch._foreach_add_(updates, weights, alpha=group["weight_decay"])
        if self.layer_adaptation and group["adapt"]:
            w_norm = torch.stack(torch._foreach_norm(weights))
            u_norm = torch.stack(torch._foreach_norm(updates))
            # As _trust_ratio, for all tensors at once; stays on the device (no .item()).
            ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm.clamp_min(torch.finfo(dtype).tiny),
                                torch.ones_like(w_norm))
            torch._foreach_mul_(updates, list(ratio.unbind(0)))
        del weights
        if gate is not None:
            torch._foreach_mul_(updates, gate.keep)
        if cast:
            updates = [u.to(params[0].dtype) for u in updates]
        torch._foreach_add_(params, updates, alpha=-group["lr"])


class AdamW(Lamb):
    """The official ``AdamWeightDecayOptimizer``: the LAMB update without the trust ratio.

    Differs from ``torch.optim.AdamW`` in two official details: no bias correction by default, and ε added to
    sqrt(v) of the uncorrected moment. Fine-tuning in the official code uses this optimizer.
    """

    layer_adaptation = False  # whatever a param group's "adapt" says

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.01, bias_correction: bool = False, foreach: bool | None = None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=False,
                         bias_correction=bias_correction, foreach=foreach)


class _Gate:
    """The tensors through which ``step(finite=...)`` applies a step or leaves everything unchanged, on the device:
    ``keep`` (1.0 or 0.0) multiplies the update and ``count`` (the same, in float64) the step count's increment; the
    moments' decay factors ``beta1``/``beta2`` are β or 1.0; `grad` gives the gradient or zeros."""

    def __init__(self, finite: torch.Tensor, dtype: torch.dtype, beta1: float, beta2: float):
        self.finite = finite
        self.keep = finite.to(dtype)
        self.count = finite.to(torch.float64)
        one = torch.ones((), dtype=dtype, device=finite.device)
        self.beta1 = torch.where(finite, torch.full_like(one, beta1), one)
        self.beta2 = torch.where(finite, torch.full_like(one, beta2), one)

    @classmethod
    def of(cls, finite: Optional[torch.Tensor], p: torch.Tensor, beta1: float, beta2: float) -> Optional["_Gate"]:
        """The gate of parameters like ``p`` (their device; moments in >= fp32), or None for an ungated step."""
        if finite is None:
            return None
        dtype = torch.promote_types(p.dtype, torch.float32)
        return cls(finite.to(p.device), dtype, beta1, beta2)

    def grad(self, g: torch.Tensor) -> torch.Tensor:
        return torch.where(self.finite, g, 0.0)


def _init_state(state: dict, p: torch.Tensor, dtype: torch.dtype, gate: Optional[_Gate]) -> None:
    """A parameter's state on its first step: zero moments and step 0; under a gate the step count is a float64
    tensor on the device (a count kept as a Python int or elsewhere, as a checkpoint restores it, is moved there)."""
    if not state:
        state["step"] = 0
        state["exp_avg"] = torch.zeros_like(p, dtype=dtype, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, dtype=dtype, memory_format=torch.preserve_format)
    step = state["step"]
    if gate is not None and not (isinstance(step, torch.Tensor) and step.device == p.device
                                 and step.dtype == torch.float64):
        state["step"] = torch.as_tensor(step, dtype=torch.float64).to(p.device)


def _correction(beta: float, step, dtype: torch.dtype):
    """Adam's bias correction 1 - β^t: a Python float for an int step; for a device step (gated) the same value as a
    0-dim tensor of the moments' dtype (t at least 1: a gated first step that applied nothing divides by 1 - β)."""
    if not isinstance(step, torch.Tensor):
        return 1.0 - beta ** step
    return (1.0 - beta ** step.clamp_min(1)).to(dtype)


def _adam_direction(state: dict, p: torch.Tensor, group: dict, beta1: float, beta2: float,
                    gate: Optional[_Gate] = None) -> torch.Tensor:
    """Update the moments in ``state`` and return m/(sqrt(v)+ε) as a new (>= fp32) tensor shaped like ``p``."""
    # Moments are kept in at least fp32 whatever the parameter dtype (official: tf.float32 slots); fp64 stays fp64.
    dtype = torch.promote_types(p.dtype, torch.float32)
    grad = p.grad.to(dtype)
    _init_state(state, p, dtype, gate)
    if gate is None:
        state["step"] += 1
    else:
        state["step"].add_(gate.count)
        grad = gate.grad(grad)
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m.mul_(beta1 if gate is None else gate.beta1).add_(grad, alpha=1.0 - beta1)
    v.mul_(beta2 if gate is None else gate.beta2).addcmul_(grad, grad, value=1.0 - beta2)
    if group["bias_correction"]:
        t = state["step"]
        m_hat = m / _correction(beta1, t, dtype)
        v_hat = v / _correction(beta2, t, dtype)
        return m_hat / (v_hat.sqrt() + group["eps"])
    return m / (v.sqrt() + group["eps"])


def _trust_ratio(p: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """‖w‖₂ / ‖u‖₂ over the whole tensor; 1.0 when either norm is 0 (official ``tf.where`` pair), never clamped."""
    w_norm = torch.linalg.vector_norm(p.to(update.dtype))
    u_norm = torch.linalg.vector_norm(update)
    one = torch.ones_like(w_norm)
    # A 0-dim tensor, so no host sync is needed on GPU.
    return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm.clamp_min(torch.finfo(u_norm.dtype).tiny), one)
