"""Where a command runs and in what precision: ``--device`` and ``--precision``, shared by every command.

    resolve_device(None)      -> cuda when available, else cpu
    resolve_device("cuda:1")  -> that GPU, or a one-line ConfigError when it is not there
    autocast_dtype("auto", d) -> None (fp32) on CPU; bf16 on GPUs that have it, else fp16
"""

from __future__ import annotations

import torch

from litebert.engine.args import PRECISIONS
from litebert.errors import ConfigError


def resolve_device(name: str | None) -> torch.device:
    """The torch device ``name`` (the ``device`` argument) names: ``cpu``, ``cuda``, ``cuda:N``, ``mps``; None: CUDA
    when available, else CPU. A device this machine does not have is refused here, before anything is read or
    written."""
    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError("{device}: not a device; expected cpu, cuda, cuda:N or mps", device=name) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "this torch build has no CUDA" if torch.version.cuda is None else "no GPU is visible"
            raise ConfigError("{device}: CUDA is not available (" + why + "); use cpu", device=name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError("{device}: " + f"there are {torch.cuda.device_count()} GPU(s) (cuda:0 .. "
                              f"cuda:{torch.cuda.device_count() - 1})", device=name)
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ConfigError("{device}: MPS (Apple GPU) is not available on this machine; use cpu", device=name)
    elif dev.type != "cpu":
        raise ConfigError("{device}: " + f"unsupported device type {dev.type!r}; expected cpu, cuda or mps",
                          device=name)
    return dev


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``, or None for fp32. ``auto``: fp32 on CPU; bf16 on GPUs
    that support it, else fp16 (which then needs loss scaling: ``torch.amp.GradScaler``). bf16 on a GPU that has
    no bfloat16 at all is refused here (autocast would fail at the first forward pass). The one place a precision is
    resolved: a run does it once, where it starts (`litebert.engine.runtime.Runtime`)."""
    if precision not in PRECISIONS:
        raise ConfigError("{precision}: expected one of " + ", ".join(PRECISIONS), precision=precision)
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return None
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("{precision} needs a GPU (loss-scaled float16 autocast is CUDA-only); use fp32 or bf16 on "
                          f"{device.type}", precision=precision)
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("{precision}: this GPU has no bfloat16; use fp16 or fp32", precision=precision)
    return torch.bfloat16 if precision == "bf16" else torch.float16
