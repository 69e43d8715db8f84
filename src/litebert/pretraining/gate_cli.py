"""``litebert gate``: check a pretraining recipe on the CPU before it gets GPU time (`litebert.pretraining.gate.gate`).

    litebert gate --preset albert-base-v2 --batch-size 128 --seq-len 128 --lr 0.00088 --warmup-steps 300 \\
        --max-steps 3000 --data STORE --eval-data HELDOUT --out runs/gate
    litebert gate ... --margin 2          # also at twice the rate: how far the recipe is from the plateau

The candidate is described with the flags of ``litebert pretrain`` (a recipe, a JSON file, the flags); the gate trains
a narrow proxy of it (the same depth and sharing, H 512) for the warmup and ``--after-warmup`` more steps and prints
PLATEAU, SLOW or PASS. Exit status: 0 for PASS, 3 for PLATEAU or SLOW (2 for an error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from litebert.checks import AT_LEAST_1, POSITIVE
from litebert.cli import add_config_arguments, ranged
from litebert.config import SHARING
from litebert.pretraining.config import RECIPES, TrainConfig
from litebert.pretraining.gate import PROXY_BATCH, PROXY_FFN, PROXY_HEADS, PROXY_HIDDEN, PROXY_LEN, Proxy


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--preset", help="the candidate's model preset (see `litebert params`), e.g. albert-base-v2")
    model.add_argument("--model-config", type=Path, help="the candidate's config.json instead of --preset")
    parser.add_argument("--data", type=Path, required=True,
                        help="token store the proxy trains on (the candidate's corpus, or any corpus in its language)")
    parser.add_argument("--eval-data", type=Path, help="held-out token store the probe reads (default: training "
                                                      "examples)")
    parser.add_argument("--out", type=Path, required=True, help="gate folder: gate.json, gate.md, the proxy runs")
    parser.add_argument("--overwrite", action="store_true", help="--out holds a gate: replace it")
    parser.add_argument("--recipe", choices=sorted(RECIPES), help="the candidate's named settings")
    parser.add_argument("--config", type=Path, help="JSON file of the candidate's settings (overrides the recipe)")
    shape = parser.add_argument_group("model shape", "change the candidate's depth and sharing (the width is the "
                                      "proxy's)")
    shape.add_argument("--sharing", choices=SHARING, help="cross-layer sharing: all, attention, ffn, none")
    shape.add_argument("--num-layers", dest="num_hidden_layers", type=int, help="number of layers (depth)")
    shape.add_argument("--embedding-size", type=int, help="E, the factorized embedding size")
    proxy = parser.add_argument_group("proxy", "how the candidate is narrowed")
    ranged(proxy.add_argument("--proxy-hidden", type=int, default=PROXY_HIDDEN,
                              help="hidden size H (a narrower candidate keeps its own)"), AT_LEAST_1)
    ranged(proxy.add_argument("--proxy-heads", type=int, default=PROXY_HEADS, help="attention heads"), AT_LEAST_1)
    ranged(proxy.add_argument("--proxy-ffn", type=int, default=PROXY_FFN, help="FFN inner size"), AT_LEAST_1)
    ranged(proxy.add_argument("--proxy-seq-len", type=int, default=PROXY_LEN, help="sequence length"), AT_LEAST_1)
    ranged(proxy.add_argument("--proxy-batch", type=int, default=PROXY_BATCH,
                              help="sequences per step (a smaller candidate batch is kept)"), AT_LEAST_1)
    ranged(proxy.add_argument("--after-warmup", type=int, default=250,
                              help="steps trained after the candidate's warmup before the verdict"), AT_LEAST_1)
    ranged(proxy.add_argument("--margin", type=float, help="also run the proxy at this multiple of the rate (e.g. 2)"),
           POSITIVE)
    parser.add_argument("--device", default="cpu", help="where the proxy runs (default cpu)")
    ranged(parser.add_argument("--threads", type=int, help="torch CPU threads"), AT_LEAST_1)
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    add_config_arguments(parser, TrainConfig, skip=MACHINERY,
                         title="the candidate's training settings (as litebert pretrain's)")


# TrainConfig fields that do not shape the trajectory: the proxy sets its own
MACHINERY = ("micro_batch", "precision", "skip_padding", "gradient_checkpointing", "compile", "data_workers",
             "eval_every", "eval_examples", "save_every", "keep_last", "log_every", "max_bad_steps", "peak_tflops",
             "report_to", "on_plateau", "plateau_check_steps")


def run(args: argparse.Namespace) -> int:
    import torch

    from litebert.pretraining.cli import build_train_config, model_spec
    from litebert.pretraining.gate import gate

    args.resume, args.init_from = False, None  # what `build_train_config` and `model_spec` read of pretrain's flags
    for name in ("hidden_size", "num_attention_heads", "intermediate_size"):
        setattr(args, name, None)
    cfg, preset = build_train_config(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    proxy = Proxy(args.proxy_hidden, args.proxy_heads, args.proxy_ffn, args.proxy_seq_len, args.proxy_batch)
    result = gate(args.data, args.out, model=model_spec(args, preset), train=cfg, eval_data=args.eval_data,
                  proxy=proxy, after_warmup=args.after_warmup, margin_scale=args.margin, overwrite=args.overwrite,
                  device=args.device, progress=args.progress, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(result.line())
    print(f"report: {result.out / 'gate.md'}", file=sys.stderr)
    return 0 if result.verdict == "PASS" else 3


def flag_names(args: argparse.Namespace) -> dict[str, str | None]:
    from litebert.pretraining.cli import flag_names as pretrain_flag_names

    return pretrain_flag_names(args)
