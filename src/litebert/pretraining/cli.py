"""``litebert pretrain``: the flags of `litebert.pretraining.run.pretrain`.

    litebert pretrain --preset albert-base-v2 --data STORE --eval-data HELDOUT --out RUN --recipe albert-paper
    litebert pretrain ... --resume                      # continue RUN from its newest valid checkpoint
    litebert pretrain --init-from MODEL --data STORE --out RUN ...   # continued pretraining from a model folder
    torchrun --nproc_per_node 8 -m litebert.cli pretrain ...   # the same command on 8 processes

Settings are layered: the recipe (``--recipe``), then a JSON file (``--config``, keys = the long flag names with
underscores, plus ``preset``/``recipe``), then the flags given on the command line. A resume without ``--max-steps``
(on the command line or in the file) keeps the run's own.

The run folder (``--out``) is checked before anything is written, so a refused command changes nothing there: a
folder holding a run needs ``--resume`` (continue) or ``--overwrite`` (start again); a folder holding anything else
is refused; ``--resume`` checks the checkpoint, the settings and the metrics files first (docs/pretraining.md, "Run
folders").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from litebert.checks import AT_LEAST_1
from litebert.cli import add_config_arguments, add_runtime_arguments, given, ranged
from litebert.config import SHARING
from litebert.errors import ConfigError
from litebert.pretraining.config import RECIPES, TrainConfig

# The shape flags: AlbertConfig fields (dest) under the names the paper's ablations use (flag)
SHAPE = {"sharing": "--sharing", "embedding_size": "--embedding-size", "hidden_size": "--hidden-size",
         "num_hidden_layers": "--num-layers", "num_attention_heads": "--num-heads",
         "intermediate_size": "--intermediate-size"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--preset", help="model preset (see `litebert params`), e.g. albert-base-v2, tiny")
    model.add_argument("--model-config", type=Path, help="a config.json (litebert or HF) instead of --preset")
    parser.add_argument("--init-from", type=Path, metavar="MODEL_DIR",
                        help="continued pretraining: start from this model folder's config, weights and tokenizer "
                             "(a run's model/, a save_pretrained folder of litebert or HF, a `litebert convert` "
                             "folder); optimizer and schedule start fresh")
    parser.add_argument("--data", type=store_folder, required=True, help="token store from `litebert data prepare`")
    parser.add_argument("--eval-data", type=store_folder, help="held-out token store for MLM/SOP evaluation")
    parser.add_argument("--no-verify-data", dest="verify_data", action="store_false",
                        help="skip the sha256 check of the stores' files before step 0 (for stores verified once "
                             "already; sizes, token ids, offsets and the manifest are still checked)")
    parser.add_argument("--out", type=Path, required=True, help="run folder: checkpoints, metrics, final model")
    parser.add_argument("--recipe", choices=sorted(RECIPES), help="named settings, e.g. albert-paper")
    parser.add_argument("--config", type=Path, help="JSON file of settings (overrides the recipe)")
    parser.add_argument("--resume", action="store_true",
                       help="continue the run in --out from its newest valid checkpoint (a new run when --out is "
                             "absent or empty; a finished run is left as it is, or extended by a larger --max-steps)")
    parser.add_argument("--overwrite", action="store_true",
                        help="--out holds a run: delete what it wrote (checkpoints, metrics, model) and start again")
    parser.add_argument("--tokenizer", type=Path,
                        help="tokenizer folder or file (spiece.model, vocab.txt) to save beside the final model "
                             "(default: the one the store --data was prepared with)")
    shape = parser.add_argument_group("model shape", "change the shape of --preset / --model-config (the paper's "
                                      "ablations: litebert pretrain --preset albert-base-v2 --sharing none ...)")
    shape.add_argument("--sharing", choices=SHARING, help="cross-layer sharing: all (ALBERT), attention, ffn, none "
                                                          "(BERT-like)")
    shape.add_argument("--embedding-size", type=int, help="E, the factorized embedding size")
    shape.add_argument("--hidden-size", type=int, help="H; attention heads H/64 and FFN size 4H follow (the "
                                                       "paper's rule) unless given")
    shape.add_argument("--num-layers", dest="num_hidden_layers", type=int, help="number of layers (depth)")
    shape.add_argument("--num-heads", dest="num_attention_heads", type=int, help="attention heads")
    shape.add_argument("--intermediate-size", type=int, help="FFN inner size")
    add_runtime_arguments(parser, precision=False)  # the precision is a training setting (--precision below)
    ranged(parser.add_argument("--threads", type=int, help="torch CPU threads per process"), AT_LEAST_1)
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    parser.add_argument("--json", action="store_true",
                        help="end with the run's summary as JSON (steps, tokens, time, final evaluation, ...) "
                             "instead of one line")
    from litebert.push import add_arguments as add_hub_arguments

    add_hub_arguments(parser)
    add_config_arguments(parser, TrainConfig, title="training (the recipe's or the defaults unless given)")


def store_folder(text: str) -> Path:
    """A token store's folder as --data/--eval-data give it; a URL refused in one line (a store is a local folder;
    `Path` would collapse ``http://`` into ``http:/``)."""
    from litebert.inputs.remote import is_url

    if is_url(text):
        raise argparse.ArgumentTypeError(f"{text}: a token store is a local folder, not a URL; prepare one with "
                                         f"`litebert data prepare --input URL ...` (it reads URLs)")
    return Path(text)


def flag_names(args: argparse.Namespace) -> dict[str, str | None]:
    """The flag that named the model, for errors about it. A shape field that no flag set came from the preset or
    the config file: an error names it as a config field (None), not as a flag the user did not give."""
    unset = {dest: None for dest in SHAPE if getattr(args, dest, None) is None}
    return {**unset, "model": "--model-config" if args.model_config else "--preset", "train": "--config"}


def build_train_config(args: argparse.Namespace) -> tuple[TrainConfig, str | None]:
    """recipe < config file < command-line flags (`TrainConfig.layered`); and the preset (--preset, else the
    file's). A resume that gives no max_steps (flag or file) keeps the run's own (TrainConfig.max_steps None)."""
    cfg, preset = TrainConfig.layered(args.recipe, args.config, given(args, TrainConfig.__dataclass_fields__),
                                      run_steps=args.resume)
    return cfg, args.preset or preset


def model_spec(args: argparse.Namespace, preset: str | None):
    """What --preset / --model-config (or the file's preset) and the shape flags describe: a preset name, a config
    file, or a config with the shape changed; None with --init-from alone."""
    from litebert.config import AlbertConfig

    shape = given(args, SHAPE)
    spec = args.model_config or preset
    if not shape:
        return spec
    if spec is None and args.init_from is not None:  # the flags may only repeat the model's own shape
        from litebert.io.hf_folder import load_config
        from litebert.pretraining.init_from import model_folder

        own = load_config(model_folder(args.init_from))
        for k, v in own.with_shape(**shape).to_dict().items():
            if v != getattr(own, k):
                raise ConfigError(f"--init-from {args.init_from}: the model's {k} is {getattr(own, k)!r}, the flags "
                                  f"ask for {v!r}; continued pretraining keeps the model's shape (drop the shape "
                                  f"flags)")
        return None
    if spec is None:
        raise ConfigError("the shape flags change a model: give --preset or --model-config")
    base = AlbertConfig.from_json(spec) if args.model_config else AlbertConfig.from_preset(spec)
    return base.with_shape(**shape)


def run(args: argparse.Namespace) -> int:
    import torch

    from litebert.pretraining.run import pretrain
    from litebert.push import publishing

    cfg, preset = build_train_config(args)
    publish = publishing(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    result = pretrain(args.data, args.out, model=model_spec(args, preset), train=cfg, eval_data=args.eval_data,
                      init_from=args.init_from, tokenizer=args.tokenizer, resume=args.resume,
                      overwrite=args.overwrite, device=args.device, attention=args.attention,
                      verify_data=args.verify_data, progress=args.progress, card=publish.card,
                      push_to_hub=publish.repo_id, hub_private=publish.private)
    if result.stopped_on_plateau:
        print(f"stopped at step {result.step} on the unigram plateau (--on-plateau stop); checkpoint saved in "
              f"{args.out / 'checkpoints'}; change the recipe and start again, or continue with --resume "
              f"--on-plateau warn", file=sys.stderr)
        return 3
    if result.interrupted:
        print(f"stopped at step {result.step} (signal {result.signal}); checkpoint saved in "
              f"{args.out / 'checkpoints'}; continue with the same command and --resume", file=sys.stderr)
        return 130
    if result.action != "finished":
        print(json.dumps(result.summary(), indent=2) if args.json else summary_line(result))
    return 0


def summary_line(result) -> str:
    """The one line a finished `litebert pretrain` prints (``--json``: the whole summary): the steps, tokens and
    time, the final held-out evaluation, where the model is."""
    ended = ("" if result.step >= result.max_steps else
             " (time limit)" if result.time_limited else " (stopped early)" if result.stopped_early else "")
    minutes, seconds = divmod(round(result.elapsed_s), 60)
    line = (f"pretrained {result.step:,} of {result.max_steps:,} steps{ended}, {result.tokens_seen:,} tokens in "
            f"{minutes}m {seconds:02d}s")
    final = result.final_eval or {}
    shown = [f"{name} {final[key]:.4f}" for key, name in (("mlm_loss", "MLM loss"), ("mlm_accuracy", "MLM accuracy"),
                                                          ("sop_accuracy", "SOP accuracy")) if key in final]
    if shown:
        line += "; held-out " + ", ".join(shown)
    return f"{line}; model (HF format) saved to {result.model_dir}"


if __name__ == "__main__":  # python -m litebert.pretraining.cli ... (litebert.cli is the usual entry point)
    from litebert.cli import Parser

    parser = Parser(prog="litebert pretrain")
    configure(parser)
    raise SystemExit(run(parser.parse_args()))
