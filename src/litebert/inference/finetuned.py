"""Saving and loading fine-tuned folders, and evaluating on labelled examples.

A fine-tuned folder holds the model (HF layout, with the label names as ``id2label`` in config.json), the tokenizer
(``spiece.model`` or ``vocab.txt``), and ``finetune.json`` with the task, its kind, its labels, the metric, the chosen
hyperparameters and the dev results — everything `evaluate`/`predict` need. A task-head folder without finetune.json
(an ALBERT fine-tuned by HF transformers) is read from its config.json instead (`meta_from_config`). What differs
between kinds of task is in `kinds.py`. While training runs the folder holds the best model so far and
``finetune.json`` says ``"complete": false``; `check_complete` refuses such a folder (a killed run) unless asked not
to.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from litebert import folders
from litebert.errors import CheckpointError, ConfigError, literal
from litebert.files import read_json, write_json
from litebert.tasks.eval_prediction import eval_prediction, takes_eval_prediction
from litebert.tasks.features import check_ids, length_of
from litebert.tasks.kinds import ExtractiveQA, example_id
from litebert.tasks.meta import read_meta
from litebert.tasks.presets import TaskPreset, get_preset, preset_from_json

META_FILE = folders.FINETUNE_META
MIN_SEQ_LENGTH = 4  # finetune.json's shortest max_seq_length: a pair's [CLS] and two [SEP], and one piece of text
def save_finetuned(model, tok, out_dir: str | Path, meta: dict) -> None:
    """Write ``model``, ``tok`` and ``meta`` (finetune.json: plain JSON values, the preset as
    `TaskPreset.to_json` gives it) to ``out_dir``."""
    from litebert.io.adapters import is_adapted, save_merged

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if is_adapted(model):  # LoRA: the adapter in out/adapter, the model with it merged as the folder's model
        model = save_merged(model, out, meta.get("train", {}).get("base_model"))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    write_json(out / META_FILE, meta)


def check_complete(model_dir: str | Path, allow_incomplete: bool = False) -> None:
    """Refuse (`CheckpointError`) a fine-tuned folder whose training did not finish (killed, or still running),
    unless ``allow_incomplete``: it holds the best model up to the step it reached, not the final one."""
    meta_path = Path(model_dir) / META_FILE
    if allow_incomplete or not meta_path.is_file():
        return  # a missing finetune.json is reported by load_finetuned
    meta = read_meta(model_dir)
    if meta.get("complete") is False:
        raise CheckpointError("{model}: fine-tuning did not finish (stopped or still running; the folder holds the "
                              "best "
                              f"model up to step {literal(meta.get('best_step', '?'))}); finish it (fine-tune again "
                              "with resume or overwrite), or pass {allow_incomplete:flag} to use it as it is",
                              model=model_dir, allow_incomplete=True)


# config.json "architectures" of a folder without finetune.json (HF's own fine-tuned ALBERTs) -> the task whose
# defaults `predict`/`evaluate` use for it (its labels come from config.json's id2label).
_TASK_OF_HEAD = {"AlbertForSequenceClassification": "classify", "AlbertForTokenClassification": "conll",
                 "AlbertForMultipleChoice": "mc", "AlbertForQuestionAnswering": "squad1"}
def load_tokenizer(model_dir: str | Path, tokenizer: str | Path | None = None,
                   allow_tokenizer_mismatch: bool = False):
    """The tokenizer of ``model_dir``, or the one at ``tokenizer`` (a folder or file) when given
    (`litebert.tokenizer.load_tokenizer`), checked to be the model's (`litebert.pairing.check_tokenizer`: its size
    is config.json's vocab_size, and a tokenizer given apart from a folder that has its own holds the same pieces,
    unless ``allow_tokenizer_mismatch``, which only warns); a model folder without one is a `TokenizerError` that
    suggests ``--tokenizer``. Every command and pipeline that reads a model with a tokenizer loads the tokenizer
    here."""
    from litebert.errors import TokenizerError
    from litebert.io.hf_folder import CONFIG_NAME, load_config
    from litebert.pairing import check_tokenizer
    from litebert.tokenizer import TOKENIZER_FILES
    from litebert.tokenizer import load_tokenizer as load

    model_dir = Path(model_dir)
    if tokenizer is None and model_dir.is_dir() and not any((model_dir / n).is_file() for n in TOKENIZER_FILES):
        raise TokenizerError("{model}: " + f"no tokenizer in this folder (no {', '.join(TOKENIZER_FILES)}); pass "
                             "{tokenizer:flag} PATH, the tokenizer folder or file the model was trained with",
                             model=model_dir, tokenizer=None)
    tok = load(model_dir if tokenizer is None else tokenizer)
    own = None
    if tokenizer is not None and model_dir.is_dir() and any((model_dir / n).is_file() for n in TOKENIZER_FILES):
        own = load(model_dir)  # the folder's own: the one given must hold the same pieces
    if (model_dir / CONFIG_NAME).is_file():
        check_tokenizer(tok, load_config(model_dir).vocab_size, model_dir, tokenizer, own, allow_tokenizer_mismatch)
    return tok


def _labels_of_config(config: dict, file: Path) -> list[str]:
    """The label names of an HF config.json, in class-id order (HF's ``LABEL_i`` when it names none)."""
    id2label = config.get("id2label")
    if id2label is None:
        n = config.get("num_labels", 2)
        if not isinstance(n, int) or n < 1:
            raise CheckpointError(f"{file}: no id2label and no valid num_labels; add the labels as id2label")
        return [f"LABEL_{i}" for i in range(n)]
    try:
        names = {int(k): v for k, v in id2label.items()}
    except (AttributeError, TypeError, ValueError):
        names = None
    if names is None or sorted(names) != list(range(len(names))) or not all(isinstance(v, str) for v in names.values()):
        raise CheckpointError(f"{file}: id2label = {id2label!r}: expected an object mapping the class ids 0..n-1 to "
                              f"label names")
    return [names[i] for i in range(len(names))]


def meta_from_config(model_dir: str | Path) -> dict:
    """What finetune.json would hold, for a task-head folder that has none (an ALBERT fine-tuned by HF transformers,
    or saved with ``save_pretrained``): the task from config.json's ``architectures``, labels from ``id2label``,
    and the longest input the model takes as max_seq_length. Anything missing is a one-line `CheckpointError`."""
    from litebert.io.hf_folder import CONFIG_NAME

    file = Path(model_dir) / CONFIG_NAME
    if not file.is_file():
        raise CheckpointError(f"{model_dir}: no {META_FILE} and no {CONFIG_NAME}; give a folder written by "
                              f"`litebert finetune` or an HF ALBERT task model (save_pretrained)")
    config = read_json(file, CheckpointError)
    archs = config.get("architectures")
    arch = next((a for a in archs if a in _TASK_OF_HEAD), None) if isinstance(archs, list) else None
    if arch is None:
        found = f"names {archs}" if archs else "is missing"
        raise CheckpointError(f"{file}: no {META_FILE}, and its 'architectures' {found}: not a task head; predict and "
                              f"evaluate need one of {', '.join(_TASK_OF_HEAD)} (for an encoder, use `litebert "
                              f"embed`; to train a head, `litebert finetune`)")
    task = _TASK_OF_HEAD[arch]
    labels: list[str] | None = None
    if arch == "AlbertForSequenceClassification":
        problem = config.get("problem_type")
        if problem == "multi_label_classification":
            raise CheckpointError(f"{file}: problem_type multi_label_classification: predict and evaluate handle "
                                  f"single-label classification and regression only")
        n = len(config["id2label"]) if isinstance(config.get("id2label"), dict) else config.get("num_labels", 2)
        if problem == "regression" or (problem is None and n == 1):
            task = "regress"
        else:
            labels = _labels_of_config(config, file)
    elif arch == "AlbertForTokenClassification":
        labels = _labels_of_config(config, file)
    max_len = config.get("max_position_embeddings", 512)
    return {"task": task, "kind": get_preset(task).kind.name, "labels": labels, "columns": {},
            "preset": {"max_seq_length": max_len if isinstance(max_len, int) and max_len > 0 else 512},
            "source": f"{file} (architectures {arch})"}


def is_extractive_qa(model_dir: str | Path) -> bool:
    """Whether the fine-tuned folder (finetune.json's task, else config.json's head: `meta_from_config`) answers
    SQuAD questions, whose answers a decoding reads (`litebert.tasks.qa_decode`)."""
    meta_path = Path(model_dir) / META_FILE
    meta = read_meta(model_dir) if meta_path.is_file() else meta_from_config(model_dir)
    return isinstance(_preset(meta, meta_path).kind, ExtractiveQA)


def load_finetuned(model_dir: str | Path, tokenizer: str | Path | None = None,
                   allow_tokenizer_mismatch: bool = False):
    """(preset, model, tokenizer, meta) of a folder written by ``litebert finetune``, or of an ALBERT task-head
    folder without finetune.json whose config.json names the head (`meta_from_config`). ``tokenizer``: a tokenizer
    folder or .model file to use instead of the folder's own (`load_tokenizer`)."""
    from litebert import hub

    model_dir = hub.model_folder(model_dir)
    meta_path = model_dir / META_FILE
    if not meta_path.is_file():
        meta = meta_from_config(model_dir)
        preset = preset_from_json(meta["task"], meta["preset"])
        # every weight of the head must be there: a head left randomly initialised would predict noise
        model = preset.kind.head.from_pretrained(model_dir, strict=True)
        return preset, model, load_tokenizer(model_dir, tokenizer, allow_tokenizer_mismatch), meta
    try:
        meta = read_meta(model_dir)
    except CheckpointError as e:
        raise CheckpointError(f"{e}" if "litebert finetune" in str(e) else f"{e}; write the folder again with "
                              "`litebert finetune`") from None
    preset = _preset(meta, meta_path)
    if meta.get("kind", preset.kind.name) != preset.kind.name:
        raise CheckpointError(f"{meta_path}: kind {meta['kind']!r} does not match task {meta['task']!r}, a "
                              f"{preset.kind.name!r} task; is the file from another folder?")
    from litebert.pairing import check_head

    head = getattr(preset.kind.head, "BASE_HEAD", preset.kind.head).HF_ARCHITECTURE  # SQuAD v2's: a QA head + more
    check_head(model_dir, (head,), f"the head {META_FILE}'s task {meta['task']!r} fine-tunes")
    model = preset.kind.load_model(model_dir)
    _check_labels(meta, model, meta_path)
    return preset, model, load_tokenizer(model_dir, tokenizer, allow_tokenizer_mismatch), meta


def _preset(meta: dict, meta_path: Path) -> TaskPreset:
    """The preset of finetune.json's task, with the values it stored; a task this version does not know, or stored
    values it refuses, is a `CheckpointError` naming the file."""
    try:
        preset = preset_from_json(meta["task"], meta.get("preset"), str(meta_path))
    except ConfigError as e:
        message = str(e) if str(meta_path) in str(e) else f"{meta_path}: {e}"
        raise CheckpointError(literal(message)) from None
    if preset.max_seq_length < MIN_SEQ_LENGTH:
        raise CheckpointError(f"{literal(meta_path)}: the preset's max_seq_length is {preset.max_seq_length}, too "
                              f"short for any input (a pair's [CLS] and two [SEP] take {MIN_SEQ_LENGTH - 1}); write "
                              "the folder again with `litebert finetune`")
    return preset


def _check_labels(meta: dict, model, meta_path: Path) -> None:
    """finetune.json's labels (distinct names: `litebert.tasks.meta`) must be one per output of the head, and there
    must be some for a head with several outputs (predictions would otherwise be written under other labels' names,
    or under none)."""
    labels = meta.get("labels")
    outputs = getattr(getattr(model, "config", None), "num_labels", None)
    classifier = getattr(getattr(model, "classifier", None), "out_features", None)
    if labels is None:
        if classifier is not None and outputs is not None and outputs != 1 and meta.get("task") != "regress":
            raise CheckpointError(f"{literal(meta_path)} names no 'labels' for a head with {outputs} outputs; write "
                                  "the folder again with `litebert finetune`")
        return
    if classifier is not None and outputs is not None and outputs != 1 and len(labels) != outputs:
        raise CheckpointError(f"{literal(meta_path)} names {len(labels)} labels but the model's head has {outputs} "
                              f"outputs: the file does not belong to these weights; write the folder again with "
                              f"`litebert finetune`")


def _run(preset: TaskPreset, model, tok, examples: list, labels: list[str] | None, max_length: int,
         batch_size: int, features: list[dict] | None, progress: bool, runtime) -> tuple[list, list, list]:
    kind = preset.kind
    feats = features if features is not None else kind.featurize(tok, examples, labels, max_length)
    outs = predict_outputs(model, feats, batch_size, tok.pad_token_id, progress, runtime)
    return feats, outs, kind.predictions(examples, feats, outs, labels)


def evaluate(preset: TaskPreset, model, tok, examples: list, labels: list[str] | None, max_length: int,
             batch_size: int = 64, features: list[dict] | None = None, null_threshold: float | None = None,
             progress: bool = False, runtime=None, compute_metrics=None) -> tuple[dict, list]:
    """(metrics, per-example predictions) on labelled examples; ``features``: the examples' own, when already made.
    The model runs as ``runtime`` says (`predict_outputs`). ``compute_metrics``: more metrics (a dict of names to
    numbers), from an `EvalPrediction` (the raw outputs and label ids, as Trainer's) when it takes one argument, or
    from the predictions and gold labels as `evaluation_rows` gives them (``evaluate --output``'s) when it takes two
    (`litebert.tasks.eval_prediction`).

    SQuAD v2: metrics follow the official evaluation — exact/F1 with questions whose no-answer probability exceeds
    ``null_threshold`` (default 1.0: none) counted as "no answer", plus ``best_exact``/``best_f1`` and their
    thresholds; the returned predictions apply the same threshold.
    """
    kind = preset.kind
    feats, outs, preds = _run(preset, model, tok, examples, labels, max_length, batch_size, features, progress,
                              runtime)
    metrics, preds = kind.score(examples, preds, labels, null_threshold), kind.thresholded(preds, null_threshold)
    if compute_metrics is not None:
        if takes_eval_prediction(compute_metrics):
            args: tuple = (eval_prediction(feats, outs),)
        else:
            rows = kind.evaluation_rows(examples, feats, preds, outs, labels)
            args = ([r["prediction"] for r in rows], [r["label"] for r in rows])
        metrics.update(own_metrics(compute_metrics, args, metrics))
    return metrics, preds


def own_metrics(compute_metrics, args: tuple, metrics: dict) -> dict[str, float]:
    """What ``compute_metrics(*args)`` returns (`litebert.tasks.eval_prediction`: an EvalPrediction, or predictions
    and gold labels), checked: a dict of new metric names (not the task's own ``metrics``) to numbers, as floats."""
    from numbers import Real

    from litebert.errors import ConfigError

    got = compute_metrics(*args)
    name = getattr(compute_metrics, "__name__", type(compute_metrics).__name__)
    if not isinstance(got, dict) or not all(isinstance(k, str) and isinstance(v, Real) and not isinstance(v, bool)
                                            for k, v in got.items()):
        raise ConfigError("{compute_metrics}: returned " + literal(repr(got)[:80]) + "; return a dict of metric "
                          "names to numbers", compute_metrics=name)
    taken = [k for k in got if k in metrics]
    if taken:
        raise ConfigError("{compute_metrics}: returned " + literal(repr(taken[0])) + ", a metric the task computes "
                          "already; name yours differently", compute_metrics=name)
    return {k: float(v) for k, v in got.items()}


def evaluate_rows(preset: TaskPreset, model, tok, examples: list, labels: list[str] | None, max_length: int,
                  batch_size: int = 64, null_threshold: float | None = None, progress: bool = False,
                  runtime=None) -> tuple[dict, list[dict]]:
    """(metrics, rows): as `evaluate`, with one row per example for ``evaluate --output``: ``id`` (the example's
    own id, else its 0-based index), the gold ``label``, the ``prediction`` and, where the kind has them,
    ``probabilities`` (`TaskKind.evaluation_rows`)."""
    kind = preset.kind
    feats, outs, preds = _run(preset, model, tok, examples, labels, max_length, batch_size, None, progress, runtime)
    metrics = kind.score(examples, preds, labels, null_threshold)
    rows = kind.evaluation_rows(examples, feats, kind.thresholded(preds, null_threshold), outs, labels)
    return metrics, [{"id": example_id(e, i), **r} for i, (e, r) in enumerate(zip(examples, rows))]


def predict_outputs(model: torch.nn.Module, features: list[dict], batch_size: int = 64, pad_id: int = 0,
                    progress: bool = False, runtime=None, max_tokens: int | None = None) -> list[dict[str, np.ndarray]]:
    """A task head's outputs on ``features``, through the inference loop (`litebert.inference.loop.run_batches`: batched
    by length, the padding skipped, order restored) as ``runtime`` says (`litebert.engine.runtime.Runtime`: the
    caller's, resolved once; None: the model's device, fp32 or the caller's autocast, sdpa). ``max_tokens``: batches are
    cut by size, up to ``batch_size`` rows of at
    most this many tokens together. Per feature, each output array (float32 numpy) is trimmed to the feature's own
    length: ``logits`` ([C], [L, C] tokens, [K] choices) or ``start_logits``/``end_logits`` [L] (+ ``na_logits``
    scalar for SQuAD v2)."""
    from litebert.engine.runtime import Runtime
    from litebert.inference.loop import run_batches

    check_ids(features, model.config.vocab_size)
    names = ("logits", "start_logits", "end_logits", "na_logits")

    def take(out, batch) -> dict:
        return {n: getattr(out, n).float() for n in names if getattr(out, n, None) is not None}

    outs = run_batches(model, features, take, runtime=runtime or Runtime.of_model(model), batch_size=batch_size,
                       batch_tokens=max_tokens, pad_id=pad_id, progress=progress, desc="evaluating")
    for f, r in zip(features, outs):
        n = length_of(f)
        for name, v in r.items():
            if name in ("start_logits", "end_logits") or (name == "logits" and v.ndim == 2):
                r[name] = v[:n]  # per-token outputs: drop the padding
    return outs
