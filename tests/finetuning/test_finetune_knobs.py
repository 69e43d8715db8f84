"""The fine-tuning knobs an HF user sets on TrainingArguments, as `litebert finetune` flags and `FinetuneConfig`
fields under HF's names, each checked against a reference (issue 58, item 4): weight decay and LAMB by what their
first step must do, the schedule by transformers' ``get_scheduler``, label smoothing and class weights by torch's
``cross_entropy`` given as the custom loss, ``compute_loss`` by the model's own loss, per-epoch evaluation and the
checkpoint limit by counting; each recorded in finetune.json, kept on resume, refused before --out is written.

The model is the "tiny" preset and the data the separable two-class task (``helpers.separable_task``)."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from helpers.separable_task import LR, finetune, records, run_finetune, weights
from litebert.cli import main
from litebert.errors import CheckpointError, ConfigError
from litebert.optim import is_excluded

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend

ONE_STEP = {"max_steps": 1, "batch_size": 16, "dropout": 0.0, "lr_scheduler_type": "constant", "seed": 5}


def moved(task, out) -> tuple[dict, dict]:
    """The encoder's weights before (the model folder's) and after the run in ``out``, by name."""
    start = load_file(task[0] / "model.safetensors")
    end = weights(out)
    common = [k for k in end if k in start and k.startswith("albert.")]
    assert len(common) > 10
    return {k: start[k] for k in common}, {k: end[k] for k in common}


def test_weight_decay_moves_each_decayed_weight_by_lr_times_decay(separable_task, tmp_path):
    """AdamW's decoupled decay: one step from the same weights (the same gradient, so the same Adam direction) with
    decay 0.5 and 0 differ by exactly -lr·0.5·w0 in every decayed tensor, and not at all in LayerNorms and biases."""
    run_finetune(separable_task, tmp_path / "d0", {**ONE_STEP, "weight_decay": 0.0})
    run_finetune(separable_task, tmp_path / "d5", {**ONE_STEP, "weight_decay": 0.5})
    start, d0 = moved(separable_task, tmp_path / "d0")
    _, d5 = moved(separable_task, tmp_path / "d5")
    for k in start:
        expected = torch.zeros_like(start[k]) if is_excluded(k) else -LR * 0.5 * start[k]
        torch.testing.assert_close(d5[k] - d0[k], expected, rtol=0, atol=1e-8, msg=k)
    meta = json.loads((tmp_path / "d5" / "finetune.json").read_text())["train"]
    assert meta["weight_decay"] == 0.5


def test_lamb_first_step_moves_each_decayed_tensor_by_lr_times_its_norm(separable_task, tmp_path):
    """LAMB's layer-wise trust ratio ‖w‖/‖u‖ (You et al. 2020, Alg. 2) makes the first update of every adapted
    tensor exactly lr·‖w0‖ long; AdamW's is not (so the check tells the two optimizers apart)."""
    ratios = {}
    for optim in ("lamb", "adamw"):
        run_finetune(separable_task, tmp_path / optim, {**ONE_STEP, "optim": optim})
        start, end = moved(separable_task, tmp_path / optim)
        ratios[optim] = {k: ((end[k] - start[k]).norm() / start[k].norm()).item() for k in start
                         if not is_excluded(k) and start[k].norm() > 0}
        meta = json.loads((tmp_path / optim / "finetune.json").read_text())["train"]
        assert meta["optim"] == optim
    assert ratios["lamb"] and all(r == pytest.approx(LR, rel=1e-4) for r in ratios["lamb"].values())
    assert not all(r == pytest.approx(LR, rel=1e-2) for r in ratios["adamw"].values())


def test_compute_loss_equal_to_the_models_own_loss_reproduces_the_default_run(separable_task, tmp_path):
    calls = []

    def cross_entropy(outputs, labels):
        calls.append(labels.shape)
        return F.cross_entropy(outputs.logits, labels)

    settings = {"max_steps": 3, "batch_size": 16, "seed": 2}
    run_finetune(separable_task, tmp_path / "own", settings)
    run_finetune(separable_task, tmp_path / "custom", settings, compute_loss=cross_entropy)
    assert len(calls) == 3 and calls[0] == (16,)
    a, b = weights(tmp_path / "own"), weights(tmp_path / "custom")
    assert all(torch.equal(a[k], b[k]) for k in a)
    meta = json.loads((tmp_path / "custom" / "finetune.json").read_text())["train"]
    assert meta["compute_loss"].endswith("cross_entropy")

    def doubled(outputs, labels):
        return 2 * F.cross_entropy(outputs.logits, labels)

    run_finetune(separable_task, tmp_path / "doubled", {**settings, "max_steps": 1}, compute_loss=doubled)
    run_finetune(separable_task, tmp_path / "once", {**settings, "max_steps": 1})
    [twice], [once] = records(tmp_path / "doubled", "train"), records(tmp_path / "once", "train")
    assert twice["loss"] == pytest.approx(2 * once["loss"], rel=1e-6)  # the loss reported is the one trained


def test_label_smoothing_and_class_weights_train_as_torchs_cross_entropy(separable_task, tmp_path):
    """The knobs against ``cross_entropy(label_smoothing=0.1, weight=[1, 3])`` given as the custom loss: the same
    weights after 3 steps."""
    settings = {"max_steps": 3, "batch_size": 16, "seed": 4}
    run_finetune(separable_task, tmp_path / "knobs", {**settings, "label_smoothing_factor": 0.1,
                                                      "class_weights": [1.0, 3.0]})
    w = torch.tensor([1.0, 3.0])
    run_finetune(separable_task, tmp_path / "torch", settings,
                 compute_loss=lambda o, y: F.cross_entropy(o.logits, y, weight=w, label_smoothing=0.1))
    run_finetune(separable_task, tmp_path / "plain", settings)
    a, b, plain = weights(tmp_path / "knobs"), weights(tmp_path / "torch"), weights(tmp_path / "plain")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-7, msg=k)
    assert not torch.equal(a["classifier.weight"], plain["classifier.weight"])
    meta = json.loads((tmp_path / "knobs" / "finetune.json").read_text())["train"]
    assert (meta["label_smoothing_factor"], meta["class_weights"]) == (0.1, [1.0, 3.0])


def test_class_weighted_micro_batches_equal_one_batch(separable_task, tmp_path):
    """With class weights a micro-batch counts its share of the step's weights, so 4 micro-batches give one batch's
    weighted mean (90 examples: the third step has 26, cut 7, 7, 6, 6)."""
    settings = {"max_steps": 4, "batch_size": 32, "dropout": 0.0, "seed": 3, "max_train_examples": 90,
                "class_weights": [1.0, 5.0]}
    run_finetune(separable_task, tmp_path / "one", settings)
    run_finetune(separable_task, tmp_path / "acc", {**settings, "micro_batch": 8})
    one, acc = weights(tmp_path / "one"), weights(tmp_path / "acc")
    for k in one:
        torch.testing.assert_close(acc[k], one[k], rtol=0, atol=1e-5, msg=k)


def test_the_flags_are_recorded_and_reach_the_run(separable_task, tmp_path, capsys):
    """Per-epoch evaluation (90 examples in batches of 32: 3 steps an epoch), HF's cosine rates step by step,
    balanced class weights from the training labels' counts, the checkpoint limit, all in finetune.json."""
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "o"
    assert main(finetune(separable_task, out, "--max-train-examples", "90", "--batch-size", "32", "--epochs", "2",
                         "--eval-strategy", "epoch", "--lr-scheduler-type", "cosine", "--warmup-steps", "2",
                         "--class-weights", "balanced", "--save-total-limit", "1", "--save-every", "1",
                         "--keep-checkpoints", "--log-every", "1", "--read-every", "1")) == 0
    train = json.loads((out / "finetune.json").read_text())["train"]
    lines = (separable_task[1] / "train.jsonl").read_text().splitlines()[:90]
    counts = [sum(json.loads(x)["label"] == label for x in lines) for label in ("neg", "pos")]
    assert train["class_weights"] == pytest.approx([90 / (2 * c) for c in counts])
    assert (train["eval_strategy"], train["lr_scheduler_type"], train["save_total_limit"]) == ("epoch", "cosine", 1)
    assert [r["step"] for r in records(out, "eval")] == [3, 6]
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR)
    hf = transformers.get_scheduler("cosine", opt, num_warmup_steps=2, num_training_steps=6)
    expected = []
    for _ in range(6):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        hf.step()
    assert [r["lr"] for r in records(out, "train")] == pytest.approx(expected, rel=1e-12)
    assert sorted(p.name for p in (out / "checkpoints").glob("*.pt")) == ["step-00000006.pt"]


def test_the_checkpoint_limit_deletes_only_litebert_checkpoints_and_a_resume_keeps_the_settings(separable_task,
                                                                                              tmp_path):
    out = tmp_path / "o"
    settings = {"max_steps": 6, "batch_size": 16, "save_every": 1, "save_total_limit": 2, "optim": "lamb",
                "label_smoothing_factor": 0.1}
    result = run_finetune(separable_task, out, settings, stop_after=3)
    assert result.interrupted
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("*.pt")) == ["step-00000002.pt", "step-00000003.pt"]
    mine = [ckpts / "notes.txt", ckpts / "step-1.pt", ckpts / "best-step-00000001.pt"]
    for p in mine:
        p.write_text("mine")
    for changed, said in ((dict(optim="adamw"), "optim: checkpoint 'lamb', now 'adamw'"),
                          (dict(label_smoothing_factor=0.0), "label_smoothing_factor: checkpoint 0.1, now 0.0"),
                          (dict(lr_scheduler_type="cosine"), "lr_scheduler_type: checkpoint 'official', now 'cosine'")):
        with pytest.raises(CheckpointError, match=said):
            run_finetune(separable_task, out, {**settings, **changed}, resume=True)
    result = run_finetune(separable_task, out, settings, resume=True, keep_checkpoints=True)
    assert result.complete and result.steps == 6
    assert sorted(p.name for p in ckpts.glob("step-*.pt")) == ["step-00000005.pt", "step-00000006.pt", "step-1.pt"]
    assert all(p.read_text() == "mine" for p in mine)


@pytest.mark.parametrize("task, flags, said", [
    ("classify", ["--class-weights", "1,2,3"], "--class-weights [1.0, 2.0, 3.0]: 3 weights for 2 labels (neg, pos)"),
    ("stsb", ["--label-smoothing-factor", "0.1"], "--label-smoothing-factor 0.1: the regression task's loss is not"),
    ("classify", ["--optim", "sgd"], "--optim sgd: choose one of 'adamw', 'lamb'"),
    ("classify", ["--eval-strategy", "epoch", "--eval-every", "3"], "--eval-every evaluates every N steps"),
])
def test_bad_settings_are_one_line_errors_before_out_is_written(separable_task, tmp_path, capsys, task, flags, said):
    argv = finetune(separable_task, tmp_path / "o", *flags)
    argv[1] = task
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
    assert not (tmp_path / "o").exists()


def test_compute_loss_must_be_a_function(separable_task, tmp_path):
    with pytest.raises(ConfigError, match=r"^compute_loss = 5: expected a function or null$"):
        run_finetune(separable_task, tmp_path / "o", {"max_steps": 1}, compute_loss=5)
    assert not (tmp_path / "o").exists()


def test_defaults_are_the_official_recipe():
    """The defaults are the runs' before these knobs: official AdamW with decay 0.01, the official schedule, plain
    cross-entropy, evaluation every eval_every steps, the newest two checkpoints."""
    from litebert import FinetuneConfig
    from litebert.tasks.presets import get_preset

    args = FinetuneConfig().train_args(get_preset("sst-2"), 100, 128, False)
    assert (args.weight_decay, args.optim, args.lr_scheduler_type, args.label_smoothing_factor, args.class_weights,
            args.compute_loss, args.eval_strategy, args.save_total_limit) == (
        0.01, "adamw", "official", 0.0, None, None, "steps", 2)
    assert not math.isnan(args.weight_decay)
