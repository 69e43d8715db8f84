"""Model cards: the README.md the Hugging Face Hub shows for a model, written by litebert into every model folder it
makes (a pretraining run's ``model/``, a fine-tuned folder, a converted checkpoint).

A card is YAML front matter as the Hub reads it (``library_name``, ``license``, ``base_model``, ``tags``,
``datasets``, ``pipeline_tag`` and ``model-index`` with the run's evaluation) and a body for people: what was trained
(shape, sharing schedule, parameters), on what data (the names and sizes the run recorded; never a full local path,
since a card may be published), with which settings, the results, how to load the model with litebert and with
transformers, and the license. The builders read only what the run wrote (train_config.json, metrics.jsonl,
finetune.json, config.json, the weights' header, the token stores' manifests): `litebert.card_builders`.

litebert writes a card where there is none, or over a card of its own: its cards carry `MARKER`. A README.md
without it (a card you wrote) is left as it is, with a notice. Delete the marker line from a litebert card to keep
your edits: litebert then treats the card as yours.

This module imports nothing heavy at import time: `litebert.folders` asks it whether a README.md is litebert's.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from litebert.checks import check_fields
from litebert.errors import ConfigError, Field

CARD_NAME = "README.md"
MARKER = ("<!-- This model card was written by litebert, which rewrites it when it writes this folder again; "
          "delete this line to keep your edits. -->")
# The model reference in a card's snippets when the Hub repository is not known yet; `retarget` replaces it
PLACEHOLDER = "path/to/this/folder"
PAPER = "[ALBERT](https://arxiv.org/abs/1909.11942) (Lan et al., ICLR 2020)"
# A Hub license id (apache-2.0, cc-by-nc-sa-4.0, other...) and a Hub repository id (org/name)
_LICENSE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")  # a mapping key YAML reads as the same string unquoted
_DATASET = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


@dataclass(frozen=True)
class CardInfo:
    """What a model card says that a run cannot know.

    Attributes:
        license: the license of the weights, as a Hugging Face Hub license id (apache-2.0, mit, cc-by-4.0, other...);
            default none: the card says that no license was given (the data's terms decide what you may grant)
        datasets: Hub ids of the data sets the model was trained on (the card's datasets; the first names the data
            of its evaluation results); comma-separated on the command line
    """

    license: Optional[str] = None
    datasets: Sequence[str] = ()

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, "datasets", tuple(self.datasets))
        if self.license is not None and not _LICENSE.match(self.license):
            raise ConfigError("{license}: not a Hugging Face Hub license id (lower case letters, digits, '.', '+' "
                              "and '-', such as apache-2.0, mit, cc-by-4.0 or other)",
                              license=Field("CardInfo", self.license))
        bad = next((d for d in self.datasets if not _DATASET.match(d) or ".." in d), None)
        if bad is not None:
            raise ConfigError("{datasets}: " + json.dumps(bad).replace("{", "{{").replace("}", "}}") + " is not a Hub "
                              "data set id (org/name or name)", datasets=Field("CardInfo", ",".join(self.datasets)))


# ---------------------------------------------------------------------------------------------------- ownership
def is_own_card(path: str | os.PathLike) -> bool:
    """Whether the file ``path`` is a model card litebert wrote (it carries `MARKER`)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return MARKER.encode() in head


def write_card(folder: str | os.PathLike, card: str | Callable[[], str],
               say: Optional[Callable[[str], None]] = None) -> bool:
    """Write ``card`` (the text, or a function that makes it) as ``folder``/README.md, atomically, unless a README.md
    that litebert did not write is there: that one is left as it is and ``say`` is told so. A card that cannot be
    made or written (a record of the run unreadable, a full disk) is reported to ``say`` too, and nothing is raised:
    the card comes last, after the model it describes is safely written. Returns whether the card was written."""
    from litebert.errors import LitebertError
    from litebert.files import atomic_write

    path = Path(folder) / CARD_NAME
    if (path.exists() or path.is_symlink()) and not (path.is_file() and not path.is_symlink() and is_own_card(path)):
        if say is not None:
            say(f"note: {path} is not a model card litebert wrote; left as it is (litebert's card for this model "
                f"was not written)")
        return False
    try:
        atomic_write(path, card() if callable(card) else card)
    except LitebertError as e:
        if say is not None:
            say(f"note: no model card was written in {folder}: {e}")
        return False
    return True


def retarget(text: str, repo_id: str) -> str:
    """A litebert card with its snippets pointed at the Hub repository ``repo_id`` instead of `PLACEHOLDER`."""
    return text.replace(json.dumps(PLACEHOLDER), json.dumps(repo_id))


# ---------------------------------------------------------------------------------------------------- reading
# The front matter as the Hub finds it (huggingface_hub.repocard.REGEX_YAML_BLOCK): a "---" line (after blank
# space), the YAML, a "---" line
_FRONT = re.compile(r"^(\s*---[\r\n]+)([\S\s]*?)([\r\n]+---(\r\n|\n|$))")


def read_card(path: str | os.PathLike) -> tuple[str, Optional[dict]]:
    """(text, front matter or None) of the model card ``path``, read as the Hub reads it; the one check of a card
    before it is uploaded. A `CardError` naming the file (and the line) for a card the Hub would refuse or misread:
    not UTF-8; a byte order mark before the front matter (the Hub would not see it); a front matter opened by a
    ``---`` line and never closed; YAML that does not parse or is not a mapping (when PyYAML is installed, as it is
    wherever huggingface_hub is: without it the Hub's own check is left to decide)."""
    from litebert.errors import CardError, literal

    path = Path(path)
    where = literal(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise CardError(f"{where}: not UTF-8 text (byte {e.start} is not); the Hub reads a model card as UTF-8: "
                        "save it so") from None
    if text.startswith("\ufeff") and text[1:].lstrip().startswith("---"):
        raise CardError(f"{where}: a byte order mark comes before the front matter, which hides it from the Hub; "
                        "save the card as UTF-8 without one")
    found = _FRONT.search(text)
    if found is None:
        if text.lstrip().split("\n", 1)[0].rstrip("\r") == "---":
            raise CardError(f"{where}: its front matter opens with a '---' line and is never closed by one")
        return text, None
    try:
        import yaml
    except ImportError:  # no YAML reader here: the Hub's check decides
        return text, None
    first = found.group(1).count("\n") + found.group(1).count("\r") - found.group(1).count("\r\n") + 1
    try:
        meta = yaml.safe_load(found.group(2))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError, OverflowError) as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {first + mark.line}: " if mark is not None else ""
        reason = " ".join(str(getattr(e, "problem", None) or e).split())[:200]
        raise CardError(f"{where}: its front matter is not valid YAML ({line}{literal(reason)})") from None
    if meta is not None and not isinstance(meta, dict):
        raise CardError(f"{where}: its front matter is a YAML {type(meta).__name__}, not a mapping of keys to "
                        "values")
    return text, meta


# ---------------------------------------------------------------------------------------------------- front matter
def front_matter(data: dict) -> str:
    """``data`` as the YAML block that opens a card (``---`` ... ``---``): block style, every string quoted (JSON
    strings are YAML double-quoted scalars), floats always with a decimal point (YAML 1.1 readers such as PyYAML, which
    huggingface_hub uses, read ``1e-05`` as a string). Empty values are left out; non-finite numbers are refused."""
    return "---\n" + "".join(line + "\n" for line in _yaml_lines(data, 0)) + "---\n"


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, v in value.items():
            if v is None or (isinstance(v, (list, tuple, dict)) and not v):
                continue
            if isinstance(v, (list, tuple, dict)):
                lines.append(f"{pad}{_key(key)}:")
                lines += _yaml_lines(v, indent + 2)
            else:
                lines.append(f"{pad}{_key(key)}: {_scalar(v)}")
        return lines
    for item in value:  # a list: each item "- ", a mapping's first key on the dash's line
        if item is None or (isinstance(item, (list, tuple, dict)) and not item):
            continue  # empty, left out as in a mapping
        if isinstance(item, (dict, list, tuple)):
            inner = _yaml_lines(item, indent + 2)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines += inner[1:]
        else:
            lines.append(f"{pad}- {_scalar(item)}")
    return lines


def _key(key: Any) -> str:
    key = str(key)
    plain = _PLAIN_KEY.match(key) and key.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n")
    return key if plain else json.dumps(key, ensure_ascii=False)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a model card holds finite numbers only, not {value!r}")
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + (e + (exponent if exponent[0] in "+-" else "+" + exponent) if e else "")
    return json.dumps(str(value), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------------- shared parts
# What a model folder's head does, as the Hub names tasks (pipeline_tag, model-index task type)
HUB_TASKS = {"AlbertForPreTraining": "fill-mask", "AlbertForMaskedLM": "fill-mask", "AlbertModel": "feature-extraction",
             "AlbertForSequenceClassification": "text-classification",
             "AlbertForTokenClassification": "token-classification",
             "AlbertForQuestionAnswering": "question-answering", "AlbertForMultipleChoice": "multiple-choice"}
# litebert's metric names -> the Hub's metric ids (model-index ``type``); a metric not named here is not listed there
HUB_METRICS = {"accuracy": "accuracy", "matthews": "matthews_correlation", "f1": "f1", "pearson": "pearsonr",
               "spearman": "spearmanr", "mse": "mse", "exact": "exact_match", "best_f1": "f1",
               "best_exact": "exact_match", "precision": "precision", "recall": "recall"}


@dataclass(frozen=True)
class Model:
    """What a card says of the model in a folder: read from its config.json and its weights' header."""

    config: Any  # AlbertConfig
    architecture: str
    parameters: int
    hf_loadable: bool

    @classmethod
    def read(cls, folder: Path) -> "Model":
        from litebert.errors import CheckpointError
        from litebert.files import read_json
        from litebert.io.hf_folder import CONFIG_NAME, load_config

        config = load_config(folder)
        names = read_json(folder / CONFIG_NAME, CheckpointError).get("architectures") or ["AlbertModel"]
        return cls(config, str(names[0]), parameter_count(folder), config.hf_compatible)

    def shape(self) -> str:
        c = self.config
        return (f"E={c.embedding_size}, H={c.hidden_size}, {c.num_hidden_layers} layers, {c.num_attention_heads} "
                f"attention heads, feed-forward {c.intermediate_size}" + _preset_of(c))

    def sharing(self) -> str:
        c = self.config
        attention, ffn = c.unique_blocks()
        steps = c.num_hidden_layers * c.inner_group_num
        what = {"all": "whole layers shared (ALBERT's cross-layer sharing)", "none": "no sharing (BERT-like)",
                "attention": "attention sub-blocks shared, feed-forward not", "ffn": "feed-forward sub-blocks shared, "
                                                                                    "attention not"}[c.sharing]
        return (f"{c.sharing}: {what}; {attention} unique attention and {ffn} unique feed-forward block(s) over "
                f"{steps} depth steps (num_hidden_groups {c.num_hidden_groups}, inner_group_num {c.inner_group_num})")

    def table(self) -> list[str]:
        c = self.config
        return ["| | |", "|---|---|", f"| architecture | `{self.architecture}` |", f"| shape | {self.shape()} |",
                f"| sharing | {self.sharing()} |", f"| vocabulary | {c.vocab_size:,} pieces |",
                f"| positions | {c.max_position_embeddings} |", f"| parameters | {self.parameters:,} |"]


def _preset_of(config) -> str:
    """`` (the albert-base-v2 shape)`` when the shape is a preset's (the vocabulary aside), else ``""``."""
    from litebert.config import PRESETS

    keys = ("embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "sharing", "num_hidden_groups", "inner_group_num")
    for name, preset in PRESETS.items():
        if all(preset.fields.get(k, getattr(type(config), k, None)) == getattr(config, k) for k in keys):
            return f" (the shape of the preset `{name}`: {preset.source})"
    return ""


def parameter_count(folder: Path) -> int:
    """The parameters in a model folder's weight files, counted from their headers (nothing is loaded)."""
    from safetensors import safe_open

    total = 0
    for name in ("model.safetensors", "litebert_model.safetensors", "answerability.safetensors"):
        if (folder / name).is_file():
            with safe_open(str(folder / name), "pt") as f:
                total += sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    return total


def hub_id_of(path: Any) -> Optional[str]:
    """The Hub id of a model folder that is a snapshot in the Hugging Face cache (``models--ORG--NAME/snapshots/
    COMMIT``), else None: a local folder has no id to publish."""
    m = re.search(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/[0-9a-f]{40}/?$", str(path or ""))
    return f"{m.group(1)}/{m.group(2)}" if m else None


def name_of(path: Any) -> str:
    """A path as a card names it: its last part only (a published card shows no local folders)."""
    return Path(str(path)).name or str(path)


def metric_entries(metrics: dict, rows: Sequence[tuple[str, str, str]]) -> list[dict]:
    """model-index ``metrics``: for each (key, shown name, Hub metric id) of ``rows`` whose value in ``metrics`` is a
    finite number, the entry the Hub reads."""
    out = []
    for key, shown, kind in rows:
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out.append({"name": shown, "type": kind, "value": float(value)})
    return out


def model_index(name: str, task: str, dataset: dict, metrics: list[dict]) -> list[dict]:
    """The ``model-index`` of a card: one result (task, data set, metrics), or none without metrics."""
    if not metrics:
        return []
    return [{"name": name, "results": [{"task": {"type": task}, "dataset": dataset, "metrics": metrics}]}]


def usage(model: Model, model_id: str, task: str, fine_tuned: bool) -> list[str]:
    """The "How to use" section: litebert's pipeline and command line, and transformers' (when it loads the folder)."""
    ref = json.dumps(model_id)
    example = {"fill-mask": '"The [MASK] sat on the mat."', "text-classification": '"A gripping film."',
               "token-classification": '"Alice lives in Paris."', "feature-extraction": '"Hello world."',
               "question-answering": 'question="Where does Alice live?", context="Alice lives in Paris."'}
    lines = ["## How to use", "", "With litebert (a Hub id needs its `hub` extra, huggingface_hub):", ""]
    if task in example:
        lines += ["```python", "from litebert import pipeline", "",
                  f"model = pipeline({json.dumps(task)}, model={ref})", f"print(model({example[task]}))", "```", ""]
    shell = (f"litebert predict --model {ref} --input examples.jsonl --output predictions.jsonl" if fine_tuned else
             f"litebert finetune sst-2 --model {ref} --data path/to/SST-2 --out runs/sst-2")
    lines += ["```bash", shell, "```", ""]
    if not model.hf_loadable:
        return lines + [f"transformers cannot load this model: its sharing schedule ({model.config.sharing}) is one "
                        "HF's ALBERT cannot express (it shares whole layers only).", ""]
    lines += ["With transformers:", ""]
    if task in example:
        lines += ["```python", "from transformers import pipeline", "",
                  f"model = pipeline({json.dumps(task)}, model={ref})", f"print(model({example[task]}))", "```", ""]
    else:
        lines += ["```python", "from transformers import AutoModelForMultipleChoice, AutoTokenizer", "",
                  f"tokenizer = AutoTokenizer.from_pretrained({ref})",
                  f"model = AutoModelForMultipleChoice.from_pretrained({ref})", "```", ""]
    return lines


def license_section(info: CardInfo) -> list[str]:
    if info.license:
        return ["## License", "", f"`{info.license}` (as given to litebert with `--license`).", ""]
    return ["## License", "", "None was given: the terms of the data and of the model this one started from decide "
            "how it may be used (litebert writes a license into the card only when `--license` names one).", ""]


def assemble(meta: dict, title: str, summary: str, sections: list[list[str]]) -> str:
    """The card: front matter, title, `MARKER`, summary, then the sections."""
    body = [f"# {title}", "", MARKER, "", summary, ""] + [line for s in sections for line in s]
    return front_matter(meta) + "\n" + "\n".join(body).rstrip("\n") + "\n"


def tags(task: Optional[str]) -> list[str]:
    return ["litebert", "albert"] + ([task] if task else [])


def settings_table(rows: list[tuple[str, Any]]) -> list[str]:
    return ["| setting | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows if v is not None and v != ""]
