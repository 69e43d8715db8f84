"""Building the wheel of this checkout, for the tests that look into it or install it (tests/system/test_install.py,
tests/test_samples.py)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(argv, cwd, env, ok=True):
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def build_wheel(tmp: Path) -> Path:
    """The wheel of this checkout, built from a copy of what goes into it (setuptools leaves ``build/`` and an
    ``.egg-info`` beside the sources it builds; the checkout is left as it is)."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    # setuptools as installed here where there is one (venvs of Python 3.12+ have none: pip then fetches it)
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", tmp / "dist", source], tmp,
        os.environ)
    (wheel,) = (tmp / "dist").glob("litebert-*.whl")
    return wheel
