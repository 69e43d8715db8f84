"""Dataset ids: a dataset of the Hugging Face Hub as fine-tuning data, loaded with ``datasets.load_dataset``.

An id is ``NAME`` or ``ORG/NAME``, then optionally ``:CONFIG`` and ``:SPLIT``, then ``@REVISION``:
``nyu-mll/glue:sst2``, ``glue:mnli:validation_mismatched``, ``stanfordnlp/imdb``, ``imdb::test`` (the default
configuration's test split). Told apart from a path as model ids are (`litebert.hub`): a path that exists is read as
a path, always; a string that names nothing on disk is an id when it has that shape, is not a URL, does not start
with ``.``, ``/`` or ``~`` and does not end in a data file's suffix (a missing ``data/train.tsv`` stays a missing
file). Naming an id is the user asking for the network.

Loading is the `datasets` package's (the ``litebert[hf-datasets]`` extra), imported only for an id, with the user's
cache (``HF_DATASETS_CACHE``, else ``HF_HOME/datasets``, read when the id is loaded) and offline mode
(``HF_DATASETS_OFFLINE`` when set, else ``HF_HUB_OFFLINE``, which ``--offline`` sets): offline, only what the cache
holds is read, and an id it does not hold is a one-line error saying so.

Each split of a loaded dataset is a `DatasetSplit`, read as a table (`litebert.inputs.columnar`): a row a record,
``ClassLabel`` columns as their label names, rows numbered from 0 in errors (``glue:sst2 [train]: row 12``).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Iterator

from litebert.errors import DataError
from litebert.extras import install_hint

_TRUE = ("1", "ON", "YES", "TRUE")  # datasets' ENV_VARS_TRUE_VALUES
_NAME = r"[A-Za-z0-9][\w.-]{0,95}"
_ID = re.compile(rf"^(?P<repo>{_NAME}(?:/{_NAME})?)(?::(?P<config>[\w.-]{{0,200}})(?::(?P<split>[\w.-]{{1,200}}))?)?"
                 r"(?:@(?P<revision>[\w./-]{1,200}))?$")
# A name ending so is a data file, never an id: a missing "data/train.tsv" is reported as a missing file.
_DATA_SUFFIXES = (".tsv", ".csv", ".txt", ".json", ".jsonl", ".ndjson", ".parquet", ".arrow", ".feather", ".gz",
                  ".xz", ".bz2", ".zst", ".zip")


class DatasetSplit:
    """One split of a dataset that `datasets` loaded (a ``datasets.Dataset``), read as a table; ``name`` stands for
    it in messages and in finetune.json."""

    def __init__(self, name: str, dataset):
        self.name, self.dataset = name, dataset

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DatasetSplit({self.name!r})"

    def schema(self):
        return self.dataset.features.arrow_schema

    def class_names(self) -> dict[str, list[str]]:
        """{column: label names} of its ``ClassLabel`` columns."""
        return {column: list(feature.names) for column, feature in self.dataset.features.items()
                if type(feature).__name__ == "ClassLabel"}

    def batches(self, columns: list[str] | None) -> Iterator:
        """Its record batches (only ``columns`` when given), a thousand rows at a time from `datasets`' memory-mapped
        cache files."""
        from litebert.inputs.columnar import BATCH_ROWS

        part = self.dataset if columns is None else self.dataset.select_columns(columns)
        for table in part.with_format("arrow").iter(batch_size=BATCH_ROWS):
            yield from table.to_batches()


def parse(spec) -> dict[str, str | None] | None:
    """``{"repo", "config", "split", "revision"}`` of the id ``spec``; None when ``spec`` is not an id's shape."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or "://" in spec or spec.startswith((".", "/", "~")) or ".." in spec:
        return None
    match = _ID.match(spec)
    if match is None or match["repo"].lower().endswith(_DATA_SUFFIXES):
        return None
    return {key: match[key] or None for key in ("repo", "config", "split", "revision")}


def is_dataset_id(spec) -> bool:
    """Whether ``spec`` is read as a dataset id: it names no existing path and has an id's shape (`parse`)."""
    return parse(spec) is not None and not Path(os.fspath(spec)).exists()


def offline() -> bool:
    """Offline mode as `datasets` reads it: ``HF_DATASETS_OFFLINE`` when set, else ``HF_HUB_OFFLINE`` (or
    ``TRANSFORMERS_OFFLINE``), read now."""
    from litebert import hub

    value = os.environ.get("HF_DATASETS_OFFLINE")
    return value.strip().upper() in _TRUE if value is not None else hub.offline()


def cache_dir() -> Path:
    """The `datasets` cache, read from the environment now (not when `datasets` was imported)."""
    if os.environ.get("HF_DATASETS_CACHE"):
        return Path(os.environ["HF_DATASETS_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "datasets"


def load(spec: str) -> dict[str, DatasetSplit]:
    """The splits of the dataset ``spec`` names ({split name: `DatasetSplit`}; only the one it names, when it names
    one), from the cache or downloaded (`offline`)."""
    parts = parse(spec)
    if parts is None:
        raise DataError(f"{spec}: not a dataset id (ORG/NAME[:CONFIG[:SPLIT]][@REVISION])")
    try:
        import datasets
    except ImportError:
        raise DataError(f"{spec}: no such file or folder; read as a dataset id it needs the datasets package "
                        f"({install_hint('hf-datasets', 'datasets')})") from None
    off, cache = offline(), cache_dir()
    try:
        with _offline_mode(datasets, off), _quiet(datasets):
            loaded = datasets.load_dataset(parts["repo"], parts["config"], revision=parts["revision"],
                                           cache_dir=str(cache))
    except Exception as e:  # noqa: BLE001 - datasets and huggingface_hub raise many kinds; one line for all
        raise _failure(spec, parts, e, off, cache) from None
    if not isinstance(loaded, Mapping):
        loaded = {"train": loaded}
    splits = {name: DatasetSplit(f"{spec} [{name}]" if not parts["split"] else spec, ds)
              for name, ds in loaded.items()}
    if parts["split"] is None:
        return splits
    if parts["split"] not in splits:
        raise DataError(f"{spec}: no split {repr(parts['split'])} (the dataset has "
                        f"{', '.join(splits)})")
    return {parts["split"]: splits[parts["split"]]}


@contextlib.contextmanager
def _quiet(datasets):
    """`datasets` without its notices and progress bars for the call (on every cached load it says "Using the latest
    cached version ..." and "Found the latest cached dataset configuration ..."): its verbosity set to errors, by its
    own logging API, and its progress bars off; both as they were afterwards. A failure still raises (`_failure`
    makes it one line)."""
    from datasets.utils import logging as ds_logging

    verbosity, bars_off = ds_logging.get_verbosity(), datasets.utils.are_progress_bars_disabled()
    ds_logging.set_verbosity_error()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        ds_logging.set_verbosity(verbosity)
        if not bars_off:
            datasets.enable_progress_bars()


@contextlib.contextmanager
def _offline_mode(datasets, on: bool):
    """`datasets` in offline mode ``on`` for the call: it reads the environment once, when it is imported, and a
    library call must obey the environment as it is when the call is made."""
    config = datasets.config
    before = config.HF_HUB_OFFLINE, config.HF_DATASETS_OFFLINE
    config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = on
    try:
        yield
    finally:
        config.HF_HUB_OFFLINE, config.HF_DATASETS_OFFLINE = before


def _failure(spec: str, parts: dict, e: Exception, off: bool, cache: Path) -> DataError:
    reason = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())[:400] or type(e).__name__
    what = parts["repo"] + (f":{parts['config']}" if parts["config"] else "")
    hint = ""
    if "/" in parts["repo"] and parts["config"] is None:  # glue/sst2, meant as dataset/config
        hint = f"; a configuration follows a colon, as in {parts['repo'].replace('/', ':')}"
    if off:
        return DataError(f"{spec}: no such file or folder, and the dataset {what} is not in the datasets cache "
                         f"({cache}) while offline mode is on (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE / --offline): "
                         f"{reason}; load it once where there is network (HF_DATASETS_CACHE names the cache to copy), "
                         f"or run without offline mode{hint}")
    if type(e).__name__ in ("DatasetNotFoundError", "DataFilesNotFoundError", "FileNotFoundError"):
        return DataError(f"{spec}: no such file or folder, and no dataset {parts['repo']} on the Hugging Face Hub "
                         f"({reason}){hint}")
    if isinstance(e, ConnectionError):
        return DataError(f"{spec}: no such file or folder, and the Hugging Face Hub cannot be reached to load it as a "
                         f"dataset ({reason}); check the network, or give a local path")
    return DataError(f"{spec}: no such file or folder, and loading the dataset {what} failed "
                     f"({type(e).__name__}: {reason})")
