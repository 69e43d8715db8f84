"""Batches built ahead by worker processes (`TrainConfig.data_workers`, `litebert.pretraining.feed`): the same batches
and
the same run as when the training process builds them, through epoch ends, resume and a step retried at a smaller
micro-batch."""

import numpy as np
import pytest
import torch

from helpers.tiny_setup import datasets, tiny_model_config
from litebert.data.pretraining import collate_pretraining
from litebert.engine.checkpoint import latest_valid
from litebert.engine.metrics_log import read_metrics
from litebert.engine.plan import local_plan
from litebert.errors import ConfigError
from litebert.heads import AlbertForPreTraining
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.feed import Feed
from litebert.pretraining.identity import run_identity
from litebert.pretraining.loop import train

pytestmark = pytest.mark.usefixtures("one_thread")


def cfg(**kw):
    base = dict(max_steps=10, batch_size=8, micro_batch=4, lr=5e-3, warmup_steps=2, seq_len=64, max_predictions=10,
                eval_every=0, eval_examples=16, save_every=5, keep_last=2, seed=3)
    return TrainConfig(**{**base, **kw})


def model(**config):
    torch.manual_seed(0)
    return AlbertForPreTraining(tiny_model_config(**config))


def starts_for(batch_size, rank=0, world=1):
    per = batch_size // world

    def starts(step, size):
        accum = per // size
        return [step * batch_size + rank * accum * size + j * size for j in range(accum)]
    return starts


def by_hand(data, n, c0, size):
    """The micro-batch of examples c0 .. c0 + size - 1, built here from the module docstring's numbering."""
    return collate_pretraining([data.example(c // n, c % n) for c in range(c0, c0 + size)])


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_workers_build_the_numbered_examples_across_epochs_and_sizes(tiny_setup):
    tr, _ = datasets(tiny_setup)
    n = tr.num_examples
    s0 = n // 16 - 2  # steps s0 .. s0 + 3 cross the end of the first epoch
    assert n % 16  # and one micro-batch holds examples of both epochs
    starts = starts_for(16)
    with Feed(tr, n, collate_pretraining, starts, workers=2) as feed:
        for step in range(s0, s0 + 4):
            got = list(feed.step(step, 8))
            assert len(got) == 2
            for batch, c0 in zip(got, (16 * step, 16 * step + 8)):
                assert same(batch, by_hand(tr, n, c0, 8))
        # a step left after its first micro-batch (out of memory), then run again at half the size: the workers
        # restart there, and the run goes on at the new size
        s = s0 + 4
        first = next(iter(feed.step(s, 8)))
        assert same(first, by_hand(tr, n, 16 * s, 8))
        got = list(feed.step(s, 4)) + list(feed.step(s + 1, 4))
        assert [g["input_ids"].shape[0] for g in got] == [4] * 8
        for batch, c0 in zip(got, range(16 * s, 16 * s + 32, 4)):
            assert same(batch, by_hand(tr, n, c0, 4))
        # a jump (a resumed run) restarts them too
        assert same(next(iter(feed.step(3, 4))), by_hand(tr, n, 48, 4))


def test_second_process_takes_its_slice(tiny_setup):
    tr, _ = datasets(tiny_setup)
    n = tr.num_examples
    with Feed(tr, n, collate_pretraining, starts_for(16, rank=1, world=2), workers=1) as feed:
        got = list(feed.step(3, 4))
    assert len(got) == 2
    assert same(got[0], by_hand(tr, n, 48 + 8, 4)) and same(got[1], by_hand(tr, n, 48 + 12, 4))


def test_a_run_with_workers_equals_one_without_and_resumes_exactly(tiny_setup, tmp_path):
    tr, ev = datasets(tiny_setup)
    ref = train(model(), tr, ev, cfg(), tmp_path / "ref", progress=False)
    out = tmp_path / "workers"
    first = train(model(), tr, ev, cfg(data_workers=2), out, progress=False, stop_after=6)
    assert first.interrupted and first.step == 6
    m = model()
    c = cfg(data_workers=1)
    plan = local_plan(c, m.config, identity=run_identity(m, c, tr), max_steps=c.max_steps,
                      checkpoint=latest_valid(out / "checkpoints"))
    second = train(m, tr, ev, c, out, plan=plan, progress=False)
    assert second.step == 10
    a, b = read_metrics(tmp_path / "ref"), read_metrics(out)
    assert [r["step"] for r in b] == list(range(1, 11))
    assert [r["loss"] for r in b] == [r["loss"] for r in a]  # bit-identical
    assert np.isclose(second.final_eval["mlm_loss"], ref.final_eval["mlm_loss"], rtol=0, atol=0)


def test_with_dropout_a_run_with_workers_equals_one_without(tiny_setup, tmp_path):
    # dropout draws from the global generator: the loader must not (its workers' seed comes from its own)
    tr, ev = datasets(tiny_setup)
    dropout = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    runs = {w: train(model(**dropout), tr, None, cfg(max_steps=4, data_workers=w), tmp_path / str(w), progress=False)
            for w in (0, 2)}
    a, b = read_metrics(tmp_path / "0"), read_metrics(tmp_path / "2")
    assert [r["step"] for r in b] == [1, 2, 3, 4] and runs[2].step == 4
    assert [r["loss"] for r in b] == [r["loss"] for r in a]  # bit-identical


def test_negative_workers_are_refused():
    with pytest.raises(ConfigError, match="data_workers"):
        TrainConfig(data_workers=-1)


def test_experiment_arms_take_the_workers():
    import argparse

    from litebert.experiments.cli import _configure_experiment
    from litebert.experiments.cli import settings as from_flags
    from litebert.experiments.runner import Settings, arm_training, arms

    parser = argparse.ArgumentParser()
    _configure_experiment(parser)
    s = from_flags(parser.parse_args(["sentence-objective", "--out", "x", "--steps", "5", "--data-workers", "3"]))
    assert s.data_workers == 3
    assert all(arm_training(a, s, 5).data_workers == 3 for a in arms(s))
    with pytest.raises(ConfigError, match="data_workers"):
        Settings("sentence-objective", data_workers=-1)
