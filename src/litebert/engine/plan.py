"""Where a training run starts and what it runs with: every decision of its start, made once before anything is
written and carried as a `RunPlan` that the loops obey without deriving any of it again (STYLE 16).

`pretrain` and `finetune` build it in three steps, cheapest first, so that a refused call has read as little as it
could and written nothing:

1. `open_run`, with the output folder's plan: the trackers resolved (a named tracker's missing package refused),
   whether the run in the folder is finished at the steps asked for (then there is nothing to do: no process group
   is joined, no data read), and otherwise the trackers checked (login, server) and a continued run's metrics files.
2. `machine`, once the processes have joined and the model's config is known, before any data is read or hashed:
   the batch split, torch.compile's compiler, the runtime (device, precision, attention).
3. `plan_run`, with the model built and the data read: the checkpoint a resume continues from (the newest that
   verifies and belongs to this run, chosen on rank 0 for every rank); whether the run is new, resumed, restarted (a
   resume that found no checkpoint starts again from step 0) or reopened (a finished run given more steps); the
   steps it trains to; what its checkpoints record; the micro-batch it steps with.

A loop called directly (a test, a notebook, a benchmark) plans with `local_plan`: the same rules, on this process,
without a run folder's plan.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from litebert import folders
from litebert.engine import distributed as D
from litebert.engine import trackers as T
from litebert.engine.args import BatchSplit, Machinery
from litebert.engine.checkpoint import Checkpoint, check_compatible, checkpoint_path, latest_valid, load_checkpoint
from litebert.engine.runtime import Runtime, check_compilable
from litebert.engine.step import MicroBatch
from litebert.errors import CheckpointError, LitebertError


@dataclass(frozen=True)
class Opening:
    """What is decided of a run before its processes join (`open_run`)."""

    folder: folders.FolderPlan
    trackers: T.Trackers
    finished: bool  # the run in the folder is finished at the steps asked for: nothing to train
    resume: bool  # the caller asked to continue a run
    inputs: Mapping[str, Any]  # what the command reads, hub ids resolved to their folders

    @property
    def done_step(self) -> int:
        """The step the finished run in the folder reached."""
        return self.folder.marker.get("step", 0)


def open_run(out: str | os.PathLike, layout: folders.Layout, args: Machinery, *, resume: bool, overwrite: bool,
             inputs: Mapping[str, Any], hub_ids: Mapping[str, str], max_steps: Optional[int],
             extendable: bool) -> Opening:
    """The first decisions of a training run into ``out``: the trackers ``args.report_to`` names (`trackers.resolve`),
    the ``inputs`` ({argument: path}) that may be hub ids (``hub_ids``: {argument: "model" or "tokenizer"}) as their
    folders (`hub.local`: from the cache, or downloaded), the folder's plan (`folders.plan`), and whether the run
    there is finished: a finished run stays so when it is not ``extendable`` (fine-tuning), or when ``max_steps`` is
    None or the step it reached. Otherwise the trackers are checked (`trackers.check`) and the metrics files of a run
    to be continued (`metrics_log.check_metrics`). Writes nothing in ``out``."""
    from litebert import hub
    from litebert.engine.metrics_log import check_metrics

    trackers = T.resolve(args.report_to, type(args).__name__)
    def resolve(name: str, path):
        if name not in hub_ids:
            return path
        return hub.model_folder(path, name) if hub_ids[name] == "model" else hub.local(path, hub_ids[name])

    inputs = {name: resolve(name, path) for name, path in inputs.items()}
    folder = folders.plan(out, layout, resume=resume, overwrite=overwrite, inputs=inputs)
    done = folder.marker.get("step")
    finished = folder.action == "finished" and (not extendable or max_steps in (None, done) or done is None)
    if not finished:
        if folder.action in ("resume", "finished"):
            check_metrics(folder.out)
        T.check(trackers)
    return Opening(folder, trackers, finished, resume, inputs)


@dataclass(frozen=True)
class Machine:
    """How the run's processes execute it (`machine`)."""

    runtime: Runtime
    split: BatchSplit


def machine(args: Machinery, dist: D.Distributed, attention: str, config) -> Machine:
    """The batch split over ``dist``'s processes (`Machinery.split`), torch.compile's compiler when ``args.compile``
    asks for it, and the runtime: ``dist``'s device, ``args.precision`` and ``attention`` for the model ``config``."""
    split = args.split(dist.world_size)
    if args.compile:
        check_compilable(dist.device)
    return Machine(Runtime.resolve(dist, args.precision, attention, config, training=True), split)


@dataclass(frozen=True)
class RunPlan:
    """Every decision of a training run's start. ``folder``: the run folder's plan (None for `local_plan`);
    ``action``: new, overwrite, resume, restart (a resume with no checkpoint: from step 0, its output replaced) or
    reopen (a finished run extended); ``checkpoint``: what the run continues from (None: step 0); ``max_steps``: the
    steps it trains to; ``identity``: what its checkpoints record (`checkpoint.check_compatible`); ``micro``: the
    micro-batch it steps with (``auto`` halves it on out-of-memory: the run's own state from there); ``notices``:
    what rank 0 says about the start."""

    folder: Optional[folders.FolderPlan]
    action: str
    checkpoint: Optional[Checkpoint]
    max_steps: int
    identity: dict
    runtime: Runtime
    split: BatchSplit
    micro: MicroBatch
    trackers: T.Trackers
    notices: tuple[str, ...] = ()

    @property
    def start_step(self) -> int:
        return self.checkpoint.step if self.checkpoint else 0

    @property
    def resume_step(self) -> Optional[int]:
        """The step whose metrics the run keeps (None: a fresh run starts fresh files)."""
        return self.checkpoint.step if self.checkpoint else None


def plan_run(opening: Opening, machine: Machine, identity: Callable[[int], dict], *, max_steps: Optional[int],
             default_max_steps: int) -> RunPlan:
    """The run's plan. ``identity(max_steps)``: what this run's checkpoints record (model config, trajectory
    settings, data); ``max_steps``: the steps the caller asks for (None: a new run's ``default_max_steps``, a resumed
    run's own).

    A resumed run continues from its newest checkpoint that verifies and matches ``identity`` (`CheckpointError`
    otherwise, on every rank); without one it starts again. A finished run given more steps is reopened from its last
    checkpoint. Rank 0 decides; every rank gets its decision."""
    folder, dist = opening.folder, machine.runtime.dist
    action, checkpoint, notices = folder.action, None, []
    if opening.resume and folder.action == "new":
        notices.append(f"{folder.out} holds no run yet; starting a new one")
    steps = max_steps or default_max_steps
    if folder.action in ("resume", "finished"):
        if folder.action == "finished" and max_steps < opening.done_step:
            raise CheckpointError("{max_steps} is below the step the finished run in {out} has reached (" +
                                  f"{opening.done_step}); give " + "{max_steps:flag} " + f"{opening.done_step + 1} "
                                  "or more to extend it", max_steps=max_steps, out=folder.out)
        checkpoint = _choose_checkpoint(folder.out / "checkpoints", identity, max_steps, dist)
        if folder.action == "finished" and checkpoint is None:
            raise CheckpointError("{max_steps}: the finished run in {out} has no checkpoint left to continue from; "
                                  "start a new run from its model with {init_from}", max_steps=max_steps,
                                  out=folder.out, init_from=folder.out / "model")
        if folder.action == "finished":
            action = "reopen"
        elif checkpoint is None:  # killed before its first checkpoint: start again
            action, folder = "restart", dataclasses.replace(folder, action="restart")
            notices.append(f"{folder.out} holds no checkpoint yet; starting from step 0 (its metrics are rewritten)")
        if max_steps is None:  # the run's own: its checkpoint's, else (a restart) what its marker recorded
            own = checkpoint.max_steps if checkpoint is not None else folder.marker.get("max_steps")
            steps = own if isinstance(own, int) and own >= 1 else default_max_steps
        steps = D.broadcast_int(steps, dist)
    split = machine.split
    micro = MicroBatch.resolve(split.micro_batch, split.per_process, dist,
                               saved=checkpoint.micro_batch if checkpoint else None)
    return RunPlan(folder, action, checkpoint, steps, identity(steps), machine.runtime, split, micro,
                   opening.trackers, tuple(notices))


def local_plan(args: Machinery, config, *, identity: dict, max_steps: int,
               checkpoint: Optional[Checkpoint] = None) -> RunPlan:
    """The plan of a loop called directly, on this process: ``args``' split, runtime (attention auto) and trackers
    for the model ``config``; ``checkpoint``: the one to continue from (the caller checked it belongs to the run,
    `checkpoint.check_compatible`), None for step 0; ``identity``: what the run's checkpoints record."""
    run = machine(args, D.Distributed(), "auto", config)
    micro = MicroBatch.resolve(run.split.micro_batch, run.split.per_process, run.runtime.dist,
                               saved=checkpoint.micro_batch if checkpoint else None)
    return RunPlan(None, "resume" if checkpoint else "new", checkpoint, max_steps, identity, run.runtime, run.split,
                   micro, T.resolve(args.report_to, type(args).__name__))


def _choose_checkpoint(ckpt_dir: Path, identity: Callable[[int], dict], max_steps: Optional[int],
                       dist: D.Distributed) -> Optional[Checkpoint]:
    """Rank 0 picks the newest checkpoint that verifies and checks it belongs to this run; the other ranks load it. A
    refusal on rank 0 is raised on every rank, as is a folder of checkpoints none of which verifies (`latest_valid`).
    None: no checkpoint yet (the run then starts again)."""
    found, error = None, None
    if dist.is_main:
        try:
            found = latest_valid(ckpt_dir)
            if found is not None:
                steps = max_steps if max_steps is not None else found.max_steps
                check_compatible(found.state, identity(steps), found.path)
        except LitebertError as e:
            error = e
    if D.broadcast_int(1 if error is not None else 0, dist):
        raise error if error is not None else CheckpointError("the resume was refused on rank 0 (see its message)")
    step = D.broadcast_int(found.step if found is not None else -1, dist)  # every rank continues from rank 0's choice
    if step >= 0 and not dist.is_main:
        path = checkpoint_path(ckpt_dir, step)
        found = Checkpoint(step, path, load_checkpoint(path))
    return found
