"""A refused command leaves its output folder exactly as it was, and the refusal comes from the run-folder planner.

For every command that writes a folder (pretrain, finetune, data prepare, tokenizer train, convert tf, experiment)
and every state of ``--out`` that must be refused:

    file            --out is a regular file
    user-folder     a non-empty folder the user made (files at two depths)
    other-kind      a folder holding another kind of litebert output
    own-finished    this kind's finished output, without --resume/--overwrite (experiment: re-run with other
                    settings, since re-running an experiment always continues it)
    user-file-deep  this kind's output with a user's file added below it, given --overwrite (experiment, which has
                    no --overwrite: its experiment.json damaged)
    resume-overwrite  this kind's output with both --resume and --overwrite (the commands that have both)

the command exits 2 with one stderr line, `litebert.folders.plan` was asked about --out, and a snapshot of --out
(every path with its bytes and modification time, the folder itself included) is identical before and after.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import snapshot
from helpers.battery import TF_PRETRAIN, base_command, cli, ok, one_line_error, pretrain_argv
from litebert import folders

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend




@pytest.fixture(scope="module")
def outputs(inp, tmp_path_factory) -> dict:
    """A finished output of every kind: {kind: folder}, from the shared battery inputs plus a trained tokenizer,
    a converted official checkpoint and an experiment folder (its record written as a run of the experiment
    command would write it: running one is minutes of training)."""
    root = tmp_path_factory.mktemp("kinds")
    tok = root / "tokenizer"
    assert ok(["tokenizer", "train", "--input", inp["tok_corpus"], "--out", tok, "--vocab-size", "40", "--threads", "1",
               "--quiet"])
    converted = root / "converted"
    assert ok(["convert", "tf", "--checkpoint", TF_PRETRAIN / "model.ckpt-best", "--config",
               TF_PRETRAIN / "albert_config.json", "--out", converted])
    experiment = root / "experiment"
    _fake_experiment(inp, experiment)
    return {"inp": inp, "pretraining-run": inp["run"], "fine-tuned-model": inp["ft"], "token-store": inp["store"],
            "tokenizer": tok, "model": converted, "experiment": experiment}


def _fake_experiment(inp: dict, out: Path) -> None:
    """A finished sentence-objective experiment folder as `run_experiment` leaves it (settings, data, results),
    with the settings of `experiment_argv`."""
    from litebert.cli import Parser
    from litebert.experiments import cli as experiment_cli

    parser = Parser(prog="litebert experiment")
    experiment_cli.configure_command("experiment", parser)
    argv, _ = base_command("experiment", "--steps", inp, out.parent)
    args = parser.parse_args([str(a) for a in argv[1:]])
    recorded = experiment_cli.settings(args)
    out.mkdir()
    (out / "experiment.json").write_text(json.dumps({"settings": recorded.to_json()}))
    text = out / "data" / "text"
    text.mkdir(parents=True)
    (text / "train.txt").write_text("one document\n")
    (text / "heldout.txt").write_text("another document\n")
    (out / "results.json").write_text(json.dumps({"experiment": "sentence-objective", "arms": []}))
    (out / "results.md").write_text("| Model |\n")
    folders.mark(out, "experiment", complete=True, experiment="sentence-objective")


# writer -> (its output kind, another kind's output, the file a user adds below its output)
WRITERS = {
    "pretrain": ("pretraining-run", "token-store", "model/README.md"),
    "finetune": ("fine-tuned-model", "pretraining-run", "checkpoints/notes.txt"),
    "data-prepare": ("token-store", "tokenizer", "tokenizer/notes.txt"),
    "tokenizer-train": ("tokenizer", "token-store", "mine/notes.txt"),
    "convert-tf": ("model", "fine-tuned-model", "mine/notes.txt"),
    "experiment": ("experiment", "pretraining-run", None),
}
RESUMABLE = {"pretrain", "finetune"}  # the writers with both --resume and --overwrite
STATES = ["file", "user-folder", "other-kind", "own-finished", "user-file-deep", "resume-overwrite"]


def command(writer: str, inp: dict, out: Path, scratch: Path) -> list:
    if writer == "pretrain":
        return pretrain_argv(inp, out)
    if writer == "convert-tf":
        return ["convert", "tf", "--checkpoint", TF_PRETRAIN / "model.ckpt-best", "--config",
                TF_PRETRAIN / "albert_config.json", "--out", out]
    path = {"data-prepare": "data prepare", "tokenizer-train": "tokenizer train"}.get(writer, writer)
    argv, _ = base_command(path, "--seed", inp, scratch)
    flag = "--out"
    argv[argv.index(flag) + 1] = out
    return argv


def cases():
    for writer in WRITERS:
        for state in STATES:
            if state == "resume-overwrite" and writer not in RESUMABLE:
                continue
            yield pytest.param(writer, state, id=f"{writer}-{state}")


def prepare(writer: str, state: str, outputs: dict, out: Path, argv: list) -> list:
    """Put ``out`` in ``state``; returns the command line to run."""
    own, other, deep = WRITERS[writer]
    if state == "file":
        out.write_text("a file of the user's\n")
    elif state == "user-folder":
        (out / "sub").mkdir(parents=True)
        (out / "notes.txt").write_text("mine\n")
        (out / "sub" / "deep.txt").write_text("also mine\n")
    elif state == "other-kind":
        shutil.copytree(outputs[other], out, symlinks=True)
    else:
        shutil.copytree(outputs[own], out, symlinks=True)
    if state == "own-finished" and writer == "experiment":
        i = argv.index("--batch")
        argv = [*argv[:i + 1], "3", *argv[i + 2:]]  # other settings than the folder's
    if state == "user-file-deep":
        if writer == "experiment":
            (out / "experiment.json").write_text(json.dumps({"settings": [1, 2]}))
        else:
            (out / deep).parent.mkdir(parents=True, exist_ok=True)
            (out / deep).write_text("the user's own file\n")
            argv = [*argv, "--overwrite"]
    if state == "resume-overwrite":
        argv = [*argv, "--resume", "--overwrite"]
    return argv


@pytest.fixture
def planned(monkeypatch):
    """The folders `litebert.folders.plan` was asked about; reaching `folders.begin` fails the test at once."""
    seen: list[Path] = []
    real = folders.plan

    def plan(out, *args, **kwargs):
        seen.append(Path(out))
        return real(out, *args, **kwargs)

    def begin(plan_, **info):
        raise AssertionError(f"reached folders.begin for {plan_.out}: the command was not refused")

    monkeypatch.setattr(folders, "plan", plan)
    monkeypatch.setattr(folders, "begin", begin)
    return seen


@pytest.mark.parametrize("writer,state", list(cases()))
def test_a_refused_command_leaves_out_unchanged(writer, state, outputs, planned, tmp_path, capsys):
    out = tmp_path / "out"
    argv = prepare(writer, state, outputs, out, command(writer, outputs["inp"], out, tmp_path / "scratch"))
    before = snapshot(out)
    assert before, "the state was not built"
    code, err = cli(capsys, argv)
    one_line_error(code, err, str(argv[0]))
    assert snapshot(out) == before, f"the refused command changed {out}"
    assert out in planned, f"the refusal did not go through litebert.folders.plan (planned: {planned})"
    assert not (tmp_path / "scratch").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "something was written beside --out"


# A user's file anywhere in an output, under any name no layout owns, blocks --overwrite (property test).
_NAME = st.text(alphabet="abcdefghij-_", min_size=1, max_size=6)


@st.composite
def user_paths(draw, own_folders: tuple[str, ...]):
    """A relative path a user might add: below one of the output's own sub-folders or a new one, at depth 1-3,
    hidden or not, ending in a name no litebert layout owns (suffix .mine)."""
    parts = [draw(st.sampled_from(("", *own_folders)))] + draw(st.lists(_NAME, max_size=2))
    name = ("." if draw(st.booleans()) else "") + draw(_NAME) + ".mine"
    return "/".join([p for p in parts if p] + [name])


OWN_FOLDERS = {"pretrain": ("model", "checkpoints"), "data-prepare": ("tokenizer",), "tokenizer-train": ()}


@pytest.mark.parametrize("writer", sorted(OWN_FOLDERS))
def test_any_user_file_blocks_overwrite(writer, outputs, monkeypatch, capsys):
    own = WRITERS[writer][0]

    @settings(max_examples=8, deadline=None, derandomize=True, database=None)
    @given(rel=user_paths(OWN_FOLDERS[writer]))
    def check(rel):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            shutil.copytree(outputs[own], out, symlinks=True)
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text("the user's\n")
            argv = [*command(writer, outputs["inp"], out, Path(tmp) / "scratch"), "--overwrite"]
            before = snapshot(out)
            code, err = cli(capsys, argv)
            line = one_line_error(code, err, str(argv[0]))
            assert "does not write" in line, line
            assert snapshot(out) == before

    def begin(plan_, **info):
        raise AssertionError(f"reached folders.begin for {plan_.out}: the command was not refused")

    monkeypatch.setattr(folders, "begin", begin)
    check()
