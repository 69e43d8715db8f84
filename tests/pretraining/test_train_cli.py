"""`litebert pretrain` settings: recipe < config file < flags; clear errors for bad input."""

import argparse
import json

import pytest

from litebert.cli import main
from litebert.errors import ConfigError
from litebert.pretraining.cli import build_train_config, configure
from litebert.pretraining.config import RECIPES, TrainConfig


def parse(*argv):
    p = argparse.ArgumentParser()
    configure(p)
    return p.parse_args(["--data", "S", "--out", "R", *argv])


def test_paper_recipe_is_the_papers_numbers():
    cfg, _ = build_train_config(parse("--recipe", "albert-paper"))
    # Lan et al. 2020 Section 4.1 and the official README's run_pretraining flags
    assert (cfg.optimizer, cfg.lr, cfg.batch_size, cfg.max_steps, cfg.warmup_steps, cfg.seq_len) == \
        ("lamb", 0.00176, 4096, 125_000, 3125, 512)
    assert (cfg.max_predictions, cfg.max_ngram, cfg.objective, cfg.weight_decay, cfg.max_grad_norm) == \
        (20, 3, "sop", 0.01, 1.0)
    assert cfg.split(1).accumulation == 4096 // 32


def test_layering_recipe_then_file_then_flags(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps({"recipe": "albert-paper", "preset": "albert-base-v2", "lr": 0.001, "max_steps": 10}))
    cfg, preset = build_train_config(parse("--config", str(f), "--max-steps", "20"))
    assert preset == "albert-base-v2" and cfg.lr == 0.001 and cfg.max_steps == 20 and cfg.batch_size == 4096
    cfg, preset = build_train_config(parse("--config", str(f), "--preset", "tiny"))
    assert preset == "tiny" and cfg.max_steps == 10


def test_a_recipe_flag_beside_a_file_that_names_one(tmp_path):
    """--recipe takes the place of the file's own recipe; the file's settings still go over it."""
    f = tmp_path / "run.json"
    f.write_text(json.dumps({"recipe": "albert-paper", "preset": "tiny", "lr": 0.001}))
    cfg, preset = build_train_config(parse("--recipe", "demo", "--config", str(f)))
    assert (cfg.batch_size, cfg.max_steps, cfg.lr, preset) == (16, 1100, 0.001, "tiny")  # demo's batch and steps
    assert TrainConfig.from_json(f) == TrainConfig(**{**RECIPES["albert-paper"], "lr": 0.001})


def test_bad_config_files(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{\n  "lr": 0.1,\n  "max_steps": }\n')
    with pytest.raises(ConfigError, match=r"bad\.json:3: not valid JSON"):
        build_train_config(parse("--config", str(f)))
    f.write_text('{"learning_rate": 0.1}')
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) learning_rate"):
        build_train_config(parse("--config", str(f)))
    f.write_text('{"optimizer": "sgd"}')
    with pytest.raises(ConfigError, match=r"TrainConfig.optimizer = 'sgd'"):
        build_train_config(parse("--config", str(f)))
    with pytest.raises(ConfigError, match="missing.json: no such file"):
        build_train_config(parse("--config", str(tmp_path / "missing.json")))


def test_train_config_validation():
    with pytest.raises(ConfigError, match=r"TrainConfig.micro_batch = 0"):
        TrainConfig(micro_batch=0)
    with pytest.raises(ConfigError, match=r"TrainConfig.precision = 'fp8'"):
        TrainConfig(precision="fp8")
    assert set(RECIPES) >= {"albert-paper", "demo"}


def test_cli_prints_errors_without_traceback(tmp_path, capsys):
    code = main(["pretrain", "--preset", "tiny", "--data", str(tmp_path / "nostore"), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "litebert pretrain: error:" in err and "nostore" in err and "Traceback" not in err
    code = main(["pretrain", "--recipe", "albert-paper", "--micro-batch", "0", "--data", "x", "--out", "y"])
    assert code == 2 and "--micro-batch 0: must be >= 1" in capsys.readouterr().err  # the flag, not the field


def test_the_docs_show_the_recipes():
    """docs/pretraining.md names every recipe and shows the paper's as RECIPES holds it: RECIPES is the one table of
    them, the docs its rendering."""
    from pathlib import Path

    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "pretraining.md").read_text().split())
    assert "| `--recipe NAME` | named settings: " + ", ".join(f"`{n}`" for n in RECIPES) + " |" in docs
    r = RECIPES["albert-paper"]
    assert (f"(`--recipe albert-paper`): {r['optimizer'].upper()}, lr {r['lr']}, global batch {r['batch_size']}, "
            f"{r['max_steps']:,} steps, {r['warmup_steps']:,} warmup steps, length {r['seq_len']}, "
            f"{r['max_predictions']} predictions per sequence, {r['max_ngram']}-gram masking, "
            f"{r['short_seq_prob']:.0%} short sequences, {r['objective'].upper()}") in docs


TINY_RUN = ["--preset", "tiny", "--max-steps", "1", "--batch-size", "2", "--micro-batch", "2", "--seq-len", "32",
            "--max-predictions", "5", "--report-to", "none", "--no-progress"]


def test_pretrain_ends_with_one_summary_line_or_json(tiny_setup, tmp_path, capsys):
    """Issue 58 item 9: a finished run prints one summary line (as finetune does), not a 17-line JSON dump; --json
    gives the summary as JSON."""
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["pretrain", "--data", str(tiny_setup["store"]), "--out", str(out), *TINY_RUN]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1, printed
    assert printed[0].startswith("pretrained 1 of 1 steps, ") and printed[0].endswith(f"saved to {out / 'model'}")
    assert main(["pretrain", "--data", str(tiny_setup["store"]), "--out", str(tmp_path / "j"), *TINY_RUN,
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["step"] == summary["max_steps"] == 1 and summary["complete"]


@pytest.mark.parametrize("flag", ["--data", "--eval-data"])
def test_a_url_for_a_store_is_refused_in_one_line(tmp_path, capsys, flag):
    """Issue 58 item 9: a URL is not collapsed into a path ("http:/..."): stores are local folders, and the line
    says how to make one from a URL."""
    args = {"--data": str(tmp_path / "s"), "--eval-data": str(tmp_path / "e")}
    args[flag] = "http://example.org/store"
    argv = ["pretrain", "--preset", "tiny", "--out", str(tmp_path / "r")] + [x for kv in args.items() for x in kv]
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # argparse's usage, then the error in one line
    assert err.startswith(f"litebert pretrain: error: argument {flag}: http://example.org/store: a token store is a "
                          "local folder, not a URL; prepare one with `litebert data prepare") and "http:/e" not in err
    assert not (tmp_path / "r").exists()
