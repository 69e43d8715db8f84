"""Where a model runs, decided once where a command starts: the processes and device, the autocast dtype, the
attention kernel and whether the model is compiled (`Runtime`).

Training resolves it with `Runtime.resolve` (under torchrun, for its processes); every command and pipeline that
runs a model without training it (evaluate, predict, embed, fill-mask, the pipelines, evaluate-pretraining, analyze
transitions) calls `Runtime.for_inference`. So ``device``, ``precision``, ``attention`` and ``compile`` mean the same
everywhere and are refused with the same one-line `ConfigError`, before anything is written:

    a device this machine lacks                     resolve_device        ("cuda" without a GPU, "cuda:3" of 2)
    fp16 off CUDA, bf16 on a GPU without it         autocast_dtype        (bf16 autocast on a CPU is allowed)
    varlen where the flash kernel cannot run        resolve_attention     (a CPU, fp32, an old GPU, a head size)
    compile on a CPU without a C++ compiler         check_compilable
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from litebert.engine import distributed as D
from litebert.engine.device import PRECISIONS, autocast_dtype, resolve_device  # noqa: F401  (reachable from here)
from litebert.errors import ConfigError
from litebert.padding import ATTENTION, resolve_attention  # noqa: F401


@dataclass(frozen=True)
class Runtime:
    """Where a run executes: the processes and device (``dist``), the autocast dtype (``amp``; None: fp32), the
    attention (``sdpa`` or ``varlen``) and, for inference, whether the model is compiled (training compiles in
    `litebert.engine.step.setup`)."""

    dist: D.Distributed
    amp: Optional[torch.dtype]
    attention: str
    compile: bool = False

    @classmethod
    def resolve(cls, dist: D.Distributed, precision: str, attention: str, config, training: bool) -> "Runtime":
        """A training run's runtime: the processes ``dist`` (`litebert.engine.distributed.from_environment`), the
        ``precision`` and ``attention`` resolved for ``config`` (``training``: attention dropout rules varlen out)."""
        amp = autocast_dtype(precision, dist.device)
        return cls(dist, amp, resolve_attention(attention, dist.device, amp, config, training))

    @classmethod
    def for_inference(cls, config, device: Optional[str] = None, precision: str = "auto", attention: str = "auto",
                      compile: bool = False) -> "Runtime":
        """The runtime of a command that runs the model of ``config`` without training it, from the user's values:
        ``device`` (None or ``auto``: CUDA when available, else the CPU), ``precision`` (``auto``: fp32 on a CPU,
        bf16 on GPUs that have it, else fp16), ``attention`` (``auto``: varlen where it runs, else sdpa) and
        ``compile`` (torch.compile, on the padded layout). One process."""
        dev = resolve_device(device)
        amp = autocast_dtype(precision, dev)
        chosen = resolve_attention(attention, dev, amp, config, training=False)
        if compile:
            check_compilable(dev)
        return cls(D.Distributed(device=dev), amp, chosen, compile)

    @classmethod
    def of_model(cls, model: nn.Module, amp: Optional[torch.dtype] = None, varlen: bool = False) -> "Runtime":
        """The runtime a caller already chose, for a model already placed: its parameters' device, ``amp`` and the
        attention (``varlen`` or sdpa), as a training run hands them to its dev evaluation."""
        device = next(model.parameters()).device
        return cls(D.Distributed(device=device), amp, "varlen" if varlen else "sdpa")

    @property
    def device(self) -> torch.device:
        return self.dist.device

    @property
    def varlen(self) -> bool:
        return self.attention == "varlen"

    def describe(self) -> dict:
        """The runtime as a run's settings record it."""
        return {"device": str(self.dist.device), "processes": self.dist.world_size,
                "precision": str(self.amp).replace("torch.", "") if self.amp else "fp32", "attention": self.attention}

    def autocast(self):
        """Autocast to ``amp``. fp32 (None) opens no autocast of its own: ``torch.autocast(enabled=False)`` would
        switch off a caller's (a training run evaluating under its own), and a model whose attention was chosen for
        half precision would then run in fp32."""
        if self.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.dist.device.type, dtype=self.amp)

    def place(self, model: nn.Module) -> nn.Module:
        """``model`` on the device, in eval mode, compiled when asked (in place: its names and state_dict stay
        those of the plain model)."""
        model.to(self.dist.device).eval()
        if self.compile:
            model.compile()
        return model


def check_compilable(device: torch.device) -> None:
    """torch.compile on CPU generates C++: fail at the start with a clear message, not at the first step."""
    if device.type == "cpu" and not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        raise ConfigError("{compile:flag}: torch.compile on the CPU needs a C++ compiler (g++ or clang++) on PATH; "
                          "install one or run without it", compile=True)
