"""Fine-tune a pretrained model folder on the bundled Rotten Tomatoes sentiment task and report dev and test accuracy
beside the baselines: the majority class, a bag-of-words model (TF-IDF + logistic regression, scikit-learn), and
(with --control) the same architecture fine-tuned from random weights, at rates of its own (--control-lrs).

    python scripts/demo_finetune.py --model PRETRAINED_DIR [--out DIR] [--epochs 3] [--lrs 1e-4,3e-4] [--control]
    python scripts/demo_finetune.py --model PRETRAINED_DIR --lrs 3e-5,1e-4 --json results.json

The data (data/finetune/sentiment, from the vaderSentiment 3.3.2 sdist, MIT) is 8,568 training, 1,000 dev and 1,000
test movie review snippets labelled by the sign of their mean human rating. Every choice is made on dev: the
checkpoint kept is the best on dev (as the official run_classifier does), each model's learning rate the best of its
rates (--lrs, --control-lrs), the
bag-of-words model's inverse L2 strength C the best of 0.25 .. 32; so dev accuracies are optimistic and the test
accuracy of what dev chose is the unbiased figure. The folder must hold the tokenizer (spiece.model) or pass
--tokenizer. Exit status 0 even if the model does not beat the baselines: the numbers are the report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data" / "finetune" / "sentiment"
# Rates each grid may add beyond an edge dev picks: one (another run of the grid's length), so that the demo's choice
# has a tried rate on each side, or says it does not; `litebert finetune --lr` adds up to three.
GRID_EXTEND = 1


def read_splits(data: Path = DATA) -> dict:
    from litebert.tasks.readers import read_glue

    return {split: read_glue("sst-2", data / f"{split}.tsv.gz") for split in ("train", "dev", "test")}


def majority(splits: dict) -> dict:
    """The best constant guess on dev and test: always the split's more frequent label (`baselines.majority`; the
    training split's own majority label, 0, scores less on dev and test)."""
    from litebert.tasks.baselines import majority as best_constant

    return best_constant({split: [e.label for e in splits[split]] for split in ("dev", "test")})


def bag_of_words(splits: dict, c_grid=None) -> dict:
    """TF-IDF of word unigrams and bigrams + logistic regression (scikit-learn, `baselines.bag_of_words`), fitted on
    the training split, its inverse L2 strength C chosen on dev, scored on dev and test. ~10 s on one CPU core."""
    from litebert.tasks.baselines import C_GRID
    from litebert.tasks.baselines import bag_of_words as tfidf_logistic

    def part(split):
        return [e.text_a for e in splits[split]], [e.label for e in splits[split]]

    return tfidf_logistic(part("train"), {"dev": part("dev"), "test": part("test")}, c_grid or C_GRID)


def random_copy(model_dir: Path, out: Path, seed: int = 0) -> Path:
    """The model folder's architecture with freshly initialised weights (the from-scratch control), saved to
    ``out``: fine-tuned with the same recipe, it shows what pretraining adds."""
    import torch

    from litebert.heads import AlbertForPreTraining
    from litebert.io.hf_folder import load_config

    torch.manual_seed(seed)
    AlbertForPreTraining(load_config(model_dir)).save_pretrained(out)
    return out


def finetune_sentiment(model, out: Path, lrs, *, tokenizer=None, data: Path = DATA, device=None, progress=False,
                       **config) -> dict:
    """Fine-tune ``model`` once per learning rate (litebert's learning-rate grid: a run per rate in out/lr-<lr>, the
    one with the best dev accuracy copied into ``out``, every rate's in out/grid.json) and score the chosen model on
    the test split."""
    from litebert import FinetuneConfig, evaluate, finetune
    from litebert.folders import output_kind, read_marker

    if out.is_dir() and not read_marker(out) and all(p.name.startswith("lr-") and output_kind(p) == "fine-tuned-model"
                                                     for p in out.iterdir()):
        for p in out.iterdir():  # the runs of an earlier demo, one per rate with no grid around them: run again
            shutil.rmtree(p)
    result = finetune("sentiment", model, data, out, tokenizer=tokenizer, device=device, progress=progress,
                      config=FinetuneConfig(**config), lr_grid=list(lrs), lr_grid_extend=GRID_EXTEND,
                      overwrite=bool(read_marker(out)))
    if result.interrupted:
        raise KeyboardInterrupt
    test = evaluate(out, data / "test.tsv.gz", device=device, progress=False)
    return {"lr": result.lr, "dev_accuracy": result.best_metrics["accuracy"], "best_step": result.best_step,
            "test_accuracy": test.metrics["accuracy"], "test_examples": len(test.rows),
            "runs": [{"lr": r["lr"], "dev_accuracy": r["score"], "best_step": r["best_step"],
                      **({"added": True} if "added" in r else {})} for r in result.grid]}


def sentiment_report(model, out: Path, lrs, *, control_lrs=None, control_config=None, tokenizer=None,
                     data: Path = DATA, device=None, progress=False, seed: int = 0, on_part=None, **config) -> dict:
    """The whole comparison: the baselines, the pretrained model at each of ``lrs``, and with ``control_lrs`` the
    same architecture from random weights at each of those (rates for training from scratch) with ``config``
    updated by ``control_config`` (e.g. more epochs). Dev chooses each model's rate (and checkpoint); test scores the
    choice once. ``on_part(report)`` is called as each part is added (to save what is done before a long step)."""
    splits = read_splits(data)
    report = {"examples": {s: len(v) for s, v in splits.items()}, "majority": majority(splits),
              "bag_of_words": bag_of_words(splits)}
    done = on_part or (lambda _: None)
    done(report)
    kw = dict(tokenizer=tokenizer or model, data=data, device=device, progress=progress, seed=seed)
    report["pretrained"] = {**finetune_sentiment(model, out / "pretrained", lrs, **kw, **config), "settings": config}
    done(report)
    if control_lrs:
        scratch = random_copy(Path(model), out / "random-init", seed)
        settings = {**config, **(control_config or {})}
        report["from_scratch"] = {**finetune_sentiment(scratch, out / "from-scratch", control_lrs, **kw, **settings),
                                  "settings": settings}
        done(report)
    return report


def added_mark(run: dict) -> str:
    """``+``, written before a rate the grid added beyond an edge dev picked (every report and table marks it so)."""
    return "+" if run.get("added") else ""


def grid(result: dict) -> str:
    """Every rate tried with its best dev accuracy; the one dev chose marked *, one added beyond an edge +."""
    return ", ".join(f"{added_mark(r)}{r['lr']:g}: {100 * r['dev_accuracy']:.1f}"
                     f"{'*' if r['lr'] == result['lr'] else ''}" for r in result["runs"])


def format_report(report: dict) -> str:
    rows = [("pretrained model, fine-tuned", report["pretrained"])]
    if "from_scratch" in report:
        rows.append(("same model from random weights (control)", report["from_scratch"]))
    bow = report["bag_of_words"]
    rows += [(f"bag of words: TF-IDF + logistic regression, C {bow['C']:g}", bow),
             (f"best constant guess (always '{report['majority']['dev_label']}')", report["majority"])]
    n = report["examples"]
    lines = [f"sentiment (Rotten Tomatoes snippets): dev {n['dev']}, test {n['test']} "
             "(dev chooses checkpoint, learning rate and C; test is scored once; * = dev's choice)",
             f"  {'':<48} {'dev':>7} {'test':>7}"]
    for name, r in rows:
        extra = f"  dev by lr: {grid(r)}; step {r['best_step']}" if "lr" in r else ""
        lines.append(f"  {name:<48} {100 * r['dev_accuracy']:6.1f}% {100 * r['test_accuracy']:6.1f}%{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="pretrained model folder (e.g. the pretraining demo's output)")
    ap.add_argument("--tokenizer", help="tokenizer folder or .model (default: the model folder)")
    ap.add_argument("--out", help="where to keep the fine-tuned models (default: a temporary folder)")
    ap.add_argument("--epochs", type=float, default=3.0, help="passes over the training split (default 3)")
    ap.add_argument("--max-steps", type=int, help="a fixed step count instead of --epochs")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lrs", default="1e-4,3e-4",
                    help="comma-separated rates for the pretrained model, the best on dev kept (default 1e-4,3e-4: "
                         "small demo models like higher rates than the paper's)")
    ap.add_argument("--seq-len", type=int, default=64, help="the snippets average ~25 pieces")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--warmup-proportion", type=float, default=0.1)
    ap.add_argument("--no-bias-correction", action="store_true",
                    help="AdamW without bias correction (the official BERT/ALBERT optimizer); default: corrected")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--control", action="store_true",
                    help="also fine-tune the architecture from random weights, at --control-lrs")
    ap.add_argument("--control-lrs", default="1e-4,3e-4",
                    help="the from-scratch control's rates, the best on dev kept (default 1e-4,3e-4)")
    ap.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    def rates(text: str, flag: str) -> list[float]:
        try:
            out = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            ap.error(f"{flag} {text!r}: expected comma-separated numbers, e.g. 1e-4,3e-4")
        if not out or any(x <= 0 for x in out):
            ap.error(f"{flag} {text!r}: expected one or more positive rates")
        return out

    lrs = rates(args.lrs, "--lrs")
    control_lrs = rates(args.control_lrs, "--control-lrs") if args.control else None
    budget = dict(max_steps=args.max_steps) if args.max_steps else dict(epochs=args.epochs)
    with tempfile.TemporaryDirectory() as tmp:
        report = sentiment_report(args.model, Path(args.out or Path(tmp) / "sentiment"), lrs, control_lrs=control_lrs,
                                  tokenizer=args.tokenizer, device=args.device, progress=not args.no_progress,
                                  seed=args.seed, batch_size=args.batch_size, seq_len=args.seq_len,
                                  eval_every=args.eval_every, warmup_proportion=args.warmup_proportion,
                                  bias_correction=not args.no_bias_correction, **budget)
    print("\n" + format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))  # also runs from a checkout without `pip install -e .`
    sys.exit(main())
