"""Errors meant for people: each says what is wrong, where (file:line, field, key) and how to fix it.

The CLI prints any ``LitebertError`` as a single message without a traceback. Each also derives from the builtin
exception a Python user would expect to catch (``ValueError``, ``FileNotFoundError``...).

An error about an argument names it the way its reader wrote it. The library does not know whether that was a Python
call or a command line, so a message names its arguments as fields, ``{name}``, given as keyword arguments::

    ConfigError("{seq_len} exceeds the model's {limit} positions; lower it", seq_len=600, limit=512)

``str(error)`` (what a Python caller sees) renders ``{seq_len}`` as ``seq_len = 600``; the command line renders it as
its flag, ``--seq-len 600`` (`LitebertError.render` with the command's map of argument names to flags). ``{name:flag}``
gives the name alone (``seq_len`` / ``--seq-len``), ``{name:value}`` the value alone. A value wrapped in `Field`
belongs to a config class and renders as ``TrainConfig.lr = 0.001`` in Python; one read from a file
(``Field(..., source=FILE)``) renders as ``FILE: lr = 0.001`` everywhere, since no flag gave it. Arguments the message
does not render as fields (``limit`` above) are plain values. A message without keyword arguments is used as it is.

A rendered message is `printable`: a path or value holding control characters (an ESC sequence, a newline) shows
them escaped as a Python repr would (``\x1b[31m``), so a file name cannot recolour the terminal or split the line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from litebert.redact import redact

_FIELD = re.compile(r"\{\{|\}\}|\{(\w+)(?::(\w+))?\}")  # an escaped brace, or a named argument


@dataclass(frozen=True)
class Field:
    """A config field's value in an error: ``Field("TrainConfig", 0.001)`` renders as ``TrainConfig.lr = 0.001``;
    with ``source``, the file the value was read from, as ``FILE: lr = 0.001``."""

    owner: str
    value: Any
    source: Any = None


class _Named:
    """One named argument while a message renders: ``format`` asks it for itself with a spec ('', flag, value)."""

    def __init__(self, name: str, value: Any, flags: Mapping[str, str] | None):
        self.name, self.value, self.flags = name, value, flags

    def __format__(self, spec: str) -> str:
        owner, value = (self.value.owner, self.value.value) if isinstance(self.value, Field) else (None, self.value)
        flag = self.flags.get(self.name) if self.flags else None
        if spec == "value":
            return _plain(value)
        if isinstance(self.value, Field) and self.value.source is not None:  # the file's field, not a flag
            name = f"{_plain(self.value.source)}: {self.name}"
            return name if spec == "flag" else f"{name} = {_python(value)}"
        if flag is not None:  # as the command line wrote it
            if spec == "flag" or isinstance(value, bool) or value is None:
                return flag
            return f"{flag} {_plain(value)}"
        name = f"{owner}.{self.name}" if owner else self.name
        return name if spec == "flag" else f"{name} = {_python(value)}"


def _plain(value: Any) -> str:
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _python(value: Any) -> str:
    return repr(os.fspath(value)) if isinstance(value, os.PathLike) else repr(value)


def literal(text) -> str:
    """``text`` (a path, a user's value) made safe to put into a message that names arguments: its braces escaped."""
    return str(text).replace("{", "{{").replace("}", "}}")


def first_line(e: BaseException, limit: int) -> str:
    """The first line of an exception's message, cut to ``limit`` characters (another library's error as one line),
    `printable`."""
    return printable((str(e).strip().splitlines() or [""])[0][:limit])


def printable(text: str) -> str:
    """``text`` with each character that a terminal acts on or does not show (control characters such as ESC, tab
    and newline, bidirectional overrides, the surrogates of undecodable file-name bytes) written as in a Python repr:
    ``\x1b``, ``\t``, ``\u202e``, ``\udcff``; and without secrets (`litebert.redact.redact`: a URL's password and
    tokens, ``Authorization`` values)."""
    text = redact(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class LitebertError(Exception):
    """Base class of every error litebert raises on purpose (see the module docstring for named arguments)."""

    def __init__(self, message: str = "", /, **named: Any):
        self.template, self.named = message, named
        super().__init__(self.render())

    def render(self, flags: Mapping[str, str] | None = None) -> str:
        """The message, naming its arguments as ``flags`` ({argument name: command-line flag}) calls them where it
        has them, and as Python arguments elsewhere. ``{{``/``}}`` are literal braces; a brace pair that names no
        argument (a file name's, say) is left as it is."""
        if not self.named:
            return printable(self.template)

        def one(m: re.Match) -> str:
            if m.group(1) is None:
                return m.group(0)[0]
            if m.group(1) not in self.named:
                return m.group(0)
            return format(_Named(m.group(1), self.named[m.group(1)], flags), m.group(2) or "")

        return printable(_FIELD.sub(one, self.template))

    def render_except(self, keep) -> str:
        """The template with every named argument but those in ``keep`` rendered (as Python names them): for an
        error passed on by a caller whose own arguments are only ``keep``."""
        def one(m: re.Match) -> str:
            name = m.group(1)
            if name is None or name in keep or name not in self.named:
                return m.group(0)
            return format(_Named(name, self.named[name], None), m.group(2) or "").replace("{", "{{").replace("}", "}}")

        return _FIELD.sub(one, self.template)

    def __str__(self) -> str:
        return self.render()


class ConfigError(LitebertError, ValueError):
    """A configuration field has a bad value, or a preset name is unknown."""


class CheckpointError(LitebertError, ValueError):
    """A checkpoint is missing, corrupt, truncated, or does not match the model."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint folder or file does not exist."""


class DataError(LitebertError, ValueError):
    """An input file is malformed, empty, or was made with a different tokenizer."""


class TokenizerError(LitebertError, ValueError):
    """A tokenizer model is missing, corrupt, or lacks the ALBERT special pieces."""


class InputError(LitebertError, ValueError):
    """The inputs given to a model do not fit it (shape, length, ids outside its vocabulary)."""


class CardError(LitebertError, ValueError):
    """A model card (README.md) that the Hugging Face Hub would not read: not UTF-8, or its front matter broken."""


class WriteError(LitebertError, OSError):
    """A file could not be written (a full disk, no permission); what was there before is left as it was."""


class ArgumentError(ConfigError, TypeError):
    """An argument of a public function is not of its annotated type (``batch_size = '8': expected int``): a
    `ConfigError` that a Python caller may also catch as the ``TypeError`` a wrong type usually raises."""
