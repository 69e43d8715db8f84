"""Texts shared by the tokenizer tests (tests/tokenizer/): a varied set, special tokens written in text, lines of
the bundled corpus, and the official ALBERT segmentation transcribed as the reference."""

from __future__ import annotations

import lzma
import random
import unicodedata

from helpers import REPO

CORPUS = REPO / "data" / "corpus"

# A varied set: accents, digits with commas, CJK, emoji, control characters, whitespace runs, empty strings,
# LaTeX quotes, user-defined pieces ( ) " - . – £ €, compatibility characters, combining marks, a long text.
VARIED = [
    "", "   ", "This is a test", "Hello, my dog is cute", "I was born in 92000, and this is falsé.",
    "Café naïve résumé Zürich Ångström", "Ελληνικά ΣΟΦΟΣ σοφός", "中文字符 日本語のテキスト 한국어",
    "emoji 😀👍🏽 ok 🇫🇷",
    "tab\there\nnew\r\nline", "ctrl\x00\x07\x1b[0m x", "a\u00a0b\u2003c\u3000d", "\x1c\x1d sep \x85 nel",
    "``quoted'' text ''x``", "In 2010, he paid 1,000,000, or 3,5 and 12,", "Thai สวัสดี ไทย", "हिन्दी भाषा",
    "İstanbul ǅ ß ﬁ ㎏ ① ½", "e\u0301 combining a\u0308 o\u0338", "\u200b\u200dzero width \ufeff bom",
    "(hello) [world] {x} <tag>", "well-known 4-our co-operate", "U.S.A. e.g. \"quote\" £5 €10 –dash — em",
    "MiXeD CaSe WORDS", "   leading and trailing   ", "x" * 300, "word " * 400,
]

SPECIALS = ["[MASK]", "[CLS]", "[SEP]", "<pad>", "<unk>"]
# Special tokens at the start, middle and end, adjacent, with and without spaces, inside words, in odd casing and
# broken forms (which stay text), next to user-defined pieces, digits with commas, accents, CJK, odd whitespace.
WRITTEN = [
    "Paris is [MASK].", "[MASK] is Paris", "Paris [MASK]", "[MASK]", "a[MASK]b", "a [MASK]b", "a[MASK] b",
    "[MASK][MASK]", "[MASK] [MASK] .", "x [CLS] y [SEP] z", "[mask] lower [Mask] [MASK ] [ MASK]", "<pad> <unk> x",
    "  [MASK]  .", "word[SEP]", "(hello) [MASK]-x", "Café [MASK] 2010, ok", "[[MASK]]", "[MASK", "MASK]",
    "<pad><pad>", "[SEP][CLS]", "\t[MASK]\n", "über[MASK]straße", "中文[MASK]字符", "In 2010,[MASK] 3,5",
    "``[MASK]''", "x\u3000[MASK]\u00a0y", "Ｆｕｌｌ [MASK] ｗｉｄｔｈ", "[CLS] already [SEP] framed [SEP]",
    "[MASK]ing un[MASK]able", "<unk>nown", "4-[MASK]-our", "the [MASK] [MASK] [MASK] end",
]


def with_specials(n: int, seed: int = 0) -> list[str]:
    """VARIED texts with a special token (sometimes glued to a neighbour) inserted at a random word boundary."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choice(VARIED[:25]).split(" ")
        words.insert(rng.randrange(len(words) + 1), rng.choice(SPECIALS) + rng.choice(["", "", ".", ",", "x"]))
        out.append(("" if rng.random() < 0.3 else " ").join(words))
    return out


def official_pieces(sp, text: str) -> list[str]:
    """google-research/albert tokenization.py, transcribed for Python 3 (the ``/'' mapping added as in the issue)."""
    outputs = " ".join(text.strip().split())
    outputs = outputs.replace("``", '"').replace("''", '"')
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join([c for c in outputs if not unicodedata.combining(c)]).lower()
    new_pieces = []
    for piece in sp.EncodeAsPieces(outputs):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            cur_pieces = sp.EncodeAsPieces(piece[:-1].replace("▁", ""))
            if piece[0] != "▁" and cur_pieces[0][0] == "▁":
                if len(cur_pieces[0]) == 1:
                    cur_pieces = cur_pieces[1:]
                else:
                    cur_pieces[0] = cur_pieces[0][1:]
            cur_pieces.append(piece[-1])
            new_pieces.extend(cur_pieces)
        else:
            new_pieces.append(piece)
    return new_pieces


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """``n`` random non-blank lines of the bundled demo corpus (data/corpus/*.txt.xz)."""
    files = sorted(CORPUS.glob("*.txt.xz"))
    assert files, f"the bundled demo corpus is missing from {CORPUS}"
    lines = [line for f in files for line in lzma.open(f, "rt", encoding="utf-8").read().splitlines() if line.strip()]
    return random.Random(seed).sample(lines, min(n, len(lines)))
