"""The ALBERT tokenizer: a SentencePiece unigram model plus the official text normalization.

What the released ALBERT models were trained on (google-research/albert ``tokenization.py``):

1. ``preprocess_text``: collapse whitespace runs (Python ``str.split``) and strip the ends, NFKD-decompose and drop
   combining marks (``unicodedata.combining(c) != 0``), lower-case. Like XLNet's ``prepro_utils`` and HF, we also map
   the LaTeX-style quotes ```` `` ```` and ``''`` to ``"`` and let ``keep_accents`` skip the NFKD step.
2. ``sp.EncodeAsPieces`` (SentencePiece applies the model's own ``nmt_nfkc`` normalization and dummy prefix ``▁``).
3. ``encode_pieces``: a piece ending in a digit followed by a comma (``▁2010,``) is re-encoded without the comma and
   the comma becomes its own piece, so ``2010,`` and ``2010`` share their pieces.

Offsets are character spans into the *original* text: ``normalize_with_spans`` (in `litebert.tokenizer.normalize`,
beside ``preprocess_text``) records, for every character of the normalized text, the span of original characters it
came from, and SentencePiece reports each piece's span in the normalized text. See docs/tokenizer.md for where HF
transformers 5 differs from the official behaviour.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import sentencepiece as spm

from litebert.errors import TokenizerError
from litebert.files import atomic_write, read_json, write_json
from litebert.protobuf import BYTES, FIXED32, VARINT, fields
from litebert.tokenizer.base import CONFIG_NAME, HF_JSON_NAME, MODEL_INPUT_NAMES, TokenizerBase, clean_up_tokenization
from litebert.tokenizer.batch import as_id_list
from litebert.tokenizer.hf_json import ends_digit_comma, model_proto_from_tokenizer_json, tokenizer_json
from litebert.tokenizer.normalize import normalize_with_spans, preprocess_text

SPIECE_UNDERLINE = "▁"
# The official id layout: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4 (the README's spm_train flags).
SPECIAL_PIECES = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
# Official create_pretraining_data._is_start_piece_sp: the literal '!"#$%&\"()*+,-./:;?@[\\]^_`{|}~' -- it lists '"'
# twice and has no "'", "=" or ">"; its "€"/"£" entries are UTF-8 bytes, which never equal a piece under Python 3.
_START_PUNCT = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _START_PUNCT  # pieces made only of these can continue a word
PIECE_NORMAL, PIECE_UNKNOWN, PIECE_CONTROL, PIECE_USER_DEFINED, PIECE_UNUSED, PIECE_BYTE = 1, 2, 3, 4, 5, 6
MODEL_NAME = "spiece.model"


def _check_specials(sp: spm.SentencePieceProcessor, where: str) -> dict[str, int]:
    """The id of each ALBERT special piece; a clear error naming the missing ones."""
    ids, missing = {}, []
    for piece in SPECIAL_PIECES:
        i = sp.piece_to_id(piece)
        if sp.id_to_piece(i) != piece:  # piece_to_id answers unk_id for an unknown piece
            missing.append(piece)
        ids[piece] = i
    if missing:
        raise TokenizerError(
            f"{where}: this SentencePiece model lacks the ALBERT special piece(s) {', '.join(missing)} "
            f"(expected <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4); train one with `litebert tokenizer train`")
    return ids


class AlbertTokenizer(TokenizerBase):
    """SentencePiece + official ALBERT normalization. ``from_pretrained(folder_or_model_file)`` to load."""

    def __init__(self, model_file: str | os.PathLike, *, do_lower_case: bool = True, keep_accents: bool = False,
                 remove_space: bool = True, split_special_tokens: bool = False, num_threads: int = -1,
                 model_bytes: bytes | None = None):
        """``model_file``: a SentencePiece ``.model`` file (or, with ``model_bytes``, the file those bytes came from,
        for messages). ``split_special_tokens``: read ``[MASK]``, ``[CLS]`` ... written in a text as plain text, as
        the official tokenizer does, rather than as their ids (HF's name and default, False)."""
        path = Path(model_file)
        if model_bytes is None and not path.is_file():
            raise TokenizerError(f"{path}: SentencePiece model file not found")
        self._model_bytes = path.read_bytes() if model_bytes is None else bytes(model_bytes)
        self.model_file = path
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(self._model_bytes)
        except Exception as e:  # sentencepiece raises RuntimeError/OSError with a terse message
            raise TokenizerError(f"{path}: not a valid SentencePiece model ({e})") from None
        try:  # what sentencepiece accepted, checked as the .proto declares it before any piece is read through it
            self._pieces, self.piece_types, self._charsmap = _read_model_proto(self._model_bytes)
        except (UnicodeDecodeError, ValueError) as e:
            raise TokenizerError(f"{path}: not a valid SentencePiece model ({type(e).__name__}: {e})") from None
        if len(self._pieces) != self.sp.get_piece_size():
            raise TokenizerError(f"{path}: not a valid SentencePiece model (it lists {len(self._pieces)} pieces, "
                                 f"sentencepiece read {self.sp.get_piece_size()})")
        specials = _check_specials(self.sp, str(path))
        self.pad_token_id, self.unk_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id = (
            specials[p] for p in SPECIAL_PIECES)
        self.do_lower_case, self.keep_accents, self.remove_space = do_lower_case, keep_accents, remove_space
        self.split_special_tokens = split_special_tokens
        self.num_threads = num_threads
        # The special tokens HF's AlbertTokenizer recognises in text (its all_special_tokens), matched case-sensitively
        # and longest first, as HF's trie does. HF gives [MASK] lstrip=True: the whitespace before it is dropped.
        self.all_special_ids = [specials[p] for p in SPECIAL_PIECES]
        self.all_special_tokens = list(SPECIAL_PIECES)
        self.pad_token, self.unk_token, self.cls_token, self.sep_token, self.mask_token = SPECIAL_PIECES
        self.model_input_names = list(MODEL_INPUT_NAMES)
        self._special_re = re.compile("|".join(re.escape(p) for p in sorted(SPECIAL_PIECES, key=len, reverse=True)))
        self.vocab_size = self.sp.get_piece_size()
        # The digit-comma re-split depends only on the piece, so it is precomputed per vocabulary id; the fast id
        # path then never re-encodes. It needs "," to be a piece (else an unknown run could end in ","): fall back.
        self._resplit = {i: self._resplit_piece(p) for i, p in enumerate(self._pieces) if ends_digit_comma(p)}
        self._fast_ids = self.sp.id_to_piece(self.sp.piece_to_id(",")) == ","

    # ---------------------------------------------------------------- loading / saving
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **overrides) -> "AlbertTokenizer":
        """Load a tokenizer folder (HF layout: ``spiece.model``, or only ``tokenizer.json`` as transformers 5 saves
        it; ``tokenizer_config.json`` optional), a SentencePiece ``.model`` file, a ``tokenizer.json`` file, or a hub id
        (`litebert.hub.local`)."""
        from litebert import hub

        path = hub.local(path, "tokenizer")
        if path.is_dir():
            model, hf_json, cfg_path = path / MODEL_NAME, path / HF_JSON_NAME, path / CONFIG_NAME
            options = {}
            if not model.is_file() and hf_json.is_file():
                model_bytes, options = model_proto_from_tokenizer_json(hf_json)
            elif not model.is_file():
                raise TokenizerError(
                    f"{path}: no {MODEL_NAME} or {HF_JSON_NAME} in this folder (an ALBERT tokenizer folder holds "
                    f"either); pass the folder of the pretrained model, or save one with "
                    f"`transformers.AutoTokenizer.from_pretrained(NAME).save_pretrained(\"{path}\")`")
            if cfg_path.is_file():
                cfg = read_json(cfg_path, TokenizerError)
                for key in ("do_lower_case", "keep_accents", "remove_space", "split_special_tokens"):
                    if key in cfg:
                        if not isinstance(cfg[key], bool):
                            raise TokenizerError(f"{cfg_path}: {key!r} must be true or false, got {cfg[key]!r}")
                        options[key] = cfg[key]
            if not model.is_file():
                return cls(hf_json, model_bytes=model_bytes, **{**options, **overrides})
            return cls(model, **{**options, **overrides})
        if not path.exists():
            raise TokenizerError(f"{path}: no such tokenizer folder, SentencePiece model file or {HF_JSON_NAME}")
        if path.suffix == ".json":
            model_bytes, options = model_proto_from_tokenizer_json(path)
            return cls(path, model_bytes=model_bytes, **{**options, **overrides})
        return cls(path, **overrides)

    def save_pretrained(self, out_dir: str | os.PathLike) -> Path:
        """Write ``spiece.model`` + ``tokenizer_config.json`` (HF layout; ``transformers.AutoTokenizer`` loads it)."""
        out = Path(out_dir)
        config = {
            "tokenizer_class": "AlbertTokenizer", "do_lower_case": self.do_lower_case,
            "keep_accents": self.keep_accents, "remove_space": self.remove_space,
            "bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
            "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]", "model_max_length": 512,
            "model_input_names": MODEL_INPUT_NAMES, "split_special_tokens": self.split_special_tokens,
            "clean_up_tokenization_spaces": False,
        }
        atomic_write(out / MODEL_NAME, self._model_bytes)
        write_json(out / CONFIG_NAME, config)
        write_json(out / HF_JSON_NAME, tokenizer_json(self), indent=None)
        return out

    def fingerprint(self) -> str:
        """sha256 of the SentencePiece model bytes: data made with one vocabulary must not be read with another."""
        return hashlib.sha256(self._model_bytes).hexdigest()

    # ---------------------------------------------------------------- vocabulary facts
    def word_start_mask(self) -> np.ndarray:
        """[vocab_size] bool: the official ``_is_start_piece_sp`` -- the piece starts a word for whole-word n-gram
        masking when it begins with "▁" or "<", is one of the punctuation characters, or holds any character other
        than the English letters (either case) and that punctuation: digits, "'", accents, other scripts, "£"... So
        ``don't`` is two words (``▁don`` and ``'t``) and each digit piece of ``$1,000,000`` starts one."""
        return np.array([p.startswith(SPIECE_UNDERLINE) or p.startswith("<") or p in _START_PUNCT
                         or not all(c.lower() in _WORD_CHARS for c in p) for p in self._pieces], dtype=bool)

    def normal_piece_ids(self) -> np.ndarray:
        """Ids of normal pieces (not control, unknown, unused or user-defined): candidates for random replacement."""
        return np.flatnonzero(np.asarray(self.piece_types) == PIECE_NORMAL).astype(np.int64)

    def get_vocab(self) -> dict[str, int]:
        """{piece: id} of the whole vocabulary, as HF's ``get_vocab``."""
        return {p: i for i, p in enumerate(self._pieces)}

    def convert_tokens_to_ids(self, tokens):
        return self.sp.piece_to_id(tokens) if isinstance(tokens, str) else [self.sp.piece_to_id(t) for t in tokens]

    # ---------------------------------------------------------------- encoding
    def normalize(self, text: str) -> str:
        return preprocess_text(text, remove_space=self.remove_space, lower=self.do_lower_case,
                               keep_accents=self.keep_accents)

    def _resplit_piece(self, piece: str) -> list[str]:
        """Official encode_pieces: '▁2010,' -> encode '2010' again, keep the ▁ only if the piece had it, then ','."""
        sub = self.sp.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
        if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
            sub = sub[1:] if len(sub[0]) == 1 else [sub[0][1:]] + sub[1:]
        return sub + [piece[-1]]

    def tokenize(self, text: str, *, split_special_tokens: bool | None = None) -> list[str]:
        """Pieces of ``text`` as HF's ``tokenize``: special tokens written in it (``[MASK]``) stay whole unless
        ``split_special_tokens`` (default: the tokenizer's); every other stretch is the official
        ``encode_pieces(preprocess_text(stretch))``."""
        if self._splits_specials(split_special_tokens):
            return self._tokenize_plain(text)
        out = []
        for a, b, special in self._special_segments(text):
            out.extend([self._pieces[special]] if special is not None else self._tokenize_plain(text[a:b]))
        return out

    def _tokenize_plain(self, text: str) -> list[str]:
        out = []
        for piece in self.sp.encode(self.normalize(text), out_type=str):
            out.extend(self._resplit_piece(piece) if ends_digit_comma(piece) else [piece])
        return out

    def _special_segments(self, text: str) -> list[tuple[int, int, int | None]]:
        """``text`` cut at the special tokens written in it, as HF's slow tokenizer does: [(start, end, id)] for the
        special tokens and (start, end, None) for the non-empty stretches between them, which are encoded one by
        one (each with its own dummy prefix ``▁``). The whitespace just before ``[MASK]`` belongs to neither
        (HF's lstrip=True)."""
        out, pos = [], 0
        for m in self._special_re.finditer(text):
            a, b = m.span()
            end = a
            if m.group() == "[MASK]":
                while end > pos and text[end - 1].isspace():
                    end -= 1
            if end > pos:
                out.append((pos, end, None))
            out.append((a, b, self.sp.piece_to_id(m.group())))
            pos = b
        if pos < len(text):
            out.append((pos, len(text), None))
        return out

    def _encode_texts(self, texts: list[str], offsets: bool, split_special_tokens: bool
                      ) -> list[tuple[list[int], list[tuple[int, int]] | None]]:
        """(ids, offsets or None) of each text; special tokens written in a text become their ids (span: the token's
        characters) unless ``split_special_tokens``."""
        def encode(strings):
            if offsets:
                return self.encode_batch_with_offsets(strings)
            return [(ids, None) for ids in self.encode_batch_ids(strings)]

        if split_special_tokens or not any(self._special_re.search(t) for t in texts):
            return encode(texts)
        segments = [self._special_segments(t) for t in texts]
        plain = iter(encode([t[a:b] for t, segs in zip(texts, segments) for a, b, sid in segs if sid is None]))
        out = []
        for segs in segments:
            ids, spans = [], [] if offsets else None
            for a, b, sid in segs:
                if sid is not None:
                    ids.append(sid)
                    if offsets:
                        spans.append((a, b))
                    continue
                seg_ids, seg_spans = next(plain)
                ids.extend(seg_ids)
                if offsets:
                    spans.extend((x + a, y + a) for x, y in seg_spans)
            out.append((ids, spans))
        return out

    def encode_ids(self, text: str) -> list[int]:
        """Piece ids of ``text`` (no special tokens): the official ``encode_ids`` including the digit-comma re-split."""
        return self.encode_batch_ids([text])[0]

    def encode_batch_ids(self, texts: list[str]) -> list[list[int]]:
        """:meth:`encode_ids` of many texts, through SentencePiece's multi-threaded batch encoder."""
        if not self._fast_ids:
            return [self.convert_tokens_to_ids(self.tokenize(t)) for t in texts]
        normalized = [self.normalize(t) for t in texts]
        batch = self.sp.encode(normalized, out_type=int, num_threads=self.num_threads)
        resplit = self._resplit
        if resplit:
            keys = resplit.keys()
            for k, ids in enumerate(batch):
                if not keys.isdisjoint(ids):
                    batch[k] = [j for i in ids for j in (self._resplit_ids(i) if i in resplit else (i,))]
        return batch

    def _resplit_ids(self, i: int) -> list[int]:
        return [self.sp.piece_to_id(p) for p in self._resplit[i]]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Piece ids and, for each, its [start, end) character span in the original ``text`` (leading whitespace
        excluded, as in HF's offsets). The dummy-prefix ``▁`` that SentencePiece puts before a text starting with a
        piece of its own (``(``, an unknown character) stands for no character and gets an empty span."""
        return self.encode_batch_with_offsets([text])[0]

    def encode_batch_with_offsets(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """:meth:`encode_with_offsets` of many texts, segmented by SentencePiece's multi-threaded batch encoder."""
        normalized = [normalize_with_spans(t, remove_space=self.remove_space, lower=self.do_lower_case,
                                           keep_accents=self.keep_accents) for t in texts]
        norms = [n for n, _, _ in normalized]
        out: list = [None] * len(texts)
        # Printable-ASCII text, which SentencePiece's normalizer leaves as it is: plain ids from the fast encoder, and
        # the offsets from the pieces' lengths. Anything else (or a sum that does not add up): SentencePiece's spans.
        plain = [k for k, n in enumerate(norms) if n.isascii() and n.isprintable()] if self._fast_ids else []
        rest = sorted(set(range(len(texts))) - set(plain))
        for k, ids in zip(plain, self.sp.encode([norms[k] for k in plain], out_type=int, num_threads=self.num_threads)):
            offsets = self._piece_offsets(ids, len(norms[k]))
            if offsets is None:
                rest.append(k)
            else:
                out[k] = self._original_offsets(texts[k], *normalized[k], ids, [self._pieces[i] for i in ids], offsets)
        encoded = self.sp.encode([norms[k] for k in rest], out_type="offset_mapping", num_threads=self.num_threads)
        for k, enc in zip(rest, encoded):  # offsets: char spans into each normalized text
            out[k] = self._original_offsets(texts[k], *normalized[k], enc["ids"], enc["pieces"], enc["offsets"])
        return out

    def _piece_offsets(self, ids: list[int], n: int) -> list[tuple[int, int]] | None:
        """[start, end) of each piece in a normalized text of ``n`` characters that SentencePiece did not rewrite: the
        pieces tile it in order, "▁" standing for the space before a word, except the first piece's (the dummy prefix,
        no character). None if an unknown piece (whose length the id does not tell) or the total says otherwise."""
        pieces, unk = self._pieces, self.unk_token_id
        offsets, pos = [], 0
        for k, i in enumerate(ids):
            if i == unk:
                return None
            end = pos + len(pieces[i]) - (k == 0 and pieces[i][0] == SPIECE_UNDERLINE)
            offsets.append((pos, end))
            pos = end
        return offsets if pos == n else None

    def _original_offsets(self, text: str, norm: str, starts: list[int], ends: list[int], piece_ids: list[int],
                          pieces: list[str], offsets: list[tuple[int, int]]) -> tuple[list[int], list[tuple[int, int]]]:
        """The ``pieces`` of ``norm`` and their ``offsets`` in it, mapped back to spans of ``text`` (and the
        digit-comma re-split)."""
        ids, spans = [], []
        n = len(norm)

        def to_original(a: int, b: int, piece: str, first: bool = False) -> tuple[int, int]:
            if a >= b:
                if (first and piece == SPIECE_UNDERLINE) or a >= n:  # the dummy prefix: no character
                    pos = starts[a] if a < n else len(text)
                    return pos, pos
                # SentencePiece's nmt_nfkc expanded one character into several ("½" -> "1⁄2" with keep_accents) and
                # gave the whole character to the last piece only: every piece of the expansion points at it.
                while piece != SPIECE_UNDERLINE and a < n - 1 and norm[a].isspace():
                    a += 1
                b = a + 1
            elif b < n and piece != SPIECE_UNDERLINE and norm[a:b].isspace():
                # "▁1" given only the space before "½" -> "1⁄2": its text comes from the next character
                a, b = b, b + 1
            s, e = starts[a], ends[b - 1]
            while s < e - 1 and text[s].isspace():  # "▁word" covers the space before it: report the word only
                s += 1
            return s, e

        # With "," a piece, only vocabulary pieces end in digit + comma (see __init__): test the id, not the string.
        resplit = self._resplit if self._fast_ids else None
        for k, (i, piece, (a, b)) in enumerate(zip(piece_ids, pieces, offsets)):
            if (i not in resplit) if resplit is not None else not ends_digit_comma(piece):
                if a < b and not norm[b - 1].isspace():  # the usual piece: inline `to_original`
                    s, e = starts[a], ends[b - 1]
                    while s < e - 1 and text[s].isspace():
                        s += 1
                    ids.append(i), spans.append((s, e))
                else:
                    ids.append(i), spans.append(to_original(a, b, piece, first=k == 0))
                continue
            sub = self._resplit_piece(piece)
            body = piece.lstrip(SPIECE_UNDERLINE)
            if norm[a:b].lstrip(" ") == body:  # usual case: SentencePiece left digits and comma unchanged
                sub_enc = self.sp.encode(body[:-1], out_type="offset_mapping")["offsets"]
                base = b - len(body)
                sub_spans = [(base + x, base + y) for x, y in sub_enc][-(len(sub) - 1):] if len(sub) > 1 else []
                sub_spans.append((b - 1, b))
            else:  # the piece's characters were rewritten by nmt_nfkc: every sub-piece gets the whole piece's span
                sub_spans = [(a, b)] * len(sub)
            for p, (x, y) in zip(sub, sub_spans):
                ids.append(self.sp.piece_to_id(p)), spans.append(to_original(x, y, p))
        return ids, spans

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = False) -> str:
        """Text of ``ids`` (a list, a 1-D array or tensor), as HF's ``AlbertTokenizer.decode``: the pieces between
        special tokens through SentencePiece (``▁`` read as a space), each special token appended as its text with a
        space before it unless it follows another special token, the ends stripped. ``skip_special_tokens`` leaves
        out ``<pad> <unk> [CLS] [SEP] [MASK]``; ``clean_up_tokenization_spaces`` removes the space before
        ``. , ? !`` and English contractions, as HF's ``clean_up_tokenization`` (off by default, as for ALBERT)."""
        specials = set(self.all_special_ids)
        out, run, prev_special = "", [], False
        for i in as_id_list(ids):
            if i in specials:
                if skip_special_tokens:
                    continue
                out += ("" if prev_special else " ") + self.sp.decode(run) + self._pieces[i]
                run, prev_special = [], True
            else:
                run.append(self._checked_id(i))
                prev_special = False
        out = (out + self.sp.decode(run)).strip()
        return clean_up_tokenization(out) if clean_up_tokenization_spaces else out

    def __repr__(self) -> str:
        return (f"AlbertTokenizer({str(self.model_file)!r}, vocab_size={self.vocab_size}, "
                f"do_lower_case={self.do_lower_case}, keep_accents={self.keep_accents})")


def _read_model_proto(model: bytes) -> tuple[list[str], list[int], bytes]:
    """The one check of a SentencePiece model's bytes, made before any piece is read through sentencepiece: the
    pieces (ModelProto field 1 ``pieces``, their field 1, UTF-8 text), their types (field 3 ``type``, default NORMAL)
    and the normalizer's precompiled charsmap (field 3 ``normalizer_spec``, its field 2), each field of the wire type
    the .proto declares. A ``ValueError`` (a ``UnicodeDecodeError`` for a piece that is not UTF-8) for anything else.
    The sentencepiece Python API exposes neither is_user_defined() nor the charsmap, and this avoids a protobuf
    dependency."""
    pieces, types, charsmap = [], [], b""
    for field, value in fields(model, MODEL_PROTO):
        if field == 1:
            piece = fields(value, PIECE_PROTO)
            pieces.append(bytes(next((v for f, v in piece if f == 1), b"")).decode("utf-8"))
            types.append(next((v for f, v in piece if f == 3), PIECE_NORMAL))
        elif field == 3:
            charsmap = next((v for f, v in fields(value, NORMALIZER_SPEC) if f == 2), b"")
    return pieces, types, charsmap


# The fields `_read_model_proto` reads, as sentencepiece_model.proto declares them (field number: wire type):
# ModelProto's pieces (1), trainer_spec (2), normalizer_spec (3); a piece's piece (1), score (2, float), type (3);
# NormalizerSpec's name (1), precompiled_charsmap (2).
MODEL_PROTO = {1: BYTES, 2: BYTES, 3: BYTES}
PIECE_PROTO = {1: BYTES, 2: FIXED32, 3: VARINT}
NORMALIZER_SPEC = {1: BYTES, 2: BYTES}


