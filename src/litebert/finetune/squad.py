"""SQuAD v1.1 / v2.0: sliding windows, answer positions and n-best decoding.

Windows follow the official (BERT/ALBERT) recipe: ``[CLS] question [SEP] context-window [SEP]`` with the question cut
to ``max_query_length`` pieces and windows over the context starting every ``doc_stride`` pieces. A piece seen by
several windows is scored only in the window where it has the most context on both sides (official
``_check_is_max_context``). Every context piece carries its character span in the *original* context (the
tokenizer's offsets), so a predicted span maps straight back to the user's text.

v2.0 "no answer": the model (`litebert.heads.SquadV2Model`) adds a no-answer logit per window. A question's no-answer
score is the minimum over its windows (an answer needs only one window); it answers "" when the no-answer
probability exceeds a threshold picked on the dev set (official ``find_best_thresh``).
"""

from __future__ import annotations

import collections

import numpy as np
import torch

from litebert.errors import ConfigError
from litebert.finetune.readers import SquadExample


def encode_squad(tok, examples: list[SquadExample], max_seq_length: int = 384, doc_stride: int = 128,
                 max_query_length: int = 64, training: bool = False) -> list[dict]:
    """Windows of every example. Each feature: model inputs, ``start/end_positions`` (0 = [CLS] when the window has no
    answer), ``is_impossible`` (window-level), and for decoding ``example_index``, ``context_offset`` (input position
    of the first context piece), ``spans`` (original-context char span of each window piece) and ``max_context``."""
    feats = []
    # One batch encode of the questions and one of the distinct contexts (SQuAD asks several questions per context).
    questions = tok.encode_batch_ids([ex.question for ex in examples])
    contexts = list(dict.fromkeys(ex.context for ex in examples))
    encoded = dict(zip(contexts, tok.encode_batch_with_offsets(contexts)))
    for ei, ex in enumerate(examples):
        q_ids = questions[ei][:max_query_length]
        c_ids, c_spans = encoded[ex.context]
        budget = max_seq_length - len(q_ids) - 3
        if budget < 1:
            raise ConfigError(f"max_seq_length {max_seq_length} leaves no room for context after the "
                              f"{len(q_ids)}-piece question of {ex.qas_id!r} ([CLS] question [SEP] context [SEP]); "
                              f"raise --seq-len above {len(q_ids) + 3}")
        windows, start = [], 0
        while True:
            length = min(budget, len(c_ids) - start)
            windows.append((start, length))
            if start + length >= len(c_ids):
                break
            start += min(length, doc_stride)
        # answer (first gold answer) as a piece range
        a_tok = None
        if not ex.is_impossible and ex.answers:
            s_char = ex.answers[0]["answer_start"]
            e_char = s_char + len(ex.answers[0]["text"])
            inside = [k for k, (s, e) in enumerate(c_spans) if s < e_char and e > s_char]
            if inside:
                a_tok = (inside[0], inside[-1])
        for wi, (ws, wl) in enumerate(windows):
            ids = [tok.cls_token_id] + q_ids + [tok.sep_token_id] + c_ids[ws:ws + wl] + [tok.sep_token_id]
            types = [0] * (len(q_ids) + 2) + [1] * (wl + 1)
            off = len(q_ids) + 2
            sp = ep = 0
            if a_tok is not None and ws <= a_tok[0] and a_tok[1] < ws + wl:
                sp, ep = a_tok[0] - ws + off, a_tok[1] - ws + off
            feats.append({
                "input_ids": ids, "token_type_ids": types, "start_positions": sp, "end_positions": ep,
                "is_impossible": int(sp == 0), "example_index": ei, "context_offset": off,
                "spans": c_spans[ws:ws + wl],
                "max_context": [_is_max_context(windows, wi, ws + k) for k in range(wl)],
            })
    return feats


def _is_max_context(windows: list[tuple[int, int]], current: int, pos: int) -> bool:
    """Official ``_check_is_max_context``: score = min(left, right) context + 0.01 * window length."""
    best, best_i = None, None
    for i, (s, n) in enumerate(windows):
        if not s <= pos < s + n:
            continue
        score = min(pos - s, s + n - 1 - pos) + 0.01 * n
        if best is None or score > best:
            best, best_i = score, i
    return best_i == current


def decode(examples: list[SquadExample], features: list[dict], start_logits: list[np.ndarray],
           end_logits: list[np.ndarray], na_logits: list[float] | None = None, n_best: int = 20,
           max_answer_length: int = 30, null_threshold: float | None = None) -> tuple[dict, dict, dict]:
    """Best span per question: top ``n_best`` starts x ends inside the context, end >= start, at most
    ``max_answer_length`` pieces, start in its max-context window; score = start + end logit.

    Returns (predictions {id: text}, nbest {id: [{text, score, start, end}]}, na_probs {id: p(no answer)}).
    With ``na_logits`` and ``null_threshold`` (a probability), a question whose no-answer probability exceeds the
    threshold gets the empty answer.
    """
    by_example = collections.defaultdict(list)
    for fi, f in enumerate(features):
        by_example[f["example_index"]].append(fi)
    preds, nbest_out, na_probs = {}, {}, {}
    for ei, ex in enumerate(examples):
        cands = []
        for fi in by_example.get(ei, []):
            f, s_log, e_log = features[fi], start_logits[fi], end_logits[fi]
            off, n = f["context_offset"], len(f["spans"])
            s_log, e_log = s_log[off:off + n], e_log[off:off + n]  # context pieces only
            top_s = np.argsort(-s_log)[:n_best]
            top_e = np.argsort(-e_log)[:n_best]
            for i in top_s:
                if not f["max_context"][i]:
                    continue
                for j in top_e:
                    if j < i or j - i + 1 > max_answer_length:
                        continue
                    a, b = f["spans"][i][0], f["spans"][j][1]
                    cands.append((float(s_log[i] + e_log[j]), a, b))
        cands.sort(key=lambda c: -c[0])
        seen, best = set(), []
        for score, a, b in cands:
            if (a, b) in seen:
                continue
            seen.add((a, b))
            best.append({"text": ex.context[a:b], "score": score, "start": a, "end": b})
            if len(best) == n_best:
                break
        nbest_out[ex.qas_id] = best
        preds[ex.qas_id] = best[0]["text"] if best else ""
        if na_logits is not None:
            logits = [na_logits[fi] for fi in by_example.get(ei, [])]
            p = float(torch.sigmoid(torch.tensor(min(logits)))) if logits else 1.0
            na_probs[ex.qas_id] = p
            if null_threshold is not None and p > null_threshold:
                preds[ex.qas_id] = ""
    return preds, nbest_out, na_probs
