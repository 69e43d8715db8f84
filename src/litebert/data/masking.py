"""Pure functions over token-id arrays: ``truncate_seq_pair`` and whole-word n-gram masking (ALBERT §4.1, App. A.1).

Every random choice comes from the ``numpy.random.Generator`` passed in. The behaviour follows the official
``create_pretraining_data.py`` (google-research/albert); deviations are listed in docs/data.md and marked below.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np


def truncate_seq_pair(len_a: int, len_b: int, max_num_tokens: int, rng: np.random.Generator
                      ) -> tuple[int, int, int, int]:
    """How many tokens to cut from ``(front of A, back of A, front of B, back of B)`` to fit ``max_num_tokens``.

    Same distribution as the official loop, which removes one token at a time from the longer side (B on ties),
    from the front or the back with probability 1/2 each: the per-side counts are deterministic, and the number
    taken from the front of a side that loses ``r`` tokens is Binomial(r, 1/2). O(1) instead of O(excess).
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0, 0, 0
    d = len_a - len_b
    if d > 0:  # A is longer: trim A down to B first, then alternate B, A, B, ... (B loses ties)
        first = min(excess, d)
        rest = excess - first
        cut_a, cut_b = first + rest // 2, (rest + 1) // 2
    else:  # B is longer or equal: trim B down to A first, then alternate B, A, ...
        first = min(excess, -d)
        rest = excess - first
        cut_a, cut_b = rest // 2, first + (rest + 1) // 2
    front_a = int(rng.binomial(cut_a, 0.5)) if cut_a else 0
    front_b = int(rng.binomial(cut_b, 0.5)) if cut_b else 0
    return front_a, cut_a - front_a, front_b, cut_b - front_b


def ngram_probabilities(max_ngram: int) -> np.ndarray:
    """p(n) ∝ 1/n for n = 1..max_ngram (the paper's n-gram masking; [6/11, 3/11, 2/11] for n <= 3)."""
    p = 1.0 / np.arange(1, max_ngram + 1)
    return p / p.sum()


@dataclass
class MaskResult:
    input_ids: np.ndarray  # [L] the ids after masking
    positions: np.ndarray  # [P] sorted positions that carry an MLM target
    labels: np.ndarray  # [P] the original ids there
    spans: np.ndarray  # [S, 3] per chosen n-gram: first position, number of tokens, number of whole words


def mask_ngrams(ids: np.ndarray, special: np.ndarray, word_start: np.ndarray, rng: np.random.Generator, *,
                masked_lm_prob: float, max_predictions: int, max_ngram: int, mask_id: int,
                random_ids: np.ndarray) -> MaskResult:
    """Whole-word n-gram masking of one sequence.

    ids [L] token ids; special [L] bool, positions never masked ([CLS]/[SEP]/padding); word_start [L] bool, tokens
    that start a word (``_is_start_piece`` of the official code, which the caller also sets on the first token of
    each segment). A word is a start token plus the non-start tokens after it; the text between two special
    tokens is a *run* (a segment).

    As in the official code: the budget is ``min(max_predictions, max(1, round(L * masked_lm_prob)))`` targets
    (L counts [CLS]/[SEP]); n-grams of n whole words, n ~ p(n) ∝ 1/n, never overlap and are shortened when they
    would exceed the budget; each chosen token becomes [MASK] (80%), stays (10%) or becomes a random id from
    ``random_ids`` (10%). Deviations: n is drawn before the position (see below); an n-gram never crosses a
    special token (official n-grams run over [SEP] from segment A into B); random ids come from ``random_ids``
    (normal pieces) instead of the whole vocabulary.
    """
    L = ids.shape[0]
    out = ids.copy()
    empty = np.zeros(0, dtype=np.int64)
    budget = min(max_predictions, max(1, int(round(L * masked_lm_prob)))) if masked_lm_prob > 0 else 0
    cand = ~special
    prev_cand = np.concatenate([[False], cand[:-1]])
    run_start = cand & ~prev_cand  # first token of each run
    starts_mask = cand & (word_start | run_start)
    wstart = np.flatnonzero(starts_mask)  # [W] first position of each word
    W = wstart.size
    if budget == 0 or W == 0:
        return MaskResult(out, empty, ids[empty], np.zeros((0, 3), np.int64))
    word_of = np.cumsum(starts_mask) - 1  # word index of every position (valid where cand)
    wlen = np.bincount(word_of[cand], minlength=W)  # tokens per word
    wend = wstart + wlen  # [W] one past the last position of each word
    run_of_word = np.cumsum(run_start)[wstart]  # runs are numbered from 1
    last_word_of_run = np.zeros(run_of_word.max() + 1, dtype=np.int64)
    last_word_of_run[run_of_word] = np.arange(W)  # later words overwrite: the last word of each run
    avail = last_word_of_run[run_of_word] - np.arange(W) + 1  # words left in the run from each word

    # Draw n ~ p(n) ∝ 1/n first, then place the n-gram at a uniformly random start word where it fits: inside its
    # run, on no covered word, within the remaining budget; if it fits nowhere try n-1, ... (the official
    # "try shorter ngrams"), and stop when not even one word fits. The official code instead visits start words in
    # random order, draws n for each and skips the n-gram on overlap; long n-grams overlap more often, so its
    # realised lengths drift to ~[0.60, 0.25, 0.15] for n <= 3 at 128 tokens. Drawing n first keeps them near
    # p(n); only the budget's end still favours short n-grams a little (measured in docs/data.md).
    # Placement is by rejection: a few uniform draws among the start words with room for n words in their run
    # (usually the first fits, as at most ~15% of words are covered), then, if all failed, a uniform draw among
    # all fitting starts computed exactly. Both are uniform over the fitting starts, so their mixture is too.
    cdf = np.cumsum(ngram_probabilities(max_ngram)).tolist()
    by_n = [None] + [np.flatnonzero(avail >= n) for n in range(1, max_ngram + 1)]  # starts with room for n words
    ws, we = wstart.tolist(), wend.tolist()
    covered = bytearray(W)  # 1 on covered words
    uniforms = iter(rng.random(4 * budget + 16).tolist())  # drawn in one call; refilled if ever exhausted

    def u() -> float:
        nonlocal uniforms
        x = next(uniforms, None)
        if x is None:
            uniforms = iter(rng.random(64).tolist())
            x = next(uniforms)
        return x

    count = 0
    chosen: list[tuple[int, int]] = []
    while count < budget:
        n = min(bisect.bisect_right(cdf, u()) + 1, max_ngram)
        w = -1
        while n > 0 and w < 0:
            room = budget - count
            cand = by_n[n]
            for _ in range(4 if cand.size else 0):
                c = int(cand[int(u() * cand.size)])
                if we[c + n - 1] - ws[c] <= room and covered.find(1, c, c + n) < 0:
                    w = c
                    break
            else:
                free = np.frombuffer(covered, dtype=np.uint8)
                ccov = np.concatenate([[0], np.cumsum(free)])  # [W+1] covered words before each word
                fits = cand[(ccov[cand + n] == ccov[cand]) & (wend[cand + n - 1] - wstart[cand] <= room)]
                if fits.size:
                    w = int(fits[int(u() * fits.size)])
                else:
                    n -= 1  # official: "try shorter ngrams"
        if w < 0:
            break
        covered[w:w + n] = b"\x01" * n
        count += we[w + n - 1] - ws[w]
        chosen.append((w, n))
    spans = np.array([(wstart[w], wend[w + n - 1] - wstart[w], n) for w, n in chosen], dtype=np.int64).reshape(-1, 3)
    positions = np.sort(np.concatenate([np.arange(s, s + k) for s, k, _ in spans])) if chosen else empty
    labels = ids[positions]
    # 80% [MASK], 10% keep, 10% random normal piece; decided per token as in the official code.
    r = rng.random(positions.size)
    replacement = random_ids[rng.integers(0, random_ids.size, size=positions.size)]
    out[positions[r < 0.8]] = mask_id
    out[positions[r >= 0.9]] = replacement[r >= 0.9]
    return MaskResult(out, positions, labels, spans)
