"""`litebert.terminal`: what commands write reaches the terminal with every control character of the user's text
escaped, in normal lines as in errors (issue 57, fold-06: an ESC sequence in ``--out`` was printed raw in the lines
that name it). Properties of `terminal_text` and `json_line`, then commands run in-process with generated paths
and texts, their whole stdout and stderr checked."""

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.hostile import ESCAPES, examples, file_names, hostile_text, json_values
from litebert.cli import main
from litebert.errors import printable
from litebert.terminal import SafeStream, json_line, terminal_text

pytestmark = pytest.mark.usefixtures("one_thread")
LAYOUT = "\n\t"  # what litebert's own output may hold raw (and "\r" starting a progress bar's redraw)


def raw_controls(output: str) -> list[str]:
    """The characters of ``output`` a terminal acts on or hides (Unicode's control, format and surrogate
    categories), but for line breaks, tabs and carriage returns (a progress bar's); [] when it is safe."""
    return [c for c in output if c not in LAYOUT + "\r" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


@given(text=hostile_text())
def test_terminal_text_escapes_what_a_terminal_acts_on(text):
    shown = terminal_text(text)
    if text and set(text) <= set("\x1b[A") and text == "\x1b[A" * (len(text) // 3):
        assert shown == text  # tqdm's own move up to its bar
        return
    assert not [c for c in shown.lstrip("\r") if c != "\n" and c != "\t" and not c.isprintable()]
    # what it shows is `printable`'s rendering of each line (the one function errors use), layout kept
    head = "\r" if text.startswith("\r") else ""
    assert shown == head + "\n".join("\t".join(map(printable, line.split("\t")))
                                     for line in text[len(head):].split("\n"))


# what Python calls printable: not a control, format, surrogate, private or unassigned code point, nor a separator but
# the space
@given(text=st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"),
                                  include_characters=" ")))
def test_printable_text_is_written_as_it_is(text):
    assert terminal_text(text) == text


@given(value=json_values())
def test_json_line_is_the_same_json_and_needs_no_escape(value):
    for indent in (None, 2):
        line = json_line(value, indent)
        assert json.loads(line) == value
        assert terminal_text(line) == line


def test_a_safe_stream_counts_what_it_was_given(capsys):
    import sys

    stream = SafeStream(sys.stdout)
    assert stream.write("a\x1b[31mb\n") == len("a\x1b[31mb\n") == 8
    assert capsys.readouterr().out == "a\\x1b[31mb\n"


# ------------------------------------------------------------------------------------------ commands in-process
def run(argv: list, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@settings(max_examples=examples(10))
@given(name=file_names(ESCAPES))
def test_data_prepare_never_prints_a_path_raw(tiny_setup, tmp_path_factory, capsys, name):
    """fold-06's kind: --out and an input file named with ESC sequences, carriage returns, bidi overrides,
    undecodable bytes; every line the command prints, with its progress bar on."""
    root = tmp_path_factory.mktemp("terminal")
    corpus = root / (name + ".txt")
    corpus.write_text("Call me Ishmael.\n\nSome years ago, never mind how long precisely.\n")
    store = root / ("store-" + name)
    code, printed = run(["data", "prepare", "--input", corpus, "--tokenizer", tiny_setup["tokenizer"], "--out",
                         store], capsys)
    assert code == 0 and printable(str(store)) in printed, printed
    assert not raw_controls(printed), printed


def test_pretrain_never_prints_its_out_raw(tiny_setup, tmp_path, capsys):
    """fold-06 as the battery ran it: an ESC sequence in pretrain's --out, in every line it prints."""
    out = tmp_path / "run-\x1b[31mred\x1b]0;title\x07"
    code, printed = run(["pretrain", "--preset", "tiny", "--data", tiny_setup["store"], "--out", out, "--max-steps",
                         "1", "--batch-size", "2", "--micro-batch", "2", "--seq-len", "32", "--max-predictions", "5",
                         "--report-to", "none"], capsys)
    assert code == 0, printed
    assert "\\x1b[31mred" in printed and not raw_controls(printed), printed


@given(texts=st.lists(hostile_text(), min_size=1, max_size=3))
def test_tokenizer_encode_prints_valid_json_and_nothing_raw(tiny_setup, capsys, texts):
    texts = [t.replace("\x00", "") for t in texts]
    code, printed = run(["tokenizer", "encode", "--tokenizer", tiny_setup["tokenizer"], "--pieces"]
                        + [a for t in texts for a in ("--text", t)], capsys)
    assert code == 0, printed
    assert not raw_controls(printed), printed
    assert len([json.loads(line) for line in printed.splitlines()]) == len(texts)
