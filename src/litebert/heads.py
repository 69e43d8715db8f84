"""Task heads on the ALBERT encoder, with the output names ALBERT users know from HF transformers.

Every class keeps the encoder as ``self.albert`` and its head modules under HF's names (``predictions``,
``sop_classifier``, ``classifier``, ``qa_outputs``), so checkpoints map onto HF's by the short key map in
`litebert.io.keymap`. Models return a dataclass of outputs and, when labels are given, the loss; optimizers and
training loops live elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from litebert import model as _model
from litebert.config import AlbertConfig
from litebert.model import ACT, AlbertModel, EncoderOutput, init_weights, maybe_dropout
from litebert.outputs import ModelOutputAccess
from litebert.padding import Packing
from litebert.pretrained import PretrainedMixin


# ---------------------------------------------------------------------------------------------------- outputs
@dataclass
class PreTrainingOutput(ModelOutputAccess):
    loss: Optional[torch.Tensor] = None  # mlm_loss + sop_loss (whichever are given)
    prediction_logits: Optional[torch.Tensor] = None  # [B, P, V] at mlm_positions, else [B, L, V]
    sop_logits: Optional[torch.Tensor] = None  # [B, 2]
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    # litebert's own, after HF's fields, so that out[i] is HF's AlbertForPreTrainingOutput's (`litebert.outputs`)
    mlm_loss: Optional[torch.Tensor] = None
    sop_loss: Optional[torch.Tensor] = None


@dataclass
class TaskOutput(ModelOutputAccess):
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class QuestionAnsweringOutput(ModelOutputAccess):
    loss: Optional[torch.Tensor] = None
    start_logits: Optional[torch.Tensor] = None  # [B, L]
    end_logits: Optional[torch.Tensor] = None  # [B, L]
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


# ---------------------------------------------------------------------------------------------------- heads
class MLMHead(nn.Module):
    """H -> E dense, activation, LayerNorm, then the decoder E -> V tied to the word embeddings with its own bias
    (official `get_masked_lm_output`)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.act = ACT[config.hidden_act]()
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        # [..., H] -> [..., E] -> [..., V]
        return F.linear(self.LayerNorm(self.act(self.dense(h))), word_embeddings, self.bias)


class SOPHead(nn.Module):
    """Sentence-order (or next-sentence) prediction on the pooled output: H -> 2.

    No dropout, as the official `get_sentence_order_output` (HF applies classifier_dropout_prob here; in eval mode,
    or with that probability at 0, the two agree)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(pooled)


def masked_lm(head: MLMHead, encoder: _model.AlbertModel, hidden: torch.Tensor,
              labels: Optional[torch.Tensor], mlm_positions: Optional[torch.Tensor], mlm_ids: Optional[torch.Tensor],
              mlm_weights: Optional[torch.Tensor]) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """MLM logits and loss, either HF-style (``labels`` [B, L], -100 ignored; logits at every position) or
    official-style (``mlm_positions``/``mlm_ids``/``mlm_weights`` [B, P]; the head runs only on the P positions,
    which is ~P/L of the cost: 20/512 in the paper's setting). In the official style ``hidden`` is already the
    encoder's output at those positions ([B, P, H], see ``AlbertModel.forward(output_positions=...)``)."""
    embeddings = encoder.embeddings.word_embeddings.weight
    if mlm_positions is None:
        logits = head(hidden, embeddings)  # [B, L, V]
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        return logits, loss
    logits = head(hidden, embeddings)  # [B, P, V]
    loss = None
    if mlm_ids is not None:
        nll = F.cross_entropy(logits.flatten(0, 1), mlm_ids.flatten().long(), reduction="none")  # [B*P]
        weights = torch.ones_like(nll) if mlm_weights is None else mlm_weights.flatten().to(nll.dtype)
        # Official `get_masked_lm_output`: sum(w * nll) / (sum(w) + 1e-5); padded predictions have w = 0.
        loss = (weights * nll).sum() / (weights.sum() + 1e-5)
    return logits, loss


class AlbertForPreTraining(PretrainedMixin, nn.Module):
    """Encoder + MLM head + SOP head; loss = MLM + SOP (paper Section 4.1; official `run_pretraining.py`)."""

    HF_ARCHITECTURE = "AlbertForPreTraining"

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = _model.AlbertModel(config)
        self.predictions = MLMHead(config)
        self.sop_classifier = SOPHead(config)
        for module in (self.predictions, self.sop_classifier):
            module.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
                labels=None, mlm_positions=None, mlm_ids=None, mlm_weights=None, sentence_order_label=None,
                output_hidden_states: bool = False, packing: Optional[Packing] = None) -> PreTrainingOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_positions=mlm_positions, packing=packing)
        logits, mlm_loss = masked_lm(self.predictions, self.albert, out.last_hidden_state, labels, mlm_positions,
                                     mlm_ids, mlm_weights)
        sop_logits = self.sop_classifier(out.pooler_output)
        sop_loss = None
        if sentence_order_label is not None:
            sop_loss = F.cross_entropy(sop_logits, sentence_order_label.view(-1).long())
        losses = [x for x in (mlm_loss, sop_loss) if x is not None]
        loss = sum(losses[1:], losses[0]) if losses else None
        return PreTrainingOutput(loss, logits, sop_logits, out.hidden_states, mlm_loss, sop_loss)


class AlbertForMaskedLM(PretrainedMixin, nn.Module):
    HF_ARCHITECTURE = "AlbertForMaskedLM"

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = _model.AlbertModel(config, add_pooling_layer=False)
        self.predictions = MLMHead(config)
        self.predictions.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
                labels=None, mlm_positions=None, mlm_ids=None, mlm_weights=None,
                output_hidden_states: bool = False, packing: Optional[Packing] = None) -> TaskOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_positions=mlm_positions, packing=packing)
        logits, loss = masked_lm(self.predictions, self.albert, out.last_hidden_state, labels, mlm_positions, mlm_ids,
                                 mlm_weights)
        return TaskOutput(loss, logits, out.hidden_states)


class _Classifier(PretrainedMixin, nn.Module):
    """Encoder + dropout + linear; subclasses choose pooled vs per-token input and the loss."""

    pooled = True

    def __init__(self, config: AlbertConfig, out_features: int):
        super().__init__()
        self.config = config
        self.albert = _model.AlbertModel(config, add_pooling_layer=self.pooled)
        self.dropout = maybe_dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, out_features)
        init_weights(self.classifier, config.initializer_range)

    def encode(self, input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states, packing=None):
        # A pooled head reads [CLS] alone: no output positions, so the last layer runs only at [CLS] (keys and values
        # still at every token): the same logits and gradients, most of one layer's work saved.
        positions = input_ids.new_zeros(input_ids.shape[0], 0) if self.pooled else None
        out: EncoderOutput = self.albert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                                         output_positions=positions, packing=packing)
        features = out.pooler_output if self.pooled else out.last_hidden_state
        return self.classifier(self.dropout(features)), out.hidden_states


class AlbertForSequenceClassification(_Classifier):
    """Pooled output -> num_labels. ``num_labels == 1`` is regression (MSE, e.g. STS-B); integer labels are
    single-label classification (cross-entropy); float labels with num_labels > 1 are multi-label (BCE) — as HF."""

    HF_ARCHITECTURE = "AlbertForSequenceClassification"

    def __init__(self, config: AlbertConfig):
        super().__init__(config, config.num_labels)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, packing: Optional[Packing] = None) -> TaskOutput:
        logits, hidden_states = self.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                            output_hidden_states, packing)
        loss = None
        if labels is not None:
            problem = self.config.problem_type or (
                "regression" if self.config.num_labels == 1 else
                "single_label_classification" if not labels.is_floating_point() else "multi_label_classification")
            if problem == "regression":
                loss = F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))
            elif problem == "single_label_classification":
                loss = F.cross_entropy(logits, labels.view(-1).long())
            else:
                loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return TaskOutput(loss, logits, hidden_states)


class AlbertForTokenClassification(_Classifier):
    """Per-token output -> num_labels (NER, CoNLL-2003). Labels [B, L] with -100 ignored."""

    HF_ARCHITECTURE = "AlbertForTokenClassification"
    pooled = False

    def __init__(self, config: AlbertConfig):
        super().__init__(config, config.num_labels)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, packing: Optional[Packing] = None) -> TaskOutput:
        logits, hidden_states = self.encode(input_ids, attention_mask, token_type_ids, position_ids,
                                            output_hidden_states, packing)  # [B, L, C]
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten().long(), ignore_index=-100)
        return TaskOutput(loss, logits, hidden_states)


class AlbertForMultipleChoice(_Classifier):
    """Each (context, choice) pair is encoded separately; its pooled output gets one score (RACE)."""

    HF_ARCHITECTURE = "AlbertForMultipleChoice"

    def __init__(self, config: AlbertConfig):
        super().__init__(config, 1)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, packing: Optional[Packing] = None) -> TaskOutput:
        """``packing``: of the flattened [B*K, L] mask (`Packing.from_mask` flattens leading dimensions)."""
        b, k = input_ids.shape[:2]
        flat = [None if t is None else t.reshape(b * k, -1) for t in (input_ids, attention_mask, token_type_ids,
                                                                      position_ids)]  # [B, K, L] -> [B*K, L]
        scores, hidden_states = self.encode(*flat, output_hidden_states, packing)  # [B*K, 1]
        logits = scores.view(b, k)
        loss = F.cross_entropy(logits, labels.view(-1).long()) if labels is not None else None
        return TaskOutput(loss, logits, hidden_states)


class AlbertForQuestionAnswering(PretrainedMixin, nn.Module):
    """Extractive QA (SQuAD): a linear start/end scorer on every token."""

    HF_ARCHITECTURE = "AlbertForQuestionAnswering"
    LOSS_READS_PADDING = True  # start/end softmax over all L positions, padding included (as HF)

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = _model.AlbertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        init_weights(self.qa_outputs, config.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
                start_positions=None, end_positions=None, output_hidden_states: bool = False,
                packing: Optional[Packing] = None) -> QuestionAnsweringOutput:
        out = self.albert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          packing=packing)
        start, end = self.qa_outputs(out.last_hidden_state).unbind(-1)  # [B, L] each
        loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the window (answer not in this window) are ignored, as HF does.
            ignored = start.shape[1]
            s = start_positions.view(-1).clamp(0, ignored)
            e = end_positions.view(-1).clamp(0, ignored)
            loss = (F.cross_entropy(start, s, ignore_index=ignored) + F.cross_entropy(end, e, ignore_index=ignored)) / 2
        return QuestionAnsweringOutput(loss, start, end, out.hidden_states)


# The one vocabulary of head names, for every command that picks a head (`convert --head`, `export --head`) and for
# the task kinds of `finetune` (each fine-tunes one of these): name -> class.
HEAD_NAMES = {
    "encoder": AlbertModel,
    "pretraining": AlbertForPreTraining,
    "masked-lm": AlbertForMaskedLM,
    "sequence-classification": AlbertForSequenceClassification,
    "token-classification": AlbertForTokenClassification,
    "multiple-choice": AlbertForMultipleChoice,
    "question-answering": AlbertForQuestionAnswering,
}
# HF architecture name (config.json "architectures") -> class.
HEADS = {cls.HF_ARCHITECTURE: cls for cls in HEAD_NAMES.values()}


def head_name(cls: type) -> str:
    """The vocabulary's name of a head class (a model built on a head, such as SQuAD v2's, names it as
    ``BASE_HEAD``)."""
    cls = getattr(cls, "BASE_HEAD", cls)
    return next(name for name, c in HEAD_NAMES.items() if c is cls)
