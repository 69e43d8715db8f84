"""The official schedule (polynomial decay from step 0, linear warmup overriding it) against hand-computed values."""

import pytest
import torch

from litebert.errors import ConfigError
from litebert.optim import build_scheduler, lr_at

# The paper's recipe: peak 0.00176, 125k steps, 3125 warmup steps.
P, T, W = 0.00176, 125_000, 3125


@pytest.mark.parametrize("step, expected", [
    (0, 0.0),                             # the first update has lr 0 (TF global_step 0)
    (1, 0.00176 / 3125),                  # 5.632e-7
    (3124, 0.00176 * 3124 / 3125),        # last warmup step
    (3125, 0.00176 * 0.975),              # decay counted from 0: 1 - 3125/125000 = 0.975, not 1.0
    (62_500, 0.00088),                    # half-way: half the peak
    (124_999, 0.00176 / 125_000),
    (125_000, 0.0),
    (200_000, 0.0),                       # cycle=False: stays at end_lr
])
def test_paper_recipe_values(step, expected):
    assert lr_at(step, P, T, W) == pytest.approx(expected, rel=1e-12, abs=1e-18)


def test_power_two_and_no_warmup():
    assert lr_at(0, 1.0, 100) == 1.0                        # no warmup: full rate at step 0
    assert lr_at(50, 1.0, 100, power=2.0) == pytest.approx(0.25)
    assert lr_at(75, 2.0, 100, power=2.0) == pytest.approx(2.0 * 0.0625)
    assert lr_at(50, 1.0, 100, end_lr=0.1) == pytest.approx(0.9 * 0.5 + 0.1)


def test_warmup_longer_than_decay_point():
    # Warmup wins while active even where the decayed value would be lower: step 8 of 10 with 9 warmup steps.
    assert lr_at(8, 1.0, 10, 9) == pytest.approx(8 / 9)
    assert lr_at(9, 1.0, 10, 9) == pytest.approx(0.1)


def test_scheduler_drives_optimizer_groups():
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [w], "lr": 2.0}], lr=2.0)
    sched = build_scheduler(opt, total_steps=10, warmup_steps=4)
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0 * 0.6, 2.0 * 0.5])


def test_bad_arguments():
    with pytest.raises(ConfigError, match="total_steps"):
        lr_at(0, 1.0, 0)
    with pytest.raises(ConfigError, match="warmup_steps"):
        lr_at(0, 1.0, 10, -1)


# ------------------------------------------------------------------------------- fine-tuning's lr_scheduler_type
@pytest.mark.parametrize("name", ["linear", "cosine", "constant", "constant_with_warmup"])
@pytest.mark.parametrize("total, warmup", [(100, 10), (10, 0), (10, 10), (7, 3), (1, 0)])
def test_schedules_follow_transformers_get_scheduler(name, total, warmup):
    """Each HF-named schedule gives, for the update after step s, the rate of transformers' own ``get_scheduler``
    after s calls of its ``step()`` (past the end too)."""
    transformers = pytest.importorskip("transformers")
    from litebert.optim import schedule_at

    peak = 3e-5
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    hf = transformers.get_scheduler(name, opt, num_warmup_steps=warmup, num_training_steps=total)
    expected = []
    for _ in range(total + 3):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        hf.step()
    ours = [schedule_at(name, s, peak, total, warmup) for s in range(total + 3)]
    assert ours == pytest.approx(expected, rel=1e-12, abs=0)
    if name == "constant":  # HF's constant has no warmup whatever warmup says
        assert set(ours) == {peak}


def test_official_schedule_is_lr_at_and_differs_from_hf_linear_after_warmup():
    """"official" (the default) is `lr_at`: the decay counted from step 0, so at the end of warmup the rate is
    lr·(1 - W/T), where HF's "linear" is back at the peak; without warmup the two are the same curve."""
    from litebert.optim import schedule_at

    assert [schedule_at("official", s, 1.0, 10, 2) for s in range(12)] == [lr_at(s, 1.0, 10, 2) for s in range(12)]
    assert schedule_at("official", 2, 1.0, 10, 2) == pytest.approx(0.8)
    assert schedule_at("linear", 2, 1.0, 10, 2) == pytest.approx(1.0)
    assert ([schedule_at("official", s, 1.0, 10) for s in range(12)]
            == pytest.approx([schedule_at("linear", s, 1.0, 10) for s in range(12)]))


def test_an_unknown_schedule_is_refused_listing_the_choices():
    from litebert.optim import schedule_at

    with pytest.raises(ConfigError, match=r"^lr_scheduler_type = 'poly': choose one of 'official', 'linear', "
                                          r"'cosine', 'constant', 'constant_with_warmup'$"):
        schedule_at("poly", 0, 1.0, 10)
