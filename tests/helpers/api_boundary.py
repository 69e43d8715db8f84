"""The reference the typed API's boundary is judged against (`litebert.arguments.checked`), shared by
tests/test_api_boundary.py (a pool of values per parameter) and tests/test_api_boundary_properties.py (generated
values): which values each annotation the public API uses admits, written by hand from the rules the module docstring
of `litebert.arguments` documents, not from the code's own `matches`."""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import torch

import litebert
from litebert.checks import Range
from litebert.errors import LitebertError
from litebert.inference.fill_mask import fill_mask


class Opaque:
    """An object no annotation admits."""

    def __repr__(self):
        return "Opaque()"


def _settings():
    from litebert.experiments.runner import Settings

    return Settings(experiment="embedding-size")


# The pool: each value with the kinds it is. A value is wrong for a parameter when none of its kinds is admitted.
POOL = [
    ("text", {"str"}),
    ("", {"str", "empty"}),
    (Path("some/where"), {"path"}),
    (b"some/where", {"iterable"}),
    (3, {"int", "float"}),
    (0, {"int", "float"}),
    (-1, {"int", "float"}),
    (True, {"bool"}),
    (2.5, {"float"}),
    (math.nan, set()),
    (math.inf, set()),
    (None, {"none"}),
    ([], {"list_str", "seq_str", "seq_path", "seq_pairs", "seq_int", "seq_float", "seq_callback", "iterable"}),
    (["a"], {"list_str", "seq_str", "seq_path", "iterable"}),
    ([Path("a")], {"seq_path", "iterable"}),
    ([1, 2], {"seq_int", "seq_float", "iterable"}),
    ((1, 2), {"seq_int", "seq_float", "iterable"}),
    ({"a": "b"}, {"map_str", "map_any", "iterable"}),
    ({"max_steps": 2}, {"map_any", "iterable"}),
    (Opaque(), set()),
    (print, {"callable"}),
    (torch.zeros(2), {"iterable"}),
]

# Each annotation the public API uses (as written in its signature) -> the kinds it admits, and a value it admits
# (the placeholder a required parameter gets while another one is tested): paths name nothing that exists.
ABSENT = "no/such/path"  # not a hub id (owner/name): nothing is looked up
ANNOTATIONS = {
    "str": ({"str"}, "text"),
    "int": ({"int"}, 1),
    "bool": ({"bool"}, False),
    "bool | None": ({"bool", "none"}, None),
    "float": ({"int", "float"}, 1.0),
    "Optional[int]": ({"int", "none"}, None),
    "int | None": ({"int", "none"}, None),
    "Optional[float]": ({"int", "float", "none"}, None),
    "Optional[str]": ({"str", "none"}, None),
    "str | None": ({"str", "none"}, None),
    "str | os.PathLike": ({"str", "path"}, ABSENT),
    "str | Path": ({"str", "path"}, ABSENT),
    "str | os.PathLike | None": ({"str", "path", "none"}, None),
    "Sequence[str | os.PathLike]": ({"seq_str", "seq_path"}, [ABSENT]),
    "str | os.PathLike | Sequence[str | os.PathLike]": ({"str", "path", "seq_str", "seq_path"}, [ABSENT]),
    "Sequence[str]": ({"seq_str"}, ["text"]),
    "Optional[Sequence[str]]": ({"seq_str", "none"}, None),
    "Sequence[str] | None": ({"seq_str", "none"}, None),
    "str | Sequence[str]": ({"str", "seq_str"}, "mlm"),
    "Mapping[str, str] | None": ({"map_str", "none"}, None),
    "Sequence[int]": ({"seq_int"}, (1,)),
    "Callable[[str], None]": ({"callable"}, print),
    "Optional[Callable[..., dict]]": ({"callable", "none"}, None),
    "Optional[Callable[..., Any]]": ({"callable", "none"}, None),  # compute_loss: returns a tensor
    "str | Mapping[str, Any] | None": ({"str", "map_str", "map_any", "none"}, None),  # finetune's search space
    "Sequence[Callback]": ({"seq_callback"}, ()),  # Callback objects; no pool value is one
    "Optional[Sequence[float]]": ({"seq_float", "none"}, None),
    "Log": ({"callable", "none"}, None),
    "Any": (None, None),  # anything (``dist``: a process group, duck-typed)
    "Optional[TrainConfig]": ({"none"}, None),  # a TrainConfig too; no pool value is one
    "Optional[FinetuneConfig]": ({"none"}, None),
    "Optional[CardInfo]": ({"none"}, None),
    "ModelSpec": ({"str", "path", "none"}, None),  # AlbertConfig | str | PathLike | None
    "Settings": (set(), _settings),
    "text_input.Corpus": ({"str", "path", "iterable", "seq_str", "seq_path", "list_str", "map_str", "seq_int",
                           "seq_pairs"}, ABSENT),
    "Corpus": ({"str", "path", "iterable", "seq_str", "seq_path", "list_str", "map_str", "seq_int",
                "seq_pairs"}, ABSENT),
    "StoreTokenizer | str | os.PathLike": ({"str", "path"}, ABSENT),
    "torch.nn.Module": ({"module"}, lambda: torch.nn.Linear(1, 1)),  # no pool value is a module
    # the pipelines' options
    "list[str]": ({"list_str"}, []),
    "Optional[list[str]]": ({"list_str", "none"}, None),
    "int | None | Literal['']": ({"int", "none", "empty"}, None),
    "list[tuple[str, str]]": ({"seq_pairs"}, []),
    "Literal['official', 'hf']": (set(), "official"),  # a word of its own: no pool value is one
    "Optional[Literal['none', 'simple', 'first', 'average', 'max']]": ({"none"}, None),
    "str | Sequence[str] | None": ({"str", "seq_str", "none"}, None),
    "str | int | None": ({"str", "int", "none"}, None),  # pipeline's device: a name, or HF's -1 / GPU index
    "Optional[Mapping[str, Any]]": ({"map_str", "map_any", "none"}, None),  # HF's tokenizer_kwargs
    "Optional[Literal['sigmoid', 'softmax', 'none']]": ({"none"}, None),
}


# The range of each number parameter of the public API (None: any number of its type), by hand from what each means
# (a count or size >= 1, a seed >= 0, a rate > 0, a probability in [0, 1), SentencePiece's character coverage in
# [0.98, 1]): values outside it must be refused at the boundary, naming the parameter.
_1, _0 = Range(1), Range(0)
RANGES = {
    ("add_lora", "r"): _1, ("add_lora", "alpha"): Range(0, low_open=True), ("add_lora", "dropout"): Range(0, 1),
    **{(f, p): _1 for f in ("analyze_transitions", "evaluate_pretraining") for p in ("examples", "seq_len",
                                                                                      "batch_size")},
    ("analyze_transitions", "seed"): _0, ("evaluate_pretraining", "seed"): _0,
    **{(f, p): _1 for f in ("embed", "evaluate", "predict") for p in ("batch_size", "seq_len")},
    ("predict", "batch_tokens"): _1, ("evaluate", "null_threshold"): None,
    ("fill_mask", "top_k"): _1, ("fill_mask", "batch_size"): _1, ("fill_mask", "batch_tokens"): _1,
    ("pipeline", "batch_size"): _1, ("pipeline", "batch_tokens"): _1, ("pipeline", "device"): None,
    ("finetune", "stop_after"): _1, ("finetune", "lr_grid_extend"): _0, ("finetune", "trials"): _1,
    ("pretrain", "stop_after"): _1, ("pretrain", "time_limit"): Range(0, low_open=True),
    **{("prepare_store", p): _1 for p in ("workers", "shard_tokens", "block_chars", "max_line_bytes",
                                          "max_document_chars")},
    **{("speedup_experiment", p): _1 for p in ("micro_batch", "seq_len", "steps", "untimed_steps")},
    ("train_tokenizer", "vocab_size"): _1, ("train_tokenizer", "character_coverage"): Range(0.98, 1, high_closed=True),
    ("train_tokenizer", "input_sentence_size"): _0, ("train_tokenizer", "max_sentence_length"): _1,
    ("train_tokenizer", "num_threads"): _1, ("train_tokenizer", "seed"): _0,
}


def number_parameters():
    """(function name, parameter, annotation) of each parameter of the public API that takes a number."""
    return [(f, n, a) for f, fn in sorted(public_functions().items()) for n, a, _ in annotated(fn)
            if ("int" in a or "float" in a) and "Sequence" not in a]


def public_functions():
    functions = {name: getattr(litebert, name) for name in litebert.__all__
                 if inspect.isfunction(getattr(litebert, name, None))}
    return {**functions, "fill_mask": fill_mask}


def annotated(fn):
    """(name, annotation, parameter) of each parameter of ``fn`` a caller passes by name."""
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name == "self":
            continue
        yield name, p.annotation, p


def wrong_values(annotation) -> list:
    """The pool's values ``annotation`` does not admit (none for ``Any``)."""
    admitted = ANNOTATIONS[annotation][0]
    return [] if admitted is None else [value for value, kinds in POOL if not kinds & admitted]


def placeholders(fn, tested: str) -> dict:
    """An admitted value for each required parameter but ``tested``."""
    out = {}
    for name, annotation, p in annotated(fn):
        if name != tested and p.default is p.empty:
            value = ANNOTATIONS[annotation][1]
            out[name] = value() if callable(value) and value is not print else value
    return out


def assert_names(error: BaseException, name: str, value=None) -> None:
    assert isinstance(error, LitebertError) and isinstance(error, (TypeError, ValueError)), (name, value, repr(error))
    message = str(error)
    assert "\n" not in message
    assert re.match(rf"{re.escape(name)}\b", message), (name, value, message)
