"""Fixtures of the cross-cutting tests in tests/system/: the inputs of every command (the bad-input tests) and a
fine-tuning task for the run-folder and write-fault tests. Built once per session; the tests only read them."""

import pytest

from helpers import contents, unchanged
from helpers.battery import build_inputs
from helpers.run_folders import build_word_cycle_task


@pytest.fixture(scope="session")
def inp(tmp_path_factory) -> dict:
    """The inputs of every command (``helpers.battery.build_inputs``): paths by name."""
    root = tmp_path_factory.mktemp("battery_inputs")
    built = build_inputs(root)
    with unchanged(root):
        yield built


@pytest.fixture
def unchanged_inputs(inp):
    """The shared inputs are byte for byte as they were after the test."""
    before = contents(inp["root"])
    yield
    assert contents(inp["root"]) == before, "a refused command changed one of its inputs"


@pytest.fixture(scope="session")
def word_cycle_task(tmp_path_factory):
    """(model folder, data folder) of ``helpers.run_folders.build_word_cycle_task``."""
    root = tmp_path_factory.mktemp("word_cycle_task")
    task = build_word_cycle_task(root)
    with unchanged(root):
        yield task
