"""One command-line convention across `litebert` commands: the same option names for the same things, one head
vocabulary, defaults in --help, no silent prefix abbreviations, and a "did you mean" for a mistyped name."""

import argparse
import importlib

import pytest

from litebert import cli
from litebert.heads import HEAD_NAMES


def parsers():
    """(command line, parser) of every command and sub-command, built as `litebert` builds them."""
    out = []
    for name, (module_name, help_) in cli.COMMANDS.items():
        module = importlib.import_module(module_name)
        parser = cli.Parser(prog=f"litebert {name}", description=help_)
        module.configure_command(name, parser) if hasattr(module, "configure_command") else module.configure(parser)
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    return out


PARSERS = parsers()


def options(parser):
    return {s for a in parser._actions for s in a.option_strings}


def test_one_name_for_each_setting():
    """The names the commands once spelled differently are gone everywhere; their replacements are used."""
    retired = {"--steps", "--max-seq-length", "--warmup", "--field", "--jsonl-field", "--skip-invalid-utf8",
               "--max-predictions-per-seq"}
    found = {(line, o) for line, p in PARSERS for o in options(p) & retired}
    # `experiment --steps N | --minutes M` is the interface issue #26 specifies: a budget for every arm (pretraining
    # steps) or for speedup's timed steps, not one run's --max-steps
    assert found <= {("experiment", "--steps")}
    uses = {o: sorted(line for line, p in PARSERS if o in options(p))
            for o in ("--max-steps", "--seq-len", "--warmup-steps", "--text-field", "--encoding-errors")}
    assert uses["--max-steps"] == ["finetune", "gate", "pretrain"]  # gate: the candidate's pretraining settings
    assert uses["--warmup-steps"] == ["finetune", "gate", "pretrain"]
    assert {"pretrain", "finetune", "evaluate", "predict", "embed", "data inspect"} <= set(uses["--seq-len"])
    assert {"tokenizer train", "data prepare", "embed"} <= set(uses["--text-field"])
    assert {"tokenizer train", "data prepare", "finetune", "evaluate", "predict", "embed"} <= set(
        uses["--encoding-errors"])


def test_one_vocabulary_of_head_names():
    heads = {}
    for line, p in PARSERS:
        for a in p._actions:
            if "--head" in a.option_strings:
                heads[line] = set(a.choices) - {"auto"}
    assert set(heads) == {"convert tf", "export onnx"}
    assert heads["export onnx"] == set(HEAD_NAMES)
    assert heads["convert tf"] <= set(HEAD_NAMES)


@pytest.mark.parametrize("line,parser", PARSERS, ids=[line for line, _ in PARSERS])
def test_help_shows_every_default(line, parser):
    """Each option whose default is a value has it in --help; no parser accepts abbreviations."""
    assert parser.allow_abbrev is False
    formatter = parser._get_formatter()
    for a in parser._actions:
        if a.option_strings and a.default is not None and a.default is not False and a.default != argparse.SUPPRESS:
            assert "default" in formatter._get_help_string(a), (line, a.option_strings)
    assert parser.format_help().startswith("usage:")


def test_abbreviations_are_refused(capsys):
    """argparse would take --max-step for --max-steps; a typo must not silently become another setting."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["pretrain", "--data", "d", "--out", "o", "--max-step", "3"])
    assert exit_.value.code == 2 and "unrecognized arguments: --max-step" in capsys.readouterr().err


def test_did_you_mean(capsys):
    assert cli.main(["pretrian"]) == 2
    assert "did you mean 'pretrain'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["data", "prepar"])
    assert "did you mean 'prepare'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["export", "onnx", "--model", "m", "--out", "o", "--head", "sequence-clasification"])
    assert "did you mean 'sequence-classification'" in capsys.readouterr().err


@pytest.mark.parametrize("reader", ["head -1", "true"])
@pytest.mark.parametrize("command", ["convert tf --checkpoint tests/fixtures/tf/pretrain --list", "--help"])
def test_a_closed_pipe_ends_quietly(command, reader):
    """`litebert ... | head -1` (the reader leaves after one line) and `| true` (it leaves before the first write):
    no BrokenPipeError traceback and no 'internal error' on stderr; what head read is the command's first line."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("bash") is None:
        pytest.skip("needs bash for the pipeline")
    repo = Path(__file__).resolve().parent.parent
    script = f'"$0" -m litebert.cli {command} | {reader}; echo "status ${{PIPESTATUS[0]}}" >&2'
    done = subprocess.run(["bash", "-c", script, sys.executable], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] in ("status 0", "status 1")  # 1: the pipe closed before the end
    if reader == "head -1":
        first = "bert/embeddings/LayerNorm/beta\tfloat32\t[8]" if "--list" in command else "usage: litebert"
        assert done.stdout.startswith(first) and done.stdout.count("\n") == 1
