"""The training-FLOP count behind MFU, against PyTorch's own FLOP counter on the model actually running."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from litebert.config import AlbertConfig
from litebert.heads import AlbertForPreTraining
from litebert.train.metrics import flops_per_sequence

BASE = dict(vocab_size=101, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


@pytest.mark.parametrize("overrides", [{}, dict(num_hidden_groups=2, inner_group_num=2), dict(embedding_size=32),
                                       dict(sharing="none")])
def test_flops_per_sequence_equals_torch_flop_counter(overrides):
    """Forward + backward of one MLM + SOP step counted by torch.utils.flop_counter (attention through the math
    backend, whose matmuls the counter sees) equals the formula: every matmul, the last layer pruned to the masked
    positions and [CLS], the MLM head at the masked positions only."""
    torch.manual_seed(0)
    config = AlbertConfig(**{**BASE, **overrides})
    model = AlbertForPreTraining(config).train()
    b, length, predictions = 3, 16, 5
    ids = torch.randint(5, 101, (b, length))
    positions = torch.randint(1, length, (b, predictions))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(ids, torch.ones_like(ids), mlm_positions=positions, mlm_ids=torch.gather(ids, 1, positions),
              sentence_order_label=torch.zeros(b, dtype=torch.long)).loss.backward()
    assert counter.get_total_flops() == b * flops_per_sequence(config, length, predictions)
