"""The run planner's decisions (`litebert.engine.plan`): `open_run`, then `plan_run`, as `litebert.pretrain` calls
them, on every state a run folder can be in, crossed with ``resume``/``overwrite``/``max_steps``.

The expected decisions are those docs/pretraining.md states ("Run folders: new, resumed, overwritten, finished", the
``--max-steps`` and ``--resume`` rows of the settings table, "Checkpoints and resume", "Extending a run") and the
docstrings of `litebert.folders` and `litebert.pretraining.run.pretrain` (``max_steps`` None: 1000 for a new run, the
run's own for a resumed one). Planning writes nothing: every case checks that the folder is as it was, to the byte
and the modification time.

The folders are made by litebert's own writers: tiny real runs (`litebert.pretrain`, the ``tiny`` preset on the
``tiny_setup`` store) finished, stopped (``stop_after``) and killed before their first checkpoint (a callback raising
at step 1, as a crash would), built once for the module and copied for each case.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from helpers import snapshot
from litebert import folders
from litebert.engine import distributed as D
from litebert.engine.callbacks import Callback
from litebert.engine.plan import machine, open_run, plan_run
from litebert.errors import CheckpointError, ConfigError, LitebertError
from litebert.folders import OutputError
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.identity import run_identity
from litebert.pretraining.run import DEFAULT_MAX_STEPS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend

# The runs' settings (a batch of 4 in micro-batches of 2: the checkpoints record micro-batch 2); every call below
# plans with the same ones unless a case changes one
TRAIN = dict(batch_size=4, micro_batch=2, seq_len=64, max_predictions=10, lr=0.005, warmup_steps=1, save_every=2,
             keep_last=2, seed=3, report_to="none")
NEW_RUN_STEPS = 1000  # docs/pretraining.md, --max-steps: the default of a new run


class Crash(Exception):
    """A run's process dying at step 1, before its first checkpoint (save_every 2)."""


class CrashAtStep1(Callback):
    def on_step(self, step, record):
        raise Crash


@dataclass(frozen=True)
class Runs:
    """The module's folders (read only: each case copies what it uses) and what the planner is given."""

    root: Path
    store: Path
    model: object  # the model the runs trained (its config is the identity's)
    data: object  # their training data (its fingerprint is the identity's)


@pytest.fixture(scope="module")
def runs(tiny_setup, tmp_path_factory) -> Runs:
    import torch

    import litebert
    from litebert.config import AlbertConfig
    from litebert.data.pretraining import PretrainingDataset
    from litebert.heads import AlbertForPreTraining

    root = tmp_path_factory.mktemp("plan_runs")
    store = tiny_setup["store"]

    def pretrain(name, max_steps, **kw):
        return litebert.pretrain(store, root / name, model="tiny", train=TrainConfig(max_steps=max_steps, **TRAIN),
                                 progress=False, **kw)

    finished = pretrain("finished", 4)  # checkpoints at steps 2 and 4, model/ at 4
    assert finished.complete and finished.step == 4
    stopped = pretrain("stopped", 8, stop_after=4)  # checkpoints at steps 2 and 4, of a run of 8
    assert stopped.interrupted and stopped.step == 4
    with pytest.raises(Crash):
        pretrain("killed", 8, callbacks=[CrashAtStep1()])
    assert not list((root / "killed").glob("checkpoints/*"))

    # The identity's inputs, as the runs had them: the tiny preset with the store's vocabulary, the store read with
    # the runs' data settings
    data = PretrainingDataset(store, max_seq_length=TRAIN["seq_len"], max_predictions_per_seq=TRAIN["max_predictions"],
                              seed=TRAIN["seed"], verify=False)
    torch.manual_seed(TRAIN["seed"])
    model = AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=data.facts.vocab_size))
    return Runs(root, store, model, data)


def decide(out: Path, runs: Runs, *, resume: bool, overwrite: bool, max_steps: Optional[int], **changes):
    """What `pretrain` decides for ``out`` before it writes: `open_run` (a finished run: nothing to do), then
    `plan_run` with this run's identity. Returns (action, start step, steps to train to, notices, micro-batch)."""
    cfg = TrainConfig(max_steps=max_steps, **{**TRAIN, **changes})
    opening = open_run(out, folders.RUN, cfg, resume=resume, overwrite=overwrite, max_steps=cfg.max_steps,
                       extendable=True, inputs={"data": runs.store, "eval_data": None, "tokenizer": None,
                                                "init_from": None},
                       hub_ids={"tokenizer": "tokenizer", "init_from": "model"})
    if opening.finished:
        return "finished", opening.done_step, opening.done_step, (), None
    plan = plan_run(opening, machine(cfg, D.Distributed(), "auto", runs.model.config),
                    lambda steps: run_identity(runs.model, dataclasses.replace(cfg, max_steps=steps), runs.data),
                    max_steps=cfg.max_steps, default_max_steps=DEFAULT_MAX_STEPS)
    return plan.action, plan.start_step, plan.max_steps, plan.notices, plan.micro.size


# ---------------------------------------------------------------------------------------------------- folder states
def _copy(name):
    def make(tmp: Path, runs: Runs) -> Path:
        return Path(shutil.copytree(runs.root / name, tmp / "run", symlinks=True))
    return make


def _with_notes(make):
    def made(tmp: Path, runs: Runs) -> Path:
        out = make(tmp, runs)
        (out / "notes.txt").write_text("mine")
        return out
    return made


def _absent(tmp, runs):
    return tmp / "run"


def _empty(tmp, runs):
    (tmp / "run").mkdir()
    return tmp / "run"


def _checkpoints_deleted(tmp, runs):
    """A finished run whose checkpoints were deleted (to free the space): its model is all that is left."""
    out = _copy("finished")(tmp, runs)
    shutil.rmtree(out / "checkpoints")
    return out


def _without_marker(tmp, runs):
    """The stopped run as a version before folders carried .litebert.json left it."""
    out = _copy("stopped")(tmp, runs)
    (out / folders.OWNER_FILE).unlink()
    return out


def _token_store(tmp, runs):
    return Path(shutil.copytree(runs.store, tmp / "run"))


def _users_folder(tmp, runs):
    (tmp / "run").mkdir()
    (tmp / "run" / "notes.txt").write_text("mine")
    return tmp / "run"


def _a_file(tmp, runs):
    (tmp / "run").write_text("mine")
    return tmp / "run"


def _the_store(tmp, runs):
    return runs.store


def _inside_the_store(tmp, runs):
    return runs.store / "run"


STATES = {
    "absent": _absent,
    "empty": _empty,
    "finished": _copy("finished"),  # step 4 of 4; checkpoints 2 and 4
    "finished+notes": _with_notes(_copy("finished")),
    "finished, no checkpoint": _checkpoints_deleted,
    "stopped": _copy("stopped"),  # step 4 of 8; checkpoints 2 and 4
    "stopped+notes": _with_notes(_copy("stopped")),
    "stopped, no marker": _without_marker,
    "killed": _copy("killed"),  # of a run of 8, killed at step 1: no checkpoint
    "token store": _token_store,
    "user's folder": _users_folder,
    "a file": _a_file,
    "the store": _the_store,
    "inside the store": _inside_the_store,
}


# ---------------------------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Go:
    """The run goes ahead: ``action`` from step ``start`` to ``steps``; rank 0 says ``notice`` (if any)."""

    action: str
    start: int
    steps: int
    notice: Optional[str] = None


@dataclass(frozen=True)
class Refused:
    """The call is refused with one line holding ``match``, as a ``kind``."""

    kind: type
    match: str


NO_RUN_YET = "holds no run yet; starting a new one"
NO_CHECKPOINT_YET = "holds no checkpoint yet; starting from step 0 (its metrics are rewritten)"
BOTH = Refused(ConfigError, "and overwrite replaces it: give one of them")
UNFINISHED = "already holds a pretraining run (not finished, step {step}); continue it with resume"
FOREIGN = Refused(OutputError, "is not empty and was not written by litebert (it holds notes.txt); choose a new or "
                               "empty folder")
ANOTHER_KIND = Refused(OutputError, "holds a litebert token store, not a pretraining run; choose another folder")
NOT_OURS = Refused(OutputError, "holds files a pretraining run does not write (notes.txt); move them out first")

# state, resume, overwrite, max_steps, expected
TABLE = [
    # absent or empty: a new run, whatever the flags (resume says so)
    ("absent", False, False, None, Go("new", 0, NEW_RUN_STEPS)),
    ("absent", False, False, 6, Go("new", 0, 6)),
    ("absent", True, False, None, Go("new", 0, NEW_RUN_STEPS, NO_RUN_YET)),
    ("absent", True, False, 6, Go("new", 0, 6, NO_RUN_YET)),
    ("absent", False, True, 6, Go("new", 0, 6)),
    ("absent", True, True, 6, BOTH),
    ("empty", False, False, 6, Go("new", 0, 6)),
    ("empty", True, False, 6, Go("new", 0, 6, NO_RUN_YET)),
    ("empty", False, True, None, Go("new", 0, NEW_RUN_STEPS)),
    ("empty", True, True, 6, BOTH),
    # a finished run: refused without a flag; resume: nothing to do unless max_steps is larger than its step, then
    # reopened from its last checkpoint; overwrite: a new run
    ("finished", False, False, None, Refused(OutputError, "already holds a pretraining run (finished, step 4); "
                                                          "pass overwrite to replace it")),
    ("finished", False, False, 8, Refused(OutputError, "already holds a pretraining run (finished, step 4)")),
    ("finished", True, False, None, Go("finished", 4, 4)),
    ("finished", True, False, 4, Go("finished", 4, 4)),
    ("finished", True, False, 6, Go("reopen", 4, 6)),
    ("finished", True, False, 3, Refused(CheckpointError, "max_steps = 3 is below the step the finished run in")),
    ("finished", False, True, None, Go("overwrite", 0, NEW_RUN_STEPS)),
    ("finished", False, True, 6, Go("overwrite", 0, 6)),
    ("finished", True, True, 6, BOTH),
    ("finished+notes", False, True, 6, NOT_OURS),  # overwrite deletes only what a run writes
    ("finished+notes", True, False, None, Go("finished", 4, 4)),
    ("finished, no checkpoint", True, False, 6, Refused(CheckpointError, "no checkpoint left to continue from")),
    ("finished, no checkpoint", True, False, None, Go("finished", 4, 4)),  # nothing to do needs no checkpoint
    # an unfinished run with checkpoints: refused without a flag; resume: from the newest checkpoint, to the run's
    # own max_steps or the one given (larger: extended; not below the checkpoint's step); overwrite: a new run
    ("stopped", False, False, None, Refused(OutputError, UNFINISHED.format(step=4))),
    ("stopped", False, False, 8, Refused(OutputError, UNFINISHED.format(step=4))),
    ("stopped", True, False, None, Go("resume", 4, 8)),
    ("stopped", True, False, 8, Go("resume", 4, 8)),
    ("stopped", True, False, 12, Go("resume", 4, 12)),
    ("stopped", True, False, 4, Go("resume", 4, 4)),
    ("stopped", True, False, 3, Refused(CheckpointError, "max_steps = 3 is below the step the run has reached (4)")),
    ("stopped", False, True, None, Go("overwrite", 0, NEW_RUN_STEPS)),
    ("stopped", False, True, 6, Go("overwrite", 0, 6)),
    ("stopped", True, True, None, BOTH),
    ("stopped+notes", False, True, 6, NOT_OURS),
    ("stopped+notes", True, False, None, Go("resume", 4, 8)),  # a resume deletes nothing
    # a run folder written before folders carried a marker counts as a run folder
    ("stopped, no marker", False, False, None, Refused(OutputError, "already holds a pretraining run")),
    ("stopped, no marker", True, False, None, Go("resume", 4, 8)),
    ("stopped, no marker", False, True, 6, Go("overwrite", 0, 6)),
    # an unfinished run killed before its first checkpoint: resume starts it again from step 0, saying so
    ("killed", False, False, None, Refused(OutputError, UNFINISHED.format(step=0))),
    ("killed", True, False, 8, Go("restart", 0, 8, NO_CHECKPOINT_YET)),
    ("killed", True, False, 6, Go("restart", 0, 6, NO_CHECKPOINT_YET)),
    ("killed", True, False, None, Go("restart", 0, 8, NO_CHECKPOINT_YET)),  # the run's own steps, from its marker
    ("killed", False, True, None, Go("overwrite", 0, NEW_RUN_STEPS)),
    # refused whatever the flags: another kind of output, a folder litebert did not write, a file, an input's path
    ("token store", False, False, None, ANOTHER_KIND),
    ("token store", True, False, None, ANOTHER_KIND),
    ("token store", False, True, None, ANOTHER_KIND),
    ("user's folder", False, False, None, FOREIGN),
    ("user's folder", True, False, None, FOREIGN),
    ("user's folder", False, True, None, FOREIGN),
    ("a file", False, False, None, Refused(OutputError, "is a file; give a folder")),
    ("a file", True, False, None, Refused(OutputError, "is a file; give a folder")),
    ("a file", False, True, None, Refused(OutputError, "is a file; give a folder")),
    ("the store", False, False, None, Refused(OutputError, "is the same path as data")),
    ("the store", True, False, None, Refused(OutputError, "is the same path as data")),
    ("inside the store", False, True, None, Refused(OutputError, "lies inside data")),
]


def _case(row):
    """A row of the table as a pytest case named by its state and flags (a row already a pytest.param keeps its
    marks)."""
    values, marks = (row.values, row.marks) if hasattr(row, "marks") else (row, ())
    state, resume, overwrite, max_steps, _ = values
    flags = [name for name, on in (("resume", resume), ("overwrite", overwrite)) if on]
    name = "-".join([state.replace(" ", "_").replace(",", "").replace("'", ""), *flags, f"max_steps={max_steps}"])
    return pytest.param(*values, marks=marks, id=name)


@pytest.mark.parametrize("state, resume, overwrite, max_steps, expected", [_case(row) for row in TABLE])
def test_the_decision_for_each_folder_and_flags(runs, tmp_path, state, resume, overwrite, max_steps, expected):
    out = STATES[state](tmp_path, runs)
    watched = out if out.parent == tmp_path else runs.store  # the folder, or the input it overlaps
    before = snapshot(watched)
    if isinstance(expected, Refused):
        with pytest.raises(LitebertError) as refusal:
            decide(out, runs, resume=resume, overwrite=overwrite, max_steps=max_steps)
        message = str(refusal.value)
        assert isinstance(refusal.value, expected.kind), (type(refusal.value), message)
        assert expected.match in message and "\n" not in message, message
    else:
        action, start, steps, notices, _ = decide(out, runs, resume=resume, overwrite=overwrite, max_steps=max_steps)
        assert (action, start, steps) == (expected.action, expected.start, expected.steps)
        if expected.notice is None:
            assert notices == ()
        else:
            assert len(notices) == 1 and f"{out} {expected.notice}" == notices[0], notices
    assert snapshot(watched) == before  # planning writes nothing, refused or not


# ---------------------------------------------------------------------------------------------------- checkpoint
def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # bit rot: the checksum no longer matches
    path.write_bytes(bytes(data))


def test_a_resume_skips_a_newest_checkpoint_that_does_not_verify(runs, tmp_path):
    """docs/pretraining.md: resume takes the newest checkpoint whose checksum matches, and warns about each newer
    one it skips."""
    out = _copy("stopped")(tmp_path, runs)
    _damage(out / "checkpoints" / "step-00000004.pt")
    before = snapshot(out)
    with pytest.warns(UserWarning, match="skipping checkpoint: .*step-00000004.pt"):
        action, start, steps, _, _ = decide(out, runs, resume=True, overwrite=False, max_steps=None)
    assert (action, start, steps) == ("resume", 2, 8)
    assert snapshot(out) == before


def test_a_resume_refuses_when_no_checkpoint_verifies(runs, tmp_path):
    """A run whose checkpoints all fail to verify is refused, not started again over its history."""
    out = _copy("stopped")(tmp_path, runs)
    for step in (2, 4):
        _damage(out / "checkpoints" / f"step-{step:08d}.pt")
    before = snapshot(out)
    with pytest.raises(CheckpointError, match="none of the checkpoints in .* verifies"):
        decide(out, runs, resume=True, overwrite=False, max_steps=None)
    assert snapshot(out) == before


@pytest.mark.parametrize("state", ["stopped", "finished"])
def test_a_resume_with_another_setup_is_refused(runs, tmp_path, state):
    """Resuming (or extending) with a different trajectory setting is refused, naming the difference."""
    out = _copy(state)(tmp_path, runs)
    before = snapshot(out)
    with pytest.raises(CheckpointError) as refusal:
        decide(out, runs, resume=True, overwrite=False, max_steps=12, lr=0.001)
    assert "different setup (lr: checkpoint 0.005, now 0.001)" in str(refusal.value)
    assert snapshot(out) == before


# ---------------------------------------------------------------------------------------------------- micro-batch
@pytest.mark.parametrize("state, resume, micro_batch, expected", [
    ("absent", False, "auto", 4),  # on a CPU, auto is the per-process batch (up to 32)
    ("absent", False, 1, 1),
    ("stopped", True, "auto", 2),  # a resumed auto run continues at the micro-batch its checkpoint recorded
    ("stopped", True, 4, 4),  # a micro-batch given is used: it may change on resume
    ("killed", True, "auto", 4),  # no checkpoint: nothing recorded
])
def test_the_micro_batch(runs, tmp_path, state, resume, micro_batch, expected):
    out = STATES[state](tmp_path, runs)
    micro = decide(out, runs, resume=resume, overwrite=False, max_steps=8, micro_batch=micro_batch)[4]
    assert micro == expected


# ---------------------------------------------------------------------------------------------------- fine-tuning
@pytest.mark.parametrize("complete, resume, overwrite, max_steps, expected", [
    (True, True, False, None, "finished"),
    (True, True, False, 500, "finished"),  # a finished fine-tuning run is not extended: nothing to do
    (False, True, False, 500, "resume"),
    (True, False, True, 500, "overwrite"),
    (True, False, False, None, "already holds a fine-tuned model (finished); pass overwrite"),
    (False, False, False, None, "already holds a fine-tuned model (not finished); continue it with resume"),
])
def test_a_fine_tuning_folder_opens_without_extension(tmp_path, complete, resume, overwrite, max_steps, expected):
    """docs/finetune.md: resume continues an unfinished run and does nothing to a finished one (`open_run` with
    ``extendable`` False), whatever max_steps says."""
    from litebert.finetuning.config import FinetuneConfig

    out = tmp_path / "ft"
    with folders.begin(folders.plan(out, folders.FINETUNED)) as writer:  # what a fine-tuning run marks first
        if complete:
            writer.finish()
    before = snapshot(out)
    cfg = FinetuneConfig(max_steps=max_steps, report_to="none")

    def opened():
        return open_run(out, folders.FINETUNED, cfg, resume=resume, overwrite=overwrite, max_steps=max_steps,
                        extendable=False, inputs={}, hub_ids={})

    if expected.startswith("already"):
        with pytest.raises(OutputError, match=re.escape(expected)):
            opened()
    else:
        opening = opened()
        assert (opening.folder.action if not opening.finished else "finished") == expected
        assert opening.finished == (expected == "finished")
    assert snapshot(out) == before


# ---------------------------------------------------------------------------------------------------- end to end
def test_a_restart_over_a_users_file_is_refused_and_changes_nothing(runs, tmp_path):
    """A resume that finds no checkpoint starts the run again, replacing what it wrote; a folder holding a user's
    file is refused, as overwrite refuses it (folders.py: only what the layout owns is deleted), and left as it
    was."""
    import litebert

    out = _with_notes(_copy("killed"))(tmp_path, runs)
    before = snapshot(out)
    with pytest.raises(OutputError, match=r"holds files a pretraining run does not write \(notes.txt\)"):
        litebert.pretrain(runs.store, out, model="tiny", train=TrainConfig(max_steps=8, **TRAIN), resume=True,
                          progress=False)
    assert snapshot(out) == before


@pytest.mark.parametrize("state, max_steps, action, step", [
    ("finished", None, "finished", 4),
    ("finished", 6, "reopen", 6),
    ("killed", 8, "restart", 8),
])
def test_pretrain_obeys_the_plan(runs, tmp_path, state, max_steps, action, step):
    """`pretrain` runs what the planner decided (the table above): its result names the same action."""
    import litebert

    out = STATES[state](tmp_path, runs)
    result = litebert.pretrain(runs.store, out, model="tiny", train=TrainConfig(max_steps=max_steps, **TRAIN),
                               resume=True, progress=False)
    assert (result.action, result.step, result.complete) == (action, step, True)
