"""Examples -> model features (lists of ids), dynamic-padding collate, and length-grouped batching.

A feature is a dict of plain lists and ints; ``collate`` pads a list of them into the tensors the heads take
(``input_ids``, ``attention_mask``, ``token_type_ids`` [B, L] or [B, K, L], plus ``labels`` / SQuAD positions).
Texts longer than the model's maximum are truncated here (SQuAD contexts are windowed instead, in `squad.py`).
"""

from __future__ import annotations

import numpy as np
import torch

from litebert.errors import ConfigError, DataError
from litebert.tasks.readers import MultipleChoiceExample, TextExample, TokenExample

IGNORE = -100  # label of positions the loss skips (HF / PyTorch convention)


def encode_text(tok, examples: list[TextExample], max_length: int, labels: list[str] | None) -> list[dict]:
    """[CLS] A [SEP] (B [SEP]) truncated longest-first to ``max_length`` (as the official ``_truncate_seq_pair``).

    ``labels`` None = regression (float label); otherwise the label's index in ``labels``. Unlabelled -> no "labels".
    """
    index = {l: i for i, l in enumerate(labels)} if labels is not None else None
    # Pairs and single sentences are encoded apart, so that an example's features never depend on the others in
    # the list (predict reads its input in chunks).
    pairs = [i for i, e in enumerate(examples) if e.text_b is not None]
    singles = [i for i, e in enumerate(examples) if e.text_b is None]
    ids: list = [None] * len(examples)
    types: list = [None] * len(examples)
    for group, b in ((pairs, [examples[i].text_b for i in pairs]), (singles, None)):
        if group:
            enc = tok([examples[i].text_a for i in group], b, max_length=max_length, truncation=True)
            for n, i in enumerate(group):
                ids[i], types[i] = enc["input_ids"][n], enc["token_type_ids"][n]
    feats = []
    for i, e in enumerate(examples):
        f = {"input_ids": ids[i], "token_type_ids": types[i]}
        if e.label is not None:
            f["labels"] = float(e.label) if index is None else index[e.label]
        feats.append(f)
    return feats


def encode_multiple_choice(tok, examples: list[MultipleChoiceExample], max_length: int,
                           max_qa_length: int = 128) -> list[dict]:
    """One [CLS] context [SEP] question+option [SEP] row per option, as the official ``race_utils``: the question's
    "_" blank is filled with the option (else question and option are joined), the question+option keeps its last
    ``max_qa_length`` pieces, and only the *end of the context* is cut to fit -- the option, at the end of the second
    segment, is what tells the rows apart. (Official ``convert_single_example``; where the question+option alone
    leaves no room, which the official code does not handle, it keeps its last ``max_length - 4`` pieces and one
    context piece.) An item with no context pairs question and option, trimmed longest-first."""
    cls, sep = tok.cls_token_id, tok.sep_token_id
    budget = max_length - 3  # [CLS] A [SEP] B [SEP]
    if budget < 2:
        raise ConfigError(f"max_seq_length {max_length} leaves no room for a context and an option")
    feats = []
    for e in examples:
        rows_ids, rows_types = [], []
        ctx = tok.encode_ids(e.context) if e.context else None
        for option in e.choices:
            if ctx is None:
                a, b = tok.encode_ids(e.question), tok.encode_ids(option)
                while len(a) + len(b) > budget:  # official _truncate_seq_pair: pop from the longer
                    (a if len(a) > len(b) else b).pop()
            else:
                qa = e.question.replace("_", option) if "_" in e.question else f"{e.question} {option}"
                b = tok.encode_ids(qa)[-min(max_qa_length, budget - 1):]
                a = ctx[:budget - len(b)]
            rows_ids.append([cls] + a + [sep] + b + [sep])
            rows_types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        f = {"input_ids": rows_ids, "token_type_ids": rows_types}
        if e.label is not None:
            f["labels"] = e.label
        feats.append(f)
    return feats


def encode_tokens(tok, examples: list[TokenExample], max_length: int, labels: list[str] | None) -> list[dict]:
    """Words -> pieces; each word's label goes on its first piece, the rest get IGNORE (HF's convention; the official
    BERT NER recipe does the same). ``word_ids`` maps each position to its word (None for specials); words past
    ``max_length`` are dropped (predicted as the first label, usually "O", by `predict`)."""
    index = {l: i for i, l in enumerate(labels)} if labels else None
    feats = []
    for e in examples:
        pieces = tok.encode_batch_ids(e.words)
        ids, word_ids = [tok.cls_token_id], [None]
        for w, p in enumerate(pieces):
            p = p or [tok.unk_token_id]  # a word SentencePiece maps to nothing still needs a position
            if len(ids) + len(p) > max_length - 1:
                break
            ids += p
            word_ids += [w] * len(p)
        ids.append(tok.sep_token_id), word_ids.append(None)
        f = {"input_ids": ids, "token_type_ids": [0] * len(ids), "word_ids": word_ids}
        if e.labels is not None and index is not None:
            lab, prev = [], None
            for w in word_ids:
                lab.append(IGNORE if w is None or w == prev else index[e.labels[w]])
                prev = w
            f["labels"] = lab
        feats.append(f)
    return feats


def check_ids(features: list[dict], vocab_size: int) -> None:
    """The inputs' ids lie in the model's vocabulary: checked here, where the features are made (the model does not
    read a device batch back to check it); a `DataError` names the likely cause."""
    flat = [i for f in features for row in (f["input_ids"] if f["input_ids"] and isinstance(f["input_ids"][0], list)
                                           else [f["input_ids"]]) for i in row]
    if flat and (max(flat) >= vocab_size or min(flat) < 0):
        raise DataError(f"the tokenizer makes ids up to {max(flat)} (min {min(flat)}), but the model's vocabulary has "
                        f"{vocab_size} pieces: the tokenizer is not the model's; give the tokenizer the model was "
                        f"trained with")


def length_of(f: dict) -> int:
    """Pieces of a feature's longest sequence (its ids: a list, an array, or a list of lists for multiple choice)."""
    return max(map(len, f["input_ids"])) if rows_of(f) is not None else len(f["input_ids"])


def rows_of(f: dict) -> int | None:
    """The sequences of a multiple-choice feature (a list of lists of ids), None for one sequence."""
    ids = f["input_ids"]
    return len(ids) if isinstance(ids, list) and ids and isinstance(ids[0], list) else None


# Keys collate turns into tensors; everything else in a feature (word_ids, offsets...) is metadata.
TENSOR_KEYS = ("input_ids", "token_type_ids", "labels", "start_positions", "end_positions", "is_impossible")


def collate(features: list[dict], pad_id: int = 0, pad_to: int | None = None) -> dict[str, torch.Tensor]:
    """Pad to the longest in the batch (dynamic padding), or to ``pad_to`` (the fixed pad-to-max recipe)."""
    width = pad_to or max(length_of(f) for f in features)

    def pad(rows, value):
        return [r + [value] * (width - len(r)) for r in rows]

    out: dict[str, torch.Tensor] = {}
    multi = isinstance(features[0]["input_ids"][0], list)
    if multi:  # multiple choice: [B, K, L]
        ids = [pad(f["input_ids"], pad_id) for f in features]
        types = [pad(f["token_type_ids"], 0) for f in features]
        mask = [pad([[1] * len(r) for r in f["input_ids"]], 0) for f in features]
    else:
        ids = pad([f["input_ids"] for f in features], pad_id)
        types = pad([f["token_type_ids"] for f in features], 0)
        mask = pad([[1] * len(f["input_ids"]) for f in features], 0)
    out["input_ids"], out["token_type_ids"] = torch.tensor(ids), torch.tensor(types)
    out["attention_mask"] = torch.tensor(mask)
    if "labels" in features[0]:
        labels = [f["labels"] for f in features]
        if isinstance(labels[0], list):  # token classification
            out["labels"] = torch.tensor(pad(labels, IGNORE))
        else:
            out["labels"] = torch.tensor(labels, dtype=torch.float32 if isinstance(labels[0], float) else torch.long)
    for key in ("start_positions", "end_positions"):
        if key in features[0]:
            out[key] = torch.tensor([f[key] for f in features])
    if "is_impossible" in features[0]:
        out["is_impossible"] = torch.tensor([float(f["is_impossible"]) for f in features])
    return out


def length_grouped_batches(lengths: list[int], batch_size: int, rng: np.random.Generator,
                           mega: int = 50) -> list[list[int]]:
    """Shuffle, cut into mega-batches of ``mega`` batches, sort each by length, cut into batches, shuffle the batches.

    Batches hold similar lengths (little padding) while the order stays random; all randomness comes from ``rng``.
    """
    perm = rng.permutation(len(lengths))
    batches = []
    step = batch_size * mega
    for s in range(0, len(perm), step):
        chunk = sorted(perm[s:s + step].tolist(), key=lambda i: -lengths[i])
        batches += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def random_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[list[int]]:
    perm = rng.permutation(n).tolist()
    return [perm[k:k + batch_size] for k in range(0, n, batch_size)]


def sorted_batches(lengths: list[int], batch_size: int, max_tokens: int | None = None,
                   rows: list[int] | None = None) -> list[list[int]]:
    """For inference: batches of similar length, longest first (order is restored by the caller). ``max_tokens``:
    a batch also ends before its padded size, sequences x longest length, would pass this (short texts then come many
    to a batch); ``rows``: sequences per feature (the choices of multiple choice; default 1)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if max_tokens is None:
        return [order[k:k + batch_size] for k in range(0, len(order), batch_size)]
    rows = rows or [1] * len(lengths)
    batches: list[list[int]] = []
    sequences = 0  # in the last batch
    for i in order:
        if batches and len(batches[-1]) < batch_size and (sequences + rows[i]) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(i)
            sequences += rows[i]
        else:
            batches.append([i])
            sequences = rows[i]
    return batches
