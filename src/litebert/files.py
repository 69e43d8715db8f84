"""Writing files so that a crash never leaves half a file, and reading JSON with errors that name the file.

Every file litebert writes goes through `atomic_write`: the content goes to a hidden temporary beside the target
(``.NAME.tmp-PID``), is flushed to disk, then renamed over the target in one step. A reader therefore sees the old
file or the new one, never a torn one, and a failed write leaves the old file as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Union

from litebert.errors import LitebertError, WriteError

Content = Union[bytes, str, Callable[[Path], Any]]


def temporary_name(path: Path) -> Path:
    """The hidden temporary that `atomic_write` fills before renaming it to ``path``."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def atomic_write(path: str | os.PathLike, content: Content, *, mode: int = 0o644) -> Path:
    """Write ``content`` to ``path`` atomically and return the path.

    ``content``: bytes, text (written as UTF-8), or a function that writes the file it is given (for writers that
    want a file name, such as ``safetensors.torch.save_file`` or ``torch.onnx.export``). Missing parent folders are
    created. An OSError (a full disk, no permission) is raised as `WriteError` naming the file; the temporary is
    removed and the old file, if any, is left untouched.
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(tmp)
        else:
            with open(tmp, "wb") as f:
                f.write(content.encode("utf-8") if isinstance(content, str) else content)
        with open(tmp, "rb+") as f:  # flush what the writer wrote, whoever opened the file
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, LitebertError):
            raise
        raise WriteError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def write_json(path: str | os.PathLike, data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """`atomic_write` of ``data`` as JSON (UTF-8, a final newline)."""
    return atomic_write(path, json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike, error: type[LitebertError], *, expect: type = dict) -> Any:
    """The JSON document in ``path``; a missing file, bad UTF-8, bad JSON or a document that is not an ``expect``
    raises ``error`` with the file (and line) in its message."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte offset {e.start})") from None
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    data = parse_json(text, path, error)
    if not isinstance(data, expect):
        raise error(f"{path}: expected a JSON {json_kind(expect)}, got {json_kind(type(data))}")
    return data


def parse_json(text: str, path: str | os.PathLike, error: type[LitebertError]) -> Any:
    """The JSON document ``text``, read from ``path``; bad JSON raises ``error`` naming the file and line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, as hex, read in chunks (memory does not grow with the file)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def json_kind(t: type) -> str:
    """The JSON name of a Python type from `json.loads`: ``dict`` -> ``"object"``, ``list`` -> ``"array"``..."""
    return {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean",
            type(None): "null"}.get(t, t.__name__)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); not every platform or filesystem allows opening a folder."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
