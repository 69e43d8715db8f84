"""Official TF ALBERT checkpoints -> litebert / HF folders, checked against the outputs TensorFlow computed when
scripts/make_tf_fixtures.py wrote the fixtures (tests/fixtures/tf/*/reference.npz), and HF transformers as a second
oracle on the written folders."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError, LitebertError, TokenizerError
from litebert.io.convert_tf import convert_tf_checkpoint, map_variable, official_config

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tf"
TOL = 1e-5


def _ref(name):
    ref = np.load(FIXTURES / name / "reference.npz", allow_pickle=False)
    inputs = {k: torch.from_numpy(ref[k]).long() for k in ("input_ids", "attention_mask", "token_type_ids")}
    return ref, inputs


def _close(got: torch.Tensor, want: np.ndarray):
    got = got.detach().numpy()
    assert got.shape == want.shape
    diff = float(np.abs(got - want).max())
    assert diff <= TOL, diff


def _convert(name, **kw):
    return convert_tf_checkpoint(FIXTURES / name, FIXTURES / name / "albert_config.json", **kw)


# ---------------------------------------------------------------------------------------------- name map, config
@pytest.mark.parametrize("tf_name, hf_name, transpose", [
    ("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", False),
    ("bert/embeddings/LayerNorm/gamma", "albert.embeddings.LayerNorm.weight", False),
    ("bert/encoder/embedding_hidden_mapping_in/kernel", "albert.encoder.embedding_hidden_mapping_in.weight", True),
    ("bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel",
     "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight", True),
    ("bert/encoder/transformer/group_3/inner_group_1/attention_1/self/value/bias",
     "albert.encoder.albert_layer_groups.3.albert_layers.1.attention.value.bias", False),
    ("bert/encoder/transformer/group_0/inner_group_0/attention_1/output/dense/kernel",
     "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.dense.weight", True),
    ("bert/encoder/transformer/group_0/inner_group_0/LayerNorm/beta",
     "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.LayerNorm.bias", False),
    ("bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel",
     "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight", True),
    ("bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/output/dense/bias",
     "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output.bias", False),
    ("bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma",
     "albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight", False),
    ("bert/pooler/dense/kernel", "albert.pooler.weight", True),
    ("cls/predictions/transform/dense/kernel", "predictions.dense.weight", True),
    ("cls/predictions/transform/LayerNorm/beta", "predictions.LayerNorm.bias", False),
    ("cls/predictions/output_bias", "predictions.bias", False),
    ("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", False),
    ("output_weights", "classifier.weight", False),
    ("output_bias", "classifier.bias", False),
    ("cls/squad/output_weights", "qa_outputs.weight", False),
    ("module/bert/embeddings/position_embeddings", "albert.embeddings.position_embeddings.weight", False),
])
def test_official_names(tf_name, hf_name, transpose):
    assert map_variable(tf_name) == (hf_name, transpose)


@pytest.mark.parametrize("name", ["global_step", "bert/pooler/dense/kernel/adam_m", "output_weights/adam_v",
                                  "loss/Mean", "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_2/gamma"])
def test_non_weights_are_not_mapped(name):
    assert map_variable(name) is None


def test_official_config_keys():
    cfg = official_config(FIXTURES / "pretrain" / "albert_config.json")  # has net_structure_type, gap_size, ...
    assert cfg.hidden_act == "gelu_new"  # official "gelu" is the tanh approximation
    assert (cfg.vocab_size, cfg.embedding_size, cfg.hidden_size, cfg.num_hidden_groups, cfg.inner_group_num) == \
        (40, 8, 16, 2, 2)
    assert cfg.has_embedding_projection
    assert not official_config(FIXTURES / "classifier" / "albert_config.json").has_embedding_projection  # E == H


def test_official_config_errors(tmp_path):
    bad = tmp_path / "albert_config.json"
    bad.write_text('{\n  "vocab_size": 30000,\n  "hidden_size": 768,,\n}')
    with pytest.raises(ConfigError, match=r"albert_config.json:3: not valid JSON"):
        official_config(bad)
    with pytest.raises(ConfigError, match="hidden_act = 'swish'"):
        official_config({"vocab_size": 10, "hidden_act": "swish"})
    with pytest.raises(ConfigError, match="nope.json: no such file"):
        official_config(tmp_path / "nope.json")


# ---------------------------------------------------------------------------------------------- numerics
def test_pretraining_checkpoint_matches_tensorflow():
    conv = _convert("pretrain")
    assert conv.head == "AlbertForPreTraining"
    ref, inputs = _ref("pretrain")
    with torch.no_grad():
        out = conv.model(**inputs)
        enc = conv.model.albert(**inputs)
    _close(enc.last_hidden_state, ref["sequence_output"])
    _close(enc.pooler_output, ref["pooled_output"])
    _close(out.prediction_logits, ref["mlm_logits"])
    _close(out.sop_logits, ref["sop_logits"])


def test_every_variable_and_parameter_is_accounted_for():
    conv = _convert("pretrain")
    manifest = json.loads((FIXTURES / "pretrain" / "manifest.json").read_text())
    assert sorted(set(conv.mapped) | set(conv.skipped) | set(conv.unused)) == sorted(manifest)
    assert set(conv.skipped) == {n for n in manifest if n.endswith(("/adam_m", "/adam_v")) or n == "global_step"}
    assert conv.unused == [] and conv.missing == [] and len(conv.mapped) == 80
    n_params = sum(p.numel() for p in conv.model.parameters())
    n_ckpt = sum(int(np.prod(manifest[n]["shape"])) for n in conv.mapped)
    assert n_params == n_ckpt  # nothing left at its random init, nothing loaded twice


def test_tf_hub_module_with_half_and_bfloat16_weights():
    conv = _convert("hub")
    assert conv.head == "AlbertForMaskedLM"
    assert conv.extra == ["albert.pooler.bias", "albert.pooler.weight"]
    ref, inputs = _ref("hub")
    with torch.no_grad():
        _close(conv.model(**inputs).logits, ref["mlm_logits"])
        base = _convert("hub", head="encoder")
        enc = base.model(**inputs)
    _close(enc.last_hidden_state, ref["sequence_output"])
    _close(enc.pooler_output, ref["pooled_output"])  # pooler kernel stored as bfloat16
    assert base.unused == sorted(n for n in json.loads((FIXTURES / "hub" / "manifest.json").read_text())
                                 if n.startswith("module/cls/"))


def test_fine_tuned_classifier_without_embedding_projection():
    conv = _convert("classifier")
    assert conv.head == "AlbertForSequenceClassification" and conv.model.config.num_labels == 3
    assert conv.skipped == ["global_step"]
    ref, inputs = _ref("classifier")
    with torch.no_grad():
        _close(conv.model(**inputs).logits, ref["classifier_logits"])
        _close(conv.model.albert(**inputs).last_hidden_state, ref["sequence_output"])


def test_head_override_reports_missing_head():
    conv = _convert("pretrain", head="sequence-classification")
    assert conv.missing == ["classifier.bias", "classifier.weight"]
    assert any(n.startswith("cls/") for n in conv.unused)


def test_written_folders_load_in_litebert_and_hf_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    from litebert.heads import AlbertForPreTraining, AlbertModel

    _convert("pretrain", out=tmp_path / "pre")
    _convert("hub", out=tmp_path / "hub")
    for name, folder in (("pretrain", tmp_path / "pre"), ("hub", tmp_path / "hub")):
        ref, inputs = _ref(name)
        with torch.no_grad():
            ours = AlbertModel.from_pretrained(folder)(**inputs)
            hf = transformers.AlbertModel.from_pretrained(folder).eval()(**inputs)
        for got in (ours, hf):  # the pooler of the MLM-only hub export is kept in the folder, as HF does
            _close(got.last_hidden_state, ref["sequence_output"])
            _close(got.pooler_output, ref["pooled_output"])
    ref, inputs = _ref("pretrain")
    with torch.no_grad():
        hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "pre").eval()(**inputs)
        ours = AlbertForPreTraining.from_pretrained(tmp_path / "pre", strict=True)(**inputs)
    for got in (hf, ours):
        _close(got.prediction_logits, ref["mlm_logits"])
        _close(got.sop_logits, ref["sop_logits"])


# ---------------------------------------------------------------------------------------------- bad input
def _config(tmp_path, **changes) -> Path:
    cfg = json.loads((FIXTURES / "pretrain" / "albert_config.json").read_text())
    cfg.update(changes)
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_config_shape_mismatch_names_variable_and_both_shapes(tmp_path):
    with pytest.raises(CheckpointError, match=r"bert/embeddings/word_embeddings: the checkpoint has shape \[40, 8\] "
                                              r"but the config gives \[41, 8\]"):
        convert_tf_checkpoint(FIXTURES / "pretrain", _config(tmp_path, vocab_size=41))
    with pytest.raises(CheckpointError, match=r"inner_group_0/ffn_1/intermediate/dense/bias: the checkpoint has shape "
                                              r"\[24\] but the config gives \[32\]"):
        convert_tf_checkpoint(FIXTURES / "pretrain", _config(tmp_path, intermediate_size=32))


def test_config_layer_structure_mismatch(tmp_path):
    with pytest.raises(CheckpointError, match=r"num_hidden_groups = 1 .* the checkpoint holds 2 group\(s\) of 2 "
                                              r"inner group\(s\).*group_1/inner_group_0"):
        convert_tf_checkpoint(FIXTURES / "pretrain", _config(tmp_path, num_hidden_groups=1))
    with pytest.raises(CheckpointError, match=r"not in the checkpoint: albert\.encoder\.albert_layer_groups\.0\."
                                              r"albert_layers\.2\."):
        convert_tf_checkpoint(FIXTURES / "pretrain", _config(tmp_path, inner_group_num=3))


def test_config_projection_mismatch(tmp_path):
    with pytest.raises(CheckpointError, match="has no bert/encoder/embedding_hidden_mapping_in"):
        convert_tf_checkpoint(FIXTURES / "classifier", _config(tmp_path))


def test_broken_checkpoints(tmp_path):
    shutil.copytree(FIXTURES / "pretrain", tmp_path / "p")
    (tmp_path / "p" / "model.ckpt-best.data-00000-of-00002").unlink()
    with pytest.raises(CheckpointNotFoundError, match="missing data shard"):
        convert_tf_checkpoint(tmp_path / "p", FIXTURES / "pretrain" / "albert_config.json")
    with pytest.raises(LitebertError, match="partitioned into 2 slices"):
        convert_tf_checkpoint(FIXTURES / "partitioned", FIXTURES / "pretrain" / "albert_config.json")
    with pytest.raises(CheckpointError, match="none of its 10 variables has an official ALBERT name"):
        convert_tf_checkpoint(FIXTURES / "dtypes", FIXTURES / "pretrain" / "albert_config.json")
    with pytest.raises(ConfigError, match="unknown head 'mlm'"):
        _convert("pretrain", head="mlm")


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_convert_and_list(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["convert", "tf", "--checkpoint", str(FIXTURES / "classifier" / "model.ckpt-best"),
               "--config", str(FIXTURES / "classifier" / "albert_config.json"), "--out", str(out)])
    assert rc == 0
    assert "AlbertForSequenceClassification: 25 variables mapped" in capsys.readouterr().out
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["AlbertForSequenceClassification"] and cfg["num_labels"] == 3
    assert main(["convert", "tf", "--checkpoint", str(FIXTURES / "dtypes"), "--list"]) == 0
    assert "bf16\tbfloat16\t[4, 2]" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    rc = main(["convert", "tf", "--checkpoint", str(FIXTURES / "pretrain"), "--config",
               str(_config(tmp_path, vocab_size=41)), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "error: bert/embeddings/word_embeddings: the checkpoint has shape [40, 8]" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
    assert main(["convert", "tf", "--checkpoint", str(FIXTURES / "pretrain")]) == 2
    assert "needs --config" in capsys.readouterr().err


def test_spm_tokenizer_is_saved_with_the_model(tmp_path):
    from litebert.tokenizer import AlbertTokenizer, train_tokenizer

    rng = np.random.default_rng(0)
    letters = list("abcdefghij")
    lines = [" ".join("".join(rng.choice(letters, rng.integers(1, 5))) for _ in range(8)) for _ in range(400)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines))
    train_tokenizer(tmp_path / "corpus.txt", tmp_path / "tok", vocab_size=40, progress=False)
    out = tmp_path / "out"
    _convert("pretrain", out=out, spm=tmp_path / "tok" / "spiece.model")
    assert (out / "spiece.model").read_bytes() == (tmp_path / "tok" / "spiece.model").read_bytes()
    assert AlbertTokenizer.from_pretrained(out).vocab_size == 40
    train_tokenizer(tmp_path / "corpus.txt", tmp_path / "tok30", vocab_size=30, progress=False)
    with pytest.raises(TokenizerError, match="has 30 pieces but the config's vocab_size is 40"):
        _convert("pretrain", out=tmp_path / "o2", spm=tmp_path / "tok30" / "spiece.model")
    assert not (tmp_path / "o2").exists()


def test_tensorflow_is_never_imported():
    import subprocess
    import sys

    code = ("import sys; from litebert.io.convert_tf import convert_tf_checkpoint; "
            f"convert_tf_checkpoint({str(FIXTURES / 'hub')!r}, {str(FIXTURES / 'hub' / 'albert_config.json')!r}); "
            "print(any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
