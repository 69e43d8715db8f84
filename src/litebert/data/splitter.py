"""A small rule-based sentence splitter for plain text and JSONL inputs.

The official ALBERT pipeline expects text that is already one sentence per line (its ``input_file`` format); corpora
that come as paragraphs (plain text, JSONL ``text`` fields) need splitting first. SOP/NSP only need *roughly* correct
sentence boundaries (the paper's segments are "one or more sentences"), so a transparent rule beats a heavy model.

A sentence ends after a run of terminators (possibly repeated or mixed, e.g. ``?!``, ``...``, ``…？``), optionally
followed by closing quotes or brackets (kept with the sentence). What may follow depends on the run's last
terminator:

* ``.`` ``!`` ``?`` ``…`` (shared by many scripts, and ``.`` also ends abbreviations and initials): whitespace, then
  something that can start a sentence -- an upper-case letter of any cased script (Latin, Cyrillic, Greek...), a
  letter of a script without case (Devanagari, Arabic, Hebrew, CJK, Thai...), a digit, or an opening quote or bracket
  followed by one of those. It does not end there when the run is a bare ``.`` and the word before it is

  * a known abbreviation (``Mr.``, ``Dr.``, ``e.g.``, ``etc.``, ``No.``, ``Fig.``, ``напр.``, ``डॉ.`` ... see
    ``ABBREVIATIONS``),
  * a single letter (an initial, as in ``J. R. R. Tolkien`` or ``А. С. Пушкин``), or
  * a dotted acronym of single letters (``U.S.``, ``p.m.``, ``т.е.``), so "the U.S. Army" stays whole (and "in the
    U.S. The next..." is not split: the rule prefers missing a boundary to cutting a name in two).

* the terminators of other scripts, which end nothing but sentences -- the Devanagari danda and double danda ``।``
  ``॥`` (Hindi, Sanskrit, Marathi, and the Bengali-script languages), the Arabic question mark ``؟``, the Urdu full
  stop ``۔``, the Ethiopic ``።``, the Armenian ``։``, the Myanmar ``။`` and the Khmer ``។``: whitespace.
* the CJK full stops ``。`` ``！`` ``？`` ``｡``: nothing (Chinese and Japanese put no space between sentences);
  after closing quotes or brackets (``「はい。」``), whitespace or an opening quote or bracket, so that a quotation
  inside a sentence (``「ありがとう。」と言った。``) stays whole.

Whitespace (including newlines) inside a sentence is collapsed to single spaces. Thai, Lao and Tibetan end sentences
with a space or with marks that also separate phrases; their text is split only at the terminators above.
"""

from __future__ import annotations

import re
import unicodedata

# Lower-cased, without the final dot. Titles, Latin abbreviations, common reference words and months; the same for
# Russian (e.g., prof., academician, street, named after, figure, page) and Hindi (Dr., Prof.).
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt rev gen col lt sgt capt cmdr adm gov sen rep pres hon messrs mme mlle
    e.g i.e etc vs viz cf al approx ca est dept univ assn bros inc ltd co corp
    no nos vol vols fig figs eq eqs p pp ch sec art ed eds trans op cit ibid
    jan feb mar apr jun jul aug sep sept oct nov dec
    напр проф акад ул им рис стр
    डॉ प्रो""".split()
)

_LATIN_TERMINATORS = ".!?…"
_SCRIPT_TERMINATORS = "।॥؟۔።։။។"
_CJK_TERMINATORS = "。！？｡"
_CLOSERS = "'\"’”»)]」』）］｝〕〉》】"
_OPENERS = "'\"‘“„«([¿¡「『（［｛〔〈《【"
_WS = re.compile(r"\s+")
# A candidate boundary: group 1 = the terminator run with its closers (kept in the sentence), group 2 = the
# whitespace after it; the match end is where the next sentence would start.
_CANDIDATE = re.compile(f"([{re.escape(_LATIN_TERMINATORS + _SCRIPT_TERMINATORS + _CJK_TERMINATORS)}]+"
                        f"[{re.escape(_CLOSERS)}]*)(\\s*)")
_DOTTED_ACRONYM = re.compile(r"^(?:[^\W\d_]\.)+[^\W\d_]$")
# Upper-case and title-case letters, letters of scripts without case (Lo: Devanagari, Arabic, CJK...), digits.
_SENTENCE_START_CATEGORIES = frozenset({"Lu", "Lt", "Lo", "Nd"})


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the ``.`` at ``text[dot]`` closes an abbreviation or an initial rather than a sentence (``text`` has
    its whitespace collapsed to single spaces)."""
    word = text[text.rfind(" ", 0, dot) + 1:dot].lstrip(_OPENERS).lower()
    if not word:
        return False
    if word in ABBREVIATIONS:
        return True
    # A single letter: an initial ("J. Smith") or an enumeration ("a. the first").
    return (len(word) == 1 and word.isalpha()) or _DOTTED_ACRONYM.match(word) is not None


def _starts_sentence(text: str, i: int) -> bool:
    """Whether ``text[i:]`` can start a sentence: opening quotes/brackets, then an upper-case or caseless letter or a
    digit."""
    while i < len(text) and text[i] in _OPENERS:
        i += 1
    return i < len(text) and unicodedata.category(text[i]) in _SENTENCE_START_CATEGORIES


def _ends_sentence(text: str, m: re.Match) -> bool:
    """Whether the candidate ``m`` (a `_CANDIDATE` match followed by more text) is a sentence boundary."""
    run, space = m.group(1), m.group(2)
    terminators = run.rstrip(_CLOSERS)
    last = terminators[-1]
    if last in _CJK_TERMINATORS:
        return len(terminators) == len(run) or bool(space) or text[m.end()] in _OPENERS
    if last in _SCRIPT_TERMINATORS:
        return bool(space)
    if not space or not _starts_sentence(text, m.end()):
        return False
    return not (run == "." and _is_abbreviation(text, m.start(1)))


def split_sentences(text: str) -> list[str]:
    """Split one paragraph of text into sentences by the rule in the module docstring.

    >>> split_sentences("Dr. Smith arrived at 3.30 p.m. on Monday. He left! Did he? Yes.")
    ['Dr. Smith arrived at 3.30 p.m. on Monday.', 'He left!', 'Did he?', 'Yes.']
    >>> split_sentences("我很好。你呢？ नमस्ते। Привет! مرحبا؟ Bye.")
    ['我很好。', '你呢？', 'नमस्ते।', 'Привет!', 'مرحبا؟', 'Bye.']
    """
    text = _WS.sub(" ", text).strip()
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for m in _CANDIDATE.finditer(text):
        if m.end() < len(text) and _ends_sentence(text, m):
            sentences.append(text[start:m.end(1)])
            start = m.end()
    sentences.append(text[start:])
    return [s for s in (s.strip() for s in sentences) if s]
