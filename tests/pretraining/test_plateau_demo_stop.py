"""The plateau guard in a real run of the demo's model at LAMB 0.01, a rate known to sit on the unigram plateau
(docs/pretraining.md): the guard stops the run at warmup + 100 steps, resumable, and says why."""

from helpers.demo_runs import demo_run
from litebert.engine.metrics_log import read_metrics


def test_guard_stops_the_demo_model_on_the_plateau_at_lamb_0_01(demo_stores, tmp_path, capsys):
    result = demo_run(demo_stores, tmp_path / "run", 0.01)
    err = capsys.readouterr().err
    assert result.stopped_on_plateau and result.interrupted and result.step == 200
    assert (tmp_path / "run" / "checkpoints" / "step-00000200.pt").is_file()  # ended cleanly, resumable
    [check] = read_metrics(tmp_path / "run", "guard")
    h1 = check["unigram_entropy"]
    assert check["plateau"] is True and h1 - 0.3 < check["mlm_loss"] < h1 + 0.3
    assert check["probe_top_share"] > 0.95 and check["probe_cosine"] > 0.95
    line = next(x for x in err.splitlines() if x.startswith("plateau guard: step 200"))
    # the advice: a quarter of the rate (0.0025, inside the 0.002-0.006 measured to learn), no bias correction
    assert "unigram plateau" in line and "--lr 0.0025" in line and "--bias-correction" not in line
    train = read_metrics(tmp_path / "run", "train")
    assert all(r["unigram_entropy"] == h1 for r in train)  # every train record carries H1 beside its MLM loss
