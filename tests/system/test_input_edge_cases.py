"""Bad input at the edges of the readers and tokenizer folders, each a one-line `LitebertError` (exit 2 at the
command line) or a correct read, never a traceback from deep inside SentencePiece or the JSON walkers:

* JSON escapes that decode to a lone surrogate (``"caf\\ud800"``: valid JSON, not Unicode text) in every JSON reader;
* a ``tokenizer.json`` whose fields have the wrong JSON kind (what a hand edit or another library's file gives);
* ``split_special_tokens`` in ``tokenizer_config.json``, read as HF transformers (4.57, the oracle) reads it.
"""

from __future__ import annotations

import gzip
import json

import pytest

from litebert.cli import main
from litebert.data.documents import read_documents
from litebert.data.store import TokenStore
from litebert.errors import DataError, TokenizerError
from litebert.inference.predict import iter_texts
from litebert.inputs import text as text_input
from litebert.tasks import readers as R
from litebert.tokenizer import AlbertTokenizer, corpus_lines

LONE = r"caf\ud800 x"  # the six characters \ud800 in the file: JSON decodes them to a lone surrogate


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


# ------------------------------------------------------------------------------------ lone surrogates in JSON
def test_data_prepare_names_the_file_line_and_field_of_a_lone_surrogate(albert_vocab, tmp_path, capsys):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"text": "fine"}\n{"text": "' + LONE + '"}\n', encoding="utf-8")
    argv = ["data", "prepare", "--input", str(path), "--tokenizer", str(albert_vocab), "--no-progress"]
    assert main(argv + ["--out", str(tmp_path / "strict")]) == 2
    err = one_line_error(capsys)
    assert "corpus.jsonl:2: field text holds a lone surrogate \\ud800" in err
    assert "--encoding-errors replace to read it as U+FFFD" in err
    # replace: the surrogate is read as U+FFFD, as a bad UTF-8 byte is
    assert main(argv + ["--out", str(tmp_path / "replaced"), "--encoding-errors", "replace"]) == 0
    capsys.readouterr()
    tok = AlbertTokenizer.from_pretrained(albert_vocab)
    store = TokenStore(tmp_path / "replaced", tokenizer=tok)
    s0, s1 = store.document_sentences(1)
    ids, _ = store.sentence_tokens(s0, s1)
    assert ids.tolist() == tok.encode_ids("caf\ufffd x")


def test_every_json_reader_refuses_or_replaces_a_lone_surrogate(tmp_path):
    jl = tmp_path / "d.jsonl.gz"  # compressed: the check is on the decoded line, wherever it came from
    jl.write_bytes(gzip.compress(('{"text": "ok", "label": "pos"}\n{"text": "' + LONE + '", "label": "pos"}\n')
                                 .encode()))
    mc = tmp_path / "mc.jsonl"
    mc.write_text('{"question": "q?", "choices": ["a", "b\\udfff"], "label": 1}\n')
    squad = tmp_path / "squad.json"  # a whole JSON document: the error names the field's path
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "The cat sat.", "qas": [
        {"id": "1", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4}]}]}]}]})
        .replace("Who sat?", "Who\\uDBFF sat?"))
    strict = {
        "text_input": (lambda p, e: list(text_input.iter_jsonl(p, e)), jl, r"d.jsonl.gz:2: field text"),
        "data": (lambda p, e: list(read_documents(p, "jsonl", e)), jl, r"d.jsonl.gz:2: field text"),
        "tokenizer train": (lambda p, e: list(corpus_lines([p], encoding_errors=e)), jl, r"d.jsonl.gz:2: field text"),
        "table": (lambda p, e: R.read_table(p, encoding_errors=e), jl, r"d.jsonl.gz:2: field text"),
        "embed": (lambda p, e: list(iter_texts(p, encoding_errors=e)), jl, r"d.jsonl.gz:2: field text"),
        "multiple choice": (lambda p, e: R.read_multiple_choice(p, encoding_errors=e), mc,
                            r"mc.jsonl:1: field choices\[1\] holds a lone surrogate \\udfff"),
        "squad": (lambda p, e: R.read_squad(p, encoding_errors=e), squad,
                  r"squad.json: field data\[0\].paragraphs\[0\].qas\[0\].question holds a lone surrogate \\udbff"),
    }
    for name, (read, path, where) in strict.items():
        with pytest.raises(DataError, match=where + r".*encoding_errors = 'replace'") as e:
            read(path, "strict")
        assert "\n" not in str(e.value), name
    assert list(text_input.iter_jsonl(jl, "replace"))[1] == (2, {"text": "caf\ufffd x", "label": "pos"})
    assert [d.parts for d in read_documents(jl, "jsonl", "replace")] == [["ok"], ["caf\ufffd x"]]
    assert list(corpus_lines([jl], encoding_errors="replace")) == ["ok", "caf\ufffd x"]
    assert [x.text_a for x in R.read_table(jl, encoding_errors="replace")] == ["ok", "caf\ufffd x"]
    assert list(iter_texts(jl, encoding_errors="replace")) == ["ok", "caf\ufffd x"]
    assert R.read_multiple_choice(mc, encoding_errors="replace")[0].choices == ["a", "b\ufffd"]
    examples, _ = R.read_squad(squad, encoding_errors="replace")
    assert examples[0].question == "Who\ufffd sat?"


def test_surrogate_pairs_escaped_backslashes_and_keys(tmp_path):
    path = tmp_path / "d.jsonl"
    lines = [r'{"text": "smile \ud83d\ude00 \uD83D\uDE00"}',  # a pair (either case) is one character: no error
             r'{"text": "a \\ud800 b"}',  # an escaped backslash then "ud800": plain text
             r'{"text": "ok", "la\udc00bel": 1}',  # a key
             r'{"text": "ok", "deep": [[{"x": ["\ud800\ud800\udc00"]}]]}']  # a lone high before a pair
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"d.jsonl:3: the key 'la\\udc00bel' holds a lone surrogate \\udc00"):
        list(text_input.iter_jsonl(path))
    rows = [obj for _, obj in text_input.iter_jsonl(path, "replace")]
    assert rows[0] == {"text": "smile \U0001F600 \U0001F600"} and rows[1] == {"text": "a \\ud800 b"}
    assert rows[2] == {"text": "ok", "la\ufffdbel": 1}
    assert rows[3] == {"text": "ok", "deep": [[{"x": ["\ufffd\U00010000"]}]]}
    path.write_text(lines[3] + "\n")
    with pytest.raises(DataError, match=r"d.jsonl:1: field deep\[0\]\[0\].x\[0\] holds a lone surrogate \\ud800"):
        list(text_input.iter_jsonl(path))


# ------------------------------------------------------------------------------------ malformed tokenizer.json
@pytest.fixture(scope="module")
def tokenizer_json(albert_vocab, tmp_path_factory) -> dict:
    folder = AlbertTokenizer.from_pretrained(albert_vocab).save_pretrained(tmp_path_factory.mktemp("tok"))
    return json.loads((folder / "tokenizer.json").read_text())


def _with(data: dict, field: str, value) -> dict:
    """``data`` with ``field`` (``a.b.3``: keys and list indices) set to ``value``, the rest shared."""
    *parents, last = field.split(".")
    out = dict(data)
    node = out
    for key in parents:
        child = node[int(key)] if isinstance(node, list) else node[key]
        child = list(child) if isinstance(child, list) else dict(child)
        node[int(key) if isinstance(node, list) else key] = child
        node = child
    node[int(last) if isinstance(node, list) else last] = value
    return out


# (field set, value, what the message says after "tokenizer.json: ")
MALFORMED = [
    ("added_tokens", ["<pad>", "<unk>"], "added_tokens[0] is a string, expected an object"),
    ("added_tokens", {"<pad>": 0}, "added_tokens is an object, expected an array"),
    ("added_tokens.0.special", "yes", "added_tokens[0].special is a string, expected a boolean"),
    ("pre_tokenizer", [{"type": "Metaspace"}], "pre_tokenizer is an array, expected an object"),
    ("pre_tokenizer.pretokenizers", ["WhitespaceSplit", "Metaspace"],
     "pre_tokenizer.pretokenizers[0] is a string, expected an object"),
    ("normalizer", "nmt_nfkc", "normalizer is a string, expected an object"),
    ("normalizer.normalizers", [[{"type": "Lowercase"}]], "normalizer.normalizers[0] is an array, expected an object"),
    ("normalizer.normalizers", {"type": "Lowercase"}, "normalizer.normalizers is an object, expected an array"),
    ("model", ["Unigram"], "model is an array, expected an object"),
    ("model", "Unigram", "model is a string, expected an object"),
    ("model.vocab.5", "▁the", 'model.vocab[5] is "▁the", expected a [piece, score] pair'),
    ("model.vocab.5", ["▁the", "-3.5"], 'model.vocab[5] is ["▁the", "-3.5"], expected a [piece, score] pair'),
    ("model.vocab.5", ["▁the"], 'model.vocab[5] is ["▁the"], expected a [piece, score] pair'),
    ("model.vocab.5", [7, -3.5], "model.vocab[5] is [7, -3.5], expected a [piece, score] pair"),
    ("model.vocab.6", ["<unk>", -3.5], 'model.vocab[6] repeats the piece "<unk>" of model.vocab[1]'),
    ("model.vocab.6", ["ab\ud800", -3.5], 'model.vocab[6] is the piece "ab\\ud800", which holds a lone surrogate'),
    ("model.byte_fallback", "no", "model.byte_fallback is a string, expected a boolean"),
]


@pytest.mark.parametrize("field,value,message", MALFORMED, ids=[f"{f}={json.dumps(v)[:20]}" for f, v, _ in MALFORMED])
def test_malformed_tokenizer_json_is_a_one_line_error_naming_the_field(tokenizer_json, field, value, message,
                                                                      tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(_with(tokenizer_json, field, value)))
    with pytest.raises(TokenizerError) as e:
        AlbertTokenizer.from_pretrained(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'tokenizer.json'}: {message}") and "\n" not in str(e.value)


def test_malformed_tokenizer_json_at_the_command_line(tokenizer_json, tmp_path, capsys):
    for field, value, message in MALFORMED[::3]:
        (tmp_path / "tokenizer.json").write_text(json.dumps(_with(tokenizer_json, field, value)))
        assert main(["tokenizer", "encode", "--tokenizer", str(tmp_path), "--text", "hi"]) == 2
        err = one_line_error(capsys)
        assert err.startswith("litebert tokenizer: error: ") and f"tokenizer.json: {message}" in err, err


def test_the_well_formed_variants_still_load(tokenizer_json, albert_vocab, tmp_path):
    """null normalizer / pre-tokenizer / added tokens are what HF writes for "none"; they load as before."""
    tok = AlbertTokenizer.from_pretrained(albert_vocab)
    for field in ("normalizer", "pre_tokenizer", "added_tokens"):
        (tmp_path / "tokenizer.json").write_text(json.dumps(_with(tokenizer_json, field, None)))
        assert AlbertTokenizer.from_pretrained(tmp_path).vocab_size == tok.vocab_size


# ------------------------------------------------------------------------------------ split_special_tokens
TEXTS = ["Paris is [MASK].", "[CLS] a [SEP] b [MASK][MASK]", "x <pad> <unk> y", "no special tokens, 2010, here"]


def test_split_special_tokens_in_the_config_is_read_as_hf_reads_it(albert_vocab, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "hf"  # written by HF itself: spiece.model + tokenizer_config.json saying true
    transformers.AlbertTokenizer(vocab_file=str(albert_vocab / "spiece.model"),
                                 split_special_tokens=True).save_pretrained(str(folder))
    assert json.loads((folder / "tokenizer_config.json").read_text())["split_special_tokens"] is True
    hf = transformers.AlbertTokenizer.from_pretrained(str(folder))
    ours = AlbertTokenizer.from_pretrained(folder)
    for text in TEXTS:
        assert ours(text)["input_ids"] == hf(text)["input_ids"], text
        assert ours(text, split_special_tokens=False)["input_ids"] == hf(text, split_special_tokens=False)["input_ids"]
    assert 4 not in ours.encode("Paris is [MASK].")
    # an explicit argument wins over the file, as in HF
    assert AlbertTokenizer.from_pretrained(folder, split_special_tokens=False).encode("[MASK]") == [2, 4, 3]
    # the command line without the flag follows the folder; --no-split-special-tokens overrides it
    for flags, split in (([], True), (["--split-special-tokens"], True), (["--no-split-special-tokens"], False)):
        assert main(["tokenizer", "encode", "--tokenizer", str(folder), "--text", TEXTS[0]] + flags) == 0
        assert json.loads(capsys.readouterr().out)["input_ids"] == hf(TEXTS[0], split_special_tokens=split)[
            "input_ids"], flags
    # saved and read back (also as the tokenizer.json-only folder transformers 5 leaves), by litebert and by HF
    again = ours.save_pretrained(tmp_path / "again")
    assert json.loads((again / "tokenizer_config.json").read_text())["split_special_tokens"] is True
    assert transformers.AlbertTokenizer.from_pretrained(str(again))(TEXTS[0])["input_ids"] == hf(TEXTS[0])["input_ids"]
    (again / "spiece.model").unlink()
    assert AlbertTokenizer.from_pretrained(again).encode(TEXTS[0]) == hf(TEXTS[0])["input_ids"]


def test_a_non_boolean_split_special_tokens_names_the_file_and_field(albert_vocab, tmp_path, capsys):
    folder = AlbertTokenizer.from_pretrained(albert_vocab).save_pretrained(tmp_path)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "split_special_tokens": "true"}))
    with pytest.raises(TokenizerError, match=r"tokenizer_config.json: 'split_special_tokens' must be true or false, "
                                             r"got 'true'"):
        AlbertTokenizer.from_pretrained(folder)
    assert main(["tokenizer", "encode", "--tokenizer", str(folder), "--text", "hi"]) == 2
    assert "tokenizer_config.json: 'split_special_tokens'" in one_line_error(capsys)
