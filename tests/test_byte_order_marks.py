"""Every reader of a user's text file reads a UTF-8 byte order mark as Python's ``utf-8-sig`` does: the mark is not
part of the first token, key, column or line (issue 57, wp-06: a vocab.txt that starts with one was refused as
"lacks [PAD]", which is visibly on its line 1). The property, for each reader (vocab.txt, JSON documents such as
config.json / finetune.json / adapter_config.json, metrics.jsonl, text corpora, JSON lines, CSV and TSV): a file and
the same file after a byte order mark read alike, and a valid file reads as Python's ``json`` / ``csv`` / ``str``
read it after decoding ``utf-8-sig``; what is refused is a one-line error naming the file."""

import csv
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import wordpiece_vocab
from helpers.hostile import BOM, damaged, json_text, json_values, outcome, words
from litebert.config import AlbertConfig
from litebert.engine.metrics_log import read_jsonl_records
from litebert.errors import ConfigError, TokenizerError
from litebert.files import decode_utf8, read_json
from litebert.inputs.text import iter_lines
from litebert.tasks.readers import read_table
from litebert.tokenizer.wordpiece import WordPieceTokenizer, read_vocab

# tokens as a vocab.txt holds them: no line breaks, unique
tokens = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\r\n\ufeff"),
                          min_size=1, max_size=5), min_size=1, max_size=8, unique=True)


def reference(data: bytes, parse):
    """What ``parse`` makes of ``data`` decoded as ``utf-8-sig``; None where it is not UTF-8 or ``parse`` refuses."""
    try:
        return parse(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return None


def write(tmp_path_factory, name: str, data: bytes):
    path = tmp_path_factory.mktemp("bom") / name
    path.write_bytes(data)
    return path


@given(text=st.text(max_size=20), data=st.data())
def test_decode_utf8_is_utf_8_sig(text, data):
    raw = data.draw(damaged((BOM if data.draw(st.booleans()) else b"") + text.encode("utf-8", "surrogatepass")))
    assert outcome(lambda: decode_utf8(raw, "f.txt", ConfigError), "f.txt") == reference(raw, str)


@given(toks=tokens, bom=st.booleans())
def test_a_vocab_txt_reads_its_tokens_with_or_without_a_bom(tmp_path_factory, toks, bom):
    path = write(tmp_path_factory, "vocab.txt", (BOM if bom else b"") + "".join(t + "\n" for t in toks).encode())
    assert read_vocab(path) == toks


def test_a_wordpiece_vocabulary_saved_with_a_bom_loads(tmp_path):
    """wp-06 by hand: [PAD] on line 1, after the mark; the ids are those of the file without it."""
    vocab = wordpiece_vocab()
    assert vocab[0] == "[PAD]"
    (tmp_path / "vocab.txt").write_bytes(BOM + "".join(t + "\n" for t in vocab).encode())
    tok = WordPieceTokenizer(tmp_path / "vocab.txt")
    assert tok.convert_tokens_to_ids(["[PAD]"]) == [0] and tok.vocab_size == len(vocab)


@given(value=json_values(), bom=st.booleans(), data=st.data())
def test_a_json_document_reads_as_json_loads_reads_it(tmp_path_factory, value, bom, data):
    raw = data.draw(damaged((BOM if bom else b"") + json_text(value).encode("utf-8", "surrogatepass")))
    path = write(tmp_path_factory, "finetune.json", raw)
    assert outcome(lambda: read_json(path, ConfigError, expect=object), path) == reference(raw, json.loads)


def test_a_config_json_saved_with_a_bom_loads(tmp_path):
    config = AlbertConfig.from_preset("tiny")
    config.to_json(tmp_path / "plain.json")
    (tmp_path / "config.json").write_bytes(BOM + (tmp_path / "plain.json").read_bytes())
    assert AlbertConfig.from_json(tmp_path / "config.json") == AlbertConfig.from_json(tmp_path / "plain.json")


@given(steps=st.lists(st.integers(0, 10**6), min_size=1, max_size=4), bom=st.booleans())
def test_a_metrics_jsonl_reads_its_records_with_or_without_a_bom(tmp_path_factory, steps, bom):
    lines = [json.dumps({"step": s, "split": "train", "loss": 1.0}) for s in steps]
    path = write(tmp_path_factory, "metrics.jsonl", (BOM if bom else b"") + "".join(x + "\n" for x in lines).encode())
    assert [(line, r["step"]) for line, r in read_jsonl_records(path)] == [(x, s) for x, s in zip(lines, steps)]


@given(lines=st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\n\r"),
                              max_size=10), min_size=1, max_size=4), bom=st.booleans())
def test_text_lines_read_with_or_without_a_bom(tmp_path_factory, lines, bom):
    path = write(tmp_path_factory, "corpus.txt", (BOM if bom else b"") + "".join(x + "\n" for x in lines).encode())
    got = outcome(lambda: [t for _, _, t in iter_lines(path)], path)
    assert got is None or got == (lines if bom or not lines[0].startswith("\ufeff") else [lines[0][1:]] + lines[1:])


@given(fmt=st.sampled_from(("csv", "tsv", "jsonl")), rows=st.lists(st.tuples(words.filter(str.strip), words),
                                                                    min_size=1, max_size=3))
def test_a_table_whose_first_column_is_text_reads_with_a_bom(tmp_path_factory, fmt, rows):
    """The mark would otherwise stick to the first column's name ("\\ufefftext"): no column 'text'."""
    rows = [(a.strip(), b.replace("\r", "").replace("\n", "").replace("\x00", "") or "x") for a, b in rows]
    if fmt == "jsonl":
        body = "".join(json.dumps({"text": b, "label": a}) + "\n" for a, b in rows)
    else:
        out = io.StringIO(newline="")
        csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n").writerows(
            [("text", "label")] + [(b, a) for a, b in rows])
        body = out.getvalue()
    plain = write(tmp_path_factory, f"plain.{fmt}", body.encode())
    marked = write(tmp_path_factory, f"marked.{fmt}", BOM + body.encode())
    first = outcome(lambda: [(e.text_a, e.label) for e in read_table(plain, "text", label="label")], plain.name)
    assert outcome(lambda: [(e.text_a, e.label) for e in read_table(marked, "text", label="label")],
                   marked.name) == first


def test_a_vocab_that_is_not_utf8_names_file_line_and_offset(tmp_path):
    (tmp_path / "vocab.txt").write_bytes(BOM + b"[PAD]\n\xff\n")
    with pytest.raises(TokenizerError, match=r"vocab.txt:2: not UTF-8 text \(byte offset 9\); a vocab.txt holds"):
        read_vocab(tmp_path / "vocab.txt")
