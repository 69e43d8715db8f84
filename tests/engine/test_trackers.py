"""`report_to`: W&B (offline) and MLflow (a file store) receive what metrics.jsonl gets, read back through each
tracker's own files and client and compared with the run's metrics.jsonl and train_config.json / finetune.json."""

import json
import struct
import sys
from pathlib import Path

import pytest

from helpers.separable_task import finetune
from litebert.cli import main
from litebert.engine import trackers
from litebert.errors import ConfigError
from litebert.finetuning.run import FinetuneConfig
from litebert.pretraining.config import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")

wandb = pytest.importorskip("wandb")
mlflow = pytest.importorskip("mlflow")

REPO = Path(__file__).resolve().parents[2]
TIMING = ("tokens_per_s", "elapsed_s", "tflops", "examples_per_s")  # differ between a run and its replay


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """W&B offline and MLflow on a file store, everything under tmp_path; returns the MLflow tracking URI."""
    for name in ("WANDB_DIR", "WANDB_PROJECT", "WANDB_NAME", "WANDB_RUN_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name in ("CONFIG", "CACHE", "DATA", "ARTIFACT"):
        monkeypatch.setenv(f"WANDB_{name}_DIR", str(tmp_path / "wandb-home" / name.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    uri = f"file://{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses the file store otherwise
    return uri


def tiny(**kw) -> TrainConfig:
    return TrainConfig(**{**dict(max_steps=4, batch_size=8, micro_batch=4, lr=5e-3, seq_len=64, max_predictions=10,
                                 eval_every=2, eval_examples=16, save_every=2, keep_last=0, seed=3), **kw})


def jsonl(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def expected(records: list[dict], skip=()) -> dict[str, dict[int, float]]:
    """{"train/loss": {step: value}, "eval/mlm_accuracy": ...}: what every tracker should hold."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        for k, v in r.items():
            if k not in ("step", "split") + tuple(skip) and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(f"{r['split']}/{k}", {})[r["step"]] = v
    return out


# ------------------------------------------------------------------------------------- reading the trackers back
def wandb_records(path: Path):
    """The protobuf records of an offline W&B run file (``run-ID.wandb``): a 7-byte header (``:W&B``, magic,
    version), then LevelDB log blocks of 32 KiB whose records have a 7-byte header (crc32c, length, type:
    1 full, 2 first, 3 middle, 4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += block - pos % block
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


def wandb_run(folder: Path) -> dict:
    """What the offline W&B runs under ``folder/wandb`` hold: their ids, names, projects, config and history."""
    runs = sorted((folder / "wandb").glob("offline-run-*/run-*.wandb"))
    out = {"ids": [], "names": [], "projects": [], "config": {}, "history": {}}
    for path in runs:
        for r in wandb_records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                out["ids"].append(r.run.run_id)
                out["names"].append(r.run.display_name)
                out["projects"].append(r.run.project)
                out["config"].update({u.key: json.loads(u.value_json) for u in r.run.config.update})
            elif kind == "history":
                row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
                for k, v in row.items():
                    if not k.startswith("_"):
                        out["history"].setdefault(k, {})[row["_step"]] = v
    return out


def mlflow_run(uri: str, folder: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(json.loads((folder / "trackers.json").read_text())["mlflow"]["run_id"])
    history = {}
    for key in run.data.metrics:
        points = client.get_metric_history(run.info.run_id, key)
        steps = [m.step for m in points]
        assert len(steps) == len(set(steps)), f"{key}: a step logged twice: {sorted(steps)}"
        history[key] = {m.step: m.value for m in points}
    experiment = client.get_experiment(run.info.experiment_id).name
    return run, history, experiment


def assert_same(got: dict, want: dict, skip=()):
    got = {k: v for k, v in got.items() if k.split("/", 1)[1] not in skip}
    assert sorted(got) == sorted(want)
    for key in want:
        assert sorted(got[key]) == sorted(want[key]), key
        assert [got[key][s] for s in sorted(want[key])] == pytest.approx([want[key][s] for s in sorted(want[key])],
                                                                         rel=1e-6), key


# ---------------------------------------------------------------------------------------------------- pretraining
def test_pretraining_reports_to_wandb_and_mlflow(tiny_setup, tmp_path, offline, monkeypatch):
    from litebert import pretrain

    monkeypatch.setenv("WANDB_PROJECT", "albert-tests")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "albert-experiment")
    out = tmp_path / "run-a"
    pretrain(tiny_setup["store"], out, model="tiny", train=tiny(report_to="wandb,mlflow"),
             eval_data=tiny_setup["eval_store"], progress=False)
    records = jsonl(out)
    want = expected(records)
    assert {r["step"] for r in records if r["split"] == "eval"} == {0, 2, 4} and "train/mlm_loss" in want

    w = wandb_run(out)
    assert w["ids"] == [json.loads((out / "trackers.json").read_text())["wandb"]["id"]]
    assert w["names"] == ["run-a"] and w["projects"] == ["albert-tests"]
    assert_same(w["history"], want)
    settings = json.loads((out / "train_config.json").read_text())
    assert {k: w["config"][k] for k in settings} == settings  # the run's config, once

    run, history, experiment = mlflow_run(offline, out)
    assert experiment == "albert-experiment" and run.info.run_name == "run-a" and run.info.status == "FINISHED"
    assert_same(history, want)
    flat = trackers.flatten(settings)
    assert run.data.params == {k: v if isinstance(v, str) else json.dumps(v) for k, v in flat.items()}
    assert run.data.params["model.hidden_size"] == str(settings["model"]["hidden_size"])


def test_resume_continues_the_same_tracker_runs(tiny_setup, tmp_path, offline):
    """A run stopped at step 3 whose step-3 checkpoint is lost resumes from step 2: metrics.jsonl is rewritten from
    there, MLflow keeps the run and logs each step once (step 3 was logged by the first call), W&B continues the
    run id in a second offline folder."""
    from litebert import pretrain

    out = tmp_path / "run-b"
    cfg = tiny(max_steps=6, report_to="wandb,mlflow")
    first = pretrain(tiny_setup["store"], out, model="tiny", train=cfg, eval_data=tiny_setup["eval_store"],
                     progress=False, stop_after=3)
    assert first.interrupted and first.step == 3
    ids = json.loads((out / "trackers.json").read_text())
    for p in (out / "checkpoints").glob("step-00000003.pt*"):
        p.unlink()
    done = pretrain(tiny_setup["store"], out, model="tiny", train=cfg, eval_data=tiny_setup["eval_store"],
                    progress=False, resume=True)
    assert done.complete and json.loads((out / "trackers.json").read_text()) == ids
    records = jsonl(out)
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3, 4, 5, 6]
    run, history, _ = mlflow_run(offline, out)
    assert run.info.status == "FINISHED"
    assert_same(history, expected(records, TIMING), skip=TIMING)  # step 3: the first call's values, same loss
    w = wandb_run(out)
    assert w["ids"] == [ids["wandb"]["id"]] * 2  # two offline folders of one run, merged by `wandb sync`
    assert_same(w["history"], expected(records, TIMING), skip=TIMING)


# ---------------------------------------------------------------------------------------------------- fine-tuning
def test_finetuning_reports_to_both_and_overwrite_clears_them(separable_task, tmp_path, offline, capsys):
    out = tmp_path / "ft"
    assert main(finetune(separable_task, out, "--max-steps", "6", "--batch-size", "8", "--eval-every", "3",
                         "--log-every", "2", "--report-to", "wandb,mlflow")) == 0
    records = jsonl(out)
    want = expected(records)
    assert "eval/accuracy" in want and sorted(want["eval/accuracy"]) == [3, 6]
    assert_same(wandb_run(out)["history"], want)
    run, history, experiment = mlflow_run(offline, out)
    assert_same(history, want)
    assert experiment == "litebert" and run.info.run_name == "ft"
    meta = json.loads((out / "finetune.json").read_text())
    assert run.data.params["task"] == meta["task"] == "classify"
    assert run.data.params["train.lr"] == json.dumps(meta["train"]["lr"]) == "0.002"
    assert run.data.params["train.report_to"] == "wandb,mlflow"
    # the W&B and MLflow files belong to the run: --overwrite replaces them with the rest
    assert main(finetune(separable_task, out, "--max-steps", "2", "--batch-size", "8", "--overwrite", "--report-to",
                         "none")) == 0
    assert not (out / "wandb").exists() and not (out / "trackers.json").exists()
    assert "TensorBoard is not installed" not in capsys.readouterr().err  # none: no notice


# ------------------------------------------------------------------------------------------------ refusals
def test_unknown_tracker_is_a_one_line_config_error(capsys, tmp_path):
    with pytest.raises(ConfigError, match=r"TrainConfig.report_to = 'comet': unknown tracker 'comet'; give none, "
                                          r"auto, or a comma list of tensorboard, wandb, mlflow"):
        TrainConfig(report_to="comet")
    with pytest.raises(ConfigError, match=r"FinetuneConfig.report_to = 'wandb,none': 'auto' and 'none' stand alone"):
        FinetuneConfig(report_to="wandb,none")
    assert trackers.parse(" wandb , mlflow") == ("wandb", "mlflow")
    for bad, message in (("wandb,mlflow,wandb", "'wandb' is there twice"), ("wandb,", "an empty item")):
        with pytest.raises(ConfigError, match=message):  # one strict parser of names (`litebert.values`)
            trackers.parse(bad)
    assert main(["pretrain", "--preset", "tiny", "--data", "S", "--out", str(tmp_path / "r"), "--report-to",
                 "tensorbord"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["litebert pretrain: error: --report-to tensorbord: unknown tracker "
                                        "'tensorbord'; give none, auto, or a comma list of tensorboard, wandb, mlflow"]


def test_missing_package_is_refused_before_anything_is_written(separable_task, tiny_setup, tmp_path, capsys,
                                                               monkeypatch):
    monkeypatch.setattr(trackers, "_installed", lambda name: name != "wandb")
    out = tmp_path / "r"
    assert main(["pretrain", "--preset", "tiny", "--data", str(tiny_setup["store"]), "--out", str(out), "--report-to",
                 "mlflow,wandb", "--max-steps", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["litebert pretrain: error: --report-to mlflow,wandb: the wandb package is not installed; "
                   "pip install "
                   f"'wandb>=0.17', or the trackers extra from the checkout: pip install -e '{REPO}[trackers]'"]
    assert main(finetune(separable_task, out, "--max-steps", "2", "--report-to", "wandb")) == 2
    assert "--report-to wandb: the wandb package is not installed" in capsys.readouterr().err
    assert not out.exists()
    # auto without TensorBoard: no tracker, and a notice (tested in test_finetune_train)
    monkeypatch.setattr(trackers, "_installed", lambda name: False)
    assert trackers.resolve("auto").names == () and trackers.resolve("none").names == ()


def test_a_tracker_that_cannot_start_is_one_line(tiny_setup, tmp_path, offline, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")  # MLflow 3 refuses its file store without it
    out = tmp_path / "r"
    assert main(["pretrain", "--preset", "tiny", "--data", str(tiny_setup["store"]), "--out", str(out), "--report-to",
                 "mlflow", "--max-steps", "2", "--batch-size", "8", "--micro-batch", "4", "--seq-len", "64",
                 "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and err[0].startswith("litebert pretrain: error: mlflow: cannot start the run "
                                               "(MlflowException: ")
    assert err[0].endswith("set MLFLOW_TRACKING_URI to an MLflow server (http://HOST:5000) or a folder "
                           "(file:./mlruns, with MLFLOW_ALLOW_FILE_STORE=true on MLflow 3)")
    assert not out.exists()  # refused before the run folder is written: the same command runs once the URI is fixed


def test_auto_with_a_tensorboard_that_does_not_import_is_a_notice(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trackers, "_installed", lambda name: name == "tensorboard")
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # the package is found; torch's side fails
    assert trackers.open_trackers(trackers.resolve("auto"), tmp_path, None, {}) == []
    err = capsys.readouterr().err
    assert err.startswith("notice: TensorBoard cannot be imported (") and "metrics are in" in err
    with pytest.raises(trackers.TrackerError, match="tensorboard: cannot start the run"):  # asked for: refused
        trackers.open_trackers(trackers.resolve("tensorboard"), tmp_path, None, {})
