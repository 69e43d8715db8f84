"""Type and range checks of the typed config dataclasses, driven by their annotations.

`check_fields` is called from each config's ``__post_init__`` (`AlbertConfig`, `TrainConfig`, the fine-tuning
`TaskPreset` and `TrainArgs`), so a config read from JSON is checked exactly like one built in Python. The rules, as a
user writing a JSON file expects them:

* ``bool`` fields take only ``true``/``false`` (``"no"`` or ``0`` would otherwise read as a truth value);
* ``int`` fields take integers, never ``true``/``false``; ``float`` fields take integers too, but not NaN or infinity;
* strings are never converted (``"lr": "0.001"`` is an error, not 0.001); ``Optional`` fields also take ``null``.

Each failure is one line naming the field, the value and what was expected: ``TrainConfig.lr = '0.001': expected
float``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections import abc
from dataclasses import dataclass
from typing import Any, Union

from litebert.errors import ConfigError, Field


@dataclass(frozen=True)
class Range:
    """``low <= value`` (``low < value`` with ``low_open``) and ``value < high`` (``<=`` with ``high_closed``)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_closed: bool = False

    def holds(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value > self.high if self.high_closed else value >= self.high):
            return False
        return True

    def __str__(self) -> str:
        if self.high is None:
            return f"must be {'>' if self.low_open else '>='} {self.low:g}"
        return (f"must lie in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{']' if self.high_closed else ')'}")


AT_LEAST_1 = Range(1)
AT_LEAST_0 = Range(0)
POSITIVE = Range(0, low_open=True)
LEARNING_RATE = Range(0, 1, low_open=True)  # (0, 1)
PROBABILITY = Range(0, 1)  # [0, 1): a dropout or a share of sequences
FRACTION = Range(0, 1, high_closed=True)  # [0, 1]
CHARACTER_COVERAGE = Range(0.98, 1, high_closed=True)  # [0.98, 1]: what SentencePiece trains with


def check_values(*, allow_none: bool = True, **values: tuple) -> None:
    """Arguments that are not config fields, checked as the configs check theirs: each ``name=(value, range)`` must
    be a finite number in its range, each ``name=(value, range, int)`` an integer in its range; None means "not
    given" (``allow_none=False``: refused as any other non-number). A failure is a one-line `ConfigError` naming the
    argument (``workers = 0: must be >= 1``; on the command line, its flag)."""
    for name, (value, rng, *kind) in values.items():
        if value is None and allow_none:
            continue
        if kind == [int] and not _is_int(value):
            raise ConfigError("{" + name + "}: expected an integer", **{name: value})
        if not _is_float(value):
            raise ConfigError("{" + name + "}: expected a number", **{name: value})
        if not rng.holds(value):
            raise ConfigError("{" + name + "}: " + str(rng), **{name: value})


def check_fields(obj: Any, ranges: dict[str, Range] | None = None,
                 choices: dict[str, tuple] | None = None) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation, then the fields named in
    ``ranges`` (numbers, unless None) and ``choices`` (allowed values). Raises a one-line `ConfigError`."""
    cls = type(obj)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        problem = None
        if not matches(value, hints[f.name]):
            problem = f"expected {describe(hints[f.name])}"
        elif choices and f.name in choices and value not in choices[f.name]:
            problem = f"choose one of {', '.join(repr(c) for c in choices[f.name])}"
        elif (ranges and f.name in ranges and value is not None and not isinstance(value, str)
              and not ranges[f.name].holds(value)):  # a string passed the type check: a Literal's word
            problem = str(ranges[f.name])
        if problem is not None:  # "TrainConfig.lr = -1: ..." in Python, "--lr -1: ..." on the command line
            raise ConfigError("{" + f.name + "}: " + problem.replace("{", "{{").replace("}", "}}"),
                              **{f.name: Field(cls.__name__, value)})


def _is_bool(value: Any) -> bool:
    """A ``bool`` field takes only True/False."""
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    """An ``int`` field takes integers, never True/False."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_float(value: Any) -> bool:
    """A ``float`` field takes integers and finite floats, never True/False."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _matches_dict(value: Any, args: tuple) -> bool:
    """Whether ``value`` is a dict whose keys match ``args[0]`` and values ``args[1]``."""
    return isinstance(value, dict) and all(matches(k, args[0]) and matches(v, args[1]) for k, v in value.items())


def _matches_list(value: Any, args: tuple) -> bool:
    """Whether ``value`` is a list whose items match ``args[0]``."""
    return isinstance(value, list) and all(matches(v, args[0]) for v in value)


def _matches_tuple(value: Any, args: tuple) -> bool:
    """Whether ``value`` is a tuple matching ``args``: ``(T, ...)`` of any length, else item by item."""
    if not isinstance(value, tuple):
        return False
    if len(args) == 2 and args[1] is Ellipsis:
        return all(matches(v, args[0]) for v in value)
    return len(value) == len(args) and all(matches(v, a) for v, a in zip(value, args))


def _matches_sequence(value: Any, args: tuple) -> bool:
    """Whether ``value`` is a list or tuple (any sequence but a string or bytes: a path given where a list of paths
    is asked for would be read one character at a time) whose items match ``args[0]``."""
    return (isinstance(value, abc.Sequence) and not isinstance(value, (str, bytes))
            and (not args or all(matches(v, args[0]) for v in value)))


def _matches_mapping(value: Any, args: tuple) -> bool:
    """Whether ``value`` is a mapping whose keys match ``args[0]`` and values ``args[1]``."""
    return isinstance(value, abc.Mapping) and (not args or all(matches(k, args[0]) and matches(v, args[1])
                                                               for k, v in value.items()))


# Pairs compared by identity (``is``), not a dict: a dict lookup would need every hint to be hashable.
_SCALAR_CHECKS = ((bool, _is_bool), (int, _is_int), (float, _is_float))
_CONTAINER_CHECKS = ((dict, _matches_dict), (list, _matches_list), (tuple, _matches_tuple),
                     (abc.Sequence, _matches_sequence), (abc.Mapping, _matches_mapping))


def matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type ``hint`` under the rules of the module docstring."""
    if hint is Any:
        return True
    if hint is type(None) or hint is None:
        return value is None
    for scalar, check in _SCALAR_CHECKS:
        if hint is scalar:
            return check(value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        return any(matches(value, a) for a in args)
    for container, check_items in _CONTAINER_CHECKS:
        if origin is container:
            return check_items(value, args)
    if origin is typing.ClassVar:
        return True
    if origin is typing.Literal:  # e.g. micro_batch: int | Literal["auto"]
        return any(type(value) is type(a) and value == a for a in args)
    return isinstance(value, origin or hint)


def describe(hint: Any) -> str:
    """The type as a user reads it: ``float``, ``int or null``, ``list of str``..."""
    if hint is type(None) or hint is None:
        return "null"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        return " or ".join(describe(a) for a in args)
    if origin is dict:
        return f"dict of {describe(args[0])} to {describe(args[1])}"
    if origin in (list, tuple, abc.Sequence) and args:
        return f"{'list' if origin is list else 'tuple' if origin is tuple else 'list or tuple'} of {describe(args[0])}"
    if origin is abc.Mapping and args:
        return f"mapping of {describe(args[0])} to {describe(args[1])}"
    if origin is abc.Callable:
        return "a function"
    if hint is os.PathLike:
        return "Path"
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in args)
    return getattr(hint, "__name__", str(hint))
