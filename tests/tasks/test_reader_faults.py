"""Damaged fine-tuning, predict and embed inputs end in a one-line `DataError` or a correct read, never another
exception: examples (bad UTF-8, an unbalanced quote, a BOM, a corrupt gzip, a bad JSON line) and properties over
hundreds of seeded random mutations of small valid files."""

import bz2
import gzip
import json
import lzma
import random
import warnings
from pathlib import Path

import pytest

from litebert.cli import main
from litebert.errors import DataError, LitebertError
from litebert.inference.predict import iter_texts
from litebert.tasks import readers as R
from litebert.tasks.kinds import Classification

ROWS = [("a fine film", "pos"), ("dull, and long", "neg"), ('he said "wow"', "pos"), ("café au lait", "neg")]


def _tsv() -> bytes:
    return ("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in ROWS)).encode()


def _csv() -> bytes:
    return ("text,label\n" + "".join('"' + t.replace('"', '""') + f'",{l}\n' for t, l in ROWS)).encode()


def _jsonl() -> bytes:
    return "".join(json.dumps({"text": t, "label": l}, ensure_ascii=False) + "\n" for t, l in ROWS).encode()


def _glue() -> bytes:
    return ("sentence\tlabel\n" + "".join(f"{t}\t{int(l == 'pos')}\n" for t, l in ROWS)).encode()


def _conll() -> bytes:
    return b"-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"


def _mc() -> bytes:
    return b'{"question": "q?", "choices": ["a", "b"], "label": 1}\n{"question": "r?", "choices": ["c", "d"]}\n'


def _squad() -> bytes:
    return json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "The cat sat.", "qas": [
        {"id": "1", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "2", "question": "Why?", "answers": [], "is_impossible": True}]}]}]}).encode()


def _predict_rows(path: Path):
    return Classification().examples_from_json(list(R.records(path)), path)


# name: (file name, valid content, reader)
FILES = {
    "tsv": ("d.tsv", _tsv, lambda p: R.read_table(p)),
    "csv": ("d.csv", _csv, lambda p: R.read_table(p)),
    "jsonl": ("d.jsonl", _jsonl, lambda p: R.read_table(p)),
    "tsv.gz": ("d.tsv.gz", lambda: gzip.compress(_tsv(), mtime=0), lambda p: R.read_table(p)),
    "csv.xz": ("d.csv.xz", lambda: lzma.compress(_csv()), lambda p: R.read_table(p)),
    "jsonl.bz2": ("d.jsonl.bz2", lambda: bz2.compress(_jsonl()), lambda p: R.read_table(p)),
    "glue": ("train.tsv", _glue, lambda p: R.read_glue("sst-2", p)),
    "conll": ("train.txt", _conll, lambda p: R.read_conll(p)),
    "mc": ("mc.jsonl", _mc, lambda p: R.read_multiple_choice(p)),
    "squad": ("squad.json", _squad, lambda p: R.read_squad(p)),
    "predict": ("in.jsonl", _jsonl, _predict_rows),
    "embed-txt": ("t.txt", _tsv, lambda p: list(iter_texts(p))),
    "embed-jsonl": ("t.jsonl.gz", lambda: gzip.compress(_jsonl(), mtime=0), lambda p: list(iter_texts(p))),
}

INSERTS = [b'"', b"\t", b"\n", b"\r", b",", b"\xef\xbb\xbf", b"\xe9", b"\xff", b"\x00", b"{", b"]", b"\\", b"1e999"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(["flip", "truncate", "insert", "delete", "duplicate"])
        i = rng.randrange(len(b) + 1)
        if op == "flip" and b:
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == "truncate":
            del b[i:]
        elif op == "insert":
            b[i:i] = rng.choice(INSERTS)
        elif op == "delete":
            del b[i:i + rng.randint(1, 4)]
        elif op == "duplicate":
            j = rng.randrange(len(b) + 1)
            b[j:j] = b[i:i + rng.randint(1, 20)]
    return bytes(b)


def outcome(read, path: Path) -> str:
    """'ok' or 'error'; any exception other than a one-line DataError fails the test."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQuAD's "skipped N answers" warning: a correct, reported read
            read(path)
    except DataError as e:
        assert isinstance(e, LitebertError) and "\n" not in str(e) and str(e), repr(e)
        return "error"
    return "ok"


@pytest.mark.parametrize("name", FILES)
def test_the_valid_files_read(name, tmp_path):
    file, content, read = FILES[name]
    (tmp_path / file).write_bytes(content())
    assert outcome(read, tmp_path / file) == "ok"


@pytest.mark.parametrize("name", FILES)
def test_random_mutations_end_in_a_data_error_or_a_read(name, tmp_path):
    file, content, read = FILES[name]
    data, path = content(), tmp_path / file
    seen = {"ok": 0, "error": 0}
    for seed in range(250):
        path.write_bytes(mutate(data, random.Random(f"{name}-{seed}")))
        seen[outcome(read, path)] += 1
    assert seen["error"] > 0  # the mutations do reach the error paths


@pytest.mark.parametrize("name", ["tsv", "csv.xz", "jsonl"])
def test_mutations_through_the_cli_are_one_line_exit_2(name, tmp_path, capsys):
    file, content, _ = FILES[name]
    path = tmp_path / file
    errors = 0
    for seed in range(6):
        data = mutate(content(), random.Random(f"cli-{name}-{seed}"))
        path.write_bytes(data)
        code = main(["embed", "--model", str(tmp_path / "no-model"), "--input", str(path),
                     "--output", str(tmp_path / "e.npy"), "--text-field", "text"])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        errors += "no-model" not in err  # the input's own error, found before the model is opened
    assert errors > 0


# ----------------------------------------------------------------------------------------------------- examples
def test_latin1_byte_names_file_line_and_offset_and_replace_reads_it(tmp_path):
    for name, data in (("d.tsv", b"text\tlabel\ncaf\xe9\tpos\n"), ("d.csv", b"text,label\ncaf\xe9,pos\n"),
                       ("d.jsonl", b'{"text": "ok", "label": "pos"}\n{"text": "caf\xe9", "label": "pos"}\n')):
        path = tmp_path / name
        path.write_bytes(data)
        offset = data.index(b"\xe9")
        line = data[:offset].count(b"\n") + 1
        with pytest.raises(DataError, match=rf"{name}:{line}: invalid UTF-8 at byte offset {offset} \(byte 0xe9\).*"
                                            r"encoding_errors = 'replace'"):
            R.read_table(path)
        assert R.read_table(path, encoding_errors="replace")[-1].text_a == "caf\ufffd"


def test_predict_and_embed_offer_encoding_errors_replace(tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_bytes(b"fine\ncaf\xe9\n")
    assert list(iter_texts(path, encoding_errors="replace")) == ["fine", "caf\ufffd"]
    model = tmp_path / "no-model"  # the input is read (and refused) before the model
    code = main(["embed", "--model", str(model), "--input", str(path), "--output", str(tmp_path / "e.npy")])
    err = capsys.readouterr().err
    assert code == 2 and "t.txt:2: invalid UTF-8 at byte offset 8" in err and "--encoding-errors replace" in err
    jl = tmp_path / "in.jsonl"
    jl.write_bytes(b'{"text": "caf\xe9"}\n')
    code = main(["predict", "--model", str(model), "--input", str(jl), "--output", str(tmp_path / "o.jsonl")])
    assert code == 2  # no fine-tuned folder here: the model is checked first, so only the exit code is asserted
    capsys.readouterr()


def test_unbalanced_quote_is_reported_where_it_opens(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text('text,label\nfine,pos\n"hello, world,pos\nbye,neg\nfoo,pos\n')
    with pytest.raises(DataError, match=r"d.csv:3: unbalanced quote: a quoted field opened on this line is never "
                                        r"closed \(the file ends inside it, at line 5\)"):
        R.read_table(path)
    path.write_text('text,label\n"hello, world,pos\nbye,"neg\nok,neg\n')  # closed two lines later, mid-field
    with pytest.raises(DataError, match=r"d.csv:2: 1 fields but the header has 2.*stretches to line 3: an "
                                        r"unbalanced quote on line 2\?"):
        R.read_table(path)
    path.write_text('text,label\n"two\nlines",pos\n')  # a quoted field may hold a line break
    assert [(e.guid, e.text_a, e.label) for e in R.read_table(path)] == [("2", "two\nlines", "pos")]


def test_bom_is_dropped_from_the_first_column_name_and_first_line(tmp_path):
    for name, data in (("d.csv", "text,label\nhi,pos\n"), ("d.tsv", "text\tlabel\nhi\tpos\n"),
                       ("d.jsonl", '{"text": "hi", "label": "pos"}\n')):
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + data.encode())
        assert [(e.text_a, e.label) for e in R.read_table(path)] == [("hi", "pos")]
        path.write_bytes(gzip.compress(b"\xef\xbb\xbf" + data.encode()))
        assert [(e.text_a, e.label) for e in R.read_table(path)] == [("hi", "pos")]
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfhello\nworld\n")
    assert list(iter_texts(path)) == ["hello", "world"]


@pytest.mark.parametrize("compress, kind", [(gzip.compress, "gzip"), (lzma.compress, "xz"), (bz2.compress, "bz2")])
def test_corrupt_compressed_file_is_reported_as_such(tmp_path, compress, kind):
    data = compress(("text\tlabel\n" + "café crème\tpos\n" * 500).encode())
    path = tmp_path / "d.tsv.gz"
    for cut in (data[:len(data) // 2], data[:-6]):  # truncated; a gzip missing its CRC trailer
        path.write_bytes(cut)
        with pytest.raises(DataError, match=f"d.tsv.gz: corrupt or truncated {kind} file"):
            R.read_table(path)
    corrupt = 0
    for i in range(20, len(data) - 20, max(1, len(data) // 40)):  # flipped bytes inside the compressed stream
        b = bytearray(data)
        b[i] ^= 0x55
        path.write_bytes(bytes(b))
        try:
            R.read_table(path)
        except DataError as e:
            assert "invalid UTF-8" not in str(e), str(e)
            corrupt += f"corrupt or truncated {kind} file" in str(e)
    assert corrupt > 0


def test_jsonl_error_names_line_and_column(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "a", "label": "pos"}\n\n{"text": "b", "label": pos}\n')
    with pytest.raises(DataError, match=r"d.jsonl:3: not valid JSON \(Expecting value at column 24\)"):
        R.read_table(path)
    assert '{"text": "b", "label": pos}'.index("pos}") + 1 == 24


def _nodes(doc, path=()):
    """Every (container, key) of a JSON document, depth first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        yield doc, k
        yield from _nodes(v, path + (k,))


def edit_json(doc, rng: random.Random):
    """``doc`` with one value replaced by a value of another JSON type, or one key renamed or removed."""
    nodes = list(_nodes(doc))
    parent, key = rng.choice(nodes)
    op = rng.choice(["value", "value", "rename", "remove"]) if isinstance(parent, dict) else "value"
    if op == "value":
        parent[key] = rng.choice([None, True, 0, -1, 7, 1.5, "", "x", "A", [], ["a"], {}, {"a": 1}, 10 ** 30])
    elif op == "rename":
        parent[key + "_"] = parent.pop(key)
    else:
        del parent[key]
    return doc


JSON_FILES = {"jsonl": True, "mc": True, "predict": True, "embed-jsonl": True, "squad": False}


@pytest.mark.parametrize("name", JSON_FILES)
def test_edited_json_values_and_keys_end_in_a_data_error_or_a_read(name, tmp_path):
    file, content, read = FILES[name]
    raw = content()
    raw = gzip.decompress(raw) if file.endswith(".gz") else raw
    path = tmp_path / file.removesuffix(".gz")
    seen = {"ok": 0, "error": 0}
    for seed in range(200):
        rng = random.Random(f"edit-{name}-{seed}")
        if JSON_FILES[name]:
            lines = [json.loads(l) for l in raw.decode().splitlines()]
            i = rng.randrange(len(lines))
            lines[i] = rng.choice([None, 1, "x", [1]]) if rng.random() < 0.1 else edit_json(lines[i], rng)
            text = "".join(json.dumps(o) + "\n" for o in lines)
        else:
            text = json.dumps(edit_json(json.loads(raw), rng))
        path.write_text(text)
        seen[outcome(read, path)] += 1
    assert seen["error"] > 0


# ------------------------------------------------------------------------------------- sharded safetensors index
def test_sharded_index_may_name_only_files_inside_the_model_folder(tmp_path):
    import torch
    from safetensors.torch import save_file

    from litebert.errors import CheckpointError
    from litebert.io.hf_folder import SHARDED_INDEX, load_weights

    folder = tmp_path / "a" / "model"
    (folder / "sub").mkdir(parents=True)
    first, second = {"w": torch.arange(4.0)}, {"v": torch.ones(2, 2)}
    save_file(first, str(folder / "model-1.safetensors"))
    save_file(second, str(folder / "model-2.safetensors"))
    for outside in (tmp_path / "x", tmp_path / "a" / "x.safetensors", folder / "sub" / "s.safetensors"):
        save_file(second, str(outside))
    index = folder / SHARDED_INDEX
    index.write_text(json.dumps({"weight_map": {"w": "model-1.safetensors", "v": "model-2.safetensors"}}))
    loaded = load_weights(folder)
    assert sorted(loaded) == ["v", "w"] and torch.equal(loaded["w"], first["w"])
    for shard in ("../../x", "../x.safetensors", "sub/s.safetensors", str(tmp_path / "x"), ".."):
        index.write_text(json.dumps({"weight_map": {"w": "model-1.safetensors", "v": shard}}))
        with pytest.raises(CheckpointError, match="which is not a file name inside"):
            load_weights(folder)
