"""Inputs at URLs (`litebert.inputs.remote`), read through fsspec from real servers on the loopback address: an HTTP
server
started here (Python's http.server, answering the byte ranges fsspec's HTTP files ask for) and, where s3fs and moto
are installed, moto's S3 server. Through a URL, the same files must give what they give on disk: the same token
store byte for byte, the same fine-tuning examples. Reading streams (a few blocks of a large file are fetched, not
the file), and every failure is one line naming the URL."""

import contextlib
import functools
import gzip
import http.server
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import corpus_documents
from litebert.cli import main
from litebert.errors import DataError
from litebert.inputs.text import expand_inputs, iter_lines, iter_records
from litebert.tasks.presets import get_preset
from litebert.tasks.sources import eval_path, split_paths

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")  # fsspec's HTTP filesystem
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
zstandard = pytest.importorskip("zstandard")
datasets = pytest.importorskip("datasets")
datasets.disable_progress_bars()

REPO = Path(__file__).resolve().parents[2]
VOCAB = REPO / "data" / "albert-30k"
pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------------- the servers
class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Python's file server, plus what fsspec's HTTP files use: ``Range: bytes=A-B`` answered with 206 and the
    bytes. ``/private/...`` is refused (403) and ``/flaky/...`` fails (500) past its first byte range, to see how
    failures read. The bytes sent are counted in ``server.sent``."""

    ranges = True

    def log_message(self, *args):
        pass

    def end_headers(self):
        self.send_header("Accept-Ranges", "bytes" if self.ranges else "none")
        super().end_headers()

    def copyfile(self, source, outputfile):
        data = source.read()
        self.server.sent += len(data)
        outputfile.write(data)

    def send_head(self):
        if self.path.startswith("/private/"):
            self.send_error(403)
            return None
        path = self.translate_path(self.path)
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not self.ranges or wanted is None or os.path.isdir(path) or not os.path.isfile(path):
            return super().send_head()
        if self.path.startswith("/flaky/") and int(wanted[1]) > 0:
            self.send_error(500)
            return None
        data = Path(path).read_bytes()
        start, end = int(wanted[1]), min(int(wanted[2] or len(data) - 1), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return io.BytesIO(data[start:end + 1])


class NoRangeHandler(RangeHandler):
    """A server that says it serves no byte ranges (``Accept-Ranges: none``) and sends whole files."""

    ranges = False


@contextlib.contextmanager
def serve(root: Path, handler=RangeHandler):
    """An HTTP server for ``root`` on 127.0.0.1 (a free port) in a thread; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    server.sent = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url_of(server) -> str:
    return f"http://127.0.0.1:{server.server_port}"


# ----------------------------------------------------------------------------------------------------- the data
DOCS = corpus_documents(60, slice(3000, 3400), 4)  # 2-4 lines each
GLUE_SST = [("a gripping , funny film", "1"), ("dull and overlong", "0"), ("the cast is superb", "1"),
            ("nothing works here", "0"), ("warm and wise", "1")]
GLUE_MNLI = [("A man plays.", "Someone plays.", "entailment"), ("A dog runs.", "A cat sleeps.", "contradiction"),
             ("Kids eat.", "Kids eat lunch.", "neutral")]


def two_frames(data: bytes) -> bytes:
    c = zstandard.ZstdCompressor()
    return c.compress(data[:len(data) // 2]) + c.compress(data[len(data) // 2:])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Files as they are served: a corpus folder in every format, GLUE folders, a user's table."""
    root = tmp_path_factory.mktemp("site")
    corpus = root / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text("\n\n".join(DOCS[:15]) + "\n", encoding="utf-8")
    with gzip.open(corpus / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines('{"text": %s}\n' % json.dumps(d) for d in DOCS[15:30])
    pq.write_table(pa.table({"text": DOCS[30:40]}), corpus / "c.parquet", row_group_size=3)
    (corpus / "d.txt.zst").write_bytes(two_frames(("\n\n".join(DOCS[40:50]) + "\n").encode()))
    (corpus / "sub" / "e.jsonl").write_text("".join('{"text": %s}\n' % json.dumps(d)
                                                    for d in DOCS[50:55]), encoding="utf-8")
    (corpus / ".hidden.txt").write_text("never read\n", encoding="utf-8")
    datasets.Dataset.from_dict({"text": DOCS[55:]}).save_to_disk(str(corpus / "saved"), num_shards=2)
    sst = root / "glue" / "SST-2"
    sst.mkdir(parents=True)
    tsv = "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in GLUE_SST)
    with gzip.open(sst / "train.tsv.gz", "wt", encoding="utf-8") as f:
        f.write(tsv)
    (sst / "dev.tsv").write_text(tsv, encoding="utf-8")
    mnli = root / "glue" / "MNLI"
    mnli.mkdir()
    header = "index\tsentence1\tsentence2\tgold_label\n"
    (mnli / "train.tsv").write_text(header + "".join(f"{i}\t{a}\t{b}\t{y}\n" for i, (a, b, y) in
                                                     enumerate(GLUE_MNLI)), encoding="utf-8")
    (mnli / "dev_matched.tsv").write_bytes((mnli / "train.tsv").read_bytes())
    features = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
                                  "idx": datasets.Value("int32")})
    rows = {"premise": [a for a, _, _ in GLUE_MNLI], "hypothesis": [b for _, b, _ in GLUE_MNLI],
            "label": [y for _, _, y in GLUE_MNLI], "idx": list(range(len(GLUE_MNLI)))}
    part = datasets.Dataset.from_dict(rows, features=features)
    datasets.DatasetDict({"train": part, "validation_matched": part}).save_to_disk(str(root / "glue" / "mnli_hub"))
    pq.write_table(pa.table({"review": [s for s, _ in GLUE_SST], "stars": [int(y) for _, y in GLUE_SST]}),
                   root / "reviews.parquet")
    (root / "private").mkdir()
    (root / "private" / "x.txt").write_text("served to no one\n", encoding="utf-8")  # the server answers 403
    return root


@pytest.fixture(scope="module")
def server(site):
    with serve(site) as s:
        yield s


_TOKENIZER = []


def prepare(inputs, out: Path):
    from litebert.data.store import prepare_store
    from litebert.tokenizer import AlbertTokenizer

    if not _TOKENIZER:
        _TOKENIZER.append(AlbertTokenizer.from_pretrained(VOCAB))
    return prepare_store(inputs, _TOKENIZER[0], out, shard_tokens=700, block_chars=900, progress=False)


def shards(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.iterdir()) if p.name.startswith("shard-")}


# ------------------------------------------------------------------------------------------- the same as on disk
def test_a_served_corpus_folder_gives_the_local_store_byte_for_byte(site, server, tmp_path):
    base = url_of(server)
    local = expand_inputs([site / "corpus"])
    remote = expand_inputs([base + "/corpus/"])
    # every format, the sub-folder, the datasets folder as one input; the hidden file skipped; the same order
    assert [str(f)[len(base) + 1:] for f in remote] == [str(f.relative_to(site)) for f in local]
    assert len(local) == 6
    reference = prepare([site / "corpus"], tmp_path / "local")
    assert reference.num_documents == len(DOCS) and reference.num_shards >= 3
    store = prepare([base + "/corpus"], tmp_path / "remote")
    assert shards(tmp_path / "remote") == shards(tmp_path / "local")
    assert store.manifest["inputs"] == [str(f) for f in remote]


def test_data_prepare_reads_a_glob_of_urls(site, server, tmp_path, capsys):
    base = url_of(server)
    tok = ["--tokenizer", str(VOCAB), "--shard-tokens", "700", "--no-progress"]
    assert main(["data", "prepare", "--input", str(site / "corpus" / "*.txt*"), "--out", str(tmp_path / "l")]
                + tok) == 0
    assert main(["data", "prepare", "--input", base + "/corpus/*.txt*", "--out", str(tmp_path / "r")] + tok) == 0
    assert shards(tmp_path / "r") == shards(tmp_path / "l")
    assert [f.name for f in expand_inputs([base + "/corpus/*.txt*"])] == ["a.txt", "d.txt.zst"]


def test_fine_tuning_readers_read_urls_as_files(site, server):
    base = url_of(server)
    for task, folder in (("sst-2", "glue/SST-2"), ("mnli", "glue/MNLI"), ("mnli", "glue/mnli_hub")):
        kind = get_preset(task).kind
        (train, dev), (local_train, local_dev) = split_paths(f"{base}/{folder}", None), split_paths(site / folder,
                                                                                                     None)
        assert str(train) == f"{base}/{folder}/{local_train.name}" and str(dev).endswith("/" + local_dev.name)
        assert kind.read(train) == kind.read(local_train) and kind.read(dev) == kind.read(local_dev)
        assert str(eval_path(f"{base}/{folder}")) == str(dev)
    expected = [(s, y) for s, y in GLUE_SST]
    assert [(e.text_a, e.label) for e in get_preset("sst-2").kind.read(f"{base}/glue/SST-2/train.tsv.gz")] == expected
    mnli = get_preset("mnli").kind.read(f"{base}/glue/mnli_hub/train")  # the Hub's columns and ClassLabel
    assert [(e.text_a, e.text_b, e.label) for e in mnli] == GLUE_MNLI
    for name in ("corpus/b.jsonl.gz", "corpus/c.parquet", "corpus/saved"):  # what predict and embed read
        assert list(iter_records(f"{base}/{name}")) == list(iter_records(site / name)), name
    classify = get_preset("classify").kind
    columns = {"text_a": "review", "label": "stars"}
    assert classify.read(f"{base}/reviews.parquet", None, columns) == classify.read(site / "reviews.parquet", None,
                                                                                     columns)


# -------------------------------------------------------------------------------------------------- streaming
def test_reading_fetches_blocks_not_the_file(tmp_path):
    big = tmp_path / "big.txt"
    line = ("word " * 19 + "end\n").encode()
    big.write_bytes(line * (24_000_000 // len(line)))
    (tmp_path / "one_line.txt").write_bytes(b"x" * 12_000_000)
    with serve(tmp_path) as server:
        lines = iter_lines(url_of(server) + "/big.txt")
        first = [next(lines) for _ in range(1000)]
        assert first == [(i + 1, i * len(line), line.decode().rstrip("\n")) for i in range(1000)]
        lines.close()
        assert server.sent < big.stat().st_size / 2  # a block or two of 24 MB, not the file
        server.sent = 0
        with pytest.raises(DataError, match=r"one_line\.txt:1: a line longer than 1048576 bytes") as e:
            list(iter_lines(url_of(server) + "/one_line.txt", max_line_bytes=1 << 20))
        assert url_of(server) in str(e.value) and "\n" not in str(e.value)
        assert server.sent < 12_000_000 / 2  # refused after a bounded read, as on disk


def test_a_server_without_byte_ranges_streams_text_and_refuses_tables(site):
    with serve(site, NoRangeHandler) as server:
        base = url_of(server)
        assert list(iter_lines(base + "/corpus/d.txt.zst")) == list(iter_lines(site / "corpus" / "d.txt.zst"))
        assert list(iter_lines(base + "/corpus/a.txt")) == list(iter_lines(site / "corpus" / "a.txt"))
        with pytest.raises(DataError, match="byte ranges") as e:
            get_preset("classify").kind.read(base + "/reviews.parquet", None, {"text_a": "review", "label": "stars"})
        assert str(e.value).startswith(base + "/reviews.parquet: ") and "\n" not in str(e.value)


# -------------------------------------------------------------------------------------------------- failures
def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_failures_are_one_line_naming_the_url(site, server, tmp_path, capsys):
    base = url_of(server)
    prepare_ = ["data", "prepare", "--tokenizer", str(VOCAB), "--out", str(tmp_path / "s"), "--no-progress",
                "--input"]
    with serve(tmp_path) as closed:
        refused = url_of(closed) + "/x.txt"  # a port nothing listens on, once this server is shut
    cases = {
        base + "/corpus/missing.txt": "does not exist",
        base + "/private/x.txt": "access denied (HTTP 403)",
        refused: "cannot reach the server",
        "nosuch://bucket/x.txt": "fsspec knows no URL scheme nosuch://",
    }
    if importlib.util.find_spec("gcsfs") is None:
        cases["gs://bucket/corpus.txt"] = "gcsfs"  # the package fsspec names for gs://
    for url, expected in cases.items():
        err = one_line_error(capsys, prepare_ + [url])
        assert url in err and expected in err, err
        assert not (tmp_path / "s").exists()
    with pytest.raises(DataError, match=r"no such file or folder$") as e:  # fine-tuning data: the same reading
        split_paths(base + "/glue/nope/", None)
    assert base + "/glue/nope/" in str(e.value)


def test_a_failure_while_streaming_names_the_url_and_the_offset(tmp_path):
    flaky = tmp_path / "flaky"
    flaky.mkdir()
    (flaky / "big.txt").write_bytes(b"a line of text\n" * 800_000)  # 12 MB: more than one block
    with serve(tmp_path) as server:
        with pytest.raises(DataError) as e:
            list(iter_lines(url_of(server) + "/flaky/big.txt"))
    message = str(e.value)
    assert message.startswith(url_of(server) + "/flaky/big.txt: reading failed (the server answered HTTP 500) at "
                              "byte offset "), message
    assert "\n" not in message


def test_without_fsspec_a_url_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # `import fsspec` raises ImportError
    with pytest.raises(DataError, match=r"^https://example\.org/c\.txt: reading URLs needs fsspec "
                                        r"\(pip install 'fsspec>=2023\.1'"
                                        r"(, or the remote extra from the checkout: .*)?\)$"):
        expand_inputs(["https://example.org/c.txt"])


def test_without_aiohttp_an_http_url_names_the_remote_extra(monkeypatch):
    """Issue 58 item 9: the hint for a missing aiohttp names what to install and the extra that holds it."""
    from litebert.inputs import remote

    monkeypatch.setattr(remote, "_POLICY", [])
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # `import aiohttp` raises ImportError
    monkeypatch.setitem(sys.modules, "fsspec.implementations.http", None)
    with pytest.raises(DataError) as e:
        list(iter_lines("https://example.org/c.txt"))
    message = str(e.value)
    assert message.startswith("https://example.org/c.txt: reading https:// URLs needs aiohttp, in litebert's "
                              "remote extra (pip install 'aiohttp>=3.8'"), message
    assert "\n" not in message, message


def test_local_inputs_never_import_fsspec(site, tmp_path):
    code = ("import sys; from litebert.data.store import prepare_store; from litebert.tasks.readers import read_glue; "
            f"prepare_store([{str(site / 'corpus' / 'a.txt')!r}], {str(VOCAB)!r}, {str(tmp_path / 's')!r}, "
            f"progress=False); read_glue('sst-2', {str(site / 'glue' / 'SST-2' / 'dev.tsv')!r}); "
            "print(sorted(m for m in ('fsspec', 'aiohttp', 'datasets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------------------- S3
@pytest.fixture(scope="module")
def s3(site):
    """moto's S3 server on 127.0.0.1, holding the site's files under s3://litebert/; s3fs finds it through
    AWS_ENDPOINT_URL_S3, as it would a MinIO or any S3-compatible store."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as env:
        for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}"}.items():
            env.setenv(name, value)
        client = boto3.client("s3")
        client.create_bucket(Bucket="litebert")
        for path in site.rglob("*"):
            if path.is_file():
                client.put_object(Bucket="litebert", Key=path.relative_to(site).as_posix(), Body=path.read_bytes())
        yield "s3://litebert"
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # its client points at the server stopped below
    server.stop()


def test_an_s3_corpus_and_glue_folder_read_as_on_disk(site, s3, tmp_path):
    remote = expand_inputs([s3 + "/corpus/"])
    assert [str(f)[len(s3) + 1:] for f in remote] == [str(f.relative_to(site)) for f in expand_inputs([site /
                                                                                                      "corpus"])]
    prepare([site / "corpus"], tmp_path / "local")
    prepare([s3 + "/corpus"], tmp_path / "remote")
    assert shards(tmp_path / "remote") == shards(tmp_path / "local")
    assert [f.name for f in expand_inputs([s3 + "/corpus/*.txt*"])] == ["a.txt", "d.txt.zst"]
    kind = get_preset("mnli").kind
    for folder in ("glue/MNLI", "glue/mnli_hub"):
        train, dev = split_paths(f"{s3}/{folder}", None)
        local_train, local_dev = split_paths(site / folder, None)
        assert kind.read(train) == kind.read(local_train) and kind.read(dev) == kind.read(local_dev)


def test_s3_failures_are_one_line(s3, tmp_path, capsys):
    for url in (s3 + "/corpus/missing.txt", "s3://no-such-bucket/corpus.txt"):
        err = one_line_error(capsys, ["data", "prepare", "--input", url, "--tokenizer", str(VOCAB), "--out",
                                      str(tmp_path / "s")])
        assert url in err and "does not exist" in err
