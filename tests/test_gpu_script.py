"""bench/gpu_mfu.py on a machine without a GPU: its FLOP count against a hand count and against torch's FLOP counter
run on the real training step, its argument checks, and its no-GPU exit."""

from __future__ import annotations

import importlib.util
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

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu_mfu.py"
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
])
def test_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_mfu.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


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
    script = Path(__file__).resolve().parent.parent / "bench" / "gpu_profile.py"
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--preset", "tiny", "--batch", "2",
                           "--seq-len", "32", "--predictions", "4", "--steps", "1", "--top", "3"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    total = float(re.search(r"([\d.]+) ms of CPU kernel time per step", out).group(1))
    shares = [float(x) for x in re.findall(r"^\s+[a-z /()]+?\s+[\d.]+ ms\s+([\d.]+)%$", out, re.M)]
    assert total > 0 and abs(sum(shares) - 100) < 0.5
    assert "matmul" in out and "top 3 kernels" in out
