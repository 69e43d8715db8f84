"""Per-task presets: the kind of task (`kinds.py`), the label set, the metric that picks the best checkpoint, the
hyperparameters.

Sources of the numbers (all for ALBERT fine-tuning with AdamW, linear warmup then linear decay to 0):

* GLUE: google-research/albert ``run_glue.sh`` — ``run_task TASK warmup lr train_step save_steps batch`` with
  max_seq_length 512. That script has no WNLI line; WNLI's values are the paper's (Lan et al. 2020, appendix A.4,
  table of downstream hyperparameters: lr 2e-5, batch 16, 2,000 steps, 250 warmup).
* SQuAD v1.1 / v2.0: the official README's ``run_squad_v1`` / ``run_squad_v2`` commands: lr 5e-5, batch 48, 2 epochs,
  warmup 10 %, max_seq_length 384, doc_stride 128, max_query_length 64 (n_best 20 and max_answer_length 30 are the
  official decoding's, `litebert.tasks.qa_decode`).
* RACE: the official README's ``run_race`` command: lr 1e-5, batch 32, 12,000 steps, 1,000 warmup, max_seq_length
  512, max_qa_length 128.
* CoNLL-2003 and users' own data are not in the paper: BERT-style defaults (lr 2e-5 / 5e-5, batch 32, 3 epochs,
  10 % warmup), marked as such.

``eval_every`` is the official ``save_checkpoints_steps``: the official ``run_classifier`` evaluates every saved
checkpoint on dev and keeps the best, which is what our trainer does while training.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from litebert.checks import AT_LEAST_0, AT_LEAST_1, FRACTION, POSITIVE, check_fields
from litebert.errors import ConfigError
from litebert.tasks.kinds import (
    Classification,
    ExtractiveQA,
    ExtractiveQAWithNoAnswer,
    MultipleChoice,
    Regression,
    TaskKind,
    TokenClassification,
)
from litebert.tasks.readers import GLUE_TASKS


@dataclass(frozen=True)
class TaskPreset:
    name: str
    kind: TaskKind  # what reads, featurizes, predicts and scores; its fields are the data format's parameters
    metric: str  # the dev metric that selects the best checkpoint (higher is better)
    lr: float
    batch_size: int
    train_steps: int | None = None  # None: derived from epochs
    epochs: float | None = None
    warmup_steps: int | None = None  # None: warmup_proportion of the steps
    warmup_proportion: float = 0.1
    max_seq_length: int = 512
    eval_every: int = 100
    labels: tuple[str, ...] | None = None
    source: str = ""

    def __post_init__(self) -> None:
        check_fields(self, _RANGES)
        check_fields(self.kind, _KIND_RANGES, {"format": ("race", "jsonl")})
        if self.train_steps is None and self.epochs is None:
            raise ConfigError(f"TaskPreset {self.name!r}: give train_steps or epochs")

    def to_json(self) -> dict:
        """The preset as finetune.json stores it: the kind by its name, the kind's fields under "extra"."""
        return {**asdict(self), "kind": self.kind.name, "extra": asdict(self.kind)}


def preset_from_json(task: str, saved: dict | None, source: str = "finetune.json") -> TaskPreset:
    """The preset ``task`` with the values a run stored in finetune.json (``TaskPreset.to_json``; e.g. its
    max_seq_length, max_qa_length). Keys this version does not know are ignored, so folders written by earlier
    versions load (their "extra" also held SQuAD's "version", which the task name now tells)."""
    preset = get_preset(task)
    if not saved:
        return preset
    extra = saved.get("extra") or {} if isinstance(saved, dict) else None
    if not isinstance(extra, dict):
        raise ConfigError(f"{source}: 'preset' and its 'extra' must be JSON objects")
    try:
        known = {f.name for f in fields(preset.kind)}
        kind = replace(preset.kind, **{k: v for k, v in extra.items() if k in known})
        known = {f.name for f in fields(TaskPreset)} - {"name", "kind", "labels"}  # labels: finetune.json's own entry
        return replace(preset, kind=kind, **{k: v for k, v in saved.items() if k in known})
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


_RANGES = {"lr": POSITIVE, "batch_size": AT_LEAST_1, "train_steps": AT_LEAST_1, "epochs": POSITIVE,
           "warmup_steps": AT_LEAST_0, "warmup_proportion": FRACTION, "max_seq_length": AT_LEAST_1,
           "eval_every": AT_LEAST_1}
_KIND_RANGES = {name: AT_LEAST_1 for name in ("max_qa_length", "doc_stride", "max_query_length")}


_GLUE_SRC = "google-research/albert run_glue.sh"
# run_glue.sh: run_task NAME warmup lr steps save_steps batch
_GLUE = {
    "sst-2": (1256, 1e-5, 20935, 100, 32),
    "mnli": (1000, 3e-5, 10000, 100, 128),
    "cola": (320, 1e-5, 5336, 100, 16),
    "qnli": (1986, 1e-5, 33112, 200, 32),
    "qqp": (1000, 5e-5, 14000, 100, 128),
    "rte": (200, 3e-5, 800, 100, 32),
    "sts-b": (214, 2e-5, 3598, 100, 16),
    "mrpc": (200, 2e-5, 800, 100, 32),
}
# Official run_classifier picks checkpoints by eval accuracy (Pearson for STS-B); for CoLA we use its GLUE metric.
_GLUE_METRIC = {"cola": "matthews", "sts-b": "pearson"}

PRESETS: dict[str, TaskPreset] = {}
for _name, (_w, _lr, _steps, _save, _bs) in _GLUE.items():
    _labels = GLUE_TASKS[_name]["labels"]
    PRESETS[_name] = TaskPreset(
        _name, Regression(glue=_name) if _labels is None else Classification(glue=_name),
        _GLUE_METRIC.get(_name, "accuracy"), _lr, _bs, train_steps=_steps, warmup_steps=_w, eval_every=_save,
        labels=None if _labels is None else tuple(_labels), source=_GLUE_SRC)
PRESETS["wnli"] = TaskPreset("wnli", Classification(glue="wnli"), "accuracy", 2e-5, 16, train_steps=2000,
                             warmup_steps=250, labels=("0", "1"), source="ALBERT paper, appendix A.4")
_SQUAD = dict(lr=5e-5, batch_size=48, epochs=2.0, warmup_proportion=0.1, max_seq_length=384, eval_every=1000,
              source="google-research/albert README (run_squad_v1 / run_squad_v2)")
_WINDOWS = dict(doc_stride=128, max_query_length=64)
PRESETS["squad1"] = TaskPreset("squad1", ExtractiveQA(**_WINDOWS), "f1", **_SQUAD)
PRESETS["squad2"] = TaskPreset("squad2", ExtractiveQAWithNoAnswer(**_WINDOWS), "best_f1", **_SQUAD)
PRESETS["race"] = TaskPreset("race", MultipleChoice(format="race", max_qa_length=128), "accuracy", 1e-5, 32,
                             train_steps=12000, warmup_steps=1000, max_seq_length=512, eval_every=100,
                             source="google-research/albert README (run_race)")
PRESETS["mc"] = TaskPreset("mc", MultipleChoice(format="jsonl", max_qa_length=128), "accuracy", 2e-5, 32, epochs=3.0,
                           max_seq_length=256, eval_every=200,
                           source="RACE's recipe with epochs instead of steps (not from the paper)")
PRESETS["conll"] = TaskPreset("conll", TokenClassification(), "f1", 5e-5, 32, epochs=3.0, max_seq_length=128,
                              eval_every=200, source="BERT-style NER defaults (not from the paper)")
PRESETS["classify"] = TaskPreset("classify", Classification(), "accuracy", 2e-5, 32, epochs=3.0, max_seq_length=128,
                                 eval_every=200, source="BERT-style defaults for your own data (not from the paper)")
PRESETS["regress"] = TaskPreset("regress", Regression(), "pearson", 2e-5, 32, epochs=3.0, max_seq_length=128,
                                eval_every=200, source="BERT-style defaults for your own data (not from the paper)")
# The bundled Rotten Tomatoes sentiment task (data/finetune/sentiment): SST-2's format and labels.
PRESETS["sentiment"] = TaskPreset("sentiment", Classification(glue="sst-2"), "accuracy", 3e-5, 32, epochs=3.0,
                                  max_seq_length=128, eval_every=100, labels=("0", "1"),
                                  source="BERT-style defaults for a small SST-2-format data set (not from the paper)")

TASKS = ", ".join(PRESETS)  # the task names, as help texts list them

ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "squad": "squad1", "squad-v1": "squad1",
           "squad-v2": "squad2", "squad1.1": "squad1", "squad2.0": "squad2", "ner": "conll", "conll2003": "conll",
           "multiple-choice": "mc", "ax": "mnli"}


def get_preset(task: str) -> TaskPreset:
    name = ALIASES.get(task.lower(), task.lower())
    if name not in PRESETS:
        raise ConfigError(f"unknown task {task!r}; choose one of: {', '.join(sorted(PRESETS))}")
    return PRESETS[name]
