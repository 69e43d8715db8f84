"""The HF-shaped tokenizer API against HF transformers 4.57 (the oracle): special tokens written in text, the
``split_special_tokens`` switch, ``return_tensors``, ``encode``, ``decode``/``batch_decode`` and token conversions.

References: HF's SentencePiece ``AlbertTokenizer`` on the bare ``spiece.model`` (the implementation of the official
tokenization, identical to litebert everywhere), and ``AutoTokenizer`` (Rust) on a folder litebert saved.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.tokenizer_texts import VARIED, WRITTEN, official_pieces, with_specials
from litebert.errors import TokenizerError
from litebert.tokenizer import AlbertTokenizer, BatchEncoding

TEXTS = WRITTEN + with_specials(60) + VARIED


@pytest.fixture(scope="module")
def tok(albert_vocab) -> AlbertTokenizer:
    return AlbertTokenizer.from_pretrained(albert_vocab)


@pytest.fixture(scope="module")
def hf_slow(albert_vocab):
    transformers = pytest.importorskip("transformers")
    return transformers.AlbertTokenizer.from_pretrained(str(albert_vocab))


@pytest.fixture(scope="module")
def hf_saved(tok, tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(tok.save_pretrained(tmp_path_factory.mktemp("saved"))))


# ------------------------------------------------------------------------------------ special tokens written in text
def test_mask_written_in_text_is_its_id(tok):
    # hand-checked: [CLS] ▁paris ▁is [MASK] ▁ . [SEP]; the "." after [MASK] is encoded on its own, with its own ▁
    assert tok("Paris is [MASK].")["input_ids"] == [2, 1162, 25, 4, 13, 9, 3]
    assert tok.tokenize("Paris is [MASK].") == ["▁paris", "▁is", "[MASK]", "▁", "."]
    assert tok.encode("[MASK]") == [2, 4, 3] and tok.convert_tokens_to_ids("[MASK]") == 4


def test_special_tokens_in_text_equal_hf_slow(tok, hf_slow):
    for text in TEXTS:
        assert tok(text)["input_ids"] == hf_slow(text)["input_ids"], text
        if "Σ" not in text:  # HF lower-cases character by character before tokenize: no final sigma (ς) rule
            assert tok.tokenize(text) == hf_slow.tokenize(text), text
        assert tok.encode(text, add_special_tokens=False) == hf_slow.encode(text, add_special_tokens=False), text
    for a, b in zip(TEXTS, TEXTS[1:] + TEXTS[:1]):
        ours, ref = tok(a, b), hf_slow(a, b)
        assert ours["input_ids"] == ref["input_ids"] and ours["token_type_ids"] == ref["token_type_ids"], (a, b)
        assert tok.encode(a, b) == hf_slow.encode(a, b)


def test_special_tokens_in_text_equal_autotokenizer_on_saved_folder(tok, hf_saved):
    for text in TEXTS:
        assert tok(text)["input_ids"] == hf_saved(text)["input_ids"], text
    # HF's Rust tokenizer reads an empty string as "no second text" (no second [SEP]); pairs without one agree
    pairs = [(a, b) for a, b in zip(TEXTS, TEXTS[1:]) if a and b]
    ours, ref = tok(*map(list, zip(*pairs))), hf_saved(*map(list, zip(*pairs)))
    assert ours["input_ids"] == ref["input_ids"] and ours["token_type_ids"] == ref["token_type_ids"]


def test_special_token_offsets(tok, hf_saved):
    for text in TEXTS:
        enc = tok(text, return_offsets=True)
        assert enc["input_ids"] == tok(text)["input_ids"]
        written = [text[a:b] for i, (a, b) in zip(enc["input_ids"][1:-1], enc["offsets"][1:-1])
                   if i in tok.all_special_ids and text[a:b] == tok.convert_ids_to_tokens(i)]
        # every special token written in the text, in order, spanning exactly its characters
        assert written == [m for m in tok._special_re.findall(text)], text
        starts = [a for a, b in enc["offsets"][1:-1]]
        assert starts == sorted(starts), text
    # on plain words (where HF's offsets equal ours), special tokens between them: HF's offsets exactly
    for text in ["Hello [MASK] my dog is [MASK]", "[CLS] Hello, my dog [SEP] is cute [SEP]", "Café [MASK] naïve",
                 "the [MASK] [MASK] end", "[MASK] tab\there [MASK]"]:
        ours = tok(text, return_offsets=True)["offsets"]
        ref = hf_saved(text, return_offsets_mapping=True)["offset_mapping"]
        assert [tuple(o) for o in ours] == [tuple(r) for r in ref], text
        mapping = tok(text, return_offsets_mapping=True)
        assert mapping["offset_mapping"] == ours and "offsets" not in mapping


def test_split_special_tokens_switch_keeps_the_official_behaviour(tok, albert_vocab, hf_slow, tmp_path):
    transformers = pytest.importorskip("transformers")
    hf_split = transformers.AlbertTokenizer.from_pretrained(str(albert_vocab), split_special_tokens=True)
    switched = AlbertTokenizer.from_pretrained(albert_vocab, split_special_tokens=True)
    for text in TEXTS:
        old = [2] + tok.encode_ids(text) + [3]  # the piece-level path: the official encode_pieces, specials as text
        assert old[1:-1] == tok.convert_tokens_to_ids(official_pieces(tok.sp, text)), text
        assert tok(text, split_special_tokens=True)["input_ids"] == old == switched(text)["input_ids"], text
        assert switched.encode(text) == hf_split.encode(text) == hf_slow(text, split_special_tokens=True)["input_ids"]
        assert switched(text, split_special_tokens=False)["input_ids"] == tok(text)["input_ids"]
        assert tok.tokenize(text, split_special_tokens=True) == official_pieces(tok.sp, text)
    assert 4 not in tok.encode("Paris is [MASK].", split_special_tokens=True)
    # the switch is saved in tokenizer_config.json and read back (HF reads the same key)
    switched.save_pretrained(tmp_path)
    assert AlbertTokenizer.from_pretrained(tmp_path).split_special_tokens is True
    assert transformers.AutoTokenizer.from_pretrained(str(tmp_path))("[MASK]")["input_ids"] == [2, 636, 23265, 500, 3]


def test_corpus_path_reads_special_tokens_as_text(tok):
    """google-research/albert create_pretraining_data.py tokenizes raw lines with FullTokenizer.tokenize =
    encode_pieces(preprocess_text(line)): "[MASK]" in a corpus is text, never the mask id. `data prepare` too."""
    from litebert.data.documents import RawDocument
    from litebert.data.store import encode_block

    lines = ["Paris is [MASK].", "[CLS] x [SEP]", "<pad> <unk>"]
    tokens, lengths, _, _, _ = encode_block([RawDocument(parts=lines, split=False, nbytes=1)], tok)
    assert lengths.tolist() == [len(official_pieces(tok.sp, s)) for s in lines]
    assert tokens.tolist() == tok.convert_tokens_to_ids([p for s in lines for p in official_pieces(tok.sp, s)])
    assert not set(tokens.tolist()) & {tok.mask_token_id, tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}


# ------------------------------------------------------------------------------------------------- return_tensors
@pytest.mark.parametrize("kind", ["pt", "np"])
def test_return_tensors_equal_hf(tok, hf_slow, kind):
    texts = ["Paris is [MASK].", "a", "In 2010, the U.S. economy grew (a lot) and grew.", ""]
    cases = [dict(padding=True), dict(padding="longest"), dict(padding="max_length", max_length=24),
             dict(padding=True, truncation=True, max_length=6),
             dict(padding="max_length", truncation=True, max_length=7)]
    for kw in cases:
        for pair in (None, texts[::-1]):
            ours = tok(texts, pair, return_tensors=kind, **kw)
            ref = hf_slow(texts, pair, return_tensors=kind, **kw)
            assert isinstance(ours, BatchEncoding) and set(ours) == set(ref), kw
            for key in ref:
                if kind == "pt":
                    assert ours[key].dtype == torch.int64 and torch.equal(ours[key], ref[key]), (kw, key)
                else:
                    assert ours[key].dtype == np.int64 and np.array_equal(ours[key], ref[key]), (kw, key)
    single = tok("Paris is [MASK].", return_tensors=kind)
    assert tuple(single["input_ids"].shape) == (1, 7) and single.input_ids.tolist() == [[2, 1162, 25, 4, 13, 9, 3]]
    offs = tok(texts, padding=True, return_offsets=True, return_tensors=kind)["offsets"]
    assert tuple(offs.shape) == (4, max(len(r) for r in tok(texts)["input_ids"]), 2)


def test_return_tensors_errors_and_device_move(tok):
    with pytest.raises(TokenizerError, match="padding=True"):
        tok(["a b c", "a"], return_tensors="pt")  # HF refuses ragged rows too
    with pytest.raises(TokenizerError, match="return_tensors='tf'"):
        tok("a", return_tensors="tf")
    enc = tok(["a b", "c"], padding=True, return_tensors="pt").to("cpu")
    assert enc.input_ids.device.type == "cpu" and enc["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    with pytest.raises(AttributeError):
        enc.nothing


def test_encode_equals_hf(tok, hf_slow):
    for text, pair in [("Paris is [MASK].", None), ("a question?", "a [MASK] context."), ("", "x"), ("x" * 50, None)]:
        for kw in ({}, {"add_special_tokens": False}, {"max_length": 8, "truncation": True},
                   {"max_length": 30, "padding": "max_length"}):
            assert tok.encode(text, pair, **kw) == hf_slow.encode(text, pair, **kw), (text, pair, kw)
        t = tok.encode(text, pair, return_tensors="pt")
        assert torch.equal(t, hf_slow.encode(text, pair, return_tensors="pt"))
    with pytest.raises(TokenizerError, match="batch"):
        tok.encode(["a", "b"])


# ------------------------------------------------------------------------------------------------ decode, conversions
def test_decode_equals_hf_slow(tok, hf_slow):
    rows = [tok(t)["input_ids"] for t in TEXTS] + [[2, 10975, 15, 51, 3], [4, 4, 13, 9], [0, 0, 0], [], [1, 1]]
    rows += [tok(t, t[::-1])["input_ids"] for t in TEXTS[:20]]
    for ids in rows:
        for skip in (False, True):
            for clean in (False, True):
                ours = tok.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
                assert ours == hf_slow.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean), ids
    assert tok.decode([2, 1162, 25, 4, 13, 9, 3]) == "[CLS] paris is[MASK] .[SEP]"
    assert tok.decode(torch.tensor([1162, 25]), skip_special_tokens=True) == "paris is"
    assert tok.decode(np.array([[1162, 25]])) == "paris is" and tok.decode(1162) == "paris"
    assert tok.decode([10975, 15, 51, 9], clean_up_tokenization_spaces=True) == "hello, my."
    padded = tok(TEXTS[:10], padding=True, return_tensors="pt")["input_ids"]
    assert tok.batch_decode(padded, skip_special_tokens=True) == hf_slow.batch_decode(padded, skip_special_tokens=True)
    assert tok.batch_decode(padded.tolist()) == hf_slow.batch_decode(padded.tolist())
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([30000])


def test_decode_equals_autotokenizer_without_unknown_pieces(tok, hf_saved):
    # HF's Rust decoder glues <unk> to the next piece and keeps a space for skipped ones; elsewhere it agrees
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        if tok.unk_token_id in ids:
            continue
        for skip in (False, True):
            assert tok.decode(ids, skip_special_tokens=skip) == hf_saved.decode(ids, skip_special_tokens=skip), text


def test_token_conversions_equal_hf(tok, hf_slow):
    for text in TEXTS[:40]:
        ids = tok(text)["input_ids"]
        for skip in (False, True):
            assert tok.convert_ids_to_tokens(ids, skip_special_tokens=skip) == hf_slow.convert_ids_to_tokens(
                ids, skip_special_tokens=skip)
        pieces = tok.convert_ids_to_tokens(ids)
        assert tok.convert_tokens_to_ids(pieces) == hf_slow.convert_tokens_to_ids(pieces) == ids
    assert tok.convert_ids_to_tokens(4) == "[MASK]" and tok.convert_tokens_to_ids("not-a-piece") == 1
    assert tok.convert_ids_to_tokens(np.int64(2)) == "[CLS]"
    assert tok.convert_ids_to_tokens(torch.tensor([2, 3])) == ["[CLS]", "[SEP]"]


def test_hf_attributes_and_output_switches(tok, hf_slow):
    for name in ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "model_input_names"):
        assert getattr(tok, name) == getattr(hf_slow, name), name
    assert sorted(tok.all_special_tokens) == sorted(hf_slow.all_special_tokens)
    assert sorted(tok.all_special_ids) == sorted(hf_slow.all_special_ids)
    assert tok.get_vocab() == hf_slow.get_vocab()
    assert tok(f"Paris is {tok.mask_token}.")["input_ids"][3] == tok.mask_token_id == 4
    for kw in ({"return_token_type_ids": False}, {"return_attention_mask": False},
               {"return_token_type_ids": False, "return_attention_mask": False}, {"return_token_type_ids": True}):
        ours, ref = tok(["a [MASK]", "b"], ["c", "d e"], padding=True, **kw), hf_slow(["a [MASK]", "b"], ["c", "d e"],
                                                                                     padding=True, **kw)
        assert dict(ours) == dict(ref), kw


@pytest.mark.parametrize("options", [{"remove_space": False}, {"do_lower_case": False}, {"keep_accents": True}])
def test_special_tokens_in_text_equal_hf_slow_with_other_options(albert_vocab, options):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AlbertTokenizer(str(albert_vocab / "spiece.model"), **options)
    ours = AlbertTokenizer(albert_vocab / "spiece.model", **options)
    for text in TEXTS:
        assert ours(text)["input_ids"] == hf(text)["input_ids"], (options, text)


def test_hf_fast_converted_from_the_bare_model(tok, albert_vocab):
    """HF 4.57's AlbertTokenizerFast converted from the bare spiece.model agrees where [MASK] sits between words; it
    departs from HF's SentencePiece tokenizer (and litebert) as docs/tokenizer.md lists: a lone ▁ for the whitespace
    next to the other special tokens, and no ▁ before a user-defined piece such as "." after a special token."""
    transformers = pytest.importorskip("transformers")
    fast = transformers.AlbertTokenizerFast(vocab_file=str(albert_vocab / "spiece.model"))
    for text in ["Paris is [MASK]", "[MASK] is Paris", "a[MASK]b", "the [MASK] [MASK] [MASK] end", "Café [MASK] naive",
                 "[MASK]ing un[MASK]able", "über[MASK]straße"]:
        assert fast(text)["input_ids"] == tok(text)["input_ids"], text
    assert fast.tokenize("x [CLS] y") == ["▁x", "▁", "[CLS]", "▁", "y"]
    assert tok.tokenize("x [CLS] y") == ["▁x", "[CLS]", "▁", "y"]
    assert fast.tokenize("Paris is [MASK].")[-1:] == ["."] and tok.tokenize("Paris is [MASK].")[-2:] == ["▁", "."]
