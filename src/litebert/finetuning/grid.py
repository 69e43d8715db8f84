"""A learning-rate grid chosen on dev: ``finetune(..., lr_grid=[1e-5, 3e-5, 1e-4])``, on the command line
``litebert finetune ... --lr 1e-5,3e-5,1e-4``.

One fine-tuning run per rate, each a whole fine-tuned folder in ``OUT/lr-RATE/`` (the rate as ``%g`` writes it:
``lr-1e-05``, ``lr-0.0001``), with the same settings otherwise (the seed included). Once every run has finished, the
one whose best dev score is highest (the task's metric, or ``FinetuneConfig.metric``; the first of the order given
on a tie) is copied into ``OUT``, which is then a normal fine-tuned folder that `evaluate`, `predict` and ``push``
read, and ``OUT/grid.json`` lists every rate's score::

    {"metric": "accuracy", "lr": 3e-05, "folder": "lr-3e-05",
     "runs": [{"lr": 1e-05, "folder": "lr-1e-05", "best_step": 300, "score": 0.81, "dev_metrics": {...}}, ...]}

**A grid brackets its choice.** A rate chosen at an edge of the grid (its lowest or its highest) says the best may lie
beyond it. So when dev picks an edge, the grid extends itself: the next rate beyond that edge, by the grid's own ratio
there, to three figures (rates 1e-5, 3e-5, 1e-4 whose best is 1e-4 add 1e-4 x 1e-4/3e-5: 0.000333), is trained and
scored too, and again,
until the best has a tried rate on each side or ``extend`` rates have been added (default 3; 0: the rates given
only). A grid of one rate has no ratio and no edge to extend. ``grid.json`` says which rates were added and why::

    {..., "given": [1e-05, 3e-05, 0.0001], "added": [{"lr": 0.000333, "why": "the best, 0.0001, was the highest rate"}]}

The rate is chosen on dev, so the chosen model's dev score is optimistic by that choice: score a test split once,
with `evaluate`, for the figure to report. ``resume=True`` continues a stopped grid (finished rates are kept, a
stopped one resumes from its checkpoint, the rest start, added rates included), given the same rates: the folder's
marker records them. A grid is refused, before anything is written, without dev data, without a rate, with a rate
<= 0 or given twice, or beside ``FinetuneConfig.lr``. Under ``torchrun`` every process runs every rate; rank 0
chooses and copies.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path
from typing import Any, Optional, Sequence

from litebert import folders
from litebert.errors import ConfigError, DataError, Field, literal
from litebert.files import atomic_write, read_json, write_json
from litebert.finetuning.job import FinetuneResult, notice, run_one, say
from litebert.tasks.meta import read_meta

GRID_FILE = folders.GRID
# the marker and trackers are the run's; the card is written for OUT
_NOT_COPIED = (folders.OWNER_FILE, folders.TRACKER_STATE, "README.md")
EXTEND = 3  # rates a grid adds beyond an edge the best lands on, at most (module docstring)


def folder_name(lr: float) -> str:
    """The sub-folder of a rate's run."""
    return f"lr-{lr:g}"


def finetune_grid(job, out: str | os.PathLike, lrs: Sequence[float], *, resume: bool, overwrite: bool, publish,
                  device: Optional[str], dist: Any, extend: int = EXTEND):
    """`finetune` with ``lr_grid`` (module docstring): ``job`` is the call's `litebert.finetuning.job.Job`;
    ``extend``: the rates the grid may add beyond an edge its best lands on."""
    from litebert.engine import distributed as D

    if isinstance(extend, bool) or not isinstance(extend, int) or extend < 0:
        raise ConfigError("{lr_grid_extend}: expected an integer >= 0 (rates a grid may add)", lr_grid_extend=extend)
    rates = check_rates(job, lrs)
    publish.check()  # the repository id, huggingface_hub and a token: before anything is written
    plan = folders.plan(out, folders.FINETUNED, resume=resume, overwrite=overwrite, inputs=job.inputs)
    _check_folder(plan, rates)
    if plan.action == "finished":
        notice(job.log, f"{out}: this learning-rate grid is finished; nothing to do")
        publish.not_pushed(f"the grid was finished already; upload it with `litebert push {out} {publish.repo_id}`")
        grid = read_json(plan.out / GRID_FILE, ConfigError)
        return FinetuneResult(out=plan.out, task=job.preset.name, action="finished", steps=0, complete=True,
                              metric=grid.get("metric"), lr=grid.get("lr"), grid=grid.get("runs"))
    dist = dist or D.from_environment(device=device)
    try:
        result = _run(job, plan, rates, publish, dist, extend)
    finally:
        D.shutdown(dist)
    if dist.is_main:  # once the process group is gone: no peer waits for the upload
        if result.interrupted:
            publish.not_pushed("the grid stopped before its end; resume it with the same upload")
        else:
            result.hub_url = publish.push(plan.out)
    return result


def check_rates(job, lrs: Sequence[float]) -> tuple[float, ...]:
    """The grid's rates, checked (module docstring), and that there is dev data to choose on."""
    from litebert.tasks.sources import split_paths

    shown = ",".join(f"{x:g}" for x in lrs)
    if not lrs:
        raise ConfigError("{lr_grid}: give one or more learning rates", lr_grid=shown)
    bad = next((x for x in lrs if not (math.isfinite(x) and x > 0)), None)
    if bad is not None:
        raise ConfigError("{lr_grid}: " + literal(f"{bad:g}") + " is not a learning rate (> 0)", lr_grid=shown)
    names = [folder_name(x) for x in lrs]
    twice = next((x for x, n in zip(lrs, names) if names.count(n) > 1), None)
    if twice is not None:
        raise ConfigError("{lr_grid}: " + literal(f"{twice:g}") + " is given twice", lr_grid=shown)
    if job.cfg.lr is not None:
        raise ConfigError("{lr_grid} and {lr} both set the learning rate; give one of them", lr_grid=shown,
                          lr=Field("FinetuneConfig", job.cfg.lr))
    _, dev = split_paths(job.inputs["data"], job.inputs["dev"])
    if dev is None:
        raise DataError("{lr_grid}: a learning-rate grid chooses its rate on dev data, and {data} has no dev split; "
                        "give {dev:flag}", lr_grid=shown, data=job.inputs["data"], dev=None)
    return tuple(float(x) for x in lrs)


def _check_folder(plan: folders.FolderPlan, rates: tuple[float, ...]) -> None:
    """A grid continued (resume) must be one, of the same rates."""
    if plan.action not in ("resume", "finished"):
        return
    shown = ",".join(f"{x:g}" for x in rates)
    before = plan.marker.get("grid")
    if not isinstance(before, list):
        raise ConfigError("{out} holds a single fine-tuning run, not a learning-rate grid; continue it without "
                          "{lr_grid:flag}, or choose another folder", out=plan.out, lr_grid=shown)
    if [float(x) for x in before] != list(rates):
        raise ConfigError("{lr_grid}: the grid in {out} trains the rates " + ",".join(f"{x:g}" for x in before) +
                          "; give the same to continue it, or {overwrite:flag} to start again", lr_grid=shown,
                          out=plan.out, overwrite=True)


def _run(job, plan: folders.FolderPlan, given: tuple[float, ...], publish, dist, extend: int):
    """Rank 0 begins ``OUT``; every rate's run (a finished one kept, a stopped one resumed), and the rates the grid
    adds while its best lies at an edge (a continued grid's added ones first); rank 0 chooses, copies and finishes
    ``OUT``."""
    from litebert.engine import distributed as D
    from litebert.push import Publishing

    added = [a for a in plan.marker.get("added") or [] if isinstance(a, dict)] if plan.action == "resume" else []
    writer = folders.begin(plan, grid=list(given), added=added) if dist.is_main else None
    try:
        D.barrier(dist)  # OUT is begun (an overwritten one emptied) before any process looks into it
        own = Publishing(publish.card, None, True)  # the runs' cards say what OUT's does; only OUT is uploaded
        done = {}  # the results of the runs this call trained
        while True:
            rates = given + tuple(float(a["lr"]) for a in added)
            stopped = _train(job, plan, rates, own, dist, done)
            if stopped is not None:
                return dataclasses.replace(stopped, out=plan.out, action=plan.action)
            runs = _runs(plan.out, rates, job.metric, added)
            best = max(runs, key=lambda r: r["score"] if math.isfinite(r["score"]) else -math.inf)  # first of equals
            more = beyond(rates, best) if len(added) < extend else None
            if more is None:
                break
            added.append(more)
            if writer is not None:
                writer.mark(False, grid=list(given), added=added)  # a stopped grid continues with its added rates
                say(job.log, f"learning-rate grid: {more['why']}; adding {more['lr']:g}")
        if writer is not None:
            _choose(writer, best, runs, job.metric, given, added, publish, job.log)
        D.barrier(dist)  # no process leaves while rank 0 still writes
        ran = done.get(best["lr"])
        return FinetuneResult(out=plan.out, task=job.preset.name, action=plan.action, steps=ran.steps if ran else 0,
                              complete=True, best_step=best["best_step"], best_metrics=best["dev_metrics"],
                              metric=job.metric, stopped_early=bool(ran and ran.stopped_early), lr=best["lr"],
                              grid=runs)
    finally:
        if writer is not None:
            writer.close()


def _train(job, plan: folders.FolderPlan, rates: tuple[float, ...], own, dist, done: dict):
    """Each rate's run not finished yet (a stopped one resumed); the result of a run that stopped (a signal,
    ``stop_after``), else None. ``done``: the results of the runs trained, by rate."""
    for i, lr in enumerate(rates):
        run = dataclasses.replace(job, cfg=dataclasses.replace(job.cfg, lr=lr))
        sub = plan.out / folder_name(lr)
        opening = run.open(sub, resume=sub.exists(), overwrite=False)
        if opening.finished:
            continue
        if dist.is_main:
            say(job.log, f"learning-rate grid: {lr:g} ({i + 1} of {len(rates)}) in {sub}")
        result = run_one(run, opening, own, dist)
        if result.interrupted:
            return result
        done[lr] = result
    return None


def beyond(rates: Sequence[float], best: dict) -> Optional[dict]:
    """The rate to add when ``best`` (a run: its ``lr`` and ``score``) lies at an edge of ``rates``: one step beyond
    it by the grid's own ratio at that edge, with why; None when the best has a tried rate on each side (or the grid
    has one rate, or no finite score)."""
    ordered = sorted(rates)
    if len(ordered) < 2 or not math.isfinite(best["score"]):
        return None
    lr = best["lr"]
    if lr == ordered[-1]:
        more, why = lr * (ordered[-1] / ordered[-2]), f"the best, {lr:g}, was the highest rate"
    elif lr == ordered[0]:
        more, why = lr / (ordered[1] / ordered[0]), f"the best, {lr:g}, was the lowest rate"
    else:
        return None
    more = float(f"{more:.3g}")  # three figures, as rates are written (1e-4 x 10/3: 0.000333)
    return None if folder_name(more) in {folder_name(x) for x in rates} else {"lr": more, "why": why}


def _runs(out: Path, rates: tuple[float, ...], metric: str, added: list) -> list[dict]:
    """Every rate's finished run, from its finetune.json (an added rate says why it was added)."""
    why = {float(a["lr"]): a["why"] for a in added}
    runs = []
    for lr in rates:
        meta = read_meta(out / folder_name(lr))
        dev = meta.get("dev_metrics") or {}
        runs.append({"lr": lr, "folder": folder_name(lr), "best_step": meta.get("best_step"),
                     "score": float(dev.get(metric, math.nan)), "dev_metrics": dev,
                     **({"added": why[lr]} if lr in why else {})})
    return runs


def copy_model(chosen: Path, out: Path, keep: tuple[str, ...]) -> None:
    """Make ``out`` hold the model of the run in ``chosen`` (a grid's rate, a search's trial): its files copied (but
    its marker, trackers and card), and a model file of an earlier choice removed (a choice made again after a stop);
    ``keep``: ``out``'s own files (grid.json, search.json)."""
    files = [p for p in folders.entries(chosen) if p.is_file() and not p.is_symlink() and p.name not in _NOT_COPIED]
    names = {p.name for p in files}
    for p in folders.entries(out):
        if p.is_file() and p.name not in names and p.name not in _NOT_COPIED + keep and \
                folders.FINETUNED.owns_file(p.name):
            p.unlink()
    for p in files:
        atomic_write(out / p.name, lambda tmp, src=p: shutil.copyfile(src, tmp))
    shutil.rmtree(out / "adapter", ignore_errors=True)
    if (chosen / "adapter").is_dir():
        for p in folders.entries(chosen / "adapter"):
            atomic_write(out / "adapter" / p.name, lambda tmp, src=p: shutil.copyfile(src, tmp))


def _choose(writer: folders.Writer, best: dict, runs: list[dict], metric: str, given: tuple[float, ...],
            added: list, publish, log) -> None:
    """Rank 0 makes ``OUT`` the chosen run's model: its files copied (what an earlier choice left removed), the card
    written for ``OUT``, grid.json, and the marker finished."""
    from litebert.card import write_card
    from litebert.card_builders import finetuned_card

    out = writer.out
    copy_model(out / best["folder"], out, keep=(GRID_FILE,))
    write_json(out / GRID_FILE, {"metric": metric, "lr": best["lr"], "folder": best["folder"], "given": list(given),
                                 "added": added, "runs": runs})
    write_card(out, lambda: finetuned_card(out, publish.card, publish.repo_id), lambda m: notice(log, m))
    writer.finish(grid=list(given), added=added)
    say(log, f"learning-rate grid, dev {metric}: " + ", ".join(f"{r['lr']:g} {r['score']:.4f}" for r in runs) +
         f"; chose {best['lr']:g}" + (f" (with {len(added)} rate(s) added beyond an edge)" if added else "") +
         f": {out} holds its model")
