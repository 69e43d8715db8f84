"""`litebert experiment`: the plumbing of every experiment with tiny budgets (a 40-chapter corpus, a 2-layer H=32
model, a few steps, fine-tuning on a few examples), checked against hand-computed outcomes: the document split, the
Wilson intervals recomputed from the counts, the parameter counts of the paper's sharing strategies, the table rows
written from results.json, a PNG, and a re-run that trains nothing."""

from __future__ import annotations

import json
import lzma
import math
import time
from pathlib import Path

import pytest

from litebert.cli import main

REPO = Path(__file__).resolve().parents[2]
TINY = ["--hidden-size", "32", "--num-layers", "2", "--embedding-size", "16", "--seq-len", "64", "--batch", "8",
        "--eval-examples", "24", "--sentiment-steps", "2", "--mc-steps", "2", "--finetune-batch", "8",
        "--max-train-examples", "16", "--max-eval-examples", "30"]


def documents() -> list[str]:
    text = lzma.decompress((REPO / "data" / "corpus" / "moby_dick.txt.xz").read_bytes()).decode("utf-8")
    return [d.strip("\n") for d in text.split("\n\n") if d.strip()]


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval, written out from its definition (Wilson 1927)."""
    z = 1.959964
    p = k / n
    centre = (2 * n * p + z * z) / (2 * (n + z * z))
    half = z * math.sqrt(z * z + 4 * n * p * (1 - p)) / (2 * (n + z * z))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.fixture(scope="module")
def objective_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("experiment")
    corpus = folder / "small.txt"
    corpus.write_text("\n\n".join(documents()[:40]) + "\n")
    out = folder / "so"
    argv = ["experiment", "sentence-objective", "--out", str(out), "--corpus", str(corpus), "--heldout-every", "5",
            "--steps", "4", *TINY]
    assert main(argv) == 0
    return {"out": out, "argv": argv, "corpus": corpus}


def test_documents_split_every_nth(objective_run):
    docs = documents()[:40]
    text = objective_run["out"] / "data" / "text"
    assert (text / "heldout.txt").read_text() == "\n\n".join(docs[4::5]) + "\n"
    assert (text / "train.txt").read_text() == "\n\n".join(d for i, d in enumerate(docs) if i % 5 != 4) + "\n"
    from litebert.data.store import TokenStore

    assert TokenStore(objective_run["out"] / "data" / "heldout").num_documents == 8
    assert TokenStore(objective_run["out"] / "data" / "train").num_documents == 32


def test_sentence_objective_results(objective_run):
    from litebert.engine.metrics_log import read_metrics
    from litebert.io.hf_folder import load_config
    from litebert.params import count_parameters

    out = objective_run["out"]
    results = json.loads((out / "results.json").read_text())
    assert [a["name"] for a in results["arms"]] == ["none", "nsp", "sop"]
    for arm in results["arms"]:
        run = Path(arm["run"])
        config = json.loads((run / "model" / "config.json").read_text())
        assert (config["hidden_size"], config["num_hidden_layers"], config["embedding_size"]) == (32, 2, 16)
        assert config["num_attention_heads"] == 1 and config["intermediate_size"] == 128  # H/64 (at least 1), 4H
        assert arm["parameters"] == count_parameters(load_config(run / "model"))
        assert arm["steps"] == 4 and arm["train_seconds"] > 0
        records = read_metrics(run)
        assert arm["final_train_loss"] == records[-1]["loss"]
        # the sentence loss is logged under the arm's objective, and only when it has one
        keys = set().union(*records)
        assert ("sop_loss" in keys, "nsp_loss" in keys) == (arm["objective"] == "sop", arm["objective"] == "nsp")
        scores = [arm["intrinsic"][o] for o in ("mlm", "sop", "nsp")]
        scores += [arm["downstream"][t] for t in ("sentiment", "mc")]
        for s in scores:
            assert s["accuracy"] == pytest.approx(s["correct"] / s["total"])
            assert (s["low"], s["high"]) == pytest.approx(wilson(s["correct"], s["total"]), abs=1e-9)
        assert arm["intrinsic"]["sop"]["total"] == arm["intrinsic"]["nsp"]["total"] == 24
        assert arm["downstream"]["sentiment"]["total"] == arm["downstream"]["mc"]["total"] == 30
        assert arm["downstream_average"] == pytest.approx(
            (arm["downstream"]["sentiment"]["accuracy"] + arm["downstream"]["mc"]["accuracy"]) / 2)
        assert json.loads((run.parent / "sentiment" / "finetune.json").read_text())["complete"] is True


def test_markdown_table_and_png(objective_run):
    out = objective_run["out"]
    results = json.loads((out / "results.json").read_text())
    lines = (out / "results.md").read_text().splitlines()
    assert "| Model | Parameters | MLM | NSP | SOP | Sentiment | MC | Avg |" in lines
    for arm in results["arms"]:
        i, d = arm["intrinsic"], arm["downstream"]
        cells = [f"{100 * s['accuracy']:.1f} [{100 * s['low']:.1f}, {100 * s['high']:.1f}]"
                 for s in (i["mlm"], i["nsp"], i["sop"], d["sentiment"], d["mc"])]
        row = f"| {arm['name']} | {arm['parameters'] / 1e6:.1f}M | " + " | ".join(cells) + \
              f" | {100 * arm['downstream_average']:.1f} |"
        assert row in lines
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_control_rows(objective_run):
    """The downstream controls on the arms' dev examples (the first 30): the majority class counted by hand from
    the data files, the bag of words against scikit-learn's own pipeline choosing C on dev, none for MC, and the
    first arm's shape from random weights fine-tuned alike; each with its Wilson interval, and as rows of the table."""
    import csv
    import gzip

    pytest.importorskip("sklearn")
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, PredefinedSplit
    from sklearn.pipeline import make_pipeline

    from litebert.io.hf_folder import load_config, load_weights

    out = objective_run["out"]
    controls = json.loads((out / "results.json").read_text())["baselines"]
    assert controls["shape_of"] == "none" and "bag-of-words" in controls["note"]

    def tsv(split):
        with gzip.open(REPO / "data" / "finetune" / "sentiment" / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
            rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        return [r["sentence"] for r in rows], [r["label"] for r in rows]

    dev_text, dev_y = (v[:30] for v in tsv("dev"))
    train_text, train_y = (v[:16] for v in tsv("train"))
    with gzip.open(REPO / "data" / "finetune" / "mc" / "social_iqa_dev.jsonl.gz", "rt") as f:
        mc_y = [json.loads(line)["label"] for line in f][:30]
    for task, labels in (("sentiment", dev_y), ("mc", mc_y)):
        top = max(labels.count(v) for v in set(labels))
        assert controls[task]["majority"]["correct"] == top and controls[task]["majority"]["total"] == 30
    assert controls["mc"]["bag_of_words"] is None

    grid = [0.25, 0.5, 1, 2, 4, 8, 16, 32]
    search = GridSearchCV(make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), LogisticRegression(max_iter=2000)),
                          {"logisticregression__C": grid}, cv=PredefinedSplit([-1] * 16 + [0] * 30),
                          scoring="accuracy", refit=False).fit(train_text + dev_text, train_y + dev_y)
    bow = controls["sentiment"]["bag_of_words"]
    assert bow["accuracy"] == pytest.approx(search.best_score_, abs=1e-9) and bow["total"] == 30

    control = out / "baselines" / "from-scratch"
    first = out / "arms" / "none" / "pretrain" / "model"
    assert load_config(control / "model").to_dict() == load_config(first).to_dict()
    ours, pretrained = load_weights(control / "model"), load_weights(first)
    assert any(not (ours[k] == pretrained[k]).all() for k in pretrained if k in ours)  # random, not a copy
    for task in ("sentiment", "mc"):
        row = controls[task]["from_scratch"]
        assert row["total"] == 30 and (row["low"], row["high"]) == pytest.approx(wilson(row["correct"], 30))
        # the control's rates are its own (for training from scratch), each a run of its own, the best on dev kept;
        # a best at an edge added the rate beyond it, as every grid does (replayed here from the scores)
        from litebert.finetuning.grid import beyond

        rates = [g["lr"] for g in row["grid"]]
        assert rates[:2] == [1e-4, 3e-4]
        for n in range(2, len(rates) + 1):
            tried = row["grid"][:n]
            best = max(tried, key=lambda g: g["accuracy"])  # the first of equals
            more = beyond([g["lr"] for g in tried], {"lr": best["lr"], "score": best["accuracy"]}) if n < 5 else None
            assert (more["lr"] if more else None) == (rates[n] if n < len(rates) else None), (task, rates)
        assert row["accuracy"] == max(g["accuracy"] for g in row["grid"])
        for g in row["grid"]:
            meta = json.loads((control / task / f"lr-{g['lr']:g}" / "finetune.json").read_text())
            assert meta["complete"] is True and meta["train"]["lr"] == g["lr"]
            assert meta["dev_metrics"]["accuracy"] == pytest.approx(g["accuracy"])
    table = (out / "results.md").read_text()
    cell = lambda r: f"{100 * r['accuracy']:.1f} [{100 * r['low']:.1f}, {100 * r['high']:.1f}]"  # noqa: E731
    assert (f"| bag of words (TF-IDF + logistic regression, C on dev) | - | - | - | - | {cell(bow)} | - | - |"
            in table.splitlines())
    assert f"| from random weights (none shape, lr chosen on dev from a from-scratch grid) | - | - | - | - | " \
           f"{cell(controls['sentiment']['from_scratch'])} | {cell(controls['mc']['from_scratch'])} |" in table
    assert "MC has no bag-of-words row" in table


def test_rerun_reuses_every_arm(objective_run, capsys):
    out = objective_run["out"]
    before = {p: p.read_bytes() for p in out.glob("arms/*/*/metrics.jsonl")}
    before.update({p: p.read_bytes() for p in out.glob("arms/*/scores.json")})
    assert len(before) == 12  # 3 arms x (pretrain, sentiment, mc metrics + scores)
    capsys.readouterr()
    start = time.perf_counter()
    assert main(objective_run["argv"]) == 0
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert {p: p.read_bytes() for p in before} == before
    assert "pretraining 4 steps" not in err and "fine-tuning on" not in err.replace("finished earlier", "")
    assert err.count("pretraining finished earlier (step 4), reused") == 3
    assert elapsed < 15


def test_changed_settings_refused(objective_run, capsys):
    argv = [a if a != "4" else "5" for a in objective_run["argv"]]  # --steps 5
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other settings (steps: 4 there, 5 now)" in err[0]


def test_own_stores_and_sharing_parameters(objective_run, tmp_path):
    """--data/--eval-data instead of a corpus; the four sharing strategies' parameter counts, as the paper orders
    them (Table 4: all-shared < shared-FFN < shared-attention < not-shared)."""
    data = objective_run["out"] / "data"
    out = tmp_path / "sharing"
    assert main(["experiment", "sharing", "--out", str(out), "--data", str(data / "train"), "--eval-data",
                 str(data / "heldout"), "--steps", "2", "--embedding-sizes", "16", *TINY]) == 0
    arms = {a["sharing"]: a for a in json.loads((out / "results.json").read_text())["arms"]}
    assert [a["name"] for a in arms.values()] == ["E16-all-shared", "E16-shared-attention", "E16-shared-FFN",
                                                  "E16-not-shared"]
    # hand count, H = 32, FFN 128, 2 layers: attention q,k,v,o + LayerNorm = 4 (32*32+32) + 64; FFN 32*128+128 +
    # 128*32+32 + LayerNorm 64
    attention, ffn = 4 * (32 * 32 + 32) + 64, 32 * 128 + 128 + 128 * 32 + 32 + 64
    assert arms["attention"]["parameters"] - arms["all"]["parameters"] == ffn
    assert arms["ffn"]["parameters"] - arms["all"]["parameters"] == attention
    assert arms["none"]["parameters"] - arms["all"]["parameters"] == attention + ffn
    assert not (out / "data").exists()


def test_default_arms():
    from litebert.experiments.runner import Settings, arms

    sharing = arms(Settings("sharing"))
    assert [(a.embedding_size, a.sharing) for a in sharing] == [
        (e, s) for e in (256, 64) for s in ("all", "attention", "ffn", "none")]
    sizes = arms(Settings("embedding-size"))
    assert [(a.sharing, a.embedding_size) for a in sizes] == [
        (s, e) for s in ("none", "all") for e in (32, 64, 128, 256)]
    objective = arms(Settings("sentence-objective"))
    assert [(a.objective, a.sharing, a.embedding_size) for a in objective] == [
        ("none", "all", 128), ("nsp", "all", 128), ("sop", "all", 128)]


@pytest.mark.parametrize("extra, message", [
    (["--steps", "3", "--minutes", "2"], "argument --minutes: not allowed with argument --steps"),
])
def test_bad_flags_usage(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as e:
        main(["experiment", "sentence-objective", "--out", str(tmp_path / "x"), *extra])
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("extra, message", [
    ([], "give the pretraining budget: --steps N (every arm) or --minutes M (per arm)"),
    (["--steps", "0"], "--steps 0: must be >= 1"),
    (["--minutes", "-1"], "--minutes -1.0: must be > 0"),
    (["--steps", "3", "--data", "x"], "--data and --eval-data go together"),
    (["--steps", "3", "--corpus", "missing.txt"], "missing.txt' does not exist"),
    (["--steps", "3", "--tokenizer", "no-such-vocab"], "no-such-vocab: no such file or folder"),
    (["--steps", "3", "--data", ".", "--eval-data", "."], "--data: "),
])
def test_bad_flags_one_line(tmp_path, capsys, extra, message):
    assert main(["experiment", "sentence-objective", "--out", str(tmp_path / "x"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("litebert experiment: error: ") and message in err[0]
    assert not (tmp_path / "x").exists()  # nothing written: the corrected command is not refused as "other settings"


def test_failed_start_does_not_pin_settings(tmp_path, capsys):
    """A run that failed before any data or arm was made (here: a corpus of one document, which cannot be split)
    leaves settings that a corrected command replaces instead of refusing."""
    one, other = tmp_path / "one.txt", tmp_path / "other.txt"
    one.write_text("A single document.\nOf two lines.\n")
    other.write_text("Another single document.\n")
    out = str(tmp_path / "x")
    for corpus in (one, other):
        assert main(["experiment", "sentence-objective", "--out", out, "--steps", "3", "--corpus", str(corpus)]) == 2
        err = capsys.readouterr().err.strip().splitlines()  # a progress line, then the error
        assert err[-1].startswith("litebert experiment: error: --corpus: 1 document(s) give no held-out document")


def test_speedup_flags(tmp_path, capsys):
    assert main(["experiment", "speedup", "--out", str(tmp_path / "s"), "--minutes", "1"]) == 2
    assert "give --steps N" in capsys.readouterr().err
    assert main(["experiment", "speedup", "--out", str(tmp_path / "s"), "--presets", "tiny,bert-hugge"]) == 2
    assert "unknown preset 'bert-hugge'" in capsys.readouterr().err
    assert main(["experiment", "speedup", "--out", str(tmp_path / "s"), "--presets", "tiny"]) == 2
    assert "--reference bert-large: not among --presets" in capsys.readouterr().err


def test_speedup_tiny_presets(tmp_path):
    """One process and two (torchrun, gloo): rows per preset, speedup = the reference's time / the preset's, the
    FLOPs of `flops_per_sequence`, and the bytes all-reduced = every trainable parameter's fp32 gradient."""
    from litebert.config import AlbertConfig
    from litebert.engine.metrics_log import flops_per_sequence
    from litebert.params import count_parameters

    out = tmp_path / "speed"
    assert main(["experiment", "speedup", "--out", str(out), "--presets", "tiny,albert-base-v2",
                 "--reference", "tiny", "--micro-batch", "2", "--seq-len", "32", "--steps", "2",
                 "--processes", "1"]) == 0
    one = {r["preset"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    base = AlbertConfig.from_preset("albert-base-v2")
    assert one["albert-base-v2"]["parameters"] == count_parameters(base, heads=True)
    assert one["albert-base-v2"]["speedup"] == pytest.approx(one["tiny"]["seconds_per_step"]
                                                             / one["albert-base-v2"]["seconds_per_step"])
    assert one["albert-base-v2"]["flops_ratio"] == pytest.approx(flops_per_sequence(base, 32, 20)
                                                                 / flops_per_sequence(AlbertConfig.from_preset("tiny"),
                                                                                      32, 20))
    # two processes (tiny only; its one-process timing is reused from the cache)
    assert main(["experiment", "speedup", "--out", str(out), "--presets", "tiny", "--reference", "tiny",
                 "--micro-batch", "2", "--seq-len", "32", "--steps", "2", "--processes", "1,2"]) == 0
    results = json.loads((out / "results.json").read_text())
    rows = {r["processes"]: r for r in results["rows"]}
    tiny = AlbertConfig.from_preset("tiny")
    params = count_parameters(tiny, heads=True)
    for n, r in rows.items():
        assert r["parameters"] == params and r["speedup"] == 1.0
        assert r["gradient_bytes"] == 4 * params
        assert r["allreduce_bytes_per_step"] == (4 * params if n > 1 else 0)
        assert r["tokens_per_s"] == pytest.approx(n * 2 * 32 / r["seconds_per_step"])
        assert r["flops_per_step"] == pytest.approx(n * 2 * flops_per_sequence(tiny, 32, 20))
    lines = (out / "results.md").read_text().splitlines()
    assert any(line.startswith("| tiny | 2 | 29.9K |") for line in lines)
    assert (out / "speedup.png").read_bytes()[:4] == b"\x89PNG"


def test_minutes_budget_and_embedding_sizes(objective_run, tmp_path, capsys):
    """--minutes times the slowest arm (the widest E, not shared) and gives every arm one step count, kept on a
    re-run; the embedding-size arms' parameters grow by (V + H) per unit of E (the embeddings and the E x H
    projection)."""
    data = objective_run["out"] / "data"
    out = tmp_path / "emb"
    argv = ["experiment", "embedding-size", "--out", str(out), "--data", str(data / "train"), "--eval-data",
            str(data / "heldout"), "--minutes", "0.03", "--embedding-sizes", "8,16", *TINY]
    assert main(argv) == 0
    err = capsys.readouterr().err
    timing = json.loads((out / "experiment.json").read_text())["timing"]
    assert timing["timed_arm"] == "not-shared-E16"
    assert timing["steps"] == max(1, int(0.03 * 60 / timing["seconds_per_step"]))
    assert f"every arm trains {timing['steps']} steps" in err
    results = json.loads((out / "results.json").read_text())
    arms = {a["name"]: a for a in results["arms"]}
    assert list(arms) == ["not-shared-E8", "not-shared-E16", "all-shared-E8", "all-shared-E16"]
    assert {a["steps"] for a in arms.values()} == {timing["steps"]}
    assert f"-> {timing['steps']} steps for every arm" in (out / "results.md").read_text()
    vocab = arms["all-shared-E8"]["shape"]["vocab_size"]
    for sharing in ("not-shared", "all-shared"):
        grow = arms[f"{sharing}-E16"]["parameters"] - arms[f"{sharing}-E8"]["parameters"]
        # per unit of E: word (V), position (512) and token-type (2) embeddings, their LayerNorm (2), the E->H
        # projection's weights (H = 32)
        assert grow == 8 * (vocab + 512 + 2 + 2 + 32)
    assert main(argv) == 0
    assert "timing" not in capsys.readouterr().err


def test_failing_stage_is_one_line(objective_run, tmp_path, capsys):
    """An error inside an arm's `pretrain` comes back as one line naming the arm and the stage."""
    data = objective_run["out"] / "data"
    flags = [a if a != "64" else "600" for a in TINY]  # --seq-len 600: beyond the 512 positions
    assert main(["experiment", "sentence-objective", "--out", str(tmp_path / "x"), "--data", str(data / "train"),
                 "--eval-data", str(data / "heldout"), "--steps", "2", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("litebert experiment: error: none: pretraining: --seq-len 600 exceeds")
    assert not any(line.startswith("litebert pretrain: error") for line in err)


def test_the_experiment_folder_is_all_litebert_own(objective_run):
    """Everything the run wrote, its baselines/ included, is in the experiment layout (an overwrite may delete it)."""
    from litebert import folders

    assert folders.foreign(objective_run["out"], folders.EXPERIMENT) == []
