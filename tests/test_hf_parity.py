"""Numerical parity with HF transformers' ALBERT, the reference implementation (test-only dependency).

Random tiny HF models are saved with HF's own save_pretrained and loaded here (and the reverse), then outputs, losses
and gradients are compared in fp32 (max abs difference <= 1e-5).
"""

import dataclasses

import pytest
import torch

transformers = pytest.importorskip("transformers")

from litebert.config import AlbertConfig  # noqa: E402
from litebert.errors import CheckpointError  # noqa: E402
from litebert.heads import (  # noqa: E402
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertModel,
)
from litebert.io import keymap  # noqa: E402
from litebert.padding import Packing  # noqa: E402

TOL = 1e-5
BASE = dict(vocab_size=101, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, hidden_act="gelu_new",
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)

CONFIGS = {
    "all-shared": {},
    "groups": dict(num_hidden_groups=2),
    "inner-groups": dict(inner_group_num=2),
    "groups-and-inner": dict(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2),
    "not-shared": dict(num_hidden_groups=4),
    "E-equals-H": dict(embedding_size=32),
    "gelu": dict(hidden_act="gelu"),
    "relu": dict(hidden_act="relu"),
    "silu": dict(hidden_act="silu"),
    "dropout-in-eval": dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, classifier_dropout_prob=0.1),
}


def hf_config(**overrides):
    return transformers.AlbertConfig(**{**BASE, **overrides})


def batch(seed=0, b=3, length=13, vocab=101):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.long)
    mask[1, 9:] = 0  # padding in two rows, of different lengths
    mask[2, 5:] = 0
    ids[mask == 0] = 0
    types = torch.zeros(b, length, dtype=torch.long)
    types[:, 4:] = 1
    types[mask == 0] = 0
    return ids, mask, types


def max_diff(a, b):
    return (a - b).abs().max().item()


def hf_roundtrip(hf_model, tmp_path, cls):
    hf_model.save_pretrained(tmp_path / "hf")
    return cls.from_pretrained(tmp_path / "hf")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pretraining_outputs_match_hf(name, tmp_path):
    torch.manual_seed(1)
    hf = transformers.AlbertForPreTraining(hf_config(**CONFIGS[name])).eval()
    ours = hf_roundtrip(hf, tmp_path, AlbertForPreTraining)
    ids, mask, types = batch()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
        base = hf.albert(input_ids=ids, attention_mask=mask, token_type_ids=types)
        out = ours(ids, mask, types)
        enc = ours.albert(ids, mask, types)
    assert max_diff(enc.last_hidden_state, base.last_hidden_state) <= TOL
    assert max_diff(enc.pooler_output, base.pooler_output) <= TOL
    assert max_diff(out.prediction_logits, ref.prediction_logits) <= TOL
    assert max_diff(out.sop_logits, ref.sop_logits) <= TOL


def test_masked_positions_head_equals_full_head(tmp_path):
    """The MLM head on gathered positions gives HF's full-sequence logits at those positions."""
    torch.manual_seed(2)
    hf = transformers.AlbertForPreTraining(hf_config()).eval()
    ours = hf_roundtrip(hf, tmp_path, AlbertForPreTraining)
    ids, mask, types = batch()
    positions = torch.tensor([[1, 3, 7], [2, 4, 8], [1, 2, 3]])
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).prediction_logits
        out = ours(ids, mask, types, mlm_positions=positions).prediction_logits
    assert out.shape == (3, 3, 101)
    assert max_diff(out, torch.gather(ref, 1, positions[..., None].expand(-1, -1, 101))) <= TOL


def test_loss_and_gradients_match_hf(tmp_path):
    torch.manual_seed(3)
    cfg = hf_config(num_hidden_groups=2, inner_group_num=2)
    hf = transformers.AlbertForPreTraining(cfg).train()
    ours = hf_roundtrip(hf, tmp_path, AlbertForPreTraining).train()
    ids, mask, types = batch(seed=4)
    labels = torch.full_like(ids, -100)
    positions = torch.tensor([[1, 2, 6], [3, 5, 8], [1, 2, 4]])
    targets = torch.gather(ids, 1, positions)
    labels.scatter_(1, positions, targets)
    sop = torch.tensor([0, 1, 1])

    ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels, sentence_order_label=sop)
    ref.loss.backward()
    out = ours(ids, mask, types, labels=labels, sentence_order_label=sop)
    out.loss.backward()
    assert abs(out.loss.item() - ref.loss.item()) <= TOL

    hf_grads = {k: p.grad for k, p in hf.named_parameters() if p.grad is not None}
    our_grads = keymap.to_hf({k: p.grad for k, p in ours.named_parameters()}, ours.config)
    compared = 0
    for key, grad in our_grads.items():
        assert key in hf_grads, key
        assert max_diff(grad, hf_grads[key]) <= TOL, key
        compared += 1
    assert compared == len(list(ours.parameters())) >= 20

    # The official path (head only at masked positions, weighted mean) gives the same loss.
    ours.zero_grad()
    alt = ours(ids, mask, types, mlm_positions=positions, mlm_ids=targets, mlm_weights=torch.ones(3, 3),
               sentence_order_label=sop)
    assert abs(alt.loss.item() - ref.loss.item()) <= 1e-5


def test_gradient_checkpointing_gives_same_gradients(tmp_path):
    torch.manual_seed(5)
    hf = transformers.AlbertForPreTraining(hf_config(inner_group_num=2)).train()
    ours = hf_roundtrip(hf, tmp_path, AlbertForPreTraining).train()
    ours.set_gradient_checkpointing(True)
    ids, mask, types = batch(seed=6)
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(0)) < 0.3, ids, -100)
    sop = torch.tensor([1, 0, 1])
    hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels,
       sentence_order_label=sop).loss.backward()
    ours(ids, mask, types, labels=labels, sentence_order_label=sop).loss.backward()
    hf_grads = dict(hf.named_parameters())
    for key, grad in keymap.to_hf({k: p.grad for k, p in ours.named_parameters()}, ours.config).items():
        assert max_diff(grad, hf_grads[key].grad) <= TOL, key


@pytest.mark.parametrize("name", ["all-shared", "groups-and-inner", "not-shared"])
def test_saved_here_loads_in_transformers(name, tmp_path):
    torch.manual_seed(7)
    ours = AlbertForPreTraining(AlbertConfig(**{**BASE, **CONFIGS[name]})).eval()
    ours.save_pretrained(tmp_path / "ours")
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "ours").eval()
    ids, mask, types = batch(seed=8)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
        out = ours(ids, mask, types)
    assert max_diff(out.prediction_logits, ref.prediction_logits) <= TOL
    assert max_diff(out.sop_logits, ref.sop_logits) <= TOL


def test_bert_style_model_without_projection_exports_exactly(tmp_path):
    """E == H with no projection (official BERT-like configs) is written with an identity projection for HF."""
    torch.manual_seed(9)
    cfg = AlbertConfig(**{**BASE, "embedding_size": 32, "sharing": "none"})
    assert not cfg.has_embedding_projection
    ours = AlbertForPreTraining(cfg).eval()
    ours.save_pretrained(tmp_path / "bert")
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "bert").eval()
    again = AlbertForPreTraining.from_pretrained(tmp_path / "bert")
    assert not again.config.has_embedding_projection
    ids, mask, types = batch(seed=10)
    with torch.no_grad():
        out = ours(ids, mask, types).prediction_logits
        assert max_diff(out, hf(input_ids=ids, attention_mask=mask, token_type_ids=types).prediction_logits) <= TOL
        assert max_diff(out, again(ids, mask, types).prediction_logits) == 0.0


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_partial_sharing_equals_hf_not_shared_with_tied_blocks(sharing, tmp_path):
    """Shared-attention (or shared-FFN) equals a not-shared HF model whose attention (or FFN) weights are the same
    in every layer: the oracle for the paper's Table 4 modes, which HF cannot express."""
    torch.manual_seed(11)
    ours = AlbertForPreTraining(AlbertConfig(**{**BASE, "sharing": sharing})).eval()
    attention_ids, ffn_ids = ours.config.schedule()
    assert len(ours.albert.encoder.attention_blocks) == (1 if sharing == "attention" else 4)
    assert len(ours.albert.encoder.ffn_blocks) == (1 if sharing == "ffn" else 4)
    hf = transformers.AlbertForPreTraining(hf_config(num_hidden_groups=4)).eval()
    state = {k: v for k, v in ours.state_dict().items() if "attention_blocks" not in k and "ffn_blocks" not in k}
    for layer in range(4):
        prefix = f"albert.encoder.albert_layer_groups.{layer}.albert_layers.0."
        block = ours.albert.encoder.attention_blocks[attention_ids[layer]]
        state.update({prefix + "attention." + k: v for k, v in block.state_dict().items()})
        state.update({prefix + k: v for k, v in ours.albert.encoder.ffn_blocks[ffn_ids[layer]].state_dict().items()})
    state["predictions.decoder.weight"] = state["albert.embeddings.word_embeddings.weight"]
    state["predictions.decoder.bias"] = state["predictions.bias"]
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in k or "token_type_ids" in k for k in missing)
    ids, mask, types = batch(seed=12)
    with torch.no_grad():
        assert max_diff(ours(ids, mask, types).prediction_logits,
                        hf(input_ids=ids, attention_mask=mask, token_type_ids=types).prediction_logits) <= TOL


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn"])
@pytest.mark.parametrize("act,positions", [("gelu_new", False), ("gelu_new", True), ("relu", True)])
def test_shared_block_gradients_are_the_sum_of_hf_per_layer_gradients(sharing, act, positions):
    """A block visited at several depth steps gets the sum of the steps' weight gradients. Oracle: a not-shared HF
    model whose layers all hold that block's weights; the shared block's gradient must be the sum of HF's per-layer
    gradients, every other parameter's gradient equal to HF's. ``positions``: the last step runs only at the masked
    positions."""
    torch.manual_seed(17)
    ours = AlbertForPreTraining(AlbertConfig(**{**BASE, "hidden_act": act, "sharing": sharing})).train()
    attention_ids, ffn_ids = ours.config.schedule()
    hf = transformers.AlbertForPreTraining(hf_config(num_hidden_groups=4, hidden_act=act)).train()
    state = {k: v for k, v in ours.state_dict().items() if "attention_blocks" not in k and "ffn_blocks" not in k}
    encoder = ours.albert.encoder
    for layer in range(4):
        prefix = f"albert.encoder.albert_layer_groups.{layer}.albert_layers.0."
        state.update({prefix + "attention." + k: v
                      for k, v in encoder.attention_blocks[attention_ids[layer]].state_dict().items()})
        state.update({prefix + k: v for k, v in encoder.ffn_blocks[ffn_ids[layer]].state_dict().items()})
    state["predictions.decoder.weight"] = state["albert.embeddings.word_embeddings.weight"]
    state["predictions.decoder.bias"] = state["predictions.bias"]
    hf.load_state_dict(state, strict=False)

    ids, mask, types = batch(seed=18)
    where = torch.tensor([[1, 5, 11], [2, 3, 8], [4, 1, 2]])
    targets = torch.gather(ids, 1, where)
    labels = torch.full_like(ids, -100).scatter_(1, where, targets)
    sop = torch.tensor([0, 1, 1])
    hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels,
       sentence_order_label=sop).loss.backward()
    if positions:
        loss = ours(ids, mask, types, mlm_positions=where, mlm_ids=targets, sentence_order_label=sop).loss
    else:
        loss = ours(ids, mask, types, labels=labels, sentence_order_label=sop).loss
    loss.backward()

    hf_params = dict(hf.named_parameters())
    compared = 0
    for kind, blocks, ids_ in (("attention", encoder.attention_blocks, attention_ids),
                               ("ffn", encoder.ffn_blocks, ffn_ids)):
        for b, block in enumerate(blocks):
            for name, p in block.named_parameters():
                hf_name = ("attention." if kind == "attention" else "") + name
                expected = sum(hf_params[f"albert.encoder.albert_layer_groups.{layer}.albert_layers.0.{hf_name}"].grad
                               for layer in range(4) if ids_[layer] == b)
                assert max_diff(p.grad, expected) <= TOL, (kind, b, name)
                compared += 1
    assert compared == sum(1 for k, _ in encoder.named_parameters() if "blocks" in k)
    for key in ("albert.embeddings.word_embeddings.weight", "albert.encoder.embedding_hidden_mapping_in.weight",
                "albert.pooler.weight", "predictions.dense.weight"):
        assert max_diff(dict(ours.named_parameters())[key].grad, hf_params[key].grad) <= TOL, key


def test_partial_sharing_saves_natively_and_refuses_hf_export(tmp_path):
    ours = AlbertForPreTraining(AlbertConfig(**{**BASE, "sharing": "attention"})).eval()
    ours.save_pretrained(tmp_path / "native")
    again = AlbertForPreTraining.from_pretrained(tmp_path / "native", strict=True)
    ids, mask, types = batch()
    with torch.no_grad():
        assert max_diff(ours(ids, mask, types).prediction_logits, again(ids, mask, types).prediction_logits) == 0.0
    from litebert.io.hf_folder import save_pretrained

    with pytest.raises(CheckpointError, match="sharing='attention'"):
        save_pretrained(ours, tmp_path / "hf", require_hf=True)
    with pytest.raises(OSError):  # HF must refuse the folder rather than load random weights
        transformers.AlbertForPreTraining.from_pretrained(tmp_path / "native")


def _compare_task(hf_cls, our_cls, tmp_path, inputs, label_kwargs, outputs, **cfg):
    torch.manual_seed(13)
    hf = hf_cls(hf_config(**cfg)).eval()
    ours = hf_roundtrip(hf, tmp_path, our_cls)
    with torch.no_grad():
        ref = hf(**inputs, **label_kwargs)
        ids = inputs["input_ids"]
        out = ours(ids, inputs.get("attention_mask"), inputs.get("token_type_ids"), **label_kwargs)
    for name in outputs:
        assert max_diff(getattr(out, name), getattr(ref, name)) <= TOL, name
    assert abs(out.loss.item() - ref.loss.item()) <= TOL


def test_sequence_classification_matches_hf(tmp_path):
    ids, mask, types = batch()
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
    _compare_task(transformers.AlbertForSequenceClassification, AlbertForSequenceClassification, tmp_path, inputs,
                  dict(labels=torch.tensor([0, 2, 1])), ["logits"], num_labels=3)


def test_regression_matches_hf(tmp_path):
    ids, mask, types = batch()
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
    _compare_task(transformers.AlbertForSequenceClassification, AlbertForSequenceClassification, tmp_path, inputs,
                  dict(labels=torch.tensor([0.5, 4.2, 2.0])), ["logits"], num_labels=1)


def test_token_classification_matches_hf(tmp_path):
    ids, mask, types = batch()
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(1))
    labels[mask == 0] = -100
    _compare_task(transformers.AlbertForTokenClassification, AlbertForTokenClassification, tmp_path,
                  dict(input_ids=ids, attention_mask=mask), dict(labels=labels), ["logits"], num_labels=5)


def test_question_answering_matches_hf(tmp_path):
    ids, mask, types = batch()
    _compare_task(transformers.AlbertForQuestionAnswering, AlbertForQuestionAnswering, tmp_path,
                  dict(input_ids=ids, attention_mask=mask, token_type_ids=types),
                  dict(start_positions=torch.tensor([4, 6, 30]), end_positions=torch.tensor([5, 8, 31])),
                  ["start_logits", "end_logits"])


def test_multiple_choice_matches_hf(tmp_path):
    ids, mask, types = batch(b=4)
    inputs = dict(input_ids=ids.view(2, 2, -1), attention_mask=mask.view(2, 2, -1), token_type_ids=types.view(2, 2, -1))
    _compare_task(transformers.AlbertForMultipleChoice, AlbertForMultipleChoice, tmp_path, inputs,
                  dict(labels=torch.tensor([1, 0])), ["logits"])


def test_masked_lm_matches_hf(tmp_path):
    ids, mask, types = batch()
    labels = torch.where(mask.bool(), ids, -100)
    _compare_task(transformers.AlbertForMaskedLM, AlbertForMaskedLM, tmp_path,
                  dict(input_ids=ids, attention_mask=mask, token_type_ids=types), dict(labels=labels), ["logits"])


def test_bare_model_checkpoints_both_ways(tmp_path):
    """HF's AlbertModel files carry no 'albert.' prefix; they load into heads here, and ours load into HF."""
    torch.manual_seed(14)
    hf = transformers.AlbertModel(hf_config(num_hidden_groups=2)).eval()
    hf.save_pretrained(tmp_path / "bare")
    clf = AlbertForSequenceClassification.from_pretrained(tmp_path / "bare", num_labels=4)
    bare = AlbertModel.from_pretrained(tmp_path / "bare", strict=True)
    ids, mask, types = batch()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
        assert max_diff(clf.albert(ids, mask, types).pooler_output, ref.pooler_output) <= TOL
        assert max_diff(bare(ids, mask, types).last_hidden_state, ref.last_hidden_state) <= TOL
    bare.save_pretrained(tmp_path / "ours")
    hf2 = transformers.AlbertModel.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        assert max_diff(hf2(input_ids=ids, attention_mask=mask).last_hidden_state,
                        bare(ids, mask).last_hidden_state) <= TOL


def test_pretraining_checkpoint_loads_into_task_head(tmp_path, caplog):
    torch.manual_seed(15)
    pre = AlbertForPreTraining(AlbertConfig(**BASE))
    pre.save_pretrained(tmp_path / "pre")
    with caplog.at_level("INFO", logger="litebert"):
        qa = AlbertForQuestionAnswering.from_pretrained(tmp_path / "pre")
    assert "qa_outputs.weight" in caplog.text  # reported as newly initialised
    for key, value in pre.albert.state_dict().items():
        if not key.startswith("pooler"):
            assert torch.equal(qa.albert.state_dict()[key], value), key
    config = dataclasses.replace(pre.config)
    assert config == pre.config


def test_skip_padding_matches_hf_on_real_tokens(tmp_path):
    """With padding skipped, every real position, the pooled output, the loss and all gradients equal HF's."""
    torch.manual_seed(16)
    hf = transformers.AlbertForPreTraining(hf_config(num_hidden_groups=2, inner_group_num=2)).train()
    ours = hf_roundtrip(hf, tmp_path, AlbertForPreTraining).train()
    ids, mask, types = batch(seed=17)
    labels = torch.where((mask == 1) & (torch.arange(13) % 3 == 1), ids, -100)
    sop = torch.tensor([1, 0, 1])
    ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels, sentence_order_label=sop)
    out = ours(ids, mask, types, labels=labels, sentence_order_label=sop, output_hidden_states=True,
               packing=Packing.from_mask(mask))
    real = mask.bool()
    assert max_diff(out.prediction_logits[real], ref.prediction_logits[real]) <= TOL
    assert max_diff(out.sop_logits, ref.sop_logits) <= TOL
    assert torch.all(out.hidden_states[-1][~real] == 0)
    ref.loss.backward()
    out.loss.backward()
    assert abs(out.loss.item() - ref.loss.item()) <= TOL
    hf_params = dict(hf.named_parameters())
    for key, grad in keymap.to_hf({k: p.grad for k, p in ours.named_parameters()}, ours.config).items():
        assert max_diff(grad, hf_params[key].grad) <= TOL, key


def test_hidden_states_match_hf(tmp_path):
    """One entry for the projected embeddings, then one per layer (after all its inner-group blocks), as HF."""
    torch.manual_seed(18)
    hf = transformers.AlbertModel(hf_config(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2)).eval()
    hf.save_pretrained(tmp_path / "hf")
    ours = AlbertModel.from_pretrained(tmp_path / "hf")
    ids, mask, types = batch(seed=19)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True).hidden_states
        out = ours(ids, mask, types, output_hidden_states=True).hidden_states
    assert len(out) == len(ref) == 7
    for a, b in zip(out, ref):
        assert max_diff(a, b) <= TOL


@pytest.mark.parametrize("name,checkpointing,skip_padding", [
    ("all-shared", False, False), ("all-shared", True, True), ("groups-and-inner", False, True),
    ("groups-and-inner", True, False), ("not-shared", False, False)])
def test_official_mlm_path_loss_and_gradients_match_hf(name, checkpointing, skip_padding, tmp_path):
    """Pretraining with mlm_positions runs the last layer only at the masked positions and [CLS]; the loss and every
    gradient must still equal HF's full computation. Positions include a repeat and the padded-prediction 0."""
    torch.manual_seed(11)
    hf = transformers.AlbertForPreTraining(hf_config(**CONFIGS[name])).train()
    ours = hf_roundtrip(hf, tmp_path, AlbertForPreTraining).train()
    ours.set_gradient_checkpointing(checkpointing)
    ids, mask, types = batch(seed=12)
    positions = torch.tensor([[1, 5, 11, 12], [2, 3, 8, 0], [4, 4, 1, 0]])  # row 1 ends at 9, row 2 at 5
    weights = torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 0]])  # trailing 0s: padded predictions
    targets = torch.gather(ids, 1, positions)
    sop = torch.tensor([1, 0, 1])
    ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
    # HF's loss is a mean over distinct labelled positions; ours counts the repeated position twice: build the
    # reference from HF's logits the official way (weighted mean over the P predictions).
    at = torch.gather(ref.prediction_logits, 1, positions[..., None].expand(-1, -1, 101))  # [B, P, V]
    nll = -torch.gather(torch.log_softmax(at, -1), 2, targets.unsqueeze(-1)).squeeze(-1)  # [B, P]
    ref_loss = (weights * nll).sum() / (weights.sum() + 1e-5) + torch.nn.functional.cross_entropy(ref.sop_logits, sop)
    ref_loss.backward()
    out = ours(ids, mask, types, mlm_positions=positions, mlm_ids=targets, mlm_weights=weights,
               sentence_order_label=sop, packing=Packing.from_mask(mask) if skip_padding else None)
    out.loss.backward()
    assert abs(out.loss.item() - ref_loss.item()) <= TOL
    assert out.prediction_logits.shape == (3, 4, 101)
    assert max_diff(out.prediction_logits, torch.gather(ref.prediction_logits.detach(), 1,
                                                        positions[..., None].expand(-1, -1, 101))) <= TOL
    assert max_diff(out.sop_logits, ref.sop_logits.detach()) <= TOL
    hf_params = dict(hf.named_parameters())
    compared = 0
    for key, grad in keymap.to_hf({k: p.grad for k, p in ours.named_parameters()}, ours.config).items():
        assert max_diff(grad, hf_params[key].grad) <= TOL, key
        compared += 1
    assert compared == len(list(ours.parameters()))


def test_output_positions_on_the_bare_model(tmp_path):
    torch.manual_seed(13)
    hf = transformers.AlbertModel(hf_config(**CONFIGS["groups"])).eval()
    hf.save_pretrained(tmp_path / "hf")
    ours = AlbertModel.from_pretrained(tmp_path / "hf").eval()
    ids, mask, types = batch(seed=14)
    positions = torch.tensor([[0, 12], [8, 3], [4, 0]])
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
        want = torch.gather(ref.last_hidden_state, 1, positions[..., None].expand(-1, -1, 32))
        for skip in (False, True):
            out = ours(ids, mask, types, output_positions=positions, packing=Packing.from_mask(mask) if skip else None)
            assert out.last_hidden_state.shape == (3, 2, 32)
            assert max_diff(out.last_hidden_state, want) <= TOL
            assert max_diff(out.pooler_output, ref.pooler_output) <= TOL
        with pytest.raises(ValueError, match="padding"):  # row 1 ends at 9
            ours(ids, mask, types, output_positions=torch.tensor([[1, 2], [1, 10], [1, 2]]),
                 packing=Packing.from_mask(mask))
        with pytest.raises(ValueError, match=r"\[0, 13\)"):
            ours(ids, mask, types, output_positions=torch.tensor([[1, 13], [1, 2], [1, 2]]))
        full = ours(ids, mask, types, output_hidden_states=True, output_positions=positions)  # computes everything
        assert max_diff(full.last_hidden_state, want) <= TOL and len(full.hidden_states) == 5


@pytest.mark.parametrize("name,checkpointing", [("all-shared", False), ("groups-and-inner", True)])
def test_token_classification_skipping_padding_matches_hf_training(name, checkpointing, tmp_path):
    """The fine-tuning loop skips padding for token classification (padded labels are -100): the loss and every
    gradient must equal HF's padded computation."""
    torch.manual_seed(19)
    hf = transformers.AlbertForTokenClassification(hf_config(**CONFIGS[name], num_labels=3)).train()
    ours = hf_roundtrip(hf, tmp_path, AlbertForTokenClassification).train()
    ours.set_gradient_checkpointing(checkpointing)
    ids, mask, types = batch(seed=20)
    labels = torch.randint(0, 3, ids.shape, generator=torch.Generator().manual_seed(21))
    labels[mask == 0] = -100  # as `litebert.tasks.features.collate` pads them
    ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
    ref.loss.backward()
    assert not ours.LOSS_READS_PADDING  # the fine-tuning loop packs its batches
    out = ours(ids, mask, types, labels=labels, packing=Packing.from_mask(mask))
    out.loss.backward()
    assert abs(out.loss.item() - ref.loss.item()) <= TOL
    real = mask.bool()
    assert max_diff(out.logits[real], ref.logits.detach()[real]) <= TOL
    hf_params = dict(hf.named_parameters())
    grads = keymap.to_hf({k: p.grad for k, p in ours.named_parameters()}, ours.config)
    assert len(grads) == len(list(ours.parameters()))
    for key, grad in grads.items():
        assert max_diff(grad, hf_params[key].grad) <= TOL, key


@pytest.mark.parametrize("name,checkpointing,skip_padding", [
    ("all-shared", False, False), ("all-shared", True, True), ("groups-and-inner", False, True)])
@pytest.mark.parametrize("task", ["sequence", "choice"])
def test_pooled_heads_loss_and_gradients_match_hf(task, name, checkpointing, skip_padding, tmp_path):
    """A pooled head runs the last layer only at [CLS]; logits, loss and every gradient must equal HF's full pass."""
    hf_cls, our_cls = ((transformers.AlbertForSequenceClassification, AlbertForSequenceClassification)
                       if task == "sequence" else (transformers.AlbertForMultipleChoice, AlbertForMultipleChoice))
    torch.manual_seed(17)
    hf = hf_cls(hf_config(**CONFIGS[name], num_labels=3)).train()
    ours = hf_roundtrip(hf, tmp_path, our_cls).train()
    ours.set_gradient_checkpointing(checkpointing)
    ids, mask, types = batch(seed=18, b=4)
    if task == "sequence":
        labels = torch.tensor([0, 2, 1, 2])
    else:
        ids, mask, types = ids.view(2, 2, -1), mask.view(2, 2, -1), types.view(2, 2, -1)
        labels = torch.tensor([1, 0])
    ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
    ref.loss.backward()
    out = ours(ids, mask, types, labels=labels, packing=Packing.from_mask(mask) if skip_padding else None)
    out.loss.backward()
    assert abs(out.loss.item() - ref.loss.item()) <= TOL
    assert max_diff(out.logits, ref.logits.detach()) <= TOL
    hf_params = dict(hf.named_parameters())
    grads = keymap.to_hf({k: p.grad for k, p in ours.named_parameters()}, ours.config)
    assert len(grads) == len(list(ours.parameters()))
    for key, grad in grads.items():
        assert max_diff(grad, hf_params[key].grad) <= TOL, key
    if task == "sequence" and not checkpointing:  # and the pruning is real: fewer FLOPs than a full last layer
        from torch.utils.flop_counter import FlopCounterMode

        def flops(fn):
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                fn()
            return counter.get_total_flops()

        pooled = flops(lambda: ours(ids, mask, types))
        full = flops(lambda: ours.albert(ids, mask, types))
        assert pooled < full - 0.5 * full / len(ours.albert.encoder.schedule)  # most of one depth step saved


INFERENCE_CONFIGS = ["all-shared", "groups-and-inner", "not-shared", "E-equals-H", "relu", "dropout-in-eval"]


@pytest.mark.parametrize("name", INFERENCE_CONFIGS)
@pytest.mark.parametrize("skip_padding", [False, True])
@pytest.mark.parametrize("length", [13, 170])
def test_inference_path_matches_hf(name, skip_padding, length, tmp_path):
    """Inference (no autograd, eval mode) against HF's eval forward: every real position and the pooled output; with
    padding computed, the padded positions too."""
    torch.manual_seed(30)
    hf = transformers.AlbertModel(hf_config(**CONFIGS[name], max_position_embeddings=200)).eval()
    ours = hf_roundtrip(hf, tmp_path, AlbertModel).eval()
    g = torch.Generator().manual_seed(31)
    ids = torch.randint(5, 101, (4, length), generator=g)
    mask = torch.ones(4, length, dtype=torch.long)
    for row, keep in ((1, length - 3), (2, length // 2), (3, 1)):
        mask[row, keep:] = 0
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask)
        out = ours(ids, mask, packing=Packing.from_mask(mask) if skip_padding else None)
    positions = mask.bool() if skip_padding else torch.ones_like(mask, dtype=torch.bool)
    assert max_diff(out.last_hidden_state[positions], ref.last_hidden_state[positions]) <= TOL
    assert max_diff(out.pooler_output, ref.pooler_output) <= TOL


def test_inference_under_cpu_autocast_and_in_train_mode_with_dropout():
    """bf16 autocast runs and stays near fp32; a train-mode model under no_grad still applies its dropout."""
    torch.manual_seed(4)
    config = AlbertConfig.from_preset("tiny", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    ours = AlbertModel(config).eval()
    ids, mask, _ = batch(seed=5, vocab=config.vocab_size)
    with torch.no_grad():
        ref = ours(ids, mask).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = ours(ids, mask).last_hidden_state
        assert low.dtype == torch.bfloat16 and max_diff(low.float(), ref) < 0.25
        ours.train()
        first, second = ours(ids, mask).last_hidden_state, ours(ids, mask).last_hidden_state
    assert max_diff(first, second) > 1e-3 and max_diff(first, ref) > 1e-3
