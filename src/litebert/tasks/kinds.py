"""The kinds of fine-tuning task: one class per kind, holding everything that differs between them.

A kind reads a split's examples, collects the label set, turns examples into features, builds its head on a
pretrained encoder (and loads it back from a fine-tuned folder), turns model outputs into predictions, scores them,
and shapes the rows `litebert predict` writes. Fine-tuning (`litebert.finetuning`), `evaluate`/`predict` and the
pipelines (`litebert.inference`) call these methods and never ask which kind they hold. A kind's fields are the
parameters of its data format (which GLUE layout, RACE or JSONL, SQuAD's
window sizes); a task preset (`presets.py`) pairs a kind with its hyperparameters.

Model outputs (``outs``) are `litebert.inference.finetuned.predict_outputs`'s: one dict of numpy arrays per feature.

To add a kind: subclass `TaskKind`, give it a ``name`` (stored in ``finetune.json``), a ``head`` and its ``metrics``
(the names ``score`` returns), implement the abstract methods, and give it to a preset in `presets.py`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from litebert import heads
from litebert.errors import ConfigError, DataError
from litebert.inputs import text as text_input
from litebert.tasks import metrics as M
from litebert.tasks import readers as R
from litebert.tasks import token_groups as G
from litebert.tasks.features import encode_multiple_choice, encode_text, encode_tokens
from litebert.tasks.qa_decode import QADecoding
from litebert.tasks.qa_decode import decode as decode_answers
from litebert.tasks.qa_decode import window_length as qa_window_length
from litebert.tasks.qa_decode import windows as qa_windows
from litebert.tasks.readers import json_text
from litebert.tasks.scores import softmax
from litebert.tasks.squad import SquadV2Model, no_answer_probs


def sort_labels(labels) -> list[str]:
    """A label set in a stable order: numerically when every label is a number (``['1', '2', '10']``), else as text."""
    labels = set(labels)
    try:
        values = {l: float(l) for l in labels}
    except ValueError:
        return sorted(labels)
    if not all(math.isfinite(v) for v in values.values()):  # "nan", "inf": names, not numbers
        return sorted(labels)
    return sorted(labels, key=lambda l: (values[l], l))  # "1" and "1.0" apart, in a fixed order


def label_names(labels: list[str]) -> dict:
    """The config overrides that name a head's outputs: HF's ``id2label`` (``label2id`` is derived when saving)."""
    return {"num_labels": len(labels), "id2label": dict(enumerate(labels))}


def example_id(example, index: int):
    """The id `evaluate --output` gives an example: the data's own id when it has one, else its 0-based index."""
    own = getattr(example, "id", None)
    if own is None and hasattr(example, "qas_id"):
        own = example.qas_id
    return index if own is None else own


class TaskKind(ABC):
    name: ClassVar[str]  # the "kind" entry of finetune.json
    metrics: ClassVar[tuple[str, ...]] = ()  # the names `score` may return: what --metric can choose (compute_metrics
    # may add others)
    head: ClassVar[type]  # the `litebert.heads` class the kind fine-tunes

    @abstractmethod
    def read(self, path: Path, labels: list[str] | None = None, columns: dict[str, str] | None = None,
             encoding_errors: str = "strict") -> list:
        """The examples of one split's file (or folder). ``columns`` maps text_a/text_b/label for users' tables;
        ``encoding_errors``: "strict" (bad UTF-8 is an error naming file, line and byte offset) or "replace"."""

    @abstractmethod
    def examples_from_json(self, rows: list[tuple[int, dict]], path: Path, columns: dict | None = None) -> list:
        """Unlabelled examples from `predict`'s input objects, given as (line number, object)."""

    def collect_labels(self, examples: list, preset_labels: tuple[str, ...] | None) -> list[str] | None:
        """The label list the head predicts: the preset's, or (users' data) the sorted set seen in training; None
        for kinds without named labels."""
        return None

    @abstractmethod
    def featurize(self, tok, examples: list, labels: list[str] | None, max_length: int,
                  training: bool = False) -> list[dict]:
        """Model features (see `features.py`); ``training`` may add what only the loss needs."""

    def new_model(self, model_dir: str | Path, labels: list[str] | None, **overrides):
        """The head on the pretrained encoder in ``model_dir`` (a litebert or HF ALBERT folder)."""
        return self.head.from_pretrained(model_dir, **overrides)

    def load_model(self, folder: str | Path):
        """The model of a folder written by ``litebert finetune``."""
        return self.head.from_pretrained(folder)

    @abstractmethod
    def predictions(self, examples: list, feats: list[dict], outs: list[dict], labels: list[str] | None) -> list:
        """One prediction per example."""

    @abstractmethod
    def score(self, examples: list, preds: list, labels: list[str] | None,
              null_threshold: float | None = None) -> dict[str, float]:
        """Dev metrics of ``preds`` against the examples' gold labels (higher is better for the preset's metric)."""

    @abstractmethod
    def output_rows(self, preds: list, outs: list[dict], labels: list[str] | None) -> list[dict]:
        """Per example, the keys `litebert predict` adds to the input object."""

    @abstractmethod
    def evaluation_rows(self, examples: list, feats: list[dict], preds: list, outs: list[dict],
                        labels: list[str] | None) -> list[dict]:
        """Per example, what `evaluate --output` writes besides the id: the gold ``label``, the ``prediction`` and,
        where the kind has them, ``probabilities``."""

    def for_inference(self, qa_decoding: str = "official", aggregation_strategy: str | None = None) -> "TaskKind":
        """The kind as `predict`/`evaluate` run it: SQuAD kinds decode answers by ``qa_decoding``
        (`litebert.tasks.qa_decode`); token kinds with an ``aggregation_strategy`` answer entities
        (`litebert.tasks.token_groups`). Other kinds: unchanged."""
        if aggregation_strategy is not None:
            raise ConfigError("{aggregation_strategy}: " + f"entities are answered by token-classification folders, "
                              f"not by this {self.name!r} one; leave it out", aggregation_strategy=aggregation_strategy)
        return self

    def inference_length(self, fine_tuned: int, positions: int) -> int:
        """The longest input `predict`/`evaluate` read when not told (the model's ``positions`` cap it): the length
        the folder was fine-tuned with, unless the kind reads as a pipeline does."""
        return fine_tuned

    def thresholded(self, preds: list, null_threshold: float | None) -> list:
        """The predictions as answered with the no-answer threshold chosen on dev (kinds without one: unchanged)."""
        return preds

    def chosen_on_dev(self, metrics: dict) -> dict:
        """Settings picked on dev that `evaluate`/`predict` reuse, stored in finetune.json (e.g. a threshold)."""
        return {}


# --------------------------------------------------------------------------------- classification and regression
@dataclass(frozen=True)
class _SentenceKind(TaskKind):
    """A sentence or sentence pair with one label: the pooled-output head."""

    glue: str | None = None  # the GLUE task whose TSV layout the files have; None: a user's CSV/TSV/JSONL
    head: ClassVar[type] = heads.AlbertForSequenceClassification
    float_labels: ClassVar[bool] = False

    def read(self, path, labels=None, columns=None, encoding_errors="strict"):
        if self.glue is not None:
            return R.read_glue(self.glue, path, encoding_errors=encoding_errors)
        cols = {"text_a": "text", "text_b": None, "label": "label", **(columns or {})}
        return R.read_table(path, cols["text_a"], cols["text_b"], cols["label"], label_list=labels,
                            regression=self.float_labels, encoding_errors=encoding_errors)

    def examples_from_json(self, rows, path, columns=None):
        cols = columns or {}
        text_a = tuple(dict.fromkeys([cols.get("text_a", "text_a"), "text_a", "text", "sentence"]))
        out = []
        for line, o in rows:
            a = json_text(o, text_a, text_input.where(path, line))
            bkey = next((k for k in (cols.get("text_b"), "text_b", "text_pair") if k and k in o), None)
            b = json_text(o, (bkey,), text_input.where(path, line)) if bkey else None
            out.append(R.TextExample(str(o.get("id", line)), a, b))
        return out

    def featurize(self, tok, examples, labels, max_length, training=False):
        return encode_text(tok, examples, max_length, labels)


@dataclass(frozen=True)
class Classification(_SentenceKind):
    name: ClassVar[str] = "classification"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy", "matthews", "f1")  # f1 with two labels

    def collect_labels(self, examples, preset_labels):
        if preset_labels:
            return list(preset_labels)
        found = sort_labels(e.label for e in examples if e.label is not None)
        if len(found) < 2:
            raise DataError(f"the training data has {len(found)} distinct label(s) {found}; a classifier needs two")
        return found

    def new_model(self, model_dir, labels, **overrides):
        return self.head.from_pretrained(model_dir, **label_names(labels), **overrides)

    def predictions(self, examples, feats, outs, labels):
        return [labels[int(np.argmax(o["logits"]))] for o in outs]

    def score(self, examples, preds, labels, null_threshold=None):
        gold = [e.label for e in examples]
        out = {"accuracy": M.accuracy(preds, gold), "matthews": M.matthews(preds, gold)}
        if len(labels) == 2:  # GLUE's F1 (MRPC, QQP): the second label is the positive class
            out["f1"] = M.f1(preds, gold, positive=labels[1])
        return out

    def output_rows(self, preds, outs, labels):
        return [{"label": p, "probabilities": {l: float(x) for l, x in zip(labels, softmax(o["logits"]))}}
                for p, o in zip(preds, outs)]

    def evaluation_rows(self, examples, feats, preds, outs, labels):
        return [{"label": e.label, "prediction": r["label"], "probabilities": r["probabilities"]}
                for e, r in zip(examples, self.output_rows(preds, outs, labels))]


@dataclass(frozen=True)
class Regression(_SentenceKind):
    name: ClassVar[str] = "regression"
    metrics: ClassVar[tuple[str, ...]] = ("pearson", "spearman", "mse")
    float_labels: ClassVar[bool] = True

    def new_model(self, model_dir, labels, **overrides):  # one output, MSE loss
        return self.head.from_pretrained(model_dir, num_labels=1, problem_type="regression", **overrides)

    def predictions(self, examples, feats, outs, labels):
        return [float(o["logits"][0]) for o in outs]

    def score(self, examples, preds, labels, null_threshold=None):
        gold = [e.label for e in examples]
        return {"pearson": M.pearson(preds, gold), "spearman": M.spearman(preds, gold),
                "mse": float(np.mean((np.asarray(preds) - np.asarray(gold)) ** 2))}

    def output_rows(self, preds, outs, labels):
        return [{"score": p} for p in preds]

    def evaluation_rows(self, examples, feats, preds, outs, labels):
        return [{"label": e.label, "prediction": p} for e, p in zip(examples, preds)]  # the prediction is the score


# ------------------------------------------------------------------------------------------- token classification
@dataclass(frozen=True)
class TokenClassification(TaskKind):
    """A tag per word (NER, CoNLL-2003); each word is predicted at its first piece."""

    name: ClassVar[str] = "token"
    metrics: ClassVar[tuple[str, ...]] = ("precision", "recall", "f1", "token_accuracy")
    head: ClassVar[type] = heads.AlbertForTokenClassification

    def read(self, path, labels=None, columns=None, encoding_errors="strict"):
        return R.read_conll(path, labels, encoding_errors=encoding_errors)

    def examples_from_json(self, rows, path, columns=None):
        out = []
        for line, o in rows:
            words = o.get("words")
            if words is None:
                words = json_text(o, ("text",), text_input.where(path, line)).split()
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise DataError(f"{text_input.where(path, line)}: 'words' must be a list of strings")
            out.append(R.TokenExample(str(o.get("id", line)), words))
        return out

    def collect_labels(self, examples, preset_labels):
        return list(preset_labels) if preset_labels else sort_labels(l for e in examples for l in e.labels or [])

    def for_inference(self, qa_decoding: str = "official", aggregation_strategy: str | None = None) -> "TaskKind":
        if aggregation_strategy is None:
            return self
        return TokenEntities(aggregation=aggregation_strategy)

    def featurize(self, tok, examples, labels, max_length, training=False):
        return encode_tokens(tok, examples, max_length, labels)

    def new_model(self, model_dir, labels, **overrides):
        return self.head.from_pretrained(model_dir, **label_names(labels), **overrides)

    def predictions(self, examples, feats, outs, labels):
        default = "O" if "O" in labels else labels[0]  # words cut by max_length
        result = []
        for e, f, o in zip(examples, feats, outs):
            tags = [default] * len(e.words)
            prev = None
            for pos, w in enumerate(f["word_ids"]):
                if w is not None and w != prev:  # a word's first piece
                    tags[w] = labels[int(np.argmax(o["logits"][pos]))]
                prev = w
            result.append(tags)
        return result

    def score(self, examples, preds, labels, null_threshold=None):
        out = M.entity_f1(preds, [e.labels for e in examples])
        out["token_accuracy"] = M.accuracy([t for s in preds for t in s], [t for e in examples for t in e.labels])
        return out

    def output_rows(self, preds, outs, labels):
        return [{"tags": p} for p in preds]

    def evaluation_rows(self, examples, feats, preds, outs, labels):
        """Gold and predicted tags per word; ``probabilities``: per word, tag -> probability at its first piece
        (None for words cut by max_length)."""
        rows = []
        for e, f, o, p in zip(examples, feats, outs, preds):
            probs: list[dict | None] = [None] * len(e.words)
            prev = None
            for pos, w in enumerate(f["word_ids"]):
                if w is not None and w != prev:
                    probs[w] = {l: float(x) for l, x in zip(labels, softmax(o["logits"][pos]))}
                prev = w
            rows.append({"label": e.labels, "prediction": p, "probabilities": probs})
        return rows


# ------------------------------------------------------------------------------------------------ multiple choice

@dataclass(frozen=True)
class TokenEntities(TokenClassification):
    """The token kind as ``litebert predict --aggregation-strategy`` runs it: each input's ``text`` (or its
    ``words`` joined by spaces) answered as the NER pipeline answers it, under ``entities``; texts are cut at the
    model's positions, as the pipeline cuts them."""

    aggregation: Literal["none", "simple", "first", "average", "max"] = "none"
    IGNORED: ClassVar[tuple[str, ...]] = ("O",)  # HF's default ignore_labels

    def examples_from_json(self, rows, path, columns=None):
        out = []
        for line, o in rows:
            words = o.get("words")
            if words is None:
                text = json_text(o, ("text",), text_input.where(path, line))
            elif isinstance(words, list) and all(isinstance(w, str) for w in words):
                text = " ".join(words)
            else:
                raise DataError(f"{text_input.where(path, line)}: 'words' must be a list of strings")
            out.append(R.TextExample(str(o.get("id", line)), text))
        return out

    def inference_length(self, fine_tuned: int, positions: int) -> int:
        return positions

    def featurize(self, tok, examples, labels, max_length, training=False):
        return G.features(tok, [e.text_a for e in examples], max_length)

    def predictions(self, examples, feats, outs, labels):
        return [G.entities(f["pieces"], softmax(o["logits"], axis=-1), labels, self.aggregation, self.IGNORED,
                         f["join"]) for f, o in zip(feats, outs)]

    def output_rows(self, preds, outs, labels):
        return [{"entities": [{k: float(v) if k == "score" else v for k, v in e.items()} for e in found]}
                for found in preds]


@dataclass(frozen=True)
class MultipleChoice(TaskKind):
    """Pick one of K options (RACE); each (context, question + option) row gets one score."""

    format: str = "jsonl"  # "race": RACE JSON (a file or a folder of them); "jsonl": one item a line
    max_qa_length: int = 128  # official run_race max_qa_length: pieces kept of question + option
    name: ClassVar[str] = "multiple_choice"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    head: ClassVar[type] = heads.AlbertForMultipleChoice

    def read(self, path, labels=None, columns=None, encoding_errors="strict"):
        reader = R.read_race if self.format == "race" else R.read_multiple_choice
        return reader(path, encoding_errors=encoding_errors)

    def examples_from_json(self, rows, path, columns=None):
        out = []
        for line, o in rows:
            choices = o.get("choices")
            if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
                raise DataError(f"{text_input.where(path, line)}: 'choices' must be a list of at least two strings")
            context = json_text(o, ("context",), text_input.where(path, line)) if "context" in o else ""
            out.append(R.MultipleChoiceExample(str(o.get("id", line)), context,
                                               json_text(o, ("question",), text_input.where(path, line)), choices))
        if len({len(e.choices) for e in out}) > 1:  # one [B, K, L] batch needs the same K
            raise DataError(f"{path}: every item needs the same number of choices")
        return out

    def featurize(self, tok, examples, labels, max_length, training=False):
        return encode_multiple_choice(tok, examples, max_length, self.max_qa_length)

    def predictions(self, examples, feats, outs, labels):
        return [int(np.argmax(o["logits"])) for o in outs]

    def score(self, examples, preds, labels, null_threshold=None):
        return {"accuracy": M.accuracy(preds, [e.label for e in examples])}

    def output_rows(self, preds, outs, labels):
        return [{"label": p, "probabilities": [float(x) for x in softmax(o["logits"])]} for p, o in zip(preds, outs)]

    def evaluation_rows(self, examples, feats, preds, outs, labels):
        return [{"label": e.label, "prediction": r["label"], "probabilities": r["probabilities"]}
                for e, r in zip(examples, self.output_rows(preds, outs, labels))]


# ------------------------------------------------------------------------------------------- extractive QA (SQuAD)
@dataclass(frozen=True)
class ExtractiveQA(TaskKind):
    """SQuAD v1.1: a span of the context answers every question. Predictions are dicts: ``id``, ``answer`` and
    ``answer_start`` (a character offset into the context; -1 for no answer). ``decoding``: how windows are cut and
    answers read (`litebert.tasks.qa_decode`: "official" or "hf", each with its own defaults); training windows are
    always the official ones, which carry the answer positions."""

    doc_stride: int = 128  # the official README's run_squad values
    max_query_length: int = 64
    decoding: Literal["official", "hf"] = "official"
    name: ClassVar[str] = "squad"
    metrics: ClassVar[tuple[str, ...]] = ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                                          "NoAns_exact", "NoAns_f1", "NoAns_total")
    head: ClassVar[type] = heads.AlbertForQuestionAnswering

    def read(self, path, labels=None, columns=None, encoding_errors="strict"):
        return R.read_squad(path, encoding_errors=encoding_errors)[0]

    def examples_from_json(self, rows, path, columns=None):
        return [R.SquadExample(str(o.get("id", line)), json_text(o, ("question",), text_input.where(path, line)),
                               json_text(o, ("context",), text_input.where(path, line))) for line, o in rows]

    def featurize(self, tok, examples, labels, max_length, training=False):
        feats = self._windows(tok, examples, max_length, training)
        for f in feats:
            f.pop("is_impossible", None)  # no answerability head to train
        return feats

    def _windows(self, tok, examples, max_length, training):
        return qa_windows(tok, examples, QADecoding(self.decoding), max_length,
                          min(self.doc_stride, max_length // 2), self.max_query_length, training)

    def for_inference(self, qa_decoding: str = "official", aggregation_strategy: str | None = None) -> "TaskKind":
        return replace(super().for_inference(qa_decoding, aggregation_strategy), decoding=qa_decoding)

    def inference_length(self, fine_tuned: int, positions: int) -> int:
        return qa_window_length(self.decoding, fine_tuned)

    def predictions(self, examples, feats, outs, labels):
        return self._answers(examples, feats, outs, None)

    def _answers(self, examples, feats, outs, na_logits: list[float] | None) -> list[dict]:
        best = [answers[0] if answers else None for answers in decode_answers(
            [e.context for e in examples], feats, [o["start_logits"] for o in outs], [o["end_logits"] for o in outs],
            QADecoding(self.decoding))]
        na_probs = no_answer_probs(len(examples), feats, na_logits) if na_logits is not None else None
        return [{"id": e.qas_id, "answer": b["answer"] if b else "", "answer_start": b["start"] if b and b["answer"]
                 else -1, **({"no_answer_prob": na_probs[i]} if na_probs is not None else {})}
                for i, (e, b) in enumerate(zip(examples, best))]

    def score(self, examples, preds, labels, null_threshold=None):
        return M.squad_evaluate(self._gold(examples), {p["id"]: p["answer"] for p in preds})

    @staticmethod
    def _gold(examples) -> dict[str, list[str]]:
        return {e.qas_id: [a["text"] for a in e.answers] for e in examples}

    def output_rows(self, preds, outs, labels):
        return [{k: v for k, v in p.items() if k != "id"} for p in preds]

    def evaluation_rows(self, examples, feats, preds, outs, labels):
        """Gold answers (texts; [] for an unanswerable question), the predicted answer ("" for none), its character
        offset and, for SQuAD v2, the no-answer probability."""
        return [{"label": [a["text"] for a in e.answers], "prediction": p["answer"],
                 **{k: v for k, v in p.items() if k not in ("id", "answer")}} for e, p in zip(examples, preds)]


@dataclass(frozen=True)
class ExtractiveQAWithNoAnswer(ExtractiveQA):
    """SQuAD v2.0: a question may have no answer. The model adds a no-answer logit per window
    (`litebert.tasks.squad.SquadV2Model`); predictions add ``no_answer_prob``, and a question answers "" when it exceeds
    the threshold that maximised dev F1 (official ``find_best_thresh``)."""

    head: ClassVar[type] = SquadV2Model
    metrics: ClassVar[tuple[str, ...]] = ExtractiveQA.metrics + ("best_exact", "best_exact_thresh", "best_f1",
                                                                 "best_f1_thresh")

    def featurize(self, tok, examples, labels, max_length, training=False):
        return self._windows(tok, examples, max_length, training)  # keeps is_impossible: the answerability target

    def predictions(self, examples, feats, outs, labels):
        return self._answers(examples, feats, outs, [float(o["na_logits"]) for o in outs])

    def score(self, examples, preds, labels, null_threshold=None):
        """The official v2.0 evaluation: questions whose no-answer probability exceeds ``null_threshold`` (default
        1.0: none) count as "no answer"; ``best_exact``/``best_f1`` and their thresholds come from the dev sweep."""
        return M.squad_evaluate(self._gold(examples), {p["id"]: p["answer"] for p in preds},
                                {p["id"]: p["no_answer_prob"] for p in preds},
                                1.0 if null_threshold is None else null_threshold)

    def thresholded(self, preds, null_threshold):
        if null_threshold is None:
            return preds
        return [{**p, "answer": "", "answer_start": -1} if p["no_answer_prob"] > null_threshold else p
                for p in preds]

    def chosen_on_dev(self, metrics):
        return {"null_threshold": metrics["best_f1_thresh"]} if "best_f1_thresh" in metrics else {}

