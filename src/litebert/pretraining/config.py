"""`TrainConfig`: every pretraining hyper-parameter in one typed dataclass, and the named recipes.

The command line has a flag for every field (``--batch-size`` for ``batch_size``), with the help text of the
field's entry in the class docstring. Defaults are the official ALBERT values where there is one (LAMB, β 0.9/0.999,
ε 1e-6, weight decay 0.01, clip 1.0, polynomial power 1, 15% masking, 3-gram masking, 20 predictions per sequence, 10%
short sequences, SOP).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

from litebert.checks import AT_LEAST_0, AT_LEAST_1, POSITIVE, PROBABILITY, Range
from litebert.engine.args import Machinery
from litebert.errors import ConfigError
from litebert.files import read_json

_RANGES = {
    **{name: AT_LEAST_1 for name in ("max_steps", "batch_size", "seq_len", "max_predictions", "max_ngram",
                                     "eval_examples", "plateau_check_steps")},
    **{name: AT_LEAST_0 for name in ("warmup_steps", "eval_every", "keep_last", "weight_decay", "data_workers")},
    "lr": POSITIVE, "poly_power": POSITIVE, "max_grad_norm": POSITIVE, "peak_tflops": POSITIVE,
    "masked_lm_prob": Range(0, 1, low_open=True), "short_seq_prob": PROBABILITY,
}
_CHOICES = {"optimizer": ("lamb", "adamw"), "objective": ("sop", "nsp", "none"), "on_plateau": ("warn", "stop", "off")}


@dataclass(frozen=True, kw_only=True)
class TrainConfig(Machinery):
    """Pretraining hyper-parameters; the settings of how the run executes (precision, compile, trackers...) are the
    ones fine-tuning shares (`litebert.engine.args.Machinery`).

    Attributes:
        max_steps: optimizer steps in the whole run (the schedule decays to 0 there); None: 1000 for a new run, the
            run's own when resumed
        batch_size: sequences per optimizer step (paper: 4096)
        micro_batch: sequences per forward/backward on one process, or auto: on a GPU the largest that fits (from
            the per-process batch, halved on out of memory), on a CPU the per-process batch up to 32
        lr: peak learning rate (paper: 0.00176 with LAMB at batch 4096), or auto: the square-root rule for the
            global batch, 0.00176 x sqrt(batch_size / 4096) for LAMB, 1e-4 x sqrt(batch_size / 256) for AdamW
        warmup_steps: linear warmup steps (official: 3125)
        poly_power: power of the polynomial decay (official: 1.0)
        optimizer: lamb | adamw
        weight_decay: decoupled weight decay (official: 0.01)
        max_grad_norm: global gradient-norm clipping (official: 1.0)
        seq_len: maximum sequence length (paper: 512)
        objective: sop (ALBERT) | nsp (BERT) | none (MLM only)
        masked_lm_prob: fraction of tokens masked (0.15)
        max_predictions: masked positions per sequence (official: 20)
        max_ngram: longest masked n-gram (paper: 3)
        short_seq_prob: fraction of shorter sequences (0.1)
        seed: seed of data order, masking and initialisation
        skip_padding: run the dense layers on the real tokens only (off: the padding is computed too, as HF does)
        data_workers: processes that build the next batches while the model trains (0: the training process builds
            each one when it is needed); the batches are the same either way
        eval_every: evaluate every N steps (0: at start and end only)
        eval_examples: held-out examples per evaluation (without held-out data, no evaluation runs)
        save_every: checkpoint every N steps (also on SIGTERM/SIGINT and at the end)
        keep_last: checkpoints to keep (0: all)
        log_every: write train metrics every N steps
        peak_tflops: peak TFLOP/s of one device, for the MFU estimate (guessed for known GPUs)
        on_plateau: what the plateau guard does when the run sits on the unigram plateau after the warmup: warn
            (one line), stop (one line, then a checkpoint and a resumable stop) or off
        plateau_check_steps: the guard checks at warmup + this many steps, then every this many steps (default: 15%
            of the steps after the warmup, at least 100 and at most 300)
    """

    # pretraining's defaults of shared settings
    micro_batch: int | Literal["auto"] = 32  # sequences per forward/backward on one process (auto: `engine.MicroBatch`)
    seed: int = 12345
    log_every: int = 1
    save_every: int = 1000
    # optimisation (official optimization.create_optimizer)
    max_steps: Optional[int] = 1000
    batch_size: int = 256          # sequences per optimizer step = micro_batch x accumulation x world size
    lr: float | Literal["auto"] = 0.00176  # auto: resolved by the sqrt rule when the config is built
    warmup_steps: int = 0
    poly_power: float = 1.0
    optimizer: str = "lamb"          # lamb | adamw
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    # data (official create_pretraining_data flags)
    seq_len: int = 128
    objective: str = "sop"           # sop | nsp | none (MLM only: the paper's "None" in Table 5)
    masked_lm_prob: float = 0.15
    max_predictions: int = 20
    max_ngram: int = 3
    short_seq_prob: float = 0.1
    # machinery of pretraining alone
    skip_padding: bool = True        # dense layers on the real tokens only (False: the padding computed, as HF)
    data_workers: int = 0            # batch-building processes ahead of the model (0: built in this process)
    eval_every: int = 0              # 0: evaluate only at the start and the end
    eval_examples: int = 1024
    keep_last: int = 3
    peak_tflops: Optional[float] = None  # per device, for MFU; guessed for known GPUs
    on_plateau: str = "warn"         # the plateau guard (`litebert.pretraining.plateau`): warn | stop | off
    plateau_check_steps: Optional[int] = None  # None: 15% of the steps after warmup, within [100, 300]

    RANGES: ClassVar[dict[str, Range]] = _RANGES
    CHOICES: ClassVar[dict[str, tuple]] = _CHOICES

    def __post_init__(self) -> None:
        from litebert.pretraining.plateau import sqrt_rule_lr

        super().__post_init__()
        if self.lr == "auto":  # decided here, once: the config (and train_config.json) holds the number
            object.__setattr__(self, "lr", sqrt_rule_lr(self.batch_size, self.optimizer))

    def describe_lr(self) -> str:
        """The peak rate, and whether it is the sqrt rule's for this batch."""
        from litebert.pretraining.plateau import sqrt_rule_lr

        rule = sqrt_rule_lr(self.batch_size, self.optimizer)
        ratio = self.lr / rule
        how = ("the sqrt rule for this batch" if abs(ratio - 1) < 1e-6 else
               f"{ratio:.2g}x the sqrt rule's {rule:.3g} for this batch")
        return f"lr {self.lr:.3g} ({how})"

    # Fields that shape the training trajectory: resuming with any of them changed is refused. ``max_steps`` is not
    # one of them: a resume may move the end of the run (the schedule is then the one for the new ``max_steps``, see
    # docs/pretraining.md, "Extending a run"); it only may not be below the step already reached.
    TRAJECTORY = ("batch_size", "lr", "warmup_steps", "poly_power", "optimizer", "weight_decay",
                  "bias_correction", "max_grad_norm", "seq_len", "objective", "masked_lm_prob", "max_predictions",
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
        data = cls.unalias(data, source or "TrainConfig")
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
    def from_json(cls, path: str | Path) -> "TrainConfig":
        """The config a JSON settings file describes: its recipe's settings (``"recipe"``), then its own."""
        return cls.layered(file=path)[0]

    @classmethod
    def layered(cls, recipe_name: Optional[str] = None, file: str | Path | None = None,
                changes: Optional[dict[str, Any]] = None, *,
                run_steps: bool = False) -> tuple["TrainConfig", Optional[str]]:
        """The settings of a run in layers, each over the one before: the recipe (``recipe_name``, else the one the
        file names), the JSON ``file`` (keys: the field names, plus ``recipe`` and ``preset``), ``changes`` (the
        command line's flags); and the model preset the file names (None without one). ``run_steps``: the run is
        resumed, so ``max_steps`` is None (the run's own) unless the file or ``changes`` give one: a recipe's does
        not move the end of a run."""
        settings = _settings_file(Path(file)) if file is not None else {}
        file_recipe = settings.pop("recipe", None)
        name = recipe_name or file_recipe
        preset = settings.pop("preset", None)
        given = {**settings, **(changes or {})}
        layers = {**(recipe(name) if name else {}), **given}
        if run_steps and "max_steps" not in given:
            layers["max_steps"] = None
        return cls.from_dict(layers, source=str(file) if file is not None else None), preset


def _settings_file(path: Path) -> dict[str, Any]:
    """The settings of a JSON file, their names checked (values are checked when the config is built)."""
    data = TrainConfig.unalias(read_json(path, ConfigError), str(path))
    known = {f.name for f in fields(TrainConfig)} | {"preset", "recipe"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return data


# The paper's recipe (Lan et al. 2020, Section 4.1: "batch size of 4096 ... LAMB optimizer with learning rate 0.00176
# ... 125,000 steps", inputs of length 512 with 10% shorter, n-gram masking up to 3) and the official README's
# run_pretraining flags (--num_warmup_steps=3125, --max_predictions_per_seq=20).
RECIPES: dict[str, dict[str, Any]] = {
    "albert-paper": dict(optimizer="lamb", lr=0.00176, batch_size=4096, max_steps=125_000, warmup_steps=3125,
                         seq_len=512, max_predictions=20, masked_lm_prob=0.15, max_ngram=3, short_seq_prob=0.1,
                         objective="sop", weight_decay=0.01, eval_every=5000, save_every=5000),
    # Small-batch pretraining on 2 CPU cores (scripts/demo.py). Measured on the demo corpus and model, 1100 steps of
    # 16 x 128, warmup 100: held-out MLM accuracy 13.5% with LAMB lr 0.002, 15.0% with 0.004, 15.0% at step 825 with
    # 0.006, while lr 0.01 (and AdamW 2e-3) stay on the unigram plateau (6.8%, always "the") for 1000+ steps.
    "demo": dict(optimizer="lamb", lr=0.005, batch_size=16, micro_batch=16, max_steps=1100, warmup_steps=100,
                 seq_len=128, max_predictions=20, eval_every=220, save_every=220),
}


def recipe(name: str) -> dict[str, Any]:
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; available: {', '.join(RECIPES)}")
    return dict(RECIPES[name])
