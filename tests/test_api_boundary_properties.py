"""The typed API's boundary by generated values (issue 57, item 1): every function `litebert.arguments.checked`
wraps, found by importing every module of litebert, is one that the boundary tests call; and for those, a value
Hypothesis generates that a parameter's annotation does not admit (a wrong type), or a number outside the
parameter's range (the reference's, `helpers.api_boundary.RANGES`), is refused before anything runs with a one-line
`ArgumentError`/`ConfigError` that starts with the parameter's name. The other arguments are placeholders naming
nothing that exists (`helpers.api_boundary`), so a check made after any work would name another argument, or fail
another way; and nothing is written.

Which kinds of value each annotation admits is the hand-written reference of `helpers.api_boundary` (also used by
tests/test_api_boundary.py's fixed pool); here each generated value carries its kinds the same way."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import litebert
from helpers.api_boundary import (
    ANNOTATIONS,
    RANGES,
    Opaque,
    annotated,
    assert_names,
    number_parameters,
    placeholders,
    public_functions,
)
from helpers.hostile import examples

pytestmark = pytest.mark.usefixtures("one_thread")


def checked_functions() -> dict:
    """{module.qualname: function} of every function (and method) `checked` wraps, in every module of litebert."""
    found = {}
    for info in pkgutil.walk_packages(litebert.__path__, "litebert."):
        module = importlib.import_module(info.name)
        for obj in list(vars(module).values()):
            members = [obj]
            if inspect.isclass(obj) and obj.__module__ == info.name:
                members += [getattr(v, "__func__", v) for v in vars(obj).values()]
            for f in members:
                if inspect.isfunction(f) and hasattr(f, "check") and hasattr(f, "__wrapped__"):
                    found[f"{f.__module__}.{f.__qualname__}"] = f
    return found


def test_every_checked_function_is_tested_at_the_boundary():
    """A function given `checked` outside ``litebert.__all__`` (and the pipelines' options, tested on their own
    folders in tests/test_api_boundary.py) would have its checks untested: the scan finds none."""
    from litebert.inference.pipelines import _PIPELINES

    tested = set(public_functions().values()) | {cls.answer for cls in _PIPELINES.values()}
    found = checked_functions()
    assert len(found) >= len(public_functions()), sorted(found)  # the scan finds them at all
    assert sorted(n for n, f in found.items() if f not in tested) == []


# ------------------------------------------------------------------------------------------------ generated values
def _kinds_of_list(items: list) -> set:
    if all(isinstance(x, str) for x in items):
        return {"list_str", "seq_str", "seq_path", "iterable"}
    if all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        return {"seq_int", "seq_float", "iterable"}
    return {"iterable"}


texts = st.text(max_size=6)
VALUES = st.one_of(
    texts.map(lambda s: (s, {"str"} | ({"empty"} if s == "" else set()))),
    st.integers(-2**40, 2**40).map(lambda i: (i, {"int", "float"})),
    st.booleans().map(lambda b: (b, {"bool"})),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()).map(lambda x: (x, {"float"})),
    st.sampled_from((math.nan, math.inf, -math.inf)).map(lambda x: (x, set())),
    st.none().map(lambda v: (v, {"none"})),
    texts.map(lambda s: (Path(s or "x"), {"path"})),
    st.binary(max_size=6).map(lambda b: (b, {"iterable"})),
    st.lists(st.one_of(texts, st.integers(-9, 9)), min_size=1, max_size=3).map(lambda v: (v, _kinds_of_list(v))),
    st.lists(st.integers(-9, 9), min_size=1, max_size=3).map(lambda v: (tuple(v), _kinds_of_list(v))),
    st.lists(st.tuples(texts, texts), min_size=1, max_size=2).map(lambda v: (v, {"seq_pairs", "iterable"})),
    st.dictionaries(texts, texts, min_size=1, max_size=2).map(lambda d: (d, {"map_str", "map_any", "iterable"})),
    st.dictionaries(texts, st.integers(), min_size=1, max_size=2).map(lambda d: (d, {"map_any", "iterable"})),
    st.just((Opaque(), set())),
    st.just((print, {"callable"})),
)


def literals(fn, name: str) -> set:
    """The values a ``Literal[...]`` in the parameter's annotation names (admitted whatever their kind)."""
    import typing

    from litebert.arguments import parameter_hints

    def walk(hint):
        if typing.get_origin(hint) is typing.Literal:
            return set(typing.get_args(hint))
        return {v for a in typing.get_args(hint) for v in walk(a)}
    return walk(parameter_hints(inspect.unwrap(fn)).get(name))


def outside(rng, integer: bool):
    """Numbers of the parameter's type outside the range ``rng``."""
    options = []
    if rng.low is not None:
        options.append(st.integers(max_value=math.ceil(rng.low) - (0 if rng.low_open else 1)) if integer else
                       st.floats(max_value=rng.low, allow_nan=False, allow_infinity=False))
    if rng.high is not None:
        options.append(st.integers(min_value=math.floor(rng.high) + (1 if rng.high_closed else 0)) if integer else
                       st.floats(min_value=rng.high, allow_nan=False, allow_infinity=False))
    return st.one_of(options).filter(lambda v: not rng.holds(v))


PARAMETERS = sorted((fname, name) for fname, fn in public_functions().items() for name, a, _ in annotated(fn)
                    if ANNOTATIONS.get(a, (None,))[0] is not None)


def test_every_number_parameter_has_a_reference_range():
    """A new number parameter needs its range written into `helpers.api_boundary.RANGES` (None: any number)."""
    assert [(f, n) for f, n, _ in number_parameters() if (f, n) not in RANGES] == []


@given(data=st.data())
@settings(max_examples=examples(150))  # cheap examples (each refused at once): many, over ~200 parameters
def test_a_generated_wrong_value_is_refused_naming_its_parameter(data, tmp_path_factory, monkeypatch):
    fname, name = data.draw(st.sampled_from(PARAMETERS), label="parameter")
    fn = public_functions()[fname]
    annotation = inspect.signature(fn).parameters[name].annotation
    rng = RANGES.get((fname, name))
    if rng is not None and data.draw(st.booleans(), label="out of range"):
        value = data.draw(outside(rng, "int" in annotation and "float" not in annotation), label="value")
    else:
        admitted, named = ANNOTATIONS[annotation][0], literals(fn, name)
        value, _ = data.draw(VALUES.filter(lambda vk: not vk[1] & admitted and not _in(vk[0], named)), label="value")
    folder = tmp_path_factory.mktemp("boundary")
    monkeypatch.chdir(folder)  # the placeholders' paths name nothing there, and nothing may be written
    with pytest.raises(Exception) as e:
        fn(**placeholders(fn, name), **{name: value})
    assert_names(e.value, name, value)
    assert list(folder.iterdir()) == []


def _in(value, named: set) -> bool:
    try:
        return value in named
    except TypeError:  # an unhashable value is no literal
        return False
