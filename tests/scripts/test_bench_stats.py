"""The statistics of bench/bench_model.py: the alternating pair order, the bootstrap interval of the step ratio
(its coverage on simulated runs whose true ratio is known) and the matmul-ceiling probe's arithmetic."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bench_model.py"
spec = importlib.util.spec_from_file_location("bench_model", SCRIPT)
bench_model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_model)


def test_interleaved_alternates_the_order_of_each_pair():
    calls = []
    times = bench_model.interleaved({"hf": lambda: calls.append("hf"), "ours": lambda: calls.append("ours")},
                                    warmup=1, repeats=4, alternate=True)
    assert calls == ["hf", "ours"] + ["hf", "ours", "ours", "hf", "hf", "ours", "ours", "hf"]
    assert set(times) == {"hf", "ours"}
    calls.clear()
    bench_model.interleaved({"hf": lambda: calls.append("hf"), "ours": lambda: calls.append("ours")}, 0, 2)
    assert calls == ["hf", "ours", "hf", "ours"]


def simulated_run(rng, ratio: float, pairs: int):
    """Step times like the benchmark's: a host speed that drifts from pair to pair (shared by both steps of a pair,
    ~10%), and each step's own noise (~6%)."""
    host = np.exp(rng.normal(0, 0.10, pairs))
    hf = 5.0 * host * np.exp(rng.normal(0, 0.06, pairs))
    ours = 5.0 / ratio * host * np.exp(rng.normal(0, 0.06, pairs))
    return list(hf), list(ours)


def test_bootstrap_interval_covers_the_true_ratio_at_about_its_level():
    rng = np.random.default_rng(0)
    runs, hits, widths = 200, 0, []
    for seed in range(runs):
        hf, ours = simulated_run(rng, 1.25, 20)
        lo, hi = bench_model.bootstrap_ratio(hf, ours, level=0.9, resamples=1000, seed=seed)
        assert lo <= np.median(hf) / np.median(ours) <= hi
        hits += lo <= 1.25 <= hi
        widths.append(hi - lo)
    # 90% nominal; the percentile bootstrap of a median over 20 pairs is somewhat conservative (~95% here)
    assert 0.82 <= hits / runs <= 0.99
    assert 0.05 < np.mean(widths) < 0.25


def test_bootstrap_interval_narrows_with_more_pairs_and_is_seeded():
    rng = np.random.default_rng(1)
    few = [bench_model.bootstrap_ratio(*simulated_run(rng, 1.3, 10), resamples=1000) for _ in range(40)]
    many = [bench_model.bootstrap_ratio(*simulated_run(rng, 1.3, 40), resamples=1000) for _ in range(40)]
    width = lambda ints: np.mean([hi - lo for lo, hi in ints])  # noqa: E731
    assert width(many) < 0.7 * width(few)  # ~1/2 expected (sqrt(10/40))
    hf, ours = simulated_run(rng, 1.3, 20)
    assert bench_model.bootstrap_ratio(hf, ours, seed=3) == bench_model.bootstrap_ratio(hf, ours, seed=3)


def test_ceiling_probe_takes_the_best_shape_by_median():
    probe = bench_model.CeilingProbe()
    probe()
    assert [len(ts) for ts in probe.times] == [1, 1, 1]
    flops = [2 * m * k * n for m, k, n in bench_model.CEILING_SHAPES]
    # shape 0 at 100 GFLOP/s (median of 3 with an outlier), shape 1 at 120, shape 2 at 110
    probe.times = [[flops[0] / 100e9, flops[0] / 100e9, flops[0] / 10e9],
                   [flops[1] / 120e9, flops[1] / 60e9, flops[1] / 130e9],
                   [flops[2] / 110e9] * 3]
    assert probe.gflops() == pytest.approx(120.0)
