"""The host never waits inside a step (`litebert.engine.readout`): counted on CPU runs of both loops.

`helpers.host_reads.HostReads` counts what would make a GPU run's host wait: reads of values computed from the
model's parameters or batches (``.item()``, ``bool()``, ``.tolist()``, ``.numpy()``), attributed to the optimizer
step they follow. Between two read points there must be none; at a read point, one (the interval's numbers, in one
copy). Every ``_local_scalar_dense`` is counted too (``scalars``), tainted or not: the loops' host-side bookkeeping
uses Python numbers, not tensors read one by one. Runs: pretraining (plain, accumulation, data workers, NaN steps
skipped, the plateau guard's check, evaluation and checkpoints at their points), fine-tuning (plain, fp16 loss
scaling with an overflow), and pretraining under torchrun with two CPU processes.
"""

from __future__ import annotations

import json
import subprocess
import warnings

import pytest
import torch

from helpers import PYTHON, REPO
from helpers.host_reads import HostReads
from helpers.nan_model import NaNModel
from helpers.tiny_setup import datasets, tiny_model_config
from litebert.heads import AlbertForPreTraining, AlbertForSequenceClassification
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.loop import train as pretrain_loop

pytestmark = pytest.mark.usefixtures("one_thread")


def pretraining(**kw) -> TrainConfig:
    base = dict(max_steps=13, batch_size=8, micro_batch=4, lr=5e-3, warmup_steps=2, seq_len=64, max_predictions=10,
                eval_every=0, eval_examples=16, save_every=0, keep_last=1, seed=3, read_every=4, on_plateau="off")
    return TrainConfig(**{**base, **kw})


def count_pretraining(paths, tmp_path, cfg: TrainConfig, monkeypatch, eval_data=False, model_class=None):
    tr, ev = datasets(paths)
    torch.manual_seed(0)
    m = (model_class or AlbertForPreTraining)(tiny_model_config())
    reads = HostReads(monkeypatch)
    try:
        with reads, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pretrain_loop(m, tr, ev if eval_data else None, cfg, tmp_path / "run", progress=False)
    finally:
        reads.close()
    return reads, result


def assert_reads_only_at(reads: HostReads, points: set[int], last: int, per_point: int = 1):
    """No read after any step but ``points``; ``per_point`` after each of them (the last step, where the run also
    ends, may read more: its checkpoint and model files); no scalar read of any tensor between them."""
    inside = {s: n for s, n in reads.reads.items() if s not in points and 0 < s < last}
    assert not inside, f"reads inside an interval: {inside} ({reads.report(set(inside))})"
    scalars = {s: n for s, n in reads.scalars.items() if s not in points and 0 < s < last}
    assert not scalars, f"scalar reads of host tensors inside an interval: {scalars}"
    at = {s: reads.reads[s] for s in points if s < last}
    assert all(n == per_point for n in at.values()), f"reads at the read points: {at} ({reads.report(set(at))})"
    assert reads.reads[last] >= 1


@pytest.mark.parametrize("kw, points", [
    (dict(), {4, 8, 12}),  # every read_every steps
    (dict(log_every=3), {6, 12}),  # read_every rounded up to a multiple of log_every: 6
    (dict(batch_size=16, micro_batch=4), {4, 8, 12}),  # 4 micro-batches per step
    (dict(data_workers=1), {4, 8, 12}),
    (dict(read_every=1), set(range(1, 13))),  # every step read: one read each
])
def test_pretraining_reads_only_at_the_read_points(tiny_setup, tmp_path, monkeypatch, kw, points):
    reads, result = count_pretraining(tiny_setup, tmp_path, pretraining(**kw), monkeypatch)
    assert result.step == 13
    assert_reads_only_at(reads, points, 13)


def test_evaluation_checkpoints_and_the_guard_read_only_at_their_steps(tiny_setup, tmp_path, monkeypatch):
    """Evaluation every 5 steps and checkpoints every 3 are read points of their own; the plateau guard's check at
    warmup 2 + 7 = step 9 too. Each reads what it needs there (the evaluation its sums, the guard its probe), and
    nothing runs between them."""
    cfg = pretraining(eval_every=5, save_every=3, on_plateau="warn", plateau_check_steps=7)
    reads, result = count_pretraining(tiny_setup, tmp_path, cfg, monkeypatch, eval_data=True)
    assert result.step == 13
    points = {3, 4, 5, 6, 8, 9, 10, 12}
    inside = {s: n for s, n in reads.reads.items() if s not in points and 0 < s < 13}
    assert not inside, f"reads inside an interval: {inside} ({reads.report(set(inside))})"
    assert all(reads.reads[s] == 1 for s in (3, 4, 6, 8, 12)), dict(reads.reads)  # the interval's numbers alone
    assert reads.reads[5] == reads.reads[10] > 1  # + the evaluation's sums
    assert reads.reads[9] > 1  # + the guard's probe


def test_skipped_steps_are_decided_on_the_device(tiny_setup, tmp_path, monkeypatch):
    """NaN losses at steps 2 and 6 (micro-batches 3 and 11 of 2 per step): skipped without a read inside the
    intervals, counted and warned about at the read."""
    NaNModel.calls, NaNModel.bad = 0, {3, 11}
    reads, result = count_pretraining(tiny_setup, tmp_path, pretraining(), monkeypatch, model_class=NaNModel)
    assert result.step == 13 and result.skipped_steps == 2
    assert_reads_only_at(reads, {4, 8, 12}, 13)


def test_too_many_bad_steps_stop_at_the_read(tiny_setup, tmp_path, monkeypatch):
    """Three non-finite steps in a row from step 2: the read at step 4 raises, naming step 4 (the third)."""
    from litebert.engine.step import TrainingError

    NaNModel.calls, NaNModel.bad = 0, set(range(3, 100))
    with pytest.raises(TrainingError, match=r"3 steps in a row had a non-finite loss or gradient \(last at step 4"):
        count_pretraining(tiny_setup, tmp_path, pretraining(max_bad_steps=3), monkeypatch, model_class=NaNModel)


# ------------------------------------------------------------------------------------------------- fine-tuning
def features(n=40):
    return [{"input_ids": [2] + [5 + (i * 7 + k) % 90 for k in range(3 + i % 5)] + [3],
             "token_type_ids": [0] * (5 + i % 5), "labels": i % 2} for i in range(n)]


def count_finetuning(tmp_path, monkeypatch, **kw):
    import litebert.finetuning.loop as trainer

    torch.manual_seed(0)
    model = AlbertForSequenceClassification(tiny_model_config(num_labels=2))
    reads = HostReads(monkeypatch)
    args = trainer.TrainArgs(**{**dict(lr=1e-3, batch_size=4, train_steps=13, progress=False, read_every=4,
                                       log_every=1, seed=1), **kw})
    try:
        with reads:
            result = trainer.train(model, features(), args, log=lambda _: None, out_dir=tmp_path / "ft")
    finally:
        reads.close()
    return reads, result


def test_finetuning_reads_only_at_the_read_points(tmp_path, monkeypatch):
    reads, result = count_finetuning(tmp_path, monkeypatch)
    assert result.steps == 13
    assert_reads_only_at(reads, {4, 8, 12}, 13)


def test_finetuning_evaluates_and_saves_at_read_points(tmp_path, monkeypatch):
    """Checkpoints every 3 steps: read points of their own; with accumulation (micro-batch 2 of 4)."""
    reads, result = count_finetuning(tmp_path, monkeypatch, save_every=3, micro_batch=2)
    assert_reads_only_at(reads, {3, 4, 6, 8, 9, 12}, 13)


def test_fp16_scaling_and_an_overflow_without_reads(tmp_path, monkeypatch):
    """fp16 loss scaling (CPU float16 autocast and GradScaler standing in for CUDA's), an overflowing step among
    them: the scaler's skip and its new scale stay on the device until the read."""
    import litebert.engine.runtime as runtime

    monkeypatch.setattr(runtime, "autocast_dtype", lambda precision, device: torch.float16)
    calls = []
    original = AlbertForSequenceClassification.forward

    def overflow(self, *a, **k):  # step 6's loss is inf: its gradients overflow
        calls.append(1)
        out = original(self, *a, **k)
        if len(calls) == 6:
            out.loss = out.loss * float("inf")
        return out

    monkeypatch.setattr(AlbertForSequenceClassification, "forward", overflow)
    reads, result = count_finetuning(tmp_path, monkeypatch)
    assert result.steps == 13
    assert_reads_only_at(reads, {4, 8, 12}, 13)
    train = [json.loads(x) for x in (tmp_path / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert [r["skipped_steps"] for r in train if r["split"] == "train"][4:7] == [0, 1, 1]


# ------------------------------------------------------------------------------------------------- torchrun
SCRIPT = r"""
import json, sys, warnings
sys.path.insert(0, {tests!r})
import pytest, torch
from helpers.host_reads import HostReads
from litebert import TrainConfig, pretrain

torch.set_num_threads(1)
cfg = TrainConfig(max_steps=13, batch_size=8, micro_batch=2, lr=5e-3, warmup_steps=2, seq_len=64,
                  max_predictions=10, eval_every=0, save_every=0, keep_last=1, seed=3, read_every=4,
                  on_plateau="off")
mp = pytest.MonkeyPatch()
reads = HostReads(mp)
with reads, warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = pretrain({store!r}, {out!r}, model="tiny", train=cfg, progress=False)
reads.close()
mp.undo()
rank = int(__import__("os").environ["RANK"])
json.dump({{"reads": dict(reads.reads), "scalars": dict(reads.scalars), "step": result.step,
           "where": [[s, w, n] for (s, w), n in reads.where.items()]}},
          open({counts!r} + f"/reads-{{rank}}.json", "w"))
"""


def test_two_processes_read_only_at_the_read_points(tiny_setup, tmp_path):
    """torchrun, 2 CPU processes (gloo): on each, the interval's losses, host counts and stop flags are summed in one
    all-reduce at the read points, and nothing is read between them."""
    counts = tmp_path / "counts"
    counts.mkdir()
    script = tmp_path / "count.py"
    script.write_text(SCRIPT.format(tests=str(REPO / "tests"), store=str(tiny_setup["store"]),
                                    out=str(tmp_path / "run"), counts=str(counts)))
    run = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    for rank in (0, 1):
        got = json.loads((counts / f"reads-{rank}.json").read_text())
        reads = {int(s): n for s, n in got["reads"].items()}
        scalars = {int(s): n for s, n in got["scalars"].items()}
        assert got["step"] == 13
        inside = {s: n for s, n in reads.items() if s not in (4, 8, 12) and 0 < s < 13}
        assert not inside, (rank, inside, got["where"])
        assert not {s: n for s, n in scalars.items() if s not in (4, 8, 12) and 0 < s < 13}, (rank, scalars)
        assert [reads.get(s) for s in (4, 8, 12)] == [1, 1, 1], (rank, reads)
