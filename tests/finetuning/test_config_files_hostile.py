"""The JSON documents a fine-tuned folder carries, generated hostile (issue 57, item 1): ``finetune.json`` (the task,
its kind, labels, preset, columns, results) and a LoRA ``adapter_config.json``, with keys missing, renamed, values of
the wrong type, numbers at and past their limits, lists with repeated items, a BOM, damaged bytes. The property
(`helpers.hostile.outcome`): what reads the folder (``predict``, ``pipeline``, ``load_adapter``) gives a one-line
`LitebertError` naming the file, or its result; never another exception.

The folders are tiny (a random two-layer model over a 19-piece vocabulary), so an example costs a model load."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import litebert
from helpers.hostile import examples, hostile_json_file, outcome
from litebert.inference.finetuned import save_finetuned
from litebert.tasks.presets import get_preset

pytestmark = pytest.mark.usefixtures("one_thread")
TOKENIZER = {"version": "1.0", "added_tokens": [{"id": i, "content": p, "special": True}
                                                for i, p in enumerate(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"])
                                                if p != "<unk>"],
             "normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"},
             "model": {"type": "Unigram", "unk_id": 1,
                       "vocab": [[p, 0.0] for p in ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]]
                       + [[p, -1.0 - i] for i, p in enumerate(["▁", "▁the", "▁a", "a", "b", "c", "e", "h", "t",
                                                               "▁cat", "s", ",", "1", "▁1,"])]}}
TINY = dict(vocab_size=19, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=16, max_position_embeddings=64)


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """(folder, its finetune.json, an input file): a fine-tuned folder as `litebert finetune` leaves it."""
    root = tmp_path_factory.mktemp("finetuned")
    (root / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    tok = litebert.load_tokenizer(root / "tokenizer.json")
    torch.manual_seed(0)
    model = litebert.AlbertForSequenceClassification(litebert.AlbertConfig(
        **TINY, num_labels=2, id2label={0: "neg", 1: "pos"}))
    preset = dataclasses.replace(get_preset("classify"), max_seq_length=32)
    meta = {"task": "classify", "kind": preset.kind.name, "head": "AlbertForSequenceClassification",
            "labels": ["neg", "pos"], "metric": preset.metric, "preset": preset.to_json(), "columns": {},
            "train": {"lr": 1e-4, "batch_size": 4, "train_steps": 2, "data": "train.jsonl", "dev": "dev.jsonl",
                      "base_model": "base", "train_examples": 4, "dev_examples": 2},
            "best_step": 2, "dev_metrics": {preset.metric: 0.5}, "complete": True}
    folder = root / "ft"
    save_finetuned(model, tok, folder, meta)
    (root / "in.jsonl").write_text('{"text": "the cat"}\n{"text": "a bat, 1"}\n')
    return folder, meta, root / "in.jsonl"


@given(data=st.data())
@settings(max_examples=examples(15))
def test_a_hostile_finetune_json_is_refused_naming_it_or_predicts(finetuned, data, tmp_path_factory):
    base, meta, inputs = finetuned
    folder = tmp_path_factory.mktemp("ft") / "ft"
    shutil.copytree(base, folder)
    (folder / "finetune.json").write_bytes(data.draw(hostile_json_file(meta)))
    out = folder.parent / "pred.jsonl"
    # "complete": false (a hostile document may say so) is the folder's refusal: a run that did not finish
    done = outcome(lambda: litebert.predict(folder, inputs, out, progress=False), "finetune.json",
                   "fine-tuning did not finish")
    if done is not None:
        assert len(out.read_text().splitlines()) == 2
    outcome(lambda: litebert.pipeline("text-classification", folder, device="cpu")("the cat"), "finetune.json")


# ------------------------------------------------------------------------------- adapter_config.json
def tiny_model():
    torch.manual_seed(0)
    return litebert.AlbertForSequenceClassification(litebert.AlbertConfig(**TINY, num_labels=2))


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """(folder, its adapter_config.json document): a LoRA adapter as `save_adapter` writes it."""
    pytest.importorskip("peft")
    folder = tmp_path_factory.mktemp("adapter") / "adapter"
    litebert.save_adapter(litebert.add_lora(tiny_model(), r=2, targets=["query", "value"]), folder)
    return folder, json.loads((folder / "adapter_config.json").read_text())


@given(data=st.data())
@settings(max_examples=examples(15))
def test_a_hostile_adapter_config_is_refused_naming_it_or_loads(adapter, data, tmp_path_factory):
    base, document = adapter
    folder = tmp_path_factory.mktemp("ad") / "adapter"
    shutil.copytree(base, folder)
    (folder / "adapter_config.json").write_bytes(data.draw(hostile_json_file(document)))
    model = outcome(lambda: litebert.load_adapter(tiny_model(), folder), "adapter_config.json", "adapter")
    if model is not None:
        with torch.no_grad():
            model(torch.tensor([[2, 6, 3]]))


def _without(doc: dict, key: str) -> dict:
    return {k: v for k, v in doc.items() if k != key}


def test_documents_by_hand(finetuned, adapter, tmp_path):
    """The kinds the generated cases found, each once (so the default profile always meets them): finetune.json
    without the labels its classifier needs, or with entries of the wrong type; adapter_config.json with a rank,
    alpha or dropout of the wrong type, or a peft option litebert does not map."""
    from litebert.errors import CheckpointError

    base, meta, inputs = finetuned
    for doc, message in ((_without(meta, "labels"), "names no 'labels' for a head with 2 outputs"),
                         ({**meta, "labels": "neg,pos"}, "'labels' is \"neg,pos\", expected null or a list"),
                         ({**meta, "dev_metrics": {"accuracy": None}}, "'dev_metrics' is"),
                         ({**meta, "task": "nosuch"}, r"finetune.json: unknown task 'nosuch'"),
                         ({**meta, "preset": {**meta["preset"], "max_seq_length": 2}}, "too short for any input")):
        folder = tmp_path / f"ft{len(list(tmp_path.iterdir()))}"
        shutil.copytree(base, folder)
        (folder / "finetune.json").write_text(json.dumps(doc))
        with pytest.raises(CheckpointError, match=message):
            litebert.predict(folder, inputs, tmp_path / "pred.jsonl", progress=False)
    folder, document = adapter
    for doc, message in (({**document, "r": None}, "r = None: expected a whole number >= 1"),
                         ({**document, "lora_dropout": None}, "lora_dropout = None: expected a number in"),
                         ({**document, "rank_pattern": 0}, "rank_pattern = 0: expected an object"),
                         ({**document, "layer_replication": [[0, 1]]}, "layer_replication = .*litebert does not map")):
        copy = tmp_path / f"ad{len(list(tmp_path.iterdir()))}"
        shutil.copytree(folder, copy)
        (copy / "adapter_config.json").write_text(json.dumps(doc))
        with pytest.raises(CheckpointError, match=message):
            litebert.load_adapter(tiny_model(), copy)
