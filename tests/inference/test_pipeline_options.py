"""HF's common pipeline call options, against transformers 4.57's own pipelines on the same folders (tiny HF-made
models, saved by HF and by litebert: `litebert.inference.pipeline_base`): int devices, ``batch_size`` at call time,
``truncation``/``max_length``, text-classification ``function_to_apply``, fill-mask ``targets`` and
``tokenizer_kwargs``, feature-extraction ``return_tensors`` and ``tokenize_kwargs``. What litebert refuses is one
line."""

from __future__ import annotations

import warnings

import pytest
import torch

import litebert
from helpers.pipelines import CONFIG, assert_same, hf_pipeline
from litebert.errors import ArgumentError, ConfigError
from litebert.tokenizer import AlbertTokenizer

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]
HEADS = {"mlm": "AlbertForMaskedLM", "clf": "AlbertForSequenceClassification", "enc": "AlbertModel",
         "qa": "AlbertForQuestionAnswering", "ner": "AlbertForTokenClassification"}
TASKS = {"mlm": "fill-mask", "clf": "text-classification", "enc": "feature-extraction", "qa": "question-answering",
         "ner": "token-classification"}
TEXTS = ["The cat sat on the mat, and the dog sat beside it all day long.", "Call me Ishmael.",
         "It was the best of times, it was the worst of times.", "Some years ago, never mind how long precisely."]
MASKED = ["The [MASK] sat on the mat.", "Call me Ishmael, and [MASK] me not.", "It was the [MASK] of times, it was."]


@pytest.fixture(scope="module")
def folders(albert_vocab, tmp_path_factory):
    """{(head, saver): folder}: HF-made heads (seed 0) saved by HF (with HF's slow tokenizer files) and by litebert
    (loaded into litebert's class, saved with litebert's tokenizer)."""
    tok = AlbertTokenizer.from_pretrained(albert_vocab)
    root, out = tmp_path_factory.mktemp("options"), {}
    for head, arch in HEADS.items():
        torch.manual_seed(0)
        labels = {"clf": ["neg", "pos", "mid"], "ner": ["O", "B-PER", "I-PER"]}.get(head)
        extra = {"id2label": dict(enumerate(labels)), "label2id": {x: i for i, x in enumerate(labels)}
                 } if labels else {}
        hf = getattr(transformers, arch)(transformers.AlbertConfig(**CONFIG, **extra)).eval()
        hf.save_pretrained(root / f"{head}-hf")
        if head in ("qa", "ner"):  # character spans: litebert's tokenizer.json (test_pipelines.py says why)
            tok.save_pretrained(root / f"{head}-hf")
        else:
            transformers.AlbertTokenizer(str(tok.model_file)).save_pretrained(root / f"{head}-hf")
        getattr(litebert, arch).from_pretrained(root / f"{head}-hf").save_pretrained(root / f"{head}-litebert")
        tok.save_pretrained(root / f"{head}-litebert")
        out[head, "hf"], out[head, "litebert"] = root / f"{head}-hf", root / f"{head}-litebert"
    return out


def both(folders, head, saver, **options):
    return hf_pipeline(TASKS[head], folders[head, saver]), litebert.pipeline(TASKS[head], folders[head, saver],
                                                                             **options)


SAVERS = pytest.mark.parametrize("saver", ["litebert", "hf"])


@SAVERS
def test_int_devices(folders, saver):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = transformers.pipeline("text-classification", model=str(folders["clf", saver]), device=-1)
    ours = litebert.pipeline("text-classification", folders["clf", saver], device=-1)
    assert ours.device == torch.device("cpu")
    assert_same(hf(TEXTS, top_k=None), ours(TEXTS, top_k=None))
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"^device = 0: there is no CUDA GPU here; use device=-1") as e:
            litebert.pipeline("text-classification", folders["clf", saver], device=0)
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^device = -2: expected -1 \(the CPU\)"):
        litebert.pipeline("text-classification", folders["clf", saver], device=-2)


@SAVERS
@pytest.mark.parametrize("head", ["mlm", "clf", "enc", "ner", "qa"])
def test_batch_size_at_call_time(folders, head, saver):
    hf, ours = both(folders, head, saver, batch_size=32)
    if head == "qa":
        kw = dict(question=["Who sat?", "Who is it?", "When?"], context=TEXTS[:3])
        assert_same(hf(**kw, batch_size=2), ours(**kw, batch_size=2))
    elif head == "enc":  # HF's batch pads each text's states to its batch's longest: the rows past a text's own
        ref, got = hf(TEXTS, batch_size=2), ours(TEXTS, batch_size=2)  # pieces are padding's, litebert has none
        assert_same([[r[0][:len(g[0])]] for r, g in zip(ref, got)], got)
        assert_same(hf(TEXTS, batch_size=1), ours(TEXTS, batch_size=1))
    else:
        texts = MASKED if head == "mlm" else TEXTS
        assert_same(hf(texts, batch_size=2), ours(texts, batch_size=2))
    assert ours.batch_size == 32  # the call's size is the call's alone
    with pytest.raises(ConfigError, match="^batch_size = 0: expected an integer >= 1"):
        ours(MASKED if head == "mlm" else TEXTS, batch_size=0) if head != "qa" else ours(
            question="q", context="c", batch_size=0)


@SAVERS
@pytest.mark.parametrize("options", [dict(truncation=True, max_length=6), dict(max_length=5),
                                     dict(truncation=False, max_length=5), dict(truncation=True)])
def test_text_classification_truncation_and_max_length(folders, saver, options):
    hf, ours = both(folders, "clf", saver)
    assert_same(hf(TEXTS, top_k=None, **options), ours(TEXTS, top_k=None, **options))
    assert_same(hf(TEXTS[0], **options), ours(TEXTS[0], **options))


@SAVERS
@pytest.mark.parametrize("function", ["sigmoid", "softmax", "none"])
def test_function_to_apply(folders, saver, function):
    hf, ours = both(folders, "clf", saver)
    assert_same(hf(TEXTS, function_to_apply=function, top_k=None), ours(TEXTS, function_to_apply=function, top_k=None))
    assert_same(hf(TEXTS[1], function_to_apply=function), ours(TEXTS[1], function_to_apply=function))
    given_once = litebert.pipeline("text-classification", folders["clf", saver], function_to_apply=function)
    assert_same(hf(TEXTS, function_to_apply=function, top_k=2), given_once(TEXTS, top_k=2))
    with pytest.raises(ConfigError, match="^function_to_apply = 'tanh'"):
        ours(TEXTS[0], function_to_apply="tanh")


@SAVERS
@pytest.mark.parametrize("targets", [["▁dog", "▁cat", "▁man", "▁world"], "▁cat", ["dog", "catamaran", "▁the"]])
def test_fill_mask_targets(folders, saver, targets):
    """Pieces of the vocabulary, one string, and words that are not pieces (ranked as their first piece)."""
    hf, ours = both(folders, "mlm", saver)
    for top_k in (1, 3, 10):
        assert_same(hf(MASKED, targets=targets, top_k=top_k), ours(MASKED, targets=targets, top_k=top_k))
    two = "Paris is the [MASK] of France, [MASK] said"  # two masks: a list per mask
    assert_same(hf(two, targets=targets), ours(two, targets=targets))


@SAVERS
def test_fill_mask_tokenizer_kwargs(folders, saver):
    hf, ours = both(folders, "mlm", saver)
    texts = [MASKED[0], MASKED[2]]  # their masks within the first 7 pieces
    for kw in ({"truncation": True, "max_length": 7}, {"max_length": 7}, {"truncation": True}):
        assert_same(hf(texts, tokenizer_kwargs=dict(kw)), ours(texts, tokenizer_kwargs=dict(kw)))
    with pytest.raises(ConfigError, match=r"^tokenizer_kwargs = .*'padding' is not taken; litebert's pipelines take "
                                          r"truncation and max_length there"):
        ours(MASKED[0], tokenizer_kwargs={"padding": True})


@SAVERS
def test_feature_extraction_return_tensors_and_tokenize_kwargs(folders, saver):
    hf, ours = both(folders, "enc", saver)
    ref, got = hf(TEXTS, return_tensors=True), ours(TEXTS, return_tensors=True)
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert isinstance(g, torch.Tensor) and g.shape == r.shape and g.dtype == r.dtype
        torch.testing.assert_close(g, r, atol=1e-4, rtol=0)
    one = ours(TEXTS[1], return_tensors=True)
    torch.testing.assert_close(one, hf(TEXTS[1], return_tensors=True), atol=1e-4, rtol=0)
    for kw in (dict(truncation=True, tokenize_kwargs={"max_length": 5}),
               dict(tokenize_kwargs={"truncation": True, "max_length": 4}), dict(tokenize_kwargs={"max_length": 7}),
               dict(truncation=False)):
        copy = {k: dict(v) if isinstance(v, dict) else v for k, v in kw.items()}  # HF's writes into tokenize_kwargs
        assert_same(hf(TEXTS, **kw), ours(TEXTS, **copy))
    with pytest.raises(ConfigError, match="^truncation = True: given twice"):
        ours(TEXTS[0], truncation=True, tokenize_kwargs={"truncation": True})
    with pytest.raises(ArgumentError, match="^max_length"):  # HF's ignores it here: refused, not ignored
        ours(TEXTS[0], max_length=5)
