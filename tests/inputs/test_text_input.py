"""litebert.inputs.text: hand-made files (plain, gzip/xz/bz2 under misleading names, bad bytes at known offsets) with
the lines, offsets and error messages worked out by hand."""

import bz2
import csv
import gzip
import json
import lzma

import pytest

from litebert.errors import DataError
from litebert.inputs.text import expand_inputs, format_suffix, iter_jsonl, iter_lines, open_text, text_field

COMPRESSORS = {"gzip": gzip.compress, "xz": lzma.compress, "bz2": bz2.compress}


def rel(paths, root):
    return [str(p.relative_to(root)) for p in paths]


def test_expand_inputs_files_dirs_globs(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / ".git").mkdir()
    for name in ("d/b.txt", "d/a.txt", "d/sub/c.txt", "d/.hidden", "d/.git/config", "e.txt", "f.md"):
        (tmp_path / name).write_text("x\n")
    got = expand_inputs([tmp_path / "d", str(tmp_path / "*.txt"), tmp_path / "d" / "a.txt"])
    # each argument's files sorted, in argument order; hidden files and folders skipped; d/a.txt only once
    assert rel(got, tmp_path) == ["d/a.txt", "d/b.txt", "d/sub/c.txt", "e.txt"]
    assert rel(expand_inputs([str(tmp_path / "**" / "c.txt")]), tmp_path) == ["d/sub/c.txt"]
    assert rel(expand_inputs([str(tmp_path / "d*")]), tmp_path) == ["d/a.txt", "d/b.txt", "d/sub/c.txt"]
    with pytest.raises(DataError, match=r"missing\.txt' does not exist"):
        expand_inputs([tmp_path / "missing.txt"])
    with pytest.raises(DataError, match=r"\*\.none' matches no files"):
        expand_inputs([str(tmp_path / "*.none")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="matches no files"):
        expand_inputs([tmp_path / "empty"])


def test_format_suffix():
    assert format_suffix("a/b.JSONL.gz") == ".jsonl"
    assert format_suffix("train.tsv.xz.bz2") == ".tsv"
    assert format_suffix("corpus") == "" and format_suffix("x.gz") == ""


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_compression_by_magic_bytes_not_by_name(tmp_path, kind):
    # named .txt (and a plain file named .gz below): only the magic bytes decide
    f = tmp_path / "corpus.txt"
    f.write_bytes(COMPRESSORS[kind]("héllo\r\nworld\n\nlast".encode()))
    assert list(iter_lines(f)) == [(1, 0, "héllo"), (2, 8, "world"), (3, 14, ""), (4, 15, "last")]
    plain = tmp_path / "plain.gz"
    plain.write_bytes(b"not gzip\n")
    assert list(iter_lines(plain)) == [(1, 0, "not gzip")]


def test_invalid_utf8_offsets_plain_and_compressed(tmp_path):
    data = "héllo\n".encode() + b"ok \xff\xfe here\n"
    # 'h', 'é' (2 bytes), 'llo', '\n': line 2 starts at byte 7; 'ok ' puts the first bad byte at 10
    f = tmp_path / "bad.txt"
    f.write_bytes(data)
    with pytest.raises(DataError, match=r"^\S*bad\.txt:2: invalid UTF-8 at byte offset 10 \(byte 0xff\); .*"
                                        r"encoding_errors = 'replace'"):
        list(iter_lines(f))
    assert [t for _, _, t in iter_lines(f, "replace")] == ["héllo", "ok \ufffd\ufffd here"]
    for kind, compress in COMPRESSORS.items():
        g = tmp_path / f"bad.{kind}"
        g.write_bytes(compress(data))
        with pytest.raises(DataError, match=rf"bad\.{kind}:2: invalid UTF-8 at decompressed byte offset 10 "):
            list(iter_lines(g))
    with pytest.raises(DataError, match="encoding errors must be one of strict, replace"):
        list(iter_lines(f, "ignore"))


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_corrupt_and_truncated_streams(tmp_path, kind):
    data = "".join(f"line {i} {i * 7919 % 10007}\n" for i in range(20000)).encode()
    packed = COMPRESSORS[kind](data)
    cut = tmp_path / "cut"
    cut.write_bytes(packed[:len(packed) // 2])
    with pytest.raises(DataError, match=r"cut: corrupt or truncated (gzip|xz|bz2) file "
                                        r"\(cannot decompress past byte \d+ of its content"):
        list(iter_lines(cut))
    damaged = bytearray(packed)
    damaged[len(packed) // 2:len(packed) // 2 + 64] = bytes(64)  # zeros over the middle of the stream
    bad = tmp_path / "damaged"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=r"damaged: corrupt or truncated (gzip|xz|bz2) file"):
        list(iter_lines(bad))


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.txt: no such file"):
        list(iter_lines(tmp_path / "nope.txt"))
    with pytest.raises(DataError, match=r"nope\.csv: no such file"):
        open_text(tmp_path / "nope.csv")


def test_bom_is_dropped_but_counted_in_offsets(tmp_path):
    f = tmp_path / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbfname\nx \xff\n")
    assert list(iter_lines(f, "replace")) == [(1, 0, "name"), (2, 8, "x \ufffd")]
    with pytest.raises(DataError, match="bom.txt:2: invalid UTF-8 at byte offset 10"):
        list(iter_lines(f))


def test_csv_through_open_text(tmp_path):
    f = tmp_path / "t.csv"
    # a UTF-8 BOM (as spreadsheet programs write), CRLF line ends, a quoted field holding a newline
    f.write_bytes(b'\xef\xbb\xbftext,label\r\n"two\nlines",1\r\ncaf\xc3\xa9,0\r\n')
    with open_text(f) as s:
        rows = list(csv.DictReader(s))
    assert rows == [{"text": "two\nlines", "label": "1"}, {"text": "café", "label": "0"}]
    latin1 = tmp_path / "latin1.tsv"
    latin1.write_bytes(b"text\tlabel\ngood\t1\ncaf\xe9\t0\n")  # 'é' in latin-1; line 3 starts at byte 18
    with pytest.raises(DataError, match=r"latin1\.tsv:3: invalid UTF-8 at byte offset 21 \(byte 0xe9\)"):
        with open_text(latin1) as s:
            list(csv.reader(s, delimiter="\t"))
    with open_text(latin1, "replace") as s:
        assert list(csv.reader(s, delimiter="\t"))[2] == ["caf\ufffd", "0"]


def test_open_text_read_and_json(tmp_path):
    f = tmp_path / "doc.json.gz"
    f.write_bytes(gzip.compress(b'{"a": [1,\n 2]}\n'))
    with open_text(f) as s:
        assert json.load(s) == {"a": [1, 2]}
    with open_text(f) as s:
        assert s.read(3) == '{"a' and s.readline() == '": [1,\n' and s.read() == " 2]}\n" and s.read() == ""


def test_jsonl_records_and_errors(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "one"}\n\n  \n{"text": "two", "id": 2}\n')
    assert list(iter_jsonl(f)) == [(1, {"text": "one"}), (4, {"text": "two", "id": 2})]
    f.write_text('{"text": "ok"}\n{"text": \n')
    with pytest.raises(DataError, match=r"c\.jsonl:2: not valid JSON \(Expecting value at column 10\)"):
        list(iter_jsonl(f))
    f.write_text('{"text": "ok"}\n["text"]\n')
    with pytest.raises(DataError, match=r"c\.jsonl:2: expected a JSON object, got array"):
        list(iter_jsonl(f))


def test_text_field_errors_name_file_line_and_field():
    assert text_field({"body": "x"}, "body", "f.jsonl", 3) == "x"
    with pytest.raises(DataError, match=r"^f\.jsonl:3: no 'text' field \(the record has \['body', 'id'\]\); "
                                        r"choose the field holding the text with text_field$"):
        text_field({"id": 1, "body": "x"}, "text", "f.jsonl", 3)
    with pytest.raises(DataError, match=r"^f\.jsonl:7: field 'text' is a JSON number, expected a string"):
        text_field({"text": 3}, "text", "f.jsonl", 7)
