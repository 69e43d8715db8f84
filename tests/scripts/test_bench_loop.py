"""bench/bench_loop.py: the statistics it reports (the loop's share of its step and its overhead per step, with
bootstrap intervals, on simulated blocks whose true values are known) and a toy run of the real loop against the bare
step on the tests' tiny store (both arms timed, a report row per shape, the JSON with every pair)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bench_loop.py"
spec = importlib.util.spec_from_file_location("bench_loop", SCRIPT)
bench_loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_loop)


def simulated(rng, step_s: float, overhead_s: float, pairs: int, block: int = 10):
    """Blocks as the benchmark times them: a host speed drifting from block to block (~10%, shared by the two
    blocks of a pair) and each block's own noise (~3%)."""
    host = np.exp(rng.normal(0, 0.10, pairs))
    bare = block * step_s * host * np.exp(rng.normal(0, 0.03, pairs))
    loop = block * (step_s + overhead_s) * host * np.exp(rng.normal(0, 0.03, pairs))
    return list(loop), list(bare)


def test_share_and_overhead_intervals_cover_the_true_values():
    rng = np.random.default_rng(0)
    step, overhead, hits_share, hits_over = 0.010, 0.002, 0, 0
    for _ in range(60):
        loop, bare = simulated(rng, step, overhead, 40)
        share = bench_loop._bootstrap(loop, bare, lambda lo, ba: np.median(ba) / np.median(lo), resamples=800)
        over = bench_loop._bootstrap(loop, bare, lambda lo, ba: (np.median(lo) - np.median(ba)) / 10 * 1e3,
                                     resamples=800)
        hits_share += share["low"] <= step / (step + overhead) <= share["high"]
        hits_over += over["low"] <= overhead * 1e3 <= over["high"]
        assert share["low"] <= share["value"] <= share["high"]
    # 90% intervals: most of the 60 simulated runs cover the truth (the host drift is shared within a pair)
    assert hits_share >= 45 and hits_over >= 45


def test_report_says_whether_each_target_is_met():
    row = dict(device="cpu", block=10, pairs=40, threads=1, data_workers=1, loop_ms_per_step=11.0,
               bare_ms_per_step=10.0)
    met = {**row, "shape": "tiny", "share": dict(value=0.91, low=0.9, high=0.92),
           "overhead_ms": dict(value=1.0, low=0.5, high=1.5)}
    missed = {**row, "shape": "demo", "share": dict(value=0.95, low=0.93, high=0.97),
              "overhead_ms": dict(value=15.0, low=5.0, high=25.0)}
    text = bench_loop.report([met, missed], "a machine")
    lines = [line for line in text.splitlines() if line.startswith("| tiny") or line.startswith("| demo")]
    assert "<= 2 ms: met" in lines[0] and ">= 0.97: not met" in lines[1]


@pytest.mark.usefixtures("one_thread")
def test_a_toy_run_times_both_arms(tiny_setup, tmp_path):
    out = tmp_path / "loop.json"
    assert bench_loop.main(["--shapes", "tiny", "--store", str(tiny_setup["store"]), "--pairs", "2", "--warmup", "1",
                            "--block", "2", "--work", str(tmp_path / "w"), "--json", str(out), "--no-doc"]) == 0
    (r,) = json.loads(out.read_text())
    assert r["shape"] == "tiny" and r["pairs"] == 2 and len(r["loop_s"]) == len(r["bare_s"]) == 2
    assert all(t > 0 for t in r["loop_s"] + r["bare_s"]) and r["loop_ms_per_step"] > 0
