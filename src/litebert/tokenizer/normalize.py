"""The official ALBERT text normalization, and the same with a map back to the original characters (for offsets).

``preprocess_text`` is google-research/albert ``tokenization.preprocess_text``: collapse whitespace runs
(``str.split``) and strip the ends, NFKD-decompose and drop combining marks, lower-case -- plus, as XLNet's
``prepro_utils`` and HF do, the LaTeX quotes ```` `` ```` and ``''`` read as ``"``. ``normalize_with_spans`` gives the
same text and, per output character, the span of input characters it came from; `AlbertTokenizer.encode_with_offsets`
composes it with SentencePiece's own offsets into the normalized text.
"""

from __future__ import annotations

import re
import unicodedata

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
