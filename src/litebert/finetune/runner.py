"""Saving and loading fine-tuned folders, finding a data folder's splits, and evaluating on labelled examples.

A fine-tuned folder holds the model (HF layout), the tokenizer (``spiece.model``), and ``finetune.json`` with the
task, its kind, its labels, the metric, the chosen hyperparameters and the dev results — everything
`evaluate`/`predict` need. What differs between kinds of task is in `kinds.py`. While training runs the folder holds
the best model so far and ``finetune.json`` says ``"complete": false``; `check_complete` refuses such a folder
(a killed run) unless asked not to.
"""

from __future__ import annotations

import re
from pathlib import Path

from litebert.errors import CheckpointError
from litebert.files import read_json, write_json
from litebert.finetune.tasks import TaskPreset, preset_from_json
from litebert.finetune.trainer import predict_outputs

META_FILE = "finetune.json"
KIND = "fine-tuned-model"  # the output-folder marker's kind (`litebert.files.mark_output_folder`)
# What `litebert finetune` writes in its folder (besides the marker): all that --overwrite deletes. The model and
# tokenizer; the metrics (`litebert.train.metrics.MetricsWriter`); checkpoints/ while the run is not finished.
FILES = {META_FILE, "config.json", "model.safetensors", "litebert_model.safetensors", "spiece.model",
         "tokenizer_config.json", "tokenizer.json", "special_tokens_map.json", "answerability.safetensors",
         "metrics.jsonl", "train.csv", "eval.csv", "tensorboard", "checkpoints"}
_SPLITS = {"train": ("train", "eng.train"), "dev": ("dev_matched", "dev", "valid", "validation", "eng.testa"),
           "test": ("test_matched", "test", "eng.testb")}


def find_split(folder: str | Path, split: str) -> Path | None:
    """The file (or RACE sub-folder) for ``split`` in a data folder: the first entry whose name starts with one of the
    split's usual names as a whole word (``dev_matched`` before ``dev`` for MNLI; CoNLL's ``eng.testa`` is dev).
    Hidden entries are skipped: they include the temporaries of writes in progress (`files.atomic_write`)."""
    folder = Path(folder)
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    for name in _SPLITS[split]:
        pattern = re.compile(rf"(^|[_.-]){re.escape(name)}([_.-]|$)")  # "train.tsv", "disfl_qa_train.json.gz"
        for p in entries:
            if pattern.search(p.name):
                return p
    return None


def save_finetuned(model, tok, out_dir: str | Path, meta: dict) -> None:
    """Write ``model``, ``tok`` and ``meta`` (finetune.json: plain JSON values, the preset as
    `TaskPreset.to_json` gives it) to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    write_json(out / META_FILE, meta)


def check_complete(model_dir: str | Path, allow_incomplete: bool = False) -> None:
    """Refuse (`CheckpointError`) a fine-tuned folder whose training did not finish (killed, or still running),
    unless ``allow_incomplete``: it holds the best model up to the step it reached, not the final one."""
    meta_path = Path(model_dir) / META_FILE
    if allow_incomplete or not meta_path.is_file():
        return  # a missing finetune.json is reported by load_finetuned
    meta = read_json(meta_path, CheckpointError)
    if meta.get("complete") is False:
        raise CheckpointError(f"{model_dir}: fine-tuning did not finish (stopped or still running; the folder holds "
                              f"the best model up to step {meta.get('best_step', '?')}); finish it by running "
                              f"`litebert finetune` again with --overwrite, or pass --allow-incomplete to use it as it is")


def load_finetuned(model_dir: str | Path):
    """(preset, model, tokenizer, meta) of a folder written by ``litebert finetune``."""
    from litebert.tokenizer import AlbertTokenizer

    model_dir = Path(model_dir)
    meta_path = model_dir / META_FILE
    if not meta_path.is_file():
        raise CheckpointError(f"{model_dir}: no {META_FILE}; is this a folder written by `litebert finetune`?")
    try:
        meta = read_json(meta_path, CheckpointError)
    except CheckpointError as e:
        raise CheckpointError(f"{e}; write the folder again with `litebert finetune`") from None
    if not isinstance(meta.get("task"), str):
        raise CheckpointError(f"{meta_path}: no 'task' entry; is this a file written by `litebert finetune`?")
    preset = preset_from_json(meta["task"], meta.get("preset"))
    if meta.get("kind", preset.kind.name) != preset.kind.name:
        raise CheckpointError(f"{meta_path}: kind {meta['kind']!r} does not match task {meta['task']!r}, a "
                              f"{preset.kind.name!r} task; is the file from another folder?")
    model = preset.kind.load_model(model_dir)
    return preset, model, AlbertTokenizer.from_pretrained(model_dir), meta


def evaluate(preset: TaskPreset, model, tok, examples: list, labels: list[str] | None, max_length: int,
             batch_size: int = 64, features: list[dict] | None = None, null_threshold: float | None = None,
             progress: bool = False) -> tuple[dict, list]:
    """(metrics, per-example predictions) on labelled examples; ``features``: the examples' own, when already made.

    SQuAD v2: metrics follow the official evaluation — exact/F1 with questions whose no-answer probability exceeds
    ``null_threshold`` (default 1.0: none) counted as "no answer", plus ``best_exact``/``best_f1`` and their
    thresholds; the returned predictions apply the same threshold.
    """
    kind = preset.kind
    feats = features if features is not None else kind.featurize(tok, examples, labels, max_length)
    outs = predict_outputs(model, feats, batch_size, tok.pad_token_id, progress)
    preds = kind.predictions(examples, feats, outs, labels)
    return kind.score(examples, preds, labels, null_threshold), kind.thresholded(preds, null_threshold)
