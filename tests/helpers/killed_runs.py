"""A pretraining run killed with SIGKILL once it reaches a step (tests/pretraining/test_train_kill.py, and the same
on CUDA in tests/system/test_gpu_cuda.py)."""

import json
import signal
import subprocess
import time


def last_step(out) -> int:
    """The last training step in ``out``'s metrics.jsonl (0 before the first)."""
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
