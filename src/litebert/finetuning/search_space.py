"""The space a search over several fine-tuning settings draws from (`litebert.finetuning.search`), as one string:

    lr=1e-5:1e-3:log,batch_size=16|32,warmup_proportion=0:0.2,epochs=2|3,seed=0|1|2

Comma-separated parts, each ``NAME=VALUES``: a `FinetuneConfig` field and its values, either a choice list
(``16|32``; one value fixes the setting) or a range ``LOW:HIGH`` (uniform), ``LOW:HIGH:log`` (log-uniform: rates).
An integer setting (``batch_size``) takes integers and draws whole numbers from a range. The settings searchable are
`SEARCHABLE` that `FinetuneConfig` has. ``seed`` is not searched but replicated: each configuration drawn runs once
per seed listed (a list only), and its score is the mean over them (module docstring of
`litebert.finetuning.search`). A Python caller may give a dict instead: ``{"lr": "1e-5:1e-3:log",
"batch_size": [16, 32]}`` (a list is a choice list; a string is a part's values).

Parsing is strict and knows nothing of Optuna: each refusal is one line naming the part (`parse_space`).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Mapping, Optional, Union

from litebert.errors import ConfigError, LitebertError, literal
from litebert.finetuning.config import FinetuneConfig

# What a search may vary, in this order: the settings people tune weekly. A name here that FinetuneConfig does not
# have (weight_decay until the config carries it) is not searchable; once the field exists it is, with no other change.
SEARCHABLE = ("lr", "batch_size", "warmup_proportion", "warmup_steps", "epochs", "max_steps", "weight_decay",
              "dropout", "max_grad_norm", "seed", "lora_r", "lora_alpha", "lora_dropout")
SEED = "seed"  # replicated, not searched
EXAMPLE = "lr=1e-5:1e-3:log,batch_size=16|32,seed=0|1|2"
_SAME = (("epochs", "max_steps"), ("warmup_proportion", "warmup_steps"))  # max_steps, warmup_steps win


@dataclass(frozen=True)
class Axis:
    """One setting of the space: a choice list (``choices``) or a range (``low``, ``high``, ``log``)."""

    name: str
    kind: type  # int or float: the field's type
    choices: Optional[tuple] = None
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False

    def __str__(self) -> str:
        if self.choices is not None:
            return f"{self.name}=" + "|".join(_shown(x) for x in self.choices)
        return f"{self.name}={_shown(self.low)}:{_shown(self.high)}" + (":log" if self.log else "")

    def ends(self) -> tuple:
        """The values that bound what this axis gives (each checked against the config before anything runs)."""
        return self.choices if self.choices is not None else (self.low, self.high)


@dataclass(frozen=True)
class Space:
    """A parsed space: its axes in the order given. ``seeds``: the seed axis's list (None: the config's seed)."""

    axes: tuple[Axis, ...]

    def __str__(self) -> str:
        return ",".join(str(a) for a in self.axes)

    @property
    def seeds(self) -> Optional[tuple[int, ...]]:
        return next((a.choices for a in self.axes if a.name == SEED), None)

    @property
    def searched(self) -> tuple[Axis, ...]:
        """The axes the sampler draws (all but the seed)."""
        return tuple(a for a in self.axes if a.name != SEED)

    def configurations(self) -> Optional[int]:
        """How many configurations the searched axes hold when every one is a choice list (None: a range)."""
        if any(a.choices is None for a in self.searched):
            return None
        return math.prod(len(a.choices) for a in self.searched)


def searchable() -> tuple[str, ...]:
    """The names of `SEARCHABLE` that `FinetuneConfig` has."""
    fields = {f.name for f in dataclasses.fields(FinetuneConfig)}
    return tuple(n for n in SEARCHABLE if n in fields)


def parse_space(space: Union[str, Mapping[str, object]]) -> Space:
    """``space`` (the module docstring's syntax, or a dict of name -> values) parsed; a `ConfigError` naming the part
    for anything else."""
    if isinstance(space, Mapping):
        parts = []
        for name, values in space.items():
            if isinstance(values, (list, tuple)):
                values = "|".join(_shown(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
                                  for v in values)
            parts.append(f"{name}={values}")
        text = ",".join(parts)
    elif isinstance(space, str):
        text = space
    else:
        raise ConfigError("{search}: expected a string such as " + literal(repr(EXAMPLE)) + " or a dict of settings",
                          search=space)
    if not text.strip():
        raise ConfigError("{search}: give one or more settings to search, e.g. " + literal(EXAMPLE), search=text)
    axes: list[Axis] = []
    for part in text.split(","):
        axis = _axis(part.strip(), text)
        if any(a.name == axis.name for a in axes):
            raise _refuse(text, part, f"{axis.name} is given twice; give each setting once")
        axes.append(axis)
    return Space(tuple(axes))


def check_against(space: Space, cfg: FinetuneConfig) -> None:
    """Refuse a searched setting that ``cfg`` sets too, and a value the config itself refuses (``lr=0:1e-3``, a
    warmup proportion beside warmup steps), by building the config at each bound of each axis."""
    from litebert.errors import Field

    names = [a.name for a in space.axes]
    for one, other in _SAME:  # two settings that decide one thing: searching both searches neither
        if one in names and other in names:
            raise ConfigError("{search} searches both " + one + " and " + other + ", which decide the same thing; "
                              "search one of them", search=str(space))
    if "epochs" in names and cfg.max_steps is not None:
        raise ConfigError("{search} searches epochs, but {max_steps} decides the steps; leave it out",
                          search=str(space), max_steps=Field("FinetuneConfig", cfg.max_steps))
    for axis in space.axes:
        given = getattr(cfg, axis.name)
        if axis.name != SEED and given is not None:
            raise ConfigError("{search} searches " + axis.name + ", which {" + axis.name + "} sets too; give one of "
                              "them", search=str(space), **{axis.name: Field("FinetuneConfig", given)})
        for value in axis.ends():
            try:
                dataclasses.replace(cfg, **{axis.name: value})
            except LitebertError as e:
                raise _refuse(str(space), str(axis), literal(str(e))) from None


def _axis(part: str, text: str) -> Axis:
    name, eq, values = part.partition("=")
    name, values = name.strip(), values.strip()
    if not eq or not name or not values:
        raise _refuse(text, part, "expected NAME=VALUES (a list a|b|c, or a range LOW:HIGH or LOW:HIGH:log)")
    names = searchable()
    if name not in names:
        raise _refuse(text, part, f"{name} is not a setting a search varies; it varies " + ", ".join(names))
    kind = _kind(name)
    if "|" in values or ":" not in values:
        choices = tuple(_number(x.strip(), kind, text, part) for x in values.split("|"))
        if len(set(choices)) != len(choices):
            twice = next(x for x in choices if choices.count(x) > 1)
            raise _refuse(text, part, f"{_shown(twice)} is given twice")
        return Axis(name, kind, choices=choices)
    if name == SEED:
        raise _refuse(text, part, "list the seeds (seed=0|1|2): each configuration runs once per seed")
    bounds = values.split(":")
    log = len(bounds) == 3 and bounds[2].strip() == "log"
    if len(bounds) not in (2, 3) or (len(bounds) == 3 and not log):
        raise _refuse(text, part, "a range is LOW:HIGH or LOW:HIGH:log")
    low, high = (_number(x.strip(), kind, text, part) for x in bounds[:2])
    if not low < high:
        raise _refuse(text, part, f"the range's low end {_shown(low)} is not below its high end {_shown(high)}")
    if log and low <= 0:
        raise _refuse(text, part, "a log range needs a low end > 0")
    return Axis(name, kind, low=low, high=high, log=log)


def _kind(name: str) -> type:
    """int or float: the field's annotation (``Optional[int]``, ``int``...)."""
    hint = typing.get_type_hints(FinetuneConfig)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    return int if int in args and float not in args else float


def _number(text: str, kind: type, space: str, part: str):
    try:
        value = float(text)
    except ValueError:
        raise _refuse(space, part, f"{literal(repr(text))} is not a number") from None
    if not math.isfinite(value):
        raise _refuse(space, part, f"{literal(repr(text))} is not a finite number")
    if kind is int:
        if value != int(value):
            raise _refuse(space, part, f"{literal(repr(text))} is not a whole number")
        return int(value)
    return value


def _shown(x) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _refuse(space: str, part: str, problem: str) -> ConfigError:
    return ConfigError("{search}: " + literal(repr(part.strip())) + ": " + problem, search=space)
