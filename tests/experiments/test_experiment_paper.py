"""The paper's numbers printed under every results.md (litebert.experiments.paper) are checked two ways against the
paper itself: each row's printed Avg is the mean of its five downstream scores (SQuAD as the mean of F1 and EM), and
rows that the paper prints in two tables for the same model agree."""

import pytest

from litebert.experiments import paper
from litebert.experiments.report import markdown


def test_avg_column_is_the_mean_of_the_downstream_scores():
    rows = [r for t in paper.TABLES.values() for r in t.rows]
    assert len(rows) == 6 + 8 + 8 + 3
    for r in rows:
        assert r.computed_avg() == pytest.approx(r.avg, abs=0.05 + 1e-9), r.name


def test_same_models_agree_across_tables():
    t = {k: {r.name: r for r in v.rows} for k, v in paper.TABLES.items()}
    same = [(t["speedup"]["BERT-base"], t["embedding-size"]["not-shared E768"], t["sharing"]["E768 not-shared"]),
            (t["embedding-size"]["all-shared E768"], t["sharing"]["E768 all-shared"]),
            (t["speedup"]["ALBERT-base"], t["embedding-size"]["all-shared E128"])]
    for group in same:
        keys = {(r.parameters, r.squad1, r.squad2, r.mnli, r.sst2, r.race, r.avg) for r in group}
        assert len(keys) == 1, [r.name for r in group]
    # Table 5's SOP arm is Table 4's E=128 all-shared model (both print MNLI 82.0; Table 3 prints 81.6 for it)
    sop, t4 = t["sentence-objective"]["SOP"], t["sharing"]["E128 all-shared"]
    assert (sop.squad1, sop.squad2, sop.mnli, sop.sst2, sop.race, sop.avg) == \
        (t4.squad1, t4.squad2, t4.mnli, t4.sst2, t4.race, t4.avg)
    # the cross-evaluation the experiment reproduces: NSP-trained ~chance on SOP, SOP-trained well above on NSP
    nsp, none = t["sentence-objective"]["NSP"], t["sentence-objective"]["None"]
    assert nsp.intrinsic[2] < 55 and none.intrinsic[2] < 55 and sop.intrinsic[1] > 75


def test_results_md_carries_the_papers_table():
    summary = {"experiment": "sharing", "arms": [], "settings": {
        "batch": 16, "seq_len": 128, "seed": 1, "hidden_size": 256, "num_layers": 4, "eval_examples": 10,
        "sentiment_steps": 3, "mc_steps": 2}}
    text = markdown(summary)
    assert "## The paper's Table 4" in text
    assert "| E128 shared-FFN | 38M | 88.9/81.6 | 78.6/75.6 | 82.3 | 91.7 | 64.4 | 80.2 |" in text
    assert paper.markdown("no-such-experiment") == ""
    assert "| SOP | 12M | 54.0 | 78.9 | 86.5 |" in paper.markdown("sentence-objective")
    assert "| ALBERT-large | 18M |" in paper.markdown("speedup") and "| 1.7x |" in paper.markdown("speedup")
