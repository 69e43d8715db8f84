"""`litebert.pipeline` against transformers 4.57's own pipelines on the same folders: every task, on folders saved
by litebert and by HF (tiny random models, the official 30k vocabulary), same keys and structure, scores within 1e-4,
identical tokens, labels, spans and answers. Then question answering with heads set by hand, so that the answers are
known: HF's pipeline, `litebert.pipeline` and `litebert predict` give the same ones, which needs the word boundaries
litebert's tokenizer.json declares."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import torch

import litebert
from helpers.pipelines import CONFIG, assert_same, hf_pipeline
from litebert.errors import ArgumentError, CheckpointError, ConfigError, TokenizerError
from litebert.tokenizer import AlbertTokenizer

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")
LABELS = {"clf": ["neg", "pos", "mid"], "ner": ["O", "B-PER", "I-PER"]}
HEADS = {"mlm": "AlbertForMaskedLM", "clf": "AlbertForSequenceClassification", "ner": "AlbertForTokenClassification",
         "qa": "AlbertForQuestionAnswering", "enc": "AlbertModel"}
TEXTS = ["Ahab (quietly) hunted the whale in 1851, off Nantucket.", 'He said "no" -- twice, to the captain.',
         "Call me Ishmael.", "Some years ago—never mind how long precisely—having little or no money in my purse"]
CONTEXT = ("The ship was sunk by the navy. Ahab (quietly) hunted the whale in 1851, off Nantucket. "
           "Moby-Dick is a novel by Herman Melville, published in 1851 in London. ") * 2


@pytest.fixture(scope="module")
def tok(albert_vocab):
    return AlbertTokenizer.from_pretrained(albert_vocab)


@pytest.fixture(scope="module")
def folders(tok, tmp_path_factory):
    """{(head, saver): folder}: each head made by HF with seed 0, saved by HF ("hf": the model, and HF's own
    tokenizer files where no character spans are compared) and by litebert ("litebert": loaded into litebert's class
    and saved with litebert's tokenizer)."""
    root, out = tmp_path_factory.mktemp("pipelines"), {}
    for head, arch in HEADS.items():
        torch.manual_seed(0)
        extra = {}
        if head in LABELS:
            extra = {"id2label": dict(enumerate(LABELS[head])), "label2id": {x: i for i, x in enumerate(LABELS[head])}}
        hf_model = getattr(transformers, arch)(transformers.AlbertConfig(**CONFIG, **extra)).eval()
        hf_model.save_pretrained(root / f"{head}-hf")
        if head in ("ner", "qa"):  # spans: HF's converted tokenizer starts "▁navy" at the space before it
            tok.save_pretrained(root / f"{head}-hf")
        else:
            transformers.AlbertTokenizer(str(tok.model_file)).save_pretrained(root / f"{head}-hf")
        ours = getattr(litebert, arch).from_pretrained(root / f"{head}-hf")
        ours.save_pretrained(root / f"{head}-litebert")
        tok.save_pretrained(root / f"{head}-litebert")
        out[head, "hf"], out[head, "litebert"] = root / f"{head}-hf", root / f"{head}-litebert"
    return out


# litebert-saved folders carry litebert's tokenizer.json; HF-saved ones HF's slow files, which HF converts (its fast
# tokenizer cuts words at the user-defined pieces, "4-our" -> "▁4 - ▁our"), so texts there avoid those pieces.
PLAIN = ["Call me Ishmael, and [MASK] me not.", "The [MASK] sat on the mat.", "It was the [MASK] of times."]


@pytest.mark.parametrize("saver", ["litebert", "hf"])
def test_fill_mask_equals_hf(folders, saver):
    folder = folders["mlm", saver]
    hf, ours = hf_pipeline("fill-mask", folder), litebert.pipeline("fill-mask", model=folder, batch_tokens=40)
    texts = PLAIN + (["Ahab (quietly) [MASK] the whale.", "4-our [MASK] said [MASK]."] if saver == "litebert" else
                     ["Paris is the [MASK] of France, [MASK] said"])
    for text in texts:  # one mask: a list of 5; several: a list per mask, their sequences keeping [CLS]/[SEP]
        assert_same(hf(text), ours(text))
    assert_same(hf(texts, top_k=3), ours(texts, top_k=3))
    assert_same(hf([texts[0]], top_k=1), ours([texts[0]], top_k=1))  # a list of one answers as one text, as HF's
    scores = [a["score"] for a in ours(texts[1], top_k=30000)]  # the whole vocabulary: a distribution, best first
    assert scores == sorted(scores, reverse=True) and abs(sum(scores) - 1) < 1e-4


@pytest.mark.parametrize("saver", ["litebert", "hf"])
def test_text_classification_equals_hf(folders, saver):
    folder = folders["clf", saver]
    hf, ours = hf_pipeline("text-classification", folder), litebert.pipeline("sentiment-analysis", model=folder)
    texts = TEXTS if saver == "litebert" else PLAIN
    assert_same(hf(texts[0]), ours(texts[0]))  # a list of one {label, score}
    assert_same(hf(texts), ours(texts))
    assert_same(hf(texts, top_k=None), ours(texts, top_k=None))  # every label, best first
    assert_same(hf(texts[1], top_k=2), ours(texts[1], top_k=2))
    assert {a["label"] for a in ours(texts, top_k=None)[0]} == set(LABELS["clf"])


def test_text_classification_labels_from_finetune_json(folders, tmp_path):
    """A folder whose config.json names no labels takes finetune.json's (HF's LABEL_i without either)."""
    import shutil

    folder = tmp_path / "clf"
    shutil.copytree(folders["clf", "litebert"], folder)
    config = json.loads((folder / "config.json").read_text())
    for key in ("id2label", "label2id"):
        config.pop(key, None)
    config["num_labels"] = 3
    (folder / "config.json").write_text(json.dumps(config))
    assert {a["label"] for a in litebert.pipeline("text-classification", folder)("x", top_k=None)} == \
        {"LABEL_0", "LABEL_1", "LABEL_2"}
    (folder / "finetune.json").write_text(json.dumps({"task": "classify", "labels": ["a", "b", "c"]}))
    assert {a["label"] for a in litebert.pipeline("text-classification", folder)("x", top_k=None)} == {"a", "b", "c"}


@pytest.mark.parametrize("saver", ["litebert", "hf"])
def test_token_classification_equals_hf(folders, saver):
    folder = folders["ner", saver]
    hf, ours = hf_pipeline("ner", folder), litebert.pipeline("ner", model=folder, batch_size=2)
    texts = TEXTS + ["x\ty ½ café  two  spaces", "Paris is the [MASK] of France."]
    ref, got = hf(texts), ours(texts)
    assert_same(ref, got)
    assert sum(map(len, got)) > 10  # random labels: many pieces are not "O"
    assert_same(hf(texts[0]), ours(texts[0]))


@pytest.mark.parametrize("saver", ["litebert", "hf"])
def test_feature_extraction_equals_hf(folders, saver):
    folder = folders["enc", saver]
    hf, ours = hf_pipeline("feature-extraction", folder), litebert.pipeline("feature-extraction", model=folder,
                                                                          batch_tokens=30)
    texts = TEXTS if saver == "litebert" else PLAIN
    assert_same(hf(texts), ours(texts))
    assert_same(hf(texts[2]), ours(texts[2]))  # [1, L, H]
    assert np.asarray(ours(texts[2])).shape == (1, len(ours.tokenizer(texts[2])["input_ids"]), CONFIG["hidden_size"])


@pytest.mark.parametrize("options", [{}, {"top_k": 5}, {"top_k": 3, "max_seq_len": 40, "doc_stride": 10},
                                     {"top_k": 2, "handle_impossible_answer": True},
                                     {"top_k": 4, "align_to_words": False}, {"max_answer_len": 3}])
@pytest.mark.parametrize("saver", ["litebert", "hf"])
def test_question_answering_equals_hf(folders, options, saver):
    folder = folders["qa", saver]
    hf = hf_pipeline("question-answering", folder)
    ours = litebert.pipeline("question-answering", model=folder)  # HF's decoding is the default
    assert_same(hf(question="Who sank the ship?", context=CONTEXT, **options),
                ours(question="Who sank the ship?", context=CONTEXT, **options))
    questions, contexts = ["Who wrote it?", "When?", "Where?"], [CONTEXT, CONTEXT[:90], CONTEXT[90:200]]
    assert_same(hf(question=questions, context=contexts, **options),
                ours(question=questions, context=contexts, **options))
    assert_same(hf({"question": "When?", "context": CONTEXT}, **options),
                ours({"question": "When?", "context": CONTEXT}, **options))


# ------------------------------------------------------------------------------- answers set by hand
def qa_model_answering(folder, tok, context: str, first: str, last: str):
    """A QA folder whose answer is the context's pieces ``first`` .. ``last``: the encoder reduced to LayerNorms (no
    attention or feed-forward output, no position or type embeddings), so a piece's last hidden state h(piece)
    depends on the piece alone, all of the same norm; the start scorer is 10 h(first), the end scorer 10 h(last),
    so the start logit is highest at ``first`` (h.h is largest for h itself) and the end logit at ``last``."""
    torch.manual_seed(1)
    model = transformers.AlbertForQuestionAnswering(transformers.AlbertConfig(**CONFIG)).eval()
    with torch.no_grad():
        emb = model.albert.embeddings
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        layer = model.albert.encoder.albert_layer_groups[0].albert_layers[0]
        for linear in (layer.attention.dense, layer.ffn_output):
            linear.weight.zero_()
            linear.bias.zero_()
        ids = tok(context)["input_ids"]
        hidden = model.albert(torch.tensor([ids])).last_hidden_state[0]  # [L, H]
        pieces = tok.convert_ids_to_tokens(ids)
        assert pieces.count(first) == 1 and pieces.count(last) == 1, pieces
        model.qa_outputs.weight.copy_(10 * torch.stack([hidden[pieces.index(first)], hidden[pieces.index(last)]]))
        model.qa_outputs.bias.zero_()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


HAND_SET = [  # context, first piece, last piece, the answer: its pieces' characters
    ("The ship was sunk by the navy. Ahab hunted the whale in 1851, off Nantucket.", "▁navy", "▁navy", "navy"),
    ("The ship was sunk by the navy. Ahab hunted the whale in 1851, off Nantucket.", "▁hunted", "▁whale",
     "hunted the whale"),
    ("The ship was sunk by the navy. Ahab hunted the whale in 1851, off Nantucket.", "▁nan", "et", "Nantucket"),
    ("Melville (the author) wrote Moby-Dick in 1851.", "▁mob", "y", "Moby"),  # "-" is a word of its own
    ("Melville (the author) wrote Moby-Dick in 1851.", "▁1851", "▁1851", "1851"),
]


@pytest.mark.parametrize("case", range(len(HAND_SET)))
def test_known_answers_agree_with_hf_pipeline_and_predict(case, tok, tmp_path):
    context, first, last, answer = HAND_SET[case]
    folder = qa_model_answering(tmp_path / "qa", tok, context, first, last)
    question = "What is the answer?"
    ref = hf_pipeline("question-answering", folder)(question=question, context=context)
    got = litebert.pipeline("question-answering", model=folder, decoding="hf")(question=question, context=context)
    (tmp_path / "in.jsonl").write_text(json.dumps({"question": question, "context": context}) + "\n")
    litebert.predict(folder, tmp_path / "in.jsonl", tmp_path / "out.jsonl", progress=False)
    predicted = json.loads((tmp_path / "out.jsonl").read_text())
    start = context.index(answer)
    assert (ref["answer"], ref["start"], ref["end"]) == (answer, start, start + len(answer))
    assert_same(ref, got)
    assert (predicted["answer"], predicted["answer_start"]) == (answer, start)
    assert got["score"] > 0.9


def test_without_the_word_cuts_hf_widens_navy_to_navy_dot(tok, tmp_path):
    """The check above can fail: with the pre-tokenizer litebert wrote before (white space and Metaspace only),
    "navy." is one word to HF, and its pipeline answers "navy." where litebert's pieces say "navy"."""
    context, first, last, answer = HAND_SET[0]
    folder = qa_model_answering(tmp_path / "qa", tok, context, first, last)
    data = json.loads((folder / "tokenizer.json").read_text())
    data["pre_tokenizer"]["pretokenizers"] = [p for p in data["pre_tokenizer"]["pretokenizers"] if p["type"] != "Split"]
    (folder / "tokenizer.json").write_text(json.dumps(data))
    assert hf_pipeline("question-answering", folder)(question="?", context=context)["answer"] == "navy."


# ------------------------------------------------------------------------------- tokenizer.json
@pytest.mark.parametrize("options", [{}, {"keep_accents": True}, {"do_lower_case": False}])
def test_tokenizer_json_declares_hf_converters_normalizer_and_decoder(albert_vocab, tmp_path, options):
    convert = importlib.import_module("transformers.convert_slow_tokenizer")
    slow = transformers.AlbertTokenizer(str(albert_vocab / "spiece.model"), **options)
    ref = json.loads(convert.AlbertConverter(slow).converted().to_str())
    ours = json.loads((AlbertTokenizer.from_pretrained(albert_vocab, **options).save_pretrained(tmp_path)
                       / "tokenizer.json").read_text())
    assert ours["normalizer"] == ref["normalizer"]
    assert ours["decoder"] == ref["decoder"]
    steps = ours["pre_tokenizer"]["pretokenizers"]
    assert [s["type"] for s in steps] == ["WhitespaceSplit", "Metaspace", "Split"] and steps[1] == ref["pre_tokenizer"]


def test_tokenizer_json_words_are_hf_converters_words(albert_vocab, tok, tmp_path):
    """The words HF's converted tokenizer sees (its added tokens cut them) are the words of litebert's tokenizer.json;
    only HF's spans start at the space before a word, where litebert's start at the word."""
    from tokenizers import Tokenizer

    convert = importlib.import_module("transformers.convert_slow_tokenizer")
    ref = convert.AlbertConverter(transformers.AlbertTokenizer(str(albert_vocab / "spiece.model"))).converted()
    ours = Tokenizer.from_file(str(tok.save_pretrained(tmp_path) / "tokenizer.json"))

    def words(enc, text):
        spans = {}
        for w, (a, b), piece in zip(enc.word_ids, enc.offsets, enc.tokens):
            if w is not None and piece != "▁":  # a lone "▁" before "(": a word to one, a space before one to the other
                a = a + 1 if text[a] == " " else a
                spans[w] = (min(spans.get(w, (a, b))[0], a), max(spans.get(w, (a, b))[1], b))
        return sorted(spans.values())

    for text in TEXTS[:2] + [CONTEXT, "The navy. Moby-Dick (1851) cost £3 or €4."]:
        assert words(ours.encode(text), text) == words(ref.encode(text), text), text


# ------------------------------------------------------------------------------- errors
def test_errors_are_one_line(folders):
    with pytest.raises(ConfigError, match="'summarization': not a pipeline task"):
        litebert.pipeline("summarization", model=folders["mlm", "litebert"])
    with pytest.raises(ConfigError, match="did you mean 'fill-mask'"):
        litebert.pipeline("fill_mask", model=folders["mlm", "litebert"])
    with pytest.raises(CheckpointError, match="no question-answering head in its weights"):
        litebert.pipeline("question-answering", model=folders["clf", "litebert"])
    with pytest.raises(CheckpointError, match="no such model folder"):
        litebert.pipeline("ner", model=folders["ner", "litebert"] / "nothing")
    with pytest.raises(ConfigError, match="batch_size = 0"):
        litebert.pipeline("ner", model=folders["ner", "litebert"], batch_size=0)
    qa = litebert.pipeline("question-answering", model=folders["qa", "litebert"])
    with pytest.raises(ArgumentError, match="^inputs: question-answering takes question= and context="):
        qa("just a string")
    with pytest.raises(ConfigError, match="top_k = 0"):
        qa(question="q", context="c", top_k=0)


@pytest.mark.filterwarnings("ignore:.*encoder weights missing")
def test_a_tokenizer_of_another_model_is_refused(tok, tmp_path):
    """A folder whose tokenizer is not of its model's vocabulary: a one-line TokenizerError when the pipeline is made
    (`litebert.pairing.check_tokenizer`), not an index error from the embedding nor answers in the wrong pieces."""
    folder = tmp_path / "small-vocab"
    torch.manual_seed(0)
    litebert.AlbertForMaskedLM(litebert.AlbertConfig(**{**CONFIG, "vocab_size": 100})).save_pretrained(folder)
    tok.save_pretrained(folder)
    for task in ("fill-mask", "feature-extraction"):
        with pytest.raises(TokenizerError, match="its tokenizer has 30000 pieces, but its model a vocabulary of 100"
                           ) as e:
            litebert.pipeline(task, model=folder)
        assert "\n" not in str(e.value)
