"""The token store: exact contents for hand-written corpora, parallel == serial bytes, atomicity and damage checks,
the tokenizer check, and the `litebert data` CLI. A tiny integer tokenizer ("12 7 9" -> [12, 7, 9]) makes every
expected token known by hand; the real 30k ALBERT vocabulary (bundled) checks real ids and the tokenizer the store
carries."""

import hashlib
import json

import numpy as np
import pytest

from helpers import IntTokenizer
from helpers import store_documents as read_all
from litebert.cli import main as cli_main
from litebert.data.store import TokenStore, prepare_store
from litebert.errors import DataError
from litebert.folders import OutputError

VOCAB_SHA256 = "886d527728990f8448a117db5d7e8ae23ff7e36638edf47ae3144a9bdd4ce8d7"  # data/albert-30k/SHA256SUMS


def write(path, text):
    path.write_text(text)
    return path




def test_store_contents_match_the_corpus(tmp_path):
    f = write(tmp_path / "a.txt", "10 11\n12\n\n\n13 14 15\nnothing here\n\n16\n")
    g = write(tmp_path / "b.txt", "")
    store = prepare_store([f, g], IntTokenizer(), tmp_path / "s", progress=False)
    # "nothing here" tokenizes to nothing: dropped like an empty line in the official reader
    assert read_all(store) == [[[10, 11], [12]], [[13, 14, 15]], [[16]]]
    assert (store.num_documents, store.num_sentences, store.num_tokens) == (3, 4, 7)
    assert store.dtype == np.uint16
    m = store.manifest
    assert m["empty_inputs"] == [str(g)] and m["tokenizer"]["fingerprint"] == IntTokenizer().fingerprint()
    tokens = (tmp_path / "s" / "shard-00000.tokens").read_bytes()
    assert np.frombuffer(tokens, "<u2").tolist() == [10, 11, 12, 13, 14, 15, 16]
    assert hashlib.sha256(tokens).hexdigest() == m["shards"][0]["files"]["tokens"]["sha256"]
    assert not list(tmp_path.glob(".s.tmp-*"))  # the temporary build directory is gone


def test_parallel_sharded_store_equals_serial_and_uses_uint32(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for d in range(300):
        for s in range(int(rng.integers(1, 6))):
            lines.append(" ".join(map(str, rng.integers(5, 70000, int(rng.integers(1, 30))))))
        lines.append("")
    f = write(tmp_path / "c.txt", "\n".join(lines))
    tok = IntTokenizer(vocab_size=70000)
    one = prepare_store([f], tok, tmp_path / "one", workers=1, shard_tokens=2000, block_chars=3000, progress=False)
    two = prepare_store([f], tok, tmp_path / "two", workers=2, shard_tokens=2000, block_chars=3000, progress=False)
    assert one.dtype == np.uint32 and one.num_shards > 2
    assert one.manifest["shards"] == two.manifest["shards"]  # identical files (sizes and sha256), shard by shard
    docs = read_all(one)
    assert docs == read_all(two) and len(docs) == 300
    expected = [[[int(x) for x in line.split()] for line in block.split("\n") if line]
                for block in "\n".join(lines).split("\n\n") if block.strip()]
    assert docs == expected


def test_jsonl_gzip_and_paragraph_inputs(tmp_path):
    import gzip

    with gzip.open(tmp_path / "x.jsonl.gz", "wt") as w:
        w.write(json.dumps({"text": "7 8. 9 10\n11"}) + "\n")
    write(tmp_path / "p.txt", "5 6\n7. 8\n\n9\n")
    s1 = prepare_store([tmp_path / "x.jsonl.gz"], IntTokenizer(), tmp_path / "s1", progress=False)
    s2 = prepare_store([tmp_path / "p.txt"], IntTokenizer(), tmp_path / "s2", fmt="paragraphs", progress=False)
    # the splitter cuts "7 8. 9 10" before the digit-led "9 10"; "8." is no integer token, so [7] remains
    assert read_all(s1) == [[[7], [9, 10], [11]]]
    assert read_all(s2) == [[[5, 6], [8]], [[9]]]


def test_bad_inputs_and_existing_output(tmp_path):
    tok = IntTokenizer()
    empty = write(tmp_path / "e.txt", "\n\n")
    with pytest.raises(DataError, match="no text found in 1 input file"):
        prepare_store([empty], tok, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s.tmp-*"))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"5 6\n7 \xff 8\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 at byte offset 6"):
        prepare_store([bad], tok, tmp_path / "s", progress=False)
    store = prepare_store([bad], tok, tmp_path / "s", encoding_errors="replace", progress=False)
    assert read_all(store) == [[[5, 6], [7, 8]]]
    with pytest.raises(OutputError, match="already holds a litebert token store"):
        prepare_store([bad], tok, tmp_path / "s", progress=False)
    good = write(tmp_path / "g.txt", "9\n")
    assert read_all(prepare_store([good], tok, tmp_path / "s", overwrite=True, progress=False)) == [[[9]]]


def test_store_pickles_by_path(tmp_path):
    import pickle

    rng = np.random.default_rng(0)
    f = write(tmp_path / "a.txt", "\n".join(" ".join(map(str, rng.integers(5, 999, 50))) for _ in range(2000)))
    store = prepare_store([f], IntTokenizer(), tmp_path / "s", progress=False)
    blob = pickle.dumps(store)
    assert len(blob) < 1000 < store.num_tokens  # no token data inside
    assert read_all(pickle.loads(blob)) == read_all(store)


def test_damaged_and_foreign_stores_are_refused(tmp_path):
    f = write(tmp_path / "a.txt", "10 11 12\n13\n\n14 15\n")
    prepare_store([f], IntTokenizer(), tmp_path / "s", progress=False)
    TokenStore(tmp_path / "s", tokenizer=IntTokenizer(), verify=True)
    with pytest.raises(DataError, match="different tokenizer"):
        TokenStore(tmp_path / "s", tokenizer=IntTokenizer(name="other"))
    tokens = tmp_path / "s" / "shard-00000.tokens"
    data = tokens.read_bytes()
    tokens.write_bytes(data[:-2])  # a half-copied shard
    with pytest.raises(DataError, match="shard-00000.tokens has 10 bytes, the manifest records 12"):
        TokenStore(tmp_path / "s")
    tokens.write_bytes(data[:-2] + b"\x00\x01")  # same size, other bytes, id 256 < vocab: only the checksum sees it
    assert read_all(TokenStore(tmp_path / "s", verify=False))[-1] == [[14, 256]]
    with pytest.raises(DataError, match="does not match its sha256"):
        TokenStore(tmp_path / "s")  # verify=True is the default
    (tmp_path / "s" / "manifest.json").unlink()  # what an interrupted preparation leaves
    with pytest.raises(DataError, match="preparation did not finish"):
        TokenStore(tmp_path / "s")


def test_cli_prepare_and_inspect(tmp_path, capsys):
    rng = np.random.default_rng(1)
    text = "\n\n".join("\n".join(" ".join(map(str, rng.integers(5, 999, 12))) for _ in range(8)) for _ in range(20))
    f = write(tmp_path / "c.txt", text)
    tok_dir = tmp_path / "tok"
    with pytest.raises(SystemExit):
        cli_main(["data", "prepare", "--help"])
    # the CLI loads a real tokenizer folder; a missing one is a clean error (exit status 2, no traceback)
    code = cli_main(["data", "prepare", "--input", str(f), "--tokenizer", str(tok_dir), "--out", str(tmp_path / "s")])
    assert code == 2 and "error" in capsys.readouterr().err
    prepare_store([f], IntTokenizer(), tmp_path / "s", progress=False)
    assert cli_main(["data", "inspect", str(tmp_path / "s"), "--verify", "--sample", "50", "--json",
                     "--seq-len", "32"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["examples"] == 50 and stats["length_max"] <= 32 and stats["masked_special_tokens"] == 0
    (tmp_path / "s" / "manifest.json").unlink()
    assert cli_main(["data", "inspect", str(tmp_path / "s")]) == 2
    assert "did not finish" in capsys.readouterr().err


def test_real_vocabulary_store_via_cli(tmp_path, capsys, albert_vocab):
    from litebert.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer.from_pretrained(albert_vocab)
    f = write(tmp_path / "c.txt", "This is a test\nHello, my dog is cute\n\nI was born in 92000, and this is falsé.\n")
    assert cli_main(["data", "prepare", "--input", str(f), "--tokenizer", str(albert_vocab / "spiece.model"),
                     "--out", str(tmp_path / "s"), "--workers", "2", "--no-progress"]) == 0
    store = TokenStore(tmp_path / "s", tokenizer=tok)
    # reference ids from the vocabulary's README (the official tokenizer on the same sentences)
    assert read_all(store) == [[[48, 25, 21, 1289], [10975, 15, 51, 1952, 25, 10901]],
                               [[31, 23, 386, 19, 561, 3050, 15, 17, 48, 25, 4997, 9]]]
    assert np.array_equal(store.facts.word_start, tok.word_start_mask())


def test_store_carries_its_tokenizer(tmp_path, albert_vocab):
    from litebert.tokenizer import AlbertTokenizer

    f = write(tmp_path / "c.txt", "Hello, my dog is cute\n")
    store = prepare_store([f], AlbertTokenizer.from_pretrained(albert_vocab), tmp_path / "s", progress=False)
    assert store.tokenizer_path == tmp_path / "s" / "tokenizer"
    assert sorted(p.name for p in store.tokenizer_path.iterdir()) == ["spiece.model", "tokenizer.json",
                                                                      "tokenizer_config.json"]
    # recorded (and verified) like every other file of the store; the model is the bundled one, byte for byte
    assert store.manifest["aux_files"]["tokenizer/spiece.model"]["sha256"] == VOCAB_SHA256
    tok = TokenStore(tmp_path / "s", verify=True).tokenizer()
    assert tok("Hello, my dog is cute")["input_ids"] == [2, 10975, 15, 51, 1952, 25, 10901, 3]  # the README's ids
    config = store.tokenizer_path / "tokenizer_config.json"
    config.write_text(config.read_text().replace("true", "fals"))  # same size, other bytes
    with pytest.raises(DataError, match="tokenizer_config.json does not match its sha256"):
        TokenStore(tmp_path / "s", verify=True)


def test_store_without_a_tokenizer_still_loads(tmp_path):
    """A store written before stores kept their tokenizer: no tokenizer/ and no mention of it in the manifest."""
    f = write(tmp_path / "c.txt", "10 11\n12\n")
    prepare_store([f], IntTokenizer(), tmp_path / "s", progress=False)  # IntTokenizer cannot save itself
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    del manifest["manifest_sha256"]  # older stores carry no checksum of their manifest
    assert manifest.pop("tokenizer_folder") is None and set(manifest["aux_files"]) == {"word_start.npy",
                                                                                      "normal_ids.npy"}
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(manifest))
    store = TokenStore(tmp_path / "s", verify=True)
    assert store.tokenizer_path is None and store.tokenizer() is None
    assert read_all(store) == [[[10, 11], [12]]]


def test_prepare_out_folder_rules(tmp_path, capsys):
    """--out: a new or empty folder, or a token store with --overwrite. Anything else is refused in one line and
    nothing is deleted; the store folder carries the token-store marker."""
    import os

    from litebert.folders import OWNER_FILE, read_marker

    tok = IntTokenizer()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    f = write(corpus / "a.txt", "10 11\n12\n")
    # the user's corpus folder as --out: refused with and without --overwrite, nothing touched
    for overwrite in (False, True):
        with pytest.raises(OutputError, match="not empty and was not written by litebert"):
            prepare_store([f], tok, corpus, overwrite=overwrite, progress=False)
    assert sorted(p.name for p in corpus.iterdir()) == ["a.txt"] and f.read_text() == "10 11\n12\n"
    # an empty folder is fine; the store carries its marker
    (tmp_path / "empty").mkdir()
    store = prepare_store([f], tok, tmp_path / "empty", progress=False)
    assert read_marker(store.path)["kind"] == "token-store" and read_all(store) == [[[10, 11], [12]]]
    # a store with a user's file added: --overwrite refuses and deletes nothing
    s = tmp_path / "s"
    prepare_store([f], tok, s, progress=False)
    before = sorted(p.name for p in s.iterdir())
    write(s / "notes.txt", "mine")
    with pytest.raises(OutputError, match=r"holds files a token store does not write \(notes.txt\)"):
        prepare_store([f], tok, s, overwrite=True, progress=False)
    assert sorted(p.name for p in s.iterdir()) == sorted(before + ["notes.txt"])
    (s / "notes.txt").unlink()
    # an input inside --out (the corpus kept inside the store folder) is refused
    inner = write(s / "shard-00009.tokens", "13\n")
    with pytest.raises(OutputError, match="lies inside out"):
        prepare_store([inner], tok, s, overwrite=True, progress=False)
    inner.unlink()
    # a store prepared before folders carried a marker is still recognised as a store
    (s / OWNER_FILE).unlink()
    g = write(tmp_path / "g.txt", "20\n")
    assert read_all(prepare_store([g], tok, s, overwrite=True, progress=False)) == [[[20]]]
    # temporaries of killed preparations of this --out are removed; a live process's and others' are kept
    dead = tmp_path / ".s.tmp-999999999"
    dead.mkdir()
    live = tmp_path / f".s.tmp-{os.getppid()}"
    live.mkdir()
    other = tmp_path / ".t.tmp-999999999"
    other.mkdir()
    prepare_store([g], tok, s, overwrite=True, progress=False)
    assert not dead.exists() and live.exists() and other.exists()
    # through the CLI: one line, exit 2, nothing deleted
    capsys.readouterr()
    code = cli_main(["data", "prepare", "--input", str(f), "--tokenizer", "unused", "--out", str(corpus),
                     "--overwrite", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not written by litebert" in err and f.exists()
    code = cli_main(["data", "prepare", "--input", str(f), "--tokenizer", "unused", "--out", str(s), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "already holds a litebert token store" in err and "--overwrite" in err


def test_resume_fingerprint_covers_the_whole_store(tmp_path):
    """The fingerprint a run checks on --resume sees a change of the corpus's last token (the first examples do not
    change), and does not depend on where the store lies."""
    import shutil

    from litebert.data.pretraining import PretrainingDataset
    from litebert.pretraining.identity import data_fingerprint

    rng = np.random.default_rng(3)
    lines = "\n\n".join("\n".join(" ".join(map(str, rng.integers(5, 999, 12))) for _ in range(6)) for _ in range(50))
    prepare_store([write(tmp_path / "a.txt", lines)], IntTokenizer(), tmp_path / "s", progress=False)
    prepare_store([write(tmp_path / "b.txt", lines[:-3] + " 77")], IntTokenizer(), tmp_path / "t", progress=False)
    shutil.copytree(tmp_path / "s", tmp_path / "copy")
    a, b, copy = (PretrainingDataset(tmp_path / n, max_seq_length=32, shuffle=False) for n in ("s", "t", "copy"))
    assert [a.example(0, i)["input_ids"].tolist() for i in range(4)] == \
        [b.example(0, i)["input_ids"].tolist() for i in range(4)]
    assert data_fingerprint(a) == data_fingerprint(copy) != data_fingerprint(b)
    assert data_fingerprint(a) != data_fingerprint(PretrainingDataset(tmp_path / "s", max_seq_length=32, seed=1,
                                                                      shuffle=False))
