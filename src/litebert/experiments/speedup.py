"""``litebert experiment speedup``: training throughput of the BERT and ALBERT presets relative to BERT-large (the
paper's Table 2 "Speedup" column), on one process and on data-parallel processes under ``torchrun``.

A timed step is what pretraining does: forward and backward of a micro-batch of random token ids (``micro_batch``
x ``seq_len``, 20 masked positions per sequence, SOP labels), the gradient all-reduce when there are several
processes (DDP, the same `litebert.engine.distributed.wrap` as ``pretrain``), and a LAMB update. The first steps
warm up and are not timed. The bytes all-reduced per step are measured by summing the sizes of the gradients the
backward pass produced (what DDP all-reduces: every trainable parameter's gradient, once per step).

    python -m litebert.experiments.speedup --preset bert-large --output r.json             # one process
    torchrun --standalone --nproc_per_node 2 -m litebert.experiments.speedup --preset bert-large --output r.json
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from litebert.arguments import checked
from litebert.checks import AT_LEAST_1
from litebert.errors import ConfigError
from litebert.experiments import paper
from litebert.experiments.report import parameters
from litebert.extras import install_hint
from litebert.files import read_json, write_json

DEFAULT_PRESETS = ("bert-base", "bert-large", "albert-base-v2", "albert-large-v2", "albert-xlarge-v2",
                   "albert-xxlarge-v2")
PREDICTIONS = 20


def time_steps(preset: str, micro_batch: int, seq_len: int, steps: int, warmup: int, device: str | None,
               seed: int = 12345) -> dict:
    """Time ``steps`` training steps (after ``warmup`` untimed ones) of ``preset`` in this process or, under
    torchrun, in every process of the group; the result as rank 0 sees it (None on the other ranks). A step is the
    engine's (`litebert.engine.step.train_step`, the one pretraining runs): forward and backward, the gradient
    all-reduce, clipping and the LAMB update."""
    import torch

    from litebert.config import AlbertConfig
    from litebert.engine import distributed as D
    from litebert.engine.metrics_log import flops_per_sequence
    from litebert.engine.runtime import Runtime
    from litebert.engine.step import TrainState, train_step
    from litebert.heads import AlbertForPreTraining
    from litebert.optim.param_groups import build_optimizer

    config = AlbertConfig.from_preset(preset)
    config.sequence_length(seq_len, seq_len)
    dist = D.from_environment(device=device)
    try:
        rt = Runtime.resolve(dist, "auto", "auto", config, training=True)
        torch.manual_seed(seed)
        model = AlbertForPreTraining(config).to(dist.device)
        state = TrainState(model, build_optimizer(model, "lamb", lr=1e-4),
                           torch.amp.GradScaler(dist.device.type, enabled=rt.amp is torch.float16))
        wrapped = D.wrap(model, dist)
        g = torch.Generator().manual_seed(seed + dist.rank)
        grad_bytes, times = 0, []
        for step in range(warmup + steps):
            batch = {k: v.to(dist.device) for k, v in _random_batch(config, micro_batch, seq_len, g).items()}
            if dist.device.type == "cuda":
                torch.cuda.synchronize(dist.device)
            D.barrier(dist)
            t0 = time.perf_counter()
            train_step(state, wrapped, [(batch, 1 / dist.world_size)], runtime=rt, lr=1e-4, max_grad_norm=1.0)
            if dist.device.type == "cuda":
                torch.cuda.synchronize(dist.device)
            if step >= warmup:
                times.append(time.perf_counter() - t0)
        # what DDP all-reduces each step: every trainable parameter's gradient
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
        slowest = torch.tensor([sum(times)], dtype=torch.float64)
        D.all_reduce_max(slowest, dist)  # a data-parallel step lasts as long as its slowest process
        # every rank waits here before the group is torn down: gloo aborts a peer whose connection closes early
        D.barrier(dist)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        del wrapped, model, state  # DDP holds the process group: release it before the group is destroyed
        gc.collect()
        if not dist.is_main:
            return None
        seconds = slowest.item() / steps
        return {"preset": preset, "parameters": trainable, "processes": dist.world_size, "device": str(dist.device),
                "threads": torch.get_num_threads(), "micro_batch": micro_batch, "seq_len": seq_len,
                "timed_steps": steps, "warmup_steps": warmup, "seconds_per_step": seconds,
                "steps_per_s": 1 / seconds, "tokens_per_s": dist.world_size * micro_batch * seq_len / seconds,
                "flops_per_step": dist.world_size * micro_batch * flops_per_sequence(config, seq_len, PREDICTIONS),
                "allreduce_bytes_per_step": grad_bytes if dist.world_size > 1 else 0,
                "gradient_bytes": grad_bytes}
    finally:
        D.shutdown(dist)


def _random_batch(config, micro_batch: int, seq_len: int, g) -> dict:
    """A pretraining batch of random token ids: full-length sequences, PREDICTIONS masked positions each, SOP
    labels."""
    import torch

    ids = torch.randint(5, config.vocab_size, (micro_batch, seq_len), generator=g)
    positions = torch.stack([torch.randperm(seq_len - 1, generator=g)[:PREDICTIONS] + 1 for _ in range(micro_batch)])
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "mlm_positions": positions,
            "mlm_ids": torch.gather(ids, 1, positions), "mlm_weights": torch.ones(micro_batch, PREDICTIONS),
            "sentence_order_label": torch.randint(0, 2, (micro_batch,), generator=g)}


def check_presets(presets: list[str], reference: str) -> None:
    """Every preset exists, and the reference is among them."""
    from litebert.config import PRESETS

    for p in presets:
        if p not in PRESETS:
            raise ConfigError("{presets}: unknown preset " + f"{p!r}; see `litebert params` for the names",
                              presets=",".join(presets))
    if reference not in presets:
        raise ConfigError("{reference}: not among {presets}; the speedups are relative to it, so time it too",
                          reference=reference, presets=",".join(presets))


def run_speedup(out: Path, presets: list[str], micro_batch: int, seq_len: int, steps: int, warmup: int,
                device: str | None, processes: tuple[int, ...] = (1, 2), progress=print,
                reference: str = "bert-large") -> dict:
    """Time every preset on each number of processes (each in a child: `python -m` or torchrun), reusing a
    preset's cached timing in ``out/speedup/``; returns the summary with ratios to ``reference`` (BERT-large)."""
    check_presets(presets, reference)
    rows = []
    for n in processes:
        for preset in presets:
            cache = out / "speedup" / f"{preset}-x{n}.json"
            key = {"micro_batch": micro_batch, "seq_len": seq_len, "timed_steps": steps, "warmup_steps": warmup,
                   "requested_device": device}
            if cache.is_file():
                r = read_json(cache, ConfigError)
                if all(r.get(k) == v for k, v in key.items()):
                    progress(f"speedup: {preset} on {n} process(es) timed earlier, reused")
                    rows.append(r)
                    continue
            progress(f"speedup: timing {steps} steps of {preset} ({micro_batch} x {seq_len}) on {n} process(es)")
            r = {**_child(n, preset, micro_batch, seq_len, steps, warmup, device, cache), "requested_device": device}
            write_json(cache, r)
            rows.append(r)
    for n in processes:
        base = next(r for r in rows if r["processes"] == n and r["preset"] == reference)
        for r in rows:
            if r["processes"] == n:
                r["speedup"] = base["seconds_per_step"] / r["seconds_per_step"]
                r["flops_ratio"] = r["flops_per_step"] / base["flops_per_step"]
    return {"reference": reference, "micro_batch": micro_batch, "seq_len": seq_len, "timed_steps": steps,
            "warmup_steps": warmup,
            "allreduce_bytes": "the summed size of every trainable parameter's gradient (what DDP all-reduces, once "
                               "per step)",
            "rows": rows}


@checked(micro_batch=AT_LEAST_1, seq_len=AT_LEAST_1, steps=AT_LEAST_1, untimed_steps=AT_LEAST_1)
def speedup_experiment(out: str | Path, *, presets: Sequence[str] = DEFAULT_PRESETS, reference: str = "bert-large",
                       micro_batch: int = 8, seq_len: int = 128, steps: int = 3, untimed_steps: int = 1,
                       device: str | None = None, processes: Sequence[int] = (1, 2),
                       progress: Callable[[str], None] = print) -> dict:
    """The speedup experiment in ``out`` (re-running reuses the timings already there): training steps of every
    preset on each number of processes, relative to ``reference``; writes results.json, results.md and
    speedup.png and returns the summary. Everything is checked before the first write."""
    from litebert import folders
    from litebert.files import atomic_write

    presets = list(presets)
    if not processes or min(processes) < 1:
        raise ConfigError("{processes}: expected process counts >= 1, e.g. 1,2",
                          processes=",".join(map(str, processes)))
    check_presets(presets, reference)
    if device is not None:
        from litebert.engine.device import resolve_device

        resolve_device(device)  # a device this machine lacks is refused before anything is written
    plan = folders.plan(out, folders.EXPERIMENT, resume=True)
    out = Path(out)
    with folders.begin(plan, experiment="speedup") as writer:
        summary = run_speedup(out, presets, micro_batch, seq_len, steps, untimed_steps, device, processes, progress,
                              reference)
        write_json(out / "results.json", {"experiment": "speedup", **summary})
        atomic_write(out / "results.md", markdown(summary))
        from litebert.experiments.report import can_plot

        if can_plot():
            plot(out / "speedup.png", summary)
        else:
            progress(f"speedup.png not drawn: it needs matplotlib ({install_hint('plot', 'matplotlib')})")
        writer.finish(experiment="speedup")
    return summary


def _child(n: int, preset: str, micro_batch: int, seq_len: int, steps: int, warmup: int, device, cache: Path):
    """Time in a fresh process (n = 1: ``python -m``; more: ``torchrun``), so no preset runs in memory another
    one left fragmented, and one process and several run the same code."""
    import torch

    tmp = cache.with_name(f".{cache.name}.run-{os.getpid()}")
    env = dict(os.environ)
    if n > 1 and (device == "cpu" or (device is None and not torch.cuda.is_available())):
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or n) // n)))  # share the cores
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n)] if n > 1 else []
    cmd = [sys.executable, *launcher, "-m", "litebert.experiments.speedup", "--preset", preset,
           "--micro-batch", str(micro_batch),
           "--seq-len", str(seq_len), "--steps", str(steps), "--warmup", str(warmup), "--output", str(tmp)]
    cmd += ["--device", device] if device else []
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0 or not tmp.is_file():
        from litebert.experiments.runner import ExperimentError

        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise ExperimentError(f"speedup: timing {preset} on {n} process(es) failed (exit {done.returncode}): "
                              f"{tail}")
    result = read_json(tmp, ConfigError)
    tmp.unlink()
    return result


def markdown(summary: dict) -> str:
    lines = ["# speedup", "",
             f"Training steps of {summary['micro_batch']} x {summary['seq_len']} tokens per process (forward, "
             f"backward, all-reduce, LAMB), {summary['timed_steps']} timed after {summary['warmup_steps']} warm-up. "
             f"Speedup: {summary['reference']}'s time per step / the preset's, at the same number of processes. FLOPs: "
             f"`litebert.engine.metrics_log.flops_per_sequence` x sequences per step. All-reduced bytes: "
             f"{summary['allreduce_bytes']}.", "",
             f"| preset | processes | parameters | s/step | steps/s | tokens/s | speedup vs {summary['reference']} | "
             f"GFLOP/step | FLOPs vs {summary['reference']} | gradient MB | MB all-reduced/step |", "|" + "---|" * 11]
    for r in summary["rows"]:
        sp, fl = r["speedup"], r["flops_ratio"]
        reduced = f"{r['allreduce_bytes_per_step'] / 1e6:.1f}" if r["processes"] > 1 else "none"
        lines.append(f"| {r['preset']} | {r['processes']} | {parameters(r['parameters'])} | "
                     f"{r['seconds_per_step']:.3f} | {r['steps_per_s']:.3f} | {r['tokens_per_s']:.0f} | "
                     f"{sp:.2f}x | {r['flops_per_step'] / 1e9:.3g} | {fl:.2f}x | {r['gradient_bytes'] / 1e6:.1f} | "
                     f"{reduced} |")
    return "\n".join(lines) + "\n\n" + paper.markdown("speedup")


def plot(path: Path, summary: dict) -> None:
    """Bars of the speedup relative to the reference preset, one group per number of processes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from litebert.files import atomic_write

    procs = sorted({r["processes"] for r in summary["rows"]})
    presets = list(dict.fromkeys(r["preset"] for r in summary["rows"]))
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(procs))
    for k, n in enumerate(procs):
        vals = [next((r["speedup"] for r in summary["rows"]
                      if r["preset"] == p and r["processes"] == n), 0) for p in presets]
        ax.bar([i + k * width for i in range(len(presets))], vals, width, label=f"{n} process(es)")
    ax.set_xticks([i + width * (len(procs) - 1) / 2 for i in range(len(presets))], presets, rotation=20)
    ax.set(ylabel=f"speedup vs {summary['reference']}",
           title=f"training throughput relative to {summary['reference']}")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """The worker ``torchrun`` starts (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m litebert.experiments.speedup")
    p.add_argument("--preset", required=True)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--device")
    p.add_argument("--output", type=Path, required=True)
    a = p.parse_args(argv)
    r = time_steps(a.preset, a.micro_batch, a.seq_len, a.steps, a.warmup, a.device)
    if r is not None:
        write_json(a.output, r)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # The result is written and the group destroyed. Gloo's worker threads can still abort the interpreter's
        # teardown ("terminate called without an active exception", about 1 run in 30 on a loaded machine), which
        # torchrun reports as a failed run: leave without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

