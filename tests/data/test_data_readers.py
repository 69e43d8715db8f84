"""Corpus readers and the sentence splitter: hand-written inputs with hand-derived expected documents. (Opening,
decompressing and decoding files is litebert.inputs.text's, tested in test_text_input.py.)"""

import bz2
import gzip
import json
import lzma

import pytest

from litebert.data.documents import read_documents
from litebert.data.splitter import split_sentences
from litebert.errors import DataError


@pytest.mark.parametrize("text, expected", [
    ("Dr. Smith arrived at 3.30 p.m. on Monday. He left! Did he? Yes.",
     ["Dr. Smith arrived at 3.30 p.m. on Monday.", "He left!", "Did he?", "Yes."]),
    ('J. R. R. Tolkien wrote it. "Really?" she asked. The U.S. Army came.',
     ["J. R. R. Tolkien wrote it.", '"Really?" she asked.', "The U.S. Army came."]),
    ("It costs $3.50 (e.g. a coffee). Wait... What?! 2020 was odd.",
     ["It costs $3.50 (e.g. a coffee).", "Wait...", "What?!", "2020 was odd."]),
    ("He said (quietly.) Then left.", ["He said (quietly.)", "Then left."]),
    ("no capital after. the dot stays", ["no capital after. the dot stays"]),
    ("  spaced\n  out   text. Next  ", ["spaced out text.", "Next"]),
    ("第一句。第二句！", ["第一句。", "第二句！"]),
    ("", []),
])
def test_splitter_hand_cases(text, expected):
    assert split_sentences(text) == expected


def test_official_format_documents(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("s1 a\ns1 b\n\n\n  \ns2 a\n\ns3 a\n")
    docs = list(read_documents(f))
    assert [d.parts for d in docs] == [["s1 a", "s1 b"], ["s2 a"], ["s3 a"]]
    assert not any(d.split for d in docs)


def test_paragraph_and_file_formats(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("First line of para one.\nStill para one. Second sentence.\n\nPara two here.\n")
    paras = list(read_documents(f, "paragraphs"))
    assert [d.parts for d in paras] == [["First line of para one. Still para one. Second sentence."],
                                        ["Para two here."]]
    assert all(d.split for d in paras)
    whole = list(read_documents(f, "files"))
    assert len(whole) == 1 and whole[0].parts == [p.parts[0] for p in paras]


def test_jsonl_and_errors(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"text": "One. Two.\nThree.", "id": 1}) + "\n\n" + json.dumps({"body": "x"}) + "\n")
    it = read_documents(f)  # auto -> jsonl by suffix
    assert next(it).parts == ["One. Two.", "Three."]
    with pytest.raises(DataError, match=r"c\.jsonl:3: no 'text' field .*text_field"):
        next(it)
    g = tmp_path / "body.jsonl"
    g.write_text(json.dumps({"body": "x. Y"}) + "\n")
    assert [d.parts for d in read_documents(g, "jsonl", text_field="body")] == [["x. Y"]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": \n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not valid JSON"):
        list(read_documents(bad))
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"text": 3}\n')
    with pytest.raises(DataError, match=r"wrong\.jsonl:1: field 'text' is a JSON number, expected a string"):
        list(read_documents(wrong))


@pytest.mark.parametrize("opener", [gzip.open, lzma.open, bz2.open])
def test_compressed_inputs_are_transparent(tmp_path, opener):
    f = tmp_path / "corpus.bin"  # no telling suffix: detected by magic bytes
    with opener(f, "wt", encoding="utf-8") as w:
        w.write("a b\nc\n\nd\n")
    assert [d.parts for d in read_documents(f)] == [["a b", "c"], ["d"]]


def test_invalid_utf8_in_a_document(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes("héllo\n\n".encode() + b"ok \xff here\n")  # 'héllo' is 6 bytes: line 3 starts at 8, 0xff at 11
    with pytest.raises(DataError, match=r"bad\.txt:3: invalid UTF-8 at byte offset 11 \(byte 0xff\)"):
        list(read_documents(f))
    assert [d.parts for d in read_documents(f, encoding_errors="replace")] == [["héllo"], ["ok \ufffd here"]]


def test_empty_file_yields_nothing(tmp_path):
    f = tmp_path / "empty.txt"
    f.write_text("")
    g = tmp_path / "blank.txt"
    g.write_text("\n \n\n")
    assert list(read_documents(f)) == [] and list(read_documents(g)) == []
