"""Loss-curve regression: the `tiny` preset on a fixed small corpus for 50 steps against stored losses.

A change anywhere on the training path (model, masking, SOP pairs, LAMB, schedule, clipping, accumulation) moves
these numbers; the test fails and someone has to look. If the change is intended, regenerate the stored curve with
    .venv/bin/python tests/pretraining/test_train_regression.py --regenerate
and say why in the commit. The corpus, tokenizer settings and seeds are fixed (tests/helpers/tiny_setup.py).
"""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for --regenerate run as a script
from helpers.tiny_setup import build_tiny_setup, datasets, tiny_model_config  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "loss_curve_tiny.json"
SETTINGS = dict(max_steps=50, batch_size=16, micro_batch=8, lr=0.01, warmup_steps=5, seq_len=64, max_predictions=10,
                eval_every=25, eval_examples=64, save_every=0, seed=11)


def run_curve(folder: Path) -> dict:
    from litebert.engine.metrics_log import read_metrics
    from litebert.heads import AlbertForPreTraining
    from litebert.pretraining.config import TrainConfig
    from litebert.pretraining.loop import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same float reductions on every machine
    try:
        paths = build_tiny_setup(folder / "setup")
        tr, ev = datasets(paths)
        torch.manual_seed(0)
        model = AlbertForPreTraining(tiny_model_config())
        train(model, tr, ev, TrainConfig(**SETTINGS), folder / "run", progress=False)
    finally:
        torch.set_num_threads(threads)
    rows = read_metrics(folder / "run")
    return {"settings": SETTINGS, "loss": [r["loss"] for r in rows], "mlm_loss": [r["mlm_loss"] for r in rows],
            "sop_loss": [r["sop_loss"] for r in rows],
            "eval": [{k: r[k] for k in ("step", "mlm_loss", "mlm_accuracy", "sop_accuracy")}
                     for r in read_metrics(folder / "run", "eval")]}


def test_tiny_loss_curve_matches_stored(tmp_path):
    expected = json.loads(FIXTURE.read_text())
    assert expected["settings"] == SETTINGS, "settings changed: regenerate the stored curve"
    got = run_curve(tmp_path)
    assert len(got["loss"]) == 50
    # Tolerance: float reduction order may differ across CPUs/BLAS builds; a real change moves losses by far more.
    assert got["loss"] == pytest.approx(expected["loss"], rel=2e-3)
    assert got["mlm_loss"] == pytest.approx(expected["mlm_loss"], rel=2e-3)
    assert got["sop_loss"] == pytest.approx(expected["sop_loss"], rel=2e-3, abs=2e-3)
    assert [e["step"] for e in got["eval"]] == [0, 25, 50]
    # sanity of the stored curve itself: training reduces the MLM loss well below its start (~log 1000 = 6.9)
    assert expected["mlm_loss"][0] > 6.5 and min(expected["mlm_loss"][-5:]) < expected["mlm_loss"][0] - 1.0


if __name__ == "__main__" and "--regenerate" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        curve = run_curve(Path(d))
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(curve, indent=1) + "\n")
    print(f"wrote {FIXTURE}: loss {curve['loss'][0]:.3f} -> {curve['loss'][-1]:.3f}; eval {curve['eval']}")
