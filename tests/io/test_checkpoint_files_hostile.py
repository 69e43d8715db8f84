"""Checkpoints and what vouches for them, generated hostile (issue 57, item 1): a training checkpoint whose bytes are
cut or changed, with a ``.sha256`` file of the wrong content or format; a ``model.safetensors`` truncated, garbled,
or with a header whose JSON lies (dtypes, shapes, offsets); a sharded index naming shards that are paths. The
property (`helpers.hostile.outcome`): a one-line `LitebertError` naming the file at fault, or the tensors as they were
written; never another exception, never a file read outside the folder."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers.hostile import damaged, file_names, mutated_json, outcome
from litebert.engine.checkpoint import load_checkpoint, save_checkpoint
from litebert.errors import CheckpointError
from litebert.io.hf_folder import load_weights

pytestmark = pytest.mark.usefixtures("one_thread")
STATE = {"weights": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, "note": "x"}


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------- training checkpoints
@st.composite
def checksum_text(draw, digest: str, name: str) -> bytes:
    """A ``.sha256`` file: ``sha256sum``'s own line, or a variant (upper case, no name, a BOM, CRLF), or wrong (the
    hash of other bytes, cut, not hex, empty, binary)."""
    good = draw(st.sampled_from((f"{digest}  {name}\n", f"{digest}\n", digest, f"{digest.upper()}  {name}\n",
                                 f"{digest} *{name}\r\n", f"\ufeff{digest}  {name}\n")))
    wrong = draw(st.sampled_from((hashlib.sha256(b"other").hexdigest(), digest[:-1], digest[:32], "z" * 64, "",
                                  " ", f"{name}  {digest}", "sha256:" + digest)))
    kind = draw(st.sampled_from(("good", "wrong", "binary")))
    if kind == "binary":
        return draw(st.binary(max_size=80))
    return (good if kind == "good" else wrong).encode("utf-8")


@given(data=st.data())
def test_a_checkpoint_and_its_checksum_verify_or_are_refused_naming_the_file(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    path = save_checkpoint(folder, 7, STATE)
    sums = path.with_name(path.name + ".sha256")
    written = path.read_bytes()
    changed = data.draw(damaged(written))
    path.write_bytes(changed)
    if data.draw(st.booleans()):
        sums.write_bytes(data.draw(checksum_text(hashlib.sha256(written).hexdigest(), path.name)))
    state = outcome(lambda: load_checkpoint(path), path.name)
    if state is not None:  # verified: the bytes are the ones written, and they are read back as written
        assert changed == written and same(state["weights"], STATE["weights"]) and state["step"] == 7


def test_a_malformed_checksum_file_is_named_as_such(tmp_path):
    """A ``.sha256`` that holds no sha256 is the checksum file's fault, not a corrupt checkpoint."""
    path = save_checkpoint(tmp_path, 1, STATE)
    sums = path.with_name(path.name + ".sha256")
    for text in ("", "not a hash", "z" * 64, "\x00\xff"):
        sums.write_text(text)
        with pytest.raises(CheckpointError, match=rf"checksum file {sums.name} holds .*not a sha256 checksum"):
            load_checkpoint(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    for text in (digest.upper(), f"\ufeff{digest}  {path.name}\r\n", f"{digest} *{path.name}"):  # sha256sum's forms
        sums.write_text(text)
        assert load_checkpoint(path)["step"] == 1


# ------------------------------------------------------------------------------- safetensors weights
def safetensors_bytes(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


TENSORS = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor([1, 2], dtype=torch.int64)}
HEADER = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}, "__metadata__": {"format": "pt"}}
DATA = TENSORS["a"].numpy().tobytes() + TENSORS["b"].numpy().tobytes()


@st.composite
def hostile_safetensors(draw) -> bytes:
    kind = draw(st.sampled_from(("damaged", "header", "length", "garbage")))
    if kind == "damaged":
        return draw(damaged(safetensors_bytes(HEADER, DATA)))
    if kind == "header":
        return safetensors_bytes(draw(mutated_json(HEADER)), DATA)
    if kind == "length":
        good = safetensors_bytes(HEADER, DATA)
        return struct.pack("<Q", draw(st.sampled_from((0, 1, 2**63, 2**64 - 1, len(good))))) + good[8:]
    return draw(st.binary(max_size=64))


@given(data=hostile_safetensors())
def test_a_hostile_safetensors_file_is_refused_naming_it_or_read_as_written(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("st")
    (folder / "model.safetensors").write_bytes(data)
    tensors = outcome(lambda: load_weights(folder), "model.safetensors")
    if tensors is not None and data == safetensors_bytes(HEADER, DATA):
        assert same(tensors, TENSORS)


@given(names=st.lists(st.one_of(file_names(), st.sampled_from(("../x.safetensors", "/etc/passwd", "a/b",
                                                                ".", "..", "", "model.safetensors"))),
                      min_size=1, max_size=3))
def test_a_sharded_index_naming_paths_reads_nothing_outside_the_folder(names, tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    folder = root / "model"
    folder.mkdir()
    (root / "x.safetensors").write_bytes(safetensors_bytes(HEADER, DATA))  # beside the folder: never read
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {f"t{i}": n for i, n in enumerate(names)}}))
    outcome(lambda: load_weights(folder), "model.safetensors.index.json", "model")
