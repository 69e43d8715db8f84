"""The run-folder planner (`litebert.folders`): what every writer decides before it writes, hand-checked case by case;
the lock; output files; and the memory check made before a model is built."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from litebert import folders
from litebert.config import AlbertConfig
from litebert.errors import ConfigError
from litebert.folders import OWNER_FILE, OutputError


def marked(folder, kind, **info):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OWNER_FILE).write_text(json.dumps({"kind": kind, **info}))
    return folder


def snapshot(folder):
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("layout, marker, resume, overwrite, action", [
    (folders.RUN, None, False, False, "new"),
    (folders.RUN, {"complete": False, "step": 3}, True, False, "resume"),
    (folders.RUN, {"complete": True, "step": 9}, True, False, "finished"),
    (folders.RUN, {"complete": True}, False, True, "overwrite"),
    (folders.STORE, {"complete": False}, False, False, "restart"),  # a killed preparation: nothing to continue
    (folders.TOKENIZER, {"complete": True}, False, True, "overwrite"),
    (folders.EXPERIMENT, {"complete": False}, True, False, "resume"),
])
def test_the_plan_of_each_folder_state(tmp_path, layout, marker, resume, overwrite, action):
    out = tmp_path / "out"
    if marker is not None:
        marked(out, layout.kind, **marker)
    before = snapshot(tmp_path)
    assert folders.plan(out, layout, resume=resume, overwrite=overwrite).action == action
    assert snapshot(tmp_path) == before  # planning writes nothing


@pytest.mark.parametrize("state, flags, message", [
    ("file", {}, "is a file"),
    ("user", {"overwrite": True}, "was not written by litebert"),
    ("other-kind", {"overwrite": True}, "holds a litebert token store, not a pretraining run"),
    ("finished", {}, "already holds a pretraining run (finished, step 4); pass overwrite"),
    ("unfinished", {}, "(not finished, step 2); continue it with resume"),
    ("deep-foreign", {"overwrite": True}, "does not write (model/README.md)"),
    ("finished", {"overwrite": True, "resume": True}, "give one of them"),
])
def test_refusals_name_the_folder_and_write_nothing(tmp_path, state, flags, message):
    out = tmp_path / "out"
    if state == "file":
        out.write_text("mine")
    elif state == "user":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif state == "other-kind":
        marked(out, "token-store")
    elif state in ("finished", "unfinished"):
        marked(out, "pretraining-run", complete=state == "finished", step=4 if state == "finished" else 2)
    else:
        marked(out, "pretraining-run", complete=True)
        (out / "model").mkdir()
        (out / "model" / "config.json").write_text("{}")
        (out / "model" / "README.md").write_text("my notes")
    before = snapshot(tmp_path)
    with pytest.raises((OutputError, ConfigError)) as e:
        folders.plan(out, folders.RUN, **flags)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert snapshot(tmp_path) == before


def test_overwrite_deletes_only_what_the_layout_owns_at_every_depth(tmp_path):
    out = marked(tmp_path / "run", "pretraining-run", complete=True)
    for name in ("train_config.json", "metrics.jsonl", "model/config.json", "model/spiece.model",
                 "checkpoints/step-00000004.pt", "checkpoints/step-00000004.pt.sha256",
                 "tensorboard/events.out.tfevents.1.host"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("x")
    assert folders.foreign(out, folders.RUN) == []
    with folders.begin(folders.plan(out, folders.RUN, overwrite=True)) as writer:
        assert sorted(p.name for p in out.iterdir()) == [OWNER_FILE]
        writer.finish(step=0)
    assert folders.read_marker(out)["complete"] is True


def test_an_experiment_folder_with_its_baselines_is_all_litebert_own(tmp_path):
    out = marked(tmp_path / "experiment", "experiment", complete=True)
    for name in ("experiment.json", "results.json", "arms/none/scores.json", "arms/none/pretrain/model/config.json",
                 "baselines/baselines.json", "baselines/from-scratch/model/config.json",
                 "baselines/from-scratch/model/model.safetensors", "baselines/from-scratch/model/spiece.model",
                 "baselines/from-scratch/model.partial/config.json", "baselines/from-scratch/sentiment/finetune.json",
                 "baselines/from-scratch/mc/checkpoints/step-00000004.pt",
                 "baselines/from-scratch/sentiment/lr-0.001/finetune.json",
                 "baselines/from-scratch/mc/lr-0.0003/checkpoints/step-00000004.pt"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("x")
    assert folders.foreign(out, folders.EXPERIMENT) == []
    (out / "baselines" / "notes.txt").write_text("mine")
    (out / "baselines" / "from-scratch" / "model" / "README.md").write_text("mine")
    assert folders.foreign(out, folders.EXPERIMENT) == ["baselines/from-scratch/model/README.md",
                                                       "baselines/notes.txt"]


def test_outputs_apart_from_inputs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for out, how in ((data, "is the same path as"), (data / "sub", "lies inside"), (tmp_path, "holds")):
        with pytest.raises(OutputError, match=how):
            folders.plan(out, folders.RUN, inputs={"data": data})


def test_a_second_writer_is_refused_and_a_killed_one_leaves_no_lock(tmp_path):
    out = tmp_path / "run"
    plan = folders.plan(out, folders.RUN)
    with folders.begin(plan):
        with pytest.raises(OutputError, match="being written by another litebert process"):
            folders.lock(out)  # another open file description: as another process would
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], "
                               "os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); "
                               "time.sleep(60)", str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputError, match="another litebert process"):
            folders.begin(folders.plan(out, folders.RUN, resume=True))
    finally:
        holder.kill()
        holder.wait()
    folders.begin(folders.plan(out, folders.RUN, resume=True)).close()  # the kernel released the dead one's lock


def test_begin_refuses_a_folder_changed_since_its_plan(tmp_path):
    out = tmp_path / "run"
    plan = folders.plan(out, folders.RUN)
    marked(out, "pretraining-run", complete=True)  # another process finished a run there meanwhile
    with pytest.raises(OutputError, match="changed while this command checked it"):
        folders.begin(plan)


def test_output_files(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "dev.tsv"
    data.write_text("x")
    refusals = [(data, {}, "is the same path as data"), (model / "rows.jsonl", {}, "lies inside model"),
                (tmp_path / "run" / "rows.jsonl", {}, "a folder holding a litebert output"),
                (tmp_path / "old.jsonl", {}, "exists; pass overwrite"), (tmp_path / "run", {}, "is a folder")]
    marked(tmp_path / "run", "pretraining-run")
    (tmp_path / "old.jsonl").write_text("kept")
    for path, kw, message in refusals:
        with pytest.raises(OutputError, match=message):
            folders.plan_file(path, inputs={"model": model, "data": data}, **kw)
    assert folders.plan_file(tmp_path / "old.jsonl", overwrite=True) == tmp_path / "old.jsonl"
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OutputError, match="cannot follow its symbolic links"):
        folders.plan_file(tmp_path / "a" / "x.jsonl")


def test_temporaries_of_killed_writes_are_removed_and_live_ones_kept(tmp_path):
    out = marked(tmp_path / "run", "pretraining-run", complete=False)
    dead = 2 ** 22 + 12345  # above the default pid_max: no such process
    leftovers = [out / f".metrics.jsonl.tmp-{dead}", out / "checkpoints" / f"step-00000002.pt.tmp{dead}"]
    live = out / f".train_config.json.tmp-{os.getpid()}"
    for p in leftovers + [live]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("half")
    folders.begin(folders.plan(out, folders.RUN, resume=True)).close()
    assert not any(p.exists() for p in leftovers) and live.exists()


def test_the_memory_check_names_the_field_before_anything_is_allocated():
    from litebert.params import check_memory, count_parameters, memory_bytes

    base = AlbertConfig.from_preset("albert-base-v2")
    for field, value in (("num_hidden_layers", 10 ** 9), ("hidden_size", 10 ** 7), ("intermediate_size", 10 ** 9),
                         ("vocab_size", 10 ** 10)):
        config = dataclasses.replace(base, **{field: value},
                                     **({"num_attention_heads": 1} if field == "hidden_size" else {}))
        with pytest.raises(ConfigError, match=rf"AlbertConfig\.{field} = {value}: this shape needs at least"):
            check_memory(config, 32, 128, 64 << 30)
    # the paper's largest shapes at real batches fit a large machine; the bound is at least the weights' fp32 bytes
    check_memory(AlbertConfig.from_preset("albert-xxlarge-v2"), 8, 512, 1 << 40)
    check_memory(AlbertConfig.from_preset("bert-large"), 32, 512, 1 << 40)
    assert memory_bytes(base, 1, 1, training=False) >= 4 * count_parameters(base, heads=True)
    assert memory_bytes(base, 32, 128) > memory_bytes(base, 16, 128) > memory_bytes(base, 16, 128, training=False)
