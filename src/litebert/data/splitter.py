"""A small rule-based sentence splitter for plain text and JSONL inputs.

The official ALBERT pipeline expects text that is already one sentence per line (its ``input_file`` format); corpora
that come as paragraphs (plain text, JSONL ``text`` fields) need splitting first. SOP/NSP only need *roughly* correct
sentence boundaries (the paper's segments are "one or more sentences"), so a transparent rule beats a heavy model:

A sentence ends after a terminator run -- ``.``, ``!``, ``?`` or ``…`` (possibly repeated, e.g. ``?!`` or ``...``),
optionally followed by closing quotes or brackets -- when it is followed by whitespace and then by something that can
start a sentence: an upper-case letter, a digit, or an opening quote/bracket followed by one of those. It does not
end there when the word before a ``.`` is

* a known abbreviation (``Mr.``, ``Dr.``, ``e.g.``, ``etc.``, ``No.``, ``Fig.`` ... see ``ABBREVIATIONS``),
* a single letter (an initial, as in ``J. R. R. Tolkien``), or
* a dotted acronym of single letters (``U.S.``, ``p.m.``), so "the U.S. Army" stays whole (and "in the U.S. The
  next..." is not split: the rule prefers missing a boundary to cutting a name in two).

Text in scripts without case (CJK) is split after the full-width terminators ``。！？``. Whitespace (including
newlines) inside a sentence is collapsed to single spaces.
"""

from __future__ import annotations

import re

# Lower-cased, without the final dot. Titles, Latin abbreviations, common reference words and months.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt rev gen col lt sgt capt cmdr adm gov sen rep pres hon messrs mme mlle
    e.g i.e etc vs viz cf al approx ca est dept univ assn bros inc ltd co corp
    no nos vol vols fig figs eq eqs p pp ch sec art ed eds trans op cit ibid
    jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)

_WS = re.compile(r"\s+")
# A candidate boundary: terminators, optional closing quotes/brackets, then whitespace. Group 1 = the terminator
# run with its closers (kept in the sentence), the match end = where the next sentence may start.
_CANDIDATE = re.compile(r"""([.!?…]+['"’”»)\]]*)\s+""")
_CJK_BOUNDARY = re.compile(r"(?<=[。！？])")
_STARTS_SENTENCE = re.compile(r"""['"‘“«(\[]*[A-Z0-9À-ÖØ-Þ]""")
_WORD_BEFORE = re.compile(r"(\S+)$")
_DOTTED_ACRONYM = re.compile(r"^(?:[^\W\d_]\.)+[^\W\d_]$")


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the ``.`` at ``text[dot]`` closes an abbreviation or an initial rather than a sentence."""
    m = _WORD_BEFORE.search(text, 0, dot)
    if m is None:
        return False
    word = m.group(1).lstrip("'\"‘“«([").lower()
    if not word:
        return False
    if word in ABBREVIATIONS:
        return True
    # A single letter: an initial ("J. Smith") or an enumeration ("a. the first").
    return (len(word) == 1 and word.isalpha()) or _DOTTED_ACRONYM.match(word) is not None


def split_sentences(text: str) -> list[str]:
    """Split one paragraph of text into sentences by the rule in the module docstring.

    >>> split_sentences("Dr. Smith arrived at 3.30 p.m. on Monday. He left! Did he? Yes.")
    ['Dr. Smith arrived at 3.30 p.m. on Monday.', 'He left!', 'Did he?', 'Yes.']
    """
    text = _WS.sub(" ", text).strip()
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for m in _CANDIDATE.finditer(text):
        nxt = m.end()
        if not _STARTS_SENTENCE.match(text, nxt):
            continue
        terminators = m.group(1)
        if terminators == "." and _is_abbreviation(text, m.start(1)):
            continue
        sentences.append(text[start:m.end(1)])
        start = nxt
    sentences.append(text[start:])
    out = []
    for s in sentences:
        out.extend(p.strip() for p in _CJK_BOUNDARY.split(s) if p.strip())
    return out
