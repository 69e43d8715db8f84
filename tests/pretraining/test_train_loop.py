"""The pretraining loop in one process: exact resume after SIGTERM, NaN handling, resume checks, schedule, eval."""

import math
import os
import signal
import warnings

import numpy as np
import pytest
import torch

from helpers.nan_model import NaNModel
from helpers.tiny_setup import datasets, tiny_model_config
from litebert.engine.checkpoint import check_compatible, latest_valid, list_checkpoints
from litebert.engine.metrics_log import read_metrics
from litebert.engine.plan import local_plan
from litebert.engine.runtime import Runtime
from litebert.engine.step import TrainingError
from litebert.errors import CheckpointError, ConfigError
from litebert.heads import AlbertForPreTraining
from litebert.optim import lr_at
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.identity import run_identity
from litebert.pretraining.loop import train


@pytest.fixture(scope="module")
def setup(tiny_setup):
    paths = tiny_setup
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield paths
    torch.set_num_threads(threads)


def cfg(**kw):
    base = dict(max_steps=12, batch_size=8, micro_batch=4, lr=5e-3, warmup_steps=3, seq_len=64, max_predictions=10,
                eval_every=0, eval_examples=16, save_every=4, keep_last=2, seed=3)
    return TrainConfig(**{**base, **kw})


def model(seed=0, **overrides):
    torch.manual_seed(seed)
    # dropout on (the tiny preset has none) so that the RNG state must be restored for resume to be exact
    return AlbertForPreTraining(tiny_model_config(hidden_dropout_prob=0.1, **overrides))


def resumed(m, data, c, out):
    """A resumed run's plan (as `pretrain` makes it): the newest checkpoint that verifies, checked to belong to this
    run."""
    found = latest_valid(out / "checkpoints")
    identity = run_identity(m, c, data)
    check_compatible(found.state, identity, found.path)
    return local_plan(c, m.config, identity=identity, max_steps=c.max_steps, checkpoint=found)


class SignalAt:
    """Wraps a dataset; sends SIGTERM to this process when example ``at`` of the run is fetched."""

    def __init__(self, ds, at):
        self.ds, self.at, self.count = ds, at, 0
        self.num_examples = ds.num_examples

    def __getattr__(self, name):  # store, settings: the same data fingerprint as the wrapped dataset
        return getattr(self.ds, name)

    def example(self, epoch, index):
        self.count += 1
        if self.count == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return self.ds.example(epoch, index)


def test_sigterm_checkpoint_then_resume_is_exact(setup, tmp_path):
    tr, ev = datasets(setup)
    ref = train(model(), tr, ev, cfg(), tmp_path / "ref", progress=False)
    # SIGTERM arrives while step 7's batch is loaded (8 examples per step): the step completes, a checkpoint is
    # written, the call returns.
    out = tmp_path / "run"
    first = train(model(), SignalAt(tr, 6 * 8 + 3), ev, cfg(), out, progress=False)
    assert first.interrupted and first.signal == signal.SIGTERM and first.step == 7
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [4, 7]  # keep_last=2
    # resume in a fresh model with different initial weights: everything must come from the checkpoint
    m = model(seed=99)
    second = train(m, tr, ev, cfg(), out, plan=resumed(m, tr, cfg(), out), progress=False)
    assert second.step == 12 and not second.interrupted
    a, b = read_metrics(tmp_path / "ref"), read_metrics(out)
    assert [r["step"] for r in b] == list(range(1, 13))
    assert [r["loss"] for r in b] == [r["loss"] for r in a]  # bit-identical, not merely close
    assert second.final_eval == ref.final_eval
    assert len(read_metrics(out, "eval")) == 2  # step 0 and the end, no duplicates after resume


def test_logged_lr_follows_official_schedule(setup, tmp_path):
    tr, _ = datasets(setup)
    train(model(), tr, None, cfg(max_steps=6, warmup_steps=2, lr=0.01, save_every=0), tmp_path, progress=False)
    lrs = [r["lr"] for r in read_metrics(tmp_path)]
    # step t uses lr_at(t-1): 0, 0.005 (warmup), then 0.01 * (1 - t/6) from t = 2 on
    assert lrs == pytest.approx([0.0, 0.005, 0.01 * 4 / 6, 0.01 * 3 / 6, 0.01 * 2 / 6, 0.01 / 6])
    assert lrs == pytest.approx([lr_at(s, 0.01, 6, 2) for s in range(6)])


def test_eval_metrics_are_official_weighted_means(setup, tmp_path):
    """Eval = weighted MLM mean over real predictions, SOP mean over sequences: recompute by hand for an untrained
    model and compare."""
    from litebert.data.pretraining import collate_pretraining
    from litebert.engine import distributed as D
    from litebert.pretraining.loop import evaluate

    _, ev = datasets(setup)
    m = model().eval()
    c = cfg(eval_examples=10, micro_batch=4)
    got = evaluate(m, ev, collate_pretraining, c, Runtime(D.Distributed(), None, "sdpa"))
    nll, correct, weight, sop_nll, sop_ok = [], [], [], [], []
    with torch.no_grad():
        for i in range(10):
            b = collate_pretraining([ev.example(0, i)])
            o = m(**b)
            lp = torch.log_softmax(o.prediction_logits[0], -1)
            for p, y in zip(range(b["mlm_ids"].shape[1]), b["mlm_ids"][0]):
                nll.append(-lp[p, y].item())
                correct.append(float(lp[p].argmax() == y))
            weight += [1.0] * b["mlm_ids"].shape[1]
            s = torch.log_softmax(o.sop_logits[0], -1)
            y = b["sentence_order_label"][0]
            sop_nll.append(-s[y].item())
            sop_ok.append(float(s.argmax() == y))
    assert got["examples"] == 10
    assert got["mlm_loss"] == pytest.approx(np.mean(nll), rel=1e-5)
    assert got["mlm_accuracy"] == pytest.approx(np.mean(correct))
    assert got["sop_loss"] == pytest.approx(np.mean(sop_nll), rel=1e-5)
    assert got["sop_accuracy"] == pytest.approx(np.mean(sop_ok))
    assert got["mlm_loss"] == pytest.approx(math.log(1000), rel=0.1)  # untrained: near log(vocab)


def test_nan_steps_are_skipped_and_counted(setup, tmp_path):
    tr, _ = datasets(setup)
    torch.manual_seed(0)
    m = NaNModel(tiny_model_config())
    NaNModel.calls, NaNModel.bad = 0, {3, 7}  # micro-batch 3 (step 2) and 7 (step 4) of 2 per step
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        summary = train(m, tr, None, cfg(max_steps=5, save_every=0), tmp_path, progress=False)
    assert summary.skipped_steps == 2 and summary.step == 5
    assert sum("non-finite" in str(x.message) for x in w) == 2
    assert all(torch.isfinite(v).all() for v in m.state_dict().values())
    assert any(not torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert read_metrics(tmp_path)[-1]["skipped_steps"] == 2


def test_nan_in_a_row_stops_with_clear_error(setup, tmp_path):
    tr, _ = datasets(setup)
    torch.manual_seed(0)
    m = NaNModel(tiny_model_config())
    NaNModel.calls, NaNModel.bad = 0, set(range(3, 100))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TrainingError, match=r"3 steps in a row had a non-finite loss"):
            train(m, tr, None, cfg(max_steps=8, max_bad_steps=3, save_every=0), tmp_path, progress=False)


def test_resume_with_different_config_or_data_is_refused(setup, tmp_path):
    tr, _ = datasets(setup)
    train(model(), tr, None, cfg(max_steps=4), tmp_path, progress=False)
    with pytest.raises(CheckpointError, match=r"lr: checkpoint 0.005, now 0.001"):
        resumed(model(), tr, cfg(max_steps=4, lr=1e-3), tmp_path)
    with pytest.raises(CheckpointError, match=r"model config intermediate_size: checkpoint 64, now 96"):
        resumed(model(intermediate_size=96), tr, cfg(max_steps=4), tmp_path)
    other, _ = datasets(setup, seed=8)  # same store, other masking seed -> other examples
    with pytest.raises(CheckpointError, match=r"training data: checkpoint fingerprint"):
        resumed(model(), other, cfg(max_steps=4), tmp_path)


def test_global_batch_must_split_evenly():
    with pytest.raises(ConfigError, match=r"TrainConfig.batch_size = 10 is not a multiple of TrainConfig.micro_batch "
                                          r"= 4 x 1 process\(es\) = 4"):
        cfg(batch_size=10).split(1)
    assert cfg(batch_size=4096, micro_batch=32).split(8).accumulation == 16  # the paper's batch on 8 devices


def test_gradient_checkpointing_and_adamw_paths(setup, tmp_path):
    """Activation checkpointing recomputes the same forward: identical losses (no dropout in the tiny preset)."""
    tr, _ = datasets(setup)
    runs = {}
    for name, kw in {"plain": {}, "ckpt": {"gradient_checkpointing": True}, "adamw": {"optimizer": "adamw"}}.items():
        torch.manual_seed(0)
        m = AlbertForPreTraining(tiny_model_config())
        train(m, tr, None, cfg(max_steps=3, save_every=0, **kw), tmp_path / name, progress=False)
        runs[name] = [r["loss"] for r in read_metrics(tmp_path / name)]
    assert runs["ckpt"] == pytest.approx(runs["plain"], rel=1e-6)
    assert runs["adamw"][0] == runs["plain"][0] and runs["adamw"][2] != runs["plain"][2]


def test_fp16_on_cpu_is_refused(setup, tmp_path):
    tr, _ = datasets(setup)
    with pytest.raises(ConfigError, match="fp16'? needs a GPU"):
        train(model(), tr, None, cfg(precision="fp16"), tmp_path, progress=False)


def test_time_limit_ends_like_a_finished_run(setup, tmp_path):
    tr, ev = datasets(setup)
    summary = train(model(), tr, ev, cfg(max_steps=50), tmp_path, progress=False, time_limit=0.0)
    assert summary.time_limited and not summary.interrupted and summary.step == 1
    assert summary.final_eval is not None and (tmp_path / "model" / "model.safetensors").exists()
    assert [s for s, _ in list_checkpoints(tmp_path / "checkpoints")] == [1]


def test_compiled_run_matches_eager_and_saves_plain_checkpoints(setup, tmp_path):
    """`compile=True` (`--compile`): inductor's fused kernels give the same losses as eager (float rounding only), and
    checkpoints and the final model keep the plain parameter names (they load into an uncompiled model)."""
    import shutil

    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        pytest.skip("torch.compile on CPU needs a C++ compiler")
    tr, _ = datasets(setup)
    runs = {}
    for name, kw in {"eager": {}, "compiled": {"compile": True}}.items():
        torch.manual_seed(0)
        m = AlbertForPreTraining(tiny_model_config())
        train(m, tr, None, cfg(max_steps=3, save_every=3, **kw), tmp_path / name, progress=False)
        runs[name] = [r["loss"] for r in read_metrics(tmp_path / name)]
    assert len(runs["compiled"]) == 3
    assert runs["compiled"] == pytest.approx(runs["eager"], rel=1e-4)
    reloaded = AlbertForPreTraining.from_pretrained(tmp_path / "compiled" / "model", strict=True)
    assert not any("_orig_mod" in k for k in reloaded.state_dict())


def test_compile_without_a_cpp_compiler_is_a_clear_error(setup, tmp_path, monkeypatch):
    import shutil

    tr, _ = datasets(setup)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="C\\+\\+ compiler"):
        train(model(), tr, None, cfg(compile=True), tmp_path, progress=False)


def test_pretrain_refuses_compile_without_a_compiler_before_writing(setup, tmp_path, monkeypatch):
    """`litebert.pretrain` checks everything before its first write: a --compile the machine cannot honour leaves
    no run folder behind."""
    import shutil

    from litebert import pretrain

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="C\\+\\+ compiler"):
        pretrain(setup["store"], tmp_path / "run", model=tiny_model_config(), train=cfg(compile=True),
                 device="cpu", progress=False)
    assert not (tmp_path / "run").exists()
