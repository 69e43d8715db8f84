"""One parser per kind of value a user writes as text, strict everywhere it is read.

A comma list (``--lr 1e-4,3e-4``, ``--labels neg,pos``, ``--presets ...``, ``lora_targets``) is split by `items`:
each item stripped of spaces, and an empty item refused, not dropped: ``1e-4,`` is a typo for a grid, not a single
rate (issue 57, item 7: it ran one rate silently). `numbers` and `integers` read the items as numbers, `names` as
names (each once). The parsers raise `ConfigError` naming the argument (``{name}``, shown as its flag on the command
line; a config class's field as ``TrainConfig.report_to``, given ``owner``); `cli_type` turns one into an argparse
``type=`` whose refusal is argparse's one-line ``invalid value`` error.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable, TypeVar

from litebert.errors import ConfigError, Field

T = TypeVar("T")


def items(text: str, name: str, what: str = "items", owner: str | None = None) -> list[str]:
    """The comma-separated ``text`` (the value of the argument ``name``; of the field ``name`` of the config class
    ``owner``) as its stripped items; no text, or an empty item (a comma at either end, two commas), is a
    `ConfigError`."""
    parts = [p.strip() for p in str(text).split(",")]
    value = Field(owner, text) if owner else text
    if not any(parts):
        raise ConfigError("{%s}: empty; give one or more comma-separated %s" % (name, what), **{name: value})
    if not all(parts):
        raise ConfigError("{%s}: an empty item (a comma too many?); give comma-separated %s, each written out"
                          % (name, what), **{name: value})
    return parts


def numbers(text: str, name: str) -> list[float]:
    """``"1e-4,3e-4"`` -> ``[1e-4, 3e-4]``: finite numbers, comma-separated (`items`)."""
    out = []
    for part in items(text, name, "numbers"):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ConfigError("{%s}: %r is not a number; give comma-separated numbers" % (name, part), **{name: text})
        out.append(value)
    return out


def integers(text: str, name: str) -> list[int]:
    """``"128,256"`` -> ``[128, 256]``: whole numbers, comma-separated (`items`)."""
    out = []
    for part in items(text, name, "integers"):
        try:
            out.append(int(part))
        except ValueError:
            raise ConfigError("{%s}: %r is not a whole number; give comma-separated integers" % (name, part),
                              **{name: text}) from None
    return out


def integers_or_all(text: str, name: str) -> list[int | None]:
    """``"250,1000,all"`` -> ``[250, 1000, None]``: whole numbers or the word ``all`` (None), comma-separated
    (`items`)."""
    out: list[int | None] = []
    for part in items(text, name, "whole numbers or 'all'"):
        try:
            out.append(None if part == "all" else int(part))
        except ValueError:
            raise ConfigError("{%s}: %r is neither a whole number nor 'all'; give e.g. 250,1000,all" % (name, part),
                              **{name: text}) from None
    return out


def names(text: str, name: str, owner: str | None = None) -> list[str]:
    """``"neg, pos"`` -> ``["neg", "pos"]``: comma-separated names (`items`), each once."""
    parts = items(text, name, "names", owner)
    twice = next((p for i, p in enumerate(parts) if p in parts[:i]), None)
    if twice is not None:
        raise ConfigError("{%s}: %r is there twice; give each name once" % (name, twice),
                          **{name: Field(owner, text) if owner else text})
    return parts


def cli_type(parse: Callable[[str, str], T], name: str) -> Callable[[str], T]:
    """``parse`` (`numbers`, `integers`, `names`) as an argparse ``type=`` for the option whose destination is
    ``name``: its refusal becomes argparse's ``argument --flag: invalid value`` line, with the reason."""
    def parse_flag(text: str) -> T:
        try:
            return parse(text, name)
        except ConfigError as e:
            reason = e.render({name: "it"}).split(": ", 1)[-1]
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {reason}") from None

    parse_flag.__name__ = parse.__name__  # argparse names the type in some messages
    return parse_flag
