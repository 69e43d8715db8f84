"""Pieces as HF's fast tokenizer sees them: their character spans in the text and the words they belong to. The
question-answering and token-classification pipelines, and `litebert predict`, read answers and entities from these,
so that they give what transformers' pipelines give on the same folder."""

from __future__ import annotations


def hf_offsets(tok, ids: list[int], offsets: list) -> list[tuple[int, int]]:
    """The character spans HF's fast tokenizer gives the pieces: litebert's, except that a lone "▁" (the dummy
    prefix before a piece it could not join, "▁" "(") gets the span of the character it was put before, not of the
    space before it."""
    out = [tuple(o) for o in offsets]
    for k, i in enumerate(ids):
        if tok.convert_ids_to_tokens(int(i)) == "▁" and k + 1 < len(out) and out[k + 1][1] > out[k + 1][0]:
            out[k] = (out[k + 1][0], out[k + 1][0] + 1)
    return out


def piece_words(tok, ids: list[int]) -> list[int]:
    """The word of each piece (0, 1, ...), as the folder's tokenizer.json pre-tokenizes: a word starts at a "▁"
    piece, at a user-defined piece and after one (`litebert.tokenizer.hf_json`); WordPiece: at a piece without
    "##"."""
    from litebert.tokenizer.tokenizer import PIECE_USER_DEFINED

    words, previous_alone = [], False
    types = getattr(tok, "piece_types", None)
    for i in ids:
        piece = tok.convert_ids_to_tokens(int(i))
        alone = types is not None and types[i] == PIECE_USER_DEFINED
        new = piece.startswith("▁") or alone or previous_alone if types is not None else not piece.startswith("##")
        words.append(words[-1] + (1 if new else 0) if words else 0)
        previous_alone = alone
    return words
