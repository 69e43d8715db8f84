"""Model folders in the HF layout: ``config.json`` + ``model.safetensors`` (HF parameter names).

Reads what HF writes (``model.safetensors``, sharded ``model.safetensors.index.json``, legacy ``pytorch_model.bin``
through ``torch.load(weights_only=True)``), with or without the ``albert.`` base-model prefix, with or without the SOP
head (the public albert-*-v2 checkpoints have none). Every write is atomic: a file is written under a temporary name
and renamed into place, weights before config, so a crash never leaves a folder that looks valid but is not.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import warnings
from pathlib import Path
from typing import Iterable

import torch

from litebert import __version__
from litebert.config import AlbertConfig
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError, first_line
from litebert.files import atomic_write, file_in, read_json, write_json
from litebert.io import keymap

log = logging.getLogger("litebert")

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
SHARDED_INDEX = "model.safetensors.index.json"
LEGACY_WEIGHTS = "pytorch_model.bin"
# Configs HF cannot express are written under a name HF does not look for, with a model_type it does not know, so
# that transformers refuses the folder instead of loading random weights.
NATIVE_WEIGHTS = "litebert_model.safetensors"
NATIVE_MODEL_TYPE = "litebert-albert"
HEAD_PREFIXES = ("predictions.", "sop_classifier.", "classifier.", "qa_outputs.")


# ------------------------------------------------------------------------------------------------ saving
def save_pretrained(model: torch.nn.Module, path: str | os.PathLike, *, require_hf: bool = False) -> None:
    """Write ``model`` to the folder ``path`` (created if needed).

    Models HF can express (sharing 'all'/'none') are written with HF names and load in
    ``transformers.AlbertFor*.from_pretrained``. The paper's per-sub-block sharing ablations are written under our own
    names with ``model_type = "litebert-albert"``; ``require_hf=True`` makes that case an error instead.
    """
    config: AlbertConfig = model.config
    if not config.hf_compatible and require_hf:
        raise CheckpointError(f"sharing={config.sharing!r} cannot be exported to HF transformers: HF shares whole "
                              "layers only (num_hidden_groups / inner_group_num), not attention or FFN alone. Save it "
                              "without require_hf to keep it loadable by litebert.")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    bare = not _has_albert_prefix(model)
    state = {_prefixed(k, bare): v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    tensors = keymap.to_hf(state, config) if config.hf_compatible else state
    if bare:  # HF's AlbertModel checkpoints carry no base-model prefix
        tensors = {k[len("albert."):]: v for k, v in tensors.items()}

    from safetensors.torch import save_file

    weights = path / (WEIGHTS_NAME if config.hf_compatible else NATIVE_WEIGHTS)
    atomic_write(weights, lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))
    stale = path / (NATIVE_WEIGHTS if config.hf_compatible else WEIGHTS_NAME)
    stale.unlink(missing_ok=True)  # a previous save of another kind would contradict the new config
    hf = config.to_hf_dict()
    hf["architectures"] = [type(model).HF_ARCHITECTURE or "AlbertModel"]
    hf["litebert_version"] = __version__
    if not config.hf_compatible:
        hf["model_type"] = NATIVE_MODEL_TYPE
    write_json(path / CONFIG_NAME, hf, sort_keys=True)


# ------------------------------------------------------------------------------------------------ loading
def load_config(path: str | os.PathLike, **overrides) -> AlbertConfig:
    """The config of a model folder (HF ``config.json`` or our own field names); ``overrides`` replace fields."""
    path = Path(path)
    file = path / CONFIG_NAME if path.is_dir() else path
    if not file.is_file():
        raise CheckpointNotFoundError(f"no {CONFIG_NAME} in {path}" if path.is_dir() else f"not found: {path}")
    data = read_json(file, ConfigError)
    if data.get("model_type") == NATIVE_MODEL_TYPE:
        data["model_type"] = "albert"
    hf = "model_type" in data or "architectures" in data
    config = AlbertConfig.from_hf_dict(data, source=str(file)) if hf else AlbertConfig.from_dict(data, source=str(file))
    if overrides:
        if ("num_labels" in overrides and "id2label" not in overrides and config.id2label is not None
                and len(config.id2label) != overrides["num_labels"]):
            overrides = {**overrides, "id2label": None}  # a new label set: the folder's label names no longer apply
        try:
            config = dataclasses.replace(config, **overrides)
        except TypeError as e:
            raise ConfigError(f"bad config override: {e}") from None
    return config


def load_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """All tensors of a model folder (or of one weights file), on CPU, with clear errors for corrupt files."""
    path = Path(path)
    if not path.exists():
        raise CheckpointNotFoundError(f"not found: {path}")
    if path.is_file():
        return _read_file(path)
    for name in (WEIGHTS_NAME, NATIVE_WEIGHTS):
        if (path / name).is_file():
            return _read_file(path / name)
    if (path / SHARDED_INDEX).is_file():
        index = path / SHARDED_INDEX
        weight_map = read_json(index, CheckpointError).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError(f"{index}: not a valid safetensors index (no 'weight_map' of tensor -> file name)")
        # shards live in the folder itself: never read a file the index points to elsewhere
        shards = [file_in(path, shard, index, CheckpointError) for shard in sorted(set(weight_map.values()))]
        tensors: dict[str, torch.Tensor] = {}
        for shard in shards:
            if not shard.is_file():
                raise CheckpointError(f"{index} names shard {shard.name!r}, which is missing from {path}")
            tensors.update(_read_file(shard))
        return tensors
    if (path / LEGACY_WEIGHTS).is_file():
        return _read_file(path / LEGACY_WEIGHTS)
    raise CheckpointNotFoundError(f"no weights in {path}: looked for {WEIGHTS_NAME}, {SHARDED_INDEX}, "
                                  f"{LEGACY_WEIGHTS} and {NATIVE_WEIGHTS}")


def _read_file(file: Path) -> dict[str, torch.Tensor]:
    if file.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(file), device="cpu")
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{file}: not a readable safetensors file ({e}); it may be truncated or corrupt — "
                                  "save or copy it again") from None
    try:  # legacy PyTorch pickle: never unpickle arbitrary objects
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for corrupt or unsafe pickles
        raise CheckpointError(f"{file}: cannot be read as a PyTorch state dict with weights_only=True "
                              f"({_unpickling_reason(e)}); litebert reads safetensors, or pickles of plain tensors, "
                              f"and never runs code from a pickle. Have whoever made the file re-save its tensors with "
                              f"safetensors.torch.save_file as {WEIGHTS_NAME}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{file}: expected a flat dict of tensors")
    return state


def _unpickling_reason(e: Exception) -> str:
    """Why torch.load(weights_only=True) refused a file, in a line: its advice to load with weights_only=False,
    which spans several lines and is not litebert's to give, left out."""
    text = str(e)
    found = re.search(r"WeightsUnpickler error: ([^\n]*?)(?:\.\s|\.?$)", text, re.MULTILINE)
    return found.group(1) if found else first_line(e, 200) or type(e).__name__


def load_hf_state_dict(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
    """Load HF-named (or litebert-named) ``tensors`` into ``model``; return ``(missing, unexpected)`` in our names.

    A shape mismatch is an error naming the key and both shapes. Missing or unexpected keys are returned for the
    caller to judge (a new task head is expected to be missing; an encoder block is not).
    """
    config: AlbertConfig = model.config
    bare = not _has_albert_prefix(model)
    # Files from HF's bare AlbertModel lack the "albert." prefix; give every encoder key one.
    prefixed = {(k if k.startswith("albert.") or k.startswith(HEAD_PREFIXES) else "albert." + k): v
                for k, v in tensors.items()}
    ours = keymap.from_hf(prefixed, config)
    target = {_prefixed(k, bare): v for k, v in model.state_dict().items()}
    for key, tensor in ours.items():
        if key in target and tuple(tensor.shape) != tuple(target[key].shape):
            raise CheckpointError(f"{key}: the checkpoint has shape {tuple(tensor.shape)} but the model expects "
                                  f"{tuple(target[key].shape)}; the checkpoint was made with a different config")
    loadable = {(k[len("albert."):] if bare else k): v for k, v in ours.items() if k in target}
    model.load_state_dict(loadable, strict=False)
    missing = sorted(set(target) - set(ours))
    unexpected = sorted(set(ours) - set(target))
    return missing, unexpected


def from_pretrained(cls, path: str | os.PathLike, *, strict: bool = False, **config_overrides):
    """Build ``cls`` from the config in ``path`` (a folder, or a hub id: `litebert.hub.local`) and load its weights
    (see `PretrainedMixin.from_pretrained`)."""
    from litebert import hub

    path = hub.local(path, "model")
    if not path.exists():
        raise CheckpointNotFoundError(f"model folder not found: {path}")
    config = load_config(path, **config_overrides)
    tensors = load_weights(path)
    _check_shapes(config, tensors, path)
    try:
        model = cls(config)
    except (MemoryError, RuntimeError) as e:  # a config asking for more memory than the machine has
        raise CheckpointError(f"{path}: cannot build the model its config.json describes "
                              f"({str(e).splitlines()[0]})") from None
    missing, unexpected = load_hf_state_dict(model, tensors)
    if strict and (missing or unexpected):
        raise CheckpointError(f"{path}: strict load failed; missing keys: {_short(missing)}; "
                              f"unexpected keys: {_short(unexpected)}")
    encoder_missing = [k for k in missing if k.startswith("albert.")]
    if encoder_missing:
        warnings.warn(f"{path}: encoder weights missing from the checkpoint, left randomly initialised: "
                      f"{_short(encoder_missing)}", stacklevel=3)
    head_missing = [k for k in missing if not k.startswith("albert.")]
    if head_missing:
        log.info("%s: newly initialised (not in the checkpoint): %s", path, _short(head_missing))
    if unexpected:
        log.info("%s: checkpoint weights not used by %s: %s", path, cls.__name__, _short(unexpected))
    # what HF's from_pretrained(output_loading_info=True) returns: the weights left at their initialisation (a LoRA
    # adapter saves the pooler among them with itself, `litebert.io.adapters.add_lora`, or it would not reproduce)
    model.loading_info = {"missing_keys": list(missing), "unexpected_keys": list(unexpected)}
    model.eval()
    return model


def _check_shapes(config: AlbertConfig, tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Refuse a config.json that contradicts its weights' shapes before building anything from it (an edited
    vocab_size of 2**40 would otherwise try to allocate terabytes)."""
    expected = {"embeddings.word_embeddings.weight": (config.vocab_size, config.embedding_size),
                "embeddings.position_embeddings.weight": (config.max_position_embeddings, config.embedding_size),
                "embeddings.token_type_embeddings.weight": (config.type_vocab_size, config.embedding_size)}
    from litebert.params import count_parameters

    # The depth of a shared stack is not in the weights, so it gets a generous bound of its own; the encoder the
    # config describes (without the pooler, which token-level checkpoints lack) is at most what the weights hold.
    steps = config.num_hidden_layers * config.inner_group_num
    held = sum(t.numel() for t in tensors.values())
    described = count_parameters(config) - config.hidden_size * (config.hidden_size + 1) if steps <= 10_000 else 0
    if steps > 10_000 or described > held:
        raise CheckpointError(f"{path}: config.json describes an encoder of {described:,} parameters and "
                              f"{config.num_hidden_layers * config.inner_group_num:,} depth steps, the weights hold "
                              f"{held:,} values; config.json does not belong to these weights")
    for key, tensor in tensors.items():
        for suffix, shape in expected.items():
            if key.endswith(suffix) and tuple(tensor.shape) != shape:
                raise CheckpointError(f"{path}: {key} has the shape {tuple(tensor.shape)} in the weights, config.json "
                                      f"gives it {tuple(shape)}; config.json does not belong to these weights")


def _has_albert_prefix(model: torch.nn.Module) -> bool:
    return hasattr(model, "albert")


def _prefixed(key: str, bare: bool) -> str:
    return "albert." + key if bare else key


def _short(keys: Iterable[str], n: int = 8) -> str:
    keys = list(keys)
    return ", ".join(keys[:n]) + (f" (+{len(keys) - n} more)" if len(keys) > n else "") if keys else "none"
