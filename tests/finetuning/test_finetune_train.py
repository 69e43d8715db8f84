"""`litebert finetune` as a training run: seeded head initialisation, micro-batches equal to one batch, two processes
equal to one, resume after a kill equal to an uninterrupted run, metrics files, precision flags.

The model is the "tiny" preset (randomly initialised), the tokenizer a 1,000-piece vocabulary trained here; the
data a separable two-class task written by the test. Weight comparisons read the saved ``model.safetensors``.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from helpers import flags
from helpers.separable_task import finetune, run_finetune, weights
from helpers.separable_task import records as _records
from litebert.cli import main
from litebert.folders import read_marker

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


def assert_bit_identical(a: dict, b: dict):
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, different


def initial_encoder(separable_task) -> dict[str, torch.Tensor]:
    return load_file(separable_task[0] / "model.safetensors")


# ------------------------------------------------------------------------------------------------------ seeds
def test_same_seed_gives_bit_identical_weights(separable_task, tmp_path):
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        assert main(finetune(separable_task, tmp_path / name, "--seed", seed, "--max-steps", "6", "--batch-size", "8",
                             "--eval-every", "3")) == 0
    a, b, c = weights(tmp_path / "a"), weights(tmp_path / "b"), weights(tmp_path / "c")
    assert_bit_identical(a, b)
    assert not torch.equal(a["classifier.weight"], c["classifier.weight"])  # the seed does reach the head


def test_head_initialisation_flows_from_the_seed(separable_task):
    """Building the head twice after the same seed gives the same weights; the CLI seeds right before building."""
    from litebert.tasks.presets import get_preset

    kind = get_preset("classify").kind
    torch.manual_seed(7)
    a = kind.new_model(separable_task[0], ["neg", "pos"]).state_dict()
    torch.rand(3)  # a different RNG position gives a different head: so the equality above is the seed's doing
    b = kind.new_model(separable_task[0], ["neg", "pos"]).state_dict()
    torch.manual_seed(7)
    c = kind.new_model(separable_task[0], ["neg", "pos"]).state_dict()
    assert_bit_identical(a, c)
    assert not torch.equal(a["classifier.weight"], b["classifier.weight"])


# ----------------------------------------------------------------------------------------------- accumulation
def test_micro_batches_equal_one_batch(separable_task, tmp_path, capsys):
    """--batch-size 32 --micro-batch 8 (4 accumulated micro-batches) against --batch-size 32, dropout 0: the same
    examples per step and each micro-batch's mean loss weighted 8/32, so only float summation order differs."""
    # 90 examples: every third step has 26, cut 7, 7, 6, 6 (weights 7/26 ... not 1/4)
    common = ("--max-steps", "5", "--batch-size", "32", "--dropout", "0", "--seed", "3", "--max-train-examples", "90")
    assert main(finetune(separable_task, tmp_path / "one", *common, dev=False)) == 0
    assert main(finetune(separable_task, tmp_path / "acc", *common, "--micro-batch", "8", dev=False)) == 0
    assert "5 steps of 32 = 8 x 4 x 1 process(es)" in capsys.readouterr().out
    one, acc = weights(tmp_path / "one"), weights(tmp_path / "acc")
    for k in one:
        torch.testing.assert_close(acc[k], one[k], rtol=0, atol=1e-5, msg=k)
    start = initial_encoder(separable_task)
    moved = max((one[k] - start[k]).abs().max().item() for k in one if k in start)
    assert moved > 1e-3  # it really trained: the comparison means something
    losses = [r["loss"] for r in _records(tmp_path / "one", "train")]
    assert [r["loss"] for r in _records(tmp_path / "acc", "train")] == pytest.approx(losses, rel=1e-5)


def test_token_losses_are_weighted_by_labelled_tokens():
    """Token classification averages over labelled tokens: micro-batches weigh by those, not by examples."""
    from litebert.finetuning.loss import example_weight

    assert example_weight({"input_ids": [2, 5, 6, 3], "labels": [-100, 1, -100, -100]}, None) == 1
    assert example_weight({"input_ids": [2, 5, 6, 3], "labels": [-100, 1, 0, -100]}, None) == 2
    assert example_weight({"input_ids": [2, 5, 3], "labels": 1}, None) == 1


def test_batch_that_does_not_split_is_a_one_line_error(separable_task, tmp_path, capsys):
    assert main(finetune(separable_task, tmp_path / "o", "--batch-size", "32", "--micro-batch", "5")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--batch-size 32 is not a multiple of --micro-batch 5 x 1 process(es)" in err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_two_processes_equal_one(separable_task, tmp_path):
    """torchrun --nproc_per_node 2 (gloo, CPU) with micro-batch 8 against one process with batch 16."""
    common = ["--max-steps", "4", "--batch-size", "16", "--dropout", "0", "--eval-every", "2"]
    one = subprocess.Popen([PYTHON, "-m", "litebert.cli", *finetune(separable_task, tmp_path / "one", *common)],
                           env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    two = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "litebert.cli",
                          *finetune(separable_task, tmp_path / "two", *common, "--micro-batch", "8")],
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "find_unused_parameters" not in two.stderr  # no unused-parameter search, no DDP warning from any rank
    out, err = one.communicate(timeout=300)
    assert one.returncode == 0, err[-3000:]
    assert "4 steps of 16 = 8 x 1 x 2 process(es)" in two.stdout and "4 steps of 16 = 16 x 1 x 1" in out
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-5, msg=k)
    assert [r["loss"] for r in _records(tmp_path / "two", "train")] == pytest.approx(
        [r["loss"] for r in _records(tmp_path / "one", "train")], rel=1e-5)
    # rank 0 alone evaluated, logged and wrote: one record per evaluation, the same decisions
    assert [r["step"] for r in _records(tmp_path / "two", "eval")] == [2, 4]
    ma, mb = (json.loads((tmp_path / x / "finetune.json").read_text()) for x in ("one", "two"))
    assert mb["best_step"] == ma["best_step"] and mb["dev_metrics"]["accuracy"] == ma["dev_metrics"]["accuracy"]


def test_two_processes_stop_early_together(separable_task, tmp_path):
    """Early stopping under torchrun: every process ends the run after the stopping evaluation (the last evaluation
    is not run again by one process alone, which would wait for the other forever)."""
    two = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "litebert.cli",
                          *finetune(separable_task, tmp_path / "two", "--max-steps", "40", "--batch-size", "16",
                                    "--micro-batch", "8", "--eval-every", "2", "--patience", "1", "--lr", "1e-9")],
                         env=ENV, capture_output=True, text=True, timeout=120)
    assert two.returncode == 0, two.stderr[-3000:]
    steps = [r["step"] for r in _records(tmp_path / "two", "eval")]
    assert "stopped early" in two.stdout and steps[-1] < 40 and steps == sorted(set(steps))


# ------------------------------------------------------------------------------------------------------ resume
def _without_timing(records):
    return [{k: v for k, v in r.items() if k not in ("examples_per_s", "elapsed_s")} for r in records]


RESUME = {"max_steps": 12, "batch_size": 8, "eval_every": 4, "log_every": 1, "seed": 5,
          "max_train_examples": 40}  # 5 batches an epoch: the run crosses epochs; dropout 0.1 in the head
RESUME_RUN = tuple(flags(RESUME))  # the same, as flags


def stopped(separable_task, out, n):
    """The `RESUME` run into ``out`` stopped after ``n`` steps, as on SIGTERM: a checkpoint saved, resumable (the
    command's exit status and line on a real SIGTERM: `test_sigterm_saves_and_resume_completes`)."""
    result = run_finetune(separable_task, out, RESUME, stop_after=n)
    assert result.interrupted and not result.complete and result.steps == n
    return result


def test_killed_run_resumes_to_the_same_result(separable_task, tmp_path, capsys):
    full = tmp_path / "full"
    assert run_finetune(separable_task, full, RESUME).complete
    assert not (full / "checkpoints").exists()  # deleted once the run is complete

    for stop_after in (6, 3):  # 6: a step after the evaluation at 4 (best metrics, patience state restored)
        part = tmp_path / f"part{stop_after}"
        stopped(separable_task, part, stop_after)
        assert read_marker(part)["complete"] is False and (part / "checkpoints").is_dir()
        capsys.readouterr()
        resumed = run_finetune(separable_task, part, RESUME, resume=True)
        assert resumed.complete and resumed.action == "resume"
        assert f"resuming at step {stop_after}" in capsys.readouterr().out
        assert_bit_identical(weights(part), weights(full))
        assert _without_timing(_records(part, "train")) == _without_timing(_records(full, "train"))
        assert _records(part, "eval") == _records(full, "eval")
        a, b = (json.loads((x / "finetune.json").read_text()) for x in (full, part))
        assert (a["best_step"], a["dev_metrics"], b["complete"]) == (b["best_step"], b["dev_metrics"], True)
        assert not (part / "checkpoints").exists() and read_marker(part)["complete"] is True

    # a finished run: said so, nothing done
    before = {p.name: p.stat().st_mtime_ns for p in part.iterdir()}
    capsys.readouterr()
    assert run_finetune(separable_task, part, RESUME, resume=True).action == "finished"
    assert "finished; nothing to do" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in part.iterdir()} == before


def test_resume_with_other_settings_is_refused(separable_task, tmp_path, capsys):
    out = tmp_path / "run"
    stopped(separable_task, out, 2)
    capsys.readouterr()
    listing = sorted(p.name for p in out.rglob("*"))
    other = list(RESUME_RUN)
    other[other.index("--seed") + 1] = "6"
    assert main(finetune(separable_task, out, *other, "--resume")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seed: checkpoint 5, now 6" in err
    assert main(finetune(separable_task, out, *RESUME_RUN, "--max-train-examples", "32", "--resume")) == 2
    assert "training data: checkpoint fingerprint" in capsys.readouterr().err
    assert sorted(p.name for p in out.rglob("*")) == listing  # nothing was written
    # without --resume the stopped run is not silently replaced
    assert main(finetune(separable_task, out, *RESUME_RUN)) == 2
    assert "(not finished); continue it with --resume, start again with --overwrite" in capsys.readouterr().err


def test_resume_without_a_checkpoint_starts_again(separable_task, tmp_path, capsys, monkeypatch):
    """A run killed before its first checkpoint: --resume says so and starts from step 0 (its files replaced)."""
    import litebert.finetuning.loop as trainer

    def killed(model, features, args, evaluate=None, metric=None, save=None, pad_id=0, log=print, **kw):
        save(model, 2, {"accuracy": 0.5})
        raise KeyboardInterrupt

    out = tmp_path / "run"
    monkeypatch.setattr(trainer, "train", killed)
    assert main(finetune(separable_task, out, *RESUME_RUN)) == 130
    monkeypatch.undo()
    capsys.readouterr()
    assert main(finetune(separable_task, out, *RESUME_RUN, "--resume")) == 0
    assert "holds no checkpoint yet; starting from step 0" in capsys.readouterr().err
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["complete"] is True and meta["best_step"] in (4, 8, 12)
    assert main(finetune(separable_task, tmp_path / "new", *RESUME_RUN, "--resume")) == 0
    assert "holds no run yet; starting a new one" in capsys.readouterr().err


def test_resume_refuses_unreadable_metrics_before_writing(separable_task, tmp_path, capsys, monkeypatch):
    """A stopped run whose metrics.jsonl has a line that is not a record: --resume names file:line before the run
    folder is reopened (as pretraining's resume does), not on rank 0 alone once training has begun (where the other
    processes of a torchrun would wait for it in their first step)."""
    import litebert.folders as folders

    out = tmp_path / "run"
    stopped(separable_task, out, 2)
    metrics = out / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text(lines[0] + "not a record\n" + "".join(lines[1:]))
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    begun = []
    monkeypatch.setattr(folders, "begin", lambda *a, **kw: begun.append(a))
    capsys.readouterr()
    assert main(finetune(separable_task, out, *RESUME_RUN, "--resume")) == 2
    assert begun == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{metrics}:2: not a metrics record" in err, err
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before


def test_sigterm_saves_and_resume_completes(separable_task, tmp_path, capsys):
    """A real SIGTERM: the step finishes, a checkpoint is saved, the process exits with a one-line message;
    --resume ends bit-identical to an uninterrupted run."""
    run = ("--max-steps", "400", "--batch-size", "4", "--eval-every", "200", "--log-every", "1", "--seed", "1",
           "--max-train-examples", "24")
    out = tmp_path / "killed"
    proc = subprocess.Popen([PYTHON, "-m", "litebert.cli", *finetune(separable_task, out, *run)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not ((out / "train.csv").exists()
                                          and len((out / "train.csv").read_text().splitlines()) > 5):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    stopped = [l for l in err.splitlines() if l.startswith("stopped at step")]
    assert len(stopped) == 1 and "(signal 15)" in stopped[0] and "Traceback" not in err
    step = int(stopped[0].split()[3])
    assert 0 < step < 400 and (out / "checkpoints" / f"step-{step:08d}.pt").is_file()
    assert main(finetune(separable_task, out, *run, "--resume")) == 0
    assert main(finetune(separable_task, tmp_path / "full", *run)) == 0
    assert_bit_identical(weights(out), weights(tmp_path / "full"))
    assert _without_timing(_records(out, "train")) == _without_timing(_records(tmp_path / "full", "train"))


# ----------------------------------------------------------------------------------------------------- metrics
def test_metrics_files_and_overwrite_clears_them(separable_task, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(finetune(separable_task, out, "--max-steps", "6", "--batch-size", "8", "--eval-every", "3",
                         "--log-every", "2", "--keep-checkpoints")) == 0
    err = capsys.readouterr().err
    train, evals = _records(out, "train"), _records(out, "eval")
    assert [r["step"] for r in train] == [2, 4, 6] and [r["step"] for r in evals] == [3, 6]
    assert all(r["examples"] == 8 and r["examples_per_s"] > 0 and r["grad_norm"] > 0 for r in train)
    # lr: linear decay to 0 at step 6 from 2e-3 (no warmup given: the preset's proportion of 6 steps is 0)
    assert [r["lr"] for r in train] == pytest.approx([2e-3 * (6 - s) / 6 for s in (1, 3, 5)])
    assert (out / "train.csv").read_text().splitlines()[0].startswith("step,loss,lr,grad_norm,examples_per_s")
    header = (out / "eval.csv").read_text().splitlines()[0].split(",")
    assert header[0] == "step" and "accuracy" in header
    try:
        import tensorboard  # noqa: F401
    except ImportError:  # report_to auto without TensorBoard: the metrics files, and no notice about it
        assert "TensorBoard" not in err and not (out / "tensorboard").exists()
    else:
        assert (out / "tensorboard").is_dir()
    assert (out / "checkpoints").is_dir()  # --keep-checkpoints
    assert main(finetune(separable_task, out, "--max-steps", "2", "--batch-size", "8", "--overwrite")) == 0
    assert not (out / "checkpoints").exists() and [r["step"] for r in _records(out, "eval")] == [2]


# --------------------------------------------------------------------------------------------------- precision
def test_bf16_autocast_on_cpu_trains(separable_task, tmp_path, capsys):
    out = tmp_path / "bf16"
    assert main(finetune(separable_task, out, "--max-steps", "3", "--batch-size", "8", "--precision", "bf16",
                         "--device", "cpu", "--log-every", "1")) == 0
    assert "on cpu in bfloat16" in capsys.readouterr().out
    assert all(np.isfinite(r["loss"]) for r in _records(out, "train"))
    assert weights(out)["classifier.weight"].dtype == torch.float32  # autocast: the weights stay fp32


def test_evaluation_runs_under_the_training_autocast(separable_task, tmp_path, monkeypatch):
    """The dev evaluation of a bf16 run runs in bf16 as training does: on a GPU the attention chosen for half precision
    (flash's varlen kernel) refuses fp32 inputs, so an evaluation outside the autocast fails there."""
    from litebert.model import AlbertModel

    seen, forward = [], AlbertModel.forward

    def recording(self, *args, **kwargs):
        seen.append((self.training, torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(AlbertModel, "forward", recording)
    assert main(finetune(separable_task, tmp_path / "o", "--max-steps", "2", "--batch-size", "8", "--eval-every", "1",
                         "--precision", "bf16", "--device", "cpu")) == 0
    evaluation = [s for s in seen if not s[0]]
    assert evaluation and any(s[0] for s in seen)
    assert all(s[1:] == (True, torch.bfloat16) for s in seen), sorted(set(seen))


def test_fp16_on_cpu_is_refused_before_writing(separable_task, tmp_path, capsys):
    assert main(finetune(separable_task, tmp_path / "o", "--precision", "fp16", "--device", "cpu")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--precision fp16 needs a GPU" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_finetune_on_cuda(separable_task, tmp_path, capsys, precision):
    out = tmp_path / precision
    assert main(finetune(separable_task, out, "--max-steps", "40", "--batch-size", "16", "--micro-batch", "8",
                         "--eval-every", "20", "--device", "cuda", "--precision", precision, "--log-every", "1")) == 0
    assert "on cuda" in capsys.readouterr().out
    train = _records(out, "train")
    assert all(np.isfinite(r["loss"]) for r in train) and train[-1]["loss"] < train[0]["loss"]
    if precision == "fp16":
        assert "loss_scale" in train[0]
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["complete"] is True and meta["dev_metrics"]["accuracy"] > 0.5


def test_fp16_loss_scaling_skips_an_overflowing_step(tmp_path, monkeypatch):
    """The fp16 path on CPU (torch's CPU GradScaler and float16 autocast stand in for CUDA's): a step whose gradients
    overflow is skipped (the optimizer applies nothing, decided on the device; the scale halves; counted in
    skipped_steps); the others are unscaled before clipping and applied."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    import litebert.engine.runtime as engine
    import litebert.finetuning.loop as trainer
    from helpers.tiny_setup import tiny_model_config
    from litebert.heads import AlbertForSequenceClassification

    monkeypatch.setattr(engine, "autocast_dtype", lambda precision, device: torch.float16)
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(tiny_model_config(num_labels=2))
    feats = [{"input_ids": [2] + [5 + (i * 7 + k) % 90 for k in range(3 + i % 5)] + [3],
              "token_type_ids": [0] * (5 + i % 5), "labels": i % 2} for i in range(16)]
    calls = []
    model.classifier.weight.register_hook(
        lambda g: (calls.append(1), torch.full_like(g, float("inf")) if len(calls) == 2 else g)[1])
    steps = []
    handle = register_optimizer_step_post_hook(lambda *a: steps.append(
        [p.detach().clone() for p in model.parameters()]))  # the weights after each step
    try:
        trainer.train(model, feats, trainer.TrainArgs(lr=1e-3, batch_size=4, train_steps=4, progress=False,
                                                      log_every=1), log=lambda _: None, out_dir=tmp_path)
    finally:
        handle.remove()
    records = _records(tmp_path, "train")
    assert [r["loss_scale"] for r in records] == [65536.0, 65536.0, 32768.0, 32768.0]  # torch's default init scale
    assert [r["skipped_steps"] for r in records] == [0, 1, 1, 1] and not np.isfinite(records[1]["grad_norm"])
    assert all(np.isfinite(r["grad_norm"]) and r["grad_norm"] < 1e3 for r in records[::2])  # unscaled norms
    assert len(steps) == 4
    assert all(torch.equal(a, b) for a, b in zip(steps[0], steps[1]))  # the skipped step changed nothing
    assert all(not any(torch.equal(a, b) for a, b in zip(x, y))
               for x, y in ((steps[1], steps[2]), (steps[2], steps[3])))  # the others changed every weight


def test_a_failed_checkpoint_write_warns_and_training_goes_on(separable_task, tmp_path, capsys, monkeypatch):
    """A full disk at a periodic checkpoint: one warning, the run goes on and completes (as pretraining's)."""
    import litebert.engine.step as engine
    from litebert.errors import CheckpointError

    real, failed = engine.save_checkpoint, []

    def full_disk(folder, step, state, keep_last=3):
        if not failed:
            failed.append(step)
            raise CheckpointError(f"could not save checkpoint {folder}/step-{step:08d}.pt: No space left on device")
        return real(folder, step, state, keep_last)

    monkeypatch.setattr(engine, "save_checkpoint", full_disk)
    out = tmp_path / "run"
    assert main(finetune(separable_task, out, "--max-steps", "6", "--batch-size", "8", "--eval-every", "2",
                         "--keep-checkpoints")) == 0
    err = capsys.readouterr().err
    assert failed == [2] and err.count("No space left on device; training continues") == 1
    assert sorted(p.name for p in (out / "checkpoints").glob("*.pt")) == ["step-00000004.pt", "step-00000006.pt"]


def test_batch_that_does_not_split_is_refused_before_the_data_is_read(separable_task, tmp_path, capsys):
    """The split is known from the config and the preset alone: a training file with a broken line is not reached."""
    model, data = separable_task
    broken = tmp_path / "data"
    broken.mkdir()
    (broken / "train.jsonl").write_text((data / "train.jsonl").read_text() + '{"text": "unfinished\n')
    assert main(["finetune", "classify", "--model", str(model), "--data", str(broken / "train.jsonl"),
                 "--out", str(tmp_path / "o"), "--batch-size", "32", "--micro-batch", "5", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--batch-size 32 is not a multiple of --micro-batch 5 x 1 process(es)" in err
    assert not (tmp_path / "o").exists()
    # the same run with a batch that splits reads the file and names its broken line
    assert main(["finetune", "classify", "--model", str(model), "--data", str(broken / "train.jsonl"),
                 "--out", str(tmp_path / "o"), "--batch-size", "32", "--micro-batch", "8", "--no-progress"]) == 2
    assert "train.jsonl:97" in capsys.readouterr().err
