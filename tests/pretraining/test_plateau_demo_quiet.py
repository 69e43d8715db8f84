"""The plateau guard in a real run of the demo's model at LAMB 0.005, a rate known to learn (docs/pretraining.md):
the guard checks at warmup + 100 steps and stays quiet."""

import json

from helpers.demo_runs import demo_run
from litebert.engine.metrics_log import read_metrics


def test_guard_stays_quiet_for_the_demo_model_at_lamb_0_005(demo_stores, tmp_path, capsys):
    result = demo_run(demo_stores, tmp_path / "run", 0.005)
    assert not result.stopped_on_plateau and result.plateau is None
    [check] = read_metrics(tmp_path / "run", "guard")
    assert check["plateau"] is False and check["probe_cosine"] < 0.9  # the states have come apart: context
    assert "unigram plateau" not in capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["on_plateau"] == "stop"
