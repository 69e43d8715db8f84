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
from typing import Any, Literal, Mapping, Optional, Sequence

import numpy as np
import torch

from litebert import folders, hub
from litebert.arguments import checked
from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.errors import ArgumentError, ConfigError, DataError, literal
from litebert.inference.pipeline_base import Labelled, Pipeline, load_head, tokenizer_options

TASKS = ("fill-mask", "text-classification", "token-classification", "question-answering", "feature-extraction",
         "zero-shot-classification")
ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}


@checked(batch_size=AT_LEAST_1, batch_tokens=AT_LEAST_1)
def pipeline(task: str, model: str | os.PathLike, tokenizer: str | os.PathLike | None = None,
             device: str | int | None = None, *, batch_size: int = 32, batch_tokens: Optional[int] = None,
             precision: str = "auto", attention: str = "auto", allow_tokenizer_mismatch: bool = False,
             **defaults) -> "Pipeline":
    """The pipeline for ``task`` (one of `TASKS`, or an alias in `ALIASES`) on the model folder (or hub id)
    ``model``; ``tokenizer``: another tokenizer folder or file than the model's, which must hold the same pieces
    as the folder's own where it has one (`litebert.pairing.check_tokenizer`; ``allow_tokenizer_mismatch``: only
    warn). ``device`` (cpu, cuda, ...; default:
    CUDA when available; HF's ints: -1 the CPU, N the GPU cuda:N), ``precision`` and ``attention``: as for every
    command (`Runtime.for_inference`; on a GPU
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
    device = _device(device)
    model, tokenizer = hub.model_folder(model), hub.local(tokenizer, "tokenizer")
    from litebert.inference.finetuned import load_tokenizer

    net = cls.load(Path(model))
    runtime = Runtime.for_inference(net.config, device, precision, attention)
    runtime.place(net)
    tok = load_tokenizer(model, tokenizer, allow_tokenizer_mismatch)
    return cls(name, net, tok, Path(model), runtime, batch_size, batch_tokens, defaults)


def _device(device: str | int | None) -> str | None:
    """HF's int devices as litebert's names: -1 the CPU, N >= 0 the GPU cuda:N (refused where there is none)."""
    if not isinstance(device, int) or isinstance(device, bool):
        return device
    if device < -1:
        raise ConfigError("{device}: expected -1 (the CPU), a GPU's index (0, 1, ...) or a name (cpu, cuda:0)",
                          device=device)
    if device >= 0 and not torch.cuda.is_available():
        raise ConfigError("{device}: there is no CUDA GPU here; use device=-1 (or 'cpu')", device=device)
    return "cpu" if device == -1 else f"cuda:{device}"


# ---------------------------------------------------------------------------------------------------- fill-mask
class FillMask(Pipeline):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForMaskedLM

        return load_head(AlbertForMaskedLM, folder, "predictions.", "masked-language-model head",
                          ("AlbertForPreTraining",))

    def __call__(self, inputs, **options):
        answers = super().__call__(inputs, **options)
        return answers[0] if not isinstance(inputs, str) and len(answers) == 1 else answers  # as HF's

    @checked(top_k=AT_LEAST_1)
    def answer(self, texts: list[str], top_k: int = 5, targets: str | Sequence[str] | None = None,
               tokenizer_kwargs: Optional[Mapping[str, Any]] = None, where: Optional[list[str]] = None) -> list:
        """``top_k`` pieces per mask (more than the vocabulary: all of it). ``targets``: the pieces (or words, read
        as their first piece, as HF's) to rank, alone. ``tokenizer_kwargs``: HF's, ``truncation`` and
        ``max_length``. ``where``: where each text comes from (file:line), for errors."""
        length = self.cut_length(**tokenizer_options(tokenizer_kwargs, "tokenizer_kwargs"))
        feats = self.encode(texts, length)
        target_ids = self._target_ids(targets)
        mask_id = self.tokenizer.mask_token_id
        for n, (f, text) in enumerate(zip(feats, texts)):
            f["masks"] = [k for k, i in enumerate(f["input_ids"]) if i == mask_id]
            at = f"{literal(where[n])}: " if where else ""
            # A text cut to its length may have lost masks: the uncut encoding says how many it had.
            if len(f["input_ids"]) == length:
                whole = self.tokenizer(text)["input_ids"]
                cut = [k for k, i in enumerate(whole) if i == mask_id and k >= length - 1]
                if cut:
                    limit = f"the model reads {length}" if length == self.max_length else f"max_length is {length}"
                    raise DataError(f"{at}the text {literal(repr(text[:80]))} is {len(whole)} pieces with [CLS] and "
                                    f"[SEP], and {limit}: {len(cut)} of its "
                                    f"{len(cut) + len(f['masks'])} [MASK]s (the first at piece {cut[0]}) would be "
                                    "cut off; shorten the text around them")
            if not f["masks"]:
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
        return [self._rows(f, p, top_k, target_ids) for f, p in zip(feats, probs)]

    def _target_ids(self, targets: str | Sequence[str] | None) -> Optional[list[int]]:
        """The ids of ``targets`` as HF's ``get_target_ids`` finds them: a piece of the vocabulary, else the first
        piece of the word (with a warning); each once, in the order of a Python set of them, as HF's."""
        import warnings

        if targets is None:
            return None
        vocab, ids = self.tokenizer.get_vocab(), []
        for target in [targets] if isinstance(targets, str) else targets:
            piece = vocab.get(target)
            if piece is None:
                pieces = self.tokenizer(target, add_special_tokens=False)["input_ids"]
                if not pieces:
                    warnings.warn(f"fill-mask: the target {target!r} has no piece in the vocabulary; ignored")
                    continue
                piece = pieces[0]
                warnings.warn(f"fill-mask: the target {target!r} is not a piece of the vocabulary; ranked as its "
                              f"first piece {self.tokenizer.convert_ids_to_tokens(piece)!r}")
            ids.append(piece)
        if not ids:
            raise ConfigError("{targets}: none of them has a piece in the vocabulary; give pieces or words",
                              targets=targets)
        return list(set(ids))

    def outputs(self, out, batch):
        return {"probs": out.logits.float().softmax(-1)}  # [B, P, V]

    def take(self, row, length):
        return torch.from_numpy(row["probs"])  # [P, V]

    def _rows(self, f: dict, probs: torch.Tensor, top_k: int, target_ids: Optional[list[int]]) -> list:
        single = len(f["masks"]) == 1
        probs = probs[:len(f["masks"])]  # [masks, V]
        if target_ids is not None:
            probs = probs[:, target_ids]  # [masks, targets]: ranked among themselves, their softmax over V kept
        values, ids = probs.topk(min(top_k, probs.shape[-1]))  # [masks, k]
        if target_ids is not None:
            ids = torch.tensor(target_ids)[ids]
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


class TextClassification(Labelled):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForSequenceClassification

        return load_head(AlbertForSequenceClassification, folder, "classifier.", "sequence-classification head")

    @checked(top_k=AT_LEAST_1, max_length=AT_LEAST_1)
    def answer(self, texts: list[str], top_k: int | None | Literal[""] = "",
               function_to_apply: Optional[Literal["sigmoid", "softmax", "none"]] = None,
               truncation: bool | None = None, max_length: Optional[int] = None) -> list:
        """``top_k``: the best so many labels, best first (more than there are: all of them, as HF's); None: all;
        not given (HF's legacy ""): the best label alone, not in a list. ``function_to_apply``: what makes scores of
        the logits (default as HF's: none for regression, sigmoid for one label or multi-label, else softmax).
        ``truncation``, ``max_length``: HF's tokenizer arguments (`Pipeline.cut_length`)."""
        from litebert.tasks.scores import softmax

        labels, config = self.labels, self.model.config
        logits = self.run(self.encode(texts, self.cut_length(truncation, max_length)))
        if function_to_apply is None:  # HF's default
            function_to_apply = ("none" if config.problem_type == "regression" else "sigmoid" if (
                config.problem_type == "multi_label_classification" or len(labels) == 1) else "softmax")
        out = []
        for z in logits:
            if function_to_apply == "none":
                scores = z
            elif function_to_apply == "sigmoid":
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


class ZeroShotClassification(Labelled):
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


class TokenClassification(Labelled):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForTokenClassification

        return load_head(AlbertForTokenClassification, folder, "classifier.", "token-classification head")

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
    def answer(self, texts: list[str], truncation: bool | None = None,
               tokenize_kwargs: Optional[Mapping[str, Any]] = None, return_tensors: bool = False) -> list:
        """Per text the last hidden states [1, L, H]: nested lists, or with ``return_tensors`` a float32 tensor (on
        the CPU), as HF's. ``truncation`` and ``tokenize_kwargs`` (``truncation``, ``max_length``): HF's tokenizer
        arguments (`Pipeline.cut_length`); ``truncation`` in both is refused, as HF refuses it."""
        options = tokenizer_options(tokenize_kwargs, "tokenize_kwargs")
        if truncation is not None:
            if options["truncation"] is not None:
                raise ConfigError("{truncation}: given twice, as an argument and in tokenize_kwargs; give one",
                                  truncation=truncation)
            options["truncation"] = truncation
        hidden = self.run(self.encode(texts, self.cut_length(**options)))
        return [h.unsqueeze(0) if return_tensors else [h.tolist()] for h in hidden]

    def outputs(self, out, batch):
        return {"hidden": out.last_hidden_state.float()}  # [B, L, H]

    def take(self, row, length):
        return torch.from_numpy(row["hidden"][:length])


# ---------------------------------------------------------------------------------------------------- QA
def _fine_tuned_length(folder: Path, model) -> int:
    """The longest input the folder was fine-tuned with (finetune.json's preset), else the model's positions: the
    length `litebert predict` reads its windows with."""
    from litebert.tasks.meta import read_meta
    from litebert.tasks.presets import preset_from_json

    meta = folder / folders.FINETUNE_META
    saved = read_meta(folder) if meta.is_file() else {}
    if "task" in saved:
        return preset_from_json(saved["task"], saved.get("preset"), str(meta)).max_seq_length
    return model.config.max_position_embeddings


class QuestionAnswering(Pipeline):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForQuestionAnswering

        return load_head(AlbertForQuestionAnswering, folder, "qa_outputs.", "question-answering head")

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
        options = {**self.defaults, **options}
        with self.batching(options):
            if not pairs:  # an empty list in, an empty list out (as HF's)
                self.answer.check(self, [], **options)
                return []
            answers = self.answer(pairs, **options)
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

