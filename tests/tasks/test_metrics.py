"""Metrics against scikit-learn / SciPy and hand-computed cases (SQuAD, conlleval chunking)."""

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from litebert.tasks import metrics as M


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 200)
    p = np.where(rng.random(200) < 0.7, y, 1 - y)
    assert M.accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p))
    assert M.f1(p, y) == pytest.approx(skm.f1_score(y, p))
    assert M.matthews(p, y) == pytest.approx(skm.matthews_corrcoef(y, p))
    y3, p3 = rng.integers(0, 3, 300), rng.integers(0, 3, 300)
    p3[:150] = y3[:150]
    assert M.matthews(p3, y3) == pytest.approx(skm.matthews_corrcoef(y3, p3))


def test_matthews_degenerate_and_hand_case():
    # constant prediction: sklearn returns 0
    assert M.matthews([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0
    # TP=2, TN=1, FP=1, FN=0: (2*1 - 1*0)/sqrt(3*2*1*2) = 2/sqrt(12)
    assert M.matthews([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(2 / np.sqrt(12))
    assert M.f1([0, 0], [1, 1]) == 0.0


def test_correlations_match_scipy_with_ties():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 100).astype(float)  # many ties
    y = x + rng.normal(0, 2, 100)
    y[::7] = 1.0
    assert M.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert M.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
    assert M.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_squad_normalization_hand_cases():
    assert M.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert M.normalize_answer("An apple a day") == "apple day"
    assert M.normalize_answer("theater") == "theater"  # articles only as whole words
    assert M.normalize_answer("U.S.A.") == "usa"
    assert M.exact_match("the Eiffel Tower.", "Eiffel tower") == 1
    # pred [cat, sat] vs gold [cat, sat, on, mat]: P=1, R=1/2 -> F1=2/3
    assert M.token_f1("the cat sat", "cat sat on mat") == pytest.approx(2 / 3)
    # repeated tokens count by multiplicity: pred [a1 a1 x], gold [a1 y]: common 1, P=1/3, R=1/2 -> 0.4
    assert M.token_f1("a1 a1 x", "a1 y") == pytest.approx(0.4)
    assert M.token_f1("", "") == 1.0 and M.token_f1("x", "") == 0.0


def test_squad_v1_max_over_gold_answers():
    gold = {"q1": ["Denver Broncos", "the Broncos"], "q2": ["1990"]}
    r = M.squad_evaluate(gold, {"q1": "Broncos", "q2": "in 1990"})
    # q1: EM("Broncos","the Broncos") = 1; q2: EM 0, F1 = 2*(1/2*1)/(1/2+1) = 2/3
    assert r["exact"] == pytest.approx(50.0)
    assert r["f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert r["total"] == 2


def test_squad_v2_splits_and_best_threshold():
    gold = {"q1": ["Paris"], "q2": [], "q3": ["1990", "in 1990"]}
    preds = {"q1": "paris.", "q2": "London", "q3": "1991"}
    na = {"q1": 0.1, "q2": 0.9, "q3": 0.5}
    r = M.squad_evaluate(gold, preds, na, na_prob_thresh=0.5)
    # q2's score 0.9 > 0.5 -> counted as "no answer" -> correct; q1 right; q3 wrong
    assert r["exact"] == pytest.approx(200 / 3)
    assert r["HasAns_exact"] == pytest.approx(50.0) and r["HasAns_total"] == 2
    assert r["NoAns_exact"] == pytest.approx(100.0) and r["NoAns_total"] == 1
    # sweep: start 1 (one NoAns); admit q1 (+1) -> 2 at 0.1; q3 (+0); q2 non-empty (-1): best 2/3 at 0.1
    assert r["best_exact"] == pytest.approx(200 / 3) and r["best_exact_thresh"] == pytest.approx(0.1)
    raw = M.squad_evaluate(gold, preds)  # no na_probs: the raw predictions, q2 wrong
    assert raw["exact"] == pytest.approx(100 / 3) and "best_exact" not in raw


def test_squad_missing_predictions_are_left_out():
    with pytest.warns(UserWarning, match="no prediction"):
        r = M.squad_evaluate({"a": ["x"], "b": ["y"]}, {"a": "x"})
    assert r["total"] == 1 and r["exact"] == 100.0


def test_entity_spans_iob2_iob1_iobes():
    assert M.entity_spans(["B-PER", "I-PER", "O", "B-LOC"]) == {("PER", 0, 1), ("LOC", 3, 3)}
    # IOB1 (original CoNLL-2003): I- starts a chunk after O; B- only separates adjacent same-type chunks
    assert M.entity_spans(["I-PER", "I-PER", "B-PER", "O", "I-ORG"]) == {("PER", 0, 1), ("PER", 2, 2), ("ORG", 4, 4)}
    # a type change inside a run ends the chunk
    assert M.entity_spans(["B-PER", "I-LOC"]) == {("PER", 0, 0), ("LOC", 1, 1)}
    # IOBES
    assert M.entity_spans(["S-PER", "B-ORG", "I-ORG", "E-ORG", "S-LOC"]) == {("PER", 0, 0), ("ORG", 1, 3),
                                                                             ("LOC", 4, 4)}


def test_entity_f1_hand_case():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-MISC"]]
    # gold chunks 3, pred chunks 4, correct 2 (PER 0-1, ORG 0-0): P=1/2, R=2/3, F1=4/7
    r = M.entity_f1(pred, gold)
    assert r["precision"] == pytest.approx(0.5)
    assert r["recall"] == pytest.approx(2 / 3)
    assert r["f1"] == pytest.approx(4 / 7)
    # partial span overlap is no match
    assert M.entity_f1([["B-PER", "O"]], [["B-PER", "I-PER"]])["f1"] == 0.0


def test_squad_missing_predictions_warn_and_are_left_out():
    gold = {"q1": ["Denver Broncos"], "q2": [], "q3": ["1990"]}
    with pytest.warns(UserWarning, match="1 of 3 questions have no prediction"):
        r = M.squad_evaluate(gold, {"q1": "Broncos", "q2": ""})
    # q1: EM 0 (extra word missing), F1 2/3; q2: correct no-answer; q3 left out of the totals.
    assert r["total"] == 2
    assert r["exact"] == pytest.approx(50.0)
    assert r["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
