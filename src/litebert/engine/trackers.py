"""Experiment trackers that receive a run's metrics beside ``metrics.jsonl``: TensorBoard, Weights & Biases, MLflow.

``report_to`` (a field of `TrainConfig` and `FinetuneConfig`, ``--report-to`` on the command line) is a comma list
of tracker names (``tensorboard``, ``wandb``, ``mlflow``), or ``none``, or ``auto`` (the default: TensorBoard when
the ``tensorboard`` package is installed, else none, quietly: ``metrics.jsonl`` and the CSV files are written
either way; a TensorBoard that is installed but does not import is a one-line notice). `resolve` decides which trackers
a run
uses (a `Trackers`) and refuses a named tracker whose package is missing, with the pip command; the run's plan
(`litebert.engine.plan`) calls it once, before anything is written, and carries the decision to the metrics writer.
Each tracker's package is imported only when the run asks for it.

On rank 0 the `MetricsWriter` (a callback of the training loops, `litebert.engine.callbacks`) opens the trackers
(`open_trackers`) and hands each every record it appends to
``metrics.jsonl``: the numbers of a ``train`` record as ``train/loss``, ``train/lr``, ..., of an ``eval`` record as
``eval/mlm_accuracy``, ..., at the record's step. The run's settings (what ``train_config.json`` or ``finetune.json``
records) go once to each new tracker run, as W&B config or MLflow params (nested keys joined by dots).

Where the services are, and how they are named, is the usual environment: W&B reads ``WANDB_MODE`` (``offline``
writes the run to disk only), ``WANDB_PROJECT`` (here default ``litebert``), ``WANDB_ENTITY``, ``WANDB_NAME``
(default: the run folder's name) and ``WANDB_DIR`` (default: the run folder, which then holds ``wandb/``); MLflow
reads ``MLFLOW_TRACKING_URI`` and ``MLFLOW_EXPERIMENT_NAME`` (here default ``litebert``), the run being named after
the run folder.

Before the run folder is written, `check` (called by the run's plan beside the plan of the folder) tries
what can be tried without writing: each named tracker's import, MLflow's tracking URI (MLflow 3's default store, a
SQLite database in the working folder, is refused unless MLFLOW_TRACKING_URI names it; without SQLAlchemy MLflow
refuses it itself) and its server (one request, no retries, a short timeout), W&B's login and the
reachability of its server when online. A command refused for its tracker leaves ``out`` as it was.

Nothing of the trackers' libraries is written outside the run folder: while they run (`environment`), MLflow's
telemetry is off (``MLFLOW_DISABLE_TELEMETRY``: it writes a file under HOME and opens a socket) and W&B's own debug
logs go to the run's ``wandb/logs/`` (``WANDB_CACHE_DIR``), each only when the user has not set the variable.

Resume: the ids of the tracker runs are kept in the run folder's ``trackers.json``. A resumed run continues the same
W&B run (``wandb.init(id=..., resume="allow")``) and the same MLflow run (its status back to RUNNING); records the
tracker has seen already (those a killed run logged after its last checkpoint) are not sent again: MLflow's by the
last step of each metric, W&B's by the run's step (online; an offline run resumes as a new offline folder with the same
id, which ``wandb sync`` merges). A run started afresh (``overwrite``, or a resume with no checkpoint) starts new
tracker runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import urlparse

from litebert import folders, values
from litebert.errors import ConfigError, Field, LitebertError, first_line, literal
from litebert.extras import install_hint
from litebert.files import json_field, read_json, write_json

TRACKERS = ("tensorboard", "wandb", "mlflow")
REPORT_TO = ("auto", "none") + TRACKERS
STATE_FILE = folders.TRACKER_STATE  # the ids of the tracker runs, for resume
_STATE_KEYS = {"wandb": ("id",), "mlflow": ("run_id", "tracking_uri")}  # what the trackers read of it
DEFAULT_PROJECT = "litebert"  # W&B project and MLflow experiment unless the environment names one
REACH_TIMEOUT = 10.0  # seconds `check` waits for a tracking server to answer


class TrackerError(LitebertError, RuntimeError):
    """A tracker cannot start its run (not logged in, no tracking server, a bad tracking URI)."""


def parse(report_to: str, owner: Optional[str] = None) -> tuple[str, ...]:
    """The names of the comma list ``report_to``, checked; ``owner``: the config class whose field it is (named in
    the error, as ``TrainConfig.report_to = 'x'`` in Python, ``--report-to x`` on the command line)."""
    names = tuple(values.names(report_to, "report_to", owner))  # an empty item or a name twice: refused
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


def _install(name: str) -> str:
    """How to install tracker ``name``'s package (W&B and MLflow: the ``trackers`` extra's ranges)."""
    if name == "tensorboard":  # in no extra
        return "pip install tensorboard"
    if name == "mlflow":  # the client is enough; the full mlflow package works too
        return "its client is enough: " + install_hint("trackers", "mlflow-skinny")
    return install_hint("trackers", name)


@dataclass(frozen=True)
class Trackers:
    """The trackers a run reports to, decided once where it starts (`resolve`). ``auto``: chosen by ``auto``
    (TensorBoard when its package is installed), so a TensorBoard that does not import is a notice, not a refusal."""

    names: tuple[str, ...] = ()
    auto: bool = False


def resolve(report_to: str, owner: Optional[str] = None) -> Trackers:
    """The trackers a run with ``report_to`` uses (``auto``: TensorBoard if installed); a `ConfigError` naming the
    pip command when a named tracker's package is not installed. Imports nothing."""
    names = parse(report_to, owner)
    if names == ("none",):
        return Trackers()
    if names == ("auto",):
        return Trackers(("tensorboard",) if _installed("tensorboard") else (), auto=True)
    for name in names:
        if not _installed(name):
            raise ConfigError("{report_to}: " + literal(f"the {name} package is not installed; {_install(name)}"),
                              report_to=Field(owner, report_to) if owner else report_to)
    return Trackers(names)


def check(trackers: Trackers) -> None:
    """What can be tried of each named tracker without writing anything (its import, MLflow's tracking URI and
    server, W&B's login and server): a `TrackerError` before the run folder is written rather than once it is. Call
    it on every process (each would be refused alike)."""
    if trackers.auto:
        return  # TensorBoard that does not import is a notice when the run opens it, not a refusal
    with environment(None):
        for name in trackers.names:
            kind = KINDS[name]
            with _starting(name, kind.HINT):
                kind.check()


@contextlib.contextmanager
def environment(folder: Optional[Path]) -> Iterator[None]:
    """The environment the trackers' libraries run in, for the duration: MLflow's telemetry off (it writes
    ~/.config/mlflow/telemetry.json and opens a socket) and, given the run ``folder``, W&B's own debug logs in its
    ``wandb/logs/`` (W&B writes them under ~/.cache/wandb otherwise). A variable the user has set is left as it is."""
    wanted = {"MLFLOW_DISABLE_TELEMETRY": "true"}
    if folder is not None:
        wanted["WANDB_CACHE_DIR"] = str(folder)  # W&B writes WANDB_CACHE_DIR/wandb/logs/
    with _unless_set(wanted):
        yield


@contextlib.contextmanager
def _unless_set(values: dict[str, str]) -> Iterator[None]:
    """The environment variables ``values`` for the duration, each only where the user has not set it."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


@contextlib.contextmanager
def _starting(name: str, hint: str) -> Iterator[None]:
    """A tracker library's own error (login, server, URI) while its run is checked or started, as one line."""
    try:
        yield
    except LitebertError:
        raise
    except Exception as e:
        raise TrackerError(f"{name}: cannot start the run ({type(e).__name__}: {literal(first_line(e, 300))}); "
                           f"{hint}") from None


def _reach(url: str, timeout: float = REACH_TIMEOUT) -> None:
    """A `ConnectionError` when the server at ``url`` does not accept a connection within ``timeout`` seconds (the
    trackers' clients would retry for minutes before they say so)."""
    u = urlparse(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        socket.create_connection((u.hostname, port), timeout=timeout).close()
    except OSError as e:
        raise ConnectionError(f"cannot reach {u.scheme}://{u.netloc} ({e.strerror or type(e).__name__})") from None


def open_trackers(trackers: Trackers, folder: Path, resume_step: Optional[int], config: Optional[dict]) -> list:
    """The ``trackers`` of the run in ``folder``, started (rank 0 only): continuing the runs recorded in
    ``trackers.json`` when ``resume_step`` is given, else new runs given ``config``. `TrackerError` when one cannot
    start (those started are closed again)."""
    names = trackers.names
    if trackers.auto and names:  # auto without TensorBoard installed says nothing: the metrics files are the record
        try:  # the package is there, but torch's side of it may not import (a protobuf at odds with it, say)
            import torch.utils.tensorboard  # noqa: F401
        except Exception as e:
            names = ()
            print(f"notice: TensorBoard cannot be imported ({type(e).__name__}: {first_line(e, 200)}); metrics are "
                  f"in {folder / 'metrics.jsonl'} and CSV", file=sys.stderr, flush=True)
    state = _read_state(folder) if resume_step is not None else {}
    config = _plain(config or {})
    opened: list = []
    try:
        for name in names:
            kind = KINDS[name]
            with _starting(name, kind.HINT):
                opened.append(kind(folder, resume_step, config, state))
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

    @staticmethod
    def check() -> None:
        import torch.utils.tensorboard  # noqa: F401  (the package is there; torch's side of it may not import)

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

    @staticmethod
    def check() -> None:
        """Online: credentials for the server (as wandb.init finds them: WANDB_API_KEY, ~/.netrc, its settings,
        without prompting) and the server answering. W&B internals, version-guarded: another version is left to
        wandb.init."""
        import wandb  # noqa: F401

        try:
            from wandb.sdk import wandb_setup
            from wandb.sdk.lib.wbauth import authenticate
        except ImportError:
            return
        settings = wandb_setup.singleton().settings
        if settings.mode in ("offline", "dryrun", "disabled"):
            return
        if authenticate.authenticate_session(host=settings.base_url, source="litebert", prompt=False,
                                             update_session=False) is None:
            raise TrackerError(f"wandb: not logged in to {settings.base_url}; {_WandB.HINT}")
        _reach(settings.base_url)

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

    @staticmethod
    def check() -> None:
        """The tracking URI: a store MLflow can open (its client refuses the others, writing nothing), and a server
        that answers, asked once (no retries, a short timeout) for the experiment the run goes to."""
        import mlflow
        from mlflow.tracking import MlflowClient

        uri = mlflow.get_tracking_uri()  # the URI alone: opening its store may create it
        if not os.environ.get("MLFLOW_TRACKING_URI") and urlparse(uri).scheme == "sqlite":
            # MLflow 3's default with SQLAlchemy installed: a database in the working folder, not the user's choice
            raise ValueError(f"no tracking URI is set and MLflow's default, {uri}, would create a database in the "
                             "working folder")
        client = MlflowClient()
        if urlparse(client.tracking_uri).scheme in ("http", "https"):
            _reach(client.tracking_uri)
            with _unless_set({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
                              "MLFLOW_HTTP_REQUEST_TIMEOUT": str(int(REACH_TIMEOUT))}):
                client.get_experiment_by_name(os.environ.get("MLFLOW_EXPERIMENT_NAME", DEFAULT_PROJECT))

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


KINDS = {"tensorboard": _TensorBoard, "wandb": _WandB, "mlflow": _MLflow}
