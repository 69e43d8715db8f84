"""`litebert.files`: atomic writes leave the old file or the new one, never a torn one or a stray temporary."""

import os

import pytest

from litebert.errors import ConfigError, WriteError
from litebert.files import atomic_write, read_json, temporary_name, write_json


def test_atomic_write_bytes_text_and_callable(tmp_path):
    assert atomic_write(tmp_path / "a" / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"  # parents created
    assert atomic_write(tmp_path / "t.txt", "é\n").read_bytes() == "é\n".encode("utf-8")
    atomic_write(tmp_path / "c.txt", lambda p: p.write_text("by name"))
    assert (tmp_path / "c.txt").read_text() == "by name"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c.txt", "t.txt"]  # no temporaries left
    assert oct((tmp_path / "c.txt").stat().st_mode & 0o777) == oct(0o644)


def test_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "model.bin"
    target.write_bytes(b"old")

    def broken(p):
        p.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteError, match=r"model\.bin: cannot write \(No space left on device\)"):
        atomic_write(target, broken)
    assert target.read_bytes() == b"old"
    assert not temporary_name(target).exists() and sorted(os.listdir(tmp_path)) == ["model.bin"]

    def interrupted(p):
        p.write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)
    assert target.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["model.bin"]


def test_read_json_names_the_file_and_line(tmp_path):
    write_json(tmp_path / "ok.json", {"a": [1, 2]})
    assert read_json(tmp_path / "ok.json", ConfigError) == {"a": [1, 2]}
    (tmp_path / "bad.json").write_text('{\n  "a": 1,\n  oops\n}')
    with pytest.raises(ConfigError, match=r"bad\.json:3: not valid JSON"):
        read_json(tmp_path / "bad.json", ConfigError)
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ConfigError, match="expected a JSON object, got array"):
        read_json(tmp_path / "list.json", ConfigError)
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_json(tmp_path / "latin1.json", ConfigError)
    with pytest.raises(ConfigError, match="no such file"):
        read_json(tmp_path / "missing.json", ConfigError)
