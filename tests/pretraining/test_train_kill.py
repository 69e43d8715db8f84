"""SIGKILL a `litebert pretrain` run mid-way, `--resume` it: the losses equal those of a run never interrupted."""

import json
import signal
import subprocess
import time

import pytest
from test_train_fixtures import PYTHON, build_tiny_setup
from safetensors.torch import load_file

from litebert.engine.metrics_log import read_metrics


def command(paths, out, *extra):
    return [PYTHON, "-m", "litebert.cli", "pretrain", "--preset", "tiny", "--data", str(paths["store"]),
            "--eval-data", str(paths["eval_store"]), "--out", str(out), "--max-steps", "40", "--global-batch", "8",
            "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10", "--lr", "0.005",
            "--warmup-steps", "4", "--save-every", "4", "--keep-last", "2", "--eval-examples", "16",
            "--seed", "5", "--threads", "1", "--no-progress", *extra]


def last_step(out):
    try:
        lines = (out / "metrics.jsonl").read_text().splitlines()
        return max((json.loads(x)["step"] for x in lines[:-1] if '"train"' in x), default=0)  # last line may be partial
    except FileNotFoundError:
        return 0


def kill_at_step(cmd: list[str], out, step: int, timeout: float = 120) -> None:
    """Start the pretraining command ``cmd`` and SIGKILL it once its metrics in ``out`` reach ``step``."""
    victim = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while last_step(out) < step and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL, "the run finished before it could be killed"


def test_sigkill_then_resume_gives_identical_losses(tmp_path):
    paths = build_tiny_setup(tmp_path / "setup")
    ref_out, out = tmp_path / "ref", tmp_path / "killed"
    ref = subprocess.Popen(command(paths, ref_out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kill_at_step(command(paths, out), out, 14)
    killed_at = last_step(out)
    assert 14 <= killed_at < 40
    resumed = subprocess.run(command(paths, out, "--resume"), capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    _, err = ref.communicate(timeout=120)
    assert ref.returncode == 0, err

    a, b = read_metrics(ref_out), read_metrics(out)
    assert [r["step"] for r in b] == list(range(1, 41))
    assert [r["loss"] for r in b] == [r["loss"] for r in a]  # identical, bit for bit
    assert a[-1]["loss"] < a[0]["loss"] - 0.2  # and it did learn something (the weights moved)
    wa, wb = load_file(ref_out / "model" / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    assert wa.keys() == wb.keys() and all((wa[k] == wb[k]).all() for k in wa)
    assert [r for r in read_metrics(out, "eval")] == [r for r in read_metrics(ref_out, "eval")]
