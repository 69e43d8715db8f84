"""``litebert finetune``: the flags of `litebert.finetuning.run.finetune`.

    litebert finetune TASK --model DIR --data PATH --out DIR      # TASK: a GLUE task, squad1, squad2, race, mc,
                                                                  # conll, classify, regress, sentiment
        [--device cuda --precision bf16 --batch-size 32 --micro-batch 8] [--resume]   # also under torchrun
        [--lr 1e-5,3e-5,1e-4]                                     # a learning-rate grid, chosen on dev
        [--search lr=1e-5:1e-3:log,batch_size=16|32,seed=0|1 --trials 20]   # a search (Optuna), chosen on dev
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.cli import add_common_arguments, add_config_arguments, field_docs, given, parse_columns, ranged
from litebert.errors import ConfigError
from litebert.finetuning.config import FinetuneConfig
from litebert.tasks.presets import TASKS
from litebert.values import cli_type, names, numbers


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help=TASKS)
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
    p.add_argument("--allow-tokenizer-mismatch", action="store_true",
                   help="use a --tokenizer whose pieces differ from the --model folder's own tokenizer's (same size "
                        "only), with a warning instead of refusing it")
    p.add_argument("--columns", help="your own data: text_a=COL[,text_b=COL][,label=COL]")
    p.add_argument("--labels", type=cli_type(names, "labels"),
                   help="comma-separated label set (default: the task's, or those seen in training)")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep --out/checkpoints when the run ends (default: deleted once the run is complete)")
    p.add_argument("--overwrite", action="store_true",
                   help="--out holds a fine-tuned model: replace it (only the files `finetune` writes are deleted)")
    p.add_argument("--resume", action="store_true",
                   help="continue the stopped run in --out from its newest checkpoint (same command otherwise)")
    add_common_arguments(p)
    from litebert.push import add_arguments as add_hub_arguments

    add_hub_arguments(p)
    p.add_argument("--lr", type=cli_type(numbers, "lr"), metavar="LR[,LR...]",
                   help="peak learning rate (default: the preset's); several, comma-separated: a grid, one run each "
                        "in --out/lr-RATE/, the best on dev copied into --out and every rate's score in "
                        "--out/grid.json")
    ranged(p.add_argument("--lr-grid-extend", type=int, default=3, metavar="N",
                          help="a grid whose best rate is its lowest or highest adds the next rate beyond it (by the "
                               "grid's own ratio), until the best has a tried rate on each side or N were added; 0: "
                               "the rates given only"), AT_LEAST_0)
    p.add_argument("--search", metavar="SPACE",
                   help="search several settings with Optuna (the search extra), NAME=VALUES comma-separated: a list "
                        "a|b|c or a range LOW:HIGH[:log], e.g. lr=1e-5:1e-3:log,batch_size=16|32,seed=0|1|2 (seeds "
                        "are replicated: each configuration runs once per seed, scored by the mean); one run per "
                        "trial in --out/trial-K/, the best on dev copied into --out, every trial in "
                        "--out/search.json")
    ranged(p.add_argument("--trials", type=int, metavar="N",
                          help="the search's trials (default, for a space of lists only: all its configurations)"),
           AT_LEAST_1)
    p.add_argument("--pruner", choices=("median", "none"), default="median",
                   help="stop a trial early when its dev score falls below the median of earlier trials at the same "
                        "step (median, after 5 trials), or never (none)")
    add_config_arguments(p, FinetuneConfig, skip=("precision", "lr", "class_weights"),
                         title="hyper-parameters (the task preset's unless given)")
    p.add_argument("--class-weights", type=cli_type(class_weights, "class_weights"), metavar="W[,W...]|balanced",
                   help=field_docs(FinetuneConfig)["class_weights"])



def class_weights(text: str, name: str) -> list[float] | str:
    """``--class-weights``: ``balanced``, or comma-separated numbers (`litebert.values.numbers`)."""
    if text.strip() == "balanced":
        return "balanced"
    try:
        return numbers(text, name)
    except ConfigError as e:
        raise ConfigError(e.template.replace("give comma-separated numbers", "give comma-separated numbers (one "
                                             "per label) or balanced"), **e.named) from None


def flag_names(args: argparse.Namespace) -> dict[str, str]:
    """Errors about ``lr_grid`` (finetune's grid of rates) name the flag that gave it."""
    return {"lr_grid": "--lr", "search_pruner": "--pruner"}


def run(args: argparse.Namespace) -> int:
    import torch

    from litebert.finetuning.grid import folder_name
    from litebert.finetuning.run import finetune
    from litebert.push import publishing

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    rates = args.lr or []
    fields = {k: v for k, v in given(args, FinetuneConfig.__dataclass_fields__).items() if k != "lr"}
    config = FinetuneConfig(**fields, **({"lr": rates[0]} if len(rates) == 1 else {}))
    grid = rates if len(rates) > 1 else None
    publish = publishing(args)
    labels = args.labels  # a list (`litebert.values.names`) or None
    result = finetune(args.task, args.model, args.data, args.out, dev=args.dev, tokenizer=args.tokenizer,
                      columns=parse_columns(args.columns), labels=labels, config=config, resume=args.resume,
                      overwrite=args.overwrite, keep_checkpoints=args.keep_checkpoints, device=args.device,
                      attention=args.attention, encoding_errors=args.encoding_errors, progress=args.progress,
                      card=publish.card, push_to_hub=publish.repo_id, hub_private=publish.private, lr_grid=grid,
                      lr_grid_extend=args.lr_grid_extend, search=args.search, trials=args.trials,
                      search_pruner=args.pruner, allow_tokenizer_mismatch=args.allow_tokenizer_mismatch)
    if result.interrupted:
        run = Path(args.out) / folder_name(result.lr) if grid else Path(args.out)
        if result.search is not None:  # the trial's run that stopped
            run = Path(args.out) / result.search["running"]["folder"]
        print(f"stopped at step {result.steps} (signal {result.signal}); checkpoint saved in {run / 'checkpoints'}; "
              f"continue with the same command and --resume", file=sys.stderr)
        return 130
    return 0


