"""LoRA adapters (peft) that travel: one trained on a litebert model loads on HF transformers' ALBERT with
``peft.PeftModel.from_pretrained``, and one trained on HF's loads on litebert's model.

peft names an adapter's tensors after the modules it adapts, so the same adapter is called

    litebert: base_model.model.albert.encoder.attention_blocks.0.query.lora_A.weight
    HF:       base_model.model.albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.lora_A.weight

`save_adapter` writes HF's names and `load_adapter` reads them: each name is the adapted module's name mapped by the
model's key map (`litebert.io.keymap.name_to_hf`), then what peft hangs on the module. Shared blocks need nothing of
their own: litebert's unique block ``b`` is HF's ``albert_layer_groups.{g}.albert_layers.{i}``, one module run at
every depth step that uses it on both sides.

Inside a block the module names are HF's (``query key value dense`` in attention, ``ffn ffn_output`` in the
feed-forward), and so are the heads' (``classifier``, ``qa_outputs``, ``pooler``), so peft's
``target_modules=["query", "value"]`` picks the same modules on both models; names and regular expressions that
spell out a litebert path are written as the list of HF names of the modules they adapted. HF's
``embedding_hidden_mapping_in`` exists in litebert only when the embedding size differs from the hidden size, and the
paper's per-sub-block sharing modes have no HF form (a one-line error says so).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import reprlib
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from litebert import folders
from litebert.arguments import checked
from litebert.checks import AT_LEAST_1, POSITIVE, PROBABILITY
from litebert.config import AlbertConfig
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError, first_line
from litebert.extras import install_hint
from litebert.files import atomic_write, read_json, write_json
from litebert.io import keymap

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_PREFIX = "base_model.model."  # what peft puts before a module's name in an adapter file
_HEADS = ("classifier", "qa_outputs")  # task heads: trained in full beside the adapter (peft's modules_to_save)
_HF_MODULE = "transformers.models.albert.modeling_albert"


def _peft():
    try:
        import peft
    except ImportError:
        raise ConfigError(f"LoRA adapters need peft ({install_hint('lora', 'peft')})") from None
    return peft


# ------------------------------------------------------------------------------------------------ names
def _names(model: torch.nn.Module) -> tuple[AlbertConfig, bool]:
    """The model's config (one HF can express) and whether it is the bare encoder (no ``albert.`` prefix)."""
    config = getattr(model, "config", None)
    if not isinstance(config, AlbertConfig):
        raise ConfigError(f"{type(model).__name__} is not a litebert model (litebert.AlbertModel or one of the "
                          "AlbertFor* heads)")
    if not config.hf_compatible:
        raise CheckpointError(f"sharing={config.sharing!r} has no HF transformers equivalent (HF shares whole layers "
                              "only), so its adapters have no HF names")
    return config, not hasattr(model, "albert")


def to_hf_name(name: str, config: AlbertConfig, bare: bool) -> str:
    """A module or tensor name of a litebert model (relative to it) -> the HF model's."""
    hf = keymap.name_to_hf("albert." + name if bare else name, config)
    return hf[len("albert."):] if bare else hf


def from_hf_name(name: str, config: AlbertConfig, bare: bool) -> str:
    """An HF model's module or tensor name -> the litebert model's. A bare encoder's name (HF's AlbertModel has no
    ``albert.`` prefix) also fits a head model's encoder."""
    if not bare and not name.startswith("albert.") and not name.startswith(_HEADS + ("predictions.", "sop_")):
        name = "albert." + name
    ours = keymap.name_from_hf("albert." + name if bare else name, config)
    return ours[len("albert."):] if bare else ours


def _portable(names, pairs: list[tuple[str, str]]):
    """``target_modules`` / ``modules_to_save`` in the other model's names. ``pairs``: (name in this model, name in
    the other) of the modules they may pick. Plain module names (``query``) are the same on both; a dotted path (a
    suffix of module names, as peft matches it) and a regular expression (a string peft matches whole) become the
    list of the modules they pick, in the other model's names."""
    if names is None or names == "all-linear":
        return names
    if isinstance(names, str):
        return sorted({other for this, other in pairs if re.fullmatch(names, this)})
    out: set[str] = set()
    for n in names:
        out |= {n} if "." not in n else {other for this, other in pairs if this == n or this.endswith("." + n)}
    return sorted(out)


def _unsupported(cfg: Any, source: str) -> None:
    """Settings whose module patterns have no counterpart in the other model: refused, naming them."""
    for key in ("layers_to_transform", "layers_pattern"):
        if getattr(cfg, key, None) not in (None, [], ""):
            raise ConfigError(f"{source}: {key} = {getattr(cfg, key)!r} picks layers by HF's module layout; name the "
                              "modules in target_modules instead (query, key, value, dense, ffn, ffn_output)")
    for key in ("rank_pattern", "alpha_pattern"):
        dotted = [k for k in (getattr(cfg, key, None) or {}) if "." in k or not re.fullmatch(r"\w+", k)]
        if dotted:
            raise ConfigError(f"{source}: {key} keys {dotted} are module paths or patterns of one model; use plain "
                              "module names (query, value, ...)")
    if getattr(cfg, "peft_type", None) not in ("LORA", getattr(_peft().PeftType, "LORA", "LORA")):
        raise ConfigError(f"{source}: peft_type = {getattr(cfg, 'peft_type', None)!r}; only LoRA adapters are "
                          "mapped between litebert and HF")


def _fresh_pooler(model: torch.nn.Module) -> bool:
    """Whether ``model`` has a pooler that `from_pretrained` left at its random initialisation (the base checkpoint
    had none: an MLM-only model, ``add_pooling_layer=False``). Such a pooler must travel with the adapter: the base
    loaded elsewhere gets another random one (0.04 apart in logits on a real base)."""
    missing = (getattr(model, "loading_info", None) or {}).get("missing_keys", ())
    return getattr(getattr(model, "albert", model), "pooler", None) is not None and any(
        k.startswith(("pooler.", "albert.pooler.")) for k in missing)


def _adapted(model: torch.nn.Module, adapter_name: str) -> list[str]:
    """The names (relative to ``model``) of the modules that carry the adapter ``adapter_name``."""
    from peft.tuners.lora import LoraLayer

    return [n for n, m in model.named_modules() if isinstance(m, LoraLayer)
            and (adapter_name in m.lora_A or adapter_name in getattr(m, "lora_embedding_A", {}))]


# ------------------------------------------------------------------------------------------------ adding
@checked(r=AT_LEAST_1, alpha=POSITIVE, dropout=PROBABILITY)
def add_lora(model: torch.nn.Module, *, r: int = 8, alpha: float = 16.0, dropout: float = 0.0,
             targets: Sequence[str] = ("query", "value"), modules_to_save: Optional[Sequence[str]] = None):
    """``model`` (a litebert model) with LoRA adapters of rank ``r`` and scale ``alpha / r`` on the modules named
    ``targets``, as a ``peft.PeftModel``: only the adapters (and ``modules_to_save``, default the task head:
    ``classifier`` / ``qa_outputs``, and the pooler where the checkpoint the model was loaded from had none, so that
    the adapter carries it) train. Call it as the model; save with `save_adapter`."""
    peft = _peft()
    _names(model)
    leaves = {n for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))}
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in leaves)]
    if missing or not targets:
        known = sorted({n.rsplit(".", 1)[-1] for n in leaves})
        raise ConfigError("{targets}: " + f"no module named {', '.join(missing) or '(none given)'} in "
                          f"{type(model).__name__}; LoRA can adapt {', '.join(known)}", targets=",".join(targets))
    fresh = _fresh_pooler(model)
    if modules_to_save is None:
        modules_to_save = [h for h in _HEADS if hasattr(model, h)] + (["pooler"] if fresh else [])
    elif fresh and not any(m == "pooler" or m.endswith(".pooler") for m in modules_to_save):
        warnings.warn(f"{type(model).__name__}: the pooler was not in the checkpoint the model was loaded from (it is "
                      "randomly initialised) and modules_to_save does not name it, so the adapter will not reproduce "
                      "this model on the same base elsewhere (HF's model initialises its own pooler); add 'pooler' "
                      "to modules_to_save", stacklevel=3)
    config = peft.LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(targets),
                             modules_to_save=list(modules_to_save) or None)
    return peft.get_peft_model(model, config)


# ------------------------------------------------------------------------------------------------ saving
@checked
def save_adapter(model: torch.nn.Module, folder: str | os.PathLike, *, base_model_name_or_path: Optional[str] = None,
                 adapter_name: str = "default", overwrite: bool = False) -> Path:
    """Write the adapter of ``model`` (a ``peft.PeftModel`` around a litebert model) to ``folder`` as HF's peft
    writes it: ``adapter_config.json`` (HF's module names; ``base_model_name_or_path``, default the one peft
    recorded) and ``adapter_model.safetensors`` (HF's tensor names). ``PeftModel.from_pretrained`` on the HF model
    of the same base weights then computes what ``model`` computes; so does `load_adapter` on a litebert model.

    ``folder`` must be absent, empty, or hold an adapter written here (replaced only with ``overwrite``)."""
    document, tensors = _adapter_files(model, base_model_name_or_path, adapter_name)
    plan = folders.plan(folder, folders.ADAPTER, overwrite=overwrite)
    with folders.begin(plan) as writer:
        _write(plan.out, document, tensors)
        writer.finish()
    return plan.out


def is_adapted(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a ``peft.PeftModel`` (peft is not imported to find out)."""
    return any(c.__module__.startswith("peft.") and c.__name__ == "PeftModel" for c in type(model).__mro__)


def save_merged(model: torch.nn.Module, folder: Path, base_model_name_or_path: Optional[str]) -> torch.nn.Module:
    """For a fine-tuned model folder (whose writer owns ``folder``): its adapter into ``folder/adapter`` (HF names)
    and, returned, a copy of the model with the adapter merged into its weights, for ``save_pretrained``."""
    document, tensors = _adapter_files(model, base_model_name_or_path, "default")
    _write(folder / "adapter", document, tensors)
    return copy.deepcopy(model).merge_and_unload()


def _write(folder: Path, document: dict, tensors: dict) -> None:
    from safetensors.torch import save_file

    atomic_write(folder / ADAPTER_WEIGHTS, lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))
    write_json(folder / ADAPTER_CONFIG, document, sort_keys=True)


def _adapter_files(model: torch.nn.Module, base_model_name_or_path: Optional[str],
                   adapter_name: str) -> tuple[dict, dict]:
    """(adapter_config.json's document, adapter_model.safetensors's tensors) of ``model``'s adapter, in HF's names."""
    peft = _peft()
    if not isinstance(model, peft.PeftModel):
        raise ConfigError(f"save_adapter takes a peft.PeftModel (litebert.add_lora(model) or peft.get_peft_model), "
                          f"not a {type(model).__name__}")
    base = model.get_base_model()
    config, bare = _names(base)
    if adapter_name not in model.peft_config:
        raise ConfigError("{adapter_name}: " + f"the model has no such adapter (it has "
                          f"{', '.join(model.peft_config)})", adapter_name=adapter_name)
    cfg = copy.deepcopy(model.peft_config[adapter_name])
    _unsupported(cfg, type(model).__name__)
    adapted = [(n, to_hf_name(n, config, bare)) for n in _adapted(base, adapter_name)]
    modules = [(n, to_hf_name(n, config, bare)) for n, _ in base.named_modules() if n]
    cfg.target_modules = _portable(cfg.target_modules, adapted)
    cfg.modules_to_save = _portable(cfg.modules_to_save, modules)
    cfg.exclude_modules = _portable(getattr(cfg, "exclude_modules", None), modules)
    cfg.base_model_name_or_path = base_model_name_or_path or cfg.base_model_name_or_path
    cfg.inference_mode = True
    state = peft.get_peft_model_state_dict(model, adapter_name=adapter_name)
    tensors = {_PREFIX + to_hf_name(k[len(_PREFIX):], config, bare): v.detach().cpu().contiguous()
               for k, v in state.items()}
    document = {k: sorted(v) if isinstance(v, set) else v for k, v in cfg.to_dict().items()}
    if cfg.task_type is None:  # what AutoPeftModel builds the base model with: HF's class of the same head
        document["auto_mapping"] = {"base_model_class": type(base).HF_ARCHITECTURE or "AlbertModel",
                                    "parent_library": _HF_MODULE}
    return document, tensors


# ------------------------------------------------------------------------------------------------ loading
@checked
def load_adapter(model: torch.nn.Module, folder: str | os.PathLike, *, adapter_name: str = "default",
                 is_trainable: bool = False):
    """``model`` (a litebert model) with the LoRA adapter in ``folder`` (written by `save_adapter`, or by peft on HF
    transformers' ALBERT: ``PeftModel.save_pretrained``), as a ``peft.PeftModel`` that computes what the HF model
    with that adapter computes. ``is_trainable``: go on training it (default: inference, everything frozen)."""
    peft = _peft()
    config, bare = _names(model)
    folder = Path(folder)
    file = folder / ADAPTER_CONFIG
    if not file.is_file():
        raise CheckpointNotFoundError(f"{folder}: no {ADAPTER_CONFIG} (not a peft adapter folder)")
    document = read_json(file, CheckpointError)
    cfg = _lora_config(peft, document, file)
    _unsupported(cfg, str(file))
    leaves = [(to_hf_name(n, config, bare), n) for n, m in model.named_modules()
              if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))]
    modules = [(to_hf_name(n, config, bare), n) for n, _ in model.named_modules() if n]
    cfg.target_modules = _portable(cfg.target_modules, leaves)
    cfg.modules_to_save = _portable(cfg.modules_to_save, modules)
    cfg.exclude_modules = _portable(getattr(cfg, "exclude_modules", None), modules)
    cfg.task_type = None  # peft's task wrappers call the model with HF's arguments; litebert's take their own
    cfg.inference_mode = not is_trainable
    weights = _read_weights(folder)
    _check_ranks(cfg, weights, file)  # before peft builds matrices of the rank the config says
    state = {_PREFIX + from_hf_name(k[len(_PREFIX):] if k.startswith(_PREFIX) else k, config, bare): v
             for k, v in weights.items()}
    try:
        wrapped = peft.PeftModel(model, cfg, adapter_name)
        result = peft.set_peft_model_state_dict(wrapped, state, adapter_name=adapter_name)
    except (ValueError, RuntimeError, KeyError) as e:  # no module to adapt; a tensor of another shape
        raise CheckpointError(f"{folder}: the adapter does not fit this {type(model).__name__}: "
                              f"{first_line(e, 300)}") from None
    unexpected = [k for k in result.unexpected_keys]
    missing = [k for k in result.missing_keys if "lora_" in k and f".{adapter_name}" in k]
    if unexpected or missing:
        raise CheckpointError(f"{folder}: the adapter does not fit this {type(model).__name__}: "
                              + (f"tensors with no module here: {', '.join(unexpected[:4])}" if unexpected else
                                 f"modules the adapter lacks: {', '.join(missing[:4])}"))
    if not is_trainable:
        wrapped.eval()
    return wrapped


def _check_ranks(cfg, weights: dict[str, torch.Tensor], file: Path) -> None:
    """The ranks ``adapter_config.json`` declares (``r``, ``rank_pattern``'s) against the ranks its tensors have (a
    ``lora_A`` is [r, in], a ``lora_B`` [out, r]): peft would build matrices of the declared rank for every adapted
    module before loading a tensor, so a document that says r = 10^8 (200 bytes) would take gigabytes. Refused, naming
    both, when a declared rank no tensor has exceeds them, or a tensor's rank is not declared."""
    ranks = {t.shape[0] for k, t in weights.items() if "lora_A" in k and t.dim() == 2}
    ranks |= {t.shape[1] for k, t in weights.items() if "lora_B" in k and t.dim() == 2}
    if not ranks:
        raise CheckpointError(f"{file.parent}: {ADAPTER_WEIGHTS} holds no LoRA tensors (lora_A, lora_B)")
    pattern = getattr(cfg, "rank_pattern", None) or {}
    declared = {cfg.r} | {v for v in pattern.values() if isinstance(v, int)}
    undeclared = sorted(ranks - declared)
    if max(declared) > max(ranks) or undeclared:
        raise CheckpointError(f"{file}: declares rank(s) {', '.join(map(str, sorted(declared)))} (r"
                              f"{', rank_pattern' if pattern else ''}), its tensors in {ADAPTER_WEIGHTS} have rank(s) "
                              f"{', '.join(map(str, sorted(ranks)))}: the config does not describe these weights")


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < float("inf")


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# The entries of adapter_config.json that litebert and peft's LoRA read -> (what each must be, the test): peft's
# LoraConfig takes any value and fails later (or builds something else) on one of another type.
_DOCUMENT = {
    "r": ("a whole number >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
    "lora_alpha": ("a number", _real),
    "lora_dropout": ("a number in [0, 1)", lambda v: _real(v) and 0 <= v < 1),
    "target_modules": ("null, a module name or a list of them", lambda v: v is None or isinstance(v, str)
                       or _strings(v)),
    "modules_to_save": ("null or a list of module names", lambda v: v is None or _strings(v)),
    "exclude_modules": ("null, a module name or a list of them", lambda v: v is None or isinstance(v, str)
                        or _strings(v)),
    "rank_pattern": ("an object of module names to ranks (whole numbers >= 1)", lambda v: isinstance(v, dict) and all(
        isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in v.values())),
    "alpha_pattern": ("an object of module names to numbers", lambda v: isinstance(v, dict)
                      and all(_real(a) for a in v.values())),
    "bias": ("one of none, all, lora_only", lambda v: v in ("none", "all", "lora_only")),
    "peft_type": ("a string", lambda v: isinstance(v, str)),
    "init_lora_weights": ("true, false or a method's name", lambda v: isinstance(v, (bool, str))),
    "auto_mapping": ("null or an object", lambda v: v is None or isinstance(v, dict)),
    **{k: ("null or a string", lambda v: v is None or isinstance(v, str))
       for k in ("base_model_name_or_path", "revision", "task_type")},
    **{k: ("true or false", lambda v: isinstance(v, bool))
       for k in ("fan_in_fan_out", "use_rslora", "use_dora", "inference_mode", "lora_bias")},
}


_FREE = ("peft_version", "layers_to_transform", "layers_pattern")  # recorded, or refused by `_unsupported` by name


def _lora_config(peft, document: dict, file: Path):
    """A ``peft.LoraConfig`` from an adapter_config.json, each entry litebert or LoRA reads checked first
    (`_DOCUMENT`: one line naming the file and the entry): keys this peft does not know are dropped when they are
    off (None, False, empty) and refused otherwise (they would change what the adapter computes)."""
    for key, (what, ok) in _DOCUMENT.items():
        if key in document and not ok(document[key]):
            shown = repr(document[key])
            raise CheckpointError(f"{file}: {key} = {shown if len(shown) <= 60 else shown[:57] + '...'}: expected "
                                  f"{what}")
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(peft.LoraConfig)
                if f.init and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)}
    other = next((k for k, v in document.items() if k in defaults and k not in _DOCUMENT and k not in _FREE
                  and v is not None and v is not False and v != defaults[k]), None)
    if other is not None:  # another of peft's methods or options (LoftQ, EVA, layer replication...): not mapped
        raise CheckpointError(f"{file}: {other} = {reprlib.repr(document[other])}: a peft option litebert does not "
                              f"map between its modules and HF's; remove it, or set it to {defaults[other]!r}")
    fields = {f.name for f in dataclasses.fields(peft.LoraConfig) if f.init}
    unknown = {k: v for k, v in document.items() if k not in fields and k not in ("auto_mapping",)}
    live = [k for k, v in unknown.items() if v not in (None, False, [], {}, "")]
    if live:
        raise CheckpointError(f"{file}: {', '.join(live)} unknown to peft {peft.__version__}; upgrade peft "
                              "(pip install -U peft)")
    try:
        return peft.LoraConfig(**{k: v for k, v in document.items() if k in fields})
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{file}: not a LoRA adapter config peft accepts ({first_line(e, 200)})") from None


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    file = folder / ADAPTER_WEIGHTS
    if not file.is_file():
        raise CheckpointNotFoundError(f"{folder}: no {ADAPTER_WEIGHTS} (adapters saved as adapter_model.bin are not "
                                      "read: re-save them with safetensors)")
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{file}: not a readable safetensors file ({first_line(e, 200)})") from None
