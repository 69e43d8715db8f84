"""Data parallelism as a wrapper: the ONLY module in litebert that imports ``torch.distributed``.

The model knows nothing of parallelism (torchtitan's rule): ``wrap`` puts an unchanged model inside DDP, and the loop
talks to other processes only through the small functions below, which are no-ops in a single process. So the same
entry point runs under ``python`` and under ``torchrun``:

    litebert pretrain ...                                         # one process
    torchrun --nproc_per_node 2 -m litebert.cli pretrain ...      # 2 processes on one machine (gloo on CPU)
    torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 -m litebert.cli pretrain ...

torchrun describes each process through the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR...). Reading it
happens here, at the boundary, once: ``from_environment`` is called by the CLI, never by library code.

Two kinds of values cross processes. Device values (losses, gradients) go through the device's group (NCCL on GPUs).
Host values (a stop flag, a micro-batch size, a decision of rank 0's) go through a gloo group on the host
(`Distributed.host_group`, made beside NCCL's; gloo's own group on CPUs): sending them through NCCL would copy them to
the GPU and read the result back, making the host wait for everything queued there.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    host_group: Any = None  # the gloo group for host values when the default group is NCCL's (None: the default)

    @property
    def is_main(self) -> bool:
        """Only rank 0 logs, writes metrics and saves checkpoints."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def from_environment(env: Mapping[str, str] | None = None, device: str | None = None) -> Distributed:
    """Join the process group torchrun set up (NCCL on GPU, gloo on CPU), or describe a single process."""
    env = os.environ if env is None else env
    world_size = int(env.get("WORLD_SIZE", "1"))
    rank, local_rank = int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0"))
    from litebert.engine.device import resolve_device

    dev = resolve_device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    host_group = None
    if world_size > 1:
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        if dist.get_backend() != "gloo":
            host_group = dist.new_group(backend="gloo")
    return Distributed(rank, world_size, local_rank, dev, host_group)


def wrap(model: nn.Module, d: Distributed, find_unused_parameters: bool = False) -> nn.Module:
    """DDP around the unchanged model when there are several processes; the model itself otherwise.

    ``find_unused_parameters`` stays False where every parameter gets a gradient: MLM + SOP, and every fine-tuning
    head (those that never read the pooler are built without one). Pretraining with objective ``none`` sets it.
    Shared ALBERT blocks are used several times per forward; DDP handles that because we allreduce once per step
    (``no_sync`` on the other micro-batches) and do not use static graphs.
    """
    if not d.enabled:
        return model
    ids = [d.device.index] if d.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids, find_unused_parameters=find_unused_parameters)


def no_sync(model: nn.Module, sync: bool):
    """Skip DDP's gradient allreduce on all micro-batches but the last of an accumulation step."""
    if sync or not isinstance(model, nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()


def all_reduce_sum(t: torch.Tensor, d: Distributed) -> torch.Tensor:
    """Sum a tensor over all processes (in place; returned for convenience)."""
    if d.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_reduce_max(t: torch.Tensor, d: Distributed) -> torch.Tensor:
    if d.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t


def min_int(value: int, d: Distributed) -> int:
    """The smallest of every rank's integer (the micro-batch all ranks agree on)."""
    if not d.enabled:
        return value
    t = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=d.host_group)
    return t.tolist()[0]


def any_rank(flag: bool, d: Distributed) -> bool:
    """Whether ``flag`` is true on any rank (a step that ran out of memory somewhere)."""
    if not d.enabled:
        return flag
    t = torch.tensor([int(flag)], dtype=torch.long)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=d.host_group)
    return bool(t.tolist()[0])


def average_gradients(model: nn.Module, d: Distributed, bucket: int = 2**24) -> None:
    """DDP's gradient average, by hand, once the backward passes have run (for a model not wrapped in DDP): each
    gradient divided by the world size, then summed over ranks in flat buckets of up to ``bucket`` elements, as DDP's
    default communication hook does. Every rank must hold a gradient for the same parameters."""
    if not d.enabled:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    while grads:
        n, size = 0, 0
        while n < len(grads) and (n == 0 or size + grads[n].numel() <= bucket) and grads[n].dtype == grads[0].dtype:
            size, n = size + grads[n].numel(), n + 1
        part, grads = grads[:n], grads[n:]
        flat = torch.cat([g.reshape(-1) for g in part]).div_(d.world_size)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for g in part:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()


def broadcast_int(value: int, d: Distributed) -> int:
    """Rank 0's integer on every rank (the resume decision, so that all ranks load the same checkpoint)."""
    if not d.enabled:
        return value
    t = torch.tensor([value], dtype=torch.long)
    dist.broadcast(t, src=0, group=d.host_group)
    return t.tolist()[0]


def all_gather(t: torch.Tensor, d: Distributed) -> list[torch.Tensor]:
    """Every rank's copy of a same-shaped tensor, in rank order (per-rank RNG states for the checkpoint)."""
    if not d.enabled:
        return [t]
    t = t.to(d.device)  # NCCL gathers device tensors only
    out = [torch.empty_like(t) for _ in range(d.world_size)]
    dist.all_gather(out, t)
    return [x.cpu() for x in out]


def barrier(d: Distributed) -> None:
    if d.enabled:
        dist.barrier()


def shutdown(d: Distributed) -> None:
    if d.enabled and dist.is_initialized():
        dist.destroy_process_group()
