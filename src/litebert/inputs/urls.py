"""The files a URL names, as `litebert.inputs.text.expand_inputs` lists a local path's: a file, every file below a
folder (hidden parts skipped), the matches of a glob; a `datasets` folder is one input (a ``DatasetDict``'s split).
It knows both how to read a URL (`litebert.inputs.remote`) and what a `datasets` folder is
(`litebert.inputs.columnar`), which know nothing of each other's listing."""

from __future__ import annotations

from litebert.errors import DataError
from litebert.inputs import columnar
from litebert.inputs.remote import RemotePath, failures, has_magic


def expand(spec: str | RemotePath, split: str = "train") -> list[RemotePath]:
    """The files of a remote file, folder or glob, as `litebert.inputs.text.expand_inputs` lists a local one's:
    every file below a folder whose path below it has no hidden part; a `datasets` folder as one input (of a
    ``DatasetDict`` its ``split``); sorted in `Path` order."""
    root = spec if isinstance(spec, RemotePath) else RemotePath(spec)
    if not has_magic(root.url):
        if root.info() is None:
            raise DataError(f"input {root.url} does not exist (nothing at that URL)")
        return _files_below(root, split) if root.is_dir() else [root]
    with failures(root.url):
        matches = root.fs.glob(root.fs_path, detail=True)
    found: set[RemotePath] = set()
    tables: list[str] = []  # datasets folders matched: the files inside them are not inputs of their own
    for name, info in sorted(matches.items()):
        match = RemotePath(root.child_url(name), _fs=root.fs, _info=info)
        if match.name.startswith(".") or any(match.url.startswith(t) for t in tables):
            continue
        if not match.is_dir():
            found.add(match)
            continue
        entries = _entries(match)
        if _dataset_input(match, entries, split) is not None:
            tables.append(match.url.rstrip("/") + "/")
        found.update(_files_below(match, split, entries))
    return sorted(found)


def _entries(folder: RemotePath) -> list[RemotePath]:
    return [e for e in folder.iterdir() if not e.name.startswith(".")]


def _dataset_input(folder: RemotePath, entries: list[RemotePath], split: str) -> RemotePath | None:
    """The input that ``folder`` is when it is a `datasets` folder (itself, or its ``split``'s folder); else None."""
    kind = columnar.dataset_kind({e.name for e in entries if not e.is_dir()})
    if kind == "dataset_dict":
        return columnar.split_folder(folder, (split,))
    return folder if kind == "dataset" else None


def _files_below(folder: RemotePath, split: str, entries: list[RemotePath] | None = None) -> list[RemotePath]:
    entries = _entries(folder) if entries is None else entries
    table = _dataset_input(folder, entries, split)
    if table is not None:
        return [table]
    found: list[RemotePath] = []
    for entry in entries:
        found.extend(_files_below(entry, split) if entry.is_dir() else [entry])
    return sorted(found)


# --------------------------------------------------------------------------------------------------- failures
