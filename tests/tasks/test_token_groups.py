"""Token classification as users call it: ``pipeline("ner", aggregation_strategy=...)`` and ``litebert predict
--aggregation-strategy`` (`litebert.tasks.token_groups`) against transformers' NER pipeline on the same folders,
every strategy, on sentences with words of several pieces, punctuation glued to words, an unknown piece and
white space of several kinds. Two folders: a SentencePiece one (the official 30k vocabulary) and a WordPiece one
(a BERT-style vocab.txt, whose words HF tells by "##"). The models are random (seed 0) with a classifier scaled up,
so that neighbouring pieces get different labels and the groups are of every kind: B- then I-, a B- after a B-,
a label without B-/I- (MISC), and "O" left out."""

from __future__ import annotations

import json

import pytest
import torch

import litebert
from helpers import bert_tokenizer_folder
from helpers.pipelines import assert_same, hf_pipeline

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "MISC"]
STRATEGIES = ["none", "simple", "first", "average", "max"]
TEXTS = {
    "sentencepiece": ["Ahab (quietly) hunted the whale in 1851, off Nantucket.", "Call me Ishmael.",
                      "Moby-Dick is a novel by Herman Melville, published in London.", "Queequeg's harpoon flew",
                      'He said "no" -- twice.', "x\ty ½ café  two  spaces 中国"],
    "wordpiece": ["The quick brown fox jumps over the lazy dog.", "Hello world, unaffable whaling in Zürich!",
                  "Paris is the capital of France 中国北京", "résumé: naïve café, it's 2010"],
}


@pytest.fixture(scope="module")
def folders(albert_vocab, tmp_path_factory):
    """{tokenizer kind: folder} of AlbertForTokenClassification models made and saved by HF."""
    from litebert.tokenizer import AlbertTokenizer, load_tokenizer

    root, out = tmp_path_factory.mktemp("ner"), {}
    for kind in TEXTS:
        folder = root / kind
        if kind == "sentencepiece":
            AlbertTokenizer.from_pretrained(albert_vocab).save_pretrained(folder)
        else:
            bert_tokenizer_folder(folder)
        torch.manual_seed(0)
        config = transformers.AlbertConfig(vocab_size=load_tokenizer(folder).vocab_size, embedding_size=16,
                                           hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=37, id2label=dict(enumerate(LABELS)),
                                           label2id={x: i for i, x in enumerate(LABELS)})
        model = transformers.AlbertForTokenClassification(config).eval()
        with torch.no_grad():
            model.classifier.weight.mul_(30)  # confident, varied labels
        model.save_pretrained(folder)
        out[kind] = folder
    return out


@pytest.mark.parametrize("kind", list(TEXTS))
def test_every_strategy_equals_hf(folders, kind):
    hf, ours = hf_pipeline("ner", folders[kind]), litebert.pipeline("ner", model=folders[kind], device="cpu")
    texts, kinds = TEXTS[kind], set()
    for strategy in STRATEGIES:
        ref = hf(texts, aggregation_strategy=strategy)
        got = ours(texts, aggregation_strategy=strategy)
        assert_same(ref, got)
        assert_same(hf(texts[0], aggregation_strategy=strategy), ours(texts[0], aggregation_strategy=strategy))
        kinds |= {e.get("entity_group", e.get("entity")) for answer in got for e in answer}
    assert_same(hf(texts, aggregation_strategy="simple", ignore_labels=[]),
                ours(texts, aggregation_strategy="simple", ignore_labels=[]))
    assert {"PER", "LOC", "MISC", "B-PER", "I-LOC"} <= kinds
    # the strategies really differ here: words group pieces, and "first" is not "max"
    answers = {s: ours(texts, aggregation_strategy=s) for s in STRATEGIES}
    assert len({json.dumps(a, default=float) for a in answers.values()}) == len(STRATEGIES)
    assert ours(texts) == ours(texts, aggregation_strategy=None) == answers["none"]  # HF's default: one per piece


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_predict_answers_what_the_pipeline_does(folders, tmp_path, strategy):
    """``litebert predict --aggregation-strategy`` on a token-classification folder: each input's ``text`` (or its
    ``words`` joined by spaces) gets the pipeline's answer under ``entities``; without the flag, tags per word."""
    from litebert.cli import main

    folder, texts = folders["sentencepiece"], TEXTS["sentencepiece"]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts) + json.dumps({"words": ["Call", "me"]})
                   + "\n")
    assert main(["predict", "--model", str(folder), "--input", str(inp), "--output", str(tmp_path / "out.jsonl"),
                 "--aggregation-strategy", strategy, "--no-progress"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    expected = litebert.pipeline("ner", model=folder, device="cpu")(texts + ["Call me"], aggregation_strategy=strategy)
    for row, answer in zip(rows, expected):
        assert_same(json.loads(json.dumps(answer, default=float)), row["entities"])
    litebert.predict(folder, inp, tmp_path / "tags.jsonl", progress=False)
    assert all("tags" in json.loads(line) for line in (tmp_path / "tags.jsonl").read_text().splitlines())


def test_a_wrong_strategy_is_refused(folders, tmp_path, capsys):
    from litebert.cli import main
    from litebert.errors import ConfigError

    ner = litebert.pipeline("ner", model=folders["sentencepiece"], device="cpu")
    with pytest.raises(ConfigError, match="^aggregation_strategy = 'grouped'"):
        ner("Call me Ishmael.", aggregation_strategy="grouped")
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": "Call me Ishmael."}) + "\n")
    with pytest.raises(SystemExit):
        main(["predict", "--model", str(folders["sentencepiece"]), "--input", str(tmp_path / "in.jsonl"),
              "--output", str(tmp_path / "out.jsonl"), "--aggregation-strategy", "grouped"])
    assert "invalid choice: 'grouped'" in capsys.readouterr().err
