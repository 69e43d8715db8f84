"""Fine-tune a pretrained model folder on the bundled Rotten Tomatoes sentiment task and report dev accuracy beside
the majority-class baseline.

    python scripts/demo_finetune.py --model PRETRAINED_DIR [--out DIR] [--max-steps 400] [--lr 1e-4]

The data (data/finetune/sentiment, from the vaderSentiment 3.3.2 sdist, MIT) is 8,568 training, 1,000 dev and 1,000
test movie review snippets labelled by the sign of their mean human rating. The checkpoint kept is the best on dev (as
the official run_classifier does), so its dev accuracy is optimistic; the test accuracy of that checkpoint is the
unbiased figure, and both are printed. The folder must hold the tokenizer (spiece.model)
or pass --tokenizer. Exit status 0 even if the model does not beat the baseline: the numbers are the report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data" / "finetune" / "sentiment"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="pretrained model folder (e.g. the pretraining demo's output)")
    ap.add_argument("--tokenizer", help="tokenizer folder or .model (default: the model folder)")
    ap.add_argument("--out", help="where to keep the fine-tuned model (default: a temporary folder)")
    ap.add_argument("--max-steps", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4, help="small demo models like a higher rate than the paper's")
    ap.add_argument("--seq-len", type=int, default=64, help="the snippets average ~25 pieces")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    from litebert.cli import main as litebert
    from litebert.tasks.readers import read_glue

    dev = read_glue("sst-2", DATA / "dev.tsv.gz")
    counts = Counter(e.label for e in dev)
    majority_label, majority_n = counts.most_common(1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        cmd = ["finetune", "sentiment", "--model", args.model, "--data", str(DATA), "--out", str(out),
               "--max-steps", str(args.max_steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
               "--seq-len", str(args.seq_len), "--eval-every", str(args.eval_every),
               "--seed", str(args.seed)]
        cmd += ["--tokenizer", args.tokenizer] if args.tokenizer else []
        cmd += ["--no-progress"] if args.no_progress else []
        code = litebert(cmd)
        if code:
            return code
        meta = json.loads((out / "finetune.json").read_text())
        test_acc, test_base, test_n = _test_accuracy(out, majority_label)
    acc = meta["dev_metrics"]["accuracy"]
    base = majority_n / len(dev)
    print(f"\nsentiment (Rotten Tomatoes snippets), majority-class baseline = always '{majority_label}'")
    print(f"  dev  ({len(dev)}): accuracy {100 * acc:.1f}% (the best of the evaluations, step {meta['best_step']}) "
          f"vs baseline {100 * base:.1f}%: {100 * (acc - base):+.1f} points")
    print(f"  test ({test_n}): accuracy {100 * test_acc:.1f}% (that checkpoint, never used for choosing) "
          f"vs baseline {100 * test_base:.1f}%: {100 * (test_acc - test_base):+.1f} points")
    return 0


def _test_accuracy(model_dir: Path, majority_label: str) -> tuple[float, float, int]:
    """Accuracy of the fine-tuned folder on the held-out test split, and the dev-majority label's share there."""
    from litebert.tasks import runner

    preset, model, tok, meta = runner.load_finetuned(model_dir)
    examples = preset.kind.read(DATA / "test.tsv.gz", meta.get("labels"))
    max_len = min(preset.max_seq_length, model.config.max_position_embeddings)
    metrics, _ = runner.evaluate(preset, model, tok, examples, meta.get("labels"), max_len)
    base = sum(e.label == majority_label for e in examples) / len(examples)
    return metrics["accuracy"], base, len(examples)


if __name__ == "__main__":
    sys.exit(main())
