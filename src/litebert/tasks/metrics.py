"""Evaluation metrics, written from their definitions (tests check them against scikit-learn, SciPy and hand cases).

* GLUE: accuracy, F1 (MRPC, QQP), Matthews correlation (CoLA), Pearson and Spearman (STS-B).
* SQuAD: exact match and F1 with the official answer normalization (``evaluate-v2.0.py``: lower-case, drop
  punctuation and the articles a/an/the, collapse white space); v2.0 adds the HasAns/NoAns splits and the best
  no-answer threshold.
* Token classification: entity-level precision/recall/F1 by the rules of the CoNLL ``conlleval`` script (IOB1, IOB2,
  IOE and IOBES all parse).
"""

from __future__ import annotations

import collections
import re
import string
import warnings
from collections.abc import Sequence

import numpy as np


def accuracy(preds: Sequence, labels: Sequence) -> float:
    preds, labels = np.asarray(preds), np.asarray(labels)
    return float((preds == labels).mean()) if len(labels) else 0.0


def f1(preds: Sequence, labels: Sequence, positive=1) -> float:
    """Binary F1 of the positive class (GLUE's MRPC/QQP F1); 0 when there are no true positives."""
    preds, labels = np.asarray(preds), np.asarray(labels)
    tp = int(((preds == positive) & (labels == positive)).sum())
    fp = int(((preds == positive) & (labels != positive)).sum())
    fn = int(((preds != positive) & (labels == positive)).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def matthews(preds: Sequence, labels: Sequence) -> float:
    """Matthews correlation, K-class form (Gorodkin 2004); 0 when either marginal is constant (as scikit-learn)."""
    preds, labels = np.asarray(preds), np.asarray(labels)
    classes = np.unique(np.concatenate([preds, labels]))
    idx = {c: i for i, c in enumerate(classes)}
    C = np.zeros((len(classes), len(classes)), dtype=np.float64)  # C[true, pred]
    for t, p in zip(labels, preds):
        C[idx[t], idx[p]] += 1
    t_k, p_k, c, s = C.sum(1), C.sum(0), np.trace(C), C.sum()
    cov_tp = c * s - t_k @ p_k
    cov_pp = s * s - p_k @ p_k
    cov_tt = s * s - t_k @ t_k
    denom = np.sqrt(cov_pp * cov_tt)
    return float(cov_tp / denom) if denom else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc @ xc) * (yc @ yc))
    return float(xc @ yc / denom) if denom else 0.0


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (the definition Spearman's rho uses)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of the average ranks."""
    return pearson(_average_ranks(np.asarray(x, dtype=np.float64)), _average_ranks(np.asarray(y, dtype=np.float64)))


# ---------------------------------------------------------------------------------------------------------- SQuAD
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """The official SQuAD normalization: lower case, drop ASCII punctuation, drop articles, collapse white space."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 after normalization. As in v2.0: if either side is empty, 1 when both are, else 0."""
    pred_toks, gold_toks = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_toks or not gold_toks:
        return float(pred_toks == gold_toks)
    common = collections.Counter(pred_toks) & collections.Counter(gold_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_toks), same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def squad_evaluate(gold: dict[str, list[str]], predictions: dict[str, str],
                   na_probs: dict[str, float] | None = None, na_prob_thresh: float = 1.0) -> dict[str, float]:
    """SQuAD exact/F1 in percent, following the official v2.0 evaluation (a superset of v1.1's).

    ``gold`` maps question id -> gold answer texts ([] for an unanswerable question); ``predictions`` maps question id
    -> predicted text ("" = no answer). With ``na_probs`` (question id -> no-answer score), a prediction whose score
    exceeds ``na_prob_thresh`` counts as "no answer", and ``best_exact``/``best_f1`` with their thresholds report the
    best threshold on this data, as the official script does. Questions missing from ``predictions`` are left out
    with a warning (the official v2.0 script skips them too, with a message). One deliberate difference then: the
    best-threshold sweep here starts from the NoAns questions *that have predictions*, consistent with its
    denominator; the official script starts from all NoAns questions of the file, which inflates ``best_*`` when
    predictions are missing. With a prediction for every question (what ``litebert evaluate`` writes) both agree.
    """
    missing = [q for q in gold if q not in predictions]
    if missing:
        warnings.warn(f"{len(missing)} of {len(gold)} questions have no prediction and are left out of the scores "
                      f"(first: {missing[0]!r})", stacklevel=2)
    exact, f1s, has_ans = {}, {}, {}
    for qid, answers in gold.items():
        if qid not in predictions:
            continue
        golds = [a for a in answers if normalize_answer(a)] or [""]
        exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
        f1s[qid] = max(token_f1(predictions[qid], g) for g in golds)
        has_ans[qid] = bool(answers)  # official: qid_to_has_ans from the raw answers list
    if not exact:
        return {"exact": 0.0, "f1": 0.0, "total": 0}
    probs = na_probs if na_probs is not None else {q: 0.0 for q in exact}

    def thresholded(scores):
        return {q: (float(not has_ans[q]) if probs[q] > na_prob_thresh else s) for q, s in scores.items()}

    ex_t, f1_t = thresholded(exact), thresholded(f1s)
    out = _totals(ex_t, f1_t, list(exact))
    for name, flag in (("HasAns", True), ("NoAns", False)):
        ids = [q for q in exact if has_ans[q] is flag]
        if ids:
            for k, v in _totals(ex_t, f1_t, ids).items():
                out[f"{name}_{k}"] = v
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = _best_thresh(predictions, exact, probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = _best_thresh(predictions, f1s, probs, has_ans)
    return out


def _totals(exact: dict, f1s: dict, ids: list[str]) -> dict:
    n = len(ids)
    return {"exact": 100.0 * sum(exact[q] for q in ids) / n, "f1": 100.0 * sum(f1s[q] for q in ids) / n, "total": n}


def _best_thresh(preds: dict, scores: dict, na_probs: dict, has_ans: dict) -> tuple[float, float]:
    """Sweep the no-answer threshold over the sorted no-answer scores (official ``find_best_thresh``).

    Start from "everything is no-answer" (score = number of NoAns questions), then admit questions in increasing
    no-answer score; each admitted answerable question gains its score, each unanswerable one loses 1 if it had a
    non-empty prediction.
    """
    cur = best = sum(1 for q in scores if not has_ans[q])
    best_thresh = 0.0
    for q in sorted(scores, key=lambda q: na_probs[q]):
        if has_ans[q]:
            diff = scores[q]
        else:
            diff = -1 if preds[q] else 0
        cur += diff
        if cur > best:
            best, best_thresh = cur, na_probs[q]
    return 100.0 * best / len(scores), best_thresh


# ------------------------------------------------------------------------------------------------ entity-level F1
def _split_tag(tag: str) -> tuple[str, str]:
    if tag == "O" or tag == ".":  # conlleval treats "." like "O"
        return tag, ""
    prefix, _, kind = tag.partition("-")
    if not kind:  # a bare type with no prefix, e.g. "PER": treat as inside
        return "I", prefix
    return prefix, kind


def _ends(prev_tag, tag, prev_type, type_) -> bool:
    return (prev_tag in ("E", "S")
            or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
            or (prev_tag not in ("O", ".") and prev_type != type_))


def _starts(prev_tag, tag, prev_type, type_) -> bool:
    return (tag in ("B", "S")
            or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
            or (tag not in ("O", ".") and prev_type != type_))


def entity_spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """(type, first, last) of every chunk, by conlleval's start/end-of-chunk rules (with the IOBES "S"/"E" cases as
    seqeval's default mode adds them)."""
    spans, start = set(), None
    prev_tag, prev_type = "O", ""
    for i, t in enumerate(list(tags) + ["O"]):
        tag, type_ = _split_tag(t)
        if start is not None and _ends(prev_tag, tag, prev_type, type_):
            spans.add((prev_type, start, i - 1))
            start = None
        if _starts(prev_tag, tag, prev_type, type_):
            start = i
        prev_tag, prev_type = tag, type_
    return spans


def entity_f1(pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision/recall/F1 (in [0, 1]) over exact (type, span) matches, sentence by sentence."""
    tp = n_pred = n_gold = 0
    for p, g in zip(pred_tags, gold_tags, strict=True):
        if len(p) != len(g):
            raise ValueError(f"a sentence has {len(p)} predicted tags but {len(g)} gold tags")
        ps, gs = entity_spans(p), entity_spans(g)
        tp += len(ps & gs)
        n_pred += len(ps)
        n_gold += len(gs)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {"precision": precision, "recall": recall, "f1": f}
