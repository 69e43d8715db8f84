"""Fault injection on the files litebert reads besides stores and fine-tuning data: a tokenizer folder, a model
folder (config.json, model.safetensors, a sharded index) and a training checkpoint.

Property: every random mutation (byte flips, truncation, appended bytes, edited JSON values and keys) ends either in
a `LitebertError` whose message is one line, or in a load that works. For files that carry a checksum (training
checkpoints) a load that works must give back exactly the original content. Mutations are drawn from a seeded RNG,
so a failure names a reproducible case.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.config import AlbertConfig
from litebert.engine.checkpoint import load_checkpoint, save_checkpoint
from litebert.errors import LitebertError
from litebert.heads import AlbertForPreTraining, AlbertModel
from litebert.tokenizer import AlbertTokenizer

CASES = 60  # mutations per file in the default run; the slow run multiplies it


def mutate_bytes(data: bytes, rng: np.random.Generator) -> bytes:
    """One random damage: flip 1-8 bytes, truncate, append junk, or zero a run of bytes."""
    b = bytearray(data)
    kind = rng.integers(4)
    if kind == 0 or len(b) < 2:
        for i in rng.integers(0, max(len(b), 1), size=rng.integers(1, 9)):
            if b:
                b[i] ^= int(rng.integers(1, 256))
    elif kind == 1:
        del b[int(rng.integers(0, len(b))):]
    elif kind == 2:
        b += bytes(rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8))
    else:
        start = int(rng.integers(0, len(b)))
        b[start:start + int(rng.integers(1, 64))] = bytes(min(len(b) - start, int(rng.integers(1, 64))))
    return bytes(b)


_WRONG = [None, True, -1, 0, 2**40, 1e308, "x", "", [], {}, [1, 2], {"a": 1}, 0.5, -0.5]


def mutate_json(data, rng: np.random.Generator):
    """One random edit of a JSON document: a value replaced by a wrong-typed or out-of-range one, a key deleted or
    renamed, or (one time in five) the text itself damaged."""
    if not isinstance(data, dict) or not data:
        return data
    doc = json.loads(json.dumps(data))
    target, keys = doc, list(doc)
    key = keys[int(rng.integers(len(keys)))]
    if isinstance(target[key], dict) and target[key] and rng.random() < 0.5:  # one level down, e.g. weight_map
        target = target[key]
        inner = list(target)
        key = inner[int(rng.integers(len(inner)))]
    op = rng.integers(3)
    if op == 0:
        target[key] = _WRONG[int(rng.integers(len(_WRONG)))]
    elif op == 1:
        del target[key]
    else:
        target[key + "_"] = target.pop(key)
    return doc


def expect_clean(fn, case: str):
    """Run ``fn``; return its result, or None when it raised a one-line LitebertError. Anything else fails."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except LitebertError as e:
        assert "\n" not in str(e).strip(), f"{case}: multi-line error: {e}"
        assert str(e).strip(), f"{case}: empty error message"
        return None
    except Exception as e:  # noqa: BLE001 - the property under test
        pytest.fail(f"{case}: {type(e).__name__} instead of a clear error: {e}")


def _cases(request) -> int:
    return CASES * (10 if request.node.get_closest_marker("slow") else 1)


# --------------------------------------------------------------------------------------------------- tokenizer
@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory, albert_vocab) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    AlbertTokenizer.from_pretrained(albert_vocab).save_pretrained(folder)
    return folder


def _tokenizer_cases(tokenizer_folder, tmp_path, n, seed):
    rng = np.random.default_rng(seed)
    original = {p.name: p.read_bytes() for p in tokenizer_folder.iterdir()}
    reference = AlbertTokenizer.from_pretrained(tokenizer_folder)("The quick brown fox, 1,000 times.")["input_ids"]
    for case in range(n):
        work = tmp_path / f"c{case}"
        shutil.copytree(tokenizer_folder, work)
        name = ["spiece.model", "tokenizer_config.json"][case % 2]
        if name.endswith(".json") and rng.random() < 0.8:
            doc = mutate_json(json.loads(original[name]), rng)
            (work / name).write_text(json.dumps(doc))
        else:
            (work / name).write_bytes(mutate_bytes(original[name], rng))
        label = f"tokenizer case {case} ({name}, seed {seed})"
        tok = expect_clean(lambda: AlbertTokenizer.from_pretrained(work), label)
        if tok is not None:  # loaded: it must also encode without a traceback
            expect_clean(lambda: tok("The quick brown fox, 1,000 times."), label)
        shutil.rmtree(work)
    assert reference  # the unmutated folder encodes


def test_tokenizer_files_mutated(tokenizer_folder, tmp_path, request):
    _tokenizer_cases(tokenizer_folder, tmp_path, _cases(request), seed=1)


@pytest.mark.slow
def test_tokenizer_files_mutated_long(tokenizer_folder, tmp_path, request):
    _tokenizer_cases(tokenizer_folder, tmp_path, _cases(request), seed=2)


# ------------------------------------------------------------------------------------------------ model folder
@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    AlbertModel(AlbertConfig.from_preset("tiny")).save_pretrained(folder)
    return folder


def _model_cases(model_folder, tmp_path, n, seed):
    rng = np.random.default_rng(seed)
    original = {p.name: p.read_bytes() for p in model_folder.iterdir() if p.is_file()}
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    for case in range(n):
        work = tmp_path / f"c{case}"
        shutil.copytree(model_folder, work)
        name = ["config.json", "model.safetensors"][case % 2]
        if name.endswith(".json") and rng.random() < 0.8:
            (work / name).write_text(json.dumps(mutate_json(json.loads(original[name]), rng)))
        else:
            (work / name).write_bytes(mutate_bytes(original[name], rng))
        label = f"model case {case} ({name}, seed {seed})"
        model = expect_clean(lambda: AlbertModel.from_pretrained(work), label)
        if model is not None:
            expect_clean(lambda: model(ids), label)
        shutil.rmtree(work)


def test_model_folder_mutated(model_folder, tmp_path, request):
    _model_cases(model_folder, tmp_path, _cases(request), seed=3)


@pytest.mark.slow
def test_model_folder_mutated_long(model_folder, tmp_path, request):
    _model_cases(model_folder, tmp_path, _cases(request), seed=4)


def test_sharded_index_mutated(model_folder, tmp_path):
    """A sharded checkpoint's index: edited entries load or fail cleanly; a shard named outside the folder is
    refused (never read)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(model_folder / "model.safetensors"))
    names = sorted(tensors)
    half = len(names) // 2
    base = tmp_path / "sharded"
    base.mkdir()
    (base / "config.json").write_bytes((model_folder / "config.json").read_bytes())
    save_file({k: tensors[k] for k in names[:half]}, str(base / "model-00001-of-00002.safetensors"))
    save_file({k: tensors[k] for k in names[half:]}, str(base / "model-00002-of-00002.safetensors"))
    index = {"metadata": {}, "weight_map": {k: f"model-0000{1 + (i >= half)}-of-00002.safetensors"
                                            for i, k in enumerate(names)}}
    (base / "model.safetensors.index.json").write_text(json.dumps(index))
    loaded = AlbertModel.from_pretrained(base)
    assert torch.equal(loaded.state_dict()["embeddings.word_embeddings.weight"],
                       AlbertModel.from_pretrained(model_folder).state_dict()["embeddings.word_embeddings.weight"])
    outside = tmp_path / "x.safetensors"
    save_file({k: torch.zeros_like(v) for k, v in tensors.items()}, str(outside))
    for shard in ("../x.safetensors", str(outside), "/etc/passwd", "..", "sub/../../x.safetensors"):
        bad = json.loads(json.dumps(index))
        bad["weight_map"][names[0]] = shard
        (base / "model.safetensors.index.json").write_text(json.dumps(bad))
        assert expect_clean(lambda: AlbertModel.from_pretrained(base), f"shard {shard}") is None
    rng = np.random.default_rng(5)
    for case in range(CASES):
        (base / "model.safetensors.index.json").write_text(json.dumps(mutate_json(index, rng)))
        expect_clean(lambda: AlbertModel.from_pretrained(base), f"index case {case}")


# ------------------------------------------------------------------------------------------ training checkpoint
def test_training_checkpoint_mutated(tmp_path):
    """A training checkpoint carries a sha256: any damage to it, or to its checksum file, is refused; a load that
    works returns exactly what was saved."""
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("tiny"))
    folder = tmp_path / "checkpoints"
    path = save_checkpoint(folder, 5, {"model": model.state_dict(), "data_step": 5})
    original = {p.name: p.read_bytes() for p in folder.iterdir()}
    reference = load_checkpoint(path)
    rng = np.random.default_rng(6)
    for case in range(CASES):
        name = [path.name, path.name + ".sha256"][case % 2]
        (folder / name).write_bytes(mutate_bytes(original[name], rng))
        state = expect_clean(lambda: load_checkpoint(path), f"checkpoint case {case} ({name})")
        if state is not None:
            assert state["data_step"] == reference["data_step"]
            assert all(torch.equal(state["model"][k], v) for k, v in reference["model"].items()), f"case {case}"
        (folder / name).write_bytes(original[name])
