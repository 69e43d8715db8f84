"""The training loop's batches on the host: built when a step needs them, or ahead of it by worker processes.

A micro-batch is a run of consecutive run-wide example numbers ``c`` (example ``c`` is ``data.example(c // N, c % N)``
for N examples per epoch, see `litebert.pretraining.loop`), collated on the CPU. ``starts(step, size)`` says where each
of
a step's micro-batches begins. With ``workers`` = 0 the training process builds each one when the step asks for it;
with ``workers`` > 0 a `torch.utils.data.DataLoader` over the same numbers builds them in that many processes, in
order, a few steps ahead, so that a GPU is not left waiting on the one host core that masks and collates. The values
are the same either way: every example is a pure function of its number.

A batch crosses from a worker as NumPy arrays, pickled by value (`_Shipped`): torch's own way, tensors in shared
memory whose file descriptors pass over a socket one by one, costs the training process ~3 ms per batch (measured:
2.8 ms for 8 x 128 and 3.2 ms for 128 x 128, against 0.5 and 1.0 ms by value), time the step then waits. With ``pin``
(a CUDA run) the loader's thread makes them tensors in pinned memory as they arrive, so that their copy to the GPU is
queued without the training process copying them first. The workers are forked (they share the
token store's memory maps instead of copying them) where the platform can fork; a step that asks for something else than
what was built ahead (a resumed run, an `auto` micro-batch halved
after running out of memory) restarts them from there.

Stopping belongs to the training process. ``docker stop``, systemd and Slurm send SIGTERM (and a terminal's Ctrl-C
SIGINT) to the whole process group, workers included: the workers ignore both, so the training process finishes its
step, saves its checkpoint and closes the feed, which ends them. A worker that dies anyway (the kernel's
out-of-memory killer sends SIGKILL) is reported as a `TrainingError` naming it, when the step next asks for a batch.
The loader draws its workers' base seed from a generator of its own (seeded from the run's seed), never from the
global one that dropout uses, so a run with workers equals one without, bit for bit.
"""

from __future__ import annotations

import itertools
import multiprocessing
import signal
import time
from typing import Callable, Iterator, Optional

import torch
from torch.utils.data._utils import signal_handling

from litebert.engine.step import TrainingError

_STOP = (signal.SIGTERM, signal.SIGINT)


class _Examples(torch.utils.data.Dataset):
    """Example ``c`` of the run (``n`` examples per epoch)."""

    def __init__(self, data, n: int):
        self.data, self.n = data, n

    def __getitem__(self, c: int):
        return self.data.example(c // self.n, c % self.n)


class Feed:
    """Collated CPU micro-batches of ``data`` by step: ``feed.step(step, size)`` yields that step's micro-batches of
    ``size`` sequences, for this process (``starts``). Close it (or use it as a context manager) to stop the
    workers."""

    def __init__(self, data, n: int, collate: Callable, starts: Callable[[int, int], list[int]], workers: int = 0,
                 ahead: int = 4, seed: int = 0, pin: bool = False):
        self.examples, self.collate, self.starts = _Examples(data, n), collate, starts
        self.workers, self.ahead, self.seed, self.pin = workers, ahead, seed, pin
        self._batches: Optional[Iterator] = None
        self._at: Optional[tuple[int, int]] = None  # (step, size) the workers' next batches belong to

    def step(self, step: int, size: int) -> Iterator[dict]:
        if self.workers == 0:
            for c0 in self.starts(step, size):
                yield self.collate([self.examples[c] for c in range(c0, c0 + size)])
            return
        if self._at != (step, size):
            self._restart(step, size)
        self._at = None  # a step left half-way (out of memory) leaves the workers out of step: restart next time
        for _ in self.starts(step, size):
            yield self._next()
        self._at = (step + 1, size)

    def _next(self) -> dict:
        try:
            batch = next(self._batches)
            return batch.tensors() if isinstance(batch, _Shipped) else batch
        # "DataLoader worker (pid(s) ...) exited unexpectedly" (RuntimeError), or, when the worker died while a batch
        # was passing to this process, the broken transfer (ConnectionResetError, EOFError): say which one, and why
        except (RuntimeError, ConnectionError, EOFError):
            dead = self._dead_workers()
            if not dead:
                raise
            i, w = dead[0]
            raise TrainingError(f"data worker {i + 1} of {self.workers} (pid {w.pid}) {_death(w.exitcode)}; "
                                "use fewer {data_workers:flag} or a smaller {micro_batch:flag}. The checkpoints "
                                "saved so far are kept: continue the run with {resume:flag}", data_workers=self.workers,
                                micro_batch=None, resume=True) from None

    def _dead_workers(self, wait: float = 2.0) -> list:
        """The workers that ended, with their numbers; a killed one is reaped (its exit code known) within ``wait``
        seconds of the failed read that revealed it."""
        deadline = time.monotonic() + wait
        while True:
            dead = [(i, w) for i, w in enumerate(self._batches._workers) if w.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                return dead
            time.sleep(0.05)

    def _restart(self, step: int, size: int) -> None:
        self.close()

        def batches():
            for s in itertools.count(step):
                for c0 in self.starts(s, size):
                    yield list(range(c0, c0 + size))

        methods = multiprocessing.get_all_start_methods()
        loader = torch.utils.data.DataLoader(
            self.examples, batch_sampler=batches(), num_workers=self.workers,
            collate_fn=_Collate(self.collate),
            prefetch_factor=max(2, self.ahead * len(self.starts(step, size)) // self.workers),
            pin_memory=self.pin,  # pinned by the loader's thread: the copy to the GPU is then queued, not waited for
            multiprocessing_context="fork" if "fork" in methods else None, worker_init_fn=_ignore_stop_signals,
            generator=torch.Generator().manual_seed(self.seed))  # not the global generator: dropout's
        # A stop signal that arrives while the workers start waits (blocked) until they ignore it: it then reaches
        # this process alone.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
        try:
            self._batches = iter(loader)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        # torch raises a dead worker's error from its SIGCHLD handler, wherever this process is then (a backward
        # pass, a checkpoint being written); unregistered, the death is found where a batch is awaited (`_next`).
        if self._batches._worker_pids_set:
            signal_handling._remove_worker_pids(id(self._batches))
            self._batches._worker_pids_set = False

    def close(self) -> None:
        batches, self._batches, self._at = self._batches, None, None
        if batches is not None and hasattr(batches, "_shutdown_workers"):
            batches._shutdown_workers()
            for w in batches._workers:  # torch's last resort is SIGTERM, which the workers ignore
                if w.is_alive():
                    w.kill()

    def __enter__(self) -> "Feed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Shipped:
    """A collated batch on its way from a worker: its tensors as NumPy arrays (module docstring)."""

    def __init__(self, batch: dict):
        self.arrays = {k: v.numpy() for k, v in batch.items()}

    def tensors(self) -> dict:
        return {k: torch.from_numpy(v) for k, v in self.arrays.items()}

    def pin_memory(self, device=None) -> dict:  # called by the loader's pin thread (``pin``)
        return {k: t.pin_memory() for k, t in self.tensors().items()}


class _Collate:
    """The worker's collate: the batch, shipped as NumPy arrays (a class, so that spawned workers can unpickle it)."""

    def __init__(self, collate: Callable):
        self.collate = collate

    def __call__(self, rows: list) -> _Shipped:
        return _Shipped(self.collate(rows))


def _ignore_stop_signals(_worker_id: int) -> None:
    """In each worker as it starts: SIGTERM and SIGINT sent to the process group are the training process's to
    handle (it ends the workers when it stops), then unblocked (`Feed._restart` blocks them while workers start)."""
    for s in _STOP:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)


def _death(exitcode: int) -> str:
    """How a worker process ended, for a person: ``exitcode`` is -N when signal N killed it."""
    if exitcode >= 0:
        return f"exited with status {exitcode}"
    number = -exitcode
    try:
        name = f", {signal.Signals(number).name}"
    except ValueError:  # a real-time signal: no name
        name = ""
    why = ", likely by the out-of-memory killer" if number == signal.SIGKILL else ""
    return f"was killed (signal {number}{name}{why})"
