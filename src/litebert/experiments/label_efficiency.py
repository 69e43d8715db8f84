"""`label_efficiency`: what pretraining buys per label. A pretrained model, the same architecture from random
weights (the control), optionally the pretrained model adapted to the task's unlabelled texts first (task-adaptive
pretraining, `litebert.experiments.tapt`), and a bag of words are each trained on N labelled examples, for several N
and seeds; every neural model at rates chosen on dev (a grid that extends itself until the choice is bracketed,
`litebert.finetuning.grid`), the bag of words at its C chosen on dev; each scored once on test.

    OUT/experiment.json          the settings (re-running with the same settings continues the folder)
    OUT/subsets/nN-seedS.EXT     the N training examples of seed S (a seeded sample without replacement, in the
                                 training file's own format)
    OUT/control-init/seed-S/     the control's random weights for seed S
    OUT/tapt/                    task-adaptive pretraining (text/, store/, run/, tapt.json: settings, minutes)
    OUT/runs/ARM/nN-seedS/       each fine-tuning (a learning-rate grid); ARM/nN-seedS.json its scores
    OUT/bag-of-words/nN-seedS.json
    OUT/results.json, results.md, label-efficiency.png   mean and standard deviation over seeds, per arm and N

The seed S draws the subset, the control's weights and the fine-tuning's data order; every arm sees the same subset.
Dev is the task's whole dev split at every N (it chooses rates and checkpoints, so dev scores are optimistic); the
test accuracy of what dev chose is the figure to read.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from litebert import folders, hub
from litebert.checks import AT_LEAST_0, AT_LEAST_1, LEARNING_RATE, POSITIVE, check_fields
from litebert.errors import ConfigError, DataError, literal
from litebert.experiments import label_report
from litebert.files import atomic_write, read_json, write_json

ARMS = ("pretrained", "tapt", "control")  # fine-tuned arms, in the report's order; the bag of words comes after
DEFAULT_SIZES = (250, 500, 1000, 2000, None)  # None: the whole training split


@dataclass(frozen=True)
class LabelSettings:
    """The experiment's settings. ``sizes``: labelled training examples per run (None: all of them); ``seeds``
    seeds per size below the whole split, ``full_seeds`` at the whole split (each seed a subset, an initialisation
    and a data order), seeds ``seed``, ``seed + 1``, ...; ``lrs``/``control_lrs``: the pretrained (and adapted) and
    the from-scratch models' rate grids, each extended by up to ``lr_grid_extend`` rates beyond an edge dev picks;
    a run lasts ``epochs`` over its examples but at least ``min_steps`` steps (small N would otherwise stop after a
    few steps), with ``evaluations`` dev evaluations; ``tapt_steps`` > 0 adds the task-adapted arm."""

    task: str = "sentiment"
    sizes: tuple[int | None, ...] = DEFAULT_SIZES
    seeds: int = 3
    full_seeds: int = 1
    seed: int = 0
    lrs: tuple[float, ...] = (1e-4, 3e-4)
    control_lrs: tuple[float, ...] = (1e-4, 3e-4)
    lr_grid_extend: int = 2
    epochs: float = 3.0
    min_steps: int = 150
    batch_size: int = 32
    seq_len: int = 128
    evaluations: int = 4
    control: bool = True
    bag_of_words: bool = True
    tapt_steps: int = 0
    tapt_lr: float = 1e-3
    tapt_batch_size: int = 16

    def __post_init__(self) -> None:
        for name in ("sizes", "lrs", "control_lrs"):  # a list from Python or JSON is the tuple it stands for
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        check_fields(self, {**dict.fromkeys(("seeds", "full_seeds", "min_steps", "batch_size", "seq_len",
                                             "evaluations", "tapt_batch_size"), AT_LEAST_1),
                            **dict.fromkeys(("lr_grid_extend", "tapt_steps", "seed"), AT_LEAST_0),
                            "epochs": POSITIVE, "tapt_lr": LEARNING_RATE})
        if not self.sizes or any(n is not None and n < 1 for n in self.sizes):
            raise ConfigError("{sizes}: expected one or more whole numbers of examples of at least 1 (or 'all')",
                              sizes=",".join("all" if n is None else str(n) for n in self.sizes))
        for name in ("lrs", "control_lrs"):
            if not getattr(self, name) or not all(LEARNING_RATE.holds(x) for x in getattr(self, name)):
                raise ConfigError("{" + name + "}: expected one or more learning rates in (0, 1)",
                                  **{name: ",".join(f"{x:g}" for x in getattr(self, name))})
        object.__setattr__(self, "sizes", tuple(dict.fromkeys(self.sizes)))
        object.__setattr__(self, "lrs", tuple(float(x) for x in self.lrs))
        object.__setattr__(self, "control_lrs", tuple(float(x) for x in self.control_lrs))

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(a for a in ARMS if a == "pretrained" or (a == "tapt" and self.tapt_steps)
                     or (a == "control" and self.control))

    def seeds_at(self, n: Optional[int]) -> list[int]:
        return [self.seed + i for i in range(self.full_seeds if n is None else self.seeds)]

    def steps(self, n: int) -> int:
        return max(self.min_steps, math.ceil(self.epochs * n / self.batch_size))

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def size_name(n: Optional[int]) -> str:
    return "all" if n is None else str(n)


def cell_name(n: Optional[int], seed: int) -> str:
    return f"n{size_name(n)}-seed{seed}"


# ---------------------------------------------------------------------------------------------------- data


@dataclass
class TaskData:
    """The task's splits: their files and examples (read once, as `finetune` reads them)."""

    files: dict  # split -> Path
    examples: dict  # split -> list of examples
    metric: str


def read_task(task: str, data: Path) -> TaskData:
    """The train, dev and test splits of a sentence-classification task's data folder, each read by the task's
    reader (`DataError` naming what is missing)."""
    from litebert.tasks.kinds import Classification
    from litebert.tasks.presets import PRESETS
    from litebert.tasks.sources import find_split

    if task not in PRESETS or not isinstance(PRESETS[task].kind, Classification):
        known = sorted(t for t, p in PRESETS.items() if isinstance(p.kind, Classification))
        raise ConfigError("{task}: label efficiency runs on a sentence-classification task: one of "
                          + ", ".join(known), task=task)
    if not Path(data).is_dir():
        raise DataError("{data}: no such folder (a task's data folder with train, dev and test files)", data=data)
    preset = PRESETS[task]
    files, examples = {}, {}
    for split in ("train", "dev", "test"):
        path = find_split(data, split)
        if path is None or not path.is_file():
            raise DataError("{data}: no " + split + " file (train.tsv, dev.tsv, test.tsv, or .jsonl/.csv, "
                            "optionally .gz)", data=data)
        files[split], examples[split] = path, preset.kind.read(path)
        if not examples[split]:
            raise DataError(f"{literal(path)}: no examples")
    return TaskData(files, examples, preset.metric)


def _lines(path: Path) -> list[str]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [line for line in raw.decode("utf-8-sig").split("\n") if line.strip()]


def subset_indices(n_examples: int, n: int, seed: int) -> np.ndarray:
    """``n`` of ``n_examples`` training examples, drawn without replacement from ``seed``, in the file's order."""
    return np.sort(np.random.default_rng([seed, n]).choice(n_examples, size=n, replace=False))


def write_subset(train: Path, examples: list, indices: np.ndarray, out: Path) -> Path:
    """The training file's lines of ``indices`` (its header kept) written to ``out`` in the file's own format: a
    file whose examples are not one per line (a CSV with quoted line breaks) cannot be cut so and is refused."""
    lines = _lines(train)
    header = len(lines) - len(examples)
    if header not in (0, 1):
        raise DataError(f"{literal(train)}: {len(examples):,} examples on {len(lines):,} lines: subsets are cut by "
                        "lines, one example each; give a file with one example per line (TSV or JSON lines)")
    chosen = lines[:header] + [lines[header + int(i)] for i in indices]
    atomic_write(out, "\n".join(chosen) + "\n")
    return out


def subset_file(out: Path, data: TaskData, n: Optional[int], seed: int) -> tuple[Path, np.ndarray]:
    """The training file of one cell and the indices of its examples (all of them when ``n`` is None)."""
    train = data.files["train"]
    total = len(data.examples["train"])
    if n is None:
        return train, np.arange(total)
    idx = subset_indices(total, n, seed)
    suffix = "".join(s for s in train.suffixes if s != ".gz") or ".tsv"
    path = out / "subsets" / f"{cell_name(n, seed)}{suffix}"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_subset(train, data.examples["train"], idx, path)
    return path, idx


# ---------------------------------------------------------------------------------------------------- arms


def control_init(model: Path, out: Path, seed: int) -> Path:
    """The model's architecture with weights drawn from ``seed`` (the from-scratch control), saved once."""
    import torch

    from litebert.heads import AlbertForPreTraining
    from litebert.io.hf_folder import load_config

    folder = out / "control-init" / f"seed-{seed}"
    if not (folder / "config.json").is_file():
        partial = folder.with_name(folder.name + ".partial")
        torch.manual_seed(seed)
        AlbertForPreTraining(load_config(model)).save_pretrained(partial)
        partial.rename(folder)
    return folder


def bag_of_words_cell(out: Path, data: TaskData, n: Optional[int], seed: int, idx: np.ndarray) -> dict:
    from litebert.tasks.baselines import bag_of_words

    path = out / "bag-of-words" / f"{cell_name(n, seed)}.json"
    if path.is_file():
        return read_json(path, ConfigError)
    train = [data.examples["train"][int(i)] for i in idx]

    def part(examples):
        return [_text(e) for e in examples], [e.label for e in examples]

    r = bag_of_words(part(train), {s: part(data.examples[s]) for s in ("dev", "test")})
    row = {"dev": r["dev_accuracy"], "test": r["test_accuracy"], "C": r["C"]}
    write_json(path, row)
    return row


def _text(example) -> str:
    return example.text_a if not getattr(example, "text_b", None) else f"{example.text_a} {example.text_b}"


def finetune_cell(out: Path, arm: str, model: Path, tokenizer: Path, data: TaskData, train_file: Path,
                  n_train: int, n: Optional[int], seed: int, s: LabelSettings, device, progress: bool) -> dict:
    """One arm at one size and seed: its rate grid fine-tuned (`litebert.finetune`), the chosen model scored on
    test (`litebert.evaluate`); reused when finished earlier."""
    from litebert.finetuning.config import FinetuneConfig
    from litebert.finetuning.run import finetune
    from litebert.inference.predict import evaluate

    record = out / "runs" / arm / f"{cell_name(n, seed)}.json"
    if record.is_file():
        return read_json(record, ConfigError)
    folder = out / "runs" / arm / cell_name(n, seed)
    steps = s.steps(n_train)
    started = time.perf_counter()
    config = FinetuneConfig(seed=seed, max_steps=steps, eval_every=max(1, math.ceil(steps / s.evaluations)),
                            batch_size=s.batch_size, seq_len=s.seq_len, warmup_proportion=0.1, bias_correction=True)
    lrs = s.control_lrs if arm == "control" else s.lrs
    result = finetune(s.task, model, train_file, folder, dev=data.files["dev"], tokenizer=tokenizer, config=config,
                      resume=bool(folders.read_marker(folder)), device=device, progress=progress, log=None,
                      lr_grid=list(lrs), lr_grid_extend=s.lr_grid_extend)
    if result.interrupted:
        raise KeyboardInterrupt
    test = evaluate(folder, data.files["test"], device=device, progress=False)
    grid = read_json(folder / "grid.json", ConfigError)
    row = {"dev": float(result.best_metrics[data.metric]), "test": float(test.metrics[data.metric]),
           "lr": result.lr, "steps": steps, "best_step": result.best_step,
           "grid": {f"{r['lr']:g}": r["score"] for r in result.grid},
           "added": [a["lr"] for a in grid.get("added") or []],
           "minutes": round((time.perf_counter() - started) / 60, 2)}
    write_json(record, row)
    return row


# ---------------------------------------------------------------------------------------------------- the run


def changed_settings(out: Path, s: LabelSettings) -> list[tuple[str, Any, Any]]:
    """The settings in which the experiment recorded in ``out`` (experiment.json) differs from ``s``, each as
    ``(name, there, now)`` sorted by name; empty when ``out`` records none or the same."""
    if not (out / "experiment.json").is_file():
        return []
    old, new = read_json(out / "experiment.json", ConfigError).get("settings", {}), s.to_json()
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def _open(out: Path, s: LabelSettings, inputs: dict) -> folders.FolderPlan:
    plan = folders.plan(out, folders.LABEL_EFFICIENCY, resume=True, inputs=inputs)
    changed = changed_settings(out, s) if plan.action != "new" else []
    if changed:
        k, there, now = changed[0]
        raise ConfigError("{out} holds a label-efficiency experiment with other settings (" + literal(
            f"{k}: {there!r} there, {now!r} now") + "); give the same settings to continue it, or choose another "
            "folder", out=out)
    return plan


def label_efficiency(model: str | Path, out: str | Path, *, data: str | Path, tokenizer: str | Path | None = None,
                     settings: Optional[LabelSettings] = None, device: Optional[str] = None, progress: bool = True,
                     log=print) -> dict:
    """Run (or continue) the label-efficiency experiment of the pretrained ``model`` folder on the task data folder
    ``data`` (train/dev/test files) in ``out``; ``tokenizer`` default the model folder's. Returns the summary also
    written to results.json (with results.md and label-efficiency.png). Settings, data and folder are checked before
    the first write."""
    from litebert.io.hf_folder import load_config

    s = settings or LabelSettings()
    model, out, data = Path(model), Path(out), Path(data)
    tokenizer = Path(tokenizer) if tokenizer is not None else model
    hub.model_folder(model)  # a model folder, or a one-line error naming it
    load_config(model)
    task = read_task(s.task, data)
    total = len(task.examples["train"])
    too_many = [n for n in s.sizes if n is not None and n >= total]
    if too_many:
        raise ConfigError("{sizes}: " + f"{too_many[0]:,} examples is not a subset of the {total:,} training examples "
                          "(use 'all' for the whole split)", sizes=",".join(size_name(n) for n in s.sizes))
    plan = _open(out, s, {"model": model, "data": data})
    say = log or (lambda *_: None)
    started = time.perf_counter()
    with folders.begin(plan) as writer:
        write_json(out / "experiment.json", {"settings": s.to_json(), "model": str(model.resolve()),
                                             "data": str(data.resolve()), "tokenizer": str(tokenizer.resolve())})
        models = {"pretrained": model}
        tapt = None
        if s.tapt_steps:
            from litebert.experiments.tapt import TaptSettings, adapt

            tapt = adapt(model, tokenizer, task.examples["train"], out / "tapt",
                         TaptSettings(s.tapt_steps, lr=s.tapt_lr, batch_size=s.tapt_batch_size, seed=s.seed),
                         device=device, progress=progress, log=say)
            models["tapt"] = Path(tapt["model"])
        cells = []
        for n in sorted(s.sizes, key=lambda n: math.inf if n is None else n):
            for seed in s.seeds_at(n):
                train_file, idx = subset_file(out, task, n, seed)
                row = {"n": len(idx), "size": size_name(n), "seed": seed}
                if s.bag_of_words:
                    row["bag_of_words"] = bag_of_words_cell(out, task, n, seed, idx)
                for arm in s.arms:
                    start = control_init(model, out, seed) if arm == "control" else models[arm]
                    row[arm] = finetune_cell(out, arm, start, tokenizer, task, train_file, len(idx), n, seed, s,
                                             device, progress)
                say(label_report.cell_line(row, s.arms))
                cells.append(row)
            summary = label_report.summarize(s, task, cells, tapt)
            label_report.write(out, summary)  # the sizes done so far: a long run shows its curve as it grows
        writer.finish()
    say(f"done in {(time.perf_counter() - started) / 60:.1f} min: {out / 'results.md'}, {out / 'results.json'}")
    return summary
