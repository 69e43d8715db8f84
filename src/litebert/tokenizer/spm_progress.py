"""A progress bar for SentencePiece's training, read from its own log.

SentencePiece trains in C++ and reports only through its log on file descriptor 2. A unigram vocabulary is trained
by pruning: seed pieces (``Initialized 24235 seed pieces``) are cut by a quarter per round, each round two EM
iterations (``EM sub_iter=1 size=7947 ...``), until 1.1 x the vocabulary size is left; then the final pieces are
chosen and the model saved. While `training_progress` is active, descriptor 2 is a pipe read by a thread that turns
those lines into a bar on the real stderr, in rounds: ``log(seed / size) / log(seed / (1.1 * vocab_size))``, after the
reading and the seed search. Every
other line (SentencePiece's warnings and errors, anything Python writes to stderr meanwhile) is passed on unchanged;
only SentencePiece's informational lines and its settings dump are kept back.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import threading
from typing import Iterator, Optional

from tqdm import tqdm

SEED = re.compile(r"Initialized (\d+) seed (?:sentence)?pieces")
EM = re.compile(r"EM sub_iter=\d+ size=(\d+)")
INFO = re.compile(r"^[IV]\d{4} |^WARNING: All log messages before absl::InitializeLog")  # informational lines
# (glog's W, E and F lines are passed on)
LOOSENESS = 1.1  # SentencePiece prunes to vocab_size * 1.1, then picks the final pieces
SEEDED = 0.35  # the share of the bar reached when the seed pieces are found (measured: 8-15 s of 23 on 72k lines)


class _Reader:
    """Reads SentencePiece's log lines from ``fd``; draws the bar on ``out``; passes other lines on to ``out``."""

    def __init__(self, fd: int, out, vocab_size: int, lines: int):
        self.fd, self.out, self.target = fd, out, LOOSENESS * vocab_size
        self.bar = tqdm(total=100, desc=f"training SentencePiece ({lines:,} lines)", unit="%", file=out,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]")
        self.seed: Optional[int] = None
        self.in_settings = False

    def line(self, text: str) -> None:
        if self.in_settings:  # the settings dump: "trainer_spec {" ... "}" blocks, closed by the first log line
            if not INFO.match(text):
                return
            self.in_settings = False
        if "Starts training with" in text:
            self.in_settings = True
        elif "Done! preprocessed" in text:  # the sentences read and normalized: about a tenth of the time
            self._at(0.1)
        elif m := SEED.search(text):  # the seed pieces found (a suffix array over the corpus): about a third
            self.seed = int(m.group(1))
            self._at(SEEDED)
        elif (m := EM.search(text)) and self.seed and self.seed > self.target:
            rounds = math.log(self.seed / max(int(m.group(1)), 1)) / math.log(self.seed / self.target)
            self._at(SEEDED + (1 - SEEDED) * rounds)
        elif not INFO.match(text):
            self.bar.clear()
            self.out.write(text + "\n")
            self.out.flush()
            self.bar.refresh()

    def _at(self, fraction: float) -> None:
        self.bar.n = max(self.bar.n, min(99, int(100 * fraction)))
        self.bar.refresh()

    def run(self) -> None:
        with os.fdopen(self.fd, "r", encoding="utf-8", errors="replace") as pipe:
            for text in pipe:
                self.line(text.rstrip("\n"))

    def close(self, finished: bool) -> None:
        if finished:
            self.bar.n = 100
        self.bar.close()


@contextlib.contextmanager
def training_progress(enabled: bool, vocab_size: int, lines: int) -> Iterator[int]:
    """Yields the ``minloglevel`` to pass to SentencePiece: 0 (its informational log, read into a bar) when
    ``enabled`` and descriptor 2 can be redirected, else 2 (errors only, nothing drawn)."""
    try:
        stderr_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stderr without a descriptor (captured, a notebook)
        stderr_fd = None
    if not enabled or stderr_fd != 2:
        yield 2
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    out = os.fdopen(os.dup(saved), "w", encoding="utf-8", errors="replace")
    reader = _Reader(read_fd, out, vocab_size, lines)
    thread = threading.Thread(target=reader.run, name="sentencepiece-progress", daemon=True)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    thread.start()
    finished = False
    try:
        yield 0
        finished = True
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the reader sees the end and stops
        os.close(saved)
        thread.join(timeout=10)
        reader.close(finished)
        out.close()
