"""The warning that accent stripping removes combining marks a script needs: which characters count (hand-picked,
with their Unicode facts), the measured share (against an independent unicodedata count and a hand count), and that
training asked to strip (a new vocabulary otherwise keeps such marks: tests/tokenizer/test_tokenizer_accents.py), data
preparation and the command line warn once for Hindi and never for English, Russian or keep_accents."""

import subprocess
import sys
import unicodedata
import warnings
from pathlib import Path

import pytest

from litebert.data.store import prepare_store
from litebert.tokenizer import train_tokenizer
from litebert.tokenizer.normalize import StrippedMarksCheck, stripped_script

REPO = Path(__file__).resolve().parents[2]
ALBERT_30K = REPO / "data" / "albert-30k"  # keep_accents false, as the official English vocabulary

HINDI = ["नमस्ते दुनिया!", "भारत के प्रधानमंत्री ने आज दिल्ली में भाषण दिया।", "उन्होंने ज़िंदगी के बारे में बात की।",
         "क्या आपने सुना? हाँ, मैंने सुना।", "यह एक छोटा सा उदाहरण है।", "हम कल स्कूल जाएँगे।"]
RUSSIAN = ["Привет! Меня зовут Алёша.", "Я живу в Москве и пью чай с ёжиком.", "Какой чудесный день!"]


def marked_share(text: str) -> float:
    """The share of the characters of ``text`` that are, or decompose (NFKD) into, a character with a non-zero
    canonical combining class: for text of a single non-Latin script, what stripping takes a mark from."""
    hits = sum(1 for c in text if any(unicodedata.combining(d) for d in unicodedata.normalize("NFKD", c)))
    return hits / len(text)


def percent(share: float) -> str:
    return f"{100 * share:.2g}%"


@pytest.mark.parametrize("char, script", [
    ("a", None), ("é", None), ("ё", None), ("й", None), ("ά", None), ("ệ", None),  # the official intent
    ("\u0301", None), ("≠", None),  # a lone COMBINING ACUTE ACCENT; NOT EQUAL TO = '=' + COMBINING LONG SOLIDUS
    ("\u094d", "DEVANAGARI"), ("\u093c", "DEVANAGARI"), ("\u095b", "DEVANAGARI"),  # virama, nukta, ज़ precomposed
    ("\u0902", None),  # the anusvara: category Mn but combining class 0, so stripping keeps it
    ("أ", "ARABIC"), ("\u064b", "ARABIC"),  # ALEF WITH HAMZA ABOVE -> ALEF + HAMZA ABOVE; FATHATAN
    ("が", "HIRAGANA"), ("ガ", "KATAKANA"), ("\u3099", "KATAKANA-HIRAGANA"),  # dakuten precomposed and alone
    ("\u0e48", "THAI"), ("\u05b8", "HEBREW"), ("\u09cd", "BENGALI"), ("\u0bcd", "TAMIL"),
    ("한", None), ("你", None),  # Hangul decomposes into conjoining jamo (combining class 0); Han never decomposes
])
def test_which_characters_lose_a_mark(char, script):
    assert stripped_script(char) == script


def test_share_and_message_hand_counted():
    check = StrippedMarksCheck("advice")
    check.add("नमस्ते")  # न म स ् त े: six characters, one virama
    check.add("Hello")
    assert check.chars == 11 and check.affected() == {"DEVANAGARI": 1}
    assert check.message() == ("9.1% of the corpus's characters are or carry combining marks of Devanagari that accent "
                               "stripping removes (नमस्ते -> नमसते); advice")


def test_share_against_unicodedata_and_scripts_by_count():
    text = " ".join(HINDI)
    check = StrippedMarksCheck("advice")
    for line in HINDI:
        check.add(line)
    share = marked_share("".join(HINDI))
    assert 0.02 < share < 0.2
    assert sum(check.affected().values()) / check.chars == pytest.approx(share)
    mixed = StrippedMarksCheck("advice")
    mixed.add(" أنا أحب القراءة كثيراً. ありがとう " + text)  # Arabic: أ, أ and the fathatan ً; Hiragana: が
    devanagari = round(marked_share(text) * len(text))
    assert devanagari > 3
    assert mixed.affected() == {"DEVANAGARI": devanagari, "ARABIC": 3, "HIRAGANA": 1}
    assert "combining marks of Devanagari, Arabic and Hiragana that" in mixed.message()  # most affected first


def test_measures_the_first_characters_only_and_warns_once():
    check = StrippedMarksCheck("advice", sample_chars=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check.add("नमस्ते")
        check.add("नमस्ते")  # its first 4 characters (न म स ्) fill the sample
        assert caught == []
        check.add("Hello world, more text")  # the corpus goes on: the warning, for the first 10 characters
        check.add("नमस्ते")
        check.finish()
    assert check.chars == 10
    assert [str(w.message) for w in caught] == [  # 2 viramas in 10 characters
        "20% of the first 10 characters of the corpus are or carry combining marks of Devanagari that accent "
        "stripping removes (नमस्ते -> नमसते); advice"]
    last = StrippedMarksCheck("advice", sample_chars=8)
    last.add("नमस्ते नमस्ते")  # one text, cut after 8 characters: "नमस्ते न"
    assert last.message() == ("12% of the first 8 characters of the corpus are or carry combining marks of Devanagari "
                              "that accent stripping removes (नमस्ते -> नमसते); advice")


def test_little_of_a_script_is_no_warning():
    check = StrippedMarksCheck("advice")
    check.add("x" * 1500 + " नमस्ते")  # 1 of 1507 characters: below 0.1%
    assert check.affected() == {"DEVANAGARI": 1} and check.message() is None
    check.add("नमस्ते")  # 2 of 1513
    assert check.message() is not None


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_train_tokenizer_warns_once_for_hindi(tmp_path):
    a, b = write(tmp_path / "a.txt", HINDI[:3]), write(tmp_path / "b.txt", HINDI[3:])
    with pytest.warns(UserWarning) as caught:
        train_tokenizer([a, b], tmp_path / "tok", 53, keep_accents=False, progress=False, num_threads=1)
    assert [str(w.message) for w in caught] == [
        f"{percent(marked_share(''.join(HINDI)))} of the corpus's characters are or carry combining marks of "
        "Devanagari that accent stripping removes (नमस्ते -> नमसते); train with --keep-accents (keep_accents=True) to "
        "keep them"]


# (vocabulary sizes that these small corpora support: SentencePiece refuses more pieces than a corpus yields)
@pytest.mark.parametrize("lines, keep_accents, vocab_size",
                         [(HINDI, True, 55), (RUSSIAN, False, 40), (None, False, 70)],
                         ids=["hindi-keep-accents", "russian", "english"])
def test_train_tokenizer_does_not_warn(tmp_path, lines, keep_accents, vocab_size):
    if lines is None:
        import lzma

        lines = lzma.decompress((REPO / "data" / "corpus" / "moby_dick.txt.xz").read_bytes()).decode().splitlines()
        lines = lines[:300]
    corpus = write(tmp_path / "c.txt", lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_tokenizer([corpus], tmp_path / "tok", vocab_size, keep_accents=keep_accents, progress=False,
                        num_threads=1)


@pytest.mark.parametrize("workers", [1, 2])
def test_prepare_store_warns_once_with_a_stripping_tokenizer(tmp_path, workers):
    corpus = write(tmp_path / "c.txt", [*HINDI[:3], "", *HINDI[3:]])  # two documents
    with pytest.warns(UserWarning) as caught:
        prepare_store([corpus], ALBERT_30K, tmp_path / "store", workers=workers, block_chars=100, progress=False)
    assert [str(w.message) for w in caught] == [
        f"{percent(marked_share(''.join(HINDI)))} of the corpus's characters are or carry combining marks of "
        "Devanagari that accent stripping removes (नमस्ते -> नमसते); prepare with a tokenizer trained with "
        "--keep-accents (keep_accents=True) to keep them"]


def test_prepare_store_does_not_warn_for_a_tokenizer_keeping_accents(tmp_path):
    from litebert.tokenizer import AlbertTokenizer

    corpus = write(tmp_path / "c.txt", HINDI)
    tok = AlbertTokenizer.from_pretrained(ALBERT_30K, keep_accents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_store([corpus], tok, tmp_path / "store", progress=False)


def test_command_line_prints_one_warning_line(tmp_path):
    corpus = write(tmp_path / "c.txt", HINDI)
    run = subprocess.run([sys.executable, "-m", "litebert.cli", "tokenizer", "train", "--input", str(corpus),
                          "--vocab-size", "53", "--out", str(tmp_path / "tok"), "--threads", "1", "--quiet",
                          "--strip-accents"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert [line for line in run.stderr.splitlines() if line.strip()] == [
        f"warning: {percent(marked_share(''.join(HINDI)))} of the corpus's characters are or carry combining marks of "
        "Devanagari that accent stripping removes (नमस्ते -> नमसते); train with --keep-accents (keep_accents=True) to "
        "keep them"]


@pytest.mark.parametrize("options, warns", [({}, True), ({"strip_accents": False}, False),
                                            ({"do_lower_case": False}, False)])
def test_prepare_store_with_a_wordpiece_tokenizer_follows_its_strip_accents(tmp_path, options, warns):
    """BERT's rule: strip_accents None follows do_lower_case (so lower-casing strips); False keeps the marks."""
    from helpers import bert_tokenizer_folder

    bert_tokenizer_folder(tmp_path / "wp", **options)
    corpus = write(tmp_path / "c.txt", HINDI)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prepare_store([corpus], tmp_path / "wp", tmp_path / "store", progress=False)
    messages = [str(w.message) for w in caught if "accent stripping" in str(w.message)]
    if warns:
        assert len(messages) == 1 and '"strip_accents": false' in messages[0] and "Devanagari" in messages[0]
    else:
        assert messages == []
