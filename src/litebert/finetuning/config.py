"""The settings of a fine-tuning run: `FinetuneConfig`, what a user gives (None: the task preset's), and `TrainArgs`,
what the loop runs with (the config resolved against the preset and the data: `FinetuneConfig.train_args`). The
settings of how a run executes (precision, compile, trackers...) are the ones pretraining shares
(`litebert.engine.args.Machinery`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from litebert.checks import AT_LEAST_0, AT_LEAST_1, FRACTION, POSITIVE, PROBABILITY
from litebert.engine.args import Machinery
from litebert.errors import ConfigError, Field
from litebert.optim.schedule import SCHEDULES
from litebert.values import names

OPTIMIZERS = ("adamw", "lamb")  # `litebert.optim.build_optimizer`'s: the official AdamW (fine-tuning's) and LAMB
EVAL_STRATEGIES = ("steps", "epoch")
# The knobs a Hugging Face user sets on TrainingArguments, under its names, with their choices (docs/finetune.md)
_KNOBS = {"optim": OPTIMIZERS, "lr_scheduler_type": SCHEDULES, "eval_strategy": EVAL_STRATEGIES}


@dataclass(frozen=True, kw_only=True)
class FinetuneConfig(Machinery):
    """Fine-tuning hyper-parameters; None: the task preset's. The settings of how the run executes (precision,
    compile, trackers...) are the ones pretraining shares (`litebert.engine.args.Machinery`).

    Attributes:
        lr: peak learning rate
        batch_size: examples per optimizer step
        micro_batch: examples per forward/backward on each process (default: batch_size / processes); gradients are
            accumulated over batch_size / (micro_batch x processes) micro-batches. auto: on a GPU the largest that fits
            (from batch_size / processes, halved on out of memory), on a CPU batch_size / processes up to 32
        max_steps: training steps (default: the preset's, or from epochs)
        epochs: passes over the training data
        warmup_steps: linear warmup steps
        warmup_proportion: linear warmup as a proportion of the steps
        max_grad_norm: global gradient-norm clipping (official: 1.0)
        eval_every: evaluate on dev every N steps, keeping the best checkpoint
        patience: stop after N evaluations without improvement (default: never)
        metric: the dev metric (higher is better) that chooses the checkpoint kept, early stopping's and the
            learning-rate grid's (default: the task's; one of its dev metrics, or one compute_metrics returns)
        seed: seed of the head's initialisation, dropout and batch order
        dropout: hidden and classifier dropout (default: the model's)
        seq_len: maximum pieces per input (default: the preset's, capped by the model's max_position_embeddings)
        max_train_examples: use only the first N training examples
        max_eval_examples: use only the first N dev examples
        pad_to_max: pad every batch to seq_len (no dynamic padding, no length grouping)
        save_every: also write a resumable checkpoint every N steps (0: only at evaluations and on SIGTERM/SIGINT)
        lora: train LoRA adapters (peft) and the task head instead of every weight; the folder gets the merged
            model and, in adapter/, the adapter under HF's names (docs/finetune.md)
        lora_r: LoRA rank (default 8)
        lora_alpha: LoRA scale numerator: updates are scaled by alpha / r (default 16)
        lora_dropout: dropout on the LoRA input (default 0)
        lora_targets: comma list of the modules adapted: query, key, value, dense, ffn, ffn_output, pooler
            (default query,value)
        weight_decay: decoupled weight decay of every weight but LayerNorms and biases (official: 0.01)
        optim: the optimizer: adamw (the official AdamW, fine-tuning's) or lamb
        lr_scheduler_type: the learning-rate schedule: official (linear warmup, then linear decay counted from step
            0, as google-research/albert), or as Hugging Face's: linear, cosine, constant_with_warmup (linear
            warmup, then decay from the end of warmup / a constant rate), constant (no warmup)
        label_smoothing_factor: the targets' share spread evenly over all classes in the cross-entropy
            (classification, token and multiple-choice tasks)
        class_weights: the cross-entropy's weight of each label, in the label order (a JSON list; on the command
            line comma-separated), or balanced: n_examples / (n_labels x the label's count in the training data)
            (classification and token tasks)
        eval_strategy: evaluate on dev every eval_every steps (steps) or at the end of every epoch (epoch); both
            also at the end
        save_total_limit: keep the newest N resumable checkpoints in out/checkpoints
    """

    lr: Optional[float] = None
    batch_size: Optional[int] = None
    max_steps: Optional[int] = None
    epochs: Optional[float] = None
    warmup_steps: Optional[int] = None
    warmup_proportion: Optional[float] = None
    max_grad_norm: Optional[float] = None
    eval_every: Optional[int] = None
    patience: Optional[int] = None
    metric: Optional[str] = None
    dropout: Optional[float] = None
    seq_len: Optional[int] = None
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    pad_to_max: bool = False
    lora: bool = False
    lora_r: Optional[int] = None
    lora_alpha: Optional[float] = None
    lora_dropout: Optional[float] = None
    lora_targets: Optional[str] = None
    weight_decay: float = 0.01
    optim: str = "adamw"
    lr_scheduler_type: str = "official"
    label_smoothing_factor: float = 0.0
    class_weights: Optional[list[float] | Literal["balanced"]] = None
    eval_strategy: str = "steps"
    save_total_limit: int = 2

    CHOICES: ClassVar[dict] = _KNOBS
    RANGES: ClassVar[dict] = {
        "lr": POSITIVE, "batch_size": AT_LEAST_1, "max_steps": AT_LEAST_1, "epochs": POSITIVE,
        "warmup_steps": AT_LEAST_0, "warmup_proportion": FRACTION, "max_grad_norm": POSITIVE,
        "eval_every": AT_LEAST_1, "patience": AT_LEAST_1,
        "dropout": PROBABILITY, "seq_len": AT_LEAST_1, "max_train_examples": AT_LEAST_1,
        "max_eval_examples": AT_LEAST_1, "lora_r": AT_LEAST_1, "lora_alpha": POSITIVE, "lora_dropout": PROBABILITY,
        "weight_decay": AT_LEAST_0, "label_smoothing_factor": PROBABILITY, "save_total_limit": AT_LEAST_1}

    def __post_init__(self) -> None:
        super().__post_init__()
        check_class_weights(self.class_weights, type(self).__name__)
        if self.eval_strategy == "epoch" and self.eval_every is not None:
            raise ConfigError("{eval_every:flag} evaluates every N steps, {eval_strategy} at each epoch's end: give "
                              "one", eval_every=self.eval_every, eval_strategy=self.eval_strategy)
        lora_given = [n for n in ("lora_r", "lora_alpha", "lora_dropout", "lora_targets")
                      if getattr(self, n) is not None]
        if lora_given and not self.lora:
            raise ConfigError("{" + lora_given[0] + "} sets LoRA, which is off: add {lora:flag}",
                              **{lora_given[0]: getattr(self, lora_given[0]), "lora": True})
        if self.lora_targets is not None:  # an empty item (``query,``) refused, each module once
            names(self.lora_targets, "lora_targets", type(self).__name__)
        if self.warmup_steps is not None and self.warmup_proportion is not None:
            raise ConfigError("{warmup_steps:flag} and {warmup_proportion:flag} both set the warmup: give one",
                              warmup_steps=self.warmup_steps, warmup_proportion=self.warmup_proportion)

    def with_batch(self, preset) -> "FinetuneConfig":
        """This config with its batch decided (its own, else the preset's): what splits over the processes
        (`Machinery.split`) before any data is read."""
        return dataclasses.replace(self, batch_size=self._batch(preset))

    def _batch(self, preset) -> int:
        """The examples of one optimizer step: this config's, else the preset's."""
        return self.batch_size if self.batch_size is not None else preset.batch_size

    def train_args(self, preset, n_features: int, max_len: int, progress: bool,
                   class_weights: Optional[list[float]] = None, compute_loss: Optional[str] = None) -> "TrainArgs":
        """The loop's settings (`TrainArgs`): these values where given, the preset's elsewhere. ``class_weights``:
        `class_weights` resolved against the labels and data (`litebert.finetuning.loss.resolve_class_weights`);
        ``compute_loss``: the name of the caller's loss function, if any."""
        batch = self._batch(preset)
        if self.max_steps is not None:
            steps = self.max_steps
        elif self.epochs is not None or preset.train_steps is None:
            steps = steps_for(n_features, batch, self.epochs or preset.epochs or 3.0)
        else:
            steps = preset.train_steps
        if self.warmup_steps is not None:
            warmup = self.warmup_steps
        elif self.warmup_proportion is not None or preset.warmup_steps is None:
            share = self.warmup_proportion if self.warmup_proportion is not None else preset.warmup_proportion
            warmup = int(share * steps)
        else:
            warmup = preset.warmup_steps
        return TrainArgs(lr=self.lr if self.lr is not None else preset.lr, batch_size=batch, train_steps=steps,
                         warmup_steps=min(warmup, steps), eval_every=self.eval_every or preset.eval_every,
                         max_grad_norm=self.max_grad_norm if self.max_grad_norm is not None else 1.0,
                         patience=self.patience, group_by_length=not self.pad_to_max,
                         pad_to=max_len if self.pad_to_max else None, progress=progress,
                         weight_decay=self.weight_decay, optim=self.optim, lr_scheduler_type=self.lr_scheduler_type,
                         label_smoothing_factor=self.label_smoothing_factor, class_weights=class_weights,
                         compute_loss=compute_loss, eval_strategy=self.eval_strategy,
                         save_total_limit=self.save_total_limit, **self.machinery())

    def lora_args(self) -> dict:
        """`litebert.io.adapters.add_lora`'s arguments (its defaults where not given)."""
        return {"r": self.lora_r or 8, "alpha": self.lora_alpha if self.lora_alpha is not None else 16.0,
                "dropout": self.lora_dropout or 0.0,
                "targets": names(self.lora_targets or "query,value", "lora_targets", type(self).__name__)}


@dataclass(frozen=True, kw_only=True)
class TrainArgs(Machinery):
    """The fine-tuning loop's settings: a `FinetuneConfig` resolved against its task preset
    (`FinetuneConfig.train_args`); the settings of how the run executes are the shared `Machinery`."""

    lr: float
    batch_size: int  # examples per optimizer step, over all processes (the presets' hyperparameter)
    train_steps: int
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    eval_every: int = 100
    patience: int | None = None  # stop after this many evaluations without improvement (None: never)
    group_by_length: bool = True
    pad_to: int | None = None  # fixed pad-to-max-length batches (the common HF recipe) instead of dynamic padding
    skip_padding: bool = True  # dense layers on real tokens only when the loss never reads padding (False: as HF)
    eval_batch_size: int = 64
    progress: bool = True
    optim: str = "adamw"
    lr_scheduler_type: str = "official"
    label_smoothing_factor: float = 0.0
    class_weights: Optional[list[float]] = None  # one per label, in the label order (None: unweighted)
    compute_loss: Optional[str] = None  # the name of the caller's loss function (`litebert.finetuning.loss`)
    eval_strategy: str = "steps"
    save_total_limit: int = 2  # checkpoints kept in the run folder's checkpoints/

    CHOICES: ClassVar[dict] = _KNOBS
    RANGES: ClassVar[dict] = {
        "lr": POSITIVE, "batch_size": AT_LEAST_1, "train_steps": AT_LEAST_1, "warmup_steps": AT_LEAST_0,
        "weight_decay": AT_LEAST_0, "max_grad_norm": POSITIVE, "eval_every": AT_LEAST_1, "patience": AT_LEAST_1,
        "pad_to": AT_LEAST_1, "eval_batch_size": AT_LEAST_1, "label_smoothing_factor": PROBABILITY,
        "save_total_limit": AT_LEAST_1}

    # Fields that shape the trajectory: resuming with any of them changed is refused (micro_batch is not one: it
    # changes only the order of floating-point sums).
    TRAJECTORY = ("lr", "batch_size", "train_steps", "warmup_steps", "weight_decay", "max_grad_norm", "eval_every",
                  "patience", "seed", "group_by_length", "pad_to", "skip_padding", "precision", "bias_correction",
                  "optim", "lr_scheduler_type", "label_smoothing_factor", "class_weights", "compute_loss",
                  "eval_strategy")
    # The settings added to TRAJECTORY after runs were written without them, and the value those runs had: a
    # checkpoint that lacks one resumes when the setting still has it (`litebert.engine.checkpoint.check_compatible`)
    ADDED: ClassVar[dict] = {"optim": "adamw", "lr_scheduler_type": "official", "label_smoothing_factor": 0.0,
                             "class_weights": None, "compute_loss": None, "eval_strategy": "steps"}

    def __post_init__(self) -> None:
        super().__post_init__()
        check_class_weights(self.class_weights, type(self).__name__)


def check_class_weights(weights, owner: str) -> None:
    """``class_weights``: positive numbers (a label of weight 0 would make a batch of it alone a loss of 0/0); their
    number is checked against the labels once they are known (`litebert.finetuning.loss.resolve_class_weights`)."""
    if isinstance(weights, list) and (not weights or any(w <= 0 for w in weights)):
        raise ConfigError("{class_weights}: give one weight > 0 per label, in the label order (or balanced)",
                          class_weights=Field(owner, weights))


def steps_for(n_examples: int, batch_size: int, epochs: float) -> int:
    return max(1, math.ceil(n_examples / batch_size * epochs))
