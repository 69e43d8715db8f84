"""Batch encoding throughput: litebert's AlbertTokenizer against HF transformers' AlbertTokenizer, same texts, one run.

Texts: lines of the bundled demo corpus (data/corpus/*.txt.xz). Vocabulary: the real ALBERT 30k vocabulary bundled in
data/albert-30k. HF loads the folder written by our save_pretrained (so both produce the official segmentation). Writes
the "tokenizer" section of docs/BENCHMARKS.md.

    .venv/bin/python bench/bench_tokenizer.py [--lines 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import lzma
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from litebert.tokenizer import AlbertTokenizer  # noqa: E402
from report import machine, write_section  # noqa: E402


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import transformers

    transformers.logging.set_verbosity_error()
    files = sorted((ROOT / "data" / "corpus").glob("*.txt.xz"))
    lines = [line for f in files for line in lzma.open(f, "rt", encoding="utf-8").read().splitlines() if line.strip()]
    texts = random.Random(0).sample(lines, min(args.lines, len(lines)))
    n_chars = sum(map(len, texts))

    with tempfile.TemporaryDirectory() as tmp:
        tok, vocab_name = AlbertTokenizer.from_pretrained(ROOT / "data" / "albert-30k"), "ALBERT 30k-clean (real)"
        folder = tok.save_pretrained(Path(tmp) / "saved")
        hf = transformers.AutoTokenizer.from_pretrained(str(folder))

        rows = []
        cases = [
            ("ids, no specials", lambda: tok.encode_batch_ids(texts),
             lambda: hf(texts, add_special_tokens=False)["input_ids"]),
            ("model inputs ([CLS] A [SEP], padded)", lambda: tok(texts, padding=True),
             lambda: hf(texts, padding=True)),
            ("model inputs + offsets", lambda: tok(texts, return_offsets=True),
             lambda: hf(texts, return_offsets_mapping=True)),
        ]
        ours_ids, ref_ids = tok.encode_batch_ids(texts), hf(texts, add_special_tokens=False)["input_ids"]
        agree = sum(a == b for a, b in zip(ours_ids, ref_ids)) / len(texts)
        for name, ours, ref in cases:
            t_ours, t_ref = best_of(ours, args.repeats), best_of(ref, args.repeats)
            rows.append((name, len(texts) / t_ours, len(texts) / t_ref, t_ref / t_ours))
            print(f"{name:40s} litebert {rows[-1][1]:9.0f} texts/s   HF {rows[-1][2]:9.0f} texts/s   "
                  f"ratio {rows[-1][3]:.2f}x")

    md = [
        "## Tokenizer: batch encoding throughput (`bench/bench_tokenizer.py`)",
        "",
        f"{len(texts)} lines of the demo corpus ({n_chars / len(texts):.0f} characters on average), vocabulary: "
        f"{vocab_name}; HF `AutoTokenizer` ({type(hf).__name__}, transformers {transformers.__version__}, Rust "
        f"`tokenizers`) on the folder our `save_pretrained` wrote. Best of {args.repeats}; "
        f"{agree:.2%} of the lines get identical ids (the rest: the official digit-comma re-split, see "
        "docs/tokenizer.md).",
        "",
        "| task | litebert texts/s | HF texts/s | litebert / HF |",
        "|---|---:|---:|---:|",
    ]
    md += [f"| {name} | {a:,.0f} | {b:,.0f} | {r:.2f}x |" for name, a, b, r in rows]
    md += ["", f"Machine: {machine()}; {os.cpu_count()} cores available to SentencePiece's batch encoder."]
    write_section("tokenizer", "\n".join(md))


if __name__ == "__main__":
    main()
