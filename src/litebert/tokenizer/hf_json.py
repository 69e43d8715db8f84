"""HF ``tokenizer.json`` both ways: the one ``save_pretrained`` writes (`tokenizer_json`), and a SentencePiece model
rebuilt from one (`model_proto_from_tokenizer_json`): transformers 5 saves ``tokenizer.json`` without ``spiece.model``.

An ALBERT ``tokenizer.json`` is a serialized SentencePiece unigram model: the vocabulary with its scores
(``model.vocab``), the unknown piece (``model.unk_id``), the special and user-defined pieces (``added_tokens``) and the
model's own ``nmt_nfkc`` table (the ``Precompiled`` normalizer's ``precompiled_charsmap``). Written back as a
``ModelProto`` (sentencepiece_model.proto: field 1 pieces, 2 trainer_spec, 3 normalizer_spec), SentencePiece loads it
and tokenizes exactly as the original ``spiece.model`` did.

Two things the conversion to ``tokenizer.json`` changed are undone here:
- HF's ``AlbertConverter`` (and litebert's own ``tokenizer.json``) lower the score of every piece ending in a digit and
  a comma by 100, so that Viterbi avoids them (an approximation of the official digit-comma re-split). The score is
  given back; litebert then re-splits those pieces as the official ``encode_pieces`` does.
- The piece types: special added tokens are CONTROL (the unknown piece UNKNOWN); non-special added tokens and the
  pieces SentencePiece forces (score exactly 0, which no trained unigram piece has: scores are log-probabilities)
  are USER_DEFINED.

A field of the wrong JSON kind (``added_tokens`` holding strings, a ``pre_tokenizer`` that is a list, a ``vocab``
entry that is not a [piece, score] pair...) is a one-line `TokenizerError` naming the file and the field.
"""

from __future__ import annotations

import base64
import json
import re
import reprlib
from pathlib import Path
from typing import Any

from litebert.errors import TokenizerError
from litebert.files import json_kind, read_json
from litebert.protobuf import bytes_field, float_field, varint_field

PIECE_NORMAL, PIECE_UNKNOWN, PIECE_CONTROL, PIECE_USER_DEFINED = 1, 2, 3, 4
SPIECE_UNDERLINE = "▁"  # SentencePiece's meta symbol for a space
FLOAT32_MAX = 3.4028234663852886e38  # the largest SentencePiece score (a protobuf float)
DIGIT_COMMA_PENALTY = 100.0  # what HF's AlbertConverter subtracts from the score of "▁2010,"-like pieces


def _a(kind: str) -> str:
    """A JSON kind with its article: "object" -> "an object", "null" -> "null"."""
    return kind if kind == "null" else ("an " if kind[0] in "aeiou" else "a ") + kind


def _checked(value: Any, kind: type, path: Path, field: str) -> Any:
    """``value`` if it is a JSON ``kind`` (a boolean is no number here); otherwise a `TokenizerError` naming the
    file and the field: ``tokenizer.json: added_tokens[0] is a string, expected an object``."""
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise TokenizerError(f"{path}: {field} is {_a(json_kind(type(value)))}, expected {_a(json_kind(kind))}")


def _normalizer_steps(node: Any, path: Path, field: str) -> list[tuple[str, dict]]:
    """(field, normalizer) of each normalizer of a (possibly nested) ``Sequence``, flattened, in order."""
    _checked(node, dict, path, field)
    if node.get("type") == "Sequence":
        children = _checked(node.get("normalizers"), list, path, f"{field}.normalizers")
        return [step for i, child in enumerate(children)
                for step in _normalizer_steps(child, path, f"{field}.normalizers[{i}]")]
    return [(field, node)]


def model_proto_from_tokenizer_json(path: str | Path) -> tuple[bytes, dict]:
    """(serialized SentencePiece ``ModelProto``, tokenizer options read from the normalizer) of an HF
    ``tokenizer.json`` holding a Unigram model. Options: ``do_lower_case`` (a ``Lowercase`` step) and
    ``keep_accents`` (no ``StripAccents`` step); ``tokenizer_config.json``, when present, has the last word."""
    path = Path(path)
    data = read_json(path, TokenizerError)
    model = _unigram_model(data, path)
    vocab, unk_id = _vocab_and_unk_id(model, path)
    types = _piece_types(data, vocab, unk_id, path)
    pieces = _serialized_pieces(vocab, types, path)
    charsmap, options = _normalizer_settings(data, path)
    dummy_prefix = _adds_dummy_prefix(data, path)
    proto = b"".join(pieces) + bytes_field(2, _trainer_spec(vocab, types, unk_id))
    proto += bytes_field(3, _normalizer_spec(charsmap, dummy_prefix))
    return proto, options


def _unigram_model(data, path: Path) -> dict:
    """The ``model`` of a ``tokenizer.json``; an error unless it is a Unigram model."""
    model = _checked(data.get("model"), dict, path, "model")
    if model.get("type") != "Unigram":
        raise TokenizerError(f"{path}: 'model' is {reprlib.repr(model.get('type'))}, not a SentencePiece 'Unigram' "
                             "model; litebert reads a Unigram (ALBERT) or a WordPiece (BERT-style) tokenizer.json")
    return model


def _vocab_and_unk_id(model: dict, path: Path) -> tuple[list, int]:
    """The Unigram model's [piece, score] vocabulary and unknown-piece id, checked."""
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not vocab:
        raise TokenizerError(f"{path}: 'model.vocab' must be a non-empty list of [piece, score] pairs")
    _check_vocab_entries(vocab, path)
    byte_fallback = model.get("byte_fallback")
    if byte_fallback is not None and _checked(byte_fallback, bool, path, "model.byte_fallback"):
        raise TokenizerError(f"{path}: 'model.byte_fallback' is true; ALBERT tokenizers do not use byte fallback")
    unk_id = model.get("unk_id")
    if not isinstance(unk_id, int) or isinstance(unk_id, bool) or not 0 <= unk_id < len(vocab):
        raise TokenizerError(f"{path}: 'model.unk_id' must be an id of the vocabulary, got {unk_id!r}")
    return vocab, unk_id


def _check_vocab_entries(vocab: list, path: Path) -> None:
    """Each entry a [piece, score] pair, a non-empty piece not seen before and a finite score (SentencePiece refuses
    the rest, without saying which entry)."""
    seen: dict[str, int] = {}
    for i, entry in enumerate(vocab):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], (int, float)) and not isinstance(entry[1], bool)
                and abs(entry[1]) <= FLOAT32_MAX):
            raise TokenizerError(f"{path}: model.vocab[{i}] is {_shown(entry)}, expected a [piece, score] pair (a "
                                 "string and a finite number that a SentencePiece score, a 32-bit float, holds)")
        if not entry[0]:
            raise TokenizerError(f"{path}: model.vocab[{i}] is an empty piece, which SentencePiece cannot hold")
        if entry[0] in seen:
            raise TokenizerError(f"{path}: model.vocab[{i}] repeats the piece {_shown(entry[0])} of "
                                 f"model.vocab[{seen[entry[0]]}]; each piece must be listed once")
        seen[entry[0]] = i


def _shown(value: Any) -> str:
    """``value`` as JSON, cut to 60 characters, for a one-line message: a lone surrogate (which no terminal can
    print) is shown as its escape."""
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 60 else text[:57] + "..."


def _piece_types(data: dict, vocab: list, unk_id: int, path: Path) -> list[int]:
    """The SentencePiece type of each vocabulary piece, from the added tokens, the unknown id and the scores."""
    types = [PIECE_NORMAL] * len(vocab)
    added = data.get("added_tokens")
    for k, token in enumerate(_checked(added, list, path, "added_tokens") if added is not None else []):
        _checked(token, dict, path, f"added_tokens[{k}]")
        tid, content = token.get("id"), token.get("content")
        if not isinstance(tid, int) or isinstance(tid, bool) or not 0 <= tid < len(vocab) or vocab[tid][0] != content:
            raise TokenizerError(
                f"{path}: added_tokens[{k}] ({reprlib.repr(content)}, id {reprlib.repr(tid)}) is not a piece of the "
                "Unigram vocabulary; tokens added on top of a SentencePiece vocabulary cannot be stored in a "
                "spiece.model")
        special = _checked(token.get("special", False), bool, path, f"added_tokens[{k}].special")
        types[tid] = PIECE_CONTROL if special else PIECE_USER_DEFINED
    types[unk_id] = PIECE_UNKNOWN
    for i, (_, score) in enumerate(vocab):
        if types[i] == PIECE_NORMAL and score == 0.0:  # a piece SentencePiece forces (see the module docstring)
            types[i] = PIECE_USER_DEFINED
    return types


def _serialized_pieces(vocab: list, types: list[int], path: Path) -> list[bytes]:
    """The ModelProto ``pieces`` fields, with the digit-comma penalty given back to the scores."""
    pieces = []
    for i, ((piece, score), kind) in enumerate(zip(vocab, types)):
        if ends_digit_comma(piece) and score <= -DIGIT_COMMA_PENALTY:
            score += DIGIT_COMMA_PENALTY
        try:
            utf8 = piece.encode("utf-8")
        except UnicodeEncodeError:  # a "\ud800" escape without its other UTF-16 half: valid JSON, not Unicode
            raise TokenizerError(f"{path}: model.vocab[{i}] is the piece {_shown(piece)}, which holds a lone "
                                 "surrogate (not Unicode text)") from None
        pieces.append(bytes_field(1, bytes_field(1, utf8) + float_field(2, score) + varint_field(3, kind)))
    return pieces


def _normalizer_settings(data: dict, path: Path) -> tuple[bytes, dict]:
    """(the Precompiled normalizer's charsmap, or b"", the do_lower_case / keep_accents options) of the normalizer."""
    normalizer = data.get("normalizer")  # null: no normalizer
    steps = _normalizer_steps(normalizer, path, "normalizer") if normalizer is not None else []
    charsmap = b""
    for field, step in steps:
        if step.get("type") == "Precompiled" and step.get("precompiled_charsmap"):
            encoded = _checked(step["precompiled_charsmap"], str, path, f"{field}.precompiled_charsmap")
            try:
                charsmap = base64.b64decode(encoded, validate=True)
            except ValueError as e:
                raise TokenizerError(f"{path}: the Precompiled normalizer's charsmap is not base64 ({e})") from None
    options = {"do_lower_case": any(s.get("type") == "Lowercase" for _, s in steps),
               "keep_accents": not any(s.get("type") == "StripAccents" for _, s in steps)}
    return charsmap, options


def _adds_dummy_prefix(data: dict, path: Path):
    """Whether the ``Metaspace`` pre-tokenizer (if any) puts a ``▁`` before the text."""
    pre = data.get("pre_tokenizer")  # null: no pre-tokenizer
    steps = [] if pre is None else [("pre_tokenizer", _checked(pre, dict, path, "pre_tokenizer"))]
    if pre is not None and pre.get("pretokenizers") is not None:
        children = _checked(pre["pretokenizers"], list, path, "pre_tokenizer.pretokenizers")
        steps += [(f"pre_tokenizer.pretokenizers[{i}]", _checked(s, dict, path, f"pre_tokenizer.pretokenizers[{i}]"))
                  for i, s in enumerate(children)]
    field, metaspace = next(((f, s) for f, s in steps if s.get("type") == "Metaspace"), ("", {}))
    scheme = _checked(metaspace.get("prepend_scheme", "always"), str, path, f"{field}.prepend_scheme")
    return scheme != "never" and _checked(metaspace.get("add_prefix_space", True), bool, path,
                                          f"{field}.add_prefix_space")


def _trainer_spec(vocab: list, types: list[int], unk_id: int) -> bytes:
    """The ModelProto ``trainer_spec`` message: model type, vocabulary size and special ids."""
    pad_id = next((i for i, (p, _) in enumerate(vocab) if p == "<pad>" and types[i] == PIECE_CONTROL), -1)
    # trainer_spec: model_type UNIGRAM (3), vocab_size (4), unk/bos/eos/pad ids (40-43) as the official spm_train flags
    return (varint_field(3, 1) + varint_field(4, len(vocab)) + varint_field(40, unk_id) + varint_field(41, -1)
            + varint_field(42, -1) + varint_field(43, pad_id))


def _normalizer_spec(charsmap: bytes, dummy_prefix) -> bytes:
    """The ModelProto ``normalizer_spec`` message for ``charsmap`` (b"": identity) and the dummy prefix."""
    # normalizer_spec: name (1), precompiled_charsmap (2), add_dummy_prefix (3, default true); its other defaults
    # (remove_extra_whitespaces, escape_whitespaces: true) are what ALBERT uses
    normalizer = bytes_field(1, "nmt_nfkc" if charsmap else "identity")
    return normalizer + (bytes_field(2, charsmap) if charsmap else b"") + (b"" if dummy_prefix else varint_field(3, 0))


def tokenizer_json(tok) -> dict:
    """A ``tokenizers`` serialization that makes HF's AlbertTokenizer follow the official behaviour where it can.

    Loading a bare ``spiece.model``, transformers 5 turns the user-defined pieces (``( ) " - .`` ...) into *added
    tokens*: text is cut around them and every fragment gets its own ``▁`` ("4-our" -> ``▁4 - ▁our`` where
    SentencePiece gives ``▁4 - our``). Here they stay ordinary vocabulary entries (score 0, and no other piece
    contains them, so Viterbi always takes them, as SentencePiece forces them). The digit-comma re-split is
    approximated as HF's own v4 converter did: such pieces get their score lowered by 100 so Viterbi avoids them.
    """
    vocab = [[p, tok.sp.get_score(i) - (DIGIT_COMMA_PENALTY if ends_digit_comma(p) else 0.0)]
             for i, p in enumerate(tok._pieces)]
    added = [{"id": tok.sp.piece_to_id(p), "content": p, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for p in tok.all_special_tokens]
    normalizers = [{"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
                   {"type": "Replace", "pattern": {"String": "''"}, "content": '"'}]
    if not tok.keep_accents:
        normalizers += [{"type": "NFKD"}, {"type": "StripAccents"}]
    if tok.do_lower_case:
        normalizers.append({"type": "Lowercase"})
    if tok._charsmap:
        normalizers.append({"type": "Precompiled",
                            "precompiled_charsmap": base64.b64encode(tok._charsmap).decode()})
    normalizers.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})  # as AlbertConverter
    metaspace = {"type": "Metaspace", "replacement": SPIECE_UNDERLINE, "prepend_scheme": "always", "split": True}
    # Words, as HF's pipelines see them (`Encoding.word_ids`, `word_to_chars`: the QA pipeline widens an answer to
    # whole words): white space cuts them, and each user-defined piece is a word of its own, as in HF's converted
    # tokenizer, where those pieces are added tokens (so "navy." is "navy" + "."). Cutting there leaves every piece
    # as it was: SentencePiece always segments a user-defined piece alone. WhitespaceSplit comes first so that no
    # offset covers the space before a word (HF's own conversion gives "▁navy" the span " navy").
    pretokenizers = [{"type": "WhitespaceSplit"}, metaspace]
    user_defined = sorted((p for p, t in zip(tok._pieces, tok.piece_types) if t == PIECE_USER_DEFINED),
                          key=len, reverse=True)
    if user_defined:
        pretokenizers.append({"type": "Split", "pattern": {"Regex": "|".join(map(re.escape, user_defined))},
                              "behavior": "Isolated", "invert": False})
    cls, sep = "[CLS]", "[SEP]"

    def seq(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    def special(name, type_id):
        return {"SpecialToken": {"id": name, "type_id": type_id}}

    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pretokenizers},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(cls, 0), seq("A", 0), special(sep, 0)],
            "pair": [special(cls, 0), seq("A", 0), special(sep, 0), seq("B", 1), special(sep, 1)],
            "special_tokens": {t: {"id": t, "ids": [tok.sp.piece_to_id(t)], "tokens": [t]} for t in (cls, sep)},
        },
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": tok.unk_token_id, "vocab": vocab, "byte_fallback": False},
    }


def ends_digit_comma(piece: str) -> bool:
    """The official encode_pieces re-splits a piece ending in a digit and a comma ("▁2010,")."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()
