"""``litebert finetune --lora``: only the adapters and the head train (every other saved weight is the base model's,
bit for bit), the folder's model is the merged one, and its adapter/ loads on HF transformers' model of the base
weights through ``peft.PeftModel.from_pretrained`` with the same logits (peft and HF are the reference)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from litebert.cli import main

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(model folder: the tiny preset with random weights and the official 30k vocabulary, data folder)."""
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import AlbertTokenizer

    root = tmp_path_factory.mktemp("lora")
    AlbertTokenizer.from_pretrained(REPO / "data" / "albert-30k").save_pretrained(root / "model")
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=30000)).save_pretrained(root / "model")
    data = root / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("dev", 16)):
        with open(data / f"{split}.jsonl", "w") as f:
            for _ in range(n):
                y = int(rng.integers(2))
                words = list(rng.choice("the movie was and a plot with actors".split(), 6))
                words.insert(int(rng.integers(7)), ["awful", "great"][y])
                f.write(json.dumps({"text": " ".join(words), "label": ["neg", "pos"][y]}) + "\n")
    return root / "model", data


def finetune(base, out, *extra):
    return ["finetune", "classify", "--model", str(base[0]), "--data", str(base[1]), "--out", str(out), "--lr", "5e-3",
            "--threads", "1", "--no-progress", "--max-steps", "8", "--batch-size", "16", "--eval-every", "4",
            *extra]


def test_lora_trains_adapters_and_head_only_and_the_adapter_loads_on_hf(base, tmp_path):
    out = tmp_path / "out"
    assert main(finetune(base, out, "--lora", "--lora-r", "4", "--lora-alpha", "8",
                         "--lora-targets", "query,value,ffn")) == 0
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["lora"] == {"r": 4, "alpha": 8.0, "dropout": 0.0, "targets": ["query", "value", "ffn"]}
    start, merged = load_file(base[0] / "model.safetensors"), load_file(out / "model.safetensors")
    adapted = ("attention.query.", "attention.value.", ".ffn.weight", ".ffn.bias")
    for key, tensor in merged.items():
        if key in start and not any(a in key for a in adapted):
            assert torch.equal(tensor, start[key]), key  # frozen
    block = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    for key in ("attention.query.weight", "attention.value.weight", "ffn.weight"):
        assert not torch.equal(merged[block + key], start[block + key]), key  # the adapter, merged
    assert torch.equal(merged[block + "ffn.bias"], start[block + "ffn.bias"])  # LoRA adds no bias
    cfg = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert cfg["target_modules"] == ["ffn", "query", "value"] and cfg["base_model_name_or_path"] == str(base[0])

    ids = torch.tensor([[2, 14, 1162, 25, 1952, 3, 0], [2, 51, 15, 9, 3, 0, 0]])
    mask = (ids != 0).long()
    hf_base = transformers.AlbertForSequenceClassification.from_pretrained(base[0], num_labels=2).eval()
    with torch.no_grad():
        before = hf_base(input_ids=ids, attention_mask=mask).logits
    hf = peft.PeftModel.from_pretrained(hf_base, out / "adapter").eval()
    folder = transformers.AlbertForSequenceClassification.from_pretrained(out).eval()  # the merged model
    from litebert.heads import AlbertForSequenceClassification

    ours = AlbertForSequenceClassification.from_pretrained(out)
    with torch.no_grad():
        expected = ours(ids, mask).logits
        assert (hf(input_ids=ids, attention_mask=mask).logits - expected).abs().max().item() <= 1e-5
        assert (folder(input_ids=ids, attention_mask=mask).logits - expected).abs().max().item() <= 1e-5
        assert (before - expected).abs().max().item() > 1e-3


def test_resume_and_overwrite(base, tmp_path):
    """A run stopped after 4 steps and resumed ends with the uninterrupted run's adapter and model, bit for bit;
    --overwrite replaces adapter/ (the run's own) with the same seeded result, and a user's file there is kept."""
    from litebert.finetuning.run import FinetuneConfig
    from litebert.finetuning.run import finetune as run

    config = FinetuneConfig(lora=True, seed=3, max_steps=8, batch_size=16, eval_every=4, lr=5e-3)
    whole = run("classify", base[0], base[1], tmp_path / "whole", config=config, progress=False, log=None)
    stopped = run("classify", base[0], base[1], tmp_path / "resumed", config=config, progress=False, log=None,
                  stop_after=4)
    assert stopped.interrupted and stopped.steps == 4
    resumed = run("classify", base[0], base[1], tmp_path / "resumed", config=config, progress=False, log=None,
                  resume=True)
    assert whole.complete and resumed.complete and resumed.best_step == whole.best_step
    for name in ("adapter/adapter_model.safetensors", "model.safetensors"):
        a, b = load_file(tmp_path / "whole" / name), load_file(tmp_path / "resumed" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    out = tmp_path / "whole"
    first = load_file(out / "adapter" / "adapter_model.safetensors")
    assert main(finetune(base, out, "--lora", "--seed", "3", "--overwrite")) == 0  # adapter/ is the run's own
    again = load_file(out / "adapter" / "adapter_model.safetensors")
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)  # seeded
    shutil.rmtree(out / "adapter")
    (out / "adapter").mkdir()
    (out / "adapter" / "mine.txt").write_text("a user's file")
    assert main(finetune(base, out, "--lora", "--overwrite")) == 2  # refused: it holds what litebert did not write
    assert (out / "adapter" / "mine.txt").is_file()


def test_lora_settings_without_lora_are_refused(base, tmp_path, capsys):
    assert main(finetune(base, tmp_path / "out", "--lora-r", "4")) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "--lora-r 4 sets LoRA, which is off: add --lora" in err
    assert not (tmp_path / "out").exists()


def test_unknown_lora_target_is_one_line_naming_the_flag(base, tmp_path, capsys):
    assert main(finetune(base, tmp_path / "out", "--lora", "--lora-targets", "query,querry")) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "--lora-targets query,querry: no module named querry in " \
        "AlbertForSequenceClassification; LoRA can adapt classifier, dense, " in err
    assert not (tmp_path / "out").exists()
