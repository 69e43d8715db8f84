"""What every litebert tokenizer offers the rest of litebert: `TokenizerBase`, the shared HF-shaped ``__call__``
(``[CLS] A [SEP] B [SEP]``, truncation, padding, tensors) built on the subclass's piece-level encoder.

Two tokenizers implement it: `litebert.tokenizer.AlbertTokenizer` (SentencePiece, ``spiece.model``) and
`litebert.tokenizer.WordPieceTokenizer` (BERT-style ``vocab.txt``); `litebert.tokenizer.load_tokenizer` picks the one
a folder holds. Truncation and pair layout are decided here once, so both agree with HF's slow tokenizers.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from litebert.errors import TokenizerError
from litebert.tokenizer.batch import BatchEncoding, as_id_list, to_tensors

CONFIG_NAME = "tokenizer_config.json"  # HF's tokenizer settings, in every tokenizer folder
HF_JSON_NAME = "tokenizer.json"  # HF tokenizers' serialization (what AutoTokenizer reads first)
# What HF's ALBERT and BERT tokenizers return, written into tokenizer_config.json: transformers 5 otherwise drops
# token_type_ids.
MODEL_INPUT_NAMES = ["input_ids", "token_type_ids", "attention_mask"]


class TokenizerBase:
    """The interface litebert's commands use. A subclass sets ``vocab_size``, the special tokens and their ids
    (``pad_token``/``pad_token_id``, ``unk_*``, ``cls_*``, ``sep_*``, ``mask_*``), ``all_special_tokens``,
    ``all_special_ids``, ``model_input_names`` and ``split_special_tokens``, and implements the methods below that
    raise `NotImplementedError`. Piece-level methods (``encode_ids``, ``encode_batch_ids``,
    ``encode_batch_with_offsets``) read special tokens written in a text as text, as the official pretraining data
    code does; ``__call__``, ``encode`` and ``tokenize`` map them to their ids unless ``split_special_tokens``."""

    vocab_size: int
    pad_token_id: int
    cls_token_id: int
    sep_token_id: int
    mask_token_id: int
    split_special_tokens: bool

    # ---------------------------------------------------------------- what a tokenizer implements
    def encode_batch_ids(self, texts: list[str]) -> list[list[int]]:
        """Piece ids of each text, no special tokens added (the token store's path)."""
        raise NotImplementedError

    def encode_batch_with_offsets(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """(piece ids, [start, end) character span of each piece in the original text) of each text."""
        raise NotImplementedError

    def _encode_texts(self, texts: list[str], offsets: bool, split_special_tokens: bool
                      ) -> list[tuple[list[int], list[tuple[int, int]] | None]]:
        """(ids, spans or None) of each text, special tokens written in it mapped to their ids unless
        ``split_special_tokens``."""
        raise NotImplementedError

    def word_start_mask(self) -> np.ndarray:
        """[vocab_size] bool: the piece starts a word (whole-word masking)."""
        raise NotImplementedError

    def normal_piece_ids(self) -> np.ndarray:
        """Ids that random replacement in masking may draw (no special or unused pieces)."""
        raise NotImplementedError

    def fingerprint(self) -> str:
        """sha256 identifying the vocabulary: a token store made with one is refused with another."""
        raise NotImplementedError

    def save_pretrained(self, out_dir: str | os.PathLike) -> Path:
        """Write the tokenizer folder (HF layout) and return it."""
        raise NotImplementedError

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        """Piece of an id, or pieces of a sequence of ids (special ones left out with ``skip_special_tokens``): from
        ``self._pieces``, the vocabulary's pieces in id order, which each tokenizer keeps."""
        if isinstance(ids, (int, np.integer)):
            return self._pieces[self._checked_id(ids)]
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._pieces[self._checked_id(i)] for i in as_id_list(ids) if i not in skip]

    def _checked_id(self, i) -> int:
        if not 0 <= i < self.vocab_size:
            raise TokenizerError(f"token id {i} is outside the vocabulary (0 to {self.vocab_size - 1})")
        return int(i)

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None) -> str:
        raise NotImplementedError

    # ---------------------------------------------------------------- shared
    def __call__(self, text, text_pair=None, *, max_length: int | None = None, truncation=False, padding=False,
                 return_offsets: bool = False, add_special_tokens: bool = True, return_tensors: str | None = None,
                 return_offsets_mapping: bool = False, split_special_tokens: bool | None = None,
                 return_token_type_ids: bool | None = None, return_attention_mask: bool | None = None
                 ) -> BatchEncoding:
        """Model inputs: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` with token types 0 / 1, as HF does.

        ``text`` is a string (lists come back) or a list of strings (lists of lists come back); ``text_pair`` likewise.
        ``truncation``: False, True (= "longest_first"), "longest_first", "only_first" or "only_second", to
        ``max_length`` tokens including the special ones. ``padding``: False, True / "longest" (to the longest in the
        batch) or "max_length". ``return_tensors``: "pt" (torch) or "np" (numpy), ``[batch, length]`` int64 (a single
        text is a batch of one). Special tokens written in the text (``"Paris is [MASK]."``) become their ids unless
        ``split_special_tokens`` (default: the tokenizer's, False). Returns ``input_ids``, ``token_type_ids``,
        ``attention_mask`` (the latter two left out with ``return_token_type_ids=False`` /
        ``return_attention_mask=False``) and, with ``return_offsets``, ``offsets`` (with ``return_offsets_mapping``,
        the same under HF's name ``offset_mapping``): per token its [start, end) character span in its own original
        text ((0, 0) for special and padding tokens that are not written in the text).
        """
        return_offsets = return_offsets or return_offsets_mapping
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        pairs = _pair_list(text_pair, len(texts))
        strategy = _truncation_strategy(truncation, max_length)
        pad_to = _padding_target(padding, max_length)

        split = self._splits_specials(split_special_tokens)
        enc_a = self._encode_texts(texts, return_offsets, split)
        enc_b = self._encode_texts(pairs, return_offsets, split) if pairs is not None else [None] * len(texts)
        rows = []
        for (a, sa), b_enc in zip(enc_a, enc_b):
            b, sb = b_enc if b_enc is not None else (None, None)
            if strategy:
                a, sa, b, sb = _truncate_pair(a, sa, b, sb, max_length, strategy, add_special_tokens)
            rows.append(self._build(a, sa, b, sb, add_special_tokens, return_offsets))
        if pad_to:
            self._pad_rows(rows, max_length if pad_to == "max_length" else None, return_offsets)
        enc = _collate(rows, single, return_offsets_mapping, return_token_type_ids, return_attention_mask)
        return to_tensors(enc, return_tensors, single)

    def _pad_rows(self, rows: list[dict], width: int | None, return_offsets: bool) -> None:
        """Pads each row in place to ``width`` tokens (None: to the longest row)."""
        if width is None:
            width = max(len(r["input_ids"]) for r in rows)
        for r in rows:
            n = width - len(r["input_ids"])
            if n > 0:
                r["input_ids"] += [self.pad_token_id] * n
                r["token_type_ids"] += [0] * n
                r["attention_mask"] += [0] * n
                if return_offsets:
                    r["offsets"] += [(0, 0)] * n

    def encode(self, text: str, text_pair: str | None = None, add_special_tokens: bool = True, *,
               max_length: int | None = None, truncation=False, padding=False, return_tensors: str | None = None,
               split_special_tokens: bool | None = None):
        """The ``input_ids`` of one text (or pair), as HF's ``encode``: a list, or a ``[1, length]`` tensor/array
        with ``return_tensors``. For a batch, call the tokenizer."""
        if not isinstance(text, str) or not (text_pair is None or isinstance(text_pair, str)):
            raise TokenizerError("encode takes one text (and optionally one text_pair) as strings; call the "
                                 "tokenizer, tok(texts), for a batch")
        return self(text, text_pair, add_special_tokens=add_special_tokens, max_length=max_length,
                    truncation=truncation, padding=padding, return_tensors=return_tensors,
                    split_special_tokens=split_special_tokens)["input_ids"]

    def _build(self, a, sa, b, sb, add_special_tokens, return_offsets) -> dict:
        cls, sep, none = [self.cls_token_id], [self.sep_token_id], [(0, 0)]
        if add_special_tokens:
            ids = cls + a + sep + (b + sep if b is not None else [])
            types = [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b is not None else [])
            offs = none + sa + none + (sb + none if b is not None else []) if return_offsets else None
        else:
            ids = a + (b if b is not None else [])
            types = [0] * len(a) + ([1] * len(b) if b is not None else [])
            offs = sa + (sb if b is not None else []) if return_offsets else None
        row = {"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * len(ids)}
        if return_offsets:
            row["offsets"] = offs
        return row

    def batch_decode(self, sequences, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None) -> list[str]:
        """:meth:`decode` of each row of ``sequences`` (a list of lists, a 2-D array or tensor)."""
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self.decode(row, skip_special_tokens, clean_up_tokenization_spaces) for row in sequences]

    def __len__(self) -> int:
        return self.vocab_size

    def _splits_specials(self, split_special_tokens: bool | None) -> bool:
        return self.split_special_tokens if split_special_tokens is None else bool(split_special_tokens)


def _pair_list(text_pair, n_texts: int) -> list[str] | None:
    """``text_pair`` as a list (None without one), checked to pair off with the ``n_texts`` texts."""
    pairs = None if text_pair is None else ([text_pair] if isinstance(text_pair, str) else list(text_pair))
    if pairs is not None and len(pairs) != n_texts:
        raise TokenizerError(f"text has {n_texts} entries but text_pair has {len(pairs)}")
    return pairs


def _truncation_strategy(truncation, max_length: int | None) -> str | None:
    """The truncation strategy named by ``truncation`` (None: no truncation), checked against ``max_length``."""
    strategy = "longest_first" if truncation is True else (truncation or None)
    if strategy not in (None, "longest_first", "only_first", "only_second"):
        raise TokenizerError(f"truncation={truncation!r}: use False, True, 'longest_first', 'only_first' "
                             "or 'only_second'")
    if strategy and max_length is None:
        raise TokenizerError("truncation needs max_length")
    return strategy


def _padding_target(padding, max_length: int | None) -> str | None:
    """What ``padding`` pads to: None, "longest" or "max_length" (checked against ``max_length``)."""
    pad_to = {False: None, None: None, True: "longest", "longest": "longest", "max_length": "max_length"}.get(
        padding, "invalid")
    if pad_to == "invalid" or (pad_to == "max_length" and max_length is None):
        raise TokenizerError(f"padding={padding!r}: use False, True/'longest', or 'max_length' with max_length")
    return pad_to


def _truncate_pair(a, sa, b, sb, max_length: int, strategy: str, add_special_tokens: bool):
    """(a, sa, b, sb) cut so that the text (and pair) fit ``max_length`` with their special tokens."""
    n_special = (3 if b is not None else 2) if add_special_tokens else 0
    la, lb = _truncated_lengths(len(a), None if b is None else len(b), max_length - n_special, strategy)
    a, sa = a[:la], sa and sa[:la]
    if b is not None:
        b, sb = b[:lb], sb and sb[:lb]
    return a, sa, b, sb


def _collate(rows: list[dict], single: bool, return_offsets_mapping: bool, return_token_type_ids: bool | None,
             return_attention_mask: bool | None) -> dict:
    """The rows as one encoding dict (lists of rows, or the one row of a single text), less the keys not asked for."""
    keys = list(rows[0].keys()) if rows else ["input_ids", "token_type_ids", "attention_mask"]
    enc = {k: rows[0][k] for k in keys} if single else {k: [r[k] for r in rows] for k in keys}
    if return_offsets_mapping:
        enc["offset_mapping"] = enc.pop("offsets")
    if return_token_type_ids is False:
        del enc["token_type_ids"]
    if return_attention_mask is False:
        del enc["attention_mask"]
    return enc


def _truncated_lengths(n1: int, n2: int | None, budget: int, strategy: str) -> tuple[int, int | None]:
    """Lengths after truncation to ``budget`` pieces (strategies as HF's; longest_first as the official
    `_truncate_seq_pair` and HF's SentencePiece AlbertTokenizer)."""
    if budget < 0:
        raise TokenizerError("max_length is too small to hold even the special tokens")
    if n2 is None:
        if strategy == "only_second":
            raise TokenizerError("truncation='only_second' needs a text pair")
        return min(n1, budget), None
    if n1 + n2 <= budget:
        return n1, n2
    # HF refuses to truncate a text away entirely ("Sequence to truncate too short"); so do we.
    if strategy == "only_first":
        if n2 >= budget:
            raise TokenizerError(f"truncation='only_first' cannot fit: the second text alone has {n2} pieces, "
                                 f"leaving none of the {budget} left by max_length for the first")
        return budget - n2, n2
    if strategy == "only_second":
        if n1 >= budget:
            raise TokenizerError(f"truncation='only_second' cannot fit: the first text alone has {n1} pieces, "
                                 f"leaving none of the {budget} left by max_length for the second")
        return n1, budget - n1
    # The official `_truncate_seq_pair`: pop from the longer text, from the second on a tie. In closed form: the
    # longer loses the difference first, then the rest is split, the second text losing the odd piece.
    remove = n1 + n2 - budget
    first = min(abs(n1 - n2), remove)
    second = remove - first
    if n1 > n2:
        return n1 - first - second // 2, n2 - (second - second // 2)
    return n1 - second // 2, n2 - first - (second - second // 2)



def clean_up_tokenization(text: str) -> str:
    """HF's ``clean_up_tokenization``: no space before punctuation and in English contractions."""
    for old, new in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                     (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(old, new)
    return text
