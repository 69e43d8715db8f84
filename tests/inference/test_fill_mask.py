"""``litebert fill-mask`` (`litebert.inference.fill_mask.fill_mask`) against transformers 4.57's fill-mask pipeline: a
pretraining folder saved by litebert, an HF AlbertForMaskedLM folder and a hub id; --text and --input/--output; and
its one-line errors (no [MASK], no MLM head, top-k < 1, an existing output left as it was)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import litebert
from helpers import cache_repo
from helpers.pipelines import CONFIG, assert_same
from litebert.cli import main
from litebert.errors import CheckpointError, ConfigError, DataError
from litebert.inference.fill_mask import fill_mask
from litebert.tokenizer import AlbertTokenizer

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["The [MASK] sat on the mat.", "Ahab (quietly) [MASK] the whale in [MASK].", "Call me [MASK]."]


@pytest.fixture(scope="module")
def folders(albert_vocab, tmp_path_factory):
    """A litebert pretraining folder (MLM + SOP heads), an HF AlbertForMaskedLM folder, an encoder-only folder."""
    root, tok = tmp_path_factory.mktemp("fill"), AlbertTokenizer.from_pretrained(albert_vocab)
    torch.manual_seed(0)
    config = litebert.AlbertConfig(**CONFIG)
    litebert.AlbertForPreTraining(config).save_pretrained(root / "pretrain")
    transformers.AlbertForMaskedLM(transformers.AlbertConfig(**CONFIG)).save_pretrained(root / "hf-mlm")
    litebert.AlbertModel(config).save_pretrained(root / "encoder")
    for name in ("pretrain", "hf-mlm", "encoder"):
        tok.save_pretrained(root / name)
    return root


def hf_fill(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.logging.set_verbosity_error()
        return transformers.pipeline("fill-mask", model=str(folder), device="cpu")


@pytest.mark.parametrize("name", ["pretrain", "hf-mlm"])
def test_text_prints_hfs_answer(folders, name, capsys):
    for text in TEXTS:
        assert main(["fill-mask", "--model", str(folders / name), "--text", text, "--top-k", "3"]) == 0
        assert_same(hf_fill(folders / name)(text, top_k=3), json.loads(capsys.readouterr().out))


def test_input_file_to_output_and_to_stdout(folders, tmp_path, capsys):
    rows = [{"id": i, "text": t} for i, t in enumerate(TEXTS)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert main(["fill-mask", "--model", str(folders / "pretrain"), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(out), "--batch-size", "2"]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    hf = hf_fill(folders / "pretrain")
    assert [{k: w[k] for k in ("id", "text")} for w in written] == rows
    for row, w in zip(rows, written):
        assert_same(hf(row["text"]), w["predictions"])
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(folders / "pretrain"), "--input", str(tmp_path / "in.jsonl")]) == 0
    assert_same(written, [json.loads(line) for line in capsys.readouterr().out.splitlines()])  # other batches


def test_python_function_and_hub_id(folders, tmp_path, monkeypatch):
    home = tmp_path / "hf_home"
    cache_repo(home, "someone/albert-mlm", folders / "hf-mlm")
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = fill_mask("someone/albert-mlm", TEXTS[0], top_k=2)
    assert result.count == 1 and result.output is None
    assert_same(hf_fill(folders / "hf-mlm")(TEXTS[0], top_k=2), result.predictions[0])
    answer = litebert.pipeline("fill-mask", model=folders / "hf-mlm")("The [MASK] sat on the mat.")
    assert len(answer) == 5 and set(answer[0]) == {"score", "token", "token_str", "sequence"}


def test_errors_are_one_line_and_leave_the_output(folders, tmp_path, capsys):
    model = str(folders / "pretrain")
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": "a [MASK]"}) + "\n" + json.dumps({"text": "none"}) + "\n")
    kept = tmp_path / "kept.jsonl"
    kept.write_text("mine\n")
    cases = [
        (["--text", "No mask here."], "no [MASK] in the text 'No mask here.'"),
        (["--text", "lower [mask] case"], "no [MASK] in the text"),
        (["--input", str(tmp_path / "in.jsonl")], f"{tmp_path / 'in.jsonl'}:2: no [MASK] in the text 'none'"),
        (["--text", "a [MASK]", "--top-k", "0"], "--top-k 0: must be >= 1"),
        ([], "give --text or --input"),
        (["--text", "a [MASK]", "--output", str(kept)], "--output " + str(kept) + " goes with --input"),
        (["--input", str(tmp_path / "in.jsonl"), "--output", str(kept)], f"--output {kept} exists; pass --overwrite"),
    ]
    for args, message in cases:
        assert main(["fill-mask", "--model", model] + args) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert main(["fill-mask", "--model", str(folders / "encoder"), "--text", "a [MASK]"]) == 2
    err = capsys.readouterr().err
    assert "no masked-language-model head in its weights" in err and len(err.strip().splitlines()) == 1
    assert kept.read_text() == "mine\n"
    with pytest.raises(ConfigError, match="top_k = 0"):
        litebert.pipeline("fill-mask", model=model)("a [MASK]", top_k=0)
    with pytest.raises(DataError, match="no \\[MASK\\]"):
        litebert.pipeline("fill-mask", model=model)(["a [MASK]", "b"])
    with pytest.raises(CheckpointError, match="no masked-language-model head"):
        fill_mask(folders / "encoder", "a [MASK]")


# ------------------------------------------------------------------------------------------ masks cut off by truncation
SHORT = 16  # the positions of the short model below: [CLS], 14 pieces, [SEP]


@pytest.fixture(scope="module")
def short(albert_vocab, tmp_path_factory):
    """(litebert's fill-mask pipeline, HF's tokenizer) of a pretraining folder with SHORT positions."""
    folder = tmp_path_factory.mktemp("short") / "pretrain"
    torch.manual_seed(0)
    config = litebert.AlbertConfig(**CONFIG, max_position_embeddings=SHORT)
    litebert.AlbertForPreTraining(config).save_pretrained(folder)
    AlbertTokenizer.from_pretrained(albert_vocab).save_pretrained(folder)
    return litebert.pipeline("fill-mask", model=folder), transformers.AlbertTokenizer.from_pretrained(str(folder))


def test_a_mask_cut_off_by_truncation_is_named_as_such(short):
    """fill-03 by hand: 20 words then [MASK]; the model reads 16 pieces."""
    fill, _ = short
    with pytest.raises(DataError, match=r"^the text 'a a .* \[MASK\]' is 23 pieces with \[CLS\] and \[SEP\], and the "
                                        r"model reads 16: 1 of its 1 \[MASK\]s \(the first at piece 21\) would be cut "
                                        r"off; shorten the text around them$"):
        fill("a " * 20 + "[MASK]")


@given(words=st.lists(st.sampled_from(["the", "cat", "whale", "[MASK]", "Ahab,"]), min_size=8, max_size=20))
def test_masks_are_filled_or_the_cut_is_named(short, words):
    """HF's tokenizer places the masks (the reference); a text whose masks all fit gets one answer per mask, one that
    loses any to truncation is refused naming it, one without any says so."""
    fill, hf = short
    text = " ".join(words)
    at = [k for k, i in enumerate(hf(text)["input_ids"]) if i == hf.mask_token_id]
    kept = [k for k in at if k < SHORT - 1]
    if at and len(kept) == len(at):
        answer = fill(text, top_k=2)
        assert len(answer) == 2 if len(at) == 1 else [len(a) for a in answer] == [2] * len(at)
        return
    message = "would be cut off" if at else "no \\[MASK\\] in the text"
    with pytest.raises(DataError, match=message):
        fill(text)
