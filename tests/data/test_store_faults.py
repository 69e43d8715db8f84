"""Fault injection on token stores, as properties: every random mutation of a store's files (shard bytes flipped,
truncated or extended; manifest numbers, keys and types edited, JSON torn; the .npy arrays damaged) ends in a
one-line `DataError` when the store is opened, or, for a mutation that leaves the content as it was, in a store that
reads exactly like the original. With ``verify=False`` (no hashing) a damaged store is either refused or reads
without any other error, its token ids in range. The same through `litebert data inspect` and `litebert pretrain`.

The default run draws a few hundred mutations (a few seconds); the `slow` run draws thousands."""

import copy
import json
import shutil

import numpy as np
import pytest

from helpers import IntTokenizer
from litebert.cli import main as cli_main
from litebert.data.pretraining import PretrainingDataset
from litebert.data.store import TokenStore, manifest_checksum, prepare_store
from litebert.errors import DataError, LitebertError

VOCAB = 1000
SHARD_FILES = [f"shard-{k:05d}.{kind}" for k in range(3) for kind in ("tokens", "sentences", "documents")]
AUX_FILES = ["word_start.npy", "normal_ids.npy"]
# Fields that describe how the store was made but not what it holds: a consistent edit of them (checksum updated
# with it) leaves the store's content as it was.
INFORMATIONAL = ("inputs", "empty_inputs", "input_format", "encoding_errors", "dropped_empty_documents",
                 "manifest_sha256", "tokenizer_folder")


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    rng = np.random.default_rng(0)
    docs = []
    for _ in range(40):
        sents = [" ".join(map(str, rng.integers(5, VOCAB, int(rng.integers(1, 15)))))
                 for _ in range(rng.integers(1, 5))]
        docs.append("\n".join(sents))
    (tmp / "c.txt").write_text("\n\n".join(docs) + "\n")
    store = prepare_store([tmp / "c.txt"], IntTokenizer(VOCAB), tmp / "s", shard_tokens=350, block_chars=200,
                          progress=False)
    assert store.num_shards == 3  # SHARD_FILES names them
    return tmp / "s"


def reading(store: TokenStore):
    """Everything a reader gets from a store: tokens, offsets, counts and the tokenizer facts."""
    shards = [tuple(np.asarray(a).tolist() for a in store.shard_arrays(k)) for k in range(store.num_shards)]
    f = store.facts
    return (shards, store.num_tokens, store.num_sentences, store.num_documents, str(store.dtype),
            (f.vocab_size, f.pad_id, f.cls_id, f.sep_id, f.mask_id, f.fingerprint),
            f.word_start.tolist(), f.normal_ids.tolist())


@pytest.fixture(scope="module")
def original(store_dir):
    return reading(TokenStore(store_dir, tokenizer=IntTokenizer(VOCAB)))


def outcome(path, verify=True):
    """'error' (a one-line DataError) or the store's reading; any other exception fails the test."""
    try:
        store = TokenStore(path, tokenizer=IntTokenizer(VOCAB), verify=verify)
    except DataError as e:
        assert isinstance(e, LitebertError) and "\n" not in str(e) and str(path) in str(e), str(e)
        return "error"
    return store


class Restore:
    """Mutate files of the store and put their original bytes back afterwards."""

    def __init__(self, folder, names):
        self.saved = {n: (folder / n).read_bytes() for n in names}
        self.folder = folder

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for n, data in self.saved.items():
            (self.folder / n).write_bytes(data)


def mutate_bytes(data: bytes, rng) -> bytes:
    kind = rng.integers(3)
    if kind == 0 and data:  # flip bits of 1-3 bytes
        b = bytearray(data)
        for pos in rng.integers(0, len(b), int(rng.integers(1, 4))):
            b[pos] ^= int(rng.integers(1, 256))
        return bytes(b)
    if kind == 1 and data:  # truncate
        return data[:int(rng.integers(0, len(data)))]
    return data + rng.integers(0, 256, int(rng.integers(1, 20))).astype(np.uint8).tobytes()  # append


def file_mutations(store_dir, names, n, seed, original):
    rng = np.random.default_rng(seed)
    errors = 0
    for _ in range(n):
        name = names[int(rng.integers(len(names)))]
        with Restore(store_dir, [name]) as r:
            damaged = mutate_bytes(r.saved[name], rng)
            (store_dir / name).write_bytes(damaged)
            result = outcome(store_dir)
            if damaged == r.saved[name]:
                assert result != "error" and reading(result) == original
            else:  # verify=True (the default): every change of bytes is refused
                assert result == "error", (name, len(damaged))
                errors += 1
            # verify=False: refused, or readable end to end without any other error
            result = outcome(store_dir, verify=False)
            if result != "error":
                for k in range(result.num_shards):
                    tokens = np.asarray(result.shard_arrays(k)[0])
                    assert tokens.size == 0 or int(tokens.max()) < VOCAB
                ds = PretrainingDataset(result, max_seq_length=16)
                for i in range(ds.num_examples):
                    ds.example(0, i)
    return errors


def key_paths(obj, prefix=()):
    """Every key path of a JSON document: ("shards", 0, "files", "tokens", "bytes")..."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for key, value in items:
        yield prefix + (key,)
        yield from key_paths(value, prefix + (key,))


def edit(manifest, path, op, rng=None):
    m = copy.deepcopy(manifest)
    parent = m
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if op == "delete":
        if isinstance(parent, list):
            parent.pop(key)
        else:
            del parent[key]
    elif op == "rename":
        if isinstance(parent, dict):
            parent[f"{key}_x"] = parent.pop(key)
        else:
            parent.append(parent.pop(key))  # a list: move the item to the end
    elif op == "wrong_type":
        value = parent[key]
        parent[key] = "7" if isinstance(value, (int, float)) and not isinstance(value, bool) else (
            12 if isinstance(value, str) else ([] if isinstance(value, dict) else {"a": 1}))
    elif op == "negative":
        parent[key] = -1 if not isinstance(parent[key], int) else -abs(parent[key]) - 1
    elif op == "huge":
        parent[key] = 1 << 63
    elif op == "number":
        value = parent[key]
        parent[key] = int(rng.choice([0, 1, 2, 255, 65536, 1 << 31])) if not isinstance(value, int) else \
            value + int(rng.choice([-3, -1, 1, 2, 1000]))
    elif op == "float":
        parent[key] = 1.5
    elif op == "null":
        parent[key] = None
    return m


def write_manifest(store_dir, m, reseal):
    if reseal and "manifest_sha256" in m:
        m["manifest_sha256"] = manifest_checksum(m)
    (store_dir / "manifest.json").write_text(json.dumps(m, indent=1))


def check_manifest_edit(store_dir, m, path, reseal, original, unchanged=False):
    """An edited manifest is refused, or the store reads exactly as before (only for fields that describe how the
    store was made, or an edit that changed nothing). Without the checksum updated, every edit is refused."""
    write_manifest(store_dir, m, reseal)
    result = outcome(store_dir)
    if result == "error":
        assert not unchanged, path
        return True
    assert reading(result) == original, path
    assert unchanged or path[0] in INFORMATIONAL and reseal or path == ("manifest_sha256",), path
    return False


OPS = ("delete", "rename", "wrong_type", "negative", "huge", "null", "float")


def test_every_manifest_key_edited(store_dir, original):
    """For each key path: delete it, rename it, give it a wrong type, a negative or a huge value, null, a float;
    with the manifest's checksum left as it was and with it updated to match the edit."""
    text = (store_dir / "manifest.json").read_text()
    manifest = json.loads(text)
    paths = list(key_paths(manifest))
    assert len(paths) > 50
    refused = 0
    with Restore(store_dir, ["manifest.json"]):
        for path in paths:
            for op in OPS:
                for reseal in (False, True):
                    m = edit(manifest, path, op)
                    refused += check_manifest_edit(store_dir, m, path, reseal, original, unchanged=m == manifest)
    assert refused > 0.85 * len(paths) * len(OPS) * 2
    assert outcome(store_dir) != "error"


def test_random_manifest_mutations(store_dir, original):
    rng = np.random.default_rng(1)
    text = (store_dir / "manifest.json").read_text()
    manifest = json.loads(text)
    paths = list(key_paths(manifest))
    with Restore(store_dir, ["manifest.json"]):
        for _ in range(150):
            kind = rng.integers(3)
            if kind == 0:  # number / key / type edits
                path = paths[int(rng.integers(len(paths)))]
                op = ("number", "delete", "rename", "wrong_type", "null")[int(rng.integers(5))]
                m = edit(manifest, path, op, rng)
                check_manifest_edit(store_dir, m, path, bool(rng.integers(2)), original, unchanged=m == manifest)
            else:  # torn or byte-damaged JSON
                damaged = mutate_bytes(text.encode(), rng)
                (store_dir / "manifest.json").write_bytes(damaged)
                result = outcome(store_dir)
                if result != "error":  # only a change the JSON parser does not see (white space) may pass
                    assert json.loads(damaged) == manifest and reading(result) == original


def test_random_shard_mutations(store_dir, original):
    assert file_mutations(store_dir, SHARD_FILES, 150, seed=2, original=original) > 140


def test_random_aux_mutations(store_dir, original):
    assert file_mutations(store_dir, AUX_FILES, 60, seed=3, original=original) > 50


@pytest.mark.slow
def test_many_random_mutations(store_dir, original):
    file_mutations(store_dir, SHARD_FILES + AUX_FILES, 3000, seed=4, original=original)
    test_random_manifest_mutations(store_dir, original)


def rewrite(store_dir, name, array):
    """Write ``array`` over a store file and record its new sha256 (and the manifest's), as a consistent but wrong
    store would: only the content checks can see it."""
    import hashlib

    data = np.ascontiguousarray(array).tobytes()
    (store_dir / name).write_bytes(data)
    m = json.loads((store_dir / "manifest.json").read_text())
    for s in m["shards"]:
        for r in s["files"].values():
            if r["name"] == name:
                r["sha256"], r["bytes"] = hashlib.sha256(data).hexdigest(), len(data)
    m["manifest_sha256"] = manifest_checksum(m)
    (store_dir / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("name, change, message", [
    ("shard-00001.tokens", lambda a: np.where(np.arange(a.size) == 7, VOCAB, a), "token id 1000 at position 7"),
    ("shard-00000.tokens", lambda a: np.where(np.arange(a.size) == 0, 65535, a), "token id 65535 at position 0"),
    ("shard-00000.sentences", lambda a: np.where(np.arange(a.size) == 3, a[1], a), "do not increase at entry 3"),
    ("shard-00002.sentences", lambda a: np.where(np.arange(a.size) == 0, 1, a), "runs from 1 to"),
    ("shard-00001.sentences", lambda a: np.where(np.arange(a.size) == a.size - 1, a[-1] - 1, a), "expected 0 to"),
    ("shard-00000.documents", lambda a: a[::-1], "runs from"),
    ("shard-00001.documents", lambda a: np.where(np.arange(a.size) == 2, a[2] + 50, a), "do not increase at entry 3"),
])
def test_consistent_but_wrong_content_is_refused(tmp_path, store_dir, name, change, message):
    """Checksums recorded for the damaged bytes: the token id and offset checks still refuse the store, with and
    without verification, naming the file."""
    s = tmp_path / "s"
    shutil.copytree(store_dir, s)
    dtype = "<u2" if name.endswith(".tokens") else "<i8"
    rewrite(s, name, change(np.fromfile(s / name, dtype)).astype(dtype))
    for verify in (True, False):
        with pytest.raises(DataError, match=f"store {s} is damaged: {name} .*{message}"):
            TokenStore(s, verify=verify)


def test_cli_inspect_reports_damage_in_one_line(tmp_path, store_dir, capsys):
    s = tmp_path / "s"
    shutil.copytree(store_dir, s)
    rng = np.random.default_rng(5)
    text = (s / "manifest.json").read_text()
    for i in range(30):
        name = (SHARD_FILES + AUX_FILES + ["manifest.json"])[i % 12]
        with Restore(s, [name]) as r:
            damaged = mutate_bytes(r.saved[name], rng)
            if damaged == r.saved[name] or (name == "manifest.json" and json.loads(text) == _loads(damaged)):
                continue
            (s / name).write_bytes(damaged)
            capsys.readouterr()
            assert cli_main(["data", "inspect", str(s), "--sample", "5", "--seq-len", "16"]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and err.startswith("litebert data: error: ") and "Traceback" not in err, err
            assert "is damaged" in err and "prepare it again" in err
    assert cli_main(["data", "inspect", str(s), "--no-verify-data"]) == 0
    assert "sha256 checksums skipped" in capsys.readouterr().out


def _loads(data: bytes):
    try:
        return json.loads(data)
    except ValueError:
        return None


PRETRAIN_TINY = ["--preset", "tiny", "--max-steps", "2", "--batch-size", "4", "--micro-batch", "4", "--seq-len",
                 "32", "--warmup-steps", "1", "--threads", "1", "--no-progress", "--save-every", "1"]


@pytest.mark.parametrize("flags", [[], ["--no-verify-data"]])
def test_pretrain_on_a_damaged_store_fails_before_step_0(tmp_path, store_dir, capsys, flags):
    s = tmp_path / "s"
    shutil.copytree(store_dir, s)
    tokens = np.fromfile(s / "shard-00002.tokens", "<u2")
    tokens[-1] = VOCAB + 5  # the last token of the corpus: training would reach it only late
    (s / "shard-00002.tokens").write_bytes(tokens.tobytes())
    run = tmp_path / "run"
    assert cli_main(["pretrain", "--data", str(s), "--out", str(run), *PRETRAIN_TINY, *flags]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"store {s} is damaged: shard-00002.tokens " in err
    assert ("sha256" in err) if not flags else (f"token id {VOCAB + 5}" in err)
    assert not run.exists()  # nothing written: no checkpoint, no train_config.json
    # the same store as --eval-data is checked too
    assert cli_main(["pretrain", "--data", str(store_dir), "--eval-data", str(s), "--out", str(run),
                     *PRETRAIN_TINY, *flags]) == 2
    assert f"store {s} is damaged" in capsys.readouterr().err and not run.exists()
