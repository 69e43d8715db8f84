"""Tokenizer folders an HF user has: ``tokenizer_config.json`` that makes ``AutoTokenizer`` give litebert's
``input_ids``/``token_type_ids``/``attention_mask`` (transformers 4.57 here; 5.x where ``LITEBERT_TF5_PYTHON`` names
a python with transformers 5), and folders holding only ``tokenizer.json`` (what transformers 5 saves), from which
the SentencePiece model is rebuilt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.tokenizer_texts import VARIED, WRITTEN, corpus_lines, with_specials
from litebert.errors import TokenizerError
from litebert.tokenizer import MODEL_INPUT_NAMES, AlbertTokenizer, load_tokenizer
from litebert.tokenizer.hf_json import model_proto_from_tokenizer_json

REPO = Path(__file__).resolve().parents[2]
# accents, CJK, full-width forms, odd whitespace, compatibility characters, digits with commas
ODD = ["Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３，４５６", "ｶﾀｶﾅ ﾃｽﾄ", "naïve Ångström façade Ærø ŒUVRE",
       "北京大学 東京 서울",
       "a\u2009b\u202fc\u205fd\u00a0e", "x\r\n\r\ny\t\tz\u000bw\u000cv", "\u2028line\u2029para", "1,000, 2,5, 10,",
       "ǅemal ﬃ ㎞ ℌ ⅷ", "“smart” ‘quotes’ … — –", "e\u0301\u0302 o\u0308\u0304"]
TEXTS = VARIED + ODD + WRITTEN + with_specials(30, seed=1)
# For HF's Rust tokenizer: Python's str.split (the official whitespace collapsing) splits words at a vertical tab or
# form feed, which HF's nmt_nfkc step deletes first (joining the words); docs/tokenizer.md lists this difference.
HF_TEXTS = [t for t in TEXTS if "\x0b" not in t and "\x0c" not in t]
PAIRS = [(a, b) for a, b in zip(HF_TEXTS, HF_TEXTS[7:] + HF_TEXTS[:7]) if a and b]


@pytest.fixture(scope="module")
def tok(albert_vocab) -> AlbertTokenizer:
    return AlbertTokenizer.from_pretrained(albert_vocab)


@pytest.fixture(scope="module")
def saved(tok, tmp_path_factory) -> Path:
    return tok.save_pretrained(tmp_path_factory.mktemp("litebert_tok"))


def model_inputs(enc) -> dict:
    return {k: list(enc[k]) for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc}


# --------------------------------------------------------------------------------- tokenizer_config.json for HF
def test_config_names_the_model_inputs(saved):
    cfg = json.loads((saved / "tokenizer_config.json").read_text())
    assert cfg["model_input_names"] == MODEL_INPUT_NAMES == ["input_ids", "token_type_ids", "attention_mask"]
    assert cfg["split_special_tokens"] is False and cfg["clean_up_tokenization_spaces"] is False


def test_autotokenizer_457_gives_litebert_inputs(tok, saved):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(saved))
    for text in HF_TEXTS:
        assert model_inputs(hf(text)) == model_inputs(tok(text)), text
    for a, b in PAIRS:
        ref = model_inputs(hf(a, b))
        assert set(ref) == {"input_ids", "token_type_ids", "attention_mask"}
        assert ref == model_inputs(tok(a, b)), (a, b)


@pytest.mark.parametrize("text, ours, fast", [
    ("31,443,790,", "▁31 , 44 3 , 790 ,", "▁3 1,4 43 , 790 ,"),
    ("21,4,30", "▁21 , 4 , 30", "▁2 1,4 , 30"),
])
def test_the_fast_tokenizer_differs_on_digit_comma_runs_as_documented(tok, saved, text, ours, fast):
    """docs/tokenizer.md's examples: litebert equals HF's SentencePiece tokenizer (the official re-split of `▁31,`),
    HF's fast tokenizer from the saved tokenizer.json takes another path through the digits."""
    transformers = pytest.importorskip("transformers")
    assert tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"]) == ours.split()
    slow = transformers.AutoTokenizer.from_pretrained(str(saved), use_fast=False)
    assert slow(text)["input_ids"] == tok(text)["input_ids"]
    hf = transformers.AutoTokenizer.from_pretrained(str(saved))
    assert hf.convert_ids_to_tokens(hf(text, add_special_tokens=False)["input_ids"]) == fast.split()


TF5_SCRIPT = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import transformers
from transformers import AutoTokenizer
folder, cases, resave = sys.argv[1], json.loads(open(sys.argv[2]).read()), sys.argv[3]
tok = AutoTokenizer.from_pretrained(folder)
out = [{k: list(v) for k, v in tok(*case).items()} for case in cases]
tok.save_pretrained(resave)
print(json.dumps({"version": transformers.__version__, "results": out}))
"""


@pytest.mark.skipif(not os.environ.get("LITEBERT_TF5_PYTHON"),
                    reason="set LITEBERT_TF5_PYTHON to a python with transformers 5 installed")
def test_autotokenizer_5x_gives_litebert_inputs_and_its_save_loads_back(tok, saved, tmp_path):
    cases = [[t] for t in HF_TEXTS] + [list(p) for p in PAIRS]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "check.py").write_text(TF5_SCRIPT)
    resaved = tmp_path / "resaved"
    run = subprocess.run([os.environ["LITEBERT_TF5_PYTHON"], str(tmp_path / "check.py"), str(saved),
                          str(tmp_path / "cases.json"), str(resaved)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["version"].startswith("5.")
    for case, ref in zip(cases, report["results"]):
        assert ref == model_inputs(tok(*case)), case
    # transformers 5 saves tokenizer.json without spiece.model: litebert rebuilds the very same model from it
    assert not (resaved / "spiece.model").exists() and (resaved / "tokenizer.json").is_file()
    back = load_tokenizer(resaved)
    assert back.fingerprint() == tok.fingerprint()
    for case in cases:
        assert back(*case) == tok(*case)


# --------------------------------------------------------------------------------- tokenizer.json-only folders
def assert_same_encodings(a: AlbertTokenizer, b: AlbertTokenizer, texts: list[str]) -> None:
    for text in texts:
        assert a(text, return_offsets=True) == b(text, return_offsets=True), text
    assert a(texts, texts[::-1], return_offsets=True) == b(texts, texts[::-1], return_offsets=True)


def test_tokenizer_json_from_hf_converter_rebuilds_the_model(tok, albert_vocab, tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.AlbertTokenizerFast(vocab_file=str(albert_vocab / "spiece.model")).save_pretrained(str(tmp_path))
    (tmp_path / "spiece.model").unlink()
    loaded = load_tokenizer(tmp_path)
    # byte for byte the released spiece.model: pieces, scores (the converter's -100 on "▁2010,"-like pieces undone),
    # piece types and the nmt_nfkc charsmap
    assert loaded._model_bytes == (albert_vocab / "spiece.model").read_bytes()
    assert loaded.fingerprint() == tok.fingerprint()
    assert (loaded.do_lower_case, loaded.keep_accents) == (True, False)
    assert_same_encodings(loaded, tok, TEXTS + corpus_lines(300, seed=3))
    assert load_tokenizer(tmp_path / "tokenizer.json").fingerprint() == tok.fingerprint()  # the file itself


def test_litebert_tokenizer_json_alone_loads(tok, saved, tmp_path):
    # what transformers 5 leaves after re-saving a litebert folder: tokenizer.json + tokenizer_config.json
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((saved / name).read_bytes())
    loaded = AlbertTokenizer.from_pretrained(tmp_path)
    assert loaded.fingerprint() == tok.fingerprint()
    assert_same_encodings(loaded, tok, TEXTS)
    out = loaded.save_pretrained(tmp_path / "again")  # and saves a complete folder again
    assert (out / "spiece.model").read_bytes() == tok._model_bytes


def test_options_come_from_the_normalizer_without_a_config(albert_vocab, tmp_path):
    cased = AlbertTokenizer(albert_vocab / "spiece.model", do_lower_case=False, keep_accents=True)
    cased.save_pretrained(tmp_path)
    (tmp_path / "spiece.model").unlink()
    (tmp_path / "tokenizer_config.json").unlink()
    loaded = load_tokenizer(tmp_path)
    assert (loaded.do_lower_case, loaded.keep_accents) == (False, True)
    assert_same_encodings(loaded, cased, ["Café NAÏVE Zürich", "MiXeD CaSe", "Ångström façade"])
    assert loaded.tokenize("Café") != AlbertTokenizer(albert_vocab / "spiece.model").tokenize("Café")


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_bad_folders_and_files_are_one_line_errors(saved, tmp_path):
    with pytest.raises(TokenizerError, match=r"no spiece.model, vocab.txt or tokenizer.json in this folder") as e:
        load_tokenizer(tmp_path)
    assert "\n" not in str(e.value) and "save_pretrained" in str(e.value)
    data = json.loads((saved / "tokenizer.json").read_text())
    bpe = write_json(tmp_path / "bpe.json", {**data, "model": {"type": "BPE", "vocab": {}, "merges": []}})
    with pytest.raises(TokenizerError, match=r"bpe.json: 'model' is 'BPE', not a SentencePiece 'Unigram' model"):
        load_tokenizer(bpe)
    extra = {**data, "added_tokens": data["added_tokens"] + [{"id": 30000, "content": "<new>", "special": True}]}
    with pytest.raises(TokenizerError, match=r"added_tokens\[5\] \('<new>', id 30000\) is not a piece"):
        load_tokenizer(write_json(tmp_path / "extra.json", extra))
    no_vocab = {**data, "model": {**data["model"], "vocab": []}}
    with pytest.raises(TokenizerError, match=r"'model.vocab' must be a non-empty list"):
        model_proto_from_tokenizer_json(write_json(tmp_path / "empty.json", no_vocab))
    (tmp_path / "torn.json").write_text(json.dumps(data)[:1000])
    with pytest.raises(TokenizerError, match="torn.json"):
        load_tokenizer(tmp_path / "torn.json")
    no_mask = {**data, "model": {**data["model"], "vocab": [v if v[0] != "[MASK]" else ["[MASKX]", 0.0]
                                                             for v in data["model"]["vocab"]]},
               "added_tokens": [t for t in data["added_tokens"] if t["content"] != "[MASK]"]}
    with pytest.raises(TokenizerError, match=r"lacks the ALBERT special piece\(s\) \[MASK\]"):
        load_tokenizer(write_json(tmp_path / "nomask.json", no_mask))


def test_cli_reads_a_tokenizer_json_folder_and_refuses_an_empty_one(saved, tmp_path):
    folder = tmp_path / "tf5"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((saved / "tokenizer.json").read_bytes())
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "litebert.cli", "tokenizer", "encode", "--text", "Paris is [MASK]."]
    ok = subprocess.run(cmd + ["--tokenizer", str(folder)], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout) == {"input_ids": [2, 1162, 25, 4, 13, 9, 3]}
    split = subprocess.run(cmd + ["--tokenizer", str(folder), "--split-special-tokens"], capture_output=True,
                           text=True, env=env)
    assert json.loads(split.stdout)["input_ids"] == [2, 1162, 25, 636, 23265, 500, 9, 3]
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = subprocess.run(cmd + ["--tokenizer", str(empty)], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("litebert tokenizer: error: ") and bad.stderr.count("\n") == 1
