"""A refused command leaves ``--out`` byte-identical and writes nothing under HOME; trackers are refused before the
run folder is written, and what they write goes inside it.

Every command of the CLI's table (`litebert.cli.COMMANDS`) runs a refused invocation (a bad value) in a child
process whose HOME is an empty folder (the XDG folders, MPLCONFIGDIR, the trackers' and caches' variables unset, so
every library's default lies under that HOME); after each, HOME is listed, and the outputs are compared with their
snapshots. The tracker cases (MLflow without a tracking URI, with a server that does not answer, W&B online without
a login; also with ``--overwrite`` of an existing run; and a fine-tuning run) are refused with ``--out`` as it was. A
run that reports to
W&B (offline) and MLflow (a file store), then `plot` of it, write nothing under HOME either; and ``--overwrite``
refuses, deleting nothing, a run whose ``wandb/`` holds a user's file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import litebert
from helpers import snapshot
from litebert.cli import COMMANDS, main

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--preset", "tiny", "--max-steps", "2", "--batch-size", "8", "--micro-batch", "4", "--seq-len", "64",
        "--no-progress"]
# Where libraries write by default when these are set: unset, their defaults lie under HOME
CLEARED = ("XDG_", "WANDB_", "MLFLOW_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH_HOME", "MPLCONFIGDIR",
           "DO_NOT_TRACK")

# The child: runs each case through the CLI in one process, HOME listed after each (the first case that writes there
# is the one named)
CHILD = r"""
import contextlib, io, json, os, sys, time
from pathlib import Path
from litebert.cli import main
cases, home, results = json.loads(Path(sys.argv[1]).read_text()), Path(os.environ["HOME"]), []
for case in cases:
    for k in case.get("unset", []):
        os.environ.pop(k, None)
    os.environ.update(case.get("env", {}))
    err, start = io.StringIO(), time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(case["argv"])
        except SystemExit as e:
            rc = e.code
    results.append({"rc": rc, "err": err.getvalue()[-3000:], "seconds": time.monotonic() - start,
                    "home": sorted(str(p.relative_to(home)) for p in home.rglob("*"))})
    for k in case.get("env", {}):
        os.environ.pop(k, None)
Path(sys.argv[2]).write_text(json.dumps(results))
"""




def run_child(tmp: Path, name: str, cases: list[dict]) -> list[dict]:
    """Run ``cases`` ({"argv", "env", "unset"}) in a child with an empty HOME and working folder; their results."""
    home, cwd = tmp / f"{name}-home", tmp / f"{name}-cwd"
    home.mkdir()
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    src = str(Path(litebert.__file__).parents[1])
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join([src, env.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1",
               WANDB_SILENT="true")
    spec, results = tmp / f"{name}.json", tmp / f"{name}-results.json"
    spec.write_text(json.dumps(cases, default=str))
    done = subprocess.run([sys.executable, "-c", CHILD, str(spec), str(results)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(results.read_text())
    for case, result in zip(cases, out):
        assert result["home"] == [], (f"{case['argv'][:2]} wrote under HOME: {result['home']}", result["err"])
    assert sorted(home.rglob("*")) == [], "written under HOME as the child exited"  # (MLflow's telemetry does)
    assert list(cwd.iterdir()) == [], f"the commands wrote in their working folder: {list(cwd.iterdir())}"
    return out


@pytest.fixture(scope="module")
def setup(tiny_setup, tmp_path_factory) -> dict:
    """The tiny stores, and a pretraining run of one step (no trackers) to overwrite."""
    tmp = tmp_path_factory.mktemp("home")
    paths = tiny_setup
    run = tmp / "run"
    assert main(["pretrain", "--data", str(paths["store"]), "--out", str(run), *TINY, "--max-steps", "1",
                 "--report-to", "none"]) == 0
    return {**paths, "run": run}


def refused(result: dict) -> str:
    """The one-line error of a refused command (exit status 2)."""
    lines = [line for line in result["err"].splitlines() if line.startswith("litebert") and ": error: " in line]
    assert result["rc"] == 2 and len(lines) == 1, result
    return lines[0]


def test_every_refused_command_leaves_home_and_out_untouched(setup, tmp_path):
    missing, out = tmp_path / "missing", tmp_path / "out"
    store = str(setup["store"])
    runs = {name: tmp_path / name for name in ("overwritten", "never-wandb")}
    for run in runs.values():
        shutil.copytree(setup["run"], run, symlinks=True)
    (runs["never-wandb"] / "wandb").mkdir()
    (runs["never-wandb"] / "wandb" / "notes.txt").write_text("mine")  # a user's file in a run that never used W&B
    texts = tmp_path / "train.jsonl"  # a fine-tuning set the pretrained model reads
    texts.write_text("".join(json.dumps({"text": f"{w} film", "label": w}) + "\n" for w in ["good", "bad"] * 8))
    commands = {  # command -> refused invocations: argv, environment
        "params": [["params", "--preset", "no-such-preset"]],
        "tokenizer": [["tokenizer", "train", "--input", missing, "--out", out / "tok"],
                      ["tokenizer", "encode", "--tokenizer", missing, "--text", "hi"]],
        "data": [["data", "prepare", "--input", missing, "--tokenizer", missing, "--out", out / "store"],
                 ["data", "inspect", missing]],
        "pretrain": [["pretrain", "--preset", "tiny", "--data", missing, "--out", out / "run"]],
        "gate": [["gate", "--preset", "tiny", "--data", missing, "--out", out / "gate"]],
        "convert": [["convert", "tf", "--checkpoint", missing, "--out", out / "converted"]],
        "finetune": [["finetune", "sst-2", "--model", missing, "--data", missing, "--out", out / "ft"],
                     ["finetune", "sst-2", "--model", missing, "--data", missing, "--out", out / "ft",
                      "--push-to-hub", "me/albert"]],  # no token (HOME is empty): refused before anything
        "push": [["push", missing, "me/albert"]],
        "sample": [["sample", "--out", texts / "under-a-file"]],  # a folder inside a file: refused
        "evaluate": [["evaluate", "--model", missing, "--data", missing]],
        "predict": [["predict", "--model", missing, "--input", missing, "--output", out / "p.jsonl"]],
        "embed": [["embed", "--model", missing, "--input", missing, "--output", out / "e.npy"]],
        "fill-mask": [["fill-mask", "--model", missing, "--text", "a [MASK] b"]],
        "export": [["export", "onnx", "--model", missing, "--out", out / "m.onnx"]],
        "evaluate-pretraining": [["evaluate-pretraining", missing, "--data", missing]],
        "analyze": [["analyze", "transitions", missing, "--data", missing, "--out", out / "tr"]],
        "experiment": [["experiment", "sharing", "--out", out / "exp", "--steps", "0"]],
        "plot": [["plot", missing, "--out", out / "curves.png"]],
    }
    assert sorted(commands) == sorted(COMMANDS), "a command of the CLI has no refused case here"
    cases = [{"argv": argv} for argvs in commands.values() for argv in argvs]
    no_uri = {"argv": ["pretrain", "--data", store, *TINY, "--report-to", "mlflow"]}  # MLflow 3's default store
    trackers = [
        {**no_uri, "argv": no_uri["argv"] + ["--out", out / "mlflow-default"]},
        {"argv": ["pretrain", "--data", store, *TINY, "--report-to", "mlflow", "--out", out / "mlflow-server"],
         "env": {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}},  # a closed port: no server
        {"argv": ["pretrain", "--data", store, *TINY, "--report-to", "wandb", "--out", out / "wandb-online"]},
        {**no_uri, "argv": no_uri["argv"] + ["--out", runs["overwritten"], "--overwrite"]},
        {"argv": ["pretrain", "--data", store, *TINY, "--report-to", "none", "--out", runs["never-wandb"],
                  "--overwrite"]},
        {"argv": ["finetune", "classify", "--model", setup["run"] / "model", "--data", texts, "--out", out / "ft",
                  "--max-steps", "2", "--no-progress", "--report-to", "mlflow"],
         "env": {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}},
    ]
    before = {p: snapshot(p) for p in runs.values()}
    results = run_child(tmp_path, "refused", cases + trackers)
    wrong = [(case["argv"][:2], result["err"][-300:]) for case, result in zip(cases, results) if result["rc"] != 2]
    assert not wrong
    for result in results[:len(cases)]:
        refused(result)
    assert not out.exists()  # nothing of any output was made
    assert {p: snapshot(p) for p in runs.values()} == before
    default, server, online, overwrite, never, finetuned = (refused(r) for r in results[len(cases):])
    assert default.startswith("litebert pretrain: error: mlflow: cannot start the run (")
    assert "MLFLOW_TRACKING_URI" in default
    assert "cannot reach http://127.0.0.1:9" in server and results[len(cases) + 1]["seconds"] < 20
    assert "wandb: not logged in to " in online and "wandb login" in online
    assert overwrite == default.replace(str(out / "mlflow-default"), str(runs["overwritten"]))
    assert "(wandb/notes.txt)" in never and "deletes only what litebert wrote" in never
    assert finetuned.startswith("litebert finetune: error: mlflow: cannot start the run (ConnectionError: cannot "
                                "reach http://127.0.0.1:9")


def test_trackers_and_plot_write_inside_the_run_folder(setup, tmp_path):
    run, mlruns = tmp_path / "run", tmp_path / "mlruns"
    offline = {"WANDB_MODE": "offline", "MLFLOW_TRACKING_URI": f"file://{mlruns}", "MLFLOW_ALLOW_FILE_STORE": "true"}
    report = ["pretrain", "--data", str(setup["store"]), *TINY, "--out", run, "--report-to", "wandb,mlflow"]
    done, plotted = run_child(tmp_path, "tracked", [{"argv": report, "env": offline},
                                                    {"argv": ["plot", run, "--out", tmp_path / "curves.png"]}])
    assert done["rc"] == 0 and plotted["rc"] == 0, (done["err"], plotted["err"])
    assert (tmp_path / "curves.png").stat().st_size > 0 and any(mlruns.iterdir())
    wandb = run / "wandb"
    assert list((wandb / "logs").glob("core-debug-*.log"))  # W&B's own debug logs: in the run, not ~/.cache/wandb
    assert [p.name.startswith("offline-run-") for p in wandb.iterdir() if p.is_dir() and not p.is_symlink()
            and p.name != "logs"] == [True]
    # overwrite deletes what W&B wrote, never a user's file beside it: refused, nothing deleted
    (wandb / "notes.txt").write_text("mine")
    before = snapshot(run)
    assert main(["pretrain", "--data", str(setup["store"]), *TINY, "--out", str(run), "--overwrite",
                 "--report-to", "none"]) == 2
    assert snapshot(run) == before
