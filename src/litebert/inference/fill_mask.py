"""``litebert fill-mask``: `fill_mask`, the fill-mask pipeline (`litebert.inference.pipelines`) on one text or on the
``text`` field of every record of a JSONL file or table, and its flags."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from litebert.arguments import checked
from litebert.checks import AT_LEAST_1
from litebert.errors import ConfigError, DataError, literal
from litebert.inference.pipelines import pipeline
from litebert.inputs.remote import as_path


@dataclass
class FillMaskResult:
    count: int  # texts filled
    predictions: list  # text: [HF's answer]; input without output: each record with "predictions" added
    output: Optional[Path] = None


@checked(top_k=AT_LEAST_1, batch_size=AT_LEAST_1, batch_tokens=AT_LEAST_1)
def fill_mask(model: str | os.PathLike, text: Optional[str] = None, *, input: str | os.PathLike | None = None,
              output: str | os.PathLike | None = None, top_k: int = 5, tokenizer: str | os.PathLike | None = None,
              text_field: str = "text", batch_size: int = 32, batch_tokens: Optional[int] = None,
              device: Optional[str] = None, precision: str = "auto", attention: str = "auto",
              encoding_errors: str = "strict", overwrite: bool = False,
              allow_tokenizer_mismatch: bool = False) -> FillMaskResult:
    """Fill the [MASK]s of ``text``, or of the ``text_field`` of every record of ``input`` (JSONL or a table), with
    the MLM head of ``model`` (a pretraining folder, an HF AlbertForMaskedLM/AlbertForPreTraining folder, a hub id):
    the ``top_k`` pieces per mask, as HF's fill-mask pipeline answers. With ``output``, each record is written there
    with its answer under ``predictions`` (an existing file only with ``overwrite``); without, they are returned.
    ``device``, ``precision`` and ``attention`` as for every command (`litebert.engine.runtime.Runtime`).
    ``tokenizer``: another tokenizer than the folder's; of the same pieces as the folder's own, or only warned about
    with ``allow_tokenizer_mismatch`` (`litebert.pairing.check_tokenizer`)."""
    from litebert import hub
    from litebert.folders import plan_file
    from litebert.inference.predict import CHUNK_SIZE, chunks, write_jsonl
    from litebert.inputs import text as text_input

    if (text is None) == (input is None):
        raise ConfigError("give {text:flag} or {input:flag}" + (", not both" if text is not None else ""),
                          text=text, input=input)
    if output is not None and input is None:
        raise ConfigError("{output} goes with {input} (a text's answer is returned)", output=output, input=input)
    model, tokenizer = hub.model_folder(model), hub.local(tokenizer, "tokenizer")  # hub ids: their folders
    if output is not None:
        plan_file(output, overwrite=overwrite, inputs={"model": model, "input": input, "tokenizer": tokenizer})
    fill = pipeline("fill-mask", model, tokenizer, device, batch_size=batch_size, batch_tokens=batch_tokens,
                    precision=precision, attention=attention, allow_tokenizer_mismatch=allow_tokenizer_mismatch)
    if text is not None:
        return FillMaskResult(1, [fill.answer([text], top_k=top_k)[0]])
    path = as_path(input)
    records = text_input.iter_records(path, encoding_errors)
    rows: list[dict] = []
    for chunk in chunks(records, CHUNK_SIZE):
        texts = [text_input.text_field(obj, text_field, path, n) for n, obj in chunk]
        answers = fill.answer(texts, top_k=top_k, where=[text_input.where(path, n) for n, _ in chunk])
        rows += [{**obj, "predictions": a} for (_, obj), a in zip(chunk, answers)]
    if not rows:
        raise DataError(f"{literal(path)}: the file is empty")
    if output is None:
        return FillMaskResult(len(rows), rows)
    write_jsonl(output, rows)
    return FillMaskResult(len(rows), [], Path(output))
