"""--device / --precision resolution (litebert.engine.device): refusals are one-line ConfigErrors."""

import pytest
import torch

from litebert.engine.device import autocast_dtype, resolve_device
from litebert.errors import ConfigError


def test_default_and_cpu():
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu0", "cuda:x", "tpu"])
def test_bad_names(name):
    with pytest.raises(ConfigError, match=r"^device = '[^']+': not a device"):  # names the argument
        resolve_device(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_missing():
    with pytest.raises(ConfigError, match="CUDA is not available"):
        resolve_device("cuda")


def test_precision_on_cpu():
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("fp32", cpu) is None
    assert autocast_dtype("bf16", cpu) is torch.bfloat16
    with pytest.raises(ConfigError, match="precision = 'fp16' needs a GPU"):
        autocast_dtype("fp16", cpu)
    with pytest.raises(ConfigError, match="expected one of"):
        autocast_dtype("fp8", cpu)
