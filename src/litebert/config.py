"""`AlbertConfig`: one typed dataclass for every ALBERT (and BERT-baseline) shape, with named presets.

Field names are those of the official `albert_config.json` and of HF `transformers.AlbertConfig`, so a config file from
either loads as is. Two things are ours:

- ``sharing`` names the paper's cross-layer sharing ablations (Section 4.5, Table 5): ``all`` (ALBERT's default),
  ``attention`` (only attention sub-blocks shared), ``ffn`` (only feed-forward sub-blocks shared), ``none`` (BERT-like).
  The official code's ``num_hidden_groups`` / ``inner_group_num`` describe *which* blocks are shared; ``sharing`` says
  which sub-blocks follow that grouping. See `AlbertConfig.schedule`.
- ``embedding_projection``: whether the E->H projection exists. The official code adds it only when E != H; HF always
  has it. ``None`` means "as the official code" (E != H).

The config is frozen and its fields hold only what was given: values that follow from others (whether the projection
exists, how many layer groups the schedule walks) are properties, so ``dataclasses.replace`` and ``from_preset`` with
the same fields build the same model.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Optional

from litebert.checks import AT_LEAST_0, AT_LEAST_1, POSITIVE, PROBABILITY, check_fields
from litebert.errors import ConfigError
from litebert.files import read_json, write_json

ACTIVATIONS = ("gelu_new", "gelu", "relu", "silu")
SHARING = ("all", "attention", "ffn", "none")
PROBLEM_TYPES = (None, "single_label_classification", "regression", "multi_label_classification")
_RANGES = {
    **{name: AT_LEAST_1 for name in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                                     "num_hidden_groups", "inner_group_num", "num_attention_heads", "intermediate_size",
                                     "max_position_embeddings", "type_vocab_size", "num_labels")},
    **{name: PROBABILITY
       for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob")},
    **{name: AT_LEAST_0 for name in ("pad_token_id", "bos_token_id", "eos_token_id")},
    "initializer_range": POSITIVE, "layer_norm_eps": POSITIVE,
}
_CHOICES = {"hidden_act": ACTIVATIONS, "sharing": SHARING, "problem_type": PROBLEM_TYPES}


@dataclass(frozen=True)
class AlbertConfig:
    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_new"  # the official tanh approximation of GELU
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    classifier_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3
    sharing: str = "all"
    embedding_projection: Optional[bool] = None
    # Task heads (HF names): number of outputs, optional label names, and problem type for sequence classification.
    num_labels: int = 2
    id2label: Optional[dict[int, str]] = None
    problem_type: Optional[str] = None  # "single_label_classification" | "regression" | "multi_label_classification"

    def __post_init__(self) -> None:
        self._validate()

    @property
    def has_embedding_projection(self) -> bool:
        """Whether the encoder projects the E-dimensional embeddings to H: as given, else only when E != H."""
        if self.embedding_projection is None:
            return self.embedding_size != self.hidden_size
        return self.embedding_projection

    @property
    def layer_groups(self) -> int:
        """How many groups of layers the schedule walks: ``num_hidden_groups``, or one per layer when nothing is
        shared (HF expresses not-shared exactly this way)."""
        return self.num_hidden_layers if self.sharing == "none" else self.num_hidden_groups

    def _validate(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"AlbertConfig.{name} = {getattr(self, name)!r}: {why}")

        check_fields(self, _RANGES, _CHOICES)
        if self.hidden_size % self.num_attention_heads:
            raise bad("hidden_size", f"must be divisible by num_attention_heads = {self.num_attention_heads}")
        if self.sharing == "none" and self.num_hidden_groups not in (1, self.num_hidden_layers):
            raise bad("num_hidden_groups", "sharing='none' gives every layer its own blocks; leave num_hidden_groups "
                      f"at 1 or set it to num_hidden_layers = {self.num_hidden_layers}")
        if self.num_hidden_groups > self.num_hidden_layers or self.num_hidden_layers % self.num_hidden_groups:
            raise bad("num_hidden_layers", f"must be a multiple of num_hidden_groups = {self.num_hidden_groups} "
                      "(layer i uses group int(i * groups / layers), so groups must split the layers evenly)")
        if self.embedding_projection is False and self.embedding_size != self.hidden_size:
            raise bad("embedding_projection", f"must be true when embedding_size ({self.embedding_size}) != "
                      f"hidden_size ({self.hidden_size})")
        for name in ("pad_token_id",):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise bad(name, f"must be a token id in [0, vocab_size = {self.vocab_size})")
        if self.id2label is not None:
            if sorted(self.id2label) != list(range(len(self.id2label))):
                raise bad("id2label", "must map the class ids 0..n-1 (integers) to label names (strings)")
            if self.num_labels != len(self.id2label):
                raise bad("num_labels", f"but id2label names {len(self.id2label)} labels; give both consistently")

    # ------------------------------------------------------------------ sharing schedule
    def schedule(self) -> tuple[list[int], list[int]]:
        """Which unique attention block and which unique FFN block run at each step of depth.

        Depth has ``num_hidden_layers * inner_group_num`` steps: layer l runs the ``inner_group_num`` blocks of its
        group
        in sequence, and layer l uses group ``int(l * num_hidden_groups / num_hidden_layers)`` (official
        `modeling.py`, HF `AlbertTransformer`). A sub-block that is shared follows that grouping (block id
        ``group * inner_group_num + inner``); one that is not shared gets a block of its own at every step.
        Returns ``(attention_ids, ffn_ids)``, each of length steps; the number of unique blocks is ``max(ids) + 1``.
        """
        steps = self.num_hidden_layers * self.inner_group_num
        grouped = [self.block_id(layer * self.layer_groups // self.num_hidden_layers, inner)
                   for layer in range(self.num_hidden_layers) for inner in range(self.inner_group_num)]
        own = list(range(steps))
        # 'none' needs no case of its own: its layer_groups is num_hidden_layers, so grouped == own.
        attention = own if self.sharing == "ffn" else grouped
        ffn = own if self.sharing == "attention" else grouped
        return attention, ffn

    # ------------------------------------------------------------------ inputs
    def sequence_length(self, requested: Optional[int], default: int, name: str = "seq_len") -> int:
        """The one rule for the longest input of a run, in pretraining, fine-tuning and inference: a length the
        caller asks for (``requested``) is refused when the model's position embeddings cannot take it; without one,
        the ``default`` (a task's, say) is capped at them. ``name``: the argument the length came from."""
        if requested is None:
            return min(default, self.max_position_embeddings)
        if requested > self.max_position_embeddings:
            raise ConfigError("{" + name + "} exceeds the model's max_position_embeddings "
                              f"{self.max_position_embeddings}; " + "lower {" + name + ":flag} or use another model",
                              **{name: requested})
        return requested

    def with_shape(self, **shape: Any) -> "AlbertConfig":
        """This config with its shape changed by the paper's rules (Table 1): a new ``hidden_size`` H brings H/64
        attention heads and a 4H feed-forward layer unless ``num_attention_heads`` / ``intermediate_size`` are given
        too. Any other field (``embedding_size``, ``num_hidden_layers``, ``sharing``...) is replaced as given."""
        if "hidden_size" in shape:
            shape.setdefault("num_attention_heads", max(1, shape["hidden_size"] // 64))
            shape.setdefault("intermediate_size", 4 * shape["hidden_size"])
        return dataclasses.replace(self, **shape)

    def unique_blocks(self) -> tuple[int, int]:
        """How many unique attention and FFN blocks the schedule uses (``max(ids) + 1`` of `schedule`, computed
        without building it: a config's size can be judged before anything of that size exists)."""
        steps, grouped = self.num_hidden_layers * self.inner_group_num, self.layer_groups * self.inner_group_num
        return (steps if self.sharing == "ffn" else grouped), (steps if self.sharing == "attention" else grouped)

    def block_id(self, group: int, inner: int) -> int:
        """The unique block of inner block ``inner`` of layer group ``group``: the one numbering rule, which the
        schedule and the HF/official key maps (``albert_layer_groups.{g}.albert_layers.{i}``) share."""
        return group * self.inner_group_num + inner

    def block_place(self, block: int) -> tuple[int, int]:
        """(group, inner) of a unique block: the inverse of `block_id`."""
        return divmod(block, self.inner_group_num)

    @property
    def hf_compatible(self) -> bool:
        """Whether HF transformers can express this model (it has no per-sub-block sharing)."""
        return self.sharing in ("all", "none")

    # ------------------------------------------------------------------ presets and serialization
    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "AlbertConfig":
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; available presets: {', '.join(PRESETS)}")
        fields = dict(PRESETS[name].fields)
        fields.update(overrides)
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> "AlbertConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown AlbertConfig field(s) {', '.join(unknown)}; "
                              f"known fields: {', '.join(sorted(known))}")
        if isinstance(data.get("id2label"), dict):  # JSON object keys are strings: "0" -> 0
            try:
                data = {**data, "id2label": {int(k): v for k, v in data["id2label"].items()}}
            except ValueError:
                raise ConfigError(f"{source}: id2label keys must be class ids 0..n-1, got "
                                  f"{sorted(data['id2label'])}") from None
        try:
            return cls(**data)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    def to_json(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "AlbertConfig":
        data = read_json(path, ConfigError)
        if "model_type" in data or "architectures" in data:  # an HF config.json
            return cls.from_hf_dict(data, source=str(path))
        return cls.from_dict(data, source=str(path))

    def to_hf_dict(self) -> dict[str, Any]:
        """The fields as HF `config.json` writes them; our extra fields are added with a ``litebert_`` prefix only
        where HF could not otherwise express the model (it then refuses to load it: see `io.hf_folder`)."""
        d = {k: v for k, v in self.to_dict().items()
             if k not in ("sharing", "embedding_projection", "id2label", "problem_type")}
        d["num_hidden_groups"] = self.layer_groups
        d["model_type"] = "albert"
        d["position_embedding_type"] = "absolute"
        if self.id2label is not None:
            d["id2label"] = {str(k): v for k, v in self.id2label.items()}
            d["label2id"] = {v: k for k, v in self.id2label.items()}
        if self.problem_type is not None:
            d["problem_type"] = self.problem_type
        if self.sharing != "all":
            d["litebert_sharing"] = self.sharing
        if not self.has_embedding_projection:
            d["litebert_embedding_projection"] = False
        return d

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any], *, source: str = "config.json") -> "AlbertConfig":
        data = dict(data)
        kind = data.get("position_embedding_type", "absolute")
        if kind != "absolute":
            raise ConfigError(f"{source}: position_embedding_type = {kind!r} is not supported (only 'absolute', "
                              "as every released ALBERT)")
        if data.get("model_type", "albert") != "albert":
            raise ConfigError(f"{source}: model_type = {data['model_type']!r}, expected 'albert'")
        fields = {f.name for f in dataclasses.fields(cls)}
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key.startswith("litebert_") and key[len("litebert_"):] in fields:
                out[key[len("litebert_"):]] = value
            elif key in fields:
                out[key] = value
            # Anything else (architectures, transformers_version, dtype, label2id, the official config's
            # net_structure_type / gap_size / down_scale_factor, ...) shapes nothing in the model: ignored.
        if out.get("id2label") is not None:
            try:
                labels = {int(k): v for k, v in out["id2label"].items()}
            except (AttributeError, TypeError, ValueError):
                raise ConfigError(f"{source}: id2label = {out['id2label']!r}: expected an object mapping class ids "
                                  "0..n-1 to label names") from None
            if all(v == f"LABEL_{k}" for k, v in labels.items()):  # HF's placeholder names: keep only the count
                out.pop("id2label")
                out["num_labels"] = len(labels)
            else:
                out["id2label"], out["num_labels"] = labels, len(labels)
        if isinstance(out.get("eos_token_id"), list) and out["eos_token_id"]:
            out["eos_token_id"] = out["eos_token_id"][0]
        for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
            if out.get(key, 0) is None:
                out.pop(key)
        # HF always builds the E->H projection, so an HF folder has one unless we said otherwise when saving it; E != H
        # implies it anyway, so it needs saying only when E == H.
        e, h = (out.get(k, getattr(cls, k)) for k in ("embedding_size", "hidden_size"))
        if e == h:
            out.setdefault("embedding_projection", True)
        return cls.from_dict(out, source=source)


@dataclass(frozen=True)
class Preset:
    fields: dict[str, Any]
    source: str
    paper_params: Optional[str] = None  # the paper's Table 1 figure, as printed there


def _albert(h: int, layers: int, heads: int, ffn: int, dropout: float) -> dict[str, Any]:
    return dict(vocab_size=30000, embedding_size=128, hidden_size=h, num_hidden_layers=layers,
                num_attention_heads=heads,
                intermediate_size=ffn, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                hidden_act="gelu_new", sharing="all")


def _bert(h: int, layers: int, heads: int, ffn: int) -> dict[str, Any]:
    return dict(vocab_size=30000, embedding_size=h, hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                intermediate_size=ffn, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, hidden_act="gelu",
                sharing="none")


_T1 = "Lan et al. 2020, Table 1"
_V1 = "official albert_config.json of the v1 TF-Hub release (dropout 0.1; xxlarge 0)"
_V2 = "official albert_config.json of the v2 TF-Hub release (dropout 0)"
PRESETS: dict[str, Preset] = {
    "albert-base-v1": Preset(_albert(768, 12, 12, 3072, 0.1), f"{_T1}; {_V1}", "12M"),
    "albert-large-v1": Preset(_albert(1024, 24, 16, 4096, 0.1), f"{_T1}; {_V1}", "18M"),
    "albert-xlarge-v1": Preset(_albert(2048, 24, 16, 8192, 0.1), f"{_T1}; {_V1}", "60M"),
    "albert-xxlarge-v1": Preset(_albert(4096, 12, 64, 16384, 0.0), f"{_T1}; {_V1}", "235M"),
    "albert-base-v2": Preset(_albert(768, 12, 12, 3072, 0.0), f"{_T1}; {_V2}", "12M"),
    "albert-large-v2": Preset(_albert(1024, 24, 16, 4096, 0.0), f"{_T1}; {_V2}", "18M"),
    "albert-xlarge-v2": Preset(_albert(2048, 24, 16, 8192, 0.0), f"{_T1}; {_V2}", "60M"),
    "albert-xxlarge-v2": Preset(_albert(4096, 12, 64, 16384, 0.0), f"{_T1}; {_V2}", "235M"),
    "bert-base": Preset(_bert(768, 12, 12, 3072), f"{_T1} (BERT baseline with ALBERT's 30k vocabulary)", "108M"),
    "bert-large": Preset(_bert(1024, 24, 16, 4096), f"{_T1} (BERT baseline with ALBERT's 30k vocabulary)", "334M"),
    "tiny": Preset(dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0), "litebert: a debug preset for tests and CI"),
}
