"""Counting the host's reads of device values, step by step, on a CPU run.

On a CPU the "device" is the host, so a read costs nothing and nothing shows it; on a GPU each read makes the host
wait for everything queued. `HostReads` counts, on a CPU run, what would be a read on a GPU:

- a *device value* is a tensor computed from a module's parameters or from what a module is given (forward inputs,
  the `Packing` among them; ``nn.Module.__call__`` is wrapped to taint both, for every module called while counting): a
  `TorchDispatchMode` taints every op's outputs when one of its inputs is tainted (the gradients, the optimizer's
  moments, the losses, the norms...). Values the host made itself (a CPU
  mask's lengths, a flag, a collective's host tensor) stay untainted, as they would be on the host beside a GPU;
- a *read* is ``aten._local_scalar_dense`` of a tainted tensor (``.item()``, ``float()``, ``int()``, ``bool()``) or
  ``.tolist()`` / ``.numpy()`` of one (no dispatch: they are patched);
- ``scalars`` counts every ``_local_scalar_dense``, tainted or not: a loop's host-side ``.item()`` calls too (the
  model's own checks of host inputs are switched off, as on a GPU, where they do not run: ``litebert.model._host``).

Reads are attributed to the optimizer step they follow (``reads[s]``: after step ``s``'s update and before step
``s + 1``'s; an optimizer step post hook marks the boundaries), so a test can say "0 after every step but the read
points".
"""

from __future__ import annotations

import collections
import traceback
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class HostReads(TorchDispatchMode):
    def __init__(self, monkeypatch):
        super().__init__()
        self._tainted: dict[int, weakref.ref] = {}
        self.step = 0
        self.reads: collections.Counter = collections.Counter()
        self.scalars: collections.Counter = collections.Counter()
        self.where: collections.Counter = collections.Counter()  # (step, file:line) of each read: for messages
        self._hooks = [register_optimizer_step_post_hook(self._stepped)]
        call = torch.nn.Module.__call__

        def tainting_call(module, *args, **kwargs):
            self._taint_inputs(module, args, kwargs)
            return call(module, *args, **kwargs)

        monkeypatch.setattr(torch.nn.Module, "__call__", tainting_call)
        import litebert.model as M

        monkeypatch.setattr(M, "_host", lambda t: False)  # the model's host checks: as on a GPU, not run
        for name in ("tolist", "numpy"):
            real = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._counting(real))

    # ------------------------------------------------------------------------------------------------ tainting
    def taint(self, t) -> None:
        if isinstance(t, torch.Tensor):
            self._tainted[id(t)] = weakref.ref(t)
        elif hasattr(t, "__dataclass_fields__"):  # a Packing: its index tensors
            for f in t.__dataclass_fields__:
                self.taint(getattr(t, f))

    def tainted(self, t) -> bool:
        r = self._tainted.get(id(t))
        return r is not None and r() is t

    def _taint_inputs(self, module, args, kwargs):
        for p in module.parameters(recurse=False):
            self.taint(p)
        for x in pytree.tree_leaves((args, kwargs)):
            self.taint(x)

    def _stepped(self, optimizer, args, kwargs) -> None:
        self.step += 1

    # ------------------------------------------------------------------------------------------------ counting
    def _read(self) -> None:
        self.reads[self.step] += 1
        frames = [f for f in traceback.extract_stack() if "litebert" in f.filename and "tests" not in f.filename]
        where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
        self.where[(self.step, where)] += 1

    def _counting(self, real):
        mode = self

        def counted(t, *a, **k):
            if mode.tainted(t):
                mode._read()
            return real(t, *a, **k)

        return counted

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        hot = any(self.tainted(x) for x in leaves)
        if func is torch.ops.aten._local_scalar_dense.default:
            self.scalars[self.step] += 1
            if hot:
                self._read()
        out = func(*args, **kwargs)
        if hot:
            for x in pytree.tree_leaves(out):
                self.taint(x)
        return out

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()

    def report(self, steps) -> str:
        """Where the reads after ``steps`` came from, for an assertion's message."""
        return "; ".join(f"after step {s}: {w} x{n}" for (s, w), n in sorted(self.where.items()) if s in steps)
