"""The multi-tensor (``torch._foreach_*``) LAMB/AdamW step against the per-tensor reference loop (``foreach=False``),
which test_optim.py checks against a NumPy transcription of the official update.

Both paths run on identical copies of a small model with every kind of parameter group (decay + trust ratio, neither,
decay without trust ratio, trust ratio without decay), parameters whose gradient is None on some steps (skipped, so
their step counts differ within a group), and a zero-initialised tensor (‖w‖ = 0: trust ratio 1).
"""

import copy

import pytest
import torch
from torch import nn

from litebert.optim import AdamW, Lamb, build_optimizer

STEPS = 20
LRS = [0.0, 0.02, 0.05, 0.01, 0.003] * 4


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(6, 5)
        self.LayerNorm = nn.LayerNorm(5)
        self.out = nn.Linear(5, 3)
        self.zero = nn.Parameter(torch.zeros(4))  # ‖w‖ = 0 -> trust ratio 1 (and decay adds nothing at first)
        self.sometimes = nn.Parameter(torch.randn(3, 2))  # no gradient on every third step
        self.never = nn.Parameter(torch.randn(2))  # never a gradient: no state, never changes


def groups(model, wd=0.01):
    return [
        {"params": [model.dense.weight, model.zero, model.sometimes, model.never], "weight_decay": wd, "adapt": True},
        {"params": [model.dense.bias, model.LayerNorm.weight, model.LayerNorm.bias], "weight_decay": 0.0,
         "adapt": False},
        {"params": [model.out.weight], "weight_decay": wd, "adapt": False},
        {"params": [model.out.bias], "weight_decay": 0.0, "adapt": True},
    ]


def make_model(dtype, seed=0):
    torch.manual_seed(seed)
    model = Mixed()
    with torch.no_grad():
        model.LayerNorm.weight.add_(torch.randn(5) * 0.3)
    return model.to(dtype)


def set_grads(model, step, gen):
    for name, p in model.named_parameters():
        if name == "never" or (name == "sometimes" and step % 3 == 0):
            p.grad = None
            continue
        g = torch.randn(p.shape, generator=gen, dtype=torch.float64) * (10.0 if name == "dense.weight" else 0.1)
        if name == "zero" and step <= 2:
            g.zero_()  # ‖u‖ = 0 as well on the first steps
        p.grad = g.to(device=p.device, dtype=p.dtype)


def run(cls, dtype, foreach, steps=STEPS, model=None, opt=None, start=1, bias_correction=False, gen=None, **kw):
    model = model if model is not None else make_model(dtype)
    opt = opt if opt is not None else cls(groups(model), lr=1.0, bias_correction=bias_correction, foreach=foreach, **kw)
    gen = gen if gen is not None else torch.Generator().manual_seed(1)
    for t in range(start, start + steps):
        for g in opt.param_groups:
            g["lr"] = LRS[(t - 1) % len(LRS)]
        set_grads(model, t, gen)
        opt.step()
    return model, opt, gen


def assert_same(a, b, dtype):
    tol = {torch.float64: dict(rtol=1e-12, atol=1e-14), torch.float32: dict(rtol=1e-6, atol=1e-7),
           torch.bfloat16: dict(rtol=0.0, atol=0.0)}[dtype]
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert pa.dtype == dtype
        torch.testing.assert_close(pa.detach(), pb.detach(), **tol, msg=lambda m, n=name: f"{n}: {m}")


def assert_same_state(opt_a, opt_b, model_a, model_b, dtype):
    assert len(opt_a.state) == len(opt_b.state)
    for pa, pb in zip(model_a.parameters(), model_b.parameters()):
        sa, sb = opt_a.state.get(pa, {}), opt_b.state.get(pb, {})
        assert sa.keys() == sb.keys()
        if sa:
            assert sa["step"] == sb["step"] and isinstance(sa["step"], int)
            for key in ("exp_avg", "exp_avg_sq"):
                assert sa[key].dtype == torch.promote_types(dtype, torch.float32)
                torch.testing.assert_close(sa[key], sb[key], rtol=1e-12 if dtype == torch.float64 else 1e-6, atol=0)


@pytest.mark.parametrize("cls", [Lamb, AdamW])
@pytest.mark.parametrize("bias_correction", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_foreach_equals_reference(cls, bias_correction, dtype):
    model_f, opt_f, _ = run(cls, dtype, foreach=None, bias_correction=bias_correction)
    model_r, opt_r, _ = run(cls, dtype, foreach=False, bias_correction=bias_correction)
    assert opt_f.foreach and not opt_r.foreach
    assert_same(model_f, model_r, dtype)
    assert_same_state(opt_f, opt_r, model_f, model_r, dtype)
    # The run did something, and the special parameters took the paths they were meant to.
    start = make_model(dtype)
    assert not torch.equal(model_f.dense.weight, start.dense.weight)
    assert torch.equal(model_f.never, start.never) and model_f.never not in opt_f.state
    assert opt_f.state[model_f.sometimes]["step"] == STEPS - STEPS // 3
    assert opt_f.state[model_f.dense.weight]["step"] == STEPS


def test_zero_tensor_gets_trust_ratio_one():
    """First step with a gradient on a zero tensor: ‖w‖ = 0, so the update is the plain Adam direction × lr."""
    w = nn.Parameter(torch.zeros(4, dtype=torch.float64))
    other = nn.Parameter(torch.full((3,), 2.0, dtype=torch.float64))
    w.grad = torch.tensor([1.0, -2.0, 0.5, 0.0], dtype=torch.float64)
    other.grad = torch.ones(3, dtype=torch.float64)
    Lamb([w, other], lr=0.1, weight_decay=0.0).step()
    g = w.grad
    direction = 0.1 * g / ((0.001 * g * g).sqrt() + 1e-6)
    torch.testing.assert_close(w.detach(), -0.1 * direction, rtol=1e-14, atol=0)
    # ...while the neighbour in the same bucket is rescaled to ‖Δw‖ = lr·‖w‖.
    assert torch.linalg.vector_norm(other.detach() - 2.0).item() == pytest.approx(0.1 * 2.0 * 3**0.5, rel=1e-12)


def test_build_optimizer_defaults_to_foreach():
    model = nn.Linear(3, 2)
    assert build_optimizer(model, "lamb").foreach and build_optimizer(model, "adamw").foreach


@pytest.mark.parametrize("cls", [Lamb, AdamW])
def test_state_dict_round_trip_resumes_identically(cls):
    dtype = torch.float64
    uninterrupted, _, _ = run(cls, dtype, foreach=True, steps=STEPS, bias_correction=True)

    model, opt, gen = run(cls, dtype, foreach=True, steps=5, bias_correction=True)
    saved_model = copy.deepcopy(model.state_dict())
    saved_opt = copy.deepcopy(opt.state_dict())
    assert "foreach" not in saved_opt["param_groups"][0]  # checkpoints do not depend on the code path
    fresh = make_model(dtype, seed=5)
    fresh.load_state_dict(saved_model)
    fresh_opt = cls(groups(fresh), lr=1.0, bias_correction=True, foreach=True)
    fresh_opt.load_state_dict(saved_opt)
    resumed, _, _ = run(cls, dtype, foreach=True, steps=STEPS - 5, model=fresh, opt=fresh_opt, start=6, gen=gen)
    for (name, a), b in zip(uninterrupted.named_parameters(), resumed.parameters()):
        assert torch.equal(a, b), name


def test_reference_state_loads_into_foreach_optimizer():
    """A state saved by the per-tensor loop (the layout of existing checkpoints) continues under the foreach step."""
    dtype = torch.float64
    reference, _, _ = run(Lamb, dtype, foreach=False, steps=12)
    model, opt, gen = run(Lamb, dtype, foreach=False, steps=6)
    opt_f = Lamb(groups(model), lr=1.0, foreach=True)
    opt_f.load_state_dict(opt.state_dict())
    continued, _, _ = run(Lamb, dtype, foreach=True, steps=6, model=model, opt=opt_f, start=7, gen=gen)
    assert_same(continued, reference, dtype)


def test_foreach_step_never_reads_a_tensor_on_the_host(monkeypatch):
    """On a GPU a read of a tensor's value (.item(), float(), bool(), .tolist()) would synchronise with the device."""
    model = make_model(torch.float32)
    opt = Lamb(groups(model), lr=0.01, bias_correction=True)
    gen = torch.Generator().manual_seed(1)

    def refuse(*args, **kwargs):
        raise AssertionError("host synchronisation in the optimizer step")

    for name in ("item", "tolist", "__float__", "__int__", "__bool__"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    for t in range(1, 4):
        set_grads(model, t, gen)
        opt.step()
    with pytest.raises(AssertionError, match="host synchronisation"):  # the patch is in force
        float(model.dense.weight.sum())
    monkeypatch.undo()
    assert opt.state[model.dense.weight]["step"] == 3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_foreach_on_cuda_matches_reference_without_sync(dtype):
    model_r = make_model(dtype).cuda()
    model_f = copy.deepcopy(model_r)
    opt_r = Lamb(groups(model_r), lr=1.0, bias_correction=True, foreach=False)
    opt_f = Lamb(groups(model_f), lr=1.0, bias_correction=True, foreach=True)
    gen = torch.Generator().manual_seed(1)
    for t in range(1, STEPS + 1):
        set_grads(model_r, t, gen)
        for pr, pf in zip(model_r.parameters(), model_f.parameters()):
            pf.grad = None if pr.grad is None else pr.grad.clone()
        for opt in (opt_r, opt_f):
            for g in opt.param_groups:
                g["lr"] = LRS[(t - 1) % len(LRS)]
        opt_r.step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            opt_f.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-3)
    for (name, a), b in zip(model_f.named_parameters(), model_r.parameters()):
        torch.testing.assert_close(a, b, **tol, msg=lambda m, n=name: f"{n}: {m}")


# ------------------------------------------------------------------------------- the gated step (engine's policy)
def gated_run(cls, dtype, foreach, flags, bias_correction):
    """``run`` with ``step(finite=flag)`` for each step's flag (a 0-dim bool tensor, as the engine passes it)."""
    model = make_model(dtype)
    opt = cls(groups(model), lr=1.0, bias_correction=bias_correction, foreach=foreach)
    gen = torch.Generator().manual_seed(1)
    for t, flag in enumerate(flags, 1):
        for g in opt.param_groups:
            g["lr"] = LRS[(t - 1) % len(LRS)]
        set_grads(model, t, gen)
        if not flag:  # what a skipped step's gradients look like: NaN and inf among them
            model.dense.weight.grad[0, 0] = float("nan")
            model.out.bias.grad[0] = float("inf")
        opt.step(finite=torch.tensor(flag))
    return model, opt


@pytest.mark.parametrize("cls", [Lamb, AdamW])
@pytest.mark.parametrize("bias_correction", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("foreach", [None, False])
def test_gated_step_equals_the_plain_step_bit_for_bit(cls, bias_correction, dtype, foreach):
    """Every flag True: the weights and moments equal the plain step's exactly (not within a tolerance), and the step
    counts (device tensors) hold the same numbers."""
    plain_model, plain_opt, _ = run(cls, dtype, foreach=foreach, bias_correction=bias_correction)
    model, opt = gated_run(cls, dtype, foreach, [True] * STEPS, bias_correction)
    for (name, a), b in zip(plain_model.named_parameters(), model.parameters()):
        assert torch.equal(a, b), name
    for pa, pb in zip(plain_model.parameters(), model.parameters()):
        sa, sb = plain_opt.state.get(pa, {}), opt.state.get(pb, {})
        assert sa.keys() == sb.keys()
        if sa:
            assert isinstance(sb["step"], torch.Tensor) and sb["step"].dtype == torch.float64
            assert sb["step"].tolist() == sa["step"]
            assert torch.equal(sa["exp_avg"], sb["exp_avg"]) and torch.equal(sa["exp_avg_sq"], sb["exp_avg_sq"])


@pytest.mark.parametrize("cls", [Lamb, AdamW])
@pytest.mark.parametrize("bias_correction", [False, True])
@pytest.mark.parametrize("foreach", [None, False])
def test_a_gated_off_step_changes_nothing_and_the_run_equals_one_without_it(cls, bias_correction, foreach):
    """Steps whose flag is False (their gradients hold NaN and inf) leave weights, moments and step counts as they
    were, the very first step included; so the run equals the plain run of its True steps alone, bit for bit."""
    dtype = torch.float64
    flags = [False, True, True, False, False, True, True, True, False, True]
    model, opt = gated_run(cls, dtype, foreach, flags, bias_correction)
    # the same gradients and rates, the False steps left out
    ref = make_model(dtype)
    ref_opt = cls(groups(ref), lr=1.0, bias_correction=bias_correction, foreach=foreach)
    gen = torch.Generator().manual_seed(1)
    for t, flag in enumerate(flags, 1):
        set_grads(ref, t, gen)
        if flag:
            for g in ref_opt.param_groups:
                g["lr"] = LRS[(t - 1) % len(LRS)]
            ref_opt.step()
    for (name, a), b in zip(ref.named_parameters(), model.parameters()):
        assert torch.isfinite(b).all() and torch.equal(a, b), name
    for pa, pb in zip(ref.parameters(), model.parameters()):
        sa, sb = ref_opt.state.get(pa, {}), opt.state.get(pb, {})
        if sa:
            assert sb["step"].tolist() == sa["step"]
            assert torch.equal(sa["exp_avg"], sb["exp_avg"]) and torch.equal(sa["exp_avg_sq"], sb["exp_avg_sq"])


def test_gated_step_never_reads_a_tensor_on_the_host(monkeypatch):
    model = make_model(torch.float32)
    opt = Lamb(groups(model), lr=0.01, bias_correction=True)
    gen = torch.Generator().manual_seed(1)
    for name in ("item", "tolist", "__float__", "__int__", "__bool__"):
        monkeypatch.setattr(torch.Tensor, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("host read")))
    for t in range(1, 4):
        set_grads(model, t, gen)
        opt.step(finite=torch.tensor(t != 2))
    monkeypatch.undo()
    assert opt.state[model.dense.weight]["step"].tolist() == 2.0
