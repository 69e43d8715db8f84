"""Folders an HF user expects: label names in a fine-tuned folder's config.json (read by transformers' pipeline),
ALBERT task folders saved by HF transformers (no finetune.json) in `predict`/`evaluate`, `--tokenizer`, the rows of
`evaluate --output`, `evaluate --columns`, and `--device`/`--precision`/`--batch-size` for evaluate/predict/embed.

The oracle is transformers itself (a test-only dependency): its pipeline and its models, run on the same folder, with
its own SentencePiece tokenizer; probabilities agree to 1e-5 in fp32.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.tasks import kinds as K
from litebert.tasks.readers import TextExample, TokenExample

transformers = pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
SPIECE = REPO / "data" / "albert-30k" / "spiece.model"
TOL = 1e-5
TINY = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=37, max_position_embeddings=64, hidden_act="gelu_new", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0,
            initializer_range=0.3)  # wide weights: outputs far from uniform, so that a mismatch shows
PAIRS = [("the cat sat on the mat", "a cat is sitting"), ("stocks fell sharply today", "markets rose"),
         ("I loved this film", "it was boring"), ("paris is the capital of france", "berlin is in germany")]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


@pytest.fixture(scope="module")
def hf_tok():
    return transformers.AlbertTokenizer(vocab_file=str(SPIECE))  # HF's own SentencePiece tokenizer


def _hf_folder(path: Path, cls, seed: int = 0, **config) -> Path:
    """A random tiny ALBERT task model, written by HF's own save_pretrained (config.json + model.safetensors only)."""
    torch.manual_seed(seed)
    model = cls(transformers.AlbertConfig(**{**TINY, **config})).eval()
    model.save_pretrained(path)
    assert not (path / "finetune.json").exists() and not (path / "spiece.model").exists()
    return path


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@torch.no_grad()
def _hf_pair_probs(model, tok, pairs) -> np.ndarray:
    enc = tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    return torch.softmax(model(**enc).logits, -1).numpy()


# ------------------------------------------------------------------------------------------------ label order
def test_numeric_labels_sort_as_numbers_text_labels_as_text():
    ex = [TextExample(str(i), "t", label=l) for i, l in enumerate(["10", "2", "1", "2", "-3", "0.5"])]
    assert K.Classification().collect_labels(ex, None) == ["-3", "0.5", "1", "2", "10"]
    ex = [TextExample(str(i), "t", label=l) for i, l in enumerate(["1", "nan", "10", "2"])]
    assert K.Classification().collect_labels(ex, None) == ["1", "10", "2", "nan"]  # nan is a name: all text
    ex = [TextExample(str(i), "t", label=l) for i, l in enumerate(["pos", "neg", "10", "neutral"])]
    assert K.Classification().collect_labels(ex, None) == ["10", "neg", "neutral", "pos"]  # not all numbers: text
    assert K.Classification().collect_labels(ex, ("b", "a")) == ["b", "a"]  # a preset's order is kept
    tokens = [TokenExample("0", ["a", "b", "c"], ["11", "2", "1"])]
    assert K.TokenClassification().collect_labels(tokens, None) == ["1", "2", "11"]


def test_evaluation_rows_of_every_kind_on_hand_set_outputs():
    from litebert.tasks.readers import MultipleChoiceExample, SquadExample

    ln3 = float(np.log(3.0))
    cls = K.Classification()
    ex = [TextExample("a", "t", label="pos", id="a7"), TextExample("1", "u", label="neg")]
    outs = [{"logits": np.array([0.0, ln3])}, {"logits": np.array([ln3, 0.0])}]
    preds = cls.predictions(ex, None, outs, ["neg", "pos"])
    rows = cls.evaluation_rows(ex, None, preds, outs, ["neg", "pos"])
    assert rows == [{"label": "pos", "prediction": "pos", "probabilities": pytest.approx({"neg": 0.25, "pos": 0.75})},
                    {"label": "neg", "prediction": "neg", "probabilities": pytest.approx({"neg": 0.75, "pos": 0.25})}]
    assert [K.example_id(e, i) for i, e in enumerate(ex)] == ["a7", 1]  # the data's id, else the position

    reg = K.Regression()
    assert reg.evaluation_rows([TextExample("0", "t", label=2.5)], None, [1.25], [{"logits": np.array([1.25])}],
                               None) == [{"label": 2.5, "prediction": 1.25}]

    tok = K.TokenClassification()
    ex = [TokenExample("0", ["New", "York", "now"], ["B-LOC", "I-LOC", "O"])]
    feats = [{"word_ids": [None, 0, 0, 1, None]}]  # "New" in two pieces; "now" cut by the maximum length
    logits = np.zeros((5, 3))
    logits[1] = [0.0, ln3, 0.0]  # first piece of "New": B-LOC 3/5
    logits[2] = [9.0, 0.0, 0.0]  # its second piece is not read
    logits[3] = [0.0, 0.0, ln3]  # "York": I-LOC 3/5
    labels = ["O", "B-LOC", "I-LOC"]
    preds = tok.predictions(ex, feats, [{"logits": logits}], labels)
    rows = tok.evaluation_rows(ex, feats, preds, [{"logits": logits}], labels)
    assert rows == [{"label": ["B-LOC", "I-LOC", "O"], "prediction": ["B-LOC", "I-LOC", "O"],
                     "probabilities": [pytest.approx({"O": 0.2, "B-LOC": 0.6, "I-LOC": 0.2}),
                                       pytest.approx({"O": 0.2, "B-LOC": 0.2, "I-LOC": 0.6}), None]}]

    mc = K.MultipleChoice()
    ex = [MultipleChoiceExample("0", "c", "q", ["x", "y"], 0)]
    out = [{"logits": np.array([0.0, ln3])}]
    assert mc.evaluation_rows(ex, None, mc.predictions(ex, None, out, None), out, None) == [
        {"label": 0, "prediction": 1, "probabilities": pytest.approx([0.25, 0.75])}]

    qa = K.ExtractiveQAWithNoAnswer()
    ex = [SquadExample("q1", "q", "ctx", [{"text": "ctx", "answer_start": 0}]), SquadExample("q2", "q", "ctx")]
    preds = [{"id": "q1", "answer": "ctx", "answer_start": 0, "no_answer_prob": 0.1},
             {"id": "q2", "answer": "", "answer_start": -1, "no_answer_prob": 0.9}]
    assert qa.evaluation_rows(ex, None, preds, None, None) == [
        {"label": ["ctx"], "prediction": "ctx", "answer_start": 0, "no_answer_prob": 0.1},
        {"label": [], "prediction": "", "answer_start": -1, "no_answer_prob": 0.9}]
    assert [K.example_id(e, i) for i, e in enumerate(ex)] == ["q1", "q2"]


# --------------------------------------------------------------------------- a litebert folder in HF's pipeline
@pytest.fixture(scope="module")
def pair_classifier(tmp_path_factory):
    """`litebert finetune classify` on sentence pairs labelled 1, 2 and 10 (a few steps: the weights need not be
    good, only the folder's shape), from a random tiny encoder with the bundled 30k vocabulary."""
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertModel
    from litebert.tokenizer import AlbertTokenizer

    root = tmp_path_factory.mktemp("pairs")
    base = root / "base"
    torch.manual_seed(0)
    AlbertModel(AlbertConfig.from_hf_dict({**TINY, "model_type": "albert"})).save_pretrained(base)
    AlbertTokenizer.from_pretrained(SPIECE).save_pretrained(base)
    labels = ["1", "2", "10"]
    _write_jsonl(root / "train.jsonl", [{"premise": a, "hypothesis": b, "y": labels[i % 3]}
                                        for i, (a, b) in enumerate(PAIRS * 6)])
    out = root / "out"
    assert main(["finetune", "classify", "--model", str(base), "--data", str(root / "train.jsonl"), "--out",
                 str(out), "--columns", "text_a=premise,text_b=hypothesis,label=y", "--max-steps", "4",
                 "--batch-size", "8", "--lr", "1e-3", "--no-progress"]) == 0
    return out


def test_finetuned_config_names_the_labels_in_numeric_order(pair_classifier):
    config = json.loads((pair_classifier / "config.json").read_text())
    assert config["id2label"] == {"0": "1", "1": "2", "2": "10"}
    assert config["label2id"] == {"1": 0, "2": 1, "10": 2}
    assert json.loads((pair_classifier / "finetune.json").read_text())["labels"] == ["1", "2", "10"]


def test_hf_pipeline_prints_the_label_names_and_litebert_probabilities_for_pairs(pair_classifier, tmp_path):
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"premise": a, "hypothesis": b} for a, b in PAIRS])
    assert main(["predict", "--model", str(pair_classifier), "--input", str(inp), "--output",
                 str(tmp_path / "out.jsonl"), "--no-progress"]) == 0
    ours = _read_jsonl(tmp_path / "out.jsonl")
    pipe = transformers.pipeline("text-classification", model=str(pair_classifier), device="cpu")
    for (a, b), row in zip(PAIRS, ours):
        theirs = pipe({"text": a, "text_pair": b}, top_k=None)
        assert sorted(d["label"] for d in theirs) == ["1", "10", "2"]  # the names, not LABEL_0..2
        probs = {d["label"]: d["score"] for d in theirs}
        for label, p in row["probabilities"].items():
            assert abs(probs[label] - p) <= TOL, (a, b, label)
        assert max(probs, key=probs.get) == row["label"]


# ------------------------------------------------------------------------------ HF-written task-head folders
def test_hf_sequence_classifier_folder_predicts_as_hf(tmp_path, hf_tok, capsys):
    labels = {0: "negative", 1: "positive", 2: "neutral"}
    folder = _hf_folder(tmp_path / "hf", transformers.AlbertForSequenceClassification, id2label=labels,
                        label2id={v: k for k, v in labels.items()})
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"text_a": a, "text_b": b, "id": f"q{i}"}
                                               for i, (a, b) in enumerate(PAIRS)])
    out = tmp_path / "out.jsonl"
    # no tokenizer in the folder: one line that names the fix
    assert main(["predict", "--model", str(folder), "--input", str(inp), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no tokenizer" in err and "--tokenizer" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert main(["predict", "--model", str(folder), "--tokenizer", str(SPIECE.parent), "--input", str(inp),
                 "--output", str(out), "--no-progress"]) == 0
    rows = _read_jsonl(out)
    model = transformers.AlbertForSequenceClassification.from_pretrained(folder).eval()
    expected = _hf_pair_probs(model, hf_tok, PAIRS)
    for row, p in zip(rows, expected):
        assert list(row["probabilities"]) == ["negative", "positive", "neutral"]
        np.testing.assert_allclose(list(row["probabilities"].values()), p, atol=TOL)
        assert row["label"] == labels[int(p.argmax())]
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"]  # the input objects are echoed

    # evaluate on labelled data: metrics, and one row per example with id, gold, prediction, probabilities
    gold = ["positive", "negative", "neutral", "positive"]
    data = _write_jsonl(tmp_path / "dev.jsonl", [{"s1": a, "s2": b, "gold": g} for (a, b), g in zip(PAIRS, gold)])
    capsys.readouterr()
    assert main(["evaluate", "--model", str(folder), "--tokenizer", str(SPIECE), "--data", str(data), "--output",
                 str(tmp_path / "rows.jsonl"), "--columns", "text_a=s1,text_b=s2,label=gold", "--no-progress"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    predicted = [labels[int(p.argmax())] for p in expected]
    assert metrics["task"] == "classify"
    assert metrics["accuracy"] == pytest.approx(np.mean([p == g for p, g in zip(predicted, gold)]))
    ev = _read_jsonl(tmp_path / "rows.jsonl")
    assert [r["id"] for r in ev] == [0, 1, 2, 3]  # no id in the data: the 0-based index
    assert [r["label"] for r in ev] == gold and [r["prediction"] for r in ev] == predicted
    for r, p in zip(ev, expected):
        np.testing.assert_allclose([r["probabilities"][labels[i]] for i in range(3)], p, atol=TOL)

    # embed the same folder's encoder: --tokenizer there too; the mean of HF's last layer over real tokens
    texts = _write_jsonl(tmp_path / "texts.jsonl", [{"text": a} for a, _ in PAIRS])
    assert main(["embed", "--model", str(folder), "--input", str(texts), "--output", str(tmp_path / "e.npy")]) == 2
    assert "--tokenizer" in capsys.readouterr().err
    assert main(["embed", "--model", str(folder), "--tokenizer", str(SPIECE), "--input", str(texts), "--output",
                 str(tmp_path / "e.npy")]) == 0
    enc = hf_tok([a for a, _ in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model.albert(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), ((hidden * mask).sum(1) / mask.sum(1)).numpy(),
                               atol=TOL)


def test_hf_regression_folder_scores_as_hf(tmp_path, hf_tok):
    folder = _hf_folder(tmp_path / "hf", transformers.AlbertForSequenceClassification, seed=1, num_labels=1,
                        problem_type="regression")
    shutil.copy(SPIECE, folder / "spiece.model")  # a tokenizer in the folder: no --tokenizer needed
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"text": a, "text_pair": b} for a, b in PAIRS])  # HF's keys
    assert main(["predict", "--model", str(folder), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"),
                 "--no-progress"]) == 0
    model = transformers.AlbertForSequenceClassification.from_pretrained(folder).eval()
    enc = hf_tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**enc).logits[:, 0].numpy()
    np.testing.assert_allclose([r["score"] for r in _read_jsonl(tmp_path / "o.jsonl")], expected, atol=TOL)


def test_hf_token_classifier_folder_tags_as_hf(tmp_path, hf_tok):
    tags = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}
    folder = _hf_folder(tmp_path / "hf", transformers.AlbertForTokenClassification, seed=2, id2label=tags,
                        label2id={v: k for k, v in tags.items()})
    sentences = [["John", "lives", "in", "Pittsburgh"], ["Mary", "Ann", "flew", "to", "Reykjavik", "today"]]
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"words": w} for w in sentences])
    assert main(["predict", "--model", str(folder), "--tokenizer", str(SPIECE), "--input", str(inp), "--output",
                 str(tmp_path / "o.jsonl"), "--no-progress"]) == 0
    model = transformers.AlbertForTokenClassification.from_pretrained(folder).eval()
    for words, row in zip(sentences, _read_jsonl(tmp_path / "o.jsonl")):
        ids, firsts = [hf_tok.cls_token_id], []
        for w in words:  # each word's first piece carries its tag
            firsts.append(len(ids))
            ids += hf_tok.encode(w, add_special_tokens=False)
        ids.append(hf_tok.sep_token_id)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        assert row["tags"] == [tags[int(logits[i].argmax())] for i in firsts]

    # evaluate --output for tags: gold and predicted tags per word, per-word probabilities
    conll = tmp_path / "dev.txt"
    conll.write_text("John B-PER\nlives O\n\nMary B-PER\nflew O\n", encoding="utf-8")
    assert main(["evaluate", "--model", str(folder), "--tokenizer", str(SPIECE), "--data", str(conll),
                 "--output", str(tmp_path / "rows.jsonl"), "--no-progress"]) == 0
    rows = _read_jsonl(tmp_path / "rows.jsonl")
    assert [r["id"] for r in rows] == [0, 1] and rows[0]["label"] == ["B-PER", "O"]
    for r in rows:
        assert len(r["prediction"]) == len(r["probabilities"]) == 2
        assert [max(p, key=p.get) for p in r["probabilities"]] == r["prediction"]
        assert all(sum(p.values()) == pytest.approx(1.0, abs=1e-6) for p in r["probabilities"])


def test_hf_multiple_choice_and_qa_folders(tmp_path, hf_tok):
    folder = _hf_folder(tmp_path / "mc", transformers.AlbertForMultipleChoice, seed=3)
    item = {"context": "the weather was cold", "question": "what did she wear?",
            "choices": ["a coat", "a swimsuit", "sandals"]}
    inp = _write_jsonl(tmp_path / "mc.jsonl", [item])
    assert main(["predict", "--model", str(folder), "--tokenizer", str(SPIECE), "--input", str(inp), "--output",
                 str(tmp_path / "mc_out.jsonl"), "--no-progress"]) == 0
    row = _read_jsonl(tmp_path / "mc_out.jsonl")[0]
    model = transformers.AlbertForMultipleChoice.from_pretrained(folder).eval()
    enc = hf_tok([item["context"]] * 3, [f"{item['question']} {c}" for c in item["choices"]], padding=True,
                 return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(model(**{k: v[None] for k, v in enc.items()}).logits[0], -1).numpy()
    np.testing.assert_allclose(row["probabilities"], probs, atol=TOL)
    assert row["label"] == int(probs.argmax())

    qa = _hf_folder(tmp_path / "qa", transformers.AlbertForQuestionAnswering, seed=4)
    context = "The Eiffel Tower is in Paris, France."
    inp = _write_jsonl(tmp_path / "qa.jsonl", [{"id": "x", "question": "Where is the tower?", "context": context}])
    assert main(["predict", "--model", str(qa), "--tokenizer", str(SPIECE), "--input", str(inp), "--output",
                 str(tmp_path / "qa_out.jsonl"), "--no-progress"]) == 0
    row = _read_jsonl(tmp_path / "qa_out.jsonl")[0]
    # a random model still answers with a span of the context, at the offset it reports
    assert row["answer_start"] == -1 or context[row["answer_start"]:].startswith(row["answer"])


def test_folders_that_are_not_task_heads_are_one_line_errors(tmp_path, capsys):
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"text": "hello"}])
    cases = {
        "encoder": (transformers.AlbertModel, {}, "architectures' names ['AlbertModel']"),
        "multi": (transformers.AlbertForSequenceClassification, {"problem_type": "multi_label_classification"},
                  "multi_label_classification"),
    }
    for name, (cls, config, message) in cases.items():
        folder = _hf_folder(tmp_path / name, cls, **config)
        shutil.copy(SPIECE, folder / "spiece.model")
        assert main(["predict", "--model", str(folder), "--input", str(inp), "--output",
                     str(tmp_path / "o.jsonl")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    folder = tmp_path / "encoder"
    config = json.loads((folder / "config.json").read_text())
    del config["architectures"]
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["evaluate", "--model", str(folder), "--data", str(inp)]) == 2
    assert "'architectures' is missing" in capsys.readouterr().err
    # a classifier whose weights lack the head it names: refused, not run with a random head
    shutil.copy(folder / "model.safetensors", tmp_path / "multi" / "model.safetensors")
    config = json.loads((tmp_path / "multi" / "config.json").read_text())
    config["problem_type"] = "single_label_classification"
    (tmp_path / "multi" / "config.json").write_text(json.dumps(config))
    assert main(["predict", "--model", str(tmp_path / "multi"), "--input", str(inp), "--output",
                 str(tmp_path / "o.jsonl")]) == 2
    assert "classifier" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


# ------------------------------------------------------------------------------------- evaluate: rows, columns
def test_evaluate_rows_use_the_datas_ids_and_columns_override_the_folders(pair_classifier, tmp_path, capsys):
    dev = _write_jsonl(tmp_path / "dev.jsonl", [{"id": 100 + i, "premise": a, "hypothesis": b, "y": "10"}
                                                for i, (a, b) in enumerate(PAIRS)])
    out = tmp_path / "rows.jsonl"
    assert main(["evaluate", "--model", str(pair_classifier), "--data", str(dev), "--output", str(out),
                 "--no-progress"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    rows = _read_jsonl(out)
    assert [r["id"] for r in rows] == [100, 101, 102, 103] and {r["label"] for r in rows} == {"10"}
    assert metrics["accuracy"] == pytest.approx(np.mean([r["prediction"] == "10" for r in rows]))
    for r in rows:
        assert list(r["probabilities"]) == ["1", "2", "10"] and max(r["probabilities"],
                                                                     key=r["probabilities"].get) == r["prediction"]
    # other column names: the error's hint (--columns) works on evaluate
    other = _write_jsonl(tmp_path / "other.jsonl", [{"s": a, "t": b, "gold": "2"} for a, b in PAIRS])
    assert main(["evaluate", "--model", str(pair_classifier), "--data", str(other)]) == 2
    assert "--columns" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(pair_classifier), "--data", str(other), "--columns",
                 "text_a=s,text_b=t,label=gold", "--output", str(out), "--no-progress"]) == 2  # rows.jsonl is there
    assert main(["evaluate", "--model", str(pair_classifier), "--data", str(other), "--columns",
                 "text_a=s,text_b=t,label=gold", "--output", str(out), "--no-progress", "--overwrite"]) == 0
    again = _read_jsonl(out)
    assert [r["id"] for r in again] == [0, 1, 2, 3] and {r["label"] for r in again} == {"2"}
    # the same texts give the same predictions whatever the columns are called
    assert [r["probabilities"] for r in again] == [r["probabilities"] for r in rows]


# ------------------------------------------------------------------------------- --device, --precision, --batch-size
def test_device_precision_and_batch_size_on_cpu(pair_classifier, tmp_path, capsys, monkeypatch):
    from litebert.inference import finetuned
    from litebert.inference import predict as P

    inp = _write_jsonl(tmp_path / "in.jsonl", [{"premise": a, "hypothesis": b} for a, b in PAIRS])
    assert main(["predict", "--model", str(pair_classifier), "--input", str(inp), "--output",
                 str(tmp_path / "fp32.jsonl"), "--device", "cpu", "--no-progress"]) == 0
    # bf16 autocast on CPU: close to fp32, written as plain floats
    assert main(["predict", "--model", str(pair_classifier), "--input", str(inp), "--output",
                 str(tmp_path / "bf16.jsonl"), "--device", "cpu", "--precision", "bf16", "--no-progress"]) == 0
    for a, b in zip(_read_jsonl(tmp_path / "fp32.jsonl"), _read_jsonl(tmp_path / "bf16.jsonl")):
        np.testing.assert_allclose(list(a["probabilities"].values()), list(b["probabilities"].values()), atol=0.05)
    # a device the machine lacks, or fp16 on CPU: one line, nothing written
    if not torch.cuda.is_available():
        assert main(["predict", "--model", str(pair_classifier), "--input", str(inp), "--output",
                     str(tmp_path / "x.jsonl"), "--device", "cuda"]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
    for cmd in (["embed", "--input", str(inp), "--text-field", "premise"], ["predict", "--input", str(inp)]):
        assert main([*cmd, "--model", str(pair_classifier), "--output", str(tmp_path / "x.out"), "--device", "cpu",
                     "--precision", "fp16"]) == 2
        assert "fp16 needs a GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "x.out").exists()

    # batch_size (--batch-size) reaches the model runs of all three functions
    seen = []
    real = finetuned.predict_outputs

    def spy(model, feats, batch_size=64, *args, **kwargs):
        seen.append(batch_size)
        return real(model, feats, batch_size, *args, **kwargs)

    monkeypatch.setattr(finetuned, "predict_outputs", spy)
    monkeypatch.setattr(P, "predict_outputs", spy)
    dev = _write_jsonl(tmp_path / "dev.jsonl", [{"premise": a, "hypothesis": b, "y": "1"} for a, b in PAIRS])
    P.evaluate(pair_classifier, dev, batch_size=3, progress=False)
    P.predict(pair_classifier, inp, tmp_path / "b.jsonl", batch_size=2, progress=False)
    assert seen == [3, 2]
    for a, b in zip(_read_jsonl(tmp_path / "b.jsonl"), _read_jsonl(tmp_path / "fp32.jsonl")):  # nor the results
        np.testing.assert_allclose(list(a["probabilities"].values()), list(b["probabilities"].values()), atol=1e-6)
    sizes = []
    import litebert.tasks.features as F

    def one_at_a_time(lengths, batch_size, *by_tokens):
        sizes.append(batch_size)
        return [[i] for i in range(len(lengths))]

    monkeypatch.setattr(F, "sorted_batches", one_at_a_time)  # embed's batching
    P.embed(pair_classifier, inp, tmp_path / "e.npy", text_field="premise", batch_size=5, progress=False)
    assert sizes == [5]


def test_predict_outputs_follow_the_model_device_and_return_float32():
    from litebert.config import AlbertConfig
    from litebert.engine.runtime import Runtime
    from litebert.heads import AlbertForSequenceClassification
    from litebert.inference.finetuned import predict_outputs

    torch.manual_seed(0)
    model = AlbertForSequenceClassification(AlbertConfig.from_preset("tiny", num_labels=3)).eval()
    feats = [{"input_ids": [2] + list(range(10 + i, 12 + 2 * i)) + [3]} for i in range(5)]  # 4 to 12 pieces
    for f in feats:
        f["token_type_ids"] = [0] * len(f["input_ids"])
    fp32 = predict_outputs(model, feats, 2)
    bf16 = predict_outputs(model, feats, 2, runtime=Runtime.of_model(model, torch.bfloat16))
    for a, b in zip(fp32, bf16):
        assert a["logits"].dtype == b["logits"].dtype == np.float32
        np.testing.assert_allclose(a["logits"], b["logits"], atol=0.05)
    with torch.no_grad():  # each feature alone, unbatched: the same logits
        for f, o in zip(feats, fp32):
            ids = torch.tensor([f["input_ids"]])
            np.testing.assert_allclose(model(ids).logits[0].numpy(), o["logits"], atol=1e-6)


# ----------------------------------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_predict_evaluate_embed_on_cuda_in_bf16(pair_classifier, tmp_path, capsys):
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"premise": a, "hypothesis": b, "y": "2"} for a, b in PAIRS])
    for device, precision in (("cpu", "fp32"), ("cuda", "bf16")):
        assert main(["predict", "--model", str(pair_classifier), "--input", str(inp), "--output",
                     str(tmp_path / f"{device}.jsonl"), "--device", device, "--precision", precision,
                     "--no-progress"]) == 0
        assert main(["embed", "--model", str(pair_classifier), "--input", str(inp), "--text-field", "premise",
                     "--output", str(tmp_path / f"{device}.npy"), "--device", device, "--precision",
                     precision]) == 0
        capsys.readouterr()
        assert main(["evaluate", "--model", str(pair_classifier), "--data", str(inp), "--output",
                     str(tmp_path / f"{device}.rows.jsonl"), "--device", device, "--precision", precision,
                     "--no-progress"]) == 0
        assert json.loads(capsys.readouterr().out)["task"] == "classify"
    for a, b in zip(_read_jsonl(tmp_path / "cpu.jsonl"), _read_jsonl(tmp_path / "cuda.jsonl")):
        np.testing.assert_allclose(list(a["probabilities"].values()), list(b["probabilities"].values()), atol=0.05)
    cpu, gpu = np.load(tmp_path / "cpu.npy"), np.load(tmp_path / "cuda.npy")
    assert gpu.dtype == np.float32 and gpu.shape == cpu.shape
    np.testing.assert_allclose(gpu, cpu, atol=0.05 * np.abs(cpu).max())
    rows = _read_jsonl(tmp_path / "cuda.rows.jsonl")
    assert [r["id"] for r in rows] == [0, 1, 2, 3] and all(r["label"] == "2" for r in rows)
