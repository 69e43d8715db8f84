"""Memory has a bound where input has none: a line is read with at most ``max_line_bytes`` held and a longer one is
refused in one line naming the file and line (plain and compressed alike), and a document longer than
``max_document_chars`` is cut into consecutive documents, in every format, with one warning. The limits are small
here so that the inputs can be; two hostile shapes run in a child process under an address-space limit, where peak
memory is measured against the input's size."""

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import zstandard

from helpers import IntTokenizer
from helpers import store_documents as documents
from litebert.cli import main as cli_main
from litebert.data.documents import read_documents
from litebert.data.store import prepare_store
from litebert.errors import ArgumentError, DataError
from litebert.inputs.text import iter_lines, open_text

COMPRESS = {".txt": lambda b: b, ".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress,
            ".zst": lambda b: zstandard.ZstdCompressor().compress(b)}


def write(path, data: bytes):
    path.write_bytes(COMPRESS.get(path.suffix, COMPRESS[".txt"])(data))
    return path




# ------------------------------------------------------------------------------------------------------ lines
@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_line_over_the_limit_is_refused_with_its_file_and_line(tmp_path, suffix):
    f = write(tmp_path / f"corpus{suffix}", b"1 2\n3 4\n" + b"5 " * 600 + b"\n6\n")
    with pytest.raises(DataError) as e:
        list(iter_lines(f, max_line_bytes=1000))
    message = str(e.value)
    assert f"corpus{suffix}:3: a line longer than 1000 bytes" in message
    assert "byte offset 8" in message and "max_line_bytes" in message and "\n" not in message
    assert [t for _, _, t in iter_lines(f, max_line_bytes=1200)][-1] == "6"  # under a higher limit it reads


def test_the_line_limit_counts_a_line_without_its_ending(tmp_path):
    f = write(tmp_path / "a.txt", b"x" * 10 + b"\n" + b"y" * 10 + b"\r\n" + b"z" * 10)
    assert [t for _, _, t in iter_lines(f, max_line_bytes=11)] == ["x" * 10, "y" * 10, "z" * 10]
    with pytest.raises(DataError, match=r"a\.txt:2: a line longer than 10 bytes"):  # its \r counts, its \n not
        list(iter_lines(f, max_line_bytes=10))
    g = write(tmp_path / "b.txt", b"z" * 11)  # the last line, without an ending
    with pytest.raises(DataError, match=r"b\.txt:1: a line longer than 10 bytes"):
        list(iter_lines(g, max_line_bytes=10))


def test_the_line_limit_holds_for_jsonl_csv_and_prepare(tmp_path):
    f = write(tmp_path / "a.jsonl.gz", json.dumps({"text": "1 2"}).encode() + b"\n"
              + json.dumps({"text": "3 " * 500}).encode() + b"\n")
    with pytest.raises(DataError, match=r"a\.jsonl\.gz:2: a line longer than 100 bytes"):
        list(read_documents(f, max_line_bytes=100))
    with pytest.raises(DataError, match=r"a\.jsonl\.gz:2: a line longer than 100 bytes"):
        prepare_store([f], IntTokenizer(), tmp_path / "s", max_line_bytes=100, progress=False)
    assert not (tmp_path / "s").exists()
    with open_text(f, max_line_bytes=100) as t, pytest.raises(DataError, match=r"a\.jsonl\.gz:2"):
        t.read()


def test_the_command_line_names_the_flag(tmp_path, albert_vocab, capsys):
    f = write(tmp_path / "corpus.zst", b"hello world\n" * 3 + b"a" * 5000 + b"\n")
    code = cli_main(["data", "prepare", "--input", str(f), "--tokenizer", str(albert_vocab / "spiece.model"),
                     "--out", str(tmp_path / "s"), "--no-progress", "--max-line-bytes", "4096"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "corpus.zst:4: a line longer than 4096 bytes" in err and "raise --max-line-bytes" in err


def test_limits_below_one_are_refused_before_anything_is_written(tmp_path):
    f = write(tmp_path / "a.txt", b"1 2\n")
    for bad, error, message in (({"max_line_bytes": 0}, DataError, "expected an integer >= 1"),
                                ({"max_document_chars": 0}, DataError, "expected an integer >= 1"),
                                ({"max_document_chars": None}, ArgumentError, "max_document_chars = None")):
        with pytest.raises(error, match=message):
            prepare_store([f], IntTokenizer(), tmp_path / "s", progress=False, **bad)
        assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s.tmp-*"))


# -------------------------------------------------------------------------------------------------- documents
def test_a_corpus_without_blank_lines_becomes_consecutive_documents(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(10, 60)]  # 50 sentences of 5 characters (6 with the line's end)
    f = write(tmp_path / "a.txt.gz", "\n".join(lines).encode() + b"\n")
    with pytest.warns(UserWarning) as caught:
        store = prepare_store([f], IntTokenizer(), tmp_path / "s", max_document_chars=60, progress=False)
    docs = documents(store)
    assert [len(d) for d in docs] == [10] * 5  # 10 sentences of 6 characters: 60, the limit
    assert [s for d in docs for s in d] == [[int(w) for w in line.split()] for line in lines]  # nothing lost
    cuts = [w for w in caught if w.category is UserWarning]
    assert len(cuts) == 1
    message = str(cuts[0].message)
    assert "4 cut(s), the first at" in message and "a.txt.gz:11)" in message and "--max-document-chars" in message


def test_documents_under_the_limit_are_unchanged_and_nothing_warns(tmp_path):
    f = write(tmp_path / "a.txt", b"1 2\n3 4\n\n5 6\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = prepare_store([f], IntTokenizer(), tmp_path / "s", max_document_chars=8, progress=False)
    assert documents(store) == [[[1, 2], [3, 4]], [[5, 6]]]


@pytest.mark.parametrize("fmt", ["official", "paragraphs", "files", "jsonl"])
def test_every_format_cuts_a_long_document(tmp_path, fmt):
    words = [f"{i} {i + 1}" for i in range(10, 40)]
    if fmt == "jsonl":
        f = write(tmp_path / "a.jsonl", json.dumps({"text": "\n".join(words)}).encode() + b"\n")
    else:
        f = write(tmp_path / "a.txt", ("\n\n" if fmt == "files" else "\n").join(words).encode() + b"\n")
    docs = list(read_documents(f, fmt, max_document_chars=30))
    assert len(docs) == 6 and all(sum(len(p) + 1 for p in d.parts) <= 30 for d in docs)
    assert docs[0].cut_at is None and all(d.cut_at for d in docs[1:])
    assert " ".join(p for d in docs for p in d.parts) == " ".join(words)  # in order, nothing lost


def test_a_table_row_is_cut_like_a_json_line(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    f = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["1 2", "\n".join(f"{i} {i}" for i in range(10, 20))]}), f)
    docs = list(read_documents(f, max_document_chars=18))
    assert [d.parts for d in docs] == [["1 2"], ["10 10", "11 11", "12 12"], ["13 13", "14 14", "15 15"],
                                       ["16 16", "17 17", "18 18"], ["19 19"]]
    assert [d.cut_at for d in docs] == [None, None] + [f"{f}: row 1"] * 3


def test_a_line_longer_than_the_document_limit_is_a_document_alone(tmp_path):
    f = write(tmp_path / "a.txt", b"1\n" + b"2 " * 20 + b"\n3\n")
    assert [len(d.parts) for d in read_documents(f, max_document_chars=10)] == [1, 1, 1]


# ------------------------------------------------------------------------------------------- peak memory
_CHILD = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB of address space: the machine stays safe
    from litebert.data.documents import read_documents
    from litebert.errors import ArgumentError, DataError
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    docs = 0
    try:
        for doc in read_documents(sys.argv[1], "official", max_line_bytes=1 << 20, max_document_chars=1 << 16):
            docs += 1
        outcome = f"{docs} documents"
    except DataError as e:
        outcome = str(e)
    except MemoryError:
        outcome = "MemoryError"
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10, outcome)  # MiB, what happened
""")


def _peak_growth(path) -> tuple[int, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    growth, outcome = out.stdout.split(" ", 1)
    return int(growth), outcome.strip()


def test_memory_stays_flat_on_a_corpus_without_blank_lines(tmp_path):
    f = tmp_path / "one-document.txt.zst"  # 96 MB of short sentences and not one blank line: 1 document before
    with open(f, "wb") as raw, zstandard.ZstdCompressor(level=1).stream_writer(raw) as z:
        line = b"the cat sat on the mat and looked at the door.\n"
        for _ in range(2_000_000 // 10_000):
            z.write(line * 10_000)
    growth, outcome = _peak_growth(f)
    assert outcome.endswith(" documents") and int(outcome.split()[0]) > 1000
    assert growth < 48, f"peak memory grew by {growth} MiB reading a 96 MB corpus without blank lines"


def test_memory_stays_flat_on_one_endless_line(tmp_path):
    f = tmp_path / "one-line.txt.zst"  # 200 MB in a single line, a few kB compressed
    with open(f, "wb") as raw, zstandard.ZstdCompressor(level=1).stream_writer(raw) as z:
        for _ in range(200):
            z.write(b"a" * (1 << 20))
    assert f.stat().st_size < 100_000
    growth, outcome = _peak_growth(f)
    assert "one-line.txt.zst:1: a line longer than 1048576 bytes" in outcome
    assert growth < 48, f"peak memory grew by {growth} MiB reading one 200 MB line"
