"""URLs as inputs: ``scheme://...`` read through fsspec wherever litebert reads a corpus or a task's files.

A string that starts ``scheme://`` is a URL; everything else is a local path. URLs are read with fsspec (the
``litebert[remote]`` extra), imported only when one is given: no URL, no network. fsspec reads ``http(s)://`` itself
(with aiohttp); the other schemes need the backend fsspec names (s3fs for ``s3://``, gcsfs for ``gs://``, adlfs for
``az://``; ``hf://`` is huggingface_hub's), installed by the user, with the credentials and endpoints that backend
reads (``AWS_*`` variables or ``~/.aws`` for s3fs, ``AWS_ENDPOINT_URL_S3`` for an S3-compatible server, ...).

`RemotePath` stands for a URL where litebert's readers hold a `Path`: it has the path operations they use (``name``,
``suffixes``, ``/``, ``is_dir``, ``is_file``, ``iterdir``, ``read_bytes``) and `RemotePath.open`, a buffered stream
that the filesystem fills a block at a time (fsspec's read-ahead cache: 5 MiB blocks for HTTP, 50 MiB for s3fs), so
a file is streamed, never downloaded whole first. `as_path` turns what a user gave into a `Path` or a `RemotePath`;
`expand` lists the files of a remote folder or glob as `litebert.inputs.text.expand_inputs` does a local one.

Every failure is one line naming the URL (`failure`): a missing file, an unknown scheme, a backend that is not
installed (with the package fsspec asks for), denied access, a server that cannot be reached. A failure in the middle
of a stream is a `ReadFailure` (an `OSError`), which the readers report with the offset they had reached.

Where a URL may lead (`redirect_policy`): an HTTP(S) redirect is followed only to the same scheme, host and port;
one to anywhere else is refused with one line (`RedirectRefused`) naming both addresses, so a server (a loopback or
private one included) cannot send litebert, with the credentials its URL carries, to another host. What of a URL is
printed never holds its secrets (`litebert.redact`, through every message's `litebert.errors.printable`).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from litebert.errors import DataError, first_line
from litebert.extras import install_hint

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
_HTTP = ("http", "https")


def is_url(spec) -> bool:
    """Whether ``spec`` is a URL: a `RemotePath`, or a string starting ``scheme://``."""
    return isinstance(spec, RemotePath) or (isinstance(spec, str) and _URL.match(spec) is not None)


def as_path(path):
    """``path`` as the readers hold it: a `RemotePath` for a URL, a `Path` for a local path; anything else (texts or
    a dataset split given in place of a file) as it is."""
    if isinstance(path, RemotePath):
        return path
    if isinstance(path, str) and _URL.match(path):
        return RemotePath(path)
    if isinstance(path, (str, os.PathLike)):
        return Path(path)
    return path


class ReadFailure(OSError):
    """Reading a remote stream failed part-way (the connection dropped, the server answered an error)."""


class RedirectRefused(DataError):
    """A server redirected to another scheme, host or port (`redirect_policy`)."""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit for http (80) and https (443)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is no number: never equal to another's
        port = -1
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def is_local(host: str) -> bool:
    """Whether ``host`` names a loopback, private or link-local address (or is ``localhost``)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def check_redirect(source: str, target: str) -> None:
    """Refuse (`RedirectRefused`) a redirect from ``source`` to ``target`` (as the Location header gave it: resolved
    against ``source``) unless both have the same scheme, host and port."""
    target = urljoin(source, target)
    if origin(source) == origin(target):
        return
    local = " (a loopback or private address: never to another host)" if is_local(origin(source)[1]) else ""
    raise RedirectRefused(f"{source}: the server redirects to {target}, another scheme, host or port{local}; "
                          "litebert follows redirects only within the same scheme, host and port: give the URL it "
                          "redirects to yourself if you trust it")


_POLICY = []  # the aiohttp TraceConfig of `redirect_policy`, made once (fsspec reuses a filesystem per options)


def redirect_policy():
    """An aiohttp ``TraceConfig`` that checks every redirect before it is followed (`check_redirect`); given to
    fsspec's HTTP filesystem as ``client_kwargs={"trace_configs": [...]}``."""
    if not _POLICY:
        import aiohttp

        async def on_redirect(session, context, params) -> None:
            check_redirect(str(params.url), params.response.headers.get("Location", ""))

        config = aiohttp.TraceConfig()
        config.on_request_redirect.append(on_redirect)
        config.freeze()
        _POLICY.append(config)
    return _POLICY[0]


def _refused(e: BaseException) -> RedirectRefused | None:
    """The refused redirect behind ``e`` (fsspec reports it as the cause of a FileNotFoundError), if any."""
    return next((x for x in _chain(e) if isinstance(x, RedirectRefused)), None)


class RemotePath:
    """One URL. The filesystem is found (and fsspec imported) on first use; what the server said about the URL is
    kept, so that the many questions a reader asks (is it a folder? how big?) cost one request each at most."""

    def __init__(self, url: str, *, _fs=None, _info: dict | None = None):
        self.url = url
        self._fs = _fs
        self._info = _info  # fsspec's info dict: from a listing, or asked for once
        self._is_dir = None if _info is None else _info.get("type") == "directory"

    # ------------------------------------------------------------------------------------------- a path's parts
    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RemotePath({self.url!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RemotePath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __lt__(self, other: "RemotePath") -> bool:
        return self.sort_key < other.sort_key

    @property
    def scheme(self) -> str:
        return _URL.match(self.url).group(1).lower()

    @property
    def sort_key(self) -> tuple[str, ...]:
        """The URL's parts: sorted by it, a folder's files come in the order a local copy's would (`Path` order)."""
        return tuple(p for p in self.url.split("/") if p)

    @property
    def _url_path(self) -> str:
        """The part of the URL that names the file: for HTTP without its query (``?download=1``) and fragment."""
        return urlsplit(self.url).path if self.scheme in _HTTP else self.url

    @property
    def name(self) -> str:
        return self._url_path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def suffixes(self) -> list[str]:
        return Path(self.name).suffixes if self.name else []

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix if self.name else ""

    def __truediv__(self, name: str) -> "RemotePath":
        return RemotePath(self.url.rstrip("/") + "/" + name, _fs=self._fs)

    # ------------------------------------------------------------------------------------------- the filesystem
    @property
    def fs(self):
        if self._fs is None:
            fsspec = _fsspec(self.url)
            options = {"client_kwargs": {"trace_configs": [redirect_policy()]}} if self.scheme in _HTTP else {}
            with failures(self.url):
                self._fs = fsspec.core.url_to_fs(self.url, **options)[0]
        return self._fs

    @property
    def fs_path(self) -> str:
        """The URL as the filesystem names it (``bucket/key`` for s3fs, the whole URL for HTTP)."""
        return self.fs._strip_protocol(self.url)

    def info(self) -> dict | None:
        """What the filesystem says about the URL (``type``, ``size``); None when nothing is there."""
        if self._info is None:
            with failures(self.url):
                try:
                    self._info = self.fs.info(self.fs_path)
                except FileNotFoundError as e:
                    if _status(e) not in (None, 404, 410) or _connection_error(e) or _refused(e):
                        raise  # HTTP reports every failure as FileNotFoundError: its cause tells which
                    return None
        return self._info

    def exists(self) -> bool:
        return self.info() is not None

    def is_dir(self) -> bool:
        if self._is_dir is None:
            info = self.info()
            if info is None:
                self._is_dir = False
            elif info.get("type") == "directory":
                self._is_dir = True
            elif self.scheme in _HTTP and info.get("mimetype") in ("text/html", None):
                # HTTP calls everything a file: a folder is a page that lists its files (only a page can be one)
                with failures(self.url):
                    self._is_dir = bool(self.fs.isdir(self.fs_path))
            else:
                self._is_dir = False
        return self._is_dir

    def is_file(self) -> bool:
        return self.exists() and not self.is_dir()

    @property
    def size(self) -> int | None:
        """The size in bytes, when the server says it."""
        info = self.info()
        size = info.get("size") if info else None
        return size if isinstance(size, int) else None

    def iterdir(self) -> list["RemotePath"]:
        """The entries of the folder: files and folders (each with what the listing said of it), sorted."""
        with failures(self.url):
            entries = self.fs.ls(self.fs_path, detail=True)
        base = self.url.rstrip("/") + "/"
        found = []
        for entry in entries:
            url = self.child_url(entry["name"]).rstrip("/")  # a folder's URL as a file's: without the slash
            tail = url[len(base):] if url.startswith(base) else ""
            if tail and not any(c in tail for c in "/?#"):  # not itself, its parent, nor a listing's sort links
                found.append(RemotePath(url, _fs=self._fs, _info=entry))
        return sorted(found)

    def child_url(self, name: str) -> str:
        """The URL of ``name``, a path the filesystem gave (in a listing or a glob) below this URL, spelled as this
        URL is: the part of this URL that its filesystem path leaves out (``s3://``, ``ftp://host``), then ``name``."""
        url, path = self.url.rstrip("/"), self.fs_path.rstrip("/")
        prefix = url[:len(url) - len(path)] if path and url.endswith(path) else self.scheme + "://"
        return prefix + name

    def open(self) -> io.BufferedReader:
        """The file as a buffered binary stream (``peek`` works); a failure while reading is a `ReadFailure`."""
        with failures(self.url):
            if self.is_dir():
                raise IsADirectoryError(self.url)
            f = self.fs.open(self.fs_path, "rb")
        return io.BufferedReader(_Stream(f, self.url), buffer_size=1 << 16)

    def read_bytes(self) -> bytes:
        with self.open() as f:
            return f.read()


class _Stream(io.RawIOBase):
    """An fsspec file as a raw stream: reads go to its cache, a failure becomes a one-line `ReadFailure`."""

    def __init__(self, f, url: str):
        self._f, self.name = f, url
        # A stream whose size the server did not give (HTTP without Content-Length or ranges) cannot seek.
        self._seekable = getattr(f, "size", None) is not None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def readinto(self, buffer) -> int:
        try:
            data = self._f.read(len(buffer))
        except Exception as e:  # noqa: BLE001 - aiohttp, botocore, fsspec: each backend raises its own
            if _refused(e) is not None:
                raise _refused(e) from None
            raise ReadFailure(f"reading failed ({describe(e)})") from None
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        if not self._seekable:
            raise io.UnsupportedOperation("the server gave no size: this stream cannot seek")
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):  # closing a dropped connection fails as reading did
                self._f.close()
        super().close()


# --------------------------------------------------------------------------------------------- folders and globs
def has_magic(url: str) -> bool:
    """Whether the URL is a glob. ``?`` starts an HTTP query, so there only ``*`` and ``[`` are wildcards."""
    return bool(re.search(r"[*\[]" if url.split(":", 1)[0].lower() in _HTTP else r"[*?\[]", url.split("://", 1)[1]))


def _fsspec(url: str):
    try:
        import fsspec
    except ImportError:
        raise DataError(f"{url}: reading URLs needs fsspec ({install_hint('remote', 'fsspec')})") from None
    return fsspec


@contextlib.contextmanager
def failures(url: str):
    """Turn whatever fsspec or its backend raises inside the block into a one-line `DataError` naming ``url``."""
    try:
        yield
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - each backend raises its own kinds
        raise failure(url, e) from None


def failure(url: str, e: BaseException) -> DataError:
    """The one-line error for ``e``, raised while reaching ``url``."""
    scheme = url.split("://", 1)[0]
    if _refused(e) is not None:
        return _refused(e)
    if isinstance(e, ImportError) and scheme in ("http", "https") and _missing_aiohttp(e):
        return DataError(f"{url}: reading {scheme}:// URLs needs aiohttp, in litebert's remote extra "
                         f"({install_hint('remote', 'aiohttp')})")
    if isinstance(e, ImportError):  # fsspec's registry: "Install s3fs to access S3"
        return DataError(f"{url}: reading {scheme}:// URLs needs a package fsspec does not find: "
                         f"{first_line(e, 200)}")
    if isinstance(e, ValueError) and str(e).startswith("Protocol not known"):
        return DataError(f"{url}: fsspec knows no URL scheme {scheme}://; give a local path, or a URL "
                         "such as s3://, gs://, hf://, https://")
    if isinstance(e, IsADirectoryError):
        return DataError(f"{url}: a folder, not a file")
    return DataError(f"{url}: {describe(e)}")


def _missing_aiohttp(e: ImportError) -> bool:
    """Whether ``e`` is aiohttp not found (its own import, or fsspec's HTTP filesystem saying it needs it)."""
    return any(getattr(x, "name", None) == "aiohttp" or "aiohttp" in str(x) for x in _chain(e))


def describe(e: BaseException) -> str:
    """What went wrong reaching a URL, in a few words: no such file, access denied, cannot connect, or the
    exception's first line. fsspec's HTTP filesystem reports every failure as FileNotFoundError, its cause the
    server's answer or the connection's error, so the cause is asked first."""
    status = _status(e)
    if status in (401, 403) or any(isinstance(x, PermissionError) for x in _chain(e)):
        return (f"access denied ({f'HTTP {status}' if status else first_line(e, 200)}); check the credentials the "
                "filesystem reads")
    if status in (404, 410):
        return "no such file or folder"
    if status is not None:
        return f"the server answered HTTP {status}"
    if _connection_error(e):
        cause = next(x for x in _chain(e) if _is_connection(x))
        return f"cannot reach the server ({type(cause).__name__}: {first_line(cause, 200)})"
    if any("Credentials" in type(x).__name__ for x in _chain(e)):
        return f"no credentials ({first_line(e, 200)}); configure them as the filesystem's backend expects"
    if isinstance(e, FileNotFoundError):
        return "no such file or folder"
    return f"{type(e).__name__}: {first_line(e, 200)}"


def _chain(e: BaseException) -> list[BaseException]:
    seen = []
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


def _status(e: BaseException) -> int | None:
    """The HTTP status an exception (or its cause) carries: aiohttp's ``status``, a response's ``status_code``."""
    for x in _chain(e):
        for attr in ("status", "status_code"):
            value = getattr(x, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
    return None


def _is_connection(e: BaseException) -> bool:
    """Whether ``e`` says the server could not be reached: the builtin kinds, or a library's whose class (or a base
    class) names a connection or a timeout (aiohttp's ClientConnectorError, botocore's EndpointConnectionError)."""
    return (isinstance(e, (ConnectionError, TimeoutError)) or type(e).__module__ == "socket"
            or any("Connect" in c.__name__ or "Timeout" in c.__name__ for c in type(e).__mro__))


def _connection_error(e: BaseException) -> bool:
    return any(_is_connection(x) for x in _chain(e))
