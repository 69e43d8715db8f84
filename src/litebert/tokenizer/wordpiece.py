"""WordPiece (BERT-style) vocabularies: a ``vocab.txt`` (with ``tokenizer_config.json``), as the Chinese ALBERTs on
the Hugging Face Hub ship it beside the model (they pair ALBERT with ``BertTokenizer``), or a WordPiece
``tokenizer.json``.

The tokenization is HF ``tokenizers``' WordPiece, assembled as transformers' ``BertTokenizerFast`` is (its
``BertConverter``): ``BertNormalizer`` (drop control characters, spaces around CJK characters, strip accents,
lower-case), ``BertPreTokenizer`` (split on whitespace and punctuation), then greedy longest-match-first WordPiece
with ``##`` continuations, a word it cannot cover or of more than 100 characters being ``[UNK]``. Pairs, truncation
and padding are `TokenizerBase`'s, as HF's ``BertTokenizer`` does them. ``tokenizers`` is imported only when such a
tokenizer is built (the ``wordpiece`` extra).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from litebert.errors import TokenizerError
from litebert.extras import install_hint
from litebert.files import atomic_write, decode_utf8, read_json, write_json
from litebert.tokenizer.base import CONFIG_NAME, HF_JSON_NAME, MODEL_INPUT_NAMES, TokenizerBase, clean_up_tokenization

VOCAB_NAME = "vocab.txt"
PREFIX = "##"  # a piece that continues the word of the piece before it (BERT's WordpieceTokenizer)
MAX_WORD_CHARS = 100  # longer words are [UNK] (BERT's max_input_chars_per_word)
# HF's BertTokenizer special-token attributes and defaults, in the order of its all_special_tokens
SPECIAL_DEFAULTS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                    "mask_token": "[MASK]"}
CONFIG_OPTIONS = ("do_lower_case", "strip_accents", "tokenize_chinese_chars", "split_special_tokens",
                  "clean_up_tokenization_spaces")  # read from tokenizer_config.json
OPTIONS = CONFIG_OPTIONS + ("num_threads",)
_RESERVED = re.compile(r"\[\w*\]")  # [PAD], [unused17]...: never drawn as a random replacement


def import_tokenizers(where) -> object:
    """The ``tokenizers`` module; without it, a one-line error naming ``where`` and the extra to install."""
    try:
        import tokenizers
    except ImportError:
        raise TokenizerError(f"{where}: a WordPiece (BERT-style) tokenizer needs the tokenizers library; install it "
                             f"with {install_hint('wordpiece', 'tokenizers')}") from None
    return tokenizers


def read_vocab(path: str | os.PathLike) -> list[str]:
    """The tokens of a ``vocab.txt`` by id: one a line, the line's number (from 0) its id, lines ending in
    ``\\n``, ``\\r\\n`` or ``\\r`` as transformers' ``load_vocab`` reads them; a byte order mark before the first
    token is not part of it (`litebert.files.decode_utf8`)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TokenizerError(f"{path}: cannot read the vocabulary ({e.strerror or e})") from None
    text = decode_utf8(data, path, TokenizerError, fix=f"a {VOCAB_NAME} holds one UTF-8 token a line")
    tokens = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if tokens[-1] == "":
        tokens.pop()  # the end of the last line
    if not tokens:
        raise TokenizerError(f"{path}: empty vocabulary; a {VOCAB_NAME} holds one token a line")
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token in seen:
            raise TokenizerError(f"{path}:{i + 1}: the token {token!r} is already on line {seen[token] + 1}; each "
                                 "token must be listed once (its line number is its id)")
        seen[token] = i
    return tokens


class WordPieceTokenizer(TokenizerBase):
    """A BERT-style WordPiece tokenizer with the interface of `AlbertTokenizer` (`TokenizerBase`).
    ``from_pretrained(folder_or_file)`` to load; `litebert.tokenizer.load_tokenizer` picks it for such folders."""

    def __init__(self, vocab_file: str | os.PathLike, *, tokens: list[str] | None = None, do_lower_case: bool = True,
                 strip_accents: bool | None = None, tokenize_chinese_chars: bool = True,
                 split_special_tokens: bool = False, clean_up_tokenization_spaces: bool = True,
                 special_tokens: dict[str, str] | None = None, num_threads: int = -1):
        """``vocab_file``: the ``vocab.txt`` (or, with ``tokens``, the file those tokens came from, for messages).
        Options as HF's ``BertTokenizer``: ``strip_accents`` None follows ``do_lower_case``. ``special_tokens``:
        other names for ``unk_token``, ``sep_token``, ``pad_token``, ``cls_token``, ``mask_token``. ``num_threads``:
        1 encodes batches in this thread only, anything else with all of ``tokenizers``' threads."""
        self.vocab_file = Path(vocab_file)
        self._pieces = list(tokens) if tokens is not None else read_vocab(self.vocab_file)
        self._ids = {t: i for i, t in enumerate(self._pieces)}
        self.vocab_size = len(self._pieces)
        names = {**SPECIAL_DEFAULTS, **(special_tokens or {})}
        missing = [t for t in names.values() if t not in self._ids]
        if missing:
            raise TokenizerError(f"{self.vocab_file}: the vocabulary lacks the special token(s) {', '.join(missing)} "
                                 "that a BERT-style tokenizer needs")
        for attr, token in names.items():
            setattr(self, attr, token)
            setattr(self, attr + "_id", self._ids[token])
        self.all_special_tokens = list(dict.fromkeys(names.values()))
        self.all_special_ids = [self._ids[t] for t in self.all_special_tokens]
        self.do_lower_case, self.strip_accents = do_lower_case, strip_accents
        self.tokenize_chinese_chars, self.split_special_tokens = tokenize_chinese_chars, split_special_tokens
        self.clean_up_tokenization_spaces, self.num_threads = clean_up_tokenization_spaces, num_threads
        self.model_input_names = list(MODEL_INPUT_NAMES)
        self._tk = self._backend()

    def _backend(self):
        """The ``tokenizers.Tokenizer``: BertTokenizerFast's pipeline. The post-processor is used only by HF
        loading the saved ``tokenizer.json``: litebert adds [CLS]/[SEP] itself (`TokenizerBase`)."""
        tk = import_tokenizers(self.vocab_file)
        model = tk.models.WordPiece(self._ids, unk_token=self.unk_token, continuing_subword_prefix=PREFIX,
                                    max_input_chars_per_word=MAX_WORD_CHARS)
        backend = tk.Tokenizer(model)
        backend.normalizer = tk.normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=self.tokenize_chinese_chars, strip_accents=self.strip_accents,
            lowercase=self.do_lower_case)
        backend.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
        backend.decoder = tk.decoders.WordPiece(prefix=PREFIX)
        # Special tokens written in a text are matched as written, before normalization (as HF's)
        backend.add_special_tokens([tk.AddedToken(t, special=True, normalized=False) for t in self.all_special_tokens])
        cls, sep = self.cls_token, self.sep_token
        backend.post_processor = tk.processors.TemplateProcessing(
            single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, self.cls_token_id), (sep, self.sep_token_id)])
        return backend

    # ---------------------------------------------------------------- loading / saving
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **overrides) -> "WordPieceTokenizer":
        """Load a folder holding ``vocab.txt`` (or a WordPiece ``tokenizer.json`` alone; ``tokenizer_config.json``
        optional), a vocabulary ``.txt`` file, a ``tokenizer.json`` file, or a hub id (`litebert.hub.local`).
        ``overrides`` (``do_lower_case``, ``strip_accents``, ...) win over the folder's settings."""
        from litebert import hub

        path = hub.local(path, "tokenizer")
        unknown = sorted(set(overrides) - set(OPTIONS))
        if unknown:
            raise TokenizerError(f"{path}: {', '.join(unknown)} is not an option of a WordPiece tokenizer (options: "
                                 f"{', '.join(OPTIONS)})")
        tokens, options = None, {}
        if path.is_dir():
            source, hf_json = path / VOCAB_NAME, path / HF_JSON_NAME
            if not source.is_file() and hf_json.is_file():
                source = hf_json
                tokens, options = read_tokenizer_json(hf_json)
            elif not source.is_file():
                raise TokenizerError(f"{path}: no {VOCAB_NAME} or WordPiece {HF_JSON_NAME} in this folder")
            if (path / CONFIG_NAME).is_file():
                options.update(read_config(path / CONFIG_NAME))
        elif path.is_file():
            source = path
            if path.suffix == ".json":
                tokens, options = read_tokenizer_json(path)
        else:
            raise TokenizerError(f"{path}: no such WordPiece vocabulary file or tokenizer folder")
        return cls(source, tokens=tokens, **{**options, **overrides})

    def save_pretrained(self, out_dir: str | os.PathLike) -> Path:
        """Write ``vocab.txt`` + ``tokenizer_config.json`` (what HF's ``BertTokenizer`` reads) + ``tokenizer.json``
        (what ``BertTokenizerFast`` / ``AutoTokenizer`` reads)."""
        out = Path(out_dir)
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.do_lower_case,
                  "strip_accents": self.strip_accents, "tokenize_chinese_chars": self.tokenize_chinese_chars,
                  "do_basic_tokenize": True, **{attr: getattr(self, attr) for attr in SPECIAL_DEFAULTS},
                  "model_max_length": 512, "model_input_names": MODEL_INPUT_NAMES,
                  "split_special_tokens": self.split_special_tokens,
                  "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces}
        atomic_write(out / VOCAB_NAME, self._vocab_text())
        write_json(out / CONFIG_NAME, config)
        atomic_write(out / HF_JSON_NAME, self._tk.to_str())
        return out

    def _vocab_text(self) -> str:
        return "".join(t + "\n" for t in self._pieces)

    def fingerprint(self) -> str:
        """sha256 of the vocabulary as ``save_pretrained`` writes ``vocab.txt`` (one token a line, ``\\n``-ended):
        data made with one vocabulary must not be read with another."""
        return hashlib.sha256(self._vocab_text().encode("utf-8")).hexdigest()

    # ---------------------------------------------------------------- vocabulary facts
    def word_start_mask(self) -> np.ndarray:
        """[vocab_size] bool: every piece starts a word except the ``##`` continuations, which belong to the word
        of the piece before them (BERT's whole-word masking, ``create_pretraining_data.py``)."""
        return np.array([not t.startswith(PREFIX) for t in self._pieces], dtype=bool)

    def normal_piece_ids(self) -> np.ndarray:
        """Ids of the pieces random replacement may draw: all but the special tokens and reserved ``[...]`` entries
        such as ``[unused1]``."""
        special = set(self.all_special_ids)
        return np.array([i for i, t in enumerate(self._pieces) if i not in special and not _RESERVED.fullmatch(t)],
                        dtype=np.int64)

    def convert_tokens_to_ids(self, tokens):
        """Id of a token (the unknown token's for one not in the vocabulary, as HF), or ids of a list of tokens."""
        if isinstance(tokens, str):
            return self._ids.get(tokens, self.unk_token_id)
        return [self._ids.get(t, self.unk_token_id) for t in tokens]

    def get_vocab(self) -> dict[str, int]:
        return dict(self._ids)

    # ---------------------------------------------------------------- encoding
    def _encodings(self, texts: list[str], split_special_tokens: bool) -> list:
        """``tokenizers`` encodings of ``texts`` without [CLS]/[SEP]; special tokens written in a text are read as
        text when ``split_special_tokens``."""
        self._tk.encode_special_tokens = split_special_tokens
        if self.num_threads == 1:
            return [self._tk.encode(t, add_special_tokens=False) for t in texts]
        return self._tk.encode_batch(list(texts), add_special_tokens=False)

    def tokenize(self, text: str, *, split_special_tokens: bool | None = None) -> list[str]:
        """Pieces of ``text`` as HF's ``tokenize``: special tokens written in it stay whole unless
        ``split_special_tokens`` (default: the tokenizer's)."""
        return self._encodings([text], self._splits_specials(split_special_tokens))[0].tokens

    def encode_ids(self, text: str) -> list[int]:
        """Piece ids of ``text`` (no [CLS]/[SEP]; special tokens written in it read as text)."""
        return self.encode_batch_ids([text])[0]

    def encode_batch_ids(self, texts: list[str]) -> list[list[int]]:
        """:meth:`encode_ids` of many texts (``tokenizers``' threads unless ``num_threads`` is 1)."""
        return [e.ids for e in self._encodings(texts, True)]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Piece ids and, for each, its [start, end) character span in the original ``text``."""
        return self.encode_batch_with_offsets([text])[0]

    def encode_batch_with_offsets(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        return [(e.ids, list(e.offsets)) for e in self._encodings(texts, True)]

    def _encode_texts(self, texts, offsets, split_special_tokens):
        return [(e.ids, list(e.offsets) if offsets else None) for e in self._encodings(texts, split_special_tokens)]

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None) -> str:
        """Text of ``ids`` as HF's ``BertTokenizer.decode``: the tokens joined by spaces, ``##`` pieces glued to the
        piece before them; ``skip_special_tokens`` leaves out [PAD] [UNK] [CLS] [SEP] [MASK];
        ``clean_up_tokenization_spaces`` (default: the tokenizer's, true as HF's BERT) removes the space before
        ``. , ? !`` and in English contractions."""
        text = " ".join(self.convert_ids_to_tokens(ids, skip_special_tokens)).replace(" " + PREFIX, "").strip()
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        return clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def __repr__(self) -> str:
        return (f"WordPieceTokenizer({str(self.vocab_file)!r}, vocab_size={self.vocab_size}, "
                f"do_lower_case={self.do_lower_case}, strip_accents={self.strip_accents}, "
                f"tokenize_chinese_chars={self.tokenize_chinese_chars})")


def _flag(cfg: dict, key: str, path: Path, none_ok: bool = False) -> bool | None:
    value = cfg[key]
    if not isinstance(value, bool) and not (none_ok and value is None):
        raise TokenizerError(f"{path}: {key!r} must be true or false{' or null' if none_ok else ''}, got {value!r}")
    return value


def read_config(path: Path) -> dict:
    """The options of a BERT ``tokenizer_config.json``: ``do_lower_case``, ``strip_accents``,
    ``tokenize_chinese_chars``, ``split_special_tokens``, ``clean_up_tokenization_spaces`` and the special tokens'
    names (a string, or an ``AddedToken`` object's ``content``)."""
    cfg = read_json(path, TokenizerError)
    options = {key: _flag(cfg, key, path, none_ok=key == "strip_accents") for key in CONFIG_OPTIONS
               if key in cfg}
    if cfg.get("do_basic_tokenize", True) is not True:
        raise TokenizerError(f"{path}: 'do_basic_tokenize' is {cfg['do_basic_tokenize']!r}; litebert's WordPiece "
                             "tokenizer always splits on whitespace and punctuation first (BERT's basic tokenizer)")
    names = {}
    for attr in SPECIAL_DEFAULTS:
        value = cfg.get(attr)
        value = value.get("content") if isinstance(value, dict) else value
        if value is not None and not isinstance(value, str):
            raise TokenizerError(f"{path}: {attr!r} must be a token (a string), got {value!r}")
        if value is not None:
            names[attr] = value
    if names:
        options["special_tokens"] = names
    return options


def read_tokenizer_json(path: Path) -> tuple[list[str], dict]:
    """(tokens by id, options) of an HF ``tokenizer.json`` holding a BERT-style WordPiece tokenizer: a ``WordPiece``
    model with ``##`` continuations, a ``BertNormalizer`` and a ``BertPreTokenizer``. Anything else is a one-line
    `TokenizerError` naming the file and the field."""
    data = read_json(path, TokenizerError)
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "WordPiece":
        kind = model.get("type") if isinstance(model, dict) else model
        raise TokenizerError(f"{path}: 'model' is {kind!r}, not a 'WordPiece' model")
    tokens = _wordpiece_tokens(model, path)
    for i, added in enumerate(data.get("added_tokens") or []):
        if not isinstance(added, dict) or not isinstance(added.get("id"), int) or not 0 <= added["id"] < len(tokens):
            raise TokenizerError(f"{path}: added_tokens[{i}] is not a token of the WordPiece vocabulary; tokens "
                                 "added beyond it are not supported")
    options = _bert_options(data.get("normalizer"), data.get("pre_tokenizer"), path)
    options["special_tokens"] = {"unk_token": model.get("unk_token", "[UNK]")}
    return tokens, options


def _bert_options(norm, pre, path: Path) -> dict:
    """The options a ``tokenizer.json``'s ``BertNormalizer`` sets; an error unless its normalizer and pre-tokenizer
    are BERT's."""
    if not isinstance(norm, dict) or norm.get("type") != "BertNormalizer" or norm.get("clean_text", True) is not True:
        raise TokenizerError(f"{path}: 'normalizer' is not a BertNormalizer with clean_text; litebert reads BERT-style "
                             "WordPiece tokenizers only")
    if not isinstance(pre, dict) or pre.get("type") != "BertPreTokenizer":
        raise TokenizerError(f"{path}: 'pre_tokenizer' is not a BertPreTokenizer; litebert reads BERT-style "
                             "WordPiece tokenizers only")
    settings = {"do_lower_case": "lowercase", "strip_accents": "strip_accents",
                "tokenize_chinese_chars": "handle_chinese_chars"}
    return {key: _flag(norm, field, path, none_ok=key == "strip_accents")
            for key, field in settings.items() if field in norm}


def _wordpiece_tokens(model: dict, path: Path) -> list[str]:
    """The tokens of a WordPiece model's ``vocab`` ({token: id}, ids 0..n-1) by id, checked."""
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerError(f"{path}: 'model.vocab' must be a non-empty object of token: id")
    if model.get("continuing_subword_prefix", PREFIX) != PREFIX:
        raise TokenizerError(f"{path}: 'model.continuing_subword_prefix' is "
                             f"{model['continuing_subword_prefix']!r}; BERT-style WordPiece uses {PREFIX!r}")
    if not isinstance(model.get("unk_token", ""), str):
        raise TokenizerError(f"{path}: 'model.unk_token' must be a string")
    tokens: list = [None] * len(vocab)
    for token, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(vocab) or tokens[i] is not None:
            raise TokenizerError(f"{path}: model.vocab gives {token!r} the id {i!r}; the ids must be 0 to "
                                 f"{len(vocab) - 1}, each once")
        if "\n" in token or "\r" in token:
            raise TokenizerError(f"{path}: model.vocab holds {token!r}, a token with a line break, which a "
                                 f"{VOCAB_NAME} cannot hold")
        tokens[i] = token
    return tokens
