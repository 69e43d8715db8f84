"""WordPiece (BERT-style) tokenizers against transformers as the oracle: ids, tokens, pairs, truncation, padding,
offsets, special tokens written in the text and decoding equal to HF's ``BertTokenizer`` (the slow Python one) and
``BertTokenizerFast``, on a vocabulary with Chinese, accented and English text, under every normalization setting;
`load_tokenizer` telling the folders apart; one-line errors."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest

from helpers import COMMIT, bert_tokenizer_folder, cache_repo, wordpiece_vocab, write_wordpiece_vocab
from litebert.cli import main
from litebert.errors import TokenizerError
from litebert.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer, tokenizer_format

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

TEXTS = [
    "", "   ", "The quick brown fox jumps over the lazy dog.", "unaffable", "Hello, world! 中国人",
    "我爱北京天安门。今年很好！", "我们在上海，他们在北京、东京？", "中国的大学生 in 2010 说话",
    "Café naïve résumé Zürich",
    "CAFÉ CAFE café", "ÀÉÏÜ àéïü", "Paris is the capital of France", "tab\there\nnew\r\nline", "ctrl\x00\x07 x\ufffd y",
    "a\u00a0b\u3000c", "emoji 😀 ok", "Ωmega ß ﬁ", "a" * 101, "hello" * 25, "un-affable (hello) [world] {x} <y>",
    "whales shipped seaing quickly", "中国人abc北京def", "日本語のテキスト", "x" * 5 + "中" + "y" * 5,
    "[unused1] [PAD]",
]
SETTINGS = [{}, {"do_lower_case": False}, {"do_lower_case": True, "strip_accents": False},
            {"do_lower_case": False, "strip_accents": True}, {"tokenize_chinese_chars": False}]
WITH_SPECIALS = ["Paris is [MASK].", "[CLS] 我爱[MASK]京 [SEP]", "x[MASK]y [mask] [ MASK ]", "[UNK][PAD] ok",
                 "中国[SEP]北京", "[MASK]"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write_wordpiece_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{settings index: (folder written by BertTokenizer.save_pretrained, slow, fast)}."""
    out = {}
    for i, options in enumerate(SETTINGS):
        folder = tmp_path_factory.mktemp(f"bert{i}")
        slow = bert_tokenizer_folder(folder, **options)
        out[i] = folder, slow, transformers.BertTokenizerFast.from_pretrained(folder)
    return out


# ------------------------------------------------------------------------------------------ ids equal to HF
@pytest.mark.parametrize("k", range(len(SETTINGS)), ids=[json.dumps(s) for s in SETTINGS])
def test_ids_and_tokens_equal_bert_tokenizer_slow_and_fast(folders, vocab_file, k):
    folder, slow, fast = folders[k]
    tok = load_tokenizer(folder)  # the settings come from the folder's tokenizer_config.json
    assert isinstance(tok, WordPieceTokenizer)
    bare = load_tokenizer(vocab_file, **SETTINGS[k])  # the vocabulary alone, settings given
    for text in TEXTS + WITH_SPECIALS:
        ours = tok(text)["input_ids"]
        assert ours == slow(text)["input_ids"] == fast(text)["input_ids"], text
        assert bare(text)["input_ids"] == ours
        assert tok.tokenize(text) == slow.tokenize(text) == fast.tokenize(text), text
    # the test set exercises what it claims: unknown words, ## pieces and the settings each change some ids
    ids = [i for t in TEXTS for i in tok.encode_ids(t)]
    assert tok.unk_token_id in ids and any(tok.convert_ids_to_tokens(i).startswith("##") for i in ids)


def test_the_settings_change_the_ids(folders):
    """Each setting changes the ids of some text (else the test above could not tell them apart)."""
    texts = TEXTS + WITH_SPECIALS
    ids = {k: [load_tokenizer(folders[k][0]).encode(t) for t in texts] for k in folders}
    assert len({json.dumps(v) for v in ids.values()}) == len(SETTINGS)


def test_decomposed_accents_kept_follow_the_fast_tokenizer(folders):
    """With accents kept, HF's slow BertTokenizer composes the text (NFC) first; BertTokenizerFast and the official
    BERT code do not, and neither does litebert (docs/tokenizer.md)."""
    folder, slow, fast = folders[2]  # lower-case, accents kept
    tok = load_tokenizer(folder)
    text = "cafe\u0301 re\u0301sume\u0301 zu\u0308rich"
    assert tok(text)["input_ids"] == fast(text)["input_ids"]
    assert slow(text)["input_ids"] != fast(text)["input_ids"]
    composed = "café résumé zürich"
    assert tok(composed)["input_ids"] == slow(composed)["input_ids"] == fast(composed)["input_ids"]


# ------------------------------------------------------------------------------- pairs, truncation, padding
@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
def test_pairs_and_truncation_equal_the_slow_tokenizer(folders, strategy):
    folder, slow, fast = folders[0]
    tok = load_tokenizer(folder)
    pairs = [("我爱北京天安门", "the quick brown fox jumps"), ("unaffable hello world", "中国"),
             ("Paris is the capital of France", "Berlin is in Germany and it was lazy")]
    for a, b in pairs:
        n = len(tok.encode_ids(a)) + len(tok.encode_ids(b)) + 3
        for max_length in range(n - 4, n + 2):
            expected = slow(a, b, truncation=strategy, max_length=max_length)
            if len(expected["input_ids"]) > max_length:  # HF logs that the cut would empty a text; litebert refuses
                with pytest.raises(TokenizerError, match="cannot fit"):
                    tok(a, b, truncation=strategy, max_length=max_length)
                continue
            ours = tok(a, b, truncation=strategy, max_length=max_length)
            assert dict(ours) == {k: expected[k] for k in ours}, (a, b, max_length)
            if strategy != "longest_first":  # the Rust tokenizer splits longest_first's budget its own way
                assert ours["input_ids"] == fast(a, b, truncation=strategy, max_length=max_length)["input_ids"]


def test_batches_padding_and_tensors_equal_hf(folders):
    folder, slow, _ = folders[0]
    tok = load_tokenizer(folder)
    a, b = ["我爱北京", "the lazy dog", "unaffable"], ["中国人", "hello", "world 2010"]
    for kw in ({"padding": True}, {"padding": "max_length", "max_length": 12, "truncation": True}):
        ours, theirs = tok(a, b, return_tensors="np", **kw), slow(a, b, return_tensors="np", **kw)
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            np.testing.assert_array_equal(ours[key], theirs[key])
    assert tok.encode("我爱北京", "中国") == slow.encode("我爱北京", "中国")
    assert tok("我爱", add_special_tokens=False)["input_ids"] == slow("我爱", add_special_tokens=False)["input_ids"]


def test_offsets_equal_the_fast_tokenizer(folders):
    folder, _, fast = folders[0]
    tok = load_tokenizer(folder)
    for text in TEXTS + WITH_SPECIALS:
        ours = tok(text, return_offsets_mapping=True)["offset_mapping"]
        assert ours == [tuple(o) for o in fast(text, return_offsets_mapping=True)["offset_mapping"]], text
    a, b = "Café naïve 中国", "résumé 北京 2010"
    ours = tok(a, b, return_offsets=True)["offsets"]
    assert ours == [tuple(o) for o in fast(a, b, return_offsets_mapping=True)["offset_mapping"]]
    ids, spans = tok.encode_with_offsets("  Zürich, 我爱")
    assert [("  Zürich, 我爱")[s:e] for s, e in spans] == ["Zürich", ",", "我", "爱"]
    assert tok.convert_ids_to_tokens(ids) == ["zurich", ",", "我", "爱"]


# -------------------------------------------------------------------------------- special tokens in the text
def test_special_tokens_in_text_both_ways_equal_hf(folders, vocab_file):
    folder = folders[0][0]
    tok = load_tokenizer(folder)
    # HF's slow BertTokenizer with split_special_tokens still keeps [CLS] [SEP] [PAD] [UNK] whole (its basic
    # tokenizer's never_split) and splits [MASK] only; the fast one splits them all, as BERT's own code does.
    split_fast = transformers.BertTokenizerFast(str(vocab_file), split_special_tokens=True)
    for text in WITH_SPECIALS:
        assert tok(text, split_special_tokens=True)["input_ids"] == split_fast(text)["input_ids"], text
    assert tok("[CLS]", split_special_tokens=True, add_special_tokens=False)["input_ids"] == \
        tok.convert_tokens_to_ids(["[", "c", "##l", "##s", "]"])
    assert tok("Paris is [MASK].")["input_ids"][3] == tok.mask_token_id
    # the piece-level path (token stores) reads them as text, as BERT's create_pretraining_data does
    assert tok.encode_ids("[MASK]") == tok.convert_tokens_to_ids(["[", "mask", "]"])
    assert load_tokenizer(folder, split_special_tokens=True).tokenize("[MASK]") == ["[", "mask", "]"]


# ------------------------------------------------------------------------------------ decoding, attributes
def test_decode_and_attributes_equal_hf(folders):
    folder, slow, _ = folders[0]
    tok = load_tokenizer(folder)
    for text in ["Hello, world! 中国人", "unaffable whales", "Paris is [MASK].", "it was 2010 . ok"]:
        ids = slow(text)["input_ids"]
        for skip in (False, True):
            assert tok.decode(ids, skip_special_tokens=skip) == slow.decode(ids, skip_special_tokens=skip)
            assert tok.decode(ids, skip, False) == slow.decode(ids, skip, clean_up_tokenization_spaces=False)
    assert tok.batch_decode([[5, 80], [81]]) == slow.batch_decode([[5, 80], [81]])
    assert tok.vocab_size == slow.vocab_size == len(tok) == len(wordpiece_vocab())
    assert tok.get_vocab() == slow.get_vocab()
    assert tok.all_special_tokens == slow.all_special_tokens and tok.all_special_ids == slow.all_special_ids
    for name in ("pad", "unk", "cls", "sep", "mask"):
        assert getattr(tok, f"{name}_token_id") == getattr(slow, f"{name}_token_id")
        assert getattr(tok, f"{name}_token") == getattr(slow, f"{name}_token")
    assert tok.model_input_names == slow.model_input_names
    assert tok.convert_tokens_to_ids(["我", "nope", "##able"]) == slow.convert_tokens_to_ids(["我", "nope", "##able"])
    assert tok.convert_ids_to_tokens([0, 9, 100]) == slow.convert_ids_to_tokens([0, 9, 100])


def test_vocabulary_facts(vocab_file):
    tok = load_tokenizer(vocab_file)
    vocab = wordpiece_vocab()
    # BERT's whole-word rule: a ## piece continues the word of the piece before it; everything else starts one
    np.testing.assert_array_equal(tok.word_start_mask(), [not t.startswith("##") for t in vocab])
    assert not tok.word_start_mask()[vocab.index("##国")] and tok.word_start_mask()[vocab.index("国")]
    normal = set(tok.normal_piece_ids().tolist())
    assert normal == set(range(len(vocab))) - {vocab.index(t) for t in vocab[:7]}  # no [PAD] [unusedN] [UNK] ...
    assert tok.fingerprint() == hashlib.sha256(vocab_file.read_bytes()).hexdigest()  # sha256sum vocab.txt
    other = vocab_file.parent / "other.txt"
    other.write_text(vocab_file.read_text(encoding="utf-8") + "extra\n", encoding="utf-8")
    assert load_tokenizer(other).fingerprint() != tok.fingerprint()


# --------------------------------------------------------------------------------------- folders and files
def test_saved_folder_reads_back_in_litebert_and_transformers(folders, tmp_path):
    folder = folders[3][0]  # cased, accents stripped: the settings must travel
    tok = load_tokenizer(folder)
    out = tok.save_pretrained(tmp_path / "saved")
    assert (out / "vocab.txt").read_bytes() == (folder / "vocab.txt").read_bytes()
    again = load_tokenizer(out)
    hf_slow = transformers.BertTokenizer.from_pretrained(out)
    hf_auto = transformers.AutoTokenizer.from_pretrained(out)  # BertTokenizerFast, from our tokenizer.json
    assert type(hf_auto).__name__ == "BertTokenizerFast"
    for text in TEXTS + WITH_SPECIALS:
        assert again(text)["input_ids"] == tok(text)["input_ids"] == hf_slow(text)["input_ids"], text
        assert hf_auto(text)["input_ids"] == tok(text)["input_ids"], text
    assert (again.do_lower_case, again.strip_accents, again.split_special_tokens) == (False, True, False)
    split = load_tokenizer(folder, split_special_tokens=True).save_pretrained(tmp_path / "split")
    assert load_tokenizer(split).split_special_tokens is True
    hf_split = transformers.AutoTokenizer.from_pretrained(split)
    for text in WITH_SPECIALS:
        assert load_tokenizer(split)(text)["input_ids"] == hf_split(text)["input_ids"], text


def test_tokenizer_json_alone(folders, tmp_path):
    """A folder holding only tokenizer.json (as a fast tokenizer saves it with legacy_format=False), and the
    tokenizer.json file itself."""
    _, _, fast = folders[1]  # cased
    fast.save_pretrained(tmp_path / "fast", legacy_format=False)
    assert not (tmp_path / "fast" / "vocab.txt").exists()
    for path in (tmp_path / "fast", tmp_path / "fast" / "tokenizer.json"):
        assert tokenizer_format(path) == "wordpiece"
        tok = load_tokenizer(path)
        assert tok.do_lower_case is False
        for text in TEXTS + WITH_SPECIALS:
            assert tok(text)["input_ids"] == fast(text)["input_ids"], text


def test_load_tokenizer_tells_the_folders_apart(folders, vocab_file, albert_vocab, tmp_path, monkeypatch):
    assert isinstance(load_tokenizer(albert_vocab), AlbertTokenizer)
    assert isinstance(load_tokenizer(albert_vocab / "spiece.model"), AlbertTokenizer)
    assert isinstance(load_tokenizer(vocab_file), WordPieceTokenizer)
    assert tokenizer_format(folders[0][0]) == "wordpiece" and tokenizer_format(albert_vocab) == "sentencepiece"
    assert tokenizer_format(tmp_path) is None
    # a hub id: its snapshot in the Hugging Face cache (offline, no download)
    home = tmp_path / "hf_home"
    cache_repo(home, "someone/bert-style-vocab", folders[0][0])
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = load_tokenizer("someone/bert-style-vocab")
    assert isinstance(tok, WordPieceTokenizer) and COMMIT in str(tok.vocab_file)
    assert tok("我爱北京")["input_ids"] == folders[0][1]("我爱北京")["input_ids"]


def test_tokenizer_encode_command(folders, capsys):
    folder, _, fast = folders[0]
    text = "Café 我爱北京 unaffable"
    assert main(["tokenizer", "encode", "--tokenizer", str(folder), "--text", text, "--pieces", "--offsets"]) == 0
    row = json.loads(capsys.readouterr().out)
    enc = fast(text, return_offsets_mapping=True)
    assert row["input_ids"] == enc["input_ids"] and row["pieces"] == fast.convert_ids_to_tokens(enc["input_ids"])
    assert row["offsets"] == [list(o) for o in enc["offset_mapping"]]


# ---------------------------------------------------------------------------------------- one-line errors
def _error(call, match: str) -> str:
    with pytest.raises(TokenizerError, match=match) as e:
        call()
    assert "\n" not in str(e.value)
    return str(e.value)


def test_bad_vocabularies_and_configs_are_one_line_errors(tmp_path, vocab_file):
    vocab = wordpiece_vocab()

    def folder(name, lines=None, config=None, raw=None):
        path = tmp_path / name
        path.mkdir()
        text = "".join(t + "\n" for t in (vocab if lines is None else lines))
        (path / "vocab.txt").write_bytes(raw if raw is not None else text.encode("utf-8"))
        if config is not None:
            (path / "tokenizer_config.json").write_text(json.dumps(config))
        return path

    _error(lambda: load_tokenizer(folder("nomask", [t for t in vocab if t != "[MASK]"])),
           r"vocab.txt: the vocabulary lacks the special token\(s\) \[MASK\]")
    _error(lambda: load_tokenizer(folder("dup", vocab + ["hello"])),
           rf"vocab.txt:{len(vocab) + 1}: the token 'hello' is already on line {vocab.index('hello') + 1}")
    _error(lambda: load_tokenizer(folder("latin1", raw=b"[PAD]\n[UNK]\ncaf\xe9\n")), r"vocab.txt:3: not UTF-8")
    _error(lambda: load_tokenizer(folder("empty", raw=b"")), "vocab.txt: empty vocabulary")
    _error(lambda: load_tokenizer(folder("flag", config={"do_lower_case": "yes"})),
           r"tokenizer_config.json: 'do_lower_case' must be true or false, got 'yes'")
    _error(lambda: load_tokenizer(folder("basic", config={"do_basic_tokenize": False})),
           r"'do_basic_tokenize' is False")
    _error(lambda: load_tokenizer(vocab_file, keep_accents=True),
           "keep_accents is not an option of a WordPiece tokenizer")
    # a named special token the vocabulary lacks
    _error(lambda: load_tokenizer(folder("named", config={"mask_token": {"content": "<mask>"}})),
           r"lacks the special token\(s\) <mask>")
    _error(lambda: load_tokenizer(tmp_path / "missing"), "no such tokenizer folder or file")


def test_bad_tokenizer_json_is_one_line_error(folders, tmp_path):
    _, _, fast = folders[0]
    fast.save_pretrained(tmp_path / "fast", legacy_format=False)
    data = json.loads((tmp_path / "fast" / "tokenizer.json").read_text())

    def write(name, **changes):
        path = tmp_path / name
        path.write_text(json.dumps({**data, **changes}))
        return path

    _error(lambda: load_tokenizer(write("norm.json", normalizer={"type": "Lowercase"})),
           "norm.json: 'normalizer' is not a BertNormalizer")
    _error(lambda: load_tokenizer(write("pre.json", pre_tokenizer={"type": "Whitespace"})),
           "pre.json: 'pre_tokenizer' is not a BertPreTokenizer")
    gap = {**data["model"], "vocab": {**data["model"]["vocab"], "zzz": 10_000}}
    _error(lambda: load_tokenizer(write("gap.json", model=gap)), r"gap.json: model.vocab gives 'zzz' the id 10000")
    prefix = {**data["model"], "continuing_subword_prefix": "@@"}
    _error(lambda: load_tokenizer(write("prefix.json", model=prefix)), "continuing_subword_prefix")
    added = data["added_tokens"] + [{"id": 10_000, "content": "<new>", "special": True}]
    _error(lambda: load_tokenizer(write("added.json", added_tokens=added)), r"added_tokens\[5\] is not a token")


def test_without_tokenizers_the_error_says_what_to_install(vocab_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # `import tokenizers` now raises ImportError
    message = _error(lambda: load_tokenizer(vocab_file), "needs the tokenizers library")
    assert "install it with pip install 'tokenizers>=0.15'" in message and str(vocab_file) in message
