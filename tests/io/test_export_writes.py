"""`litebert export onnx` writes its --out file and nothing else: no onnxruntime telemetry cache in the home folder
(~/.cache/Microsoft), no session file in the temporary folder or the working directory.

Run in a subprocess because onnxruntime starts its telemetry when its native module is first imported, which this
test process (the other export tests import it) may already have done with the real home folder.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from litebert import heads
from litebert.config import AlbertConfig

pytest.importorskip("onnxruntime")


def _tree(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_export_writes_nothing_outside_out(tmp_path):
    torch.manual_seed(0)
    model = tmp_path / "model"
    heads.AlbertForSequenceClassification(AlbertConfig.from_preset("tiny", num_labels=3)).save_pretrained(model)
    before = {p: p.stat().st_mtime_ns for p in model.iterdir()}
    home, tmp, cwd, out = (tmp_path / name for name in ("home", "tmp", "cwd", "out"))
    for folder in (home, tmp, cwd):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    run = subprocess.run([sys.executable, "-m", "litebert.cli", "export", "onnx", "--model", str(model),
                          "--out", str(out / "m.onnx")], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "verified with onnxruntime" in run.stdout  # the graph was run in onnxruntime, so telemetry had its chance
    assert _tree(home) == [], "written in the home folder"
    assert _tree(tmp) == [], "written in the temporary folder"
    assert _tree(cwd) == [], "written in the working directory"
    assert _tree(out) == ["m.onnx"]
    assert {p: p.stat().st_mtime_ns for p in model.iterdir()} == before
