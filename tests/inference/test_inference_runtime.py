"""One runtime and one inference loop for every command that runs a model.

Every command and pipeline resolves ``device``/``precision``/``attention`` through `Runtime.for_inference`: varlen
attention and fp16 on a CPU are refused with the same one-line error everywhere, before anything is written; bf16 on
a CPU runs the model under CPU bf16 autocast everywhere (fp32 and auto: no autocast), always in inference mode.
The one loop (`litebert.inference.loop.run_batches`) gives, for mixed lengths and any batching (1, several, by tokens),
each input's outputs in the input's order, equal to the model run on that input alone, without padding."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import numpy as np
import pytest
import torch

import litebert
from litebert.cli import main
from litebert.errors import ConfigError
from litebert.inference.loop import run_batches

REPO = Path(__file__).resolve().parents[2]
CONFIG = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=37, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              classifier_dropout_prob=0.0)
LABELS = {0: "neg", 1: "pos"}

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def folders(albert_vocab, tmp_path_factory):
    """Tiny random models on the official 30k vocabulary: a pretraining folder (MLM + SOP heads: fill-mask,
    embed, feature extraction, evaluate-pretraining, transitions), a classifier (evaluate, predict), a token
    classifier and a QA head; a held-out store made with the same vocabulary; inputs for each command."""
    from litebert.data.store import prepare_store
    from litebert.tokenizer import AlbertTokenizer

    root, tok = tmp_path_factory.mktemp("runtime"), AlbertTokenizer.from_pretrained(albert_vocab)
    torch.manual_seed(0)
    heads = {"pretrain": ("AlbertForPreTraining", {}), "clf": ("AlbertForSequenceClassification",
                                                               {"id2label": LABELS, "num_labels": 2}),
             "ner": ("AlbertForTokenClassification", {"id2label": {0: "O", 1: "B-X"}, "num_labels": 2}),
             "qa": ("AlbertForQuestionAnswering", {})}
    for name, (arch, extra) in heads.items():
        getattr(litebert, arch)(litebert.AlbertConfig(**CONFIG, **extra)).save_pretrained(root / name)
        tok.save_pretrained(root / name)
    lines = lzma.decompress((REPO / "data" / "corpus" / "moby_dick.txt.xz").read_bytes()).decode().splitlines()
    (root / "corpus.txt").write_text("\n".join(lines[300:700]) + "\n")
    prepare_store([root / "corpus.txt"], tok, root / "store", progress=False)
    texts = ["Call me [MASK].", "The [MASK] sat on the mat, and the whale swam by the ship.", "A [MASK] day."]
    (root / "in.jsonl").write_text("".join(json.dumps({"text": t, "label": "pos"}) + "\n" for t in texts))
    return root


def commands(f: Path, out: Path) -> dict[str, list[str]]:
    """Each command that runs a model, on the tiny folders, writing to ``out`` (with its own suffix)."""
    data = ["--data", str(f / "store"), "--examples", "8", "--seq-len", "32", "--no-progress"]
    return {
        "evaluate": ["evaluate", "--model", str(f / "clf"), "--data", str(f / "in.jsonl"), "--output",
                     str(out.with_suffix(".jsonl")), "--no-progress"],
        "predict": ["predict", "--model", str(f / "clf"), "--input", str(f / "in.jsonl"), "--output",
                    str(out.with_suffix(".jsonl")), "--no-progress"],
        "embed": ["embed", "--model", str(f / "pretrain"), "--input", str(f / "in.jsonl"), "--output",
                  str(out.with_suffix(".npy")), "--no-progress"],
        "fill-mask": ["fill-mask", "--model", str(f / "pretrain"), "--input", str(f / "in.jsonl"), "--output",
                      str(out.with_suffix(".jsonl"))],
        "evaluate-pretraining": ["evaluate-pretraining", str(f / "pretrain"), *data, "--output",
                                 str(out.with_suffix(".json"))],
        "analyze transitions": ["analyze", "transitions", str(f / "pretrain"), *data, "--out",
                                str(out.with_suffix(".png"))],
    }


PIPELINES = {"fill-mask": ("pretrain", "The [MASK] sat."), "text-classification": ("clf", "A fine day."),
             "token-classification": ("ner", "Ahab hunted the whale."), "feature-extraction": ("pretrain", "Hi."),
             "question-answering": ("qa", None)}


def ask(pipe, task: str, text):
    return pipe(question="Who hunted?", context="Ahab hunted the whale.") if text is None else pipe(text)


@pytest.mark.parametrize("flag, value", [("attention", "varlen"), ("precision", "fp16")])
def test_what_a_cpu_cannot_run_is_refused_alike_before_anything_is_written(folders, tmp_path, capsys, flag, value):
    errors = {}
    for name, argv in commands(folders, tmp_path / "out").items():
        assert main([*argv, "--device", "cpu", f"--{flag}", value]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, (name, err)
        errors[name] = err.split(": error: ", 1)[1]
        assert not any(tmp_path.iterdir()), name  # nothing written, not even a temporary
    assert len(set(errors.values())) == 1, errors
    assert errors["predict"].startswith(f"--{flag} {value}")
    # The Python functions and every pipeline: one message too, naming the argument
    messages = set()
    for task, (folder, _) in PIPELINES.items():
        with pytest.raises(ConfigError) as e:
            litebert.pipeline(task, folders / folder, device="cpu", **{flag: value})
        messages.add(str(e.value))
    with pytest.raises(ConfigError) as e:
        litebert.predict(folders / "clf", folders / "in.jsonl", tmp_path / "p.jsonl", device="cpu", **{flag: value})
    messages.add(str(e.value))
    with pytest.raises(ConfigError) as e:
        litebert.evaluate_pretraining([folders / "pretrain"], folders / "store", device="cpu", **{flag: value})
    messages.add(str(e.value))
    assert len(messages) == 1 and messages.pop().startswith(f"{flag} = {value!r}")
    assert not any(tmp_path.iterdir())


@pytest.fixture
def forwards(monkeypatch):
    """Each encoder forward pass: (the CPU autocast dtype, or None when autocast is off; inference mode)."""
    from litebert.model import AlbertModel

    seen, real = [], AlbertModel.forward

    def forward(self, *args, **kwargs):
        seen.append((torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None,
                     torch.is_inference_mode_enabled()))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(AlbertModel, "forward", forward)
    return seen


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp32", None)])
def test_precision_acts_alike_in_every_command_and_pipeline(folders, tmp_path, capsys, forwards, precision, dtype):
    """bf16 on a CPU is CPU bf16 autocast (as predict has always done), fp32 none (auto on a CPU is fp32:
    test_device.py), in every command and pipeline; every forward pass runs in inference mode."""
    for name, argv in commands(folders, tmp_path / "out").items():
        forwards.clear()
        assert main([*argv, "--device", "cpu", "--precision", precision, "--overwrite"]) == 0, name
        assert forwards and set(forwards) == {(dtype, True)}, (name, set(forwards))
    for task, (folder, text) in PIPELINES.items():
        forwards.clear()
        ask(litebert.pipeline(task, folders / folder, device="cpu", precision=precision), task, text)
        assert forwards and set(forwards) == {(dtype, True)}, (task, set(forwards))
    capsys.readouterr()


def test_bf16_on_a_gpu_without_it_is_refused(monkeypatch):
    from litebert.engine.device import autocast_dtype

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(ConfigError, match=r"precision = 'bf16': this GPU has no bfloat16; use fp16 or fp32"):
        autocast_dtype("bf16", torch.device("cuda"))
    assert autocast_dtype("auto", torch.device("cuda")) is torch.float16


def test_compile_without_a_compiler_is_refused(monkeypatch):
    from litebert.engine import runtime

    monkeypatch.setattr(runtime.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match=r"compile: torch.compile on the CPU needs a C\+\+ compiler"):
        runtime.Runtime.for_inference(litebert.AlbertConfig(**CONFIG), "cpu", compile=True)


# ------------------------------------------------------------------------------------------------- the one loop
def features(n: int, seed: int = 0) -> list[dict]:
    """``n`` inputs of mixed lengths (2 to 40 pieces), in no order."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(2, 41))
        ids = [2] + rng.integers(5, 30000, k - 2).tolist() + [3]
        types = [0] * (k // 2) + [1] * (k - k // 2)
        out.append({"input_ids": ids, "token_type_ids": types})
    return out


def alone(model, f: dict) -> torch.Tensor:
    """The reference: the model on one input, unbatched, unpadded."""
    with torch.no_grad():
        return model(torch.tensor([f["input_ids"]]), token_type_ids=torch.tensor([f["token_type_ids"]])).logits[0]


@pytest.mark.parametrize("head", ["AlbertForSequenceClassification", "AlbertForTokenClassification"])
@pytest.mark.parametrize("batch_size, batch_tokens", [(1, None), (2, None), (3, None), (100, None), (100, 60)])
def test_the_loop_equals_each_input_run_alone_in_input_order(head, batch_size, batch_tokens):
    torch.manual_seed(1)
    model = getattr(litebert, head)(litebert.AlbertConfig(**CONFIG, num_labels=3)).train()
    feats = features(13)
    shapes = []

    def take(out, batch):
        shapes.append(tuple(batch["input_ids"].shape))
        return {"logits": out.logits.float()}

    rows = run_batches(model, feats, take, batch_size=batch_size, batch_tokens=batch_tokens)
    assert model.training  # left as it was
    model.eval()
    for f, row in zip(feats, rows, strict=True):
        want = alone(model, f).numpy()
        got = row["logits"][:len(f["input_ids"])] if want.ndim == 2 else row["logits"]
        np.testing.assert_allclose(got, want, atol=1e-5)
    # batched by length: longest first, each batch padded to its own longest input, within the budget
    lengths = sorted((len(f["input_ids"]) for f in feats), reverse=True)
    assert [w for _, w in shapes] == sorted((w for _, w in shapes), reverse=True)
    assert sum(b for b, _ in shapes) == len(feats) and shapes[0][1] == lengths[0]
    assert all(b <= batch_size and (batch_tokens is None or b == 1 or b * w <= batch_tokens) for b, w in shapes)


def test_the_loop_runs_multiple_choice_choices_of_mixed_lengths():
    """Multiple choice: each choice's logit equals the choice run alone (a choice's score depends on it alone)."""
    torch.manual_seed(2)
    model = litebert.AlbertForMultipleChoice(litebert.AlbertConfig(**CONFIG)).eval()
    singles = features(12, seed=3)
    feats = [{"input_ids": [f["input_ids"] for f in singles[k:k + 3]],
              "token_type_ids": [f["token_type_ids"] for f in singles[k:k + 3]]} for k in range(0, 12, 3)]
    rows = run_batches(model, feats, lambda out, batch: {"logits": out.logits.float()}, batch_size=2,
                       batch_tokens=200)
    for k, row in enumerate(rows):
        with torch.no_grad():
            want = [model(torch.tensor([[f["input_ids"]]]), token_type_ids=torch.tensor([[f["token_type_ids"]]])
                          ).logits[0, 0].item() for f in singles[3 * k:3 * k + 3]]
        np.testing.assert_allclose(row["logits"], want, atol=1e-5)
