"""One name per setting in both training commands (`litebert.engine.args.Machinery.ALIASES`): the earlier names of
pretraining's batch and clipping settings (``global_batch``, ``clip_norm``) are read as ``batch_size`` and
``max_grad_norm`` from config files, flags and the checkpoints that recorded them; given beside the new name, they are
refused naming both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from litebert.engine.args import Machinery
from litebert.engine.checkpoint import check_compatible
from litebert.errors import CheckpointError, ConfigError
from litebert.finetuning.config import FinetuneConfig, TrainArgs
from litebert.pretraining.config import TrainConfig


def test_both_commands_share_the_names():
    for cls in (TrainConfig, FinetuneConfig, TrainArgs):
        fields = cls.__dataclass_fields__
        assert "batch_size" in fields and "max_grad_norm" in fields, cls.__name__
        assert not {"global_batch", "clip_norm"} & set(fields), cls.__name__


def test_a_settings_file_with_the_earlier_names_reads_as_the_new(tmp_path):
    f = tmp_path / "train.json"
    f.write_text(json.dumps({"global_batch": 64, "clip_norm": 0.5, "micro_batch": 16}))
    cfg = TrainConfig.from_json(f)
    assert (cfg.batch_size, cfg.max_grad_norm, cfg.micro_batch) == (64, 0.5, 16)
    assert TrainConfig.from_dict({"global_batch": 32}).batch_size == 32


def test_an_earlier_name_beside_its_new_one_is_refused(tmp_path):
    f = tmp_path / "train.json"
    f.write_text(json.dumps({"global_batch": 64, "batch_size": 32}))
    with pytest.raises(ConfigError, match=r"'global_batch' is the earlier name of 'batch_size'; give one of them"):
        TrainConfig.from_json(f)
    assert Machinery.unalias({"clip_norm": 2.0, "lr": 1}, "x") == {"max_grad_norm": 2.0, "lr": 1}


def test_the_earlier_flags_still_parse():
    """``--global-batch``/``--clip-norm`` set the new settings (hidden from --help; errors name the new flags)."""
    import argparse

    from litebert.cli import add_config_arguments

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, TrainConfig)
    args = parser.parse_args(["--global-batch", "64", "--clip-norm", "0.5"])
    assert (args.batch_size, args.max_grad_norm) == (64, 0.5)
    assert "--global-batch" not in parser.format_help() and "--batch-size" in parser.format_help()


def test_a_checkpoint_that_recorded_the_earlier_names_resumes(tmp_path):
    """A run written before the rename recorded ``global_batch``/``clip_norm`` in its identity: the same values under
    the new names resume; another value is named under its new name."""
    now = {"model_config": {}, "train": {"batch_size": 16, "max_grad_norm": 1.0, "lr": 0.1}, "data": "d",
           "init": None, "max_steps": 10}
    saved = {**now, "train": {"global_batch": 16, "clip_norm": 1.0, "lr": 0.1}, "step": 4}
    check_compatible(saved, now, Path(tmp_path))
    with pytest.raises(CheckpointError, match=r"batch_size: checkpoint 8, now 16"):
        check_compatible({**saved, "train": {"global_batch": 8, "clip_norm": 1.0, "lr": 0.1}}, now, Path(tmp_path))


def test_a_checkpoint_written_before_a_setting_existed_resumes_with_its_former_value(tmp_path):
    """Fine-tuning checkpoints written before ``optim``, ``lr_scheduler_type``... existed lack them: they resume
    when the setting has the value those runs had (`TrainArgs.ADDED`), and are refused naming it otherwise."""
    from litebert.finetuning.loop import run_identity

    class Model:
        class config:
            @staticmethod
            def to_dict():
                return {"hidden_size": 8}

    args = TrainArgs(lr=0.1, batch_size=16, train_steps=10)
    now = {**run_identity(Model, args, []), "max_steps": 10}
    assert set(TrainArgs.ADDED) <= set(now["train"]) and now["added"] == TrainArgs.ADDED
    before = {k: v for k, v in now["train"].items() if k not in TrainArgs.ADDED}
    saved = {**now, "train": before, "step": 4}
    del saved["added"]
    check_compatible(saved, now, Path(tmp_path))
    for field, value in (("optim", "lamb"), ("lr_scheduler_type", "cosine"), ("label_smoothing_factor", 0.1),
                         ("class_weights", [1.0, 2.0]), ("eval_strategy", "epoch")):
        changed = TrainArgs(lr=0.1, batch_size=16, train_steps=10, **{field: value})
        said = f"{field}: checkpoint {TrainArgs.ADDED[field]!r}, now {value!r}"
        with pytest.raises(CheckpointError, match=re.escape(said)):
            check_compatible(saved, {**run_identity(Model, changed, []), "max_steps": 10}, Path(tmp_path))
