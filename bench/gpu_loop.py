"""Where the pretraining loop loses speed against its bare step: `litebert.pretrain` at the GPU demo's shape
(ALBERT-base's
width at 6 layers, 128 x 128, 20 predictions, LAMB, bf16) under one change at a time, beside `bench/gpu_mfu.py`'s
synthetic step at the same shape (run it in the same call for the ratio).

    python3 bench/gpu_loop.py --json loop.json                       # on a CUDA machine, ~3 minutes
    python3 bench/gpu_loop.py --device cpu --toy --json loop.json    # the same variants at toy size on the CPU

Each variant trains --steps steps from scratch in a scratch folder (no evaluation, one checkpoint at the end) and
reports its tokens/s from `metrics.jsonl` between the first logged step at or after --skip and the last one (tokens
counted over the loop's elapsed time, evaluations and checkpoints not included), and the MFU at that rate. The variants:
the demo's loop as it runs (`demo`: 6 data workers, the plateau guard, log every 10),
then each with one thing changed: no data workers, 12 workers, SDPA on the padded layout instead of varlen
attention, the guard off, logging (and reading back) every 100 steps, reading back every step, torch.compile. The store
is built once from the bundled corpus
(`data/corpus`, the 30k ALBERT vocabulary) unless --store names one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

# name -> (TrainConfig changes, pretrain() keyword changes), each over the demo's loop
VARIANTS = {
    "demo": ({}, {}),
    "no-workers": ({"data_workers": 0}, {}),
    "12-workers": ({"data_workers": 12}, {}),
    "sdpa-padded": ({}, {"attention": "sdpa"}),
    "guard-off": ({"on_plateau": "off"}, {}),
    "log-every-100": ({"log_every": 100}, {}),
    "read-every-1": ({"log_every": 1, "read_every": 1}, {}),  # the device read back after every step
    "compiled": ({"compile": True}, {}),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", help="token store to train on (default: the bundled corpus, tokenized once into --work)")
    p.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {', '.join(VARIANTS)}")
    p.add_argument("--steps", type=int, default=300, help="steps per variant (default 300)")
    p.add_argument("--skip", type=int, default=50, help="steps left out at the start (default 50)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--toy", action="store_true", help="a tiny model and batch (the CPU smoke run)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        p.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.steps < 1 or args.skip < 0:
        p.error("--steps must be >= 1 and --skip >= 0")
    return args


def build_store(work: Path, toy: bool) -> Path:
    from litebert import prepare_store
    from litebert.tokenizer import load_tokenizer

    out = work / "store"
    if not (out / "manifest.json").exists():
        files = sorted((REPO / "data" / "corpus").glob("*.txt.xz"))[:1 if toy else None]
        prepare_store(files, load_tokenizer(REPO / "data" / "albert-30k"), out, workers=2 if toy else 8,
                      progress=False)
    return out


def shape(toy: bool):
    from litebert.config import AlbertConfig

    if toy:
        return AlbertConfig.from_preset("albert-base-v2", vocab_size=30000, embedding_size=16, hidden_size=32,
                                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64), \
            dict(batch_size=4, micro_batch=4, seq_len=32, max_predictions=5, data_workers=1)
    return AlbertConfig.from_preset("albert-base-v2", vocab_size=30000, num_hidden_layers=6), \
        dict(batch_size=128, micro_batch=128, seq_len=128, max_predictions=20, data_workers=6)


def run_variant(name: str, store: Path, work: Path, args) -> dict:
    from litebert import TrainConfig, pretrain
    from litebert.engine.metrics_log import read_metrics

    model, sizes = shape(args.toy)
    train_changes, call_changes = VARIANTS[name]
    if args.toy and "data_workers" in train_changes:
        train_changes = {**train_changes, "data_workers": min(train_changes["data_workers"], 2)}
    if args.toy and "log_every" in train_changes:  # a toy run is a few steps: log sparsely, not never
        train_changes = {**train_changes, "log_every": 4}
    cfg = TrainConfig(**{**dict(optimizer="lamb", lr=0.00176, warmup_steps=min(100, args.steps // 2), seed=1,
                                max_steps=args.steps, eval_every=0, save_every=args.steps, keep_last=1,
                                log_every=10 if not args.toy else 1, on_plateau="warn", plateau_check_steps=150,
                                report_to="none"), **sizes, **train_changes})
    t0 = time.perf_counter()
    pretrain(store, work / name, model=model, train=cfg, device=args.device, progress=False, overwrite=True,
             **call_changes)
    wall = time.perf_counter() - t0
    records = read_metrics(work / name, "train")
    kept = [r for r in records if r["step"] >= args.skip]
    rate = mfu = None
    if len(kept) >= 2 and kept[-1]["elapsed_s"] > kept[0]["elapsed_s"]:
        first, last = kept[0], kept[-1]
        rate = (last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"])
        if last.get("mfu") is not None and last["tokens_per_s"] > 0:  # MFU is proportional to tokens/s
            mfu = rate * last["mfu"] / last["tokens_per_s"]
    return {"variant": name, "steps": args.steps, "wall_s": round(wall, 1), "from_step": kept[0]["step"] if kept
            else None, "to_step": kept[-1]["step"] if kept else None, "tokens_per_s": rate, "mfu": mfu}


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_loop.py: no CUDA device; use --device cpu --toy for the smoke run", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        store = Path(args.store) if args.store else build_store(work, args.toy)
        results = []
        for name in args.variants.split(","):
            r = run_variant(name, store, work, args)
            results.append(r)
            mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
            print(f"{name:>14}: {r['tokens_per_s'] or 0:>12,.0f} tokens/s, MFU {mfu} ({r['wall_s']} s)", flush=True)
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "torch": torch.__version__, "toy": args.toy,
                                               "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
