"""Writing files so that a crash never leaves half a file, and reading JSON with errors that name the file.

Every file litebert writes goes through `atomic_write`: the content goes to a hidden temporary beside the target
(``.NAME.tmp-PID``), is flushed to disk, then renamed over the target in one step. A reader therefore sees the old
file or the new one, never a torn one, and a failed write leaves the old file as it was.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
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
    created. A failure of the file system (a full disk, no permission), whether the writer raises it as an OSError or
    wraps it in its own error (torch.save's ``RuntimeError: unexpected pos``, safetensors' ``IoError``), is raised as
    `WriteError` naming the file; any failure removes the temporary and leaves the old file, if any, untouched.
    """
    path = Path(path)
    tmp = temporary_name(path)
    remove_stale_temporaries_of(path)  # what a killed write of this same file left
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
    except BaseException as e:
        _remove_quietly(tmp)
        if isinstance(e, LitebertError):
            raise
        reason = io_failure(e)
        if reason is None:
            raise
        error = WriteError(f"{path}: cannot write ({reason})")
        error.reason = reason
        raise error from None
    _fsync_dir(path.parent)
    return path


# What writers that wrap file I/O say when the write itself failed: torch.save ("unexpected pos", "file write
# failed"), safetensors ("IoError(Os { code: 28 ... })"), and the C library's own words.
_IO_WORDS = re.compile(r"unexpected pos|file write failed|IoError|os error \d+|No space left|Disk quota|"
                       r"Input/output error|Read-only file system|Permission denied", re.IGNORECASE)


def io_failure(e: BaseException) -> str | None:
    """Why a write failed when ``e`` comes from the file system: an OSError anywhere in its chain (``__cause__`` /
    ``__context__``), or a writer's own error wrapping one (torch.save, safetensors); None for any other error."""
    seen: set[int] = set()
    err: BaseException | None = e
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and not isinstance(err, LitebertError):
            return err.strerror or str(err) or type(err).__name__
        err = err.__cause__ or err.__context__
    if isinstance(e, Exception):
        text = str(e)
        if _IO_WORDS.search(text):
            if re.search(r"code: 28|No space left|errno 28|os error 28", text, re.IGNORECASE):
                return "No space left on device"
            return text.splitlines()[0][:200] if text else type(e).__name__
    return None


def _remove_quietly(path: Path) -> None:
    try:
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
    except OSError:
        pass


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


# ------------------------------------------------------------------------------------------------ output folders
# Every folder a litebert command creates as its output (a token store, a pretraining run, a fine-tuned model, a
# converted model, a tokenizer) holds this small file, naming what kind of output it is. A command only ever deletes
# or replaces files in a folder that carries its own kind's marker, and only the names that kind writes.
OWNER_FILE = ".litebert.json"
_TEMPORARY = re.compile(r"^\..+\.(?:tmp|old)-(\d+)$")


class OutputError(LitebertError, FileExistsError):
    """An output folder cannot be used: it holds files litebert did not write, or another kind of output."""


def output_kind(folder: str | os.PathLike) -> str | None:
    """The kind of litebert output ``folder`` holds according to its marker, or None (no marker, unreadable)."""
    try:
        data = json.loads((Path(folder) / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def check_output_folder(folder: str | os.PathLike, kind: str, *, flag: str = "--out") -> bool:
    """Whether ``folder`` already holds a litebert output of ``kind`` (True) or is absent or empty (False).

    Raises `OutputError`, writing nothing, when ``folder`` is a file, holds another kind of litebert output, or is
    not empty and was not written by litebert. Leftover temporaries of killed writes do not count as content.
    """
    folder = Path(folder)
    if not folder.exists():
        return False
    if not folder.is_dir():
        raise OutputError(f"{flag} {folder} is a file; give a folder")
    entries = sorted(p.name for p in folder.iterdir() if not _TEMPORARY.match(p.name))
    if not entries:
        return False
    found = output_kind(folder)
    if found is None:
        shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
        raise OutputError(f"{flag} {folder} is not empty and was not written by litebert (it holds {shown}); "
                          f"choose a new or empty folder")
    if found != kind:
        raise OutputError(f"{flag} {folder} holds a litebert {found}, not a {kind}; choose another folder")
    return True


def clear_output_folder(folder: str | os.PathLike, kind: str, owned: Callable[[str], bool], *,
                        flag: str = "--out") -> None:
    """Delete what a ``kind`` output wrote in ``folder`` (the entries whose names ``owned`` accepts), keeping the
    marker. Refuses, deleting nothing, when the folder holds any other entry (a file the user put there)."""
    folder = Path(folder)
    if not check_output_folder(folder, kind, flag=flag):
        return
    names = [p.name for p in folder.iterdir() if p.name != OWNER_FILE and not _TEMPORARY.match(p.name)]
    foreign = sorted(n for n in names if not owned(n))
    if foreign:
        raise OutputError(f"{flag} {folder} holds files a litebert {kind} does not write ({', '.join(foreign[:4])}"
                          f"{', ...' if len(foreign) > 4 else ''}); move them out first: --overwrite deletes only "
                          f"what litebert wrote")
    remove_stale_temporaries(folder)
    for name in names:
        path = folder / name
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def mark_output_folder(folder: str | os.PathLike, kind: str, **info: Any) -> Path:
    """Create ``folder`` if needed and write its marker: ``{"kind": kind, "litebert_version": ..., **info}``."""
    from litebert import __version__

    return write_json(Path(folder) / OWNER_FILE, {"kind": kind, "litebert_version": __version__, **info})


def read_marker(folder: str | os.PathLike) -> dict:
    """The marker of an output folder as a dict ({} when there is none or it cannot be read)."""
    try:
        data = json.loads((Path(folder) / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remove_stale_temporaries(folder: str | os.PathLike, recursive: bool = False) -> list[Path]:
    """Remove the temporaries (``.NAME.tmp-PID``, ``.NAME.old-PID``) that killed litebert processes left in
    ``folder``; those of a process still running are kept. Returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for path in (folder.rglob(".*") if recursive else folder.glob(".*")):
        m = _TEMPORARY.match(path.name)
        if m and not _process_alive(int(m.group(1))):
            try:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return True


def check_apart(out: str | os.PathLike, inputs: dict[str, str | os.PathLike | None], *, flag: str = "--out") -> None:
    """Refuse (`OutputError`) an output path that is one of ``inputs`` ({flag: path}), lies inside one, or holds one:
    writing there could replace or delete what the command reads."""
    target = Path(out).resolve()
    for name, given in inputs.items():
        if given is None or str(given) == "":
            continue
        other = Path(given).resolve()
        if target == other:
            raise OutputError(f"{flag} {out} is the same path as {name} {given}; write to another folder")
        if other in target.parents:
            raise OutputError(f"{flag} {out} lies inside {name} {given}; write to a folder outside it")
        if target in other.parents:
            raise OutputError(f"{flag} {out} holds {name} {given}; write to a folder that does not contain it")


def check_replaceable(folder: str | os.PathLike, kind: str, owned: Callable[[str], bool], *, overwrite: bool,
                      flag: str = "--out") -> bool:
    """Check, writing nothing, that a command may write a ``kind`` output to ``folder``; True when it holds one to
    replace. Absent or empty: fine (False). Holding a ``kind`` output: fine when that output is unfinished (its
    marker says ``"complete": false``: a killed command) or ``overwrite`` is given, and only if every entry is one
    ``owned`` accepts. Anything else raises `OutputError`."""
    folder = Path(folder)
    if not check_output_folder(folder, kind, flag=flag):
        return False
    if not overwrite and read_marker(folder).get("complete") is not False:
        raise OutputError(f"{flag} {folder} already holds a litebert {kind}; pass --overwrite to replace it, or "
                          f"choose another folder")
    foreign = sorted(p.name for p in folder.iterdir()
                     if p.name != OWNER_FILE and not _TEMPORARY.match(p.name) and not owned(p.name))
    if foreign:
        raise OutputError(f"{flag} {folder} holds files a litebert {kind} does not write ({', '.join(foreign[:4])}"
                          f"{', ...' if len(foreign) > 4 else ''}); move them out first: --overwrite deletes only "
                          f"what litebert wrote")
    return True


def start_output_folder(folder: str | os.PathLike, kind: str, owned: Callable[[str], bool], replace: bool, *,
                        flag: str = "--out", **info: Any) -> None:
    """After `check_replaceable`: delete the old output (``replace``) or the temporaries of killed writes, and mark
    the folder as an unfinished ``kind`` output; `mark_output_folder` with ``complete=True`` ends the command."""
    if replace:
        clear_output_folder(folder, kind, owned, flag=flag)
    else:
        remove_stale_temporaries(folder, recursive=True)
    mark_output_folder(folder, kind, complete=False, **info)


def remove_stale_temporaries_of(path: str | os.PathLike, tag: str = "tmp") -> list[Path]:
    """Remove the temporaries ``.NAME.TAG-PID`` of ``path`` that killed processes left beside it (those of a process
    still running are kept); `atomic_write` calls it for the file it writes. Returns what was removed."""
    path = Path(path)
    removed = []
    for p in path.parent.glob(f".{glob.escape(path.name)}.{glob.escape(tag)}-*"):
        pid = p.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _process_alive(int(pid)):
            _remove_quietly(p)
            removed.append(p)
    return removed
