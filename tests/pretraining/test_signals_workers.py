"""`litebert pretrain --data-workers 2` stopped the way machines stop jobs: SIGTERM or SIGINT to the whole process
group (``docker stop``, systemd, Slurm, Ctrl-C) saves a checkpoint at the signal and exits resumable; a worker killed
on its own (the out-of-memory killer's SIGKILL) is named in one line, and the run resumes from its last checkpoint."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import PYTHON
from litebert.engine.checkpoint import latest_valid, list_checkpoints
from litebert.engine.metrics_log import read_metrics
from litebert.folders import read_marker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the workers through /proc")


def command(paths, out, *extra):
    return [PYTHON, "-m", "litebert.cli", "pretrain", "--preset", "tiny", "--data", str(paths["store"]),
            "--out", str(out), "--max-steps", "2000", "--batch-size", "8", "--micro-batch", "4", "--seq-len", "64",
            "--max-predictions", "10", "--save-every", "4", "--keep-last", "2", "--seed", "5", "--threads", "1",
            "--no-progress", "--data-workers", "2", *extra]


def start(cmd) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # a session (and process group) of its own, as a container's or a Slurm job's
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_for_training(run: subprocess.Popen, out: Path, timeout: float = 40) -> None:
    """Until the run has logged a step (its workers are then up), or it ended."""
    deadline = time.monotonic() + timeout
    while run.poll() is None and time.monotonic() < deadline:
        try:
            if '"train"' in (out / "metrics.jsonl").read_text():
                return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    pytest.fail(f"the run logged no step (exit status {run.poll()}): {run.stderr.read() if run.poll() else ''}")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # field 4, after the parenthesised command name
            found.append(int(entry.name))
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_the_process_group_saves_a_checkpoint_and_exits_as_resumable(tiny_setup, tmp_path, sig):
    out = tmp_path / "run"
    run = start(command(tiny_setup, out))
    wait_for_training(run, out)
    workers = children(run.pid)
    assert len(workers) == 2
    os.killpg(run.pid, sig)  # the workers receive it too
    _, err = run.communicate(timeout=40)
    assert run.returncode == 130, err
    assert "internal error" not in err and "Traceback" not in err
    step = read_metrics(out)[-1]["step"]
    assert f"stopped at step {step} (signal {int(sig)}); checkpoint saved" in err
    assert latest_valid(out / "checkpoints").step == step  # the checkpoint at the signal, not the last periodic one
    assert read_marker(out)["step"] == step and read_marker(out)["complete"] is False
    assert not any(alive(w) for w in workers)  # the training process ended its workers


def test_a_worker_killed_alone_is_named_and_the_run_resumes_from_its_last_checkpoint(tiny_setup, tmp_path):
    out = tmp_path / "run"
    run = start(command(tiny_setup, out))
    wait_for_training(run, out)
    while not list_checkpoints(out / "checkpoints") and run.poll() is None:
        time.sleep(0.05)
    workers = children(run.pid)
    assert len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)  # as the kernel's out-of-memory killer does
    _, err = run.communicate(timeout=40)
    assert run.returncode == 2, err
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(rf"litebert pretrain: error: data worker [12] of 2 \(pid {workers[1]}\) was killed \(signal 9, "
                        r"SIGKILL, likely by the out-of-memory killer\); use fewer --data-workers or a smaller "
                        r"--micro-batch\. The checkpoints saved so far are kept: continue the run with --resume",
                        last), last
    assert "Traceback" not in err
    saved = latest_valid(out / "checkpoints").step
    assert saved % 4 == 0  # the last periodic checkpoint: nothing was written at the failure
    resumed = subprocess.run(command(tiny_setup, out, "--resume", "--max-steps", str(saved + 2)), capture_output=True,
                             text=True, timeout=40, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stderr
    assert [r["step"] for r in read_metrics(out)] == list(range(1, saved + 3))
