"""The typed Python API refuses wrong values at one boundary (`litebert.arguments.checked`), for every public function
and every pipeline's options: generated cases, not a list.

For every function in ``litebert.__all__`` (and `litebert.inference.fill_mask.fill_mask`), every parameter and every
value of a
pool that the parameter's annotation does not admit, the call must raise a `LitebertError` that is a ``TypeError``
or ``ValueError`` and whose one-line message starts with the parameter's name, before anything else happens: the
other arguments are placeholders (paths that do not exist), so a check made anywhere but at the boundary would name
another argument, or fail some other way. Which values an annotation admits is written by hand (in
`helpers.api_boundary`, shared with the generated cases of tests/test_api_boundary_properties.py), from the rules
the module docstring of `litebert.arguments` documents (a path is a str or a Path, an int never a bool...): the
reference the code is judged against, not the code's own `matches`. An annotation the table does not know fails
`test_every_annotation_is_known`, so a new parameter cannot go unchecked.

Then the pipelines: every option of every task's call, the same way, on tiny folders; an empty list in gives an empty
list out; ``top_k`` must be an int >= 1 and a larger one than there are labels or pieces answers all of them.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import litebert
from helpers.api_boundary import (
    ANNOTATIONS,
    POOL,
    annotated,
    assert_names,
    placeholders,
    public_functions,
    wrong_values,
)
from litebert.errors import ArgumentError, ConfigError
from litebert.inference.fill_mask import fill_mask

pytestmark = pytest.mark.usefixtures("one_thread")


def cases():
    for fname, fn in sorted(public_functions().items()):
        for name, annotation, _ in annotated(fn):
            if annotation in ANNOTATIONS and wrong_values(annotation):
                yield pytest.param(fname, name, id=f"{fname}-{name}")


def test_every_annotation_is_known():
    """Every parameter of every public function (and pipeline option) is annotated with a type this file knows."""
    from litebert.inference.pipelines import _PIPELINES

    fns = list(public_functions().items()) + [(c.__name__, c.answer) for c in _PIPELINES.values()]
    unknown = [(f, n, a) for f, fn in fns for n, a, _ in annotated(fn) if a not in ANNOTATIONS]
    assert not unknown
    assert all(hasattr(fn, "check") for _, fn in fns), "a public function is not @checked"


@pytest.mark.parametrize("fname, name", list(cases()))
def test_a_wrong_value_is_refused_naming_its_parameter(fname, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written, and the placeholders' paths name nothing there
    fn = public_functions()[fname]
    annotation = inspect.signature(fn).parameters[name].annotation
    for value in wrong_values(annotation):
        with pytest.raises(Exception) as e:
            fn(**placeholders(fn, name), **{name: value})
        assert_names(e.value, name, value)
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_type_is_a_type_error_and_a_config_error():
    """Python callers catch it as the TypeError a wrong type raises; the CLI and older callers as a ConfigError."""
    with pytest.raises(TypeError) as e:
        litebert.pretrain("no/such/store", None)
    assert isinstance(e.value, ArgumentError) and isinstance(e.value, ConfigError)
    assert str(e.value) == "out = None: expected str or Path"


def test_a_config_dict_is_refused_with_the_class_to_build():
    with pytest.raises(ArgumentError, match=r"^train = \{'max_steps': 2\}: expected TrainConfig or null, not a dict; "
                                            r"build one: TrainConfig\(\*\*fields\)$"):
        litebert.pretrain("no/such/store", "no/such/out", train={"max_steps": 2})


def test_an_argument_the_function_lacks_is_named():
    with pytest.raises(ArgumentError, match=r"^max_step: not an argument of pretrain; it takes data, out, model"):
        litebert.pretrain("no/such/store", "no/such/out", max_step=2)


def test_a_range_is_checked_at_the_boundary():
    with pytest.raises(ConfigError, match=r"^top_k = 0: must be >= 1$"):
        fill_mask("no/such/model", "a [MASK]", top_k=0)


# ------------------------------------------------------------------------------- pipelines
CONFIG = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=37)
LABELS = {"neg": {"id2label": {0: "neg", 1: "pos", 2: "mid"}, "num_labels": 3},
          "ner": {"id2label": {0: "O", 1: "B-X", 2: "I-X"}, "num_labels": 3},
          "nli": {"id2label": {0: "entailment", 1: "neutral", 2: "contradiction"}, "num_labels": 3}}
HEADS = {"fill-mask": ("AlbertForMaskedLM", {}),
         "text-classification": ("AlbertForSequenceClassification", LABELS["neg"]),
         "token-classification": ("AlbertForTokenClassification", LABELS["ner"]),
         "question-answering": ("AlbertForQuestionAnswering", {}),
         "feature-extraction": ("AlbertModel", {}),
         "zero-shot-classification": ("AlbertForSequenceClassification", LABELS["nli"])}
TEXT = {"fill-mask": "The [MASK] sat on the mat."}


@pytest.fixture(scope="module")
def pipes(albert_vocab, tmp_path_factory):
    """{task: pipeline} on tiny random models with the official 30k vocabulary."""
    from litebert.tokenizer import AlbertTokenizer

    tok, root, out = AlbertTokenizer.from_pretrained(albert_vocab), tmp_path_factory.mktemp("boundary"), {}
    for task, (arch, extra) in HEADS.items():
        torch.manual_seed(0)
        folder = root / task
        getattr(litebert, arch)(litebert.AlbertConfig(**CONFIG, **extra)).save_pretrained(folder)
        tok.save_pretrained(folder)
        out[task] = litebert.pipeline(task, folder, device="cpu")
    return out


def call(pipe, task, inputs=TEXT, **options):
    """``pipe`` on ``inputs``, by default a text the task answers."""
    if task == "question-answering":
        return pipe(question="Who?", context="Ahab hunted the whale.", **options) if inputs is TEXT else \
            pipe(inputs, **options)
    if task == "zero-shot-classification":
        options = {"candidate_labels": ["sea", "land"], **options}
    return pipe(TEXT.get(task, "Call me Ishmael.") if inputs is TEXT else inputs, **options)


def option_cases():
    from litebert.inference.pipelines import _PIPELINES

    for task, cls in _PIPELINES.items():
        for name, annotation, _ in annotated(cls.answer):
            if name not in ("texts", "pairs"):
                yield pytest.param(task, name, annotation, id=f"{task}-{name}")


@pytest.mark.parametrize("task, name, annotation", list(option_cases()))
def test_a_wrong_option_is_refused_at_the_call_and_at_the_pipeline(pipes, task, name, annotation):
    for value in wrong_values(annotation):
        with pytest.raises(Exception) as e:
            call(pipes[task], task, **{name: value})
        assert_names(e.value, name, value)
        with pytest.raises(Exception) as e:  # given once, to pipeline(): refused there, before the model loads
            litebert.pipeline(task, "no/such/model", **{name: value})
        assert_names(e.value, name, value)


@pytest.mark.parametrize("task", list(HEADS))
def test_wrong_inputs_are_refused_naming_them(pipes, task):
    """A pipeline's inputs: a string or a list of strings (question answering: also dicts of question and context,
    a list of them); anything else is refused naming ``inputs``."""
    for value, kinds in POOL:
        if not kinds & {"str", "list_str"}:
            with pytest.raises(Exception) as e:
                call(pipes[task], task, value)
            assert_names(e.value, "inputs", value)


@pytest.mark.parametrize("task", list(HEADS))
def test_an_empty_list_answers_an_empty_list(pipes, task):
    assert call(pipes[task], task, []) == []
    with pytest.raises(Exception) as e:  # its options are still checked
        call(pipes[task], task, [], top_kk=1)
    assert_names(e.value, "top_kk")


def test_top_k_is_a_positive_int_and_clamped_to_what_there_is(pipes):
    clf = pipes["text-classification"]
    for bad in ("1", -1, 0, 1.0, True):
        with pytest.raises(Exception) as e:
            clf("a text", top_k=bad)
        assert_names(e.value, "top_k")
    assert len(clf("a text", top_k=1)) == 1
    assert sorted(a["label"] for a in clf("a text", top_k=10)) == ["mid", "neg", "pos"]  # every label, clamped
    assert len(clf(["a", "b"], top_k=None)[1]) == 3
    fill = pipes["fill-mask"]
    assert len(fill(TEXT["fill-mask"], top_k=40000)) == 30000  # the whole vocabulary
    with pytest.raises(ConfigError, match=r"^top_k = -1: must be >= 1$"):
        fill(TEXT["fill-mask"], top_k=-1)


def test_fill_mask_text_of_another_type_is_refused(pipes):
    with pytest.raises(ArgumentError, match=r"^text = 123: expected str or null$"):
        fill_mask(pipes["fill-mask"].folder, text=123)


def test_parameter_hints_resolve_without_the_return_type():
    """A return annotation naming a type imported for type checkers only does not stop the parameters' hints from
    resolving (typing's own machinery, in the function's namespace)."""
    from typing import Optional

    from litebert.arguments import parameter_hints

    namespace: dict = {"Optional": Optional}
    exec("def f(a: 'int', b: 'Optional[str]' = None) -> 'OnlyForCheckers':\n    pass", namespace)
    assert parameter_hints(namespace["f"]) == {"a": int, "b": Optional[str]}
