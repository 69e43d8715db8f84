"""A held-out battery of bad input for every command: each case is refused with one line on stderr
(``litebert CMD: error: ...``, exit status 2, no traceback, no "internal error") that names the flag or the file,
and nothing is written where it must not be.

  a. zero and negative values of every numeric option of every command (enumerated from the parsers);
  b. outputs that alias inputs (equal to one, inside one, holding one);
  c. output paths that cannot be followed (a symbolic link loop) or written (/sys);
  d. two writers of one run folder (the lock), and no stuck lock once the holder is killed;
  e. experiment inputs: corpus files that cannot be decoded, a damaged experiment.json, a device this machine lacks;
  f-h. fine-tuning and prediction with inconsistent models, labels and data;
  i. model shapes too large to build, refused before any memory is spent (in a child process with an address-space
     limit).

The inputs (a tokenizer, token stores, a tiny pretraining run, a fine-tuned tiny model, data files) are the session
fixture `inp` (tests/system/conftest.py), shared with the other bad-input tests of tests/system/.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

from helpers import REPO, contents
from helpers.battery import base_command, cli, one_line_error, parser_leaves, pretrain_argv
from litebert.cli import COMMANDS, Parser

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


@pytest.fixture
def no_work(monkeypatch):
    """Reaching `litebert.folders.begin` (the first write of an output folder) fails the test at once: a bad value
    must be refused before any work (and a missing check costs no training time)."""
    from litebert import folders

    def begin(plan_, **info):
        raise AssertionError(f"reached folders.begin for {plan_.out}: the bad value was not refused before work")

    monkeypatch.setattr(folders, "begin", begin)


# ---------------------------------------------------------------------------------------------------- a. numbers
# Options whose documented range includes 0 (each command's --help); every other numeric option refuses 0, and every
# numeric option refuses -1. The seeds of evaluate-pretraining and analyze transitions are seeds like the others'
# (documented ">= 0" by their ranges), so 0 is a valid value there too.
ZERO_OK = {
    "pretrain": {"--warmup-steps", "--eval-every", "--save-every", "--keep-last", "--weight-decay", "--short-seq-prob",
                 "--seed", "--data-workers"},
    "gate": {"--warmup-steps", "--weight-decay", "--short-seq-prob", "--seed"},
    "finetune": {"--warmup-steps", "--warmup-proportion", "--save-every", "--seed", "--dropout", "--lr-grid-extend",
                 "--weight-decay", "--label-smoothing-factor"},
    "data inspect": {"--sample", "--show", "--seed", "--epoch", "--max-predictions", "--masked-lm-prob",
                     "--short-seq-prob"},
    "tokenizer train": {"--input-sentence-size", "--seed"},
    "evaluate": {"--null-threshold"},
    "experiment": {"--seed", "--data-workers", "--lr-grid-extend", "--tapt-steps"},
    "evaluate-pretraining": {"--seed"},
    "analyze transitions": {"--seed"},
}
# Comma-separated integer lists (their parser type is a function, not int): numeric all the same.
LIST_OPTIONS = {("experiment", "--processes")}
# Bugs in litebert (found by this battery): {(command, option, value): what happens}
KNOWN_BUGS: dict = {}


def _numeric_hint(hint) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_numeric_hint(a) for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return all(_numeric_hint(a) for a in typing.get_args(hint) if a is not Ellipsis)
    return hint in (int, float)


def numeric_config_fields() -> set[str]:
    from litebert.config import AlbertConfig
    from litebert.experiments.runner import Settings
    from litebert.finetuning.run import FinetuneConfig
    from litebert.pretraining.config import TrainConfig

    out = set()
    for cls in (TrainConfig, FinetuneConfig, Settings, AlbertConfig):
        hints = typing.get_type_hints(cls)
        out |= {f.name for f in dataclasses.fields(cls) if _numeric_hint(hints[f.name])}
    return out


def command_parsers():
    """(command path, [options]) of every leaf command, its parser built as `litebert.cli.main` builds it."""
    for name, (module_name, help_) in COMMANDS.items():
        module = importlib.import_module(module_name)
        parser = Parser(prog=f"litebert {name}", description=help_)
        if hasattr(module, "configure_command"):
            module.configure_command(name, parser)
        else:
            module.configure(parser)
        yield from parser_leaves(parser, (name,))


def numeric_cases() -> list:
    fields = numeric_config_fields()
    cases = []
    for path, actions in command_parsers():
        canonical = {}  # dest -> the flag errors name: the first action's (an earlier name is a hidden second one)
        for action in actions:
            canonical.setdefault(action.dest, max(action.option_strings, key=len))
        for action in actions:
            flag = max(action.option_strings, key=len)
            if action.nargs == 0 or flag == "--help":
                continue
            numeric = action.type in (int, float) or action.dest in fields or (path, flag) in LIST_OPTIONS
            if not numeric:
                continue
            for value in ("-1", "0"):
                if value == "0" and flag in ZERO_OK.get(path, ()):
                    continue
                bug = KNOWN_BUGS.get((path, flag, value))
                marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
                cases.append(pytest.param(path, flag, value, canonical[action.dest],
                                          id=f"{path.replace(' ', '-')}{flag}={value}", marks=marks))
    return cases


NUMERIC_CASES = numeric_cases()


# Options that exclude one of the base command's: {option under test: base option dropped}
EXCLUDES = {"--minutes": "--steps"}


def with_option(argv: list, flag: str, value: str) -> list:
    argv = list(argv)
    drop = EXCLUDES.get(flag)
    if drop in argv:
        i = argv.index(drop)
        del argv[i:i + 2]
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


def test_every_numeric_option_is_covered():
    """The enumeration finds the options of every command that has numeric ones (a guard against an enumeration
    that silently finds nothing), and each has a base invocation."""
    paths = {p.values[0] for p in NUMERIC_CASES}
    assert paths >= {"tokenizer train", "data prepare", "data inspect", "pretrain", "gate", "finetune", "evaluate",
                     "predict",
                     "embed", "fill-mask", "export onnx", "evaluate-pretraining", "analyze transitions",
                     "experiment"}, paths
    flags = {(p.values[0], p.values[1]) for p in NUMERIC_CASES}
    for must in [("pretrain", "--lr"), ("pretrain", "--num-layers"), ("pretrain", "--peak-tflops"),
                 ("finetune", "--epochs"), ("experiment", "--embedding-sizes"), ("experiment", "--processes"),
                 ("predict", "--batch-tokens"), ("tokenizer train", "--character-coverage")]:
        assert must in flags, must
    placeholders = {k: Path("/placeholder") for k in ("tok_corpus", "corpus", "tok", "store", "eval_store", "model",
                                                      "cls", "dev", "ft", "predict_in", "embed_in")}
    for path in paths:
        base_command(path, "--seed", placeholders, Path("/placeholder"))


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
@pytest.mark.parametrize("path,flag,value,named", NUMERIC_CASES)
def test_zero_and_negative_values_are_refused(path, flag, value, named, inp, tmp_path, capsys):
    """``named``: the flag the error names (an earlier name of a setting, --global-batch, is named as the setting's
    flag, --batch-size)."""
    argv, outputs = base_command(path, flag, inp, tmp_path)
    code, err = cli(capsys, with_option(argv, flag, value))
    line = one_line_error(code, err, path.split()[0])
    assert named in line, f"the error does not name {named}: {line}"
    for out in outputs:
        assert not out.exists() and not out.is_symlink(), f"{out} was created"
    assert not [p.name for p in tmp_path.iterdir()], "something was written beside the output"


# ---------------------------------------------------------------------------------------------------- b. aliasing
def aliasing_cases(inp: dict, tmp: Path) -> dict:
    store, model, ft, dev = inp["store"], inp["model"], inp["ft"], inp["dev"]
    loose = tmp / "loose"  # a corpus the user keeps in a folder of their own
    loose.mkdir()
    shutil.copy(inp["corpus"], loose / "corpus.txt")
    return {
        "evaluate-output-is-data": ["evaluate", "--model", ft, "--data", dev, "--output", dev, "--overwrite",
                                    "--no-progress"],
        "embed-output-is-input": ["embed", "--model", model, "--input", inp["embed_in"], "--output", inp["embed_in"],
                                  "--overwrite", "--no-progress"],
        "predict-output-inside-model": ["predict", "--model", ft, "--input", inp["predict_in"], "--output",
                                        ft / "config.json", "--overwrite", "--no-progress"],
        "pretrain-out-is-data": pretrain_argv(inp, store),
        "pretrain-out-inside-data": pretrain_argv(inp, store / "run"),
        "pretrain-out-holds-data": pretrain_argv(inp, store.parent),
        "pretrain-out-holds-data-overwrite": pretrain_argv(inp, store.parent, "--overwrite"),
        "finetune-out-is-model": ["finetune", "classify", "--model", model, "--data", inp["cls"], "--out", model,
                                  "--max-steps", "1", "--no-progress"],
        "finetune-out-is-model-overwrite": ["finetune", "classify", "--model", model, "--data", inp["cls"], "--out",
                                            model, "--max-steps", "1", "--overwrite", "--no-progress"],
        "data-prepare-out-holds-input": ["data", "prepare", "--input", loose / "corpus.txt", "--tokenizer", inp["tok"],
                                         "--out", loose, "--no-progress"],
        "data-prepare-out-holds-input-overwrite": ["data", "prepare", "--input", loose / "corpus.txt", "--tokenizer",
                                                   inp["tok"], "--out", loose, "--overwrite", "--no-progress"],
        "tokenizer-train-out-holds-input": ["tokenizer", "train", "--input", loose / "corpus.txt", "--out", loose,
                                            "--vocab-size", "40", "--threads", "1", "--quiet"],
        "tokenizer-train-out-holds-input-overwrite": ["tokenizer", "train", "--input", loose / "corpus.txt", "--out",
                                                      loose, "--vocab-size", "40", "--threads", "1", "--quiet",
                                                      "--overwrite"],
        "export-out-inside-model": ["export", "onnx", "--model", model, "--out", model / "model.onnx", "--no-verify"],
        "analyze-out-inside-model": ["analyze", "transitions", model, "--data", inp["eval_store"], "--examples", "4",
                                     "--out", model / "t.png", "--no-progress"],
        "evaluate-pretraining-output-is-config": ["evaluate-pretraining", model, "--data", inp["eval_store"],
                                                  "--examples", "4", "--output", model / "config.json",
                                                  "--overwrite", "--no-progress"],
    }


ALIASING = ["evaluate-output-is-data", "embed-output-is-input", "predict-output-inside-model", "pretrain-out-is-data",
            "pretrain-out-inside-data", "pretrain-out-holds-data", "pretrain-out-holds-data-overwrite",
            "finetune-out-is-model", "finetune-out-is-model-overwrite", "data-prepare-out-holds-input",
            "data-prepare-out-holds-input-overwrite", "tokenizer-train-out-holds-input",
            "tokenizer-train-out-holds-input-overwrite", "export-out-inside-model", "analyze-out-inside-model",
            "evaluate-pretraining-output-is-config"]


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
@pytest.mark.parametrize("case", ALIASING)
def test_outputs_aliasing_inputs_are_refused(case, inp, tmp_path, capsys):
    argv = aliasing_cases(inp, tmp_path)[case]
    before = contents(tmp_path)
    code, err = cli(capsys, argv)
    line = one_line_error(code, err, str(argv[0]))
    assert ("--output" if "--output" in argv else "--out") in line, line
    assert contents(tmp_path) == before
    assert not (inp["model"] / "t.csv").exists() and not (inp["model"] / "model.onnx").exists()


@pytest.mark.usefixtures("unchanged_inputs")
def test_analyze_keeps_a_csv_the_user_had(inp, tmp_path, capsys):
    """The numbers of `analyze transitions --out fig.png` go to fig.csv: a fig.csv already there is the user's."""
    mine = tmp_path / "t.csv"
    mine.write_bytes(b"my,own\n1,2\n")
    code, err = cli(capsys, ["analyze", "transitions", inp["model"], "--data", inp["eval_store"], "--examples", "4",
                             "--out", tmp_path / "t.png", "--no-progress"])
    line = one_line_error(code, err, "analyze")
    assert "t.csv" in line and "--overwrite" in line, line
    assert mine.read_bytes() == b"my,own\n1,2\n" and not (tmp_path / "t.png").exists()


# ---------------------------------------------------------------------------------------------------- c. paths
def _loop(tmp: Path) -> Path:
    a, b = tmp / "loop_a", tmp / "loop_b"
    a.symlink_to(b)
    b.symlink_to(a)
    return a


LOOP_CASES = {
    "pretrain": lambda inp, out: pretrain_argv(inp, out),
    "data-prepare": lambda inp, out: ["data", "prepare", "--input", inp["corpus"], "--tokenizer", inp["tok"], "--out",
                                      out, "--no-progress"],
    "tokenizer-train": lambda inp, out: ["tokenizer", "train", "--input", inp["tok_corpus"], "--out", out,
                                         "--vocab-size", "40", "--threads", "1", "--quiet"],
    "predict": lambda inp, out: ["predict", "--model", inp["ft"], "--input", inp["predict_in"], "--output", out,
                                 "--no-progress"],
}


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
@pytest.mark.parametrize("case", sorted(LOOP_CASES))
def test_output_that_is_a_symlink_loop(case, inp, tmp_path, capsys):
    out = _loop(tmp_path)
    argv = LOOP_CASES[case](inp, out)
    before = contents(tmp_path)
    code, err = cli(capsys, argv)
    line = one_line_error(code, err, str(argv[0]))
    assert "loop_a" in line, line
    assert contents(tmp_path) == before


SYS_CASES = {k: LOOP_CASES[k] for k in ("pretrain", "data-prepare", "tokenizer-train")}


@pytest.fixture(scope="module")
def sys_refuses_writes():
    probe = Path("/sys") / f"litebert-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return True
    probe.rmdir()
    return False


@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("case", sorted(SYS_CASES))
def test_output_under_sys(case, inp, capsys, sys_refuses_writes):
    if not sys_refuses_writes:
        pytest.skip("this machine lets /sys be written")
    out = Path("/sys") / f"litebert-test-{case}-{os.getpid()}"
    argv = SYS_CASES[case](inp, out)
    code, err = cli(capsys, argv)
    line = one_line_error(code, err, str(argv[0]))
    assert str(out) in line, line
    assert not out.exists()
    assert not list(Path("/sys").glob(f".{out.name}*"))


# ---------------------------------------------------------------------------------------------------- d. the lock
HOLD = ("import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n")


def test_a_second_writer_is_refused_and_a_killed_one_leaves_no_lock(inp, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(inp["run"], run, symlinks=True)
    # the run's own settings, extended by a step: it has to write (and so lock) the folder
    argv = ["pretrain", "--preset", "tiny", "--data", inp["store"], "--out", run, "--resume", "--max-steps", "3",
            "--batch-size", "4", "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10",
            "--warmup-steps", "1", "--save-every", "2", "--eval-every", "0", "--seed", "3", "--no-progress"]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = contents(run)
        code, err = cli(capsys, argv)
        line = one_line_error(code, err, "pretrain")
        assert "another litebert process" in line, line
        assert contents(run) == before
    finally:
        holder.kill()
        holder.wait()
    code, err = cli(capsys, argv)
    assert code == 0, err
    from litebert.folders import read_marker

    assert read_marker(run)["complete"] is True and read_marker(run)["step"] == 3


# ---------------------------------------------------------------------------------------------------- e. experiment
def _experiment(inp, out, corpus, *extra):
    argv, _ = base_command("experiment", "--steps", inp, out.parent)
    argv[argv.index("--out") + 1] = out
    argv[argv.index("--corpus") + 1] = corpus
    return [*argv, *extra]


@pytest.fixture
def no_arms(monkeypatch):
    """An experiment that gets past its data fails the test at once (no training time spent)."""
    from litebert.experiments import runner

    def run_arm(*a, **k):
        raise AssertionError("the experiment got past its data: the bad corpus was not refused")

    monkeypatch.setattr(runner, "run_arm", run_arm)
    monkeypatch.setattr(runner, "steps_from_minutes", run_arm)


def _docs() -> str:
    return "\n\n".join(f"Document {d} first sentence here.\nAnd its second sentence too." for d in range(12)) + "\n"


def _latin1(path: Path) -> tuple[Path, str]:
    text = _docs().encode("utf-8")
    head = b"Document zero first sentence.\nA caf\xe9 line.\n\n"  # line 2; the bad byte at offset 30 + 5
    path.write_bytes(head + text)
    return path, ":2"


def _truncated_xz(path: Path) -> tuple[Path, str]:
    data = lzma.compress(_docs().encode("utf-8") * 20)
    path.write_bytes(data[: len(data) // 2])
    return path, ""


def _gzip_named_txt(path: Path) -> tuple[Path, str]:
    """Gzip data under a .txt name. Readers recognise compression by its magic bytes, whatever the name (documented:
    text_input.open_binary), so whole gzip data named .txt is simply read; the refusal is for gzip data that does not
    decompress (here: cut in half), named as the corrupt gzip file it is."""
    data = gzip.compress(_docs().encode("utf-8") * 20)
    path.write_bytes(data[: len(data) // 2])
    return path, ""


CORPUS_FAULTS = {"latin1-byte": ("corpus.txt", _latin1), "truncated-xz": ("corpus.txt.xz", _truncated_xz),
                 "gzip-named-txt": ("corpus.txt", _gzip_named_txt)}


@pytest.mark.usefixtures("no_arms", "unchanged_inputs")
@pytest.mark.parametrize("fault", sorted(CORPUS_FAULTS))
def test_experiment_corpus_faults(fault, inp, tmp_path, capsys):
    name, make = CORPUS_FAULTS[fault]
    corpus, where = make(tmp_path / name)
    out = tmp_path / "exp"
    code, err = cli(capsys, _experiment(inp, out, corpus))
    line = err.strip().splitlines()[-1]
    assert f"{corpus}{where}" in line, line  # (holds today)
    if fault == "latin1-byte":
        assert "byte offset 35" in line, line
    one_line_error(code, err, "experiment")
    assert not out.exists(), "the refused experiment created --out"


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
def test_experiment_with_damaged_settings_record(inp, tmp_path, capsys):
    from litebert import folders

    out = tmp_path / "exp"
    out.mkdir()
    (out / folders.OWNER_FILE).write_text(json.dumps({"kind": "experiment", "complete": False}))
    (out / "experiment.json").write_text(json.dumps({"settings": [1, 2]}))
    (out / "data").mkdir()
    before = contents(out)
    code, err = cli(capsys, _experiment(inp, out, inp["corpus"]))
    line = one_line_error(code, err, "experiment")
    assert "experiment.json" in line, line
    assert contents(out) == before


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
def test_experiment_on_a_device_this_machine_lacks(inp, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "exp"
    code, err = cli(capsys, _experiment(inp, out, inp["corpus"], "--device", "cuda"))
    line = one_line_error(code, err, "experiment")
    assert "--device" in line or "cuda" in line, line
    assert not out.exists()


# ---------------------------------------------------------------------------------------------------- f-h. tasks
@pytest.mark.usefixtures("no_work", "unchanged_inputs")
def test_finetune_tokenizer_larger_than_the_model_vocabulary(inp, tmp_path, capsys):
    import torch

    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining

    model = tmp_path / "small_vocab"
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=500)).save_pretrained(model)
    shutil.copy(inp["tok"] / "spiece.model", model / "spiece.model")  # 1000 pieces
    out = tmp_path / "ft"
    code, err = cli(capsys, ["finetune", "classify", "--model", model, "--data", inp["cls"], "--out", out,
                             "--max-steps", "1", "--no-progress"])
    line = one_line_error(code, err, "finetune")
    assert "vocab" in line.lower() and "tokenizer" in line.lower() and "500" in line, line
    assert not out.exists()


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
def test_finetune_duplicate_labels(inp, tmp_path, capsys):
    out = tmp_path / "ft"
    code, err = cli(capsys, ["finetune", "classify", "--model", inp["model"], "--data", inp["cls"], "--out", out,
                             "--labels", "pos,pos,neg", "--max-steps", "1", "--no-progress"])
    line = err.strip().splitlines()[-1]  # argparse's usage, then its one error line (the list is parsed there)
    assert code == 2 and "Traceback" not in err and line.startswith("litebert finetune: error: "), err
    assert "--labels" in line and "pos" in line, line
    assert not out.exists()


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
def test_finetune_regression_with_a_nan_label(inp, tmp_path, capsys):
    data = tmp_path / "scores.csv"
    data.write_text("text,label\na good film,0.5\nan awful plot,nan\nthe story,1.0\n")
    out = tmp_path / "ft"
    code, err = cli(capsys, ["finetune", "regress", "--model", inp["model"], "--data", data, "--dev", data, "--out",
                             out, "--max-steps", "1", "--no-progress"])
    line = one_line_error(code, err, "finetune")
    assert f"{data}:3" in line, line
    assert not out.exists()


@pytest.mark.usefixtures("unchanged_inputs")
def test_predict_with_labels_edited_to_another_length(inp, tmp_path, capsys):
    ft = tmp_path / "ft"
    shutil.copytree(inp["ft"], ft)
    meta = json.loads((ft / "finetune.json").read_text())
    assert len(meta["labels"]) == 2
    meta["labels"] = ["neg", "pos", "neutral"]
    (ft / "finetune.json").write_text(json.dumps(meta))
    out = tmp_path / "pred.jsonl"
    code, err = cli(capsys, ["predict", "--model", ft, "--input", inp["predict_in"], "--output", out,
                             "--no-progress"])
    line = one_line_error(code, err, "predict")
    assert "labels" in line, line
    assert not out.exists() and not list(tmp_path.glob(".pred.jsonl*"))


# ---------------------------------------------------------------------------------------------------- i. sizes
HUGE = [("num_hidden_layers", "--num-layers", 10 ** 9), ("hidden_size", "--hidden-size", 10 ** 7),
        ("intermediate_size", "--intermediate-size", 10 ** 9)]

CHILD = r"""
import contextlib, io, json, os, sys, tempfile, time
import litebert.pretraining.cli, litebert.pretraining.run  # imported before the forks: each case pays only for itself
from litebert.cli import main

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

cases = json.loads(sys.argv[1])
results = {}
for name, argv in cases.items():
    report = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    base = rss_mb()
    pid = os.fork()
    if pid == 0:
        err = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                if argv[0] == "--allocate-mb":  # the control: memory really used shows in the measure
                    block = b"\x01" * (int(argv[1]) << 20)
                    code = 0
                else:
                    code = main(argv)
            except SystemExit as e:
                code = e.code
            except BaseException as e:
                code, _ = 99, err.write(f"{type(e).__name__}: {e}")
        with open(report, "w") as f:
            json.dump({"code": code, "err": err.getvalue(), "seconds": time.perf_counter() - start}, f)
        os._exit(0)
    _, status, usage = os.wait4(pid, 0)
    with open(report) as f:
        r = json.load(f) if os.path.getsize(report) else {"code": None, "err": f"child died: status {status}"}
    os.unlink(report)
    r["grew_mb"] = usage.ru_maxrss / 1024 - base  # the child's peak above what it inherited
    results[name] = r
print(json.dumps(results))
"""


def _limit_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.fixture(scope="module")
def huge_models(inp, tmp_path_factory):
    """Every oversized model of the battery, each in a process forked from one child under a 3 GiB address-space
    limit; its resident-set peak (ru_maxrss from wait4) above what it inherited shows what it allocated."""
    tmp = tmp_path_factory.mktemp("huge")
    base = json.loads(inp["model_config"].read_text())
    cases = {}
    for field, flag, value in HUGE:
        config = tmp / f"{field}.json"
        config.write_text(json.dumps({**base, field: value}))
        argv = pretrain_argv(inp, tmp / f"run-{field}")
        i = argv.index("--preset")
        argv[i:i + 2] = ["--model-config", str(config)]
        cases[f"model-config-{field}"] = [str(a) for a in argv]
    cases["flag-hidden-size"] = [str(a) for a in pretrain_argv(inp, tmp / "run-flag", "--hidden-size", "10000000")]
    cases["control"] = ["--allocate-mb", "400"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], capture_output=True, text=True, env=env,
                          preexec_fn=_limit_memory, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), tmp


def test_the_memory_measure_sees_an_allocation(huge_models):
    results, _ = huge_models
    assert results["control"]["code"] == 0 and results["control"]["grew_mb"] > 300, results["control"]


@pytest.mark.parametrize("case,field,flag", [
    *[pytest.param(f"model-config-{f}", f, fl, id=f"model-config-{f}") for f, fl, _ in HUGE],
    pytest.param("flag-hidden-size", "hidden_size", "--hidden-size", id="flag-hidden-size")])
def test_huge_model_shapes_are_refused_before_allocating(case, field, flag, huge_models):
    results, tmp = huge_models
    r = results[case]
    line = one_line_error(r["code"], r["err"], "pretrain")
    assert field in line or flag in line, line  # the field, shown as its flag where it has one
    if case.startswith("flag"):
        assert flag in line and "10000000" in line, line
    assert r["seconds"] < 10, f"refused only after {r['seconds']:.1f} s"
    assert r["grew_mb"] < 300, f"the peak RSS grew by {r['grew_mb']:.0f} MB: the model was (partly) built first"
    assert not [p for p in tmp.iterdir() if p.name.startswith("run-")]


MODEL_CASES = [path for path, actions in command_parsers()
               if any("--model" in a.option_strings for a in actions)]


@pytest.mark.usefixtures("no_work", "unchanged_inputs")
@pytest.mark.parametrize("path", MODEL_CASES)
def test_a_missing_model_is_named_as_a_model(path, inp, tmp_path, capsys):
    """Every command with --model says a missing one is no model folder, naming --model (it used to be reported by
    whatever the command read first: its tokenizer, "not found")."""
    argv, outputs = base_command(path, "--model", inp, tmp_path)
    code, err = cli(capsys, with_option(argv, "--model", str(tmp_path / "no-such-model")))
    line = one_line_error(code, err, path.split()[0])
    assert "--model" in line and "no such model folder" in line, line
    for out in outputs:
        assert not out.exists()
