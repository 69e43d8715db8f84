"""scripts/demo_gpu.py at toy size on the CPU (every stage, the report's fields and ranges), and the best constant
guess of scripts/demo_finetune.py against the data's label counts (its bag-of-words model, litebert.tasks.baselines,
is checked against scikit-learn's own pipeline in test_baselines.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import demo_finetune  # noqa: E402
import demo_gpu  # noqa: E402


@pytest.fixture(scope="module")
def splits():
    return demo_finetune.read_splits()


def test_majority_is_the_best_constant_guess(splits):
    # data/finetune/README.md: dev is 51.5% positive; test holds 509 positive snippets of 1000
    assert demo_finetune.majority(splits) == {"dev_label": "1", "dev_accuracy": 0.515, "test_label": "1",
                                              "test_accuracy": 0.509}


def test_demo_gpu_toy(tmp_path):
    """Every stage of the GPU demo at toy size, as the CPU smoke run: the report has each figure, in range."""
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_gpu.py"), "--toy", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["device"] == "cpu" and report["corpus"]["files"] == ["moby_dick.txt.xz", "sotu.txt.xz"]
    assert report["corpus"]["words"]["train"] > 10 * report["corpus"]["words"]["heldout"] > 0
    assert report["tokens"]["train"] > report["corpus"]["words"]["train"]  # ~1.2 pieces per word
    assert report["model"] == {"embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
                               "num_attention_heads": 2, "intermediate_size": 64, "sharing": "all"}
    assert report["step"] == report["max_steps"] == 40 and report["complete"]
    final, base = report["final_eval"], report["baselines"]
    assert 0 <= final["mlm_accuracy"] <= 1 and 0 <= final["sop_accuracy"] <= 1
    assert final["sop_loss"] > 0 and final["mlm_loss"] > 0
    assert base["sop_uniform"] == 0.5 and 0.5 <= base["sop_majority"] <= 1 and base["mlm_uniform"] == 1 / 30000
    s = report["sentiment"]
    assert s["examples"] == {"train": 8568, "dev": 1000, "test": 1000}
    for name, grid in (("pretrained", [1e-3]), ("from_scratch", [1e-3, 3e-3])):  # each model its own rates
        runs = s[name]["runs"]
        assert [r["lr"] for r in runs[:len(grid)]] == grid and s[name]["test_examples"] == 1000
        added = runs[len(grid):]  # a grid of two may add one rate beyond the edge dev picked (by its ratio, 3)
        assert len(added) <= (demo_finetune.GRID_EXTEND if len(grid) > 1 else 0) and all(r["added"] for r in added)
        assert all(math.isclose(r["lr"], grid[-1] * 3, rel_tol=0.01) or math.isclose(r["lr"], grid[0] / 3, rel_tol=0.01)
                   for r in added)
        best = max(s[name]["runs"], key=lambda r: r["dev_accuracy"])  # dev chooses; the first of equals
        assert s[name]["lr"] == best["lr"] and s[name]["dev_accuracy"] == best["dev_accuracy"]
        assert 0 <= s[name]["dev_accuracy"] <= 1 and 0 <= s[name]["test_accuracy"] <= 1
        assert s[name]["settings"]["bias_correction"] is True
    assert 0.76 <= s["bag_of_words"]["test_accuracy"] <= 0.80  # TF-IDF + LR, C on dev: measured 79.2%
    assert s["majority"]["test_accuracy"] == 0.509
    md = (out / "report.md").read_text()
    assert "| SOP accuracy |" in md and "| bag of words (TF-IDF + logistic regression, C on dev) |" in md
    assert "| same model from random weights (control) |" in md
    assert (out / "pretraining.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "pretrain" / "model" / "spiece.model").is_file()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on machines without a GPU")
def test_demo_gpu_refuses_without_cuda(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_gpu.py"), "--out", str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "no CUDA device" in done.stderr and "--toy" in done.stderr
    assert not (tmp_path / "x").exists()


def test_report_names_the_unigram_plateau():
    """The H200 run at the paper's rate: held-out MLM 5.43% beside the most frequent piece's 5.43% is the plateau;
    the run at a quarter of the rate (9.5%) is not."""
    import demo_gpu

    base = {"mlm_most_frequent": 0.05428524258621045}
    assert demo_gpu.on_plateau({"mlm_accuracy": 0.05428524258621045}, base)
    assert demo_gpu.on_plateau({"mlm_accuracy": 0.058}, base)
    assert not demo_gpu.on_plateau({"mlm_accuracy": 0.0949}, base)
    run = json.loads((REPO / "bench" / "results" / "h200-2026-11-26" / "demo-512-lr0.00176.json").read_text())
    assert "unigram plateau" in demo_gpu.markdown(run)
    run = json.loads((REPO / "bench" / "results" / "h200-2026-11-26" / "demo-512-lr0.00044.json").read_text())
    assert "unigram plateau" not in demo_gpu.markdown(run)


def test_plateau_check_reads_the_logged_curve():
    """Hand-made records logged every 10 steps: H1 6.0, warmup 100, so the mark is step 250 and the band H1 - 0.3 =
    5.7; the loss first drops below 5.7 at step 260 (5.69), so the mark is missed by one log interval."""
    train = [{"step": s, "mlm_loss": loss, "unigram_entropy": 6.0}
             for s, loss in [(10, 9.0), (240, 5.8), (250, 5.75), (260, 5.69), (270, 5.72), (280, 5.5)]]
    check = demo_gpu.plateau_check(train, [{"step": 250, "plateau": False}], warmup=100)
    assert check["due_step"] == 250 and check["first_step_below"] == 260 and not check["met"]
    assert check["mlm_loss_at_due"] == 5.75 and check["step_at_due"] == 250
    assert check["curve"][0] == [10, 9.0] and len(check["curve"]) == 6 and check["guard"][0]["step"] == 250
    assert demo_gpu.plateau_check(train, [], warmup=110)["met"]  # mark 260: met
    line = " ".join(demo_gpu._plateau_line(check))
    assert "H1 = 6.000" in line and "step 260" in line and "not by warmup + 150" in line
    assert demo_gpu.plateau_check([], [], warmup=100) == {}  # no records (or no guard): nothing to say
