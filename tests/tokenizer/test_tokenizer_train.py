"""train_tokenizer and `litebert tokenizer`: the official settings, text/gzip/xz/bz2/JSONL input from files,
directories and globs, HF loading of a trained folder with equal ids, and a clear error for every kind of bad input.
Vocabularies are tiny and trained on small generated text so the module runs in seconds."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import random
from pathlib import Path

import pytest

from litebert.cli import main
from litebert.errors import DataError, TokenizerError
from litebert.tokenizer import AlbertTokenizer, train_tokenizer


def generated_lines(n: int = 1500, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "tu", "ra", "shi", "po", "ve", "an", "th", "ing", "ed", "é", "ü", "ß"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(300)]
    lines = []
    for _ in range(n):
        ws = [rng.choice(words) for _ in range(rng.randint(2, 12))]
        if rng.random() < 0.4:
            ws.insert(rng.randint(0, len(ws)), f"{rng.randint(0, 3000)},")
        if rng.random() < 0.3:
            ws[0] = ws[0].capitalize()
        lines.append(" ".join(ws) + rng.choice([".", " (x).", "-y", ' "q"', "!"]))
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(generated_lines()) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> AlbertTokenizer:
    return train_tokenizer([corpus], tmp_path_factory.mktemp("tok"), vocab_size=300, progress=False, num_threads=1)


def test_official_layout_and_settings(trained):
    pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    proto = pb2.ModelProto()
    proto.ParseFromString((trained.model_file).read_bytes())
    spec = proto.trainer_spec
    assert spec.model_type == pb2.TrainerSpec.UNIGRAM
    assert spec.vocab_size == 300 == trained.vocab_size
    assert (spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id) == (0, 1, -1, -1)
    assert spec.character_coverage == pytest.approx(0.99995)
    assert spec.input_sentence_size == 10_000_000 and spec.shuffle_input_sentence
    assert list(spec.control_symbols) == ["[CLS]", "[SEP]", "[MASK]"]
    assert list(spec.user_defined_symbols) == ["(", ")", '"', "-", ".", "–", "£", "€"]
    # The id layout of the released 30k-clean model: ids 0-12 as there.
    assert trained.convert_ids_to_tokens(list(range(13))) == [
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "(", ")", '"', "-", ".", "–", "£", "€"]
    # Trained on normalized text: no upper-case or accented piece.
    pieces = trained.convert_ids_to_tokens(list(range(13, 300)))
    assert not any(p != p.lower() for p in pieces)
    assert not any(c in "éü" for p in pieces for c in p)


def test_folder_files(trained):
    folder = trained.model_file.parent
    assert {p.name for p in folder.iterdir()} == {"spiece.model", "spiece.vocab", "tokenizer_config.json",
                                                   "tokenizer.json", ".litebert.json"}
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "AlbertTokenizer" and cfg["do_lower_case"] is True


def test_trained_folder_loads_in_hf_autotokenizer_with_equal_ids(trained):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(trained.model_file.parent))
    texts = generated_lines(400, seed=7) + ["Ünïcödé tést", "", "  x  ", "(ka)-lo", "ka 12, lo", "中文 😀"]
    ours = trained(texts)["input_ids"]
    ref = hf(texts)["input_ids"]
    differ = [t for t, a, b in zip(texts, ours, ref) if a != b]
    # Only the official digit-comma re-split may differ from HF's approximation of it (see docs/tokenizer.md).
    for t in differ:
        assert any(p.endswith(",") and len(p) > 1 and p[-2].isdigit()
                   for p in trained.sp.encode(trained.normalize(t), out_type=str)), t
    assert len(differ) <= 0.02 * len(texts)
    pair = trained("ka lo mi", "ne tu", max_length=6, truncation="longest_first")
    assert pair["input_ids"] == hf("ka lo mi", "ne tu", max_length=6, truncation="longest_first")["input_ids"]


def test_compressed_jsonl_directory_and_glob_inputs_give_the_same_model(corpus, trained, tmp_path):
    """The same lines, however they are stored and named, make the same model as the plain file."""
    text = corpus.read_text(encoding="utf-8")
    lines = text.splitlines()
    half = len(lines) // 2
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "corpus.txt.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "xz").mkdir()
    (tmp_path / "xz" / "corpus.xz").write_bytes(lzma.compress(text.encode()))
    (tmp_path / "bz2").mkdir()
    (tmp_path / "bz2" / "corpus.txt").write_bytes(bz2.compress(text.encode()))  # bz2 under a .txt name
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "corpus.jsonl").write_text(
        "".join(json.dumps({"text": line, "id": i}) + "\n" for i, line in enumerate(lines)))
    # a directory in two parts (read sorted: part-0 first), with a hidden file that must be skipped
    (tmp_path / "dir" / "b").mkdir(parents=True)
    (tmp_path / "dir" / "a-part-0.txt").write_text("\n".join(lines[:half]) + "\n")
    (tmp_path / "dir" / "b" / "part-1.txt.xz").write_bytes(lzma.compress(("\n".join(lines[half:]) + "\n").encode()))
    (tmp_path / "dir" / ".notes.txt").write_text("nothing of this is corpus text\n" * 50)
    for inputs in ([tmp_path / "gz" / "corpus.txt.gz"], [tmp_path / "xz" / "corpus.xz"],
                   [tmp_path / "bz2" / "corpus.txt"], [tmp_path / "jsonl" / "corpus.jsonl"], [tmp_path / "dir"],
                   [str(tmp_path / "dir" / "*.txt"), str(tmp_path / "dir" / "b" / "*.xz")]):
        tok = train_tokenizer(inputs, tmp_path / "out", vocab_size=300, progress=False, num_threads=1, overwrite=True)
        assert tok.train_stats["lines"] == len(lines), inputs
        assert tok.fingerprint() == trained.fingerprint(), inputs


def test_cased_training(corpus, tmp_path):
    tok = train_tokenizer([corpus], tmp_path, vocab_size=300, do_lower_case=False, progress=False, num_threads=1)
    assert any(p != p.lower() for p in tok.convert_ids_to_tokens(list(range(tok.vocab_size))))
    assert AlbertTokenizer.from_pretrained(tmp_path).do_lower_case is False


# ------------------------------------------------------------------------------------------ bad input
def test_non_utf8_input_names_file_line_and_offset(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line one\nsecond \xff\xfe line\nthird\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 at byte offset 21"):
        train_tokenizer([bad], tmp_path / "out", vocab_size=20, progress=False)


def test_non_utf8_replaced_under_flag(corpus, tmp_path):
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(corpus.read_bytes() + b"bad \xc3\x28 line\nanother \xff\n")
    tok = train_tokenizer([mixed], tmp_path / "out", vocab_size=300, encoding_errors="replace", progress=False,
                          num_threads=1)
    assert tok.train_stats["lines"] == len(generated_lines()) + 2  # the two lines are kept, with U+FFFD


def test_empty_corpus(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n\t\n")
    with pytest.raises(DataError, match="empty corpus"):
        train_tokenizer([empty], tmp_path / "out", vocab_size=50, progress=False)


def test_vocab_size_the_corpus_cannot_support(corpus, tmp_path):
    with pytest.raises(DataError, match=r"vocab_size = 50000 is more than this corpus can support \(at most \d+"):
        train_tokenizer([corpus], tmp_path / "out", vocab_size=50000, progress=False)
    with pytest.raises(TokenizerError, match="leaves no room"):
        train_tokenizer([corpus], tmp_path / "out", vocab_size=10, progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_threads": 0}, "num_threads = 0: must be >= 1"),
    ({"character_coverage": 0.0}, r"character_coverage = 0.0: must lie in \[0.98, 1\]"),
    ({"character_coverage": 0.97}, r"character_coverage = 0.97: must lie in \[0.98, 1\]"),
    ({"character_coverage": 1.01}, r"character_coverage = 1.01: must lie in \[0.98, 1\]"),
    ({"character_coverage": float("nan")}, "character_coverage = nan: expected float"),
    ({"input_sentence_size": -1}, "input_sentence_size = -1: must be >= 0"),
    ({"seed": -5}, "seed = -5: must be >= 0"),
    ({"vocab_size": 3.5}, "vocab_size = 3.5: expected int"),
    ({"seed": True}, "seed = True: expected int"),
])
def test_out_of_range_settings_are_refused_before_anything_is_written(corpus, tmp_path, kwargs, message):
    from litebert.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        train_tokenizer([corpus], tmp_path / "out", vocab_size=kwargs.pop("vocab_size", 60), progress=False, **kwargs)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag, value", [("--threads", "0"), ("--character-coverage", "1.5"), ("--seed", "-1"),
                                         ("--input-sentence-size", "-2"), ("--vocab-size", "0")])
def test_out_of_range_options_are_one_line_errors_naming_the_flag(corpus, tmp_path, capsys, flag, value):
    code = main(["tokenizer", "train", "--input", str(corpus), "--out", str(tmp_path / "out"), flag, value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and f"{flag} {value}" in err
    assert not (tmp_path / "out").exists()


def test_missing_input_and_bad_jsonl(tmp_path):
    with pytest.raises(DataError, match=r"nope\.txt' does not exist"):
        train_tokenizer([tmp_path / "nope.txt"], tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": 3}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: field 'text' is a JSON number, expected a string; .*"
                                        r"text_field"):
        train_tokenizer([bad], tmp_path / "out", progress=False)
    bad.write_text('{"text": "fine"}\n{"body": "x"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: no 'text' field"):
        train_tokenizer([bad], tmp_path / "out", progress=False)
    bad.write_text('{"text": "fine"}\n{oops\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not valid JSON"):
        train_tokenizer([bad], tmp_path / "out", progress=False)


# ------------------------------------------------------------------------------------------ CLI
def test_cli_train_and_encode(corpus, trained, tmp_path, capsys):
    out = tmp_path / "cli_tok"
    assert main(["tokenizer", "train", "--input", str(corpus), "--out", str(out), "--vocab-size", "300",
                 "--threads", "1", "--quiet"]) == 0
    tok = AlbertTokenizer.from_pretrained(out)
    assert tok.fingerprint() == trained.fingerprint()
    capsys.readouterr()
    assert main(["tokenizer", "encode", "--tokenizer", str(out), "--text", "Kalo mi, 12, ne", "--pieces",
                 "--offsets"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["input_ids"] == tok("Kalo mi, 12, ne")["input_ids"]
    assert row["pieces"][0] == "[CLS]" and row["offsets"][0] == [0, 0]


def test_cli_errors_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert main(["tokenizer", "train", "--input", str(empty), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: empty corpus" in err and "Traceback" not in err
    assert main(["tokenizer", "encode", "--tokenizer", str(tmp_path / "missing"), "--text", "x"]) == 2
    assert "no such tokenizer folder" in capsys.readouterr().err


def test_cli_directory_quoted_glob_and_xz(corpus, trained, tmp_path, capsys):
    """`--input corpus/` (as the README shows) and a glob the shell did not expand (quoted) both work."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "c.txt.xz").write_bytes(lzma.compress(corpus.read_bytes()))
    for given in (str(tmp_path / "corpus") + "/", str(tmp_path / "corpus" / "*.xz")):
        out = tmp_path / "tok"
        assert main(["tokenizer", "train", "--input", given, "--out", str(out), "--vocab-size", "300",
                     "--threads", "1", "--quiet", "--overwrite"]) == 0, capsys.readouterr().err
        assert AlbertTokenizer.from_pretrained(out).fingerprint() == trained.fingerprint(), given
    # encode --input reads through the same text input: compressed, one text a line
    capsys.readouterr()
    texts = tmp_path / "texts.xz"
    texts.write_bytes(lzma.compress("Kalo mi, 12, ne\nshi po\n".encode()))
    assert main(["tokenizer", "encode", "--tokenizer", str(tmp_path / "tok"), "--input", str(texts)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["input_ids"] for r in rows] == [trained("Kalo mi, 12, ne")["input_ids"], trained("shi po")["input_ids"]]


def test_cli_encoding_errors_option(corpus, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(corpus.read_bytes() + b"caf\xe9\n")
    offset = len(corpus.read_bytes()) + 3
    argv = ["tokenizer", "train", "--input", str(bad), "--out", str(tmp_path / "tok"), "--vocab-size", "300",
            "--threads", "1", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"bad.txt:{len(generated_lines()) + 1}: invalid UTF-8 at byte offset {offset} (byte 0xe9)" in err
    assert "--encoding-errors replace" in err and "Traceback" not in err
    assert main(argv + ["--encoding-errors", "replace"]) == 0
