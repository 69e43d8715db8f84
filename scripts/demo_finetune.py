"""Fine-tune a pretrained model folder on the bundled Rotten Tomatoes sentiment task and report dev accuracy beside
the majority-class baseline.

    python scripts/demo_finetune.py --model PRETRAINED_DIR [--out DIR] [--steps 400] [--lr 1e-4]

The data (data/finetune/sentiment, from the vaderSentiment 3.3.2 sdist, MIT) is 8,568 training and 1,000 dev movie
review snippets labelled by the sign of their mean human rating. The folder must hold the tokenizer (spiece.model)
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
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4, help="small demo models like a higher rate than the paper's")
    ap.add_argument("--max-seq-length", type=int, default=64, help="the snippets average ~25 pieces")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    from litebert.cli import main as litebert
    from litebert.finetune.readers import read_glue

    dev = read_glue("sst-2", DATA / "dev.tsv.gz")
    counts = Counter(e.label for e in dev)
    majority_label, majority_n = counts.most_common(1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        cmd = ["finetune", "sentiment", "--model", args.model, "--data", str(DATA), "--out", str(out),
               "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
               "--max-seq-length", str(args.max_seq_length), "--eval-every", str(args.eval_every),
               "--seed", str(args.seed)]
        cmd += ["--tokenizer", args.tokenizer] if args.tokenizer else []
        cmd += ["--no-progress"] if args.no_progress else []
        code = litebert(cmd)
        if code:
            return code
        meta = json.loads((out / "finetune.json").read_text())
    acc = meta["dev_metrics"]["accuracy"]
    base = majority_n / len(dev)
    print(f"\nsentiment (Rotten Tomatoes snippets, {len(dev)} dev): accuracy {100 * acc:.1f}% "
          f"(best of the evaluations, step {meta['best_step']}) vs majority-class baseline {100 * base:.1f}% "
          f"(always '{majority_label}'): {'+' if acc >= base else ''}{100 * (acc - base):.1f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
