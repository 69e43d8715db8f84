"""Model cards (`litebert.card`, `litebert.card_builders`): the README.md that pretraining, fine-tuning and convert
write into their model folders, read back by huggingface_hub's own parsers (`ModelCard.load`, `metadata_load`,
`model_index_to_eval_results`, PyYAML underneath) and checked field by field against what the run did: its result
object, the token stores' files, the transformers model loaded from the folder. The card's snippets run as written.
A README.md that litebert did not write is never replaced."""

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from helpers import cache_repo
from litebert import CardInfo, FinetuneConfig, TrainConfig, finetune, pretrain
from litebert.card import MARKER, PLACEHOLDER, front_matter, write_card
from litebert.cli import main
from litebert.errors import CheckpointError, ConfigError
from litebert.folders import OutputError

hf = pytest.importorskip("huggingface_hub")
yaml = pytest.importorskip("yaml")
from huggingface_hub.repocard_data import model_index_to_eval_results  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend
REPO = Path(__file__).resolve().parent.parent
TRAIN = TrainConfig(max_steps=3, batch_size=4, micro_batch=4, seq_len=64, max_predictions=10, warmup_steps=1,
                    report_to="none")


@pytest.fixture(scope="module")
def run(tiny_setup, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny-run"
    return pretrain(tiny_setup["store"], out, model="tiny", eval_data=tiny_setup["eval_store"], train=TRAIN,
                    progress=False, card=CardInfo(license="apache-2.0", datasets=["wikitext"]))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A two-class JSONL task: 16 training and 8 dev examples."""
    folder = tmp_path_factory.mktemp("data") / "reviews"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, n in (("train.jsonl", 16), ("dev.jsonl", 8)):
        with open(folder / name, "w") as f:
            for _ in range(n):
                y = int(rng.integers(2))
                f.write(json.dumps({"text": "the film was " + ["dull", "great"][y], "label": ["neg", "pos"][y]}) + "\n")
    return folder


@pytest.fixture
def hub_cache(run, tmp_path, monkeypatch):
    """The run's model as the Hub id someone/albert-tiny in an offline Hugging Face cache."""
    home = tmp_path / "hf_home"
    cache_repo(home, "someone/albert-tiny", run.model_dir)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


def card_data(path: Path) -> tuple[dict, dict]:
    """(ModelCard.load(path).data.to_dict(), metadata_load(path)): the Hub client's two readings of the card."""
    card = hf.ModelCard.load(path)
    return card.data.to_dict(), hf.metadata_load(path)


def results_of(meta: dict) -> tuple[str, list]:
    return model_index_to_eval_results(meta["model-index"])


def test_front_matter_is_the_yaml_the_hub_client_reads(tmp_path):
    data = {"library_name": "transformers", "license": "cc-by-4.0", "tags": ["litebert", "yes", "null", "1e-5"],
            "datasets": ["org/name"], "note": 'a "quoted": value, # not a comment\nsecond line, ünïcode',
            "numbers": [0.0, 1e-05, 2.5e-12, 1e20, -3.0, 7, 0.1 + 0.2], "flags": [True, False],
            "model-index": [{"name": "m", "results": [{
                "task": {"type": "fill-mask"}, "dataset": {"name": "d (held-out)", "type": "d"},
                "metrics": [{"type": "accuracy", "value": 0.4846153846153846}]}]}]}
    text = front_matter({**data, "empty": [], "none": None})
    assert text.startswith("---\n") and text.endswith("---\n")
    assert yaml.safe_load(text.split("---\n")[1]) == data  # PyYAML, as huggingface_hub reads it; floats exactly
    (tmp_path / "README.md").write_text(text + "\n# body\n", encoding="utf-8")
    assert hf.metadata_load(tmp_path / "README.md") == data


def test_pretraining_card_metadata_is_the_runs(run):
    card = run.model_dir / "README.md"
    data, meta = card_data(card)
    assert data["library_name"] == "transformers" and data["license"] == "apache-2.0"
    assert data["datasets"] == ["wikitext"] and data["pipeline_tag"] == "fill-mask"
    assert {"litebert", "albert"} <= set(data["tags"]) and "base_model" not in data
    name, results = results_of(meta)
    assert name == "tiny-run"
    assert {r.task_type for r in results} == {"fill-mask"} and {r.dataset_type for r in results} == {"wikitext"}
    assert {r.dataset_name for r in results} == {"eval_store (held-out)"}
    # the result object's final evaluation (computed in memory by the loop), not metrics.jsonl's copy of it
    assert {r.metric_name: r.metric_value for r in results} == {
        "MLM loss": run.final_eval["mlm_loss"], "MLM accuracy": run.final_eval["mlm_accuracy"],
        "SOP loss": run.final_eval["sop_loss"], "SOP accuracy": run.final_eval["sop_accuracy"]}
    assert {r.metric_type for r in results} == {"loss", "accuracy"}


def test_pretraining_card_body_says_what_was_trained_on_what(run, tiny_setup):
    from litebert.io.hf_folder import load_config
    from litebert.params import count_parameters

    text = (run.model_dir / "README.md").read_text(encoding="utf-8")
    assert MARKER in text
    config = load_config(run.model_dir)
    assert run.parameters == count_parameters(config, heads=True)
    assert f"| parameters | {run.parameters:,} |" in text
    assert "E=16, H=32, 4 layers, 4 attention heads, feed-forward 64" in text
    assert "| vocabulary | 1,000 pieces |" in text
    assert "1 unique attention and 1 unique feed-forward block(s) over 4 depth steps" in text
    tokens = sum(p.stat().st_size for p in tiny_setup["store"].glob("shard-*.tokens")) // 2  # uint16 ids
    held_out = sum(p.stat().st_size for p in tiny_setup["eval_store"].glob("shard-*.tokens")) // 2
    assert f"token store `store`: {tokens:,} tokens" in text and "from `train.txt`" in text
    assert f"token store `eval_store`: {held_out:,} tokens" in text
    assert f"tokens seen in training: {run.tokens_seen:,} (over 3 steps)" in text
    assert "| steps | 3 |" in text and "| batch (sequences per step) | 4 |" in text and "| optimizer | lamb |" in text
    assert f"| MLM accuracy | {run.final_eval['mlm_accuracy']:.4f} |" in text
    assert "`apache-2.0`" in text
    assert str(tiny_setup["store"].parent) not in text and str(run.out.parent) not in text  # no local paths


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_cards_snippets_load_the_folder_with_litebert_and_with_transformers(run):
    pytest.importorskip("transformers")
    text = (run.model_dir / "README.md").read_text(encoding="utf-8")
    blocks = python_blocks(text)
    assert len(blocks) == 2 and "from litebert import" in blocks[0] and "from transformers import" in blocks[1]
    for code in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code.replace(json.dumps(PLACEHOLDER), json.dumps(str(run.model_dir))), {})  # noqa: S102
        assert "'token_str'" in out.getvalue()  # five fill-mask guesses printed


def test_continued_pretraining_from_a_hub_id_names_it_base_model(tiny_setup, hub_cache, tmp_path):
    done = pretrain(tiny_setup["store"], tmp_path / "continued", init_from="someone/albert-tiny", train=TRAIN,
                    progress=False)
    data, _ = card_data(done.model_dir / "README.md")
    assert data["base_model"] == "someone/albert-tiny" and "license" not in data
    text = (done.model_dir / "README.md").read_text(encoding="utf-8")
    assert "continued from `someone/albert-tiny`" in text and str(hub_cache) not in text
    assert "None was given" in text


def test_finetuned_card_metadata_is_the_runs(hub_cache, data, tmp_path):
    done = finetune("classify", "someone/albert-tiny", data, tmp_path / "ft", progress=False, log=None,
                    config=FinetuneConfig(max_steps=4, batch_size=8, eval_every=2, report_to="none"),
                    card=CardInfo(datasets=["stanfordnlp/sst2"]))
    card = done.out / "README.md"
    meta_data, meta = card_data(card)
    assert meta_data["base_model"] == "someone/albert-tiny" and meta_data["pipeline_tag"] == "text-classification"
    assert meta_data["library_name"] == "transformers" and meta_data["datasets"] == ["stanfordnlp/sst2"]
    assert "license" not in meta_data
    name, results = results_of(meta)
    assert name == "ft" and {r.task_type for r in results} == {"text-classification"}
    assert {(r.dataset_type, r.dataset_split) for r in results} == {("stanfordnlp/sst2", "validation")}
    assert {r.metric_type: r.metric_value for r in results} == {
        "accuracy": done.best_metrics["accuracy"], "matthews_correlation": done.best_metrics["matthews"],
        "f1": done.best_metrics["f1"]}
    text = card.read_text(encoding="utf-8")
    assert "`train.jsonl` (16 examples)" in text and "`dev.jsonl` (8 examples)" in text
    assert "labels: `neg`, `pos`" in text and f"at step {done.best_step:,} of 4" in text
    assert str(hub_cache) not in text and str(data) not in text
    pytest.importorskip("transformers")
    for code in python_blocks(text):  # litebert's pipeline, then transformers': both load the folder
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code.replace(json.dumps(PLACEHOLDER), json.dumps(str(done.out))), {})  # noqa: S102
        assert re.search(r"'label': '(neg|pos)'", out.getvalue()), out.getvalue()


def test_a_readme_litebert_did_not_write_is_left_alone(run, data, tmp_path, capsys):
    cfg = FinetuneConfig(max_steps=4, batch_size=8, eval_every=2, report_to="none")
    out = tmp_path / "ft"
    assert finetune("classify", run.model_dir, data, out, config=cfg, progress=False, stop_after=2).interrupted
    (out / "README.md").write_text("# my own card\n")
    capsys.readouterr()
    assert finetune("classify", run.model_dir, data, out, config=cfg, progress=False, resume=True).complete
    assert (out / "README.md").read_text() == "# my own card\n"
    err = capsys.readouterr().err
    assert err.count("is not a model card litebert wrote; left as it is") == 1, err
    with pytest.raises(OutputError, match=r"README\.md"):  # overwrite deletes only what litebert wrote
        finetune("classify", run.model_dir, data, out, config=cfg, progress=False, overwrite=True)
    (out / "README.md").unlink()
    assert finetune("classify", run.model_dir, data, out, config=cfg, progress=False, overwrite=True).complete
    assert MARKER in (out / "README.md").read_text()
    # a card of litebert's own is replaced by the next run over the folder
    assert finetune("classify", run.model_dir, data, out, config=cfg, progress=False, overwrite=True).complete


def test_write_card_replaces_only_its_own(tmp_path):
    said = []
    (tmp_path / "README.md").write_text("mine")
    assert not write_card(tmp_path, f"---\n---\n{MARKER}\n", said.append)
    assert (tmp_path / "README.md").read_text() == "mine" and len(said) == 1
    (tmp_path / "README.md").write_text(f"old\n{MARKER}\n")
    assert write_card(tmp_path, f"new\n{MARKER}\n", said.append) and (tmp_path / "README.md").read_text() == \
        f"new\n{MARKER}\n"
    (tmp_path / "README.md").unlink()
    (tmp_path / "README.md").symlink_to(tmp_path / "elsewhere.md")
    assert not write_card(tmp_path, "x", said.append) and not (tmp_path / "elsewhere.md").exists()
    (tmp_path / "README.md").unlink()

    def unreadable():
        raise CheckpointError("train_config.json: no such file")

    said.clear()  # a card that cannot be made is a note: the model it would describe is written already
    assert not write_card(tmp_path, unreadable, said.append) and not (tmp_path / "README.md").exists()
    assert said == [f"note: no model card was written in {tmp_path}: train_config.json: no such file"]


def test_converted_card(tmp_path):
    from litebert.io.convert_tf import convert_tf_checkpoint

    fixture = REPO / "tests" / "fixtures" / "tf" / "pretrain"
    out = tmp_path / "converted"
    done = convert_tf_checkpoint(fixture / "model.ckpt-best", fixture / "albert_config.json", out,
                                 card=CardInfo(license="mit"))
    data, meta = card_data(out / "README.md")
    assert data["license"] == "mit" and data["library_name"] == "transformers" and data["pipeline_tag"] == "fill-mask"
    assert "model-index" not in meta and "base_model" not in data
    text = (out / "README.md").read_text(encoding="utf-8")
    assert "TensorFlow checkpoint `model.ckpt-best`" in text and f"{len(done.mapped)} variables mapped" in text
    assert str(REPO) not in text
    # a second conversion over the folder replaces litebert's card; a card of the user's blocks the overwrite
    convert_tf_checkpoint(fixture / "model.ckpt-best", fixture / "albert_config.json", out, overwrite=True)
    (out / "README.md").write_text("mine")
    with pytest.raises(OutputError, match=r"README\.md"):
        convert_tf_checkpoint(fixture / "model.ckpt-best", fixture / "albert_config.json", out, overwrite=True)


def test_card_info_is_checked():
    with pytest.raises(ConfigError, match=r"^CardInfo\.license = 'Apache 2\.0': not a Hugging Face Hub license id"):
        CardInfo(license="Apache 2.0")
    with pytest.raises(ConfigError, match=r"^CardInfo\.datasets = 'org/a/b': \"org/a/b\" is not a Hub data set id"):
        CardInfo(datasets=["org/a/b"])
    assert CardInfo(datasets=["a/b", "c"]).datasets == ("a/b", "c")


def test_the_command_lines_card_options(tiny_setup, tmp_path, capsys):
    out = tmp_path / "cli-run"
    argv = ["pretrain", "--data", str(tiny_setup["store"]), "--out", str(out), "--preset", "tiny", "--max-steps", "1",
            "--batch-size", "4", "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10",
            "--report-to", "none", "--no-progress"]
    assert main(argv + ["--license", "Apache 2.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("litebert pretrain: error: --license Apache 2.0: not a Hugging Face Hub license id"), err
    assert not out.exists()
    assert main(argv + ["--license", "cc-by-4.0", "--datasets", "wikitext, org/corpus"]) == 0
    data, _ = card_data(out / "model" / "README.md")
    assert data["license"] == "cc-by-4.0" and data["datasets"] == ["wikitext", "org/corpus"]
    assert "model-index" not in data  # no held-out data: no evaluation to list
