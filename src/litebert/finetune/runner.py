"""Task-level glue between presets, readers, features, models and metrics (used by the CLI, the demo and tests).

A fine-tuned folder holds the model (HF layout), the tokenizer (``spiece.model``), and ``finetune.json`` with the
task, its labels, the metric, the chosen hyperparameters and the dev results — everything `evaluate`/`predict` need.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np

from litebert.errors import CheckpointError, DataError
from litebert.files import atomic_write, read_json
from litebert.finetune import metrics as M
from litebert.finetune import readers as R
from litebert.finetune.features import encode_multiple_choice, encode_text, encode_tokens
from litebert.finetune.squad import decode, encode_squad
from litebert.heads import SquadV2Model
from litebert.finetune.tasks import TaskPreset, get_preset
from litebert.finetune.trainer import predict_outputs

META_FILE = "finetune.json"
_SPLITS = {"train": ("train", "eng.train"), "dev": ("dev_matched", "dev", "valid", "validation", "eng.testa"),
           "test": ("test_matched", "test", "eng.testb")}


def find_split(folder: str | Path, split: str) -> Path | None:
    """The file (or RACE sub-folder) for ``split`` in a data folder: the first entry whose name starts with one of the
    split's usual names as a whole word (``dev_matched`` before ``dev`` for MNLI; CoNLL's ``eng.testa`` is dev)."""
    folder = Path(folder)
    entries = sorted(folder.iterdir())
    for name in _SPLITS[split]:
        pattern = re.compile(rf"(^|[_.-]){re.escape(name)}([_.-]|$)")  # "train.tsv", "disfl_qa_train.json.gz"
        for p in entries:
            if pattern.search(p.name) and not p.name.endswith(".tmp"):
                return p
    return None


def read_examples(preset: TaskPreset, path: str | Path, labels: list[str] | None = None,
                  columns: dict[str, str] | None = None, labelled: bool = True) -> list:
    """Examples of one split, with the preset's reader. ``columns`` maps text_a/text_b/label for users' files."""
    path = Path(path)
    if preset.kind == "squad":
        return R.read_squad(path)[0]
    if preset.kind == "multiple_choice":
        return R.read_race(path) if preset.extra.get("format") == "race" else R.read_multiple_choice(path)
    if preset.kind == "token":
        return R.read_conll(path, labels)
    if preset.name in R.GLUE_TASKS or preset.name == "sentiment":
        return R.read_glue("sst-2" if preset.name == "sentiment" else preset.name, path)
    cols = {"text_a": "text", "text_b": None, "label": "label", **(columns or {})}
    return R.read_table(path, cols["text_a"], cols["text_b"], cols["label"] if labelled else None,
                        label_list=labels, regression=preset.kind == "regression")


def collect_labels(preset: TaskPreset, examples: list) -> list[str] | None:
    """The label list: the preset's, or (users' data, CoNLL) the sorted set seen in training."""
    if preset.kind in ("regression", "squad", "multiple_choice"):
        return None
    if preset.labels:
        return list(preset.labels)
    if preset.kind == "token":
        return sorted({l for e in examples for l in e.labels or []})
    found = sorted({e.label for e in examples if e.label is not None})
    if len(found) < 2:
        raise DataError(f"the training data has {len(found)} distinct label(s) {found}; a classifier needs two")
    return found


def featurize(preset: TaskPreset, tok, examples: list, labels: list[str] | None, max_length: int,
              training: bool = False) -> list[dict]:
    if preset.kind in ("classification", "regression"):
        return encode_text(tok, examples, max_length, labels)
    if preset.kind == "token":
        return encode_tokens(tok, examples, max_length, labels)
    if preset.kind == "multiple_choice":
        return encode_multiple_choice(tok, examples, max_length, preset.extra.get("max_qa_length", 128))
    x = preset.extra
    feats = encode_squad(tok, examples, max_length, min(x["doc_stride"], max_length // 2), x["max_query_length"],
                         training)
    if x["version"] == "1.1":
        for f in feats:
            f.pop("is_impossible")
    return feats


def make_model(preset: TaskPreset, model_dir: str | Path, labels: list[str] | None, **overrides):
    """The preset's head on the pretrained encoder in ``model_dir`` (a litebert or HF ALBERT folder)."""
    from litebert import heads

    if preset.kind in ("classification", "regression"):
        n = 1 if preset.kind == "regression" else len(labels)
        return heads.AlbertForSequenceClassification.from_pretrained(model_dir, num_labels=n, **overrides)
    if preset.kind == "token":
        return heads.AlbertForTokenClassification.from_pretrained(model_dir, num_labels=len(labels), **overrides)
    if preset.kind == "multiple_choice":
        return heads.AlbertForMultipleChoice.from_pretrained(model_dir, **overrides)
    if preset.extra["version"] == "2.0":
        return SquadV2Model.from_pretrained(model_dir, **overrides)
    return heads.AlbertForQuestionAnswering.from_pretrained(model_dir, **overrides)


def save_finetuned(model, tok, out_dir: str | Path, meta: dict) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    atomic_write(out / META_FILE, json.dumps(meta, indent=2, default=_jsonable) + "\n")


def _jsonable(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, TaskPreset):
        return asdict(o)
    raise TypeError(type(o).__name__)


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
    preset = get_preset(meta["task"])
    if meta.get("preset"):  # keep the run's own settings (e.g. squad version, max_qa_length)
        preset = TaskPreset(**{**asdict(preset), **{k: v for k, v in meta["preset"].items() if k != "labels"}})
    labels = meta.get("labels")
    from litebert import heads

    cls = {"classification": heads.AlbertForSequenceClassification, "regression": heads.AlbertForSequenceClassification,
           "token": heads.AlbertForTokenClassification, "multiple_choice": heads.AlbertForMultipleChoice}.get(
        preset.kind)
    if cls is None:
        cls = SquadV2Model if preset.extra["version"] == "2.0" else heads.AlbertForQuestionAnswering
    model = cls.from_pretrained(model_dir)
    return preset, model, AlbertTokenizer.from_pretrained(model_dir), meta


def evaluate(preset: TaskPreset, model, tok, examples: list, labels: list[str] | None, max_length: int,
             batch_size: int = 64, features: list[dict] | None = None, null_threshold: float | None = None,
             progress: bool = False) -> tuple[dict, list]:
    """(metrics, per-example predictions) on labelled examples.

    SQuAD v2: metrics follow the official evaluation — exact/F1 with questions whose no-answer probability exceeds
    ``null_threshold`` (default 1.0: none) counted as "no answer", plus ``best_exact``/``best_f1`` and their
    thresholds; the returned predictions apply the same threshold.
    """
    feats = features if features is not None else featurize(preset, tok, examples, labels, max_length)
    outs = predict_outputs(model, feats, batch_size, tok.pad_token_id, progress)
    preds = predictions_from(preset, examples, feats, outs, labels)
    metrics = score(preset, examples, preds, labels, null_threshold)
    if null_threshold is not None and preset.kind == "squad":
        preds = [apply_threshold(p, null_threshold) for p in preds]
    return metrics, preds


def apply_threshold(p: dict, threshold: float) -> dict:
    if p.get("no_answer_prob", 0.0) > threshold:
        return {**p, "answer": "", "answer_start": -1}
    return p


def predictions_from(preset: TaskPreset, examples, feats, outs, labels) -> list:
    """Per-example predictions: label name / float / choice index / word tags / SQuAD answer dict."""
    if preset.kind == "classification":
        return [labels[int(np.argmax(o["logits"]))] for o in outs]
    if preset.kind == "regression":
        return [float(o["logits"][0]) for o in outs]
    if preset.kind == "multiple_choice":
        return [int(np.argmax(o["logits"])) for o in outs]
    if preset.kind == "token":
        default = "O" if "O" in labels else labels[0]
        result = []
        for e, f, o in zip(examples, feats, outs):
            tags = [default] * len(e.words)
            prev = None
            for pos, w in enumerate(f["word_ids"]):
                if w is not None and w != prev:
                    tags[w] = labels[int(np.argmax(o["logits"][pos]))]
                prev = w
            result.append(tags)
        return result
    x = preset.extra
    na = [float(o["na_logits"]) for o in outs] if "na_logits" in outs[0] else None
    answers, nbest, na_probs = decode(examples, feats, [o["start_logits"] for o in outs],
                                      [o["end_logits"] for o in outs], na, x["n_best"], x["max_answer_length"])
    return [{"id": e.qas_id, "answer": answers[e.qas_id],
             "answer_start": nbest[e.qas_id][0]["start"] if answers[e.qas_id] else -1,
             **({"no_answer_prob": na_probs[e.qas_id]} if na is not None else {})} for e in examples]


def score(preset: TaskPreset, examples: list, preds: list, labels: list[str] | None,
          null_threshold: float | None = None) -> dict:
    if preset.kind == "classification":
        gold = [e.label for e in examples]
        out = {"accuracy": M.accuracy(preds, gold), "matthews": M.matthews(preds, gold)}
        if len(labels) == 2:
            out["f1"] = M.f1(preds, gold, positive=labels[1])
        return out
    if preset.kind == "regression":
        gold = [e.label for e in examples]
        return {"pearson": M.pearson(preds, gold), "spearman": M.spearman(preds, gold),
                "mse": float(np.mean((np.asarray(preds) - np.asarray(gold)) ** 2))}
    if preset.kind == "multiple_choice":
        return {"accuracy": M.accuracy(preds, [e.label for e in examples])}
    if preset.kind == "token":
        out = M.entity_f1(preds, [e.labels for e in examples])
        flat_p = [t for s in preds for t in s]
        flat_g = [t for e in examples for t in e.labels]
        out["token_accuracy"] = M.accuracy(flat_p, flat_g)
        return out
    gold = {e.qas_id: [a["text"] for a in e.answers] for e in examples}
    answers = {p["id"]: p["answer"] for p in preds}
    if preset.extra["version"] == "2.0":
        na = {p["id"]: p["no_answer_prob"] for p in preds}
        return M.squad_evaluate(gold, answers, na, 1.0 if null_threshold is None else null_threshold)
    return M.squad_evaluate(gold, answers)
