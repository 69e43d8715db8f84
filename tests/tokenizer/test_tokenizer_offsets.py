"""Property tests (hypothesis): arbitrary unicode never crashes; offsets are in bounds, monotonic, and each points at
the original text its token came from; the span-tracking normalization equals the official one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litebert.tokenizer import AlbertTokenizer, normalize_with_spans, preprocess_text, train_tokenizer
from litebert.tokenizer.normalize import _normalize_chars

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Text that exercises the normalization: words, digits with commas, LaTeX quotes, accents and combining marks,
# compatibility characters, Greek final sigma, CJK, emoji, user-defined pieces, control and exotic whitespace.
ATOMS = ["The", "cat", "Café", "naïve", "ΣΟΦΟΣ", "İ", "ß", "ﬁ", "½", "㎏", "中文", "한국", "😀", "👍🏽", "2010,",
         "1,000",
         "12,", "``", "''", "(", ")", '"', "-", ".", "–", "£", "€", ",", "e\u0301", "a\u0308", "\u200b", "\ufeff",
         "\x00", "\x07", " ", "  ", "\t", "\n", "\u00a0", "\u3000", "\x1c", "\x85", "x"]
mixed_text = st.lists(st.sampled_from(ATOMS), max_size=30).map("".join)
any_text = st.text(max_size=60)
# printable ASCII with whitespace runs and the LaTeX quotes: the texts the fast offset paths take
ascii_text = st.lists(st.sampled_from(["The", "cat", "2010,", "1,000", "(x)", "``", "''", "'", "`", "~", "#", "A.B",
                                       " ", "  ", "\t", "\n", "\x1c", "e", "-", '"']), max_size=30).map("".join)


def _tiny_tokenizer(tmp: Path) -> AlbertTokenizer:
    rng = random.Random(0)
    syllables = ["ka", "lo", "mi", "ne", "tu", "ra", "shi", "po", "ve", "an", "th", "ing", "ed", "é", "ß", "中", "σ"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(300)]
    lines = []
    for _ in range(1500):
        ws = [rng.choice(words) for _ in range(rng.randint(2, 12))]
        if rng.random() < 0.4:
            ws.insert(rng.randint(0, len(ws)), f"{rng.randint(0, 3000)},")
        lines.append(" ".join(ws) + rng.choice([".", " (x).", "-y", '"q"', ""]))
    (tmp / "corpus.txt").write_text("\n".join(lines), encoding="utf-8")
    return train_tokenizer([tmp / "corpus.txt"], tmp / "tok", vocab_size=250, progress=False, num_threads=1)


@pytest.fixture(scope="module", params=["real", "trained"])
def tok(request, albert_vocab, tmp_path_factory) -> AlbertTokenizer:
    if request.param == "real":
        return AlbertTokenizer.from_pretrained(albert_vocab)
    return _tiny_tokenizer(tmp_path_factory.mktemp("tiny_vocab"))


@SETTINGS
@given(text=st.one_of(any_text, mixed_text), lower=st.booleans(), keep_accents=st.booleans(),
       remove_space=st.booleans())
def test_normalize_with_spans_equals_official(text, lower, keep_accents, remove_space):
    norm, starts, ends = normalize_with_spans(text, lower=lower, keep_accents=keep_accents, remove_space=remove_space)
    assert norm == preprocess_text(text, lower=lower, keep_accents=keep_accents, remove_space=remove_space)
    assert len(starts) == len(ends) == len(norm)
    assert all(0 <= s < e <= len(text) for s, e in zip(starts, ends))
    assert starts == sorted(starts) and ends == sorted(ends)


@SETTINGS
@given(text=st.one_of(any_text, mixed_text, ascii_text), lower=st.booleans(), keep_accents=st.booleans())
def test_wordwise_normalization_equals_per_character(text, lower, keep_accents):
    # The word-wise path (ASCII words in bulk, the rest per character) against the per-character reference.
    assert normalize_with_spans(text, lower=lower, keep_accents=keep_accents) == _normalize_chars(
        text, remove_space=True, lower=lower, keep_accents=keep_accents)


@SETTINGS
@given(text=st.one_of(ascii_text, st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)))
def test_piece_offsets_equal_sentencepiece(tok, text):
    # Offsets from the pieces' lengths (printable ASCII) against SentencePiece's own offset mapping.
    norm = tok.normalize(text)
    enc = tok.sp.encode(norm, out_type="offset_mapping")
    offsets = tok._piece_offsets(enc["ids"], len(norm))
    if tok.unk_token_id not in enc["ids"]:
        assert offsets is not None
    if offsets is not None:
        assert offsets == enc["offsets"]


def test_batch_offsets_fast_path_equals_sentencepiece_spans(tok, monkeypatch):
    texts = ["Kalo mine tura, po", "Hello, my dog is cute", "In 2010, the U.S. economy grew 1,000 times.",
             "``quoted'' text", "",
             "  leading and trailing  ", "(parenthesis first", "Café naïve", "tab\tsep\nline", "a ~ b # c"]
    fast = tok.encode_batch_with_offsets(texts)
    assert tok.unk_token_id not in fast[0][0]  # both vocabularies know these syllables: the fast path is taken
    assert tok._piece_offsets(fast[0][0], len(tok.normalize(texts[0]))) is not None
    monkeypatch.setattr(tok, "_piece_offsets", lambda ids, n: None)  # every text through SentencePiece's spans
    assert fast == tok.encode_batch_with_offsets(texts) == [tok.encode_with_offsets(t) for t in texts]


def _check_offsets(tok: AlbertTokenizer, text: str) -> None:
    ids, spans = tok.encode_with_offsets(text)
    assert ids == tok.encode_ids(text)  # the offset path segments exactly like the fast path
    assert len(spans) == len(ids)
    assert all(0 <= s <= e <= len(text) for s, e in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)  # monotonic
    assert [e for _, e in spans] == sorted(e for _, e in spans)
    for k, (i, (s, e)) in enumerate(zip(ids, spans)):
        piece = tok.convert_ids_to_tokens(i)
        core = piece.replace("▁", "")
        if s == e:  # only the dummy-prefix ▁ of the first piece stands for no character
            assert piece == "▁" and k == 0
            continue
        source = text[s:e]
        if not core:  # a lone "▁" points at the whitespace it stands for
            # (or at a space inside a compatibility expansion: NFKD turns "ﷺ" into four words). "x" takes the dummy
            # prefix so that any other ▁ comes from the source.
            norm_src = tok.sp.normalize("x" + tok.normalize(source))
            assert norm_src == "▁x" or "▁" in norm_src[2:], (piece, source)
            continue
        # The token's text is what SentencePiece makes of the normalized source span.
        assert not source[0].isspace()
        if i != tok.unk_token_id:
            surface = tok.sp.normalize(tok.normalize(source)).replace("▁", "")
            assert core in surface or surface in core, (piece, source, text)


@SETTINGS
@given(text=st.one_of(any_text, mixed_text))
def test_offsets_properties(tok, text):
    _check_offsets(tok, text)


@SETTINGS
@given(text=any_text, pair=any_text, max_length=st.integers(3, 20))
def test_arbitrary_unicode_never_crashes(tok, text, pair, max_length):
    enc = tok(text, pair, max_length=max_length, truncation="longest_first", padding="max_length",
              return_offsets=True)
    assert len(enc["input_ids"]) == len(enc["offsets"]) == len(enc["attention_mask"]) == max_length
    assert enc["input_ids"][0] == tok.cls_token_id
    tok.decode(enc["input_ids"], skip_special_tokens=True)
    assert tok.encode_batch_ids([text, pair]) == [tok.encode_ids(text), tok.encode_ids(pair)]


def test_offsets_hand_computed(albert_vocab):
    tok = AlbertTokenizer.from_pretrained(albert_vocab)  # hand-computed on the real vocabulary
    text = "  ``Café''\u00a0 naïve 2010, ok"
    ids, spans = tok.encode_with_offsets(text)
    got = [(tok.convert_ids_to_tokens(i), text[s:e]) for i, (s, e) in zip(ids, spans)]
    # The accent and the NFKD-decomposed é stay with "fé"; the LaTeX quotes map back to both characters; the
    # no-break space and the space run belong to no token; "▁2010," is re-split and the comma keeps its own offset.
    assert got == [("▁", ""), ('"', "``"), ("ca", "Ca"), ("fe", "fé"), ('"', "''"), ("▁naive", "naïve"),
                   ("▁2010", "2010"), (",", ","), ("▁ok", "ok")]
