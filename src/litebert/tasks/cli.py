"""``litebert finetune | evaluate | predict | embed``.

    litebert finetune TASK --model DIR --data PATH --out DIR      # TASK: a GLUE task, squad1, squad2, race, mc,
                                                                  # conll, classify, regress, sentiment
        [--device cuda --precision bf16 --batch-size 32 --micro-batch 8] [--resume]   # also under torchrun
        [--lr 1e-5,3e-5,1e-4]                                     # a learning-rate grid, chosen on dev
    litebert evaluate --model OUT --data PATH [--output rows.jsonl] [--columns ...] [--device cuda]
                      [--qa-decoding official|hf]
    litebert predict  --model OUT --input in.jsonl --output out.jsonl [--device cuda --precision bf16]
                      [--qa-decoding official|hf] [--aggregation-strategy none|simple|first|average|max]
    litebert embed    --model DIR --input texts.{txt,jsonl} --output emb.npy [--pooling mean|pooled]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from litebert.checks import AT_LEAST_1, FRACTION
from litebert.cli import add_config_arguments, add_runtime_arguments, given, ranged
from litebert.errors import ConfigError


def configure_command(name: str, parser: argparse.ArgumentParser) -> None:
    {"finetune": _configure_finetune, "evaluate": _configure_evaluate, "predict": _configure_predict,
     "embed": _configure_embed}[name](parser)


def run_command(name: str, args: argparse.Namespace) -> int:
    import torch

    if getattr(args, "threads", None) is not None:
        torch.set_num_threads(args.threads)
    return {"finetune": run_finetune, "evaluate": run_evaluate, "predict": run_predict, "embed": run_embed}[name](args)



def _common(p: argparse.ArgumentParser, training: bool = False) -> None:
    if not training:  # finetune's come from FinetuneConfig (and its --overwrite replaces the whole folder)
        p.add_argument("--overwrite", action="store_true", help="--output exists: replace it")
        p.add_argument("--batch-size", type=int, help="inputs per batch (default: 64)")
        p.add_argument("--seq-len", type=int,
                       help="maximum pieces per input (default: the task's, capped by the model's "
                            "max_position_embeddings)")
    p.add_argument("--encoding-errors", default="strict", choices=("strict", "replace"),
                   help="invalid UTF-8 in the data: stop with file, line and byte offset, or substitute U+FFFD")
    ranged(p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)"), AT_LEAST_1)
    add_runtime_arguments(p)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")


def _configure_finetune(p: argparse.ArgumentParser) -> None:
    from litebert.tasks.finetune import FinetuneConfig

    p.add_argument("task", help="cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli, squad1, squad2, race, mc, "
                                "conll, classify, regress, sentiment")
    p.add_argument("--model", required=True, help="pretrained model folder (litebert or HF ALBERT)")
    p.add_argument("--data", required=True, help="a data folder (train/dev files by their usual names; a datasets "
                                                 "DatasetDict folder) or the training file (.parquet/.arrow and "
                                                 "datasets folders too); local or a URL (s3://, https://, ...); or "
                                                 "a dataset id, ORG/NAME[:CONFIG[:SPLIT]] (a path that exists wins)")
    p.add_argument("--dev", help="the dev file, or the name of a split of --data (default: found by name in the "
                                 "--data folder or dataset)")
    p.add_argument("--out", required=True, help="output folder: the best dev checkpoint + tokenizer + finetune.json")
    p.add_argument("--tokenizer", help="tokenizer folder (spiece.model or vocab.txt) or file (default: the "
                                       "--model folder)")
    p.add_argument("--columns", help="your own data: text_a=COL[,text_b=COL][,label=COL]")
    p.add_argument("--labels", help="comma-separated label set (default: the task's, or those seen in training)")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep --out/checkpoints when the run ends (default: deleted once the run is complete)")
    p.add_argument("--overwrite", action="store_true",
                   help="--out holds a fine-tuned model: replace it (only the files `finetune` writes are deleted)")
    p.add_argument("--resume", action="store_true",
                   help="continue the stopped run in --out from its newest checkpoint (same command otherwise)")
    _common(p, training=True)
    from litebert.push import add_arguments as add_hub_arguments

    add_hub_arguments(p)
    p.add_argument("--lr", type=_rates, metavar="LR[,LR...]",
                   help="peak learning rate (default: the preset's); several, comma-separated: a grid, one run each "
                        "in --out/lr-RATE/, the best on dev copied into --out and every rate's score in "
                        "--out/grid.json")
    add_config_arguments(p, FinetuneConfig, skip=("precision", "lr"), title="hyper-parameters (the task preset's "
                                                                              "unless given)")


def _rates(text: str) -> list[float]:
    try:
        rates = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected a number or comma-separated numbers") \
            from None
    if not rates:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected a number or comma-separated numbers")
    return rates


def flag_names(args: argparse.Namespace) -> dict[str, str]:
    """Errors about ``lr_grid`` (finetune's grid of rates) name the flag that gave it."""
    return {"lr_grid": "--lr"}


_TASK_MODEL = ("a folder written by `litebert finetune`, or an ALBERT task model saved by HF transformers (its "
               "config.json names the head and the labels)")
_TOKENIZER = "tokenizer folder (spiece.model or vocab.txt) or file (default: the --model folder's)"


def _configure_evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=_TASK_MODEL)
    p.add_argument("--data", required=True, help="labelled file (or a data folder or dataset id: its dev split); "
                                                 "local or a URL")
    p.add_argument("--output", help="also write one row per example here (JSONL): id, gold label, prediction, "
                                    "probabilities")
    p.add_argument("--columns", help="the data's columns, text_a=COL[,text_b=COL][,label=COL], as for finetune "
                                     "(default: those the folder was fine-tuned with)")
    p.add_argument("--tokenizer", help=_TOKENIZER)
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
    p.add_argument("--tokenizer", help=_TOKENIZER)
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
    p.add_argument("--tokenizer", help=_TOKENIZER)
    p.add_argument("--text-field", default="text", help="JSONL field or table column holding the text")
    p.add_argument("--pooling", choices=["mean", "pooled", "cls"], default="mean",
                   help="mean of the last layer over real tokens, the pooler output (tanh dense on [CLS]), or the "
                        "raw [CLS] vector")
    _common(p)


def _parse_columns(spec: str | None) -> dict[str, str]:
    if not spec:
        return {}
    out = {}
    for part in spec.split(","):
        key, sep, col = part.partition("=")
        if not sep or key not in ("text_a", "text_b", "label"):
            raise ConfigError(f"--columns: expected text_a=COL[,text_b=COL][,label=COL], got {part!r}")
        out[key] = col
    return out


def run_finetune(args: argparse.Namespace) -> int:
    from litebert.push import publishing
    from litebert.tasks.finetune import FinetuneConfig, finetune

    from litebert.tasks.grid import folder_name

    rates = args.lr or []
    fields = {k: v for k, v in given(args, FinetuneConfig.__dataclass_fields__).items() if k != "lr"}
    config = FinetuneConfig(**fields, **({"lr": rates[0]} if len(rates) == 1 else {}))
    grid = rates if len(rates) > 1 else None
    publish = publishing(args)
    labels = args.labels.split(",") if args.labels else None
    result = finetune(args.task, args.model, args.data, args.out, dev=args.dev, tokenizer=args.tokenizer,
                      columns=_parse_columns(args.columns), labels=labels, config=config, resume=args.resume,
                      overwrite=args.overwrite, keep_checkpoints=args.keep_checkpoints, device=args.device,
                      attention=args.attention, encoding_errors=args.encoding_errors, progress=args.progress,
                      card=publish.card, push_to_hub=publish.repo_id, hub_private=publish.private, lr_grid=grid)
    if result.interrupted:
        run = Path(args.out) / folder_name(result.lr) if grid else Path(args.out)
        print(f"stopped at step {result.steps} (signal {result.signal}); checkpoint saved in {run / 'checkpoints'}; "
              f"continue with the same command and --resume", file=sys.stderr)
        return 130
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from litebert.tasks.predict import evaluate

    result = evaluate(args.model, args.data, output=args.output, columns=_parse_columns(args.columns),
                      tokenizer=args.tokenizer, null_threshold=args.null_threshold,
                      allow_incomplete=args.allow_incomplete, batch_size=64 if args.batch_size is None else args.batch_size, seq_len=args.seq_len,
                      device=args.device, precision=args.precision, attention=args.attention,
                      encoding_errors=args.encoding_errors, progress=args.progress, overwrite=args.overwrite,
                      qa_decoding=args.qa_decoding)
    print(json.dumps({"task": result.task, "data": str(result.data), **result.metrics}, indent=2))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from litebert.tasks.predict import predict

    result = predict(args.model, args.input, args.output, tokenizer=args.tokenizer,
                     allow_incomplete=args.allow_incomplete, batch_size=args.batch_size, batch_tokens=args.batch_tokens,
                     seq_len=args.seq_len, device=args.device, precision=args.precision, attention=args.attention,
                     encoding_errors=args.encoding_errors, progress=args.progress, overwrite=args.overwrite,
                     qa_decoding=args.qa_decoding, aggregation_strategy=args.aggregation_strategy)
    print(f"wrote {result.count} predictions to {result.output}")
    return 0


def run_embed(args: argparse.Namespace) -> int:
    from litebert.tasks.predict import embed

    result = embed(args.model, args.input, args.output, text_field=args.text_field, pooling=args.pooling,
                   tokenizer=args.tokenizer, batch_size=64 if args.batch_size is None else args.batch_size, seq_len=args.seq_len,
                   device=args.device, precision=args.precision, attention=args.attention,
                   encoding_errors=args.encoding_errors, progress=args.progress, overwrite=args.overwrite)
    print(f"wrote {result.shape[0]} x {result.shape[1]} {result.pooling} embeddings to {result.output}")
    return 0
