"""`litebert.files`: atomic writes leave the old file or the new one, never a torn one or a stray temporary."""

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litebert.errors import ConfigError, WriteError
from litebert.files import atomic_write, parse_json, read_json, temporary_name, write_json


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


_keys = st.text(max_size=4)
_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                            lambda inner: st.lists(inner, max_size=3)
                            | st.lists(st.tuples(_keys, inner), max_size=4).map(lambda pairs: ("object", pairs)),
                            max_leaves=12)


def _write(value) -> str:
    """JSON text of ``value``, objects written from their pairs as drawn (a key may come twice, as in a hand-edited
    file); json.dumps would merge them."""
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{json.dumps(k)}: {_write(v)}" for k, v in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_write(v) for v in value) + "]"
    return json.dumps(value)


def _key_twice(value) -> bool:
    if isinstance(value, tuple):
        keys = [k for k, _ in value[1]]
        return len(set(keys)) < len(keys) or any(_key_twice(v) for _, v in value[1])
    return isinstance(value, list) and any(_key_twice(v) for v in value)


@given(value=_json_values, lineno=st.none() | st.integers(1, 9))
def test_a_key_given_twice_is_refused_at_any_depth(value, lineno):
    """Python's json keeps the last of two equal keys, so ``{"lr": 1e-4, "lr": 1}`` would read as lr 1 with no word:
    an object with a key twice, at any depth, is an error naming the file (and line); any other document reads as
    json.loads reads it."""
    text = _write(value)
    if _key_twice(value):
        with pytest.raises(ConfigError, match=r"^f\.json" + (f":{lineno}" if lineno else "") + r": the key .* is "
                           "given twice in one object"):
            parse_json(text, "f.json", ConfigError, lineno)
    else:
        assert parse_json(text, "f.json", ConfigError, lineno) == json.loads(text)


def test_a_config_with_a_key_twice_names_the_key(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 64,\n "hidden_size": 128}')
    with pytest.raises(ConfigError, match=r"config\.json: the key 'hidden_size' is given twice in one object"):
        read_json(tmp_path / "config.json", ConfigError)
