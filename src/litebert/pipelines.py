"""`pipeline(task, model=...)`: text in, HF's pipeline answers out, for any litebert or HF ALBERT folder.

    fill = pipeline("fill-mask", model="runs/tiny/model")
    fill("The [MASK] sat on the mat.")          # [{score, token, token_str, sequence}, ...] (top 5)

Tasks and what each returns, key for key as ``transformers.pipeline`` (4.57) on the same folder:

* ``fill-mask``: per text a list of {score, token, token_str, sequence} (a list of such lists, one per mask, when
  the text has several masks; their ``sequence`` then keeps the special tokens, as HF's)
* ``text-classification`` (``sentiment-analysis``): per text {label, score}; with ``top_k`` (None: all labels) a
  list sorted by score. A single string gives a list of one, as HF's.
* ``token-classification`` (``ner``): per text a list of {entity, score, index, word, start, end}, one per piece
  whose label is not "O" (HF's default ``aggregation_strategy="none"``)
* ``question-answering``: {score, start, end, answer} (a list with ``top_k`` > 1), by HF's decoding: windows of
  ``max_seq_len`` pieces with ``doc_stride`` overlap, span probabilities start x end (softmax per window), at most
  ``max_answer_len`` pieces, widened to whole words (``align_to_words``), equal answers merged
* ``feature-extraction``: per text the last hidden states, nested lists [1, L, H]

Inputs: a string or a list of strings (question answering: ``question=``/``context=``, or dicts holding them). A
list is run in batches of similar length (``batch_size`` texts, and with ``batch_tokens`` at most that many padded
tokens), the padding skipped; answers come back in the input's order. Labels are the folder's (config.json
``id2label``, else finetune.json's ``labels``). Texts longer than the model's positions are cut (HF would fail).

`litebert.fill_mask.fill_mask` is the ``litebert fill-mask`` command, through the same code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import numpy as np
import torch

from litebert import hub
from litebert.arguments import checked
from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.errors import ArgumentError, CheckpointError, ConfigError, DataError, literal

TASKS = ("fill-mask", "text-classification", "token-classification", "question-answering", "feature-extraction")
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
    from litebert.tasks.finetuned import load_tokenizer

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
        """The model's output for each feature (`litebert.inference.run_batches`: batches of similar length, the
        padding skipped, order restored); each is what `take` makes of that feature's row of the batch-major tensors
        `outputs` returns. ``collate``: the host batch of a list of features (default: their padded inputs)."""
        from litebert.inference import run_batches
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
            from litebert.inference import pad_inputs

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
    meta = folder / "finetune.json"
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
        from litebert.tasks.kinds import softmax

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


class TokenClassification(_Labelled):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForTokenClassification

        return _load_head(AlbertForTokenClassification, folder, "classifier.", "token-classification head")

    @checked
    def answer(self, texts: list[str], ignore_labels: Sequence[str] = ("O",),
               aggregation_strategy: Optional[str] = "none") -> list:
        if aggregation_strategy not in (None, "none"):
            raise ConfigError("{aggregation_strategy}: only 'none' (one answer per piece) is supported",
                              aggregation_strategy=aggregation_strategy)
        from litebert.tasks.kinds import softmax

        labels, feats = self.labels, self.encode(texts)
        out = []
        for text, f, logits in zip(texts, feats, self.run(feats)):
            scores = softmax(logits, axis=-1)  # [L, C]
            offsets = hf_offsets(self.tokenizer, f["input_ids"], f["offsets"])
            entities = []
            for k, i in enumerate(f["input_ids"]):
                if k == 0 or k == len(f["input_ids"]) - 1:  # the [CLS] and [SEP] added (HF's special_tokens_mask)
                    continue
                c = int(scores[k].argmax())
                if labels[c] in ignore_labels:
                    continue
                start, end = offsets[k]
                word = text[start:end] if i == self.tokenizer.unk_token_id else \
                    self.tokenizer.convert_ids_to_tokens(int(i))
                entities.append({"entity": labels[c], "score": scores[k, c], "index": k, "word": word,
                                 "start": start, "end": end})
            out.append(entities)
        return out

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


def hf_offsets(tok, ids: list[int], offsets: list) -> list[tuple[int, int]]:
    """The character spans HF's fast tokenizer gives the pieces: litebert's, except that a lone "▁" (the dummy
    prefix before a piece it could not join, "▁" "(") gets the span of the character it was put before, not of the
    space before it."""
    out = [tuple(o) for o in offsets]
    for k, i in enumerate(ids):
        if tok.convert_ids_to_tokens(int(i)) == "▁" and k + 1 < len(out) and out[k + 1][1] > out[k + 1][0]:
            out[k] = (out[k + 1][0], out[k + 1][0] + 1)
    return out


# ---------------------------------------------------------------------------------------------------- QA
class QuestionAnswering(Pipeline):
    @staticmethod
    def load(folder: Path):
        from litebert.heads import AlbertForQuestionAnswering

        return _load_head(AlbertForQuestionAnswering, folder, "qa_outputs.", "question-answering head")

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

    def windows(self, question: str, context: str, max_seq_len: int, doc_stride: int) -> list[dict]:
        """[CLS] question [SEP] context-window [SEP], as HF's tokenizer cuts them (``truncation="only_second"``,
        ``stride``): windows of ``budget`` context pieces, each starting ``budget - doc_stride`` after the last."""
        tok = self.tokenizer
        q = tok(question, add_special_tokens=False)["input_ids"]
        enc = tok(context, add_special_tokens=False, return_offsets=True)
        c_ids, c_off = enc["input_ids"], hf_offsets(tok, enc["input_ids"], enc["offsets"])
        budget = max_seq_len - len(q) - 3
        if budget <= doc_stride:
            raise ConfigError(f"the question ({len(q)} pieces) leaves {max(budget, 0)} pieces of " + "{max_seq_len} "
                              "for the context, not more than {doc_stride}; raise the first or lower the second",
                              max_seq_len=max_seq_len, doc_stride=doc_stride)
        out, start = [], 0
        while True:
            stop = min(start + budget, len(c_ids))
            ids = [tok.cls_token_id] + q + [tok.sep_token_id] + c_ids[start:stop] + [tok.sep_token_id]
            out.append({"input_ids": ids, "token_type_ids": [0] * (len(q) + 2) + [1] * (stop - start + 1),
                        "first": len(q) + 2, "offsets": c_off[start:stop], "words": self.word_ids(c_ids[start:stop])})
            if stop == len(c_ids):
                return out
            start += budget - doc_stride

    def word_ids(self, ids: list[int]) -> list[int]:
        """The word of each piece, as the folder's tokenizer.json pre-tokenizes: a word starts at a "▁" piece, at a
        user-defined piece and after one (`litebert.tokenizer.hf_json`); WordPiece: at a piece without "##"."""
        from litebert.tokenizer.tokenizer import PIECE_USER_DEFINED

        tok, words, previous_alone = self.tokenizer, [], False
        types = getattr(tok, "piece_types", None)
        for i in ids:
            piece = tok.convert_ids_to_tokens(int(i))
            alone = types is not None and types[i] == PIECE_USER_DEFINED
            new = piece.startswith("▁") or alone or previous_alone if types is not None else \
                not piece.startswith("##")
            words.append(words[-1] + (1 if new else 0) if words else 0)
            previous_alone = alone
        return words

    @checked(top_k=AT_LEAST_1, max_answer_len=AT_LEAST_1, max_seq_len=AT_LEAST_1, doc_stride=AT_LEAST_0,
             max_question_len=AT_LEAST_1)
    def answer(self, pairs: list[tuple[str, str]], top_k: int = 1, max_answer_len: int = 15,
               max_seq_len: Optional[int] = None, doc_stride: Optional[int] = None,
               handle_impossible_answer: bool = False, align_to_words: bool = True, max_question_len: int = 64) -> list:
        max_seq_len = max_seq_len or min(self.max_length, 384)
        doc_stride = doc_stride if doc_stride is not None else min(max_seq_len // 2, 128)
        feats, spans = [], []  # spans: each pair's windows, feats[first:last]
        for q, c in pairs:
            ws = self.windows(q, c, max_seq_len, doc_stride)
            spans.append((len(feats), len(feats) + len(ws)))
            feats += ws
        logits = self.run(feats)
        results = []
        for (_, context), (first, last) in zip(pairs, spans):
            answers, null = [], 1e6
            for f, (start, end) in zip(feats[first:last], logits[first:last]):
                null = self._decode(f, start, end, context, answers, null, top_k, max_answer_len,
                                    handle_impossible_answer, align_to_words)
            if handle_impossible_answer:
                answers.append({"score": null, "start": 0, "end": 0, "answer": ""})
            answers = sorted(answers, key=lambda a: a["score"], reverse=True)[:top_k]
            results.append(answers[0] if len(answers) == 1 else answers)
        return results

    @staticmethod
    def _decode(f, start, end, context, answers, null, top_k, max_answer_len, impossible, align) -> float:
        """HF's `select_starts_ends` + `decode_spans` (transformers/pipelines/question_answering.py) on one window,
        its answers added to ``answers`` (an equal answer's score summed); returns the null score so far."""
        from litebert.tasks.kinds import softmax

        first, n = f["first"], len(f["offsets"])
        allowed = np.zeros(len(start), dtype=bool)  # the context pieces and [CLS]
        allowed[0] = True
        allowed[first:first + n] = True
        start = np.where(allowed, start, np.float32(-10000.0))
        end = np.where(allowed, end, np.float32(-10000.0))
        start, end = softmax(start), softmax(end)
        if impossible:
            null = min(null, (start[0] * end[0]).item())
        start[0] = end[0] = 0.0
        k = top_k * 2 + 10 if align else top_k
        outer = np.matmul(start[None, :, None], end[None, None, :])
        candidates = np.tril(np.triu(outer), max_answer_len - 1)
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
        offsets, words = f["offsets"], f["words"]
        for s, e, score in zip(starts[keep], ends[keep], candidates[0, starts[keep], ends[keep]]):
            s, e = int(s) - first, int(e) - first
            if s < 0 or e < 0:  # [CLS]: HF's word lookup fails and falls back to its (0, 0) span
                a, b = 0, 0 if e < 0 else offsets[e][1]
            elif align:
                a = min(offsets[k][0] for k in range(n) if words[k] == words[s])
                b = max(offsets[k][1] for k in range(n) if words[k] == words[e])
            else:
                a, b = offsets[s][0], offsets[e][1]
            same = next((x for x in answers if x["answer"].lower() == context[a:b].lower()), None)
            if same is not None:
                same["score"] += score.item()
            else:
                answers.append({"score": score.item(), "start": a, "end": b, "answer": context[a:b]})
        return null

    def outputs(self, out, batch):
        return {"start": out.start_logits.float(), "end": out.end_logits.float()}  # [B, L] each

    def take(self, row, length):
        return row["start"][:length], row["end"][:length]


_PIPELINES = {"fill-mask": FillMask, "text-classification": TextClassification,
              "token-classification": TokenClassification, "question-answering": QuestionAnswering,
              "feature-extraction": FeatureExtraction}

