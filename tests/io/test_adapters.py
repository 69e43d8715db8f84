"""LoRA adapters travel between litebert and HF transformers (peft is the reference): an adapter trained on a
litebert model, saved with `save_adapter`, loads on HF's model of the same base weights through
``peft.PeftModel.from_pretrained`` with no missing key and gives the same outputs (and not the base model's); an
adapter trained on HF's model with peft loads on litebert's with `load_adapter`, the same way. Tiny random configs
(shared, grouped, unshared, E = H); the HF model is saved by HF and loaded by litebert, as tests/test_hf_parity.py."""

import json
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from litebert.config import AlbertConfig  # noqa: E402
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError  # noqa: E402
from litebert.folders import OutputError  # noqa: E402
from litebert.heads import AlbertForSequenceClassification, AlbertModel  # noqa: E402
from litebert.io.adapters import add_lora, load_adapter, save_adapter, to_hf_name  # noqa: E402

TOL = 1e-5
BASE = dict(vocab_size=101, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, hidden_act="gelu_new", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, num_labels=3)
CONFIGS = {
    "all-shared": {},
    "groups-and-inner": dict(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2),
    "not-shared": dict(num_hidden_groups=4),
    "E-equals-H": dict(embedding_size=32),
}
CLASSES = {"sequence-classification": (AlbertForSequenceClassification, "AlbertForSequenceClassification"),
           "encoder": (AlbertModel, "AlbertModel")}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


def base_folders(tmp_path, config: str, cls: str):
    """An HF model with random weights saved by HF, and (model, class) pairs to build both sides from it."""
    torch.manual_seed(0)
    hf_cls = getattr(transformers, CLASSES[cls][1])
    hf_cls(transformers.AlbertConfig(**{**BASE, **CONFIGS[config]})).save_pretrained(tmp_path / "base")
    return (lambda: CLASSES[cls][0].from_pretrained(tmp_path / "base"),
            lambda: hf_cls.from_pretrained(tmp_path / "base").eval())


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 101, (3, 13), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    ids[mask == 0] = 0
    return ids, mask


def outputs(model, ids, mask, hf: bool):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask) if hf else model(ids, mask)
    if hasattr(out, "logits") and out.logits is not None:
        return out.logits
    return torch.cat([out.last_hidden_state.flatten(1), out.pooler_output], 1)


def randomize(model, seed=2):
    """Every adapter tensor (lora_A, lora_B: zero at initialization) and the trained head, nonzero and seeded."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return model.eval()


def saved_keys(folder):
    from safetensors.torch import load_file

    return sorted(load_file(str(folder / "adapter_model.safetensors")))


@pytest.mark.parametrize("cls", sorted(CLASSES))
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_litebert_adapter_loads_on_hf(tmp_path, config, cls):
    ours, theirs = base_folders(tmp_path, config, cls)
    model = randomize(add_lora(ours(), r=4, alpha=8, targets=["query", "value", "ffn"]))
    ids, mask = batch()
    expected = outputs(model, ids, mask, hf=False)
    save_adapter(model, tmp_path / "adapter", base_model_name_or_path=str(tmp_path / "base"))
    base = theirs()
    reference = outputs(base, ids, mask, hf=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hf = peft.PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    assert not [w for w in caught if "adapter" in str(w.message).lower()]  # no "missing adapter keys"
    got = outputs(hf, ids, mask, hf=True)
    assert (got - expected).abs().max().item() <= TOL
    assert (got - reference).abs().max().item() > 1e-2  # the adapter changes the function
    cfg = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert cfg["target_modules"] == ["ffn", "query", "value"] and cfg["peft_type"] == "LORA"
    assert cfg["base_model_name_or_path"] == str(tmp_path / "base")
    assert all("attention_blocks" not in k and "ffn_blocks" not in k for k in saved_keys(tmp_path / "adapter"))
    # peft's own save of the HF model gives the same tensor names
    hf.save_pretrained(tmp_path / "resaved")
    assert saved_keys(tmp_path / "resaved") == saved_keys(tmp_path / "adapter")


def test_an_adapter_on_a_base_without_pooler_carries_the_pooler(tmp_path):
    """A base with no pooler (an MLM checkpoint: HF's AlbertForMaskedLM has none): each side initialises its own at
    random, so the adapter saves litebert's (peft's modules_to_save) and HF's model then computes the same logits."""
    torch.manual_seed(0)
    transformers.AlbertForMaskedLM(transformers.AlbertConfig(**BASE)).save_pretrained(tmp_path / "base")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "encoder weights missing ...: albert.pooler.weight, ..."
        ours = AlbertForSequenceClassification.from_pretrained(tmp_path / "base")
        theirs = transformers.AlbertForSequenceClassification.from_pretrained(tmp_path / "base").eval()
    assert "albert.pooler.weight" in ours.loading_info["missing_keys"]
    model = randomize(add_lora(ours, r=4, alpha=8))
    ids, mask = batch()
    expected = outputs(model, ids, mask, hf=False)
    save_adapter(model, tmp_path / "adapter")
    assert "base_model.model.albert.pooler.weight" in saved_keys(tmp_path / "adapter")
    hf = peft.PeftModel.from_pretrained(theirs, tmp_path / "adapter").eval()
    assert (outputs(hf, ids, mask, hf=True) - expected).abs().max().item() <= TOL
    back = load_adapter(AlbertForSequenceClassification.from_pretrained(tmp_path / "base"), tmp_path / "adapter")
    assert (outputs(back, ids, mask, hf=False) - expected).abs().max().item() <= TOL
    # a base with its pooler: the pooler stays frozen and out of the adapter
    AlbertForSequenceClassification(AlbertConfig(**BASE)).save_pretrained(tmp_path / "pooled")
    assert "pooler" not in add_lora(AlbertForSequenceClassification.from_pretrained(tmp_path / "pooled")) \
        .peft_config["default"].modules_to_save
    # modules_to_save given without the fresh pooler: a warning that says so
    with pytest.warns(UserWarning, match="pooler was not in the checkpoint.*add 'pooler'"):
        add_lora(AlbertForSequenceClassification.from_pretrained(tmp_path / "base"), modules_to_save=["classifier"])


@pytest.mark.parametrize("cls", sorted(CLASSES))
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_hf_adapter_loads_on_litebert(tmp_path, config, cls):
    ours, theirs = base_folders(tmp_path, config, cls)
    task = "SEQ_CLS" if cls == "sequence-classification" else "FEATURE_EXTRACTION"
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["query", "key", "dense"], task_type=task)
    hf = randomize(peft.get_peft_model(theirs(), lora))
    ids, mask = batch()
    expected = outputs(hf, ids, mask, hf=True)
    hf.save_pretrained(tmp_path / "adapter")
    base = ours()
    reference = outputs(base, ids, mask, hf=False)
    model = load_adapter(base, tmp_path / "adapter")
    got = outputs(model, ids, mask, hf=False)
    assert (got - expected).abs().max().item() <= TOL
    assert (got - reference).abs().max().item() > 1e-2
    assert not any(p.requires_grad for p in model.parameters())  # loaded for inference


def test_target_modules_name_the_same_modules_on_both(tmp_path):
    ours, theirs = base_folders(tmp_path, "groups-and-inner", "sequence-classification")
    targets = ["query", "key", "value", "dense", "ffn", "ffn_output", "pooler", "embedding_hidden_mapping_in"]
    hf = peft.get_peft_model(theirs(), peft.LoraConfig(target_modules=targets))
    model = add_lora(ours(), targets=targets)
    from peft.tuners.lora import LoraLayer

    def adapted(m):
        return {n for n, x in m.get_base_model().named_modules() if isinstance(x, LoraLayer)}

    config = model.get_base_model().config
    assert {to_hf_name(n, config, bare=False) for n in adapted(model)} == adapted(hf)
    assert len(adapted(hf)) == 6 * 6 + 2  # 3 groups x 2 inner blocks x 6 modules, the pooler, the projection


def test_regular_expressions_and_paths(tmp_path):
    """An HF adapter whose target_modules is a regular expression over HF's names; a litebert adapter targeting a
    litebert path: each is written (or read) as the modules it adapts."""
    ours, theirs = base_folders(tmp_path, "groups-and-inner", "sequence-classification")
    ids, mask = batch()
    lora = peft.LoraConfig(target_modules=r".*albert_layer_groups\.[02]\..*attention\.value", r=2)
    hf = randomize(peft.get_peft_model(theirs(), lora))
    hf.save_pretrained(tmp_path / "regex")
    model = load_adapter(ours(), tmp_path / "regex")
    assert (outputs(model, ids, mask, hf=False) - outputs(hf, ids, mask, hf=True)).abs().max().item() <= TOL
    assert sorted(model.peft_config["default"].target_modules) == [
        "albert.encoder.attention_blocks.0.value", "albert.encoder.attention_blocks.1.value",
        "albert.encoder.attention_blocks.4.value", "albert.encoder.attention_blocks.5.value"]
    model = randomize(add_lora(ours(), targets=["attention_blocks.3.query"], r=2))
    save_adapter(model, tmp_path / "path")
    cfg = json.loads((tmp_path / "path" / "adapter_config.json").read_text())
    assert cfg["target_modules"] == ["albert.encoder.albert_layer_groups.1.albert_layers.1.attention.query"]
    hf = peft.PeftModel.from_pretrained(theirs(), tmp_path / "path").eval()
    assert (outputs(model, ids, mask, hf=False) - outputs(hf, ids, mask, hf=True)).abs().max().item() <= TOL


def test_training_through_the_adapter_and_on(tmp_path):
    ours, theirs = base_folders(tmp_path, "all-shared", "sequence-classification")
    model = add_lora(ours(), r=2)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n or "classifier.modules_to_save" in n for n in trained)
    ids, mask = batch()
    model.train()
    loss = model(ids, mask, labels=torch.tensor([0, 1, 2])).loss
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "lora_A" in n)
    save_adapter(model, tmp_path / "adapter")
    again = load_adapter(ours(), tmp_path / "adapter", is_trainable=True)
    assert {n for n, p in again.named_parameters() if p.requires_grad} == trained


def test_refusals(tmp_path):
    ours, theirs = base_folders(tmp_path, "all-shared", "sequence-classification")
    with pytest.raises(ConfigError, match="save_adapter takes a peft.PeftModel"):
        save_adapter(ours(), tmp_path / "a")
    with pytest.raises(ConfigError, match=r"^targets = 'querry': no module named querry in "
                                          r"AlbertForSequenceClassification; LoRA can adapt classifier, dense, "):
        add_lora(ours(), targets=["querry"])
    with pytest.raises(CheckpointNotFoundError, match="no adapter_config.json"):
        load_adapter(ours(), tmp_path)
    split = AlbertForSequenceClassification(AlbertConfig(**{**BASE, "sharing": "attention"}))
    with pytest.raises(CheckpointError, match="sharing='attention' has no HF transformers equivalent"):
        add_lora(split)
    model = add_lora(ours())
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file")
    with pytest.raises(OutputError):
        save_adapter(model, tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    save_adapter(model, tmp_path / "a")
    with pytest.raises(OutputError):
        save_adapter(model, tmp_path / "a")
    save_adapter(model, tmp_path / "a", overwrite=True)
    wider = AlbertForSequenceClassification(AlbertConfig(**{**BASE, "hidden_size": 48}))
    with pytest.raises(CheckpointError, match="the adapter does not fit this AlbertForSequenceClassification"):
        load_adapter(wider, tmp_path / "a")


@pytest.mark.parametrize("change", [dict(r=100_000_000), dict(r=4), dict(r=16),
                                    dict(rank_pattern={"query": 1_000_000})])
def test_a_config_that_does_not_describe_its_tensors_is_refused_before_anything_is_built(tmp_path, change):
    """An adapter_config.json whose ranks are not its tensors' (r = 10^8 would have peft build gigabytes of matrices)
    is refused naming the file, before peft builds anything."""
    import time

    ours, _ = base_folders(tmp_path, "all-shared", "sequence-classification")
    save_adapter(add_lora(ours(), r=8), tmp_path / "a")
    file = tmp_path / "a" / "adapter_config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **change}))
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match=r"adapter_config.json: declares rank\(s\) .* its tensors in "
                                              r"adapter_model.safetensors have rank\(s\) 8"):
        load_adapter(ours(), tmp_path / "a")
    assert time.perf_counter() - t0 < 5
