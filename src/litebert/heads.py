"""Task heads on the ALBERT encoder, with the output names ALBERT users know from HF transformers.

Every class keeps the encoder as ``self.albert`` and its head modules under HF's names (``predictions``,
``sop_classifier``, ``classifier``, ``qa_outputs``), so checkpoints map onto HF's by the short key map in
`litebert.io.keymap`. Models return a dataclass of outputs and, when labels are given, the loss; optimizers and
training loops live elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from litebert import model as _model
from litebert.config import AlbertConfig
from litebert.model import ACT, EncoderOutput, init_weights, maybe_dropout
from litebert.padding import Packing


class PretrainedMixin:
    """save_pretrained / from_pretrained in the HF folder layout (config.json + model.safetensors)."""

    config: AlbertConfig
    HF_ARCHITECTURE = ""  # the HF class name written to config.json "architectures"
    # Whether the loss can read the encoder's outputs at padded positions. When it cannot (the default: MLM and
    # token losses ignore them through -100 labels, pooled heads read [CLS] only), the training loops run the dense
    # layers on the real tokens only (`training_skips_padding`): the same loss and gradients, less work.
    LOSS_READS_PADDING = False

    def save_pretrained(self, path) -> None:
        from litebert.io.checkpoint import save_pretrained

        save_pretrained(self, path)

    @classmethod
    def from_pretrained(cls, path, *, strict: bool = False, **config_overrides):
        """Load from a litebert or HF folder. The encoder loads into any head; head weights the folder lacks are
        newly initialised and reported (``strict=True`` makes any missing or unexpected key an error).
        ``config_overrides`` replace config fields first (e.g. ``num_labels=3``, ``hidden_dropout_prob=0.1``)."""
        from litebert.io.checkpoint import from_pretrained

        return from_pretrained(cls, path, strict=strict, **config_overrides)

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        encoder = self if isinstance(self, _model.AlbertModel) else self.albert
        encoder.encoder.gradient_checkpointing = enabled

    def num_parameters(self) -> int:
        """Unique parameters (the tied MLM decoder and shared blocks counted once)."""
        return sum(p.numel() for p in self.parameters())


class AlbertModel(PretrainedMixin, _model.AlbertModel):
    """The bare encoder (`litebert.model.AlbertModel`) with save/load. HF class: AlbertModel."""

    HF_ARCHITECTURE = "AlbertModel"
    LOSS_READS_PADDING = True  # no loss of its own: a caller's loss may read any position


@contextmanager
def training_skips_padding(model: nn.Module, enabled: bool = True) -> Iterator[bool]:
    """While inside, ``model`` (a head, possibly wrapped in DDP) skips padding when its loss cannot read padded
    positions (``LOSS_READS_PADDING`` False) and ``enabled``; the previous setting is restored on exit. Yields whether
    it skips.

    Skipping changes only the outputs at padded positions (zeros instead of values nothing uses), so the loss and
    gradients are those of the padded computation; real pretraining batches are ~5-10% padding (short documents,
    ``short_seq_prob``), fine-tuning batches often far more. HF computes the padding. Under ``torch.compile`` the
    model computes it too (the packed shapes would recompile at every batch)."""
    inner = getattr(model, "module", model)  # DistributedDataParallel keeps the model as .module
    encoder = getattr(inner, "albert", None)
    if not enabled or not isinstance(encoder, _model.AlbertModel) or getattr(inner, "LOSS_READS_PADDING", True):
        yield False
        return
    before = encoder.skip_padding
    encoder.set_skip_padding(True)
    try:
        yield True
    finally:
        encoder.set_skip_padding(before)


def encoder_of(model: nn.Module) -> Optional[_model.AlbertModel]:
    """The `AlbertModel` inside a head (possibly wrapped in DDP), or None."""
    inner = getattr(model, "module", model)  # DistributedDataParallel keeps the model as .module
    if isinstance(inner, _model.AlbertModel):
        return inner
    for module in inner.modules():
        if isinstance(module, _model.AlbertModel):
            return module
    return None


@contextmanager
def inference_skips_padding(model: nn.Module) -> Iterator[None]:
    """While inside, ``model``'s encoder skips padding whatever its head: for inference whose reader drops the
    outputs at padded positions (`litebert.finetune.trainer.predict_outputs` trims every output to its input)."""
    encoder = encoder_of(model)
    if encoder is None:
        yield
        return
    before = encoder.skip_padding
    encoder.set_skip_padding(True)
    try:
        yield
    finally:
        encoder.set_skip_padding(before)


@contextmanager
def trusted_inputs(model: nn.Module, device: torch.device) -> Iterator[None]:
    """While inside, ``model``'s encoder skips its input value checks on a GPU (they read every batch back to the
    host); for loops whose inputs come from litebert's tokenizer or a verified store."""
    encoder = encoder_of(model)
    if encoder is None or device.type == "cpu":
        yield
        return
    before = encoder.validate_inputs
    encoder.set_validate_inputs(False)
    try:
        yield
    finally:
        encoder.set_validate_inputs(before)


# ---------------------------------------------------------------------------------------------------- outputs
@dataclass
class PreTrainingOutput:
    loss: Optional[torch.Tensor] = None  # mlm_loss + sop_loss (whichever are given)
    mlm_loss: Optional[torch.Tensor] = None
    sop_loss: Optional[torch.Tensor] = None
    prediction_logits: Optional[torch.Tensor] = None  # [B, P, V] at mlm_positions, else [B, L, V]
    sop_logits: Optional[torch.Tensor] = None  # [B, 2]
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class TaskOutput:
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class QuestionAnsweringOutput:
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
        return PreTrainingOutput(loss, mlm_loss, sop_loss, logits, sop_logits, out.hidden_states)


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
    """The vocabulary's name of a head class (SQuAD v2's model is a question-answering head plus its classifier)."""
    cls = getattr(cls, "BASE_HEAD", cls)
    return next(name for name, c in HEAD_NAMES.items() if c is cls)


# ------------------------------------------------------------------------------------ SQuAD v2.0 answerability
# The official ALBERT v2.0 head (an XLNet-style answer classifier fed start-weighted features and beam-searched spans)
# is replaced by a simpler one, documented in docs/finetune.md: a two-layer classifier on the [CLS] vector, trained
# with binary cross-entropy on "this window holds no answer", beside the usual start/end head. Turning its logits into
# a question's "no answer" (minimum over windows, threshold from dev) is decoding: `litebert.finetune.squad`.
ANSWERABILITY_FILE = "answerability.safetensors"


@dataclass
class SquadV2Output:
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

    BASE_HEAD = AlbertForQuestionAnswering  # its name in `HEAD_NAMES`

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

    def save_pretrained(self, path) -> None:
        from pathlib import Path

        from safetensors.torch import save_file

        from litebert.files import atomic_write

        self.qa.save_pretrained(path)
        state = {k: v.detach().contiguous() for k, v in self.answerability.state_dict().items()}
        atomic_write(Path(path) / ANSWERABILITY_FILE, lambda tmp: save_file(state, str(tmp)))

    @classmethod
    def from_pretrained(cls, path, **overrides) -> "SquadV2Model":
        """The QA model in ``path`` (a fine-tuned folder, or a pretrained encoder: the heads then start fresh)."""
        from pathlib import Path

        from safetensors.torch import load_file

        from litebert.errors import CheckpointError

        model = cls(AlbertForQuestionAnswering.from_pretrained(path, **overrides))
        file = Path(path) / ANSWERABILITY_FILE
        if file.is_file():  # else: a fresh head (fine-tuning starts from a pretrained encoder)
            try:
                model.answerability.load_state_dict(load_file(str(file)))
            except Exception as e:  # safetensors' header errors, or torch's missing/unexpected key/shape report
                raise CheckpointError(f"{file}: not the answerability head of this model ({e}); it may be truncated "
                                      "or from another model -- fine-tune again") from None
        return model
