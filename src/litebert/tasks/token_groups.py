"""Token classification answered as transformers' NER pipeline answers it (`TokenClassificationPipeline`, 4.57),
for ``pipeline("ner", aggregation_strategy=...)`` and ``litebert predict --aggregation-strategy``.

``aggregation_strategy``:

* ``"none"`` (HF's default): one answer per piece, ``{entity, score, index, word, start, end}``.
* ``"simple"``: pieces labelled alike grouped into entities: ``{entity_group, score, word, start, end}``, a piece
  joining the one before when its label has the same type (``B-PER`` then ``I-PER``) and is not a ``B-``; the
  group's score is the mean of its pieces'.
* ``"first"``, ``"average"``, ``"max"``: each word takes one label first (its first piece's; the best of its
  pieces' averaged scores; the label of its most confident piece), then words are grouped as in "simple".

Words are HF's: for a WordPiece tokenizer, a piece whose text is not its span in the text (``##ing``) continues a
word; for a SentencePiece one (which HF cannot ask where words start), a piece continues a word when neither it nor
the character before it is a space (so "whale," is one word, "▁" "(" are two). An entity's ``word`` is its pieces
joined by the tokenizer's decoder (HF's ``convert_tokens_to_string``). Labels equal to one of ``ignore_labels``
("O") are left out, after grouping.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from litebert.tasks.pieces import hf_offsets

STRATEGIES = ("none", "simple", "first", "average", "max")


def features(tok, texts: list[str], max_length: int) -> list[dict]:
    """``[CLS] text [SEP]`` of each text, cut to ``max_length`` pieces, with its `pieces` and the tokenizer's
    `joiner` (``join``): what `entities` reads besides the model's scores."""
    enc, join = tok(texts, truncation=True, max_length=max_length, return_offsets=True), joiner(tok)
    return [{"input_ids": ids, "token_type_ids": types, "pieces": pieces(tok, text, ids, offsets), "join": join}
            for text, ids, types, offsets in zip(texts, enc["input_ids"], enc["token_type_ids"], enc["offsets"])]


def pieces(tok, text: str, ids: list[int], offsets: list) -> list[dict]:
    """HF's `gather_pre_entities` but the scores: per piece of ``[CLS] text [SEP]`` but those two,
    ``{word, start, end, index, is_subword}``."""
    spans = hf_offsets(tok, ids, offsets)
    wordpiece = getattr(tok, "piece_types", None) is None  # HF's fast WordPiece has a continuing_subword_prefix
    out = []
    for k in range(1, len(ids) - 1):
        word = tok.convert_ids_to_tokens(int(ids[k]))
        start, end = spans[k]
        ref = text[start:end]
        subword = len(word) != len(ref) if wordpiece else start > 0 and " " not in text[start - 1:start + 1]
        if int(ids[k]) == tok.unk_token_id:
            word, subword = ref, False
        out.append({"word": word, "start": start, "end": end, "index": k, "is_subword": subword})
    return out


def joiner(tok) -> Callable[[list[str]], str]:
    """HF's ``convert_tokens_to_string``: the folder's tokenizer.json decoder on a list of pieces. SentencePiece
    (Metaspace): "▁" is a space, but in the first piece, where it is dropped; WordPiece: "##" pieces glued to the
    one before, the others after a space, each cleaned up as HF's ``cleanup`` does."""
    if getattr(tok, "piece_types", None) is not None:
        return lambda tokens: "".join(t.replace("▁", "" if i == 0 else " ") for i, t in enumerate(tokens))
    from litebert.tokenizer.base import clean_up_tokenization

    def wordpiece(tokens: list[str]) -> str:
        out = []
        for i, t in enumerate(tokens):
            if i:
                t = t[2:] if t.startswith("##") else " " + t
            out.append(clean_up_tokenization(t))
        return "".join(out)

    return wordpiece


def entities(found: list[dict], scores: np.ndarray, labels: Sequence[str], strategy: str = "none",
             ignore_labels: Sequence[str] = ("O",), join: Callable[[list[str]], str] = "".join) -> list[dict]:
    """HF's `aggregate` and label filter: the answers for one text from its `pieces` ``found`` and their class
    probabilities ``scores`` [L, C] (rows by ``index``), by ``strategy`` (one of `STRATEGIES`); ``join``: the
    tokenizer's `joiner`."""
    if strategy in ("none", "simple"):
        answers = []
        for p in found:
            row = scores[p["index"]]
            c = row.argmax()
            answers.append({"entity": labels[c], "score": row[c], "index": p["index"], "word": p["word"],
                            "start": p["start"], "end": p["end"]})
    else:
        answers = [_word(group, scores, labels, strategy, join) for group in _words(found)]
    if strategy != "none":
        answers = _grouped(answers, join)
    return [a for a in answers if a.get("entity") not in ignore_labels and a.get("entity_group") not in ignore_labels]


def _words(found: list[dict]) -> list[list[dict]]:
    """The pieces as words: a piece that is a subword joins the word before (the first piece always starts one)."""
    words: list[list[dict]] = []
    for p in found:
        if words and p["is_subword"]:
            words[-1].append(p)
        else:
            words.append([p])
    return words


def _word(group: list[dict], scores: np.ndarray, labels: Sequence[str], strategy: str, join) -> dict:
    """HF's `aggregate_word`: one label and score for a word's pieces."""
    rows = [scores[p["index"]] for p in group]
    if strategy == "first":
        row = rows[0]
    elif strategy == "max":
        row = max(rows, key=lambda r: r.max())
    else:  # average
        row = np.nanmean(np.stack(rows), axis=0)
    c = row.argmax()
    return {"entity": labels[c], "score": row[c], "word": join([p["word"] for p in group]),
            "start": group[0]["start"], "end": group[-1]["end"]}


def _tag(label: str) -> tuple[str, str]:
    """(B or I, type) of a label; one without a B-/I- prefix continues ("I") an entity of its own name."""
    if label.startswith("B-") or label.startswith("I-"):
        return label[0], label[2:]
    return "I", label


def _grouped(answers: list[dict], join) -> list[dict]:
    """HF's `group_entities`: neighbours of one type merged, a ``B-`` starting a new entity."""
    groups: list[list[dict]] = []
    for a in answers:
        bi, tag = _tag(a["entity"])
        if groups and tag == _tag(groups[-1][-1]["entity"])[1] and bi != "B":
            groups[-1].append(a)
        else:
            groups.append([a])
    return [{"entity_group": g[0]["entity"].split("-", 1)[-1],
             "score": np.mean(np.nanmean([a["score"] for a in g])), "word": join([a["word"] for a in g]),
             "start": g[0]["start"], "end": g[-1]["end"]} for g in groups]
