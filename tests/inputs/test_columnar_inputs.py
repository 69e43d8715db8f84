"""Corpora as they ship: Parquet, Arrow IPC files and streams, `datasets` folders and objects, and zstd, read by
every command that reads text or records. The same text in any of them gives the same token store and the same
tokenizer as JSON lines (the reference format); binary input is named by its format, never decoded."""

import builtins
import io
import json
import lzma
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from helpers import corpus_documents
from litebert.cli import main
from litebert.errors import DataError
from litebert.inputs.text import expand_inputs, iter_lines, iter_records, table_kind

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
zstandard = pytest.importorskip("zstandard")
datasets = pytest.importorskip("datasets")
datasets.disable_progress_bars()

REPO = Path(__file__).resolve().parents[2]
VOCAB = REPO / "data" / "albert-30k"
STORE_FILES = ("shard-00000.tokens", "shard-00000.sentences", "shard-00000.documents")

pytestmark = pytest.mark.usefixtures("one_thread")


DOCS = corpus_documents(80, slice(2000, 2600), 5)  # 2-5 lines each


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def write_ipc(path: Path, table, stream: bool) -> Path:
    with pa.OSFile(str(path), "wb") as f:
        with (pa.ipc.new_stream if stream else pa.ipc.new_file)(f, table.schema) as w:
            w.write_table(table, max_chunksize=9)  # several record batches
    return path


def zstd_frames(data: bytes) -> bytes:
    """``data`` compressed as two zstd frames, one after the other (as `cat a.zst b.zst` makes)."""
    half = len(data) // 2
    c = zstandard.ZstdCompressor()
    return c.compress(data[:half]) + c.compress(data[half:])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    """The same documents in every format litebert reads records from: {name: path}."""
    root = tmp_path_factory.mktemp("corpus")
    rows = [{"text": d, "id": i} for i, d in enumerate(DOCS)]
    table = pa.table({"text": DOCS, "id": list(range(len(DOCS)))})
    out = {"jsonl": write_jsonl(root / "c.jsonl", rows)}
    pq.write_table(table, root / "c.parquet", row_group_size=7)  # 12 row groups
    out["parquet"] = root / "c.parquet"
    out["arrow-file"] = write_ipc(root / "c.arrow", table, stream=False)
    out["arrow-stream"] = write_ipc(root / "s.arrow", table, stream=True)
    ds = datasets.Dataset.from_dict({"text": DOCS, "id": list(range(len(DOCS)))})
    ds.save_to_disk(str(root / "saved"), num_shards=3)
    out["save_to_disk"] = root / "saved"
    other = datasets.Dataset.from_dict({"text": ["Not this split."] * 3})
    datasets.DatasetDict({"test": other, "train": ds}).save_to_disk(str(root / "saved_dict"))
    out["DatasetDict folder"] = root / "saved_dict"
    ds.to_parquet(str(root / "hf.parquet"))
    out["Dataset.to_parquet"] = root / "hf.parquet"
    (root / "c.jsonl.zst").write_bytes(zstd_frames(out["jsonl"].read_bytes()))
    out["jsonl.zst"] = root / "c.jsonl.zst"
    return out


_TOKENIZER = []


def prepare(inputs, out: Path, **kw):
    from litebert.data.store import prepare_store
    from litebert.tokenizer import AlbertTokenizer

    if not _TOKENIZER:
        _TOKENIZER.append(AlbertTokenizer.from_pretrained(VOCAB))
    # small shards and blocks: shard boundaries fall where blocks end, so they must not depend on the format
    return prepare_store(inputs, _TOKENIZER[0], out, shard_tokens=700, block_chars=900, progress=False, **kw)


def store_bytes(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.iterdir()) if p.name.startswith("shard-")}


# ------------------------------------------------------------------------------------------------ identical stores
def test_every_format_gives_the_jsonl_store_byte_for_byte(corpus, tmp_path):
    reference = prepare([corpus["jsonl"]], tmp_path / "ref")
    expected = store_bytes(tmp_path / "ref")
    assert reference.num_shards >= 3 and reference.num_documents == len(DOCS)
    for name, path in corpus.items():
        if name != "jsonl":
            prepare([path], tmp_path / name)
            assert store_bytes(tmp_path / name) == expected, name
    ds = datasets.load_from_disk(str(corpus["save_to_disk"]))
    for name, inputs in {"Dataset": ds, "IterableDataset": ds.to_iterable_dataset(num_shards=2),
                         "DatasetDict": datasets.DatasetDict({"train": ds}), "iterator": iter(DOCS),
                         "generator": (d for d in DOCS)}.items():
        store = prepare(inputs, tmp_path / f"py-{name}")
        assert store_bytes(tmp_path / f"py-{name}") == expected, name
        assert store.manifest["inputs"][0].startswith("<"), store.manifest["inputs"]


def test_plain_text_and_its_zstd_give_the_same_store(tmp_path):
    text = "".join(d + "\n\n" for d in DOCS).encode()
    (tmp_path / "c.txt").write_bytes(text)
    (tmp_path / "c.txt.zst").write_bytes(zstd_frames(text))
    named_plainly = tmp_path / "c.bin"  # compression is recognised by its magic bytes, not its name
    named_plainly.write_bytes(zstd_frames(text))
    assert list(iter_lines(tmp_path / "c.txt.zst")) == list(iter_lines(tmp_path / "c.txt"))
    prepare([tmp_path / "c.txt"], tmp_path / "plain")
    for name in ("c.txt.zst", "c.bin"):
        prepare([tmp_path / name], tmp_path / name.replace(".", "-"))
        assert store_bytes(tmp_path / name.replace(".", "-")) == store_bytes(tmp_path / "plain")


def test_every_format_trains_the_same_tokenizer(corpus, tmp_path):
    from litebert.tokenizer import train_tokenizer

    def train(inputs, name):
        train_tokenizer(inputs, tmp_path / name, vocab_size=300, num_threads=1, progress=False)
        return (tmp_path / name / "spiece.model").read_bytes()

    reference = train([corpus["jsonl"]], "ref")
    for name in ("parquet", "arrow-stream", "save_to_disk", "jsonl.zst"):
        assert train([corpus[name]], name) == reference, name
    assert train(datasets.load_from_disk(str(corpus["save_to_disk"])), "Dataset") == reference
    assert train(iter(DOCS), "iterator") == reference


# ------------------------------------------------------------------------------------------------------ commands
@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny untrained ALBERT with the bundled 30k vocabulary."""
    import torch

    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import AlbertTokenizer

    folder = tmp_path_factory.mktemp("model") / "model"
    AlbertTokenizer.from_pretrained(VOCAB).save_pretrained(folder)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=30000)).save_pretrained(folder)
    return folder


REVIEWS = ["a great film", "an awful plot", "wonderful actors", "a boring story", "great fun", "awful acting"]


def reviews(tmp_path: Path) -> tuple[Path, Path]:
    """The same labelled reviews as Parquet written by `datasets` (a ClassLabel column: its names are the labels)
    and as JSON lines."""
    features = datasets.Features({"review": datasets.Value("string"),
                                  "stars": datasets.ClassLabel(names=["neg", "pos"])})
    labels = [1, 0, 1, 0, 1, 0]
    ds = datasets.Dataset.from_dict({"review": REVIEWS, "stars": labels}, features=features)
    ds.to_parquet(str(tmp_path / "reviews.parquet"))
    write_jsonl(tmp_path / "reviews.jsonl",
                [{"review": r, "stars": ["neg", "pos"][y]} for r, y in zip(REVIEWS, labels)])
    return tmp_path / "reviews.parquet", tmp_path / "reviews.jsonl"


def run(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, err
    return err


def test_every_command_reads_parquet(model, tmp_path, capsys):
    table, jsonl = reviews(tmp_path)
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"body": DOCS}), corpus, row_group_size=20)
    run(["tokenizer", "train", "--input", str(corpus), "--text-field", "body", "--out", str(tmp_path / "tok"),
         "--vocab-size", "300", "--threads", "1", "--quiet"], capsys)
    run(["data", "prepare", "--input", str(corpus), "--text-field", "body", "--tokenizer", str(tmp_path / "tok"),
         "--out", str(tmp_path / "store"), "--no-progress"], capsys)
    ft = tmp_path / "ft"
    run(["finetune", "classify", "--model", str(model), "--data", str(table), "--dev", str(table), "--out", str(ft),
         "--columns", "text_a=review,label=stars", "--max-steps", "2", "--batch-size", "4", "--no-progress"], capsys)
    assert json.loads((ft / "finetune.json").read_text())["labels"] == ["neg", "pos"]  # the ClassLabel's names
    outputs = {}
    for data in (table, jsonl):
        name = data.suffix
        run(["evaluate", "--model", str(ft), "--data", str(data), "--output", str(tmp_path / f"eval{name}.jsonl"),
             "--no-progress"], capsys)
        run(["predict", "--model", str(ft), "--input", str(data), "--output", str(tmp_path / f"pred{name}.jsonl"),
             "--no-progress"], capsys)
        run(["embed", "--model", str(model), "--input", str(data), "--text-field", "review", "--output",
             str(tmp_path / f"emb{name}.npy"), "--no-progress"], capsys)
        outputs[name] = [(tmp_path / f"{kind}{name}.jsonl").read_text().splitlines() for kind in ("eval", "pred")]
    # the same predictions, scores and echoed columns from either file (a table's row ids count from 0)
    preds = {name: [json.loads(line) for line in lines[1]] for name, lines in outputs.items()}
    assert preds[".parquet"] == preds[".jsonl"] and len(preds[".jsonl"]) == len(REVIEWS)
    evals = {name: [{k: v for k, v in json.loads(line).items() if k != "id"} for line in lines[0]]
             for name, lines in outputs.items()}
    assert evals[".parquet"] == evals[".jsonl"]
    assert np.array_equal(np.load(tmp_path / "emb.parquet.npy"), np.load(tmp_path / "emb.jsonl.npy"))


def test_finetune_and_evaluate_take_a_dataset_dict_folder(model, tmp_path, capsys):
    ds = datasets.Dataset.from_dict({"text": REVIEWS, "label": ["pos", "neg"] * 3})
    datasets.DatasetDict({"train": ds, "validation": ds.select(range(4))}).save_to_disk(str(tmp_path / "dd"))
    run(["finetune", "classify", "--model", str(model), "--data", str(tmp_path / "dd"), "--out", str(tmp_path / "ft"),
         "--max-steps", "1", "--batch-size", "4", "--no-progress"], capsys)
    meta = json.loads((tmp_path / "ft" / "finetune.json").read_text())
    assert Path(meta["train"]["data"]).name == "train"
    run(["evaluate", "--model", str(tmp_path / "ft"), "--data", str(tmp_path / "dd"), "--output",
         str(tmp_path / "rows.jsonl"), "--no-progress"], capsys)
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 4  # the validation split


# ------------------------------------------------------------------------------------------------ binary refused
def one_line_error(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("errors", ["strict", "replace"])
@pytest.mark.parametrize("command", ["data prepare", "tokenizer train", "embed"])
def test_parquet_named_txt_is_refused_not_decoded(corpus, model, tmp_path, capsys, errors, command):
    trap = tmp_path / "corpus.txt"
    trap.write_bytes(corpus["parquet"].read_bytes())
    out = tmp_path / "out"
    argv = {"data prepare": ["data", "prepare", "--input", str(trap), "--tokenizer", str(VOCAB), "--out", str(out),
                             "--no-progress"],
            "tokenizer train": ["tokenizer", "train", "--input", str(trap), "--out", str(out), "--vocab-size", "300",
                                "--quiet"],
            "embed": ["embed", "--model", str(model), "--input", str(trap), "--output", str(out),
                      "--no-progress"]}[command]
    err = one_line_error(argv + ["--encoding-errors", errors], capsys)
    assert "corpus.txt: a Parquet file, not text; name it *.parquet to read it as a table" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def _zip() -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("corpus.txt", "hello world\n")
    return b.getvalue()


def _tar_gz() -> bytes:
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w:gz") as t:
        data = b"hello world\n"
        info = tarfile.TarInfo("corpus.txt")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return b.getvalue()


def _npy() -> bytes:
    b = io.BytesIO()
    np.save(b, np.arange(10))
    return b.getvalue()


NOT_TEXT = {
    "zip": (_zip, "a zip archive, not text; unpack it first"),
    "pdf": (lambda: b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "a PDF document, not text"),
    "7z": (lambda: b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(30), "a 7z archive, not text"),
    "sqlite": (lambda: b"SQLite format 3\x00" + bytes(84), "an SQLite database, not text"),
    "npy": (_npy, "a NumPy array (.npy), not text"),
    "png": (lambda: b"\x89PNG\r\n\x1a\n" + bytes(20), "a PNG image, not text"),
    "tar.gz": (_tar_gz, "a gzip-compressed file holding a tar archive, not text; unpack it first"),
    "arrow-in-xz": (lambda: lzma.compress(b"ARROW1\x00\x00" + bytes(40)),
                    "an xz-compressed file holding an Arrow IPC file, not text"),
    "nul": (lambda: b"text, then \x00\x01 binary", "binary data (a NUL byte at byte 11), not text"),
    "utf-16": (lambda: "héllo\n".encode("utf-16"), "UTF-16 text, not UTF-8 text; convert it to UTF-8"),
}


@pytest.mark.parametrize("kind", sorted(NOT_TEXT))
def test_binary_formats_are_named_not_decoded(tmp_path, kind):
    make, message = NOT_TEXT[kind]
    path = tmp_path / "corpus.txt"
    path.write_bytes(make())
    for errors in ("strict", "replace"):
        with pytest.raises(DataError) as e:
            list(iter_lines(path, errors))
        assert str(e.value).startswith(f"{path}: {message}"), str(e.value)


def test_arrow_stream_is_told_from_text_by_its_message_length(tmp_path):
    stream = write_ipc(tmp_path / "s.arrow", pa.table({"text": ["a"]}), stream=True)
    assert stream.read_bytes()[:4] == b"\xff\xff\xff\xff"
    assert table_kind(stream) == "arrow-stream"
    named_as_text = tmp_path / "s.txt"
    named_as_text.write_bytes(stream.read_bytes())
    with pytest.raises(DataError, match=r"s\.txt: an Arrow IPC stream, not text; name it \*\.arrow"):
        list(iter_lines(named_as_text, "replace"))
    # the marker without a plausible length (positive, a multiple of 8) is not a stream: here, bad UTF-8
    odd = tmp_path / "odd.txt"
    odd.write_bytes(b"\xff\xff\xff\xffabcd text\n")
    assert [t for _, _, t in iter_lines(odd, "replace")] == ["\ufffd" * 4 + "abcd text"]
    with pytest.raises(DataError, match=r"odd\.txt:1: invalid UTF-8 at byte offset 0"):
        list(iter_lines(odd))


def test_table_names_must_hold_tables(tmp_path):
    (tmp_path / "text.parquet").write_text("just text\n")
    with pytest.raises(DataError, match=r"text\.parquet: named as a table but not a Parquet or Arrow file"):
        table_kind(tmp_path / "text.parquet")
    packed = tmp_path / "t.parquet.zst"
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": ["a"]}), buf)
    packed.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    with pytest.raises(DataError, match=r"t\.parquet\.zst: a zstd-compressed table; decompress it first"):
        table_kind(packed)


def test_damaged_tables_are_one_line_errors(corpus, tmp_path, capsys):
    for name, what in (("parquet", "a Parquet file"), ("arrow-stream", "an Arrow IPC stream"),
                       ("arrow-file", "an Arrow IPC file")):
        data = corpus[name].read_bytes()
        cut = tmp_path / f"cut{corpus[name].suffix}"
        cut.write_bytes(data[:len(data) * 2 // 3])
        err = one_line_error(["data", "prepare", "--input", str(cut), "--tokenizer", str(VOCAB), "--out",
                              str(tmp_path / "s"), "--no-progress"], capsys)
        assert f"{cut.name}: cannot read it as {what} (" in err and err.endswith("is it complete and undamaged?")
        assert not (tmp_path / "s").exists()


# --------------------------------------------------------------------------------------------------------- zstd
def test_truncated_and_corrupt_zstd_are_one_line_errors(tmp_path, capsys):
    data = "".join(f"line {i} {i * 7919 % 10007}\n" for i in range(20000)).encode()
    packed = zstandard.ZstdCompressor().compress(data)
    cut = tmp_path / "cut.txt.zst"
    cut.write_bytes(packed[:len(packed) // 2])
    with pytest.raises(DataError, match=r"cut\.txt\.zst: corrupt or truncated zstd file \(cannot decompress past "
                                        r"byte \d+ of its content: the file ends inside a zstd frame\)"):
        list(iter_lines(cut))
    damaged = bytearray(packed)
    damaged[len(packed) // 2:len(packed) // 2 + 64] = bytes(64)
    bad = tmp_path / "bad.txt.zst"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=r"bad\.txt\.zst: corrupt or truncated zstd file"):
        list(iter_lines(bad))
    err = one_line_error(["data", "prepare", "--input", str(cut), "--tokenizer", str(VOCAB), "--out",
                          str(tmp_path / "s"), "--no-progress"], capsys)
    assert "cut.txt.zst: corrupt or truncated zstd file" in err and not (tmp_path / "s").exists()


# ------------------------------------------------------------------------------------------- columns and rows
def test_a_missing_column_names_the_file_and_its_columns(corpus, model, tmp_path, capsys):
    err = one_line_error(["data", "prepare", "--input", str(corpus["parquet"]), "--text-field", "body",
                          "--tokenizer", str(VOCAB), "--out", str(tmp_path / "s"), "--no-progress"], capsys)
    assert err.endswith("c.parquet: no column 'body' (it has text, id); choose the column holding the text with "
                        "--text-field"), err
    err = one_line_error(["finetune", "classify", "--model", str(model), "--data", str(corpus["save_to_disk"]),
                          "--out", str(tmp_path / "ft"), "--columns", "text_a=review,label=stars"], capsys)
    assert err.endswith("saved: no column 'review' (it has text, id); set the column mapping, e.g. --columns "
                        "text_a=review,label=stars"), err
    assert not (tmp_path / "s").exists() and not (tmp_path / "ft").exists()


def test_errors_name_the_row(tmp_path):
    from litebert.tasks import readers as R

    pq.write_table(pa.table({"text": ["a", "b", None, "d"], "label": ["x", "y", "x", "z"]}), tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"t\.parquet: row 2: column 'text' is null, not text"):
        prepare([tmp_path / "t.parquet"], tmp_path / "s")
    with pytest.raises(DataError, match=r"t\.parquet: row 3: label 'z' is not one of the task's labels"):
        R.read_table(tmp_path / "t.parquet", "label", label="label", label_list=["x", "y"])
    with pytest.raises(DataError, match=r"t\.parquet: row 2: column 'text' must be text, got None"):
        R.read_table(tmp_path / "t.parquet", label_list=["x", "y", "z"])
    assert [(e.guid, e.text_a, e.label) for e in R.read_table(tmp_path / "t.parquet", "label", label=None)][:2] \
        == [("0", "x", None), ("1", "y", None)]


def test_dataset_dict_split_choice(tmp_path):
    one = datasets.Dataset.from_dict({"text": ["one"]})
    datasets.DatasetDict({"validation": one, "test": one}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(DataError, match=r"dd: a DatasetDict with no 'train' split and the splits validation, test; "
                                        r"give one split \(its folder: .*dd/validation\)"):
        expand_inputs([tmp_path / "dd"])
    assert expand_inputs([tmp_path / "dd" / "test"]) == [tmp_path / "dd" / "test"]
    datasets.DatasetDict({"only": one}).save_to_disk(str(tmp_path / "single"))
    assert expand_inputs([tmp_path / "single"]) == [tmp_path / "single" / "only"]


def test_a_folder_holding_a_saved_dataset_reads_it_as_one_input(corpus, tmp_path):
    import shutil

    shutil.copytree(corpus["save_to_disk"], tmp_path / "corpora" / "wiki")
    (tmp_path / "corpora" / "notes.txt").write_text("Some notes.\n")
    got = expand_inputs([tmp_path / "corpora"])
    assert got == [tmp_path / "corpora" / "notes.txt", tmp_path / "corpora" / "wiki"]  # not its .json/.arrow files
    assert expand_inputs([str(tmp_path / "corpora" / "**")]) == got
    assert [r["text"] for _, r in iter_records(got[1])] == DOCS


# --------------------------------------------------------------------------------------------- optional packages
def hide(monkeypatch, package: str) -> None:
    """Make ``import package`` (and its submodules) fail, as it does where it is not installed."""
    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == package or name.startswith(package + "."):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)


@pytest.mark.parametrize("package, name", [("pyarrow", "parquet"), ("pyarrow", "save_to_disk"),
                                           ("zstandard", "jsonl.zst")])
def test_a_missing_optional_package_says_what_to_install(corpus, tmp_path, capsys, monkeypatch, package, name):
    hide(monkeypatch, package)
    err = one_line_error(["data", "prepare", "--input", str(corpus[name]), "--tokenizer", str(VOCAB), "--out",
                          str(tmp_path / "s"), "--no-progress"], capsys)
    version = {"pyarrow": "14", "zstandard": "0.22"}[package]  # pyproject.toml's datasets extra
    assert f"needs {package} (pip install '{package}>={version}', or the datasets extra from the checkout: pip " \
           f"install -e '{REPO}[datasets]')" in err, err


def test_datasets_is_not_imported_for_files(corpus, tmp_path):
    import subprocess

    code = ("import sys; from litebert.data.store import prepare_store; "
            f"prepare_store([{str(corpus['parquet'])!r}], {str(VOCAB)!r}, {str(tmp_path / 's')!r}, progress=False); "
            "print('datasets' in sys.modules, 'pandas' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["False", "False"]


# -------------------------------------------------------------------------------------------------- Python API
def test_python_texts_and_their_mistakes(tmp_path):
    from litebert.data.store import prepare_store

    ds = datasets.Dataset.from_dict({"body": ["One. Two.", "Three."]})
    with pytest.raises(DataError, match=r"<Dataset column 'text'>: no column 'text' \(it has body\); choose the "
                                        r"column holding the text with text_field"):
        prepare_store(ds, str(VOCAB), tmp_path / "s", progress=False)
    store = prepare_store(ds, str(VOCAB), tmp_path / "s", text_field="body", progress=False)
    assert (store.num_documents, store.num_sentences) == (2, 3)
    with pytest.raises(DataError, match=r"<texts>: row 1 is int, not a string"):
        prepare_store(iter(["fine", 7]), str(VOCAB), tmp_path / "t", progress=False)
    with pytest.raises(DataError, match=r"does not exist .*to read strings as texts, pass an iterator of them"):
        prepare_store(["A list names files, so this text is taken for one."], str(VOCAB), tmp_path / "u",
                      progress=False)
    with pytest.raises(DataError, match=r"<texts>: row 0: holds a lone surrogate \\ud800"):
        prepare_store(iter(["bad \ud800 text"]), str(VOCAB), tmp_path / "v", progress=False)
    assert not any((tmp_path / n).exists() for n in "tuv")


@pytest.mark.slow
def test_peak_memory_of_a_10x_larger_parquet_within_1_2x(tmp_path):
    sys.path.insert(0, str(REPO))
    from bench.bench_columnar import measure

    small, large = measure([10, 100], row_group_mb=2, workers=2, folder=tmp_path)
    assert large["row_groups"] >= 10 * small["row_groups"] - 1
    for peak in ("rss_main_mb", "anon_main_mb", "rss_worker_mb"):
        assert large[peak] <= 1.2 * small[peak], (peak, small, large)
