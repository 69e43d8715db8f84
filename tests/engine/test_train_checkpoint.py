"""Training checkpoints: atomic writes, checksum verification, fallback past a corrupt latest, keep-last-k, disk
full."""

import errno
import warnings
from pathlib import Path

import pytest
import torch

from litebert.engine import checkpoint as C
from litebert.errors import CheckpointError, CheckpointNotFoundError


def state(v):
    return {"model": {"w": torch.full((50,), float(v))}, "data_step": v, "rng": [torch.get_rng_state()]}


def test_save_load_round_trip_and_keep_last(tmp_path):
    for s in (2, 4, 6, 8):
        C.save_checkpoint(tmp_path, s, state(s), keep_last=2)
    assert [s for s, _ in C.list_checkpoints(tmp_path)] == [6, 8]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-00000006.pt", "step-00000006.pt.sha256", "step-00000008.pt", "step-00000008.pt.sha256"]
    loaded = C.load_checkpoint(tmp_path / "step-00000008.pt")
    assert loaded["step"] == 8 and loaded["data_step"] == 8 and torch.equal(loaded["model"]["w"],
                                                                            torch.full((50,), 8.0))
    found = C.latest_valid(tmp_path)
    step, st = found.step, found.state
    assert step == 8 and st["data_step"] == 8


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_checksum", "garbage"])
def test_corrupt_latest_falls_back_to_previous_with_warning(tmp_path, damage):
    C.save_checkpoint(tmp_path, 1, state(1))
    C.save_checkpoint(tmp_path, 2, state(2))
    latest = tmp_path / "step-00000002.pt"
    data = latest.read_bytes()
    if damage == "truncate":  # e.g. a copy cut short
        latest.write_bytes(data[: len(data) // 2])
    elif damage == "flip":  # bit rot
        latest.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "no_checksum":  # killed between the two renames
        (tmp_path / "step-00000002.pt.sha256").unlink()
    else:  # a file that is not a checkpoint at all, with a matching checksum
        latest.write_bytes(b"not a zip file")
        import hashlib
        (tmp_path / "step-00000002.pt.sha256").write_text(hashlib.sha256(b"not a zip file").hexdigest() + "\n")
    with pytest.warns(UserWarning, match=r"skipping checkpoint: .*step-00000002\.pt"):
        found = C.latest_valid(tmp_path)
        step, st = found.step, found.state
    assert step == 1 and st["data_step"] == 1
    with pytest.raises(CheckpointError, match="step-00000002.pt"):
        C.load_checkpoint(latest)


def test_checkpoints_none_of_which_verifies_are_an_error_naming_each(tmp_path):
    C.save_checkpoint(tmp_path, 1, state(1))
    C.save_checkpoint(tmp_path, 2, state(2))
    (tmp_path / "step-00000002.pt.sha256").unlink()
    (tmp_path / "step-00000001.pt").write_bytes(b"rot")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one error, no warnings beside it
        with pytest.raises(CheckpointError) as e:
            C.latest_valid(tmp_path)
    assert str(e.value) == (
        f"none of the checkpoints in {tmp_path} verifies (step-00000002.pt has no checksum file "
        "step-00000002.pt.sha256: it was not completely written; step-00000001.pt does not match its checksum in "
        "step-00000001.pt.sha256: the file is corrupt): there is nothing to continue the run from; put back a good "
        "checkpoint, or start the run over with overwrite = True, which deletes its history")


def test_no_checkpoints_and_missing_file(tmp_path):
    assert C.latest_valid(tmp_path / "nothing") is None
    with pytest.raises(CheckpointNotFoundError):
        C.load_checkpoint(tmp_path / "step-00000001.pt")


def test_leftover_temp_files_are_ignored(tmp_path):
    C.save_checkpoint(tmp_path, 3, state(3))
    (tmp_path / "step-00000004.pt.tmp123").write_bytes(b"half")  # a process SIGKILLed while writing
    assert C.latest_valid(tmp_path).step == 3


def test_disk_full_keeps_previous_checkpoint(tmp_path, monkeypatch):
    C.save_checkpoint(tmp_path, 1, state(1))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_save = torch.save

    def full_disk(obj, f):
        f.write(b"x" * 1000)  # part of the file got written...
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(C.torch, "save", full_disk)
    with pytest.raises(CheckpointError, match=r"No space left on device.*intact \(step-00000001\.pt\)"):
        C.save_checkpoint(tmp_path, 2, state(2), keep_last=1)
    monkeypatch.setattr(C.torch, "save", real_save)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temp file, old pair untouched
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to skip
        assert C.latest_valid(tmp_path).step == 1


def test_check_compatible_names_every_difference(tmp_path):
    saved = {"model_config": {"hidden_size": 32, "vocab_size": 1000}, "train": {"lr": 0.1, "seed": 1}, "data": "aa"}
    C.check_compatible(saved, dict(saved), tmp_path)  # identical: fine
    now = {"model_config": {"hidden_size": 64, "vocab_size": 1000}, "train": {"lr": 0.1, "seed": 2}, "data": "bb"}
    with pytest.raises(CheckpointError) as e:
        C.check_compatible(saved, now, tmp_path / "step-00000005.pt")
    msg = str(e.value)
    assert ("step-00000005.pt" in msg and "hidden_size: checkpoint 32, now 64" in msg
            and "seed: checkpoint 1, now 2" in msg)
    assert "training data" in msg and "vocab_size" not in msg


class Killed(BaseException):
    """The process dying at a point of a write (raised where the kill would land)."""


@pytest.mark.parametrize("first", [True, False])
def test_a_kill_at_any_rename_of_a_save_leaves_the_run_resumable(tmp_path, monkeypatch, first):
    """A save killed at each of its renames in turn (the checksum's, the checkpoint's): whatever the folder then
    holds, every checkpoint visible in it has its checksum and verifies, and the run continues from the newest one
    (the one being written if its rename happened, else the one before; a first checkpoint killed before its rename
    leaves nothing to continue from, which is a restart, not a refusal)."""
    import os

    real = os.replace
    for kill_at in range(2):  # the save makes two renames: checksum, then checkpoint
        folder = tmp_path / f"first-{first}-{kill_at}"
        if not first:
            C.save_checkpoint(folder, 2, {"model": {"w": torch.zeros(3)}})
        renames = []

        def dying(src, dst, kill_at=kill_at, renames=renames):
            if len(renames) == kill_at:
                raise Killed
            renames.append(Path(dst).name)
            return real(src, dst)

        monkeypatch.setattr(os, "replace", dying)
        with pytest.raises(Killed):
            C.save_checkpoint(folder, 4, {"model": {"w": torch.ones(3)}})
        monkeypatch.setattr(os, "replace", real)
        for step, path in C.list_checkpoints(folder):
            assert path.with_name(path.name + ".sha256").is_file(), (kill_at, path.name)
        found = C.latest_valid(folder)  # never "none of the checkpoints verifies"
        expected = None if first else 2
        assert (found.step if found else None) == expected, (first, kill_at, renames)
    # and the save that is not killed is the newest
    C.save_checkpoint(tmp_path / "whole", 4, {"model": {"w": torch.ones(3)}})
    assert C.latest_valid(tmp_path / "whole").step == 4
