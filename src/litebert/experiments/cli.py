"""``litebert evaluate-pretraining``, ``litebert analyze transitions`` and ``litebert experiment``: the flags of
`litebert.evaluate_pretraining`, `litebert.analyze_transitions` and `litebert.run_experiment`.

    litebert evaluate-pretraining MODEL [MODEL ...] --data STORE [--objectives mlm,sop,nsp] [--output results.json]
    litebert analyze transitions MODEL [MODEL ...] --data STORE --out fig.png      # + fig.csv with the numbers
    litebert experiment {sentence-objective,sharing,embedding-size,speedup} --out DIR (--steps N | --minutes M)

Run from a clone of the repository, ``experiment`` uses the bundled data unless told otherwise (the corpus in
data/corpus, the 30k ALBERT vocabulary in data/albert-30k, the tasks in data/finetune); installed as a package it
needs them as arguments (--corpus FILES --tokenizer DIR, or --data/--eval-data stores; --sentiment-data,
--mc-data).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.cli import add_runtime_arguments, ranged
from litebert.inputs.text import ENCODING_ERRORS
from litebert.values import cli_type, integers, integers_or_all, names, numbers


def configure_command(name: str, parser: argparse.ArgumentParser) -> None:
    {"evaluate-pretraining": _configure_evaluate, "analyze": _configure_analyze,
     "experiment": _configure_experiment}[name](parser)


def run_command(name: str, args: argparse.Namespace) -> int:
    import torch

    if getattr(args, "threads", None) is not None:
        torch.set_num_threads(args.threads)
    return {"evaluate-pretraining": run_evaluate, "analyze": run_analyze, "experiment": run_experiment}[name](args)


def _common(p: argparse.ArgumentParser, examples: int) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help="pretrained model folder(s) (litebert or HF ALBERT)")
    p.add_argument("--data", required=True, type=Path, help="held-out token store (`litebert data prepare`) made "
                                                            "with the models' tokenizer")
    p.add_argument("--examples", type=int, default=examples, help="held-out examples (epoch 0, in order)")
    p.add_argument("--seq-len", type=int, help="maximum sequence length of the examples (default: 128, capped by "
                                               "the model's positions)")
    ranged(p.add_argument("--seed", type=int, default=12345, help="seed of the examples' pairs and masks"), AT_LEAST_0)
    p.add_argument("--batch-size", type=int, default=32, help="examples per forward pass")
    add_runtime_arguments(p)
    ranged(p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)"), AT_LEAST_1)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")


def _configure_evaluate(p: argparse.ArgumentParser) -> None:
    _common(p, 2000)
    p.add_argument("--objectives", default="mlm,sop,nsp", help="comma-separated: mlm, sop, nsp")
    p.add_argument("--output", type=Path, help="also write the results as JSON here")
    p.add_argument("--overwrite", action="store_true", help="--output exists: replace it")


def _configure_analyze(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
    t = sub.add_parser("transitions", help="Figure 2: L2 distance and cosine similarity of each layer's input and "
                                           "output embeddings")
    _common(t, 256)
    t.add_argument("--out", required=True, type=Path, help="the plot (.png/.pdf/.svg); the numbers go to the same "
                                                          "name with .csv")
    t.add_argument("--names", type=cli_type(names, "names"),
                   help="comma-separated curve names (default: the folders' names)")
    t.add_argument("--overwrite", action="store_true", help="the plot or its .csv exists: replace them")


def _names(args) -> list[str] | None:
    return getattr(args, "names", None)  # a list (`litebert.values.names`) or None


def run_evaluate(args: argparse.Namespace) -> int:
    from litebert.experiments.intrinsic import evaluate_pretraining

    report = evaluate_pretraining(args.models, args.data, objectives=args.objectives, examples=args.examples,
                                  seq_len=args.seq_len, seed=args.seed, batch_size=args.batch_size,
                                  device=args.device, precision=args.precision, attention=args.attention,
                                  output=args.output, progress=args.progress, overwrite=args.overwrite)
    print(json.dumps(report.to_json(), indent=2))
    return 0


def run_analyze(args: argparse.Namespace) -> int:
    from litebert.experiments.transitions import analyze_transitions

    result = analyze_transitions(args.models, args.data, args.out, names=_names(args), examples=args.examples,
                                 seq_len=args.seq_len, seed=args.seed, batch_size=args.batch_size, device=args.device,
                                 precision=args.precision, attention=args.attention, progress=args.progress,
                                 overwrite=args.overwrite)
    for name, r in result.rows.items():
        print(f"{name}: L2 " + " ".join(f"{x['l2_distance']:.2f}" for x in r) + " | degrees "
              + " ".join(f"{x['angle_degrees']:.1f}" for x in r))
    print(f"wrote {result.plot} and {result.csv}")
    return 0


def _sizes(name: str):
    """An option of comma-separated integers, as a tuple (`litebert.values.integers`: an empty item is refused)."""
    parse = cli_type(integers, name)
    return lambda text: tuple(parse(text))


def _rates(name: str):
    """An option of comma-separated numbers, as a tuple (`litebert.values.numbers`)."""
    parse = cli_type(numbers, name)
    return lambda text: tuple(parse(text))


_parse_label_sizes = cli_type(integers_or_all, "sizes")


def _label_sizes(text: str) -> tuple:
    """``--sizes 250,1000,all`` as a tuple, ``all`` as None (`litebert.values.integers_or_all`)."""
    return tuple(_parse_label_sizes(text))


def _configure_experiment(p: argparse.ArgumentParser) -> None:
    from litebert.experiments.runner import EXPERIMENTS, Settings
    from litebert.experiments.speedup import DEFAULT_PRESETS

    d = Settings("sharing")
    p.description = ("The paper's controlled comparisons (docs/EXPERIMENTS.md): every arm pretrained on the same "
                     "store, seed, steps and batch, then scored on held-out MLM/NSP/SOP and fine-tuned on a "
                     "sentiment and a multiple-choice task; speedup times training steps of the presets.\n\n"
                     + __doc__.split("\n\n")[2])
    p.add_argument("experiment", choices=(*EXPERIMENTS, "label-efficiency"))
    p.add_argument("--out", required=True, type=Path, help="experiment folder (re-running continues it)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, help="pretraining steps of every arm (speedup: timed steps; default 3 "
                                                  "there)")
    budget.add_argument("--minutes", type=float,
                        help="per-arm pretraining budget: a few steps of the slowest arm are timed and turned into "
                             "one step count for all arms")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of every arm's data order, masks and weights")
    p.add_argument("--data-workers", type=int, default=d.data_workers,
                   help="processes that build the pretraining batches ahead of the model (default 0; the same batches)")
    shape = p.add_argument_group("base shape and pretraining")
    shape.add_argument("--hidden-size", type=int, default=d.hidden_size, help="H (heads H/64, FFN 4H)")
    shape.add_argument("--num-layers", type=int, default=d.num_layers, help="layers")
    shape.add_argument("--embedding-size", type=int, default=d.embedding_size,
                       help="E of the sentence-objective arms")
    shape.add_argument("--embedding-sizes", type=_sizes("embedding_sizes"),
                       help="E values: sharing (default H and H/4), embedding-size (default H/8,H/4,H/2,H)")
    shape.add_argument("--seq-len", type=int, default=d.seq_len, help="pretraining and fine-tuning length")
    shape.add_argument("--batch", type=int, default=d.batch, help="pretraining sequences per step")
    shape.add_argument("--lr", type=float, default=d.lr, help="pretraining peak LAMB learning rate")
    shape.add_argument("--eval-examples", type=int, default=d.eval_examples,
                       help="held-out examples per intrinsic score")
    down = p.add_argument_group("downstream fine-tuning")
    down.add_argument("--finetune-lr", type=float, default=d.finetune_lr, help="fine-tuning learning rate")
    down.add_argument("--control-lrs", type=_rates("control_lrs"), default=d.control_lrs,
                      help="the from-scratch control's fine-tuning rates, the best on dev kept (default "
                           f"{','.join(f'{x:g}' for x in d.control_lrs)})")
    down.add_argument("--sentiment-steps", type=int, default=d.sentiment_steps, help="sentiment steps")
    down.add_argument("--mc-steps", type=int, default=d.mc_steps, help="multiple-choice steps")
    down.add_argument("--finetune-batch", type=int, default=d.finetune_batch, help="fine-tuning batch size")
    down.add_argument("--max-train-examples", type=int, help="use only the first N training examples")
    down.add_argument("--max-eval-examples", type=int, help="use only the first N dev examples")
    data = p.add_argument_group("data (default, in a clone of the repository: the bundled data)")
    data.add_argument("--data", type=Path, help="a prepared training token store (with --eval-data) instead of a "
                                                "corpus")
    data.add_argument("--eval-data", type=Path, help="a prepared held-out token store")
    data.add_argument("--corpus", type=Path, nargs="+", help="corpus files (official format, or JSON lines) to split "
                                                             "by documents (bundled: data/corpus/*.xz)")
    data.add_argument("--tokenizer", type=Path, help="tokenizer for --corpus (bundled: data/albert-30k)")
    data.add_argument("--heldout-every", type=int, default=d.heldout_every,
                      help="every N-th document of the corpus is held out")
    data.add_argument("--encoding-errors", default=d.encoding_errors, choices=ENCODING_ERRORS,
                      help="invalid UTF-8 in --corpus: stop with file/line/byte offset (strict) or read it as U+FFFD "
                           "(replace)")
    data.add_argument("--sentiment-data", type=Path, help="the sentiment task's data folder (bundled: "
                                                          "data/finetune/sentiment)")
    data.add_argument("--mc-data", type=Path, help="the multiple-choice task's data folder (bundled: "
                                                   "data/finetune/mc)")
    le = p.add_argument_group("label-efficiency (a pretrained --model against its control and the bag of words at "
                              "several numbers of labelled examples; docs/EXPERIMENTS.md)")
    le.add_argument("--model", type=Path, help="the pretrained model folder")
    le.add_argument("--task", default="sentiment", help="a sentence-classification task (default sentiment; its data "
                                                        "folder: --sentiment-data)")
    le.add_argument("--sizes", type=_label_sizes, default=(250, 500, 1000, 2000, None),
                    help="labelled training examples per run, 'all' for the whole split (default "
                         "250,500,1000,2000,all)")
    le.add_argument("--seeds", type=int, default=3, help="seeds per size below the whole split (default 3)")
    le.add_argument("--full-seeds", type=int, default=1, help="seeds at the whole split (default 1)")
    le.add_argument("--lrs", type=_rates("lrs"), default=(1e-4, 3e-4),
                    help="the pretrained model's fine-tuning rates (default 1e-4,3e-4); --control-lrs the control's")
    le.add_argument("--lr-grid-extend", type=int, default=2,
                    help="rates a grid may add beyond an edge dev picks (default 2; 0: the rates given only)")
    le.add_argument("--epochs", type=float, default=3.0, help="passes over a run's examples (default 3)")
    le.add_argument("--min-steps", type=int, default=150, help="steps of a run at least (default 150)")
    le.add_argument("--evaluations", type=int, default=4, help="dev evaluations per run (default 4)")
    le.add_argument("--tapt-steps", type=int, default=0,
                    help="task-adaptive pretraining: MLM steps on the task's unlabelled training texts before "
                         "fine-tuning, reported as its own arm (default 0: none)")
    le.add_argument("--tapt-lr", type=float, default=1e-3, help="its LAMB peak rate (default 1e-3)")
    le.add_argument("--no-control", dest="control", action="store_false", help="no from-scratch control")
    le.add_argument("--no-bag-of-words", dest="bag_of_words", action="store_false", help="no bag of words")
    sp = p.add_argument_group("speedup")
    sp.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated presets to time")
    sp.add_argument("--reference", default="bert-large", help="the preset the speedups are relative to")
    sp.add_argument("--micro-batch", type=int, default=8, help="sequences per process per step")
    sp.add_argument("--untimed-steps", type=int, default=1, help="steps run before the timed ones")
    sp.add_argument("--processes", type=_sizes("processes"), default=(1, 2),
                    help="process counts (more than 1: torchrun)")


def bundled_data() -> dict[str, Path]:
    """The repository's bundled data, when litebert runs from a clone (the source checkout, or the working
    directory, holds data/corpus and friends); {} for an installed package elsewhere."""
    for root in (Path(__file__).resolve().parents[3], Path.cwd()):
        data = root / "data"
        found = {"corpus": sorted((data / "corpus").glob("*.txt.xz")), "tokenizer": data / "albert-30k",
                 "sentiment_data": data / "finetune" / "sentiment", "mc_data": data / "finetune" / "mc"}
        if found["corpus"] and all(Path(p).exists() for k, p in found.items() if k != "corpus"):
            return found
    return {}


def settings(args: argparse.Namespace):
    """The experiment's `Settings` from the flags, the bundled data filling in what is not given."""
    from litebert.experiments.runner import Settings

    bundled = bundled_data()
    use_corpus = args.data is None and args.eval_data is None
    corpus = args.corpus or (bundled.get("corpus") if use_corpus else None) or ()
    tokenizer = args.tokenizer or (bundled.get("tokenizer") if use_corpus else None)

    def path(p):
        return str(Path(p).resolve()) if p is not None else None

    return Settings(
        args.experiment, steps=args.steps, minutes=args.minutes, seed=args.seed, device=args.device,
        data_workers=args.data_workers,
        hidden_size=args.hidden_size, num_layers=args.num_layers, embedding_size=args.embedding_size,
        embedding_sizes=args.embedding_sizes or (), seq_len=args.seq_len, batch=args.batch, lr=args.lr,
        eval_examples=args.eval_examples, finetune_lr=args.finetune_lr, control_lrs=tuple(args.control_lrs),
        sentiment_steps=args.sentiment_steps,
        mc_steps=args.mc_steps, finetune_batch=args.finetune_batch, max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples, data=path(args.data), eval_data=path(args.eval_data),
        corpus=tuple(path(c) for c in corpus), tokenizer=path(tokenizer), heldout_every=args.heldout_every,
        encoding_errors=args.encoding_errors,
        sentiment_data=path(args.sentiment_data or bundled.get("sentiment_data")),
        mc_data=path(args.mc_data or bundled.get("mc_data")))


def run_experiment(args: argparse.Namespace) -> int:
    if args.experiment == "speedup":
        return _run_speedup(args)
    if args.experiment == "label-efficiency":
        return _run_label_efficiency(args)
    from litebert.experiments import runner

    runner.run_experiment(args.out, settings(args))
    print((args.out / "results.md").read_text())
    return 0


def _run_speedup(args: argparse.Namespace) -> int:
    from litebert.errors import ConfigError
    from litebert.experiments import runner, speedup

    if args.minutes is not None:
        raise ConfigError("speedup times a fixed number of steps: give {steps:flag} N (default 3), not "
                          "{minutes:flag}", steps=None, minutes=None)
    speedup.speedup_experiment(args.out, presets=names(args.presets, "presets"),
                               reference=args.reference, micro_batch=args.micro_batch, seq_len=args.seq_len,
                               steps=3 if args.steps is None else args.steps, untimed_steps=args.untimed_steps,
                               device=args.device, processes=tuple(args.processes), progress=runner.progress)
    print((args.out / "results.md").read_text())
    return 0


def _run_label_efficiency(args: argparse.Namespace) -> int:
    from litebert.errors import ConfigError
    from litebert.experiments.label_efficiency import LabelSettings, label_efficiency

    if args.model is None:
        raise ConfigError("label-efficiency needs the pretrained model: give {model:flag} DIR", model=None)
    if args.steps is not None or args.minutes is not None:
        raise ConfigError("label-efficiency pretrains nothing: its budget is {epochs:flag} and {min_steps:flag} "
                          "(and {tapt_steps:flag}), not --steps or --minutes", epochs=None, min_steps=None,
                          tapt_steps=None)
    data = args.sentiment_data or bundled_data().get("sentiment_data")
    if data is None:
        raise ConfigError("give the task's data folder (train, dev and test files): {sentiment_data:flag} DIR",
                          sentiment_data=None)
    s = LabelSettings(task=args.task, sizes=args.sizes, seeds=args.seeds, full_seeds=args.full_seeds, seed=args.seed,
                      lrs=args.lrs, control_lrs=args.control_lrs, lr_grid_extend=args.lr_grid_extend,
                      epochs=args.epochs, min_steps=args.min_steps, evaluations=args.evaluations,
                      batch_size=args.finetune_batch,
                      seq_len=args.seq_len, control=args.control, bag_of_words=args.bag_of_words,
                      tapt_steps=args.tapt_steps, tapt_lr=args.tapt_lr)
    label_efficiency(args.model, args.out, data=data, tokenizer=args.tokenizer, settings=s, device=args.device,
                     progress=False)
    print((args.out / "results.md").read_text())
    return 0
