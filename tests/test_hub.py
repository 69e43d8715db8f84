"""Hub ids (``org/name[@revision]``) resolved through a real Hugging Face cache layout in a temporary HF_HOME,
offline; the download path with `litebert.hub.download` replaced (no network in tests)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from helpers import COMMIT, cache_repo
from litebert import hub
from litebert.cli import main
from litebert.errors import CheckpointError

REPO = Path(__file__).resolve().parents[1]
SPM = REPO / "data" / "albert-30k" / "spiece.model"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def hf_folder(path: Path, head: str = "mlm", seed: int = 0) -> Path:
    """An ALBERT folder as transformers writes it (save_pretrained of a tiny model and its tokenizer)."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    if head == "mlm":
        model = transformers.AlbertForMaskedLM(config)
    else:
        config.num_labels, config.id2label, config.label2id = 2, {0: "neg", 1: "pos"}, {"neg": 0, "pos": 1}
        model = transformers.AlbertForSequenceClassification(config)
    model.save_pretrained(path)
    transformers.AlbertTokenizer(str(SPM)).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def folders_made(tmp_path_factory):
    base = tmp_path_factory.mktemp("hf")
    return {"mlm": hf_folder(base / "mlm"), "classifier": hf_folder(base / "cls", head="classifier", seed=1),
            "mlm2": hf_folder(base / "mlm2", seed=2)}


@pytest.fixture
def hf_home(tmp_path, monkeypatch, folders_made):
    home = tmp_path / "hf_home"
    cache_repo(home, "albert/albert-tiny", folders_made["mlm"])
    cache_repo(home, "albert/albert-tiny", folders_made["mlm2"], commit=OTHER_COMMIT, ref=None)
    cache_repo(home, "someone/albert-tiny-sst2", folders_made["classifier"])
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(repo, revision):
        raise AssertionError(f"litebert tried to download {repo}@{revision} in offline mode")

    monkeypatch.setattr(hub, "download", no_network)
    return home


def test_hub_ids_are_recognised_and_paths_are_not():
    assert hub.is_hub_id("albert/albert-base-v2") and hub.is_hub_id("albert/albert-base-v2@main")
    assert hub.is_hub_id("org/name@" + COMMIT)
    for not_id in ("albert-base-v2", "runs/demo/model", "./x/y", "/abs/path", "a/b/c", "../x", "x/..", "org/na me",
                   "org/name@", ""):
        assert not hub.is_hub_id(not_id), not_id


def test_local_folder_of_the_same_shape_wins(tmp_path, monkeypatch, hf_home):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "albert" / "albert-tiny").mkdir(parents=True)
    assert hub.local("albert/albert-tiny") == Path("albert/albert-tiny")


def test_model_and_tokenizer_load_from_the_cache_offline(hf_home, folders_made):
    import transformers

    from litebert.heads import AlbertForMaskedLM
    from litebert.model import AlbertModel
    from litebert.tokenizer import AlbertTokenizer

    snapshot = hub.local("albert/albert-tiny")
    assert snapshot == hf_home / "hub" / "models--albert--albert-tiny" / "snapshots" / COMMIT
    ours = AlbertForMaskedLM.from_pretrained("albert/albert-tiny").eval()
    ref = transformers.AlbertForMaskedLM.from_pretrained(folders_made["mlm"]).eval()
    tok = AlbertTokenizer.from_pretrained("albert/albert-tiny")
    ref_tok = transformers.AlbertTokenizer.from_pretrained(folders_made["mlm"])
    text = "The quick brown fox jumps over the lazy dog."
    assert tok(text)["input_ids"] == ref_tok(text)["input_ids"]
    ids = torch.tensor([tok(text)["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids).logits, ref(input_ids=ids).logits,
                                   atol=1e-5, rtol=1e-5)
    # a revision: the other snapshot (a different model), by its commit
    other = AlbertModel.from_pretrained("albert/albert-tiny@" + OTHER_COMMIT)
    first = AlbertModel.from_pretrained("albert/albert-tiny")
    assert not torch.equal(other.embeddings.word_embeddings.weight, first.embeddings.word_embeddings.weight)


def test_missing_id_offline_is_one_clear_error(hf_home):
    from litebert.model import AlbertModel

    with pytest.raises(CheckpointError) as e:
        AlbertModel.from_pretrained("albert/albert-xxlarge-v2")
    message = str(e.value)
    assert "albert/albert-xxlarge-v2" in message and "not in the Hugging Face cache" in message
    assert "hf download albert/albert-xxlarge-v2" in message and "\n" not in message
    with pytest.raises(CheckpointError, match="not in the Hugging Face cache"):
        hub.local("albert/albert-tiny@v9")  # a revision the cache does not hold


def test_cli_missing_id_names_the_id_not_the_tokenizer(hf_home, tmp_path, capsys):
    code = main(["embed", "--model", "albert/albert-nope", "--input", str(SPM), "--output", str(tmp_path / "e.npy")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "albert/albert-nope" in err and "Hugging Face cache" in err
    assert "tokenizer" not in err.split("cache")[0]


def test_download_when_not_offline(tmp_path, monkeypatch, folders_made):
    """Not cached and online: `hub.download` is called once with the id and revision, and its folder used."""
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    calls = []

    def fake_download(repo, revision):
        calls.append((repo, revision))
        return str(cache_repo(home, repo, folders_made["mlm"]))

    monkeypatch.setattr(hub, "download", fake_download)
    from litebert.model import AlbertModel

    model = AlbertModel.from_pretrained("albert/albert-tiny@main")
    assert calls == [("albert/albert-tiny", "main")] and model.config.hidden_size == 32
    AlbertModel.from_pretrained("albert/albert-tiny")  # now cached: no second download
    assert calls == [("albert/albert-tiny", "main")]

    def failing(repo, revision):
        raise OSError("Temporary failure in name resolution\nmore detail")

    monkeypatch.setattr(hub, "download", failing)
    with pytest.raises(CheckpointError, match=r"downloading the model .* failed \(Temporary failure in name "
                                              r"resolution\)") as e:
        AlbertModel.from_pretrained("albert/other")
    assert "\n" not in str(e.value)


def test_offline_flag_blocks_the_download(tmp_path, monkeypatch, capsys, folders_made):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "download", lambda repo, revision: pytest.fail("downloaded despite --offline"))
    code = main(["embed", "--offline", "--model", "albert/albert-tiny", "--input", str(SPM), "--output",
                 str(tmp_path / "e.npy")])
    err = capsys.readouterr().err
    assert code == 2 and "not in the Hugging Face cache" in err and "offline" in err


def test_commands_take_hub_ids_offline(hf_home, tmp_path, capsys):
    """embed, finetune (--model and --tokenizer), predict and evaluate on a hub classifier, pretrain --init-from."""
    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\na bad film\n")
    assert main(["embed", "--model", "albert/albert-tiny", "--input", str(texts), "--output",
                 str(tmp_path / "e.npy"), "--no-progress"]) == 0
    import numpy as np

    assert np.load(tmp_path / "e.npy").shape == (2, 32)

    data = tmp_path / "sent"
    data.mkdir()
    rows = [{"text": f"{w} film number {i}", "label": "pos" if w == "good" else "neg"}
            for i in range(8) for w in ("good", "bad")]
    for split in ("train", "dev"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["finetune", "classify", "--model", "albert/albert-tiny", "--tokenizer", "albert/albert-tiny",
                 "--data", str(data), "--out", str(tmp_path / "ft"), "--max-steps", "2", "--batch-size", "4",
                 "--seq-len", "32", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert main(["predict", "--model", "someone/albert-tiny-sst2", "--input", str(data / "dev.jsonl"),
                 "--output", str(tmp_path / "p.jsonl")]) == 0
    predictions = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(predictions) == len(rows) and {p["label"] for p in predictions} <= {"neg", "pos"}
    assert all(set(p["probabilities"]) == {"neg", "pos"} for p in predictions)
    assert main(["evaluate", "--model", "someone/albert-tiny-sst2", "--data", str(data / "dev.jsonl")]) == 0
    capsys.readouterr()
    assert main(["tokenizer", "encode", "--tokenizer", "albert/albert-tiny", "--text", "a good film"]) == 0
    from litebert.tokenizer import AlbertTokenizer

    expected = AlbertTokenizer.from_pretrained(hub.local("albert/albert-tiny"))("a good film")["input_ids"]
    assert json.loads(capsys.readouterr().out)["input_ids"] == expected
    assert main(["data", "prepare", "--input", str(texts), "--tokenizer", "albert/albert-tiny", "--out",
                 str(tmp_path / "store"), "--no-progress"]) == 0


def test_export_takes_a_hub_id_offline(hf_home, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "tiny.onnx"
    assert main(["export", "onnx", "--offline", "--model", "albert/albert-tiny", "--out", str(out)]) == 0, \
        capsys.readouterr().err
    assert "exported AlbertForMaskedLM" in capsys.readouterr().out and out.stat().st_size > 0
    assert main(["export", "onnx", "--offline", "--model", "albert/not-cached", "--out", str(tmp_path / "x.onnx")]) == 2
    assert "is not in the Hugging Face cache" in capsys.readouterr().err


def test_pretrain_init_from_hub_id(hf_home, tmp_path, capsys):
    from litebert.data.store import prepare_store
    from litebert.tokenizer import AlbertTokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence number {i} is here.\nAnother line {i} follows it.\n\n" for i in range(40)))
    prepare_store([corpus], AlbertTokenizer.from_pretrained("albert/albert-tiny"), tmp_path / "store",
                  progress=False)
    code = main(["pretrain", "--data", str(tmp_path / "store"), "--out", str(tmp_path / "run"), "--init-from",
                 "albert/albert-tiny", "--max-steps", "1", "--batch-size", "2", "--micro-batch", "2",
                 "--seq-len", "32", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "model" / "config.json").is_file()


def test_without_huggingface_hub_the_error_says_what_to_install(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_hub(name, *args, **kwargs):
        if name == "huggingface_hub" or name.startswith("huggingface_hub."):
            raise ImportError("No module named 'huggingface_hub'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    with pytest.raises(CheckpointError, match=r"needs huggingface_hub \(pip install 'huggingface_hub>=0\.20'"):
        hub.local("albert/albert-base-v2")
    shutil.rmtree(tmp_path, ignore_errors=True)
