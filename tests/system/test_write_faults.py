"""Faults while writing: a full disk (simulated: writes to chosen files fail with ENOSPC after a few bytes) and
SIGKILL in the middle of a write, for every command that writes. Each ends in one clear line (or, for a periodic
checkpoint or a metrics record, a one-line warning and training goes on), leaves no temporary behind, and leaves what
was there before intact; the leftovers of a killed write are removed at the next start."""

import builtins
import errno
import io
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from helpers import PYTHON, contents
from helpers.run_folders import convert, dead_pid, finetune, pretrain
from litebert.cli import main
from litebert.engine.metrics_log import read_metrics
from litebert.errors import WriteError
from litebert.files import atomic_write
from litebert.folders import read_marker

SRC = Path(__file__).resolve().parents[2] / "src"


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


class _FullDisk(io.RawIOBase):
    """A file whose writes fail with ENOSPC once ``room`` bytes are written (what a full disk does)."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, b):
        if len(b) > self.room:
            self.f.write(bytes(b[:self.room]))
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(b)
        return self.f.write(b)

    def writable(self):
        return True

    def flush(self):
        if not self.f.closed:
            self.f.flush()

    def close(self):
        self.f.close()
        super().close()

    def fileno(self):
        return self.f.fileno()

    def __getattr__(self, name):
        return getattr(self.f, name)


def full_disk(monkeypatch, when, room: int = 100) -> list:
    """Make writes to files whose path ``when(path)`` accepts fail after ``room`` bytes; returns the paths hit."""
    real_open = builtins.open
    hit = []

    def fake_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax") and when(Path(file)):
            hit.append(Path(file))
            raw = _FullDisk(real_open(file, mode.replace("t", "").replace("b", "") + "b"), room)
            if "b" in mode:
                return raw
            return io.TextIOWrapper(raw, encoding=kwargs.get("encoding") or "utf-8", newline=kwargs.get("newline"),
                                    write_through=True)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    return hit


def full_disk_safetensors(monkeypatch, when) -> list:
    """safetensors writes from Rust (no Python ``open``): fail as it does on a full disk, after half a file."""
    import safetensors.torch
    from safetensors import SafetensorError

    real = safetensors.torch.save_file
    hit = []

    def save_file(tensors, filename, metadata=None):
        if when(Path(filename)):
            hit.append(Path(filename))
            Path(filename).write_bytes(b"\0" * 64)
            raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                                  '"No space left on device" })')
        return real(tensors, filename, metadata=metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)
    return hit


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]


def one_line_error(capsys, argv, match: str) -> str:
    """``argv`` exits 2 with one error line (progress and info lines aside) and no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.replace("\r", "\n").splitlines() if ": error: " in line]
    assert "Traceback" not in err and len(errors) == 1 and match in errors[0], err
    return errors[0]


# --------------------------------------------------------------------------------------------------- atomic_write
def test_atomic_write_reports_wrapped_io_errors_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def torch_save(tmp):  # torch.save over a failing file raises RuntimeError("... unexpected pos ...")
        with _FullDisk(open(tmp, "wb"), 50) as f:
            torch.save({"x": torch.zeros(1000)}, f)

    def safetensors_save(tmp):
        from safetensors import SafetensorError

        tmp.write_bytes(b"half")
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
                              'space left on device" })')

    for writer in (torch_save, safetensors_save, b"x" * 10):
        if isinstance(writer, bytes):  # atomic_write's own open() on a full disk
            full_disk(monkeypatch, lambda p: p.name.startswith(".f.bin.tmp-"), room=3)
        with pytest.raises(WriteError, match=r"f\.bin: cannot write \(No space left on device\)"):
            atomic_write(target, writer)
        monkeypatch.undo()
        assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]

    def not_io(tmp):
        tmp.write_bytes(b"half")
        raise ValueError("a bug, not the disk")

    with pytest.raises(ValueError, match="a bug"):
        atomic_write(target, not_io)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


# ------------------------------------------------------------------------------------------------------ pretrain
def test_periodic_checkpoint_on_a_full_disk_warns_and_training_continues(tiny_setup, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    hit = full_disk(monkeypatch, lambda p: p.name.startswith(".step-00000002.pt.tmp-"))
    assert main(pretrain(tiny_setup, out)) == 0
    err = capsys.readouterr().err
    assert hit, "the fault was not injected"
    warning = [line for line in err.splitlines() if "step-00000002.pt" in line]
    assert len(warning) == 1 and warning[0].startswith("warning: could not save checkpoint")
    assert "No space left on device" in warning[0] and warning[0].endswith("training continues")
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000004.pt", "step-00000004.pt.sha256"]
    assert temporaries(out) == [] and read_marker(out)["complete"] is True
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4]


def test_final_checkpoint_and_final_model_on_a_full_disk_are_one_line_errors(tiny_setup, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    full_disk(monkeypatch, lambda p: p.name.startswith(".step-00000004.pt.tmp-"))
    one_line_error(capsys, pretrain(tiny_setup, out), "could not save checkpoint")
    assert temporaries(out) == [] and (out / "checkpoints" / "step-00000002.pt").is_file()
    assert read_marker(out)["complete"] is False
    monkeypatch.undo()
    # --resume continues from step 2; now the final model cannot be written
    hit = full_disk_safetensors(monkeypatch, lambda p: p.parent.name == "model")
    one_line_error(capsys, pretrain(tiny_setup, out, "--resume"), "model.safetensors: cannot write (No space left")
    assert hit and temporaries(out) == [] and read_marker(out)["complete"] is False
    monkeypatch.undo()
    assert main(pretrain(tiny_setup, out, "--resume")) == 0
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4] and read_marker(out)["complete"] is True


def test_metrics_append_on_a_full_disk_leaves_no_torn_line(tiny_setup, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    real_open = builtins.open
    calls = {"n": 0}

    def when(p):  # the third append to metrics.jsonl (step 3) fails half-way
        if p.name == "metrics.jsonl":
            calls["n"] += 1
            return calls["n"] == 3
        return False

    full_disk(monkeypatch, when, room=10)
    assert main(pretrain(tiny_setup, out)) == 0
    assert builtins.open is not real_open
    err = capsys.readouterr().err
    assert "warning: " in err and "cannot append the step 3 train record" in err
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 4]


def _kill_hook(folder: Path) -> dict:
    """An environment whose Python SIGKILLs itself after writing 2000 bytes of a file whose name contains
    $KILL_WRITING (a kill in the middle of a save)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text('''
import builtins, os, signal
target = os.environ.get("KILL_WRITING")
if target:
    real_open = builtins.open
    class Killer:
        def __init__(self, f):
            self.f, self.n = f, 0
        def write(self, b):
            self.n += len(b)
            if self.n > 2000:
                self.f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return self.f.write(b)
        def __getattr__(self, name):
            return getattr(self.f, name)
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.f.close()
    def fake_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and target in os.path.basename(str(file)) and "w" in mode:
            return Killer(f)
        return f
    builtins.open = fake_open
''')
    return {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{SRC}"}


def test_sigkill_during_a_checkpoint_save_then_resume_cleans_up(tiny_setup, tmp_path):
    out = tmp_path / "run"
    env = _kill_hook(tmp_path / "hook")
    argv = [PYTHON, "-m", "litebert.cli", *pretrain(tiny_setup, out, steps=6), "--threads", "1"]
    killed = subprocess.run(argv, env={**env, "KILL_WRITING": "step-00000004.pt.tmp"}, capture_output=True,
                            timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    left = temporaries(out)
    assert [p.name.split(".tmp-")[0] for p in left] == [".step-00000004.pt"]  # the torn write, under its temp name
    assert not (out / "checkpoints" / "step-00000004.pt").exists()
    resumed = subprocess.run(argv + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert temporaries(out) == [] and [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4, 5, 6]
    assert read_marker(out)["complete"] is True


# ------------------------------------------------------------------------------------------ the other writers
def test_finetune_on_a_full_disk(word_cycle_task, tmp_path, capsys, monkeypatch):
    out = tmp_path / "ft"
    hit = full_disk_safetensors(monkeypatch, lambda p: True)
    one_line_error(capsys, finetune(word_cycle_task, out), "model.safetensors: cannot write (No space left on device)")
    assert hit and temporaries(out) == []
    assert read_marker(out)["complete"] is False  # never mistaken for a finished model


@pytest.fixture(scope="module")
def finetuned(word_cycle_task, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "model"
    assert main(finetune(word_cycle_task, out)) == 0
    return out


@pytest.mark.parametrize("command", ["predict", "embed", "evaluate"])
def test_predict_embed_evaluate_outputs_on_a_full_disk(word_cycle_task, finetuned, tmp_path, capsys, monkeypatch,
                                                        command):
    _, data = word_cycle_task
    outdir = tmp_path / "outputs"
    outdir.mkdir()
    (outdir / "old.jsonl").write_text("kept\n")
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"text": f"a good film {i}"}) + "\n" for i in range(50)))
    argv = {"predict": ["predict", "--model", str(finetuned), "--input", str(inp), "--output",
                        str(outdir / "old.jsonl")],
            "embed": ["embed", "--model", str(finetuned), "--input", str(inp), "--output", str(outdir / "e.npy")],
            "evaluate": ["evaluate", "--model", str(finetuned), "--data", str(data / "dev.jsonl"), "--output",
                         str(outdir / "old.jsonl")]}[command]
    before = contents(outdir)
    hit = full_disk(monkeypatch, lambda p: p.parent == outdir)
    one_line_error(capsys, argv + ["--no-progress", "--overwrite"], "No space left on device")
    assert hit and contents(outdir) == before  # the old output intact, no temporary left


def test_tokenizer_train_on_a_full_disk(tmp_path, capsys, monkeypatch):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"line {i} of some text here and there\n" for i in range(200)))
    out = tmp_path / "tok"
    argv = ["tokenizer", "train", "--input", str(corpus), "--out", str(out), "--vocab-size", "40", "--threads", "1",
            "--quiet"]
    hit = full_disk(monkeypatch, lambda p: p.parent == out)
    one_line_error(capsys, argv, "No space left on device")
    assert hit and temporaries(tmp_path) == [] and read_marker(out).get("complete") is False
    monkeypatch.undo()
    # the corpus scratch file on a full disk
    full_disk(monkeypatch, lambda p: p.name == "corpus.txt" and ".train.tmp-" in p.parent.name)
    one_line_error(capsys, argv, "No space left on device")
    assert temporaries(tmp_path) == []
    monkeypatch.undo()
    assert main(argv) == 0 and read_marker(out)["complete"] is True  # an unfinished tokenizer is replaced


def test_convert_on_a_full_disk(tmp_path, capsys, monkeypatch):
    out = tmp_path / "model"
    hit = full_disk_safetensors(monkeypatch, lambda p: True)
    one_line_error(capsys, convert(out), "model.safetensors: cannot write (No space left on device)")
    assert hit and temporaries(tmp_path) == [] and read_marker(out)["complete"] is False
    monkeypatch.undo()
    assert main(convert(out)) == 0 and read_marker(out)["complete"] is True


def test_export_on_a_full_disk(tmp_path, capsys, monkeypatch):
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertModel

    model = tmp_path / "m"
    AlbertModel(AlbertConfig.from_preset("tiny")).save_pretrained(model)
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"old")
    real = torch.onnx.export

    def export(*args, **kwargs):
        Path(args[2]).write_bytes(b"half a graph")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch.onnx, "export", export)
    one_line_error(capsys, ["export", "onnx", "--model", str(model), "--out", str(onnx), "--no-verify",
                            "--overwrite"], "m.onnx: cannot write (No space left on device)")
    assert onnx.read_bytes() == b"old" and temporaries(tmp_path) == []
    monkeypatch.setattr(torch.onnx, "export", real)
    pid = dead_pid()
    (tmp_path / f".m.onnx.tmp-{pid}").write_bytes(b"killed export")
    assert main(["export", "onnx", "--model", str(model), "--out", str(onnx), "--no-verify", "--overwrite"]) == 0
    assert temporaries(tmp_path) == []


def test_leftovers_of_a_killed_output_write_are_removed_by_the_next_write(finetuned, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"text": "a good film"}) + "\n")
    out = tmp_path / "o.jsonl"
    running = tmp_path / ".o.jsonl.tmp-1"  # a write in progress (a process still running) is kept
    running.write_bytes(b"in progress")
    killed, other = tmp_path / f".o.jsonl.tmp-{dead_pid()}", tmp_path / f".other.jsonl.tmp-{dead_pid()}"
    killed.write_bytes(b"half")
    other.write_bytes(b"another file's")
    assert main(["predict", "--model", str(finetuned), "--input", str(inp), "--output", str(out),
                 "--no-progress"]) == 0
    assert not killed.exists() and other.exists() and running.exists() and out.is_file()
