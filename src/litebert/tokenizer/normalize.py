"""The official ALBERT text normalization, and the same with a map back to the original characters (for offsets).

``preprocess_text`` is google-research/albert ``tokenization.preprocess_text``: collapse whitespace runs
(``str.split``) and strip the ends, NFKD-decompose and drop combining marks, lower-case -- plus, as XLNet's
``prepro_utils`` and HF do, the LaTeX quotes ```` `` ```` and ``''`` read as ``"``. ``normalize_with_spans`` gives the
same text and, per output character, the span of input characters it came from; `AlbertTokenizer.encode_with_offsets`
composes it with SentencePiece's own offsets into the normalized text.

Accent stripping is meant for the diacritics of Latin, Greek and Cyrillic (``café`` -> ``cafe``); in other scripts the
same step removes marks that are letters' parts (the Devanagari virama: ``नमस्ते`` -> ``नमसते``; the Arabic hamza:
``أ`` -> ``ا``; the Japanese dakuten: ``が`` -> ``か``). `StrippedMarksCheck` measures that on a corpus as it is read
and warns once, so that training and data preparation can say when ``keep_accents`` is needed.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import warnings
from collections import Counter

import numpy as np

_WORD = re.compile(r"\S+")  # re's \s is str.isspace's (and str.split's) whitespace


def preprocess_text(text: str, *, remove_space: bool = True, lower: bool = True, keep_accents: bool = False) -> str:
    """The official normalization (tokenization.preprocess_text), plus the ``/'' quote mapping."""
    if remove_space:
        text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text


def normalize_with_spans(text: str, *, remove_space: bool = True, lower: bool = True, keep_accents: bool = False):
    """:func:`preprocess_text` that also returns, per output character, the span [start, end) of input characters it
    came from. Returns ``(normalized, starts, ends)``; ``normalized == preprocess_text(text, ...)`` always.

    With ``remove_space`` (the default) it works word by word: whitespace runs become one space spanning the run, and
    a plain-ASCII word without LaTeX quotes maps character for character (``lower`` keeps ASCII lengths), so only the
    other words go through the per-character path. Every later step of the normalization acts within a word: the
    quote pairs and NFKD never span whitespace, and ``str.lower``'s one context rule (final sigma) stops at it.
    """
    if not remove_space:
        return _normalize_chars(text, remove_space=False, lower=lower, keep_accents=keep_accents)
    starts: list[int] = []
    ends: list[int] = []
    words: list[str] = []  # normalized, when not `plain`
    plain = text.isascii() and "``" not in text and "''" not in text  # every word maps character for character
    prev = -1
    for m in _WORD.finditer(text):
        a, b = m.span()
        if prev >= 0:  # one space for the whitespace run between two words
            starts.append(prev), ends.append(a)
        prev = b
        word = "" if plain else m.group()
        if plain or (word.isascii() and "``" not in word and "''" not in word):
            starts.extend(range(a, b))
            ends.extend(range(a + 1, b + 1))
            words.append(word.lower() if lower else word)
        else:
            w, ws, we = _normalize_chars(word, remove_space=False, lower=lower, keep_accents=keep_accents)
            words.append(w)
            starts.extend([s + a for s in ws])
            ends.extend([e + a for e in we])
    if plain:
        norm = " ".join(text.split())
        return (norm.lower() if lower else norm), starts, ends
    return " ".join(words), starts, ends


def _normalize_chars(text: str, *, remove_space: bool, lower: bool, keep_accents: bool):
    """:func:`normalize_with_spans` character by character (the reference the word-wise path is tested against)."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    if remove_space:  # " ".join(text.strip().split()): one space per inner whitespace run, spanning the run
        i, n = 0, len(text)
        while i < n:
            if text[i].isspace():
                j = i
                while j < n and text[j].isspace():
                    j += 1
                if chars and j < n:
                    chars.append(" "), starts.append(i), ends.append(j)
                i = j
            else:
                chars.append(text[i]), starts.append(i), ends.append(i + 1)
                i += 1
    else:
        chars, starts, ends = list(text), list(range(len(text))), list(range(1, len(text) + 1))
    for pair in ("``", "''"):  # str.replace: left to right, non-overlapping; '"' spans both quotes
        i, out_c, out_s, out_e = 0, [], [], []
        while i < len(chars):
            if i + 1 < len(chars) and chars[i] == pair[0] and chars[i + 1] == pair[1]:
                out_c.append('"'), out_s.append(starts[i]), out_e.append(ends[i + 1])
                i += 2
            else:
                out_c.append(chars[i]), out_s.append(starts[i]), out_e.append(ends[i])
                i += 1
        chars, starts, ends = out_c, out_s, out_e
    if not keep_accents:
        # NFKD is a per-character decomposition followed by a reordering of combining marks only; as every combining
        # mark is then dropped, decomposing character by character gives exactly the whole-string result.
        out_c, out_s, out_e = [], [], []
        for c, s, e in zip(chars, starts, ends):
            for d in unicodedata.normalize("NFKD", c) if ord(c) > 127 else c:
                if not unicodedata.combining(d):
                    out_c.append(d), out_s.append(s), out_e.append(e)
        chars, starts, ends = out_c, out_s, out_e
    if lower:
        # str.lower may lengthen a character ("İ" -> "i̇") and is context-sensitive only for the final sigma (same
        # length either way): slice the whole-string result by per-character lengths.
        whole = "".join(chars).lower()
        out_c, out_s, out_e, k = [], [], [], 0
        for c, s, e in zip(chars, starts, ends):
            m = len(c.lower())
            for d in whole[k:k + m]:
                out_c.append(d), out_s.append(s), out_e.append(e)
            k += m
        chars, starts, ends = out_c, out_s, out_e
    return "".join(chars), starts, ends


# ---------------------------------------------------------------------------- what accent stripping removes, measured

STRIP_SAMPLE_CHARS = 4_000_000  # the characters at the beginning of a corpus that `StrippedMarksCheck` measures
STRIP_WARN_SHARE = 0.001  # it warns when at least this share of them lose a mark their script needs
_COUNT_BATCH = 1 << 20  # characters of non-ASCII text counted at once
_INTENDED_SCRIPTS = frozenset({"LATIN", "GREEK", "CYRILLIC"})  # whose diacritics the official stripping is for
# The blocks of combining marks shared by the Latin, Greek and Cyrillic scripts (Combining Diacritical Marks, their
# Extended and Supplement blocks, marks for symbols, half marks).
_GENERIC_MARKS = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F))


def _name_script(c: str) -> str:
    """The script of ``c`` as its Unicode name gives it: ``DEVANAGARI`` for DEVANAGARI SIGN VIRAMA, ``HIRAGANA`` for
    HIRAGANA LETTER KA, ``KATAKANA-HIRAGANA`` for COMBINING KATAKANA-HIRAGANA VOICED SOUND MARK."""
    words = unicodedata.name(c, "").split()
    if words[:1] == ["COMBINING"]:
        words = words[1:]
    return words[0] if words else ""


@functools.lru_cache(maxsize=1 << 12)
def stripped_script(c: str) -> str | None:
    """The script whose combining mark accent stripping (NFKD, then dropping every character with a non-zero
    combining class, as `preprocess_text`) removes from the character ``c``, or None when it removes none or only a
    diacritic of Latin, Greek or Cyrillic, which is what the official normalization means to strip.

    The mark is ``c`` itself (the virama ``्``: ``DEVANAGARI``) or comes out of it (the hamza of ``أ``: ``ARABIC``;
    the dakuten of ``が``: ``HIRAGANA``); a mark that came out of a letter belongs to that letter's script, and a
    lone mark of the shared diacritic blocks is taken for a Latin one.
    """
    if ord(c) < 0x300:  # ASCII, Latin-1, Latin Extended and IPA: Latin diacritics at most
        return None
    parts = unicodedata.normalize("NFKD", c)
    marks = [m for m in parts if unicodedata.combining(m)]
    if not marks:
        return None
    if unicodedata.category(parts[0]).startswith("L"):  # a precomposed letter (é, أ, が)
        script = _name_script(parts[0])
    elif all(any(a <= ord(m) <= b for a, b in _GENERIC_MARKS) for m in marks):
        return None
    else:
        script = _name_script(marks[0])
    return None if script in _INTENDED_SCRIPTS else script


def _trim_punctuation(word: str) -> str:
    """``word`` without the punctuation (Unicode category P*) at its ends."""
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("P"):
        end -= 1
    return word[start:end]


def _percent(share: float) -> str:
    """``7.9%``, ``0.15%``, ``12%``: two significant digits below 10%, whole percents above."""
    return f"{100 * share:.2g}%" if share < 0.1 else f"{100 * share:.0f}%"


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


class StrippedMarksCheck:
    """Measures, on the beginning of a corpus as it is read, the share of its characters that accent stripping would
    rob of a combining mark their script needs (`stripped_script`), and warns once (`warnings.warn`) when it is at
    least ``warn_share``; ``advice`` ends the warning (how the caller keeps the marks).

    Give it each text read with `add`, and call `finish` at the end of the corpus. It measures the first
    ``sample_chars`` characters only (it warns, if it has to, once the corpus goes on past them). An ASCII text
    costs a `str.isascii` and a `len`; the characters of the others are counted in batches with numpy (about a
    tenth of the time a `Counter` takes), and each distinct character is classified once, at the end.
    """

    def __init__(self, advice: str, *, sample_chars: int = STRIP_SAMPLE_CHARS, warn_share: float = STRIP_WARN_SHARE):
        self.advice, self.sample_chars, self.warn_share = advice, sample_chars, warn_share
        self.chars = 0  # characters measured
        self._counts: Counter = Counter()  # each character of the non-ASCII texts measured (once counted)
        self._pending: list[str] = []  # non-ASCII texts not counted yet
        self._pending_chars = 0
        self.cut = False  # the corpus went on after the characters measured
        self.done = False
        self._examples: list[str] = []  # the beginning of the non-ASCII text, where an example word is looked for
        self._example_room = 1 << 16

    def add(self, text: str) -> None:
        if self.done:
            return
        if self.chars >= self.sample_chars:  # the corpus goes on past the characters measured
            self.cut = True
            self.finish()
            return
        room = self.sample_chars - self.chars
        if len(text) > room:
            text, self.cut = text[:room], True
        self.chars += len(text)
        if not text.isascii():
            self._pending.append(text)
            self._pending_chars += len(text)
            if self._pending_chars >= _COUNT_BATCH:
                self._count_pending()
            if self._example_room > 0:
                self._examples.append(text[:self._example_room])
                self._example_room -= len(self._examples[-1])

    def _count_pending(self) -> None:
        """Add the characters of the pending texts to `_counts`: a histogram of their code points."""
        if self._pending:
            codes = np.frombuffer("".join(self._pending).encode("utf-32-le", "surrogatepass"), dtype="<u4")
            histogram = np.bincount(codes)
            for code in np.flatnonzero(histogram):
                self._counts[chr(code)] += int(histogram[code])
            self._pending, self._pending_chars = [], 0

    def affected(self) -> Counter:
        """How many of the characters measured lose a mark, per script (`stripped_script`)."""
        self._count_pending()
        per_script: Counter = Counter()
        for c, n in self._counts.items():
            script = stripped_script(c)
            if script:
                per_script[script] += n
        return per_script

    def message(self) -> str | None:
        """The warning, or None when fewer than ``warn_share`` of the characters measured lose a mark."""
        per_script = self.affected()
        lost = sum(per_script.values())
        if lost == 0 or lost < self.warn_share * self.chars:
            return None
        scripts = [s for s, _ in per_script.most_common()]
        where = f"the first {self.chars:,} characters of the corpus" if self.cut else "the corpus's characters"
        return (f"{_percent(lost / self.chars)} of {where} are or carry combining marks of "
                f"{_join([s.title() for s in scripts])} that accent stripping removes ({self._example(scripts[0])}); "
                f"{self.advice}")

    def _example(self, script: str) -> str:
        """``word -> stripped word`` for the first word of the measured text that loses a mark of ``script``."""
        for text in self._examples:
            for word in text.split():
                if any(stripped_script(c) == script for c in word):
                    word = _trim_punctuation(word) or word
                    return f"{word} -> {preprocess_text(word, lower=False)}"
        c = next(c for c in self._counts if stripped_script(c) == script)
        return f"U+{ord(c):04X} {unicodedata.name(c, '')}"

    def finish(self) -> None:
        """Warn if the characters measured call for it; once: later calls (and `add`) do nothing."""
        if not self.done:
            self.done = True
            message = self.message()
            if message:
                warnings.warn(message, stacklevel=2)
