"""Where a task's examples come from: what `finetune` (``data``, ``dev``) and `evaluate` (``data``) are given, turned
into the file, folder or dataset split that each split is read from.

``data`` is one of:

* a file, local or at a URL (`litebert.inputs.remote`): the training split (for `evaluate`, the split to score);
* a folder, local or at a URL, holding the splits by their usual names (`pick_split`): ``train.tsv``,
  ``dev.tsv``, ``dev_matched.tsv``...; a `datasets` ``DatasetDict`` folder is one, its split folders ``train``,
  ``validation``...; a ``Dataset`` folder is one split;
* a dataset id (`litebert.inputs.hub_datasets`; a path that exists always wins): its splits, by the same names, or the
  one split it names (``glue:mnli:validation_mismatched``).

``dev`` is a path (local, or a URL), a dataset id, or the name of one of ``data``'s splits: a file or sub-folder of
its folder, a split of its dataset (``--dev validation_mismatched``). Without it, the dev split is found by name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from litebert.errors import DataError
from litebert.inputs import columnar, hub_datasets
from litebert.inputs.remote import RemotePath, as_path, is_url

_SPLITS = {"train": ("train", "eng.train"), "dev": ("dev_matched", "dev", "valid", "validation", "eng.testa"),
           "test": ("test_matched", "test", "eng.testb")}


def find_split(folder: str | Path, split: str) -> Path | None:
    """The file (or RACE sub-folder, or `datasets` split folder) for ``split`` in a data folder (local, or at a URL):
    the first entry whose name `pick_split` picks. Hidden entries are skipped: they include the temporaries of writes
    in progress (`files.atomic_write`)."""
    entries = sorted(p for p in as_path(folder).iterdir() if not p.name.startswith("."))
    name = pick_split([p.name for p in entries], split)
    return next((p for p in entries if p.name == name), None)


def pick_split(names: list[str], split: str) -> str | None:
    """The first of ``names`` that starts with one of the split's usual names as a whole word (``dev_matched``
    before ``dev`` for MNLI; CoNLL's ``eng.testa`` is dev; the Hub's ``validation_matched``), or None."""
    for usual in _SPLITS[split]:
        pattern = re.compile(rf"(^|[_.-]){re.escape(usual)}([_.-]|$)")  # "train.tsv", "disfl_qa_train.json.gz"
        for name in sorted(names):
            if pattern.search(name):
                return name
    return None


def split_paths(data: str | os.PathLike, dev: str | os.PathLike | None):
    """``(train, dev)``: what the training split and the dev split are read from (dev None without one)."""
    if hub_datasets.is_dataset_id(data):
        splits = hub_datasets.load(os.fspath(data))
        named = hub_datasets.parse(data)["split"] is not None
        train = next(iter(splits.values())) if named else _by_name(splits, "train", data)
        if dev:
            return train, _dev(dev, splits=splits)
        name = None if named else pick_split(list(splits), "dev")
        return train, splits[name] if name else None
    data_path = as_path(data)
    if not data_path.exists():
        raise DataError("{data}: no such file or folder", data=data)
    folder = data_path.is_dir() and columnar.dataset_folder(data_path) != "dataset"
    train = (find_split(data_path, "train") or data_path) if folder else data_path
    if dev:
        return train, _dev(dev, folder=data_path if folder else None)
    return train, find_split(data_path, "dev") if folder else None


def eval_path(data: str | os.PathLike):
    """What `evaluate` scores: the file; a folder's (or a dataset's) dev split, else its test split."""
    if hub_datasets.is_dataset_id(data):
        splits = hub_datasets.load(os.fspath(data))
        if hub_datasets.parse(data)["split"] is not None:
            return next(iter(splits.values()))
        name = pick_split(list(splits), "dev") or pick_split(list(splits), "test")
        if name is None:
            raise DataError(f"{data}: no dev, validation or test split (it has {', '.join(splits)}); name the split "
                            f"to score, as in {data}:CONFIG:SPLIT")
        return splits[name]
    path = as_path(data)
    if path.is_dir() and columnar.dataset_folder(path) != "dataset":  # a folder of splits (a Dataset is one split)
        found = find_split(path, "dev") or find_split(path, "test")
        if found is None:
            raise DataError("{data}: no dev/valid file in this folder", data=data)
        return found
    return path


def _by_name(splits: dict, split: str, data) -> object:
    name = pick_split(list(splits), split)
    if name is None:
        raise DataError(f"{data}: no {split} split (the dataset has {', '.join(splits)}); name the split to train on "
                        f"after the configuration, as in {data}:CONFIG:SPLIT")
    return splits[name]


def _dev(dev, folder: Path | RemotePath | None = None, splits: dict | None = None):
    """The dev split ``dev`` names: a path, one of ``data``'s splits by name (an entry of its ``folder``, one of its
    ``splits``), or a dataset id."""
    path = as_path(dev)
    if is_url(dev) or path.exists():
        return path
    name = os.fspath(dev)
    if splits is not None and name in splits:
        return splits[name]
    if folder is not None and "/" not in name and (folder / name).exists():
        return folder / name
    if hub_datasets.is_dataset_id(dev):
        found = hub_datasets.load(name)
        return next(iter(found.values())) if len(found) == 1 else _by_name(found, "dev", dev)
    return path  # missing: reported, with its name, where it is read
