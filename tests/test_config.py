"""AlbertConfig: presets against the paper's figures, validation messages, JSON and HF config round trips."""

import dataclasses
import json

import pytest
import torch

from litebert.config import PRESETS, AlbertConfig
from litebert.errors import ConfigError
from litebert.params import count_parameters

# Exact encoder+pooler parameter counts (hand-derived from the paper's Table 1 shapes and the official code:
# e.g. base = 30000*128 + 512*128 + 2*128 + 2*128 (embeddings) + 128*768 + 768 (projection)
#           + 4*(768*768 + 768) + 2*768 + 768*3072 + 3072 + 3072*768 + 768 + 2*768 (one shared layer)
#           + 768*768 + 768 (pooler) = 11,683,584).
EXPECTED = {
    "albert-base-v2": 11_683_584, "albert-large-v2": 17_683_968, "albert-xlarge-v2": 58_724_864,
    "albert-xxlarge-v2": 222_595_584, "albert-base-v1": 11_683_584, "albert-xxlarge-v1": 222_595_584,
    "bert-base": 109_081_344, "bert-large": 334_607_360,
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_parameter_counts(name):
    assert count_parameters(AlbertConfig.from_preset(name)) == EXPECTED[name]


def test_base_count_by_hand():
    v, e, h, f, p = 30000, 128, 768, 3072, 512
    embeddings = v * e + p * e + 2 * e + 2 * e
    layer = 4 * (h * h + h) + 2 * h + (h * f + f) + (f * h + h) + 2 * h
    total = embeddings + (e * h + h) + layer + (h * h + h)
    assert count_parameters(AlbertConfig.from_preset("albert-base-v2")) == total
    # MLM head adds H->E dense, E LayerNorm, V bias (decoder tied); SOP adds H*2+2.
    assert (count_parameters(AlbertConfig.from_preset("albert-base-v2"), heads=True)
            == total + (h * e + e) + 2 * e + v + 2 * h + 2)


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
@pytest.mark.parametrize("shape", [dict(embedding_size=16, hidden_size=32), dict(embedding_size=32, hidden_size=32),
                                   dict(embedding_size=32, hidden_size=32, embedding_projection=True),
                                   dict(embedding_size=8, hidden_size=32, num_hidden_groups=2, inner_group_num=2)])
def test_counts_equal_the_real_modules(sharing, shape):
    """The counts come from the config alone; the real modules (built on the meta device) are the oracle."""
    from litebert.heads import AlbertForPreTraining
    from litebert.model import AlbertModel

    if sharing == "none" and shape.get("num_hidden_groups", 1) > 1:
        shape = {**shape, "num_hidden_groups": 1}
    cfg = AlbertConfig(vocab_size=97, num_hidden_layers=4, num_attention_heads=4, intermediate_size=48,
                       max_position_embeddings=40, sharing=sharing, **shape)
    with torch.device("meta"):
        encoder, full = AlbertModel(cfg), AlbertForPreTraining(cfg)
    assert count_parameters(cfg) == sum(p.numel() for p in encoder.parameters())
    assert count_parameters(cfg, heads=True) == sum(p.numel() for p in full.parameters())


@pytest.mark.parametrize("sharing,e,paper_millions", [
    ("all", 64, 10), ("all", 256, 16), ("all", 768, 31), ("none", 64, 87), ("none", 256, 93),
    ("attention", 128, 64), ("attention", 768, 83), ("ffn", 128, 38), ("ffn", 768, 57)])
def test_sharing_grid_matches_paper_tables(sharing, e, paper_millions):
    cfg = dataclasses.replace(AlbertConfig.from_preset("albert-base-v2"), embedding_size=e, sharing=sharing)
    # The paper prints rounded (sometimes truncated) millions: 87.6M appears as 87M, 109.1M as 108M.
    assert abs(count_parameters(cfg) / 1e6 - paper_millions) < 1.2


def test_preset_shapes_follow_table_1():
    shapes = {"base": (768, 12, 12, 3072), "large": (1024, 24, 16, 4096), "xlarge": (2048, 24, 16, 8192),
              "xxlarge": (4096, 12, 64, 16384)}
    for size, (h, layers, heads, ffn) in shapes.items():
        for version in ("v1", "v2"):
            c = AlbertConfig.from_preset(f"albert-{size}-{version}")
            assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                    c.intermediate_size) == (h, layers, heads, ffn)
            assert c.embedding_size == 128 and c.vocab_size == 30000 and c.sharing == "all"
            expected_dropout = 0.1 if version == "v1" and size != "xxlarge" else 0.0
            assert c.hidden_dropout_prob == c.attention_probs_dropout_prob == expected_dropout
    bert = AlbertConfig.from_preset("bert-base")
    assert bert.embedding_size == bert.hidden_size and not bert.has_embedding_projection and bert.sharing == "none"
    assert all(PRESETS[n].source for n in PRESETS)


@pytest.mark.parametrize("fields,needle", [
    (dict(hidden_size=100), "hidden_size = 100"),
    (dict(num_hidden_layers=12, num_hidden_groups=5), "num_hidden_groups = 5"),
    (dict(hidden_act="tanh"), "hidden_act = 'tanh'"),
    (dict(sharing="half"), "sharing = 'half'"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob = 1.5"),
    (dict(vocab_size=0), "vocab_size = 0"),
    (dict(embedding_size=64, embedding_projection=False), "embedding_projection"),
])
def test_validation_names_field_and_value(fields, needle):
    with pytest.raises(ConfigError) as info:
        AlbertConfig(**fields)
    assert needle in str(info.value)


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError) as info:
        AlbertConfig.from_preset("albert-huge")
    assert "albert-huge" in str(info.value) and "albert-base-v2" in str(info.value) and "bert-large" in str(info.value)


def test_schedule_follows_official_grouping():
    # 6 layers, 3 groups, 2 inner blocks: layer l uses group int(l*3/6); inner blocks run in sequence.
    c = AlbertConfig(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2, hidden_size=32, num_attention_heads=4)
    attention, ffn = c.schedule()
    assert attention == ffn == [0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5]
    c = dataclasses.replace(c, sharing="attention")
    attention, ffn = c.schedule()
    assert attention == [0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5] and ffn == list(range(12))


def test_json_round_trip(tmp_path):
    c = AlbertConfig.from_preset("albert-large-v1", sharing="ffn", num_labels=3)
    c.to_json(tmp_path / "c.json")
    assert AlbertConfig.from_json(tmp_path / "c.json") == c


def test_bad_json_file_says_where(tmp_path):
    (tmp_path / "c.json").write_text('{"hidden_size": 768,\n "oops"}')
    with pytest.raises(ConfigError, match=r"c\.json:2"):
        AlbertConfig.from_json(tmp_path / "c.json")
    (tmp_path / "d.json").write_text('{"hidden_sise": 768}')
    with pytest.raises(ConfigError, match="hidden_sise"):
        AlbertConfig.from_json(tmp_path / "d.json")


def test_hf_config_round_trip(tmp_path):
    transformers = pytest.importorskip("transformers")
    c = AlbertConfig.from_preset("albert-xlarge-v1", num_hidden_groups=2, inner_group_num=2)
    (tmp_path / "config.json").write_text(json.dumps(c.to_hf_dict()))
    hf = transformers.AlbertConfig.from_pretrained(tmp_path)
    for field in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                  "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
                  "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size", "layer_norm_eps"):
        assert getattr(hf, field) == getattr(c, field), field
    back = AlbertConfig.from_hf_dict(hf.to_dict())
    assert back == c


def test_official_config_extra_keys_are_ignored():
    official = {"attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
                "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
                "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
                "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
                "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2, "vocab_size": 30000}
    c = AlbertConfig.from_hf_dict(official)
    assert c.hidden_size == 768 and c.hidden_act == "gelu"


def test_replace_and_from_preset_build_the_same_model():
    """Derived values are properties, not fields rewritten at construction: changing a field with
    dataclasses.replace gives what from_preset gives with the same field."""
    from litebert.model import AlbertModel

    base = AlbertConfig.from_preset("albert-base-v2")
    for overrides in (dict(embedding_size=768), dict(sharing="none"), dict(sharing="attention", embedding_size=256)):
        replaced, built = (dataclasses.replace(base, **overrides),
                           AlbertConfig.from_preset("albert-base-v2", **overrides))
        assert replaced == built, overrides
        assert count_parameters(replaced) == count_parameters(built)
    # E == H: no projection either way (the official rule), where it used to be kept by replace
    assert not dataclasses.replace(base, embedding_size=768).has_embedding_projection
    # a not-shared config turned all-shared builds one block of each, not twelve
    not_shared = AlbertConfig.from_preset("bert-base")
    assert not_shared.layer_groups == 12 and not_shared.schedule()[0] == list(range(12))
    shared = dataclasses.replace(not_shared, sharing="all")
    assert shared.layer_groups == 1 and shared.schedule() == ([0] * 12, [0] * 12)
    with torch.device("meta"):
        encoder = AlbertModel(shared).encoder
    assert len(encoder.attention_blocks) == len(encoder.ffn_blocks) == 1
    # and the BERT preset at another E gets the projection it needs, as from_preset does
    assert dataclasses.replace(not_shared, embedding_size=128) == AlbertConfig.from_preset("bert-base",
                                                                                          embedding_size=128)
    assert dataclasses.replace(not_shared, embedding_size=128).has_embedding_projection


def test_config_is_frozen_and_labels_must_agree():
    c = AlbertConfig.from_preset("tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.hidden_size = 64
    with_names = dataclasses.replace(c, num_labels=3, id2label={0: "neg", 1: "neutral", 2: "pos"})
    assert with_names.num_labels == 3
    with pytest.raises(ConfigError, match="num_labels = 2: but id2label names 3 labels"):
        dataclasses.replace(c, id2label={0: "neg", 1: "neutral", 2: "pos"})
    with pytest.raises(ConfigError, match="id2label"):
        dataclasses.replace(c, id2label={1: "a", 2: "b"})
    back = AlbertConfig.from_dict(json.loads(json.dumps(with_names.to_dict())))  # JSON keys are strings
    assert back == with_names
