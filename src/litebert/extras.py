"""The optional dependencies (pyproject.toml's extras) and the one message that says how to install a missing one.

litebert is not on PyPI, so an extra asked for by name alone (``litebert[datasets]``) resolves nowhere: it installs
from the checkout (or a wheel) litebert came from. `install_hint` therefore names the missing packages themselves, with
the extra's ranges (``pip install 'pyarrow>=14'``), and the extra only as an alternative where the running litebert
knows its checkout: the one its code lies in (an editable install, or ``src/`` on ``PYTHONPATH``), or the folder a
``pip install /path/to/litebert`` recorded (``direct_url.json``, PEP 610).

The ranges are read from the installed distribution's metadata (its ``Requires-Dist: pyarrow>=14; extra ==
"datasets"`` lines), and from `EXTRAS` where there is none (litebert run from ``src/`` without an install).
"""

from __future__ import annotations

import json
import re
import shlex
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "litebert"
# pyproject.toml's [project.optional-dependencies] but ``dev`` (the test set, never hinted); a test checks it equal
EXTRAS: dict[str, tuple[str, ...]] = {
    "export": ("onnx>=1.15", "onnxruntime>=1.17"),
    "plot": ("matplotlib>=3.7",),
    "hub": ("huggingface_hub>=0.20",),
    "datasets": ("pyarrow>=14", "zstandard>=0.22"),
    "wordpiece": ("tokenizers>=0.15",),
    "baselines": ("scikit-learn>=1.3",),
    "lora": ("peft>=0.21",),
    "trackers": ("wandb>=0.17", "mlflow-skinny>=2.10"),
    "remote": ("fsspec>=2023.1", "aiohttp>=3.8"),
    "hf-datasets": ("datasets>=2.14", "pyarrow>=14"),
    "search": ("optuna>=4",),
}
EXTRAS["all"] = tuple(dict.fromkeys(spec for specs in EXTRAS.values() for spec in specs))  # every one above
# A Requires-Dist value (PEP 508 without URLs): the name, extras, the version spec, then the marker after ";"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*"
                          r"(?:;(.*))?$")
_EXTRA = re.compile(r"""\bextra\s*==\s*(["'])(.*?)\1""")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``huggingface_hub`` and ``Huggingface-Hub`` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(line: str) -> tuple[str, str, str | None]:
    """(name, requirement without its marker, the extra its marker names or None) of a ``Requires-Dist`` value:
    ``'pyarrow>=14; extra == "datasets"'`` -> ``("pyarrow", "pyarrow>=14", "datasets")``."""
    m = _REQUIREMENT.match(line)
    if m is None:
        raise ValueError(f"not a requirement: {line!r}")
    name, spec, marker = m.group(1), m.group(2).replace(" ", ""), m.group(3) or ""
    extra = _EXTRA.search(marker)
    return name, name + spec, canonical(extra.group(2)) if extra else None


def _distribution() -> metadata.Distribution | None:
    try:
        return metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def requirements(extra: str) -> tuple[str, ...]:
    """The requirements of ``extra`` (``("pyarrow>=14", "zstandard>=0.22")``): the installed metadata's, else
    `EXTRAS`' (run without an install, or from an install made before the extra existed)."""
    dist = _distribution()
    found = []
    for line in (dist.requires or []) if dist is not None else []:
        try:
            _, spec, of = parse_requirement(line)
        except ValueError:  # a form this reader does not know (a URL): never litebert's own extras
            continue
        if of == canonical(extra):
            found.append(spec)
    if found:
        return tuple(found)
    if extra not in EXTRAS:
        raise ValueError(f"litebert has no extra {extra!r}; it has {', '.join(EXTRAS)}")
    return EXTRAS[extra]


def checkout() -> tuple[Path, bool] | None:
    """(the litebert checkout, whether to install it editable) the running code comes from: the folder its code lies
    in (``src/litebert`` under a pyproject.toml naming litebert), else the folder ``pip install FOLDER`` recorded
    in the distribution's ``direct_url.json``; None for a wheel (or an unknown origin)."""
    code = Path(__file__).resolve()
    if len(code.parents) > 2 and _is_litebert(code.parents[2]):  # ROOT/src/litebert/extras.py
        return code.parents[2], True
    dist = _distribution()
    try:
        recorded = json.loads((dist.read_text("direct_url.json") if dist else None) or "null")
    except ValueError:
        return None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("dir_info"), dict):
        return None  # an archive (a wheel, an sdist) or a VCS URL: no folder to install an extra from
    url = urlparse(str(recorded.get("url", "")))
    folder = Path(unquote(url.path)) if url.scheme == "file" else None
    if folder is None or not _is_litebert(folder):
        return None
    return folder, bool(recorded["dir_info"].get("editable", False))


def _is_litebert(folder: Path) -> bool:
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r'(?m)^name\s*=\s*"litebert"\s*$', text) is not None


def install_hint(extra: str, *packages: str) -> str:
    """How to install ``packages`` (distribution names, each a requirement of ``extra``) into the environment
    litebert runs in: ``pip install 'pyarrow>=14'``, followed, where litebert knows its checkout, by the extra from it
    (``, or the datasets extra from the checkout: pip install -e '/path/to/litebert[datasets]'``). A `ValueError` for a
    package the extra does not list."""
    specs = {canonical(parse_requirement(spec)[0]): spec for spec in requirements(extra)}
    names = packages or tuple(parse_requirement(spec)[0] for spec in specs.values())
    unknown = [p for p in names if canonical(p) not in specs]
    if unknown:
        raise ValueError(f"litebert's {extra!r} extra lists {', '.join(specs.values())}, not {', '.join(unknown)}")
    missing = [specs[canonical(p)] for p in names]
    hint = "pip install " + " ".join(shlex.quote(spec) for spec in missing)
    origin = checkout()
    if origin is not None:
        folder, editable = origin
        hint += (f", or the {extra} extra from the checkout: pip install {'-e ' if editable else ''}"
                 f"{shlex.quote(f'{folder}[{extra}]')}")
    return hint
