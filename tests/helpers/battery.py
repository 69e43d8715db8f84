"""The inputs of every command and the ways to run one, shared by the bad-input tests (tests/system/: the battery, the
listed bad inputs, the refusals that leave --out unchanged)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from helpers import REPO
from helpers.tiny_setup import build_tiny_setup
from litebert.cli import main

TF_PRETRAIN = REPO / "tests" / "fixtures" / "tf" / "pretrain"
WORDS = "the a film movie plot great awful good bad actors story was is and of it".split()


def parser_leaves(parser, path: tuple, positionals: bool = False, inherited: list | None = None):
    """(command path, [actions]) of every leaf command under ``parser`` (its sub-commands' parsers inherit the
    actions above them): the options, and with ``positionals`` the positional arguments too."""
    actions = (inherited or []) + [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)
                                   and (positionals or a.option_strings)]
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), actions
        return
    for sub_name, sub in subs[0].choices.items():
        yield from parser_leaves(sub, path + (sub_name,), positionals, actions)


# ---------------------------------------------------------------------------------------------------- running
def cli(capsys, argv) -> tuple[int, str]:
    """Run ``litebert ARGV`` in this process: (exit status, stderr)."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    return code, capsys.readouterr().err


def ok(argv) -> bool:
    """``litebert ARGV`` succeeds."""
    return main([str(a) for a in argv]) == 0


def one_line_error(code: int, err: str, command: str) -> str:
    """Exit 2 and exactly one stderr line ``litebert COMMAND: error: ...``, without a traceback; returns the line."""
    lines = err.strip().splitlines()
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 2, f"exit status {code}, stderr: {err}"
    assert len(lines) == 1, f"{len(lines)} stderr lines: {err}"
    assert lines[0].startswith(f"litebert {command}: error: "), err
    return lines[0]


# ---------------------------------------------------------------------------------------------------- inputs
def _texts(n: int, offset: int = 0) -> list[str]:
    return [" ".join(WORDS[((i + offset) * 7 + j) % len(WORDS)] for j in range(8)) for i in range(n)]


def build_inputs(root: Path) -> dict:
    """The inputs of every command under ``root`` (the session fixture ``inp`` of tests/system/conftest.py builds
    them once; tests never change them: each case checks they are byte for byte as they were)."""
    import torch

    from litebert.config import AlbertConfig

    setup = build_tiny_setup(root / "setup", train_docs=slice(2, 20), eval_docs=slice(120, 123))
    tok = setup["tokenizer"].parent
    run = root / "run"
    assert ok(["pretrain", "--preset", "tiny", "--data", setup["store"], "--out", run, "--max-steps", "2",
                 "--batch-size", "4", "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10",
                 "--warmup-steps", "1", "--save-every", "2", "--eval-every", "0", "--seed", "3",
                 "--no-progress"])
    cls = root / "cls"
    cls.mkdir()
    for split, n, offset in (("train", 16, 0), ("dev", 8, 50)):
        (cls / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": ["neg", "pos"][i % 2]}) + "\n"
                                                    for i, t in enumerate(_texts(n, offset))))
    le_data = root / "le-data"  # a task folder with a test split (the label-efficiency experiment's)
    le_data.mkdir()
    for split in ("train", "dev", "test"):
        (le_data / f"{split}.jsonl").write_bytes((cls / f"{'dev' if split == 'test' else split}.jsonl").read_bytes())
    ft = root / "ft"
    assert ok(["finetune", "classify", "--model", run / "model", "--data", cls, "--out", ft, "--max-steps", "2",
                 "--eval-every", "2", "--batch-size", "4", "--seq-len", "32", "--no-progress"])
    predict_in = root / "predict.jsonl"
    predict_in.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts(3, 90)))
    embed_in = root / "embed.txt"
    embed_in.write_text("\n".join(_texts(3, 70)) + "\n")
    tok_corpus = root / "tok_corpus" / "c.txt"
    tok_corpus.parent.mkdir()
    tok_corpus.write_text("".join(f"line {i} of some text here and there\n" for i in range(200)))
    model_config = root / "tiny_config.json"
    AlbertConfig.from_preset("tiny").to_json(model_config)
    torch.manual_seed(0)
    return dict(root=root, store=setup["store"], eval_store=setup["eval_store"], tok=tok,
                corpus=root / "setup" / "train.txt", run=run, model=run / "model", cls=cls, dev=cls / "dev.jsonl",
                ft=ft, predict_in=predict_in, embed_in=embed_in, tok_corpus=tok_corpus, model_config=model_config,
                le_data=le_data)


def pretrain_argv(inp, out, *extra):
    """A one-step pretraining run on the shared inputs."""
    return ["pretrain", "--preset", "tiny", "--data", inp["store"], "--out", out, "--max-steps", "1",
            "--batch-size", "2", "--micro-batch", "2", "--seq-len", "32", "--max-predictions", "5", "--no-progress",
            *extra]


# experiment: the options only `experiment speedup` reads, and those only `experiment label-efficiency` reads
SPEEDUP_ONLY = {"--micro-batch", "--untimed-steps", "--processes", "--presets", "--reference"}
LABEL_EFFICIENCY_ONLY = {"--model", "--task", "--sizes", "--seeds", "--full-seeds", "--lrs", "--lr-grid-extend",
                         "--epochs", "--min-steps", "--tapt-steps", "--tapt-lr", "--sentiment-data", "--evaluations"}


def base_command(path: str, flag: str, inp: dict, tmp: Path) -> tuple[list, list[Path]]:
    """A valid invocation of ``path`` (the option under test aside) and the output paths it would write."""
    if path == "tokenizer train":
        out = tmp / "tok"
        return ["tokenizer", "train", "--input", inp["tok_corpus"], "--out", out, "--vocab-size", "40", "--threads",
                "1", "--quiet"], [out]
    if path == "data prepare":
        out = tmp / "store"
        return ["data", "prepare", "--input", inp["corpus"], "--tokenizer", inp["tok"], "--out", out,
                "--no-progress"], [out]
    if path == "data inspect":
        return ["data", "inspect", inp["store"], "--sample", "2"], []
    if path == "pretrain":
        out = tmp / "run"
        return ["pretrain", "--preset", "tiny", "--data", inp["store"], "--out", out, "--max-steps", "1",
                "--batch-size", "2", "--micro-batch", "2", "--seq-len", "32", "--max-predictions", "5",
                "--no-progress"], [out]
    if path == "gate":
        out = tmp / "gate"
        return ["gate", "--preset", "tiny", "--data", inp["store"], "--out", out, "--max-steps", "4",
                "--warmup-steps", "1", "--after-warmup", "1", "--batch-size", "2", "--seq-len", "32",
                "--max-predictions", "5", "--proxy-seq-len", "32", "--no-progress"], [out]
    if path == "finetune":
        out = tmp / "ft"
        return ["finetune", "classify", "--model", inp["model"], "--data", inp["cls"], "--out", out, "--max-steps",
                "1", "--batch-size", "4", "--no-progress"], [out]
    if path == "evaluate":
        out = tmp / "rows.jsonl"
        return ["evaluate", "--model", inp["ft"], "--data", inp["dev"], "--output", out, "--no-progress"], [out]
    if path == "predict":
        out = tmp / "pred.jsonl"
        return ["predict", "--model", inp["ft"], "--input", inp["predict_in"], "--output", out,
                "--no-progress"], [out]
    if path == "embed":
        out = tmp / "emb.npy"
        return ["embed", "--model", inp["model"], "--input", inp["embed_in"], "--output", out, "--no-progress"], [out]
    if path == "fill-mask":
        out = tmp / "filled.jsonl"
        return ["fill-mask", "--model", inp["model"], "--text", "the [MASK] was long", "--top-k", "2"], [out]
    if path == "export onnx":
        out = tmp / "m.onnx"
        return ["export", "onnx", "--model", inp["model"], "--out", out, "--no-verify"], [out]
    if path == "evaluate-pretraining":
        out = tmp / "intrinsic.json"
        return ["evaluate-pretraining", inp["model"], "--data", inp["eval_store"], "--examples", "4", "--batch-size",
                "2", "--output", out, "--no-progress"], [out]
    if path == "analyze transitions":
        out = tmp / "t.png"
        return ["analyze", "transitions", inp["model"], "--data", inp["eval_store"], "--examples", "4",
                "--batch-size", "2", "--out", out, "--no-progress"], [out, out.with_suffix(".csv")]
    if path == "experiment" and flag in SPEEDUP_ONLY:
        out = tmp / "speedup"
        return ["experiment", "speedup", "--out", out, "--steps", "1", "--presets", "tiny", "--reference", "tiny",
                "--micro-batch", "1", "--seq-len", "16", "--untimed-steps", "1", "--processes", "1"], [out]
    if path == "experiment" and flag in LABEL_EFFICIENCY_ONLY:
        out, data = tmp / "label-efficiency", inp.get("le_data", Path("/placeholder"))
        return ["experiment", "label-efficiency", "--out", out, "--model", inp["model"], "--task", "classify",
                "--sentiment-data", data,
                "--sizes", "4,all", "--seeds", "1", "--full-seeds", "1", "--lrs", "1e-4", "--lr-grid-extend", "0",
                "--epochs", "1", "--min-steps", "1", "--no-control", "--no-bag-of-words"], [out]
    if path == "experiment":
        out = tmp / "experiment"
        return ["experiment", "sentence-objective", "--out", out, "--corpus", inp["corpus"], "--tokenizer",
                inp["tok"], "--steps", "1", "--hidden-size", "32", "--num-layers", "1", "--embedding-size", "16",
                "--seq-len", "32", "--batch", "2", "--eval-examples", "4", "--sentiment-steps", "1", "--mc-steps",
                "1", "--finetune-batch", "2", "--max-train-examples", "4", "--max-eval-examples", "4",
                "--heldout-every", "4"], [out]
    if path == "params":
        return ["params", "--preset", "tiny"], []
    if path == "tokenizer encode":
        return ["tokenizer", "encode", "--tokenizer", inp["tok"], "--text", "the film was good"], []
    if path == "convert tf":
        out = tmp / "converted"
        return ["convert", "tf", "--checkpoint", TF_PRETRAIN / "model.ckpt-best", "--config",
                TF_PRETRAIN / "albert_config.json", "--out", out], [out]
    if path == "plot":
        out = tmp / "curves.png"
        return ["plot", inp["run"], "--out", out], [out]
    if path == "push":  # the work (the upload) is stopped by the test before any request
        return ["push", inp["ft"], "me/albert"], []
    raise KeyError(path)
