"""AlbertTokenizer against its references: the README's reference ids of the real ALBERT vocabulary, hand-computed
official segmentations, a literal transcription of the official ``preprocess_text`` + ``encode_pieces`` (the spec),
and HF transformers (the oracle) loading a folder we saved -- pairs, truncation, padding, decode included."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from helpers.tokenizer_texts import VARIED, corpus_lines, official_pieces
from litebert.errors import TokenizerError
from litebert.tokenizer import AlbertTokenizer, preprocess_text


@pytest.fixture(scope="module")
def tok(albert_vocab) -> AlbertTokenizer:
    return AlbertTokenizer.from_pretrained(albert_vocab)


@pytest.fixture(scope="module")
def hf_saved(tok, tmp_path_factory):
    """HF's tokenizer loading a folder written by our save_pretrained (spiece.model + tokenizer_config +
    tokenizer.json)."""
    transformers = pytest.importorskip("transformers")
    out = tok.save_pretrained(tmp_path_factory.mktemp("albert_saved"))
    return transformers.AutoTokenizer.from_pretrained(str(out))


@pytest.fixture(scope="module")
def hf_bare(albert_vocab, tmp_path_factory):
    """HF's AlbertTokenizer on the bare spiece.model (with the pinned transformers 4.57.6: the slow SentencePiece
    implementation, which reproduces the official tokenization)."""
    transformers = pytest.importorskip("transformers")
    return transformers.AlbertTokenizer.from_pretrained(str(albert_vocab))


# ------------------------------------------------------------------------------------------ reference ids
def test_readme_reference_ids(tok):
    # data/albert-30k/README.md: ids of the reference tokenizer of the ALBERT ecosystem.
    assert tok("This is a test")["input_ids"] == [2, 48, 25, 21, 1289, 3]
    assert tok("Hello, my dog is cute")["input_ids"] == [2, 10975, 15, 51, 1952, 25, 10901, 3]
    assert tok("I was born in 92000, and this is falsé.")["input_ids"] == [
        2, 31, 23, 386, 19, 561, 3050, 15, 17, 48, 25, 4997, 9, 3]


def test_special_ids_and_fingerprint(tok, albert_vocab):
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id,
            tok.mask_token_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size == len(tok) == 30000
    sums = dict(line.split()[::-1] for line in (albert_vocab / "SHA256SUMS").read_text().splitlines() if line.strip())
    assert tok.fingerprint() == sums["spiece.model"]
    assert tok.fingerprint() == hashlib.sha256((albert_vocab / "spiece.model").read_bytes()).hexdigest()


def test_digit_comma_resplit_hand_computed(tok):
    # SentencePiece alone gives "▁2010," (id 1534) and "▁12,"; the official encode_pieces splits the comma off.
    assert "▁2010," in tok.sp.encode(tok.normalize("In 2010, he"), out_type=str)
    assert tok.tokenize("In 2010, he") == ["▁in", "▁2010", ",", "▁he"]
    assert tok.tokenize("In 2010 he") == ["▁in", "▁2010", "▁he"]  # the same pieces as without the comma
    assert tok.tokenize("1,000,000, rich") == ["▁1", ",000,000", ",", "▁rich"]
    # A piece without ▁ keeps none after the split ("ab12," -> encode "ab12" = ▁ab 12 -> "ab" "12" ","):
    assert tok._resplit_piece("ab12,") == ["ab", "12", ","]
    assert tok._resplit_piece("▁x2010,") == ["▁x", "2010", ","]


def test_user_defined_pieces_follow_sentencepiece(tok):
    # SentencePiece (hence the released models) does not start a new word after a user-defined piece: "4-our" is
    # ▁4 - our, not ▁4 - ▁our (what transformers 5 gives on a bare spiece.model; see docs/tokenizer.md).
    assert tok.tokenize("point 4-our") == ["▁point", "▁4", "-", "our"]
    assert tok.tokenize("(hello)") == ["▁", "(", "hello", ")"]


def test_normalization_hand_computed(tok):
    assert tok.normalize("  Café\u00a0 ``Naïve''\tRÉSUMÉ \n") == 'cafe "naive" resume'
    assert tok.normalize("ﬁ ½ ΣΟΦΟΣ") == "fi 1⁄2 σοφος"  # NFKD, then Python's lower (final sigma)
    cased = AlbertTokenizer(tok.model_file, do_lower_case=False, keep_accents=True, remove_space=False)
    assert cased.normalize(" Café  x ") == " Café  x "


@pytest.mark.parametrize("text", VARIED)
def test_matches_official_transcription(tok, text):
    assert tok.tokenize(text) == official_pieces(tok.sp, text)
    assert tok.encode_ids(text) == [tok.sp.PieceToId(p) for p in official_pieces(tok.sp, text)]


def test_corpus_matches_official_and_fast_path(tok):
    lines = corpus_lines(3000)
    batch = tok.encode_batch_ids(lines)
    for line, ids in zip(lines, batch):
        assert ids == [tok.sp.PieceToId(p) for p in official_pieces(tok.sp, line)], line
        assert ids == tok.convert_tokens_to_ids(tok.tokenize(line))
    assert tok.encode_batch_ids([]) == []


# ------------------------------------------------------------------------------------------ HF transformers
@pytest.mark.parametrize("text", VARIED)
def test_ids_equal_hf_on_saved_folder(tok, hf_saved, text):
    ours = tok(text)
    ref = hf_saved(text, return_token_type_ids=True)
    assert ours["input_ids"] == ref["input_ids"]
    assert ours["token_type_ids"] == ref["token_type_ids"]
    assert ours["attention_mask"] == ref["attention_mask"]


def test_corpus_ids_equal_hf_on_saved_folder(tok, hf_saved):
    """On 3000 held-out lines HF (loading our folder) agrees except where the official digit-comma re-split and HF's
    score-penalty approximation of it pick different pieces (documented)."""
    lines = corpus_lines(3000, seed=1)
    ours = tok.encode_batch_ids(lines)
    ref = hf_saved(lines, add_special_tokens=False)["input_ids"]
    differ = [line for line, a, b in zip(lines, ours, ref) if a != b]
    for line in differ:
        assert any(p.endswith(",") and len(p) > 1 and p[-2].isdigit()
                   for p in tok.sp.encode(tok.normalize(line), out_type=str)), line
    assert len(differ) <= 0.002 * len(lines)


def test_ids_equal_hf_bare_spiece_model(tok, hf_bare):
    """HF's AlbertTokenizer (the pinned transformers 4.57.6: the SentencePiece implementation) on the bare real
    spiece.model gives exactly our ids on every text: the varied set and 3000 held-out corpus lines, with specials."""
    lines = VARIED + corpus_lines(3000, seed=2)
    ours = [tok(t)["input_ids"] for t in lines]
    ref = hf_bare(lines)["input_ids"]
    assert [line for line, a, b in zip(lines, ours, ref) if a != b] == []


def test_pairs_equal_hf_bare_spiece_model(tok, hf_bare):
    lines = corpus_lines(400, seed=3)
    for a, b in zip(lines[::2], lines[1::2]):
        for strategy in ("longest_first", "only_first", "only_second"):
            try:
                ours = tok(a, b, max_length=24, truncation=strategy)
            except TokenizerError:
                continue  # the strategy cannot fit this pair; HF then warns and returns it untruncated
            ref = hf_bare(a, b, max_length=24, truncation=strategy, return_token_type_ids=True)
            assert ours["input_ids"] == ref["input_ids"] and ours["token_type_ids"] == ref["token_type_ids"], (a, b)


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
def test_pairs_truncation_padding_equal_hf(tok, hf_bare, strategy):
    """Against HF's SentencePiece AlbertTokenizer, whose longest_first is the official `_truncate_seq_pair`
    (HF's Rust fast tokenizer splits the budget differently; see docs/tokenizer.md)."""
    a_texts = ["one two three four five six seven eight", "short", "Café, 2010, résumé and more words here", "x"]
    b_texts = ["alpha beta", "a much longer second text with many many words in it", "b", "y z w v u"]
    for max_length in (6, 9, 12, 40):
        for a in a_texts:
            for b in b_texts:
                na, nb = len(tok.encode_ids(a)), len(tok.encode_ids(b))
                budget = max_length - 3
                if strategy == "only_first" and na + nb > budget and nb >= budget:
                    with pytest.raises(TokenizerError, match="cannot fit"):
                        tok(a, b, max_length=max_length, truncation=strategy)
                    continue
                if strategy == "only_second" and na + nb > budget and na >= budget:
                    with pytest.raises(TokenizerError, match="cannot fit"):
                        tok(a, b, max_length=max_length, truncation=strategy)
                    continue
                ours = tok(a, b, max_length=max_length, truncation=strategy, padding="max_length")
                ref = hf_bare(a, b, max_length=max_length, truncation=strategy, padding="max_length",
                               return_token_type_ids=True)
                for key in ("input_ids", "token_type_ids", "attention_mask"):
                    assert ours[key] == ref[key], (key, a, b, max_length)


def test_batch_single_truncation_and_longest_padding_equal_hf(tok, hf_saved):
    texts = ["a b c d e f g h", "hello", "", "In 2010, the U.S. economy grew."]
    ours = tok(texts, max_length=5, truncation=True, padding=True)
    ref = hf_saved(texts, max_length=5, truncation=True, padding=True)
    assert ours["input_ids"] == ref["input_ids"] and ours["attention_mask"] == ref["attention_mask"]
    ours = tok(texts, texts[::-1], padding="longest")
    ref = hf_saved(texts, texts[::-1], padding="longest", return_token_type_ids=True)
    assert ours["input_ids"] == ref["input_ids"] and ours["token_type_ids"] == ref["token_type_ids"]


def test_offsets_equal_hf_on_plain_text(tok, hf_saved):
    for text in ["Hello, my dog is cute", "Café naïve   résumé", "I was born in 92000, and this is falsé.",
                 "Tab\tand\nnewline   runs", "ﬁne ½"]:
        ours = tok(text, return_offsets=True)["offsets"]
        ref = hf_saved(text, return_offsets_mapping=True)["offset_mapping"]
        assert [tuple(o) for o in ours] == [tuple(r) for r in ref], text


def test_decode_and_conversions_equal_hf(tok, hf_saved):
    for text in ["Hello, my dog is cute", "In 2010, the U.S. grew (a lot).", "Café naïve"]:
        ids = tok(text)["input_ids"]
        assert tok.decode(ids, skip_special_tokens=True) == hf_saved.decode(ids, skip_special_tokens=True)
        assert tok.convert_ids_to_tokens(ids) == hf_saved.convert_ids_to_tokens(ids)
        assert tok.convert_tokens_to_ids(tok.convert_ids_to_tokens(ids)) == ids
    # HF's AlbertTokenizer (slow and fast) appends a special token after a piece without a space
    assert tok.decode([2, 10975, 15, 51, 3]) == hf_saved.decode([2, 10975, 15, 51, 3]) == "[CLS] hello, my[SEP]"


# ------------------------------------------------------------------------------------------ vocabulary facts
def test_word_start_mask_official_is_start_piece(tok):
    """The official ``_is_start_piece_sp``: ▁ or < first, a punctuation character, or any character outside the
    English letters and that punctuation (digits, "'", "£", accents...)."""
    mask = tok.word_start_mask()
    assert mask.shape == (30000,) and mask.dtype == bool
    expect = {"▁the": True, "ing": False, ",": True, ".": True, "<unk>": True, "<pad>": True, "'": True, "=": True,
              ";": True, "[CLS]": False, "ness": False, "-": True, "£": True, "2000": True, "s": False}
    for piece, value in expect.items():
        i = tok.convert_tokens_to_ids(piece)
        assert tok.convert_ids_to_tokens(i) == piece  # the piece is in the vocabulary
        assert mask[i] == value, piece
    # 913 pieces start a word only through the "other character" clause (an independent count of the official rule)
    punct = set('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
    without = np.array([p.startswith("▁") or p.startswith("<") or p in punct
                        for p in tok.convert_ids_to_tokens(range(30000))])
    assert int((mask & ~without).sum()) == 913 and not (without & ~mask).any()
    # "don't" is two words officially ("▁don", "'", "t": the apostrophe starts the second)
    pieces = tok.tokenize("don't")
    starts = [bool(mask[i]) for i in tok.convert_tokens_to_ids(pieces)]
    assert pieces == ["▁don", "'", "t"] and starts == [True, True, False]


def test_normal_piece_ids(tok):
    ids = tok.normal_piece_ids()
    # ids 0-4 are <pad> <unk> and the control pieces, 5-12 the user-defined ( ) " - . – £ € of the official model.
    assert ids.dtype == np.int64 and ids[0] == 13 and len(ids) == 30000 - 13
    assert np.all(np.diff(ids) > 0)


# ------------------------------------------------------------------------------------------ bad input
def test_missing_and_corrupt_model(tmp_path):
    with pytest.raises(TokenizerError, match="not found"):
        AlbertTokenizer(tmp_path / "nope.model")
    with pytest.raises(TokenizerError, match="no such"):
        AlbertTokenizer.from_pretrained(tmp_path / "nope")
    with pytest.raises(TokenizerError, match="no spiece.model"):
        AlbertTokenizer.from_pretrained(tmp_path)
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"\x00garbage" * 50)
    with pytest.raises(TokenizerError, match="not a valid SentencePiece model"):
        AlbertTokenizer(bad)


def test_truncated_model_file(albert_vocab, tmp_path):
    cut = tmp_path / "cut.model"
    cut.write_bytes((albert_vocab / "spiece.model").read_bytes()[:100_000])
    with pytest.raises(TokenizerError, match="cut.model"):
        AlbertTokenizer(cut)


def test_model_without_albert_specials(tmp_path):
    import sentencepiece as spm

    corpus = tmp_path / "c.txt"
    rng = random.Random(0)
    corpus.write_text("\n".join(" ".join(rng.choice(["ab", "cd", "ef", "gh", "abcd"]) for _ in range(8))
                                for _ in range(200)))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "plain"), vocab_size=15,
                                   minloglevel=2)  # defaults: <unk>=0 <s>=1 </s>=2, no pad/CLS/SEP/MASK
    with pytest.raises(TokenizerError) as e:
        AlbertTokenizer(tmp_path / "plain.model")
    assert "<pad>, [CLS], [SEP], [MASK]" in str(e.value) and "<unk>," not in str(e.value)


def test_bad_tokenizer_config(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": "yes"}')
    with pytest.raises(TokenizerError, match="do_lower_case"):
        AlbertTokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(TokenizerError, match="not valid JSON"):
        AlbertTokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    assert AlbertTokenizer.from_pretrained(tmp_path).tokenize("Hello") != tok.tokenize("Hello")


def test_bad_call_arguments(tok):
    with pytest.raises(TokenizerError, match="needs max_length"):
        tok("a", truncation=True)
    with pytest.raises(TokenizerError, match="truncation="):
        tok("a", truncation="sideways", max_length=4)
    with pytest.raises(TokenizerError, match="padding="):
        tok("a", padding="max_length")
    with pytest.raises(TokenizerError, match="text_pair"):
        tok(["a", "b"], ["c"])
    with pytest.raises(TokenizerError, match="needs a text pair"):
        tok("a b c", max_length=3, truncation="only_second")


def test_preprocess_text_is_official_default():
    # lower=True is our default (do_lower_case); official signature default was lower=False but every caller passed
    # FLAGS.do_lower_case=True for the English models.
    assert preprocess_text("  A  B ") == "a b"
    assert preprocess_text("  A  B ", lower=False, remove_space=False) == "  A  B "


def test_longest_first_is_the_official_pop_loop():
    """Closed-form truncation equals the official run_classifier `_truncate_seq_pair` loop, exhaustively."""
    from litebert.tokenizer.base import _truncated_lengths

    for n1 in range(0, 25):
        for n2 in range(0, 25):
            for budget in range(0, 30):
                a, b = n1, n2
                while a + b > budget:
                    if a > b:
                        a -= 1
                    else:
                        b -= 1
                assert _truncated_lengths(n1, n2, budget, "longest_first") == (a, b), (n1, n2, budget)
