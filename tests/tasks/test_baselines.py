"""litebert.tasks.baselines: the best constant guess against hand counts, and the bag-of-words baseline (TF-IDF +
logistic regression) against an independent scikit-learn run that chooses C on dev with its own machinery
(Pipeline + GridSearchCV over a predefined train/dev split)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from litebert.errors import ConfigError
from litebert.tasks import baselines

sklearn = pytest.importorskip("sklearn")


def test_majority_counts_each_split():
    # dev: 3 of 5 are "b"; test: a tie of 2 and 2 goes to the label seen first
    assert baselines.majority({"dev": ["a", "b", "b", "a", "b"], "test": ["y", "x", "x", "y"]}) == {
        "dev_label": "b", "dev_accuracy": 0.6, "test_label": "y", "test_accuracy": 0.5}
    with pytest.raises(ConfigError, match="dev"):
        baselines.majority({"dev": []})


def test_separable_words_are_learned():
    good = ["a good film", "good fun, really good", "the good parts", "good acting and good music"]
    bad = ["a bad film", "bad fun, really bad", "the bad parts", "bad acting and bad music"]
    data = (good + bad, [1] * 4 + [0] * 4)
    unseen = (["good", "so bad", "good and fine", "bad and dull"], [1, 0, 1, 0])
    result = baselines.bag_of_words(data, {"dev": data, "test": unseen})
    assert result["dev_accuracy"] == result["test_accuracy"] == 1.0
    assert result["C"] == 0.25  # every C separates these: the most regularised is kept
    # scikit-learn's tokens are 2+ word characters ("a" and "," are not words): 10 unigrams, 18 bigrams
    unigrams = {"good", "bad", "film", "fun", "really", "the", "parts", "acting", "and", "music"}
    bigrams = {f"{w} film" for w in ("good", "bad")} | {f"{w} fun" for w in ("good", "bad")} | {
        "fun really", "really good", "really bad", "the good", "the bad", "good parts", "bad parts",
        "good acting", "bad acting", "acting and", "and good", "and bad", "good music", "bad music"}
    assert result["features"] == len(unigrams) + len(bigrams)


def test_settings_are_checked():
    data = (["good", "bad"], [1, 0])
    with pytest.raises(ConfigError, match="choose_on"):
        baselines.bag_of_words(data, {"test": data})
    with pytest.raises(ConfigError, match="c_grid"):
        baselines.bag_of_words(data, {"dev": data}, c_grid=(1.0, 0.0))


def test_missing_scikit_learn_is_one_line_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # as if not installed: its import raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn.feature_extraction.text", None)
    with pytest.raises(ConfigError, match=r"scikit-learn: pip install 'scikit-learn>=1\.3'"):
        baselines.bag_of_words((["good", "bad"], [1, 0]), {"dev": (["good"], [1])})


@pytest.mark.parametrize("grid", [(1.0, 4.0, 16.0), pytest.param(baselines.C_GRID, marks=pytest.mark.slow)])
def test_sentiment_bag_of_words_matches_scikit_learn_pipeline(grid):
    """The bundled sentiment task: our figure against scikit-learn's own pipeline and grid search choosing C on dev
    (PredefinedSplit: train fold the training split, validation fold dev), refitted on train and scored on test.
    Within a point, and in the range measured before (76-78% dev, 76-79% test). The demo's whole grid (16 fits, about
    a minute on 2 busy cores) is the slow case; three of its values run by default."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, PredefinedSplit
    from sklearn.pipeline import make_pipeline

    from litebert.tasks.readers import read_glue

    data = Path(__file__).resolve().parents[2] / "data" / "finetune" / "sentiment"
    splits = {s: read_glue("sst-2", data / f"{s}.tsv.gz") for s in ("train", "dev", "test")}
    texts = {s: [e.text_a for e in v] for s, v in splits.items()}
    labels = {s: [e.label for e in v] for s, v in splits.items()}
    ours = baselines.bag_of_words((texts["train"], labels["train"]),
                                  {"dev": (texts["dev"], labels["dev"]), "test": (texts["test"], labels["test"])}, grid)

    pipe = make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), LogisticRegression(max_iter=2000))
    fold = PredefinedSplit([-1] * len(texts["train"]) + [0] * len(texts["dev"]))
    search = GridSearchCV(pipe, {"logisticregression__C": list(grid)}, cv=fold,
                          scoring="accuracy", refit=False).fit(texts["train"] + texts["dev"],
                                                                 labels["train"] + labels["dev"])
    best_c = search.best_params_["logisticregression__C"]
    dev = search.cv_results_["mean_test_score"][search.best_index_]
    test = pipe.set_params(logisticregression__C=best_c).fit(texts["train"], labels["train"]).score(
        texts["test"], labels["test"])
    assert abs(ours["dev_accuracy"] - dev) <= 0.01 and abs(ours["test_accuracy"] - test) <= 0.01, (ours, dev, test)
    assert 0.76 <= ours["dev_accuracy"] <= 0.80 and 0.76 <= ours["test_accuracy"] <= 0.80
