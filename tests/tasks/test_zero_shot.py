"""``pipeline("zero-shot-classification")`` (`litebert.tasks.zero_shot`) against transformers' zero-shot pipeline on
tiny NLI folders (labels entailment/neutral/contradiction, in MNLI's two orders): labels as a list or a
comma-separated string, one label or several, multi_label, another hypothesis template, one text or a list.

The model is random (seed 0) but made to read every piece: its attention is uniform (no query weights), so the
[CLS] vector is a mean over premise and hypothesis, and the value path is strengthened, so the label put into the
hypothesis moves the scores (by a few hundredths, against agreement to 1e-7)."""

from __future__ import annotations

import pytest
import torch

import litebert
from helpers.pipelines import assert_same, hf_pipeline

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")
ORDERS = {"mnli": ["entailment", "neutral", "contradiction"], "roberta": ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"]}
TEXTS = ["A boat on the sea.", "Prices and money, the stock market fell.", "Queequeg's harpoon flew (quietly)."]


def nli_folder(folder, tok, labels: list[str]):
    torch.manual_seed(0)
    config = transformers.AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=37, id2label=dict(enumerate(labels)),
                                       label2id={x: i for i, x in enumerate(labels)})
    model = transformers.AlbertForSequenceClassification(config).eval()
    with torch.no_grad():
        attention = model.albert.encoder.albert_layer_groups[0].albert_layers[0].attention
        attention.query.weight.zero_()
        attention.query.bias.zero_()
        attention.value.weight.mul_(30)
        attention.dense.weight.mul_(30)
        model.albert.pooler.weight.mul_(5)
        model.classifier.weight.mul_(50)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(albert_vocab, tmp_path_factory):
    from litebert.tokenizer import AlbertTokenizer

    tok, root = AlbertTokenizer.from_pretrained(albert_vocab), tmp_path_factory.mktemp("nli")
    return {name: nli_folder(root / name, tok, labels) for name, labels in ORDERS.items()}


@pytest.mark.parametrize("order", list(ORDERS))
def test_zero_shot_equals_hf(folders, order):
    hf = hf_pipeline("zero-shot-classification", folders[order])
    ours = litebert.pipeline("zero-shot-classification", model=folders[order], device="cpu")
    for labels in (["sea", "money", "food", "war"], "sea, money,food", ["whaling"]):
        for options in ({}, {"multi_label": True}, {"hypothesis_template": "This text is about {}."}):
            ref, got = hf(TEXTS, candidate_labels=labels, **options), ours(TEXTS, candidate_labels=labels, **options)
            assert_same(ref, got)
            assert_same(hf(TEXTS[0], labels, **options), ours(TEXTS[0], labels, **options))  # positional labels
    answers = ours(TEXTS, ["sea", "money", "food", "war"])
    assert len({tuple(a["labels"]) for a in answers}) > 1  # the texts rank the labels differently
    assert all(abs(sum(a["scores"]) - 1) < 1e-5 for a in answers)
    multi = ours(TEXTS[0], ["sea", "money", "food", "war"], multi_label=True)["scores"]
    assert abs(sum(multi) - 1) > 0.5  # independent scores, one softmax per label


def test_folders_that_are_not_nli_models_and_wrong_options_are_refused(folders, albert_vocab, tmp_path):
    from litebert.errors import CheckpointError, ConfigError
    from litebert.tokenizer import AlbertTokenizer

    sentiment = nli_folder(tmp_path / "sentiment", AlbertTokenizer.from_pretrained(albert_vocab), ["neg", "pos"])
    with pytest.raises(CheckpointError, match=r"its labels \(neg, pos\) name no entailment class"):
        litebert.pipeline("zero-shot-classification", model=sentiment)
    zero = litebert.pipeline("zero-shot-classification", model=folders["mnli"], device="cpu")
    with pytest.raises(ConfigError, match="^candidate_labels = None: give the labels"):
        zero("A boat.")
    with pytest.raises(ConfigError, match="^candidate_labels = ' , ': give the labels"):
        zero("A boat.", " , ")
    with pytest.raises(ConfigError, match="^hypothesis_template = 'About it.': has no {} for the label"):
        zero("A boat.", ["sea"], hypothesis_template="About it.")
