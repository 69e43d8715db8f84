"""Model cards (README.md) as a user may leave them, generated hostile (issue 57, item 1): front matter broken (not
closed, YAML that does not parse, not a mapping, indentation and flow brackets, tags YAML acts on), a byte order
mark, control characters and terminal escapes, bytes that are not UTF-8, with or without litebert's marker. The
property (`helpers.hostile.outcome`): `litebert.card.read_card` gives a one-line `CardError` naming the file, or the
text and the front matter exactly as the Hub's own reader (``huggingface_hub.metadata_load``) reads them; never
another exception. Then `push_to_hub` refuses such a card before anything is sent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.hostile import BOM, damaged, hostile_text, outcome
from litebert.card import MARKER, front_matter, read_card

hf_card = pytest.importorskip("huggingface_hub.repocard")
META = {"library_name": "litebert", "license": "mit", "tags": ["albert", "text-classification"],
        "datasets": ["glue"],
        "model-index": [{"name": "m", "results": [{"metrics": [{"type": "accuracy", "value": 0.5}]}]}]}
# what YAML reads as structure or acts on: mapping and sequence marks, flow brackets, anchors, tags, a document end
YAML_PIECES = (": ", "- ", "{", "}", "[", "]", "&a", "*a", "!!python/object:os.system", "!!binary", "---", "...",
               "\t", "'", '"', "#", "|", ">", "? ", "%YAML 1.1", "2020-13-45", "0x1F", "~", "\x00", "\x1b[31m",
               "\x85", "\ufeff")


@st.composite
def hostile_card(draw) -> bytes:
    lines = front_matter(META).splitlines()
    kind = draw(st.sampled_from(("as is", "lines", "no close", "pieces", "no front")))
    if kind == "lines":  # a line of the front matter changed
        i = draw(st.integers(1, len(lines) - 2))
        lines[i] = draw(hostile_text(YAML_PIECES))
    elif kind == "no close":
        lines = lines[:-1]
    elif kind == "pieces":  # hostile text in a value
        i = draw(st.integers(1, len(lines) - 2))
        lines[i] = lines[i] + draw(hostile_text(YAML_PIECES, min_size=1))
    elif kind == "no front":
        lines = []
    body = ["", "# A model", draw(st.sampled_from(("", MARKER))), draw(hostile_text())]
    text = draw(st.sampled_from(("\n", "\r\n"))).join(lines + body)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = BOM + data
    return draw(damaged(data))


def hub_reads(path):
    """The front matter as huggingface_hub reads it (None: none), or the exception it raises."""
    try:
        return hf_card.metadata_load(path)
    except Exception as e:  # noqa: BLE001 - whatever the Hub's reader raises is a card it refuses
        return e


@given(data=hostile_card())
def test_a_hostile_card_is_refused_naming_it_or_read_as_the_hub_reads_it(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("card") / "README.md"
    path.write_bytes(data)
    read = outcome(lambda: read_card(path), "README.md")
    if read is not None:
        text, meta = read
        assert text == data.decode("utf-8")
        assert hub_reads(path) == meta  # no exception where litebert reads it, and the same metadata


def test_cards_by_hand(tmp_path):
    from litebert.errors import CardError

    path = tmp_path / "README.md"
    for data, message in ((b"---\nlicense: mit\n# no end", "never closed"), (b"\xef\xbb\xbf---\na: 1\n---\n", "byte "
                          "order mark"), (b"---\na: [1\n---\n", r"not valid YAML \(line 2"), (b"---\n- a\n---\n",
                          "a YAML list, not a mapping"), (b"hi \xff", "not UTF-8")):
        path.write_bytes(data)
        with pytest.raises(CardError, match=message):
            read_card(path)
    path.write_text(front_matter(META) + "\n" + MARKER + "\nbody \x1b[31m\n")
    assert read_card(path)[1] == META
