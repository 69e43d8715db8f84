"""``litebert finetune | evaluate | predict | embed``.

    litebert finetune TASK --model DIR --data PATH --out DIR      # TASK: a GLUE task, squad1, squad2, race, mc,
                                                                  # conll, classify, regress, sentiment
        [--device cuda --precision bf16 --batch-size 32 --micro-batch 8] [--resume]   # also under torchrun
    litebert evaluate --model OUT --data PATH [--output rows.jsonl] [--columns ...] [--device cuda]
    litebert predict  --model OUT --input in.jsonl --output out.jsonl [--device cuda --precision bf16]
    litebert embed    --model DIR --input texts.{txt,jsonl} --output emb.npy [--pooling mean|pooled]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, replace
from pathlib import Path

from litebert.cli import at_least_1
from litebert.errors import ConfigError, DataError
from litebert.files import (OWNER_FILE, OutputError, check_apart, check_output_folder, clear_output_folder,
                            mark_output_folder, read_marker, remove_stale_temporaries, write_json)


def configure_command(name: str, parser: argparse.ArgumentParser) -> None:
    {"finetune": _configure_finetune, "evaluate": _configure_evaluate, "predict": _configure_predict,
     "embed": _configure_embed}[name](parser)


def run_command(name: str, args: argparse.Namespace) -> int:
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    return {"finetune": run_finetune, "evaluate": run_evaluate, "predict": run_predict, "embed": run_embed}[name](args)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=at_least_1,
                   help="batch size (default: finetune the preset's; otherwise 64)")
    p.add_argument("--seq-len", type=at_least_1,
                   help="maximum pieces per input (default: the preset's, capped by the model's "
                        "max_position_embeddings)")
    p.add_argument("--encoding-errors", default="strict", choices=("strict", "replace"),
                   help="invalid UTF-8 in the data: stop with file, line and byte offset, or substitute U+FFFD")
    p.add_argument("--threads", type=at_least_1, help="torch CPU threads (default: torch's)")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "fp16"),
                   help="fp32, or bf16/fp16 autocast (fp16 with loss scaling when training; GPU only); auto: fp32 on "
                        "CPU, bf16 on GPUs that have it, else fp16")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _configure_finetune(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli, squad1, squad2, race, mc, "
                                "conll, classify, regress, sentiment")
    p.add_argument("--model", required=True, help="pretrained model folder (litebert or HF ALBERT)")
    p.add_argument("--data", required=True, help="a data folder (train/dev files by their usual names) or the "
                                                 "training file")
    p.add_argument("--dev", help="the dev file (default: found in the --data folder)")
    p.add_argument("--out", required=True, help="output folder: the best dev checkpoint + tokenizer + finetune.json")
    p.add_argument("--tokenizer", help="tokenizer folder or .model file (default: the --model folder)")
    p.add_argument("--columns", help="your own data: text_a=COL[,text_b=COL][,label=COL]")
    p.add_argument("--labels", help="comma-separated label set (default: the task's, or those seen in training)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    p.add_argument("--max-steps", type=int, help="training steps (default: the preset's, or from --epochs)")
    p.add_argument("--epochs", type=float, help="passes over the training data (default: the preset's)")
    warmup = p.add_mutually_exclusive_group()
    warmup.add_argument("--warmup-steps", type=int, help="linear warmup steps (default: the preset's)")
    warmup.add_argument("--warmup-proportion", type=float, help="linear warmup as a proportion of the steps")
    p.add_argument("--eval-every", type=int, help="evaluate on dev every N steps, keeping the best checkpoint "
                                                  "(default: the preset's)")
    p.add_argument("--patience", type=int, help="stop after N evaluations without improvement (default: never)")
    p.add_argument("--seed", type=int, default=0, help="seed of the head's initialisation, dropout and batch order")
    p.add_argument("--dropout", type=float, help="hidden and classifier dropout (default: the model's)")
    p.add_argument("--max-train-examples", type=int, help="use only the first N training examples")
    p.add_argument("--max-eval-examples", type=int, help="use only the first N dev examples")
    p.add_argument("--pad-to-max", action="store_true", help="pad every batch to --seq-len (no dynamic padding, "
                                                             "no length grouping)")
    p.add_argument("--micro-batch", type=at_least_1,
                   help="examples per forward/backward on each process (default: --batch-size / processes); "
                        "gradients are accumulated over --batch-size / (micro batch x processes) micro-batches")
    p.add_argument("--log-every", type=at_least_1, default=10, help="a train record in metrics.jsonl every N steps")
    p.add_argument("--save-every", type=int, default=0,
                   help="also write a resumable checkpoint every N steps (always: at every evaluation and on "
                        "SIGTERM/SIGINT)")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep --out/checkpoints when the run ends (default: deleted once the run is complete)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--overwrite", action="store_true",
                       help="--out holds a fine-tuned model: replace it (only the files `finetune` writes are deleted)")
    again.add_argument("--resume", action="store_true",
                       help="continue the stopped run in --out from its newest checkpoint (same command otherwise)")
    _common(p)


_TASK_MODEL = ("a folder written by `litebert finetune`, or an ALBERT task model saved by HF transformers (its "
               "config.json names the head and the labels)")
_TOKENIZER = "tokenizer folder or .model file (default: the --model folder's)"


def _configure_evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=_TASK_MODEL)
    p.add_argument("--data", required=True, help="labelled file (or a data folder: its dev split)")
    p.add_argument("--output", help="also write one row per example here (JSONL): id, gold label, prediction, "
                                    "probabilities")
    p.add_argument("--columns", help="the data's columns, text_a=COL[,text_b=COL][,label=COL], as for finetune "
                                     "(default: those the folder was fine-tuned with)")
    p.add_argument("--tokenizer", help=_TOKENIZER)
    p.add_argument("--null-threshold", type=float, help="SQuAD v2: no-answer probability threshold "
                                                        "(default: the one chosen on dev during finetune)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="use a folder whose fine-tuning did not finish (its best model so far)")
    _common(p)


def _configure_predict(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=_TASK_MODEL)
    p.add_argument("--input", required=True, help="JSONL: one object per line (see docs/finetune.md)")
    p.add_argument("--output", required=True, help="JSONL: each input object with the prediction added")
    p.add_argument("--tokenizer", help=_TOKENIZER)
    p.add_argument("--allow-incomplete", action="store_true",
                   help="use a folder whose fine-tuning did not finish (its best model so far)")
    p.add_argument("--batch-tokens", type=at_least_1,
                   help="batches by size: up to --batch-size inputs, and at most this many tokens (inputs x the "
                        "longest), so short texts come many to a batch (e.g. 32768 on a GPU; default: off)")
    _common(p)


def _configure_embed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="any litebert/HF ALBERT folder")
    p.add_argument("--input", required=True, help="text (one a line) or .jsonl (the text under --text-field); "
                                                   "gzip/xz/bz2 are read transparently")
    p.add_argument("--output", required=True, help=".npy file, float32 [N, hidden_size]")
    p.add_argument("--tokenizer", help=_TOKENIZER)
    p.add_argument("--text-field", default="text", help="JSONL field holding the text")
    p.add_argument("--pooling", choices=["mean", "pooled", "cls"], default="mean",
                   help="mean of the last layer over real tokens, the pooler output (tanh dense on [CLS]), or the "
                        "raw [CLS] vector")
    _common(p)


def _inference_device(args: argparse.Namespace):
    """(device, autocast dtype or None) of --device and --precision, checked before anything is read."""
    from litebert.train.device import autocast_dtype, resolve_device

    device = resolve_device(args.device)
    return device, autocast_dtype(args.precision, device)


# ----------------------------------------------------------------------------------------------------- finetune
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


def _check_finetune_out(args: argparse.Namespace) -> str:
    """Check ``--out`` before anything is read or written. The plan: "new" (absent or empty), "overwrite" (holds a
    fine-tuned model to replace), "resume" (holds an unfinished run to continue) or "complete" (``--resume`` on a
    finished run: nothing to do)."""
    from litebert.finetune import runner

    out = Path(args.out)
    check_apart(out, {"--model": args.model, "--data": args.data, "--dev": args.dev, "--tokenizer": args.tokenizer})
    unmarked = (out.is_dir() and not (out / OWNER_FILE).exists() and (out / runner.META_FILE).is_file()
                and all(p.name in runner.FILES or re.fullmatch(r"\..+\.(?:tmp|old)-\d+", p.name)
                        for p in out.iterdir()))
    if not (unmarked or check_output_folder(out, runner.KIND)):  # unmarked: written before folders had a marker
        return "new"
    finished = bool(read_marker(out).get("complete")) if not unmarked else True
    if getattr(args, "resume", False):
        return "complete" if finished else "resume"
    if not getattr(args, "overwrite", False):
        state = "finished" if finished else "not finished"
        raise OutputError(f"--out {out} already holds a fine-tuned model ({state}); pass --overwrite to replace it"
                          f"{'' if finished else ', --resume to continue it'}, or choose another folder")
    foreign = sorted(p.name for p in out.iterdir() if p.name != OWNER_FILE and p.name not in runner.FILES
                     and not re.fullmatch(r"\..+\.(?:tmp|old)-\d+", p.name))
    if foreign:
        raise OutputError(f"--out {out} holds files `litebert finetune` does not write ({', '.join(foreign[:4])}); "
                          f"move them out first: --overwrite deletes only what litebert wrote")
    return "overwrite"


def _split_paths(data: str, dev: str | None) -> tuple[Path, Path | None]:
    from litebert.finetune.runner import find_split

    data_path = Path(data)
    if not data_path.exists():
        raise DataError(f"--data {data}: no such file or folder")
    train = data_path
    if data_path.is_dir():
        found = find_split(data_path, "train")
        if found is not None:
            train = found
    dev_path = Path(dev) if dev else (find_split(data_path, "dev") if data_path.is_dir() else None)
    return train, dev_path


def run_finetune(args: argparse.Namespace) -> int:
    from litebert.finetune.tasks import get_preset
    from litebert.train import distributed as D

    preset = get_preset(args.task)
    kind = preset.kind
    columns = _parse_columns(args.columns)
    out = Path(args.out)
    plan = _check_finetune_out(args)  # on every process, before any of them writes (joining the group syncs them)
    if plan == "complete":
        print(f"{out}: this fine-tuning run is finished; nothing to do", file=sys.stderr)
        return 0
    if args.save_every < 0:
        raise ConfigError(f"--save-every {args.save_every}: expected an integer >= 0")
    dist = D.from_environment(device=args.device)
    try:
        return _finetune(args, preset, kind, columns, out, plan, dist)
    finally:
        D.shutdown(dist)


def _finetune(args, preset, kind, columns, out: Path, plan: str, dist) -> int:
    """`run_finetune` once the output folder is checked and the process group joined."""
    import shutil

    import torch

    from litebert.finetune import runner
    from litebert.finetune.trainer import TrainArgs, choose_checkpoint, run_identity, steps_for, train
    from litebert.heads import head_name
    from litebert.tokenizer import AlbertTokenizer
    from litebert.train import distributed as D
    from litebert.train.device import autocast_dtype

    tok = AlbertTokenizer.from_pretrained(args.tokenizer or args.model)
    train_path, dev_path = _split_paths(args.data, args.dev)
    labels = args.labels.split(",") if args.labels else None
    train_ex = kind.read(train_path, labels, columns, args.encoding_errors)
    if args.max_train_examples:
        train_ex = train_ex[:args.max_train_examples]
    labels = labels or kind.collect_labels(train_ex, preset.labels)
    dev_ex = kind.read(dev_path, labels, columns, args.encoding_errors) if dev_path else None
    if dev_ex and args.max_eval_examples:
        dev_ex = dev_ex[:args.max_eval_examples]
    overrides = {}
    if args.dropout is not None:
        overrides = dict(hidden_dropout_prob=args.dropout, classifier_dropout_prob=args.dropout)
    torch.manual_seed(args.seed)  # the new head's initial weights come from --seed (the same on every process)
    model = kind.new_model(args.model, labels, **overrides)
    max_len = min(args.seq_len or preset.max_seq_length, model.config.max_position_embeddings)
    feats = kind.featurize(tok, train_ex, labels, max_len, training=True)
    dev_feats = kind.featurize(tok, dev_ex, labels, max_len) if dev_ex else None
    batch = args.batch_size or preset.batch_size
    if args.max_steps:
        steps = args.max_steps
    elif args.epochs or preset.train_steps is None:
        steps = steps_for(len(feats), batch, args.epochs or preset.epochs or 3.0)
    else:
        steps = preset.train_steps
    if args.warmup_steps is not None:
        warmup = args.warmup_steps
    elif args.warmup_proportion is not None or preset.warmup_steps is None:
        warmup = int((args.warmup_proportion if args.warmup_proportion is not None else preset.warmup_proportion)
                     * steps)
    else:
        warmup = preset.warmup_steps
    eval_every = args.eval_every or preset.eval_every
    targs = TrainArgs(lr=args.lr or preset.lr, batch_size=batch, train_steps=steps, warmup_steps=min(warmup, steps),
                      eval_every=eval_every, patience=args.patience, seed=args.seed,
                      group_by_length=not args.pad_to_max, pad_to=max_len if args.pad_to_max else None,
                      progress=not args.no_progress, micro_batch=args.micro_batch, precision=args.precision,
                      log_every=args.log_every, save_every=args.save_every)
    micro, accum = targs.accumulation(dist.world_size)  # refused here, before anything is written
    amp = autocast_dtype(args.precision, dist.device)
    identity = run_identity(model, targs, feats + (dev_feats or []),
                            {"task": preset.name, "labels": labels, "max_seq_length": max_len})
    found = choose_checkpoint(out, identity, dist) if plan == "resume" else None
    meta = {"task": preset.name, "kind": kind.name, "head": head_name(kind.head), "labels": labels,
            "metric": preset.metric,
            "preset": replace(preset, max_seq_length=max_len).to_json(), "columns": columns,
            "train": {**asdict(targs), "data": str(train_path), "dev": str(dev_path) if dev_path else None,
                      "base_model": str(args.model)}}

    def evaluate(m):
        metrics, _ = runner.evaluate(preset, m, tok, dev_ex, labels, max_len, features=dev_feats)
        return metrics

    def save(m, step, metrics):
        runner.save_finetuned(m, tok, out, {**meta, **kind.chosen_on_dev(metrics), "best_step": step,
                                            "dev_metrics": metrics, "complete": False})

    # every check passed: from here on --out is written (the marker first, so a killed run is recognised)
    if dist.is_main:
        if plan == "new" and args.resume:
            print(f"--resume: {out} holds no run yet; starting a new one", file=sys.stderr)
        if plan == "resume" and found is None:
            print(f"--resume: {out} holds no checkpoint yet; starting from step 0", file=sys.stderr)
        if plan == "overwrite" or (plan == "resume" and found is None):
            if not (out / OWNER_FILE).exists():
                mark_output_folder(out, runner.KIND, complete=False)
            clear_output_folder(out, runner.KIND, lambda name: name in runner.FILES)
        else:
            remove_stale_temporaries(out)
            if (out / "checkpoints").is_dir():
                remove_stale_temporaries(out / "checkpoints")
        mark_output_folder(out, runner.KIND, complete=False)
        print(f"{preset.name}: {len(train_ex)} training examples ({len(feats)} inputs), "
              f"{len(dev_ex) if dev_ex else 0} dev; {steps} steps of {batch} = {micro} x {accum} x "
              f"{dist.world_size} process(es), lr {targs.lr:g}, warmup {targs.warmup_steps}; on {dist.device}"
              f"{f' in {amp}'.replace('torch.', '') if amp is not None else ''}; hyperparameters from {preset.source}"
              f"{f'; resuming at step {found[0]}' if found else ''}")
    D.barrier(dist)
    result = train(model, feats, targs, evaluate if dev_ex else None, preset.metric, save, tok.pad_token_id,
                   log=print if dist.is_main else (lambda _: None), out_dir=out, dist=dist, identity=identity,
                   resume_from=found, keep_checkpoints=args.keep_checkpoints)
    if result["interrupted"]:
        if dist.is_main:
            print(f"stopped at step {result['steps']} (signal {result['signal']}); checkpoint saved in "
                  f"{out / 'checkpoints'}; continue with the same command and --resume", file=sys.stderr)
        D.barrier(dist)
        return 130
    if dist.is_main:
        best = result["best_metrics"] or {}
        write_json(out / runner.META_FILE, {**meta, **kind.chosen_on_dev(best), "best_step": result["best_step"],
                                            "dev_metrics": best, "complete": True})
        mark_output_folder(out, runner.KIND, complete=True)
        if not args.keep_checkpoints:
            shutil.rmtree(out / "checkpoints", ignore_errors=True)
        if dev_ex:
            print(f"best dev {preset.metric} {best[preset.metric]:.4f} at step {result['best_step']}"
                  f"{' (stopped early)' if result['stopped_early'] else ''}; saved to {out}")
        else:
            print(f"no dev set: saved the final model to {out}")
    D.barrier(dist)  # no process leaves while rank 0 still writes
    return 0


# ----------------------------------------------------------------------------------------------------- evaluate
def run_evaluate(args: argparse.Namespace) -> int:
    from litebert.finetune import runner
    from litebert.finetune.predict import write_jsonl

    device, amp = _inference_device(args)
    columns = _parse_columns(args.columns)
    runner.check_complete(args.model, args.allow_incomplete)
    preset, model, tok, meta = runner.load_finetuned(args.model, args.tokenizer)
    path = Path(args.data)
    if path.is_dir():
        path = runner.find_split(path, "dev") or runner.find_split(path, "test")
        if path is None:
            raise DataError(f"--data {args.data}: no dev/valid file in this folder")
    labels = meta.get("labels")
    examples = preset.kind.read(path, labels, columns or meta.get("columns"), args.encoding_errors)
    unlabelled = [e for e in examples if getattr(e, "label", 0) is None or getattr(e, "labels", 0) is None]
    if unlabelled:
        raise DataError(f"{path}: {len(unlabelled)} example(s) have no label (a test file, or AX?); "
                        f"`evaluate` needs labels — use `litebert predict` for unlabelled data")
    max_len = min(args.seq_len or preset.max_seq_length, model.config.max_position_embeddings)
    threshold = args.null_threshold if args.null_threshold is not None else meta.get("null_threshold")
    model.to(device)
    metrics, rows = runner.evaluate_rows(preset, model, tok, examples, labels, max_len, args.batch_size or 64,
                                         null_threshold=threshold, progress=not args.no_progress, amp=amp)
    print(json.dumps({"task": preset.name, "data": str(path), **metrics}, indent=2))
    if args.output:
        write_jsonl(args.output, rows)
    return 0


# ------------------------------------------------------------------------------------------------------ predict
def run_predict(args: argparse.Namespace) -> int:
    from litebert.finetune import runner
    from litebert.finetune.predict import predict_file

    device, amp = _inference_device(args)
    runner.check_complete(args.model, args.allow_incomplete)
    rows = args.batch_size or (args.batch_tokens or 64)  # with --batch-tokens alone, the tokens decide
    n = predict_file(args.model, args.input, args.output, args.seq_len, rows,
                     not args.no_progress, args.encoding_errors, device=device, amp=amp, tokenizer=args.tokenizer,
                     max_tokens=args.batch_tokens)
    print(f"wrote {n} predictions to {args.output}")
    return 0


# -------------------------------------------------------------------------------------------------------- embed
def run_embed(args: argparse.Namespace) -> int:
    from litebert.finetune.predict import embed_file

    device, amp = _inference_device(args)
    out = embed_file(args.model, args.input, args.output, args.text_field, args.pooling, args.seq_len,
                     args.batch_size or 64, args.encoding_errors, device=device, amp=amp, tokenizer=args.tokenizer)
    print(f"wrote {out.shape[0]} x {out.shape[1]} {args.pooling} embeddings to {args.output}")
    return 0
