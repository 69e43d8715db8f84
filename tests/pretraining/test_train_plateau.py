"""The plateau guard (`litebert.pretraining.plateau`): its statistics against hand computations and brute force, its
rules,
the square-root learning-rate rule, and the gate. The guard in real runs of the demo's model is in
test_plateau_demo_stop.py and test_plateau_demo_quiet.py (one run each, so that parallel workers run them side by
side)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers import IntTokenizer
from litebert import TrainConfig
from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.data.pretraining import PretrainingDataset, collate_pretraining
from litebert.data.store import TokenStore, prepare_store
from litebert.engine.metrics_log import read_metrics
from litebert.errors import ConfigError
from litebert.heads import AlbertForPreTraining
from litebert.padding import prepare_batch
from litebert.pretraining.plateau import (
    PlateauGuard,
    Probe,
    Unigram,
    advice,
    probe,
    sqrt_rule_lr,
    unigram_of_counts,
    unigram_of_store,
)


# ---------------------------------------------------------------------------------------------------- statistics
def test_unigram_of_counts_by_hand():
    u = unigram_of_counts(np.array([3, 1, 0, 0]))
    assert u.entropy == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), abs=1e-12)  # 0.5623 nats
    assert (u.top_id, u.top_share, u.tokens) == (0, 0.75, 4)
    assert unigram_of_counts(np.array([0, 5])).entropy == 0.0  # one piece: nothing to learn beyond it
    with pytest.raises(ValueError):
        unigram_of_counts(np.zeros(3))


def zipf_store(folder: Path, n_sentences: int = 3000, seed: int = 0) -> tuple[Path, np.ndarray]:
    """A store of Zipf-distributed ids 5..499 (IntTokenizer: every id a whole word); returns it and the id counts."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, 496)
    p = (1 / ranks) / (1 / ranks).sum()
    docs, counts = [], np.zeros(500, np.int64)
    for d in range(n_sentences // 10):
        lines = []
        for _ in range(10):
            ids = rng.choice(np.arange(5, 500), size=rng.integers(8, 20), p=p)
            np.add.at(counts, ids, 1)
            lines.append(" ".join(map(str, ids)))
        docs.append("\n".join(lines))
    text = folder / "zipf.txt"
    text.write_text("\n\n".join(docs) + "\n")
    prepare_store([text], IntTokenizer(500), folder / "store", progress=False)
    return folder / "store", counts


@pytest.fixture(scope="module")
def zipf(tmp_path_factory):
    return zipf_store(tmp_path_factory.mktemp("zipf"))


def test_unigram_of_store_counts_every_token(zipf):
    store, counts = zipf
    u = unigram_of_store(TokenStore(store))
    expected = unigram_of_counts(counts)
    assert u.tokens == counts.sum() and u.top_id == expected.top_id
    assert u.entropy == pytest.approx(expected.entropy, abs=1e-12)


def test_unigram_of_a_store_past_the_cap_is_sampled_and_close(zipf):
    store, counts = zipf
    u = unigram_of_store(TokenStore(store), cap=counts.sum() // 2)
    assert u.tokens < counts.sum()  # sampled, not counted whole
    assert u.entropy == pytest.approx(unigram_of_counts(counts).entropy, abs=0.05)


def test_masked_targets_follow_the_store_frequencies(zipf):
    """H1 is the loss of the frequency distribution at the masked positions: the masking must draw its targets with
    the store's frequencies (it draws whole words uniformly). Measured on 2,000 examples' masked targets."""
    store, counts = zipf
    ds = PretrainingDataset(store, max_seq_length=64, max_predictions_per_seq=10, seed=3)
    targets = np.concatenate([ds.example(0, i)["mlm_ids"] for i in range(min(2000, ds.num_examples))])
    masked = np.bincount(targets, minlength=500)
    p_store = counts / counts.sum()
    cross = -(masked * np.log(np.where(p_store > 0, p_store, 1))).sum() / masked.sum()  # CE of targets vs store p
    assert cross == pytest.approx(unigram_of_counts(counts).entropy, abs=0.05)


def tiny_batch(n: int = 6):
    torch.manual_seed(0)
    config = AlbertConfig.from_preset("tiny", vocab_size=300)
    model = AlbertForPreTraining(config)
    rng = np.random.default_rng(0)
    examples = []
    for _ in range(n):
        length = int(rng.integers(12, 30))
        ids = rng.integers(5, 300, size=length).astype(np.int32)
        ids[0], ids[-1] = 2, 3
        positions = np.sort(rng.choice(np.arange(1, length - 1), size=4, replace=False)).astype(np.int32)
        examples.append({"input_ids": ids, "token_type_ids": np.zeros(length, np.int32), "mlm_positions": positions,
                         "mlm_ids": ids[positions].copy(), "sentence_order_label": np.int64(0)})
    return model, collate_pretraining(examples)


def test_probe_equals_brute_force():
    model, batch = tiny_batch()
    found = probe(model, prepare_batch(batch, torch.device("cpu"), pack=True))
    with torch.no_grad():  # the reference: every position's final state from a plain padded forward, all pairs
        out = model.albert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        rows = [out.last_hidden_state[b, p] for b in range(6) for p in batch["mlm_positions"][b]
                if batch["mlm_weights"][b][list(batch["mlm_positions"][b]).index(p)] > 0]
        h = torch.stack(rows)
        logits = model.predictions(h, model.albert.embeddings.word_embeddings.weight)
    cos = torch.nn.functional.cosine_similarity(h[:, None], h[None], dim=-1)
    n = h.shape[0]
    answers = logits.argmax(-1).tolist()
    assert found.positions == n == 24
    assert found.cosine == pytest.approx(((cos.sum() - n) / (n * (n - 1))).item(), abs=1e-5)
    assert found.distinct == len(set(answers))
    assert found.top_share == pytest.approx(max(answers.count(a) for a in answers) / n)


# ---------------------------------------------------------------------------------------------------- rules
def guard(**kw) -> PlateauGuard:
    return PlateauGuard(Unigram(6.5, 13, 0.07, 1000, 0.0), warmup=100, check_after=300, **kw)


def test_guard_checks_after_the_warmup_then_every_interval_until_it_fires():
    g = guard()
    assert [s for s in range(1, 1400) if g.due(s)] == [400, 700, 1000, 1300]
    for _ in range(20):
        g.observe(6.55)
    collapsed = Probe(500, 1, 1.0, 0.999)
    assert g.check(400, collapsed).plateau and g.fired is not None
    assert not any(g.due(s) for s in (700, 1000))  # one finding per run


@pytest.mark.parametrize("loss, found, plateau", [
    (6.55, Probe(500, 1, 1.0, 0.999), True),      # at H1, one answer, parallel states: the measured plateau
    (6.22, Probe(500, 41, 0.84, 0.60), False),    # the measured learning run at the same step: states apart
    (6.10, Probe(500, 1, 1.0, 0.999), False),     # below H1 - 0.3: left the plateau
    (7.10, Probe(500, 1, 1.0, 0.999), False),     # above H1 + 0.5: still falling towards it (a slow start)
    (6.55, Probe(500, 3, 0.95, 0.80), False),     # one answer but states apart: context is being learned
])
def test_plateau_needs_the_loss_at_h1_and_the_collapse(loss, found, plateau):
    g = guard()
    for _ in range(20):
        g.observe(loss)
    assert g.check(400, found).plateau is plateau


@pytest.mark.parametrize("loss, h1, probe_, verdict", [
    # the gate's calibration runs (docs/pretraining.md, "The CPU gate"): loss, H1, (top share, cosine) at the check
    (6.756, 6.586, (1.0, 1.0), "PLATEAU"),     # run A's proxy at H 512: the GPU run's plateau reproduced
    (9.467, 6.586, (0.60, 0.997), "SLOW"),     # run B's proxy: far above H1, still collapsed
    (7.280, 6.586, (1.0, 1.0), "SLOW"),        # run A with bias correction at warmup + 250: collapsed, still falling
    (6.477, 6.586, (0.87, 0.75), "PASS"),      # run A's too-robust H 256 proxy: positions apart at H1
    (6.200, 6.586, (0.95, 0.95), "PASS"),      # below H1 - 0.3 whatever the probe says
    (7.300, 6.586, (0.80, 0.60), "SLOW"),      # apart but far above H1: not yet predicting from context
    (6.478, 6.481, (0.91, 0.62), "SLOW"),      # the demo's model re-gated: at H1, 91% one piece: the cosine alone
                                               # must not pass it
    (6.250, 6.481, (0.40, 0.62), "PASS"),      # the demo's recipe as documented: 0.23 below H1, apart
    (6.400, 6.481, (0.95, 0.95), "PLATEAU"),   # 0.08 below H1 and collapsed: the guard's plateau
])
def test_gate_verdicts(loss, h1, probe_, verdict):
    from litebert.pretraining.gate import verdict_of
    from litebert.pretraining.plateau import CEILING, COLLAPSE_COSINE, COLLAPSE_SHARE, MARGIN

    collapsed = probe_[0] >= COLLAPSE_SHARE and probe_[1] >= COLLAPSE_COSINE
    plateau = collapsed and h1 - MARGIN <= loss <= h1 + CEILING  # the guard's rule
    assert verdict_of(loss, h1, plateau, collapsed) == verdict


def test_guard_ignores_non_finite_losses():
    g = guard()
    g.observe(float("nan"))
    g.observe(6.0)
    assert g.mean_loss == 6.0


def test_sqrt_rule_by_hand():
    assert sqrt_rule_lr(4096) == pytest.approx(0.00176)  # the paper's batch and rate
    assert sqrt_rule_lr(256) == pytest.approx(0.00044)
    assert sqrt_rule_lr(128) == pytest.approx(0.00176 / math.sqrt(32))
    assert sqrt_rule_lr(256, "adamw") == pytest.approx(1e-4)  # BERT's Adam rate at its batch
    assert sqrt_rule_lr(1024, "adamw") == pytest.approx(2e-4)


def test_lr_auto_is_the_sqrt_rule_decided_when_the_config_is_built():
    cfg = TrainConfig(lr="auto", batch_size=256)
    assert cfg.lr == pytest.approx(0.00044) and "the sqrt rule" in cfg.describe_lr()
    assert TrainConfig.from_dict({"lr": "auto", "batch_size": 128, "optimizer": "adamw"}).lr == pytest.approx(
        1e-4 / math.sqrt(2))
    assert "4x the sqrt rule" in TrainConfig(lr=0.00176, batch_size=256).describe_lr()
    with pytest.raises(ConfigError, match="lr"):
        TrainConfig(lr="fast")


def test_advice_names_only_what_was_measured_to_help():
    # run A (docs/pretraining.md, "The CPU gate"): 0.00176 plateaued; half, 0.00088, plateaued too (GPU.md, "The
    # gate"); a quarter, 0.00044, did not; bias correction only delayed the plateau
    text = advice(0.00176, 120, 256, "lamb", False)
    assert "--lr 0.00044" in text and "0.00088" not in text and "--bias-correction" not in text
    assert "warmup 120" in text and "litebert gate" in text
    # the demo's plateau rate 0.01 -> 0.0025, inside the range measured to learn (0.002-0.006)
    assert "--lr 0.0025" in advice(0.01, 100, 16, "lamb", True)
    # a sqrt-rule rate below the quarter is named too
    assert "0.00044" in advice(0.004, 100, 256, "lamb", False) and "--lr 0.001 " in advice(0.004, 100, 256, "lamb",
                                                                                           False)


@pytest.mark.parametrize("warmup, max_steps, given, expected", [
    (100, 1100, None, 150),       # the CPU demo: first check at step 250 (23% of the run), not 400
    (100, 400, None, 100),        # short runs: at least 100 steps after the warmup (falling through takes ~50-125)
    (3125, 125_000, None, 300),   # the paper's run: at most 300 (the old fixed value)
    (100, None, None, 300),       # no end known: the longest
    (100, 1100, 7, 7),            # given: as given
])
def test_first_check_scales_with_the_run(warmup, max_steps, given, expected):
    from litebert.pretraining.plateau import check_after

    assert check_after(warmup, max_steps, given) == expected


@given(h1=st.floats(4, 10), a=st.floats(-1, 3), b=st.floats(-1, 3), collapsed=st.booleans())
def test_a_lower_loss_never_gets_a_worse_verdict(h1, a, b, collapsed):
    from litebert.pretraining.gate import explain

    rank = {"PLATEAU": 0, "SLOW": 1, "PASS": 2}
    lo, hi = sorted((h1 + a, h1 + b))
    for loss in (lo, hi):
        verdict, why = explain(loss, h1, False, collapsed)
        assert f"{loss:.3f}" in why and f"{h1:.3f}" in why  # the values that decided it are printed
        if verdict == "PASS":
            assert loss <= h1 - 0.1 + 1e-9  # never a PASS at H1
    assert rank[explain(lo, h1, False, collapsed)[0]] >= rank[explain(hi, h1, False, collapsed)[0]]


def test_cli_reads_lr_auto_and_refuses_another_word(tmp_path, capsys):
    assert main(["pretrain", "--preset", "tiny", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "r"),
                 "--lr", "quick"]) == 2
    assert "--lr quick" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- the gate
def test_gate_runs_the_proxy_and_writes_its_verdict(tiny_setup, tmp_path, capsys):
    out = tmp_path / "gate"
    argv = ["gate", "--preset", "tiny", "--data", str(tiny_setup["store"]), "--eval-data",
            str(tiny_setup["eval_store"]), "--out", str(out), "--lr", "0.001", "--warmup-steps", "2",
            "--max-steps", "40", "--batch-size", "64", "--seq-len", "64", "--max-predictions", "10",
            "--after-warmup", "3", "--proxy-seq-len", "64", "--margin", "2", "--no-progress"]
    code = main(argv)
    stdout = capsys.readouterr().out
    report = json.loads((out / "gate.json").read_text())
    assert code == (0 if report["verdict"] == "PASS" else 3) and report["verdict"] in ("PLATEAU", "SLOW", "PASS")
    assert stdout.startswith(f"gate: {report['verdict']}")
    first, margin = report["runs"]
    assert first["steps"] == margin["steps"] == 5  # warmup 2 + 3
    assert first["lr"] == pytest.approx(0.001) and margin["lr"] == pytest.approx(0.002)
    proxy = json.loads((out / "proxy" / "train_config.json").read_text())
    # the candidate's optimizer and schedule; the proxy's batch (8) and length; the tiny model is narrower than the
    # proxy's 512 and keeps its own width
    assert (proxy["lr"], proxy["warmup_steps"], proxy["max_steps"], proxy["batch_size"]) == (0.001, 2, 40, 8)
    assert proxy["model"]["hidden_size"] == AlbertConfig.from_preset("tiny").hidden_size
    tiny = AlbertConfig.from_preset("tiny")  # the report gives the proxy as it ran, not the defaults it was cut to
    assert report["proxy"] == {"hidden_size": tiny.hidden_size, "num_heads": tiny.num_attention_heads,
                               "intermediate_size": tiny.intermediate_size, "seq_len": 64, "batch": 8}
    lrs = [r["lr"] for r in read_metrics(out / "proxy", "train")]
    assert lrs[:3] == pytest.approx([0.0, 0.0005, 0.001 * (1 - 2 / 40)])  # the candidate's schedule, step for step
    assert "| **" + report["verdict"] + "** |" in (out / "gate.md").read_text()
    assert main(argv) == 2  # a finished gate is not replaced without --overwrite
    assert "--overwrite" in capsys.readouterr().err


def test_gate_narrows_a_wide_candidate_and_scales_its_predictions():
    from litebert.pretraining.gate import Proxy

    base = AlbertConfig.from_preset("albert-base-v2")
    proxy = Proxy().model(base)
    assert (proxy.hidden_size, proxy.num_attention_heads, proxy.intermediate_size) == (512, 8, 2048)
    assert (proxy.num_hidden_layers, proxy.sharing, proxy.embedding_size) == (12, "all", 128)
    cfg = Proxy().train(TrainConfig(lr=0.00176, batch_size=256, seq_len=512, max_predictions=76, warmup_steps=119,
                                    max_steps=1198, bias_correction=True), 369)
    assert (cfg.batch_size, cfg.seq_len, cfg.max_predictions) == (8, 128, 19)
    assert (cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.bias_correction) == (0.00176, 119, 1198, True)


def test_the_guards_notice_on_a_run_too_short_for_a_check():
    """Issue 58 item 9: a run that ends before the guard's first check is told so, not given a check step beyond its
    end; a run long enough is told when the guard checks."""
    from litebert.pretraining.loop import guard_notice
    from litebert.pretraining.plateau import PlateauGuard, Unigram

    unigram = Unigram(entropy=5.0, top_id=3, top_share=0.1, tokens=1000, seconds=0.0)
    short = guard_notice(PlateauGuard(unigram, 10, check_after=50, action="warn", batch=None), max_steps=20)
    assert "too short for a check" in short and "checks at step" not in short, short
    assert "(20 steps)" in short and "step 60" in short, short
    long = guard_notice(PlateauGuard(unigram, 10, check_after=50, action="stop", batch=None), max_steps=200)
    assert "checks at step 60 (warmup 10 + 50) and every 50 after; on a plateau: stop" in long, long
    assert "checks at step 60" in guard_notice(PlateauGuard(unigram, 10, check_after=50, batch=None), None)
