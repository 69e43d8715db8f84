"""``micro_batch="auto"`` (`litebert.engine.step.MicroBatch`), fine-tuning's gradient checkpointing and compile, and
multi-process fine-tuning without DDP's unused-parameter search.

Out of memory is simulated on the CPU: the probing that CUDA gets is switched on for the CPU (``engine.PROBED``) and
the model's forward raises ``torch.OutOfMemoryError`` for a batch of more than N rows, as a GPU would past its memory.
The reference is always a run given that micro-batch from the start: the same losses and weights, bit for bit.
"""

import json
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import ENV, PYTHON
from helpers.separable_task import finetune, weights
from helpers.separable_task import records as _records
from helpers.tiny_setup import datasets, tiny_model_config
from litebert.cli import main
from litebert.engine import distributed as D
from litebert.engine import step as engine
from litebert.engine.checkpoint import latest_valid
from litebert.engine.metrics_log import read_metrics
from litebert.engine.plan import local_plan
from litebert.engine.step import MicroBatch, TrainingError
from litebert.errors import ConfigError
from litebert.heads import AlbertForPreTraining
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.identity import run_identity
from litebert.pretraining.loop import train

pytestmark = pytest.mark.usefixtures("one_thread")
OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def oom_above(rows: int, calls: list):
    """A forward hook that fails like a full GPU for a training batch of more than ``rows`` rows (and notes each
    size), once the forward pass has run (its dropout masks drawn: the retry must restore the RNG); evaluation,
    without the backward pass's activations, is left alone."""
    def hook(module, args, kwargs, output=None):
        if not module.training:
            return
        n = (kwargs.get("input_ids") if "input_ids" in kwargs else args[0]).shape[0]
        calls.append(n)
        if n > rows:
            raise OOM(f"simulated: CUDA out of memory at {n} rows")
    return hook


# ------------------------------------------------------------------------------------------------ the rule
def test_auto_on_a_cpu_is_the_per_process_batch_up_to_32():
    cpu = D.Distributed()
    # the largest divisor of the per-process batch that is at most 32, and no probing
    assert [MicroBatch.resolve("auto", n, cpu).size for n in (8, 32, 48, 64, 96, 37)] == [8, 32, 24, 32, 32, 1]
    assert not MicroBatch.resolve("auto", 48, cpu).auto
    assert MicroBatch.resolve(12, 48, cpu).size == 12 and MicroBatch.resolve(12, 48, cpu).news() is None
    assert MicroBatch.resolve("auto", 48, cpu, saved=16).size == 16  # a resumed run's value
    assert MicroBatch.resolve("auto", 48, cpu, saved=5).size == 24  # not a divisor (other processes): decided again


def test_halving_keeps_a_divisor_of_the_per_process_batch_and_stops_below_1():
    m = MicroBatch(24, 24, auto=True)
    sizes = []
    with pytest.raises(TrainingError, match="even at micro-batch 1") as e:
        while True:
            m.halve()
            sizes.append(m.size)
    assert sizes == [12, 6, 3, 1] and m.halvings == 4 and "\n" not in str(e.value)
    m = MicroBatch(20, 20, auto=True, origin="the per-process batch fits")
    m.halve()
    m.halve()
    assert (m.size, m.accumulation) == (5, 4)  # 20 -> 10 -> 5, the global batch kept by 4 accumulated micro-batches
    assert m.news() == "micro-batch auto: 5 (2 halvings after out of memory)" and m.news() is None


def test_auto_is_validated_like_every_field(tmp_path, capsys):
    assert TrainConfig(micro_batch="auto").micro_batch == "auto"
    with pytest.raises(ConfigError, match=r"^TrainConfig.micro_batch = 'big': expected int or 'auto'$"):
        TrainConfig(micro_batch="big")
    with pytest.raises(ConfigError, match="micro_batch = 0: must be >= 1"):
        TrainConfig(micro_batch=0)
    assert main(["finetune", "classify", "--model", str(tmp_path), "--data", str(tmp_path), "--out",
                 str(tmp_path / "o"), "--micro-batch", "big"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--micro-batch big: expected int or 'auto'" in err
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------------- pretraining
def _cfg(**kw):
    base = dict(max_steps=6, batch_size=8, micro_batch=8, lr=5e-3, warmup_steps=2, seq_len=64, max_predictions=10,
                eval_every=0, eval_examples=16, save_every=3, keep_last=0, seed=3)
    return TrainConfig(**{**base, **kw})


def _model():
    torch.manual_seed(0)
    return AlbertForPreTraining(tiny_model_config(hidden_dropout_prob=0.1))  # dropout: the retry must restore the RNG


def test_pretraining_auto_halves_after_oom_and_equals_the_explicit_run(tiny_setup, tmp_path, monkeypatch, capsys):
    tr, ev = datasets(tiny_setup)
    ref = train(_model(), tr, ev, _cfg(micro_batch=2), tmp_path / "ref", progress=False)
    monkeypatch.setattr(engine, "PROBED", ("cuda", "cpu"))
    m, calls = _model(), []
    m.register_forward_hook(oom_above(3, calls), with_kwargs=True)
    capsys.readouterr()
    got = train(m, tr, ev, _cfg(micro_batch="auto"), tmp_path / "auto", progress=False)
    assert capsys.readouterr().err.count("micro-batch auto: 2 (2 halvings after out of memory)") == 1
    assert calls[:3] == [8, 4, 2] and set(calls[3:]) == {2}  # 8 and 4 fail once, then 2 for the rest of the run
    a, b = read_metrics(tmp_path / "ref"), read_metrics(tmp_path / "auto")
    assert [r["loss"] for r in b] == [r["loss"] for r in a] and [r["tokens"] for r in b] == [r["tokens"] for r in a]
    assert got.final_eval == ref.final_eval
    for k, v in _model_weights(tmp_path / "ref").items():
        assert torch.equal(_model_weights(tmp_path / "auto")[k], v), k
    assert latest_valid(tmp_path / "auto" / "checkpoints").state["micro_batch"] == 2  # what a resume continues at


def test_pretraining_auto_resumes_at_the_recorded_micro_batch(tiny_setup, tmp_path, monkeypatch, capsys):
    tr, ev = datasets(tiny_setup)
    train(_model(), tr, ev, _cfg(micro_batch=2), tmp_path / "ref", progress=False)
    monkeypatch.setattr(engine, "PROBED", ("cuda", "cpu"))
    m, calls = _model(), []
    m.register_forward_hook(oom_above(3, calls), with_kwargs=True)
    first = train(m, tr, ev, _cfg(micro_batch="auto"), tmp_path / "run", progress=False, stop_after=4)
    assert first.interrupted and first.step == 4
    m, calls = _model(), []
    m.register_forward_hook(oom_above(3, calls), with_kwargs=True)
    capsys.readouterr()
    c = _cfg(micro_batch="auto")
    plan = local_plan(c, m.config, identity=run_identity(m, c, tr), max_steps=c.max_steps,
                      checkpoint=latest_valid(tmp_path / "run" / "checkpoints"))
    train(m, tr, ev, c, tmp_path / "run", plan=plan, progress=False)
    assert "micro-batch auto: 2 (the resumed run's)" in capsys.readouterr().err
    assert set(calls) == {2}  # no out-of-memory try: the recorded value is used
    assert [r["loss"] for r in read_metrics(tmp_path / "run")] == [r["loss"] for r in read_metrics(tmp_path / "ref")]


def test_out_of_memory_even_at_1_is_a_one_line_error(tiny_setup, tmp_path, monkeypatch):
    tr, _ = datasets(tiny_setup)
    monkeypatch.setattr(engine, "PROBED", ("cuda", "cpu"))
    m = _model()
    m.register_forward_hook(oom_above(0, []), with_kwargs=True)
    with pytest.raises(TrainingError, match="runs out of GPU memory even at micro-batch 1") as e:
        train(m, tr, None, _cfg(micro_batch="auto", batch_size=4), tmp_path, progress=False)
    assert "\n" not in str(e.value)


def _model_weights(run):
    from safetensors.torch import load_file

    return load_file(Path(run) / "model" / "model.safetensors")


# ----------------------------------------------------------------------------------------------- fine-tuning
def test_finetune_auto_halves_after_oom_and_equals_the_explicit_run(separable_task, tmp_path, monkeypatch, capsys):
    from litebert.heads import AlbertForSequenceClassification

    common = ("--max-steps", "4", "--batch-size", "16", "--seed", "3", "--eval-every", "2", "--log-every", "1")
    assert main(finetune(separable_task, tmp_path / "ref", *common, "--micro-batch", "4")) == 0
    monkeypatch.setattr(engine, "PROBED", ("cuda", "cpu"))
    calls, forward = [], AlbertForSequenceClassification.forward
    hook = oom_above(5, calls)

    def failing(self, input_ids, *args, **kwargs):
        out = forward(self, input_ids, *args, **kwargs)
        hook(self, (input_ids,), {})
        return out

    monkeypatch.setattr(AlbertForSequenceClassification, "forward", failing)
    capsys.readouterr()
    assert main(finetune(separable_task, tmp_path / "auto", *common, "--micro-batch", "auto")) == 0
    out = capsys.readouterr().out
    assert "4 steps of 16 = micro-batch auto x accumulation x 1 process(es)" in out
    assert out.count("micro-batch auto: 4 (2 halvings after out of memory)") == 1
    assert calls[:3] == [16, 8, 4]
    a, b = weights(tmp_path / "ref"), weights(tmp_path / "auto")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["loss"] for r in _records(tmp_path / "auto", "train")] == [
        r["loss"] for r in _records(tmp_path / "ref", "train")]


def test_finetune_gradient_checkpointing_gives_the_same_training(separable_task, tmp_path):
    common = ("--max-steps", "4", "--batch-size", "8", "--seed", "3", "--eval-every", "2", "--log-every", "1",
              "--dropout", "0.1")  # dropout: the recomputed forward must draw the same masks
    assert main(finetune(separable_task, tmp_path / "plain", *common)) == 0
    assert main(finetune(separable_task, tmp_path / "ckpt", *common, "--gradient-checkpointing")) == 0
    a, b = weights(tmp_path / "plain"), weights(tmp_path / "ckpt")
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-6, msg=k)
    assert [r["loss"] for r in _records(tmp_path / "ckpt", "train")] == pytest.approx(
        [r["loss"] for r in _records(tmp_path / "plain", "train")], rel=1e-6)


@pytest.mark.slow
def test_finetune_compile_gives_the_eager_losses(separable_task, tmp_path):
    common = ("--max-steps", "3", "--batch-size", "8", "--seed", "3", "--log-every", "1", "--dropout", "0",
              "--pad-to-max", "--seq-len", "32")  # one shape: one compilation
    assert main(finetune(separable_task, tmp_path / "eager", *common, dev=False)) == 0
    assert main(finetune(separable_task, tmp_path / "compiled", *common, "--compile", dev=False)) == 0
    assert [r["loss"] for r in _records(tmp_path / "compiled", "train")] == pytest.approx(
        [r["loss"] for r in _records(tmp_path / "eager", "train")], rel=1e-4)
    a, b = weights(tmp_path / "eager"), weights(tmp_path / "compiled")
    assert a.keys() == b.keys()  # compiled in place: the plain model's names
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-3, atol=1e-4, msg=k)


# ------------------------------------------------------------------------------------ DDP: no unused parameters
KINDS = {"classify": ["neg", "pos"], "regress": None, "conll": ["O", "B-PER", "I-PER"], "mc": None, "squad1": None,
         "squad2": None}


@pytest.mark.parametrize("task", KINDS)
def test_every_trainable_parameter_of_every_task_head_gets_a_gradient(separable_task, task):
    """What lets fine-tuning wrap DDP with find_unused_parameters=False: one training step's backward reaches every
    trainable parameter, with padding skipped or not (a parameter without a gradient would hang DDP's reducer)."""
    from litebert.padding import prepare_batch
    from litebert.tasks.presets import get_preset

    torch.manual_seed(0)
    m = get_preset(task).kind.new_model(separable_task[0], KINDS[task]).train()
    b, length = 4, 12
    ids = torch.randint(5, m.config.vocab_size, (b, length))
    mask = torch.ones(b, length, dtype=torch.long)
    mask[0, 7:] = 0
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    if task == "mc":  # 2 questions of 2 choices: [B, K, L]
        batch = {k: v.view(2, 2, length) for k, v in batch.items()} | {"labels": torch.tensor([0, 1])}
    elif task.startswith("squad"):
        batch |= {"start_positions": torch.tensor([1, 2, 3, 0]), "end_positions": torch.tensor([2, 3, 4, 0])}
        if task == "squad2":
            batch["is_impossible"] = torch.tensor([0, 0, 0, 1])
    else:
        batch["labels"] = {"classify": torch.tensor([0, 1, 0, 1]), "regress": torch.rand(b),
                           "conll": torch.randint(0, 3, (b, length))}[task]
    for pack in (True, False):
        m.zero_grad(set_to_none=True)
        m(**prepare_batch(dict(batch), torch.device("cpu"), pack=pack and not m.LOSS_READS_PADDING)).loss.backward()
        missing = [n for n, p in m.named_parameters() if p.requires_grad and p.grad is None]
        assert not missing, (task, pack, missing)


def _kind_data(task: str, folder: Path) -> list[str]:
    """--data (and --dev) arguments of a small training set for ``task``."""
    repo = Path(__file__).resolve().parents[2] / "data" / "finetune"
    if task in ("squad1", "squad2"):
        return ["--data", str(repo / "squad"), "--max-eval-examples", "8", "--seq-len", "64"]
    if task == "mc":
        return ["--data", str(repo / "mc"), "--max-eval-examples", "8", "--seq-len", "48"]
    rng = np.random.default_rng(0)
    path = folder / "train.txt"
    if task == "conll":
        names, other = ["Peter", "Anna", "Jo"], ["said", "so", "the", "film", "was", "good"]
        sentences = ["\n".join(f"{w} NNP B-NP {'B-PER' if w in names else 'O'}"
                               for w in rng.choice(names + other, 6)) for _ in range(32)]
        path.write_text("\n\n".join(sentences) + "\n")
    else:
        path = folder / "train.jsonl"
        path.write_text("".join(json.dumps({"text": " ".join(rng.choice(["good", "bad", "film", "the"], 5)),
                                            "label": float(rng.random())}) + "\n" for _ in range(32)))
    return ["--data", str(path)]


@pytest.mark.parametrize("task", ["regress", "conll", "mc", "squad1", "squad2"])
def test_two_process_finetuning_of_every_kind_has_no_unused_parameter_search(separable_task, tmp_path, task):
    """torchrun --nproc_per_node 2 (gloo): every kind trains with find_unused_parameters=False, and no rank prints
    DDP's warning about it (the classification kind: test_finetune_train.py::test_two_processes_equal_one)."""
    args = ["finetune", task, "--model", str(separable_task[0]), *_kind_data(task, tmp_path),
            "--out", str(tmp_path / "o"), "--max-steps", "2", "--batch-size", "8", "--max-train-examples", "16",
            "--threads", "1", "--no-progress"]
    two = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "litebert.cli", *args], env=ENV, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "2 steps of 8 = 4 x 1 x 2 process(es)" in two.stdout
    assert "find_unused_parameters" not in two.stderr


def test_two_process_auto_agrees_after_one_rank_runs_out_of_memory(separable_task, tmp_path):
    """Rank 1 alone runs out of memory above 2 rows: both ranks halve together (no rank waits in a collective the
    other never reaches), settle on 2, and the run equals one process given micro-batch 2 x 2 accumulation."""
    launcher = tmp_path / "launch.py"
    launcher.write_text(textwrap.dedent("""
        import os, sys
        import torch
        from litebert.cli import main
        from litebert.heads import AlbertForSequenceClassification
        from litebert.engine import step as engine

        engine.PROBED = ("cuda", "cpu")
        forward = AlbertForSequenceClassification.forward

        def failing(self, input_ids, *args, **kwargs):
            out = forward(self, input_ids, *args, **kwargs)
            if self.training and os.environ["RANK"] == "1" and input_ids.shape[0] > 2:
                raise torch.OutOfMemoryError("simulated")
            return out

        AlbertForSequenceClassification.forward = failing
        raise SystemExit(main(sys.argv[1:]))
    """))
    common = ["--max-steps", "3", "--batch-size", "8", "--dropout", "0", "--eval-every", "3", "--log-every", "1"]
    two = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(launcher), *finetune(separable_task, tmp_path / "two", *common, "--micro-batch", "auto")],
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "micro-batch auto: 2 (1 halving after out of memory)" in two.stdout
    assert main(finetune(separable_task, tmp_path / "one", *common, "--micro-batch", "2")) == 0
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-5, msg=k)
    assert [r["loss"] for r in _records(tmp_path / "two", "train")] == pytest.approx(
        [r["loss"] for r in _records(tmp_path / "one", "train")], rel=1e-5)


@pytest.mark.gpu
def test_auto_on_a_full_gpu_picks_a_smaller_micro_batch(tiny_setup, tmp_path, capsys):
    """A real out of memory: most of the GPU is taken by a tensor, so the per-process batch (64 x 512 of a
    6-layer 768-wide model in fp32) cannot fit; auto halves until a step fits and the run completes."""
    tr, _ = datasets(tiny_setup, seq_len=512)
    torch.manual_seed(0)
    config = tiny_model_config(max_position_embeddings=512).with_shape(hidden_size=768, num_hidden_layers=6)
    model = AlbertForPreTraining(config)
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(int(free - 3 * 2**30), dtype=torch.uint8, device="cuda")  # leave ~3 GiB
    try:
        cfg = TrainConfig(max_steps=2, batch_size=64, micro_batch="auto", seq_len=512, max_predictions=10,
                          precision="fp32", save_every=0, eval_examples=8, seed=1)
        result = train(model, tr, None, cfg, tmp_path / "run", progress=False)
    finally:
        del hog
        torch.cuda.empty_cache()
    assert result.step == 2
    err = capsys.readouterr().err
    line = next(l for l in err.splitlines() if l.startswith("micro-batch auto: "))
    size = int(line.split()[2])
    assert size < 64 and 64 % size == 0 and "after out of memory" in line, line
    assert latest_valid(tmp_path / "run" / "checkpoints").state["micro_batch"] == size
