"""The training loops skip padded tokens when the loss cannot read them: the run must be the padded run (same losses,
same weights), the encoder must really see packed rows, and SQuAD's head (whose softmax covers the padding) must not
skip."""

import dataclasses

import pytest
import torch

from helpers.tiny_setup import tiny_model_config
from litebert.data.pretraining import PretrainingDataset
from litebert.engine.metrics_log import flops_per_sequence, read_metrics
from litebert.finetuning.config import TrainArgs
from litebert.finetuning.loop import train as finetune
from litebert.heads import (
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
)
from litebert.pretraining import loop
from litebert.pretraining.config import TrainConfig


def watch_encoder_input(model) -> list[int]:
    """Records the rank of every tensor entering the encoder: 2 = packed real tokens [N, E], 3 = padded [B, L, E]."""
    seen = []
    model.albert.encoder.embedding_hidden_mapping_in.register_forward_pre_hook(lambda _m, a: seen.append(a[0].dim()))
    return seen


@pytest.fixture(scope="module")
def stores(tiny_setup):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_setup
    torch.set_num_threads(threads)


def test_pretraining_loop_skips_padding_and_equals_the_padded_run(stores, tmp_path):
    # short_seq_prob 0.5: about half the sequences are short, so most micro-batches carry padding
    data = PretrainingDataset(stores["store"], max_seq_length=64, max_predictions_per_seq=10, seed=7,
                              short_seq_prob=0.5)
    lengths = [data.example(0, i)["input_ids"].size for i in range(32)]  # 4 steps x 2 micro-batches of 4
    padded_batches = [min(lengths[i:i + 4]) < max(lengths[i:i + 4]) for i in range(0, 32, 4)]
    assert 1 <= sum(padded_batches) < 8  # some micro-batches carry padding, some do not
    cfg = TrainConfig(max_steps=4, batch_size=8, micro_batch=4, lr=5e-3, warmup_steps=1, seq_len=64,
                      max_predictions=10, eval_every=0, save_every=4, seed=3,
                      read_every=1)  # each step read by itself: its own rates
    runs, ranks = {}, {}
    for name in ("skipping", "padded"):
        torch.manual_seed(0)
        model = AlbertForPreTraining(tiny_model_config())
        ranks[name] = watch_encoder_input(model)
        # the reference: the same loop with the padding computed, as HF does
        loop.train(model, data, None, dataclasses.replace(cfg, skip_padding=name == "skipping"), tmp_path / name,
                   progress=False)
        runs[name] = model
    # packed exactly when there is padding to skip (a full batch has no attention mask to pack by)
    assert ranks["skipping"] == [2 if p else 3 for p in padded_batches] and set(ranks["padded"]) == {3}
    losses = {k: [r["loss"] for r in read_metrics(tmp_path / k)] for k in runs}
    assert len(losses["padded"]) == 4
    # The logged tflops count each sequence at its real length: per token, FLOPs / tokens of that step's 8 sequences
    # (dt cancels between `tflops` and `tokens_per_s`), not the full-length figure.
    config, overcount = runs["skipping"].config, []
    for k, record in enumerate(read_metrics(tmp_path / "skipping")):
        step_lengths = lengths[8 * k: 8 * k + 8]
        flops = sum(flops_per_sequence(config, n, 10) for n in step_lengths)
        assert record["tflops"] * 1e12 / record["tokens_per_s"] == pytest.approx(flops / sum(step_lengths), rel=1e-9)
        overcount.append(8 * flops_per_sequence(config, 64, 10) / flops)
    assert max(overcount) > 1.1  # what counting every sequence at full length would have logged
    assert losses["skipping"] == pytest.approx(losses["padded"], rel=1e-5, abs=1e-6)
    padded = dict(runs["padded"].named_parameters())
    for key, p in runs["skipping"].named_parameters():
        assert (p - padded[key]).abs().max().item() <= 1e-5, key


def features(n: int, with_spans: bool = False):
    g = torch.Generator().manual_seed(5)
    out = []
    for i in range(n):
        length = int(torch.randint(6, 20, (1,), generator=g))  # variable lengths: every batch is padded
        ids = [2] + torch.randint(5, 99, (length - 2,), generator=g).tolist() + [3]
        f = {"input_ids": ids, "token_type_ids": [0] * length, "labels": i % 2}
        if with_spans:
            del f["labels"]
            f["start_positions"], f["end_positions"] = 1 + i % 3, 2 + i % 3
        out.append(f)
    return out


def finetuned(cls, feats, skip: bool):
    torch.manual_seed(1)
    model = cls(tiny_model_config(num_labels=2))
    seen = watch_encoder_input(model)
    finetune(model, feats, TrainArgs(lr=1e-3, batch_size=4, train_steps=3, group_by_length=False, skip_padding=skip,
                                     progress=False), log=lambda s: None)
    return model, seen


def test_finetuning_skips_padding_and_equals_the_padded_run():
    feats = features(12)
    skipping, seen = finetuned(AlbertForSequenceClassification, feats, skip=True)
    padded, seen_padded = finetuned(AlbertForSequenceClassification, feats, skip=False)
    assert set(seen) == {2} and set(seen_padded) == {3}
    reference = dict(padded.named_parameters())
    for key, p in skipping.named_parameters():
        assert (p - reference[key]).abs().max().item() <= 1e-5, key


def test_squad_head_computes_the_padding():
    """Its start/end softmax covers every position, padding included (as HF's), so zeros there would change the
    loss: the loop leaves it padded."""
    _, seen = finetuned(AlbertForQuestionAnswering, features(8, with_spans=True), skip=True)
    assert set(seen) == {3}


@pytest.mark.parametrize("cls,skips", [
    (AlbertForPreTraining, True), (AlbertForSequenceClassification, True), (AlbertForTokenClassification, True),
    (AlbertForMultipleChoice, True), (AlbertForQuestionAnswering, False)])
def test_which_heads_skip(cls, skips):
    """Whether a head's loss can read padded positions is a fact of its class; the model itself has no switch: it
    packs exactly when it is given a packing."""
    model = cls(tiny_model_config(num_labels=2))
    assert model.LOSS_READS_PADDING is not skips
    assert not any(hasattr(model.albert, name) for name in ("skip_padding", "validate_inputs"))


@pytest.mark.parametrize("head, reads_padding", [
    (AlbertForPreTraining, False), (AlbertForSequenceClassification, False), (AlbertForTokenClassification, False),
    (AlbertForMultipleChoice, False), (AlbertForQuestionAnswering, True)])
def test_both_loops_pack_by_one_rule(head, reads_padding):
    """`packs_in_training`, which both loops call: packed only with skip_padding on, a loss that never reads the
    padding (every head but the span head, whose softmax covers all positions) and no compile (padded shapes)."""
    from litebert.padding import packs_in_training

    model = head(tiny_model_config())
    assert packs_in_training(model, skip_padding=True, compile=False) is (not reads_padding)
    assert packs_in_training(model, skip_padding=False, compile=False) is False
    assert packs_in_training(model, skip_padding=True, compile=True) is False
