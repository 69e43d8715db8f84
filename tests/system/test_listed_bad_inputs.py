"""Bad inputs listed in an issue report, each refused as every refusal is (exit 2, one stderr line
``litebert CMD: error: ...`` naming the file, flag or field, no traceback) and leaving nothing behind, or (the
evaluate-pretraining count) reported as it really is.

Cases the older suites already cover are not repeated here:
  - `predict` with finetune.json's labels edited to another length: test_bad_input_battery.py::
    test_predict_with_labels_edited_to_another_length (this file adds `evaluate`, and that the line names
    finetune.json);
  - a NaN regression label: test_bad_input_battery.py::test_finetune_regression_with_a_nan_label (this file: infinity);
  - duplicate --labels: test_bad_input_battery.py::test_finetune_duplicate_labels;
  - `experiment sentence-objective --device cuda` without CUDA: test_bad_input_battery.py::
    test_experiment_on_a_device_this_machine_lacks;
  - `data prepare --out` under /sys (unwritable even for root): test_bad_input_battery.py::test_output_under_sys.

The shared inputs (a tokenizer, token stores, a tiny pretrained model, a tiny fine-tuned classifier) are the session
fixture `inp` of tests/system/conftest.py.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, contents
from helpers.battery import base_command, cli, one_line_error, pretrain_argv

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend



def nothing_in(folder: Path, *keep: str) -> None:
    """``folder`` holds only ``keep`` (no output, no temporary beside it)."""
    assert sorted(p.name for p in folder.iterdir()) == sorted(keep), sorted(p.name for p in folder.iterdir())


# ---------------------------------------------------------------------------------------------------- 1. labels
def _edited_classifier(inp: dict, folder: Path, labels: list[str]) -> Path:
    """A copy of the fine-tuned tiny classifier (2 outputs) whose finetune.json lists ``labels``."""
    ft = folder / "ft"
    shutil.copytree(inp["ft"], ft)
    meta = json.loads((ft / "finetune.json").read_text())
    assert len(meta["labels"]) == 2
    meta["labels"] = labels
    (ft / "finetune.json").write_text(json.dumps(meta))
    return ft


LABEL_EDITS = {"three": ["neg", "pos", "neutral"], "one": ["neg"]}


@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("command", ["predict", "evaluate"])
@pytest.mark.parametrize("edit", sorted(LABEL_EDITS))
def test_labels_disagreeing_with_the_head_are_refused(command, edit, inp, tmp_path, capsys):
    ft = _edited_classifier(inp, tmp_path, LABEL_EDITS[edit])
    out = tmp_path / "rows.jsonl"
    data = ["--input", inp["predict_in"]] if command == "predict" else ["--data", inp["dev"]]
    before = contents(ft)
    code, err = cli(capsys, [command, "--model", ft, *data, "--output", out, "--no-progress"])
    line = one_line_error(code, err, command)
    assert "finetune.json" in line, line
    assert not out.exists() and contents(ft) == before
    nothing_in(tmp_path, "ft")


# ---------------------------------------------------------------------------------------------------- 2. infinity
def _regress_csv(folder: Path) -> tuple[list, str]:
    data = folder / "scores.csv"
    data.write_text("text,label\na good film,0.5\nan awful plot,inf\nthe story,1.0\n")
    return ["regress", "--data", data, "--dev", data], f"{data}:3"


def _regress_jsonl(folder: Path) -> tuple[list, str]:
    data = folder / "scores.jsonl"  # JSON's non-standard Infinity, which Python's json reads as a float
    data.write_text('{"text": "a good film", "label": 0.5}\n{"text": "the story", "label": 1.0}\n'
                    '{"text": "an awful plot", "label": -Infinity}\n')
    return ["regress", "--data", data, "--dev", data], f"{data}:3"


def _stsb_dev(folder: Path) -> tuple[list, str]:
    glue = folder / "sts-b"
    glue.mkdir()
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    row = "{i}\tmain\tMSRvid\t2012\t{i:04d}\tnone\tnone\tA plane is taking off.\tAn air plane is taking off.\t{s}\n"
    (glue / "train.tsv").write_text(head + "".join(row.format(i=i, s=f"{i % 5}.000") for i in range(6)))
    (glue / "dev.tsv").write_text(head + row.format(i=0, s="1.5") + row.format(i=1, s="inf"))
    return ["sts-b", "--data", glue], f"{glue / 'dev.tsv'}:3"


REGRESSION_FILES = {"regress-csv-inf": _regress_csv, "regress-jsonl-infinity": _regress_jsonl,
                    "sts-b-dev-inf": _stsb_dev}


@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("case", sorted(REGRESSION_FILES))
def test_regression_with_an_infinite_label(case, inp, tmp_path, capsys):
    (task, *data), where = REGRESSION_FILES[case](tmp_path)
    kept = [p.name for p in tmp_path.iterdir()]
    out = tmp_path / "ft"
    code, err = cli(capsys, ["finetune", task, "--model", inp["model"], *data, "--out", out, "--max-steps", "1",
                             "--batch-size", "2", "--seq-len", "32", "--no-progress"])
    line = one_line_error(code, err, "finetune")
    assert where in line, line
    assert not out.exists()
    nothing_in(tmp_path, *kept)


# ---------------------------------------------------------------------------------------------------- 4. examples
@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("objectives", ["mlm,sop,nsp", "mlm"])
def test_evaluate_pretraining_reports_the_examples_scored(objectives, inp, tmp_path, capsys):
    from litebert.data.pretraining import PretrainingDataset
    from litebert.data.store import TokenStore

    out = tmp_path / "intrinsic.json"
    code, err = cli(capsys, ["evaluate-pretraining", inp["model"], "--data", inp["eval_store"], "--examples",
                             "1000000000", "--seq-len", "64", "--seed", "5", "--batch-size", "8", "--objectives",
                             objectives, "--output", out, "--no-progress"])
    assert code == 0, err
    report = json.loads(out.read_text())
    available = PretrainingDataset(TokenStore(inp["eval_store"]), max_seq_length=64, seed=5,
                                   short_seq_prob=0.0).num_examples
    assert 0 < available < 1000
    assert report["examples"] == available, (report["examples"], available)
    scores = report["models"]["model"]
    if "sop" in scores:
        assert scores["sop"]["total"] == scores["nsp"]["total"] == report["examples"]


# ---------------------------------------------------------------------------------------------------- 5. pretrain
PRETRAIN_CASES = {
    "fp16-on-cpu": (["--device", "cpu", "--precision", "fp16"], "--precision"),
    "global-batch-not-a-multiple": (["--batch-size", "6", "--micro-batch", "4"], "--batch-size"),
}


@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("case", sorted(PRETRAIN_CASES))
def test_pretrain_refuses_before_writing(case, inp, tmp_path, capsys):
    extra, flag = PRETRAIN_CASES[case]
    out = tmp_path / "run"
    argv = pretrain_argv(inp, out)
    for option, value in zip(extra[::2], extra[1::2]):
        if option in argv:
            argv[argv.index(option) + 1] = value
        else:
            argv += [option, value]
    code, err = cli(capsys, argv)
    line = one_line_error(code, err, "pretrain")
    assert flag in line, line
    assert not out.exists() and not out.is_symlink(), "the refused pretrain created --out"
    nothing_in(tmp_path)


# ---------------------------------------------------------------------------------------------------- 6. experiment
def _speedup(out: Path, *extra) -> list:
    return ["experiment", "speedup", "--out", out, "--steps", "1", "--micro-batch", "1", "--seq-len", "16",
            "--untimed-steps", "1", "--processes", "1", *extra]


SPEEDUP_CASES = {
    "unknown-preset": (["--presets", "albert-huge", "--reference", "albert-huge"], "--presets"),
    "no-cuda": (["--presets", "tiny", "--reference", "tiny", "--device", "cuda"], "--device"),
}


@pytest.mark.parametrize("case", sorted(SPEEDUP_CASES))
def test_experiment_speedup_refuses_before_out(case, tmp_path, capsys):
    import torch

    extra, flag = SPEEDUP_CASES[case]
    if case == "no-cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "speedup"
    code, err = cli(capsys, _speedup(out, *extra))
    line = one_line_error(code, err, "experiment")
    assert flag in line, line
    if case == "unknown-preset":
        assert "albert-huge" in line, line
    assert not out.exists(), "the refused experiment created --out"
    nothing_in(tmp_path)


# ---------------------------------------------------------------------------------------------------- 7. xz bomb
BOMB_MB = 300
MEASURE = r"""
import contextlib, io, json, sys
import torch  # imported before the measure: only what the command itself holds counts
import litebert.cli, litebert.experiments.cli, litebert.experiments.runner, litebert.data.documents, litebert.tokenizer
from litebert.cli import main

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":")) / 1024

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:  # Linux >= 4.0: VmHWM := VmRSS
        f.write("5")

def grown(run):
    reset_peak()
    base = status("VmRSS")
    result = run()
    return result, status("VmHWM") - base

try:
    reset_peak()
except OSError as e:
    print(json.dumps({"no_peak_reset": str(e)}))
    sys.exit(0)

err = io.StringIO()
def command():
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            return main(json.loads(sys.argv[1]))
        except SystemExit as e:
            return e.code

code, grew = grown(command)
_, control = grown(lambda: bytearray(b"\x01" * (100 << 20)))  # the measure sees a real 100 MB allocation
print(json.dumps({"code": code, "err": err.getvalue(), "grew_mb": grew, "control_mb": control}))
"""


def _bomb(path: Path, megabytes: int, blank_lines: bool) -> tuple[int, int]:
    """An .xz file of ``megabytes`` MB of repeated text (lines of a sentence; a blank line after each when
    ``blank_lines``, else one single document), written streaming; returns (decompressed size, documents)."""
    line = b"the quick brown fox jumps over the lazy dog and the story goes on and on without end.\n"
    unit = line + (b"\n" if blank_lines else b"")
    per_chunk = (1 << 20) // len(unit)
    chunk = unit * per_chunk
    total = chunks = 0
    with lzma.LZMAFile(path, "w", preset=0) as f:
        while total < megabytes << 20:
            f.write(chunk)
            total += len(chunk)
            chunks += 1
    assert path.stat().st_size < total // 1000  # a bomb: highly compressible
    return total, chunks * per_chunk if blank_lines else 1


def _measure(argv: list) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps([str(a) for a in argv])], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


BOMBS = {
    # many documents, too few for the held-out split asked for: counting them must stream
    "many-documents": (True, "1000000000"),
    # the case: one enormous document (no blank line), --heldout-every 2
    "one-document": (False, "2"),
}




@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("case", [
    pytest.param("many-documents", id="many-documents"),
    pytest.param("one-document", id="one-document"),
])
def test_experiment_corpus_xz_bomb_is_read_streaming(case, inp, tmp_path):
    blank_lines, every = BOMBS[case]
    corpus = tmp_path / "bomb.txt.xz"
    size, documents = _bomb(corpus, BOMB_MB, blank_lines)
    size_mb = size / (1 << 20)
    out = tmp_path / "exp"
    argv, _ = base_command("experiment", "--steps", inp, tmp_path)
    argv[argv.index("--out") + 1] = out
    argv[argv.index("--corpus") + 1] = corpus
    argv[argv.index("--heldout-every") + 1] = every
    r = _measure(argv)
    if "no_peak_reset" in r:
        pytest.skip(f"this kernel does not reset the peak RSS (/proc/self/clear_refs): {r['no_peak_reset']}")
    assert r["control_mb"] > 90, f"the measure missed a 100 MB allocation: {r}"
    line = one_line_error(r["code"], r["err"], "experiment")
    assert "--corpus" in line and f"{documents} document(s) give no held-out document" in line, line  # all read
    print(f"{case}: peak RSS grew by {r['grew_mb']:.0f} MB for a {size_mb:.0f} MB corpus; {line}")
    assert r["grew_mb"] < size_mb / 2, (f"peak RSS grew by {r['grew_mb']:.0f} MB reading a {size_mb:.0f} MB corpus "
                                        f"(compressed: {corpus.stat().st_size} bytes)")
    assert not out.exists()
    nothing_in(tmp_path, "bomb.txt.xz")


# ---------------------------------------------------------------------------------------------------- 8. read-only
def _prepare(inp: dict, out: Path) -> list:
    return ["data", "prepare", "--input", inp["corpus"], "--tokenizer", inp["tok"], "--out", out, "--no-progress"]


@pytest.mark.usefixtures("unchanged_inputs")
def test_data_prepare_into_a_read_only_folder(inp, tmp_path, capsys):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        probe = parent / "probe"
        try:
            probe.mkdir()
        except PermissionError:
            pass
        else:
            probe.rmdir()
            pytest.skip(f"a read-only folder is writable here (euid {os.geteuid()}); /sys and /proc cover this")
        out = parent / "store"
        code, err = cli(capsys, _prepare(inp, out))
        line = one_line_error(code, err, "data")
        assert "--out" in line or str(out) in line, line
        assert not out.exists() and not list(parent.iterdir())
    finally:
        parent.chmod(0o755)


@pytest.mark.usefixtures("unchanged_inputs")
def test_data_prepare_under_proc(inp, capsys):
    out = Path("/proc") / f"litebert-test-{os.getpid()}" / "store"
    code, err = cli(capsys, _prepare(inp, out))
    line = one_line_error(code, err, "data")
    assert "--out" in line or str(out) in line, line
    assert not out.exists() and not out.parent.exists()


# ---------------------------------------------------------------------------------------------------- 9. formats
@pytest.mark.usefixtures("unchanged_inputs")
@pytest.mark.parametrize("name", ["fig.csv", "fig.txt"])
def test_analyze_transitions_unsupported_plot_format(name, inp, tmp_path, capsys):
    out = tmp_path / name
    code, err = cli(capsys, ["analyze", "transitions", inp["model"], "--data", inp["eval_store"], "--examples", "4",
                             "--batch-size", "2", "--out", out, "--no-progress"])
    line = one_line_error(code, err, "analyze")
    assert "--out" in line, line
    nothing_in(tmp_path)
