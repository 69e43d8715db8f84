"""`finetune`: fine-tune a pretrained model on a task, as one typed function. ``litebert finetune`` maps its flags
onto it; experiments, the demo and notebooks call it directly.

    from litebert import FinetuneConfig, finetune
    result = finetune("sentiment", "runs/tiny/model", "data/finetune/sentiment", "runs/sentiment",
                      config=FinetuneConfig(max_steps=100))

The hyper-parameters default to the task preset's (`litebert.tasks.presets`); `FinetuneConfig` overrides any of
them. Everything is checked before the first write (the output folder's plan, the data, the tokenizer against the
model's vocabulary, the checkpoint a resume continues from), so a refused call changes nothing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

from litebert import folders
from litebert.arguments import checked
from litebert.card import CardInfo
from litebert.checks import AT_LEAST_0, AT_LEAST_1, FRACTION, POSITIVE, PROBABILITY
from litebert.engine.args import Machinery
from litebert.engine.callbacks import Callback
from litebert.errors import ConfigError, DataError, literal
from litebert.files import write_json

Log = Optional[Callable[[str], None]]


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
    """

    lr: Optional[float] = None
    batch_size: Optional[int] = None
    max_steps: Optional[int] = None
    epochs: Optional[float] = None
    warmup_steps: Optional[int] = None
    warmup_proportion: Optional[float] = None
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

    RANGES: ClassVar[dict] = {
        "lr": POSITIVE, "batch_size": AT_LEAST_1, "max_steps": AT_LEAST_1, "epochs": POSITIVE,
        "warmup_steps": AT_LEAST_0, "warmup_proportion": FRACTION, "eval_every": AT_LEAST_1, "patience": AT_LEAST_1,
        "dropout": PROBABILITY, "seq_len": AT_LEAST_1, "max_train_examples": AT_LEAST_1,
        "max_eval_examples": AT_LEAST_1, "lora_r": AT_LEAST_1, "lora_alpha": POSITIVE, "lora_dropout": PROBABILITY}

    def __post_init__(self) -> None:
        super().__post_init__()
        lora_given = [n for n in ("lora_r", "lora_alpha", "lora_dropout", "lora_targets") if getattr(self, n) is not None]
        if lora_given and not self.lora:
            raise ConfigError("{" + lora_given[0] + "} sets LoRA, which is off: add {lora:flag}",
                              **{lora_given[0]: getattr(self, lora_given[0]), "lora": True})
        if self.lora_targets is not None and not [t for t in self.lora_targets.split(",") if t.strip()]:
            raise ConfigError("{lora_targets}: name the modules to adapt (e.g. query,value)",
                              lora_targets=self.lora_targets)
        if self.warmup_steps is not None and self.warmup_proportion is not None:
            raise ConfigError("{warmup_steps:flag} and {warmup_proportion:flag} both set the warmup: give one",
                              warmup_steps=self.warmup_steps, warmup_proportion=self.warmup_proportion)

    def batch_split(self, preset, processes: int):
        """How the batch (this config's, else the preset's) splits over ``processes`` (`Machinery.split`): known
        before the data is read, so a batch that does not split is refused before any reading."""
        return dataclasses.replace(self, batch_size=self._batch(preset)).split(processes)

    def _batch(self, preset) -> int:
        """The examples of one optimizer step: this config's, else the preset's."""
        return self.batch_size if self.batch_size is not None else preset.batch_size

    def train_args(self, preset, n_features: int, max_len: int, progress: bool):
        """The loop's settings (`trainer.TrainArgs`): these values where given, the preset's elsewhere."""
        from litebert.tasks.trainer import TrainArgs, steps_for

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
                         patience=self.patience, group_by_length=not self.pad_to_max,
                         pad_to=max_len if self.pad_to_max else None, progress=progress, **self.machinery())


@dataclass
class FinetuneResult:
    """What a `finetune` call did. ``action``: the plan (new, resume, overwrite, restart, finished)."""

    out: Path
    task: str
    action: str
    steps: int
    complete: bool  # the run finished: ``out`` holds the best dev model (the final one without dev data)
    best_step: Optional[int] = None
    best_metrics: Optional[dict] = None
    metric: Optional[str] = None
    stopped_early: bool = False  # ended by early stopping or a callback's stop: the best model kept, complete
    interrupted: bool = False  # stopped by SIGTERM/SIGINT: resumable with resume=True
    signal: Optional[int] = None
    hub_url: Optional[str] = None  # the Hub repository the folder was uploaded to (``push_to_hub``)
    lr: Optional[float] = None  # the peak learning rate of the model in ``out`` (a grid's: the rate dev chose)
    grid: Optional[list] = None  # a learning-rate grid's runs: {"lr", "folder", "best_step", "score"} each


@checked
def finetune(task: str, model: str | os.PathLike, data: str | os.PathLike, out: str | os.PathLike, *,
             dev: str | os.PathLike | None = None, tokenizer: str | os.PathLike | None = None,
             columns: Mapping[str, str] | None = None, labels: Sequence[str] | None = None,
             config: Optional[FinetuneConfig] = None, resume: bool = False, overwrite: bool = False,
             keep_checkpoints: bool = False, device: Optional[str] = None, attention: str = "auto",
             encoding_errors: str = "strict", progress: bool = True, log: Log = print,
             stop_after: Optional[int] = None, card: Optional[CardInfo] = None, push_to_hub: Optional[str] = None,
             hub_private: bool = True, callbacks: Sequence[Callback] = (),
             compute_metrics: Optional[Callable[[list, list], dict]] = None,
             lr_grid: Optional[Sequence[float]] = None, dist: Any = None) -> FinetuneResult:
    """Fine-tune the pretrained ``model`` (a litebert or HF ALBERT folder) on ``task`` (a GLUE task, squad1, squad2,
    race, mc, conll, classify, regress, sentiment) and save the best dev checkpoint, its tokenizer and finetune.json
    to ``out``.

    ``data``: a folder (train/dev files by their usual names) or the training file; ``dev``: the dev file when not
    in that folder. ``tokenizer``: default the model folder's. ``columns``: your own data's columns
    ({"text_a": COL, "text_b": COL, "label": COL}); ``labels``: the label set (default: the task's, or those seen in
    training). ``config``: hyper-parameters over the preset's. ``resume``: continue the stopped run in ``out``;
    ``overwrite``: replace the fine-tuned model there. ``keep_checkpoints``: keep out/checkpoints at the end.
    ``log``: where progress lines go (None: nowhere). ``stop_after``: leave, resumable, after this many steps (of
    each run of a grid). ``card``: what the model card (README.md) says that the run cannot know (license, data set
    ids). ``push_to_hub``: a Hub repository (ORG/NAME) to upload ``out`` to when the run has finished
    (`litebert.push`), created private unless ``hub_private`` is False.
    ``callbacks``: `litebert.engine.callbacks.Callback` objects the loop calls after each step, evaluation and save
    (on rank 0); a stop one asks for ends the run as early stopping does. ``compute_metrics(predictions, labels)``:
    more dev metrics, a dict of names to numbers merged into the task's; it gets the dev examples' predictions and
    gold labels as ``evaluate --output`` writes them. ``lr_grid``: peak learning rates, one run each into
    ``out/lr-RATE/``; the best by the dev metric is copied into ``out`` and every rate's score listed in
    ``out/grid.json`` (`litebert.tasks.grid`).
    ``dist``: the process group (default: the one ``torchrun`` describes, else this process alone)."""
    from litebert.push import Publishing
    from litebert.engine import distributed as D
    from litebert.tasks.presets import get_preset

    preset, cfg = get_preset(task), config or FinetuneConfig()
    publish = Publishing(card or CardInfo(), push_to_hub, hub_private)
    job = _Job(preset, cfg, {"model": model, "data": data, "dev": dev, "tokenizer": tokenizer}, dict(columns or {}),
               labels, keep_checkpoints, attention, encoding_errors, progress, log, stop_after, tuple(callbacks),
               compute_metrics)
    if lr_grid is not None:
        from litebert.tasks.grid import finetune_grid

        return finetune_grid(job, out, lr_grid, resume=resume, overwrite=overwrite, publish=publish, device=device,
                             dist=dist)
    publish.check()  # the repository id, huggingface_hub and a token: before anything is written
    opening = job.open(out, resume=resume, overwrite=overwrite)
    if opening.finished:
        _notice(log, f"{out}: this fine-tuning run is finished; nothing to do")
        publish.not_pushed(f"the run was finished already; upload it with `litebert push {out} {push_to_hub}`")
        return FinetuneResult(Path(out), preset.name, "finished", 0, True)
    dist = dist or D.from_environment(device=device)
    try:
        result = _finetune(job, opening, publish, dist)
    finally:
        D.shutdown(dist)
    if dist.is_main:  # once the process group is gone: no peer waits for the upload
        if result.interrupted:
            publish.not_pushed(f"the run stopped before its end; resume it with the same upload, or upload it with "
                               f"`litebert push {out} {push_to_hub}` when done")
        else:
            result.hub_url = publish.push(out)
    return result


@dataclass(frozen=True)
class _Job:
    """What a `finetune` call asks of each run it makes (one, or one per rate of a grid): its arguments."""

    preset: Any
    cfg: FinetuneConfig
    inputs: dict  # model, data, dev, tokenizer, as given
    columns: dict
    labels: Optional[Sequence[str]]
    keep_checkpoints: bool
    attention: str
    encoding_errors: str
    progress: bool
    log: Log
    stop_after: Optional[int]
    callbacks: tuple
    compute_metrics: Optional[Callable]

    @property
    def metric(self) -> str:
        """The dev metric that chooses the model kept."""
        return self.cfg.metric or self.preset.metric

    def open(self, out, *, resume: bool, overwrite: bool):
        """The run's first decisions (`litebert.engine.plan.open_run`); a grid's folder is refused (its rates run
        in its sub-folders)."""
        from litebert.engine.plan import open_run

        opening = open_run(out, folders.FINETUNED, self.cfg, resume=resume, overwrite=overwrite,
                           max_steps=self.cfg.max_steps, extendable=False, inputs=self.inputs,
                           hub_ids={"model": "model", "tokenizer": "tokenizer"})
        grid = opening.folder.marker.get("grid")
        if grid and opening.folder.action in ("resume", "finished"):
            raise ConfigError("{out} holds a learning-rate grid (" + literal(", ".join(f"{x:g}" for x in grid)) +
                              "); continue it with the same {lr_grid:flag}, or choose another folder", out=out,
                              lr_grid=None)
        return opening


@dataclass
class _Task:
    """What a fine-tuning run trains and evaluates on: read, featurized and checked before anything is written."""

    tok: object
    model: object
    train_path: Path
    dev_path: Optional[Path]
    labels: Optional[list]
    train_ex: list
    dev_ex: Optional[list]
    max_len: int
    feats: list
    dev_feats: Optional[list]

    def describe(self) -> str:
        return (f"{len(self.train_ex)} training examples ({len(self.feats)} inputs), "
                f"{len(self.dev_ex) if self.dev_ex else 0} dev")


def _read_task(preset, cfg: FinetuneConfig, model_dir, data, dev, tokenizer, columns: dict, labels,
               encoding_errors: str) -> _Task:
    """The tokenizer, the data (train and dev), the model with its new head (initialised from the seed) and the
    features, with the tokenizer's ids checked against the model's vocabulary."""
    import torch

    from litebert.tasks import finetuned
    from litebert.tasks.features import check_ids

    kind = preset.kind
    tok = finetuned.load_tokenizer(model_dir, tokenizer)
    train_path, dev_path = split_paths(data, dev)
    labels = list(labels) if labels else None
    if labels and len(set(labels)) != len(labels):
        twice = next(x for x in labels if labels.count(x) > 1)
        raise ConfigError("{labels}: " + f"{literal(repr(twice))} is given twice; give each label once",
                          labels=",".join(labels))
    train_ex = kind.read(train_path, labels, columns, encoding_errors)[:cfg.max_train_examples]
    labels = labels or kind.collect_labels(train_ex, preset.labels)
    dev_ex = kind.read(dev_path, labels, columns, encoding_errors)[:cfg.max_eval_examples] if dev_path else None
    torch.manual_seed(cfg.seed)  # the new head's initial weights come from the seed (the same on every process)
    dropout = {} if cfg.dropout is None else dict(hidden_dropout_prob=cfg.dropout, classifier_dropout_prob=cfg.dropout)
    model = kind.new_model(model_dir, labels, **dropout)
    if cfg.lora:  # adapters on the new model (their initialisation comes from the seed too)
        from litebert.io.adapters import add_lora

        try:
            model = add_lora(model, **_lora(cfg))
        except ConfigError as e:  # named as the config names it (--lora-targets), not as add_lora does
            if set(e.named) != {"targets"}:
                raise
            raise ConfigError(e.template.replace("{targets}", "{lora_targets}"),
                              lora_targets=e.named["targets"]) from None
    max_len = model.config.sequence_length(cfg.seq_len, preset.max_seq_length)
    feats = kind.featurize(tok, train_ex, labels, max_len, training=True)
    dev_feats = kind.featurize(tok, dev_ex, labels, max_len) if dev_ex else None
    if not feats:
        raise DataError("{data}: no training examples", data=train_path)
    check_ids(feats + (dev_feats or []), model.config.vocab_size)
    return _Task(tok, model, train_path, dev_path, labels, train_ex, dev_ex, max_len, feats, dev_feats)


def _finetune(job: _Job, opening, publish, dist) -> FinetuneResult:
    """`finetune` once the output folder is planned and the process group joined: every other check, then the run."""
    from litebert.tasks import finetuned
    from litebert.tasks.trainer import run_identity, train
    from litebert.engine import distributed as D
    from litebert.engine.plan import machine, plan_run

    preset, cfg, log, metric = job.preset, job.cfg, job.log, job.metric
    model_dir = opening.inputs["model"]
    cfg.batch_split(preset, dist.world_size)
    t = _read_task(preset, cfg, model_dir, job.inputs["data"], job.inputs["dev"], opening.inputs["tokenizer"],
                   job.columns, job.labels, job.encoding_errors)
    targs = cfg.train_args(preset, len(t.feats), t.max_len, job.progress)
    machinery = machine(targs, dist, job.attention, t.model.config)
    identity = run_identity(t.model, targs, t.feats + (t.dev_feats or []),
                            {"task": preset.name, "labels": t.labels, "max_seq_length": t.max_len,
                             **({"lora": _lora(cfg)} if cfg.lora else {}),
                             **({"metric": metric} if metric != preset.metric else {})})
    run = plan_run(opening, machinery, lambda _: identity, max_steps=targs.train_steps,
                   default_max_steps=targs.train_steps)
    for line in run.notices if dist.is_main else ():
        _notice(log, line)
    plan, runtime = run.folder, run.runtime
    meta = {**_meta(preset, t, targs, job.columns, model_dir), "metric": metric}
    if cfg.lora:
        meta["lora"] = _lora(cfg)

    def evaluate(m):
        return finetuned.evaluate(preset, m, t.tok, t.dev_ex, t.labels, t.max_len, features=t.dev_feats,
                                  amp=runtime.amp, varlen=runtime.varlen, compute_metrics=job.compute_metrics)[0]

    def save(m, step, metrics) -> Path:
        finetuned.save_finetuned(m, t.tok, plan.out, {**meta, **preset.kind.chosen_on_dev(metrics), "best_step": step,
                                                   "dev_metrics": metrics, "complete": False})
        return plan.out

    writer = folders.begin(plan) if dist.is_main else None  # every check passed: from here on out is written
    try:
        if dist.is_main:
            precision = f" in {runtime.amp}".replace("torch.", "") if runtime.amp else ""
            _say(log, f"{preset.name}: {t.describe()}; {targs.train_steps} steps of {targs.batch_size} = "
                      f"{run.split.describe()}, lr {targs.lr:g}, warmup {targs.warmup_steps}; on "
                      f"{dist.device}{precision} ({runtime.attention} attention); hyperparameters: "
                      f"{preset.source}" + (f"; resuming at step {run.start_step}" if run.checkpoint else ""))
        D.barrier(dist)
        loop = train(t.model, t.feats, targs, evaluate if t.dev_ex else None, metric, save, t.tok.pad_token_id,
                     log=(log or (lambda _: None)) if dist.is_main else (lambda _: None), out_dir=plan.out,
                     plan=run, stop_after=job.stop_after, keep_checkpoints=job.keep_checkpoints, run_config=meta,
                     callbacks=job.callbacks)
        result = FinetuneResult(plan.out, preset.name, run.action, loop.steps, not loop.interrupted, loop.best_step,
                                loop.best_metrics, metric, loop.stopped_early, loop.interrupted, loop.signal,
                                lr=targs.lr)
        if writer is not None and not loop.interrupted:
            _complete(writer, preset, meta, result, job.keep_checkpoints, bool(t.dev_ex), log, publish)
        D.barrier(dist)  # no process leaves while rank 0 still writes
        return result
    finally:
        if writer is not None:
            writer.close()


def _meta(preset, t: _Task, targs, columns: dict, model_dir) -> dict:
    """What finetune.json records: the task, its kind and head, the labels, the metric, the preset as run and the
    training settings with the data they read."""
    return {"task": preset.name, "kind": preset.kind.name, "head": _head_name(preset.kind), "labels": t.labels,
            "metric": preset.metric, "preset": dataclasses.replace(preset, max_seq_length=t.max_len).to_json(),
            "columns": columns, "train": {**dataclasses.asdict(targs), "data": str(t.train_path),
                                          "dev": str(t.dev_path) if t.dev_path else None,
                                          "base_model": str(model_dir), "train_examples": len(t.train_ex),
                                          "dev_examples": len(t.dev_ex or [])}}


def _lora(cfg: FinetuneConfig) -> dict:
    """`litebert.io.adapters.add_lora`'s arguments from the config (its defaults where not given)."""
    return {"r": cfg.lora_r or 8, "alpha": cfg.lora_alpha if cfg.lora_alpha is not None else 16.0,
            "dropout": cfg.lora_dropout or 0.0,
            "targets": [t.strip() for t in (cfg.lora_targets or "query,value").split(",") if t.strip()]}


def _complete(writer: folders.Writer, preset, meta: dict, result: FinetuneResult, keep_checkpoints: bool,
              has_dev: bool, log: Log, publish) -> None:
    """Rank 0 ends a finished run: finetune.json says complete, the model card is written, the marker says complete,
    the checkpoints go."""
    from litebert.card import write_card
    from litebert.card_builders import finetuned_card
    from litebert.tasks.finetuned import META_FILE

    best = result.best_metrics or {}
    write_json(writer.out / META_FILE, {**meta, **preset.kind.chosen_on_dev(best), "best_step": result.best_step,
                                        "dev_metrics": best, "complete": True})
    write_card(writer.out, lambda: finetuned_card(writer.out, publish.card, publish.repo_id),
               lambda message: _notice(log, message))
    writer.finish()
    if not keep_checkpoints:
        shutil.rmtree(writer.out / "checkpoints", ignore_errors=True)
    _say(log, f"best dev {result.metric} {best[result.metric]:.4f} at step {result.best_step}"
              f"{' (stopped early)' if result.stopped_early else ''}; saved to {writer.out}" if has_dev else
         f"no dev set: saved the final model to {writer.out}")


def split_paths(data: str | os.PathLike, dev: str | os.PathLike | None) -> tuple[Path, Optional[Path]]:
    """The training split (``data``: a file, the train split of a folder or of a dataset id) and the dev split
    (``dev``, or found by name beside it; None without one): `litebert.tasks.sources.split_paths`."""
    from litebert.tasks.sources import split_paths as splits

    return splits(data, dev)


def _head_name(kind) -> str:
    from litebert.heads import head_name

    return head_name(kind.head)


def _say(log: Log, message: str) -> None:
    if log is not None:
        log(message)


def _notice(log: Log, message: str) -> None:
    """A notice about the run itself (not its progress): on stderr, unless the caller silenced the output."""
    if log is not None:
        print(message, file=sys.stderr, flush=True)

