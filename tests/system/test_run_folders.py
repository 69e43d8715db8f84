"""Run folders: every command that writes a folder only ever touches its own kind of output, a refused command
changes nothing on disk, `--resume` / `--overwrite` / completion markers behave as docs/pretraining.md describes."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from helpers import contents
from helpers.run_folders import convert, dead_pid, finetune, pretrain, run_pretrain
from litebert.cli import main
from litebert.engine.metrics_log import read_metrics
from litebert.folders import OWNER_FILE, read_marker

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


def refused(capsys, argv, folder: Path, match: str) -> None:
    """``argv`` exits 2 with one line naming the problem, and ``folder`` is byte for byte as it was."""
    before = contents(folder)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err, err
    assert contents(folder) == before


# ------------------------------------------------------------------------------------------------------ pretrain
def stopped(setup, out, n, **kw):
    """A run stopped after ``n`` steps, as on SIGTERM: a checkpoint saved, the folder left resumable."""
    result = run_pretrain(setup, out, stop_after=n, **kw)
    assert result.interrupted and not result.complete and result.step == n
    return result


def test_pretrain_refuses_foreign_and_overlapping_folders(tiny_setup, tmp_path, capsys):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("my notes")
    refused(capsys, pretrain(tiny_setup, foreign), foreign, "was not written by litebert")
    refused(capsys, pretrain(tiny_setup, foreign, "--overwrite"), foreign, "was not written by litebert")
    refused(capsys, pretrain(tiny_setup, foreign, "--resume"), foreign, "was not written by litebert")
    store = tiny_setup["store"]
    refused(capsys, pretrain(tiny_setup, store), store, "is the same path as --data")
    refused(capsys, pretrain(tiny_setup, store / "run"), store, "lies inside --data")
    refused(capsys, pretrain(tiny_setup, store.parent), store.parent, "holds --data")
    afile = tmp_path / "file"
    afile.write_text("x")
    refused(capsys, pretrain(tiny_setup, afile), tmp_path, "is a file")
    tok_folder = tmp_path / "tok"
    tok_folder.mkdir()
    (tok_folder / OWNER_FILE).write_text(json.dumps({"kind": "tokenizer"}))
    (tok_folder / "spiece.model").write_bytes(b"x")
    refused(capsys, pretrain(tiny_setup, tok_folder, "--overwrite"), tok_folder, "holds a litebert tokenizer")


def test_pretrain_run_folder_lifecycle(tiny_setup, tmp_path, capsys):
    out = tmp_path / "run"
    # resume on an absent folder starts a new run (job scripts can always pass it); stopped after 2 steps
    assert stopped(tiny_setup, out, 2, resume=True).action == "new"
    assert "holds no run yet; starting a new one" in capsys.readouterr().err
    assert read_marker(out) == {**read_marker(out), "kind": "pretraining-run", "complete": False, "step": 2}

    # a new run in a used folder is refused, and so is a resume with another setup: nothing changes
    refused(capsys, pretrain(tiny_setup, out), out, "already holds a pretraining run (not finished, step 2)")
    refused(capsys, pretrain(tiny_setup, out, "--resume", "--lr", "0.001"), out, "different setup")
    refused(capsys, pretrain(tiny_setup, out, "--resume", "--overwrite"), out, "give one of them")

    # a torn last line of metrics.jsonl (killed while appending) is dropped; the resumed run reads as one run
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"split": "train", "step": 3, "lo')
    assert main(pretrain(tiny_setup, out, "--resume")) == 0
    err = capsys.readouterr().err
    assert "metrics.jsonl:3: dropping an incomplete last line" in err
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4]
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3, 4]  # no duplicate, no torn line
    assert read_marker(out)["complete"] is True and read_marker(out)["step"] == 4

    # resuming a finished run says so and appends nothing
    before = contents(out)
    assert main(pretrain(tiny_setup, out, "--resume")) == 0
    assert "the run is finished (step 4)" in capsys.readouterr().err
    assert contents(out) == before

    # --overwrite refuses while the folder holds anything a run does not write; then starts again
    (out / "my-notes.txt").write_text("keep me")
    refused(capsys, pretrain(tiny_setup, out, "--overwrite"), out, "holds files a pretraining run does not write")
    (out / "my-notes.txt").unlink()
    old_loss = read_metrics(out)[0]["loss"]
    assert stopped(tiny_setup, out, 1, overwrite=True).action == "overwrite"
    assert [r["step"] for r in read_metrics(out)] == [1] and read_metrics(out)[0]["loss"] == old_loss
    assert not (out / "model").exists() and read_marker(out)["complete"] is False


def test_pretrain_resume_refusals_change_nothing(tiny_setup, tmp_path, capsys):
    out = tmp_path / "run"
    stopped(tiny_setup, out, 2)
    # a line in the middle of metrics.jsonl that is not a record: file:line, nothing changed
    good = (out / "metrics.jsonl").read_text()
    lines = good.splitlines()
    (out / "metrics.jsonl").write_text(lines[0] + "\n" + "garbage\n" + lines[1] + "\n")
    refused(capsys, pretrain(tiny_setup, out, "--resume"), out, "metrics.jsonl:2: not a metrics record")
    (out / "metrics.jsonl").write_text(good)


def test_pretrain_resume_refuses_when_no_checkpoint_verifies(tiny_setup, tmp_path, capsys):
    """Checkpoints that all fail to verify leave nothing to continue from, but the run has a history (metrics,
    checkpoints): --resume refuses, naming each checkpoint and its fault, rather than start again over it."""
    out = tmp_path / "run"
    stopped(tiny_setup, out, 4, steps=8)
    ckpts = out / "checkpoints"
    newest, older = ckpts / "step-00000004.pt", ckpts / "step-00000002.pt"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF  # bit rot
    newest.write_bytes(bytes(data))
    older.write_bytes(b"not a checkpoint")  # replaced, with a checksum that matches the new bytes
    digest = hashlib.sha256(b"not a checkpoint").hexdigest()
    (ckpts / "step-00000002.pt.sha256").write_text(f"{digest}  step-00000002.pt\n")
    refused(capsys, pretrain(tiny_setup, out, "--resume", steps=8), out,
            f"none of the checkpoints in {ckpts} verifies (step-00000004.pt does not match its checksum in "
            "step-00000004.pt.sha256: the file is corrupt; step-00000002.pt cannot be read (")
    refused(capsys, pretrain(tiny_setup, out, "--resume", steps=8), out, "start the run over with --overwrite")
    # killed while writing its first checkpoint (the file, not yet its checksum): refused as well
    (ckpts / "step-00000002.pt").unlink()
    (ckpts / "step-00000002.pt.sha256").unlink()
    (ckpts / "step-00000004.pt.sha256").unlink()
    refused(capsys, pretrain(tiny_setup, out, "--resume", steps=8), out,
            "(step-00000004.pt has no checksum file step-00000004.pt.sha256: it was not completely written)")
    assert main(pretrain(tiny_setup, out, "--overwrite", steps=8)) == 0  # as the message says
    assert [r["step"] for r in read_metrics(out)] == list(range(1, 9)) and read_marker(out)["complete"] is True


def test_pretrain_resume_before_the_first_checkpoint_starts_again(tiny_setup, tmp_path, capsys):
    out = tmp_path / "run"
    stopped(tiny_setup, out, 1)  # stopped before --save-every 2 ...
    for f in (out / "checkpoints").iterdir():  # ... as a kill would leave it: no checkpoint at all
        f.unlink()
    capsys.readouterr()
    assert main(pretrain(tiny_setup, out, "--resume")) == 0
    assert "holds no checkpoint yet; starting from step 0 (its metrics are rewritten)" in capsys.readouterr().err
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4] and read_marker(out)["complete"] is True


def test_pretrain_resume_before_the_first_checkpoint_says_restart(tiny_setup, tmp_path, capsys):
    """The result names what the run did: a resume that found no checkpoint restarted from step 0."""
    from litebert import TrainConfig
    from litebert import pretrain as run

    out = tmp_path / "run"
    train = TrainConfig(max_steps=2, batch_size=4, micro_batch=4, seq_len=64, max_predictions=10, lr=0.005,
                        save_every=0, seed=3, report_to="none")
    first = run(tiny_setup["store"], out, model="tiny", train=train, progress=False, stop_after=1)
    assert first.interrupted and first.action == "new"
    for f in (out / "checkpoints").iterdir():  # killed before its first checkpoint
        f.unlink()
    again = run(tiny_setup["store"], out, model="tiny", train=train, resume=True, progress=False)
    assert again.action == "restart" and again.complete and again.step == 2


def test_pretrain_checks_the_shape_before_hashing_the_stores(tiny_setup, tmp_path, capsys, monkeypatch):
    """A --seq-len the model cannot take is refused from config files alone, before any store file is hashed."""
    import litebert.data.store as store

    hashed = []
    monkeypatch.setattr(store, "sha256_file", lambda path, *a, **kw: hashed.append(path))
    out = tmp_path / "run"
    refused(capsys, pretrain(tiny_setup, out, "--seq-len", "256"), out,
            "--seq-len 256 exceeds the model's max_position_embeddings 128")
    assert hashed == []


def test_pretrain_start_removes_leftovers_of_killed_writes(tiny_setup, tmp_path, capsys):
    out = tmp_path / "run"
    stopped(tiny_setup, out, 2)
    pid = dead_pid()
    leftovers = [out / f".metrics.jsonl.tmp-{pid}", out / "checkpoints" / f".step-00000004.pt.tmp-{pid}",
                 out / "checkpoints" / "step-00000004.pt.tmp12345", out / "model" / f".model.safetensors.tmp-{pid}"]
    for p in leftovers:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a file")
    alive = out / f".notes.txt.tmp-{os.getpid()}"  # a write in progress (this process) is kept
    alive.write_bytes(b"in progress")
    assert main(pretrain(tiny_setup, out, "--resume")) == 0
    assert not any(p.exists() for p in leftovers) and alive.exists()
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4]


# ------------------------------------------------------------------------------------------------------ finetune
def test_finetune_folders(word_cycle_task, tmp_path, capsys, monkeypatch):
    model, data = word_cycle_task
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "a.txt").write_text("mine")
    refused(capsys, finetune(word_cycle_task, foreign, "--overwrite"), foreign, "was not written by litebert")
    refused(capsys, finetune(word_cycle_task, model), model.parent, "is the same path as --model")
    refused(capsys, finetune(word_cycle_task, data / "out"), data, "lies inside --data")

    out = tmp_path / "ft"
    assert main(finetune(word_cycle_task, out)) == 0
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["complete"] is True and read_marker(out)["kind"] == "fine-tuned-model"
    assert read_marker(out)["complete"] is True
    refused(capsys, finetune(word_cycle_task, out), out,
            "already holds a fine-tuned model (finished); pass --overwrite")
    (out / "keep.txt").write_text("mine")
    refused(capsys, finetune(word_cycle_task, out, "--overwrite"), out, "does not write (keep.txt)")
    (out / "keep.txt").unlink()
    assert main(finetune(word_cycle_task, out, "--overwrite")) == 0
    (out / OWNER_FILE).unlink()  # a folder written before folders carried a marker: replaced with --overwrite
    refused(capsys, finetune(word_cycle_task, out), out, "already holds a fine-tuned model")
    assert main(finetune(word_cycle_task, out, "--overwrite")) == 0 and read_marker(out)["complete"] is True

    # a run killed after its first best-so-far save: the folder says it is incomplete, evaluate/predict refuse
    import litebert.finetuning.loop as trainer

    real = trainer.train

    def killed(model, features, args, evaluate=None, metric=None, save=None, pad_id=0, log=print, **kw):
        save(model, 2, {"accuracy": 0.5})
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "train", killed)
    assert main(finetune(word_cycle_task, out, "--overwrite")) == 130
    monkeypatch.setattr(trainer, "train", real)
    assert json.loads((out / "finetune.json").read_text())["complete"] is False
    assert read_marker(out)["complete"] is False
    dev = str(data / "dev.jsonl")
    refused(capsys, ["evaluate", "--model", str(out), "--data", dev, "--no-progress"], out,
            "fine-tuning did not finish")
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"text": "a good film"}) + "\n")
    refused(capsys, ["predict", "--model", str(out), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"),
                     "--no-progress"], tmp_path, "--allow-incomplete")
    assert main(["evaluate", "--model", str(out), "--data", dev, "--no-progress", "--allow-incomplete"]) == 0


# ------------------------------------------------------------------------------------------ convert, tokenizer, export
def test_convert_folders(tmp_path, capsys):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "a.txt").write_text("mine")
    refused(capsys, convert(foreign, "--overwrite"), foreign, "was not written by litebert")
    out = tmp_path / "model"
    assert main(convert(out)) == 0
    assert read_marker(out)["kind"] == "model" and read_marker(out)["complete"] is True
    refused(capsys, convert(out), out, "already holds a litebert model; pass --overwrite")
    (out / "a.txt").write_text("mine")
    refused(capsys, convert(out, "--overwrite"), out, "does not write (a.txt)")
    (out / "a.txt").unlink()
    assert main(convert(out, "--overwrite")) == 0
    # a conversion that fails (bad config) leaves a new folder uncreated
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    argv = convert(tmp_path / "new")
    argv[argv.index("--config") + 1] = str(bad)
    capsys.readouterr()
    assert main(argv) == 2 and not (tmp_path / "new").exists()


def test_tokenizer_folders(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "c.txt").write_text("".join(f"line {i} of some text here and there\n" for i in range(200)))

    def tok(out, *extra):
        return ["tokenizer", "train", "--input", str(corpus), "--out", str(out), "--vocab-size", "40", "--threads",
                "1", "--quiet", *extra]

    afile = tmp_path / "file.txt"
    afile.write_text("not a folder")
    refused(capsys, tok(afile), tmp_path, "is a file; give a folder")
    refused(capsys, tok(corpus / "tok"), corpus, "lies inside --input")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "a.txt").write_text("mine")
    refused(capsys, tok(foreign, "--overwrite"), foreign, "was not written by litebert")
    out = tmp_path / "tok"
    pid = dead_pid()
    scratch = tmp_path / f".tok.train.tmp-{pid}"  # a killed run's scratch folder beside --out
    scratch.mkdir()
    (scratch / "corpus.txt").write_text("half")
    assert main(tok(out)) == 0
    assert not scratch.exists() and read_marker(out)["complete"] is True
    refused(capsys, tok(out), out, "already holds a litebert tokenizer; pass --overwrite")
    old_style = out / ".train-abc123xy"  # scratch of an earlier version, killed
    old_style.mkdir()
    (old_style / "corpus.txt").write_text("half")
    assert main(tok(out, "--overwrite")) == 0
    assert not old_style.exists()
    # bad input: the existing tokenizer is left as it was
    (corpus / "bad.txt").write_bytes(b"caf\xe9\n")
    refused(capsys, tok(out, "--overwrite"), out, "bad.txt")
    assert not list(tmp_path.glob(".tok.train.tmp-*"))


def test_export_target(tmp_path, capsys):
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertModel

    model = tmp_path / "m"
    AlbertModel(AlbertConfig.from_preset("tiny")).save_pretrained(model)

    def export(out, *extra):
        return ["export", "onnx", "--model", str(model), "--out", str(out), "--no-verify", *extra]

    refused(capsys, export(model), model, "is a folder")
    refused(capsys, export(model / "model.safetensors", "--overwrite"), model, "is not an .onnx file")
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"old")
    refused(capsys, export(onnx), tmp_path, "exists; pass --overwrite")
    assert main(export(onnx, "--overwrite")) == 0
    assert onnx.stat().st_size > 1000 and not list(tmp_path.glob(".m.onnx.tmp-*"))


def test_a_run_folder_without_marker_is_still_resumed(tiny_setup, tmp_path, capsys):
    """Run folders written before folders carried a marker: recognised by what they hold, then marked."""
    out = tmp_path / "run"
    stopped(tiny_setup, out, 2)
    (out / OWNER_FILE).unlink()
    refused(capsys, pretrain(tiny_setup, out), out, "already holds a pretraining run")
    assert main(pretrain(tiny_setup, out, "--resume")) == 0
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4] and read_marker(out)["complete"] is True
    (out / OWNER_FILE).unlink()
    assert stopped(tiny_setup, out, 1, overwrite=True).action == "overwrite"
    assert [r["step"] for r in read_metrics(out)] == [1] and not (out / "model").exists()
