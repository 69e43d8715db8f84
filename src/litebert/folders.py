"""Output folders: the one planner every litebert writer goes through (tokenizer, token store, pretraining run,
fine-tuned model, converted model, experiment).

Every folder a litebert command creates holds a small marker, ``.litebert.json``, naming its kind and whether the
command finished. What each kind writes, at every depth, is its `Layout`. Before anything is written, `plan` decides
what a command does with its output folder, once:

    new        the folder is absent or empty (temporaries of killed writes do not count)
    overwrite  it holds this kind of output and the caller asked to replace it (``overwrite``)
    restart    it holds an unfinished output of a kind that cannot resume (a killed tokenizer or store): replaced
    resume     it holds an unfinished resumable output (a run) and the caller asked to continue it (``resume``)
    finished   it holds a finished resumable output and the caller asked to continue it: nothing to do, unless the
               caller extends it (a pretraining run given more steps)

and refuses, writing nothing, anything else: a file, a folder holding what litebert did not write (at any depth), an
output of another kind, an output that is there without ``resume``/``overwrite``, and an output path that is one of
the command's inputs, lies inside one or holds one. `begin` then locks the folder (a second writer is refused; the
lock is the kernel's and dies with its process), replaces the old output or removes the temporaries of killed writes,
and marks the folder unfinished; `Writer.finish` marks it finished. ``overwrite`` deletes only what the layout owns;
a folder holding anything else is refused before anything is deleted.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from litebert.card import CARD_NAME, is_own_card
from litebert.errors import LitebertError, WriteError, literal
from litebert.files import TEMPORARY, io_failure, process_alive, read_json, write_json

OWNER_FILE = ".litebert.json"
ACTIONS = ("new", "overwrite", "restart", "resume", "finished")


class OutputError(LitebertError, FileExistsError):
    """An output folder cannot be used: it holds files litebert did not write, or another kind of output."""


@dataclass(frozen=True)
class Layout:
    """What one kind of output writes in its folder. ``files``: names (regular expressions, matched whole) of the
    files it writes there; ``folders``: sub-folder name (or pattern) -> the layout of what the sub-folder holds
    (``kind`` None: a plain sub-folder, not an output of its own). ``noun``: how messages name the kind."""

    kind: Optional[str]
    noun: str = ""
    files: tuple[str, ...] = ()
    folders: Mapping[str, "Layout"] = field(default_factory=dict)
    resumable: bool = False
    # An output written before folders carried a marker: recognised by what it holds; returns the marker it implies
    legacy: Optional[Callable[[Path], Optional[dict]]] = None

    def owns_file(self, name: str) -> bool:
        return name == OWNER_FILE or any(re.fullmatch(p, name) for p in self.files)

    def folder_layout(self, name: str) -> Optional["Layout"]:
        return next((lay for p, lay in self.folders.items() if re.fullmatch(p, name)), None)


def _names(*names: str) -> tuple[str, ...]:
    return tuple(re.escape(n) for n in names)


def _legacy(kind: str, needs: tuple[str, ...], complete: Optional[bool]) -> Callable[[Path], Optional[dict]]:
    """A recogniser of ``kind`` outputs without a marker: they hold every name in ``needs``."""
    def recognise(folder: Path) -> Optional[dict]:
        if not all((folder / n).exists() for n in needs):
            return None
        return {"kind": kind, **({} if complete is None else {"complete": complete})}
    return recognise


# The names of the files litebert writes in its folders, here once: the writers and readers use these, and the layouts
# below list them (what a folder of that kind may hold, and `overwrite` may delete)
CHECKPOINT = "step-{step:08d}.pt"  # a training checkpoint (`litebert.engine.checkpoint`), beside it its .sha256
CHECKPOINT_PATTERN = r"step-(\d{8,})\.pt"  # the step in the file name
METRICS_JSONL, TRAIN_CSV, EVAL_CSV, GUARD_CSV = "metrics.jsonl", "train.csv", "eval.csv", "guard.csv"
METRICS_FILES = (METRICS_JSONL, TRAIN_CSV, EVAL_CSV, GUARD_CSV)  # `litebert.engine.metrics_log`
TRACKER_STATE = "trackers.json"  # the tracker runs' ids (`litebert.engine.trackers`)
TRAIN_CONFIG = "train_config.json"  # a pretraining run's settings (`litebert.pretraining.run`)
FINETUNE_META = "finetune.json"  # a fine-tuned folder's task, labels and results (`litebert.inference.finetuned`)
GRID = "grid.json"  # a learning-rate grid's runs (`litebert.finetuning.grid`)
SEARCH = "search.json"  # a search's trials, their settings and scores (`litebert.finetuning.search`)

TOKENIZER_FILES = _names("spiece.model", "spiece.vocab", "vocab.txt", "tokenizer_config.json", "tokenizer.json",
                         "special_tokens_map.json")
# README.md: litebert's model card (`litebert.card`); a README.md without its marker is the user's (`foreign`)
_CARD = re.escape(CARD_NAME)
MODEL_FILES = _names("config.json", "model.safetensors", "litebert_model.safetensors") + (_CARD,) + TOKENIZER_FILES
TENSORBOARD = Layout(None, files=(r"events\.out\.tfevents\..+",))
_W_AND_B_RUN_FOLDERS: dict = {}
W_AND_B_RUN = Layout(None, files=(r".+",), folders=_W_AND_B_RUN_FOLDERS)  # one W&B run's own tree: all of it
_W_AND_B_RUN_FOLDERS[r".+"] = W_AND_B_RUN
# What W&B writes in a run's wandb/ (`litebert.engine.trackers`): a folder per W&B run (run-DATE_TIME-ID, offline-run-
# ...), the links to the latest, and its own debug logs (logs/). Only these: a user's file there is not W&B's, and
# overwrite refuses to delete it.
WANDB = Layout(None, files=_names("latest-run", "debug.log", "debug-internal.log"),
               folders={r"(?:offline-)?run-\d{8}_\d{6}-[^/]+": W_AND_B_RUN,
                        "logs": Layout(None, files=(r"(?:core|symon)-debug-\d{8}_\d{6}\.log",))})
CHECKPOINTS = Layout(None, files=(CHECKPOINT_PATTERN + r"(?:\.sha256)?",))
TOKENIZER = Layout("tokenizer", "tokenizer", TOKENIZER_FILES)
ADAPTER = Layout("adapter", "adapter", _names("adapter_config.json", "adapter_model.safetensors"))  # peft's, HF names
MODEL = Layout("model", "model", MODEL_FILES)
STORE = Layout("token-store", "token store", ("manifest.json", r"word_start\.npy", r"normal_ids\.npy",
                                              r"shard-\d{5,}\.(?:tokens|sentences|documents)"),
               {"tokenizer": Layout(None, files=TOKENIZER_FILES)},
               legacy=_legacy("token-store", ("manifest.json",), None))
RUN = Layout("pretraining-run", "pretraining run", _names(TRAIN_CONFIG, *METRICS_FILES, TRACKER_STATE),
             {"checkpoints": CHECKPOINTS, "model": Layout(None, files=MODEL_FILES), "tensorboard": TENSORBOARD,
              "wandb": WANDB},
             resumable=True, legacy=_legacy("pretraining-run", (TRAIN_CONFIG, "checkpoints"), False))
_FINETUNED_FOLDERS: dict = {"checkpoints": CHECKPOINTS, "tensorboard": TENSORBOARD, "wandb": WANDB,
                            "adapter": Layout(None, files=_names("adapter_config.json", "adapter_model.safetensors"))}
FINETUNED = Layout("fine-tuned-model", "fine-tuned model",
                   MODEL_FILES + _names(FINETUNE_META, "answerability.safetensors", METRICS_JSONL, TRAIN_CSV, EVAL_CSV,
                                        TRACKER_STATE, GRID, SEARCH),
                   _FINETUNED_FOLDERS, resumable=True, legacy=_legacy("fine-tuned-model", (FINETUNE_META,), True))
_FINETUNED_FOLDERS[r"lr-[^/]+"] = FINETUNED  # a learning-rate grid's runs, one per rate (`litebert.finetuning.grid`)
# a search's runs: one per trial, or one per trial and seed (`litebert.finetuning.search`)
_FINETUNED_FOLDERS[r"trial-\d+(?:-seed-\d+)?"] = FINETUNED
EXPERIMENT = Layout("experiment", "experiment", _names("experiment.json", "results.json", "results.md", "curves.png",
                                                       "speedup.png"),
                    {"data": Layout(None, folders={"text": Layout(None, files=_names("train.txt", "heldout.txt")),
                                                   "train": STORE, "heldout": STORE}),
                     "arms": Layout(None, folders={r"[^/]+": Layout(None, files=_names("scores.json"), folders={
                         "pretrain": RUN, "sentiment": FINETUNED, "mc": FINETUNED})}),
                     "baselines": Layout(None, files=_names("baselines.json"), folders={"from-scratch": Layout(
                         None, folders={r"model(?:\.partial)?": Layout(None, files=MODEL_FILES),
                                        # a learning-rate grid (lr-RATE/ each), or one run in place
                                        r"sentiment|mc": FINETUNED})}),
                     "timing": Layout(None, folders={r"[^/]+": RUN}),
                     "speedup": Layout(None, files=(r"[^/]+\.json",))},
                    resumable=True)

LABEL_EFFICIENCY = Layout(
    "label-efficiency", "label-efficiency experiment",
    _names("experiment.json", "results.json", "results.md", "label-efficiency.png"),
    {"subsets": Layout(None, files=(r"n\d+-seed\d+\.[A-Za-z.]+",)),
     "control-init": Layout(None, folders={r"seed-\d+(?:\.partial)?": Layout(None, files=MODEL_FILES)}),
     "tapt": Layout(None, files=_names("tapt.json"), folders={"text": Layout(None, files=_names("train.txt")),
                                                             "store": STORE, "run": RUN}),
     "runs": Layout(None, folders={r"[^/]+": Layout(None, files=(r"n[^/]+-seed\d+\.json",),
                                                    folders={r"n[^/]+-seed\d+": FINETUNED})}),
     "bag-of-words": Layout(None, files=(r"n[^/]+-seed\d+\.json",))},
    resumable=True)

GATE = Layout("recipe-gate", "recipe gate", _names("gate.json", "gate.md"), {r"proxy(?:-[0-9.]+x)?": RUN})

LAYOUTS = (TOKENIZER, MODEL, STORE, RUN, FINETUNED, EXPERIMENT, LABEL_EFFICIENCY, GATE, ADAPTER)


# ---------------------------------------------------------------------------------------------------- reading
def read_marker(folder: str | os.PathLike) -> dict:
    """The marker of an output folder as a dict ({} when there is none or it cannot be read)."""
    try:
        return read_json(Path(folder) / OWNER_FILE, LitebertError)
    except LitebertError:
        return {}


def output_kind(folder: str | os.PathLike) -> Optional[str]:
    """The kind of litebert output ``folder`` holds according to its marker, or None (no marker, unreadable)."""
    kind = read_marker(folder).get("kind")
    return kind if isinstance(kind, str) else None


def entries(folder: Path) -> list[Path]:
    """What a folder holds, without the temporaries of writes in progress or killed (``.NAME.tmp-PID``)."""
    return sorted(p for p in folder.iterdir() if not TEMPORARY.match(p.name))


def foreign(folder: Path, layout: Layout, prefix: str = "") -> list[str]:
    """The paths under ``folder`` (relative, at any depth) that ``layout`` does not own: what a user put there.
    A sub-folder that is a litebert output of its own is judged by its own kind's layout; a README.md by its content
    (a model card is litebert's only when it carries litebert's marker)."""
    out = []
    for p in entries(folder):
        rel = f"{prefix}{p.name}"
        sub = layout.folder_layout(p.name) if p.is_dir() and not p.is_symlink() else None
        if sub is not None:
            out += foreign(p, sub, rel + "/")
        elif (not (p.is_file() or p.is_symlink()) or not layout.owns_file(p.name)
              or (p.name == CARD_NAME and _CARD in layout.files and not (p.is_file() and not p.is_symlink()
                                                                           and is_own_card(p)))):
            out.append(rel + ("/" if p.is_dir() else ""))
    return out


# ---------------------------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class FolderPlan:
    """What a command does with its output folder, decided by `plan` before anything is written."""

    out: Path
    layout: Layout
    action: str
    marker: dict  # the folder's marker (for an output written before markers: the one it implies)
    on_disk: dict = field(default_factory=dict)  # the marker file as `plan` read it (`begin` checks it is unchanged)

    @property
    def replaces(self) -> bool:
        """Whether `begin` deletes an old output first."""
        return self.action in ("overwrite", "restart")


def plan(out: str | os.PathLike, layout: Layout, *, resume: bool = False, overwrite: bool = False,
         inputs: Mapping[str, Any] | None = None) -> FolderPlan:
    """Decide what to do with ``out`` (see the module docstring), writing nothing; `OutputError` when it must not be
    touched. ``inputs``: {argument name: path} of what the command reads; ``out`` must be apart from each."""
    from litebert.errors import ConfigError

    out = Path(out)
    check_apart(out, inputs or {})
    if resume and overwrite:
        raise ConfigError("{resume:flag} continues the output in {out:value} and {overwrite:flag} replaces it: give "
                          "one of them", resume=True, overwrite=True, out=out)
    on_disk = _holds_output(out, layout)
    if on_disk is None:
        return FolderPlan(out, layout, "new", {})
    marker = on_disk or layout.legacy(out)
    finished = marker.get("complete") is not False
    if overwrite:
        action = "overwrite"
    elif not finished and not layout.resumable:
        action = "restart"  # a killed command's output: nothing in it can be continued
    elif resume and layout.resumable:
        action = "finished" if finished else "resume"
    else:
        raise _occupied(out, layout, marker, finished)
    if action in ("overwrite", "restart"):
        _check_owned(out, layout)
    return FolderPlan(out, layout, action, marker, on_disk)


def _holds_output(out: Path, layout: Layout) -> Optional[dict]:
    """The marker of the ``layout`` output in ``out`` ({} for one written before markers), None when ``out`` is
    absent or empty; `OutputError` for anything else."""
    if not out.exists() and not out.is_symlink():
        return None
    if not out.is_dir():
        raise OutputError("{out} is a file; give a folder", out=out)
    found = entries(out)
    if not found:
        return None
    kind = output_kind(out)
    if kind is None and layout.legacy is not None and not (out / OWNER_FILE).exists() and layout.legacy(out) \
            and not foreign(out, layout):
        return {}
    if kind is None:
        shown = ", ".join(p.name for p in found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
        raise OutputError("{out} is not empty and was not written by litebert (it holds " + shown + "); choose a new "
                          "or empty folder", out=out)
    if kind != layout.kind:
        noun = next((lay.noun for lay in LAYOUTS if lay.kind == kind), kind)
        raise OutputError("{out} holds a litebert " + noun + ", not " + _article(layout.noun)
                          + "; choose another folder",
                          out=out)
    return read_marker(out)


def _occupied(out: Path, layout: Layout, marker: dict, finished: bool) -> OutputError:
    if not layout.resumable:
        return OutputError("{out} already holds a litebert " + layout.noun + "; pass {overwrite:flag} to replace it, "
                           "or choose another folder", out=out, overwrite=True)
    state = ("finished" if finished else "not finished") + (f", step {marker['step']}" if "step" in marker else "")
    hint = ("pass {overwrite:flag} to replace it" if finished else
            "continue it with {resume:flag}, start again with {overwrite:flag} (deletes what it wrote)")
    return OutputError("{out} already holds a " + layout.noun + f" ({state}); " + hint + ", or choose another folder",
                       out=out, resume=True, overwrite=True)


def _check_owned(out: Path, layout: Layout) -> None:
    """Refuse to replace an output whose folder holds anything its layout does not own, at any depth."""
    alien = foreign(out, layout)
    if alien:
        shown = ", ".join(alien[:4]) + (", ..." if len(alien) > 4 else "")
        raise OutputError("{out} holds files a " + layout.noun + " does not write (" + shown + "); move them out "
                          "first: {overwrite:flag} deletes only what litebert wrote", out=out, overwrite=True)


def check_apart(out: str | os.PathLike, inputs: Mapping[str, Any], name: str = "out") -> None:
    """Refuse (`OutputError`) an output path (the argument ``name``) that is one of ``inputs`` ({argument name:
    path}), lies inside one, or holds one: writing there could replace or delete what the command reads."""
    target = resolved(out, name)
    for key, given in inputs.items():
        for path in (given if isinstance(given, (list, tuple)) else [given]):
            if path is None or str(path) == "":
                continue
            other = resolved(path, key)
            how = ("is the same path as" if target == other else "lies inside" if other in target.parents
                   else "holds" if target in other.parents else None)
            if how is not None:
                raise OutputError("{" + name + "} " + how + " {" + key + "}; write to " + (
                    "a folder outside it" if how == "lies inside" else "a folder that does not contain it"
                    if how == "holds" else "another path"), **{name: out, key: path})


def resolved(path: str | os.PathLike, name: str) -> Path:
    """``path`` made absolute with its links followed; a link loop is an `OutputError` naming the argument."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as e:  # Python raises RuntimeError("Symlink loop ...") for a loop
        raise OutputError("{" + name + "}: cannot follow its symbolic links (" + literal(e) + ")",
                          **{name: path}) from None


def plan_file(path: str | os.PathLike, *, name: str = "output", overwrite: bool = False,
              inputs: Mapping[str, Any] | None = None) -> Path:
    """Check, writing nothing, that a command may write the file ``path`` (the argument ``name``): apart from its
    ``inputs``, not a folder, not inside a folder that holds a litebert output or a model (what is there belongs to
    it), and, when a file is there already, only with ``overwrite``: litebert cannot tell a file it wrote from one
    the user keeps there."""
    path = Path(path)
    check_apart(path, inputs or {}, name=name)
    if path.is_dir():
        raise OutputError("{" + name + "} is a folder; give the file to write", **{name: path})
    owner = _owning_folder(path)
    if owner is not None:
        raise OutputError("{" + name + "} lies inside " + literal(owner) + ", a folder holding a litebert output or a "
                          "model; write outside it", **{name: path})
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise OutputError("{" + name + "} exists; pass {overwrite:flag} to replace it, or choose another name",
                          **{name: path, "overwrite": True})
    return path


def _owning_folder(path: Path) -> Optional[Path]:
    """The nearest folder above ``path`` that is a litebert output (its marker) or a model or token store (its
    config.json or manifest.json), if any."""
    try:
        parents = list(path.resolve().parents)
    except (OSError, RuntimeError):  # a symlink loop: check_apart has said so already
        return None
    if (parents[0] / "config.json").is_file() or (parents[0] / "manifest.json").is_file():
        return parents[0]
    return next((p for p in parents if (p / OWNER_FILE).is_file()), None)


# ---------------------------------------------------------------------------------------------------- writing
class Writer:
    """An output folder being written: holds its lock until `close` (also on exit from a ``with`` block)."""

    def __init__(self, plan_: FolderPlan, fd: int):
        self.plan, self.out, self._fd = plan_, plan_.out, fd

    def mark(self, complete: bool, **info: Any) -> None:
        """Rewrite the marker: finished or not, with ``info`` (e.g. the step a run reached)."""
        mark(self.out, self.plan.layout.kind, complete=complete, **info)

    def finish(self, **info: Any) -> None:
        self.mark(True, **info)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def begin(plan_: FolderPlan, **info: Any) -> Writer:
    """Start writing the planned output: lock the folder (creating it), check that nothing changed since `plan`,
    delete the old output (``overwrite``/``restart``) or the temporaries of killed writes, and mark the folder an
    unfinished output of its kind with ``info``. Call on one process only (rank 0)."""
    out = plan_.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError("{out}: cannot create the folder (" + literal(io_failure(e) or e) + ")", out=out) from None
    fd = lock(out)
    try:
        if read_marker(out) != plan_.on_disk:
            raise OutputError("{out} changed while this command checked it (another litebert process?); run the "
                              "command again", out=out)
        if plan_.replaces:
            clear(out, plan_.layout)
        else:
            remove_stale_temporaries(out, recursive=True)
        mark(out, plan_.layout.kind, complete=False, **info)
    except BaseException:
        os.close(fd)
        raise
    return Writer(plan_, fd)


def lock(folder: Path) -> int:
    """An exclusive advisory lock on ``folder`` (flock on the folder itself: nothing is written, and a killed
    process's lock goes with it); `OutputError` when another process holds it. Returns the descriptor to close."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputError("{out} is being written by another litebert process; wait for it to finish or choose "
                          "another folder", out=folder) from None
    return fd


def clear(out: Path, layout: Layout) -> None:
    """Delete the ``layout`` output in ``out`` (checked to hold nothing else), keeping the marker."""
    _check_owned(out, layout)
    for p in out.iterdir():
        if p.name != OWNER_FILE:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def mark(folder: str | os.PathLike, kind: Optional[str], **info: Any) -> Path:
    """Create ``folder`` if needed and write its marker: ``{"kind": kind, "litebert_version": ..., **info}``."""
    from litebert import __version__

    return write_json(Path(folder) / OWNER_FILE, {"kind": kind, "litebert_version": __version__, **info})


def remove_stale_temporaries(folder: str | os.PathLike, recursive: bool = False) -> list[Path]:
    """Remove the temporaries (``.NAME.tmp-PID``, ``.NAME.old-PID``) that killed litebert processes left in
    ``folder``; those of a process still running are kept. Returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for path in list(folder.rglob("*") if recursive else folder.iterdir()):
        m = TEMPORARY.match(path.name)
        if m and not process_alive(int(m.group(1))):
            try:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun
