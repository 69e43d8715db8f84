"""Dataset ids as fine-tuning data (`litebert.inputs.hub_datasets`), loaded by ``datasets.load_dataset`` from a cache
built
here in the layout the Hub's datasets leave (no network: offline mode on), and the rule that tells an id from a
path."""

import json
from pathlib import Path

import pytest
import torch

from litebert.cli import main
from litebert.errors import DataError
from litebert.inputs.hub_datasets import is_dataset_id, offline, parse
from litebert.tasks.presets import get_preset
from litebert.tasks.sources import eval_path, split_paths

datasets = pytest.importorskip("datasets")
datasets.disable_progress_bars()

REPO = Path(__file__).resolve().parents[2]
VOCAB = REPO / "data" / "albert-30k"
pytestmark = pytest.mark.usefixtures("one_thread")

SST = {"train": [("a gripping , funny film", 1), ("dull and overlong", 0), ("the cast is superb", 1),
                 ("nothing works here", 0)],
       "validation": [("warm and wise", 1), ("a mess", 0)],
       "test": [("unseen", -1), ("also unseen", -1)]}
FEATURES = datasets.Features({"sentence": datasets.Value("string"),
                              "label": datasets.ClassLabel(names=["negative", "positive"]),
                              "idx": datasets.Value("int32")})


def cache_dataset(cache: Path, repo: str, config: str, splits: dict, features) -> None:
    """Put ``splits`` into the datasets cache ``cache`` as ``load_dataset(repo, config)`` leaves a Hub dataset
    (``ORG___NAME/CONFIG/VERSION/HASH/``: dataset_info.json and ``NAME-SPLIT.arrow``), built by `datasets`' own
    Parquet builder from local files, offline."""
    from datasets.packaged_modules.parquet.parquet import Parquet

    org, name = repo.split("/")
    source = cache.parent / f"source-{name}-{config}"
    source.mkdir(parents=True)
    files = {}
    for split, rows in splits.items():
        table = {"sentence": [s for s, _ in rows], "label": [y for _, y in rows], "idx": list(range(len(rows)))}
        datasets.Dataset.from_dict(table, features=features).to_parquet(str(source / f"{split}.parquet"))
        files[split] = str(source / f"{split}.parquet")
    before = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = True
    try:
        Parquet(cache_dir=str(cache), dataset_name=f"{org}___{name}", config_name=config, data_files=files,
                features=features, hash="0123456789abcdef").download_and_prepare()
    finally:
        datasets.config.HF_HUB_OFFLINE = before
    built = next(p for p in (cache / f"{org}___{name}").iterdir() if p.is_dir() and p.name.startswith(config))
    built.rename(built.with_name(config))  # a Hub config's folder is named by the config alone
    for arrow in (cache / f"{org}___{name}" / config).rglob(f"{org}___{name}-*.arrow"):
        arrow.rename(arrow.with_name(arrow.name.replace(f"{org}___", "")))  # and its files by the dataset's name


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "datasets"
    cache_dataset(cache, "testorg/tinyglue", "sst2", SST, FEATURES)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # relative ids resolve against no local folder of that name
    return cache


def rows(split) -> list[tuple[str, str | None]]:
    return [(e.text_a, e.label) for e in get_preset("sst-2").kind.read(split)]


def tsv_rows(tmp_path: Path, split: str) -> list[tuple[str, str | None]]:
    """The same rows read from a GLUE SST-2 TSV (the reference)."""
    path = tmp_path / f"{split}.tsv"
    path.write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in SST[split]), encoding="utf-8")
    return rows(path)


def test_an_id_in_the_cache_gives_the_tsv_examples_offline(hub_cache, tmp_path):
    setting = datasets.config.HF_HUB_OFFLINE
    train, dev = split_paths("testorg/tinyglue:sst2", None)
    assert (str(train), str(dev)) == ("testorg/tinyglue:sst2 [train]", "testorg/tinyglue:sst2 [validation]")
    assert rows(train) == tsv_rows(tmp_path, "train") and rows(dev) == tsv_rows(tmp_path, "validation")
    assert [e.guid for e in get_preset("sst-2").kind.read(train)] == ["sst-2-0", "sst-2-1", "sst-2-2", "sst-2-3"]
    _, dev = split_paths("testorg/tinyglue:sst2", "test")  # --dev: a split by its name
    assert rows(dev) == [("unseen", None), ("also unseen", None)]
    train, dev = split_paths("testorg/tinyglue:sst2:validation", None)  # the split the id names, no dev
    assert rows(train) == tsv_rows(tmp_path, "validation") and dev is None
    assert str(eval_path("testorg/tinyglue:sst2")) == "testorg/tinyglue:sst2 [validation]"
    assert datasets.config.HF_HUB_OFFLINE == setting  # the calls left datasets' own setting as it was


def test_offline_without_the_cache_is_one_line(hub_cache, monkeypatch):
    for spec, said in (("testorg/other", "testorg/other is not in the datasets cache"),
                       ("testorg/tinyglue:cola", "testorg/tinyglue:cola is not in the datasets cache")):
        with pytest.raises(DataError) as e:
            split_paths(spec, None)
        message = str(e.value)
        assert message.startswith(f"{spec}: no such file or folder, and the dataset ") and said in message
        assert f"({hub_cache}) while offline mode is on" in message and "\n" not in message
    with pytest.raises(DataError, match=r"a configuration follows a colon, as in glue:sst2$"):
        split_paths("glue/sst2", None)  # the repository sst2 of a user glue: not cached, and likely meant otherwise
    with pytest.raises(DataError, match=r"^testorg/tinyglue:sst2:dev: no split 'dev' \(the dataset has train, "
                                        r"validation, test\)$"):
        split_paths("testorg/tinyglue:sst2:dev", None)
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # --offline sets it; HF_DATASETS_OFFLINE unset defers to it
    assert offline()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")  # set, it decides
    assert not offline()


def test_what_is_an_id_and_what_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)
    (tmp_path / "sst2").mkdir()
    assert parse("nyu-mll/glue:mnli:validation_mismatched@main") == {
        "repo": "nyu-mll/glue", "config": "mnli", "split": "validation_mismatched", "revision": "main"}
    assert parse("imdb::test") == {"repo": "imdb", "config": None, "split": "test", "revision": None}
    for spec in ("glue:sst2", "stanfordnlp/imdb", "imdb", "glue/sst2"):
        assert is_dataset_id(spec), spec
    for spec in ("org/name", "sst2",  # paths that exist: always paths
                 "data/train.tsv", "train.jsonl.gz", "x/y.parquet",  # data files: missing files, not ids
                 "./imdb", "/data/imdb", "~/imdb", "a/b/c", "../imdb", "s3://bucket/imdb", "https://x.org/a"):
        assert not is_dataset_id(spec), spec


def test_finetune_on_a_dataset_id(hub_cache, tmp_path, capsys):
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import AlbertTokenizer

    model = tmp_path / "model"
    tok = AlbertTokenizer.from_pretrained(VOCAB)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size,
                                                  max_position_embeddings=64)).save_pretrained(model)
    tok.save_pretrained(model)
    assert main(["finetune", "sst-2", "--model", str(model), "--data", "testorg/tinyglue:sst2", "--out",
                 str(tmp_path / "out"), "--max-steps", "2", "--eval-every", "2", "--batch-size", "2",
                 "--seq-len", "32", "--no-progress", "--offline"]) == 0
    train = json.loads((tmp_path / "out" / "finetune.json").read_text())["train"]
    assert (train["data"], train["dev"]) == ("testorg/tinyglue:sst2 [train]", "testorg/tinyglue:sst2 [validation]")
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "out"), "--data", "testorg/tinyglue:sst2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["data"] == "testorg/tinyglue:sst2 [validation]" and 0 <= result["accuracy"] <= 1


def test_a_cached_load_prints_none_of_datasets_notices(hub_cache, capfd, caplog):
    """Issue 58 item 9: datasets' cache notices ("Using the latest cached version ...", "Found the latest cached
    dataset configuration ...") and progress bars are not printed on every dataset-id run; its verbosity and progress
    setting are left as they were; a failure is still one error."""
    from datasets.utils import logging as ds_logging

    verbosity, bars = ds_logging.get_verbosity(), datasets.utils.are_progress_bars_disabled()
    datasets.enable_progress_bars()
    try:
        capfd.readouterr()
        with caplog.at_level("INFO", logger="datasets"):
            train, _ = split_paths("testorg/tinyglue:sst2", None)
        assert rows(train) == tsv_rows(hub_cache.parent.parent, "train")
        printed = capfd.readouterr()
        assert "cached" not in printed.err and "cached" not in printed.out, printed
        assert not [r.getMessage() for r in caplog.records if r.name.startswith("datasets")], caplog.text
        assert ds_logging.get_verbosity() == verbosity and not datasets.utils.are_progress_bars_disabled()
        with pytest.raises(DataError, match="is not in the datasets cache"):
            split_paths("testorg/other", None)
    finally:
        datasets.disable_progress_bars() if bars else datasets.enable_progress_bars()
