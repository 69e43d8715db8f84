"""A new vocabulary keeps its corpus's accents when stripping would damage its words: which marks count (hand-picked,
with their Unicode facts), the measured share (against an independent NFKD count), the sample spread over the whole
corpus, and training on Hindi, Arabic and Russian (kept: the marks round-trip, also through HF's tokenizers on the
saved folder) and on English with a few accents (stripped: byte-identical to an explicit strip and equal to HF's
official SentencePiece AlbertTokenizer). The explicit choices win both ways, in Python and on the command line."""

import json
import lzma
import random
import unicodedata
import warnings
from pathlib import Path

import pytest

from litebert.cli import main
from litebert.tokenizer import AlbertTokenizer, train_tokenizer
from litebert.tokenizer.accents import AccentSample, mark_name, word_marks

REPO = Path(__file__).resolve().parents[2]

# Word lists the corpora are generated from; each holds words whose marks stripping removes (the virama ्, the nukta
# ़, the hamza of أ إ ؤ ئ, the tanwin ً, the Russian ё and й) and words it leaves alone.
WORDS = {
    "hindi": ["प्रधानमंत्री", "भारत", "के", "ने", "आज", "दिल्ली", "में", "भाषण", "दिया", "ज़िंदगी", "बारे", "बात", "की",
              "स्कूल", "जाएँगे", "हम", "कल", "नमस्ते", "क्या", "आपने", "सुना", "यह", "एक", "छोटा", "उदाहरण", "है",
              "किताब", "अच्छा", "लगता", "मुझे", "उन्होंने", "सरकार", "शिक्षक", "बच्चे", "खेलते", "हैं", "पानी"],
    "arabic": ["الأهرامات", "في", "مصر", "أنا", "أحب", "القراءة", "كثيراً", "هل", "تحب", "الكتب", "نعم", "جداً",
               "المدرسة", "إلى", "ذهبت", "الطالب", "مع", "أصدقائي", "سؤال", "القاهرة", "مدينة", "كبيرة", "البحر",
               "الشمس", "اليوم", "جميل", "كتاب", "على", "الطاولة", "رأيت"],
    "russian": ["Её", "мой", "новый", "дом", "большой", "ёжик", "живёт", "в", "лесу", "Москва", "город", "красивый",
                "я", "читаю", "книгу", "твой", "друг", "пьёт", "чай", "край", "учитель", "говорит", "самолёт",
                "летит", "высоко", "мы", "идём", "домой", "сегодня", "холодно", "какой", "день"],
}
END = {"hindi": "।", "arabic": ".", "russian": "."}
VOCAB = {"hindi": 80, "arabic": 50, "russian": 55}  # these corpora support at most 92, 53 and 58 pieces
MARKS = {"hindi": {"Devanagari virama", "Devanagari nukta"},
         "arabic": {"Arabic hamza above", "Arabic hamza below", "Arabic fathatan"},
         "russian": {"Cyrillic breve", "Cyrillic diaeresis"}}


def generated(language: str, n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = WORDS[language]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) + END[language] for _ in range(n)]


def english(n: int = 300) -> list[str]:
    """Moby-Dick lines, every 30th with a few French loan words in it."""
    lines = lzma.decompress((REPO / "data" / "corpus" / "moby_dick.txt.xz").read_bytes()).decode().splitlines()
    lines = [line for line in lines if line.strip()][:n]
    loans = ["café", "naïve", "résumé", "Zoë", "fiancée", "déjà vu", "jalapeño"]
    return [f"{line} {loans[i // 30 % len(loans)]}" if i % 30 == 0 else line for i, line in enumerate(lines)]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def damaged_share(lines: list[str]) -> tuple[int, int]:
    """(words, words that NFKD splits a combining mark off): for text of one non-Latin script, the words stripping
    changes, counted with unicodedata alone."""
    words = [w for line in lines for w in line.split() if any(c.isalpha() for c in w)]
    changed = [w for w in words if any(unicodedata.combining(c) for c in unicodedata.normalize("NFKD", w))]
    return len(words), len(changed)


def percent(share: float) -> str:
    return f"{100 * share:.2g}%" if share < 0.1 else f"{100 * share:.0f}%"


# ------------------------------------------------------------------------------------------ what counts
@pytest.mark.parametrize("word, marks", [
    ("प्रधानमंत्री", [("DEVANAGARI", "\u094d")] * 2),  # two viramas; the anusvara ं has combining class 0
    ("ज़िंदगी", [("DEVANAGARI", "\u093c")]),  # U+095B precomposed: NFKD gives ज + nukta
    ("ज\u093cिंदगी", [("DEVANAGARI", "\u093c")]),  # the same word with the nukta written apart
    ("الأهرامات", [("ARABIC", "\u0654")]),  # ALEF WITH HAMZA ABOVE
    ("كثيراً", [("ARABIC", "\u064b")]),  # FATHATAN
    ("Её", [("CYRILLIC", "\u0308")]),  # ё = е + diaeresis (Е has none)
    ("йод", [("CYRILLIC", "\u0306")]),  # и + breve
    ("е\u0308ж", [("CYRILLIC", "\u0308")]),  # a decomposed ё: the shared diaeresis goes with the letter before it
    ("Ἀθῆναι", [("GREEK", "\u0313"), ("GREEK", "\u0342")]),
    ("が", [("HIRAGANA", "\u3099")]),
    ("café", []), ("naïve", []), ("Zoë", []), ("tiếng", []), ("e\u0301", []),  # Latin diacritics: the official intent
    ("≠", []), ("한국어", []), ("你好", []), ("hello", []), ("42", []),
])
def test_which_marks_count(word, marks):
    assert list(word_marks(word)) == marks
    if marks:  # every mark counted is one that stripping removes
        assert all(unicodedata.combining(m) for _, m in marks)


def test_mark_names():
    assert [mark_name(s, m) for s, m in [("DEVANAGARI", "\u094d"), ("DEVANAGARI", "\u093c"), ("ARABIC", "\u0654"),
                                          ("CYRILLIC", "\u0308"), ("CYRILLIC", "\u0306"), ("HIRAGANA", "\u3099")]] == [
        "Devanagari virama", "Devanagari nukta", "Arabic hamza above", "Cyrillic diaeresis", "Cyrillic breve",
        "katakana-hiragana voiced sound"]


def test_share_hand_counted():
    sample = AccentSample()
    sample.add("नमस्ते दुनिया 42 !")  # two words with letters, नमस्ते changes
    sample.add("Hello, café world")  # three words, none changes (Latin diacritics)
    sample.add("")
    assert (sample.lines, sample.words, sample.changed) == (3, 5, 1)
    assert sample.keep_accents() and sample.share() == pytest.approx(0.2)
    assert sample.message() == ("keeping accents: 20% of the 5 words sampled would change under accent stripping "
                                "(Devanagari virama: नमस्ते -> नमसते); pass --strip-accents (keep_accents=False) for "
                                "the official normalization")


def test_english_with_a_little_of_another_script_strips():
    sample = AccentSample()
    for line in english():
        sample.add(line)
    assert sample.changed == 0 and not sample.keep_accents()
    assert sample.message() == ("stripping accents (the official ALBERT normalization): no word sampled would lose a "
                                "mark other than a Latin diacritic; pass --keep-accents to keep them")
    sample.add("Он сказал: мой друг.")  # one Russian word with й among thousands of English ones
    assert sample.changed == 1 and not sample.keep_accents()
    assert "would lose a mark other than a Latin diacritic, below the 1% that keeps them" in sample.message()


def test_sample_spreads_over_the_whole_corpus():
    """Line i has i + 1 words; with room for 8 lines, 100 lines leave every 16th: the lines at multiples of 16."""
    sample = AccentSample(max_lines=8)
    for i in range(100):
        sample.add(" ".join(["w"] * (i + 1)))
    assert sample.stride == 16 and len(sample.rows) == 7
    assert sample.words == sum(i + 1 for i in range(0, 100, 16))
    late = AccentSample(max_lines=8)  # English first, Hindi at the end: the Hindi half is sampled too
    for line in english(200) + generated("hindi", 200):
        late.add(line)
    assert late.keep_accents() and 4 <= len(late.rows) <= 8


# ------------------------------------------------------------------------------------------ training
@pytest.fixture(scope="module", params=sorted(WORDS))
def trained(request, tmp_path_factory):
    language = request.param
    tmp = tmp_path_factory.mktemp(language)
    lines = generated(language)
    corpus = write(tmp / "corpus.txt", lines)
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("error")  # the marks are kept: no warning about stripping them
        tok = train_tokenizer([corpus], tmp / "tok", VOCAB[language], num_threads=1)
    return language, lines, tok, tmp / "tok", err.getvalue()


def test_non_latin_corpus_keeps_its_marks_and_says_why(trained):
    language, lines, tok, folder, err = trained
    words, changed = damaged_share(lines)
    said = [line for line in err.splitlines() if line.startswith(("keeping", "stripping"))]
    assert len(said) == 1 and said[0].startswith(
        f"keeping accents: {percent(changed / words)} of the {words:,} words sampled would change under accent "
        "stripping (")
    assert said[0].endswith("); pass --strip-accents (keep_accents=False) for the official normalization")
    marks, example = said[0].split(" (", 1)[1].rsplit("); ", 1)[0].split(": ")
    assert set(marks.split(", ")) == MARKS[language]
    before, after = example.split(" -> ")
    assert before in WORDS[language] and after == "".join(c for c in unicodedata.normalize("NFKD", before)
                                                          if not unicodedata.combining(c))
    assert tok.keep_accents and tok.do_lower_case
    marker = json.loads((folder / ".litebert.json").read_text())
    assert marker["accents"]["keep_accents"] is True and marker["accents"]["words_sampled"] == words
    assert json.loads((folder / "tokenizer_config.json").read_text())["keep_accents"] is True


def test_marks_round_trip_through_the_trained_folder(trained):
    language, lines, tok, folder, _ = trained
    reloaded = AlbertTokenizer.from_pretrained(folder)
    assert reloaded.keep_accents
    for word in WORDS[language]:
        ids = reloaded.encode_ids(word)
        assert reloaded.unk_token_id not in ids, word
        # the tokenizer's normalization with the accents kept: lower-casing, then SentencePiece's NFKC
        assert reloaded.decode(ids) == unicodedata.normalize("NFKC", word.lower()), word
    stripped = AlbertTokenizer.from_pretrained(folder, keep_accents=False)
    damaged = [w for w in WORDS[language] if word_marks(w)]
    assert damaged and all(stripped.decode(stripped.encode_ids(w)) != reloaded.decode(reloaded.encode_ids(w))
                           for w in damaged)


def test_hf_reads_the_choice_from_the_folder(trained):
    transformers = pytest.importorskip("transformers")
    _, lines, tok, folder, _ = trained
    texts = generated(trained[0], 50, seed=1)
    ours = tok(texts)["input_ids"]
    assert transformers.AlbertTokenizer.from_pretrained(str(folder))(texts)["input_ids"] == ours  # SentencePiece
    assert transformers.AutoTokenizer.from_pretrained(str(folder))(texts)["input_ids"] == ours  # tokenizer.json


def test_english_with_accents_gets_the_official_normalization(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    lines = english()
    corpus = write(tmp_path / "en.txt", lines)
    tok = train_tokenizer([corpus], tmp_path / "auto", 300, num_threads=1)
    assert "stripping accents (the official ALBERT normalization): no word sampled" in capsys.readouterr().err
    assert not tok.keep_accents and tok.do_lower_case
    explicit = train_tokenizer([corpus], tmp_path / "strip", 300, keep_accents=False, num_threads=1, progress=False)
    assert (tmp_path / "auto" / "spiece.model").read_bytes() == (tmp_path / "strip" / "spiece.model").read_bytes()
    # HF's SentencePiece AlbertTokenizer with its defaults is the official normalization (keep_accents=False,
    # do_lower_case=True): the same ids on every line, the accented ones included
    hf = transformers.AlbertTokenizer(vocab_file=str(tmp_path / "auto" / "spiece.model"))
    assert tok(lines)["input_ids"] == hf(lines)["input_ids"]
    assert all(tok.normalize(line) == hf.preprocess_text(line).lower() for line in lines)
    assert tok.decode(tok.encode_ids("café")) == "cafe" == explicit.decode(explicit.encode_ids("café"))
    official = AlbertTokenizer.from_pretrained(REPO / "data" / "albert-30k")  # loading is untouched
    assert not official.keep_accents and official.tokenize("Café")[-1] == "▁cafe"


def test_explicit_choices_win(tmp_path, capsys):
    hindi = write(tmp_path / "hi.txt", generated("hindi"))
    with pytest.warns(UserWarning, match="Devanagari that accent stripping removes"):
        tok = train_tokenizer([hindi], tmp_path / "hi", 60, keep_accents=False, num_threads=1)
    assert not tok.keep_accents
    assert not any("\u094d" in p for p in tok.convert_ids_to_tokens(list(range(tok.vocab_size))))  # no virama
    assert "accents:" not in capsys.readouterr().err  # nothing chosen, nothing said
    english_corpus = write(tmp_path / "en.txt", english())
    tok = train_tokenizer([english_corpus], tmp_path / "en", 300, keep_accents=True, num_threads=1, progress=False)
    assert tok.keep_accents and tok.decode(tok.encode_ids("café")) == "café"
    assert json.loads((tmp_path / "en" / ".litebert.json").read_text())["accents"] == {"keep_accents": True,
                                                                                      "chosen": "given"}


@pytest.mark.parametrize("flag, keep", [("--strip-accents", False), ("--keep-accents", True), (None, True)])
def test_command_line_flags(tmp_path, capsys, flag, keep):
    corpus = write(tmp_path / "ru.txt", generated("russian"))
    args = ["tokenizer", "train", "--input", str(corpus), "--out", str(tmp_path / "tok"), "--vocab-size", "55",
            "--threads", "1", "--quiet"] + ([flag] if flag else [])
    assert main(args) == 0
    assert AlbertTokenizer.from_pretrained(tmp_path / "tok").keep_accents is keep
    with pytest.raises(SystemExit) as e:
        main(args[:-1] + ["--keep-accents", "--strip-accents"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
