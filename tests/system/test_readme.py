"""The README's examples run as written: every command line of its "Command line" quickstart, then its Python blocks
(the whole lifecycle as function calls, then the model classes), in a scratch folder outside the checkout on the
sample that ships in the package; then the clone's lines on the repository's bundled data (a few minutes on 2
cores)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def blocks(heading: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of the README section ``heading`` (up to the next ``## `` heading)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def block(heading: str, language: str) -> str:
    """The first fenced ``language`` block of the README section ``heading``."""
    return blocks(heading, language)[0]


def run_lines(code: str, cwd: Path, env: dict) -> None:
    for line in [line for line in code.splitlines() if line.strip()]:
        done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_readme_examples_run_as_written(tmp_path):
    """The quickstart runs in a folder outside the checkout, on the sample inside the package (as after `pip install`);
    the clone's lines then run with `data/` and the TF fixture beside them."""
    bin_dir = str(Path(sys.executable).parent)  # what `source .venv/bin/activate` puts first on PATH
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1"}
    if env.get("PYTHONPATH"):  # PYTHONPATH=src names this checkout's src/ from the scratch folder too
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    anywhere, clone = blocks("## Command line", "bash")
    assert anywhere.startswith("litebert sample --out sample") and "data/" not in anywhere and "tests/" not in anywhere
    run_lines(anywhere, tmp_path, env)
    python = blocks("## Python API", "python")
    assert len(python) == 2 and "pretrain(" in python[0] and "finetune(" in python[0] and "predict(" in python[0]
    assert "data/" not in python[0]
    for k, code in enumerate(python):
        script = tmp_path / f"api{k}.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    for part in ("data", "tests/fixtures/tf"):  # the clone's lines, from the repository root
        shutil.copytree(REPO / part, tmp_path / part)
    run_lines(clone, tmp_path, env)
    for made in ("runs/tiny/model/spiece.model", "runs/sentiment/finetune.json", "runs/predictions.jsonl",
                 "runs/embeddings.npy", "runs/converted/config.json", "runs/sentiment.onnx", "runs/squad/finetune.json",
                 "runs/py/pretrain/model/config.json", "runs/py/sentiment/finetune.json", "runs/py/predictions.jsonl",
                 "runs/py/dev-rows.jsonl", "runs/py/embeddings.npy"):
        assert (tmp_path / made).is_file(), made
