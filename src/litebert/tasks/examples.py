"""The examples a fine-tuning task reads (plain dataclasses), the checks of their labels, and the GLUE tasks' columns:
what the readers (`litebert.tasks.readers`, `litebert.tasks.glue_tables`) share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from litebert.errors import DataError


@dataclass
class TextExample:
    """A single-sentence or sentence-pair example (GLUE, user data). ``label`` is a class name, a float, or None."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None
    id: object = None  # the data's own id (an "id"/"index" column or key), None when it has none


@dataclass
class MultipleChoiceExample:
    guid: str
    context: str
    question: str
    choices: list[str]
    label: int | None = None
    id: object = None  # the data's own id, None when it has none


@dataclass
class TokenExample:
    guid: str
    words: list[str]
    labels: list[str] | None = None


@dataclass
class SquadExample:
    qas_id: str
    question: str
    context: str
    answers: list[dict] = field(default_factory=list)  # [{"text": str, "answer_start": int}], checked against context
    is_impossible: bool = False
    title: str = ""


def check_label(at: str, value: str, label_list: list[str] | None) -> str:
    """``value``, a label read at ``at`` (``file:line``), which must be one of ``label_list`` when it is given."""
    if label_list is not None and value not in label_list:
        raise DataError(f"{at}: label {value!r} is not one of the task's labels {label_list}")
    return value


def check_score(at: str, raw, column: str) -> float:
    """A regression target in ``column`` (its description: "column 'label'") read at ``at`` (``file:line``): a
    finite number (NaN or infinity would train to a NaN loss and score NaN)."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise DataError(f"{at}: {column} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise DataError(f"{at}: {column} is {raw!r}, expected a finite number")
    return value


# GLUE: task -> (column of text_a, column of text_b or None, column of the label or None (regression: float column),
# labels (None = regression)). Columns are header names; see the GLUE benchmark's data files.
GLUE_TASKS: dict[str, dict] = {
    "cola": dict(a="sentence", b=None, label="label", labels=["0", "1"]),
    "sst-2": dict(a="sentence", b=None, label="label", labels=["0", "1"]),
    "mrpc": dict(a="#1 String", b="#2 String", label="Quality", labels=["0", "1"]),
    "sts-b": dict(a="sentence1", b="sentence2", label="score", labels=None),
    "qqp": dict(a="question1", b="question2", label="is_duplicate", labels=["0", "1"]),
    "mnli": dict(a="sentence1", b="sentence2", label="gold_label", labels=["contradiction", "entailment", "neutral"]),
    "qnli": dict(a="question", b="sentence", label="label", labels=["entailment", "not_entailment"]),
    "rte": dict(a="sentence1", b="sentence2", label="label", labels=["entailment", "not_entailment"]),
    "wnli": dict(a="sentence1", b="sentence2", label="label", labels=["0", "1"]),
    # AX, the diagnostic set: MNLI's labels, predicted by an MNLI model; the public file has no labels.
    "ax": dict(a="sentence1", b="sentence2", label="label", labels=["contradiction", "entailment", "neutral"]),
}
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli", "mnli-mm": "mnli", "diagnostic": "ax",
            "mnli_matched": "mnli", "mnli_mismatched": "mnli"}


def glue_task_name(task: str) -> str:
    name = task.lower()
    name = _ALIASES.get(name, name)
    if name not in GLUE_TASKS:
        raise DataError(f"unknown GLUE task {task!r}; choose one of {sorted(GLUE_TASKS)}")
    return name
