"""`TrainConfig`: every pretraining hyper-parameter in one typed dataclass, and the named recipes.

The command line has a flag for every field (``--global-batch`` for ``global_batch``), with the help text of the
field's entry in the class docstring. Defaults are the official ALBERT values where there is one (LAMB, β 0.9/0.999,
ε 1e-6, weight decay 0.01, clip 1.0, polynomial power 1, 15% masking, 3-gram masking, 20 predictions per sequence, 10%
short sequences, SOP).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Optional

from litebert.checks import AT_LEAST_0, AT_LEAST_1, POSITIVE, PROBABILITY, Range, check_fields
from litebert.errors import ConfigError
from litebert.files import read_json


@dataclass
class TrainConfig:
    """Pretraining hyper-parameters.

    Attributes:
        max_steps: optimizer steps in the whole run (the schedule decays to 0 there); None: 1000 for a new run, the
            run's own when resumed
        global_batch: sequences per optimizer step (paper: 4096)
        micro_batch: sequences per forward/backward on one process, or auto: on a GPU the largest that fits (from
            the per-process batch, halved on out of memory), on a CPU the per-process batch up to 32
        lr: peak learning rate (paper: 0.00176 with LAMB at batch 4096), or auto: the square-root rule for the
            global batch, 0.00176 x sqrt(global_batch / 4096) for LAMB, 1e-4 x sqrt(global_batch / 256) for AdamW
        warmup_steps: linear warmup steps (official: 3125)
        poly_power: power of the polynomial decay (official: 1.0)
        optimizer: lamb | adamw
        weight_decay: decoupled weight decay (official: 0.01)
        bias_correction: Adam bias correction in LAMB/AdamW (the official optimizers have none; without it the
            first hundreds of steps of LayerNorm and bias parameters are up to ~3x larger)
        clip_norm: global gradient-norm clipping (official: 1.0)
        seq_len: maximum sequence length (paper: 512)
        objective: sop (ALBERT) | nsp (BERT) | none (MLM only)
        masked_lm_prob: fraction of tokens masked (0.15)
        max_predictions: masked positions per sequence (official: 20)
        max_ngram: longest masked n-gram (paper: 3)
        short_seq_prob: fraction of shorter sequences (0.1)
        seed: seed of data order, masking and initialisation
        precision: auto | fp32 | bf16 | fp16 (auto: fp32 on CPU, bf16/fp16 autocast on GPU)
        skip_padding: run the dense layers on the real tokens only (off: the padding is computed too, as HF does)
        gradient_checkpointing: recompute activations in the backward pass (less memory, ~30% more compute)
        compile: torch.compile the model (inductor): compiles for ~10-60 s at the start, then faster steps where it
            fuses the elementwise work (measured in docs/BENCHMARKS.md)
        data_workers: processes that build the next batches while the model trains (0: the training process builds
            each one when it is needed); the batches are the same either way
        eval_every: evaluate every N steps (0: at start and end only)
        eval_examples: held-out examples per evaluation (without held-out data, no evaluation runs)
        save_every: checkpoint every N steps (also on SIGTERM/SIGINT and at the end)
        keep_last: checkpoints to keep (0: all)
        log_every: write train metrics every N steps
        max_bad_steps: stop after this many non-finite steps in a row
        peak_tflops: peak TFLOP/s of one device, for the MFU estimate (guessed for known GPUs)
        report_to: trackers that also receive the metrics: a comma list of tensorboard, wandb, mlflow; none; or
            auto (TensorBoard if installed)
        on_plateau: what the plateau guard does when the run sits on the unigram plateau after the warmup: warn
            (one line), stop (one line, then a checkpoint and a resumable stop) or off
        plateau_check_steps: the guard checks at warmup + this many steps, then every this many steps
    """

    # optimisation (official optimization.create_optimizer)
    max_steps: Optional[int] = 1000
    global_batch: int = 256          # sequences per optimizer step = micro_batch x accumulation x world size
    micro_batch: int | Literal["auto"] = 32  # sequences per forward/backward on one process (auto: `engine.MicroBatch`)
    lr: float | Literal["auto"] = 0.00176  # auto: resolved by the sqrt rule when the config is built
    warmup_steps: int = 0
    poly_power: float = 1.0
    optimizer: str = "lamb"          # lamb | adamw
    weight_decay: float = 0.01
    bias_correction: bool = False    # the official LAMB/AdamW have none
    clip_norm: float = 1.0
    # data (official create_pretraining_data flags)
    seq_len: int = 128
    objective: str = "sop"           # sop | nsp | none (MLM only: the paper's "None" in Table 5)
    masked_lm_prob: float = 0.15
    max_predictions: int = 20
    max_ngram: int = 3
    short_seq_prob: float = 0.1
    seed: int = 12345
    # machinery
    precision: str = "auto"          # auto (fp32 on CPU, bf16 or fp16 on GPU) | fp32 | bf16 | fp16
    skip_padding: bool = True        # dense layers on the real tokens only (False: the padding computed, as HF)
    gradient_checkpointing: bool = False
    compile: bool = False            # torch.compile the model (inductor; needs a C++ compiler on CPU)
    data_workers: int = 0            # batch-building processes ahead of the model (0: built in this process)
    eval_every: int = 0              # 0: evaluate only at the start and the end
    eval_examples: int = 1024
    save_every: int = 1000
    keep_last: int = 3
    log_every: int = 1
    max_bad_steps: int = 10          # stop after this many non-finite steps in a row
    peak_tflops: Optional[float] = None  # per device, for MFU; guessed for known GPUs
    report_to: str = "auto"          # trackers beside metrics.jsonl (`litebert.engine.trackers`); not trajectory
    on_plateau: str = "warn"         # the plateau guard (`litebert.pretraining.plateau`): warn | stop | off
    plateau_check_steps: int = 300

    def __post_init__(self) -> None:
        from litebert.pretraining.plateau import sqrt_rule_lr
        from litebert.engine.trackers import parse

        check_fields(self, _RANGES, _CHOICES)
        parse(self.report_to, type(self).__name__)
        if self.lr == "auto":  # decided here, once: the config (and train_config.json) holds the number
            self.lr = sqrt_rule_lr(self.global_batch, self.optimizer)

    def describe_lr(self) -> str:
        """The peak rate, and whether it is the sqrt rule's for this batch."""
        from litebert.pretraining.plateau import sqrt_rule_lr

        rule = sqrt_rule_lr(self.global_batch, self.optimizer)
        ratio = self.lr / rule
        how = ("the sqrt rule for this batch" if abs(ratio - 1) < 1e-6 else
               f"{ratio:.2g}x the sqrt rule's {rule:.3g} for this batch")
        return f"lr {self.lr:.3g} ({how})"

    def per_process(self, world_size: int) -> int:
        """Sequences per optimizer step on each process; the global batch must split evenly over the processes."""
        if self.global_batch % world_size:
            raise ConfigError("global batch {global_batch:value} is not a multiple of " + f"{world_size} processes; "
                              "change {global_batch:flag}", global_batch=self.global_batch)
        return self.global_batch // world_size

    def accumulation(self, world_size: int) -> int:
        """Micro-batches per optimizer step on each process (auto: 1 until a step decides); the global batch must
        split evenly."""
        if self.micro_batch == "auto":
            self.per_process(world_size)
            return 1
        per_step = self.micro_batch * world_size
        if self.global_batch % per_step:
            raise ConfigError("global batch {global_batch:value} is not a multiple of micro batch {micro_batch:value} "
                              f"x {world_size} process(es) = {per_step}; change " + "{global_batch:flag} or "
                              "{micro_batch:flag}", global_batch=self.global_batch, micro_batch=self.micro_batch)
        return self.global_batch // per_step

    # Fields that shape the training trajectory: resuming with any of them changed is refused. ``max_steps`` is not
    # one of them: a resume may move the end of the run (the schedule is then the one for the new ``max_steps``, see
    # docs/pretraining.md, "Extending a run"); it only may not be below the step already reached.
    TRAJECTORY = ("global_batch", "lr", "warmup_steps", "poly_power", "optimizer", "weight_decay",
                  "bias_correction", "clip_norm", "seq_len", "objective", "masked_lm_prob", "max_predictions",
                  "max_ngram", "short_seq_prob", "seed")

    def trajectory(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.TRAJECTORY}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: Optional[str] = "train config") -> "TrainConfig":
        """The config of ``data``; ``source``: the file it came from, named in errors (None: the values are the
        caller's own arguments, and errors name them as such)."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{source or 'TrainConfig'}: unknown field(s) {', '.join(unknown)}; known: "
                              f"{', '.join(known)}")
        try:
            return cls(**data)
        except ConfigError as e:
            if source is None:
                raise
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, path: str | Path) -> dict[str, Any]:
        """The fields of a JSON config file (validated by name; values are validated when the config is built)."""
        path = Path(path)
        data = read_json(path, ConfigError)
        known = {f.name for f in fields(cls)} | {"preset", "recipe"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return data


_RANGES = {
    **{name: AT_LEAST_1 for name in ("max_steps", "global_batch", "micro_batch", "seq_len", "max_predictions",
                                     "max_ngram", "log_every", "max_bad_steps", "eval_examples",
                                     "plateau_check_steps")},
    **{name: AT_LEAST_0 for name in ("warmup_steps", "eval_every", "save_every", "keep_last",
                                     "weight_decay", "seed", "data_workers")},
    "lr": POSITIVE, "poly_power": POSITIVE, "clip_norm": POSITIVE, "peak_tflops": POSITIVE,
    "masked_lm_prob": Range(0, 1, low_open=True), "short_seq_prob": PROBABILITY,
}
_CHOICES = {"optimizer": ("lamb", "adamw"), "objective": ("sop", "nsp", "none"),
            "precision": ("auto", "fp32", "bf16", "fp16"), "on_plateau": ("warn", "stop", "off")}


# The paper's recipe (Lan et al. 2020, Section 4.1: "batch size of 4096 ... LAMB optimizer with learning rate 0.00176
# ... 125,000 steps", inputs of length 512 with 10% shorter, n-gram masking up to 3) and the official README's
# run_pretraining flags (--num_warmup_steps=3125, --max_predictions_per_seq=20).
RECIPES: dict[str, dict[str, Any]] = {
    "albert-paper": dict(optimizer="lamb", lr=0.00176, global_batch=4096, max_steps=125_000, warmup_steps=3125,
                         seq_len=512, max_predictions=20, masked_lm_prob=0.15, max_ngram=3, short_seq_prob=0.1,
                         objective="sop", weight_decay=0.01, eval_every=5000, save_every=5000),
    # Small-batch pretraining on 2 CPU cores (scripts/demo.py). Measured on the demo corpus and model, 1100 steps of
    # 16 x 128, warmup 100: held-out MLM accuracy 13.5% with LAMB lr 0.002, 15.0% with 0.004, 15.0% at step 825 with
    # 0.006, while lr 0.01 (and AdamW 2e-3) stay on the unigram plateau (6.8%, always "the") for 1000+ steps.
    "demo": dict(optimizer="lamb", lr=0.005, global_batch=16, micro_batch=16, max_steps=1100, warmup_steps=100,
                 seq_len=128, max_predictions=20, eval_every=220, save_every=220),
}


def recipe(name: str) -> dict[str, Any]:
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; available: {', '.join(RECIPES)}")
    return dict(RECIPES[name])
