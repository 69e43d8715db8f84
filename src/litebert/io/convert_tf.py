"""Official TensorFlow ALBERT checkpoints (google-research/albert, TF-Hub modules) -> litebert / HF model folders.

Two declarative pieces and one function:

* `official_config` turns an official ``albert_config.json`` into an `AlbertConfig`. Its keys are HF's except
  ``hidden_act``: official ``"gelu"`` is the tanh approximation (`modeling.gelu`), HF's ``"gelu_new"``. The keys
  modeling.py never reads (``net_structure_type``, ``gap_size``, ``num_memory_blocks``, ``down_scale_factor``,
  ``layers_to_keep``) are accepted and ignored.
* `RULES` maps official variable names (as created by modeling.py's variable scopes, run_pretraining.py's
  ``cls/predictions`` and ``cls/seq_relationship``, classifier_utils.py's top-level ``output_weights``/``output_bias``
  and squad_utils.py's v1 ``cls/squad`` head) to HF parameter names. TF dense kernels are [in, out]; torch Linear
  weights are [out, in], hence the transposes. The ``module/`` prefix of TF-Hub exports is stripped first.
* `convert_tf_checkpoint` reads the checkpoint (`litebert.io.tf_checkpoint`, no TensorFlow), builds the model, loads
  it and writes the folder. Every variable is either mapped, skipped as optimizer state (``adam_m``, ``adam_v``,
  ``global_step``, ...) or listed as unused; every model parameter is either filled or listed as missing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from litebert import folders
from litebert.card import CardInfo
from litebert.config import AlbertConfig
from litebert.errors import CheckpointError, ConfigError, TokenizerError
from litebert.files import atomic_write, read_json
from litebert.io.tf_checkpoint import TFCheckpoint

# Keys of the official config that modeling.py never reads.
OFFICIAL_ONLY_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor", "layers_to_keep")
# Official activation names -> HF/litebert names (modeling.get_activation).
OFFICIAL_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}

_B = r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/"
_HB = "albert.encoder.albert_layer_groups.{0}.albert_layers.{1}."
# (official name regex, HF name template filled with the regex groups, transpose a [in, out] kernel)
RULES: list[tuple[re.Pattern, str, bool]] = [(re.compile(f"^{p}$"), t, tr) for p, t, tr in [
    (r"bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", False),
    (r"bert/embeddings/position_embeddings", "albert.embeddings.position_embeddings.weight", False),
    (r"bert/embeddings/token_type_embeddings", "albert.embeddings.token_type_embeddings.weight", False),
    (r"bert/embeddings/LayerNorm/gamma", "albert.embeddings.LayerNorm.weight", False),
    (r"bert/embeddings/LayerNorm/beta", "albert.embeddings.LayerNorm.bias", False),
    (r"bert/encoder/embedding_hidden_mapping_in/kernel", "albert.encoder.embedding_hidden_mapping_in.weight", True),
    (r"bert/encoder/embedding_hidden_mapping_in/bias", "albert.encoder.embedding_hidden_mapping_in.bias", False),
    (_B + r"attention_1/self/(query|key|value)/kernel", _HB + "attention.{2}.weight", True),
    (_B + r"attention_1/self/(query|key|value)/bias", _HB + "attention.{2}.bias", False),
    (_B + r"attention_1/output/dense/kernel", _HB + "attention.dense.weight", True),
    (_B + r"attention_1/output/dense/bias", _HB + "attention.dense.bias", False),
    # layer_norm() after attention is the block's first LayerNorm scope, the one after the FFN is "LayerNorm_1".
    (_B + r"LayerNorm/gamma", _HB + "attention.LayerNorm.weight", False),
    (_B + r"LayerNorm/beta", _HB + "attention.LayerNorm.bias", False),
    (_B + r"ffn_1/intermediate/dense/kernel", _HB + "ffn.weight", True),
    (_B + r"ffn_1/intermediate/dense/bias", _HB + "ffn.bias", False),
    (_B + r"ffn_1/intermediate/output/dense/kernel", _HB + "ffn_output.weight", True),
    (_B + r"ffn_1/intermediate/output/dense/bias", _HB + "ffn_output.bias", False),
    (_B + r"LayerNorm_1/gamma", _HB + "full_layer_layer_norm.weight", False),
    (_B + r"LayerNorm_1/beta", _HB + "full_layer_layer_norm.bias", False),
    (r"bert/pooler/dense/kernel", "albert.pooler.weight", True),
    (r"bert/pooler/dense/bias", "albert.pooler.bias", False),
    (r"cls/predictions/transform/dense/kernel", "predictions.dense.weight", True),
    (r"cls/predictions/transform/dense/bias", "predictions.dense.bias", False),
    (r"cls/predictions/transform/LayerNorm/gamma", "predictions.LayerNorm.weight", False),
    (r"cls/predictions/transform/LayerNorm/beta", "predictions.LayerNorm.bias", False),
    (r"cls/predictions/output_bias", "predictions.bias", False),  # the decoder itself is tied to word_embeddings
    # [2, H] / [num_labels, H] matrices used as matmul(x, W, transpose_b=True): already torch's [out, in].
    (r"cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", False),
    (r"cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", False),
    (r"output_weights", "classifier.weight", False),
    (r"output_bias", "classifier.bias", False),
    (r"cls/squad/output_weights", "qa_outputs.weight", False),
    (r"cls/squad/output_bias", "qa_outputs.bias", False),
]]

# Optimizer slots and bookkeeping: skipped without comment (AdamW/LAMB slots are "<var>/adam_m", "<var>/adam_v").
OPTIMIZER_STATE = re.compile(r"(^|/)(global_step|adam_m|adam_v|lamb_m|lamb_v|Adam|Adam_1|Momentum|"
                             r"beta1_power|beta2_power|ExponentialMovingAverage)$")

# The heads an official checkpoint can hold, by their names in `litebert.heads.HEAD_NAMES`.
HEADS = ("encoder", "pretraining", "masked-lm", "sequence-classification", "question-answering")


def map_variable(name: str) -> tuple[str, bool] | None:
    """Official variable name -> (HF parameter name, transpose?), or None if it is not a model weight we know."""
    name = name[len("module/"):] if name.startswith("module/") else name
    for pattern, template, transpose in RULES:
        m = pattern.match(name)
        if m:
            return template.format(*m.groups()), transpose
    return None


def official_config(data: dict | str | os.PathLike) -> AlbertConfig:
    """An official ``albert_config.json`` (path or dict) as an `AlbertConfig`. As in modeling.py, the E -> H
    projection (``embedding_hidden_mapping_in``) exists exactly when embedding_size != hidden_size."""
    source = "albert_config.json"
    if not isinstance(data, dict):
        source = str(data)
        data = read_json(data, ConfigError)
    hf = {k: v for k, v in data.items() if k not in OFFICIAL_ONLY_KEYS}
    act = hf.get("hidden_act", "gelu")
    if act not in OFFICIAL_ACTIVATIONS and act not in OFFICIAL_ACTIVATIONS.values():
        raise ConfigError(f"{source}: hidden_act = {act!r} is not supported; official ALBERT uses 'gelu' (the tanh "
                          f"approximation) or 'relu'")
    hf["hidden_act"] = OFFICIAL_ACTIVATIONS.get(act, act)
    hf.setdefault("model_type", "albert")
    config = AlbertConfig.from_hf_dict(hf, source=source)
    projection = config.embedding_size != config.hidden_size
    if projection != config.has_embedding_projection:
        config = dataclasses.replace(config, embedding_projection=projection)
    return config


@dataclass
class Conversion:
    """What `convert_tf_checkpoint` did: the loaded model and a full account of every name."""

    model: torch.nn.Module
    head: str  # HF architecture name
    mapped: dict[str, str] = field(default_factory=dict)  # official name -> HF name
    skipped: list[str] = field(default_factory=list)  # optimizer state / global_step
    unused: list[str] = field(default_factory=list)  # variables neither mapped into the model nor skipped
    missing: list[str] = field(default_factory=list)  # model parameters the checkpoint did not fill
    extra: list[str] = field(default_factory=list)  # HF names written to the folder beside the head's own weights
    extra_tensors: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)  # their values
    hub_url: Optional[str] = None  # the Hub repository the folder was uploaded to (``push_to_hub``)

    def summary(self) -> str:
        lines = [f"{self.head}: {len(self.mapped)} variables mapped, {len(self.skipped)} optimizer/bookkeeping "
                 f"variables skipped (adam_m, adam_v, global_step, ...)"]
        if self.extra:
            lines.append(f"kept in the folder though {self.head} does not use them: {', '.join(self.extra)}")
        lines.append("unused variables: " + (", ".join(self.unused) if self.unused else "none"))
        lines.append("missing parameters (newly initialised): " + (", ".join(self.missing) if self.missing else "none"))
        return "\n".join(lines)


def _short(names: list[str], n: int = 4) -> str:
    return (", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")) if names else "none"


def _auto_head(hf_names: set[str]) -> str:
    if "classifier.weight" in hf_names:
        return "AlbertForSequenceClassification"
    if "qa_outputs.weight" in hf_names:
        return "AlbertForQuestionAnswering"
    if "sop_classifier.classifier.weight" in hf_names:
        return "AlbertForPreTraining"
    if "predictions.bias" in hf_names:
        return "AlbertForMaskedLM"
    return "AlbertModel"


def _expected_shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """The model's parameters under HF names ("albert."-prefixed), with their shapes."""
    from litebert.io import keymap

    bare = not hasattr(model, "albert")
    state = {("albert." + k if bare else k): v for k, v in model.state_dict().items()}
    shapes = {k: tuple(v.shape) for k, v in keymap.to_hf(state, model.config).items()}
    if not model.config.has_embedding_projection:  # to_hf adds an identity projection for HF; it is no parameter
        for key in keymap.PROJECTION:
            shapes.pop(key, None)
    return shapes


def _sort_variables(ckpt: TFCheckpoint) -> tuple[dict[str, tuple[str, bool]], list[str], list[str]]:
    """Split the checkpoint's variables into mapped (name -> (HF name, transpose)), optimizer state and unknown."""
    conv_names: dict[str, tuple[str, bool]] = {}
    skipped, unknown = [], []
    for name in ckpt.names():
        target = map_variable(name)
        if target is not None:
            conv_names[name] = target
        elif OPTIMIZER_STATE.search(name):
            skipped.append(name)
        else:
            unknown.append(name)
    if not conv_names:
        raise CheckpointError(f"checkpoint {ckpt.prefix}: none of its {len(ckpt)} variables has an official ALBERT "
                              f"name (e.g. bert/embeddings/word_embeddings); first names: "
                              f"{', '.join(ckpt.names()[:5])}")
    for name in conv_names:
        ckpt.check_supported(name)
    return conv_names, skipped, unknown


def _fit_projection(cfg: AlbertConfig, hf_names: dict[str, str], ckpt: TFCheckpoint) -> AlbertConfig:
    """The config with the E -> H projection the checkpoint has; a projection the config needs but lacks is an error."""
    if "albert.encoder.embedding_hidden_mapping_in.weight" in hf_names:
        if not cfg.has_embedding_projection:  # E == H with a projection anyway: keep it
            cfg = dataclasses.replace(cfg, embedding_projection=True)
    elif cfg.has_embedding_projection:
        raise CheckpointError(
            f"checkpoint {ckpt.prefix} has no bert/encoder/embedding_hidden_mapping_in, which modeling.py creates "
            f"whenever embedding_size != hidden_size, but the config gives embedding_size = {cfg.embedding_size} and "
            f"hidden_size = {cfg.hidden_size}; the config does not match this checkpoint")
    return cfg


def _choose_head(head: str, hf_names: dict[str, str], ckpt: TFCheckpoint,
                 cfg: AlbertConfig) -> tuple[str, AlbertConfig]:
    """The HF architecture for ``head`` and the config, its num_labels taken from a classifier in the checkpoint."""
    from litebert.heads import HEAD_NAMES

    if head != "auto" and head not in HEADS:
        raise ConfigError(f"unknown head {head!r}; choose auto or one of {', '.join(HEADS)}")
    arch = _auto_head(set(hf_names)) if head == "auto" else HEAD_NAMES[head].HF_ARCHITECTURE
    if arch == "AlbertForSequenceClassification" and "classifier.weight" in hf_names:
        name = hf_names["classifier.weight"]
        shape = ckpt.entry(name).shape
        # The model is sized by num_labels before any tensor is read, so the row count is checked here: a matrix
        # of [num_labels, hidden_size] has its bytes on disk (TFCheckpoint checks size against shape), whereas a
        # crafted [2**40, 0] holds no bytes at all and would build a head of 2**40 rows.
        if len(shape) != 2 or shape[1] != cfg.hidden_size or shape[0] < 1:
            raise CheckpointError(f"{name}: the checkpoint has shape {list(shape)} but a classifier over the config's "
                                  f"hidden_size = {cfg.hidden_size} is [num_labels, {cfg.hidden_size}]; the config "
                                  "does not match this checkpoint")
        num_labels = shape[0]
        cfg = dataclasses.replace(cfg, num_labels=num_labels,
                                  problem_type="regression" if num_labels == 1 else cfg.problem_type)
    return arch, cfg


def _read_tensor(ckpt: TFCheckpoint, tf_name: str, hf_name: str, transpose: bool,
                 want: tuple[int, ...] | None, verify: bool) -> torch.Tensor:
    """One variable as a float32 torch tensor in torch's layout, its shape checked against the model's ``want``."""
    entry = ckpt.entry(tf_name)
    if want is not None:
        want_tf = tuple(reversed(want)) if transpose else want
        if tuple(entry.shape) != want_tf:
            raise CheckpointError(
                f"{tf_name}: the checkpoint has shape {list(entry.shape)} but the config gives "
                f"{list(want_tf)} (for {hf_name}); the config does not match this checkpoint -- check "
                "vocab_size, embedding_size, hidden_size, intermediate_size, max_position_embeddings and "
                "type_vocab_size in the config")
    array = ckpt.read(tf_name, verify=verify)
    if not np.issubdtype(array.dtype, np.floating):
        raise CheckpointError(f"{tf_name}: expected a float tensor, the checkpoint stores {entry.dtype}")
    array = array.astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(array.T if transpose else array))


def _read_tensors(ckpt: TFCheckpoint, conv_names: dict[str, tuple[str, bool]], expected: dict[str, tuple[int, ...]],
                  verify: bool, progress: bool) -> dict[str, torch.Tensor]:
    """Every mapped variable as a tensor under its HF name, read in name order (with a progress bar if asked)."""
    tensors: dict[str, torch.Tensor] = {}
    items = sorted(conv_names.items())
    if progress:
        from tqdm import tqdm

        items = tqdm(items, desc="reading TF variables", unit="var")
    for tf_name, (hf_name, transpose) in items:
        tensors[hf_name] = _read_tensor(ckpt, tf_name, hf_name, transpose, expected.get(hf_name), verify)
    return tensors


def _check_layer_structure(ckpt: TFCheckpoint, cfg: AlbertConfig, hf_names: dict[str, str], unused_hf: list[str],
                           extra: list[str], missing: list[str]) -> None:
    """Raise when encoder variables have no place in the model or encoder parameters are not in the checkpoint."""
    bad_encoder = [hf_names[k] for k in unused_hf if k.startswith("albert.") and k not in extra]
    missing_encoder = [k for k in missing if k.startswith("albert.")]
    if not (bad_encoder or missing_encoder):
        return
    blocks = {tuple(map(int, m.groups())) for m in map(re.compile(_B).search, ckpt.names()) if m}
    groups = 1 + max((g for g, _ in blocks), default=-1)
    inner = 1 + max((i for _, i in blocks), default=-1)
    raise CheckpointError(
        f"checkpoint {ckpt.prefix} does not match the config's layer structure: the config gives "
        f"num_hidden_groups = {cfg.num_hidden_groups} and inner_group_num = {cfg.inner_group_num}, the checkpoint "
        f"holds {groups} group(s) of {inner} inner group(s). Encoder variables without a place in the model: "
        f"{_short(bad_encoder)}; model parameters not in the checkpoint: {_short(missing_encoder)}")


def convert_tf_checkpoint(checkpoint: str | os.PathLike, config: str | os.PathLike | dict,
                          out: str | os.PathLike | None = None, *, head: str = "auto",
                          spm: str | os.PathLike | None = None, verify: bool = True, overwrite: bool = False,
                          progress: bool = False, card: Optional[CardInfo] = None,
                          push_to_hub: Optional[str] = None, hub_private: bool = True) -> Conversion:
    """Convert an official TF ALBERT checkpoint into a litebert model (and an HF folder at ``out`` if given; a folder
    already holding a converted model is replaced only with ``overwrite``).

    ``head``: "auto" (from the variables present: classifier > SQuAD > pretraining (MLM+SOP) > MLM > bare encoder)
    or one of `HEADS`. ``spm``: a SentencePiece model copied into the folder as the tokenizer. ``verify``: check the
    CRC32C of every tensor read. ``card``: what the folder's model card (README.md) says that the checkpoint cannot
    (license, data set ids). ``push_to_hub``: a Hub repository (ORG/NAME) to upload ``out`` to (`litebert.push`),
    created private unless ``hub_private`` is False.
    """
    from litebert.heads import HEADS as HEAD_CLASSES
    from litebert.push import Publishing

    publish = Publishing(card or CardInfo(), push_to_hub, hub_private)
    if push_to_hub is not None and out is None:
        raise ConfigError("{push_to_hub} uploads the converted folder: give {out:flag} too", push_to_hub=push_to_hub,
                          out=None)
    publish.check()  # the repository id, huggingface_hub and a token: before anything is read or written
    plan = None
    if out is not None:  # checked before anything is read or written
        plan = folders.plan(out, folders.MODEL, overwrite=overwrite,
                            inputs={"checkpoint": checkpoint, "config": None if isinstance(config, dict) else config,
                                    "spm": spm})
    tokenizer = _load_spm(spm)  # a tokenizer that does not load is refused before the checkpoint is read
    ckpt = TFCheckpoint(checkpoint)
    conv_names, skipped, unknown = _sort_variables(ckpt)
    hf_names = {hf: tf for tf, (hf, _) in conv_names.items()}
    cfg = _fit_projection(official_config(config), hf_names, ckpt)
    arch, cfg = _choose_head(head, hf_names, ckpt, cfg)
    _check_vocab(tokenizer, spm, cfg.vocab_size)  # and one of another size, before a tensor is read
    from litebert.params import available_memory, check_memory

    check_memory(cfg, 1, 1, available_memory(None), training=False)  # a crafted config: before the model exists
    model = HEAD_CLASSES[arch](cfg)
    expected = _expected_shapes(model)
    tensors = _read_tensors(ckpt, conv_names, expected, verify, progress)

    from litebert.io.hf_folder import load_hf_state_dict

    load_hf_state_dict(model, tensors)  # shapes were checked above, with the official names
    missing = sorted(set(expected) - set(tensors))
    unused_hf = sorted(set(tensors) - set(expected))
    # The pooler of an MLM-only or SQuAD checkpoint: HF keeps it in the folder (e.g. albert-base-v2), so do we.
    extra = [k for k in unused_hf if k.startswith("albert.pooler.") and hasattr(model, "albert")]
    unused = sorted(unknown + [hf_names[k] for k in unused_hf if k not in extra])
    _check_layer_structure(ckpt, cfg, hf_names, unused_hf, extra, missing)
    model.eval()
    result = Conversion(model, arch, {tf: hf for tf, (hf, _) in conv_names.items() if hf in expected or hf in extra},
                        skipped, unused, missing, extra, {k: tensors[k] for k in extra})
    if plan is not None:
        spm_tokenizer(result, spm)  # checked before anything is written
        from litebert.card import write_card
        from litebert.card_builders import converted_card

        with folders.begin(plan) as writer:
            write_folder(result, out, result.extra_tensors, spm=spm)
            write_card(out, lambda: converted_card(Path(out), publish.card, os.fspath(checkpoint), result, push_to_hub),
                       lambda message: print(message, file=sys.stderr, flush=True))
            writer.finish()
        result.hub_url = publish.push(out)
    return result


def spm_tokenizer(result: Conversion, spm: str | os.PathLike | None):
    """The tokenizer of ``spm`` (None without one), checked against the converted model's vocabulary."""
    return _check_vocab(_load_spm(spm), spm, result.model.config.vocab_size)


def _load_spm(spm: str | os.PathLike | None):
    """The tokenizer of ``spm``, or None without one."""
    if spm is None:
        return None
    from litebert.tokenizer import load_tokenizer

    return load_tokenizer(spm)


def _check_vocab(tokenizer, spm, vocab_size: int):
    """``tokenizer`` (of ``spm``; None: none), refused unless it has the config's ``vocab_size`` pieces."""
    if tokenizer is not None and tokenizer.vocab_size != vocab_size:
        raise TokenizerError(f"{spm}: the tokenizer has {tokenizer.vocab_size} pieces but the config's "
                             f"vocab_size is {vocab_size}; pass the model the checkpoint was trained with")
    return tokenizer


def write_folder(result: Conversion, out: str | os.PathLike, extra: dict[str, torch.Tensor], *,
                 spm: str | os.PathLike | None = None) -> Path:
    """``model.save_pretrained(out)``, plus the extra tensors, plus the tokenizer when ``spm`` is given."""
    out = Path(out)
    tokenizer = spm_tokenizer(result, spm)  # checked before anything is written
    result.model.save_pretrained(out)
    if extra:
        from safetensors.torch import load_file, save_file

        weights = out / "model.safetensors"
        tensors = load_file(str(weights))
        tensors.update({k: v.contiguous() for k, v in extra.items()})
        atomic_write(weights, lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    return out
