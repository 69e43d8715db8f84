"""The plateau guard: tell, early in a pretraining run, that the model sits on the unigram plateau.

A masked-LM model that has learned nothing but token frequencies predicts the unigram distribution ``p`` of the
masked targets at every position. Its expected loss is then the entropy ``H1 = -sum p log p`` (nats) and its accuracy
the share of the most frequent piece. A post-LayerNorm ALBERT whose learning rate is too high for its warmup falls
there and stays (measured: on an H200, ALBERT-base at LAMB 0.00176 with 120 warmup steps at batch 256 sat at loss 6.8
= H1 from step 230 to step 1,198; google-research/albert#29, huggingface/transformers#4727 report the same).

Falling *through* the plateau is normal: every MLM run first learns the frequencies, and for some steps every masked
position predicts "the" (measured in the CPU demo at a good rate, step 50-75). So the guard looks only after the
warmup and ``check_after`` more steps, and calls a run plateaued when both hold:

- **the loss sits at H1**: the mean train MLM loss of the last ``window`` steps is above ``H1 - margin`` and below
  ``H1 + ceiling`` (a loss still above that is falling towards H1: a slow start, not yet a plateau);
- **the predictions have collapsed** on a fixed held-out probe: the commonest answer takes at least ``collapse_share``
  of the masked positions, and the final hidden states of those positions are nearly parallel (mean pairwise cosine
  at least ``collapse_cosine``): the encoder gives every position the same vector.

The thresholds come from measured runs (docs/pretraining.md, "The plateau guard"). The unigram statistics are counted
once from the token store (`unigram_of_store`): the masking draws whole words uniformly and masks every piece of a
drawn word, so the masked targets follow the store's piece frequencies.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

COUNT_CAP = 200_000_000  # tokens counted for H1; a larger store is sampled in evenly spaced blocks
# The rules' thresholds, from measured runs (docs/pretraining.md, "The plateau guard"): plateaued runs sat 0.1-0.3 nats
# above H1 with every probed position giving one answer (cosine 1.00); learning runs had pulled their positions apart
# (cosine 0.6-0.85) within 50 steps of reaching H1.
MARGIN = 0.3  # a loss below H1 - MARGIN has left the plateau
CEILING = 0.5  # a loss above H1 + CEILING has not reached it yet (still falling towards it)
COLLAPSE_SHARE = 0.5  # the commonest answer takes at least this share of the probed positions ...
COLLAPSE_COSINE = 0.9  # ... and their final states are at least this parallel
FIRST_CHECK_MIN, FIRST_CHECK_MAX = 100, 300  # the guard's first check, in steps after the warmup (`check_after`)


@dataclass(frozen=True)
class Unigram:
    """The masked targets' unigram statistics: what a model that learned only the frequencies scores."""

    entropy: float  # H1 in nats: the loss of predicting the frequency distribution everywhere
    top_id: int  # the most frequent piece
    top_share: float  # the accuracy of always answering it
    tokens: int  # tokens counted
    seconds: float  # how long the count took

    def describe(self, piece: Optional[str] = None) -> str:
        top = f"'{piece}'" if piece else f"id {self.top_id}"
        return (f"unigram entropy H1 {self.entropy:.3f} nats; always {top}: {self.top_share:.1%} "
                f"({self.tokens:,} tokens counted in {self.seconds:.1f} s)")


def unigram_of_counts(counts: np.ndarray, seconds: float = 0.0) -> Unigram:
    """`Unigram` of piece counts (``counts[i]``: occurrences of piece ``i``)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        raise ValueError("no tokens to count")
    p = counts[counts > 0] / total
    return Unigram(float(-(p * np.log(p)).sum()), int(counts.argmax()), float(counts.max() / total), int(total),
                   seconds)


def unigram_of_store(store, cap: int = COUNT_CAP) -> Unigram:
    """Count the pieces of a `TokenStore` in one pass (at most ``cap`` tokens: beyond it, evenly spaced blocks of
    every shard, so a 10^10-token store costs what 2 * 10^8 tokens do)."""
    t0 = time.perf_counter()
    vocab = store.facts.vocab_size
    counts = np.zeros(vocab, dtype=np.int64)
    share = min(1.0, cap / max(1, store.num_tokens))
    block = max(1, min(1 << 20, cap // 100))  # at least ~100 blocks when sampling
    for k in range(store.num_shards):
        tokens = store.shard_arrays(k)[0]
        n = tokens.shape[0]
        if share >= 1.0:
            starts = range(0, n, block)
        else:  # evenly spaced blocks covering ``share`` of the shard
            blocks = max(1, int(math.ceil(n * share / block)))
            starts = np.linspace(0, max(0, n - block), blocks).astype(np.int64)
        for s in starts:
            counts += np.bincount(np.asarray(tokens[int(s):int(s) + block], dtype=np.int64), minlength=vocab)[:vocab]
    return unigram_of_counts(counts, time.perf_counter() - t0)


@dataclass(frozen=True)
class Probe:
    """The model's answers on a fixed set of held-out masked positions."""

    positions: int  # masked positions probed
    distinct: int  # distinct argmax pieces over them
    top_share: float  # share of the positions whose argmax is the commonest one
    cosine: float  # mean pairwise cosine similarity of their final hidden states

    def to_dict(self) -> dict:
        return {"probe_positions": self.positions, "probe_distinct": self.distinct,
                "probe_top_share": round(self.top_share, 4), "probe_cosine": round(self.cosine, 4)}


@torch.no_grad()
def probe(model, batch: dict, autocast=None) -> Probe:
    """Run ``model`` (an `AlbertForPreTraining`) on ``batch`` (a prepared batch with ``mlm_positions`` and
    ``mlm_weights``) and measure how alike its answers at the masked positions are."""
    was_training = model.training
    model.eval()
    try:
        with autocast if autocast is not None else torch.autocast("cpu", enabled=False):
            out = model.albert(batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids"),
                               output_positions=batch["mlm_positions"], packing=batch.get("packing"))
            hidden = out.last_hidden_state  # [B, P, H] at the masked positions
            logits = model.predictions(hidden, model.albert.embeddings.word_embeddings.weight)  # [B, P, V]
    finally:
        model.train(was_training)
    real = batch["mlm_weights"] > 0  # [B, P]
    h = hidden[real].float()  # [n, H]
    answers = logits[real].argmax(-1)  # [n]
    n = int(answers.numel())
    if n < 2:
        return Probe(n, n, 1.0, 1.0)
    _, counts = torch.unique(answers, return_counts=True)
    u = torch.nn.functional.normalize(h, dim=-1)
    s = u.sum(0)
    cosine = (float(s @ s) - n) / (n * (n - 1))  # mean of u_i . u_j over i != j
    return Probe(n, int(counts.numel()), float(counts.max()) / n, cosine)


@dataclass
class Verdict:
    """What the guard concluded at one check."""

    step: int
    plateau: bool
    loss: float  # mean train MLM loss of the window
    unigram: Unigram
    probe: Probe

    def line(self, advice: str) -> str:
        u, p = self.unigram, self.probe
        return (f"plateau guard: step {self.step}: MLM loss {self.loss:.3f} vs unigram entropy H1 {u.entropy:.3f}; "
                f"{p.top_share:.0%} of {p.positions} held-out masked positions predict one piece "
                f"({p.distinct} distinct), their final states' mean cosine {p.cosine:.2f}: the model predicts token "
                f"frequencies only (the unigram plateau). {advice}")


@dataclass
class PlateauGuard:
    """Watches the train MLM loss and, from ``warmup + check_after`` on (every ``check_after`` steps), probes the
    model. ``action``: warn (one line) or stop (one line, then the run ends as on SIGTERM: checkpoint, resumable)."""

    unigram: Unigram
    warmup: int
    check_after: int = 300
    action: str = "warn"
    window: int = 20  # train steps averaged
    margin: float = MARGIN
    ceiling: float = CEILING
    collapse_share: float = COLLAPSE_SHARE
    collapse_cosine: float = COLLAPSE_COSINE
    batch: Optional[dict] = field(default=None, repr=False)  # the probe's prepared batch, on the run's device

    def __post_init__(self) -> None:
        self._losses: deque = deque(maxlen=self.window)
        self.fired: Optional[Verdict] = None

    def observe(self, mlm_loss: float) -> None:
        if math.isfinite(mlm_loss):
            self._losses.append(mlm_loss)

    @property
    def mean_loss(self) -> float:
        return float(np.mean(self._losses)) if self._losses else float("nan")

    def due(self, step: int) -> bool:
        """A check at this step: at warmup + check_after, then every check_after steps, until the guard fires."""
        first = self.warmup + self.check_after
        return self.fired is None and step >= first and (step - first) % self.check_after == 0

    def in_band(self, loss: float) -> bool:
        h1 = self.unigram.entropy
        return h1 - self.margin <= loss <= h1 + self.ceiling

    def collapsed(self, p: Probe) -> bool:
        return p.top_share >= self.collapse_share and p.cosine >= self.collapse_cosine

    def check(self, step: int, p: Probe) -> Verdict:
        loss = self.mean_loss
        verdict = Verdict(step, self.in_band(loss) and self.collapsed(p), loss, self.unigram, p)
        if verdict.plateau:
            self.fired = verdict
        return verdict


def sqrt_rule_lr(batch_size: int, optimizer: str = "lamb") -> float:
    """The learning rate for ``batch_size`` by the square-root rule from a published anchor: LAMB's 0.00176 at
    4096 (ALBERT, Lan et al. 2020, §4.1; the rule: You et al. 2020, "Large Batch Optimization for Deep Learning"),
    AdamW's 1e-4 at 256 (BERT, Devlin et al. 2019, A.2)."""
    anchor_lr, anchor_batch = (0.00176, 4096) if optimizer == "lamb" else (1e-4, 256)
    return anchor_lr * math.sqrt(batch_size / anchor_batch)


def advice(lr: float, warmup: int, batch_size: int, optimizer: str, bias_correction: bool) -> str:
    """What to change, for the guard's line: only what was measured to help here. A lower rate: every plateaued run
    measured learned at a quarter of its rate (ALBERT-base on an H200: 0.00176 plateaued, 0.00044 did not; half,
    0.00088, plateaued at 6 and 12 layers; the CPU demo: 0.01 plateaued, 0.002-0.006 learned), and the sqrt rule's
    rate when that is lower still. Neither bias correction nor a longer warmup is advised: bias correction was
    measured not to cure the plateau (it only delays it), and a longer warmup has not been measured
    (docs/pretraining.md, "The plateau guard" and "The CPU gate"). ``warmup``, ``bias_correction``: the run's, named
    in the line."""
    rule = sqrt_rule_lr(batch_size, optimizer)
    rate = f"--lr {lr / 4:.3g} (a quarter of {lr:.3g}: the plateaued runs measured here all learned at a quarter"
    if rule < lr / 4:
        rate += f"; the sqrt rule for batch {batch_size} gives {rule:.3g}, --lr auto"
    return (f"Try {rate}), and check it with `litebert gate` before a long run (warmup {warmup}, bias correction "
            f"{'on' if bias_correction else 'off'}: neither was measured to cure a plateau).")


def check_after(warmup: int, max_steps: Optional[int], given: Optional[int] = None) -> int:
    """The steps after the warmup at which the guard first checks (and then its interval): ``given``, else 15% of
    the run's steps after the warmup, at least `FIRST_CHECK_MIN` (falling through the plateau takes 50-125 steps
    after a good warmup: the CPU demo left it by step 125) and at most `FIRST_CHECK_MAX` (a long run is told within
    minutes)."""
    if given is not None:
        return given
    if max_steps is None:
        return FIRST_CHECK_MAX
    return int(min(FIRST_CHECK_MAX, max(FIRST_CHECK_MIN, round(0.15 * (max_steps - warmup)))))
