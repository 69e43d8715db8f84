"""scripts/demo_gpu.py at toy size on the CPU (every stage, the report's fields and ranges), and the sentiment
baselines of scripts/demo_finetune.py: the bag-of-words model against scikit-learn's logistic regression, the best
constant guess against the data's label counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import demo_finetune  # noqa: E402


@pytest.fixture(scope="module")
def splits():
    return demo_finetune.read_splits()


def test_majority_is_the_best_constant_guess(splits):
    # data/finetune/README.md: dev is 51.5% positive; test holds 509 positive snippets of 1000
    assert demo_finetune.majority(splits) == {"dev_label": "1", "dev_accuracy": 0.515, "test_label": "1",
                                              "test_accuracy": 0.509}


def test_bag_of_words_separates_separable_data():
    def ex(text, label):
        return SimpleNamespace(text_a=text, label=label)

    good = ["a good film", "good fun , really good", "the good parts", "good acting and good music"]
    bad = ["a bad film", "bad fun , really bad", "the bad parts", "bad acting and bad music"]
    data = {s: [ex(t, "1") for t in good] + [ex(t, "0") for t in bad] for s in ("train", "dev", "test")}
    result = demo_finetune.bag_of_words(data, strengths=(1e-3,))
    assert result["dev_accuracy"] == result["test_accuracy"] == 1.0
    # features in >= 2 training snippets: a, good, bad, film, fun, ",", really, the, parts, acting, and, music;
    # bigrams "fun ,", ", really", "acting and" (each "good ..." or "bad ..." bigram is in one snippet only)
    assert result["features"] == 12 + 3


def test_bag_of_words_equals_scikit_learn(splits):
    """The same penalised logistic regression fitted by scikit-learn (lbfgs; C = 1 / (2 n l2) turns its summed loss
    into our mean loss + l2 |w|^2) predicts the same test labels."""
    sp = pytest.importorskip("scipy.sparse")
    linear_model = pytest.importorskip("sklearn.linear_model")
    data, _ = demo_finetune.bow_features(splits)

    def csr(x):
        i = x.indices().numpy()
        return sp.csr_matrix((x.values().numpy(), (i[0], i[1])), shape=tuple(x.shape))

    x, y = data["train"]
    l2 = 1e-4
    w, b = demo_finetune.fit_logistic(x, y, l2)
    ref = linear_model.LogisticRegression(C=1 / (2 * len(y) * l2), max_iter=5000, tol=1e-8).fit(csr(x), y.numpy())
    assert torch.linalg.norm(w - torch.tensor(ref.coef_[0], dtype=w.dtype)) / torch.linalg.norm(w) < 5e-3
    test = csr(data["test"][0])
    ours = (test @ w.numpy() + b.numpy()) > 0
    assert (ours == (ref.predict(test) > 0.5)).mean() >= 0.995


def test_demo_gpu_toy(tmp_path):
    """Every stage of the GPU demo at toy size, as the CPU smoke run: the report has each figure, in range."""
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_gpu.py"), "--toy", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["device"] == "cpu" and report["corpus"]["files"] == ["moby_dick.txt.xz", "sotu.txt.xz"]
    assert report["corpus"]["words"]["train"] > 10 * report["corpus"]["words"]["heldout"] > 0
    assert report["tokens"]["train"] > report["corpus"]["words"]["train"]  # ~1.2 pieces per word
    assert report["model"] == {"embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
                               "num_attention_heads": 2, "intermediate_size": 64, "sharing": "all"}
    assert report["step"] == report["max_steps"] == 40 and report["complete"]
    final, base = report["final_eval"], report["baselines"]
    assert 0 <= final["mlm_accuracy"] <= 1 and 0 <= final["sop_accuracy"] <= 1
    assert final["sop_loss"] > 0 and final["mlm_loss"] > 0
    assert base["sop_uniform"] == 0.5 and 0.5 <= base["sop_majority"] <= 1 and base["mlm_uniform"] == 1 / 30000
    s = report["sentiment"]
    assert s["examples"] == {"train": 8568, "dev": 1000, "test": 1000}
    for name in ("pretrained", "from_scratch"):
        assert s[name]["lr"] == 1e-3 and s[name]["test_examples"] == 1000
        assert 0 <= s[name]["dev_accuracy"] <= 1 and 0 <= s[name]["test_accuracy"] <= 1
    assert 0.74 <= s["bag_of_words"]["test_accuracy"] <= 0.82  # measured 77.8%; the 76-79%
    assert s["majority"]["test_accuracy"] == 0.509
    md = (out / "report.md").read_text()
    assert "| SOP accuracy |" in md and "| bag of words (logistic regression) |" in md and "(control)" in md
    assert (out / "pretraining.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "pretrain" / "model" / "spiece.model").is_file()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on machines without a GPU")
def test_demo_gpu_refuses_without_cuda(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_gpu.py"), "--out", str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "no CUDA device" in done.stderr and "--toy" in done.stderr
    assert not (tmp_path / "x").exists()
