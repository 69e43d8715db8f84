"""finetune.json, the record `litebert finetune` leaves in a fine-tuned folder, and its one reader.

`read_meta` reads the file and checks its shape once (`check_meta`), so that every reader (predict and evaluate, the
pipelines, the pairing check, plot, the model card, the lr grid) gets a document whose entries have the types the
writer gives them (`litebert.finetuning.job._meta`): a file that does not is a one-line `CheckpointError` naming the
file and the entry, not a TypeError inside whichever reader touches that entry first. Entries the document lacks
stay absent (each reader has its default); entries this version does not know are kept (a later version's)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from litebert.errors import CheckpointError, literal
from litebert.files import read_json
from litebert.folders import FINETUNE_META


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _names(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v) and len(set(v)) == len(v)


# entry -> (what it must be, the test), as `litebert.finetuning.job` writes them
ENTRIES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "task": ("a task name", lambda v: isinstance(v, str)),
    "kind": ("a task kind's name", lambda v: isinstance(v, str)),
    "head": ("a head's class name", lambda v: isinstance(v, str)),
    "labels": ("null or a list of distinct label names", lambda v: v is None or _names(v)),
    "metric": ("a metric's name", lambda v: isinstance(v, str)),
    "preset": ("null or an object (the task preset as run)", lambda v: v is None or isinstance(v, dict)),
    "columns": ("an object of field names to column names",
                lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values())),
    "train": ("an object (the training settings)", lambda v: isinstance(v, dict)),
    "best_step": ("null or a step (a whole number >= 0)",
                  lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)),
    "dev_metrics": ("an object of metric names to numbers",
                    lambda v: isinstance(v, dict) and all(_number(x) for x in v.values())),
    "complete": ("true or false", lambda v: isinstance(v, bool)),
    "null_threshold": ("null or a number", lambda v: v is None or _number(v)),
    "lora": ("an object (the LoRA settings)", lambda v: isinstance(v, dict)),
}


def check_meta(meta: dict, path: str | os.PathLike) -> dict:
    """``meta`` (the document of the finetune.json ``path``) if each entry it has is of its kind (`ENTRIES`) and it
    names its task; else a `CheckpointError` naming the file and the entry."""
    if "task" not in meta:
        raise CheckpointError(f"{literal(path)}: no 'task' entry; is this a file written by `litebert finetune`?")
    for key, (what, ok) in ENTRIES.items():
        if key in meta and not ok(meta[key]):
            shown = json.dumps(meta[key], ensure_ascii=False)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise CheckpointError(f"{literal(path)}: {key!r} is {literal(shown)}, expected {what}; write the folder "
                                  "again with `litebert finetune`")
    return meta


def read_meta(folder: str | os.PathLike) -> dict:
    """The checked finetune.json of the fine-tuned folder ``folder`` (`check_meta`); a missing or unreadable file
    is a `CheckpointError` naming it."""
    path = Path(folder) / FINETUNE_META
    return check_meta(read_json(path, CheckpointError), path)
