"""`litebert.pairing` reads every signal a model folder carries (issue 57, item 2).

* the tokenizer by content: a tokenizer given apart from a folder that has its own must hold the same pieces in the
  same order (`pieces_fingerprint`), not only as many. Generated vocabularies (Hypothesis): the same size with one
  piece changed is refused, naming the id and both pieces; the identical one, in another file, is accepted; with
  ``allow_tokenizer_mismatch`` the changed one is a warning. ``litebert fill-mask --tokenizer OTHER`` on a model
  folder is refused with one line, before anything is written.
* the head without ``architectures``: finetune.json's task, else the tensors and the label map. A sequence
  classifier whose config.json lost its ``architectures`` does not answer token classification; a token classifier
  (tag labels) does not answer text classification.
"""

from __future__ import annotations

import json
import string

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import litebert
from litebert.cli import main
from litebert.errors import CheckpointError, TokenizerError
from litebert.inference.finetuned import load_tokenizer
from litebert.pairing import held_heads, is_tagging, pieces_fingerprint

pytest.importorskip("tokenizers")  # WordPiece vocabularies (the wordpiece extra)
pytestmark = pytest.mark.usefixtures("one_thread")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CONFIG = dict(embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=17)

# a vocabulary: the special tokens, then distinct word pieces and ## continuations
_piece = st.text(string.ascii_lowercase + "0123456789", min_size=1, max_size=6)
vocabularies = st.lists(st.one_of(_piece, _piece.map(lambda p: "##" + p)), min_size=3, max_size=40,
                        unique=True).map(lambda pieces: SPECIALS + pieces)


def _write(folder, pieces, config: bool = True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
    if config:  # what load_tokenizer reads of a model folder: its vocab_size
        litebert.AlbertConfig(vocab_size=len(pieces), **CONFIG).to_json(folder / "config.json")
    return folder


def _changed(pieces: list[str], data) -> list[str]:
    """``pieces`` with one piece (not a special token) replaced by another not in it."""
    i = data.draw(st.integers(len(SPECIALS), len(pieces) - 1), label="changed id")
    new = data.draw(_piece.filter(lambda p: p not in pieces), label="new piece")
    return pieces[:i] + [new] + pieces[i + 1:]


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=vocabularies, data=st.data())
def test_a_tokenizer_of_the_same_size_but_other_pieces_is_refused(pieces, data, tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    model, other = _write(root / "model", pieces), _write(root / "other", _changed(pieces, data), False)
    same = _write(root / "same", pieces, False)
    assert load_tokenizer(model, same).vocab_size == len(pieces)  # identical content: accepted
    with pytest.raises(TokenizerError) as e:
        load_tokenizer(model, other)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"tokenizer = {str(other)!r}: has the model's size "
                                                      f"({len(pieces)} pieces) but other pieces: id "), message
    assert "pass allow_tokenizer_mismatch" in message
    with pytest.warns(UserWarning, match="other pieces"):
        assert load_tokenizer(model, other, allow_tokenizer_mismatch=True).vocab_size == len(pieces)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(pieces=vocabularies, data=st.data())
def test_the_fingerprint_tells_every_change_of_a_piece_or_its_place(pieces, data):
    class Tok:
        def __init__(self, p):
            self.p, self.vocab_size = p, len(p)

        def convert_ids_to_tokens(self, ids):
            return [self.p[i] for i in ids]

    changed = _changed(pieces, data)
    i, j = data.draw(st.integers(0, len(pieces) - 1)), data.draw(st.integers(0, len(pieces) - 1))
    swapped = list(pieces)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    assert pieces_fingerprint(Tok(pieces)) == pieces_fingerprint(Tok(list(pieces)))
    assert pieces_fingerprint(Tok(pieces)) != pieces_fingerprint(Tok(changed))
    assert (pieces_fingerprint(Tok(pieces)) == pieces_fingerprint(Tok(swapped))) == (pieces[i] == pieces[j])
    # pieces that join alike ("ab" + "c" and "a" + "bc") do not hash alike
    assert pieces_fingerprint(Tok(["ab", "c"])) != pieces_fingerprint(Tok(["a", "bc"]))


def test_the_same_pieces_from_another_file_kind_are_accepted(albert_vocab, tmp_path):
    """spiece.model in the folder, the same vocabulary as tokenizer.json elsewhere: the pieces decide, not the
    bytes of the files."""
    from litebert.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer.from_pretrained(albert_vocab)
    tok.save_pretrained(tmp_path / "model")
    litebert.AlbertConfig(vocab_size=tok.vocab_size, **CONFIG).to_json(tmp_path / "model" / "config.json")
    assert load_tokenizer(tmp_path / "model", albert_vocab).vocab_size == tok.vocab_size


def test_fill_mask_refuses_another_vocabulary_of_the_same_size(tmp_path, capsys):
    pieces = SPECIALS + ["the", "cat", "sat", "on", "mat", "##s", "a", "dog"]
    torch.manual_seed(0)
    model = tmp_path / "pre"
    litebert.AlbertForMaskedLM(litebert.AlbertConfig(vocab_size=len(pieces), **CONFIG)).save_pretrained(model)
    _write(model, pieces, config=False)
    other = _write(tmp_path / "other", pieces[:6] + ["hat"] + pieces[7:], config=False)
    out = tmp_path / "out.jsonl"
    (tmp_path / "in.jsonl").write_text('{"text": "the [MASK] sat"}\n', encoding="utf-8")
    capsys.readouterr()
    code = main(["fill-mask", "--model", str(model), "--tokenizer", str(other), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(out), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"litebert fill-mask: error: --tokenizer {other}: has the model's size (13 pieces) but "
                          f"other pieces: id 6 is 'hat' here and 'cat' in the folder's own tokenizer"), err
    assert "--allow-tokenizer-mismatch" in err and not out.exists()
    with pytest.warns(UserWarning, match=r"tokenizer = .*other pieces: id 6 is 'hat'"):  # the CLI prints it
        code = main(["fill-mask", "--model", str(model), "--tokenizer", str(other), "--text", "the [MASK] sat",
                     "--device", "cpu", "--allow-tokenizer-mismatch"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out), captured


# ------------------------------------------------------------------------------- the head without architectures
LABELS = {"sentiment": {0: "negative", 1: "positive"}, "tags": {0: "O", 1: "B-PER", 2: "I-PER"}}


def _head_folder(root, head: str, labels: dict, keep_architectures: bool = False):
    torch.manual_seed(0)
    config = litebert.AlbertConfig(vocab_size=len(SPECIALS) + 4, id2label=labels, num_labels=len(labels), **CONFIG)
    getattr(litebert, head)(config).save_pretrained(root)
    _write(root, SPECIALS + ["the", "whale", "ship", "sea"], config=False)
    if not keep_architectures:
        data = json.loads((root / "config.json").read_text())
        data.pop("architectures", None)
        (root / "config.json").write_text(json.dumps(data))
    return root


@pytest.mark.parametrize("head, labels, refused, taken", [
    ("AlbertForSequenceClassification", "sentiment", "token-classification", "text-classification"),
    ("AlbertForTokenClassification", "tags", "text-classification", "token-classification")])
def test_without_architectures_the_tensors_and_labels_tell_the_head(tmp_path, head, labels, refused, taken):
    folder = _head_folder(tmp_path / "m", head, LABELS[labels])
    assert held_heads(folder, {"classifier.weight": (len(LABELS[labels]), 16)})[0] == {head}
    with pytest.raises(CheckpointError, match=rf"holds an {head} \(its classifier.\* tensors with config.json's"):
        litebert.pipeline(refused, folder, device="cpu")
    assert litebert.pipeline(taken, folder, device="cpu") is not None


def test_finetune_json_tells_the_head_before_the_tensors(tmp_path):
    """Tag labels would say token classification; finetune.json's task (sst-2, a sequence task) speaks first."""
    folder = _head_folder(tmp_path / "m", "AlbertForSequenceClassification", LABELS["tags"])
    (folder / "finetune.json").write_text(json.dumps({"task": "sst-2", "labels": ["O", "B-PER", "I-PER"]}))
    with pytest.raises(CheckpointError, match=r"holds an AlbertForSequenceClassification \(finetune.json's task "
                                              r"'sst-2'\), not a token-classification head"):
        litebert.pipeline("token-classification", folder, device="cpu")


@given(st.lists(st.sampled_from(["O", "B-PER", "I-PER", "B-LOC", "E-X", "S-Y", "positive", "LABEL_0", "B", "O-X"]),
                min_size=1, max_size=6))
@settings(max_examples=100, derandomize=True)
def test_tag_labels_are_each_o_or_a_tag_and_one_a_tag(labels):
    tags = [x for x in labels if x[:2] in ("B-", "I-", "E-", "S-")]
    assert is_tagging(labels) == (bool(tags) and all(x == "O" or x in tags for x in labels))
