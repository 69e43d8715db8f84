"""Experiment trackers that receive a run's metrics beside ``metrics.jsonl``: TensorBoard, Weights & Biases, MLflow.

``report_to`` (a field of `TrainConfig` and `FinetuneConfig`, ``--report-to`` on the command line) is a comma list
of tracker names (``tensorboard``, ``wandb``, ``mlflow``), or ``none``, or ``auto`` (the default: TensorBoard when
the ``tensorboard`` package is installed, else none, with a one-line notice). `resolve` decides which trackers a run
uses and refuses a named tracker whose package is missing, with the pip command; `pretrain` and `finetune` call it
before they write anything. Each tracker's package is imported only when the run asks for it.

On rank 0 the `MetricsWriter` opens the trackers (`open_trackers`) and hands each every record it appends to
``metrics.jsonl``: the numbers of a ``train`` record as ``train/loss``, ``train/lr``, ..., of an ``eval`` record as
``eval/mlm_accuracy``, ..., at the record's step. The run's settings (what ``train_config.json`` or ``finetune.json``
records) go once to each new tracker run, as W&B config or MLflow params (nested keys joined by dots).

Where the services are, and how they are named, is the usual environment: W&B reads ``WANDB_MODE`` (``offline``
writes the run to disk only), ``WANDB_PROJECT`` (here default ``litebert``), ``WANDB_ENTITY``, ``WANDB_NAME``
(default: the run folder's name) and ``WANDB_DIR`` (default: the run folder, which then holds ``wandb/``); MLflow
reads ``MLFLOW_TRACKING_URI`` and ``MLFLOW_EXPERIMENT_NAME`` (here default ``litebert``), the run being named after
the run folder.

Resume: the ids of the tracker runs are kept in the run folder's ``trackers.json``. A resumed run continues the same
W&B run (``wandb.init(id=..., resume="allow")``) and the same MLflow run (its status back to RUNNING); records the
tracker has seen already (those a killed run logged after its last checkpoint) are not sent again: MLflow's by the
last step of each metric, W&B's by the run's step (online; an offline run resumes as a new offline folder with the same
id, which ``wandb sync`` merges). A run started afresh (``overwrite``, or a resume with no checkpoint) starts new
tracker runs.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

from litebert.errors import ConfigError, Field, LitebertError, first_line, literal
from litebert.files import json_field, read_json, write_json

TRACKERS = ("tensorboard", "wandb", "mlflow")
REPORT_TO = ("auto", "none") + TRACKERS
INSTALL = {"tensorboard": "pip install tensorboard", "wandb": "pip install wandb",
           "mlflow": "pip install mlflow-skinny (or mlflow)"}
STATE_FILE = "trackers.json"  # the ids of the tracker runs, for resume
_STATE_KEYS = {"wandb": ("id",), "mlflow": ("run_id", "tracking_uri")}  # what the trackers read of it
DEFAULT_PROJECT = "litebert"  # W&B project and MLflow experiment unless the environment names one


class TrackerError(LitebertError, RuntimeError):
    """A tracker cannot start its run (not logged in, no tracking server, a bad tracking URI)."""


def parse(report_to: str, owner: Optional[str] = None) -> tuple[str, ...]:
    """The names of the comma list ``report_to``, checked; ``owner``: the config class whose field it is (named in
    the error, as ``TrainConfig.report_to = 'x'`` in Python, ``--report-to x`` on the command line)."""
    names = tuple(dict.fromkeys(n.strip() for n in str(report_to).split(",")))
    wrong = [n for n in names if n not in REPORT_TO]
    problem = None
    if wrong:
        problem = (f"unknown tracker {wrong[0]!r}; give none, auto, or a comma list of {', '.join(TRACKERS)}")
    elif len(names) > 1 and set(names) & {"auto", "none"}:
        problem = "'auto' and 'none' stand alone; give one of them, or a comma list of " + ", ".join(TRACKERS)
    if problem is not None:
        raise ConfigError("{report_to}: " + literal(problem),
                          report_to=Field(owner, report_to) if owner else report_to)
    return names


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def resolve(report_to: str, owner: Optional[str] = None) -> tuple[str, ...]:
    """The trackers a run with ``report_to`` uses (``auto``: TensorBoard if installed); a `ConfigError` naming the
    pip command when a named tracker's package is not installed. Imports nothing."""
    names = parse(report_to, owner)
    if names == ("none",):
        return ()
    if names == ("auto",):
        return ("tensorboard",) if _installed("tensorboard") else ()
    for name in names:
        if not _installed(name):
            raise ConfigError("{report_to}: " + f"the {name} package is not installed; {INSTALL[name]}, or pip "
                              "install 'litebert[trackers]'",
                              report_to=Field(owner, report_to) if owner else report_to)
    return names


def open_trackers(report_to: str, folder: Path, resume_step: Optional[int], config: Optional[dict]) -> list:
    """The trackers of the run in ``folder``, started (rank 0 only): continuing the runs recorded in
    ``trackers.json`` when ``resume_step`` is given, else new runs given ``config``. `TrackerError` when one cannot
    start (those started are closed again)."""
    names, auto = resolve(report_to), parse(report_to) == ("auto",)
    missing = "is not installed (pip install tensorboard)"
    if auto and names:
        try:  # the package is there, but torch's side of it may not import (a protobuf at odds with it, say)
            import torch.utils.tensorboard  # noqa: F401
        except Exception as e:
            names, missing = (), f"cannot be imported ({type(e).__name__}: {first_line(e, 200)})"
    if auto and not names:
        print(f"notice: TensorBoard {missing}; metrics are in {folder / 'metrics.jsonl'} and CSV", file=sys.stderr,
              flush=True)
    state = _read_state(folder) if resume_step is not None else {}
    config = _plain(config or {})
    opened: list = []
    try:
        for name in names:
            kind = {"tensorboard": _TensorBoard, "wandb": _WandB, "mlflow": _MLflow}[name]
            try:
                opened.append(kind(folder, resume_step, config, state))
            except LitebertError:
                raise
            except Exception as e:  # the tracker's own error (login, server, URI), as one line with what to do
                raise TrackerError(f"{name}: cannot start the run ({type(e).__name__}: {literal(first_line(e, 300))}); "
                                   f"{kind.HINT}") from None
    except BaseException:
        for t in opened:
            t.close(failed=True)
        raise
    if any(t.name in state for t in opened):
        write_json(folder / STATE_FILE, state)
    return opened


def _read_state(folder: Path) -> dict:
    path = folder / STATE_FILE
    if not path.is_file():
        return {}
    try:
        state = read_json(path, TrackerError)
        for name, keys in _STATE_KEYS.items():
            entry = json_field(state, name, dict, path, TrackerError, default=None)
            for key in keys if entry is not None else ():
                json_field(entry, key, str, path, TrackerError, where=f"{name}.")
        return state
    except LitebertError as e:
        print(f"warning: {e}; the trackers start new runs", file=sys.stderr, flush=True)
        return {}


def _plain(config: dict) -> dict:
    """The config as JSON values (paths and other objects as strings)."""
    return json.loads(json.dumps(config, default=str))


def scalars(record: dict) -> dict[str, float]:
    """The numbers of a metrics record that trackers receive (not the step, not flags or text)."""
    return {k: v for k, v in record.items()
            if k not in ("step", "split") and isinstance(v, (int, float)) and not isinstance(v, bool)}


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """``{"model": {"hidden_size": 768}}`` -> ``{"model.hidden_size": 768}`` (MLflow params are flat)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class _TensorBoard:
    name = "tensorboard"
    HINT = "check that the run folder is writable, or pass report_to none"

    def __init__(self, folder: Path, resume_step: Optional[int], config: dict, state: dict):
        from torch.utils.tensorboard import SummaryWriter  # needs the optional `tensorboard` package

        # purge_step: a resumed run drops the events a killed run wrote after its checkpoint
        self.writer = SummaryWriter(str(folder / "tensorboard"), purge_step=resume_step)

    def log(self, split: str, step: int, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.writer.add_scalar(f"{split}/{k}", v, step)

    def close(self, failed: bool = False) -> None:
        self.writer.close()


class _WandB:
    name = "wandb"
    HINT = "log in with `wandb login`, or set WANDB_MODE=offline to write the run to disk only"

    def __init__(self, folder: Path, resume_step: Optional[int], config: dict, state: dict):
        import wandb

        env = os.environ
        previous = state.get("wandb", {}).get("id")
        kw = dict(project=env.get("WANDB_PROJECT", DEFAULT_PROJECT), name=env.get("WANDB_NAME", folder.name),
                  dir=None if env.get("WANDB_DIR") else str(folder))
        if previous:
            kw.update(id=previous, resume="allow")
        else:
            kw.update(config=config)
        self.run = wandb.init(**kw)
        # A resumed online run knows the steps it has seen; those the killed run logged are not sent again
        self.first_step = self.run.step if previous else 0
        state["wandb"] = {"id": self.run.id, "project": self.run.project}

    def log(self, split: str, step: int, values: dict[str, float]) -> None:
        if step >= self.first_step:
            # the train and eval records of one step merge into one W&B history row, whose _step is the run's step
            self.run.log({f"{split}/{k}": v for k, v in values.items()}, step=step)

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


class _MLflow:
    name = "mlflow"
    HINT = ("set MLFLOW_TRACKING_URI to an MLflow server (http://HOST:5000) or a folder (file:./mlruns, with "
            "MLFLOW_ALLOW_FILE_STORE=true on MLflow 3)")

    def __init__(self, folder: Path, resume_step: Optional[int], config: dict, state: dict):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = client = MlflowClient()  # MLFLOW_TRACKING_URI, else MLflow's default
        previous = state.get("mlflow")
        self.run_id, self.last = None, {}
        if previous and previous.get("tracking_uri") == client.tracking_uri:
            try:
                run = client.get_run(previous["run_id"])
            except Exception as e:
                print(f"notice: mlflow: the run {previous['run_id']} cannot be continued ({type(e).__name__}); "
                      f"starting a new one", file=sys.stderr, flush=True)
            else:
                self.run_id = run.info.run_id
                client.update_run(self.run_id, status="RUNNING")
                # the last step of each metric: what a killed run logged after its checkpoint is not sent again
                self.last = {k: max(m.step for m in client.get_metric_history(self.run_id, k))
                             for k in run.data.metrics}
        if self.run_id is None:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", DEFAULT_PROJECT)
            experiment = client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
            self.run_id = client.create_run(experiment_id, run_name=folder.name).info.run_id
            # MLflow takes at most 100 params per batch, values of 6000 chars
            params = [Param(k, (json.dumps(v) if not isinstance(v, str) else v)[:6000])
                      for k, v in flatten(config).items()]
            for i in range(0, len(params), 100):
                client.log_batch(self.run_id, params=params[i:i + 100])
        state["mlflow"] = {"run_id": self.run_id, "tracking_uri": client.tracking_uri}

    def log(self, split: str, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(f"{split}/{k}", float(v), now, step) for k, v in values.items()
                   if step > self.last.get(f"{split}/{k}", -math.inf)]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def close(self, failed: bool = False) -> None:
        self.client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")
