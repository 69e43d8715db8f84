"""ONNX export: every head's graph, run in onnxruntime on other shapes than the export example (with padding),
matches PyTorch (and, for the encoder, HF transformers) to 1e-4; errors are clear; writes are atomic."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from litebert import heads
from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError
from litebert.io import export

ort = pytest.importorskip("onnxruntime")

ATOL = 1e-4
# (batch, length) pairs unlike the export example (2 x 11): more rows, a single row, the longest input the tiny
# config takes (max_position_embeddings = 128), a very short one.
SHAPES = [(4, 37), (1, 128), (5, 3)]
MC_SHAPES = [(2, 5, 20), (1, 2, 9)]  # (batch, choices, length); the example has 3 choices


def make_inputs(config: AlbertConfig, shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    """Random ids; row r keeps a random number of real tokens (>= 1) and is right-padded; two segments."""
    rng = np.random.default_rng(seed)
    *lead, length = shape
    rows = int(np.prod(lead))
    lengths = rng.integers(1, length + 1, rows)
    lengths[0] = length  # one unpadded row
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int64)
    ids = rng.integers(5, config.vocab_size, (rows, length)) * mask  # pad id 0
    types = (np.arange(length)[None, :] >= rng.integers(0, length, rows)[:, None]).astype(np.int64) * mask
    return {"input_ids": ids.reshape(shape), "attention_mask": mask.reshape(shape),
            "token_type_ids": types.reshape(shape)}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A saved tiny random model for every head (dropout > 0 in the classifiers: eval mode must hold in the graph)."""
    config = AlbertConfig.from_preset("tiny", num_labels=3, classifier_dropout_prob=0.1)
    out = {}
    for i, (name, arch) in enumerate(export.HEAD_NAMES.items()):
        torch.manual_seed(i)
        folder = tmp_path_factory.mktemp(name)
        heads.HEADS[arch](config).save_pretrained(folder)
        out[name] = folder
    return out


@pytest.mark.parametrize("head", list(export.HEAD_NAMES))
def test_every_head_matches_pytorch(folders, tmp_path, head):
    arch = export.HEAD_NAMES[head]
    model = export.load_for_export(folders[head])  # --head auto: read from config.json "architectures"
    assert type(model) is heads.HEADS[arch]
    path = tmp_path / "model.onnx"
    result = export.export_onnx(model, path)
    assert not model.training  # the exporter restores the wrapper's mode; dropout must stay off
    assert max(result["verified"]["max_abs_diff"].values()) <= ATOL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # the temporary file was renamed

    reference = heads.HEADS[arch].from_pretrained(folders[head], strict=True)  # fresh, in eval mode
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [name for name, _ in export.OUTPUTS[arch]]
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in session.get_outputs()] == names
    mc = head == "multiple-choice"
    for i in session.get_inputs():  # every input axis is symbolic
        assert all(isinstance(d, str) for d in i.shape), i.shape
    for k, shape in enumerate(MC_SHAPES if mc else SHAPES):
        feed = make_inputs(reference.config, shape, seed=k)
        got = session.run(None, feed)
        with torch.no_grad():
            want = reference(**{n: torch.from_numpy(v) for n, v in feed.items()})
        for name, g in zip(names, got):
            w = getattr(want, name).numpy()
            assert g.shape == w.shape, (name, shape)
            assert np.abs(g - w).max() <= ATOL, (name, shape, np.abs(g - w).max())


def test_encoder_matches_hf_transformers(folders, tmp_path):
    """The exported encoder against HF's AlbertModel on the same folder (real positions and the pooler)."""
    transformers = pytest.importorskip("transformers")
    path = tmp_path / "encoder.onnx"
    export.export_onnx(export.load_for_export(folders["encoder"]), path, verify=False)
    hf = transformers.AlbertModel.from_pretrained(folders["encoder"]).eval()
    session = export.onnx_session(path)
    for k, shape in enumerate(SHAPES):
        feed = make_inputs(hf.config, shape, seed=10 + k)
        hidden, pooled = session.run(None, feed)
        with torch.no_grad():
            want = hf(**{n: torch.from_numpy(v) for n, v in feed.items()})
        real = feed["attention_mask"].astype(bool)
        assert np.abs(hidden[real] - want.last_hidden_state.numpy()[real]).max() <= ATOL
        assert np.abs(pooled - want.pooler_output.numpy()).max() <= ATOL


def test_cli_exports_and_prints_verification(folders, tmp_path, capsys):
    out = tmp_path / "sub" / "qa.onnx"
    assert main(["export", "onnx", "--model", str(folders["question-answering"]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "AlbertForQuestionAnswering" in printed and "start_logits" in printed
    assert "verified with onnxruntime" in printed and "max |onnx - torch|" in printed
    assert out.is_file()


def test_encoder_from_a_folder_without_pooler(folders, tmp_path):
    """A masked-LM folder has no pooler: --head encoder exports last_hidden_state only (no random pooler)."""
    model = export.load_for_export(folders["masked-lm"], "encoder")
    assert model.pooler is None
    path = tmp_path / "enc.onnx"
    export.export_onnx(model, path)
    assert [o.name for o in export.onnx_session(path).get_outputs()] == ["last_hidden_state"]


def test_onnx_session_options(folders, tmp_path):
    path = tmp_path / "m.onnx"
    export.export_onnx(export.load_for_export(folders["encoder"]), path, verify=False)
    options = export.onnx_session(path).get_session_options()
    assert options.intra_op_num_threads == torch.get_num_threads()
    assert export.onnx_session(path, threads=1).get_session_options().intra_op_num_threads == 1
    with pytest.raises(CheckpointNotFoundError, match="ONNX file not found"):
        export.onnx_session(tmp_path / "missing.onnx")


def test_errors(folders, tmp_path, capsys, monkeypatch):
    # Missing folder: one line, exit 2, no traceback.
    assert main(["export", "onnx", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "x.onnx")]) == 2
    assert "no such model folder" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown head 'ner'"):
        export.load_for_export(folders["encoder"], "ner")
    # A head the folder has no weights for would be random: refused, naming the missing keys and the folder's head.
    with pytest.raises(CheckpointError, match="classifier.weight.*AlbertForPreTraining"):
        export.load_for_export(folders["pretraining"], "sequence-classification")
    with pytest.raises(ConfigError, match="unknown exporter"):
        export.export_onnx(export.load_for_export(folders["encoder"]), tmp_path / "x.onnx", exporter="tflite")
    # onnxruntime missing: --verify says how to fix it, before any export work.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(export.ExportError, match="pip install 'onnxruntime>=1.17'.*verify = False"):
        export.export_onnx(export.load_for_export(folders["encoder"]), tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_without_onnx_no_verify_ends_in_the_install_hint(folders, tmp_path, capsys, monkeypatch):
    """A wheel install without the export extra: `--no-verify` skips onnxruntime, but torch's exporter still needs the
    onnx package (torch >= 2.9 writes the graph with it): one line saying how to install it, no file."""
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if not installed: `import onnx` raises ImportError
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    out = tmp_path / "x.onnx"
    code = main(["export", "onnx", "--model", str(folders["encoder"]), "--out", str(out), "--no-verify"])
    err = capsys.readouterr().err
    if code == 0:  # a torch whose exporter does without onnx (before 2.9): the graph is written
        assert out.is_file()
        return
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "needs the onnx package" in err and "pip install 'onnx>=1.15'" in err and "internal error" not in err
    assert list(tmp_path.iterdir()) == []


def test_failed_verification_leaves_no_file(folders, tmp_path):
    """Above the tolerance the export is an error and neither the target nor the temporary file remains."""
    out = tmp_path / "m.onnx"
    with pytest.raises(export.ExportError, match="differs from PyTorch by more than"):
        export.export_onnx(export.load_for_export(folders["token-classification"]), out, atol=1e-15)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # ~10 s; the default exporter is the TorchScript one
def test_dynamo_exporter(folders, tmp_path):
    """The torch.export-based exporter (optional: needs onnxscript) gives the same verified graph."""
    pytest.importorskip("onnxscript")
    result = export.export_onnx(export.load_for_export(folders["multiple-choice"]), tmp_path / "mc.onnx",
                                exporter="dynamo")
    assert result["opset"] == 18
    assert result["verified"]["max_abs_diff"]["logits"] <= ATOL
    assert [p.name for p in tmp_path.iterdir()] == ["mc.onnx"]  # weights inside, no side file


@pytest.mark.parametrize("overrides", [{"sharing": "ffn"}, {"num_hidden_groups": 2, "inner_group_num": 2},
                                       {"sharing": "none", "embedding_size": 32, "embedding_projection": False}])
def test_sharing_schedules_export(tmp_path, overrides):
    """Per-sub-block sharing (saved under litebert's own names), groups with inner groups, BERT-like: the schedule
    unrolls into the graph and matches PyTorch on a padded batch."""
    config = AlbertConfig.from_preset("tiny", **overrides)
    torch.manual_seed(0)
    heads.AlbertForTokenClassification(config).save_pretrained(tmp_path / "m")
    path = tmp_path / "m.onnx"
    export.export_onnx(export.load_for_export(tmp_path / "m"), path, verify=False)
    reference = heads.AlbertForTokenClassification.from_pretrained(tmp_path / "m", strict=True)
    feed = make_inputs(config, (3, 40), seed=3)
    (got,) = export.onnx_session(path).run(None, feed)
    with torch.no_grad():
        want = reference(**{n: torch.from_numpy(v) for n, v in feed.items()}).logits.numpy()
    assert np.abs(got - want).max() <= ATOL
