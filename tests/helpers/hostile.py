"""Hypothesis strategies for hostile but plausible inputs, shared by the property tests of every reader, and the one
property they all check (`outcome`): a `LitebertError` naming the file or argument, or the correct result; never
another exception.

What is hostile here is what users' files really hold: a byte order mark (Windows editors, Excel's "CSV UTF-8"), CRLF
or lone CR line endings, invalid UTF-8, NUL bytes, control characters and terminal escapes (ESC sequences, bidi
overrides), duplicate, empty and missing column names, JSON nested or typed wrongly, and names that mean something to
another program (matplotlib's mathtext ``$x_1$``, format braces ``{seq_len}``, path separators).

The profiles (derandomized "ci" by default, the long "fuzz" of ``make fuzz``) are registered in tests/conftest.py.
"""

from __future__ import annotations

import json
import os

from hypothesis import settings
from hypothesis import strategies as st

from litebert.errors import LitebertError, printable

BOM = b"\xef\xbb\xbf"
CI_EXAMPLES = 20  # tests/conftest.py's "ci" profile


def examples(n: int) -> int:
    """``n`` examples under the CI profile, as many more under another profile as it has more than CI (a test whose
    examples are expensive sets ``max_examples=examples(n)``: `make fuzz` still runs it at length)."""
    return max(1, n * settings.default.max_examples // CI_EXAMPLES)


# ------------------------------------------------------------------------------------------------ text pieces
# What a terminal acts on: ESC sequences (colour, cursor moves, a window title by OSC), C0 and C1 controls, the bidi
# overrides that reorder what is shown, and the lone surrogates of undecodable file-name bytes.
ESCAPES = ("\x1b[31m", "\x1b[2J", "\x1b]0;title\x07", "\x1b[A", "\r", "\n", "\t", "\x07", "\x08", "\x00", "\x7f",
           "\x85", "\x9b31m", "\u202e", "\u2066", "\ufeff", "\udcff")
MATHTEXT = ("$", "$x_1$", "_", "^", "\\", "\\frac", "$$", "{", "}", "%", "&", "#")

control_chars = st.sampled_from(ESCAPES)
words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=8)


def hostile_text(pieces=ESCAPES + MATHTEXT, min_size: int = 0) -> st.SearchStrategy[str]:
    """Text that mixes ordinary words with ``pieces`` (by default terminal escapes and mathtext)."""
    return st.lists(st.one_of(words, st.sampled_from(pieces)), min_size=min_size, max_size=6).map("".join)


def file_names(pieces=ESCAPES + MATHTEXT) -> st.SearchStrategy[str]:
    """A name a folder or file may have on Linux: hostile pieces and words, no "/" nor NUL, not "." or "..", at most
    100 UTF-8 bytes (surrogates stand for undecodable bytes: os.fsencode gives them back)."""
    allowed = tuple(p for p in pieces if "\x00" not in p and "/" not in p)
    return (hostile_text(allowed, min_size=1).map(lambda s: s.replace("/", "_").replace("\x00", "_"))
            .filter(lambda s: s not in ("", ".", "..") and len(os.fsencode(s)) <= 100))


# ------------------------------------------------------------------------------------------------ file bytes
def line_endings() -> st.SearchStrategy[str]:
    return st.sampled_from(("\n", "\r\n", "\r"))


@st.composite
def encoded(draw, text: str) -> bytes:
    """``text`` as a user's editor may have saved it: UTF-8, maybe with a byte order mark first."""
    return (BOM if draw(st.booleans()) else b"") + text.encode("utf-8", "surrogatepass")


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """``data`` maybe with a byte replaced by one that is not UTF-8 (0xff) or a NUL, or cut short."""
    kind = draw(st.sampled_from(("as is", "as is", "bad byte", "nul", "cut")))
    if not data or kind == "as is":
        return data
    at = draw(st.integers(0, len(data) - 1))
    if kind == "cut":
        return data[:at]
    return data[:at] + (b"\xff" if kind == "bad byte" else b"\x00") + data[at + 1:]


def column_names() -> st.SearchStrategy[list[str]]:
    """A header: plausible names, with duplicates, empty names, case and space variants of each other."""
    name = st.one_of(st.sampled_from(("text", "label", "text_a", "text_b", "Text", " text", "text ", "", "id")),
                     hostile_text(min_size=1))
    return st.lists(name, min_size=1, max_size=5)


def json_values(max_leaves: int = 6) -> st.SearchStrategy:
    """Any JSON value (strings hostile), a few levels deep."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                        hostile_text())
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(hostile_text(), inner, max_size=3)),
                        max_leaves=max_leaves)


def json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ the property
def outcome(call, *names: str, errors: type[BaseException] | tuple = LitebertError):
    """``call()``'s result, or None when it raised a `LitebertError` (``errors``) whose one-line message names one
    of ``names`` (a file's name, an argument); any other exception, a message of several lines, or one that names
    none of them fails the test."""
    try:
        return call()
    except errors as e:
        message = str(e)
        assert "\n" not in message, f"not one line: {message!r}"
        assert any(printable(str(n)) in message for n in names), f"names none of {names}: {message!r}"
        return None


# ------------------------------------------------------------------------------------------------ documents
def _paths(value, at=()) -> list[tuple]:
    """The path (keys and indices) of every node of a JSON value, the root's () first."""
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, at + (i,))
    return out


def _replaced(value, at: tuple, make):
    """``value`` with the node at ``at`` replaced by ``make(node)`` (a copy; `DROP` removes it)."""
    if not at:
        return make(value)
    head, rest = at[0], at[1:]
    if isinstance(value, dict):
        out = {k: _replaced(v, rest, make) if k == head else v for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not DROP}
    out = [_replaced(v, rest, make) if i == head else v for i, v in enumerate(value)]
    return [v for v in out if v is not DROP]


DROP = object()
# values at and past the limits of what a field holds: huge and negative ids, sizes, the floats JSON cannot write
EDGES = (-1, 0, 1, 2**31, 2**63, -2**63, 10**30, 1e308, -0.0, 0.5, True, False, None, "", "0", [], {})


@st.composite
def mutated_json(draw, doc, max_changes: int = 3):
    """``doc`` (a valid document) changed in one to ``max_changes`` places: a key or item dropped, a value replaced
    by another of another type (`json_values`) or by an edge value (`EDGES`), a list item repeated (a duplicate
    piece), a key renamed."""
    for _ in range(draw(st.integers(1, max_changes))):
        at = draw(st.sampled_from(_paths(doc)))
        kind = draw(st.sampled_from(("drop", "value", "edge", "repeat", "rename")))
        if kind == "drop" and at:
            doc = _replaced(doc, at, lambda v: DROP)
        elif kind == "value":
            new = draw(json_values())
            doc = _replaced(doc, at, lambda v: new)
        elif kind == "edge":
            new = draw(st.sampled_from(EDGES))
            doc = _replaced(doc, at, lambda v: new)
        elif kind == "repeat" and isinstance(_node(doc, at), list) and _node(doc, at):
            i = draw(st.integers(0, len(_node(doc, at)) - 1))
            doc = _replaced(doc, at, lambda v: v + [v[i]])
        elif kind == "rename" and isinstance(_node(doc, at), dict) and _node(doc, at):
            old = draw(st.sampled_from(sorted(_node(doc, at))))
            new = draw(st.sampled_from((old.upper(), old + " ", "\ufeff" + old, old[:-1])))
            doc = _replaced(doc, at, lambda v: {(new if k == old else k): x for k, x in v.items()})
    return doc


def _node(value, at: tuple):
    for k in at:
        value = value[k]
    return value


@st.composite
def hostile_json_file(draw, doc) -> bytes:
    """The bytes of a file meant to hold ``doc``: the document mutated (`mutated_json`), or not; written maybe with
    a BOM, maybe damaged (`damaged`), or replaced by text that is not JSON."""
    kind = draw(st.sampled_from(("as is", "mutated", "mutated", "mutated", "damaged", "not json")))
    if kind == "not json":
        return draw(st.sampled_from((b"", b"{", b"[]", b"null", b"\xff\xfe{}", b"{\"a\": NaN}", b"{} {}",
                                     b"{\"a\": 1, \"a\": 2}", b"[" * 2000 + b"]" * 2000)))
    value = draw(mutated_json(doc)) if kind == "mutated" else doc
    data = draw(encoded(json.dumps(value, ensure_ascii=False)))
    return draw(damaged(data)) if kind == "damaged" else data
