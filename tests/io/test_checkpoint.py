"""Checkpoint folders: bad input gets a clear error, nothing half-written is left behind, legacy formats load safely."""

import pickle

import pytest
import torch

from litebert.config import AlbertConfig
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError
from litebert.heads import AlbertForPreTraining, AlbertForSequenceClassification
from litebert.io import hf_folder as checkpoint
from litebert.io.keymap import to_hf

TINY = AlbertConfig.from_preset("tiny")


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = AlbertForPreTraining(TINY).eval()
    model.save_pretrained(tmp_path / "m")
    return model, tmp_path / "m"


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="not found"):
        AlbertForPreTraining.from_pretrained(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointNotFoundError, match="config.json"):
        AlbertForPreTraining.from_pretrained(tmp_path / "empty")
    TINY.to_json(tmp_path / "empty" / "config.json")
    with pytest.raises(CheckpointNotFoundError, match="model.safetensors"):
        AlbertForPreTraining.from_pretrained(tmp_path / "empty")


def test_truncated_safetensors(saved):
    _, path = saved
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*truncated or corrupt"):
        AlbertForPreTraining.from_pretrained(path)


def test_garbage_safetensors(saved):
    _, path = saved
    (path / "model.safetensors").write_bytes(b"\x00" * 100)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        AlbertForPreTraining.from_pretrained(path)


def test_shape_mismatch_names_key_and_shapes(saved):
    _, path = saved
    with pytest.raises(CheckpointError) as info:
        AlbertForPreTraining.from_pretrained(path, vocab_size=999)
    message = str(info.value)
    assert "albert.embeddings.word_embeddings.weight" in message and "(1000, 16)" in message and "(999, 16)" in message


def test_bad_override_is_a_config_error(saved):
    _, path = saved
    with pytest.raises(ConfigError, match="hidden_sise"):
        AlbertForPreTraining.from_pretrained(path, hidden_sise=3)


def test_legacy_pytorch_bin_loads_with_weights_only(saved, tmp_path):
    model, path = saved
    state = to_hf(model.state_dict(), model.config)
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "config.json").write_text((path / "config.json").read_text())
    torch.save(state, legacy / "pytorch_model.bin")
    again = AlbertForPreTraining.from_pretrained(legacy, strict=True)
    ids = torch.randint(5, 1000, (2, 9))
    with torch.no_grad():
        assert torch.equal(model(ids).prediction_logits, again(ids).prediction_logits)


class Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_pickle_with_code_is_refused(saved, tmp_path):
    _, path = saved
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "config.json").write_text((path / "config.json").read_text())
    with open(evil / "pytorch_model.bin", "wb") as f:
        pickle.dump({"x": Evil()}, f)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        AlbertForPreTraining.from_pretrained(evil)


def test_checkpoint_without_sop_head_loads(saved, tmp_path):
    """The public albert-*-v2 checkpoints have no sop_classifier: it is reported as missing, the rest loads."""
    model, path = saved
    tensors = checkpoint.load_weights(path)
    tensors = {k: v for k, v in tensors.items() if not k.startswith("sop_classifier")}
    fresh = AlbertForPreTraining(TINY)
    missing, unexpected = checkpoint.load_hf_state_dict(fresh, tensors)
    assert missing == ["sop_classifier.classifier.bias", "sop_classifier.classifier.weight"] and unexpected == []
    assert torch.equal(fresh.predictions.bias, model.predictions.bias)
    with pytest.raises(CheckpointError, match="sop_classifier"):
        from safetensors.torch import save_file
        save_file(tensors, str(path / "model.safetensors"))
        AlbertForPreTraining.from_pretrained(path, strict=True)


def test_missing_encoder_weights_warn(saved):
    _, path = saved
    from safetensors.torch import save_file
    tensors = checkpoint.load_weights(path)
    del tensors["albert.pooler.weight"]
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.warns(UserWarning, match="albert.pooler.weight"):
        AlbertForSequenceClassification.from_pretrained(path)


def test_failed_save_keeps_previous_checkpoint(saved, monkeypatch):
    model, path = saved
    before = (path / "model.safetensors").read_bytes()

    def boom(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"partial")
        raise OSError("No space left on device")

    import safetensors.torch
    monkeypatch.setattr(safetensors.torch, "save_file", boom)
    with pytest.raises(OSError, match="No space"):
        model.save_pretrained(path)
    assert (path / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]


def test_input_errors_are_clear():
    model = AlbertForPreTraining(TINY).eval()
    with pytest.raises(ValueError, match="max_position_embeddings = 128"):
        model(torch.ones(1, 129, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size = 1000"):
        model(torch.tensor([[2, 1000, 3]]))
    with pytest.raises(ValueError, match="type_vocab_size"):
        model(torch.tensor([[2, 7, 3]]), token_type_ids=torch.tensor([[0, 2, 0]]))
