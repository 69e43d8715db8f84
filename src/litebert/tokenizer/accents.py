"""Whether a new vocabulary keeps its corpus's accents: decided once, from a sample of the corpus's words.

The official normalization strips accents (NFKD, then every combining mark is dropped: `normalize.preprocess_text`).
That is what it was made for in English (``café`` -> ``cafe``), but in most other scripts the marks are part of the
spelling: the Devanagari virama and nukta (``प्रधानमंत्री`` -> ``परधानमंतरी``), the Arabic hamza (``الأهرامات`` ->
``الاهرامات``), the Russian ``ё`` and ``й`` (``Её`` -> ``ее``), Greek accents, Japanese dakuten. A vocabulary trained
on stripped text cannot spell those words again, so `train_tokenizer` without an explicit ``keep_accents`` measures,
on a sample of the lines it reads, the share of words that stripping changes by removing a mark other than a
diacritic of a Latin-script letter, and keeps the accents when it is at least `KEEP_SHARE`. English with a few
``café`` / ``naïve`` (Latin diacritics only) keeps the official normalization; so does a Latin-script language such
as French or Vietnamese (pass ``keep_accents=True`` for those).

The sample spreads over the whole corpus (a corpus of English files followed by Hindi ones is judged on both): every
``stride``-th line is measured, and when more than ``max_lines`` lines have been measured, every other one is dropped
and the stride doubles, so the sample stays between ``max_lines / 2`` and ``max_lines`` lines, evenly spaced.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from litebert.tokenizer.normalize import _GENERIC_MARKS, _name_script, _percent, _trim_punctuation, preprocess_text

KEEP_SHARE = 0.01  # keep accents when at least this share of the sampled words would lose a non-Latin mark
SAMPLE_LINES = 40_000  # the most lines measured at once (the sample holds half to all of this many)
_LETTER = re.compile(r"[^\W\d_]")  # a letter (\w without digits and the underscore)
_FILLER = {"COMBINING", "SIGN", "POINT", "CHARACTER", "MARK"}  # words of a mark's Unicode name that name no sound


@functools.lru_cache(maxsize=1 << 16)
def word_marks(word: str) -> tuple[tuple[str, str], ...]:
    """The marks accent stripping removes from ``word`` other than diacritics of Latin letters, as (script, mark)
    pairs: ``प्रधानमंत्री`` -> ``(("DEVANAGARI", "\\u094d"),) * 2``, ``Её`` -> ``(("CYRILLIC", "\\u0308"),)``,
    ``café`` -> ``()``.

    A mark that comes out of a precomposed letter (``ё``, ``أ``, ``が``) belongs to that letter's script; a lone
    mark to the script its Unicode name gives (DEVANAGARI SIGN VIRAMA), or, for a mark of the blocks Latin, Greek
    and Cyrillic share (a decomposed ``е`` + COMBINING DIAERESIS), to the letter before it. Marks on symbols
    (``≠`` = ``=`` + COMBINING LONG SOLIDUS OVERLAY) do not count.
    """
    found = []
    script = ""  # of the last letter
    for c in word:
        if ord(c) < 0x300:  # ASCII, Latin-1, Latin Extended, IPA: Latin letters with at most Latin diacritics
            script = "LATIN" if c.isalpha() else script
            continue
        parts = unicodedata.normalize("NFKD", c)
        marks = [m for m in parts if unicodedata.combining(m)]
        if not unicodedata.combining(parts[0]):  # a letter or symbol, maybe precomposed
            if not unicodedata.category(parts[0]).startswith("L"):
                continue
            script = _name_script(parts[0])
            owner = script
        elif all(any(a <= ord(m) <= b for a, b in _GENERIC_MARKS) for m in marks):
            owner = script  # a shared diacritic: the letter it follows
        else:
            owner = _name_script(marks[0])
        if owner and owner != "LATIN":
            found.extend((owner, m) for m in marks)
    return tuple(found)


def mark_name(script: str, mark: str) -> str:
    """``Devanagari virama``, ``Arabic hamza above``, ``Cyrillic diaeresis``: the mark as a reader names it."""
    words = [w for w in unicodedata.name(mark, f"U+{ord(mark):04X}").split() if w not in _FILLER]
    if words and words[0] == script:
        words = words[1:]
    name = " ".join(words).lower()
    return name if script.lower() in name else f"{script.title()} {name}"


@dataclass
class AccentSample:
    """The words of an evenly spaced sample of a corpus's lines, and those that accent stripping would change by
    removing a mark other than a Latin diacritic (module docstring). Give it every line read with `add`."""

    max_lines: int = SAMPLE_LINES
    stride: int = 1
    lines: int = 0  # lines seen
    rows: list = field(default_factory=list)  # per measured line: (words, changed words, Counter of (script, mark))
    example: str = ""  # the first changed word, for the message

    def add(self, line: str) -> None:
        index, self.lines = self.lines, self.lines + 1
        if index % self.stride:
            return
        self.rows.append(self._measure(line))
        if len(self.rows) > self.max_lines:  # keep the lines at multiples of twice the stride
            self.rows, self.stride = self.rows[::2], self.stride * 2

    def _measure(self, line: str) -> tuple[int, int, Counter | None]:
        words = [w for w in line.split() if _LETTER.search(w)]
        if line.isascii():
            return len(words), 0, None
        changed, marks = 0, None
        for word in words:
            found = word_marks(word)
            if found:
                changed += 1
                marks = marks if marks is not None else Counter()
                marks.update(found)
                if not self.example:
                    word = _trim_punctuation(word) or word
                    self.example = f"{word} -> {preprocess_text(word, lower=False)}"
        return len(words), changed, marks

    @property
    def words(self) -> int:
        return sum(r[0] for r in self.rows)

    @property
    def changed(self) -> int:
        return sum(r[1] for r in self.rows)

    def share(self) -> float:
        """The share of the sampled words that stripping would change (0 without words)."""
        words = self.words
        return self.changed / words if words else 0.0

    def keep_accents(self) -> bool:
        return self.words > 0 and self.share() >= KEEP_SHARE

    def marks(self) -> list[str]:
        """The marks removed, most frequent first, named (`mark_name`)."""
        total: Counter = Counter()
        for r in self.rows:
            if r[2]:
                total.update(r[2])
        return [mark_name(script, mark) for (script, mark), _ in total.most_common()]

    def message(self) -> str:
        """The one line that says what was chosen and why."""
        words, share = self.words, self.share()
        of = f"{_percent(share)} of the {words:,} words sampled"
        if self.keep_accents():
            marks = self.marks()
            shown = ", ".join(marks[:4]) + (", ..." if len(marks) > 4 else "")
            return (f"keeping accents: {of} would change under accent stripping ({shown}: {self.example}); "
                    "pass --strip-accents (keep_accents=False) for the official normalization")
        if self.changed == 0:
            why = "no word sampled would lose a mark other than a Latin diacritic"
        else:
            why = (f"{of} would lose a mark other than a Latin diacritic, below the {_percent(KEEP_SHARE)} that "
                   "keeps them")
        return f"stripping accents (the official ALBERT normalization): {why}; pass --keep-accents to keep them"

    def record(self) -> dict:
        """What the tokenizer folder's marker records about the choice."""
        return {"keep_accents": self.keep_accents(), "chosen": "from the corpus", "words_sampled": self.words,
                "words_changed": self.changed, "keep_share": KEEP_SHARE, "marks": self.marks()[:8]}
