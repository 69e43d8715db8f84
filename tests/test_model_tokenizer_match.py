"""A model, the head asked of it and the tokenizer it is given are checked to belong together (`litebert.pairing`),
by every command and pipeline that reads a model folder with a tokenizer, before anything runs or is written.

* the head: a sequence classifier and a token classifier both hold ``classifier.*`` tensors; config.json's
  ``architectures`` tells them apart, so the token-classification pipeline refuses a sequence classifier (it would
  answer per-piece "entities") and the other way round;
* the vocabulary: a tokenizer of another vocabulary (the 274-piece WordPiece of tests/helpers/ for a model of the
  official 30k SentencePiece vocabulary, or the 30k one for a model of 100 pieces) is refused, naming the argument
  that brought it (``tokenizer``, or the ``model`` folder whose own tokenizer it is), where before the answers were
  decoded with the wrong pieces; a tokenizer of the model's size is accepted.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

import litebert
from helpers import write_wordpiece_vocab
from litebert.errors import CheckpointError, TokenizerError
from litebert.inference.fill_mask import fill_mask
from litebert.pairing import check_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")
CONFIG = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=37)
LABELS = {"id2label": {0: "O", 1: "B-X", 2: "I-X"}, "num_labels": 3}


@pytest.fixture(scope="module")
def folders(albert_vocab, tmp_path_factory):
    """Tiny random models with the official 30k vocabulary, one per head; a 274-piece WordPiece tokenizer folder;
    a 100-piece model saved with the 30k tokenizer; a model of the WordPiece vocabulary's size with it."""
    from litebert.tokenizer import AlbertTokenizer, load_tokenizer

    tok, root, out = AlbertTokenizer.from_pretrained(albert_vocab), tmp_path_factory.mktemp("match"), {}
    heads = {"mlm": "AlbertForMaskedLM", "pretraining": "AlbertForPreTraining",
             "clf": "AlbertForSequenceClassification", "ner": "AlbertForTokenClassification",
             "qa": "AlbertForQuestionAnswering", "enc": "AlbertModel"}
    for name, arch in heads.items():
        torch.manual_seed(0)
        extra = LABELS if name in ("clf", "ner") else {}
        getattr(litebert, arch)(litebert.AlbertConfig(**CONFIG, **extra)).save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = root / name
    out["wordpiece"] = write_wordpiece_vocab(root / "wordpiece" / "vocab.txt").parent
    wp_size = load_tokenizer(out["wordpiece"]).vocab_size
    assert wp_size == 274
    litebert.AlbertForMaskedLM(litebert.AlbertConfig(**{**CONFIG, "vocab_size": 100})).save_pretrained(root / "small")
    tok.save_pretrained(root / "small")
    out["small"] = root / "small"
    litebert.AlbertForMaskedLM(litebert.AlbertConfig(**{**CONFIG, "vocab_size": wp_size})).save_pretrained(root / "wp")
    write_wordpiece_vocab(root / "wp" / "vocab.txt")
    out["wp"] = root / "wp"
    return out


# ------------------------------------------------------------------------------- the head
@pytest.mark.parametrize("task, folder, holds", [("token-classification", "clf", "AlbertForSequenceClassification"),
                                                 ("ner", "clf", "AlbertForSequenceClassification"),
                                                 ("text-classification", "ner", "AlbertForTokenClassification")])
def test_a_pipeline_refuses_a_folder_of_another_head(folders, task, folder, holds):
    with pytest.raises(CheckpointError) as e:
        litebert.pipeline(task, folders[folder], device="cpu")
    message = str(e.value)
    assert message.startswith(f"model = {str(folders[folder])!r}: holds an {holds} (config.json 'architectures'), "
                              f"not a "), message
    assert "\n" not in message


def test_predict_refuses_a_finetune_json_of_another_head(folders, tmp_path):
    """finetune.json says a token task (conll) but the weights are a sequence classifier's: the classifier tensors
    would load into a token head of the same shape and tag pieces; refused, naming the folder, before any output."""
    import shutil

    folder = tmp_path / "mixed"
    shutil.copytree(folders["clf"], folder)
    (folder / "finetune.json").write_text(json.dumps({"task": "conll", "labels": ["O", "B-X", "I-X"]}))
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"tokens": ["the", "whale"]}) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError) as e:
        litebert.predict(folder, data, tmp_path / "out.jsonl", device="cpu", progress=False)
    assert str(e.value) == (f"model = {str(folder)!r}: holds an AlbertForSequenceClassification (config.json "
                            f"'architectures'), not the head finetune.json's task 'conll' fine-tunes "
                            f"(AlbertForTokenClassification); give a folder that has one")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("task, folder", [("token-classification", "ner"), ("text-classification", "clf"),
                                          ("fill-mask", "mlm"), ("fill-mask", "pretraining"),
                                          ("question-answering", "qa"), ("feature-extraction", "enc"),
                                          ("feature-extraction", "clf")])
def test_a_pipeline_takes_its_own_head(folders, task, folder):
    assert litebert.pipeline(task, folders[folder], device="cpu") is not None


# ------------------------------------------------------------------------------- the vocabulary
def _refused_tokenizer(error, folders, model):
    message = str(error)
    assert isinstance(error, TokenizerError) and "\n" not in message
    assert message.startswith(f"tokenizer = {str(folders['wordpiece'])!r}: has 274 pieces, but model = "
                              f"{str(folders[model])!r} has a vocabulary of 30000 (config.json vocab_size)"), message


@pytest.mark.parametrize("task, folder", [("fill-mask", "mlm"), ("text-classification", "clf"),
                                          ("token-classification", "ner"), ("question-answering", "qa"),
                                          ("feature-extraction", "enc")])
def test_every_pipeline_refuses_a_tokenizer_of_another_vocabulary(folders, task, folder):
    with pytest.raises(TokenizerError) as e:
        litebert.pipeline(task, folders[folder], tokenizer=folders["wordpiece"], device="cpu")
    _refused_tokenizer(e.value, folders, folder)


def test_every_command_refuses_a_tokenizer_of_another_vocabulary(folders, tmp_path):
    """fill-mask, predict, evaluate, embed and finetune: refused before anything is written."""
    rows = [{"sentence": "the whale", "label": "B-X"}, {"sentence": "the ship", "label": "O"}]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    wp, out = folders["wordpiece"], tmp_path / "out"
    calls = {"mlm": lambda: fill_mask(folders["mlm"], "the [MASK]", tokenizer=wp, device="cpu"),
             "clf": lambda: litebert.predict(folders["clf"], data, out, tokenizer=wp, device="cpu", progress=False),
             "enc": lambda: litebert.embed(folders["enc"], data, tmp_path / "out.npy", text_field="sentence",
                                           tokenizer=wp, device="cpu")}
    for model, run in calls.items():
        with pytest.raises(TokenizerError) as e:
            run()
        _refused_tokenizer(e.value, folders, model)
    with pytest.raises(TokenizerError) as e:
        litebert.evaluate(folders["clf"], data, tokenizer=wp, device="cpu", progress=False)
    _refused_tokenizer(e.value, folders, "clf")
    with pytest.raises(TokenizerError) as e:
        litebert.finetune("classify", folders["enc"], data, out, tokenizer=wp, device="cpu", progress=False,
                          log=None)
    _refused_tokenizer(e.value, folders, "enc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl"]


def test_a_folder_whose_own_tokenizer_is_of_another_size_is_refused(folders):
    with pytest.raises(TokenizerError) as e:
        litebert.pipeline("fill-mask", folders["small"], device="cpu")
    message = str(e.value)
    assert re.match(rf"model = {re.escape(repr(str(folders['small'])))}: its tokenizer has 30000 pieces, but its "
                    rf"model a vocabulary of 100 \(config.json vocab_size\).*pass tokenizer with the one the model "
                    rf"was trained with$", message), message


def test_a_tokenizer_of_the_models_vocabulary_is_accepted(folders):
    fill = litebert.pipeline("fill-mask", folders["wp"], device="cpu")
    answers = fill("the [MASK] whale", top_k=3)
    assert len(answers) == 3 and all(0 <= a["token"] < 274 for a in answers)
    other = litebert.pipeline("fill-mask", folders["mlm"], tokenizer=folders["mlm"], device="cpu")
    assert len(other("the [MASK] whale", top_k=2)) == 2


def test_special_token_ids_must_lie_in_the_vocabulary():
    class Tok:
        vocab_size, pad_token_id, unk_token_id, cls_token_id, sep_token_id, mask_token_id = 10, 0, 1, 2, 3, 10

    with pytest.raises(TokenizerError, match=r"^tokenizer = 't': gives \[MASK\] the id 10, outside the model's "
                                             r"vocabulary of 10 pieces"):
        check_tokenizer(Tok(), 10, "m", "t")
    Tok.mask_token_id = 4
    check_tokenizer(Tok(), 10, "m", "t")
