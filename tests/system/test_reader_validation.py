"""Readers do not trust what they read: a table whose bytes contradict its schema, JSON nested deeper than Python
parses, metadata of the wrong shape, a name read from a file that leads out of its folder, a hub cache ref that is
not a commit, a pickle that only weights_only=False would open. Each is one error naming the file (and the column
and row, or the key), never a traceback nor a read of something outside what was given."""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import pytest
import torch

from litebert.cli import main
from litebert.errors import CheckpointError, ConfigError, DataError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["abc", "defg", "hi", "jklmn"]


def one_line_error(argv: list, capsys) -> str:
    """``litebert ARGV`` exits 2 with exactly one stderr line ``litebert CMD: error: ...``; returns the line."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def write_ipc(path: Path, table, stream: bool = False) -> Path:
    with pa.OSFile(str(path), "wb") as f:
        with (pa.ipc.new_stream if stream else pa.ipc.new_file)(f, table.schema) as w:
            w.write_table(table, max_chunksize=2)  # rows 0-1 in one batch, 2-3 in the next
    return path


def not_utf8_table():
    """TEXTS with row 2's bytes replaced by two that are not UTF-8 (pa.array would refuse them; buffers do not)."""
    data = "".join(TEXTS).encode().replace(b"hi", b"\xff\xfe")
    offsets = pa.array([0, 3, 7, 9, 14], pa.int32()).buffers()[1]
    text = pa.Array.from_buffers(pa.string(), len(TEXTS), [None, offsets, pa.py_buffer(data)])
    return pa.table({"text": text, "id": list(range(len(TEXTS)))})


# ------------------------------------------------------------------------------------------ tables' own bytes
@pytest.mark.parametrize("kind", ["parquet", "arrow", "arrow-stream"])
def test_text_that_is_not_utf8_names_file_column_and_row(tmp_path, kind):
    from litebert.inputs.columnar import iter_rows, iter_texts

    table = not_utf8_table()
    if kind == "parquet":
        path = tmp_path / "t.parquet"
        pq.write_table(table, path, row_group_size=2)
    else:
        path = write_ipc(tmp_path / "t.arrow", table, stream=kind == "arrow-stream")
    for read in (lambda: list(iter_texts(path, kind, "text")), lambda: list(iter_rows(path, kind))):
        with pytest.raises(DataError) as e:
            read()
        assert str(e.value).startswith(f"{path}: row 2: column 'text' is damaged (Invalid UTF8 sequence)"), e.value
    assert [r for _, r in iter_rows(path, kind, ["id"])] == [{"id": i} for i in range(4)]  # other columns read


def test_arrow_offsets_past_the_data_name_file_column_and_row(tmp_path):
    from litebert.inputs.columnar import iter_texts

    path = write_ipc(tmp_path / "t.arrow", pa.table({"text": TEXTS}))
    raw = path.read_bytes()
    # the second batch's offsets (rows 2-3: "hi", "jklmn"): 0, 2, 7 as int32; row 3's end pushed past the data
    offsets = b"".join(n.to_bytes(4, "little") for n in (0, 2, 7))
    assert raw.count(offsets) == 1
    path.write_bytes(raw.replace(offsets, offsets[:8] + (70_000).to_bytes(4, "little")))
    with pytest.raises(DataError) as e:
        list(iter_texts(path, "arrow", "text"))
    assert str(e.value).startswith(f"{path}: row 3: column 'text' is damaged (Offset invariant failure"), e.value


def test_a_damaged_table_is_one_line_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "t.parquet"
    pq.write_table(not_utf8_table(), path)
    line = one_line_error(["tokenizer", "train", "--input", path, "--out", tmp_path / "tok", "--vocab-size", 100,
                           "--quiet"], capsys)
    assert f"{path}: row 2: column 'text' is damaged" in line
    assert not (tmp_path / "tok").exists()


# ---------------------------------------------------------------------------------------- datasets folders
def saved_dataset(folder: Path, texts=TEXTS) -> Path:
    """A ``Dataset.save_to_disk`` folder, as `datasets` lays it out (an Arrow stream, state.json)."""
    folder.mkdir(parents=True)
    write_ipc(folder / "data-00000-of-00001.arrow", pa.table({"text": texts}), stream=True)
    (folder / "dataset_info.json").write_text("{}")
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    return folder


def test_a_split_name_leading_out_of_the_folder_is_refused(tmp_path):
    from litebert.inputs.columnar import iter_texts

    saved_dataset(tmp_path / "a" / "elsewhere", ["not", "given"])
    folder = tmp_path / "a" / "b" / "dd"
    folder.mkdir(parents=True)
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["../../elsewhere"]}))
    with pytest.raises(DataError) as e:
        list(iter_texts(folder, "dataset", "text"))
    assert str(e.value).startswith(f"{folder / 'dataset_dict.json'}: names '../../elsewhere', which is not a file "
                                   f"name inside {folder}"), e.value


def test_state_json_nested_200000_deep_is_one_error(tmp_path, capsys):
    folder = saved_dataset(tmp_path / "ds")
    (folder / "state.json").write_text("[" * 200_000 + "]" * 200_000)
    line = one_line_error(["tokenizer", "train", "--input", folder, "--out", tmp_path / "tok", "--vocab-size", 100,
                           "--quiet"], capsys)
    assert line.startswith(f"litebert tokenizer: error: {folder / 'state.json'}: JSON nested too deeply"), line


@pytest.mark.parametrize("metadata, says", [
    ({"info": {"features": ["text"]}}, "'info.features' is a JSON array, expected a JSON object"),
    ({"info": {"features": {"label": {"_type": "ClassLabel", "names": "neg,pos"}}}},
     "'info.features.label.names' is a JSON string, expected a JSON array"),
    ("deep", "JSON nested too deeply"),
])
def test_schema_metadata_of_any_shape_names_file_and_key(tmp_path, metadata, says):
    from litebert.inputs.columnar import iter_rows

    raw = "[" * 100_000 + "]" * 100_000 if metadata == "deep" else json.dumps(metadata)
    table = pa.table({"text": TEXTS, "label": [0, 1, 0, 1]}).replace_schema_metadata({"huggingface": raw})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    with pytest.raises(DataError) as e:
        list(iter_rows(path, "parquet"))
    assert str(e.value).startswith(f"{path} (its schema metadata 'huggingface'): "), e.value
    assert says in str(e.value)


# ----------------------------------------------------------------------------------------------- JSON files
def test_a_model_config_nested_too_deeply_is_one_error(tmp_path):
    from litebert.config import AlbertConfig

    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(ConfigError, match=f"^{path}: JSON nested too deeply"):
        AlbertConfig.from_json(path)


# --------------------------------------------------------------------------------------------- model files
def test_a_pickle_only_weights_only_false_opens_is_one_line(tmp_path):
    from litebert.io.hf_folder import load_weights

    folder = tmp_path / "model"
    folder.mkdir()
    # what older training scripts saved: the weights beside the run's arguments, an object no safe load accepts
    torch.save({"w": torch.zeros(2), "args": argparse.Namespace(lr=1e-3)}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as e:
        load_weights(folder)
    message = str(e.value)
    assert "\n" not in message and "\x1b" not in message, message
    assert message.startswith(f"{folder / 'pytorch_model.bin'}: cannot be read as a PyTorch state dict with "
                              "weights_only=True (Unsupported global: GLOBAL argparse.Namespace"), message
    assert "litebert reads safetensors" in message and "safetensors.torch.save_file" in message


# ---------------------------------------------------------------------------------------------- hub cache
def test_a_cache_ref_holding_a_path_is_refused(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from helpers import cache_repo
    from litebert import hub

    outside = tmp_path / "hf_home" / "elsewhere"
    outside.mkdir(parents=True)
    (outside / "config.json").write_text("{}")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    cache_repo(tmp_path / "hf_home", "org/tiny", model)
    ref = tmp_path / "hf_home" / "hub" / "models--org--tiny" / "refs" / "main"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.local("org/tiny").parent.name == "snapshots"  # the cache as huggingface_hub writes it
    ref.write_text("../../../elsewhere")  # snapshots/../../../elsewhere is hf_home/elsewhere
    with pytest.raises(CheckpointError, match=f"^{ref}: holds '../../../elsewhere', not a commit hash"):
        hub.local("org/tiny")


# ------------------------------------------------------------------------------------------------ trackers
def test_trackers_json_of_the_wrong_shape_is_named_and_a_new_run_starts(tmp_path, monkeypatch, capsys):
    from litebert.engine import trackers

    started = []

    class Run:
        id, project, step = "new-run", "p", 0

    fake = types.SimpleNamespace(init=lambda **kw: started.append(kw) or Run())
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setattr(trackers, "_installed", lambda name: True)
    (tmp_path / "trackers.json").write_text(json.dumps({"wandb": "old-run"}))
    opened = trackers.open_trackers(trackers.resolve("wandb"), tmp_path, resume_step=2, config={})
    assert [t.name for t in opened] == ["wandb"] and "id" not in started[0]  # a new run, not a crash
    err = capsys.readouterr().err
    assert f"warning: {tmp_path / 'trackers.json'}: 'wandb' is a JSON string, expected a JSON object" in err, err
    assert json.loads((tmp_path / "trackers.json").read_text())["wandb"]["id"] == "new-run"


# ------------------------------------------------------------------------------------ shapes read from files
@pytest.fixture(scope="module")
def store(tmp_path_factory, albert_vocab) -> Path:
    from litebert.data.store import prepare_store
    from litebert.tokenizer import AlbertTokenizer

    root = tmp_path_factory.mktemp("store")
    (root / "c.txt").write_text("The whale swam.\nThe ship sailed on.\n\nA second document.\nIt ends here.\n")
    prepare_store([root / "c.txt"], AlbertTokenizer.from_pretrained(albert_vocab / "spiece.model"), root / "s",
                  progress=False)
    return root / "s"


def test_a_shape_from_model_config_is_named_as_the_files_field(store, tmp_path, capsys):
    config = tmp_path / "big.json"
    config.write_text(json.dumps({"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32,
                                  "num_hidden_layers": 10**9, "num_attention_heads": 2, "intermediate_size": 64,
                                  "max_position_embeddings": 64}))
    out = tmp_path / "run"
    line = one_line_error(["pretrain", "--model-config", config, "--data", store, "--out", out, "--max-steps", 1,
                           "--batch-size", 2, "--micro-batch", 2, "--seq-len", 32, "--device", "cpu",
                           "--no-progress"], capsys)
    assert f"{config}: num_hidden_layers = 1000000000: this shape needs at least" in line, line
    assert "--num-layers" not in line
    assert not out.exists()


def test_a_shape_flag_given_is_still_named_as_the_flag(store, tmp_path, capsys):
    out = tmp_path / "run"
    line = one_line_error(["pretrain", "--preset", "tiny", "--num-layers", 10**9, "--data", store, "--out", out,
                           "--max-steps", 1, "--batch-size", 2, "--micro-batch", 2, "--seq-len", 32, "--device",
                           "cpu", "--no-progress"], capsys)
    assert "--num-layers 1000000000: this shape needs at least" in line, line
