"""scripts/demo.py (`make demo`) end to end at a few steps: a fixed step count (not a clock), the report's pretraining
figures, fill-mask rows, and the sentiment rows on the same splits beside the controls (about 3 minutes on 2 cores:
the tokenizer and the token stores are built in full)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_at_a_few_steps(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--out", str(out), "--steps", "11",
                           "--finetune-steps", "4", "--tapt-steps", "3", "--label-examples", "40", "--no-progress"],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "11 steps of 16 x 128" in done.stdout and "expect ~" in done.stdout  # the time it expects, before training
    # the probe prints no header of its own: one for the demo's pretraining, one for the task-adaptive run's
    headers = [line for line in done.stderr.splitlines() if line.startswith("pretraining: ")]
    assert "timing probe" in done.stdout and len(headers) == 2, headers
    report = json.loads((out / "report.json").read_text())
    assert report["step"] == report["max_steps"] == 11 and report["complete"] and not report["time_limited"]
    assert len(report["fill_mask"]) == 4 and all(len(r["top"]) == 3 and "[MASK]" in r["text"]
                                                 for r in report["fill_mask"])
    s = report["sentiment"]
    assert s["examples"] == {"train": 8568, "dev": 1000, "test": 1000}
    assert s["majority"] == {"dev_label": "1", "dev_accuracy": 0.515, "test_label": "1", "test_accuracy": 0.509}
    assert 0.76 <= s["bag_of_words"]["dev_accuracy"] <= 0.80 and 0.76 <= s["bag_of_words"]["test_accuracy"] <= 0.80
    for name in ("pretrained", "from_scratch", "tapt"):  # the given grid, then at most one rate beyond its edge
        runs = s[name]["runs"]
        assert [r["lr"] for r in runs[:2]] == [1e-4, 3e-4] and len(runs) <= 3 and all(r["added"] for r in runs[2:])
        assert all(math.isclose(r["lr"], 9e-4) or math.isclose(r["lr"], 1e-4 / 3, rel_tol=0.01) for r in runs[2:])
    assert s["pretrained"]["test_examples"] == s["from_scratch"]["test_examples"] == 1000
    assert s["tapt"]["adaptation"]["steps"] == 3
    le = report["label_efficiency"]
    assert le["examples"] == 40 and all(0 <= le[k]["test_accuracy"] <= 1 for k in ("pretrained", "control",
                                                                                    "bag_of_words"))
    assert 6 < report["unigram_entropy"] < 8  # H1 of an 8k vocabulary's masked targets (6.48 in the full demo)
    md = (out / "report.md").read_text()
    assert "| 40 labelled snippets" in md and "Task-adaptive pretraining: 3 MLM steps" in md
    for row in ("| bag of words (TF-IDF + logistic regression, C on dev) |", "| same model from random weights",
                "| best constant guess |", "| pretrained, fine-tuned |", "| SOP accuracy |"):
        assert row in md
    # a second run with another step count is refused, not mixed into the first run's schedule
    again = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--out", str(out), "--steps", "12",
                            "--no-progress"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 1 and "holds a run of 11 steps" in again.stderr
