"""Training checkpoints: atomic, verified, keep-last-k, with a fallback past a corrupt latest one.

A run folder holds ``checkpoints/step-00001000.pt`` (one file: model, optimizer, loss scaler, RNG states of every rank,
data position, counters, and the configs the run was started with) and beside it ``step-00001000.pt.sha256``.

- Atomic: the file is written through `litebert.files.atomic_write` (a temporary in the same folder, fsynced, then
  renamed); the checksum is written the same way *after* it. A crash at any moment leaves either the complete new pair
  or no new file.
- Verified: a checkpoint counts only when its checksum file exists and matches. ``latest_valid`` walks from the newest
  to the oldest and warns about each one it skips (half-written, truncated, bit-rotted), so ``--resume`` continues
  from the newest good one.
- Safe to load: ``torch.load(weights_only=True)`` — tensors and plain containers only, nothing is unpickled.
- Disk full: a failed write removes its temporary file and raises ``CheckpointError``; older checkpoints are untouched,
  and keep-last-k deletes old files only after a new one is complete.

Model weights for *users* are exported separately in the HF folder format (``save_pretrained``); these files are for
resuming training.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from litebert import folders
from litebert.engine.args import Machinery
from litebert.errors import CheckpointError, CheckpointNotFoundError, first_line, literal
from litebert.files import atomic_write, checksum_in, sha256_file

FORMAT = "litebert-train-checkpoint"
VERSION = 1
_NAME = re.compile(folders.CHECKPOINT_PATTERN)


def checkpoint_path(folder: Path, step: int) -> Path:
    return Path(folder) / folders.CHECKPOINT.format(step=step)


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file name in ``folder``, oldest first (validity not checked)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), folder / n) for n in os.listdir(folder) if (m := _NAME.fullmatch(n))]
    return sorted(found)


def save_checkpoint(folder: Path, step: int, state: dict, keep_last: int = 3) -> Path:
    """Write ``state`` as checkpoint ``step`` atomically, then prune to the newest ``keep_last`` (0 keeps all).

    Raises ``CheckpointError`` (previous checkpoints intact) when the write fails, e.g. the disk is full.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(folder, step)
    payload = {"format": FORMAT, "version": VERSION, "step": step, **state}
    digest = hashlib.sha256()

    class _Hashing:  # hash while writing, so a large checkpoint is not read back
        def __init__(self, f):
            self.f = f

        def write(self, b):
            digest.update(b)
            return self.f.write(b)

        def flush(self):
            self.f.flush()

    checksum = path.with_name(path.name + ".sha256")

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            torch.save(payload, _Hashing(f))
        # the checksum goes into place before the checkpoint does: a checkpoint that can be seen always has its
        # checksum, however the process is killed (a checksum alone, of a checkpoint never renamed, is ignored)
        atomic_write(checksum, f"{digest.hexdigest()}  {path.name}\n")

    try:
        atomic_write(path, save)
    except OSError as e:
        path.unlink(missing_ok=True)
        checksum.unlink(missing_ok=True)
        previous = [p.name for _, p in list_checkpoints(folder)]
        raise CheckpointError(
            f"could not save checkpoint {path}: {getattr(e, 'reason', None) or e.strerror or e}. Earlier checkpoints "
            "are intact "
            f"({', '.join(previous) or 'none'}); free space in {folder} and resume the run") from e
    if keep_last > 0:
        for old_step, old in list_checkpoints(folder)[:-keep_last]:
            if old_step != step:
                old.unlink(missing_ok=True)
                old.with_name(old.name + ".sha256").unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    """Load and verify one checkpoint file; ``CheckpointError`` says what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointNotFoundError(f"checkpoint {literal(path)} does not exist")
    state = _verified(path, map_location)
    if isinstance(state, str):
        raise CheckpointError(f"checkpoint {literal(path)} {literal(state)}")
    return state


def _verified(path: Path, map_location) -> dict | str:
    """The checkpoint file ``path`` loaded, or what is wrong with it (to follow its name in a message)."""
    sums = path.with_name(path.name + ".sha256")
    if not sums.is_file():
        return f"has no checksum file {sums.name}: it was not completely written"
    try:
        expected = checksum_in(sums, path.name)
    except ValueError as e:
        return f"cannot be verified: its checksum file {sums.name} {e}"
    if sha256_file(path) != expected:
        return f"does not match its checksum in {sums.name}: the file is corrupt"
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure to parse is a corrupt file to the user
        return f"cannot be read ({type(e).__name__}: {first_line(e, 200)})"
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = f" (format {state.get('format')!r})" if isinstance(state, dict) else ""
        return f"is not a litebert training checkpoint{found}"
    if state.get("version") != VERSION:
        return f"has version {state.get('version')}, which is not supported (expected {VERSION})"
    return state


@dataclass(frozen=True)
class Checkpoint:
    """A training checkpoint that verifies: its step, its file and what it holds (``state``, as `save_checkpoint`
    wrote it)."""

    step: int
    path: Path
    state: dict

    @property
    def micro_batch(self) -> Optional[int]:
        """The micro-batch the run stepped with when it was written (what a resumed ``auto`` run continues at)."""
        value = self.state.get("micro_batch")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def max_steps(self) -> Optional[int]:
        """The ``max_steps`` it was written under (older checkpoints kept it with the trajectory settings)."""
        value = self.state.get("max_steps", self.state.get("train", {}).get("max_steps"))
        return int(value) if isinstance(value, int) else None


def latest_valid(folder: Path, map_location="cpu") -> Checkpoint | None:
    """The newest checkpoint that verifies, warning about every newer one that does not; None when ``folder`` holds
    no checkpoint. When it holds checkpoints and none verifies, ``CheckpointError`` names each and what is wrong with
    it: the run has a history that starting again from step 0 would overwrite."""
    skipped = []
    for step, path in reversed(list_checkpoints(folder)):
        state = _verified(path, map_location)
        if isinstance(state, str):
            skipped.append(f"{path.name} {state}")
            continue
        for problem in skipped:
            warnings.warn(f"skipping checkpoint: {Path(folder) / problem}; trying the previous one", stacklevel=2)
        return Checkpoint(step, path, state)
    if skipped:
        raise CheckpointError(f"none of the checkpoints in {literal(folder)} verifies ({literal('; '.join(skipped))}): "
                              "there is nothing to continue the run from; put back a good checkpoint, or start the run "
                              "over with {overwrite}, which deletes its history", overwrite=True)
    return None


def check_compatible(saved: dict, current: dict, where: Path) -> None:
    """Refuse to resume when anything that shapes the training trajectory differs from the saved run.

    ``saved``/``current``: {"model_config": dict, "train": dict, "data": str, "init": dict | None, "max_steps": int}.
    Only the keys listed in ``current["train"]`` are compared (the loop passes those that change the math; logging
    intervals may differ). ``init`` (the weights a run started from, ``--init-from``) is compared by the hash of the
    weights, not by path, so a moved model folder is still the same start. ``max_steps`` may differ (the run is
    extended or shortened), but not fall below the step the checkpoint has reached. ``current["added"]`` (optional):
    {setting: value} of settings added since older checkpoints were written, read as the value those runs had where a
    checkpoint lacks them.
    """
    problems = []
    if saved.get("model_config") != current["model_config"]:
        a, b = saved.get("model_config") or {}, current["model_config"]
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        problems += [f"model config {k}: checkpoint {a.get(k)!r}, now {b.get(k)!r}" for k in keys]
    then = Machinery.unalias(saved.get("train") or {}, str(where))  # a checkpoint written under earlier names
    added = current.get("added") or {}  # settings a checkpoint written before they existed ran with
    for k, v in current["train"].items():
        was = then.get(k, added.get(k))
        if was != v:
            problems.append(f"{k}: checkpoint {was!r}, now {v!r}")
    if saved.get("data") != current["data"]:
        problems.append(f"training data: checkpoint fingerprint {saved.get('data')}, now {current['data']}")
    init_then, init_now = saved.get("init"), current.get("init")
    if (init_then or {}).get("sha256") != (init_now or {}).get("sha256"):
        def describe(init):
            return f"{init['path']} (weights sha256 {init['sha256'][:12]}...)" if init else "none (random weights)"

        problems.append(f"initial weights: checkpoint {describe(init_then)}, now {describe(init_now)}")
    if problems:
        raise CheckpointError(
            f"cannot resume from {where}: the run was started with a different setup ({'; '.join(problems)}); "
            f"resume with the original settings and data, or start a new run in another folder")
    step, max_steps = saved.get("step"), current.get("max_steps")
    if isinstance(step, int) and max_steps is not None and max_steps < step:
        raise CheckpointError(f"cannot resume from {literal(where)}: " + "{max_steps} is below the step the run has "
                              f"reached ({step}); give " + "{max_steps:flag} " + f"{step} or more (a larger value "
                              "extends the run)", max_steps=max_steps)
