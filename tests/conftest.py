"""Shared test fixtures. Tests run on CPU in fp32 with few threads so that the suite's figures are stable."""

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
ALBERT_VOCAB = REPO / "data" / "albert-30k"  # bundled: see data/albert-30k/README.md

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def albert_vocab() -> Path:
    """The folder of the official ALBERT 30k vocabulary (spiece.model + SHA256SUMS), bundled with the repository."""
    assert (ALBERT_VOCAB / "spiece.model").is_file(), f"{ALBERT_VOCAB}/spiece.model is missing from the checkout"
    return ALBERT_VOCAB


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip cleanly on machines without CUDA (``pytest -m gpu`` on a CPU-only machine)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def one_thread():
    """One torch thread for the test (tiny models gain nothing from threads; on a shared 2-core machine extra threads
    only contend). Files use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_separable(path: Path, n: int, seed: int) -> None:
    """``n`` JSONL examples of a separable two-class task: one sentiment word ("great" / "awful"...) among filler
    words decides the label (pos / neg)."""
    import json

    import numpy as np

    rng = np.random.default_rng(seed)
    pos, neg = ["great", "wonderful", "excellent", "funny"], ["awful", "boring", "terrible", "dull"]
    filler = "the movie was and a plot with actors in story film it".split()
    with open(path, "w") as f:
        for _ in range(n):
            y = int(rng.integers(2))
            words = list(rng.choice(filler, int(rng.integers(4, 12))))
            words.insert(int(rng.integers(len(words) + 1)), str(rng.choice(pos if y else neg)))
            f.write(json.dumps({"text": " ".join(words), "label": ["neg", "pos"][y]}) + "\n")


@pytest.fixture(scope="session")
def finetune_base(tmp_path_factory) -> tuple[Path, Path]:
    """(model folder, data folder) for fine-tuning tests: the `tiny` preset with random weights (seed 0) and a
    1,000-piece SentencePiece vocabulary trained on the bundled sentiment task's training texts; the data folder
    holds a separable task (`write_separable`), train.jsonl (96 examples) and dev.jsonl (24)."""
    import gzip

    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("finetune-base")
    corpus = root / "corpus.txt"
    with gzip.open(REPO / "data" / "finetune" / "sentiment" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        corpus.write_text("".join(line.split("\t")[0] + "\n" for line in f), encoding="utf-8")
    tok = train_tokenizer([corpus], root / "model", vocab_size=1000, progress=False)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(root / "model")
    data = root / "data"
    data.mkdir()
    write_separable(data / "train.jsonl", 96, 0)
    write_separable(data / "dev.jsonl", 24, 1)
    return root / "model", data
