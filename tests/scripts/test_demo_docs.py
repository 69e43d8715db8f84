"""The demos' figures in README.md and docs/ agree with the recorded reports (scripts/demo_docs.py): every generated
block is the report's, every claimed figure appears; and the check fails when a report and the docs part ways."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import demo_docs  # noqa: E402


def test_the_docs_say_what_the_reports_say():
    assert demo_docs.problems() == []


def copy_tree(tmp: Path) -> Path:
    for name in (*demo_docs.FILES, demo_docs.CPU_REPORT, demo_docs.GPU_REPORT):
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp / name)
    return tmp


def test_a_changed_report_is_caught_and_rewritten(tmp_path):
    root = copy_tree(tmp_path)
    report = json.loads((root / demo_docs.CPU_REPORT).read_text())
    report["sentiment"]["from_scratch"]["dev_accuracy"] = 0.768  # the figure the old grid table disagreed with
    report["final_eval"]["mlm_accuracy"] = 0.201
    (root / demo_docs.CPU_REPORT).write_text(json.dumps(report))
    found = demo_docs.problems(root)
    assert any(p.startswith("README.md: a generated block differs") for p in found)
    assert any(p.startswith("docs/pretraining.md: a generated block differs") for p in found)
    assert "README.md: does not say 'held-out MLM 20.1%'" in found
    # rewriting the blocks puts the report's figures in; the prose claim is still the writer's to change
    made = demo_docs.blocks(*demo_docs.load(root))
    text = demo_docs.render((root / "README.md").read_text(), made)[0]
    assert "| 76.8% | 72.7% |" in text and "| 76.3% | 72.7% |" not in text


def test_a_deleted_block_is_caught(tmp_path):
    root = copy_tree(tmp_path)
    gpu = root / "docs" / "pretraining.md"
    gpu.write_text(gpu.read_text().replace("<!-- generated: gpu-heldout", "<!-- gone: gpu-heldout"))
    assert "block 'gpu-heldout' appears in none of README.md, docs/pretraining.md, docs/GPU.md" in \
        demo_docs.problems(root)


def test_rates_are_written_as_the_docs_write_them():
    assert [demo_docs.rate(x) for x in (1e-4, 3e-5, 0.0003, 0.00176, 1e-05)] == ["1e-4", "3e-5", "3e-4", "1.76e-3",
                                                                                 "1e-5"]
