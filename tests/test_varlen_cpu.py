"""The varlen attention path's bookkeeping, on the CPU: with `torch.nn.attention.varlen.varlen_attn` replaced by a
plain per-sequence reference (SDPA on each sequence's run of rows), the packed model must give the padded model's
loss, outputs and gradients in fp32. The CUDA kernel itself is checked against the padded path in
tests/system/test_gpu_cuda.py; this covers the offsets, the last layer's query rows and the head plumbing everywhere."""

import pytest
import torch
import torch.nn.functional as F

from litebert.config import AlbertConfig
from litebert.heads import AlbertForMultipleChoice, AlbertForPreTraining, AlbertForSequenceClassification
from litebert.padding import Packing, prepare_batch

CONFIG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=64, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, num_labels=3)


def reference_varlen_attn(q, k, v, cu_q, cu_k, max_q, max_k):
    """What flash attention's varlen kernel computes: each sequence's queries attend to its own keys."""
    out = torch.zeros_like(q)
    for i in range(len(cu_k) - 1):
        a, b, c, d = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        assert b - a <= max_q and d - c <= max_k
        out[a:b] = F.scaled_dot_product_attention(q[a:b].transpose(0, 1), k[c:d].transpose(0, 1),
                                                  v[c:d].transpose(0, 1)).transpose(0, 1)
    return out


@pytest.fixture
def cpu_varlen(monkeypatch):
    import torch.nn.attention.varlen as varlen

    monkeypatch.setattr(varlen, "varlen_attn", reference_varlen_attn)


def ragged(seed: int, b: int = 4, length: int = 20, holes: bool = False):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([length, 7, 13, 3][:b])
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    if holes:  # a zero inside a row: its tokens are still one contiguous run once packed
        mask[0, 5] = 0
    ids = torch.randint(5, 97, (b, length), generator=g) * mask
    return ids, mask, (torch.arange(length)[None] >= 2).long() * mask


def run(model, batch: dict, skip: bool):
    out = model(**prepare_batch(dict(batch), torch.device("cpu"), pack=skip, varlen=skip))
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out, grads


@pytest.mark.parametrize("head,holes", [("pretraining", False), ("pretraining", True), ("classification", False),
                                        ("multiple-choice", True)])
def test_varlen_path_equals_padded_on_cpu(cpu_varlen, head, holes):
    torch.manual_seed(0)
    cfg = AlbertConfig(**CONFIG)
    ids, mask, types = ragged(1, holes=holes)
    if head == "pretraining":
        model = AlbertForPreTraining(cfg)
        positions = torch.tensor([[1, 4, 9], [1, 2, 6], [3, 8, 12], [1, 2, 2]])  # inside each row (a repeat too)
        batch = dict(input_ids=ids, attention_mask=mask, token_type_ids=types, mlm_positions=positions,
                     mlm_ids=torch.gather(ids, 1, positions), mlm_weights=torch.ones(4, 3),
                     sentence_order_label=torch.tensor([0, 1, 1, 0]))
    elif head == "classification":
        model = AlbertForSequenceClassification(cfg)
        batch = dict(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=torch.tensor([0, 2, 1, 2]))
    else:
        model = AlbertForMultipleChoice(cfg)
        batch = dict(input_ids=ids.view(2, 2, -1), attention_mask=mask.view(2, 2, -1),
                     token_type_ids=types.view(2, 2, -1), labels=torch.tensor([1, 0]))
    model.train()
    (pad, g_pad), (var, g_var) = run(model, batch, skip=False), run(model, batch, skip=True)
    assert abs(pad.loss.item() - var.loss.item()) <= 1e-5
    logits = "prediction_logits" if head == "pretraining" else "logits"
    assert (getattr(pad, logits) - getattr(var, logits)).abs().max().item() <= 1e-5
    assert g_pad.keys() == g_var.keys()
    for name in g_pad:
        assert (g_pad[name] - g_var[name]).abs().max().item() <= 1e-5, name


def test_varlen_encoder_outputs_on_real_tokens(cpu_varlen):
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig(**CONFIG)).eval()
    ids, mask, types = ragged(2, holes=True)
    outs = []
    for skip in (False, True):
        with torch.no_grad():
            outs.append(model.albert(ids, mask, types, output_hidden_states=True,
                                     packing=Packing.from_mask(mask, varlen=True) if skip else None))
    real = mask.bool()
    assert (outs[0].last_hidden_state[real] - outs[1].last_hidden_state[real]).abs().max().item() <= 1e-5
    assert outs[1].last_hidden_state[~real].abs().max().item() == 0
    for a, b in zip(outs[0].hidden_states, outs[1].hidden_states):
        assert (a[real] - b[real]).abs().max().item() <= 1e-5
    assert (outs[0].pooler_output - outs[1].pooler_output).abs().max().item() <= 1e-5


def test_packing_offsets_hand_computed():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 1]])
    p = Packing.from_mask(mask, varlen=True)
    assert p.index.tolist() == [0, 1, 2, 4, 8, 9, 11]
    assert p.cu_seqlens.tolist() == [0, 3, 4, 7] and p.max_len == 3
    assert Packing.from_mask(torch.tensor([[1, 1], [0, 0]]), varlen=True).cu_seqlens is None  # an empty row
    assert p.padded().cu_seqlens is None and torch.equal(p.padded().index, p.index)
    bias = p.attention_bias(torch.float32)
    assert bias.shape == (3, 1, 1, 4) and ((bias[:, 0, 0] == 0) == mask.bool()).all()
