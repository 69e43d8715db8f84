"""litebert and HF transformers' ALBERT side by side on one CUDA GPU, in one run: training steps and inference.

    python3 bench/gpu_bench.py                    # every section; prints the tables, writes --json
    python3 bench/gpu_bench.py --only pretrain    # pretrain | pipeline | finetune | inference (comma-separated)
    python3 bench/gpu_bench.py --quick            # a smoke run: fewer pairs, no compile, no xxlarge

Sections (bf16 autocast for both implementations; the same batches, the same optimizer for both):
- pretrain: the official pretraining step on full-length synthetic sequences (length 512, 76 masked positions, SOP,
  clipping at 1.0, LAMB): litebert's MLM head at the masked positions vs HF with its own ``labels`` (logits at every
  position); ALBERT-base/-large/-xxlarge, eager and ``torch.compile``; MFU by `litebert.engine.metrics_log.
  flops_per_sequence` (matmuls, training = 3 x forward) over the GPU's dense bf16 peak.
- pipeline: the same step on the data pipeline's real batches (the bundled corpus at length 512: padded to the
  longest of the batch); litebert skips the padding (varlen attention on the packed tokens), HF computes it.
- finetune: sequence-classification fine-tuning steps (ALBERT-base, AdamW) on batches of variable-length passages
  in data order, padded to the longest of the batch (as HF's DataCollatorWithPadding).
- inference: classifying variable-length passages; HF in batches of 64 in input order, padded to the longest of the
  batch, its weights in bf16; litebert through `predict_outputs` (the path of `litebert predict`: batches of similar
  length, padding skipped, bf16 autocast). Same texts, logits copied back to the host by both.

Timing: each measurement is ``--steps`` calls between two ``torch.cuda.synchronize``; HF and litebert alternate in
back-to-back pairs (order flipped every other pair); the ratio is median(HF) / median(litebert) with a 90% bootstrap
interval over pairs (`bench.bench_model.bootstrap_ratio`). Peak memory: the most allocated during a step, above what
was allocated before it (both models stay resident).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
from bench.bench_model import bootstrap_ratio, corpus_texts, hf_model, our_model, pipeline_batches, tokenize  # noqa: E402
from litebert.config import AlbertConfig  # noqa: E402
from litebert.engine.metrics_log import flops_per_sequence, peak_tflops_of  # noqa: E402

CUDA = torch.device("cuda")
BF16 = torch.bfloat16


def both(config: AlbertConfig, cls_name: str):
    """litebert's and HF's model of the same class on the GPU, in training mode."""
    torch.manual_seed(0)
    return our_model(config, cls_name).to(CUDA).train(), hf_model(config, cls_name).to(CUDA).train()


def measure(fns: dict, steps: int, pairs: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each function, ``steps`` calls per measurement, in ``pairs`` alternating rounds."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for r in range(pairs):
        order = list(fns.items())
        for name, fn in (order[::-1] if r % 2 else order):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t) / steps)
    return times


def peak_memory(fn) -> float:
    """GiB allocated at the peak of one call, above what was allocated before it."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**30


def summary(times: dict[str, list[float]], ours: str, hf: str) -> dict:
    lo, hi = bootstrap_ratio(times[hf], times[ours])
    return {"ms": {k: 1e3 * statistics.median(v) for k, v in times.items()},
            "ratio": statistics.median(times[hf]) / statistics.median(times[ours]), "interval": [lo, hi],
            "pairs": len(times[ours])}


def lamb(model):
    from litebert.optim import build_optimizer

    return build_optimizer(model, "lamb", lr=1e-4)


def train_step(model, optimizer, forward):
    """forward() -> loss under bf16 autocast; backward; clip at 1.0 (official); optimizer step."""
    def step():
        with torch.autocast("cuda", dtype=BF16):
            loss = forward()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


# ---------------------------------------------------------------------------------------------- pretraining
def synthetic(config: AlbertConfig, batch: int, seq: int, predictions: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch, seq), generator=g)
    types = (torch.arange(seq)[None] >= seq // 2).long().expand(batch, -1).contiguous()
    positions = torch.stack([torch.randperm(seq - 1, generator=g)[:predictions] + 1 for _ in range(batch)]).sort(1)[0]
    targets = torch.randint(5, config.vocab_size, (batch, predictions), generator=g)
    labels = torch.full_like(ids, -100).scatter_(1, positions, targets)
    sop = torch.randint(0, 2, (batch,), generator=g)
    return {k: v.to(CUDA) for k, v in dict(ids=ids, types=types, positions=positions, targets=targets,
                                           weights=torch.ones(batch, predictions), labels=labels, sop=sop).items()}


def pretraining_steps(config: AlbertConfig, b: dict, compiled) -> dict:
    """``compiled``: False, or a torch.compile mode (\"default\")."""
    ours, hf = both(config, "AlbertForPreTraining")
    fo, fh = (torch.compile(ours, mode=compiled), torch.compile(hf, mode=compiled)) if compiled else (ours, hf)
    return {
        "litebert": train_step(ours, lamb(ours), lambda: fo(
            b["ids"], None, b["types"], mlm_positions=b["positions"], mlm_ids=b["targets"], mlm_weights=b["weights"],
            sentence_order_label=b["sop"]).loss),
        "hf": train_step(hf, lamb(hf), lambda: fh(
            input_ids=b["ids"], token_type_ids=b["types"], labels=b["labels"], sentence_order_label=b["sop"]).loss),
    }


def section_pretrain(args, peak: float) -> list[dict]:
    rows = []
    plans = [("albert-base-v2", 32, (False, "default")), ("albert-large-v2", 32, (False, "default")),
             ("albert-xxlarge-v2", 8, (False,))]
    if args.quick:
        plans = [("albert-base-v2", 16, (False,)), ("albert-large-v2", 16, (False,))]
    for preset, batch, modes in plans:
        config = AlbertConfig.from_preset(preset)
        b = synthetic(config, batch, 512, 76)
        flops = batch * flops_per_sequence(config, 512, 76)
        for compiled in modes if not args.no_compile else (False,):
            fns = pretraining_steps(config, b, compiled)
            times = measure(fns, args.steps, args.pairs, warmup=args.warmup + (10 if compiled else 0))
            row = {"section": "pretrain", "preset": preset, "batch": batch, "seq": 512, "compiled": compiled,
                   **summary(times, "litebert", "hf"),
                   "memory_gib": {k: peak_memory(fn) for k, fn in fns.items()}}
            row["mfu"] = {k: flops / (ms / 1e3) / 1e12 / peak for k, ms in row["ms"].items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del fns
            torch.cuda.empty_cache()
    return rows


def section_pipeline(args, peak: float) -> list[dict]:
    from litebert.padding import prepare_batch, varlen_available

    config = AlbertConfig.from_preset("albert-large-v2")
    batch = 16 if args.quick else 32
    cpu_batches, real = pipeline_batches(4 if args.quick else 8, batch, 512, 76)
    hf_batches = [{k: v.to(CUDA) for k, v in b.items()} for b in cpu_batches]
    ours, hf = both(config, "AlbertForPreTraining")
    ours_next, hf_next = itertools.cycle(cpu_batches).__next__, itertools.cycle(hf_batches).__next__

    def our_forward():
        # as the training loop: the batch moves to the GPU with its packing made on the CPU, each step
        batch_ = prepare_batch({k: v for k, v in ours_next().items() if k != "labels"}, CUDA, pack=True,
                               varlen=varlen_available())
        return ours(**batch_).loss

    def hf_forward():
        b = hf_next()
        return hf(input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"],
                  labels=b["labels"], sentence_order_label=b["sentence_order_label"]).loss

    fns = {"litebert": train_step(ours, lamb(ours), our_forward), "hf": train_step(hf, lamb(hf), hf_forward)}
    times = measure(fns, len(cpu_batches), args.pairs, warmup=args.warmup)
    memory = {k: peak_memory(fn) for k, fn in fns.items()}
    tokens = sum(int(b["attention_mask"].sum()) for b in cpu_batches) / len(cpu_batches)
    padded = sum(b["attention_mask"].numel() for b in cpu_batches) / len(cpu_batches)
    lengths = [int(n) for b in cpu_batches for n in b["attention_mask"].sum(1)]
    flops = sum(flops_per_sequence(config, n, 76) for n in lengths) / len(cpu_batches)
    row = {"section": "pipeline", "preset": "albert-large-v2", "batch": batch, "seq": 512,
           "real_token_share": tokens / padded, "epoch_real_share": real, **summary(times, "litebert", "hf"),
           "memory_gib": memory}
    row["mfu"] = {k: flops / (ms / 1e3) / 1e12 / peak for k, ms in row["ms"].items()}
    print(json.dumps(row), flush=True)
    return [row]


# ---------------------------------------------------------------------------------------------- fine-tuning
def passages(n: int, seq: int) -> list[list[int]]:
    return tokenize(corpus_texts(n, seed=1), seq)


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, :len(row)], mask[r, :len(row)] = torch.tensor(row), 1
    return ids, mask


def section_finetune(args, peak: float) -> list[dict]:
    from litebert.padding import prepare_batch, varlen_available

    config = AlbertConfig.from_preset("albert-base-v2", num_labels=2)
    batch, n_batches = 32, 4 if args.quick else 16
    ids = passages(batch * n_batches, 512)
    cpu_batches = []
    for k in range(n_batches):
        x, m = padded(ids[k * batch:(k + 1) * batch])
        cpu_batches.append({"input_ids": x, "attention_mask": m, "token_type_ids": torch.zeros_like(x),
                            "labels": torch.tensor([len(r) % 2 for r in ids[k * batch:(k + 1) * batch]])})
    hf_batches = [{k: v.to(CUDA) for k, v in b.items()} for b in cpu_batches]
    ours, hf = both(config, "AlbertForSequenceClassification")
    ours_next, hf_next = itertools.cycle(cpu_batches).__next__, itertools.cycle(hf_batches).__next__

    def our_forward():
        return ours(**prepare_batch(ours_next(), CUDA, pack=True, varlen=varlen_available())).loss

    def hf_forward():
        return hf(**hf_next()).loss

    fns = {"litebert": train_step(ours, torch.optim.AdamW(ours.parameters(), lr=1e-5, fused=True), our_forward),
           "hf": train_step(hf, torch.optim.AdamW(hf.parameters(), lr=1e-5, fused=True), hf_forward)}
    times = measure(fns, n_batches, args.pairs, warmup=args.warmup)
    memory = {k: peak_memory(fn) for k, fn in fns.items()}
    real = sum(int(b["attention_mask"].sum()) for b in cpu_batches) / sum(b["attention_mask"].numel()
                                                                          for b in cpu_batches)
    row = {"section": "finetune", "preset": "albert-base-v2", "batch": batch, "seq": 512, "real_token_share": real,
           "mean_length": sum(map(len, ids)) / len(ids), **summary(times, "litebert", "hf"), "memory_gib": memory}
    print(json.dumps(row), flush=True)
    return [row]


# ---------------------------------------------------------------------------------------------- inference
def section_inference(args, peak: float) -> list[dict]:
    from litebert.engine.runtime import Runtime
    from litebert.inference.finetuned import predict_outputs
    from litebert.padding import varlen_available

    config = AlbertConfig.from_preset("albert-base-v2", num_labels=2)
    n = 512 if args.quick else 4096
    ids = passages(n, 512)
    features = [{"input_ids": r, "token_type_ids": [0] * len(r)} for r in ids]
    import tempfile

    from litebert.heads import AlbertForSequenceClassification

    torch.manual_seed(0)
    hf = hf_model(config, "AlbertForSequenceClassification")
    with tempfile.TemporaryDirectory() as tmp:  # the same weights in both
        hf.save_pretrained(tmp)
        ours = AlbertForSequenceClassification.from_pretrained(tmp, strict=True).to(CUDA).eval()
    hf = hf.to(CUDA).to(BF16).eval()
    hf_batches = [padded(ids[k:k + 64]) for k in range(0, n, 64)]

    def run_ours():
        return predict_outputs(ours, features, batch_size=64, runtime=Runtime.of_model(ours, BF16, varlen_available()))

    def run_ours_by_tokens():  # `litebert predict --batch-tokens 32768`: short texts many to a batch
        return predict_outputs(ours, features, batch_size=32768, amp=BF16, max_tokens=32768,
                               varlen=varlen_available())

    @torch.no_grad()
    def run_hf():
        out = []
        for x, m in hf_batches:
            logits = hf(input_ids=x.to(CUDA, non_blocking=True), attention_mask=m.to(CUDA, non_blocking=True)).logits
            out.append(logits.float().cpu())
        return out

    ref = torch.cat(run_hf())
    got = torch.from_numpy(np.stack([o["logits"] for o in run_ours()]))
    spread = ref.std().item()
    by_tokens = torch.from_numpy(np.stack([o["logits"] for o in run_ours_by_tokens()]))
    times = measure({"litebert": run_ours, "hf": run_hf, "litebert_batch_tokens": run_ours_by_tokens}, 1,
                    args.pairs, warmup=1)
    row = {"section": "inference", "preset": "albert-base-v2", "texts": n, "batch": 64, "seq": 512,
           "mean_length": sum(map(len, ids)) / n, "max_abs_logit_diff": float((ref - got).abs().max()),
           "max_abs_logit_diff_batch_tokens": float((ref - by_tokens).abs().max()),
           "logit_std": spread, **summary(times, "litebert", "hf"),
           "batch_tokens": summary(times, "litebert_batch_tokens", "hf"),
           "texts_per_s": {k: n / (v / 1e3) for k, v in {k: 1e3 * statistics.median(t)
                                                          for k, t in times.items()}.items()}}
    print(json.dumps(row), flush=True)
    return [row]


def section_mfu(args, peak: float) -> list[dict]:
    """litebert alone: ALBERT-large at 512, compiled, at the batch sizes and compile modes that fill the GPU best."""
    rows = []
    config = AlbertConfig.from_preset("albert-large-v2")
    for batch, mode in ((64, "default"), (32, "reduce-overhead")):
        b = synthetic(config, batch, 512, 76)
        torch.manual_seed(0)
        ours = our_model(config, "AlbertForPreTraining").to(CUDA).train()
        fo = torch.compile(ours, mode=mode)
        fn = train_step(ours, lamb(ours), lambda fo=fo: fo(
            b["ids"], None, b["types"], mlm_positions=b["positions"], mlm_ids=b["targets"], mlm_weights=b["weights"],
            sentence_order_label=b["sop"]).loss)
        times = measure({"litebert": fn}, args.steps, args.pairs, warmup=args.warmup + 10)["litebert"]
        ms = 1e3 * statistics.median(times)
        flops = batch * flops_per_sequence(config, 512, 76)
        row = {"section": "mfu", "preset": "albert-large-v2", "batch": batch, "seq": 512, "compiled": mode,
               "ms": {"litebert": ms}, "spread_ms": [1e3 * min(times), 1e3 * max(times)],
               "mfu": {"litebert": flops / (ms / 1e3) / 1e12 / peak}, "memory_gib": {"litebert": peak_memory(fn)}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del fn, fo, ours
        torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------------------------------------- report
def _ratio(r: dict) -> str:
    lo, hi = r["interval"]
    return f"**{r['ratio']:.2f}x** ({lo:.2f}-{hi:.2f})"


def _mfu(r: dict, k: str) -> str:
    return f"{100 * r['mfu'][k]:.1f}%" if "mfu" in r and k in r["mfu"] else ""


def render(runs: list[tuple[str, dict]]) -> str:
    """The docs/BENCHMARKS.md section from saved ``--json`` files: (label, contents) pairs."""
    metas = {json.dumps(r["meta"], sort_keys=True): r["meta"] for _, r in runs}
    order = {"pretrain": 0, "mfu": 1, "pipeline": 2, "finetune": 3}
    lines = ["## GPU: litebert vs HF transformers on one GPU (`bench/gpu_bench.py`)", ""]
    for m in metas.values():
        lines.append(f"- {m['device']}, torch {m['torch']} (CUDA {m['cuda']}), transformers {m['transformers']}, "
                     f"{m['date']}; MFU over {m['peak_tflops']:g} TFLOP/s (dense bf16)")
    lines += ["", "Training steps (bf16 autocast; HF with SDPA and its own MLM labels; the same optimizer for both; "
              "ms per step, median of the pairs; ratio = HF / litebert with its 90% bootstrap interval):", "",
              "| run | rows | preset | batch x length | compile | litebert ms | HF ms | ratio | litebert MFU | "
              "HF MFU | "
              "peak GiB litebert / HF |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = sorted(((n, r) for n, run in runs for r in run["rows"] if r["section"] in order),
                  key=lambda x: (order[x[1]["section"]], x[1]["preset"], x[0]))
    for n, r in rows:
        if True:
            what = {"pretrain": "full-length, LAMB",
                    "pipeline": f"pipeline batches ({100 * r.get('real_token_share', 1):.0f}% real tokens), LAMB",
                    "finetune": f"fine-tuning, classification ({100 * r.get('real_token_share', 1):.0f}% "
                                "real tokens), AdamW",
                    "mfu": "full-length, LAMB, litebert alone"}[r["section"]]
            mem = r.get("memory_gib", {})
            hf_ms = f"{r['ms']['hf']:.1f}" if "hf" in r["ms"] else ""
            mem_s = " / ".join(f"{mem[k]:.1f}" for k in ("litebert", "hf") if k in mem)
            if r.get("compiled") == "reduce-overhead":
                mem_s = "n/a (CUDA graph pool)"
            lines.append(f"| {n} | {what} | {r['preset']} | {r['batch']} x {r['seq']} | {r.get('compiled') or 'off'} "
                         f"| {r['ms']['litebert']:.1f} | {hf_ms} | {_ratio(r) if 'ratio' in r else ''} | "
                         f"{_mfu(r, 'litebert')} | {_mfu(r, 'hf')} | {mem_s} |")
    lines += ["", "Inference (ALBERT-base classifier, bf16; the same texts, logits back on the host):", "",
              "| run | texts (mean length) | litebert | HF | texts/s litebert / HF | ratio | max logit difference |",
              "|---|---|---|---|---|---|---|"]
    for n, run in runs:
        for r in run["rows"]:
            if r["section"] != "inference":
                continue
            tps = r["texts_per_s"]
            lines.append(f"| {n} | {r['texts']} ({r['mean_length']:.0f}) | batches of 64, by length | batches of 64, "
                         f"input order | {tps['litebert']:,.0f} / {tps['hf']:,.0f} | {_ratio(r)} | "
                         f"{r['max_abs_logit_diff']:.4f} |")
            if "batch_tokens" in r:
                lines.append(f"| {n} | {r['texts']} ({r['mean_length']:.0f}) | `--batch-tokens 32768` | batches of "
                             f"64, input order | {tps['litebert_batch_tokens']:,.0f} / {tps['hf']:,.0f} | "
                             f"{_ratio(r['batch_tokens'])} | {r['max_abs_logit_diff_batch_tokens']:.4f} |")
    return "\n".join(lines)


SECTIONS = {"pipeline": section_pipeline, "finetune": section_finetune, "inference": section_inference,
            "pretrain": section_pretrain, "mfu": section_mfu}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections (default all)")
    p.add_argument("--quick", action="store_true", help="smoke run: small batches, few pairs, no compile/xxlarge")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--pairs", type=int, default=None, help="alternating pairs (default 10; 3 with --quick)")
    p.add_argument("--steps", type=int, default=3, help="steps per measurement in the pretrain section")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", default=None, help="write every row here")
    p.add_argument("--report", nargs="+", metavar="JSON", help="write the docs/BENCHMARKS.md section from these "
                   "saved --json files (no GPU needed) and exit")
    args = p.parse_args(argv)
    if args.report:
        from bench.report import write_section

        write_section("gpu", render([(Path(f).stem.split("-")[2], json.loads(Path(f).read_text()))
                                     for f in args.report]))
        return 0
    args.pairs = args.pairs or (3 if args.quick else 10)
    if not torch.cuda.is_available():
        print("gpu_bench.py: no CUDA device; nothing to measure", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name()
    peak = peak_tflops_of(name) or 989.0
    meta = {"device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": datetime.date.today().isoformat(), "peak_tflops": peak}
    try:
        import transformers
        meta["transformers"] = transformers.__version__
    except ImportError:
        print("gpu_bench.py: transformers is not installed (it is the side-by-side reference)", file=sys.stderr)
        return 1
    print(json.dumps(meta), flush=True)
    rows = []
    for section in args.only.split(","):
        t = time.perf_counter()
        rows += SECTIONS[section](args, peak)
        print(f"# {section}: {time.perf_counter() - t:.0f} s", flush=True)
        if args.json:  # after every section: a run stopped later keeps what it measured
            Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
