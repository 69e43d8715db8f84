"""Model ids: ``org/name`` (optionally ``org/name@revision``) wherever a model or tokenizer folder is accepted.

`local` turns what the user gave into a local folder. A path that exists is used as it is. Otherwise a string of the
form ``org/name[@revision]`` is a Hugging Face Hub id, resolved through ``huggingface_hub`` (an optional dependency,
imported only then): from the local cache first (``HF_HUB_CACHE``, or ``HF_HOME/hub``, or
``~/.cache/huggingface/hub``), downloaded only when offline mode is off. Offline mode is ``HF_HUB_OFFLINE=1`` (or
``--offline`` on the command line, which sets it). Naming a hub id is the user asking for the network; apart from
the uploads a user asks for (`litebert.push`), nothing else in litebert opens a connection.

`download` is the one function that touches the network: tests replace it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from litebert.errors import CheckpointError, literal
from litebert.extras import install_hint

# org/name, as the Hub spells them (letters, digits, -, _, .; no leading or trailing separator), an optional @revision
_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95})(?:@(?P<revision>[\w./-]{1,200}))?$")
# weights in formats litebert does not read: not fetched
_IGNORED = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "*.tflite", "*.mlmodel", "*.ckpt*", "*.gguf", "onnx/*", "coreml/*"]
_TRUE = ("1", "true", "yes", "on")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")  # a snapshot's folder name in the cache: its commit hash


def is_hub_id(spec) -> bool:
    """Whether ``spec`` has the shape of a hub id (``org/name`` or ``org/name@revision``)."""
    return isinstance(spec, str) and _ID.match(spec) is not None and ".." not in spec


def offline() -> bool:
    """Offline mode: ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set to 1/true/yes/on."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def cache_dir() -> Path:
    """The Hub cache, read from the environment now (not when huggingface_hub was imported)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def model_folder(spec, name: str = "model") -> Path:
    """`local` for a model argument (``name``: how errors name it): a folder that exists, or `CheckpointError`
    saying there is no such model folder, before a command reads anything else (its tokenizer, its inputs)."""
    path = local(spec, "model")
    if path is not None and not path.is_dir():
        raise CheckpointError("{" + name + "}: " + ("not a folder (a model is a folder holding config.json and its "
                                                    "weights)" if path.exists() else "no such model folder"),
                              **{name: spec})
    return path


def local(spec, what: str = "model") -> Path:
    """The local folder for ``spec``: a path that exists, or a hub id's snapshot in the cache (downloaded first when
    it is not cached and offline mode is off). ``what`` names the thing in errors ("model", "tokenizer").

    Anything else is returned as a `Path`, so a missing local path is reported where it is opened. (A `Path` that
    does not exist and reads ``org/name`` is taken as a hub id too: the command line gives paths as `Path`.)"""
    if spec is None:
        return None
    spec = os.fspath(spec)
    if Path(spec).exists() or not is_hub_id(spec):
        return Path(spec)
    match = _ID.match(spec)
    repo, revision = match["repo"], match["revision"]
    hub = _import_hub(spec)
    cached = _cached(hub, repo, revision)
    if cached is not None:
        return cached
    shown = literal(spec)
    if offline():
        raise CheckpointError(f"{shown}: no such folder, and the {what} {shown} is not in the Hugging Face cache "
                              f"({literal(cache_dir())}) while offline mode is on (HF_HUB_OFFLINE / --offline); fetch "
                              f"it where there is network (`hf download {literal(repo)}"
                              f"{' --revision ' + literal(revision) if revision else ''}`, then copy the cache), or "
                              f"run without offline mode to download it")
    try:
        return Path(download(repo, revision))
    except Exception as e:  # noqa: BLE001 - huggingface_hub raises many kinds; one line for all
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{shown}: no such folder, and downloading the {what} from the Hugging Face Hub failed "
                              f"({literal(reason[:300])}); check the id and the network, or give a local folder") \
            from None


def _cached(hub, repo: str, revision: str | None) -> Path | None:
    """The snapshot of ``repo`` at ``revision`` (default: main) in the cache, or None."""
    _check_ref(repo, revision)
    try:
        return Path(hub.snapshot_download(repo, revision=revision, cache_dir=cache_dir(), local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (LocalEntryNotFoundError and relatives)
        return None


def _check_ref(repo: str, revision: str | None) -> None:
    """The cache's ``refs/REVISION`` file, where there is one, must hold a commit hash: huggingface_hub joins what it
    holds to ``snapshots/``, so a path there (``../../elsewhere``) would lead out of the cache."""
    if revision is not None and _COMMIT.match(revision):
        return  # a commit names its snapshot itself; no ref is read
    root = cache_dir() / ("models--" + repo.replace("/", "--"))
    ref = root / "refs" / (revision or "main")
    try:
        held = ref.read_bytes()[:100].decode("utf-8", errors="replace").strip()
    except OSError:
        return  # no such ref: not cached at this revision
    if not _COMMIT.match(held):
        raise CheckpointError(f"{ref}: holds {held[:60]!r}, not a commit hash (40 hexadecimal digits), so the cached "
                              f"{repo} cannot be found by it; the cache entry is damaged: delete {root} and download "
                              f"the model again")


def download(repo: str, revision: str | None) -> str:
    """Download ``repo`` at ``revision`` into the cache (the weights in formats litebert reads, the configs and the
    tokenizer files) and return the snapshot folder. The only download in litebert."""
    import huggingface_hub

    return huggingface_hub.snapshot_download(repo, revision=revision, cache_dir=cache_dir(),
                                             ignore_patterns=_IGNORED)


def _import_hub(spec: str):
    try:
        import huggingface_hub
    except ImportError:
        raise CheckpointError(f"{literal(spec)}: no such folder; as a Hugging Face Hub id it needs huggingface_hub "
                              f"({install_hint('hub', 'huggingface_hub')})") from None
    return huggingface_hub
