"""Writing files so that a crash never leaves half a file; reading what files say with errors that name the file.

Every file litebert writes goes through `atomic_write`: the content goes to a hidden temporary beside the target
(``.NAME.tmp-PID``), is flushed to disk, then renamed over the target in one step. A reader therefore sees the old
file or the new one, never a torn one, and a failed write leaves the old file as it was.

What a file says is not trusted: every JSON document is parsed by `parse_json` (bad JSON, an object with a key given
twice, or JSON nested deeper than Python can parse, is an error naming the file and line), a value read from it is
taken with `json_field` (a wrong type is an error naming the file and key), and a name read from it becomes a path
only through `file_in` (a name that would lead out of its folder is refused).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
from pathlib import Path, PurePosixPath, PureWindowsPath
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
    """`atomic_write` of ``data`` as JSON (UTF-8, a final newline). A lone surrogate in a string (a file name's
    undecodable byte, as Python reads it: ``\\udcff``) is written as its JSON escape, which reads back as the same
    string; UTF-8 cannot hold it."""
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
    if not text.isascii():
        text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    return atomic_write(path, text + "\n")


# UTF-8's byte order mark. Windows editors (Notepad, Excel's "CSV UTF-8") start the files they save with it; read as
# text it would stick to the first token, key or column name ("\ufeff[PAD]" is not "[PAD]").
BOM = b"\xef\xbb\xbf"


def decode_utf8(data: bytes, path: str | os.PathLike, error: type[LitebertError], *, errors: str = "strict",
                fix: str = "") -> str:
    """``data``, the bytes of the user's file ``path``, as text, read as Python's ``utf-8-sig`` reads it: a leading
    byte order mark (`BOM`) dropped, the rest UTF-8. Every reader of a user's text file (a vocab.txt, a JSON
    document, a metrics.jsonl; `litebert.inputs.text` for corpora and tables) decodes through this or drops the mark
    the same way. Bad UTF-8 raises ``error`` naming the file, line and byte offset, then ``fix``;
    ``errors="replace"`` substitutes U+FFFD instead."""
    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        return data[skip:].decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        line = data[:skip + e.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte offset {skip + e.start}){'; ' + fix if fix else ''}") \
            from None


def read_json(path: str | os.PathLike, error: type[LitebertError], *, expect: type = dict) -> Any:
    """The JSON document in ``path`` (a byte order mark first is dropped: `decode_utf8`); a missing file, bad UTF-8,
    bad JSON or a document that is not an ``expect`` raises ``error`` with the file (and line) in its message.
    ``path``: a local path, or an object that reads like one (a URL's `litebert.inputs.remote.RemotePath`: the
    caller turns URLs into paths)."""
    path = _local(path)
    if not path.is_file():
        raise error(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    data = parse_json(decode_utf8(data, path, error), path, error)
    if not isinstance(data, expect):
        raise error(f"{path}: expected a JSON {json_kind(expect)}, got {json_kind(type(data))}")
    return data


# json.loads nests as deep as Python's recursion limit (1000 by default) and raises RecursionError beyond it
MAX_JSON_DEPTH = 1000


class _KeyTwice(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object's pairs as a dict; a key given twice raises `_KeyTwice` (Python's json keeps the last one)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise _KeyTwice(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def parse_json(text: str, path: str | os.PathLike, error: type[LitebertError], lineno: int | None = None) -> Any:
    """The JSON document ``text``, read from ``path`` (line ``lineno`` of it, for JSON lines); bad JSON, an object
    with a key given twice, or JSON nested deeper than Python's parser goes, raises ``error`` naming the file and
    line."""
    where = f"{path}:{lineno}" if lineno is not None else str(path)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _KeyTwice as e:
        raise error(f"{where}: the key {e.key!r} is given twice in one object (JSON readers differ on which one "
                    "counts, so litebert takes neither): keep one") from None
    except json.JSONDecodeError as e:
        if lineno is not None:
            raise error(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
        raise error(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply (arrays or objects inside each other more than about "
                    f"{MAX_JSON_DEPTH} levels); no file litebert reads nests so deep: fix or replace it") from None

_MISSING = object()


def json_field(data: dict, key: str, expect: type | tuple[type, ...], path: str | os.PathLike,
               error: type[LitebertError], *, default: Any = _MISSING, where: str = "", fix: str = "") -> Any:
    """``data[key]``, a value of the JSON object read from ``path``, checked to be an ``expect`` (a bool is not
    taken for a number). A missing key gives ``default``; without one, or for a value of another type, ``error``
    names the file and the key (``where``, the key's path above ``data``, as ``shards[2].``), and ``fix`` says how
    to mend it."""
    name = f"{where}{key}"
    if key not in data:
        if default is not _MISSING:
            return default
        raise error(f"{path}: no key {name!r}{'; ' + fix if fix else ''}")
    value = data[key]
    kinds = expect if isinstance(expect, tuple) else (expect,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        wanted = " or ".join(dict.fromkeys(json_kind(k) for k in kinds))
        raise error(f"{path}: {name!r} is a JSON {json_kind(type(value))}, expected a JSON "
                    f"{wanted}{'; ' + fix if fix else ''}")
    return value


def file_in(folder: str | os.PathLike, name: Any, source: str | os.PathLike, error: type[LitebertError]) -> Path:
    """The path of ``name``, a file or folder name that ``source`` (a file) gives, inside ``folder``. A name read
    from a file becomes a path only here: one that is not a plain name (empty, ``.``, ``..``, with a ``/`` or ``\\``,
    a drive or a NUL) would lead out of ``folder`` and raises ``error`` naming ``source``."""
    plain = (isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name
             and PurePosixPath(name).name == name and PureWindowsPath(name).name == name)
    if not plain:
        raise error(f"{source}: names {name!r}, which is not a file name inside {folder} (a name read from a file "
                    f"may not lead out of its folder); fix the file, or copy the folder again")
    return _local(folder) / name  # a URL's folder (a RemotePath) stays a URL


def _local(path):
    """A path as given when it reads as one (a `Path`, a `RemotePath`), else a local `Path` (a str, an os.PathLike)."""
    return path if hasattr(path, "read_bytes") else Path(path)


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, as hex, read in chunks (memory does not grow with the file)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


# One line of ``sha256sum``: the digest, then (text or binary mode) the file's name; or the digest alone.
_SHA256_LINE = re.compile(r"([0-9a-fA-F]{64})(?:[ \t]+\*?(\S.*))?")


def checksum_in(sums: str | os.PathLike, name: str) -> str:
    """The sha256 (lower-case hex) that the checksum file ``sums`` holds for the file ``name``: one line as
    ``sha256sum`` writes it (``HEX  NAME``, ``HEX *NAME``) or the digest alone, in either case, with the BOM or CRLF
    an editor may add. Anything else (no 64 hex digits, several lines, another file's name) is a ``ValueError``
    saying what the file holds instead: a malformed checksum file is its own fault, not a corrupt ``name``."""
    text = Path(sums).read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    m = _SHA256_LINE.fullmatch(text)
    if m is None:
        shown = repr(text[:40]) + ("..." if len(text) > 40 else "") if text else "nothing"
        raise ValueError(f"holds {shown}, not a sha256 checksum (64 hex digits, as sha256sum writes them)")
    if m.group(2) is not None and m.group(2).strip() != name:
        raise ValueError(f"is the checksum of {m.group(2).strip()!r}, not of {name!r}")
    return m.group(1).lower()


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


# The temporaries of writes: ``.NAME.tmp-PID`` (atomic_write), ``.NAME.old-PID`` (a folder moved aside while its
# replacement goes in), and the checkpoint temporaries of earlier versions (``step-00000010.pt.tmp1234``). Those of a
# process no longer running are leftovers of a killed write, removed when the folder is written again.
TEMPORARY = re.compile(r"^(?:\..+\.(?:tmp|old)-|step-\d{8,}\.pt(?:\.sha256)?\.tmp)(\d+)$")


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return True


def remove_stale_temporaries_of(path: str | os.PathLike, tag: str = "tmp") -> list[Path]:
    """Remove the temporaries ``.NAME.TAG-PID`` of ``path`` that killed processes left beside it (those of a process
    still running are kept); `atomic_write` calls it for the file it writes. Returns what was removed."""
    path = Path(path)
    removed = []
    for p in path.parent.glob(f".{glob.escape(path.name)}.{glob.escape(tag)}-*"):
        pid = p.name.rsplit("-", 1)[1]
        if pid.isdigit() and not process_alive(int(pid)):
            _remove_quietly(p)
            removed.append(p)
    return removed
