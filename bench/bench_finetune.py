"""Fine-tuning throughput: dynamic padding + length-grouped batches, and skipping padding, vs fixed pad-to-max-length
batches with the padding computed (the common HF recipe), same model, data, steps and seed, in one run. Writes the
"finetune" section of docs/BENCHMARKS.md.

    python bench/bench_finetune.py [--preset albert-base-v2] [--layers 2] [--steps 20] [--max-seq-length 128]

Data: the bundled Rotten Tomatoes sentiment snippets (real length distribution, ~25 pieces on average, long tail),
tokenized with the real ALBERT 30k vocabulary (bundled in data/albert-30k).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.report import machine, write_section  # noqa: E402


def tokenizer():
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer.from_pretrained(REPO / "data" / "albert-30k"), "ALBERT 30k vocabulary"


def run(model, feats, steps, batch, pad_to, group, skip, seed):
    from litebert.finetuning.loop import TrainArgs, train

    args = TrainArgs(lr=1e-5, batch_size=batch, train_steps=steps, warmup_steps=0, seed=seed, group_by_length=group,
                     pad_to=pad_to, skip_padding=skip, progress=False)
    t = time.perf_counter()
    train(model, feats, args, log=lambda s: None)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-base-v2")
    ap.add_argument("--layers", type=int, default=2, help="encoder depth (kept small so the CPU run is short)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForSequenceClassification
    from litebert.tasks.features import encode_text, length_grouped_batches, random_batches
    from litebert.tasks.readers import read_glue

    tok, vocab = tokenizer()
    examples = read_glue("sst-2", REPO / "data/finetune/sentiment/train.tsv.gz")
    feats = encode_text(tok, examples, args.max_seq_length, ["0", "1"])
    lengths = [len(f["input_ids"]) for f in feats]
    cfg = dataclasses.replace(AlbertConfig.from_preset(args.preset), vocab_size=tok.vocab_size, num_labels=2,
                              num_hidden_layers=args.layers)
    torch.manual_seed(0)
    init = AlbertForSequenceClassification(cfg).state_dict()

    # Padded tokens per step over the same number of steps, from the same samplers the runs use.
    n = args.steps * args.batch_size

    def tokens(batches, fixed):
        bs = batches[:args.steps]
        return sum(len(b) * (fixed or max(lengths[i] for i in b)) for b in bs)

    grouped = length_grouped_batches(lengths, args.batch_size, np.random.default_rng(0))
    plain = random_batches(len(feats), args.batch_size, np.random.default_rng(0))
    results = {}
    base_name = "fixed pad-to-max, padding computed (HF recipe)"
    for name, pad_to, group, skip in ((base_name, args.max_seq_length, False, False),
                                      ("fixed pad-to-max, padding skipped", args.max_seq_length, False, True),
                                      ("dynamic padding, random batches", None, False, True),
                                      ("dynamic padding + length grouping", None, True, True)):
        model = AlbertForSequenceClassification(cfg)
        model.load_state_dict(init)
        secs = run(model, feats, args.steps, args.batch_size, pad_to, group, skip, 0)
        results[name] = secs
        print(f"{name}: {secs:.2f} s, {n / secs:.1f} examples/s")
    base = results[base_name]
    real = sum(lengths) / len(lengths)
    rows = "\n".join(f"| {k} | {v:.2f} | {n / v:.1f} | {base / v:.2f}x |" for k, v in results.items())
    md = f"""## Fine-tuning throughput: dynamic padding, length grouping, skipped padding (`bench/bench_finetune.py`)

{machine()}; load average {os.getloadavg()[0]:.1f} at the end (other jobs on the machine slow every row alike)

{args.preset} with {args.layers} layers, sequence classification, {args.steps} training steps of
{args.batch_size} on the bundled Rotten Tomatoes snippets ({vocab}; mean {real:.1f} pieces, max
{max(lengths)} after truncation to {args.max_seq_length}), one run of each, same initial weights and seed.

| batches | seconds | examples/s | speed-up vs fixed |
|---|---|---|---|
{rows}

Tokens per step incl. padding: fixed {args.max_seq_length * args.batch_size}, random batches
{tokens(plain, 0) / args.steps:.0f}, length-grouped {tokens(grouped, 0) / args.steps:.0f}; real tokens
{real * args.batch_size:.0f} on average. "Padding skipped" (the fine-tuning loop's default for every head but \
SQuAD's): the dense layers run on the
real tokens only and attention alone sees the padded batch; the loss and gradients are those of the padded
computation.
"""
    print(md)
    if not args.no_write:
        write_section("finetune", md)


if __name__ == "__main__":
    main()
