"""What reaches the terminal: every line a command writes, not only its errors, with the user's text made safe.

A path, a run folder's name, a text from a data file or a label can hold characters a terminal acts on: an ESC
sequence that recolours it, moves the cursor or sets the window title, a carriage return that writes over the line,
a bidirectional override that shows the text reversed. Errors render them escaped (`litebert.errors.printable`). So
does everything else: `litebert.cli.main` runs each command with its stdout and stderr behind `SafeStream`, which
passes every write through `terminal_text`. One function for every line, instead of a call at each of the many
prints, progress lines and warnings, so that a new print cannot forget it.

What stays as written is the layout litebert itself writes: line breaks and tabs, a carriage return that starts a
write (a progress bar redrawing its line) and a write of nothing but cursor-up moves (tqdm going back to a bar of its
own). Data printed to stdout as JSON (`json_line`) writes the characters that would be escaped as JSON's ``\\uXXXX``
escapes, so that it stays valid JSON with the same values.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from typing import Any, Iterator

from litebert.errors import printable

_CURSOR_UP = re.compile(r"(?:\x1b\[A)+")  # what tqdm writes, alone, to move up to a bar it drew


def terminal_text(text: str) -> str:
    """``text`` as it may reach a terminal: every character the terminal would act on or not show escaped as in a
    Python repr (`litebert.errors.printable`: ``\\x1b[31m``, ``\\r``, ``\\u202e``), but for line breaks, tabs, a
    carriage return that starts ``text`` and a ``text`` that is only cursor-up moves (`SafeStream`'s layout)."""
    if text.isprintable() or _CURSOR_UP.fullmatch(text):
        return text
    head = "\r" if text.startswith("\r") else ""
    return head + "\n".join("\t".join(printable(part) for part in line.split("\t"))
                            for line in text[len(head):].split("\n"))


class SafeStream:
    """A text stream (stdout, stderr) whose writes go through `terminal_text`; everything else is the stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_text(text))
        return len(text)  # as the caller's text: print and tqdm count what they gave

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def safe_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` behind `SafeStream` while the block runs (the command), as they were
    after."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if isinstance(s, SafeStream) else SafeStream(s) for s in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def json_line(value: Any, indent: int | None = None) -> str:
    """``value`` as JSON for stdout: text kept as it is (``ensure_ascii=False``) but for the characters
    `terminal_text` would escape, written as JSON escapes (``\\u001b`` is JSON's escape already, ``\\u202e`` this
    one's), so the line is valid JSON with the same values and passes the terminal unchanged."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else _json_escape(c) for c in text)


def _json_escape(c: str) -> str:
    code = ord(c)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # an astral character as JSON writes it: its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
