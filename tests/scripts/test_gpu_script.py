"""bench/gpu_mfu.py on a machine without a GPU: its FLOP count against a hand count and against torch's FLOP counter
run on the real training step, its argument checks, and its no-GPU exit; scripts/gpu_run.sh's stages at toy size
(--dry-run): the files each device call returns, their fields, and the call's deadline."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from litebert.config import AlbertConfig
from litebert.heads import AlbertForPreTraining

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_mfu.py"
spec = importlib.util.spec_from_file_location("gpu_mfu", SCRIPT)
gpu_mfu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_mfu)


def test_flops_hand_count_tiny():
    """tiny: V 1000, E 16, H 32, I 64, 4 layers; batch 2 x 10 tokens, 3 predictions. Forward multiply-adds of one
    sequence, matmul by matmul:
      per layer and token: Q,K,V,O 4*32*32 = 4096, FFN 2*32*64 = 4096 -> 8192; first 3 layers, 10 tokens: 245,760
      last layer, only what the losses need: K,V at 10 tokens 10 * 2*32*32 = 20,480; Q, O and FFN at the
        3 masked positions + [CLS]: 4 * (2*32*32 + 2*32*64) = 24,576
      E->H projection: 10 * 16*32 = 5,120
      attention: QK^T and AV, 2 * 10*10*32 = 6,400 per layer x 3 = 19,200; last layer 2 * 4*10*32 = 2,560
      MLM head on 3 positions: 3 * (32*16 + 16*1000) = 49,536
      pooler 32*32 + SOP 32*2 = 1,088
    sum 368,320 MACs; x 2 FLOPs x 3 (forward + backward) x 2 sequences = 4,419,840."""
    config = AlbertConfig.from_preset("tiny")
    assert gpu_mfu.step_flops(config, batch=2, seq_len=10, predictions=3) == 4_419_840


def counted_step_flops(config: AlbertConfig, batch: int, seq_len: int, predictions: int) -> int:
    """FLOPs torch's FlopCounterMode sees in one real forward + backward (math SDPA so attention is plain bmm)."""
    torch.manual_seed(0)
    model = AlbertForPreTraining(config)
    b = gpu_mfu.synthetic_batch(config, batch, seq_len, predictions, torch.Generator().manual_seed(0),
                                torch.device("cpu"))
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        out = model(b["input_ids"], None, b["token_type_ids"], mlm_positions=b["mlm_positions"], mlm_ids=b["mlm_ids"],
                    mlm_weights=b["mlm_weights"], sentence_order_label=b["sentence_order_label"])
        out.loss.backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("overrides", [{}, {"sharing": "none"}, {"embedding_size": 32, "embedding_projection": False},
                                       {"num_hidden_groups": 2, "inner_group_num": 2}])
def test_flops_equal_torch_flop_counter(overrides):
    config = AlbertConfig.from_preset("tiny", **overrides)
    assert gpu_mfu.step_flops(config, 3, 24, 5) == counted_step_flops(config, 3, 24, 5)


def test_flops_count_inner_groups():
    config = AlbertConfig.from_preset("tiny", inner_group_num=2)
    assert gpu_mfu.step_flops(config, 2, 10, 3) == counted_step_flops(config, 2, 10, 3)


def test_synthetic_batch_shapes_and_positions():
    config = AlbertConfig.from_preset("tiny")
    b = gpu_mfu.synthetic_batch(config, 4, 64, 10, torch.Generator().manual_seed(1), torch.device("cpu"))
    pos = b["mlm_positions"]
    assert pos.shape == (4, 10) and b["mlm_ids"].shape == (4, 10) and b["input_ids"].shape == (4, 64)
    assert bool((pos >= 1).all()) and bool((pos < 64).all())  # never [CLS]
    assert all(len(set(row.tolist())) == 10 for row in pos)  # distinct
    assert bool((pos[:, 1:] > pos[:, :-1]).all())  # sorted


def test_arguments_and_defaults():
    args = gpu_mfu.parse_args([])
    assert (args.preset, args.batch, args.seq_len, args.predictions, args.dtype, args.attention) == \
        ("albert-large-v2", 32, 512, 76, "bf16", "flash")
    assert args.warmup == 5 and gpu_mfu.parse_args(["--compile"]).warmup == 15


@pytest.mark.parametrize("argv, message", [
    (["--dtype", "fp32"], "flash needs --dtype bf16 or fp16"),
    (["--seq-len", "513"], "max_position_embeddings = 512"),
    (["--seq-len", "128", "--predictions", "128"], "seq_len - 1 = 127"),
    (["--batch", "0"], "--batch must be >= 1"),
    (["--num-layers", "0"], "--num-layers 0: must be >= 1"),
])
def test_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_mfu.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_num_layers_changes_the_depth_and_the_flop_count():
    """The GPU demo's shape (ALBERT-base at 6 layers): the depth replaces the preset's, and the six layers taken
    away are six full layers of work, counted by hand: per token 4 H^2 (Q, K, V, output) + 2 H F (FFN) multiply-adds
    and 2 L H for attention's scores and sum, 2 FLOPs per multiply-add, x3 for forward and backward."""
    base = gpu_mfu.parse_args(["--preset", "albert-base-v2", "--batch", "128", "--seq-len", "128",
                               "--predictions", "20"])
    six = gpu_mfu.parse_args(["--preset", "albert-base-v2", "--num-layers", "6", "--batch", "128", "--seq-len", "128",
                              "--predictions", "20"])
    assert (base.config.num_hidden_layers, six.config.num_hidden_layers) == (12, 6)
    assert six.config.hidden_size == base.config.hidden_size == 768
    f12, f6 = (gpu_mfu.step_flops(a.config, 128, 128, 20) for a in (base, six))
    h, f, length = 768, 3072, 128
    layer = 6 * 128 * (length * (4 * h * h + 2 * h * f) + 2 * length * length * h)
    assert f12 - f6 == pytest.approx(6 * layer, rel=1e-3)


def test_dry_run_prints_plan(capsys):
    assert gpu_mfu.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    # ALBERT-large, 32 x 512, 76 predictions (terms as in test_flops_hand_count_tiny): forward MACs per sequence
    # 512 * (23 * (4*1024^2 + 2*1024*4096) + 128*1024) + 512 * 2*1024^2 + 77 * (2*1024^2 + 2*1024*4096)
    # + 23 * 2*512^2*1024 + 2*77*512*1024 + 76 * (1024*128 + 128*30000) + 1024^2 + 2*1024 = 162,856,249,344
    # (the last layer: K, V at all 512 tokens, the rest at the 76 predictions + [CLS]);
    # x 2 x 3 x 32 sequences = 31.27 TFLOP per step.
    h, i = 1024, 4096
    forward = (512 * (23 * (4 * h**2 + 2 * h * i) + 128 * h) + 512 * 2 * h**2 + 77 * (2 * h**2 + 2 * h * i)
               + 23 * 2 * 512**2 * h + 2 * 77 * 512 * h + 76 * (h * 128 + 128 * 30000) + h**2 + 2 * h)
    assert forward == 162_856_249_344
    assert "31.27 TFLOP" in out
    assert "albert-large-v2" in out


@pytest.mark.parametrize("dtype, attention", [("fp32", "auto"), ("bf16", "flash"), ("fp16", "math")])
def test_step_runs_on_cpu(dtype, attention, capsys):
    """The timed step's logic (autocast, forced SDPA backend, GradScaler for fp16, clipping, LAMB) on the CPU."""
    argv = ["--preset", "tiny", "--device", "cpu", "--batch", "2", "--seq-len", "16", "--predictions", "3",
            "--warmup", "1", "--steps", "1", "--dtype", dtype, "--attention", attention, "--peak-tflops", "1"]
    assert gpu_mfu.main(argv) == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and re.search(r"TFLOP/s; MFU \d+(\.\d+)?%", out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the exit on machines without a GPU")
def test_exits_clearly_without_gpu():
    result = subprocess.run([sys.executable, str(SCRIPT), "--batch", "2"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "no CUDA device found" in result.stderr and "--dry-run" in result.stderr
    assert "training FLOPs per step" in result.stdout


def test_profile_script_smoke_on_cpu():
    """bench/gpu_profile.py's step and report run on the CPU: every group's time adds up to the total."""
    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_profile.py"
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--preset", "tiny", "--batch", "2",
                           "--seq-len", "32", "--predictions", "4", "--steps", "1", "--top", "3"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    total = float(re.search(r"([\d.]+) ms of CPU kernel time per step", out).group(1))
    shares = [float(x) for x in re.findall(r"^\s+[a-z /()]+?\s+[\d.]+ ms\s+([\d.]+)%$", out, re.M)]
    assert total > 0 and abs(sum(shares) - 100) < 0.5
    assert "matmul" in out and "top 3 kernels" in out


# ---------------------------------------------------------------------------------------------------- gpu_run.sh

RUN = Path(__file__).resolve().parents[2] / "scripts" / "gpu_run.sh"


def gpu_run(tmp_path, *args, **env):
    """scripts/gpu_run.sh with this interpreter, its results and work folders under tmp_path."""
    import os

    environ = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
               **{k: str(v) for k, v in env.items()}}
    done = subprocess.run(["bash", str(RUN), *args], capture_output=True, text=True, timeout=900, env=environ)
    return done, tmp_path / "out"


def test_gpu_run_dry_run_tests_and_mfu(tmp_path):
    """The first device call's stages at toy size: pytest's counts (every gpu test skips on a CPU) and the MFU
    stage's profile and variants, each file as it comes back from the device."""
    done, out = gpu_run(tmp_path, "--dry-run", "tests", "mfu")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["mfu.json", "mfu.log", "tests.json", "tests.log"]
    tests = json.loads((out / "tests.json").read_text())
    assert tests["complete"] and tests["exit_status"] == 0 and tests["tests"] == tests["skipped"] >= 2
    assert tests["passed"] == tests["failures"] == tests["errors"] == 0 and tests["problems"] == []
    assert "python 3" in (out / "tests.log").read_text() and "needs CUDA" in (out / "tests.log").read_text()
    mfu = json.loads((out / "mfu.json").read_text())
    groups = mfu["profile"]["groups"]
    assert abs(sum(g["share"] for g in groups.values()) - 1) < 1e-6 and "matmul" in groups
    assert mfu["profile"]["kernel_ms_per_step"] > 0 and len(mfu["profile"]["top"]) >= 3
    assert [v["args"] for v in mfu["variants"]] == ["--dtype fp32 --attention auto", "--dtype bf16 --attention math",
                                                    "--dtype fp32 --attention auto --model hf"]
    for v in mfu["variants"]:
        assert v["preset"] == "tiny" and v["device"] == "cpu" and v["step_ms"] > 0 and 0 < v["mfu"] < 1
        assert v["tflops"] == pytest.approx(v["mfu"] * v["peak_tflops"])
    assert [v["model"] for v in mfu["variants"]] == ["litebert", "litebert", "hf"]
    # the best of litebert's variants; HF's beside it, never counted as litebert's
    assert mfu["best"]["mfu"] == max(v["mfu"] for v in mfu["variants"][:2]) and mfu["best"]["model"] == "litebert"
    assert mfu["hf"] == mfu["variants"][2]


def test_gpu_run_keeps_to_its_deadline(tmp_path):
    """A call with too little time left skips its steps and says so, rather than running past the device's cap:
    the summary records the variants without results and the stage fails."""
    done, out = gpu_run(tmp_path, "--dry-run", "mfu", DEADLINE=25)
    assert done.returncode == 1
    log = (out / "mfu.log").read_text()
    assert log.count("[gpu_run] skipped (only") == 4  # the profile and the three variants
    mfu = json.loads((out / "mfu.json").read_text())
    assert mfu["profile"] is None and mfu["best"] is None and mfu["hf"] is None
    assert [v["result"] for v in mfu["variants"]] == [None] * 3 and "mfu.log" in mfu["variants"][0]["note"]


@pytest.mark.parametrize("args, message", [
    ([], "name the stages to run"),
    (["--dry-run", "bench"], "unknown stage 'bench'"),
])
def test_gpu_run_arguments(tmp_path, args, message):
    done, out = gpu_run(tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr and not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on machines without a GPU")
def test_gpu_run_needs_a_gpu_or_dry_run(tmp_path):
    done, out = gpu_run(tmp_path, "tests")
    assert done.returncode == 2 and "sees no CUDA GPU" in done.stderr and "--dry-run" in done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_gpu_run_dry_run_demo_and_experiment(tmp_path):
    """The second and third device calls' stages at toy size (~1 minute on 2 cores): the demo's report, plot, log
    and the benchmark at its shape, and the sentence-objective experiment's results, each under its stage's name."""
    done, out = gpu_run(tmp_path, "--dry-run", "demo", "experiment")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "demo-mfu.json", "demo.json", "demo.log", "demo.md", "demo.png", "experiment.json", "experiment.log",
        "experiment.md", "experiment.png"]
    mfu = json.loads((out / "demo-mfu.json").read_text())  # the benchmark's step at the demo's (toy) shape
    assert mfu["preset"] == "tiny" and mfu["batch"] == 2 and mfu["seq_len"] == 16 and mfu["step_ms"] > 0
    demo = json.loads((out / "demo.json").read_text())
    assert demo["complete"] and 0 <= demo["final_eval"]["sop_accuracy"] <= 1
    assert set(demo["sentiment"]) >= {"pretrained", "from_scratch", "bag_of_words", "majority"}
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["experiment"] == "sentence-objective"
    assert [a["name"] for a in experiment["arms"]] == ["none", "nsp", "sop"]
    for arm in experiment["arms"]:
        assert arm["steps"] == 3 and {"mlm", "nsp", "sop"} <= set(arm["intrinsic"])
    assert "| sop |" in (out / "experiment.md").read_text()
    assert (out / "demo.png").read_bytes()[:4] == (out / "experiment.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_gpu_run_dry_run_labels_after_the_demo(tmp_path):
    """The labels stage at toy size, on the demo stage's toy model: the label-efficiency results under the stage's
    name; without the demo's model it says so in one line."""
    done, out = gpu_run(tmp_path, "--dry-run", "labels")
    assert done.returncode == 1 and "run demo first" in done.stderr
    done, out = gpu_run(tmp_path, "--dry-run", "demo", "labels")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    labels = json.loads((out / "labels.json").read_text())
    assert list(labels["table"]) == ["pretrained", "tapt", "control", "bag_of_words"]
    assert labels["table"]["pretrained"]["40"]["test"]["seeds"] == 2 and labels["tapt"]["steps"] == 2
    assert (out / "labels.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 40, 2 seed(s) |" in (out / "labels.md").read_text()


def test_hf_step_runs_on_cpu_with_the_same_targets(capsys):
    """--model hf: HF's AlbertForPreTraining takes the batch's MLM targets as labels over all positions: the id at
    each masked position, -100 everywhere else."""
    config = AlbertConfig.from_preset("tiny")
    b = gpu_mfu.synthetic_batch(config, 3, 32, 5, torch.Generator().manual_seed(2), torch.device("cpu"))
    masked = b["labels"] != -100
    assert masked.sum(1).tolist() == [5, 5, 5]
    for i in range(3):
        assert b["labels"][i, b["mlm_positions"][i]].tolist() == b["mlm_ids"][i].tolist()
    argv = ["--model", "hf", "--preset", "tiny", "--device", "cpu", "--batch", "2", "--seq-len", "16",
            "--predictions", "3", "--warmup", "1", "--steps", "1", "--dtype", "fp32", "--attention", "auto",
            "--peak-tflops", "1"]
    assert gpu_mfu.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("hf's tiny") and re.search(r"TFLOP/s; MFU \d+(\.\d+)?%", out)


@pytest.mark.slow
def test_gpu_run_dry_run_loop(tmp_path):
    """The loop stage at toy size: the loop against its bare step (loop-vs-step.json: both arms timed, a pair per
    block) and the loop's variants (loop.json), under the stage's name."""
    done, out = gpu_run(tmp_path, "--dry-run", "loop")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["loop-vs-step.json", "loop.json", "loop.log"]
    (pairs,) = json.loads((out / "loop-vs-step.json").read_text())
    assert pairs["shape"] == "tiny" and pairs["pairs"] == 2 and pairs["loop_ms_per_step"] > 0
    assert {r["variant"] for r in json.loads((out / "loop.json").read_text())["results"]} >= {"demo", "read-every-1"}


def test_loop_variants_run_on_cpu_at_toy_size(tmp_path):
    """bench/gpu_loop.py's variants at toy size: each trains its steps through `litebert.pretrain` and reports a rate
    taken from its own metrics (tokens over elapsed time between two logged steps)."""
    spec = importlib.util.spec_from_file_location("gpu_loop", SCRIPT.parent / "gpu_loop.py")
    gpu_loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_loop)
    out = tmp_path / "loop.json"
    assert gpu_loop.main(["--device", "cpu", "--toy", "--steps", "12", "--skip", "2", "--work", str(tmp_path / "w"),
                          "--variants", "demo,no-workers,log-every-100", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [r["variant"] for r in report["results"]] == ["demo", "no-workers", "log-every-100"]
    for r in report["results"]:
        assert r["tokens_per_s"] > 0 and r["to_step"] == 12 and r["from_step"] >= 2
    with pytest.raises(SystemExit):
        gpu_loop.parse_args(["--variants", "demo,warp-drive"])
