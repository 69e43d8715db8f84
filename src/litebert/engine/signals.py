"""SIGTERM/SIGINT during a training run (pretraining and fine-tuning): the first signal is recorded, and the loop
finishes its step, saves a checkpoint and leaves; a second one raises KeyboardInterrupt at once."""

from __future__ import annotations

import signal
import threading


class StopSignals:
    """Installs the handlers (in the main thread only; elsewhere Python cannot) until `restore`."""

    def __init__(self):
        self.signal: int | None = None
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

    def _on_signal(self, signum, _frame) -> None:
        if self.signal is not None:  # a second Ctrl-C: leave now
            raise KeyboardInterrupt
        self.signal = signum

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}
