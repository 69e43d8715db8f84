"""``litebert evaluate-pretraining``, ``litebert analyze transitions`` and ``litebert experiment``.

    litebert evaluate-pretraining MODEL [MODEL ...] --data STORE [--objectives mlm,sop,nsp] [--output results.json]
    litebert analyze transitions MODEL [MODEL ...] --data STORE --out fig.png      # + fig.csv with the numbers
    litebert experiment {sentence-objective,sharing,embedding-size,speedup} --out DIR (--steps N | --minutes M)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from litebert.cli import at_least_1
from litebert.errors import ConfigError


def configure_command(name: str, parser: argparse.ArgumentParser) -> None:
    {"evaluate-pretraining": _configure_evaluate, "analyze": _configure_analyze,
     "experiment": _configure_experiment}[name](parser)


def run_command(name: str, args: argparse.Namespace) -> int:
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    return {"evaluate-pretraining": run_evaluate, "analyze": run_analyze, "experiment": run_experiment}[name](args)


def _common(p: argparse.ArgumentParser, examples: int) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help="pretrained model folder(s) (litebert or HF ALBERT)")
    p.add_argument("--data", required=True, type=Path, help="held-out token store (`litebert data prepare`) made "
                                                            "with the models' tokenizer")
    p.add_argument("--examples", type=at_least_1, default=examples, help="held-out examples (epoch 0, in order)")
    p.add_argument("--seq-len", type=at_least_1, default=128, help="maximum sequence length of the examples")
    p.add_argument("--seed", type=int, default=12345, help="seed of the examples' pairs and masks")
    p.add_argument("--batch-size", type=at_least_1, default=32, help="examples per forward pass")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)")
    p.add_argument("--threads", type=at_least_1, help="torch CPU threads (default: torch's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _configure_evaluate(p: argparse.ArgumentParser) -> None:
    _common(p, 2000)
    p.add_argument("--objectives", default="mlm,sop,nsp", help="comma-separated: mlm, sop, nsp")
    p.add_argument("--output", type=Path, help="also write the results as JSON here")


def _configure_analyze(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
    t = sub.add_parser("transitions", help="Figure 2: L2 distance and cosine similarity of each layer's input and "
                                           "output embeddings")
    _common(t, 256)
    t.add_argument("--out", required=True, type=Path, help="the plot (.png/.pdf/.svg); the numbers go to the same "
                                                          "name with .csv")
    t.add_argument("--names", help="comma-separated curve names (default: the folders' names)")


def _names(args) -> list[str]:
    if getattr(args, "names", None):
        names = [n.strip() for n in args.names.split(",")]
        if len(names) != len(args.models):
            raise ConfigError(f"--names: {len(names)} name(s) for {len(args.models)} model(s)")
        return names
    names = [Path(m).name or str(m) for m in args.models]
    return [str(m) for m in args.models] if len(set(names)) < len(names) else names


def _store(args):
    from litebert.data.store import TokenStore

    return TokenStore(args.data)


def run_evaluate(args: argparse.Namespace) -> int:
    from litebert.experiments import intrinsic
    from litebert.train.device import resolve_device

    objectives = intrinsic.parse_objectives(args.objectives)
    device = resolve_device(args.device)
    store = _store(args)
    results = {}
    for name, path in zip(_names(args), args.models):
        model = intrinsic.load_for_evaluation(path, objectives, store.facts.vocab_size).to(device)
        seq_len = min(args.seq_len, model.config.max_position_embeddings)
        scores = intrinsic.evaluate_pretraining(model, store, objectives, examples=args.examples, seq_len=seq_len,
                                                seed=args.seed, batch_size=args.batch_size,
                                                progress=not args.no_progress)
        results[name] = {"model": str(path), **{o: s.to_json() for o, s in scores.items()}}
        print(f"{name}: " + ", ".join(f"{o.upper()} {100 * s.accuracy:.1f}% [{100 * s.low:.1f}, {100 * s.high:.1f}] "
                                      f"of {s.total:,}" for o, s in scores.items()), file=sys.stderr)
    report = {"data": str(args.data), "examples": args.examples, "seq_len": args.seq_len, "seed": args.seed,
              "interval": "95% Wilson", "models": results}
    if args.output:
        from litebert.files import write_json

        write_json(args.output, report)
    print(json.dumps(report, indent=2))
    return 0


def run_analyze(args: argparse.Namespace) -> int:
    from litebert.experiments import transitions
    from litebert.heads import AlbertModel
    from litebert.train.device import resolve_device

    device = resolve_device(args.device)
    store = _store(args)
    rows = {}
    for name, path in zip(_names(args), args.models):
        model = AlbertModel.from_pretrained(path).to(device)
        if model.config.vocab_size != store.facts.vocab_size:
            raise ConfigError(f"{path}: vocabulary of {model.config.vocab_size} pieces, but the store was prepared "
                              f"with {store.facts.vocab_size}; use a store made with the model's tokenizer")
        rows[name] = transitions.layer_transitions(model, store, examples=args.examples,
                                                   seq_len=min(args.seq_len, model.config.max_position_embeddings),
                                                   seed=args.seed, batch_size=args.batch_size,
                                                   progress=not args.no_progress)
    csv_path = args.out.with_suffix(".csv")
    transitions.write_csv(csv_path, rows)
    transitions.plot(args.out, rows)
    for name, r in rows.items():
        print(f"{name}: L2 " + " ".join(f"{x['l2_distance']:.2f}" for x in r) + " | degrees "
              + " ".join(f"{x['angle_degrees']:.1f}" for x in r))
    print(f"wrote {args.out} and {csv_path}")
    return 0


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected a number > 0")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected comma-separated integers >= 1")
    return sizes


def _configure_experiment(p: argparse.ArgumentParser) -> None:
    from litebert.experiments.runner import EXPERIMENTS, Settings
    from litebert.experiments.speedup import DEFAULT_PRESETS

    d = Settings("sharing")
    p.description = ("The paper's controlled comparisons (docs/EXPERIMENTS.md): every arm pretrained on the same "
                     "store, seed, steps and batch, then scored on held-out MLM/NSP/SOP and fine-tuned on the bundled "
                     "sentiment and multiple-choice tasks; speedup times training steps of the presets.")
    p.add_argument("experiment", choices=EXPERIMENTS)
    p.add_argument("--out", required=True, type=Path, help="experiment folder (re-running continues it)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=at_least_1, help="pretraining steps of every arm (speedup: timed steps; "
                                                        "default 3 there)")
    budget.add_argument("--minutes", type=_positive_float,
                        help="per-arm pretraining budget: a few steps of the slowest arm are timed and turned into "
                             "one step count for all arms")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of every arm's data order, masks and weights")
    shape = p.add_argument_group("base shape and pretraining")
    shape.add_argument("--hidden-size", type=at_least_1, default=d.hidden_size, help="H (heads H/64, FFN 4H)")
    shape.add_argument("--num-layers", type=at_least_1, default=d.num_layers, help="layers")
    shape.add_argument("--embedding-size", type=at_least_1, default=d.embedding_size,
                       help="E of the sentence-objective arms")
    shape.add_argument("--embedding-sizes", type=_sizes,
                       help="E values: sharing (default H and H/4), embedding-size (default H/8,H/4,H/2,H)")
    shape.add_argument("--seq-len", type=at_least_1, default=d.seq_len, help="pretraining and fine-tuning length")
    shape.add_argument("--batch", type=at_least_1, default=d.batch, help="pretraining sequences per step")
    shape.add_argument("--lr", type=_positive_float, default=d.lr, help="pretraining peak LAMB learning rate")
    shape.add_argument("--eval-examples", type=at_least_1, default=d.eval_examples,
                       help="held-out examples per intrinsic score")
    down = p.add_argument_group("downstream fine-tuning")
    down.add_argument("--finetune-lr", type=_positive_float, default=d.finetune_lr, help="fine-tuning learning rate")
    down.add_argument("--sentiment-steps", type=at_least_1, default=d.sentiment_steps, help="sentiment steps")
    down.add_argument("--mc-steps", type=at_least_1, default=d.mc_steps, help="multiple-choice steps")
    down.add_argument("--finetune-batch", type=at_least_1, default=d.finetune_batch, help="fine-tuning batch size")
    down.add_argument("--max-train-examples", type=at_least_1, help="use only the first N training examples")
    down.add_argument("--max-eval-examples", type=at_least_1, help="use only the first N dev examples")
    data = p.add_argument_group("data")
    data.add_argument("--data", type=Path, help="your own training token store (with --eval-data) instead of the "
                                                "bundled corpus")
    data.add_argument("--eval-data", type=Path, help="your own held-out token store")
    data.add_argument("--corpus", type=Path, nargs="+", help="corpus files (official format) to split by documents "
                                                             "(default: data/corpus/*.xz)")
    data.add_argument("--tokenizer", type=Path, help="tokenizer for --corpus (default: data/albert-30k)")
    data.add_argument("--heldout-every", type=at_least_1, default=d.heldout_every,
                      help="every N-th document of the corpus is held out")
    sp = p.add_argument_group("speedup")
    sp.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated presets to time")
    sp.add_argument("--reference", default="bert-large", help="the preset the speedups are relative to")
    sp.add_argument("--micro-batch", type=at_least_1, default=8, help="sequences per process per step")
    sp.add_argument("--untimed-steps", type=at_least_1, default=1, help="steps run before the timed ones")
    sp.add_argument("--processes", default="1,2", help="process counts (more than 1: torchrun)")


def run_experiment(args: argparse.Namespace) -> int:
    from litebert.experiments import runner

    if args.experiment == "speedup":
        return _run_speedup(args)
    if args.steps is None and args.minutes is None:
        raise ConfigError("give the pretraining budget: --steps N (every arm) or --minutes M (per arm)")
    if (args.data is None) != (args.eval_data is None):
        raise ConfigError("--data and --eval-data go together: a training store and a held-out store")
    if args.data is not None and (args.corpus or args.tokenizer):
        raise ConfigError("--data/--eval-data are prepared stores: --corpus and --tokenizer do not apply")
    s = runner.Settings(
        args.experiment, steps=args.steps, minutes=args.minutes, seed=args.seed, device=args.device,
        hidden_size=args.hidden_size, num_layers=args.num_layers, embedding_size=args.embedding_size,
        embedding_sizes=args.embedding_sizes or (), seq_len=args.seq_len, batch=args.batch, lr=args.lr,
        eval_examples=args.eval_examples, finetune_lr=args.finetune_lr, sentiment_steps=args.sentiment_steps,
        mc_steps=args.mc_steps, finetune_batch=args.finetune_batch, max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        data=str(args.data.resolve()) if args.data else None,
        eval_data=str(args.eval_data.resolve()) if args.eval_data else None,
        corpus=tuple(str(c.resolve()) for c in args.corpus or ()),
        tokenizer=str(args.tokenizer.resolve()) if args.tokenizer else None, heldout_every=args.heldout_every)
    summary = runner.run_experiment(args.out, s)
    print((args.out / "results.md").read_text())
    return 0 if summary else 1


def _run_speedup(args: argparse.Namespace) -> int:
    from litebert.experiments import runner, speedup
    from litebert.files import atomic_write, check_output_folder, mark_output_folder, write_json

    if args.minutes is not None:
        raise ConfigError("speedup times a fixed number of steps: give --steps N (default 3), not --minutes")
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    try:
        processes = tuple(int(n) for n in args.processes.split(","))
    except ValueError:
        processes = ()
    if not processes or min(processes) < 1:
        raise ConfigError(f"--processes {args.processes!r}: expected comma-separated integers >= 1, e.g. 1,2")
    if not check_output_folder(args.out, runner.KIND):
        mark_output_folder(args.out, runner.KIND, experiment="speedup")
    summary = speedup.run_speedup(args.out, presets, args.micro_batch, args.seq_len, args.steps or 3, args.untimed_steps,
                                  args.device, processes, progress=runner.progress,
                                  reference=args.reference)
    write_json(args.out / "results.json", {"experiment": "speedup", **summary})
    atomic_write(args.out / "results.md", speedup.markdown(summary))
    speedup.plot(args.out / "speedup.png", summary)
    print((args.out / "results.md").read_text())
    return 0
