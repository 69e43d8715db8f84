"""``litebert evaluate-pretraining`` and ``litebert analyze transitions``.

    litebert evaluate-pretraining MODEL [MODEL ...] --data STORE [--objectives mlm,sop,nsp] [--output results.json]
    litebert analyze transitions MODEL [MODEL ...] --data STORE --out fig.png      # + fig.csv with the numbers
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from litebert.errors import ConfigError


def configure_command(name: str, parser: argparse.ArgumentParser) -> None:
    {"evaluate-pretraining": _configure_evaluate, "analyze": _configure_analyze}[name](parser)


def run_command(name: str, args: argparse.Namespace) -> int:
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    return {"evaluate-pretraining": run_evaluate, "analyze": run_analyze}[name](args)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected an integer >= 1")
    return value


def _common(p: argparse.ArgumentParser, examples: int) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help="pretrained model folder(s) (litebert or HF ALBERT)")
    p.add_argument("--data", required=True, type=Path, help="held-out token store (`litebert data prepare`) made "
                                                            "with the models' tokenizer")
    p.add_argument("--examples", type=_positive, default=examples, help="held-out examples (epoch 0, in order)")
    p.add_argument("--seq-len", type=_positive, default=128, help="maximum sequence length of the examples")
    p.add_argument("--seed", type=int, default=12345, help="seed of the examples' pairs and masks")
    p.add_argument("--batch-size", type=_positive, default=32, help="examples per forward pass")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)")
    p.add_argument("--threads", type=_positive, help="torch CPU threads (default: torch's)")
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
