"""SQuAD v1.1 / v2.0: the official sliding windows and answer positions, and the v2.0 answerability head.

Windows follow the official (BERT/ALBERT) recipe: ``[CLS] question [SEP] context-window [SEP]`` with the question cut
to ``max_query_length`` pieces and windows over the context starting every ``doc_stride`` pieces. A piece seen by
several windows is scored only in the window where it has the most context on both sides (official
``_check_is_max_context``). Every context piece carries its character span in the *original* context (the
tokenizer's offsets), so a predicted span maps straight back to the user's text. Answers are read back from the
logits in `litebert.tasks.qa_decode`.

v2.0 "no answer": the model (`SquadV2Model`, at the end of this file) adds a no-answer logit per window. A question's
no-answer
score is the minimum over its windows (`no_answer_probs`); it answers "" when the no-answer probability exceeds a
threshold picked on the dev set (official ``find_best_thresh``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from litebert.errors import CheckpointError, ConfigError, literal
from litebert.files import atomic_write
from litebert.heads import AlbertForQuestionAnswering
from litebert.outputs import ModelOutputAccess
from litebert.padding import Packing
from litebert.tasks.readers import SquadExample


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
            raise ConfigError("{seq_len} leaves no room for context after the " + f"{len(q_ids)}-piece question of "
                              f"{literal(repr(ex.qas_id))} ([CLS] question [SEP] context [SEP]); raise "
                              + "{seq_len:flag} "
                              f"above {len(q_ids) + 3}", seq_len=max_seq_length)
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


def no_answer_probs(n_examples: int, features: list[dict], na_logits: list[float]) -> list[float]:
    """Each question's no-answer probability: sigmoid of the lowest no-answer logit over its windows (an answer
    needs only one window); 1.0 for a question without windows."""
    lowest: list[float | None] = [None] * n_examples
    for f, logit in zip(features, na_logits):
        i = f["example_index"]
        lowest[i] = logit if lowest[i] is None else min(lowest[i], logit)
    return [float(torch.sigmoid(torch.tensor(x))) if x is not None else 1.0 for x in lowest]


# ----------------------------------------------------------------------------------- the SQuAD v2.0 model
# The official ALBERT v2.0 head (an XLNet-style answer classifier fed start-weighted features and beam-searched spans)
# is replaced by a simpler one, documented in docs/finetune.md: a two-layer classifier on the [CLS] vector, trained
# with binary cross-entropy on "this window holds no answer", beside the usual start/end head. Turning its logits into
# a question's "no answer" (minimum over windows, threshold from dev) is `no_answer_probs` above.
ANSWERABILITY_FILE = "answerability.safetensors"


@dataclass
class SquadV2Output(ModelOutputAccess):
    loss: Optional[torch.Tensor] = None  # span loss + answerability BCE
    start_logits: Optional[torch.Tensor] = None  # [B, L]
    end_logits: Optional[torch.Tensor] = None  # [B, L]
    na_logits: Optional[torch.Tensor] = None  # [B]: "this window holds no answer"


class AnswerabilityHead(nn.Module):
    """[B, H] ([CLS] vector) -> [B] no-answer logit: dense + tanh + dropout + linear."""

    def __init__(self, hidden_size: int, dropout: float = 0.1, initializer_range: float = 0.02):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size, 1)
        for m in (self.dense, self.out):
            nn.init.normal_(m.weight, std=initializer_range)
            nn.init.zeros_(m.bias)

    def forward(self, cls_hidden: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(torch.tanh(self.dense(cls_hidden)))).squeeze(-1)


class SquadV2Model(nn.Module):
    """An `AlbertForQuestionAnswering` (HF-compatible weights) plus the answerability head.

    Saved as the QA model's HF folder plus ``answerability.safetensors``, so the span head still loads in HF.
    """

    BASE_HEAD = AlbertForQuestionAnswering  # its name in `litebert.heads.HEAD_NAMES`
    LOSS_READS_PADDING = True  # the span head's softmax covers every position, as its base head's

    def __init__(self, qa: AlbertForQuestionAnswering):
        super().__init__()
        self.qa = qa
        self.config = qa.config
        self.answerability = AnswerabilityHead(qa.config.hidden_size, qa.config.classifier_dropout_prob or 0.0,
                                               qa.config.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, *, start_positions=None,
                end_positions=None, is_impossible=None, packing: Optional[Packing] = None) -> SquadV2Output:
        h = self.qa.albert(input_ids, attention_mask, token_type_ids, packing=packing).last_hidden_state  # [B, L, H]
        start, end = self.qa.qa_outputs(h).unbind(-1)  # [B, L] each
        na = self.answerability(h[:, 0])  # [B]
        loss = None
        if start_positions is not None:
            span = (F.cross_entropy(start, start_positions) + F.cross_entropy(end, end_positions)) / 2
            loss = span + F.binary_cross_entropy_with_logits(na, is_impossible.to(na.dtype))
        return SquadV2Output(loss, start, end, na)

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        self.qa.set_gradient_checkpointing(enabled)

    def save_pretrained(self, path) -> None:
        from safetensors.torch import save_file

        self.qa.save_pretrained(path)
        state = {k: v.detach().contiguous() for k, v in self.answerability.state_dict().items()}
        atomic_write(Path(path) / ANSWERABILITY_FILE, lambda tmp: save_file(state, str(tmp)))

    @classmethod
    def from_pretrained(cls, path, **overrides) -> "SquadV2Model":
        """The QA model in ``path`` (a fine-tuned folder, or a pretrained encoder: the heads then start fresh)."""
        from safetensors.torch import load_file

        model = cls(AlbertForQuestionAnswering.from_pretrained(path, **overrides))
        file = Path(path) / ANSWERABILITY_FILE
        if file.is_file():  # else: a fresh head (fine-tuning starts from a pretrained encoder)
            try:
                model.answerability.load_state_dict(load_file(str(file)))
            except Exception as e:  # safetensors' header errors, or torch's missing/unexpected key/shape report
                raise CheckpointError(f"{file}: not the answerability head of this model ({e}); it may be truncated "
                                      "or from another model -- fine-tune again") from None
        return model
