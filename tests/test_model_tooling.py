"""The reference model works with standard PyTorch tooling: forward hooks, dynamic quantization, torch.compile, other
dtypes. Each layer is a module called as one, so tools that wrap or replace modules see the model as it is."""

import shutil

import pytest
import torch
from torch import nn

from litebert.config import AlbertConfig
from litebert.heads import AlbertForPreTraining, AlbertForSequenceClassification
from litebert.padding import Packing

CONFIG = AlbertConfig.from_preset("tiny", num_hidden_groups=2, inner_group_num=2, num_labels=3)


def inputs(seed=0, b=3, length=17):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, CONFIG.vocab_size, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.long)
    mask[1, 11:] = 0
    mask[2, 4:] = 0
    return ids, mask


@pytest.mark.parametrize("skip_padding", [False, True])
def test_forward_hooks_fire_on_every_linear(skip_padding):
    """Every nn.Linear runs as a module: a hook on each fires once per use (shared blocks once per depth step)."""
    torch.manual_seed(0)
    model = AlbertForPreTraining(CONFIG).eval()
    calls = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            module.register_forward_hook(lambda m, i, o, name=name: calls.__setitem__(name, calls.get(name, 0) + 1))
    ids, mask = inputs()
    with torch.no_grad():
        model(ids, mask, mlm_positions=torch.tensor([[1, 2], [3, 4], [1, 2]]),
              packing=Packing.from_mask(mask) if skip_padding else None)
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert sorted(calls) == sorted(linears)
    attention_ids, ffn_ids = CONFIG.schedule()
    for block in range(max(attention_ids) + 1):
        for part in ("query", "key", "value", "dense"):
            assert calls[f"albert.encoder.attention_blocks.{block}.{part}"] == attention_ids.count(block)
    for block in range(max(ffn_ids) + 1):
        assert calls[f"albert.encoder.ffn_blocks.{block}.ffn"] == ffn_ids.count(block)
    assert calls["albert.pooler"] == calls["sop_classifier.classifier"] == calls["predictions.dense"] == 1


def test_dynamic_quantization_runs_and_stays_close():
    """torch.ao.quantization.quantize_dynamic replaces every nn.Linear with an int8 one; the logits stay close to
    fp32 (int8 weights: a few percent of the logits' spread), and the argmax mostly agrees."""
    torch.manual_seed(1)
    model = AlbertForSequenceClassification(CONFIG).eval()
    quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    assert not any(type(m) is nn.Linear for m in quantized.modules())
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(5, CONFIG.vocab_size, (64, 24), generator=g)
    with torch.no_grad():
        ref, out = model(ids).logits, quantized(ids).logits
    spread = (ref.max() - ref.min()).item()
    assert spread > 0 and (out - ref).abs().max().item() < 0.1 * spread
    assert (out.argmax(-1) == ref.argmax(-1)).float().mean().item() >= 0.8


def test_float64_and_bfloat16_models():
    """The model runs in any dtype: float64 agrees with float32 to float32 precision; bfloat16 stays near it."""
    torch.manual_seed(3)
    model = AlbertForPreTraining(CONFIG).eval()
    ids, mask = inputs(seed=4)
    with torch.no_grad():
        ref = model(ids, mask).prediction_logits
        double = model.double()(ids, mask).prediction_logits
        assert double.dtype == torch.float64 and (double - ref.double()).abs().max().item() < 1e-4
        half = model.to(torch.bfloat16)(ids, mask).prediction_logits
    assert half.dtype == torch.bfloat16 and (half.float() - ref).abs().max().item() < 0.1


def test_torch_compile_matches_eager():
    """torch.compile (inductor) of the whole pretraining model: same loss and gradients as eager."""
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("inductor needs a C++ compiler")
    torch.manual_seed(5)
    model = AlbertForPreTraining(CONFIG).train()
    ids, mask = inputs(seed=6)
    positions = torch.tensor([[1, 5, 9], [2, 3, 8], [1, 2, 3]])
    targets = torch.gather(ids, 1, positions)
    sop = torch.tensor([0, 1, 1])

    def loss_and_grads(m):
        model.zero_grad(set_to_none=True)
        loss = m(ids, mask, mlm_positions=positions, mlm_ids=targets, sentence_order_label=sop).loss
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}

    eager_loss, eager_grads = loss_and_grads(model)
    compiled_loss, compiled_grads = loss_and_grads(torch.compile(model))
    assert abs(compiled_loss.item() - eager_loss.item()) < 1e-5
    assert max((compiled_grads[k] - g).abs().max().item() for k, g in eager_grads.items()) < 1e-5
