"""A/B of CPU kernels against the reference model (`litebert.model`): does a fast path earn its place?

A kernel stays in litebert only with a measured gain of at least 3% on the hardware it targets, the 90% bootstrap
interval of the ratio above 1.0 (STYLE.md, principle 14). This script measures, in alternating back-to-back pairs,
the two workloads the CPU kernels were written for:

- the ALBERT-base pretraining step, batch 8 x 128 (MLM at 20 masked positions + SOP, AdamW), eager fp32;
- grouped inference: the bare ALBERT-base encoder over 512 movie-review snippets of the bundled sentiment data in
  batches of 32 grouped by length, padding skipped.

The kernels measured are those of the model at ``--old-rev`` (by default the revision before the reference model
replaced it), loaded from git into a module of its own. Each arm is that model with all its kernels switched off
("base") or with one switched on; the reference model and the base model are compared too, so every kernel's gain is
read against the same code it was written on, and the base against the reference. Writes the "kernels" section of
docs/BENCHMARKS.md. Run: .venv/bin/python bench/bench_kernels.py [--pairs 15] [--only training|inference]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.bench_model import batches, bootstrap_ratio, interleaved, pretraining_batch, review_texts, tokenize  # noqa: E402
from bench.report import machine, write_section  # noqa: E402
from litebert.config import AlbertConfig  # noqa: E402

OLD_REV = "d7127b2"  # the last revision whose model.py carried the CPU kernels

# name -> (what it is, the workload it was written for)
KERNELS = {
    "GeluMLP": ("the FFN as one autograd function: sigmoid-form GELU forward, `gelu_backward` in place", "training"),
    "GradSink": ("a shared block's weight gradients summed inside the backward GEMMs (`addmm`, beta = 1)",
                 "training"),
    "QKVAttention": ("attention at L <= 128 from the fused [B, L, 3H] projection, strided GEMMs, in-place "
                     "softmax", "training"),
    "explicit attention": ("attention at L <= 128 as explicit matmuls + softmax instead of SDPA",
                           "training"),
    "Workspace": ("reused scratch buffers, head-major Q/K/V, explicit attention at L <= 160, GEMMs "
                  "accumulating onto the residual, sigmoid-form GELU", "inference"),
}


def old_module(rev: str, enabled: frozenset[str]) -> types.ModuleType:
    """The model.py of ``rev`` as a fresh module, with only the kernels in ``enabled`` switched on."""
    source = subprocess.run(["git", "show", f"{rev}:src/litebert/model.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    # That model read `config.embedding_projection` as a bool, a value `AlbertConfig` now derives as a property.
    source = source.replace("config.embedding_projection", "config.has_embedding_projection")
    m = types.ModuleType(f"old_model_{len(sys.modules)}")
    sys.modules[m.__name__] = m  # dataclasses look their module up there
    exec(compile(source, f"{rev}:src/litebert/model.py", "exec"), m.__dict__)
    if "GradSink" not in enabled:
        m.SharedWeights.make = classmethod(lambda cls, tensors, sum_in_gemms: cls(tensors))
    if "QKVAttention" not in enabled:
        m._short_attention_applies = lambda qkv, length: False
    if "explicit attention" not in enabled:
        m.attend = lambda q, k, v, mask, p: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
    if "Workspace" not in enabled:
        m.Workspace.applies = staticmethod(lambda x: False)
    if not enabled & {"GeluMLP", "Workspace"}:
        # The FFN takes GeluMLP only when its activation *is* gelu_tanh, and inference outside the workspace would
        # still run gelu_tanh's sigmoid form: an activation equal to the reference's instead.
        m.ACT["gelu_new"] = lambda x, out=None: F.gelu(x, approximate="tanh")
    return m


def encoder(arm: str | frozenset, config: AlbertConfig, rev: str):
    """The bare encoder of one arm: "reference" (litebert.model), or the old model with the kernels in ``arm``."""
    from litebert.model import AlbertModel

    return AlbertModel(config) if arm == "reference" else old_module(rev, arm).AlbertModel(config)


def pretraining_model(arm, config: AlbertConfig, rev: str):
    from litebert.heads import AlbertForPreTraining

    torch.manual_seed(0)
    model = AlbertForPreTraining(config)
    if arm != "reference":
        old = encoder(arm, config, rev)
        old.load_state_dict(model.albert.state_dict())
        model.albert = old  # the same heads on the old encoder (same parameter names)
    return model.train()


def step_fn(arm, config: AlbertConfig, rev: str, b: dict):
    model = pretraining_model(arm, config, rev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        model(b["ids"], b["mask"], b["types"], mlm_positions=b["positions"], mlm_ids=b["targets"],
              sentence_order_label=b["sop"]).loss.backward()
        opt.step()
    return step


def inference_fn(arm, config: AlbertConfig, rev: str, grouped: list):
    torch.manual_seed(0)
    model = encoder(arm, config, rev).eval()
    from litebert.padding import Packing

    old = hasattr(model, "set_skip_padding")  # an old revision's encoder: padding skipping was a switch there
    if old:
        model.set_skip_padding(True)

    def run():
        with torch.inference_mode():
            for x, m in grouped:
                model(x, m) if old else model(x, m, packing=Packing.from_mask(m))
    return run


def ab(fn_a, fn_b, pairs: int, warmup: int) -> dict:
    """Alternating pairs; ratio = median time of A / median time of B (> 1: B is faster), with its interval."""
    raw: dict = {}
    med = interleaved({"a": fn_a, "b": fn_b}, warmup, pairs, raw, alternate=True)
    lo, hi = bootstrap_ratio(raw["a"], raw["b"])
    return dict(a=med["a"], b=med["b"], ratio=med["a"] / med["b"], lo=lo, hi=hi, pairs=pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision whose model.py holds the kernels")
    parser.add_argument("--pairs", type=int, default=15, help="back-to-back pairs per A/B of the training step")
    parser.add_argument("--inference-pairs", type=int, default=8, help="pairs of passes per inference A/B")
    parser.add_argument("--only", choices=("training", "inference"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 pairs each, 64 texts: a smoke run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    texts = 512
    if args.quick:
        args.pairs = args.inference_pairs = 3
        texts = 64
    config = AlbertConfig.from_preset("albert-base-v2")
    results: list[tuple[str, str, dict]] = []  # (workload, comparison, result)

    def report(workload, what, r):
        results.append((workload, what, r))
        print(f"{workload:9s} {what:45s} {r['a']:.3f} s / {r['b']:.3f} s = {r['ratio']:.3f}x "
              f"(90% interval {r['lo']:.3f}-{r['hi']:.3f})", flush=True)

    base, everything = frozenset(), frozenset(KERNELS)
    if args.only in (None, "training"):
        b = pretraining_batch(config, 8, 128, 20)
        ref, off = step_fn("reference", config, args.old_rev, b), step_fn(base, config, args.old_rev, b)
        report("training", "reference (A) vs base (B)", ab(ref, off, args.pairs, 2))
        for name, (_, workload) in KERNELS.items():
            if workload == "training":
                on = step_fn(frozenset({name}), config, args.old_rev, b)
                report("training", f"base (A) vs base + {name} (B)", ab(off, on, args.pairs, 2))
        on = step_fn(everything, config, args.old_rev, b)
        report("training", "reference (A) vs all kernels (B)", ab(ref, on, args.pairs, 2))

    if args.only in (None, "inference"):
        grouped = batches(tokenize(review_texts(texts), 128), 32, None, grouped=True)
        ref, off = (inference_fn(arm, config, args.old_rev, grouped) for arm in ("reference", base))
        report("inference", "reference (A) vs base (B)", ab(ref, off, args.inference_pairs, 1))
        on = inference_fn(frozenset({"Workspace"}), config, args.old_rev, grouped)
        report("inference", "base (A) vs base + Workspace (B)", ab(off, on, args.inference_pairs, 1))
        on = inference_fn(everything, config, args.old_rev, grouped)
        report("inference", "reference (A) vs all kernels (B)", ab(ref, on, args.inference_pairs, 1))

    def verdict(what: str, r: dict) -> str:
        if "base + " not in what:
            return ""
        return "earns its place" if r["ratio"] >= 1.03 and r["lo"] > 1.0 else "below the bar: removed"

    rows = ["| workload | A vs B | A | B | A / B | 90% interval | pairs | kernel |",
            "|---|---|---:|---:|---:|---|---:|---|"]
    rows += [f"| {w} | {what} | {r['a']:.3f} s | {r['b']:.3f} s | {r['ratio']:.3f}x | {r['lo']:.3f}-{r['hi']:.3f} "
             f"| {r['pairs']} | {verdict(what, r)} |" for w, what, r in results]
    kernels = [f"- **{name}** ({workload}): {what}" for name, (what, workload) in KERNELS.items()]
    text = "\n".join([
        "## CPU kernels against the reference model (`bench/bench_kernels.py`)", "",
        f"Machine: {machine()}. ALBERT-base v2, fp32, {args.threads} threads. Training: the pretraining step, batch "
        "8 x 128 (MLM at 20 masked positions + SOP, AdamW). Inference: the bare encoder over "
        f"{texts} movie-review snippets (bundled sentiment data), batches of 32 grouped by length, padding skipped. "
        f"Kernels: those of `src/litebert/model.py` at revision `{args.old_rev}`, loaded from git; \"base\" is that "
        "model with every kernel switched off, \"base + X\" with only X on. Alternating back-to-back pairs; the "
        "ratio is median(A) / median(B), above 1 when B is faster, with a 90% bootstrap interval over the pairs. "
        "A kernel stays (opt-in, apart from the model) only at a gain of at least 3% with its interval above 1.0; "
        "\"reference vs all kernels\" is the old model as it ran, every kernel on.", "",
        *kernels, "",
        *rows,
    ])
    print("\n" + "\n".join(rows))
    write_section("kernels", text)


if __name__ == "__main__":
    main()
