"""Inference with fine-tuned and pretrained models, as typed functions (``litebert evaluate``, ``predict`` and
``embed`` map their flags onto them): `evaluate` (labelled data -> metrics and per-example rows), `predict` (JSONL in,
JSONL out) and `embed` (texts -> .npy). Where they read JSON lines they read tables too (Parquet, Arrow, a `datasets`
folder: `litebert.inputs.text.iter_records`), a row for a line.

Input objects by task kind (extra keys are kept and echoed back):

* classification / regression: ``text_a`` (or ``text`` / ``sentence``, or the column named at fine-tuning) and
  optionally ``text_b`` (or HF's ``text_pair``) -> adds ``label`` and ``probabilities`` (``score`` for regression)
* token: ``words`` (a list) or ``text`` (split on white space) -> adds ``tags`` (one per word); with an
  ``aggregation_strategy``, ``entities`` (`litebert.tasks.token_groups`)
* multiple choice: ``question``, ``choices``, optional ``context`` -> adds ``label`` (index) and ``probabilities``
* SQuAD: ``question``, ``context`` (optional ``id``) -> adds ``answer``, ``answer_start`` (-1 = no answer) and, for
  v2, ``no_answer_prob``; decoded as ``qa_decoding`` says (`litebert.tasks.qa_decode`)

Both commands stream: the input is read ``chunk_size`` inputs at a time, each chunk is featurized, run (batched by
length within the chunk, order restored) and its output rows written to the output's temporary file, which replaces
the output only when every input is done. Memory does not grow with the number of inputs.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Mapping, Optional

import numpy as np
from tqdm import tqdm

from litebert import hub
from litebert.arguments import checked
from litebert.checks import AT_LEAST_1
from litebert.engine.runtime import Runtime
from litebert.errors import DataError
from litebert.files import atomic_write
from litebert.folders import plan_file
from litebert.inference import finetuned
from litebert.inference.finetuned import predict_outputs
from litebert.inputs import text as text_input
from litebert.inputs.remote import as_path
from litebert.tasks import readers as R
from litebert.tasks.sources import eval_path

CHUNK_SIZE = 2048  # inputs read, featurized and run at a time


def chunks(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of ``size`` items (the last one shorter)."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


# ---------------------------------------------------------------------------------------------------- commands
@dataclass
class EvaluateResult:
    task: str
    data: Path
    metrics: dict
    rows: list  # one per example: id, gold label, prediction, probabilities (`finetuned.evaluate_rows`)
    output: Optional[Path] = None
    qa_decoding: Optional[str] = None  # how SQuAD answers were read ("official": as the paper scored); None: not QA


@dataclass
class PredictResult:
    count: int
    output: Path
    qa_decoding: Optional[str] = None  # how SQuAD answers were read; None: not a QA folder


@dataclass
class EmbedResult:
    shape: tuple[int, int]
    pooling: str
    output: Path


@checked(batch_size=AT_LEAST_1, seq_len=AT_LEAST_1)
def evaluate(model: str | os.PathLike, data: str | os.PathLike, *, output: str | os.PathLike | None = None,
             columns: Mapping[str, str] | None = None, tokenizer: str | os.PathLike | None = None,
             null_threshold: Optional[float] = None, allow_incomplete: bool = False, batch_size: int = 64,
             seq_len: Optional[int] = None, device: Optional[str] = None, precision: str = "auto",
             attention: str = "auto", encoding_errors: str = "strict", progress: bool = True,
             overwrite: bool = False, qa_decoding: Literal["official", "hf"] = "official",
             allow_tokenizer_mismatch: bool = False) -> EvaluateResult:
    """Score the fine-tuned folder ``model`` (or an HF ALBERT task model) on the labelled ``data`` (a file, or a data
    folder's dev split). ``output``: also write one JSONL row per example there (an existing file only with
    ``overwrite``). ``columns``: the data's columns (default: those the folder was fine-tuned with).
    ``null_threshold``: SQuAD v2's no-answer threshold (default: the one chosen on dev). ``allow_incomplete``: use a
    folder whose fine-tuning did not finish. ``qa_decoding``: how SQuAD answers are read (`litebert.tasks.qa_decode`:
    "official", run_squad's, as the paper scored SQuAD, or "hf", transformers' pipeline's); the result's
    ``qa_decoding`` says which was used (None for other tasks). ``tokenizer``: another than the folder's, of its
    pieces (`litebert.pairing.check_tokenizer`; ``allow_tokenizer_mismatch``: only warn when they differ)."""
    model, tokenizer = hub.local(model, "model"), hub.local(tokenizer, "tokenizer")  # hub ids: their folders
    if output is not None:
        plan_file(output, overwrite=overwrite, inputs={"model": model, "data": data, "tokenizer": tokenizer})
    finetuned.check_complete(model, allow_incomplete)
    preset, net, tok, meta = finetuned.load_finetuned(model, tokenizer, allow_tokenizer_mismatch)
    preset = replace(preset, kind=preset.kind.for_inference(qa_decoding))
    path = eval_path(data)  # a file, a folder's dev split, a dataset id's
    labels = meta.get("labels")
    examples = preset.kind.read(path, labels, dict(columns or {}) or meta.get("columns"), encoding_errors)
    unlabelled = [e for e in examples if getattr(e, "label", 0) is None or getattr(e, "labels", 0) is None]
    if unlabelled:
        raise DataError(f"{path}: {len(unlabelled)} example(s) have no label (a test file, or AX?); evaluation needs "
                        f"labels — use predict for unlabelled data")
    length = preset.kind.inference_length(preset.max_seq_length, net.config.max_position_embeddings)
    max_len = net.config.sequence_length(seq_len, length)
    threshold = null_threshold if null_threshold is not None else meta.get("null_threshold")
    rt = Runtime.for_inference(net.config, device, precision, attention)
    rt.place(net)
    metrics, rows = finetuned.evaluate_rows(preset, net, tok, examples, labels, max_len, batch_size,
                                         null_threshold=threshold, progress=progress, runtime=rt)
    if output is not None:
        write_jsonl(output, rows)
    return EvaluateResult(preset.name, path, metrics, rows, Path(output) if output is not None else None,
                          getattr(preset.kind, "decoding", None))


@checked(batch_size=AT_LEAST_1, batch_tokens=AT_LEAST_1, seq_len=AT_LEAST_1)
def predict(model: str | os.PathLike, input: str | os.PathLike, output: str | os.PathLike, *,
            tokenizer: str | os.PathLike | None = None, allow_incomplete: bool = False,
            batch_size: Optional[int] = None, batch_tokens: Optional[int] = None, seq_len: Optional[int] = None,
            device: Optional[str] = None, precision: str = "auto", attention: str = "auto",
            encoding_errors: str = "strict", progress: bool = True, overwrite: bool = False,
            qa_decoding: Literal["official", "hf"] = "official",
            aggregation_strategy: Optional[Literal["none", "simple", "first", "average", "max"]] = None,
            allow_tokenizer_mismatch: bool = False) -> PredictResult:
    """Predict every object of the JSONL ``input`` with the fine-tuned folder ``model`` and write each, with its
    prediction added, to ``output`` (an existing file only with ``overwrite``; see the module docstring for the
    keys). ``batch_tokens``: batches by size, up to ``batch_size`` inputs of at most this many tokens together
    (default: off); with ``batch_tokens`` alone, the tokens decide. ``qa_decoding``: how SQuAD answers are read
    (`litebert.tasks.qa_decode`). ``aggregation_strategy``: token classification answers entities, as
    ``pipeline("ner", aggregation_strategy=...)`` does, instead of a tag per word. ``allow_tokenizer_mismatch``: a
    ``tokenizer`` of other pieces than the folder's own is warned about, not refused."""
    model, tokenizer = hub.local(model, "model"), hub.local(tokenizer, "tokenizer")  # hub ids: their folders
    plan_file(output, overwrite=overwrite, inputs={"model": model, "input": input, "tokenizer": tokenizer})
    finetuned.check_complete(model, allow_incomplete)
    rows = batch_size if batch_size is not None else batch_tokens if batch_tokens is not None else 64
    n = predict_file(model, input, output, seq_len, rows, progress, encoding_errors, device=device,
                     precision=precision, attention=attention, tokenizer=tokenizer, max_tokens=batch_tokens,
                     qa_decoding=qa_decoding, aggregation_strategy=aggregation_strategy,
                     allow_tokenizer_mismatch=allow_tokenizer_mismatch)
    return PredictResult(n, Path(output), qa_decoding if finetuned.is_extractive_qa(model) else None)


@checked(batch_size=AT_LEAST_1, seq_len=AT_LEAST_1)
def embed(model: str | os.PathLike, input: str | os.PathLike, output: str | os.PathLike, *, text_field: str = "text",
          pooling: str = "mean", tokenizer: str | os.PathLike | None = None, batch_size: int = 64,
          seq_len: Optional[int] = None, device: Optional[str] = None, precision: str = "auto",
          attention: str = "auto", encoding_errors: str = "strict", progress: bool = True,
          overwrite: bool = False, allow_tokenizer_mismatch: bool = False) -> EmbedResult:
    """Embed each text of ``input`` (one a line, or JSONL or a table with the text under ``text_field``) with the
    encoder of ``model`` into the float32 [N, hidden_size] .npy ``output`` (an existing file only with ``overwrite``).
    ``pooling``: mean (over real tokens), pooled (the pooler output) or cls (the raw [CLS] vector). ``device``,
    ``precision`` and ``attention`` are resolved as for every command (`Runtime.for_inference`).
    ``allow_tokenizer_mismatch``: a ``tokenizer`` of other pieces than the folder's own is warned about, not
    refused."""
    model, tokenizer = hub.local(model, "model"), hub.local(tokenizer, "tokenizer")  # hub ids: their folders
    plan_file(output, overwrite=overwrite, inputs={"model": model, "input": input, "tokenizer": tokenizer})
    if pooling not in POOLINGS:
        raise DataError("{pooling}: choose one of " + ", ".join(POOLINGS), pooling=pooling)
    out = embed_file(model, input, output, text_field, pooling, seq_len, batch_size, encoding_errors,
                     device=device, tokenizer=tokenizer, precision=precision, attention=attention, progress=progress,
                     allow_tokenizer_mismatch=allow_tokenizer_mismatch)
    return EmbedResult(tuple(out.shape), pooling, Path(output))


POOLINGS = ("mean", "pooled", "cls")


# ---------------------------------------------------------------------------------------------------- streaming
def predict_file(model_dir: str | Path, input_path: str | Path, output_path: str | Path,
                 max_seq_length: int | None = None, batch_size: int = 64, progress: bool = True,
                 encoding_errors: str = "strict", chunk_size: int = CHUNK_SIZE, *, device: Optional[str] = None,
                 precision: str = "auto", attention: str = "auto", tokenizer: str | Path | None = None,
                 max_tokens: int | None = None, qa_decoding: str = "official",
                 aggregation_strategy: str | None = None, allow_tokenizer_mismatch: bool = False) -> int:
    """Predict every object of the JSONL ``input_path`` with the fine-tuned folder ``model_dir`` (or an HF ALBERT
    task-head folder: `finetuned.load_finetuned`) and write each object, with the prediction added, to ``output_path``,
    in the input's order. ``device``, ``precision`` and ``attention`` as for every command
    (`Runtime.for_inference`, refused before anything is written); ``tokenizer`` replaces the folder's own;
    ``max_tokens``: batches by size (`finetuned.predict_outputs`); ``qa_decoding`` and ``aggregation_strategy``: as
    `predict`'s (`TaskKind.for_inference`). Returns the number of predictions."""
    preset, model, tok, meta = finetuned.load_finetuned(model_dir, tokenizer, allow_tokenizer_mismatch)
    rt = Runtime.for_inference(model.config, device, precision, attention)
    rt.place(model)
    kind, labels = preset.kind.for_inference(qa_decoding, aggregation_strategy), meta.get("labels")
    path = as_path(input_path)
    length = kind.inference_length(preset.max_seq_length, model.config.max_position_embeddings)
    max_len = model.config.sequence_length(max_seq_length, length)
    count = 0

    def write(tmp: Path) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf-8") as f, \
                tqdm(desc="predicting", unit=" inputs", disable=not progress, leave=False) as bar:
            for rows in chunks(R.records(path, encoding_errors=encoding_errors), chunk_size):
                examples = kind.examples_from_json(rows, path, meta.get("columns"))
                feats = kind.featurize(tok, examples, labels, max_len)
                outs = predict_outputs(model, feats, batch_size, tok.pad_token_id, runtime=rt, max_tokens=max_tokens)
                preds = kind.thresholded(kind.predictions(examples, feats, outs, labels), meta.get("null_threshold"))
                for (_, obj), added in zip(rows, kind.output_rows(preds, outs, labels)):
                    f.write(json.dumps({**obj, **added}, ensure_ascii=False) + "\n")
                count += len(rows)
                bar.update(len(rows))

    atomic_write(output_path, write)
    return count


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    """One JSON object a line (UTF-8), written atomically."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    atomic_write(path, write)


def iter_texts(path: Path, text_field: str = "text", encoding_errors: str = "strict") -> Iterator[str]:
    """The texts `embed` reads: the ``text_field`` of each record (a JSONL object, a table's row), or each non-blank
    line of a text file."""
    if text_input.is_records(path):
        for _, text in text_input.iter_record_texts(path, text_field, encoding_errors):
            yield text
    else:
        for _, _, line in text_input.iter_lines(path, encoding_errors):
            if line.strip():
                yield line


def embed_file(model_dir: str | Path, input_path: str | Path, output_path: str | Path, text_field: str = "text",
               pooling: str = "mean", max_seq_length: int | None = None, batch_size: int = 64,
               encoding_errors: str = "strict", chunk_size: int = CHUNK_SIZE, *, device: Optional[str] = None,
               precision: str = "auto", attention: str = "auto", tokenizer: str | Path | None = None,
               progress: bool = False, allow_tokenizer_mismatch: bool = False) -> np.ndarray:
    """Embed each text of ``input_path`` (text, one a line, or JSONL or a table with the text under ``text_field``;
    compressed or not) with the encoder in ``model_dir``; write the float32 [N, hidden_size] array to ``output_path``
    (.npy). ``pooling``: "mean" over real tokens, "pooled" (the pooler output) or "cls" (the raw [CLS] vector).
    ``device``, ``precision`` and ``attention`` as for every command (`Runtime.for_inference`, refused before
    anything is written); ``tokenizer`` replaces the folder's own.

    A first pass counts (and checks) the texts, so that the .npy header can be written first and the rows appended
    chunk by chunk. Returns the written array, memory-mapped (read-only)."""
    from litebert.heads import AlbertModel
    from litebert.inference.loop import run_batches

    path = as_path(input_path)
    n_texts = sum(1 for _ in iter_texts(path, text_field, encoding_errors))
    if not n_texts:
        raise DataError(f"{path}: the file is empty")
    model_dir = hub.model_folder(model_dir)  # after the input (its errors first), before the folder's tokenizer
    tok = finetuned.load_tokenizer(model_dir, tokenizer, allow_tokenizer_mismatch)
    # mean and cls pooling never read the pooler: an encoder without it loads a folder that has none (an MLM-only
    # model) without warning about weights it would not use
    model = (AlbertModel if pooling == "pooled" else _encoder_without_pooler()).from_pretrained(model_dir)
    rt = Runtime.for_inference(model.config, device, precision, attention)
    rt.place(model)
    max_len = model.config.sequence_length(max_seq_length, 512)
    hidden = model.config.hidden_size

    def embed(texts: list[str]) -> np.ndarray:
        enc = tok(texts, max_length=max_len, truncation=True)
        feats = [{"input_ids": i, "token_type_ids": t} for i, t in zip(enc["input_ids"], enc["token_type_ids"])]
        outs = run_batches(model, feats, lambda res, batch: {"v": pool(res, batch, pooling)}, runtime=rt,
                           batch_size=batch_size, pad_id=tok.pad_token_id)
        return np.stack([o["v"] for o in outs]).astype(np.float32, copy=False)

    def save(tmp: Path) -> None:
        written = 0
        with open(tmp, "wb") as f:
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False,
                      "shape": (n_texts, hidden)}
            np.lib.format.write_array_header_1_0(f, header)
            for texts in chunks(iter_texts(path, text_field, encoding_errors), chunk_size):
                written += len(texts)
                if written > n_texts:
                    break
                f.write(embed(texts).astype("<f4", copy=False).tobytes())
                bar.update(len(texts))
        if written != n_texts:  # the file changed between the two passes
            raise DataError(f"{path}: changed while being read ({n_texts} texts, then {written}); run embed again")

    with tqdm(total=n_texts, desc="embedding", unit=" texts", disable=not progress, leave=False) as bar:
        atomic_write(output_path, save)
    return np.load(output_path, mmap_mode="r")


def _encoder_without_pooler():
    from litebert.heads import AlbertModel

    class EncoderWithoutPooler(AlbertModel):
        """`AlbertModel` without its pooler (``add_pooling_layer=False``), as HF's MLM head builds it."""

        def __init__(self, config):
            super().__init__(config, add_pooling_layer=False)

    return EncoderWithoutPooler


def pool(res, batch: dict, pooling: str):
    """One float32 vector per row of an encoder's output [B, H]: the pooler output, the [CLS] vector, or the mean of
    the last layer over the real tokens (the batch's ``attention_mask``; none: every position is real)."""
    if pooling == "pooled":
        return res.pooler_output.float()
    if pooling == "cls":
        return res.last_hidden_state[:, 0].float()
    h = res.last_hidden_state.float()  # [B, L, H]
    mask = batch.get("attention_mask")
    if mask is None:
        return h.mean(1)
    m = mask.unsqueeze(-1).to(h.dtype)  # [B, L, 1]
    return (h * m).sum(1) / m.sum(1)
