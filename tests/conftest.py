"""Shared test fixtures. Tests run on CPU in fp32 with few threads so that the suite's figures are stable.

The session fixtures build inputs once for the whole run; the tests only read them, and each checks at the end of
the session that nothing was written into its folder (a test that needs to change one makes its own copy)."""

import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

from helpers import REPO, unchanged
from helpers.demo_runs import build_demo_stores
from helpers.separable_task import build_separable_task
from helpers.tiny_setup import build_tiny_setup

ALBERT_VOCAB = REPO / "data" / "albert-30k"  # bundled: see data/albert-30k/README.md

# One thread per pytest-xdist worker (the workers already fill the cores), at most two otherwise.
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def albert_vocab() -> Path:
    """The folder of the official ALBERT 30k vocabulary (spiece.model + SHA256SUMS), bundled with the repository."""
    assert (ALBERT_VOCAB / "spiece.model").is_file(), f"{ALBERT_VOCAB}/spiece.model is missing from the checkout"
    return ALBERT_VOCAB


# Hypothesis profiles (the property tests: every test written with ``@given``, marked ``fuzz`` below). "ci", the
# default: derandomized (the same examples on every run and machine, so a failure reproduces), a bounded number of
# examples, no deadline (a shared 2-core machine's timings are noise), no example database (nothing written into the
# checkout). "fuzz" (``make fuzz``, HYPOTHESIS_PROFILE=fuzz): random examples, 25 times as many, remembered in
# .hypothesis/ so that a failure found once is tried first the next time. A test that sets its own
# ``max_examples`` scales it with `helpers.hostile.examples`.
settings.register_profile("ci", derandomize=True, max_examples=20, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The files of the longest tests (over a minute each on 2 cores): collected first, so that parallel workers start
# them early and do not finish with one worker still running one while the other idles.
LONG_FILES = ("test_plateau_demo_stop.py", "test_plateau_demo_quiet.py", "test_readme.py")


def pytest_collection_modifyitems(config, items):
    """The long files first (`LONG_FILES`, otherwise collection order); every Hypothesis test marked ``fuzz``
    (``make fuzz`` reruns them under the long profile); tests marked ``gpu`` skip cleanly on machines without CUDA
    (``pytest -m gpu`` on a CPU-only machine)."""
    items.sort(key=lambda item: item.path.name not in LONG_FILES)  # stable: the rest keep their order
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.fuzz)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def one_thread():
    """One torch thread for the test (tiny models gain nothing from threads; on a shared 2-core machine extra threads
    only contend). Files use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_setup(tmp_path_factory) -> dict:
    """``helpers.tiny_setup.build_tiny_setup``'s corpus files, 1,000-piece tokenizer and token stores (paths by name:
    tokenizer, store, eval_store), built once per session."""
    folder = tmp_path_factory.mktemp("tiny_setup")
    paths = build_tiny_setup(folder)
    with unchanged(folder):
        yield paths


@pytest.fixture(scope="session")
def separable_task(tmp_path_factory) -> tuple[Path, Path]:
    """(model folder, data folder): the tiny preset with a 1,000-piece vocabulary, and a separable two-class task
    (``helpers.separable_task``), built once per session."""
    folder = tmp_path_factory.mktemp("separable_task")
    task = build_separable_task(folder)
    with unchanged(folder):
        yield task


@pytest.fixture(scope="session")
def demo_stores(tmp_path_factory) -> dict:
    """``helpers.demo_runs.build_demo_stores``: the demo's corpus split, 8,000-piece tokenizer, train and held-out
    stores, and its model config, built once per session (per worker under pytest-xdist)."""
    folder = tmp_path_factory.mktemp("demo_stores")
    stores = build_demo_stores(folder)
    with unchanged(folder):
        yield stores
