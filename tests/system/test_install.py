"""litebert installs into an environment of one's own. The wheel built from this checkout goes into a clean venv
that holds only torch (the build this test runs with, found where pip finds it, as `make install` finds it), with
its runtime requirements only. There ``litebert --help``, a tokenizer, a token store, a few pretraining steps and a
pipeline work and answer as the checkout does, none of the test set is installed or imported, and a missing optional
package is named with its range. Then the same again with the lowest versions the requirements' ranges allow.

Slow (three to five minutes on 2 cores: torch alone takes one to install); pip reads its own configuration
(find-links, indexes)."""

import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.version import Version

from helpers.wheel import build_wheel, run
from litebert import pipeline
from litebert.extras import canonical, parse_requirement

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# The test set and the optional packages: none is needed to train or to run a pipeline
NOT_NEEDED = ("transformers", "pytest", "hypothesis", "datasets", "huggingface_hub", "tokenizers", "pyarrow",
              "zstandard", "sklearn", "scipy", "matplotlib", "wandb", "mlflow", "onnx", "onnxruntime", "tensorboard")
PRETRAIN = ["--preset", "tiny", "--max-steps", "2", "--batch-size", "4", "--micro-batch", "4", "--seq-len", "64",
            "--warmup-steps", "1", "--threads", "1", "--no-progress"]
TEXT = "Call me [MASK]."
# Run in the venv: the pipeline's answer, and which of NOT_NEEDED got imported on the way
PIPELINE = r"""
import json, sys
import litebert
answers = litebert.pipeline("fill-mask", model=sys.argv[1])(sys.argv[2], top_k=3)
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[3].split(",")))
print(json.dumps({"answers": answers, "loaded": loaded, "file": litebert.__file__}))
"""
# Run in the venv: {canonical distribution name: version} of everything installed
INSTALLED = r"""
import json, re
from importlib import metadata
print(json.dumps({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in metadata.distributions()}))
"""


def exercise(venv: Path, work: Path, env: dict, extras: dict) -> None:
    """In ``work``, with ``venv``'s litebert: help, tokenizer, store, pretraining, a pipeline; and the one-line
    error that names a missing optional package."""
    work.mkdir()
    litebert = venv / "bin" / "litebert"
    shown = run([litebert, "--help"], work, env).stdout
    assert "pretrain" in shown and "tokenizer" in shown
    run([litebert, "sample", "--out", "sample"], work, env)  # the sample inside the wheel: the quickstart's data
    assert (work / "sample" / "sentiment" / "train.tsv.gz").is_file()
    run([litebert, "tokenizer", "train", "--input", "sample/corpus/", "--vocab-size", "600", "--out", "tok",
         "--threads", "1", "--quiet"], work, env)
    run([litebert, "data", "prepare", "--input", "sample/corpus/*.txt.xz", "--tokenizer", "tok", "--out", "store",
         "--no-progress"], work, env)
    done = run([litebert, "pretrain", "--data", "store", "--out", "run", *PRETRAIN], work, env)
    result, _ = json.JSONDecoder().raw_decode(done.stdout)
    assert (result["step"], result["complete"]) == (2, True)
    model = work / "run" / "model"
    found = json.loads(run([venv / "bin" / "python", "-c", PIPELINE, model, TEXT, ",".join(NOT_NEEDED)], work,
                           env).stdout)
    assert Path(found["file"]).is_relative_to(venv)  # the installed litebert, not this checkout
    assert found["loaded"] == []
    # the checkout's litebert, in this process, on the same model: the same answers
    here = pipeline("fill-mask", model=str(model))(TEXT, top_k=3)
    assert [a["token"] for a in found["answers"]] == [a["token"] for a in here]
    assert [a["score"] for a in found["answers"]] == pytest.approx([a["score"] for a in here], abs=1e-6)
    # pyarrow is not installed: the error names it with the datasets extra's range, and no checkout (a wheel has none)
    (work / "t.parquet").write_bytes(b"PAR1" + bytes(8) + b"PAR1")
    refused = run([litebert, "data", "prepare", "--input", "t.parquet", "--tokenizer", "tok", "--out", "s",
                   "--no-progress"], work, env, ok=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == ["litebert data: error: t.parquet: a Parquet file; reading it needs "
                                                   f"pyarrow (pip install '{extras['pyarrow']}')"]


def test_the_wheel_installs_beside_torch_and_works(tmp_path):
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {canonical(parse_requirement(r)[0]): r for r in project["optional-dependencies"]["datasets"]}
    wheel = build_wheel(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], tmp_path, env)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q"]

    def installed() -> dict:
        return json.loads(run([venv / "bin" / "python", "-c", INSTALLED], tmp_path, env).stdout)

    run([*pip, f"torch=={torch.__version__}"], tmp_path, env)  # this build exactly: no other is fetched
    with_torch = installed()
    assert with_torch["torch"] == torch.__version__

    done = run([venv / "bin" / "python", "-m", "pip", "install", wheel], tmp_path, env)
    assert "Requirement already satisfied: torch" in done.stdout
    after = installed()
    assert after["torch"] == torch.__version__  # left as it was
    runtime = [(canonical(name), spec) for name, spec, extra in map(parse_requirement, project["dependencies"])
               if extra is None]
    added = set(after) - set(with_torch)
    assert added == {"litebert"} | {name for name, _ in runtime if name not in with_torch}, added
    assert not added & {canonical(n) for n in NOT_NEEDED}
    exercise(venv, tmp_path / "newest", env, extras)

    # the lowest versions the ranges allow (torch stays: it is the user's)
    lowest = [spec.replace(">=", "==") for name, spec in runtime if name != "torch"]
    assert all("==" in spec for spec in lowest), lowest
    run([*pip, *lowest], tmp_path, env)
    now = installed()
    for spec in lowest:
        name, version = spec.split("==")
        assert Version(now[canonical(name)]) == Version(version), (name, now[canonical(name)])
    assert now["torch"] == torch.__version__
    exercise(venv, tmp_path / "lowest", env, extras)
