"""Shared test fixtures. Tests run on CPU in fp32 with few threads so that the suite's figures are stable."""

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
ALBERT_VOCAB = REPO / "data" / "albert-30k"  # bundled: see data/albert-30k/README.md

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def albert_vocab() -> Path:
    """The folder of the official ALBERT 30k vocabulary (spiece.model + SHA256SUMS), bundled with the repository."""
    assert (ALBERT_VOCAB / "spiece.model").is_file(), f"{ALBERT_VOCAB}/spiece.model is missing from the checkout"
    return ALBERT_VOCAB


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip cleanly on machines without CUDA (``pytest -m gpu`` on a CPU-only machine)."""
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
