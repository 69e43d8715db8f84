"""Tables as inputs: Parquet, Arrow IPC (file and stream formats), `datasets` folders, and texts held in Python.

Tables are read with pyarrow (in the ``datasets`` extra), imported only when such an input is given. A table
is read a record batch at a time (Parquet: `BATCH_ROWS` rows at a time, its pages read as they are needed) and only
in the columns asked for, so memory follows the size of a batch, not of the file (nor of a Parquet row group).
`litebert.inputs.text` decides which inputs are tables (by name and magic bytes) and reads them through this module:

* ``*.parquet``: Parquet.
* ``*.arrow``, ``*.feather``: Arrow IPC, the file format (``ARROW1``; Feather v2) or the stream format (what
  `datasets` writes).
* a `datasets` ``save_to_disk`` folder: a ``Dataset`` (``state.json``, ``dataset_info.json`` and Arrow stream files
  ``data-*.arrow``, read in the order ``state.json`` lists them) or a ``DatasetDict`` (``dataset_dict.json`` and a
  sub-folder per split, of which `choose_split` picks one).
* in Python, a ``datasets.Dataset``, ``IterableDataset`` or ``DatasetDict``, a pandas ``DataFrame``, or any other
  iterable of strings (`text_source`).

A table may be at a URL (`litebert.inputs.remote`: read by byte ranges through the filesystem's cache), or be a split
that `datasets` loaded for a dataset id (`litebert.inputs.hub_datasets.DatasetSplit`, the kind ``"split"``).

Rows are numbered from 0, as pandas and `datasets` index them: errors read ``file.parquet: row 12: ...``. Each
record batch is validated in full before it is read (strings are UTF-8, offsets stay inside their buffers), which
pyarrow does not do by itself. A ``ClassLabel`` column (`datasets` keeps its features in the schema's metadata)
reads as its label names, and -1, its "no label", as null.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from litebert.errors import DataError, first_line, literal
from litebert.extras import install_hint
from litebert.files import file_in, json_field, json_kind, parse_json, read_json
from litebert.inputs.remote import ReadFailure, RemotePath, as_path

BATCH_ROWS = 1024
DATASET_FILES = ("state.json", "dataset_info.json")
DATASET_DICT = "dataset_dict.json"
WHAT = {"parquet": "a Parquet file", "arrow": "an Arrow IPC file", "arrow-stream": "an Arrow IPC stream",
        "dataset": "a datasets folder", "split": "a dataset split"}


# ---------------------------------------------------------------------------------------------- datasets folders
def dataset_folder(path: str | os.PathLike) -> str | None:
    """``"dataset"`` for a ``Dataset.save_to_disk`` folder, ``"dataset_dict"`` for a ``DatasetDict``'s, else None
    (a local folder or a URL: `litebert.inputs.remote`)."""
    path = as_path(path)
    if (path / DATASET_DICT).is_file():
        return "dataset_dict"
    if all((path / name).is_file() for name in DATASET_FILES):
        return "dataset"
    return None


def dataset_kind(names: set[str]) -> str | None:
    """`dataset_folder` of a folder whose files are ``names`` (a remote folder's listing)."""
    if DATASET_DICT in names:
        return "dataset_dict"
    return "dataset" if all(name in names for name in DATASET_FILES) else None


def choose_split(splits: list[str], where: str, prefer: tuple[str, ...] = ()) -> str:
    """The split to read of a ``DatasetDict`` at ``where``: the first of ``prefer`` it has, else its only split;
    several splits and none preferred is a `DataError` listing them."""
    for name in prefer:
        if name in splits:
            return name
    if len(splits) == 1:
        return splits[0]
    wanted = f"no {' or '.join(map(repr, prefer))} split and " if prefer else ""
    raise DataError(f"{where}: a DatasetDict with {wanted}the splits {literal(', '.join(splits))}; give one split "
                    f"(its folder: {literal(os.path.join(where, splits[0]))})")


def split_folder(folder: str | os.PathLike, prefer: tuple[str, ...] = ()) -> Path:
    """The folder of the split of the ``DatasetDict`` folder ``folder`` to read (`choose_split`)."""
    folder = as_path(folder)
    path = folder / DATASET_DICT
    splits = json_field(read_json(path, DataError), "splits", list, path, DataError)
    if not splits or not all(isinstance(s, str) for s in splits):
        raise DataError(f"{path}: expected a non-empty list of split names under 'splits'")
    for name in splits:
        file_in(folder, name, path, DataError)  # a split is a sub-folder: none may lead elsewhere
    return folder / choose_split(splits, str(folder), prefer)


def _data_files(folder: Path) -> list[Path]:
    """The Arrow files of a ``Dataset.save_to_disk`` folder, in order (``state.json``'s ``_data_files``)."""
    path = folder / "state.json"
    entries = json_field(read_json(path, DataError), "_data_files", list, path, DataError)
    files = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise DataError(f"{path}: '_data_files[{i}]' is a JSON {json_kind(type(entry))}, expected a JSON object "
                            "{'filename': NAME}")
        name = json_field(entry, "filename", str, path, DataError, where=f"_data_files[{i}].")
        files.append(file_in(folder, name, path, DataError))
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise DataError(f"{missing[0]}: listed in {folder}/state.json but missing; copy the whole folder again")
    return files


# ---------------------------------------------------------------------------------------------------- opening
def _pyarrow(path, what: str):
    """pyarrow (with ipc and parquet loaded), or a `DataError` naming ``path`` and the extra to install."""
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet  # noqa: F401  (loaded here so that a missing part fails here)
    except ImportError:
        raise DataError(f"{path}: {what}; reading it needs pyarrow ({install_hint('datasets', 'pyarrow')})") from None
    return pyarrow


@dataclass
class _Table:
    """An opened table: its name for messages, its schema, and ``batches(columns)``, its record batches."""

    path: Path
    kind: str
    schema: Any  # pyarrow.Schema
    batches: Callable[[list[str] | None], Iterator]
    class_names: dict[str, list[str]] | None = None  # {column: label names}; None: from the schema's metadata


def _open(path: Path, kind: str) -> _Table:
    pa = _pyarrow(path, WHAT[kind])
    if kind == "split":  # a split loaded by `datasets` (`litebert.inputs.hub_datasets.DatasetSplit`)
        return _Table(path, kind, path.schema(), path.batches, path.class_names())
    try:
        if kind == "parquet":
            return _parquet(pa, path)
        if kind == "dataset":
            return _dataset(pa, path)
        schema = _ipc_schema(pa, path, kind)
    except (pa.ArrowException, OSError) as e:
        raise _unreadable(path, kind, e) from None
    return _Table(path, kind, schema, lambda columns: _ipc_batches(pa, path, kind, columns))


def _source(pa, path):
    """``path`` opened for pyarrow, read (not memory-mapped: a batch is in memory while it is used, then freed): a
    local file as pyarrow's own, a URL as the stream `litebert.inputs.remote` gives (read and seeked through its
    cache)."""
    if isinstance(path, RemotePath):
        return pa.PythonFile(path.open(), mode="r")
    return pa.OSFile(str(path))


def _parquet(pa, path: Path) -> _Table:
    import pyarrow.parquet as pq

    # pre_buffer (pyarrow's default) reads ahead the byte ranges of every row group asked for: the whole file when
    # it is read in one go. Without it, and with buffered reads (buffer_size), the pages of a column chunk are read
    # and decoded as the batches need them: memory follows the batch, not the row group (`datasets` writes row
    # groups of up to ~100 MB).
    def parquet_file(source):
        return pq.ParquetFile(source, pre_buffer=False, buffer_size=1 << 20)

    with _source(pa, path) as source:
        schema = parquet_file(source).schema_arrow

    def batches(columns):
        with _source(pa, path) as source:
            file = parquet_file(source)
            for group in range(file.num_row_groups):
                yield from file.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=columns,
                                             use_threads=False)

    return _Table(path, "parquet", schema, batches)


def _ipc_reader(pa, source, kind: str):
    return pa.ipc.open_file(source) if kind == "arrow" else pa.ipc.open_stream(source)


def _ipc_schema(pa, path: Path, kind: str):
    with _source(pa, path) as source:
        return _ipc_reader(pa, source, kind).schema


def _ipc_batches(pa, path: Path, kind: str, columns: list[str] | None) -> Iterator:
    with _source(pa, path) as source:
        reader = _ipc_reader(pa, source, kind)
        if kind == "arrow":
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            batches = iter(reader)
        for batch in batches:
            yield batch.select(columns) if columns is not None else batch


def _dataset(pa, folder: Path) -> _Table:
    if dataset_folder(folder) == "dataset_dict":
        folder = split_folder(folder)
    files = _data_files(folder)
    schema = _ipc_schema(pa, files[0], "arrow-stream") if files else pa.schema([])

    def batches(columns):
        for f in files:
            yield from _ipc_batches(pa, f, "arrow-stream", columns)

    return _Table(folder, "dataset", schema, batches)


def _unreadable(path: Path, kind: str, e: Exception) -> DataError:
    if isinstance(e, ReadFailure):  # the network failed, not the file
        return DataError(f"{path}: {e}")
    if isinstance(e, io.UnsupportedOperation) and isinstance(path, RemotePath):
        return DataError(f"{path}: {WHAT[kind]} is read in pieces, and the server does not serve byte ranges (nor "
                         "the file's size); download it, or serve it from a server that does")
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return DataError(f"{path}: cannot read it as {WHAT[kind]} ({literal(first)}); is it complete and undamaged?")


def _batches(table: _Table, columns: list[str] | None) -> Iterator:
    """The record batches of ``table`` in ``columns``, each validated in full; a damaged file is a `DataError`
    naming it (and the column and row where it can)."""
    import pyarrow as pa

    row = 0
    try:
        for batch in table.batches(columns):
            _validate(table, batch, row)
            yield batch
            row += batch.num_rows
    except (pa.ArrowException, OSError) as e:
        raise _unreadable(table.path, table.kind, e) from None


def _validate(table: _Table, batch, first_row: int) -> None:
    """Refuse a batch whose buffers do not hold what its schema says. pyarrow reads Arrow and Parquet without
    checking that strings are UTF-8 or that offsets stay inside their buffers (a cheap check only: full validation is
    left to the reader), and converting such a batch to Python raises UnicodeDecodeError or reads past the buffer.
    The error names the column and the first bad row (``first_row`` is the batch's first row in the table)."""
    import pyarrow as pa

    try:
        batch.validate(full=True)
        return
    except pa.ArrowException as e:
        whole = e
    for i, name in enumerate(batch.schema.names):
        column = batch.column(i)
        try:
            column.validate(full=True)
            continue
        except pa.ArrowException as e:
            problem = e
        for k in range(len(column)):
            try:
                column.slice(k, 1).validate(full=True)
            except pa.ArrowException as e:
                at, problem = f"row {first_row + k}: ", e
                break
        else:
            at = f"rows {first_row} to {first_row + len(column) - 1}: "
        # pyarrow counts strings within what it validated (the one row): the row named above is the one to show
        reason = re.sub(r" at string index \d+", "", first_line(problem, 200))
        raise DataError(f"{table.path}: {at}column {name!r} is damaged ({reason}); the file is corrupt, or its writer "
                        "wrote what its schema does not allow: write it again from the source")
    raise _unreadable(table.path, table.kind, whole)


def column_names(path: str | os.PathLike, kind: str) -> list[str]:
    """The column names of the table ``path`` (of `litebert.inputs.text.table_kind` ``kind``)."""
    return list(_open(as_path(path), kind).schema.names)


def class_names(path: str | os.PathLike, kind: str) -> dict[str, list[str]]:
    """{column: label names} of the ``ClassLabel`` columns of the table ``path`` (`iter_rows` gives their names)."""
    table = _open(as_path(path), kind)
    return table.class_names if table.class_names is not None else _class_names(table.schema, table.path)


# ---------------------------------------------------------------------------------------------------- reading
def iter_texts(path: str | os.PathLike, kind: str, field: str) -> Iterator[tuple[int, str]]:
    """``(row, text)`` of each row of the table ``path``, the text from its string column ``field``; a missing or
    non-string column, or a null, is a `DataError` naming the file (and row)."""
    table = _open(as_path(path), kind)
    _check_text_column(table, field)
    row = 0
    for batch in _batches(table, [field]):
        for i, text in enumerate(batch.column(0).to_pylist()):
            if text is None:
                raise DataError(f"{literal(path)}: row {row + i}: column {literal(repr(field))} is null, not text; "
                                "drop such rows or choose the column holding the text with {text_field:flag}",
                                text_field=field)
            yield row + i, text
        row += batch.num_rows


def check_columns(where: str | os.PathLike, have: list[str], wanted: Iterable[str] | None) -> None:
    """Refuse a header (a table's schema, a CSV/TSV file's first row) that holds one of the ``wanted`` columns (all
    of them when None) more than once: which of them is meant cannot be known, and readers keep one silently (a dict)
    or fail (pyarrow's "does not exist in schema"). A `DataError` naming the file, the column and its positions."""
    wanted = set(have) if wanted is None else set(wanted)
    for name in dict.fromkeys(have):
        places = [i for i, h in enumerate(have, 1) if h == name]
        if name in wanted and len(places) > 1:
            raise DataError(f"{literal(where)}: the column {literal(repr(name))} is there {len(places)} times "
                            f"(columns {literal(', '.join(map(str, places)))} of {len(have)}); give each column its "
                            "own name")


def near_miss(name: str, have: list[str]) -> str:
    """``"; it has 'Text ' (did you mean it?)"`` when a column of ``have`` is ``name`` but for case and surrounding
    spaces (a renamed or hand-edited header), else ``""``: for the message of a missing column."""
    close = [h for h in have if h.strip().casefold() == name.strip().casefold() and h != name]
    return f"; {literal(repr(close[0]))} differs from it only in case or spaces" if close else ""


def _check_text_column(table: _Table, field: str) -> None:
    import pyarrow as pa

    if field not in table.schema.names:
        raise DataError(f"{literal(table.path)}: no column {literal(repr(field))} (it has "
                        f"{literal(', '.join(table.schema.names) or 'none')}{near_miss(field, table.schema.names)}); "
                        "choose the column holding the text with {text_field:flag}", text_field=field)
    check_columns(table.path, table.schema.names, [field])
    kind = table.schema.field(field).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    is_view = getattr(pa.types, "is_string_view", lambda t: False)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or is_view(kind)):
        raise DataError(f"{literal(table.path)}: column {literal(repr(field))} holds {literal(kind)}, not text; "
                        "choose the column holding the text with {text_field:flag}", text_field=field)


def iter_rows(path: str | os.PathLike, kind: str, columns: list[str] | None = None) -> Iterator[tuple[int, dict]]:
    """``(row, {column: value})`` of each row of the table ``path`` (only ``columns``, which it must have; all
    when None). Values are JSON values: strings, numbers, booleans, None, lists and dicts (a date, a time or bytes
    as a string); a ``ClassLabel`` column gives its label names."""
    table = _open(as_path(path), kind)
    missing = [c for c in columns or [] if c not in table.schema.names]
    if missing:
        have = table.schema.names
        raise DataError(f"{literal(path)}: no column {literal(repr(missing[0]))} (it has "
                        f"{literal(', '.join(have) or 'none')}{near_miss(missing[0], have)})")
    check_columns(path, table.schema.names, columns)
    names = table.class_names if table.class_names is not None else _class_names(table.schema, table.path)
    row = 0
    for batch in _batches(table, columns):
        values = {name: _python_values(batch.column(i), names.get(name))
                  for i, name in enumerate(batch.schema.names)}
        for i in range(batch.num_rows):
            yield row + i, {name: column[i] for name, column in values.items()}
        row += batch.num_rows


def _class_names(schema, path) -> dict[str, list[str]]:
    """{column: label names} of the ``ClassLabel`` columns that `datasets` recorded in the schema's metadata (of the
    table ``path``); metadata of another shape is a `DataError` naming the file and the key."""
    raw = (schema.metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    source = f"{path} (its schema metadata 'huggingface')"
    fix = "write the file again without that metadata"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{source}: not UTF-8 text; {fix}") from None
    doc = parse_json(text, source, DataError)
    if not isinstance(doc, dict):
        raise DataError(f"{source}: a JSON {json_kind(type(doc))}, expected a JSON object; {fix}")
    info = json_field(doc, "info", dict, source, DataError, default={}, fix=fix)
    features = json_field(info, "features", dict, source, DataError, default={}, where="info.", fix=fix)
    names = {}
    for name, f in features.items():
        if isinstance(f, dict) and f.get("_type") == "ClassLabel":
            names[name] = json_field(f, "names", list, source, DataError, where=f"info.features.{name}.", fix=fix)
    return names


def _python_values(column, class_names: list[str] | None) -> list:
    values = column.to_pylist()
    if class_names is not None:
        return [class_names[v] if isinstance(v, int) and 0 <= v < len(class_names) else None if v == -1 else v
                for v in values]
    if _json_type(column.type):
        return values
    return [_jsonable(v) for v in values]


def _json_type(kind) -> bool:
    """Whether values of the Arrow type ``kind`` come out of ``to_pylist`` as JSON values already."""
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(kind):
        return _json_type(kind.value_type)
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return _json_type(kind.value_type)
    if t.is_struct(kind):
        return all(_json_type(kind.field(i).type) for i in range(kind.num_fields))
    return (t.is_string(kind) or t.is_large_string(kind) or t.is_integer(kind) or t.is_floating(kind)
            or t.is_boolean(kind) or t.is_null(kind))


def _jsonable(value):
    """``value`` (from ``to_pylist``) as a JSON value: dates and times in ISO 8601, bytes as text, others by str."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


# ------------------------------------------------------------------------------------------------ texts in memory
class TextSource:
    """Texts given in Python in place of files. ``name`` stands for them in messages and the store's manifest;
    `rows` gives ``(row, text)`` (once, for an iterator)."""

    def __init__(self, name: str, rows: Callable[[], Iterator[tuple[int, Any]]]):
        self.name, self._rows = name, rows

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"TextSource({self.name!r})"

    def rows(self) -> Iterator[tuple[int, str]]:
        for row, text in self._rows():
            if not isinstance(text, str):
                raise DataError(f"{literal(self.name)}: row {row} is {literal(type(text).__name__)}, not a string")
            yield row, text


def text_source(obj: Any, field: str = "text") -> TextSource:
    """``obj`` as texts: a ``datasets`` ``Dataset``/``IterableDataset`` or a pandas ``DataFrame`` (its column
    ``field``), a ``DatasetDict`` (its "train" split, or its only one), or any other iterable of strings. ``datasets``
    and pandas are recognised by their module, never imported here."""
    package = type(obj).__module__.split(".")[0]
    if package == "datasets":
        return _dataset_source(obj, field)
    if package == "pandas" and hasattr(obj, "columns"):
        if field not in obj.columns:
            raise _no_column(f"<DataFrame column {field!r}>", field, [str(c) for c in obj.columns])
        check_columns("<DataFrame>", list(obj.columns), [field])
        return TextSource(f"<DataFrame column {field!r}>", lambda: enumerate(obj[field]))
    if isinstance(obj, (str, bytes, bytearray, Mapping)) or not isinstance(obj, Iterable):
        raise DataError(f"inputs: expected files, a datasets.Dataset or an iterable of strings, not "
                        f"{literal(type(obj).__name__)}")
    return TextSource("<texts>", lambda: enumerate(obj))


def _no_column(name: str, field: str, have: list[str]) -> DataError:
    return DataError(f"{literal(name)}: no column {literal(repr(field))} (it has {literal(', '.join(have))}); choose "
                     "the column holding the text with {text_field:flag}", text_field=field)


def _dataset_source(ds: Any, field: str) -> TextSource:
    if isinstance(ds, Mapping):  # a DatasetDict / IterableDatasetDict: {split: dataset}
        split = choose_split(list(ds), f"<{type(ds).__name__}>", ("train",))
        ds = ds[split]
    name = f"<{type(ds).__name__} column {field!r}>"
    have = getattr(ds, "column_names", None)  # None: an IterableDataset whose features are not known yet
    if have is not None and field not in have:
        raise _no_column(name, field, list(have))

    def rows():
        part = ds.select_columns([field]) if have is not None and hasattr(ds, "select_columns") else ds
        row = 0
        for batch in part.iter(batch_size=BATCH_ROWS):
            if field not in batch:
                raise _no_column(name, field, list(batch))
            for text in batch[field]:
                yield row, text
                row += 1

    return TextSource(name, rows)
