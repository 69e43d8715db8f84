"""The model benchmark of `make bench`: litebert vs HF transformers' ALBERT, side by side in one run.

Same config (ALBERT-base v2 unless --preset), same inputs, same thread count; warm-up, then the median of repeats,
the two implementations interleaved so that drift in machine load hits both alike. Each group of measurements runs
in its own fresh process, so that what one group leaves behind (compiled graphs, a grown heap) cannot change
another's numbers. Measures:

- the pretraining step (batch 8 x 128, MLM on 20 masked positions per sequence + SOP, AdamW step) in 20 pairs
  whose order alternates, with a bootstrap interval of the ratio; its MFU against this machine's fp32 matmul ceiling,
  sampled between the steps; and the same step on real batches of the data pipeline (some padding, which litebert's
  training loops skip);
- inference latency (batch 1 x 128) and throughput on real variable-length texts (movie-review snippets and corpus
  passages): HF with fixed padding to 128 (the common recipe), HF and litebert on the same batches, litebert
  grouping by length and skipping padding;
- peak training memory (fresh subprocesses, peak RSS), and activation memory with and without checkpointing at
  batch 32 x 128.

Writes the "model" section of docs/BENCHMARKS.md. Run: .venv/bin/python bench/bench_model.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import lzma
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.report import machine, write_section  # noqa: E402
from litebert.config import AlbertConfig  # noqa: E402
from litebert.engine.metrics_log import flops_per_sequence  # noqa: E402

# ---------------------------------------------------------------------------------------------------- FLOPs
CEILING_SHAPES = ((1024, 768, 3072), (1024, 3072, 768), (2048, 2048, 2048))  # (m, k, n): two the model runs


class CeilingProbe:
    """The machine's fp32 GEMM ceiling at the current thread count, sampled as often as it is called.

    Each call times one product of each shape; `gflops` is the best shape's median throughput. The host's speed
    drifts by 10-20% over seconds, so the training group calls the probe between the steps it measures, and MFU is
    taken against the ceiling of the same minutes.
    """

    def __init__(self):
        self.mats = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in CEILING_SHAPES]
        self.times: list[list[float]] = [[] for _ in CEILING_SHAPES]

    def __call__(self) -> None:
        for (a, b), times in zip(self.mats, self.times):
            t = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t)

    def gflops(self) -> float:
        return max(2 * m * k * n / statistics.median(ts) / 1e9 for (m, k, n), ts in zip(CEILING_SHAPES, self.times))


def matmul_ceiling(repeats: int = 5) -> float:
    """Best fp32 GEMM throughput (GFLOP/s) over `CEILING_SHAPES`, measured now (2 warm-up calls, median of repeats)."""
    probe = CeilingProbe()
    for _ in range(2):
        probe()
    probe.times = [[] for _ in CEILING_SHAPES]
    for _ in range(repeats):
        probe()
    return probe.gflops()


# ---------------------------------------------------------------------------------------------------- models
def hf_model(config: AlbertConfig, cls_name: str = "AlbertForPreTraining"):
    import transformers

    hf_config = transformers.AlbertConfig(**config.to_hf_dict())
    hf_config._attn_implementation = "sdpa"
    return getattr(transformers, cls_name)(hf_config)


def our_model(config: AlbertConfig, cls_name: str = "AlbertForPreTraining"):
    import litebert.heads as heads

    return getattr(heads, cls_name)(config)


def pretraining_batch(config: AlbertConfig, batch: int, seq: int, predictions: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch, seq), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    types = torch.zeros_like(ids)
    types[:, seq // 2:] = 1
    positions = torch.stack([torch.randperm(seq - 2, generator=g)[:predictions] + 1 for _ in range(batch)])
    targets = torch.gather(ids, 1, positions)
    labels = torch.full_like(ids, -100).scatter_(1, positions, targets)
    sop = torch.randint(0, 2, (batch,), generator=g)
    mask = torch.ones_like(ids)
    return dict(ids=ids, mask=mask, types=types, positions=positions, targets=targets, labels=labels, sop=sop)


def step_fn(impl: str, config: AlbertConfig, b: dict, checkpointing: bool = False, compiled: bool = False,
            task: str = "pretraining"):
    """One training step (forward, backward, AdamW) of one implementation on batch ``b``; ``compiled``: the model
    wrapped in ``torch.compile`` (inductor), the optimizer step left eager. ``task="classification"``: a
    sequence-classification fine-tuning step instead (the SOP labels as class labels)."""
    torch.manual_seed(0)
    if task == "classification":
        cls = "AlbertForSequenceClassification"
        model = (hf_model(config, cls) if impl == "hf" else our_model(config, cls)).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def clf_step():
            opt.zero_grad(set_to_none=True)
            model(input_ids=b["ids"], attention_mask=b["mask"], token_type_ids=b["types"],
                  labels=b["sop"]).loss.backward()
            opt.step()
        return clf_step
    model = (hf_model(config) if impl == "hf" else our_model(config)).train()
    if checkpointing:
        model.set_gradient_checkpointing(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if compiled:
        model = torch.compile(model)

    def hf_step():
        opt.zero_grad(set_to_none=True)
        model(input_ids=b["ids"], attention_mask=b["mask"], token_type_ids=b["types"], labels=b["labels"],
              sentence_order_label=b["sop"]).loss.backward()
        opt.step()

    def our_step():
        opt.zero_grad(set_to_none=True)
        model(b["ids"], b["mask"], b["types"], mlm_positions=b["positions"], mlm_ids=b["targets"],
              sentence_order_label=b["sop"]).loss.backward()
        opt.step()

    return hf_step if impl == "hf" else our_step


def pipeline_batches(n: int, batch: int, seq: int, predictions: int) -> tuple[list[dict], float]:
    """``n`` pretraining batches as `litebert pretrain` makes them from the bundled corpus: a token store, SOP pairs
    with whole-word n-gram masking (the official ``short_seq_prob`` 0.1, so some sequences are short), collated to the
    longest of the batch. Also returns the share of real tokens over the first 4,000 examples of the epoch."""
    import tempfile

    from litebert.data.pretraining import PretrainingDataset, collate_pretraining
    from litebert.data.store import prepare_store

    with tempfile.TemporaryDirectory() as tmp:
        store = prepare_store(sorted((REPO / "data" / "corpus").glob("*.txt.xz")), tokenizer(), Path(tmp) / "store",
                              workers=2, progress=False)
        ds = PretrainingDataset(store, max_seq_length=seq, max_predictions_per_seq=predictions, seed=0)
        out = [collate_pretraining([ds.example(0, j * batch + i) for i in range(batch)]) for j in range(n)]
        real = float(np.mean([ds.example(0, i)["input_ids"].size for i in range(min(4000, len(ds)))])) / seq
    for b in out:  # HF's form of the same MLM targets: labels [B, L], -100 except at the masked positions
        labels = torch.full_like(b["input_ids"], -100)
        for r in range(batch):
            k = int(b["mlm_weights"][r].sum())
            labels[r, b["mlm_positions"][r, :k]] = b["mlm_ids"][r, :k]
        b["labels"] = labels
    return out, real


def pipeline_step_fn(impl: str, config: AlbertConfig, batches: list[dict]):
    """Like `step_fn`, each call on the next of ``batches`` (cycling), so that two interleaved implementations see
    the same batch in each back-to-back pair. litebert's pretraining loop skips the padding (its losses never read
    it); HF computes it."""
    from litebert.padding import Packing

    torch.manual_seed(0)
    model = (hf_model(config) if impl == "hf" else our_model(config)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    calls = [0]

    def step():
        b = batches[calls[0] % len(batches)]
        calls[0] += 1
        opt.zero_grad(set_to_none=True)
        if impl == "hf":
            loss = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                         token_type_ids=b["token_type_ids"], labels=b["labels"],
                         sentence_order_label=b["sentence_order_label"]).loss
        else:
            loss = model(**{k: v for k, v in b.items() if k != "labels"},
                         packing=Packing.from_mask(b["attention_mask"])).loss
        loss.backward()
        opt.step()
    return step


def interleaved(fns: dict, warmup: int, repeats: int, raw: dict | None = None,
                alternate: bool = False) -> dict[str, float]:
    """Median seconds per call of each function, measured in alternation (``raw``, if given, receives every time).

    ``alternate``: every other repeat runs the functions in reverse order (A B, B A, A B, ...), so that neither
    implementation always runs first in its pair, and a load that rises or falls steadily hits both alike.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for r in range(repeats):
        order = list(fns.items())
        for name, fn in (order[::-1] if alternate and r % 2 else order):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    if raw is not None:
        raw.update(times)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bootstrap_ratio(hf: list[float], ours: list[float], level: float = 0.9, resamples: int = 4000,
                    seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(hf) / median(ours), resampling whole back-to-back pairs.

    The host's speed drifts by 10-20% over seconds, so one run's ratio of medians moves by several hundredths between
    runs; the interval says how far this run's figure can be trusted.
    """
    rng = np.random.default_rng(seed)
    h, o = np.asarray(hf), np.asarray(ours)
    idx = rng.integers(0, len(h), size=(resamples, len(h)))
    ratios = np.sort(np.median(h[idx], axis=1) / np.median(o[idx], axis=1))
    tail = (1 - level) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def pair_ratios(hf: list[float], ours: list[float]) -> list[float]:
    """HF's time over litebert's in each back-to-back pair (the speed-up), sorted."""
    return sorted(h / o for h, o in zip(hf, ours))


def print_pairs(what: str, raw: dict) -> None:
    """Each back-to-back pair's seconds, so that later runs can be pooled with this one (docs/BENCHMARKS.md)."""
    pairs = ", ".join(f"{h:.3f}/{o:.3f}" for h, o in zip(raw["hf"], raw["ours"]))
    print(f"{what}, seconds per pair (HF/litebert): {pairs}", flush=True)


# ---------------------------------------------------------------------------------------------------- inference
def corpus_texts(n: int, seed: int = 0) -> list[str]:
    """n passages of 1-8 consecutive sentences from the bundled corpus: real, variable-length English."""
    sentences = []
    for path in sorted((REPO / "data" / "corpus").glob("*.txt.xz")):
        with lzma.open(path, "rt", encoding="utf-8") as f:
            sentences += [line.strip() for line in f if line.strip()]
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(sentences) - 8, n)
    return [" ".join(sentences[s:s + int(rng.integers(1, 9))]) for s in starts]


def review_texts(n: int, seed: int = 0) -> list[str]:
    """n movie-review snippets (the bundled Rotten Tomatoes sentiment data): short real texts, as classified online."""
    import gzip

    lines = []
    for split in ("dev", "test"):
        with gzip.open(REPO / "data" / "finetune" / "sentiment" / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
            lines += [line.split("\t", 1)[0] for line in list(f)[1:]]
    rng = np.random.default_rng(seed)
    return [lines[i] for i in rng.permutation(len(lines))[:n]]


def tokenizer():
    """The official ALBERT 30k vocabulary, bundled in data/albert-30k."""
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer.from_pretrained(REPO / "data" / "albert-30k")


def tokenize(texts: list[str], seq: int) -> list[list[int]]:
    tok = tokenizer()
    return [[tok.cls_token_id] + ids[: seq - 2] + [tok.sep_token_id] for ids in tok.encode_batch_ids(texts)]


def batches(ids: list[list[int]], batch: int, pad_to: int | None, grouped: bool):
    order = sorted(range(len(ids)), key=lambda i: len(ids[i])) if grouped else list(range(len(ids)))
    out = []
    for start in range(0, len(order), batch):
        rows = [ids[i] for i in order[start:start + batch]]
        width = pad_to or max(map(len, rows))
        x = torch.zeros(len(rows), width, dtype=torch.long)
        m = torch.zeros_like(x)
        for r, row in enumerate(rows):
            x[r, :len(row)] = torch.tensor(row)
            m[r, :len(row)] = 1
        out.append((x, m))
    return out


def onnx_runner(model):
    """``litebert export onnx`` of ``model`` (verified against PyTorch), run by onnxruntime with the same threads."""
    import tempfile

    from litebert.io.export import export_onnx, onnx_session

    path = Path(tempfile.mkdtemp()) / "encoder.onnx"
    export_onnx(model, path)
    session = onnx_session(path)

    def run(x, m):
        feed = {"input_ids": x.numpy(), "attention_mask": m.numpy(), "token_type_ids": np.zeros_like(x.numpy())}
        return session.run(None, feed)
    return run


def inference(config: AlbertConfig, texts: list[str], batch: int, seq: int, repeats: int,
              with_onnx: bool = True, grouped_pairs: int | None = None) -> dict:
    """Latency at 1 x ``seq`` and throughput on ``texts`` (fixed padding and length-grouped batches).

    ``grouped_pairs``: HF's and litebert's bare encoders on the grouped batches run first, alone, in this many
    back-to-back pairs whose order alternates (their raw times are returned, for a bootstrap interval of the ratio);
    the other implementations then run ``repeats`` interleaved rounds."""
    torch.manual_seed(0)
    hf = hf_model(config, "AlbertModel").eval()
    ours = our_model(config, "AlbertModel").eval()
    ours.load_state_dict({k: v for k, v in _our_state_from_hf(hf, config).items()})
    skip = Packed(ours)  # the same model, called with the packing of each batch's mask

    one = torch.randint(5, config.vocab_size, (1, seq))
    ort = onnx_runner(ours) if with_onnx else None
    with torch.inference_mode():
        fns = {"hf": lambda: hf(input_ids=one), "ours": lambda: ours(one)}
        if ort:
            fns["ort"] = lambda: ort(one, torch.ones_like(one))
        latency = interleaved(fns, 3, repeats * 4)

    ids = tokenize(texts, seq)
    fixed = batches(ids, batch, seq, grouped=False)
    grouped = batches(ids, batch, None, grouped=True)
    real_tokens = sum(map(len, ids))

    def run(model, bs, hf_style):
        def go():
            for x, m in bs:
                model(input_ids=x, attention_mask=m) if hf_style else model(x, m)
        return go

    hf_clf, ours_clf = classifiers(config)
    fast = {"hf_grouped": run(hf, grouped, True), "ours_grouped": run(skip, grouped, False),
            "hf_clf_grouped": run(hf_clf, grouped, True), "ours_clf_grouped": run(ours_clf, grouped, False)}
    slow = {"hf_fixed": run(hf, fixed, True), "ours_fixed": run(ours, fixed, False),
            "ours_skip_fixed": run(skip, fixed, False)}
    if ort:
        fast["ort_grouped"], slow["ort_fixed"] = run(ort, grouped, False), run(ort, fixed, False)

    with torch.inference_mode():
        # sanity: the implementations agree on real tokens before we time them
        x, m = grouped[len(grouped) // 2]
        ref = hf(input_ids=x, attention_mask=m).last_hidden_state
        for model in (ours, skip):
            diff = (model(x, m).last_hidden_state - ref)[m.bool()].abs().max().item()
            assert diff < 1e-4, f"implementations disagree ({diff})"
        diff = (ours_clf(x, m).logits - hf_clf(input_ids=x, attention_mask=m).logits).abs().max().item()
        assert diff < 1e-4, f"classifiers disagree ({diff})"
        grouped_raw: dict = {}
        pair = {k: fast.pop(k) for k in ("hf_grouped", "ours_grouped")}
        times = interleaved(pair, 1, grouped_pairs or repeats, grouped_raw, alternate=True)
        times.update(interleaved(fast, 1, repeats))
        # Fixed padding to 128 is 4-5x the work of grouped batches and its ratios are far from their targets:
        # fewer repeats keep the whole benchmark near half an hour.
        times.update(interleaved(slow, 1, max(2, (repeats + 1) // 2)))
    return dict(latency=latency, throughput={k: real_tokens / v for k, v in times.items()}, texts=len(ids),
                mean_len=real_tokens / len(ids), grouped_raw=grouped_raw)


class Packed:
    """A litebert model called as ``model(ids, mask)`` with the packing of the mask: the padding skipped, as
    litebert's loops and ``predict`` run it."""

    def __init__(self, model):
        self.model = model

    def __call__(self, x: torch.Tensor, m: torch.Tensor):
        from litebert.padding import Packing

        return self.model(x, m, packing=Packing.from_mask(m))


def classifiers(config: AlbertConfig):
    """HF's and litebert's sequence classifiers with the same weights (through HF's save_pretrained), in eval mode;
    litebert's skips padding. Classification reads only the pooled [CLS]: litebert's last layer runs there alone."""
    import tempfile

    from litebert.heads import AlbertForSequenceClassification

    torch.manual_seed(0)
    hf = hf_model(dataclasses.replace(config, num_labels=2), "AlbertForSequenceClassification").eval()
    folder = tempfile.mkdtemp()
    hf.save_pretrained(folder)
    ours = AlbertForSequenceClassification.from_pretrained(folder).eval()
    return hf, Packed(ours)


def _our_state_from_hf(hf, config):
    from litebert.io import keymap

    state = {("albert." + k): v for k, v in hf.state_dict().items()}
    ours = keymap.from_hf(state, config)
    return {k[len("albert."):]: v for k, v in ours.items()}


# ---------------------------------------------------------------------------------------------------- memory
def memory_child(impl: str, preset: str, batch: int, seq: int, checkpointing: bool) -> None:
    """Run in a fresh process: two training steps, then print the peak RSS in MB."""
    torch.set_num_threads(2)
    config = AlbertConfig.from_preset(preset)
    b = pretraining_batch(config, batch, seq, 20)
    fn = step_fn(impl, config, b, checkpointing)
    for _ in range(2):
        fn()
    print(json.dumps({"peak_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: the latter survives fork + exec, so a child would
    report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_mb(impl: str, preset: str, batch: int, seq: int, checkpointing: bool = False) -> float:
    cmd = [sys.executable, __file__, "--memory-child", impl, preset, str(batch), str(seq), str(int(checkpointing))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mb"]


# ---------------------------------------------------------------------------------------------------- groups
# Each group runs in a fresh process (`--group NAME`), HF and litebert interleaved inside it. One group's leftovers
# would otherwise change the next group's numbers: after the training steps and `torch.compile`, the process heap is
# grown and fragmented, and HF's inference (which allocates and frees hundreds of MB per batch) then page-faults far
# less than in a fresh process, while litebert's (which reuses its buffers) does not change. HF's own benchmark
# utility (now deprecated) also ran each measurement in its own process by default.
B, L, P = 8, 128, 20


def group_training(config: AlbertConfig, args) -> dict:
    """The matmul ceiling, the pretraining step (raw times of each back-to-back pair), the fine-tuning step."""
    ceiling = matmul_ceiling()
    print(f"fp32 matmul ceiling: {ceiling:.1f} GFLOP/s", flush=True)
    b = pretraining_batch(config, B, L, P)
    raw: dict = {}
    probe = CeilingProbe()  # between the steps (HF, litebert, probe; then probe, litebert, HF; ...)
    step = interleaved({"hf": step_fn("hf", config, b), "ours": step_fn("ours", config, b), "ceiling": probe}, 2,
                       4 * args.repeats, raw, alternate=True)
    del step["ceiling"]
    probe.times = [ts[-4 * args.repeats:] for ts in probe.times]  # without the warm-up calls
    ceiling_during = probe.gflops()
    print(f"fp32 matmul ceiling between the pretraining steps: {ceiling_during:.1f} GFLOP/s", flush=True)
    lo, hi = bootstrap_ratio(raw["hf"], raw["ours"])
    print(f"pretraining step: HF {step['hf']:.3f} s, litebert {step['ours']:.3f} s -> {step['hf'] / step['ours']:.2f}x "
          f"(90% bootstrap interval {lo:.2f}-{hi:.2f})", flush=True)
    print_pairs("pretraining step", raw)
    pipe_batches, real = pipeline_batches(2 * args.repeats, B, L, P)
    pipe_raw: dict = {}
    interleaved({k: pipeline_step_fn(k, config, pipe_batches) for k in ("hf", "ours")}, 1, 2 * args.repeats,
                pipe_raw, alternate=True)  # one warm-up step each: padded batches take other kernels (masks)
    pipe = {k: sum(v) / len(v) for k, v in pipe_raw.items()}  # mean over the same batches: throughput on them
    pipe_real = float(np.mean([b["attention_mask"].float().mean().item() for b in pipe_batches]))
    print(f"pipeline batches ({pipe_real:.1%} real tokens): HF {pipe['hf']:.3f} s, litebert {pipe['ours']:.3f} s "
          f"-> {pipe['hf'] / pipe['ours']:.2f}x", flush=True)
    clf_step = interleaved({"hf": step_fn("hf", config, b, task="classification"),
                            "ours": step_fn("ours", config, b, task="classification")}, 1, args.repeats)
    print(f"classification step: HF {clf_step['hf']:.3f} s, litebert {clf_step['ours']:.3f} s", flush=True)
    return dict(ceiling=ceiling, ceiling_during=ceiling_during, step=step, raw=raw, clf_step=clf_step, pipe=pipe,
                pipe_raw=pipe_raw, pipe_real=pipe_real, corpus_real=real)


def group_compile(config: AlbertConfig, args) -> dict:
    """Both models' pretraining step under `torch.compile`, and the time to compile them."""
    b = pretraining_batch(config, B, L, P)
    t = time.perf_counter()
    fns = {"hf": step_fn("hf", config, b, compiled=True), "ours": step_fn("ours", config, b, compiled=True)}
    for fn in fns.values():
        fn()  # the compilation itself
    compile_s = time.perf_counter() - t
    compiled = interleaved(fns, 1, args.repeats)
    print(f"compiled step: HF {compiled['hf']:.3f} s, litebert {compiled['ours']:.3f} s "
          f"({compile_s:.0f} s to compile both)", flush=True)
    return dict(compiled=compiled, compile_s=compile_s)


def group_reviews(config: AlbertConfig, args) -> dict:
    # The grouped bare-encoder row has a target of its own (>= 1.2x): twice the repeats, in alternating pairs.
    out = inference(config, review_texts(args.texts), 32, L, args.repeats, with_onnx=not args.no_onnx,
                    grouped_pairs=2 * args.repeats)
    lo, hi = bootstrap_ratio(out["grouped_raw"]["hf_grouped"], out["grouped_raw"]["ours_grouped"])
    tp = out["throughput"]
    print(f"latency 1x{L}: HF {out['latency']['hf'] * 1e3:.1f} ms, litebert {out['latency']['ours'] * 1e3:.1f} ms; "
          f"grouped: HF {tp['hf_grouped']:.0f}, litebert {tp['ours_grouped']:.0f} tok/s -> "
          f"{tp['ours_grouped'] / tp['hf_grouped']:.2f}x (90% bootstrap interval {lo:.2f}-{hi:.2f})", flush=True)
    print_pairs("grouped passes", {k.removesuffix("_grouped"): v for k, v in out["grouped_raw"].items()})
    return out


def group_passages(config: AlbertConfig, args) -> dict:
    out = inference(config, corpus_texts(args.texts // 2), 32, L, args.repeats, with_onnx=False)
    print(f"passages, fixed padding: HF {out['throughput']['hf_fixed']:.0f}, "
          f"litebert {out['throughput']['ours_skip_fixed']:.0f} tok/s", flush=True)
    return out


GROUPS = {"training": group_training, "compile": group_compile, "reviews": group_reviews,
          "passages": group_passages}


def run_group(name: str, args) -> dict:
    """Run one group in a fresh interpreter with the same options; its result comes back through a JSON file."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--group", name, "--result", str(result), "--preset", args.preset,
               "--threads", str(args.threads), "--repeats", str(args.repeats), "--texts", str(args.texts)]
        cmd += ["--no-onnx"] if args.no_onnx else []
        print(f"--- {name} (fresh process)", flush=True)
        subprocess.run(cmd, check=True)
        return json.loads(result.read_text())


# ---------------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="albert-base-v2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and texts (a smoke run)")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile rows (compiling takes minutes)")
    parser.add_argument("--no-onnx", action="store_true", help="skip the onnxruntime rows")
    parser.add_argument("--memory-child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--group", choices=sorted(GROUPS), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        impl, preset, batch, seq, ckpt = args.memory_child
        return memory_child(impl, preset, int(batch), int(seq), bool(int(ckpt)))
    if args.quick:
        args.repeats, args.texts = 2, 96
    torch.set_num_threads(args.threads)
    config = AlbertConfig.from_preset(args.preset)
    if args.group:
        out = GROUPS[args.group](config, args)
        tmp = Path(args.result + ".tmp")
        tmp.write_text(json.dumps(out))
        tmp.replace(args.result)
        return

    print(f"machine: {machine()}")
    tr = run_group("training", args)
    ceiling, step, raw, clf_step = tr["ceiling"], tr["step"], tr["raw"], tr["clf_step"]
    step_pairs = pair_ratios(raw["hf"], raw["ours"])  # each repeat: the two steps back to back
    interval = bootstrap_ratio(raw["hf"], raw["ours"])
    pipe = tr["pipe"]
    pipe_pairs = pair_ratios(tr["pipe_raw"]["hf"], tr["pipe_raw"]["ours"])
    flops = B * flops_per_sequence(config, L, P)  # training FLOPs: the count `litebert pretrain` reports MFU with
    ceiling_during = tr["ceiling_during"]
    mfu = {k: flops / v / 1e9 / ceiling_during for k, v in step.items()}
    compiled = None if args.no_compile else run_group("compile", args)["compiled"]
    inf = run_group("reviews", args)
    tp = inf["throughput"]
    graw = inf["grouped_raw"]
    grouped_pairs = pair_ratios(graw["hf_grouped"], graw["ours_grouped"])
    grouped_interval = bootstrap_ratio(graw["hf_grouped"], graw["ours_grouped"])
    passages = run_group("passages", args)
    tp2 = passages["throughput"]

    print("--- memory (fresh processes)", flush=True)
    mem = {
        "hf": peak_mb("hf", args.preset, B, L), "ours": peak_mb("ours", args.preset, B, L),
        "static_ours": peak_mb("ours", args.preset, 1, 8),
        "ours32": peak_mb("ours", args.preset, 32, L), "ours32_ckpt": peak_mb("ours", args.preset, 32, L, True),
    }
    act = mem["ours32"] - mem["static_ours"]
    act_ckpt = mem["ours32_ckpt"] - mem["static_ours"]

    rows = [
        ("Pretraining step, batch 8x128 (MLM+SOP+AdamW)", f"{step['hf']:.2f} s", f"{step['ours']:.2f} s",
         f"{step['hf'] / step['ours']:.2f}x", "≥ 1.15x"),
        (f"  ratio in each of the {len(step_pairs)} back-to-back pairs: min / median / max", "", "",
         f"{step_pairs[0]:.2f} / {statistics.median(step_pairs):.2f} / {step_pairs[-1]:.2f}", ""),
        ("  90% bootstrap interval of the ratio (resampling the pairs)", "", "",
         f"{interval[0]:.2f} - {interval[1]:.2f}", ""),
        ("  MFU vs the matmul ceiling measured between the steps", f"{mfu['hf']:.0%}", f"{mfu['ours']:.0%}", "",
         "≥ 75% (litebert)"),
        (f"Pretraining step on the data pipeline's batches of 8 (bundled corpus, {tr['pipe_real']:.0%} real tokens; "
         f"litebert skips the padding)", f"{pipe['hf']:.2f} s", f"{pipe['ours']:.2f} s",
         f"{pipe['hf'] / pipe['ours']:.2f}x", ""),
        (f"  ratio in each of the {len(pipe_pairs)} back-to-back pairs (one batch each): min / median / max", "", "",
         f"{pipe_pairs[0]:.2f} / {statistics.median(pipe_pairs):.2f} / {pipe_pairs[-1]:.2f}", ""),
    ]
    rows += [
        ("Fine-tuning step, sequence classification, batch 8x128 (AdamW)", f"{clf_step['hf']:.2f} s",
         f"{clf_step['ours']:.2f} s", f"{clf_step['hf'] / clf_step['ours']:.2f}x", ""),
    ]
    if compiled:
        rows += [
            ("Pretraining step, both models under `torch.compile`", f"{compiled['hf']:.2f} s",
             f"{compiled['ours']:.2f} s", f"{compiled['hf'] / compiled['ours']:.2f}x", ""),
            ("  litebert compiled vs HF eager", f"{step['hf']:.2f} s", f"{compiled['ours']:.2f} s",
             f"{step['hf'] / compiled['ours']:.2f}x", ""),
        ]
    rows += [
        ("Inference latency, batch 1x128", f"{inf['latency']['hf'] * 1e3:.1f} ms",
         f"{inf['latency']['ours'] * 1e3:.1f} ms", f"{inf['latency']['hf'] / inf['latency']['ours']:.2f}x", ""),
        ("Throughput, real texts: litebert grouped+skip-padding vs HF fixed padding", f"{tp['hf_fixed']:.0f} tok/s",
         f"{tp['ours_grouped']:.0f} tok/s", f"{tp['ours_grouped'] / tp['hf_fixed']:.2f}x", "≥ 2x"),
        ("Throughput, same fixed-padding batches (litebert skips padding)", f"{tp['hf_fixed']:.0f} tok/s",
         f"{tp['ours_skip_fixed']:.0f} tok/s", f"{tp['ours_skip_fixed'] / tp['hf_fixed']:.2f}x", "≥ 1.2x"),
        ("Throughput, same length-grouped batches", f"{tp['hf_grouped']:.0f} tok/s", f"{tp['ours_grouped']:.0f} tok/s",
         f"{tp['ours_grouped'] / tp['hf_grouped']:.2f}x", "≥ 1.2x"),
        (f"  ratio in each of the {len(grouped_pairs)} back-to-back pairs of passes: min / median / max", "", "",
         f"{grouped_pairs[0]:.2f} / {statistics.median(grouped_pairs):.2f} / {grouped_pairs[-1]:.2f}", ""),
        ("  90% bootstrap interval of the ratio (resampling the pairs)", "", "",
         f"{grouped_interval[0]:.2f} - {grouped_interval[1]:.2f}", ""),
        ("Throughput, same fixed padding, padding computed (parity mode)", f"{tp['hf_fixed']:.0f} tok/s",
         f"{tp['ours_fixed']:.0f} tok/s", f"{tp['ours_fixed'] / tp['hf_fixed']:.2f}x", ""),
        ("Sequence classification (pooled logits), same length-grouped batches", f"{tp['hf_clf_grouped']:.0f} tok/s",
         f"{tp['ours_clf_grouped']:.0f} tok/s", f"{tp['ours_clf_grouped'] / tp['hf_clf_grouped']:.2f}x", ""),
    ]
    if "ort" in inf["latency"]:
        rows += [
            ("ONNX Runtime (`litebert export onnx`): latency, batch 1x128", f"{inf['latency']['hf'] * 1e3:.1f} ms",
             f"{inf['latency']['ort'] * 1e3:.1f} ms", f"{inf['latency']['hf'] / inf['latency']['ort']:.2f}x", ""),
            ("ONNX Runtime: throughput, same length-grouped batches", f"{tp['hf_grouped']:.0f} tok/s",
             f"{tp['ort_grouped']:.0f} tok/s", f"{tp['ort_grouped'] / tp['hf_grouped']:.2f}x", ""),
            ("ONNX Runtime: throughput, same fixed-padding batches", f"{tp['hf_fixed']:.0f} tok/s",
             f"{tp['ort_fixed']:.0f} tok/s", f"{tp['ort_fixed'] / tp['hf_fixed']:.2f}x", ""),
        ]
    rows += [
        (f"Long passages (mean {passages['mean_len']:.0f} tokens): grouped+skip vs HF fixed padding",
         f"{tp2['hf_fixed']:.0f} tok/s", f"{tp2['ours_grouped']:.0f} tok/s",
         f"{tp2['ours_grouped'] / tp2['hf_fixed']:.2f}x", ""),
        ("Long passages: same fixed-padding batches", f"{tp2['hf_fixed']:.0f} tok/s",
         f"{tp2['ours_skip_fixed']:.0f} tok/s", f"{tp2['ours_skip_fixed'] / tp2['hf_fixed']:.2f}x", ""),
        ("Peak training memory, batch 8x128 (RSS)", f"{mem['hf']:.0f} MB", f"{mem['ours']:.0f} MB",
         f"{mem['ours'] / mem['hf']:.2f}x", "≤ 1x"),
        ("Activation memory, batch 32x128: checkpointing on / off", "", f"{act_ckpt:.0f} / {act:.0f} MB",
         f"{act_ckpt / act:.2f}x", "≤ 0.5x"),
    ]
    table = ["| measure | HF transformers | litebert | ratio | target |", "|---|---:|---:|---:|---|"]
    table += [f"| {' | '.join(r)} |" for r in rows]
    text = "\n".join([
        "## Model: litebert vs HF transformers (`bench/bench_model.py`)", "",
        f"Machine: {machine()}. Preset {args.preset}, fp32, {args.threads} threads. Each group of rows (the "
        "training steps; the compiled steps; the movie-review snippets; the corpus passages; each memory figure) runs "
        f"in its own fresh process, HF and litebert interleaved in it: median of {args.repeats} "
        f"interleaved repeats after warm-up (the pretraining step: {4 * args.repeats}, and the pipeline's batches: "
        f"{2 * args.repeats}, and the bare encoders on the review snippets' grouped batches: {2 * args.repeats}; "
        "each pair's order alternating, HF first then litebert first; fixed-padding "
        f"throughput: {max(2, (args.repeats + 1) // 2)}). Measured fp32 matmul ceiling: {ceiling_during:.0f} "
        "GFLOP/s between the pretraining steps (the best of three GEMM shapes, median of the probes run beside each "
        f"pair), {ceiling:.0f} GFLOP/s at the start of the group. Useful FLOPs per step (MLM at the {P} masked "
        f"positions): {flops / 1e9:.0f} GFLOP. Throughput texts: {inf['texts']} movie-review "
        f"snippets (bundled sentiment data; mean {inf['mean_len']:.0f} tokens) and {passages['texts']} passages of "
        f"1-8 sentences of the bundled corpus, batch 32, at most {L} tokens. Fixed padding = every batch padded "
        "to 128 in the texts' order (the common HF recipe); grouped = batches of similar length, padded to their "
        "longest. The pretraining step's main row runs one synthetic batch with no padding (every token real, the "
        f"same batch every step); the pipeline row runs {len(tr['pipe_raw']['hf'])} different batches of the data "
        "pipeline (token store of the bundled corpus, SOP pairs, n-gram masking, short_seq_prob 0.1, padded to the "
        f"longest of each batch; {tr['corpus_real']:.0%} real tokens over the epoch's first 4,000 examples), each "
        "once per implementation, and compares the mean time over the same batches.", "",
        *table, "",
        "Throughput counts real (non-padding) tokens per second. Memory is the peak RSS of a fresh process running "
        "two training steps; activation memory is that peak minus the peak of the same process at batch 1x8.",
    ])
    print("\n" + "\n".join(table))
    write_section("model", text)


if __name__ == "__main__":
    main()
