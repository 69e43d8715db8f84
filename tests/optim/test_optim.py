"""LAMB / AdamW against an independent NumPy transcription of the official TF update (float64), over several steps.

The reference below is written from google-research/albert lamb_optimizer.py and optimization.py, not from our code:
per variable, m/v without bias correction, update = m/(sqrt(v)+eps) (+ wd*w unless excluded), trust ratio
||w||/||update|| (1 if either is 0) unless excluded, w -= lr * ratio * update.
"""

import numpy as np
import pytest
import torch
from torch import nn

from litebert.errors import ConfigError
from litebert.optim import AdamW, Lamb, build_optimizer, is_excluded, param_groups


def reference_step(w, g, m, v, lr, excluded, wd=0.01, b1=0.9, b2=0.999, eps=1e-6, lamb=True, t=None):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    if t is None:
        update = m / (np.sqrt(v) + eps)
    else:  # bias-corrected variant (LAMB paper / Adam)
        update = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    if not excluded and wd:
        update = update + wd * w
    ratio = 1.0
    if lamb and not excluded:
        wn, un = np.linalg.norm(w), np.linalg.norm(update)
        ratio = wn / un if (wn > 0 and un > 0) else 1.0
    return w - lr * ratio * update, m, v


class Toy(nn.Module):
    """Names follow the HF ALBERT state dict: LayerNorm, full_layer_layer_norm, dense.bias."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(5, 4)
        self.LayerNorm = nn.LayerNorm(4)
        self.full_layer_layer_norm = nn.LayerNorm(4)
        self.zero = nn.Parameter(torch.zeros(3))  # ||w|| = 0 -> trust ratio 1


EXCLUDED_BY_HAND = {"dense.bias", "LayerNorm.weight", "LayerNorm.bias",
                    "full_layer_layer_norm.weight", "full_layer_layer_norm.bias"}


def _run(opt_name, steps=6, lrs=(0.0, 0.01, 0.02, 0.05, 0.01, 0.003), bias_correction=False, wd=0.01):
    torch.manual_seed(0)
    model = Toy().double()
    with torch.no_grad():  # non-trivial LayerNorm weights so their (absent) decay would show
        for p in model.parameters():
            if p is not model.zero:
                p.add_(torch.randn_like(p) * 0.3)
    opt = build_optimizer(model, opt_name, lr=1.0, weight_decay=wd, bias_correction=bias_correction)
    rng = np.random.default_rng(1)
    ref = {n: [p.detach().numpy().copy(), np.zeros(p.shape), np.zeros(p.shape)] for n, p in model.named_parameters()}
    for t, lr in zip(range(1, steps + 1), lrs):
        for g in opt.param_groups:
            g["lr"] = lr
        for n, p in model.named_parameters():
            grad = rng.normal(size=p.shape) * (10.0 if n == "dense.weight" else 0.1)
            if n == "zero" and t <= 2:
                grad = np.zeros(p.shape)  # ||update|| = 0 -> trust ratio 1 as well
            p.grad = torch.from_numpy(grad)
            w, m, v = ref[n]
            ref[n] = list(reference_step(w, grad, m, v, lr, n in EXCLUDED_BY_HAND, wd=wd, lamb=opt_name == "lamb",
                                         t=t if bias_correction else None))
        opt.step()
        for n, p in model.named_parameters():
            np.testing.assert_allclose(p.detach().numpy(), ref[n][0], rtol=1e-12, atol=1e-14, err_msg=f"{n} step {t}")
    return model


@pytest.mark.parametrize("opt_name", ["lamb", "adamw"])
@pytest.mark.parametrize("bias_correction", [False, True])
def test_matches_numpy_reference(opt_name, bias_correction):
    _run(opt_name, bias_correction=bias_correction)


def test_fp32_parameters_close_to_reference():
    torch.manual_seed(0)
    lin = nn.Linear(6, 3)
    opt = Lamb([{"params": [lin.weight]}, {"params": [lin.bias], "weight_decay": 0.0, "adapt": False}], lr=0.01)
    w, b = lin.weight.detach().double().numpy().copy(), lin.bias.detach().double().numpy().copy()
    mw, vw, mb, vb = (np.zeros(w.shape), np.zeros(w.shape), np.zeros(b.shape), np.zeros(b.shape))
    rng = np.random.default_rng(3)
    for _ in range(4):
        gw, gb = rng.normal(size=w.shape).astype(np.float32), rng.normal(size=b.shape).astype(np.float32)
        lin.weight.grad, lin.bias.grad = torch.from_numpy(gw), torch.from_numpy(gb)
        opt.step()
        w, mw, vw = reference_step(w, gw.astype(np.float64), mw, vw, 0.01, excluded=False)
        b, mb, vb = reference_step(b, gb.astype(np.float64), mb, vb, 0.01, excluded=True)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(lin.bias.detach().numpy(), b, rtol=1e-5, atol=1e-7)


def test_trust_ratio_makes_step_scale_free():
    """LAMB's defining property: the relative change of a weight is lr * (1 + tiny), whatever the gradient scale."""
    for scale in (1e-4, 1.0, 1e4):
        w = nn.Parameter(torch.full((10,), 2.0, dtype=torch.float64))
        w.grad = torch.linspace(-1, 1, 10, dtype=torch.float64) * scale
        Lamb([w], lr=0.1, weight_decay=0.0).step()
        # first step without bias correction: m/(sqrt(v)+eps) = 0.1 g / (sqrt(0.001) |g| + eps) -> ratio normalises it
        assert torch.linalg.vector_norm(w.detach() - 2.0).item() == pytest.approx(0.1 * (2.0 * 10**0.5), rel=1e-9)


def test_param_groups_by_name_and_module():
    model = Toy()
    groups = param_groups(model, weight_decay=0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in groups[0]["params"]}
    excluded = {names[id(p)] for p in groups[1]["params"]}
    assert excluded == EXCLUDED_BY_HAND
    assert decayed == {"dense.weight", "zero"}
    assert groups[0]["adapt"] and not groups[1]["adapt"] and groups[1]["weight_decay"] == 0.0


def test_layernorm_module_excluded_whatever_its_name():
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.LayerNorm(2))  # names "0.weight", "1.weight", "1.bias"
    assert is_excluded("1.weight", model[1]) and not is_excluded("0.weight", model[0])
    groups = param_groups(model)
    assert [len(g["params"]) for g in groups] == [1, 2]


def test_shared_parameters_counted_once():
    lin = nn.Linear(3, 3)
    model = nn.ModuleDict({"a": lin, "b": lin})  # cross-layer sharing: the same module twice
    assert sum(len(g["params"]) for g in param_groups(model)) == 2


def test_bad_arguments_are_config_errors():
    w = [nn.Parameter(torch.zeros(2))]
    with pytest.raises(ConfigError, match="betas"):
        Lamb(w, betas=(1.0, 0.999))
    with pytest.raises(ConfigError, match="lr"):
        AdamW(w, lr=-1.0)
    with pytest.raises(ConfigError, match="unknown name 'sgd'"):
        build_optimizer(nn.Linear(1, 1), "sgd")
