"""`pipeline(task, model=...)`: text in, HF's pipeline answers out, for any litebert or HF ALBERT folder.

    fill = pipeline("fill-mask", model="runs/tiny/model")
    fill("The [MASK] sat on the mat.")          # [{score, token, token_str, sequence}, ...] (top 5)

Tasks and what each returns, key for key as ``transformers.pipeline`` (4.57) on the same folder:

* ``fill-mask``: per text a list of {score, token, token_str, sequence} (a list of such lists, one per mask, when
  the text has several masks; their ``sequence`` then keeps the special tokens, as HF's)
* ``text-classification`` (``sentiment-analysis``): per text {label, score}; with ``top_k`` (None: all labels) a
  list sorted by score. A single string gives a list of one, as HF's.
* ``token-classification`` (``ner``): per text a list of {entity, score, index, word, start, end}, one per piece
  whose label is not "O" (HF's default ``aggregation_strategy="none"``); with "simple", "first", "average" or "max",
  {entity_group, score, word, start, end} per entity (`litebert.tasks.token_groups`)
* ``question-answering``: {score, start, end, answer} (a list with ``top_k`` > 1), decoded as HF's pipeline decodes
  (`litebert.tasks.qa_decode`, ``decoding="hf"``, the default); ``decoding="official"`` reads them as run_squad
  (and `litebert predict`/`evaluate`, which score SQuAD as the paper did) does
* ``feature-extraction``: per text the last hidden states, nested lists [1, L, H]
* ``zero-shot-classification``: per text {sequence, labels, scores}, the ``candidate_labels`` ranked by an NLI
  model's entailment (`litebert.tasks.zero_shot`)

Inputs: a string or a list of strings (question answering: ``question=``/``context=``, or dicts holding them). A
list is run in batches of similar length (``batch_size`` texts, and with ``batch_tokens`` at most that many padded
tokens), the padding skipped; answers come back in the input's order. Labels are the folder's (config.json
``id2label``, else finetune.json's ``labels``). Texts longer than the model's positions are cut (HF would fail).

`litebert.inference.fill_mask.fill_mask` is the ``litebert fill-mask`` command, through the same code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import numpy as np
import torch

from litebert import folders, hub
from litebert.arguments import checked
from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.errors import ArgumentError, CheckpointError, ConfigError, DataError, literal

TASKS = ("fill-mask", "text-classification", "token-classification", "question-answering", "feature-extraction",
         "zero-shot-classification")
ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}


@checked(batch_size=AT_LEAST_1, batch_tokens=AT_LEAST_1)
def pipeline(task: str, model: str | os.PathLike, tokenizer: str | os.PathLike | None = None,
             device: str | None = None, *, batch_size: int = 32, batch_tokens: Optional[int] = None,
             precision: str = "auto", attention: str = "auto", **defaults) -> "Pipeline":
    """The pipeline for ``task`` (one of `TASKS`, or an alias in `ALIASES`) on the model folder (or hub id)
    ``model``; ``tokenizer``: another tokenizer folder or file than the model's. ``device`` (cpu, cuda, ...; default:
    CUDA when available), ``precision`` and ``attention``: as for every command (`Runtime.for_inference`; on a GPU
    ``auto`` is bf16, whose scores differ from HF's fp32 pipeline by its rounding: ``precision="fp32"`` matches
    them). ``defaults``: call options given once (``top_k=3``), as HF's ``pipeline(..., top_k=3)``, checked here as
    a call's are."""
    from litebert.engine.runtime import Runtime

    name = ALIASES.get(task, task)
    if name not in _PIPELINES:
        import difflib

        close = difflib.get_close_matches(str(task), list(TASKS) + list(ALIASES), n=1)
        raise ConfigError("{task}: not a pipeline task; choose one of " + ", ".join(TASKS + tuple(ALIASES))
                          + (f" (did you mean {close[0]!r}?)" if close else ""), task=task)
    cls = _PIPELINES[name]
    cls.answer.check(None, [], **defaults)
    model, tokenizer = hub.local(model, "model"), hub.local(tokenizer, "tokenizer")
    if not Path(model).is_dir():
        raise CheckpointError("{model}: no such model folder", model=model)
    from litebert.inference.finetuned import load_tokenizer

    net = cls.load(Path(model))
    runtime = Runtime.for_inference(net.config, device, precision, attention)
    runtime.place(net)
    return cls(name, net, load_tokenizer(model, tokenizer), Path(model), runtime, batch_size, batch_tokens, defaults)


def _load_head(cls, folder: Path, prefix: str, what: str, accepted: tuple[str, ...] = ()):
    """``cls`` from ``folder``, whose weights must hold the head (keys starting ``prefix``): a head left randomly
    initialised would answer noise. The head config.json names must be ``cls``'s or one in ``accepted``
    (`litebert.pairing.check_head`): a sequence and a token classifier both hold ``classifier.*`` tensors."""
    from litebert.io.hf_folder import load_weights
    from litebert.pairing import check_head

    if not any(k.startswith(prefix) or k.startswith("albert." + prefix) for k in load_weights(folder)):
        raise CheckpointError("{model}: " + f"no {what} in its weights (no {prefix}* tensors); give a folder that has "
                              f"one", model=folder)
    check_head(folder, (cls.HF_ARCHITECTURE,) + accepted, f"a {what}")
    return cls.from_pretrained(folder)


def _kind(inputs) -> str:
    """What a wrong input is, in a message: its type, or a list's item of another type."""
    if isinstance(inputs, (list, tuple)):
        bad = next(t for t in inputs if not isinstance(t, str))
        return f"a {type(inputs).__name__} holding a {type(bad).__name__}"
    return type(inputs).__name__


class Pipeline:
    """A loaded model and tokenizer that answer texts as HF's pipeline of the same task does (see the module
    docstring). Call it with a string or a list of strings and the task's options."""

    def __init__(self, task, model, tokenizer, folder: Path, runtime, batch_size: int, batch_tokens, defaults: dict):
        self.task, self.model, self.tokenizer, self.folder = task, model, tokenizer, folder
        self.runtime, self.batch_size, self.batch_tokens, self.defaults = runtime, batch_size, batch_tokens, defaults
        self.max_length = model.config.max_position_embeddings

    @property
    def device(self):
        return self.runtime.device

    def __call__(self, inputs: str | Sequence[str], **options):
        """The answer to a string, or a list of answers, one per string of a list (an empty list: an empty list, as
        HF's). ``options``: those of the task's `answer` (``top_k``...), checked by their annotations."""
        options = {**self.defaults, **options}
        if isinstance(inputs, str):
            return self.answer([inputs], **options)[0]
        if not isinstance(inputs, (list, tuple)) or not all(isinstance(t, str) for t in inputs):
            raise ArgumentError("{inputs:flag}: " + f"{self.task} takes a string or a list of strings, got "
                                f"{literal(_kind(inputs))}", inputs=inputs)
        if not inputs:
            self.answer.check(self, [], **options)
            return []
        return self.answer(list(inputs), **options)

    def answer(self, texts: list[str]) -> list:
        """One answer per text: the task's own, its options as keyword arguments (decorated with `checked`)."""
        raise NotImplementedError

    def encode(self, texts: list[str]) -> list[dict]:
        """[CLS] text [SEP] of each text, cut to the model's positions (special tokens written in it are theirs)."""
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, return_offsets=True)
        return [{"input_ids": i, "token_type_ids": t, "offsets": o}
                for i, t, o in zip(enc["input_ids"], enc["token_type_ids"], enc["offsets"])]

    def run(self, features: list[dict], collate=None) -> list[Any]:
        """The model's output for each feature (`litebert.inference.loop.run_batches`: batches of similar length, the
        padding skipped, order restored); each is what `take` makes of that feature's row of the batch-major tensors
        `outputs` returns. ``collate``: the host batch of a list of features (default: their padded inputs)."""
        from litebert.inference.loop import run_batches
        from litebert.tasks.features import check_ids

        check_ids(features, self.model.config.vocab_size)
        rows = run_batches(self.model, features, self.outputs, runtime=self.runtime, batch_size=self.batch_size,
                           batch_tokens=self.batch_tokens, pad_id=self.tokenizer.pad_token_id, collate=collate)
        return [self.take(r, len(f["input_ids"])) for f, r in zip(features, rows)]

    def outputs(self, out, batch: dict) -> dict:
        """The batch-major float32 tensors of a batch's model output that `take` reads."""
        raise NotImplementedError

    def take(self, row: dict, length: int):
        """One feature's answer material from its ``row`` of `outputs` (numpy arrays), ``length`` its pieces."""
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------------- fill-mask
class FillMask(Pipeline):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForMaskedLM

        return _load_head(AlbertForMaskedLM, folder, "predictions.", "masked-language-model head",
                          ("AlbertForPreTraining",))

    def __call__(self, inputs, **options):
        answers = super().__call__(inputs, **options)
        return answers[0] if not isinstance(inputs, str) and len(answers) == 1 else answers  # as HF's

    @checked(top_k=AT_LEAST_1)
    def answer(self, texts: list[str], top_k: int = 5, where: Optional[list[str]] = None) -> list:
        """``top_k`` pieces per mask (more than the vocabulary: all of it). ``where``: where each text comes from
        (file:line), for errors."""
        feats = self.encode(texts)
        mask_id = self.tokenizer.mask_token_id
        for n, (f, text) in enumerate(zip(feats, texts)):
            f["masks"] = [k for k, i in enumerate(f["input_ids"]) if i == mask_id]
            if not f["masks"]:
                at = f"{literal(where[n])}: " if where else ""
                raise DataError(f"{at}no [MASK] in the text {literal(repr(text[:80]))}; write [MASK] (in capitals) "
                                f"where a piece is to be filled in")

        def collate(fs: list[dict]) -> dict:
            """The padded inputs, and where the MLM head runs, the masks only: ``mlm_positions`` [B, P], padded with
            0 ([CLS], read and dropped)."""
            from litebert.inference.loop import pad_inputs

            width = max(len(f["masks"]) for f in fs)
            positions = torch.tensor([f["masks"] + [0] * (width - len(f["masks"])) for f in fs])
            return {**pad_inputs(fs, self.tokenizer.pad_token_id), "mlm_positions": positions}

        probs = self.run(feats, collate)
        return [self._rows(f, p, min(top_k, p.shape[-1])) for f, p in zip(feats, probs)]

    def outputs(self, out, batch):
        return {"probs": out.logits.float().softmax(-1)}  # [B, P, V]

    def take(self, row, length):
        return torch.from_numpy(row["probs"])  # [P, V]

    def _rows(self, f: dict, probs: torch.Tensor, top_k: int) -> list:
        single = len(f["masks"]) == 1
        values, ids = probs[:len(f["masks"])].topk(top_k)  # [masks, k]
        decode = self.tokenizer.decode
        result = []
        for position, vs, ps in zip(f["masks"], values.tolist(), ids.tolist()):
            row = []
            for v, p in zip(vs, ps):
                tokens = list(f["input_ids"])
                tokens[position] = p
                tokens = [t for t in tokens if t != self.tokenizer.pad_token_id]  # as HF's: the pad id goes too
                row.append({"score": v, "token": p, "token_str": decode([p]),
                            "sequence": decode(tokens, skip_special_tokens=single)})
            result.append(row)
        return result[0] if single else result


# ---------------------------------------------------------------------------------------------------- classification
def _labels(model, folder: Path) -> list[str]:
    """Class names: config.json's id2label, else finetune.json's labels, else HF's LABEL_i."""
    from litebert.files import read_json

    config = model.config
    if config.id2label:
        return [config.id2label[i] for i in range(len(config.id2label))]
    meta = folder / folders.FINETUNE_META
    labels = read_json(meta, CheckpointError).get("labels") if meta.is_file() else None
    n = model.classifier.out_features
    return labels if isinstance(labels, list) and len(labels) == n else [f"LABEL_{i}" for i in range(n)]


class _Labelled(Pipeline):
    """A pipeline whose answers name the folder's labels (`_labels`, read once)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.labels = _labels(self.model, self.folder)


class TextClassification(_Labelled):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForSequenceClassification

        return _load_head(AlbertForSequenceClassification, folder, "classifier.", "sequence-classification head")

    @checked(top_k=AT_LEAST_1)
    def answer(self, texts: list[str], top_k: int | None | Literal[""] = "") -> list:
        """``top_k``: the best so many labels, best first (more than there are: all of them, as HF's); None: all;
        not given (HF's legacy ""): the best label alone, not in a list."""
        from litebert.tasks.scores import softmax

        labels, config = self.labels, self.model.config
        logits = self.run(self.encode(texts))
        out = []
        for z in logits:  # HF's function_to_apply default: none (regression), sigmoid (1 label), else softmax
            if config.problem_type == "regression":
                scores = z
            elif config.problem_type == "multi_label_classification" or len(z) == 1:
                scores = 1 / (1 + np.exp(-z))
            else:
                scores = softmax(z)
            if top_k == "":  # HF's legacy answer: the best label alone
                out.append({"label": labels[int(scores.argmax())], "score": scores.max().item()})
                continue
            ranked = sorted(({"label": labels[i], "score": s.item()} for i, s in enumerate(scores)),
                            key=lambda d: d["score"], reverse=True)
            out.append(ranked[:top_k] if top_k is not None else ranked)
        return out

    def __call__(self, inputs, **options):
        answers = super().__call__(inputs, **options)
        legacy = "top_k" not in {**self.defaults, **options}
        return [answers] if isinstance(inputs, str) and legacy else answers

    def outputs(self, out, batch):
        return {"logits": out.logits.float()}  # [B, C]

    def take(self, row, length):
        return row["logits"]


class ZeroShotClassification(_Labelled):
    """An NLI model's entailment scores for labels given at the call (`litebert.tasks.zero_shot`)."""

    load = staticmethod(TextClassification.load)

    def __init__(self, *args, **kwargs):
        from litebert.tasks.zero_shot import nli_classes

        super().__init__(*args, **kwargs)
        self.classes = nli_classes(self.labels, self.folder)

    def __call__(self, inputs, *args, **options):
        if len(args) == 1 and "candidate_labels" not in options:  # HF's pipe(text, ["a", "b"])
            options["candidate_labels"] = args[0]
        elif args:
            raise ArgumentError("{inputs:flag}: " + f"zero-shot-classification takes the texts and the candidate "
                                f"labels, got {len(args) + 1} arguments", inputs=inputs)
        return super().__call__(inputs, **options)

    @checked
    def answer(self, texts: list[str], candidate_labels: str | Sequence[str] | None = None,
               hypothesis_template: str = "This example is {}.", multi_label: bool = False) -> list:
        """Per text ``{sequence, labels, scores}``, the ``candidate_labels`` (a list, or one string of
        comma-separated labels) best first."""
        from litebert.tasks.zero_shot import candidates, hypotheses, ranked

        labels = candidates(candidate_labels)
        claims = hypotheses(labels, hypothesis_template)
        premises = [t for t in texts for _ in labels]
        enc = self.tokenizer(premises, claims * len(texts), truncation="only_first", max_length=self.max_length)
        logits = np.stack(self.run([{"input_ids": i, "token_type_ids": t}
                                    for i, t in zip(enc["input_ids"], enc["token_type_ids"])]))  # [T x labels, C]
        logits = logits.reshape(len(texts), len(labels), -1)
        return [ranked(text, labels, z, self.classes, multi_label) for text, z in zip(texts, logits)]

    def outputs(self, out, batch):
        return {"logits": out.logits.float()}  # [B, C]

    def take(self, row, length):
        return row["logits"]


class TokenClassification(_Labelled):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForTokenClassification

        return _load_head(AlbertForTokenClassification, folder, "classifier.", "token-classification head")

    @checked
    def answer(self, texts: list[str], ignore_labels: Sequence[str] = ("O",),
               aggregation_strategy: Optional[Literal["none", "simple", "first", "average", "max"]] = "none") -> list:
        """``aggregation_strategy`` (None: "none"): one answer per piece, or entities grouped from pieces or words,
        as HF's (`litebert.tasks.token_groups`)."""
        from litebert.tasks import token_groups as G
        from litebert.tasks.scores import softmax

        feats = G.features(self.tokenizer, texts, self.max_length)
        return [G.entities(f["pieces"], softmax(logits, axis=-1), self.labels, aggregation_strategy or "none",
                           ignore_labels, f["join"]) for f, logits in zip(feats, self.run(feats))]

    def outputs(self, out, batch):
        return {"logits": out.logits.float()}  # [B, L, C]

    def take(self, row, length):
        return row["logits"][:length]


class FeatureExtraction(Pipeline):
    @staticmethod
    def load(folder: Path):
        from litebert.model import AlbertModel

        return AlbertModel.from_pretrained(folder)

    @checked
    def answer(self, texts: list[str]) -> list:
        return [[h.tolist()] for h in self.run(self.encode(texts))]

    def outputs(self, out, batch):
        return {"hidden": out.last_hidden_state.float()}  # [B, L, H]

    def take(self, row, length):
        return torch.from_numpy(row["hidden"][:length])


# ---------------------------------------------------------------------------------------------------- QA
def _fine_tuned_length(folder: Path, model) -> int:
    """The longest input the folder was fine-tuned with (finetune.json's preset), else the model's positions: the
    length `litebert predict` reads its windows with."""
    from litebert.files import read_json
    from litebert.tasks.presets import preset_from_json

    meta = folder / folders.FINETUNE_META
    saved = read_json(meta, CheckpointError) if meta.is_file() else {}
    if isinstance(saved.get("task"), str):
        return preset_from_json(saved["task"], saved.get("preset"), str(meta)).max_seq_length
    return model.config.max_position_embeddings


class QuestionAnswering(Pipeline):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForQuestionAnswering

        return _load_head(AlbertForQuestionAnswering, folder, "qa_outputs.", "question-answering head")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fine_tuned_length = _fine_tuned_length(self.folder, self.model)

    def __call__(self, inputs=None, *, question=None, context=None, **options):
        if inputs is None and question is not None and context is not None:
            pairs = list(zip(question, context)) if isinstance(question, list) else [(question, context)]
        else:
            items = inputs if isinstance(inputs, list) else [inputs]
            if not all(isinstance(x, dict) and isinstance(x.get("question"), str)
                       and isinstance(x.get("context"), str) for x in items):
                raise ArgumentError("{inputs:flag}: question-answering takes question= and context= (strings or lists "
                                    "of strings), or dicts holding 'question' and 'context' strings", inputs=inputs)
            pairs = [(x["question"], x["context"]) for x in items]
        if not all(isinstance(q, str) and isinstance(c, str) and c for q, c in pairs):
            raise DataError("question-answering: each question and context must be a string, the context non-empty")
        if not pairs:  # an empty list in, an empty list out (as HF's)
            self.answer.check(self, [], **{**self.defaults, **options})
            return []
        answers = self.answer(pairs, **{**self.defaults, **options})
        return answers[0] if len(answers) == 1 else answers

    @checked(top_k=AT_LEAST_1, max_answer_len=AT_LEAST_1, max_seq_len=AT_LEAST_1, doc_stride=AT_LEAST_0,
             max_question_len=AT_LEAST_1, n_best=AT_LEAST_1)
    def answer(self, pairs: list[tuple[str, str]], top_k: int = 1,
               decoding: Literal["official", "hf"] = "hf", max_answer_len: Optional[int] = None,
               max_seq_len: Optional[int] = None, doc_stride: Optional[int] = None,
               handle_impossible_answer: bool = False, align_to_words: bool | None = None,
               max_question_len: int = 64, n_best: int = 20) -> list:
        """``decoding``: "hf" (transformers' pipeline's, the default: a pipeline answers as HF's) or "official"
        (run_squad's, as `litebert predict`/`evaluate` score SQuAD), `litebert.tasks.qa_decode`;
        ``max_answer_len`` and ``align_to_words`` default to the decoding's own. ``doc_stride``: official, the
        pieces between window starts; hf, the pieces windows overlap (default for both: min(max_seq_len / 2, 128)).
        ``max_question_len``: official only (HF's fast pipeline keeps the whole question); ``n_best``: official
        only."""
        from litebert.tasks.qa_decode import QADecoding, decode, window_length, windows
        from litebert.tasks.readers import SquadExample

        d = QADecoding(decoding, max_answer_len, n_best, align_to_words, handle_impossible_answer)
        max_seq_len = max_seq_len or min(self.max_length, window_length(decoding, self.fine_tuned_length))
        doc_stride = doc_stride if doc_stride is not None else min(max_seq_len // 2, 128)
        examples = [SquadExample(str(i), q, c) for i, (q, c) in enumerate(pairs)]
        feats = windows(self.tokenizer, examples, d, max_seq_len, doc_stride, max_question_len)
        logits = self.run(feats)
        answers = decode([c for _, c in pairs], feats, [s for s, _ in logits], [e for _, e in logits], d, top_k)
        return [a[0] if len(a) == 1 else a or {"score": 0.0, "start": 0, "end": 0, "answer": ""} for a in answers]

    def outputs(self, out, batch):
        return {"start": out.start_logits.float(), "end": out.end_logits.float()}  # [B, L] each

    def take(self, row, length):
        return row["start"][:length], row["end"][:length]


_PIPELINES = {"fill-mask": FillMask, "text-classification": TextClassification,
              "token-classification": TokenClassification, "question-answering": QuestionAnswering,
              "feature-extraction": FeatureExtraction, "zero-shot-classification": ZeroShotClassification}

