"""Where the time of one ALBERT pretraining step goes on a GPU: the kernels, grouped, from torch.profiler.

    python3 bench/gpu_profile.py                     # ALBERT-large, 32 x 512, bf16, LAMB, eager
    python3 bench/gpu_profile.py --compile           # the compiled step (the MFU row of docs/BENCHMARKS.md)
    python3 bench/gpu_profile.py --device cpu --preset tiny --batch 2 --seq-len 32 --predictions 4   # smoke run

Prints the step's GPU time by kernel group (matrix products, attention, the fused/elementwise kernels, LayerNorm,
the optimizer, copies) with each group's share, then the most expensive kernels; with ``--trace FILE`` also writes a
Chrome trace. The same step as `bench/gpu_bench.py`'s MFU rows (synthetic full-length sequences, 76 masked positions,
clipping at 1.0, LAMB).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from litebert.config import PRESETS, AlbertConfig  # noqa: E402
from litebert.engine.metrics_log import flops_per_sequence  # noqa: E402

GROUPS = [  # (group, pattern on the kernel name), first match wins
    ("attention", r"flash|fmha|attention|sdpa"),
    ("matmul", r"gemm|cutlass|cublas|sm90_xmma|nvjet|matmul|addmm|\bmm\b|bmm"),
    ("layer norm", r"layer_norm|layernorm"),
    ("optimizer", r"foreach|multi_tensor|lamb|adam"),
    ("copy / cast", r"copy|memcpy|memset|cast|to_copy|fill"),
    ("fused (compiled)", r"^triton_"),
    ("elementwise / reduce", r"elementwise|reduce|vectorized|unrolled|gelu|softmax|index|scatter|gather|embedding"),
]


def group_of(name: str) -> str:
    for group, pattern in GROUPS:
        if re.search(pattern, name, re.I):
            return group
    return "other"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="albert-large-v2", choices=list(PRESETS))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--predictions", type=int, default=76)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--steps", type=int, default=3, help="profiled steps (after 5 warm-up steps; 15 with --compile)")
    p.add_argument("--top", type=int, default=20, help="kernels listed (default 20)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--trace", help="also write a Chrome trace here")
    p.add_argument("--json", help="also write the groups and the top kernels to this file")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_profile.py: no CUDA device; use --device cpu for a smoke run", file=sys.stderr)
        return 1
    from torch.profiler import ProfilerActivity, profile

    from litebert.heads import AlbertForPreTraining
    from litebert.optim import build_optimizer

    config = AlbertConfig.from_preset(args.preset)
    torch.manual_seed(0)
    model = AlbertForPreTraining(config).to(device).train()
    optimizer = build_optimizer(model, "lamb", lr=1e-4)
    forward = torch.compile(model) if args.compile else model
    g = torch.Generator().manual_seed(0)
    b, l, k = args.batch, args.seq_len, args.predictions
    ids = torch.randint(5, config.vocab_size, (b, l), generator=g).to(device)
    types = (torch.arange(l)[None] >= l // 2).long().expand(b, -1).contiguous().to(device)
    positions = torch.stack([torch.randperm(l - 1, generator=g)[:k] + 1 for _ in range(b)]).sort(1)[0].to(device)
    targets = torch.randint(5, config.vocab_size, (b, k), generator=g).to(device)
    sop = torch.randint(0, 2, (b,), generator=g).to(device)
    amp = torch.bfloat16 if device.type == "cuda" else None

    def step():
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = forward(ids, None, types, mlm_positions=positions, mlm_ids=targets,
                           sentence_order_label=sop).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(15 if args.compile else 5):
        step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(args.steps):
            step()
        sync()
    if args.trace:
        prof.export_chrome_trace(args.trace)
    cuda = device.type == "cuda"
    events = [e for e in prof.key_averages() if (e.device_type.name == "CUDA") == cuda]
    time_of = (lambda e: e.self_device_time_total) if cuda else (lambda e: e.self_cpu_time_total)
    total = sum(time_of(e) for e in events) or 1.0
    by_group: dict[str, float] = defaultdict(float)
    for e in events:
        by_group[group_of(e.key)] += time_of(e)
    per_step_ms = total / args.steps / 1e3
    flops = b * flops_per_sequence(config, l, k)
    print(f"{args.preset}, {b} x {l}, {'compiled' if args.compile else 'eager'}, {device}: "
          f"{per_step_ms:.1f} ms of {'GPU' if cuda else 'CPU'} kernel time per step "
          f"({flops / (per_step_ms / 1e3) / 1e12:.0f} TFLOP/s over it)")
    for group, t in sorted(by_group.items(), key=lambda x: -x[1]):
        print(f"  {group:<22} {t / args.steps / 1e3:8.2f} ms  {100 * t / total:5.1f}%")
    print(f"top {args.top} kernels (ms per step, calls per step):")
    top = sorted(events, key=time_of, reverse=True)[:args.top]
    for e in top:
        print(f"  {time_of(e) / args.steps / 1e3:8.2f}  {e.count // args.steps:5d}  [{group_of(e.key)}] {e.key[:110]}")
    if args.json:
        result = {"preset": args.preset, "batch": b, "seq_len": l, "predictions": k, "compiled": args.compile,
                  "device": torch.cuda.get_device_name(device) if cuda else "cpu", "torch": torch.__version__,
                  "kernel_ms_per_step": per_step_ms, "tflops_over_kernel_time": flops / (per_step_ms / 1e3) / 1e12,
                  "groups": {g: {"ms": t / args.steps / 1e3, "share": t / total} for g, t in by_group.items()},
                  "top": [{"ms": time_of(e) / args.steps / 1e3, "calls": e.count // args.steps,
                           "group": group_of(e.key), "kernel": e.key[:200]} for e in top]}
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
