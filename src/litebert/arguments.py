"""`checked`: every public function's arguments checked against its own signature, once, where a call enters litebert.

Each function in ``litebert.__all__`` (and `litebert.inference.fill_mask.fill_mask`, and the options of each pipeline's
call)
is decorated with `checked`. Before the function body runs, each argument is compared with its annotation under the
rules the config dataclasses follow (`litebert.checks.matches`), so a Python call, a JSON config and a command line
are held to one standard:

* ``str | os.PathLike`` (a file or folder) takes a ``str`` or a ``pathlib.Path``, never ``bytes`` or ``None``;
* ``int`` takes integers, never ``True``/``False``; ``float`` takes integers and finite floats; ``bool`` only
  ``True``/``False``; ``Optional[...]`` also ``None``; ``Literal[...]`` only its values;
* ``Sequence[X]`` takes a list or tuple of X, never a single string (a path where a list of paths is asked for);
  ``Mapping[K, V]`` a dict of K to V;
* a config class (``TrainConfig``, ``FinetuneConfig``, ``AlbertConfig``, ``ExperimentSettings``) takes an instance
  only, not a dict of its fields: build it (``TrainConfig(**fields)``), which checks each field by name;
* ``checked(name=Range)`` adds a range to a number (``top_k`` >= 1); None and a default left as it is are not
  ranged.

The argument's default value (a sentinel such as ``""``, or ``None``) is always accepted. A refusal is one
`ArgumentError` line naming the argument as its caller wrote it (``top_k = '1': expected int``; ``--top-k`` on the
command line): a ``ConfigError`` (so a ``ValueError``) and a ``TypeError``. A call with an argument the function does
not have is refused the same way, naming it; a missing required argument stays Python's own ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Any, Callable

from litebert.checks import Range, describe, matches
from litebert.errors import ArgumentError, ConfigError, literal


def checked(fn: Callable | None = None, /, **ranges: Range) -> Callable:
    """``@checked`` or ``@checked(top_k=AT_LEAST_1, ...)``: ``fn`` with its arguments checked (module docstring).
    The wrapper's ``check(*args, **kwargs)`` checks arguments without calling (a pipeline's options, given once)."""
    if fn is None:
        return lambda f: checked(f, **ranges)
    signature = inspect.signature(fn)
    unknown = set(ranges) - set(signature.parameters)
    if unknown:
        raise TypeError(f"checked({fn.__qualname__}): no parameter {', '.join(sorted(unknown))}")
    resolved: list[dict[str, Any]] = []  # at the first call: the types the hints name may be defined after ``fn``

    def check(*args, **kwargs) -> None:
        if not resolved:
            resolved.append(parameter_hints(fn))
        hints = resolved[0]
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            extra = next((k for k in kwargs if k not in signature.parameters), None)
            takes_more = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
            if extra is None or takes_more:
                raise
            names = ", ".join(n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY
                              or (p.kind is p.POSITIONAL_OR_KEYWORD and n != "self"))
            raise ArgumentError("{" + extra + ":flag}: " + f"not an argument of {fn.__qualname__}; it takes "
                                f"{literal(names)}", **{extra: kwargs[extra]}) from None
        for name, value in bound.arguments.items():
            parameter = signature.parameters[name]
            if name not in hints or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if value is parameter.default:
                continue
            check_value(name, value, hints[name], ranges.get(name))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        check(*args, **kwargs)
        return fn(*args, **kwargs)

    wrapper.check = check
    wrapper.ranges = dict(ranges)  # what the boundary's tests generate values outside of
    return wrapper


def check_value(name: str, value: Any, hint: Any, rng: Range | None = None) -> None:
    """``value`` of the argument ``name`` is of type ``hint`` (and in ``rng`` when a number), else `ArgumentError`
    (a wrong type) or `ConfigError` (out of range), one line naming the argument."""
    if not matches(value, hint):
        problem = f"expected {describe(hint)}"
        config = next((c for c in _classes(hint) if dataclasses.is_dataclass(c)), None)
        if config is not None and isinstance(value, dict):
            problem += f", not a dict; build one: {config.__name__}(**fields)"
        raise ArgumentError("{" + name + "}: " + literal(problem), **{name: value})
    if rng is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and not rng.holds(value):
        raise ConfigError("{" + name + "}: " + str(rng), **{name: value})


def parameter_hints(fn: Callable) -> dict[str, Any]:
    """The annotation of each annotated parameter of ``fn``, resolved (``from __future__ import annotations`` keeps
    them as strings). An annotation that does not resolve is a bug of the function, raised as such."""
    def parameters_only():  # its annotations: fn's, less the return type's (which may name a type imported for
        pass               # checkers only), resolved by typing's own machinery in fn's namespace (no eval of text)

    parameters_only.__annotations__ = {k: v for k, v in getattr(fn, "__annotations__", {}).items() if k != "return"}
    return typing.get_type_hints(parameters_only, globalns=getattr(fn, "__globals__", None))


def _classes(hint: Any) -> list:
    """The classes a hint names, a union's members included."""
    args = typing.get_args(hint)
    return [c for a in args for c in _classes(a)] if args else [hint] if isinstance(hint, type) else []
