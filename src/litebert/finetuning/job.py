"""One fine-tuning run, checked and then trained: what `finetune` runs once, and a learning-rate grid once per rate
(`litebert.finetuning.grid`). `Job` holds a call's arguments; `run_one` plans the run (`litebert.engine.plan`), reads
the task (`read_task`: data, tokenizer, model with its new head, features), trains it (`litebert.finetuning.loop`)
and completes the folder (`litebert.inference.finetuned` writes what `evaluate`, `predict` and the pipelines read).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from litebert import folders
from litebert.errors import ConfigError, DataError, literal
from litebert.files import write_json
from litebert.finetuning.config import FinetuneConfig

Log = Optional[Callable[[str], None]]


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
    search: Optional[dict] = None  # a search's record, as OUT/search.json holds it (`litebert.finetuning.search`)


@dataclass(frozen=True)
class Job:
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
    allow_tokenizer_mismatch: bool = False  # a tokenizer of other pieces than the model folder's: warned, not refused
    compute_loss: Optional[Callable] = None  # the training loss in place of the task's (`litebert.finetuning.loss`)

    @property
    def metric(self) -> str:
        """The dev metric that chooses the model kept."""
        return self.cfg.metric or self.preset.metric

    def check_metric(self) -> None:
        """A chosen metric the task's evaluation does not give is refused before ``out`` is planned (with
        ``compute_metrics``, whose names only its first call shows, at the first evaluation); so is a loss setting
        the task cannot take (`litebert.finetuning.loss.check_loss`)."""
        from litebert.tasks.eval_prediction import takes_eval_prediction

        if self.compute_metrics is not None:
            takes_eval_prediction(self.compute_metrics)  # one argument or two: else refused before any data is read
        from litebert.finetuning.loss import check_loss

        check_loss(self.preset.kind, self.cfg.label_smoothing_factor, self.cfg.class_weights, self.compute_loss)
        names = self.preset.kind.metrics
        if self.compute_metrics is None and names and self.metric not in names:
            raise ConfigError("{metric}: the " + literal(self.preset.name) + " task's dev metrics are " +
                              literal(", ".join(names)) + " (compute_metrics may add others); choose one of them",
                              metric=self.metric)

    def open(self, out, *, resume: bool, overwrite: bool):
        """The run's first decisions (`litebert.engine.plan.open_run`); a grid's folder is refused (its rates run
        in its sub-folders)."""
        from litebert.engine.plan import open_run

        opening = open_run(out, folders.FINETUNED, self.cfg, resume=resume, overwrite=overwrite,
                           max_steps=self.cfg.max_steps, extendable=False, inputs=self.inputs,
                           hub_ids={"model": "model", "tokenizer": "tokenizer"})
        if opening.folder.marker.get("search") and opening.folder.action in ("resume", "finished"):
            raise ConfigError("{out} holds a search; continue it with the same {search:flag}, or choose another "
                              "folder", out=out, search=None)
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


def read_task(preset, cfg: FinetuneConfig, model_dir, data, dev, tokenizer, columns: dict, labels,
               encoding_errors: str, allow_tokenizer_mismatch: bool = False) -> _Task:
    """The tokenizer, the data (train and dev), the model with its new head (initialised from the seed) and the
    features, with the tokenizer's ids checked against the model's vocabulary."""
    import torch

    from litebert.inference import finetuned
    from litebert.tasks.features import check_ids

    kind = preset.kind
    tok = finetuned.load_tokenizer(model_dir, tokenizer, allow_tokenizer_mismatch)
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
            model = add_lora(model, **cfg.lora_args())
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


def run_one(job: Job, opening, publish, dist) -> FinetuneResult:
    """`finetune` once the output folder is planned and the process group joined: every other check, then the run."""
    from litebert.engine import distributed as D
    from litebert.engine.plan import machine, plan_run
    from litebert.finetuning.loop import run_identity, train
    from litebert.finetuning.loss import resolve_class_weights, training_loss
    from litebert.inference import finetuned
    from litebert.io.hf_folder import load_config

    preset, cfg, log, metric = job.preset, job.cfg, job.log, job.metric
    model_dir = opening.inputs["model"]
    # the plan before any data, as pretraining's: the batch split, the compiler, the precision and attention for the
    # model's config (its new head changes neither); the metric was checked by `finetune` before the folder's plan
    machinery = machine(cfg.with_batch(preset), dist, job.attention, load_config(model_dir))
    t = read_task(preset, cfg, model_dir, job.inputs["data"], job.inputs["dev"], opening.inputs["tokenizer"],
                  job.columns, job.labels, job.encoding_errors, job.allow_tokenizer_mismatch)
    targs = cfg.train_args(preset, len(t.feats), t.max_len, job.progress,
                           class_weights=resolve_class_weights(cfg.class_weights, t.labels, t.feats),
                           compute_loss=_function_name(job.compute_loss))
    identity = run_identity(t.model, targs, t.feats + (t.dev_feats or []),
                            {"task": preset.name, "labels": t.labels, "max_seq_length": t.max_len,
                             **({"lora": cfg.lora_args()} if cfg.lora else {}),
                             **({"metric": metric} if metric != preset.metric else {})})
    run = plan_run(opening, machinery, lambda _: identity, max_steps=targs.train_steps,
                   default_max_steps=targs.train_steps)
    for line in run.notices if dist.is_main else ():
        notice(log, line)
    plan, runtime = run.folder, run.runtime
    meta = {**_meta(preset, t, targs, job.columns, model_dir), "metric": metric}
    if cfg.lora:
        meta["lora"] = cfg.lora_args()

    def evaluate(m):
        return finetuned.evaluate(preset, m, t.tok, t.dev_ex, t.labels, t.max_len, features=t.dev_feats,
                                  runtime=runtime, compute_metrics=job.compute_metrics)[0]

    def save(m, step, metrics) -> Path:
        finetuned.save_finetuned(m, t.tok, plan.out, {**meta, **preset.kind.chosen_on_dev(metrics), "best_step": step,
                                                   "dev_metrics": metrics, "complete": False})
        return plan.out

    writer = folders.begin(plan) if dist.is_main else None  # every check passed: from here on out is written
    try:
        if dist.is_main:
            precision = f" in {runtime.amp}".replace("torch.", "") if runtime.amp else ""
            say(log, f"{preset.name}: {t.describe()}; {targs.train_steps} steps of {targs.batch_size} = "
                      f"{run.split.describe()}, lr {targs.lr:g}, warmup {targs.warmup_steps}; on "
                      f"{dist.device}{precision} ({runtime.attention} attention); hyperparameters: "
                      f"{preset.source}" + (f"; resuming at step {run.start_step}" if run.checkpoint else ""))
        D.barrier(dist)
        loop = train(t.model, t.feats, targs, evaluate if t.dev_ex else None, metric, save, t.tok.pad_token_id,
                     log=(log or (lambda _: None)) if dist.is_main else (lambda _: None), out_dir=plan.out,
                     plan=run, stop_after=job.stop_after, keep_checkpoints=job.keep_checkpoints, run_config=meta,
                     callbacks=job.callbacks, loss=training_loss(targs.label_smoothing_factor, targs.class_weights,
                                                                 job.compute_loss))
        result = FinetuneResult(out=plan.out, task=preset.name, action=run.action, steps=loop.steps,
                                complete=not loop.interrupted, best_step=loop.best_step,
                                best_metrics=loop.best_metrics, metric=metric, stopped_early=loop.stopped_early,
                                interrupted=loop.interrupted, signal=loop.signal, lr=targs.lr)
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


def _complete(writer: folders.Writer, preset, meta: dict, result: FinetuneResult, keep_checkpoints: bool,
              has_dev: bool, log: Log, publish) -> None:
    """Rank 0 ends a finished run: finetune.json says complete, the model card is written, the marker says complete,
    the checkpoints go."""
    from litebert.card import write_card
    from litebert.card_builders import finetuned_card
    from litebert.inference.finetuned import META_FILE

    best = result.best_metrics or {}
    write_json(writer.out / META_FILE, {**meta, **preset.kind.chosen_on_dev(best), "best_step": result.best_step,
                                        "dev_metrics": best, "complete": True})
    write_card(writer.out, lambda: finetuned_card(writer.out, publish.card, publish.repo_id),
               lambda message: notice(log, message))
    writer.finish()
    if not keep_checkpoints:
        shutil.rmtree(writer.out / "checkpoints", ignore_errors=True)
    say(log, f"best dev {result.metric} {best[result.metric]:.4f} at step {result.best_step}"
              f"{' (stopped early)' if result.stopped_early else ''}; saved to {writer.out}" if has_dev else
         f"no dev set: saved the final model to {writer.out}")


def split_paths(data: str | os.PathLike, dev: str | os.PathLike | None) -> tuple[Path, Optional[Path]]:
    """The training split (``data``: a file, the train split of a folder or of a dataset id) and the dev split
    (``dev``, or found by name beside it; None without one): `litebert.tasks.sources.split_paths`."""
    from litebert.tasks.sources import split_paths as splits

    return splits(data, dev)


def _function_name(fn: Optional[Callable]) -> Optional[str]:
    """What finetune.json and the checkpoints record of a caller's function: ``module.qualified_name``."""
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', None) or '?'}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def _head_name(kind) -> str:
    from litebert.heads import head_name

    return head_name(kind.head)


def say(log: Log, message: str) -> None:
    if log is not None:
        log(message)


def notice(log: Log, message: str) -> None:
    """A notice about the run itself (not its progress): on stderr, unless the caller silenced the output."""
    if log is not None:
        print(message, file=sys.stderr, flush=True)

