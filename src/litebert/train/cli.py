"""``litebert pretrain``: MLM + SOP/NSP pretraining of a preset on a prepared token store.

    litebert pretrain --preset albert-base-v2 --data STORE --eval-data HELDOUT --out RUN --recipe albert-paper
    litebert pretrain ... --resume                      # continue RUN from its newest valid checkpoint
    torchrun --nproc_per_node 8 -m litebert.cli pretrain ...   # the same command on 8 processes

Settings are layered: the recipe (``--recipe``), then a JSON file (``--config``, keys = the long flag names with
underscores, plus ``preset``/``recipe``), then the flags given on the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

from litebert.errors import ConfigError
from litebert.files import write_json
from litebert.train.config import RECIPES, TrainConfig, recipe

# flag -> (TrainConfig field, type, help). Defaults live in TrainConfig; None here means "not given".
_FLAGS = [
    ("--max-steps", "max_steps", int, "optimizer steps in the whole run (the schedule decays to 0 there)"),
    ("--global-batch", "global_batch", int, "sequences per optimizer step (paper: 4096)"),
    ("--micro-batch", "micro_batch", int, "sequences per forward/backward on one process"),
    ("--lr", "lr", float, "peak learning rate (paper: 0.00176 with LAMB)"),
    ("--warmup-steps", "warmup_steps", int, "linear warmup steps (official: 3125)"),
    ("--poly-power", "poly_power", float, "power of the polynomial decay (official: 1.0)"),
    ("--optimizer", "optimizer", str, "lamb | adamw"),
    ("--weight-decay", "weight_decay", float, "decoupled weight decay (official: 0.01)"),
    ("--clip-norm", "clip_norm", float, "global gradient-norm clipping (official: 1.0)"),
    ("--seq-len", "seq_len", int, "maximum sequence length (paper: 512)"),
    ("--objective", "objective", str, "sop (ALBERT) | nsp (BERT)"),
    ("--masked-lm-prob", "masked_lm_prob", float, "fraction of tokens masked (0.15)"),
    ("--max-predictions", "max_predictions", int, "masked positions per sequence (official: 20)"),
    ("--max-ngram", "max_ngram", int, "longest masked n-gram (paper: 3)"),
    ("--short-seq-prob", "short_seq_prob", float, "fraction of shorter sequences (0.1)"),
    ("--seed", "seed", int, "seed of data order, masking and initialisation"),
    ("--precision", "precision", str, "auto | fp32 | bf16 | fp16 (auto: fp32 on CPU, bf16/fp16 autocast on GPU)"),
    ("--eval-every", "eval_every", int, "evaluate every N steps (0: at start and end only)"),
    ("--eval-examples", "eval_examples", int, "held-out examples per evaluation"),
    ("--save-every", "save_every", int, "checkpoint every N steps (also on SIGTERM/SIGINT and at the end)"),
    ("--keep-last", "keep_last", int, "checkpoints to keep (0: all)"),
    ("--log-every", "log_every", int, "write train metrics every N steps"),
    ("--max-bad-steps", "max_bad_steps", int, "stop after this many non-finite steps in a row"),
    ("--peak-tflops", "peak_tflops", float, "peak TFLOP/s of one device, for the MFU estimate"),
]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.add_argument("--preset", help="model preset (see `litebert params`), e.g. albert-base-v2, tiny")
    parser.add_argument("--model-config", type=Path, help="a config.json (litebert or HF) instead of --preset")
    parser.add_argument("--data", type=Path, required=True, help="token store from `litebert data prepare`")
    parser.add_argument("--eval-data", type=Path, help="held-out token store for MLM/SOP evaluation")
    parser.add_argument("--no-verify-data", action="store_true",
                        help="skip the sha256 check of the stores' files before step 0 (for stores verified once "
                             "already; sizes, token ids, offsets and the manifest are still checked)")
    parser.add_argument("--out", type=Path, required=True, help="run folder: checkpoints, metrics, final model")
    parser.add_argument("--recipe", choices=sorted(RECIPES), help="named settings, e.g. albert-paper")
    parser.add_argument("--config", type=Path, help="JSON file of settings (overrides the recipe)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --out")
    parser.add_argument("--tokenizer", type=Path,
                        help="tokenizer folder/.model to save beside the final model (default: the one the store "
                             "--data was prepared with)")
    parser.add_argument("--device", help="cpu | cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, help="torch CPU threads per process")
    parser.add_argument("--gradient-checkpointing", action="store_true", default=None,
                        help="recompute activations in the backward pass (less memory, ~30%% more compute)")
    parser.add_argument("--compile", action="store_true", default=None,
                        help="torch.compile the model (inductor): compiles for ~10-60 s at the start, then faster "
                             "steps where it fuses the elementwise work (measured in docs/BENCHMARKS.md)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for flag, field, type_, help_ in _FLAGS:  # default None: "not given", so a recipe or --config can set it
        shown = f" (default: {defaults[field]}, or the recipe's)" if defaults[field] is not None else ""
        parser.add_argument(flag, dest=field, type=type_, default=None, help=help_ + shown)


def build_train_config(args: argparse.Namespace) -> tuple[TrainConfig, str | None]:
    """recipe < config file < command-line flags; returns the config and the preset name (if any)."""
    settings: dict = {}
    from_file = TrainConfig.from_json(args.config) if args.config else {}
    recipe_name = getattr(args, "recipe", None) or from_file.pop("recipe", None)
    if recipe_name:
        settings.update(recipe(recipe_name))
    preset = from_file.pop("preset", None)
    settings.update(from_file)
    for _, field, _, _ in _FLAGS:
        if getattr(args, field, None) is not None:
            settings[field] = getattr(args, field)
    if getattr(args, "gradient_checkpointing", None):
        settings["gradient_checkpointing"] = True
    if getattr(args, "compile", None):
        settings["compile"] = True
    return TrainConfig.from_dict(settings, source=str(args.config or "settings")), (args.preset or preset)


def _model_config(args, preset: str | None, vocab_size: int, seq_len: int):
    from litebert.config import AlbertConfig

    if args.model_config:
        cfg = AlbertConfig.from_json(args.model_config)
    elif preset:
        cfg = AlbertConfig.from_preset(preset)
    else:
        raise ConfigError("give the model shape: --preset NAME (or `preset` in --config) or --model-config FILE")
    if cfg.vocab_size != vocab_size:  # the store's tokenizer decides the vocabulary
        cfg = dataclasses.replace(cfg, vocab_size=vocab_size)
    if cfg.max_position_embeddings < seq_len:
        raise ConfigError(f"--seq-len {seq_len} exceeds the model's max_position_embeddings "
                          f"{cfg.max_position_embeddings}; lower --seq-len or use another preset")
    return cfg


def run(args: argparse.Namespace) -> int:
    import torch

    from litebert.data.pretraining import PretrainingDataset
    from litebert.heads import AlbertForPreTraining
    from litebert.train import distributed as D
    from litebert.train.loop import train

    cfg, preset = build_train_config(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    dist = D.from_environment(device=args.device)
    try:
        kw = dict(max_seq_length=cfg.seq_len, objective=cfg.objective, seed=cfg.seed, masked_lm_prob=cfg.masked_lm_prob,
                  max_predictions_per_seq=cfg.max_predictions, max_ngram=cfg.max_ngram,
                  short_seq_prob=cfg.short_seq_prob, verify=not args.no_verify_data)
        train_data = PretrainingDataset(args.data, **kw)
        eval_data = PretrainingDataset(args.eval_data, **kw) if args.eval_data else None
        if eval_data is not None and eval_data.facts.fingerprint != train_data.facts.fingerprint:
            raise ConfigError(f"--eval-data {args.eval_data} was prepared with another tokenizer than --data {args.data}")
        model_cfg = _model_config(args, preset, train_data.facts.vocab_size, cfg.seq_len)
        tokenizer = _tokenizer(args.tokenizer, train_data.store)  # checked now, saved beside the final model
        torch.manual_seed(cfg.seed)  # the same initial weights on every rank
        model = AlbertForPreTraining(model_cfg)
        if dist.is_main:
            args.out.mkdir(parents=True, exist_ok=True)
            write_json(args.out / "train_config.json",
                       {"preset": preset, **cfg.to_dict(), "data": str(args.data),
                        "eval_data": str(args.eval_data or ""), "world_size": dist.world_size})
            print(f"pretraining {preset or args.model_config}: {model.num_parameters():,} parameters, "
                  f"{train_data.num_examples:,} examples/epoch, global batch {cfg.global_batch} = "
                  f"{cfg.micro_batch} x {cfg.accumulation(dist.world_size)} x {dist.world_size} process(es)",
                  file=sys.stderr)
        summary = train(model, train_data, eval_data, cfg, args.out, dist=dist, resume=args.resume,
                        progress=not args.no_progress)
        if dist.is_main:
            if summary["interrupted"]:
                print(f"stopped at step {summary['step']} (signal {summary['signal']}); checkpoint saved in "
                      f"{args.out / 'checkpoints'}; continue with the same command and --resume", file=sys.stderr)
            else:
                if tokenizer is not None:
                    tokenizer.save_pretrained(args.out / "model")
                print(json.dumps({k: v for k, v in summary.items() if k != "signal"}, indent=2))
                print(f"final model (HF format): {args.out / 'model'}", file=sys.stderr)
                if tokenizer is None:
                    print(f"note: {args.out / 'model'} has no tokenizer: the store {args.data} holds none; pass "
                          f"--tokenizer to save one beside the model", file=sys.stderr)
        # Every rank waits here for rank 0's final writes, so no process tears the group down (or exits) while
        # another still talks to it: gloo aborts a peer whose connection closes mid-operation.
        D.barrier(dist)
        return 130 if summary["interrupted"] else 0
    finally:
        D.shutdown(dist)


def _tokenizer(path: Path | None, store):
    """The tokenizer to save beside the model: ``path`` (checked to be the store's) or the store's own (None if the
    store holds none)."""
    if path is None:
        return store.tokenizer()
    from litebert.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer.from_pretrained(path)
    store.check_tokenizer(tok)
    return tok


if __name__ == "__main__":  # python -m litebert.train.cli ... (litebert.cli is the usual entry point)
    from litebert.cli import Parser

    parser = Parser(prog="litebert pretrain")
    configure(parser)
    raise SystemExit(run(parser.parse_args()))
