"""MFU of an ALBERT pretraining step on one CUDA GPU: ALBERT-large, length 512, bf16 autocast, flash attention.

    .venv/bin/python bench/gpu_mfu.py                      # ALBERT-large, batch 32 x 512, bf16, flash SDPA, LAMB
    .venv/bin/python bench/gpu_mfu.py --compile            # + torch.compile
    .venv/bin/python bench/gpu_mfu.py --dtype fp16         # fp16 autocast with a GradScaler
    .venv/bin/python bench/gpu_mfu.py --model hf           # the same step with HF transformers' AlbertForPreTraining
    .venv/bin/python bench/gpu_mfu.py --dry-run            # the plan and FLOP count only (runs without a GPU)

Measured on an NVIDIA H100 80GB (torch 2.11): 101 ms per step eager (MFU 31.2%), 79.6 ms with --compile (39.7%).
litebert against HF side by side: bench/gpu_bench.py.

One step is the official pretraining step (paper Section 4.1; official `run_pretraining.py`): MLM on the
``--predictions`` gathered positions per sequence (76 = the official max_predictions_per_seq at length 512) + SOP,
backward, gradient clipping at norm 1.0, LAMB. Inputs are synthetic full-length sequences (no padding, as packed
pretraining data): with no attention mask, SDPA can take its flash kernel. The FLOP count is
`litebert.engine.metrics_log.flops_per_sequence` (matmuls only, training = 3 x forward; the convention of PaLM's MFU,
Appendix B), the same count `litebert pretrain` logs its MFU with. ``--model hf`` runs HF transformers'
AlbertForPreTraining (SDPA attention) on the same batches, as HF computes the step (MLM logits at every position,
the loss on the masked ones): its MFU counts the same FLOPs, the work the step needs, so the two MFUs compare as
speeds. Peak TFLOP/s comes from ``--peak-tflops`` or,
for known GPUs, `litebert.engine.metrics_log.PEAK_TFLOPS` (dense bf16/fp16 tensor-core figures from vendor data sheets).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time

import torch

from litebert.config import PRESETS, AlbertConfig
from litebert.engine.metrics_log import PEAK_TFLOPS, flops_per_sequence, peak_tflops_of

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}
ATTENTION = ("flash", "efficient", "cudnn", "math", "auto")


def step_flops(config: AlbertConfig, batch: int, seq_len: int, predictions: int) -> float:
    """Training FLOPs of one step (forward + backward) on ``batch`` sequences of ``seq_len`` tokens."""
    return batch * flops_per_sequence(config, seq_len, predictions)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="MFU of an ALBERT pretraining step on one CUDA GPU")
    p.add_argument("--preset", default="albert-large-v2", choices=list(PRESETS), help="model shape (default "
                   "albert-large-v2: H 1024, 24 layers, 16 heads, dropout 0)")
    p.add_argument("--num-layers", type=int, default=None,
                   help="depth steps over the preset's (e.g. 6: the GPU demo's ALBERT-base width at 6 layers)")
    p.add_argument("--batch", type=int, default=32, help="sequences per step (default 32)")
    p.add_argument("--seq-len", type=int, default=512, help="tokens per sequence (default 512)")
    p.add_argument("--predictions", type=int, default=76,
                   help="MLM predictions per sequence (default 76, the official max_predictions_per_seq at 512)")
    p.add_argument("--dtype", default="bf16", choices=list(DTYPES),
                   help="autocast dtype (default bf16; fp16 adds a GradScaler; fp32 runs TF32 matmuls)")
    p.add_argument("--attention", default="flash", choices=ATTENTION,
                   help="SDPA backend to force (default flash; auto lets torch choose)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--compile-mode", default=None, help="torch.compile mode (e.g. max-autotune)")
    p.add_argument("--compile-optimizer", action="store_true",
                   help="also torch.compile the optimizer step (LAMB's foreach kernels fused)")
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing of every encoder step")
    p.add_argument("--optimizer", default="lamb", choices=["lamb", "adamw"], help="default lamb (official)")
    p.add_argument("--model", default="litebert", choices=["litebert", "hf"],
                   help="whose AlbertForPreTraining (default litebert; hf: transformers, SDPA attention)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps (default 5; 15 with --compile)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20); the median is reported")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help=f"peak TFLOP/s of the GPU for MFU (default: looked up for {', '.join(PEAK_TFLOPS)})")
    p.add_argument("--device", default="cuda", help="default cuda; 'cpu' runs the same step on the CPU (a smoke test "
                   "of the script's logic: no MFU, the peak table is for GPUs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="print the plan and FLOP count, run nothing")
    p.add_argument("--json", help="also write the settings and the measurements to this file")
    args = p.parse_args(argv)
    if args.num_layers is not None and args.num_layers < 1:
        p.error(f"--num-layers {args.num_layers}: must be >= 1")
    config = AlbertConfig.from_preset(args.preset, **({} if args.num_layers is None else
                                                      {"num_hidden_layers": args.num_layers}))
    if not 1 <= args.seq_len <= config.max_position_embeddings:
        p.error(f"--seq-len {args.seq_len}: must be in [1, max_position_embeddings = {config.max_position_embeddings}]")
    if not 1 <= args.predictions <= args.seq_len - 1:
        p.error(f"--predictions {args.predictions}: must be in [1, seq_len - 1 = {args.seq_len - 1}] "
                "(position 0 is [CLS], never masked)")
    for name in ("batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.attention == "flash" and args.dtype == "fp32":
        p.error("--attention flash needs --dtype bf16 or fp16 (the flash kernel has no fp32 version); "
                "use --attention auto or efficient with fp32")
    if args.warmup is None:
        args.warmup = 15 if args.compile else 5
    args.config = config
    return args


def plan(args: argparse.Namespace) -> str:
    c = args.config
    flops = step_flops(c, args.batch, args.seq_len, args.predictions)
    return (f"{args.model}'s {args.preset}: H {c.hidden_size}, E {c.embedding_size}, {c.num_hidden_layers} layers, "
            f"{c.num_attention_heads} heads; batch {args.batch} x {args.seq_len}, {args.predictions} MLM predictions "
            f"per sequence; {args.dtype}, SDPA {args.attention}, compile {'on' if args.compile else 'off'}"
            f"{' (and the optimizer step)' if args.compile_optimizer else ''}, "
            f"checkpointing {'on' if args.checkpointing else 'off'}, {args.optimizer}\n"
            f"training FLOPs per step: {flops / 1e12:.4g} TFLOP ({flops / (args.batch * args.seq_len) / 1e9:.4g} "
            "GFLOP per token)")


def synthetic_batch(config: AlbertConfig, batch: int, seq_len: int, predictions: int, generator: torch.Generator,
                    device: torch.device) -> dict[str, torch.Tensor]:
    """Full-length random sequences: two segments, distinct sorted MLM positions (never [CLS]), SOP labels."""
    ids = torch.randint(5, config.vocab_size, (batch, seq_len), generator=generator)
    split = torch.randint(1, seq_len, (batch, 1), generator=generator)
    types = (torch.arange(seq_len)[None, :] >= split).long()  # [B, L]: segment B after the split
    positions = torch.rand(batch, seq_len - 1, generator=generator).argsort(dim=1)[:, :predictions] + 1
    batch_ = {
        "input_ids": ids, "token_type_ids": types,
        "mlm_positions": positions.sort(dim=1).values,  # [B, P]
        "mlm_ids": torch.randint(5, config.vocab_size, (batch, predictions), generator=generator),
        "mlm_weights": torch.ones(batch, predictions),
        "sentence_order_label": torch.randint(0, 2, (batch,), generator=generator),
    }
    # HF's form of the same targets: the id at each masked position, -100 elsewhere
    batch_["labels"] = torch.full_like(ids, -100).scatter_(1, batch_["mlm_positions"], batch_["mlm_ids"])
    return {k: v.to(device, non_blocking=True) for k, v in batch_.items()}


def hf_model(config: AlbertConfig):
    """HF transformers' AlbertForPreTraining of the same shape, with SDPA attention (bench/bench_model.py's)."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: bench is a package there
    from bench.bench_model import hf_model as built

    return built(config, "AlbertForPreTraining")


def attention_context(name: str):
    """Force one SDPA backend (torch.nn.attention.sdpa_kernel): with 'flash', a fallback is an error, not a silent
    slowdown."""
    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[name]
    return sdpa_kernel(backend)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(plan(args))
    if args.dry_run:
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_mfu.py: no CUDA device found (torch.cuda.is_available() is False; torch "
              f"{torch.__version__}, CUDA build {torch.version.cuda or 'none'}). This script measures GPU throughput "
              "and has nothing to run here; use --dry-run for the FLOP count.", file=sys.stderr)
        return 1
    return run(args)


def run(args: argparse.Namespace) -> int:
    """The timed steps (tests/scripts/test_gpu_script.py runs them with --device cpu)."""
    from litebert.heads import AlbertForPreTraining
    from litebert.optim import build_optimizer

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    amp = DTYPES[args.dtype]
    if cuda and amp is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        print(f"gpu_mfu.py: {name} has no bf16 support; use --dtype fp16", file=sys.stderr)
        return 1
    peak = args.peak_tflops or (peak_tflops_of(name) if cuda else None)
    if args.dtype == "fp32" and args.peak_tflops is None:
        peak = None  # the table holds bf16/fp16 tensor-core peaks, not TF32's
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True  # fp32 leftovers outside autocast (and --dtype fp32) use TF32
    torch.backends.cudnn.allow_tf32 = True
    model = AlbertForPreTraining(args.config) if args.model == "litebert" else hf_model(args.config)
    model = model.to(device).train()
    if args.checkpointing:
        model.gradient_checkpointing_enable() if args.model == "hf" else model.set_gradient_checkpointing(True)
    optimizer = build_optimizer(model, args.optimizer, lr=1e-4)
    if args.compile_optimizer:  # the scaler and the loop call optimizer.step(): the compiled one
        optimizer.step = torch.compile(optimizer.step, fullgraph=False)
    scaler = torch.amp.GradScaler(device.type, enabled=amp is torch.float16)
    forward = torch.compile(model, mode=args.compile_mode) if args.compile else model
    generator = torch.Generator().manual_seed(args.seed)
    batches = [synthetic_batch(args.config, args.batch, args.seq_len, args.predictions, generator, device)
               for _ in range(4)]  # a few distinct batches, prepared up front: the step alone is timed

    def step(b: dict) -> None:
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None), attention_context(args.attention):
            if args.model == "hf":
                loss = forward(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], labels=b["labels"],
                               sentence_order_label=b["sentence_order_label"]).loss
            else:
                loss = forward(b["input_ids"], None, b["token_type_ids"], mlm_positions=b["mlm_positions"],
                               mlm_ids=b["mlm_ids"], mlm_weights=b["mlm_weights"],
                               sentence_order_label=b["sentence_order_label"]).loss
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # official: clip_by_global_norm(1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    print(f"device: {name}; peak {peak or 'unknown'} TFLOP/s; warm-up {args.warmup} steps...", flush=True)
    for i in range(args.warmup):
        step(batches[i % len(batches)])
    sync = torch.cuda.synchronize if cuda else (lambda _device: None)
    sync(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for i in range(args.steps):
        start = time.perf_counter()
        step(batches[i % len(batches)])
        sync(device)
        times.append(time.perf_counter() - start)
    t = statistics.median(times)
    if max(times) > 1.5 * min(times):
        # e.g. torch.compile still compiling kernels in background workers during the first timed steps
        print(f"warning: step times vary from {min(times) * 1e3:.1f} to {max(times) * 1e3:.1f} ms; raise --warmup "
              "(and --steps) until they settle", file=sys.stderr)
    flops = step_flops(args.config, args.batch, args.seq_len, args.predictions)
    tflops = flops / t / 1e12
    mfu = f"{tflops / peak:.1%}" if peak else "n/a (pass --peak-tflops)"
    print(f"step {t * 1e3:.1f} ms (median of {args.steps}, min {min(times) * 1e3:.1f}); "
          f"{args.batch * args.seq_len / t:,.0f} tokens/s; {args.batch / t:.1f} sequences/s")
    memory = f"; peak memory {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB" if cuda else ""
    print(f"achieved {tflops:.3g} TFLOP/s; MFU {mfu}{memory}")
    if args.json:
        settings = {k: getattr(args, k) for k in ("model", "preset", "num_layers", "batch", "seq_len", "predictions",
                                                  "dtype",
                                                  "attention", "compile", "compile_mode", "compile_optimizer",
                                                  "checkpointing", "optimizer", "steps")}
        result = {**settings, "device": name, "torch": torch.__version__, "step_ms": t * 1e3,
                  "step_ms_min": min(times) * 1e3, "step_ms_max": max(times) * 1e3,
                  "tokens_per_s": args.batch * args.seq_len / t, "tflops": tflops, "peak_tflops": peak,
                  "mfu": tflops / peak if peak else None,
                  "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None}
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
