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

    from litebert import FinetuneConfig, evaluate, finetune
    from litebert.tasks.readers import read_glue

    dev = read_glue("sst-2", DATA / "dev.tsv.gz")
    counts = Counter(e.label for e in dev)
    majority_label, majority_n = counts.most_common(1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "sentiment"
        config = FinetuneConfig(max_steps=args.max_steps, batch_size=args.batch_size, lr=args.lr,
                                seq_len=args.seq_len, eval_every=args.eval_every, seed=args.seed)
        result = finetune("sentiment", args.model, DATA, out, tokenizer=args.tokenizer, config=config,
                          overwrite=(out / "finetune.json").is_file(), progress=not args.no_progress)
        if result.interrupted:
            return 130
        meta = json.loads((out / "finetune.json").read_text())
        test = evaluate(out, DATA / "test.tsv.gz", progress=False)
        test_acc, test_n = test.metrics["accuracy"], len(test.rows)
        test_base = sum(r["label"] == majority_label for r in test.rows) / test_n
    acc = meta["dev_metrics"]["accuracy"]
    base = majority_n / len(dev)
    print(f"\nsentiment (Rotten Tomatoes snippets), majority-class baseline = always '{majority_label}'")
    print(f"  dev  ({len(dev)}): accuracy {100 * acc:.1f}% (the best of the evaluations, step {meta['best_step']}) "
          f"vs baseline {100 * base:.1f}%: {100 * (acc - base):+.1f} points")
    print(f"  test ({test_n}): accuracy {100 * test_acc:.1f}% (that checkpoint, never used for choosing) "
          f"vs baseline {100 * test_base:.1f}%: {100 * (test_acc - test_base):+.1f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
