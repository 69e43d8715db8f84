"""Every config field is checked for type and range at construction, with field, value and expected type."""

import json
import math

import pytest

from litebert.config import AlbertConfig
from litebert.errors import ConfigError, LitebertError
from litebert.finetuning.config import TrainArgs
from litebert.pretraining.config import TrainConfig
from litebert.tasks.presets import PRESETS, preset_from_json


@pytest.mark.parametrize("field, value, message", [
    ("gradient_checkpointing", "no", "TrainConfig.gradient_checkpointing = 'no': expected bool"),
    ("gradient_checkpointing", 0, "TrainConfig.gradient_checkpointing = 0: expected bool"),
    ("lr", "0.001", "TrainConfig.lr = '0.001': expected float"),
    ("lr", math.nan, "TrainConfig.lr = nan: expected float"),
    ("lr", math.inf, "TrainConfig.lr = inf: expected float"),
    ("poly_power", -2, "TrainConfig.poly_power = -2: must be > 0"),
    ("max_steps", True, "TrainConfig.max_steps = True: expected int"),
    ("max_steps", 10.0, "TrainConfig.max_steps = 10.0: expected int"),
    ("max_steps", 0, "TrainConfig.max_steps = 0: must be >= 1"),
    ("warmup_steps", -1, "TrainConfig.warmup_steps = -1: must be >= 0"),
    ("masked_lm_prob", 0.0, r"TrainConfig.masked_lm_prob = 0.0: must lie in \(0, 1\)"),
    ("short_seq_prob", 1.0, r"TrainConfig.short_seq_prob = 1.0: must lie in \[0, 1\)"),
    ("weight_decay", -0.1, "TrainConfig.weight_decay = -0.1: must be >= 0"),
    ("optimizer", "sgd", "TrainConfig.optimizer = 'sgd': choose one of 'lamb', 'adamw'"),
    ("peak_tflops", "100", "TrainConfig.peak_tflops = '100': expected float or null"),
    ("peak_tflops", 0, "TrainConfig.peak_tflops = 0: must be > 0"),
])
def test_train_config_refuses(field, value, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**{field: value})


def test_a_huge_integer_for_a_float_is_a_range_error_not_an_overflow():
    with pytest.raises(ConfigError, match=r"TrainConfig.masked_lm_prob = 1000000000000000000000000000000\d*: must lie"):
        TrainConfig(masked_lm_prob=10 ** 400)


def test_train_config_accepts_ints_for_floats_and_null_for_optional():
    c = TrainConfig(lr=1, poly_power=2, max_grad_norm=1, peak_tflops=None, gradient_checkpointing=True)
    assert c.lr == 1 and c.poly_power == 2 and c.gradient_checkpointing is True


def test_train_config_from_json_names_the_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"lr": "0.001"}))
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_json(path)
    assert str(e.value) == f"{path}: TrainConfig.lr = '0.001': expected float or 'auto'"
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("field, value, message", [
    ("hidden_size", "768", "AlbertConfig.hidden_size = '768': expected int"),
    ("hidden_size", True, "AlbertConfig.hidden_size = True: expected int"),
    ("hidden_dropout_prob", 1.0, r"AlbertConfig.hidden_dropout_prob = 1.0: must lie in \[0, 1\)"),
    ("hidden_dropout_prob", "0.1", "AlbertConfig.hidden_dropout_prob = '0.1': expected float"),
    ("layer_norm_eps", 0, "AlbertConfig.layer_norm_eps = 0: must be > 0"),
    ("layer_norm_eps", math.nan, "AlbertConfig.layer_norm_eps = nan: expected float"),
    ("embedding_projection", "yes", "AlbertConfig.embedding_projection = 'yes': expected bool or null"),
    ("hidden_act", "tanh", "AlbertConfig.hidden_act = 'tanh': choose one of"),
    ("problem_type", "ranking", "AlbertConfig.problem_type = 'ranking': choose one of"),
    ("id2label", {0: 1, 1: 2}, "AlbertConfig.id2label = {0: 1, 1: 2}: expected dict of int to str or null"),
    ("bos_token_id", -1, "AlbertConfig.bos_token_id = -1: must be >= 0"),
])
def test_albert_config_refuses(field, value, message):
    with pytest.raises(ConfigError, match=message):
        AlbertConfig.from_preset("tiny", **{field: value})


def test_albert_config_json_and_hf_json(tmp_path):
    ok = AlbertConfig.from_preset("tiny")
    for to_dict in (ok.to_dict, ok.to_hf_dict):
        data = to_dict()
        data["hidden_dropout_prob"] = 0  # an int for a float: accepted
        path = tmp_path / "config.json"
        path.write_text(json.dumps(data))
        assert AlbertConfig.from_json(path).hidden_dropout_prob == 0
        data["num_hidden_layers"] = "4"
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError) as e:
            AlbertConfig.from_json(path)
        assert str(e.value) == f"{path}: AlbertConfig.num_hidden_layers = '4': expected int"
        data["num_hidden_layers"] = 4
        data["id2label"] = ["a", "b"]
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError, match="id2label"):
            AlbertConfig.from_json(path)


def test_every_preset_passes():
    for name in ("tiny", "albert-base-v2", "bert-base"):
        AlbertConfig.from_preset(name)
    assert len(PRESETS) > 10  # built at import: each passed the checks


@pytest.mark.parametrize("saved, message", [
    ({"lr": "0.001"}, "finetune.json: TaskPreset.lr = '0.001': expected float"),
    ({"max_seq_length": 0}, "finetune.json: TaskPreset.max_seq_length = 0: must be >= 1"),
    ({"warmup_proportion": 1.5}, r"TaskPreset.warmup_proportion = 1.5: must lie in \[0, 1\]"),
    ({"epochs": None, "train_steps": None}, "give train_steps or epochs"),
    ({"extra": {"doc_stride": "128"}}, "ExtractiveQA.doc_stride = '128': expected int"),
    ({"extra": ["x"]}, "'extra' must be JSON objects"),
])
def test_finetune_json_preset_refuses(saved, message):
    with pytest.raises(ConfigError, match=message):
        preset_from_json("squad1", saved)


def test_finetune_json_preset_reads_good_values():
    p = preset_from_json("squad1", {"max_seq_length": 128, "extra": {"doc_stride": 64}})
    assert p.max_seq_length == 128 and p.kind.doc_stride == 64


@pytest.mark.parametrize("field, value, message", [
    ("lr", "1e-5", "TrainArgs.lr = '1e-5': expected float"),
    ("batch_size", 0, "TrainArgs.batch_size = 0: must be >= 1"),
    ("patience", 0, "TrainArgs.patience = 0: must be >= 1"),
    ("group_by_length", "false", "TrainArgs.group_by_length = 'false': expected bool"),
    ("pad_to", 1.5, "TrainArgs.pad_to = 1.5: expected int or null"),
])
def test_train_args_refuses(field, value, message):
    args = dict(lr=1e-5, batch_size=8, train_steps=10)
    args[field] = value
    with pytest.raises(ConfigError, match=message) as e:
        TrainArgs(**args)
    assert isinstance(e.value, LitebertError)


VALUES = [None, True, False, 0, 1, -1, 3, 2 ** 40, 10 ** 400, 0.5, -0.5, 1.0, 1e-12, math.nan, math.inf, "", "1",
          "0.001", "no", "gelu", [], [1], {}, {"0": "a"}]


def _fuzz(build, base: dict, tmp_path, seeds: int = 300) -> dict:
    """Each seed edits one or two values (or a key) of ``base``, writes it as JSON and builds: a ConfigError (one
    line) or a config whose every field has the edited value."""
    import random

    seen = {"ok": 0, "error": 0}
    for seed in range(seeds):
        rng = random.Random(seed)
        data = dict(base)
        for _ in range(rng.randint(1, 2)):
            key = rng.choice(sorted(data))
            if rng.random() < 0.1:
                data[key + "x"] = data.pop(key)
            else:
                data[key] = rng.choice(VALUES)
        path = tmp_path / "c.json"
        path.write_text(json.dumps(data))  # NaN and Infinity as JSON writes them
        try:
            built = build(path)
        except ConfigError as e:
            assert "\n" not in str(e)
            seen["error"] += 1
            continue
        seen["ok"] += 1
        for key, value in json.loads(path.read_text()).items():
            if hasattr(built, key) and not isinstance(value, (dict, list)):
                assert getattr(built, key) == value or key in ("num_labels", "embedding_projection"), (key, value)
    return seen


def test_edited_train_config_files(tmp_path):
    seen = _fuzz(TrainConfig.from_json, TrainConfig().to_dict(), tmp_path)
    assert seen["error"] > 200 and seen["ok"] > 0


def test_edited_model_config_files(tmp_path):
    tiny = AlbertConfig.from_preset("tiny")
    for base in (tiny.to_dict(), tiny.to_hf_dict()):
        seen = _fuzz(AlbertConfig.from_json, {k: v for k, v in base.items() if k != "id2label"}, tmp_path)
        assert seen["error"] > 150 and seen["ok"] > 0


def test_edited_finetune_presets(tmp_path):
    seen = {"ok": 0, "error": 0}
    import random

    base = PRESETS["squad2"].to_json()
    for seed in range(300):
        rng = random.Random(seed)
        saved = json.loads(json.dumps(base))
        target = saved["extra"] if rng.random() < 0.3 else saved
        target[rng.choice(sorted(target))] = rng.choice(VALUES)
        try:
            preset_from_json("squad2", saved)
            seen["ok"] += 1
        except ConfigError as e:
            assert "\n" not in str(e)
            seen["error"] += 1
    assert seen["error"] > 100 and seen["ok"] > 0
