"""The sample that ships inside the package (`litebert.samples`, `litebert sample`): the files the README's quickstart
reads outside a clone, an excerpt of the bundled data (the same sentences and rows), and in the wheel."""

import gzip
import lzma
import zipfile
from pathlib import Path

import pytest

import litebert
from helpers.wheel import build_wheel
from litebert import samples
from litebert.cli import main
from litebert.folders import OutputError

REPO = Path(__file__).resolve().parents[1]


def test_the_sample_is_an_excerpt_of_the_bundled_data():
    assert litebert.samples.corpus() == samples.corpus()  # reached as an attribute of the package too
    for name in ("moby_dick", "sotu"):
        part = lzma.decompress((samples.corpus() / f"{name}.txt.xz").read_bytes()).decode("utf-8")
        full = lzma.decompress((REPO / "data" / "corpus" / f"{name}.txt.xz").read_bytes()).decode("utf-8")
        docs = [d for d in part.split("\n\n") if d.strip()]
        assert len(docs) >= 8 and all(d.strip() in full for d in docs)
    for split, rows in (("train", 1500), ("dev", 500)):
        part = gzip.decompress((samples.sentiment() / f"{split}.tsv.gz").read_bytes()).decode("utf-8").splitlines()
        full = gzip.decompress((REPO / "data" / "finetune" / "sentiment" / f"{split}.tsv.gz").read_bytes()) \
            .decode("utf-8").splitlines()
        assert part == full[:rows + 1] and part[0].split("\t")[:2] == ["sentence", "label"]
        assert {line.split("\t")[1] for line in part[1:]} == {"0", "1"}
    assert (samples.sentiment() / "examples.jsonl").read_bytes() == \
        (REPO / "data" / "finetune" / "sentiment" / "examples.jsonl").read_bytes()
    assert sum((samples.HERE / f).stat().st_size for f in samples.FILES) < 400_000  # a few hundred kB


def test_write_sample_copies_it_and_refuses_a_changed_file(tmp_path, capsys):
    assert main(["sample", "--out", str(tmp_path / "s")]) == 0
    assert "wrote the sample to" in capsys.readouterr().out
    for name in samples.FILES:
        assert (tmp_path / "s" / name).read_bytes() == (samples.HERE / name).read_bytes()
    assert samples.write_sample(tmp_path / "s") == [tmp_path / "s" / n for n in samples.FILES]  # again: unchanged
    (tmp_path / "s" / "sentiment" / "dev.tsv.gz").write_bytes(b"mine")
    with pytest.raises(OutputError, match="dev.tsv.gz already exists and is not the sample's"):
        samples.write_sample(tmp_path / "s")
    assert (tmp_path / "s" / "sentiment" / "dev.tsv.gz").read_bytes() == b"mine"  # left as it was
    assert main(["sample", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "--overwrite" in err[0], err
    assert main(["sample", "--out", str(tmp_path / "s"), "--overwrite"]) == 0
    restored = (tmp_path / "s" / "sentiment" / "dev.tsv.gz").read_bytes()
    assert restored == (samples.sentiment() / "dev.tsv.gz").read_bytes()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="cannot write the sample there"):
        samples.write_sample(tmp_path / "file")


def test_the_wheel_carries_the_sample(tmp_path):
    names = zipfile.ZipFile(build_wheel(tmp_path)).namelist()
    for name in (*samples.FILES, "README.md", "__init__.py"):
        assert f"litebert/samples/{name}" in names, name
    assert not [n for n in names if n.startswith("data/")]
