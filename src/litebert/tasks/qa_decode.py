"""Extractive question answering: the windows a question and its context are cut into, and the answers read back
from a QA head's start and end logits. `litebert predict`, `litebert evaluate` (SQuAD folders), fine-tuning's dev
evaluation and ``pipeline("question-answering")`` all decode here, one of two ways (`QADecoding.method`):

* ``"official"`` (the default everywhere): the BERT/ALBERT ``run_squad`` protocol, with which the paper's SQuAD
  scores were measured. Windows start every ``doc_stride`` pieces and the question is cut to ``max_query_len``
  pieces. Per window the ``n_best`` best starts and ends are paired; a span scores start logit + end logit, has at
  most ``max_answer_len`` (30) pieces, and its start counts only in the window where that piece has the most context
  on both sides. The question's ``n_best`` best distinct spans are kept; an answer's ``score`` is its probability
  among them (softmax of their logit sums, run_squad's nbest "probability").
* ``"hf"``: transformers' question-answering pipeline (4.57). Windows overlap by ``doc_stride`` pieces and the
  question is whole. Per window a softmax over the context pieces (and [CLS]) for the start and one for the end; a
  span scores p(start) x p(end), has at most ``max_answer_len`` (15) pieces; every window counts; answers are widened
  to whole words and answers equal but for case are merged, their scores summed.

``handle_impossible_answer`` adds the empty answer, scored from [CLS]: official, the lowest start + end logit of
[CLS] over the windows (run_squad's v2.0 null score); hf, the lowest p(start) x p(end) of [CLS].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from litebert.checks import AT_LEAST_1, check_fields
from litebert.errors import ConfigError
from litebert.tasks.pieces import hf_offsets, piece_words
from litebert.tasks.scores import softmax
from litebert.tasks.squad import encode_squad

DECODINGS = ("official", "hf")
# What a decoding does when not told: run_squad's --max_answer_length 30 and piece spans; HF's max_answer_len 15
# and align_to_words True.
_DEFAULTS = {"official": {"max_answer_len": 30, "align_to_words": False},
             "hf": {"max_answer_len": 15, "align_to_words": True}}


HF_MAX_SEQ_LEN = 384  # transformers' QA pipeline: windows of min(tokenizer.model_max_length, 384) pieces


def window_length(method: str, fine_tuned: int) -> int:
    """The windows' length when none is asked for (then capped by the model's positions): official, the length the
    model was fine-tuned with (``fine_tuned``; run_squad predicts with its training max_seq_length); hf, the 384 of
    transformers' pipeline."""
    return fine_tuned if method == "official" else HF_MAX_SEQ_LEN


@dataclass(frozen=True)
class QADecoding:
    """How answers are read from start/end logits (see the module docstring). ``max_answer_len`` (pieces) and
    ``align_to_words`` (widen a span to the words its first and last pieces belong to): None takes the method's
    own. ``n_best``: official only, the starts and ends paired per window and the answers kept per question."""

    method: Literal["official", "hf"] = "official"
    max_answer_len: Optional[int] = None
    n_best: int = 20
    align_to_words: Optional[bool] = None
    handle_impossible_answer: bool = False

    def __post_init__(self) -> None:
        check_fields(self, {"max_answer_len": AT_LEAST_1, "n_best": AT_LEAST_1})
        for name, value in _DEFAULTS[self.method].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)


# ---------------------------------------------------------------------------------------------------- windows
def windows(tok, examples: list, decoding: QADecoding, max_seq_len: int, doc_stride: int, max_query_len: int,
            training: bool = False) -> list[dict]:
    """The windows of each `SquadExample` (``question``, ``context``) as ``decoding`` cuts them: official,
    `litebert.tasks.squad.encode_squad` (``training``: with answer positions); hf, `hf_windows`. Each feature:
    ``input_ids``, ``token_type_ids``, ``example_index``, ``context_offset`` (input position of its first context
    piece), ``spans`` (each context piece's character span in the context); official also ``max_context``; with
    ``align_to_words``, ``words`` (each context piece's word)."""
    if decoding.method == "official" or training:
        if doc_stride < 1:
            raise ConfigError("{doc_stride}: the official decoding starts a window every doc_stride pieces; give 1 or "
                              "more", doc_stride=doc_stride)
        feats = encode_squad(tok, examples, max_seq_len, doc_stride, max_query_len, training)
    else:
        feats = hf_windows(tok, examples, max_seq_len, doc_stride)
    if decoding.align_to_words:
        for f in feats:
            off = f["context_offset"]
            f["words"] = piece_words(tok, f["input_ids"][off:off + len(f["spans"])])
    return feats


def hf_windows(tok, examples: list, max_seq_len: int, doc_stride: int) -> list[dict]:
    """[CLS] question [SEP] context-window [SEP], as HF's tokenizer cuts them (``truncation="only_second"``,
    ``stride``): windows of ``budget`` context pieces, each starting ``budget - doc_stride`` after the last."""
    questions = tok.encode_batch_ids([ex.question for ex in examples])
    contexts = list(dict.fromkeys(ex.context for ex in examples))
    encoded = dict(zip(contexts, tok.encode_batch_with_offsets(contexts)))
    out = []
    for index, (ex, q) in enumerate(zip(examples, questions)):
        c_ids, c_off = encoded[ex.context]
        c_off = hf_offsets(tok, c_ids, c_off)
        budget = max_seq_len - len(q) - 3
        if budget <= doc_stride:
            raise ConfigError(f"the question ({len(q)} pieces) leaves {max(budget, 0)} pieces of " + "{max_seq_len} "
                              "for the context, not more than {doc_stride}; raise the first or lower the second",
                              max_seq_len=max_seq_len, doc_stride=doc_stride)
        start = 0
        while True:
            stop = min(start + budget, len(c_ids))
            ids = [tok.cls_token_id] + q + [tok.sep_token_id] + c_ids[start:stop] + [tok.sep_token_id]
            out.append({"input_ids": ids, "token_type_ids": [0] * (len(q) + 2) + [1] * (stop - start + 1),
                        "example_index": index, "context_offset": len(q) + 2, "spans": c_off[start:stop]})
            if stop == len(c_ids):
                break
            start += budget - doc_stride
    return out


# ---------------------------------------------------------------------------------------------------- decoding
def decode(contexts: list[str], features: list[dict], start_logits: list[np.ndarray], end_logits: list[np.ndarray],
           decoding: QADecoding, top_k: int = 1) -> list[list[dict]]:
    """Per context (a question's; features point at theirs by ``example_index``) its best answers, best first, at
    most ``top_k``: ``{score, start, end, answer}`` with ``answer`` = ``context[start:end]`` ("" with start = end =
    0: no answer). ``start_logits``/``end_logits``: each feature's [L] logits."""
    by_example: list[list[int]] = [[] for _ in contexts]
    for fi, f in enumerate(features):
        by_example[f["example_index"]].append(fi)
    read = _official if decoding.method == "official" else _hf
    return [read(context, [(features[fi], start_logits[fi], end_logits[fi]) for fi in fis], decoding, top_k)[:top_k]
            for context, fis in zip(contexts, by_example)]


def _span(f: dict, s: int, e: int, align: bool) -> tuple[int, int]:
    """The characters of the window's context pieces ``s``..``e``; with ``align``, of their whole words."""
    spans = f["spans"]
    if not align:
        return spans[s][0], spans[e][1]
    words = f["words"]
    return (min(a for (a, _), w in zip(spans, words) if w == words[s]),
            max(b for (_, b), w in zip(spans, words) if w == words[e]))


def _official(context: str, windows: list[tuple], d: QADecoding, top_k: int) -> list[dict]:
    """run_squad's `write_predictions` for one question: candidates from every window, best first, distinct spans,
    ``n_best`` kept, scored by their softmax (``top_k`` cuts the list afterwards; it does not change it)."""
    candidates, null = [], None
    for f, start, end in windows:
        off, n = f["context_offset"], len(f["spans"])
        if d.handle_impossible_answer:
            null = min(null, float(start[0] + end[0])) if null is not None else float(start[0] + end[0])
        start, end = start[off:off + n], end[off:off + n]  # the context pieces only
        top_e = np.argsort(-end)[:d.n_best]
        for i in np.argsort(-start)[:d.n_best]:
            if not f["max_context"][i]:
                continue
            for j in top_e:
                if j < i or j - i + 1 > d.max_answer_len:
                    continue
                candidates.append((float(start[i] + end[j]), *_span(f, i, j, d.align_to_words)))
    if null is not None:
        candidates.append((null, 0, 0))
    candidates.sort(key=lambda c: -c[0])  # stable: equal scores keep the windows' order
    seen, best = set(), []
    for score, a, b in candidates:
        if (a, b) not in seen:
            seen.add((a, b))
            best.append((score, a, b))
        if len(best) == d.n_best:
            break
    if not best:
        return []
    scores = np.array([s for s, _, _ in best])
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    return [{"score": float(p), "start": a, "end": b, "answer": context[a:b]} for p, (_, a, b) in zip(probs, best)]


def _hf(context: str, windows: list[tuple], d: QADecoding, top_k: int) -> list[dict]:
    """transformers' `QuestionAnsweringPipeline.postprocess` for one question: every window's answers, equal ones
    (ignoring case) merged, then the null answer; best first."""
    answers, null = [], 1e6
    for f, start, end in windows:
        null = _hf_window(f, start, end, context, answers, null, d, top_k)
    if d.handle_impossible_answer:
        answers.append({"score": null, "start": 0, "end": 0, "answer": ""})
    return sorted(answers, key=lambda a: a["score"], reverse=True)


def _hf_window(f: dict, start: np.ndarray, end: np.ndarray, context: str, answers: list, null: float,
               d: QADecoding, top_k: int) -> float:
    """HF's `select_starts_ends` + `decode_spans` (transformers/pipelines/question_answering.py) on one window: its
    best spans (``top_k * 2 + 10`` of them when aligning to words, else ``top_k``) added to ``answers`` (an equal
    answer's score summed); returns the null score so far."""
    first, n = f["context_offset"], len(f["spans"])
    allowed = np.zeros(len(start), dtype=bool)  # the context pieces and [CLS]
    allowed[0] = True
    allowed[first:first + n] = True
    start = softmax(np.where(allowed, start, np.float32(-10000.0)))
    end = softmax(np.where(allowed, end, np.float32(-10000.0)))
    if d.handle_impossible_answer:
        null = min(null, (start[0] * end[0]).item())
    start[0] = end[0] = 0.0
    k = top_k * 2 + 10 if d.align_to_words else top_k
    candidates = np.tril(np.triu(np.matmul(start[None, :, None], end[None, None, :])), d.max_answer_len - 1)
    flat = candidates.flatten()
    if k == 1:
        order = [np.argmax(flat)]
    elif len(flat) < k:
        order = np.argsort(-flat)
    else:
        idx = np.argpartition(-flat, k)[0:k]
        order = idx[np.argsort(-flat[idx])]
    starts, ends = np.unravel_index(order, candidates.shape)[1:]
    keep = np.isin(starts, allowed.nonzero()) & np.isin(ends, allowed.nonzero())
    spans = f["spans"]
    for s, e, score in zip(starts[keep], ends[keep], candidates[0, starts[keep], ends[keep]]):
        s, e = int(s) - first, int(e) - first
        if s < 0 or e < 0:  # [CLS]: HF's word lookup fails and falls back to its (0, 0) span
            a, b = 0, 0 if e < 0 else spans[e][1]
        else:
            a, b = _span(f, s, e, d.align_to_words)
        same = next((x for x in answers if x["answer"].lower() == context[a:b].lower()), None)
        if same is not None:
            same["score"] += score.item()
        else:
            answers.append({"score": score.item(), "start": a, "end": b, "answer": context[a:b]})
    return null
