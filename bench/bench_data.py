"""Data pipeline benchmark: (1) peak memory of `prepare_store` on corpora of growing size, (2) examples per second of
`PretrainingDataset` + collate on one core beside HF's `DataCollatorForLanguageModeling` (the closest HF baseline:
token-level masking of ready pairs, no SOP, no n-grams) and beside the cost of one ALBERT-base training step
(batch 8 x 128, forward + backward + LAMB) on this machine.

    .venv/bin/python bench/bench_data.py [--sizes-mb 30 300] [--workers 2] [--steps 4]

Writes the "data" section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VOCAB = ROOT / "data" / "albert-30k" / "spiece.model"
CORPUS = [ROOT / "data" / "corpus" / "sotu.txt.xz", ROOT / "data" / "corpus" / "moby_dick.txt.xz"]

# Run in a fresh interpreter so that its peak RSS is the preparation's alone.
PREPARE = """
import json, resource, sys, time
from litebert.tokenizer import AlbertTokenizer
from litebert.data.store import prepare_store
src, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = AlbertTokenizer.from_pretrained(sys.argv[4])
t = time.perf_counter()
store = prepare_store([src], tok, out, workers=workers, progress=False)
secs = time.perf_counter() - t
self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": secs, "tokens": store.num_tokens, "rss_main_mb": self_kb / 1024,
                  "rss_worker_mb": child_kb / 1024}))
"""

OPEN = """
import json, sys, time
from litebert.data.pretraining import PretrainingDataset
t = time.perf_counter()
ds = PretrainingDataset(sys.argv[1], max_seq_length=128)
secs = time.perf_counter() - t
for i in range(2000):
    ds.example(0, i)
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
mb = lambda key: int(status[key].split()[0]) / 1024
print(json.dumps({"seconds": secs, "examples": ds.num_examples, "rss_anon_mb": mb("RssAnon"),
                  "rss_file_mb": mb("RssFile")}))
"""


def make_corpus(path: Path, size_mb: int) -> int:
    """Repeat the bundled public-domain corpus (official format) up to ``size_mb`` MB; returns the bytes written."""
    text = b"".join(lzma.decompress(p.read_bytes()).rstrip(b"\n") + b"\n\n" for p in CORPUS)
    with open(path, "wb") as f:
        written = 0
        while written < size_mb * 1e6:
            f.write(text)
            written += len(text)
    return written


def run_json(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_memory(sizes_mb: list[int], workers: int, tmp: Path) -> tuple[list[dict], Path]:
    rows, store = [], None
    for mb in sizes_mb:
        src = tmp / f"corpus_{mb}.txt"
        nbytes = make_corpus(src, mb)
        store = tmp / f"store_{mb}"
        r = run_json(PREPARE, src, store, workers, VOCAB)
        r.update(size_mb=nbytes / 1e6, open=run_json(OPEN, store))
        rows.append(r)
        src.unlink()
        print(f"prepare {nbytes / 1e6:.0f} MB: {r}", flush=True)
    return rows, store


def bench_speed(store: Path, steps: int) -> dict:
    import numpy as np
    import torch

    from litebert.data.pretraining import PretrainingDataset, collate_pretraining

    torch.set_num_threads(1)
    ds = PretrainingDataset(store, max_seq_length=128, seed=0)
    n = 4000
    t = time.perf_counter()
    batches = [collate_pretraining([ds.example(0, i) for i in range(b, b + 8)]) for b in range(0, n, 8)]
    ours = n / (time.perf_counter() - t)

    # HF baseline: DataCollatorForLanguageModeling masks ready-made token lists (15%, 80/10/10, token level).
    hf = None
    try:
        from transformers import AutoTokenizer, DataCollatorForLanguageModeling

        from litebert.tokenizer import AlbertTokenizer

        tok_dir = store.parent / "hf_tok"
        AlbertTokenizer.from_pretrained(VOCAB).save_pretrained(tok_dir)
        collator = DataCollatorForLanguageModeling(AutoTokenizer.from_pretrained(tok_dir), mlm_probability=0.15,
                                                   return_tensors="pt")
        features = [{"input_ids": ds.example(0, i)["input_ids"].tolist()} for i in range(n)]
        t = time.perf_counter()
        for b in range(0, n, 8):
            collator(features[b:b + 8])
        hf = n / (time.perf_counter() - t)
    except Exception as e:  # the baseline is informative only
        print(f"HF baseline skipped: {e}")

    # ALBERT-base training step, batch 8 x 128, all cores.
    import dataclasses

    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.optim.param_groups import build_optimizer

    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    cfg = AlbertConfig.from_preset("albert-base-v2")
    cfg = dataclasses.replace(cfg, vocab_size=ds.facts.vocab_size)
    model = AlbertForPreTraining(cfg).train()
    opt = build_optimizer(model, "lamb", lr=1e-4)
    full = [b for b in batches if b["input_ids"].shape[1] == 128][: steps + 1]
    times = []
    for i, batch in enumerate(full):
        t = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:  # the first step warms up allocators
            times.append(time.perf_counter() - t)
    step = float(np.median(times))
    return {"ours_ex_s": ours, "hf_ex_s": hf, "step_s": step, "threads": torch.get_num_threads(),
            "data_share": (8 / ours) / step}


def report(mem: list[dict], speed: dict, workers: int) -> str:
    from bench.report import machine

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = ["## data (`bench/bench_data.py`)", "",
             f"Machine: {machine()}; load average at the end of the run {load} (the machine is shared).", "",
             f"**Memory of `litebert data prepare`** (30k ALBERT vocabulary, `--workers {workers}`; the corpus is the "
             "bundled public-domain text repeated; peak RSS measured with `getrusage` in a fresh process):", "",
             "| corpus | tokens | time | tokens/s | peak RSS main | peak RSS worker | open dataset (128) | "
             "RSS after open + 2k random examples: anonymous / file-backed (page cache of the memory-mapped store) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in mem:
        o = r["open"]
        lines.append(f"| {r['size_mb']:.0f} MB | {r['tokens'] / 1e6:.1f} M | {r['seconds']:.0f} s | "
                     f"{r['tokens'] / r['seconds'] / 1e3:.0f} k | {r['rss_main_mb']:.0f} MB | "
                     f"{r['rss_worker_mb']:.0f} MB"
                     f" | {o['seconds']:.2f} s, {o['examples']:,} examples | {o['rss_anon_mb']:.0f} MB / "
                     f"{o['rss_file_mb']:.0f} MB |")
    ratio = mem[-1]["size_mb"] / mem[0]["size_mb"]
    growth = mem[-1]["rss_main_mb"] / mem[0]["rss_main_mb"]
    lines += ["", f"A {ratio:.0f}x larger corpus changes the preparation's peak RSS by a factor "
              f"{growth:.2f}: memory is "
              "bounded by the block size and the worker count, not by the corpus. A dataset keeps one chunk table "
              "(24 bytes per example) plus the epoch order (8 bytes per example) in anonymous memory and "
              "memory-maps the tokens: the file-backed pages are the OS page cache, shared by all DataLoader "
              "workers and reclaimable.", ""]
    hf = f"{speed['hf_ex_s']:,.0f}" if speed["hf_ex_s"] else "n/a"
    lines += ["**Speed on one core** (SOP pairs + whole-word n-gram masking + collate, max_seq_length 128):", "",
              "| pipeline | examples/s (1 core) |", "|---|---|",
              f"| litebert `PretrainingDataset.example` + `collate_pretraining` | {speed['ours_ex_s']:,.0f} |",
              f"| HF `DataCollatorForLanguageModeling` (token masking of ready pairs only) | {hf} |", "",
              f"ALBERT-base training step (batch 8 x 128, forward + backward + LAMB, {speed['threads']} threads): "
              f"{speed['step_s']:.2f} s. Building its 8 examples on one core costs "
              f"{8 / speed['ours_ex_s'] * 1e3:.1f} ms = **{100 * speed['data_share']:.2f}% of the step** "
              "(target: < 5%)."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[30, 300])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--no-write", action="store_true", help="print, do not update docs/BENCHMARKS.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mem, store = bench_memory(args.sizes_mb, args.workers, Path(d))
        speed = bench_speed(Path(d) / f"store_{args.sizes_mb[0]}", args.steps)
        text = report(mem, speed, args.workers)
    print(text)
    if not args.no_write:
        from bench.report import write_section

        write_section("data", text)


if __name__ == "__main__":
    main()
