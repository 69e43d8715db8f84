"""The install hint for optional packages: the packages with pyproject.toml's ranges, read from the installed
metadata (core metadata's ``Requires-Dist``, parsed as `packaging` parses it) or from the table that must equal
pyproject.toml, and the extra only from a checkout the hint can name. The docs quote the same ranges."""

import re
import shlex
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from litebert import extras

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_table_is_pyprojects_extras():
    wanted = {name: tuple(reqs) for name, reqs in PYPROJECT["optional-dependencies"].items() if name != "dev"}
    assert extras.EXTRAS == wanted


def test_the_all_extra_is_every_other_but_dev():
    others = [spec for name, reqs in PYPROJECT["optional-dependencies"].items() if name not in ("dev", "all")
              for spec in reqs]
    assert PYPROJECT["optional-dependencies"]["all"] == list(dict.fromkeys(others))


@pytest.mark.parametrize("line", [
    'pyarrow>=14; extra == "datasets"',
    "mlflow-skinny>=2.10 ; extra == 'trackers'",
    'Foo.Bar_baz [cli,x] >= 1.0, <2 ; python_version >= "3.11" and extra == "Some_Extra"',
    "torch>=2.4",
    "numpy",
])
def test_requires_dist_is_read_as_packaging_reads_it(line):
    name, spec, extra = extras.parse_requirement(line)
    ref = Requirement(line)
    assert name == ref.name
    assert set(filter(None, spec[len(name):].split(","))) == {str(s) for s in ref.specifier}
    if ref.marker is None:
        assert extra is None
    else:
        assert ref.marker.evaluate({"extra": extra, "python_version": "3.11"})
        assert not ref.marker.evaluate({"extra": "other", "python_version": "3.11"})


def fake_distribution(tmp_path: Path, requires: list[str], direct_url: str | None = None):
    """An installed distribution as pip leaves it: a ``.dist-info`` folder with core metadata (and PEP 610's
    ``direct_url.json``)."""
    info = tmp_path / "site-packages" / "litebert-0.1.0.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", "Name: litebert", "Version: 0.1.0"]
    (info / "METADATA").write_text("\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)
    return metadata.PathDistribution(info)


def installed_elsewhere(monkeypatch, tmp_path, dist):
    """litebert's code in a site-packages folder (not a checkout), with ``dist`` as its metadata."""
    monkeypatch.setattr(extras, "__file__", str(tmp_path / "site-packages" / "litebert" / "extras.py"))
    monkeypatch.setattr(extras, "_distribution", lambda: dist)


def make_checkout(folder: Path, name: str = "litebert") -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0.1.0"\n')
    return folder


def test_the_ranges_come_from_the_installed_metadata(tmp_path, monkeypatch):
    dist = fake_distribution(tmp_path, ["torch>=2.4", 'pyarrow>=15; extra == "datasets"',
                                        'zstandard>=0.23; extra == "datasets"', 'pytest>=7; extra == "dev"'])
    installed_elsewhere(monkeypatch, tmp_path, dist)
    assert extras.requirements("datasets") == ("pyarrow>=15", "zstandard>=0.23")
    assert extras.install_hint("datasets", "zstandard") == "pip install 'zstandard>=0.23'"
    assert extras.install_hint("datasets") == "pip install 'pyarrow>=15' 'zstandard>=0.23'"
    # an extra the installed metadata lacks (an install older than the extra): pyproject's, from the table
    assert extras.install_hint("hub", "huggingface-hub") == "pip install 'huggingface_hub>=0.20'"


def test_without_metadata_the_table_gives_the_ranges(tmp_path, monkeypatch):
    installed_elsewhere(monkeypatch, tmp_path, None)
    assert extras.install_hint("datasets", "pyarrow") == "pip install 'pyarrow>=14'"
    assert extras.install_hint("trackers", "wandb", "mlflow-skinny") == \
        "pip install 'wandb>=0.17' 'mlflow-skinny>=2.10'"
    with pytest.raises(ValueError, match="'datasets' extra lists pyarrow>=14, zstandard>=0.22, not"):
        extras.install_hint("datasets", "pandas")
    with pytest.raises(ValueError, match="no extra 'gpu'"):
        extras.install_hint("gpu", "cupy")


def test_a_checkout_is_offered_as_the_extra(tmp_path, monkeypatch):
    # the code lies in a checkout (an editable install, or src/ on PYTHONPATH): that checkout, editable
    root = make_checkout(tmp_path / "my litebert")
    monkeypatch.setattr(extras, "__file__", str(root / "src" / "litebert" / "extras.py"))
    monkeypatch.setattr(extras, "_distribution", lambda: None)
    hint = extras.install_hint("datasets", "pyarrow")
    first, second = hint.split(", or the datasets extra from the checkout: ")
    assert shlex.split(first) == ["pip", "install", "pyarrow>=14"]
    assert shlex.split(second) == ["pip", "install", "-e", f"{root}[datasets]"]  # as a shell reads it: one argument


def test_the_folder_pip_installed_from_is_offered(tmp_path, monkeypatch):
    root = make_checkout(tmp_path / "src-copy")
    url = root.as_uri()
    installed_elsewhere(monkeypatch, tmp_path, fake_distribution(tmp_path, [], f'{{"url": "{url}", "dir_info": {{}}}}'))
    assert extras.checkout() == (root, False)
    assert extras.install_hint("wordpiece", "tokenizers") == \
        f"pip install 'tokenizers>=0.15', or the wordpiece extra from the checkout: pip install '{root}[wordpiece]'"


@pytest.mark.parametrize("direct_url", [
    '{"url": "file:///somewhere/litebert-0.1.0-py3-none-any.whl", "archive_info": {}}',  # a wheel: no checkout
    '{"url": "file:///no/such/folder", "dir_info": {}}',  # the folder is gone
    "{not json",
])
def test_no_checkout_no_extra(tmp_path, monkeypatch, direct_url):
    installed_elsewhere(monkeypatch, tmp_path, fake_distribution(tmp_path, [], direct_url))
    assert extras.checkout() is None
    assert extras.install_hint("plot", "matplotlib") == "pip install 'matplotlib>=3.7'"


def test_a_folder_of_another_project_is_not_litebert(tmp_path, monkeypatch):
    other = make_checkout(tmp_path / "other", name="litebert-tools")
    installed_elsewhere(monkeypatch, tmp_path,
                        fake_distribution(tmp_path, [], f'{{"url": "{other.as_uri()}", "dir_info": {{}}}}'))
    assert extras.checkout() is None


# Where a version of an optional or runtime package is written in the docs, it is pyproject.toml's.
def test_the_docs_quote_pyprojects_ranges():
    ranges = {}
    for req in PYPROJECT["dependencies"] + [r for name, reqs in PYPROJECT["optional-dependencies"].items()
                                            if name != "dev" for r in reqs]:
        name = extras.parse_requirement(req)[0]
        ranges[extras.canonical(name)] = req
    quoted = 0
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        # not on PyPI: `pip install 'litebert[x]'` finds nothing ('litebert[x] @ file:///...' does)
        assert not re.search(r"install 'litebert\[[^]]*\]'", text), doc.name
        for m in re.finditer(r"(?<![\w.-])([A-Za-z][\w.-]*)(>=[\w.]+)", text):
            if extras.canonical(m.group(1)) in ranges:
                quoted += 1
                assert m.group(0) == ranges[extras.canonical(m.group(1))], f"{doc.name}: {m.group(0)}"
    assert quoted >= 8


def test_no_message_sends_users_to_pypi_for_an_extra():
    for path in sorted((REPO / "src" / "litebert").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"pip install '?litebert\[|\(or litebert\[", text), path
