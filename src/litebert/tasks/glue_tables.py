"""GLUE read from a table: a `datasets` folder (``save_to_disk``) or a split a dataset id loaded
(`litebert.inputs.hub_datasets`), a Parquet or an Arrow file, as the GLUE presets read the benchmark's TSV files.

Columns are the Hub's GLUE's (``nyu-mll/glue``: `HUB_COLUMNS`, the label in ``label``, the row's id in ``idx``), or,
when the table has those instead, the TSV header's (`litebert.tasks.examples.GLUE_TASKS`). Labels come out as the
TSV files spell them, so that a preset reads the same examples from either:

* a ``ClassLabel`` column (the Hub's GLUE has one) gives its class index where the TSV labels are 0 and 1 (CoLA,
  SST-2, MRPC, QQP, WNLI: the Hub's names, ``negative``/``positive`` and so on, are listed in the TSV's 0/1 order),
  its class name where the TSV labels are names (MNLI, QNLI, RTE, AX: the same names); -1, a test split's "no
  label", reads as no label;
* any other column gives its value: a number as its text (``0``), a score as a number (STS-B).

A split without labels (a test split) gives examples without labels, as a TSV test file does; a split with some rows
labelled and others not is an error naming the first unlabelled row.
"""

from __future__ import annotations

from litebert.errors import DataError
from litebert.inputs import columnar
from litebert.inputs import text as text_input
from litebert.tasks.examples import GLUE_TASKS, TextExample, check_label, check_score

# The text columns of each task in the Hub's GLUE (features of nyu-mll/glue, the dataset `datasets` used to build
# as "glue"; e.g. tensorflow/datasets docs/community_catalog/huggingface/glue.md lists them).
HUB_COLUMNS = {
    "cola": ("sentence", None), "sst-2": ("sentence", None), "mrpc": ("sentence1", "sentence2"),
    "sts-b": ("sentence1", "sentence2"), "qqp": ("question1", "question2"), "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"), "rte": ("sentence1", "sentence2"), "wnli": ("sentence1", "sentence2"),
    "ax": ("premise", "hypothesis"),
}
_IDS = ("idx", "index", "id")


def _layout(name: str, have: list[str], path) -> tuple[str, str | None, str]:
    """(text_a, text_b, label) columns of the table: the Hub's, else the TSV header's; neither is a `DataError`."""
    spec = GLUE_TASKS[name]
    for a, b, label in ((*HUB_COLUMNS[name], "label"), (spec["a"], spec["b"], spec["label"])):
        if a in have and (b is None or b in have):
            return a, b, label
    hub = ", ".join(c for c in HUB_COLUMNS[name] if c)
    tsv = ", ".join(c for c in (spec["a"], spec["b"]) if c)
    raise DataError(f"{path}: no columns for GLUE {name.upper()}: the Hub's GLUE has {hub}, the TSV files {tsv}; "
                    f"the table has {', '.join(have) or 'none'}")


def _label(at: str, value, names: list[str] | None, spec: dict) -> str | float:
    """The TSV spelling of the label ``value`` read at ``at`` (``names``: its ClassLabel's names, if it is one)."""
    if spec["labels"] is None:
        return check_score(at, value, "column 'label'")
    if names is not None and value in names and all(label.isdigit() for label in spec["labels"]):
        value = str(names.index(value))  # the Hub's names, in the TSV's 0/1 order
    elif isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{at}: label {value!r} is not one of the task's labels {spec['labels']}")
    return check_label(at, str(value).strip(), spec["labels"])


def read_glue_table(name: str, path) -> list[TextExample]:
    """The examples of the GLUE task ``name`` (`litebert.tasks.examples.glue_task_name`) in the table ``path``."""
    spec = GLUE_TASKS[name]
    kind = text_input.table_kind(path)
    have = columnar.column_names(path, kind)
    a, b, label = _layout(name, have, path)
    label = label if label in have else None
    own = next((c for c in _IDS if c in have), None)
    names = columnar.class_names(path, kind).get(label) if label else None
    out: list[TextExample] = []
    unlabelled = None  # where the first row without a label is
    for row, rec in columnar.iter_rows(path, kind, [c for c in (a, b, label, own) if c]):
        at = text_input.where(path, row)
        for column in (a, b):
            if column is not None and not isinstance(rec[column], str):
                raise DataError(f"{at}: column {column!r} must be text, got {rec[column]!r}")
        y = None if label is None or rec[label] is None else _label(at, rec[label], names, spec)
        if y is None and unlabelled is None:
            unlabelled = at
        own_id = rec[own] if own else None
        out.append(TextExample(f"{name}-{own_id if own_id is not None else row}", rec[a], rec[b] if b else None, y,
                               own_id))
    if not out:
        raise DataError(f"{path}: no examples (an empty split?)")
    if unlabelled is not None and any(e.label is not None for e in out):
        raise DataError(f"{unlabelled}: no label (null, or -1 in a ClassLabel) where other rows have one; label "
                        "every example, or use predict for unlabelled data")
    return out
