"""``litebert evaluate | predict | embed | fill-mask``: the flags of the commands that run a model.

    litebert evaluate --model OUT --data PATH [--output rows.jsonl] [--columns ...] [--device cuda]
                      [--qa-decoding official|hf]
    litebert predict  --model OUT --input in.jsonl --output out.jsonl [--device cuda --precision bf16]
                      [--qa-decoding official|hf] [--aggregation-strategy none|simple|first|average|max]
    litebert embed    --model DIR --input texts.{txt,jsonl} --output emb.npy [--pooling mean|pooled]
    litebert fill-mask --model DIR --text "The [MASK] sat on the mat." [--top-k 5]
"""

from __future__ import annotations

import argparse
import json
import sys

from litebert.checks import AT_LEAST_1, FRACTION
from litebert.cli import add_common_arguments, add_runtime_arguments, parse_columns, ranged
from litebert.terminal import json_line


def configure_command(name: str, parser: argparse.ArgumentParser) -> None:
    {"evaluate": _configure_evaluate, "predict": _configure_predict, "embed": _configure_embed,
     "fill-mask": _configure_fill_mask}[name](parser)


def run_command(name: str, args: argparse.Namespace) -> int:
    import torch

    if getattr(args, "threads", None) is not None:
        torch.set_num_threads(args.threads)
    return {"evaluate": run_evaluate, "predict": run_predict, "embed": run_embed,
            "fill-mask": run_fill_mask}[name](args)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true", help="--output exists: replace it")
    p.add_argument("--batch-size", type=int, help="inputs per batch (default: 64)")
    p.add_argument("--seq-len", type=int,
                   help="maximum pieces per input (default: the task's, capped by the model's "
                        "max_position_embeddings)")
    add_common_arguments(p)


_TASK_MODEL = ("a folder written by `litebert finetune`, or an ALBERT task model saved by HF transformers (its "
               "config.json names the head and the labels)")
_TOKENIZER = "tokenizer folder (spiece.model or vocab.txt) or file (default: the --model folder's)"


def _tokenizer(p: argparse.ArgumentParser, text: str = _TOKENIZER) -> None:
    """``--tokenizer`` and ``--allow-tokenizer-mismatch`` (`litebert.pairing.check_tokenizer`)."""
    p.add_argument("--tokenizer", help=text)
    p.add_argument("--allow-tokenizer-mismatch", action="store_true",
                   help="use a --tokenizer whose pieces differ from the --model folder's own tokenizer's (same size "
                        "only), with a warning instead of refusing it")


def _configure_evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=_TASK_MODEL)
    p.add_argument("--data", required=True, help="labelled file (or a data folder or dataset id: its dev split); "
                                                 "local or a URL")
    p.add_argument("--output", help="also write one row per example here (JSONL): id, gold label, prediction, "
                                    "probabilities")
    p.add_argument("--columns", help="the data's columns, text_a=COL[,text_b=COL][,label=COL], as for finetune "
                                     "(default: those the folder was fine-tuned with)")
    _tokenizer(p)
    ranged(p.add_argument("--null-threshold", type=float, help="SQuAD v2: no-answer probability threshold "
                                                               "(default: the one chosen on dev during finetune)"),
           FRACTION)
    p.add_argument("--allow-incomplete", action="store_true",
                   help="use a folder whose fine-tuning did not finish (its best model so far)")
    _qa_decoding(p)
    _common(p)


def _qa_decoding(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qa-decoding", choices=("official", "hf"), default="official",
                   help="SQuAD folders: how answers are read from the logits: official (run_squad's, the paper's "
                        "protocol) or hf (transformers' question-answering pipeline); see docs/finetune.md")


def _configure_predict(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=_TASK_MODEL)
    p.add_argument("--input", required=True, help="JSONL: one object per line (see docs/finetune.md); or a table "
                                                   "(.parquet, .arrow, a datasets folder): one object per row")
    p.add_argument("--output", required=True, help="JSONL: each input object with the prediction added")
    _tokenizer(p)
    p.add_argument("--allow-incomplete", action="store_true",
                   help="use a folder whose fine-tuning did not finish (its best model so far)")
    p.add_argument("--batch-tokens", type=int,
                   help="batches by size: up to --batch-size inputs, and at most this many tokens (inputs x the "
                        "longest), so short texts come many to a batch (e.g. 32768 on a GPU; default: off)")
    _qa_decoding(p)
    p.add_argument("--aggregation-strategy", choices=("none", "simple", "first", "average", "max"),
                   help="token-classification folders: answer entities as transformers' NER pipeline does with "
                        "this aggregation_strategy (default: a tag per word)")
    _common(p)


def _configure_embed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="any litebert/HF ALBERT folder")
    p.add_argument("--input", required=True, help="text (one a line), .jsonl or a table (.parquet, .arrow, a "
                                                   "datasets folder) with the text under --text-field; gzip, xz, bz2 "
                                                   "and zstd are read transparently")
    p.add_argument("--output", required=True, help=".npy file, float32 [N, hidden_size]")
    _tokenizer(p)
    p.add_argument("--text-field", default="text", help="JSONL field or table column holding the text")
    p.add_argument("--pooling", choices=["mean", "pooled", "cls"], default="mean",
                   help="mean of the last layer over real tokens, the pooler output (tanh dense on [CLS]), or the "
                        "raw [CLS] vector")
    _common(p)


def run_evaluate(args: argparse.Namespace) -> int:
    from litebert.inference.predict import evaluate

    result = evaluate(args.model, args.data, output=args.output, columns=parse_columns(args.columns),
                      tokenizer=args.tokenizer, allow_tokenizer_mismatch=args.allow_tokenizer_mismatch,
                      null_threshold=args.null_threshold,
                      allow_incomplete=args.allow_incomplete,
                      batch_size=64 if args.batch_size is None else args.batch_size, seq_len=args.seq_len,
                      device=args.device, precision=args.precision, attention=args.attention,
                      encoding_errors=args.encoding_errors, progress=args.progress, overwrite=args.overwrite,
                      qa_decoding=args.qa_decoding)
    decoding = {"qa_decoding": result.qa_decoding} if result.qa_decoding else {}
    print(json.dumps({"task": result.task, "data": str(result.data), **decoding, **result.metrics}, indent=2))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from litebert.inference.predict import predict

    result = predict(args.model, args.input, args.output, tokenizer=args.tokenizer,
                     allow_tokenizer_mismatch=args.allow_tokenizer_mismatch,
                     allow_incomplete=args.allow_incomplete, batch_size=args.batch_size, batch_tokens=args.batch_tokens,
                     seq_len=args.seq_len, device=args.device, precision=args.precision, attention=args.attention,
                     encoding_errors=args.encoding_errors, progress=args.progress, overwrite=args.overwrite,
                     qa_decoding=args.qa_decoding, aggregation_strategy=args.aggregation_strategy)
    decoded = f" (answers decoded the {result.qa_decoding} way)" if result.qa_decoding else ""
    print(f"wrote {result.count} predictions to {result.output}{decoded}")
    return 0


def run_embed(args: argparse.Namespace) -> int:
    from litebert.inference.predict import embed

    result = embed(args.model, args.input, args.output, text_field=args.text_field, pooling=args.pooling,
                   tokenizer=args.tokenizer, allow_tokenizer_mismatch=args.allow_tokenizer_mismatch,
                   batch_size=64 if args.batch_size is None else args.batch_size,
                   seq_len=args.seq_len,
                   device=args.device, precision=args.precision, attention=args.attention,
                   encoding_errors=args.encoding_errors, progress=args.progress, overwrite=args.overwrite)
    print(f"wrote {result.shape[0]} x {result.shape[1]} {result.pooling} embeddings to {result.output}")
    return 0


def _configure_fill_mask(p: argparse.ArgumentParser) -> None:
    """``litebert fill-mask``: the flags of `fill_mask`."""
    p.add_argument("--model", required=True, help="a folder with an MLM head (a pretraining run's model, an HF "
                                                   "AlbertForMaskedLM folder) or a hub id")
    p.add_argument("--text", help='one text holding [MASK], e.g. "The [MASK] sat on the mat."; prints the answer')
    p.add_argument("--input", help="JSONL (or a table): the text of each record under --text-field")
    p.add_argument("--output", help="JSONL: each --input record with 'predictions' added (default: printed)")
    ranged(p.add_argument("--top-k", type=int, default=5, help="pieces per mask"), AT_LEAST_1)
    _tokenizer(p, "tokenizer folder or file (default: the --model folder's)")
    p.add_argument("--text-field", default="text", help="field or column holding the text")
    p.add_argument("--batch-size", type=int, default=32, help="texts per batch")
    p.add_argument("--batch-tokens", type=int, help="batches also hold at most this many tokens (default: off)")
    add_runtime_arguments(p)
    p.add_argument("--encoding-errors", default="strict", choices=("strict", "replace"),
                   help="invalid UTF-8 in --input: stop with file, line and byte offset, or substitute U+FFFD")
    p.add_argument("--overwrite", action="store_true", help="--output exists: replace it")


def run_fill_mask(args: argparse.Namespace) -> int:
    from litebert.inference.fill_mask import fill_mask

    result = fill_mask(args.model, args.text, input=args.input, output=args.output, top_k=args.top_k,
                       tokenizer=args.tokenizer, allow_tokenizer_mismatch=args.allow_tokenizer_mismatch,
                       text_field=args.text_field, batch_size=args.batch_size,
                       batch_tokens=args.batch_tokens, device=args.device, precision=args.precision,
                       attention=args.attention, encoding_errors=args.encoding_errors, overwrite=args.overwrite)
    if args.text is not None:
        print(json_line(result.predictions[0], indent=2))
    elif result.output is None:
        for row in result.predictions:
            print(json_line(row))
    else:
        print(f"wrote {result.count} answers to {result.output}", file=sys.stderr)
    return 0
