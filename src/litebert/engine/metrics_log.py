"""Metrics sinks (JSONL, CSV, TensorBoard when installed) and the FLOP count behind the MFU estimate.

Files in the run folder: ``metrics.jsonl`` (every record, one JSON object per line, with ``"split": "train"|"eval"``),
``train.csv`` and ``eval.csv`` (the same numbers as spreadsheets); the same records go to the trackers the run's
``report_to`` names (`litebert.engine.trackers`: TensorBoard in ``tensorboard/``, W&B, MLflow; by default TensorBoard
if the package is installed). The writer is a callback of the training loops (`litebert.engine.callbacks`). The
columns of the CSV files are the pretraining ones by default; a caller passes its own (``litebert finetune``:
examples/s, and its task's dev metrics taken from the first record). On resume, records after the checkpoint's step
(written by the run that was killed) are dropped first, so every file reads as one uninterrupted run; a torn last
line (the process was killed while appending it) is dropped with a warning, any other line that cannot be read stops
the resume with the file and line. Records are appended (a line at a time), and the truncation on resume rewrites
the file atomically.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
from pathlib import Path

from litebert import folders
from litebert.config import AlbertConfig
from litebert.engine.callbacks import Callback
from litebert.engine.trackers import Trackers, environment, open_trackers, scalars
from litebert.errors import LitebertError, first_line
from litebert.files import atomic_write, decode_utf8, parse_json

TRAIN_COLUMNS = ["step", "loss", "mlm_loss", "sop_loss", "lr", "grad_norm", "tokens_per_s", "tokens", "elapsed_s",
                 "tflops", "mfu", "skipped_steps", "unigram_entropy"]
EVAL_COLUMNS = ["step", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy", "examples", "unigram_entropy"]
# The plateau guard's checks (`litebert.pretraining.plateau`): the train MLM loss of the last steps beside H1, and the
# probe
GUARD_COLUMNS = ["step", "mlm_loss", "unigram_entropy", "probe_positions", "probe_distinct", "probe_top_share",
                 "probe_cosine", "plateau"]


def metric_columns(objective: str) -> dict[str, list[str]]:
    """The CSV columns of a pretraining run: the sentence task's under its own name (``sop_*``, ``nsp_*``), none for
    an MLM-only run (objective ``none``)."""
    def rename(columns: list[str]) -> list[str]:
        if objective == "none":
            return [c for c in columns if not c.startswith("sop_")]
        return [c.replace("sop_", f"{objective}_", 1) if c.startswith("sop_") else c for c in columns]

    return {"train": rename(TRAIN_COLUMNS), "eval": rename(EVAL_COLUMNS), "guard": GUARD_COLUMNS}


class MetricsError(LitebertError, ValueError):
    """A metrics file of a run folder cannot be read (a line that is not a metrics record)."""


def _complete_lines(path: Path, warn: bool = True) -> list[str]:
    """The lines of ``path``, without a torn last line (no final newline: the process was killed while writing it),
    which is dropped with a warning."""
    text = decode_utf8(path.read_bytes(), path, MetricsError, errors="replace")
    lines = text.split("\n")
    torn = lines.pop()  # "" when the file ends with a newline
    if torn.strip() and warn:
        print(f"warning: {path}:{len(lines) + 1}: dropping an incomplete last line (the run was stopped while "
              f"writing it)", file=sys.stderr, flush=True)
    return lines


def read_jsonl_records(path: Path, warn: bool = True) -> list[tuple[str, dict]]:
    """(line, record) of every line of a ``metrics.jsonl``; a torn last line is dropped, any other line that is not a
    JSON object with an integer ``step`` raises `MetricsError` naming file:line."""
    out = []
    for i, line in enumerate(_complete_lines(path, warn), 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line, path, MetricsError, i)
        except MetricsError:
            record = None
        if not isinstance(record, dict) or type(record.get("step")) is not int:
            raise MetricsError(f"{path}:{i}: not a metrics record ({line[:60]!r}); fix or delete that line, then "
                               f"resume again")
        out.append((line, record))
    return out


def check_metrics(folder: Path) -> None:
    """Raise `MetricsError` (naming file:line) when the metrics files of a run cannot be continued; writes nothing."""
    jsonl = Path(folder) / folders.METRICS_JSONL
    if jsonl.is_file():
        read_jsonl_records(jsonl, warn=False)
    for name in (folders.TRAIN_CSV, folders.EVAL_CSV, folders.GUARD_CSV):
        if (Path(folder) / name).is_file():
            _csv_rows(Path(folder) / name, warn=False)


def _truncate_jsonl(path: Path, after_step: int) -> None:
    if not path.exists():
        return
    keep = [line for line, record in read_jsonl_records(path) if record["step"] <= after_step]
    atomic_write(path, "".join(line + "\n" for line in keep))


def _csv_rows(path: Path, warn: bool = True) -> list[list[str]]:
    rows = list(csv.reader(_complete_lines(path, warn)))
    for i, r in enumerate(rows[1:], 2):
        if r and not (r[0].isdigit()):
            raise MetricsError(f"{path}:{i}: the first column is not a step ({r[0][:40]!r}); fix or delete that "
                               f"line, then resume again")
    return rows


def _truncate_csv(path: Path, after_step: int) -> None:
    if not path.exists():
        return
    rows = _csv_rows(path)
    keep = rows[:1] + [r for r in rows[1:] if r and int(r[0]) <= after_step]
    text = io.StringIO(newline="")
    csv.writer(text).writerows(keep)
    atomic_write(path, text.getvalue())


class MetricsWriter(Callback):
    """Append-only metrics of one run; a no-op object on ranks other than 0 (``enabled=False``). As a callback of
    the loop (`litebert.engine.callbacks`) it writes the ``train`` record of every ``every``-th step (and of step
    ``last``), each evaluation as an ``eval`` record, and closes the files and trackers when the loop ends."""

    def __init__(self, folder: Path, enabled: bool = True, resume_step: int | None = None,
                 trackers: Trackers | None = None, columns: dict[str, list[str] | None] | None = None,
                 config: dict | None = None, every: int = 1, last: int | None = None):
        """``columns``: the CSV columns of each split ("train", "eval"); None for a split: the keys of its first
        record (or the header of its existing file). Default: the pretraining columns. ``trackers``: the trackers
        that also receive the records, as the run's plan resolved them (`litebert.engine.trackers`; default none);
        ``config``: the run's settings, sent once to a new tracker run."""
        self.enabled, self.every, self.last = enabled, every, last
        self.folder = Path(folder)
        self.trackers: list = []
        self._environment = contextlib.ExitStack()
        if not enabled:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.jsonl = self.folder / folders.METRICS_JSONL
        columns = columns or {"train": TRAIN_COLUMNS, "eval": EVAL_COLUMNS}
        self.csv = {split: (self.folder / f"{split}.csv", cols) for split, cols in columns.items()}
        if resume_step is None:  # a fresh run starts fresh files
            for p in [self.jsonl] + [p for p, _ in self.csv.values()]:
                p.unlink(missing_ok=True)
        else:
            _truncate_jsonl(self.jsonl, resume_step)
            for p, _ in self.csv.values():
                _truncate_csv(p, resume_step)
        # the trackers' libraries write nothing outside the run folder while they run (`trackers.environment`)
        self._environment.enter_context(environment(self.folder))
        try:
            self.trackers = open_trackers(trackers or Trackers(), self.folder, resume_step, config)
        except BaseException:
            self._environment.close()
            raise

    def log(self, split: str, record: dict) -> None:
        if not self.enabled:
            return
        # Appends (a line at a time, not through atomic_write: rewriting the whole file per record would cost
        # O(n^2)); a failed append is undone, so a full disk never leaves half a line in the middle of a file.
        path, columns = self.csv[split]
        new = not path.exists()
        if columns is None:  # this split's columns: the existing file's header, or this record's keys
            columns = list(record) if new else (_csv_rows(path, warn=False)[:1] or [list(record)])[0]
            self.csv[split] = (path, columns)
        text = io.StringIO(newline="")
        w = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: record.get(k, "") for k in columns})
        for target, line in ((self.jsonl, json.dumps({"split": split, **record}) + "\n"), (path, text.getvalue())):
            size = target.stat().st_size if target.exists() else 0
            try:
                with open(target, "a", newline="") as f:
                    f.write(line)
            except OSError as e:
                try:
                    os.truncate(target, size)
                except OSError:
                    pass
                print(f"warning: {target}: cannot append the step {record.get('step')} {split} record "
                      f"({e.strerror or e}); training continues without it", file=sys.stderr, flush=True)
        values = scalars(record)
        for tracker in list(self.trackers):
            try:
                tracker.log(split, record["step"], values)
            except Exception as e:  # a tracker that fails (its server gone) is dropped; the files go on
                print(f"warning: {tracker.name}: cannot log the step {record['step']} {split} record "
                      f"({type(e).__name__}: {first_line(e, 200)}); training continues "
                      f"without {tracker.name}", file=sys.stderr, flush=True)
                self.trackers.remove(tracker)

    def on_step(self, step: int, record: dict) -> None:
        if step % self.every == 0 or step == self.last:
            self.log("train", record)

    def on_evaluate(self, step: int, metrics: dict) -> None:
        self.log("eval", {"step": step, **metrics})

    def on_end(self, step: int) -> None:
        self.close()

    def close(self) -> None:
        # Called from the loops' ``finally``: an exception on its way out marks the tracker runs failed
        failed = sys.exc_info()[0] is not None
        for tracker in self.trackers:
            try:
                tracker.close(failed=failed)
            except Exception as e:
                print(f"warning: {tracker.name}: cannot close the run ({type(e).__name__}: {e})", file=sys.stderr,
                      flush=True)
        self.trackers = []
        self._environment.close()


def read_metrics(folder: Path, split: str = "train") -> list[dict]:
    """The records of one split from ``metrics.jsonl`` (the last one wins when a step appears twice)."""
    by_step: dict[int, dict] = {}
    path = Path(folder) / folders.METRICS_JSONL
    if path.exists():
        for _, r in read_jsonl_records(path):
            if r.get("split") == split:
                by_step[r["step"]] = r
    return [by_step[s] for s in sorted(by_step)]


def flops_per_sequence(config: AlbertConfig, seq_len: int, predictions: int) -> float:
    """Training FLOPs (forward + backward = 3 x forward, 2 FLOPs per multiply-add) of one full-length sequence
    (an upper bound with dynamic padding: shorter batches do less work).

    Counts the matmuls: shared layers cost their compute at every depth step (sharing saves parameters, not FLOPs);
    the E->H projection; attention scores and weighted values (2·L²·H per layer); the MLM head only at the
    ``predictions`` gathered positions (official ``gather_indexes``); the pooler/SOP head. Embedding lookups,
    LayerNorm, softmax and activations are ignored (standard MFU practice, PaLM Appendix B). Only the FLOPs the
    losses need are counted: the last depth step needs keys and values at every token but the rest only at the
    ``predictions`` positions and [CLS] (what ``AlbertForPreTraining`` computes given ``mlm_positions``).
    """
    h, e, i, v = config.hidden_size, config.embedding_size, config.intermediate_size, config.vocab_size
    n = config.num_hidden_layers * config.inner_group_num  # depth steps: each layer runs its inner-group blocks
    per_token_layer = 4 * h * h + 2 * h * i  # q, k, v, o projections; FFN in and out
    wanted = min(seq_len, predictions + 1)  # rows the last step computes beyond keys and values
    forward = seq_len * ((n - 1) * per_token_layer + (e * h if config.has_embedding_projection else 0))
    forward += seq_len * 2 * h * h + wanted * (2 * h * h + 2 * h * i)  # last step: K, V everywhere; Q, O, FFN
    forward += (n - 1) * 2 * seq_len * seq_len * h + 2 * wanted * seq_len * h  # QK^T and AV
    forward += predictions * (h * e + e * v)  # MLM head: dense H->E, tied decoder E->V
    forward += h * h + 2 * h  # pooler + SOP classifier
    return 3 * 2 * forward


# Dense peak TFLOP/s of common accelerators for the MFU estimate (vendor data sheets; bf16/fp16 tensor cores, no
# sparsity). Anything else: pass --peak-tflops.
PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0, "A10G": 125.0, "L4": 121.0,
               "V100": 125.0, "T4": 65.0, "A6000": 155.0}


def peak_tflops_of(device_name: str) -> float | None:
    for key, value in PEAK_TFLOPS.items():
        if key in device_name:
            return value
    return None
