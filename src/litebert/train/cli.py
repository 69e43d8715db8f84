"""``litebert pretrain``: MLM + SOP/NSP pretraining of a preset on a prepared token store.

    litebert pretrain --preset albert-base-v2 --data STORE --eval-data HELDOUT --out RUN --recipe albert-paper
    litebert pretrain ... --resume                      # continue RUN from its newest valid checkpoint
    litebert pretrain --init-from MODEL --data STORE --out RUN ...   # continued pretraining from a model folder
    torchrun --nproc_per_node 8 -m litebert.cli pretrain ...   # the same command on 8 processes

Settings are layered: the recipe (``--recipe``), then a JSON file (``--config``, keys = the long flag names with
underscores, plus ``preset``/``recipe``), then the flags given on the command line.

The run folder (``--out``) is checked before anything is written, so a refused command changes nothing there: a
folder holding a run needs ``--resume`` (continue) or ``--overwrite`` (start again); a folder holding anything else
is refused; ``--resume`` checks the checkpoint, the settings and the metrics files first (docs/pretraining.md, "Run
folders").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

from litebert.errors import CheckpointError, ConfigError, LitebertError
from litebert.files import (OWNER_FILE, OutputError, check_apart, check_output_folder, clear_output_folder,
                            mark_output_folder, read_marker, remove_stale_temporaries, write_json)
from litebert.train.config import RECIPES, TrainConfig, recipe

RUN_KIND = "pretraining-run"
# What a pretraining run writes in its folder (besides the marker): all that --overwrite deletes.
RUN_ENTRIES = {"train_config.json", "metrics.jsonl", "train.csv", "eval.csv", "tensorboard", "checkpoints", "model"}
# Temporaries of checkpoint writes made before they went through files.atomic_write (step-00000010.pt.tmp1234).
_OLD_TEMPORARY = re.compile(r"^step-\d{8,}\.pt(?:\.sha256)?\.tmp\d+$")

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
    ("--objective", "objective", str, "sop (ALBERT) | nsp (BERT) | none (MLM only)"),
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
    parser.add_argument("--init-from", type=Path, metavar="MODEL_DIR",
                        help="continued pretraining: start from this model folder's config, weights and tokenizer "
                             "(a run's model/, a save_pretrained folder of litebert or HF, a `litebert convert` "
                             "folder); optimizer and schedule start fresh")
    parser.add_argument("--model-config", type=Path, help="a config.json (litebert or HF) instead of --preset")
    parser.add_argument("--data", type=Path, required=True, help="token store from `litebert data prepare`")
    parser.add_argument("--eval-data", type=Path, help="held-out token store for MLM/SOP evaluation")
    parser.add_argument("--no-verify-data", action="store_true",
                        help="skip the sha256 check of the stores' files before step 0 (for stores verified once "
                             "already; sizes, token ids, offsets and the manifest are still checked)")
    parser.add_argument("--out", type=Path, required=True, help="run folder: checkpoints, metrics, final model")
    parser.add_argument("--recipe", choices=sorted(RECIPES), help="named settings, e.g. albert-paper")
    parser.add_argument("--config", type=Path, help="JSON file of settings (overrides the recipe)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its newest valid checkpoint (a new run when --out is "
                             "absent or empty; a finished run is left as it is)")
    parser.add_argument("--overwrite", action="store_true",
                        help="--out holds a run: delete what it wrote (checkpoints, metrics, model) and start again")
    parser.add_argument("--tokenizer", type=Path,
                        help="tokenizer folder/.model to save beside the final model (default: the one the store "
                             "--data was prepared with)")
    shape = parser.add_argument_group("model shape", "override the shape of --preset / --model-config (the paper's "
                                      "ablations: litebert pretrain --preset albert-base --sharing none ...)")
    shape.add_argument("--sharing", choices=("all", "attention", "ffn", "none"),
                       help="cross-layer sharing: all (ALBERT), attention, ffn, none (BERT-like)")
    shape.add_argument("--embedding-size", type=int, help="E, the factorized embedding size")
    shape.add_argument("--hidden-size", type=int, help="H; attention heads H/64 and FFN size 4H follow (the "
                                                       "paper's rule) unless given")
    shape.add_argument("--num-layers", type=int, help="number of layers (depth)")
    shape.add_argument("--num-heads", type=int, help="attention heads")
    shape.add_argument("--intermediate-size", type=int, help="FFN inner size")
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


def _max_steps_given(args: argparse.Namespace) -> int | None:
    """``max_steps`` as the command gives it (--max-steps, else the --config file), None when it gives none: then a
    resumed run keeps the max_steps it was started with (a recipe's value does not move the end of a run)."""
    if args.max_steps is not None:
        return args.max_steps
    value = TrainConfig.from_json(args.config).get("max_steps") if args.config else None
    return value if isinstance(value, int) else None


def shape_overrides(args: argparse.Namespace) -> dict:
    """AlbertConfig fields the shape flags set. --hidden-size H brings H/64 heads and a 4H FFN (the paper's
    settings, Table 1) unless --num-heads / --intermediate-size are given."""
    out = {}
    for flag, field in (("sharing", "sharing"), ("embedding_size", "embedding_size"), ("hidden_size", "hidden_size"),
                        ("num_layers", "num_hidden_layers"), ("num_heads", "num_attention_heads"),
                        ("intermediate_size", "intermediate_size")):
        value = getattr(args, flag, None)
        if value is not None:
            if flag != "sharing" and value < 1:
                raise ConfigError(f"--{flag.replace('_', '-')} {value}: must be >= 1")
            out[field] = value
    if "hidden_size" in out:
        out.setdefault("num_attention_heads", max(1, out["hidden_size"] // 64))
        out.setdefault("intermediate_size", 4 * out["hidden_size"])
    return out


def _model_config(args, preset: str | None, vocab_size: int, seq_len: int, init=None):
    from litebert.config import AlbertConfig

    if init is not None:  # the model's own config; --preset / --model-config may only repeat it
        from litebert.train.init_from import check_model_flags

        if args.model_config:
            check_model_flags(init, AlbertConfig.from_json(args.model_config), f"--model-config {args.model_config}")
        elif preset:
            check_model_flags(init, AlbertConfig.from_preset(preset), f"--preset {preset}")
        cfg = init.config
    elif args.model_config:
        cfg = AlbertConfig.from_json(args.model_config)
    elif preset:
        cfg = AlbertConfig.from_preset(preset)
    else:
        raise ConfigError("give the model shape: --preset NAME (or `preset` in --config) or --model-config FILE")
    shape = shape_overrides(args)
    if shape and init is not None:
        changed = {k: v for k, v in shape.items() if getattr(cfg, k) != v}
        if changed:
            k, v = next(iter(changed.items()))
            raise ConfigError(f"--init-from {args.init_from}: the model's {k} is {getattr(cfg, k)!r}, the flags ask "
                              f"for {v!r}; continued pretraining keeps the model's shape (drop the shape flags)")
    elif shape:
        cfg = dataclasses.replace(cfg, **shape)
    if cfg.vocab_size != vocab_size:  # the store's tokenizer decides the vocabulary
        cfg = dataclasses.replace(cfg, vocab_size=vocab_size)
    if cfg.max_position_embeddings < seq_len:
        raise ConfigError(f"--seq-len {seq_len} exceeds the model's max_position_embeddings "
                          f"{cfg.max_position_embeddings}; lower --seq-len or use another preset")
    return cfg


def plan_run(args: argparse.Namespace, max_steps: int | None = None) -> str:
    """What ``pretrain`` will do with ``--out``, decided without writing anything: "new" (absent or empty folder),
    "resume", "reopen" (a finished run given --resume and a larger ``max_steps``: it is extended), "overwrite" or
    "complete" (a finished run given --resume). ``max_steps``: the value the settings give, None when they give
    none. Raises `OutputError` / `ConfigError` for a folder it must not touch."""
    out = args.out
    check_apart(out, {"--data": args.data, "--eval-data": args.eval_data, "--config": args.config,
                      "--model-config": args.model_config, "--tokenizer": args.tokenizer,
                      "--init-from": getattr(args, "init_from", None)})
    if args.resume and args.overwrite:
        raise ConfigError("--resume continues the run in --out and --overwrite deletes it: give one of them")
    if not (_unmarked_run(out) or check_output_folder(out, RUN_KIND)):
        return "new"
    marker = read_marker(out)
    if args.overwrite:
        foreign = sorted(p.name for p in out.iterdir() if p.name != OWNER_FILE and not _owned(p.name))
        if foreign:
            raise OutputError(f"--out {out} holds files a pretraining run does not write ({', '.join(foreign[:4])}"
                              f"{', ...' if len(foreign) > 4 else ''}); move them out first: --overwrite deletes "
                              f"only what litebert wrote")
        return "overwrite"
    if not args.resume:
        state = "finished" if marker.get("complete") else "not finished"
        raise OutputError(f"--out {out} already holds a pretraining run ({state}, step {marker.get('step', '?')}); "
                          f"continue it with --resume, start again with --overwrite (deletes its checkpoints, metrics "
                          f"and model), or choose another folder")
    reopen = False
    if marker.get("complete"):
        done = marker.get("step")
        if max_steps is None or not isinstance(done, int) or max_steps == done:
            return "complete"
        if max_steps < done:
            raise ConfigError(f"--max-steps {max_steps} is below the step the finished run in --out {out} has "
                              f"reached ({done}); give --max-steps {done + 1} or more to extend it")
        reopen = True
    from litebert.train.metrics import check_metrics

    check_metrics(out)
    return "reopen" if reopen else "resume"


def _unmarked_run(out: Path) -> bool:
    """A run folder written before run folders carried a marker: only names a run writes, with its settings and
    checkpoints. It is treated as a run (and marked at the next start)."""
    if not out.is_dir() or (out / OWNER_FILE).exists():
        return False
    names = {p.name for p in out.iterdir()}
    return {"train_config.json", "checkpoints"} <= names and all(_owned(n) for n in names)


def _owned(name: str) -> bool:
    return name in RUN_ENTRIES or bool(re.match(r"^\..+\.(?:tmp|old)-\d+$", name))


def _remove_killed_writes(out: Path) -> None:
    """Temporaries that killed runs left in the run folder (any depth), old-style checkpoint temporaries included."""
    remove_stale_temporaries(out, recursive=True)
    ckpts = out / "checkpoints"
    if ckpts.is_dir():
        for p in ckpts.iterdir():
            if _OLD_TEMPORARY.match(p.name) and p.is_file():
                p.unlink(missing_ok=True)


def _choose_checkpoint(out: Path, model, cfg: TrainConfig, train_data, dist, init: dict | None = None,
                       keep_max_steps: bool = False) -> tuple[tuple | None, TrainConfig]:
    """Rank 0 picks the newest checkpoint that verifies and checks it against this command's settings, before
    anything is written; every rank raises if it refuses. Returns the checkpoint (None: none yet, a new run) and the
    config to train with: with ``keep_max_steps`` (the command gives no max_steps), the checkpoint's max_steps."""
    from litebert.train import distributed as D
    from litebert.train.checkpoint import check_compatible, resume_checkpoint, saved_max_steps
    from litebert.train.loop import run_identity

    def check(found: tuple) -> None:
        nonlocal cfg
        if keep_max_steps and saved_max_steps(found[2]) is not None:
            cfg = dataclasses.replace(cfg, max_steps=saved_max_steps(found[2]))
        check_compatible(found[2], run_identity(model, cfg, train_data, init), found[1])

    found = resume_checkpoint(out / "checkpoints", check, dist)
    return found, dataclasses.replace(cfg, max_steps=D.broadcast_int(cfg.max_steps, dist))


def run(args: argparse.Namespace) -> int:
    import torch

    from litebert.data.pretraining import PretrainingDataset
    from litebert.heads import AlbertForPreTraining
    from litebert.train import distributed as D
    from litebert.train.loop import train

    args.overwrite = getattr(args, "overwrite", False)
    cfg, preset = build_train_config(args)
    max_steps = _max_steps_given(args)
    plan = plan_run(args, max_steps)
    if plan == "complete":
        marker = read_marker(args.out)
        print(f"{args.out}: the run is finished (step {marker.get('step', '?')}); nothing to do. Its model is in "
              f"{args.out / 'model'}", file=sys.stderr)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    dist = D.from_environment(device=args.device)
    # Where the final model/ stands (the step it was written at): a finished run reopened by a larger --max-steps
    # keeps its old final model until the new end, which must not pass for the new end's.
    marker = read_marker(args.out) if plan in ("resume", "reopen") else {}
    model_step = marker.get("model_step", marker.get("step") if marker.get("complete") else None)
    try:
        if plan == "new" and args.resume and dist.is_main:
            print(f"--resume: {args.out} holds no run yet; starting a new one", file=sys.stderr)
        # "none" still reads sentence pairs (SOP's), only the sentence loss is left out
        kw = dict(max_seq_length=cfg.seq_len, objective="sop" if cfg.objective == "none" else cfg.objective,
                  seed=cfg.seed, masked_lm_prob=cfg.masked_lm_prob,
                  max_predictions_per_seq=cfg.max_predictions, max_ngram=cfg.max_ngram,
                  short_seq_prob=cfg.short_seq_prob, verify=not args.no_verify_data)
        train_data = PretrainingDataset(args.data, **kw)
        eval_data = PretrainingDataset(args.eval_data, **kw) if args.eval_data else None
        if eval_data is not None and eval_data.facts.fingerprint != train_data.facts.fingerprint:
            raise ConfigError(f"--eval-data {args.eval_data} was prepared with another tokenizer than --data {args.data}")
        init = None
        if getattr(args, "init_from", None) is not None:
            from litebert.train.init_from import check_vocabulary, load_init_weights, read_init_model

            init = read_init_model(args.init_from)
            init_tokenizer = check_vocabulary(init, train_data.store, f"--data {args.data}")
        model_cfg = _model_config(args, preset, train_data.facts.vocab_size, cfg.seq_len, init)
        # checked now, saved beside the final model
        tokenizer = (_tokenizer(args.tokenizer, train_data.store) if init is None or args.tokenizer is not None
                     else init_tokenizer)
        torch.manual_seed(cfg.seed)  # the same initial weights on every rank
        model = AlbertForPreTraining(model_cfg)
        if init is not None:
            note = load_init_weights(model, init)
            if note and dist.is_main and plan not in ("resume", "reopen"):
                print(note, file=sys.stderr)
        found = None
        if plan in ("resume", "reopen"):
            found, cfg = _choose_checkpoint(args.out, model, cfg, train_data, dist, init and init.identity(),
                                            keep_max_steps=max_steps is None)
            if plan == "reopen" and found is None:
                raise CheckpointError(f"--resume --max-steps {cfg.max_steps}: the finished run in {args.out} has no "
                                      f"checkpoint left to continue from; start a new run from its model with "
                                      f"--init-from {args.out / 'model'}")
        stale_model = found is not None and model_step is not None and model_step != found[0]
        # ---- every check passed: from here on the run folder is written
        if dist.is_main:
            if plan == "overwrite":
                if not (args.out / OWNER_FILE).exists():  # an unmarked run folder (see _unmarked_run)
                    mark_output_folder(args.out, RUN_KIND, complete=False)
                clear_output_folder(args.out, RUN_KIND, _owned)
            else:
                _remove_killed_writes(args.out)
            mark_output_folder(args.out, RUN_KIND, complete=False, step=found[0] if found else 0,
                               **({"model_step": model_step} if found and model_step is not None else {}))
            write_json(args.out / "train_config.json",
                       {"preset": preset, **cfg.to_dict(), "data": str(args.data),
                        "eval_data": str(args.eval_data or ""), "world_size": dist.world_size,
                        **({"init_from": init.identity()} if init is not None else {})})
            if plan == "reopen":
                print(f"{args.out}: extending the finished run from step {found[0]} to {cfg.max_steps} (the "
                      f"learning rate follows the schedule for max_steps {cfg.max_steps})", file=sys.stderr)
            print(f"pretraining {preset or args.model_config or args.init_from}: {model.num_parameters():,} parameters, "
                  f"{train_data.num_examples:,} examples/epoch, global batch {cfg.global_batch} = "
                  f"{cfg.micro_batch} x {cfg.accumulation(dist.world_size)} x {dist.world_size} process(es)",
                  file=sys.stderr)
        summary = train(model, train_data, eval_data, cfg, args.out, dist=dist, resume=plan in ("resume", "reopen"),
                        progress=not args.no_progress, resume_from=found, init=init and init.identity(),
                        stale_model=stale_model)
        if dist.is_main:
            if summary["interrupted"]:
                mark_output_folder(args.out, RUN_KIND, complete=False, step=summary["step"],
                                   **({"model_step": model_step} if found and model_step is not None else {}))
                print(f"stopped at step {summary['step']} (signal {summary['signal']}); checkpoint saved in "
                      f"{args.out / 'checkpoints'}; continue with the same command and --resume", file=sys.stderr)
            else:
                if tokenizer is not None and not summary["already_complete"]:
                    tokenizer.save_pretrained(args.out / "model")
                finished = summary["step"] >= cfg.max_steps
                mark_output_folder(args.out, RUN_KIND, complete=finished, step=summary["step"],
                                   model_step=summary["step"])
                if summary["already_complete"]:
                    print(f"{args.out}: the run is finished (step {summary['step']}); nothing to do", file=sys.stderr)
                else:
                    print(json.dumps({k: v for k, v in summary.items() if k not in ("signal", "already_complete")},
                                     indent=2))
                print(f"final model (HF format): {args.out / 'model'}", file=sys.stderr)
                if tokenizer is None and not summary["already_complete"]:
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
