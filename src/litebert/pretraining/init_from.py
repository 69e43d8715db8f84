"""``litebert pretrain --init-from MODEL_DIR``: continued pretraining from an existing model folder.

The folder is any ALBERT model folder litebert reads: a pretraining run's ``model/`` (or the run folder itself), a
folder saved by ``save_pretrained`` (litebert's or HF transformers' ``AlbertForPreTraining``/``AlbertForMaskedLM``/
``AlbertModel``), or one written by ``litebert convert`` from the official TF checkpoints. The run takes from it:

- the model config (``--preset``/``--model-config`` are not needed; given, they must agree with it);
- the weights: the encoder must be complete; heads the folder lacks (the SOP head of a masked-LM folder, both heads
  and the pooler of a bare ``AlbertModel``) keep their initialisation from ``--seed``, as a new run's would;
- the tokenizer, saved beside the final model. The token store must use the same vocabulary (same size and the same
  piece at every id), or the model's embeddings would be read for other pieces than they were trained for.

The optimizer and the learning-rate schedule start fresh (warmup again). The run records the folder's path and a
sha256 of its weights (`weights_sha256`) in its checkpoints, so ``--resume`` checks it starts from the same weights.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from litebert.config import AlbertConfig
from litebert.errors import CheckpointError, ConfigError
from litebert.files import read_json
from litebert.folders import output_kind

# Configuration fields that belong to task heads, not to the encoder a pretraining run continues.
_HEAD_FIELDS = {"num_labels", "id2label", "problem_type"}
# Parts of AlbertForPreTraining a model folder may lack (key prefix -> what the one-line report calls it).
_OPTIONAL = {"predictions.": "MLM head", "sop_classifier.": "SOP head", "albert.pooler.": "pooler"}


@dataclass
class InitModel:
    folder: Path
    config: AlbertConfig
    tensors: dict[str, torch.Tensor]
    sha256: str                  # of the weights, `weights_sha256`
    architecture: str            # config.json "architectures"[0], for messages
    tokenizer: object | None     # the folder's tokenizer, when it has a spiece.model or vocab.txt (or a WordPiece
    #                              tokenizer.json)
    pieces: list[str] | None     # the folder's vocabulary (its tokenizer's, or tokenizer.json's), None when it has none

    def identity(self) -> dict:
        """What the run's checkpoints record of it (`litebert.engine.checkpoint.check_compatible`)."""
        return {"path": str(self.folder.resolve()), "sha256": self.sha256}


def weights_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in name order: the same weights give the same hash
    whatever file format holds them."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def model_folder(path: Path) -> Path:
    """The model folder ``path`` names (``init_from``): the folder itself, or a pretraining run folder's model/."""
    from litebert import hub

    folder = hub.local(path, "model")  # a hub id: its folder in the Hugging Face cache
    if not folder.exists():
        raise CheckpointError("{init_from}: no such model folder", init_from=folder)
    if not folder.is_dir():
        raise CheckpointError("{init_from} is a file; give the model folder (config.json + weights)", init_from=folder)
    if output_kind(folder) == "pretraining-run":
        if not (folder / "model" / "config.json").is_file():
            raise CheckpointError("{init_from} is a pretraining run without a final model yet; finish it (resume "
                                  "it) or give a model folder", init_from=folder)
        folder = folder / "model"
    if not (folder / "config.json").is_file():
        raise CheckpointError("{init_from}: no config.json; give a model folder (a pretraining run's model/, a "
                              "save_pretrained folder, or one written by `litebert convert`)", init_from=folder)
    return folder


@dataclass(frozen=True)
class InitConfig:
    """The config of the model folder ``init_from`` names, read before its weights are (`read_init_config`)."""

    folder: Path
    config: AlbertConfig


def read_init_config(path: Path) -> InitConfig:
    """The folder ``path`` names (``init_from``; or a pretraining run folder's model) and its config.json alone: what
    the run's shape is checked against before any weights or data are read and hashed."""
    from litebert.io.hf_folder import load_config

    folder = model_folder(path)
    return InitConfig(folder, load_config(folder))


def read_init_model(path: Path) -> InitModel:
    """Config, weights, hash and tokenizer of the model folder ``path`` (``init_from``; or of a pretraining run
    folder's model)."""
    from litebert.io.hf_folder import _check_shapes, load_config, load_weights

    folder = model_folder(path)
    config = load_config(folder)
    tensors = load_weights(folder)
    _check_shapes(config, tensors, folder)
    try:
        architecture = str((read_json(folder / "config.json", ConfigError).get("architectures") or ["?"])[0])
    except (ConfigError, TypeError, IndexError, KeyError):
        architecture = "?"
    tokenizer, pieces = _vocabulary(folder)
    return InitModel(folder, config, tensors, weights_sha256(tensors), architecture, tokenizer, pieces)


def _vocabulary(folder: Path) -> tuple[object | None, list[str] | None]:
    """The folder's tokenizer (when it has a spiece.model, a vocab.txt or a WordPiece tokenizer.json) and its pieces
    by id (from it, else from the Unigram vocabulary of a tokenizer.json, as transformers 5.x saves it), or
    (None, None)."""
    from litebert.tokenizer import MODEL_NAME, VOCAB_NAME, load_tokenizer

    file = folder / "tokenizer.json"
    if not (folder / MODEL_NAME).is_file() and not (folder / VOCAB_NAME).is_file():
        if not file.is_file():
            return None, None
        try:
            model = read_json(file, ConfigError).get("model") or {}
            if model.get("type") == "Unigram" and isinstance(model.get("vocab"), list):
                return None, [str(entry[0]) for entry in model["vocab"]]
        except (TypeError, IndexError, AttributeError, KeyError) as e:
            raise ConfigError("{init_from}: " + f"{file.name} is not a readable tokenizer.json ({e})",
                              init_from=folder) from None
        if model.get("type") != "WordPiece":
            return None, None
    tok = load_tokenizer(folder)
    return tok, tok.convert_ids_to_tokens(list(range(tok.vocab_size)))


def check_model_agrees(init: InitConfig | InitModel, given: AlbertConfig | None, spec=None) -> None:
    """A model given next to ``init_from`` (``spec``: as the caller named it, a preset or a config file) must
    describe the same encoder (the vocabulary size is the store's to decide, and is checked against it separately)."""
    if given is None:
        return
    skip = _HEAD_FIELDS | {"vocab_size"}
    mine, theirs = given.to_dict(), init.config.to_dict()
    wrong = [k for k in mine if k not in skip and mine[k] != theirs.get(k)]
    if wrong:
        k = wrong[0]
        more = f" (and {', '.join(wrong[1:])})" if len(wrong) > 1 else ""
        raise ConfigError("{model} contradicts {init_from}: " + f"{k} is {mine[k]!r} there, {theirs.get(k)!r} in "
                          f"the model{more}; " + "leave {model:flag} out: the model's own config is used",
                          model=spec if isinstance(spec, (str, os.PathLike)) else "the given config",
                          init_from=init.folder)


def check_vocabulary(init: InitModel, store):
    """Refuse a token store (``data``) whose vocabulary is not the model's; return the tokenizer to save beside the
    final model (the folder's own, else the store's; None if neither has one)."""
    facts = store.facts
    names = {"init_from": init.folder, "data": store.path}
    if init.config.vocab_size != facts.vocab_size:
        raise ConfigError("{init_from} has a vocabulary of " + f"{init.config.vocab_size} pieces, " + "{data} was "
                          f"prepared with {facts.vocab_size}: token ids would mean different things; prepare the "
                          f"corpus with the model's tokenizer (`litebert data prepare --tokenizer {init.folder}`)",
                          **names)
    if init.tokenizer is not None and init.tokenizer.fingerprint() == facts.fingerprint:
        return init.tokenizer  # the very vocabulary the store was prepared with
    store_tok = store.tokenizer()
    if init.pieces is None:
        return store_tok  # nothing to compare beyond the size; the store's tokenizer goes with the model
    if store_tok is None:
        raise ConfigError("{init_from}: its tokenizer is not the one {data} was prepared with (another "
                          "vocabulary), and the store holds no tokenizer to compare pieces with; prepare the corpus "
                          "with the model's tokenizer", **names)
    theirs = store_tok.convert_ids_to_tokens(list(range(store_tok.vocab_size)))
    if len(init.pieces) != len(theirs):
        raise ConfigError("{init_from}: its tokenizer has " + f"{len(init.pieces)} pieces, the one " + "{data} was "
                          f"prepared with has {len(theirs)}: token ids would mean different things; prepare the "
                          f"corpus with the model's tokenizer", **names)
    differ = [i for i, (a, b) in enumerate(zip(init.pieces, theirs)) if a != b]
    if differ:
        i = differ[0]
        raise ConfigError("{init_from}: its tokenizer differs from the one {data} was prepared with at "
                          f"{len(differ)} of {len(theirs)} ids (id {i} is {init.pieces[i]!r} for the model, "
                          f"{theirs[i]!r} in the store): token ids would mean different things; prepare the corpus "
                          f"with the model's tokenizer (`litebert data prepare --tokenizer {init.folder}`)", **names)
    return init.tokenizer or store_tok


def load_init_weights(model: torch.nn.Module, init: InitModel) -> str | None:
    """Copy the folder's weights into ``model`` (an ``AlbertForPreTraining`` initialised from the seed). Returns a
    one-line note of the parts the folder lacked (left as initialised) and of weights not used, or None."""
    from litebert.io.hf_folder import _short, load_hf_state_dict

    missing, unexpected = load_hf_state_dict(model, init.tensors)
    absent = [k for k in missing if not k.startswith(tuple(_OPTIONAL))]
    if absent:
        raise CheckpointError("{init_from}: encoder weights are missing from the folder " + f"({_short(absent, 4)}); "
                              "it is not a complete ALBERT model", init_from=init.folder)
    parts = [name for prefix, name in _OPTIONAL.items() if any(k.startswith(prefix) for k in missing)]
    notes = []
    if parts:
        notes.append(f"no {' / '.join(parts)} in it ({init.architecture}): initialised from the seed")
    if unexpected:
        notes.append(f"not used: {_short(unexpected, 4)}")
    return f"{init.folder}: {'; '.join(notes)}" if notes else None
