"""SIGKILL a `litebert pretrain` run mid-way, `--resume` it: the losses equal those of a run never interrupted."""

import subprocess

from safetensors.torch import load_file

from helpers import PYTHON
from helpers.killed_runs import kill_at_step, last_step
from litebert.engine.metrics_log import read_metrics


def command(paths, out, *extra):
    return [PYTHON, "-m", "litebert.cli", "pretrain", "--preset", "tiny", "--data", str(paths["store"]),
            "--eval-data", str(paths["eval_store"]), "--out", str(out), "--max-steps", "40", "--batch-size", "8",
            "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10", "--lr", "0.005",
            "--warmup-steps", "4", "--save-every", "4", "--keep-last", "2", "--eval-examples", "16",
            "--seed", "5", "--threads", "1", "--no-progress", *extra]


def test_sigkill_then_resume_gives_identical_losses(tiny_setup, tmp_path):
    paths = tiny_setup
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
