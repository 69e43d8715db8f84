"""`litebert.errors`: a path or value that holds control characters reaches the terminal escaped, however it entered
the message (a named argument, a path put into the text, another library's error)."""

from pathlib import Path

from litebert.cli import main
from litebert.errors import ConfigError, DataError, first_line, literal

ESC = "\x1b[31mred\x1b[0m"


def test_control_characters_in_paths_and_values_are_escaped_in_messages():
    path = Path(f"runs/{ESC}\tx\ny")
    shown = r"runs/\x1b[31mred\x1b[0m\tx\ny"
    named = ConfigError("{out} cannot be written", out=path)
    assert named.render({"out": "--out"}) == f"--out {shown} cannot be written"
    assert str(named) == f"out = '{shown}' cannot be written"  # Python's repr, as before
    assert str(DataError(f"{literal(path)}: no metrics.jsonl")) == f"{shown}: no metrics.jsonl"
    assert str(DataError(f"{literal(path)}: line {{n}}", n=3)) == f"{shown}: line n = 3"
    assert first_line(OSError(f"cannot open {path}"), 100) == r"cannot open runs/\x1b[31mred\x1b[0m\tx"
    # bidirectional overrides and the surrogates of undecodable file-name bytes: escaped too
    assert str(DataError("a\u202eb \udcff")) == r"a\u202eb \udcff"
    # text that needs nothing is left as it is, accents and all
    assert str(DataError("données/été ✓: fine")) == "données/été ✓: fine"


def test_the_command_line_prints_an_escaped_path_on_one_line(tmp_path, capsys):
    run = tmp_path / f"not-a-run{ESC}"
    run.mkdir()
    assert main(["plot", str(run), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1
    assert err == (rf"litebert plot: error: {tmp_path}/not-a-run\x1b[31mred\x1b[0m: no metrics.jsonl; give the folder "
                   "of a `litebert pretrain` or `litebert finetune` run\n")
