"""Every refusal is decided before ``--out`` is touched (issue 57, item 3): every command, each of its flags (and each
positional argument) set to a wrong value, is refused with one line (no traceback, no "internal error") and its
output does not exist afterwards.

The commands and their flags are enumerated from the parsers (as `litebert.cli.main` builds them); each flag gets a
wrong value generated from what it takes (`wrong_value`): a number below any range (-1), a word that is none of its
choices, a path that does not exist for a flag that reads a file or folder, a nonsense word for the other text
flags. A positional argument is named ``<dest>`` and its value in the base invocation is found by parsing it with the
command's own parser. The base invocation of each command (`helpers.battery.base_command`) is valid, so the flag is
the only thing wrong. Work never starts: reaching `litebert.folders.begin` (the first write of an output folder), or
the upload of `litebert push` (its Hub client), fails the case. A
flag for which any text is valid (a free text such as ``--license``) is listed in `ANY_TEXT` and only has to leave
no traceback. Every case runs (some 250, about 10 s on one core: each is refused before any model runs).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from helpers.battery import base_command, cli, parser_leaves
from litebert.cli import COMMANDS, Parser, _add_offline

pytestmark = pytest.mark.usefixtures("one_thread")

# command paths that base_command knows (every leaf command that writes or reads something worth testing)
BASES = {"tokenizer train", "data prepare", "data inspect", "pretrain", "gate", "finetune", "evaluate", "predict",
         "embed", "fill-mask", "export onnx", "evaluate-pretraining", "analyze transitions", "experiment", "params",
         "tokenizer encode", "convert tf", "plot", "push"}
OUTPUTS = {"out", "output"}  # the flags under test's outputs: given by the base command
# dests that name a file or folder the command reads
READS = {"model", "models", "data", "dev", "tokenizer", "input", "corpus", "init_from", "config", "checkpoint",
         "folder", "store", "eval_data", "model_config", "resume_from", "recipe", "spm", "runs"}
# flags whose every text is a valid value (free text, a name; --text-field of a plain-text input, which has no
# fields): they must only not fail badly
ANY_TEXT = {"--license", "--datasets", "--run-name", "--text-field", "--commit-message", "--tracker-project",
            "--project", "--name", "--tags", "--device", "--text"}


def command_parser(name: str) -> Parser:
    """The parser of the command ``name``, built as `litebert.cli.main` builds it."""
    module_name, help_ = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = Parser(prog=f"litebert {name}", description=help_)
    module.configure_command(name, parser) if hasattr(module, "configure_command") else module.configure(parser)
    _add_offline(parser)
    return parser


def command_parsers():
    """(command path, [option and positional actions]) of every leaf command."""
    for name in COMMANDS:
        yield from parser_leaves(command_parser(name), (name,), positionals=True)


def flag_of(action: argparse.Action) -> str:
    """How a case names an argument: its longest flag, or ``<dest>`` for a positional one."""
    return max(action.option_strings, key=len) if action.option_strings else f"<{action.dest}>"


def wrong_value(action: argparse.Action, tmp) -> str | None:
    """A value ``action``'s flag must refuse (None: the flag takes no value, or is the output itself)."""
    if action.nargs == 0 or action.dest in OUTPUTS or action.dest == "help":
        return None
    if action.choices is not None:
        return "NOSUCH"
    if action.type in (int, float) or getattr(action, "range", None) is not None:
        return "-1"
    if action.dest in READS:
        return str(tmp / "no-such-input")
    return "NOSUCH\x1b[31m,,=:"


def all_cases() -> list[tuple[str, str]]:
    cases = []
    for path, actions in command_parsers():
        if path not in BASES:
            continue
        seen = set()
        for action in actions:
            flag = flag_of(action)
            if flag in seen or action.help == argparse.SUPPRESS:
                continue
            seen.add(flag)
            if wrong_value(action, Path("/placeholder")) is not None:
                cases.append((path, flag))
    return sorted(cases)


CASES = all_cases()
ACTIONS = {(path, flag_of(a)): a for path, actions in command_parsers() for a in actions}


@pytest.fixture
def no_work(monkeypatch):
    """Reaching `litebert.folders.begin` fails the case: a wrong value must be refused before any work."""
    from litebert import folders

    def begin(plan_, **info):
        raise RuntimeError(f"REACHED-BEGIN {plan_.out}")

    monkeypatch.setattr(folders, "begin", begin)

    class Hub:  # `litebert push`'s client: the upload is its work
        @staticmethod
        def HfApi(**kwargs):
            raise RuntimeError("REACHED-BEGIN the upload")

    monkeypatch.setattr("litebert.push._import_hub", lambda: Hub)
    monkeypatch.setattr("litebert.push._token", lambda hf: "hf_placeholder")


def check_case(path: str, flag: str, inp: dict, tmp, capsys) -> str:
    """Run the case; returns what happened ("refused", "accepted") or raises with what went wrong."""
    action = ACTIONS[(path, flag)]
    argv, outputs = base_command(path, flag, inp, tmp)
    value = wrong_value(action, tmp)
    argv = [str(a) for a in argv]
    if not action.option_strings:  # a positional: its value in the base invocation, as the parser reads it
        given = getattr(command_parser(path.split()[0]).parse_known_args(argv[1:])[0], action.dest)
        argv[argv.index(str(given[0] if isinstance(given, list) else given))] = value
    elif flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    code, err = cli(capsys, argv)
    assert "Traceback" not in err, err
    if "REACHED-BEGIN" in err or code == 0:
        assert flag in ANY_TEXT, f"{path} {flag} {value!r} was not refused before work: {err}"
        return "accepted"
    for out in outputs:
        assert not out.exists() and not out.is_symlink(), f"{path} {flag} {value!r}: {out} exists: {err}"
    lines = err.strip().splitlines()
    assert code == 2 and "internal error" not in err, f"{path} {flag} {value!r}: exit {code}: {err}"
    assert lines and lines[-1].startswith(f"litebert {path.split()[0]}") and ": error: " in lines[-1], err
    assert all(line.startswith("usage:") or line.startswith(" ") for line in lines[:-1]), err  # argparse's usage
    assert "\x1b" not in err, f"an ESC printed raw: {err!r}"
    return "refused"


def test_the_enumeration_finds_every_command_and_its_flags(inp, tmp_path, capsys, no_work):
    """A guard against an enumeration that finds nothing, and against base commands that fail by themselves (then
    every case would be "refused"): each base command, as it is, reaches its work."""
    paths = {p for p, _ in CASES}
    assert paths == BASES, BASES - paths
    assert len(CASES) > 150, len(CASES)
    assert ("finetune", "--metric") in CASES and ("fill-mask", "--tokenizer") in CASES
    for path, flag in [(p, "--seed") for p in sorted(BASES)] + [("experiment", "--micro-batch"),
                                                                 ("experiment", "--model")]:
        argv, _ = base_command(path, flag, inp, tmp_path / path.replace(" ", "-") / flag)
        code, err = cli(capsys, argv)
        assert code == 0 or "REACHED-BEGIN" in err, f"the base command of {path} ({flag}) fails by itself: {err}"


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
@pytest.mark.parametrize("path, flag", CASES, ids=[f"{p.replace(' ', '-')}{f}" for p, f in CASES])
def test_a_wrong_value_of_any_flag_is_refused_before_out(path, flag, inp, tmp_path, capsys):
    check_case(path, flag, inp, tmp_path, capsys)


def test_finetune_metric_nosuch_is_refused_before_out(inp, tmp_path, capsys, no_work):
    argv, (out,) = base_command("finetune", "--metric", inp, tmp_path)
    code, err = cli(capsys, argv + ["--metric", "NOSUCH"])
    assert code == 2 and err.startswith("litebert finetune: error: --metric NOSUCH: the classify task's dev metrics "
                                        "are "), err
    assert not out.exists()
