"""The training loop's batches on the host: built when a step needs them, or ahead of it by worker processes.

A micro-batch is a run of consecutive run-wide example numbers ``c`` (example ``c`` is ``data.example(c // N, c % N)``
for N examples per epoch, see `litebert.train.loop`), collated on the CPU. ``starts(step, size)`` says where each of
a step's micro-batches begins. With ``workers`` = 0 the training process builds each one when the step asks for it;
with ``workers`` > 0 a `torch.utils.data.DataLoader` over the same numbers builds them in that many processes, in
order, a few steps ahead, so that a GPU is not left waiting on the one host core that masks and collates. The values
are the same either way: every example is a pure function of its number.

The workers are forked (they share the token store's memory maps instead of copying them) where the platform can
fork; a step that asks for something else than what was built ahead (a resumed run, an `auto` micro-batch halved
after running out of memory) restarts them from there.
"""

from __future__ import annotations

import itertools
import multiprocessing
from typing import Callable, Iterator, Optional

import torch


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
                 ahead: int = 4):
        self.examples, self.collate, self.starts = _Examples(data, n), collate, starts
        self.workers, self.ahead = workers, ahead
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
            yield next(self._batches)
        self._at = (step + 1, size)

    def _restart(self, step: int, size: int) -> None:
        self.close()

        def batches():
            for s in itertools.count(step):
                for c0 in self.starts(s, size):
                    yield list(range(c0, c0 + size))

        methods = multiprocessing.get_all_start_methods()
        loader = torch.utils.data.DataLoader(
            self.examples, batch_sampler=batches(), num_workers=self.workers,
            collate_fn=self.collate, prefetch_factor=max(2, self.ahead * len(self.starts(step, size)) // self.workers),
            multiprocessing_context="fork" if "fork" in methods else None)
        self._batches = iter(loader)

    def close(self) -> None:
        batches, self._batches, self._at = self._batches, None, None
        if batches is not None and hasattr(batches, "_shutdown_workers"):
            batches._shutdown_workers()

    def __enter__(self) -> "Feed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
