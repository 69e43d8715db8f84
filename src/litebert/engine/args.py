"""The training settings that pretraining and fine-tuning share, and the one rule of the batch split.

`Machinery` holds the settings of *how* a run executes, under one name, meaning and check wherever they appear:
`TrainConfig` (pretraining), `FinetuneConfig` and the fine-tuning loop's `TrainArgs` inherit them, so each still
reads and writes them as its own flat fields (``--precision``, ``"precision"`` in a JSON file). A config whose
command defaults differently declares the field again with its own default, and nothing else (pretraining: the
micro-batch 32, the seed 12345, a train record every step, a checkpoint every 1000).

`BatchSplit` is how a step's batch splits: ``batch`` examples per optimizer step = micro-batch x accumulation x
processes, checked once where a run starts (`Machinery.split`, called by `litebert.engine.plan`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Optional

from litebert.checks import AT_LEAST_0, AT_LEAST_1, Range, check_fields
from litebert.errors import ConfigError, Field

PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # `litebert.engine.device.autocast_dtype` resolves them


@dataclass(frozen=True)
class BatchSplit:
    """The batch of one optimizer step as the processes run it: ``batch`` examples (over all processes) = micro-batch
    x accumulation x ``processes``. ``micro_batch`` ``auto``: decided by the first steps (`engine.step.MicroBatch`)."""

    batch: int
    processes: int
    micro_batch: int | Literal["auto"]

    @property
    def per_process(self) -> int:
        """Examples per step on each process."""
        return self.batch // self.processes

    @property
    def accumulation(self) -> Optional[int]:
        """Micro-batches per process per step (None for ``auto``: the steps decide)."""
        return None if self.micro_batch == "auto" else self.per_process // self.micro_batch

    def describe(self) -> str:
        """``32 x 8 x 1 process(es)``: micro-batch x accumulation x processes."""
        if self.micro_batch == "auto":
            return f"micro-batch auto x accumulation x {self.processes} process(es)"
        return f"{self.micro_batch} x {self.accumulation} x {self.processes} process(es)"


@dataclass(frozen=True, kw_only=True)
class Machinery:
    """How a training run executes: the settings pretraining and fine-tuning share.

    Attributes:
        micro_batch: examples per forward/backward on one process, or auto: on a GPU the largest that fits (from the
            per-process batch, halved on out of memory), on a CPU the per-process batch up to 32
        seed: the seed of the run's randomness (initial weights, data order, dropout)
        precision: auto | fp32 | bf16 | fp16 (fp16 with loss scaling; GPU only); auto: fp32 on CPU, bf16 on GPUs
            that have it, else fp16
        gradient_checkpointing: recompute activations in the backward pass (less memory, ~30% more compute)
        compile: torch.compile the model (inductor): compiles for ~10-60 s at the start, then faster steps where it
            fuses the elementwise work (measured in docs/BENCHMARKS.md); batches keep their padding
        bias_correction: Adam bias correction in LAMB/AdamW (the official optimizers have none; without it the
            first hundreds of steps are up to ~3x larger than the rate says)
        log_every: a train record in metrics.jsonl every N steps
        read_every: the host reads the steps' numbers back from the device every N steps (rounded up to a multiple
            of log_every), and at evaluations, checkpoints and the end; callbacks see each step's record then, and a
            stop they ask for takes effect there (between reads the host queues steps ahead of the device)
        save_every: a resumable checkpoint every N steps (also on SIGTERM/SIGINT and at the end)
        max_bad_steps: stop after this many non-finite steps in a row
        report_to: trackers that also receive the metrics: a comma list of tensorboard, wandb, mlflow; none; or
            auto (TensorBoard if installed)
    """

    micro_batch: Optional[int | Literal["auto"]] = None  # None: the per-process batch (fine-tuning's default)
    seed: int = 0
    precision: str = "auto"
    gradient_checkpointing: bool = False
    compile: bool = False            # torch.compile the model in place (needs a C++ compiler on CPU)
    bias_correction: bool = False    # the official LAMB/AdamW have none
    log_every: int = 10
    read_every: int = 10             # `litebert.engine.readout`
    save_every: int = 0
    max_bad_steps: int = 10          # the non-finite policy's limit (`litebert.engine.step`)
    report_to: str = "auto"          # trackers beside metrics.jsonl (`litebert.engine.trackers`)

    # Earlier names of settings, read from config files (and their flags, hidden) as the names they became: one name
    # per setting in both commands
    ALIASES: ClassVar[dict[str, str]] = {"global_batch": "batch_size", "clip_norm": "max_grad_norm"}
    RANGES: ClassVar[dict[str, Range]] = {}  # a config's own fields' ranges and choices, checked with these
    CHOICES: ClassVar[dict[str, tuple]] = {}

    def __post_init__(self) -> None:
        from litebert.engine.trackers import parse

        check_fields(self, {**_RANGES, **self.RANGES}, {"precision": PRECISIONS, **self.CHOICES})
        parse(self.report_to, type(self).__name__)

    @classmethod
    def unalias(cls, data: dict[str, Any], source: str) -> dict[str, Any]:
        """``data`` (a config file's settings) with the earlier names of settings (`ALIASES`) as their names; an
        earlier name beside its own is a `ConfigError` naming both."""
        out = dict(data)
        for old, new in cls.ALIASES.items():
            if old in out:
                if new in out:
                    raise ConfigError(f"{source}: {old!r} is the earlier name of {new!r}; give one of them")
                out[new] = out.pop(old)
        return out

    def machinery(self) -> dict[str, Any]:
        """The shared settings by name (what a config hands to another that shares them)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Machinery)}

    def split(self, processes: int) -> BatchSplit:
        """How the batch (``batch_size``: examples per optimizer step, over all processes) splits over
        ``processes``: a `ConfigError` naming the fields when it does not split evenly. ``micro_batch`` None: the
        per-process batch, in one micro-batch."""
        batch, owner = self.batch_size, type(self).__name__
        if batch % processes:
            raise ConfigError("{batch_size} is not a multiple of " + f"{processes} processes; change "
                              "{batch_size:flag}", batch_size=Field(owner, batch))
        micro = batch // processes if self.micro_batch is None else self.micro_batch
        if micro != "auto" and batch % (micro * processes):
            raise ConfigError("{batch_size} is not a multiple of {micro_batch} x " + f"{processes} "
                              f"process(es) = {micro * processes}; change " + "{batch_size:flag} or "
                              "{micro_batch:flag}", batch_size=Field(owner, batch), micro_batch=Field(owner, micro))
        return BatchSplit(batch, processes, micro)


_RANGES = {"micro_batch": AT_LEAST_1, "seed": AT_LEAST_0, "log_every": AT_LEAST_1, "read_every": AT_LEAST_1,
           "save_every": AT_LEAST_0, "max_bad_steps": AT_LEAST_1}
