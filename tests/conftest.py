"""Shared test fixtures. Tests run on CPU in fp32 with few threads so that the suite's figures are stable."""

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SHARED_VOCAB = REPO.parent / "shared" / "data" / "albert-30k"

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def shared_vocab() -> Path:
    """The real ALBERT 30k vocabulary beside the repo; tests using it skip when it is absent (fresh clone)."""
    if not (SHARED_VOCAB / "spiece.model").is_file():
        pytest.skip(f"real ALBERT vocabulary not found at {SHARED_VOCAB}")
    return SHARED_VOCAB
