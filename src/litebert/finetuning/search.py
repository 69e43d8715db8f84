"""A search over several fine-tuning settings chosen on dev, with Optuna as the engine: ``finetune(...,
search="lr=1e-5:1e-3:log,batch_size=16|32,warmup_proportion=0:0.2", trials=20)``, on the command line ``litebert
finetune ... --search SPACE --trials N``. The space's syntax: `litebert.finetuning.search_space`.

**Trials.** Trial K is one fine-tuning run in ``OUT/trial-K/`` with the settings drawn for it over the call's
config (the rest as given, the preset's elsewhere). A space with a range is drawn by Optuna's TPE sampler (its first
10 trials at random, TPE's start), seeded from the config's ``seed`` and the trial's number, so the same call draws
the same trials, and a stopped search continued draws what it would have drawn; ``trials`` is then required. A space
of lists only is a grid: its configurations in an order shuffled by the seed, each once (``trials``: default all).

**Seeds are replicated, not searched.** ``seed=0|1|2`` runs each configuration drawn once per seed, in
``OUT/trial-K-seed-S/``; the trial's score is the mean of its runs' best dev scores, and search.json gives their sd:
``--search seed=0|1|2`` alone is the mean ± sd over seeds of one configuration, in one line.

**Pruning.** After each dev evaluation (``eval_every``) of a trial's first run, its score goes to the trial
(`Pruning`, a callback as `litebert.engine.callbacks.EarlyStopping` is); when the pruner (``pruner``: ``"median"``,
Optuna's MedianPruner, the default: a trial below the median of the earlier trials at the same step, after 5 trials;
``"none"``; or any Optuna pruner object) says so, the run stops as early stopping stops it, its best model kept, and
the trial's other seeds are not run. The choice is made among the trials not pruned (among the pruned ones only when
every trial was).

**The choice.** Once every trial has run, the one whose score is highest (the task's metric, or
``FinetuneConfig.metric``; the first on a tie) is chosen, and its best run (the seed scoring highest) is copied into
``OUT``, a normal fine-tuned folder that `evaluate`, `predict` and ``push`` read. ``OUT/search.json`` lists every
trial::

    {"metric": "accuracy", "space": "lr=1e-05:0.001:log,batch_size=16|32", "n_trials": 8, "seed": 0,
     "sampler": "tpe", "pruner": "median",
     "best": {"number": 3, "params": {"lr": 0.00021, "batch_size": 16}, "score": 0.84, "sd": null,
              "folder": "trial-3"},
     "trials": [{"number": 0, "state": "complete", "params": {...}, "score": 0.81, "sd": null,
                 "runs": [{"seed": 0, "folder": "trial-0", "score": 0.81, "best_step": 300, "dev_metrics": {...}}],
                 "evaluations": {"100": 0.74, "200": 0.79, "300": 0.81}}, ...]}

(``state``: complete, pruned (with ``pruned_at``, a step) or failed (no finite score).) Chosen on dev, the chosen
model's dev score is optimistic by that choice: score a test split once, with `evaluate`, for the figure to report.

**Resume.** search.json is written as the search goes (the trial running under ``running``); ``resume=True``
continues a stopped search with the same space: the finished trials are replayed into Optuna from their records (no
database), the stopped one resumes from its checkpoint, the rest run. A finished search given more ``trials``
continues with the new ones. A search is refused, before anything is written, with a space that does not parse,
without dev data, beside ``lr_grid`` or a setting the config sets too, and without Optuna (the ``search`` extra);
under ``torchrun`` too (one process only, for now).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from litebert import folders
from litebert.engine.callbacks import Callback
from litebert.errors import ConfigError, DataError, literal
from litebert.files import read_json, write_json
from litebert.finetuning.grid import copy_model
from litebert.finetuning.job import FinetuneResult, notice, run_one, say
from litebert.finetuning.search_space import Space, check_against, parse_space

SEARCH_FILE = folders.SEARCH
PRUNERS = ("median", "none")


def folder_name(number: int, seed: Optional[int] = None) -> str:
    """The sub-folder of trial ``number``'s run (of one of its seeds when the space replicates seeds)."""
    return f"trial-{number}" + (f"-seed-{seed}" if seed is not None else "")


def import_optuna():
    """Optuna, or a one-line `ConfigError` saying how to install it."""
    from litebert.extras import install_hint

    try:
        import optuna
    except ImportError:
        hint = install_hint("search", "optuna")
        raise ConfigError("{search:flag} needs Optuna, which is not installed: " + literal(hint), search=None) from None
    return optuna


class Pruning(Callback):
    """Report each dev evaluation's ``metric`` to an Optuna ``trial`` and stop the run when its pruner says so (as
    `EarlyStopping` stops it: the best model kept). ``reported``: {step: score} reported already (a resumed run's);
    ``note(self)``: called after each report, so the search records it."""

    def __init__(self, trial, metric: str, reported: Mapping[int, float], note: Callable[["Pruning"], None]) -> None:
        self.trial, self.metric, self.note = trial, metric, note
        self.reported = dict(reported)
        self.pruned_at: Optional[int] = None
        for step, value in sorted(self.reported.items()):
            trial.report(value, step)

    def on_evaluate(self, step: int, metrics: dict) -> bool:
        value = float(metrics.get(self.metric, math.nan))
        if step not in self.reported:  # a resumed run does not evaluate a step twice; a replay is not reported again
            self.trial.report(value, step)
            self.reported[step] = value
        if self.trial.should_prune():
            self.pruned_at = step
        self.note(self)
        return self.pruned_at is not None


def finetune_search(job, out, space: Union[str, Mapping[str, Any]], trials: Optional[int], *, pruner: Any,
                    resume: bool, overwrite: bool, publish, device: Optional[str], dist: Any) -> FinetuneResult:
    """`finetune` with ``search`` (module docstring): ``job`` is the call's `litebert.finetuning.job.Job`."""
    from litebert.engine import distributed as D
    from litebert.tasks.sources import split_paths

    parsed = parse_space(space)
    check_against(parsed, job.cfg)
    trials = _check_trials(trials, parsed)
    _, dev = split_paths(job.inputs["data"], job.inputs["dev"])
    if dev is None:
        raise DataError("{search}: a search chooses on dev data, and {data} has no dev split; give {dev:flag}",
                        search=str(parsed), data=job.inputs["data"], dev=None)
    if not (pruner in PRUNERS or hasattr(pruner, "prune")):
        raise ConfigError("{search_pruner}: expected " + " or ".join(PRUNERS) + " (or an Optuna pruner)",
                          search_pruner=pruner)
    optuna = import_optuna()
    publish.check()
    plan = folders.plan(out, folders.FINETUNED, resume=resume, overwrite=overwrite, inputs=job.inputs)
    record = _check_folder(plan, parsed)
    done = [t for t in record.get("trials", [])]
    if plan.action == "finished" and len(done) >= trials:
        notice(job.log, f"{out}: this search is finished; nothing to do")
        publish.not_pushed(f"the search was finished already; upload it with `litebert push {out} {publish.repo_id}`")
        return _result(plan.out, job, "finished", record, None)
    dist = dist or D.from_environment(device=device)
    try:
        if dist.world_size > 1:
            raise ConfigError("{search} runs in one process; run it without torchrun", search=str(parsed))
        result = _run(optuna, job, plan, parsed, trials, pruner, record, publish, dist)
    finally:
        D.shutdown(dist)
    if result.interrupted:
        publish.not_pushed("the search stopped before its end; resume it with the same upload")
    else:
        result.hub_url = publish.push(plan.out)
    return result


def _check_trials(trials: Optional[int], space: Space) -> int:
    size = space.configurations()
    if trials is None:
        if size is None:
            raise ConfigError("{trials}: a space with a range needs a number of trials", trials=None)
        return size
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ConfigError("{trials}: expected an integer >= 1 (the configurations to try)", trials=trials)
    if size is not None and trials > size:
        raise ConfigError("{trials}: the space " + literal(str(space)) + f" holds {size} configuration(s); give "
                          "at most that many", trials=trials)
    return trials


def _check_folder(plan: folders.FolderPlan, space: Space) -> dict:
    """A search continued must be one, of the same space; its record (search.json) so far ({} for a new one)."""
    if plan.action not in ("resume", "finished"):
        return {}
    before = plan.marker.get("search")
    if not isinstance(before, str):
        raise ConfigError("{out} holds a fine-tuning run, not a search; continue it without {search:flag}, or choose "
                          "another folder", out=plan.out, search=str(space))
    if before != str(space):
        raise ConfigError("{search}: the search in {out} draws from " + literal(repr(before)) + "; give the same to "
                          "continue it, or {overwrite:flag} to start again", search=str(space), out=plan.out,
                          overwrite=True)
    path = plan.out / SEARCH_FILE
    return read_json(path, ConfigError) if path.exists() else {}


def _distributions(optuna, space: Space) -> dict:
    d = optuna.distributions
    out = {}
    for a in space.searched:
        if a.choices is not None:
            out[a.name] = d.CategoricalDistribution(list(a.choices))
        elif a.kind is int:
            out[a.name] = d.IntDistribution(int(a.low), int(a.high), log=a.log)
        else:
            out[a.name] = d.FloatDistribution(a.low, a.high, log=a.log)
    return out


def _grid(space: Space, seed: int) -> Optional[list[dict]]:
    """A space of lists only: its configurations, in an order shuffled by ``seed`` (None with a range)."""
    import itertools

    import numpy as np

    if space.configurations() is None:
        return None
    axes = space.searched
    every = [dict(zip([a.name for a in axes], values)) for values in itertools.product(*[a.choices for a in axes])]
    order = np.random.default_rng(seed).permutation(len(every))
    return [every[i] for i in order]


def _sampler(optuna, seed: int, number: int):
    """TPE seeded from the search's seed and the trial's number: a continued search draws what it would have."""
    import numpy as np

    return optuna.samplers.TPESampler(seed=int(np.random.SeedSequence([seed, number]).generate_state(1)[0]))


def _replay(optuna, study, trial: dict, distributions: dict) -> None:
    """A finished trial's record given back to Optuna (its params, score and reports), as it was told."""
    state = {"complete": "COMPLETE", "pruned": "PRUNED"}.get(trial["state"], "FAIL")
    study.add_trial(optuna.trial.create_trial(
        params=trial["params"], distributions=distributions, state=optuna.trial.TrialState[state],
        value=trial["score"] if state == "COMPLETE" else None,
        intermediate_values={int(k): v for k, v in trial.get("evaluations", {}).items()}))


def _run(optuna, job, plan: folders.FolderPlan, space: Space, n_trials: int, pruner, record: dict, publish,
         dist) -> FinetuneResult:
    from litebert.push import Publishing

    seed, distributions = job.cfg.seed, _distributions(optuna, space)
    grid = _grid(space, seed)
    record = {"metric": job.metric, "space": str(space), "n_trials": n_trials, "seed": seed,
              "sampler": "tpe" if grid is None else "grid",
              "pruner": pruner if isinstance(pruner, str) else type(pruner).__name__,
              "trials": list(record.get("trials", [])), **({"running": record["running"]} if "running" in record
                                                            else {})}
    pruner = _pruner(optuna, pruner)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per trial: the search says what it does
    writer = folders.begin(plan, search=str(space))
    try:
        study = optuna.create_study(direction="maximize", pruner=pruner, sampler=_sampler(optuna, seed, 0))
        for t in record["trials"]:
            _replay(optuna, study, t, distributions)
        own = Publishing(publish.card, None, True)  # the trials' cards say what OUT's does; only OUT is uploaded
        while len(record["trials"]) < n_trials:
            number = len(record["trials"])
            running = record.get("running") if record.get("running", {}).get("number") == number else None
            study.sampler = _sampler(optuna, seed, number)
            if running is not None or grid is not None:
                study.enqueue_trial(running["params"] if running is not None else grid[number])
            trial = study.ask(distributions)
            record["running"] = running = running or {"number": number, "params": trial.params, "evaluations": {}}
            write_json(plan.out / SEARCH_FILE, record)
            say(job.log, f"search: trial {number} ({number + 1} of {n_trials}): {_shown(trial.params)} in "
                         f"{plan.out / folder_name(number, space.seeds[0] if space.seeds else None)}")
            stopped = _trial(job, plan, space, trial, running, own, dist,
                             lambda: write_json(plan.out / SEARCH_FILE, record))
            if stopped is not None:
                return _result(plan.out, job, plan.action, record, stopped)
            done = _scored(plan.out, space, running, job.metric)
            if done["state"] == "complete":
                study.tell(trial, done["score"])
            else:
                study.tell(trial, state=optuna.trial.TrialState[done["state"].upper()])
            record["trials"].append(done)
            del record["running"]
            write_json(plan.out / SEARCH_FILE, record)
        _choose(writer, record, publish, job.log)
        return _result(plan.out, job, plan.action, record, None)
    finally:
        optuna.logging.set_verbosity(verbosity)
        writer.close()


def _pruner(optuna, pruner):
    if pruner == "median":
        return optuna.pruners.MedianPruner()
    if pruner == "none":
        return optuna.pruners.NopPruner()
    return pruner


def _trial(job, plan: folders.FolderPlan, space: Space, trial, running: dict, own, dist,
           save: Callable[[], None]):
    """Each run of one trial (one per seed) not finished yet; the result of a run that stopped (a signal,
    ``stop_after``), else None. The first run reports its evaluations to the trial (`Pruning`); a pruned trial's
    other seeds do not run."""
    def note(p: Pruning) -> None:
        running["evaluations"] = {str(k): v for k, v in sorted(p.reported.items())}
        if p.pruned_at is not None:
            running["pruned_at"] = p.pruned_at
        save()

    seeds = space.seeds or (None,)
    for i, seed in enumerate(seeds):
        if running.get("pruned_at") is not None:
            break
        cfg = dataclasses.replace(job.cfg, **running["params"], **({"seed": seed} if seed is not None else {}))
        pruning = Pruning(trial, job.metric, {int(k): v for k, v in running["evaluations"].items()}, note) \
            if i == 0 else None
        run = dataclasses.replace(job, cfg=cfg, callbacks=job.callbacks + ((pruning,) if pruning else ()))
        sub = plan.out / folder_name(running["number"], seed)
        opening = run.open(sub, resume=sub.exists(), overwrite=False)
        if opening.finished:
            continue
        result = run_one(run, opening, own, dist)
        if result.interrupted:
            running["folder"] = sub.name
            return result
    return None


def _scored(out: Path, space: Space, running: dict, metric: str) -> dict:
    """The record of a trial whose runs have finished, from each run's finetune.json."""
    runs = []
    for seed in space.seeds or (None,):
        folder = folder_name(running["number"], seed)
        if not (out / folder / folders.FINETUNE_META).exists():  # a pruned trial's seeds after its first
            continue
        meta = read_json(out / folder / folders.FINETUNE_META, ConfigError)
        dev = meta.get("dev_metrics") or {}
        runs.append({"seed": seed if seed is not None else meta.get("train", {}).get("seed"), "folder": folder,
                     "score": float(dev.get(metric, math.nan)), "best_step": meta.get("best_step"),
                     "dev_metrics": dev})
    scores = [r["score"] for r in runs]
    score = statistics.fmean(scores) if scores else math.nan
    state = "pruned" if running.get("pruned_at") is not None else "complete" if math.isfinite(score) else "failed"
    return {"number": running["number"], "state": state, "params": running["params"], "score": score,
            "sd": statistics.stdev(scores) if len(scores) > 1 else None, "runs": runs,
            "evaluations": running["evaluations"],
            **({"pruned_at": running["pruned_at"]} if state == "pruned" else {})}


def _choose(writer: folders.Writer, record: dict, publish, log) -> Optional[dict]:
    """The best trial (module docstring); its best run copied into ``OUT``, the card written, search.json with
    ``best``, the marker finished."""
    from litebert.card import write_card
    from litebert.card_builders import finetuned_card

    def score(t: dict) -> float:
        return t["score"] if math.isfinite(t["score"]) else -math.inf

    trials = record["trials"]
    kept = [t for t in trials if t["state"] != "pruned" and t["runs"]] or [t for t in trials if t["runs"]]
    best = max(kept, key=score) if kept else None  # the first of equals
    out = writer.out
    if best is not None:
        run = max(best["runs"], key=lambda r: r["score"] if math.isfinite(r["score"]) else -math.inf)
        best["runs"] = sorted(best["runs"], key=lambda r: r is not run)  # the run copied first
        copy_model(out / run["folder"], out, keep=(SEARCH_FILE,))
        record["best"] = {"number": best["number"], "params": best["params"], "score": best["score"],
                          "sd": best["sd"], "folder": run["folder"]}
        write_card(out, lambda: finetuned_card(out, publish.card, publish.repo_id), lambda m: notice(log, m))
    write_json(out / SEARCH_FILE, record)
    writer.finish(search=record["space"])
    pruned = sum(t["state"] == "pruned" for t in trials)
    say(log, f"search, dev {record['metric']}: {len(trials)} trial(s)" + (f" ({pruned} pruned)" if pruned else "") +
         (f"; best trial {best['number']} ({_shown(best['params'])}): {best['score']:.4f}" +
          (f" ± {best['sd']:.4f} over {len(best['runs'])} seeds" if best["sd"] is not None else "") +
          f"; {out} holds its model ({record['best']['folder']})" if best else "; no trial scored"))
    return best


def _result(out: Path, job, action: str, record: dict, stopped: Optional[FinetuneResult]) -> FinetuneResult:
    if stopped is not None:
        return dataclasses.replace(stopped, out=out, action=action, search=record)
    best = record.get("best") or {}
    trial = next((t for t in record.get("trials", []) if t["number"] == best.get("number")), None)
    run = trial["runs"][0] if trial else {}
    lr = best.get("params", {}).get("lr") if best else None
    return FinetuneResult(out=out, task=job.preset.name, action=action, steps=0, complete=True,
                          best_step=run.get("best_step"), best_metrics=run.get("dev_metrics"), metric=job.metric,
                          lr=lr if lr is not None else _meta_lr(out), search=record)


def _meta_lr(out: Path) -> Optional[float]:
    path = out / folders.FINETUNE_META
    return read_json(path, ConfigError).get("train", {}).get("lr") if path.exists() else None


def _shown(params: dict) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in params.items())
