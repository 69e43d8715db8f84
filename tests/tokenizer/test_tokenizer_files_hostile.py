"""The tokenizer files a user hands litebert, generated hostile (issue 57, item 1): a ``spiece.model`` truncated,
garbled or with fields of the wrong wire type, and a ``tokenizer.json`` with keys missing, values of the wrong type,
ids huge or negative, pieces repeated. The property (`helpers.hostile.outcome`): a one-line `LitebertError` naming the
file, or a tokenizer that encodes and decodes a text; never another exception.

The documents start from a small valid Unigram vocabulary (`VALID`, loaded in milliseconds), so each example is cheap
and a failure shrinks to the one change that breaks the reader."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.hostile import damaged, hostile_json_file, outcome
from litebert.protobuf import bytes_field, encode_varint, fields
from litebert.tokenizer import load_tokenizer

SPECIALS = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
PIECES = ["▁", "▁the", "▁a", "a", "b", "c", "e", "h", "t", "▁cat", "s", ",", "1", "▁1,"]
VALID = {"version": "1.0",
         "added_tokens": [{"id": i, "content": p, "special": True} for i, p in enumerate(SPECIALS) if p != "<unk>"],
         "normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "StripAccents"}]},
         "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
         "model": {"type": "Unigram", "unk_id": 1,
                   "vocab": [[p, 0.0] for p in SPECIALS] + [[p, -1.0 - i] for i, p in enumerate(PIECES)]}}
TEXT = "The cat [MASK] 1, abc"


def use(path):
    """What a user does with a tokenizer: load it, encode a text with its specials, decode the ids."""
    def call():
        tok = load_tokenizer(path)
        ids = tok(TEXT)["input_ids"]
        assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids), ids
        tok.decode(ids)
        return tok
    return call


def valid_model_bytes(tmp_path) -> bytes:
    (tmp_path / "tokenizer.json").write_text(json.dumps(VALID))
    return load_tokenizer(tmp_path / "tokenizer.json")._model_bytes


def test_the_valid_documents_load(tmp_path):
    tok = use(tmp_path / "tokenizer.json")() if (tmp_path / "tokenizer.json").write_text(json.dumps(VALID)) else None
    assert tok.convert_ids_to_tokens(tok(TEXT)["input_ids"])[:3] == ["[CLS]", "▁the", "▁cat"]
    (tmp_path / "spiece.model").write_bytes(tok._model_bytes)
    assert use(tmp_path / "spiece.model")()(TEXT) == tok(TEXT)


@given(data=hostile_json_file(VALID))
def test_a_hostile_tokenizer_json_is_refused_naming_it_or_loads(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tj")
    (folder / "tokenizer.json").write_bytes(data)
    outcome(use(folder), "tokenizer.json")  # the folder, as a model folder is given
    outcome(use(folder / "tokenizer.json"), "tokenizer.json")  # the file itself


@st.composite
def hostile_model(draw, valid: bytes) -> bytes:
    """A SentencePiece ModelProto cut short, a byte changed, garbage appended, a field of another wire type or
    length, or no model at all."""
    kind = draw(st.sampled_from(("damaged", "flip", "append", "field", "garbage")))
    if kind == "damaged":
        return draw(damaged(valid))
    if kind == "flip":
        at = draw(st.integers(0, len(valid) - 1))
        return valid[:at] + bytes([draw(st.integers(0, 255))]) + valid[at + 1:]
    if kind == "append":
        return valid + draw(st.binary(min_size=1, max_size=16))
    if kind == "garbage":
        return draw(st.binary(max_size=64))
    # a field of the ModelProto (or of a piece) re-encoded with another wire type, or a huge length prefix
    parts = fields(valid)
    i = draw(st.integers(0, len(parts) - 1))
    num, _ = parts[i]
    wire = draw(st.sampled_from((0, 1, 2, 5)))
    payload = {0: encode_varint(draw(st.sampled_from((0, 1, 2**31, 2**63)))), 1: b"\xff" * 8, 5: b"\xff" * 4,
               2: encode_varint(draw(st.sampled_from((0, 3, 2**31)))) + b"abc"}[wire]
    replaced = encode_varint(num << 3 | wire) + payload
    others = [bytes_field(n, v) if isinstance(v, bytes) else encode_varint(n << 3) + encode_varint(v)
              for n, v in parts]
    return b"".join(others[:i]) + replaced + b"".join(others[i + 1:])


@given(data=st.data())
def test_a_hostile_spiece_model_is_refused_naming_it_or_loads(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    valid = valid_model_bytes(folder)
    (folder / "tokenizer.json").unlink()
    (folder / "spiece.model").write_bytes(data.draw(hostile_model(valid)))
    outcome(use(folder), "spiece.model")


def test_a_score_no_sentencepiece_model_holds_is_refused(tmp_path):
    """Found by the fuzz profile: a score past a 32-bit float's range (3.4e38) is valid JSON that no spiece.model
    can hold."""
    from litebert.errors import TokenizerError

    vocab = [list(v) for v in VALID["model"]["vocab"]]
    vocab[0][1] = 3.4028235677973366e38
    (tmp_path / "tokenizer.json").write_text(json.dumps({**VALID, "model": {**VALID["model"], "vocab": vocab}}))
    with pytest.raises(TokenizerError, match=r"model.vocab\[0\] is .*a 32-bit float"):
        load_tokenizer(tmp_path)
