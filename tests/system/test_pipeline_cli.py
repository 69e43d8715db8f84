"""The README's flow on the command line, with tiny settings: `tokenizer train` on a corpus folder -> `data prepare`
on a quoted glob -> `pretrain` -> `finetune`, with no flag passing the tokenizer along: the store carries it and
pretraining saves it beside the model."""

import hashlib
import json
import lzma
from pathlib import Path

import numpy as np

from litebert.cli import main
from litebert.data.store import prepare_store

REPO = Path(__file__).resolve().parents[2]
PRETRAIN_TINY = ["--preset", "tiny", "--max-steps", "2", "--batch-size", "4", "--micro-batch", "4",
                 "--seq-len", "64", "--warmup-steps", "1", "--threads", "1", "--no-progress"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tokenizer_data_pretrain_finetune(tmp_path, capsys):
    lines = lzma.decompress((REPO / "data" / "corpus" / "moby_dick.txt.xz").read_bytes()).decode().splitlines()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt.xz").write_bytes(lzma.compress("\n".join(lines[:700]).encode()))
    (corpus / "b.txt.xz").write_bytes(lzma.compress("\n".join(lines[700:1400]).encode()))
    tok, store, run, clf = (str(tmp_path / name) for name in ("tok", "store", "run", "clf"))

    assert main(["tokenizer", "train", "--input", f"{corpus}/", "--vocab-size", "600", "--out", tok,
                 "--threads", "1", "--quiet"]) == 0
    assert main(["data", "prepare", "--input", f"{corpus}/*.txt.xz", "--tokenizer", tok, "--out", store,
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["data", "inspect", store, "--show", "1"]) == 0  # prints pieces with the store's own tokenizer
    out = capsys.readouterr().out
    assert f"saved in {Path(store) / 'tokenizer'}" in out and "example 0 (label" in out and "[CLS]" in out
    assert main(["pretrain", "--data", store, "--out", run, *PRETRAIN_TINY]) == 0
    model = Path(run) / "model"
    assert sha256(model / "spiece.model") == sha256(Path(tok) / "spiece.model")  # the tokenizer came along
    assert "has no tokenizer" not in capsys.readouterr().err
    sentiment = str(REPO / "data" / "finetune" / "sentiment")
    assert main(["finetune", "sentiment", "--model", str(model), "--data", sentiment, "--out", clf,
                 "--max-train-examples", "16", "--max-eval-examples", "16", "--epochs", "1", "--batch-size", "8",
                 "--seq-len", "64", "--threads", "1", "--no-progress"]) == 0
    assert sha256(Path(clf) / "spiece.model") == sha256(Path(tok) / "spiece.model")


def test_pretrain_on_a_store_without_tokenizer_says_so(tmp_path, capsys):
    class IntTokenizer:  # a tokenizer that cannot save itself: its store holds no tokenizer, as older stores
        vocab_size, pad_token_id, unk_token_id, cls_token_id, sep_token_id, mask_token_id = 100, 0, 1, 2, 3, 4

        def encode_batch_ids(self, texts):
            return [[int(w) for w in t.split()] for t in texts]

        def word_start_mask(self):
            return np.ones(100, dtype=bool)

        def normal_piece_ids(self):
            return np.arange(5, 100)

        def fingerprint(self):
            return "int-100"

    rng = np.random.default_rng(0)
    text = "\n\n".join("\n".join(" ".join(map(str, rng.integers(5, 100, 10))) for _ in range(6)) for _ in range(8))
    (tmp_path / "c.txt").write_text(text)
    prepare_store([tmp_path / "c.txt"], IntTokenizer(), tmp_path / "store", progress=False)
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    del manifest["tokenizer_folder"], manifest["manifest_sha256"]  # as written before stores kept their tokenizer
    (tmp_path / "store" / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["pretrain", "--data", str(tmp_path / "store"), "--out", str(tmp_path / "run"), *PRETRAIN_TINY]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "has no tokenizer" in line]
    assert notes == [f"note: {tmp_path / 'run' / 'model'} has no tokenizer: the store {tmp_path / 'store'} holds "
                     f"none; pass a tokenizer to save one beside the model"]
    assert (tmp_path / "run" / "model" / "config.json").is_file()
    assert not (tmp_path / "run" / "model" / "spiece.model").exists()
