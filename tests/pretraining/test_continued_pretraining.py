"""Continued pretraining: `pretrain --init-from MODEL_DIR` starts from a model folder's weights (checked against HF
transformers computing the loss of the loaded model), refuses a vocabulary that is not the model's, and `--resume`
may raise `--max-steps` (the schedule is the official one for the new end)."""

import functools
import json

import pytest
import torch

from helpers import flags
from litebert.cli import main
from litebert.engine.checkpoint import check_compatible
from litebert.engine.metrics_log import read_metrics
from litebert.errors import CheckpointError
from litebert.folders import read_marker
from litebert.io.hf_folder import load_weights
from litebert.optim import lr_at

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


def hf_config(vocab_size=1000):
    return transformers.AlbertConfig(vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def hf_folder(folder, tiny_setup, cls="AlbertForPreTraining", seed=0, vocab_size=1000, tokenizer=True):
    """A tiny ALBERT saved by transformers' own save_pretrained, with the store's tokenizer saved by transformers."""
    torch.manual_seed(seed)
    model = getattr(transformers, cls)(hf_config(vocab_size))
    model.save_pretrained(folder)
    if tokenizer:
        transformers.AlbertTokenizer(vocab_file=str(tiny_setup["tokenizer"])).save_pretrained(folder)
    return model


SETTINGS = {"batch_size": 4, "micro_batch": 4, "seq_len": 64, "max_predictions": 10, "lr": 0.005, "warmup_steps": 1,
            "seed": 3}  # `TrainConfig` fields
ARGS = [*flags(SETTINGS), "--no-progress"]


def pretrain(tiny_setup, out, *extra):
    return ["pretrain", "--data", str(tiny_setup["store"]), "--out", str(out), *ARGS, *extra]


def refused(capsys, argv, match):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err, err
    return err


def run_pretrain(tiny_setup, out, *, max_steps, **kw):
    """`litebert.pretrain` of what `pretrain`'s argv runs with ``--max-steps max_steps`` (``kw``: its other
    arguments: init_from, resume, stop_after...); returns its `PretrainResult`."""
    from litebert import TrainConfig
    from litebert import pretrain as pretrain_

    return pretrain_(tiny_setup["store"], out, train=TrainConfig(max_steps=max_steps, **SETTINGS), progress=False, **kw)


def test_init_from_hf_folder_continues_from_its_weights(tiny_setup, tmp_path, capsys):
    from litebert.data.pretraining import PretrainingDataset, collate_pretraining

    init = tmp_path / "hf"
    hf = hf_folder(init, tiny_setup)
    out = tmp_path / "run"
    assert main(pretrain(tiny_setup, out, "--init-from", str(init), "--eval-data", str(tiny_setup["eval_store"]),
                         "--max-steps", "3")) == 0
    assert "parameters" in capsys.readouterr().err  # no "initialised from --seed" note: the folder has every head

    # The batch of step 1, built as the loop builds it (examples 0..3 of the run, the CLI's data settings), and the
    # loss transformers computes for the folder's weights on it.
    ds = PretrainingDataset(tiny_setup["store"], max_seq_length=64, max_predictions_per_seq=10, seed=3)
    batch = collate_pretraining([ds.example(c // ds.num_examples, c % ds.num_examples) for c in range(4)])
    labels = torch.full_like(batch["input_ids"], -100)
    for b in range(labels.shape[0]):
        for p in range(batch["mlm_positions"].shape[1]):
            if batch["mlm_weights"][b, p] > 0:
                labels[b, batch["mlm_positions"][b, p]] = batch["mlm_ids"][b, p]
    hf.eval()
    with torch.no_grad():
        ref = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 token_type_ids=batch["token_type_ids"], labels=labels,
                 sentence_order_label=batch["sentence_order_label"])
        n_pred = batch["mlm_weights"].sum()
        # HF's MLM loss is the mean over the predictions; the official one (litebert's) divides by sum(w) + 1e-5
        ref_mlm = ref.loss - torch.nn.functional.cross_entropy(ref.sop_logits, batch["sentence_order_label"])
    first = read_metrics(out)[0]
    assert first["split"] == "train" and first["step"] == 1
    assert abs(first["loss"] - ref.loss.item()) < 1e-5, (first["loss"], ref.loss.item(), n_pred)
    assert abs(first["mlm_loss"] - ref_mlm.item()) < 1e-5
    # a random start (same seed, no --init-from) has another first loss: the check above can fail
    scratch = tmp_path / "scratch"
    assert main(pretrain(tiny_setup, scratch, "--preset", "tiny", "--max-steps", "1")) == 0
    assert abs(read_metrics(scratch)[0]["loss"] - ref.loss.item()) > 1e-3

    # the final model moved away from the init, the tokenizer came along, the init is recorded
    start, end = load_weights(init), load_weights(out / "model")
    assert max((start[k] - end[k]).abs().max().item() for k in start if k in end) > 1e-4
    assert (out / "model" / "spiece.model").read_bytes() == tiny_setup["tokenizer"].read_bytes()
    recorded = json.loads((out / "train_config.json").read_text())["init_from"]
    assert recorded["path"] == str(init.resolve()) and len(recorded["sha256"]) == 64
    assert [r["step"] for r in read_metrics(out, "eval")] == [0, 3]


@pytest.mark.parametrize("cls, parts", [("AlbertForMaskedLM", "SOP head / pooler"),
                                        ("AlbertModel", "MLM head / SOP head")])
def test_init_from_a_folder_without_heads_says_so_and_resume_checks_the_init(tiny_setup, tmp_path, capsys, cls, parts):
    init = tmp_path / "init"
    hf_folder(init, tiny_setup, cls)
    out = tmp_path / "run"
    stopped = run_pretrain(tiny_setup, out, init_from=init, max_steps=2, stop_after=1)  # resumable after step 1
    assert stopped.interrupted and not stopped.complete and stopped.step == 1
    notes = [line for line in capsys.readouterr().err.splitlines() if "initialised from the seed" in line]
    assert len(notes) == 1 and f"no {parts} in it ({cls})" in notes[0], notes
    # resuming needs the same initial weights: other weights, or none, are refused
    other = tmp_path / "other"
    hf_folder(other, tiny_setup, cls, seed=1)
    refused(capsys, pretrain(tiny_setup, out, "--init-from", str(other), "--max-steps", "2", "--resume"),
            "initial weights: checkpoint")
    refused(capsys, pretrain(tiny_setup, out, "--preset", "tiny", "--max-steps", "2", "--resume"),
            "now none (random weights)")
    # the same weights in a moved folder are the same start
    moved = tmp_path / "moved"
    init.rename(moved)
    assert main(pretrain(tiny_setup, out, "--init-from", str(moved), "--max-steps", "2", "--resume")) == 0
    assert [r["step"] for r in read_metrics(out)] == [1, 2] and read_marker(out)["complete"] is True


def test_init_from_refuses_another_vocabulary_or_model_shape(tiny_setup, tmp_path, capsys):
    import sentencepiece as spm

    from helpers.tiny_setup import corpus_documents

    out = tmp_path / "run"
    # another vocabulary size (no tokenizer in the folder: the embeddings decide)
    small = tmp_path / "small"
    hf_folder(small, tiny_setup, vocab_size=900, tokenizer=False)
    refused(capsys, pretrain(tiny_setup, out, "--init-from", str(small)), "has a vocabulary of 900 pieces")
    # the same size, other pieces: a SentencePiece model trained on other text
    text = tmp_path / "other.txt"
    text.write_text("\n\n".join(corpus_documents()[60:100]).lower() + "\n")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "other"), vocab_size=1000, model_type="unigram", pad_id=0,
        unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"], num_threads=1,
        shuffle_input_sentence=False, character_coverage=1.0, minloglevel=2)
    foreign = tmp_path / "foreign"
    hf_folder(foreign, tiny_setup, tokenizer=False)
    transformers.AlbertTokenizer(vocab_file=str(tmp_path / "other.model")).save_pretrained(foreign)
    err = refused(capsys, pretrain(tiny_setup, out, "--init-from", str(foreign)), "its tokenizer differs from the one")
    assert "token ids would mean different things" in err
    # the folder's pieces in a tokenizer.json only (as transformers 5.x saves a tokenizer) are compared too
    (foreign / "spiece.model").unlink()
    transformers.AlbertTokenizerFast(vocab_file=str(tmp_path / "other.model")).save_pretrained(foreign)
    (foreign / "spiece.model").unlink(missing_ok=True)
    refused(capsys, pretrain(tiny_setup, out, "--init-from", str(foreign)), "its tokenizer differs from the one")
    # --preset / --model-config naming another shape: one line naming the field
    good = tmp_path / "good"
    hf_folder(good, tiny_setup)
    refused(capsys, pretrain(tiny_setup, out, "--init-from", str(good), "--preset", "tiny"),
            "--preset tiny contradicts --init-from")
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**json.loads((good / "config.json").read_text()), "intermediate_size": 128}))
    err = refused(capsys, pretrain(tiny_setup, out, "--init-from", str(good), "--model-config", str(cfg)),
                  "intermediate_size is 128 there, 64 in the model")
    # a folder that is not a model, and a run folder without a final model
    refused(capsys, pretrain(tiny_setup, out, "--init-from", str(tmp_path / "nowhere")), "no such model folder")
    assert not out.exists()
    # a tokenizer.json-only folder with the store's pieces is accepted; the store's spiece.model goes with the model
    fast = tmp_path / "fast"
    hf_folder(fast, tiny_setup, tokenizer=False)
    transformers.AlbertTokenizerFast(vocab_file=str(tiny_setup["tokenizer"])).save_pretrained(fast)
    (fast / "spiece.model").unlink(missing_ok=True)
    assert (fast / "tokenizer.json").is_file()
    assert main(pretrain(tiny_setup, tmp_path / "fast-run", "--init-from", str(fast), "--max-steps", "1")) == 0
    assert (tmp_path / "fast-run" / "model" / "spiece.model").read_bytes() == tiny_setup["tokenizer"].read_bytes()
    # the same config is accepted: --preset/--model-config may repeat the model's own
    cfg.write_text((good / "config.json").read_text())
    assert main(pretrain(tiny_setup, out, "--init-from", str(good), "--model-config", str(cfg),
                         "--max-steps", "1")) == 0


def test_init_from_a_litebert_run_and_its_model_folder(tiny_setup, tmp_path, capsys):
    """A pretraining run's model/ (or the run folder itself) starts the next run with the same weights."""
    first = tmp_path / "first"
    assert main(pretrain(tiny_setup, first, "--preset", "tiny", "--max-steps", "2")) == 0
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(pretrain(tiny_setup, a, "--init-from", str(first / "model"), "--max-steps", "1")) == 0
    assert main(pretrain(tiny_setup, b, "--init-from", str(first), "--max-steps", "1")) == 0
    capsys.readouterr()
    ra, rb = read_metrics(a)[0], read_metrics(b)[0]
    assert ra["loss"] == rb["loss"]
    # with warmup 1 the first update has lr 0: the model after step 1 is the init model
    start, end = load_weights(first / "model"), load_weights(a / "model")
    assert all(torch.equal(start[k], end[k]) for k in start)
    assert json.loads((a / "train_config.json").read_text())["init_from"]["path"] == str((first / "model").resolve())


# ------------------------------------------------------------------------------------------------ --max-steps
def test_resume_with_larger_max_steps_extends_the_schedule(tiny_setup, tmp_path, capsys, monkeypatch):
    out, n = tmp_path / "run", 3
    run = functools.partial(pretrain, tiny_setup, out, "--preset", "tiny", "--eval-data", str(tiny_setup["eval_store"]))
    assert main(run("--max-steps", str(n))) == 0
    assert read_marker(out)["complete"] is True
    first_model = load_weights(out / "model")
    before = read_metrics(out)

    refused(capsys, run("--max-steps", "2", "--resume"), f"below the step the finished run in --out {out} has reached")
    assert main(run("--resume")) == 0  # no --max-steps: the run keeps its own, and is finished
    assert "the run is finished (step 3)" in capsys.readouterr().err

    assert main(run("--max-steps", str(2 * n), "--resume")) == 0  # reopened and extended
    assert "extending the finished run from step 3 to 6" in capsys.readouterr().err
    train = read_metrics(out)
    assert [r["step"] for r in train] == list(range(1, 2 * n + 1))
    assert train[:n] == before  # the first part is kept as it was
    for r in train:  # the lr the step used: the official schedule of the run's max_steps at the time
        assert r["lr"] == lr_at(r["step"] - 1, 0.005, n if r["step"] <= n else 2 * n, 1)
    assert train[n]["lr"] > train[n - 1]["lr"]  # the decay horizon moved out: the lr rises at the resume point
    assert [r["step"] for r in read_metrics(out, "eval")] == [0, 3, 6]
    assert read_marker(out)["complete"] is True and read_marker(out)["step"] == 2 * n
    end_model = load_weights(out / "model")
    assert any(not torch.equal(first_model[k], end_model[k]) for k in first_model)  # model/ rewritten at the end
    # other trajectory settings still may not change when the run is extended
    refused(capsys, run("--resume", "--max-steps", str(3 * n), "--lr", "0.001"), "lr: checkpoint 0.005, now 0.001")


def test_resume_without_max_steps_keeps_the_runs_own(tiny_setup, tmp_path, capsys):
    """The command's --resume without --max-steps: the run's own max_steps (TrainConfig's max_steps None)."""
    out = tmp_path / "run"
    stopped = run_pretrain(tiny_setup, out, model="tiny", max_steps=4, stop_after=2)  # resumable after step 2
    assert stopped.interrupted and not stopped.complete and stopped.step == 2
    refused(capsys, pretrain(tiny_setup, out, "--preset", "tiny", "--max-steps", "1", "--resume"),
            "--max-steps 1 is below the step the run has reached (2)")
    assert main(pretrain(tiny_setup, out, "--preset", "tiny", "--resume")) == 0  # not TrainConfig's default 1000
    assert [r["step"] for r in read_metrics(out)] == [1, 2, 3, 4] and read_marker(out)["step"] == 4


def test_an_extension_killed_before_its_final_model_is_finished_on_resume(tiny_setup, tmp_path, capsys, monkeypatch):
    """The old final model/ must not pass for the end of the extended run."""
    from litebert.heads import AlbertForPreTraining

    out = tmp_path / "run"
    assert main(pretrain(tiny_setup, out, "--preset", "tiny", "--max-steps", "2")) == 0
    marker = read_marker(out)
    assert marker["model_step"] == 2
    del marker["model_step"]  # as a finished run of an earlier version left it: its model is at its final step
    (out / ".litebert.json").write_text(json.dumps(marker))
    save = AlbertForPreTraining.save_pretrained

    def killed(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(AlbertForPreTraining, "save_pretrained", killed)
    # killed after the step-4 checkpoint, before the final model
    assert main(pretrain(tiny_setup, out, "--preset", "tiny", "--max-steps", "4", "--resume")) != 0
    monkeypatch.setattr(AlbertForPreTraining, "save_pretrained", save)
    assert read_marker(out)["complete"] is False and read_marker(out)["model_step"] == 2
    assert main(pretrain(tiny_setup, out, "--preset", "tiny", "--max-steps", "4", "--resume")) == 0
    assert read_marker(out)["complete"] is True and read_marker(out)["model_step"] == 4
    from litebert.engine.checkpoint import latest_valid

    found = latest_valid(out / "checkpoints")
    step, state = found.step, found.state
    final = AlbertForPreTraining.from_pretrained(out / "model").state_dict()
    assert step == 4 and all(torch.equal(final[k], v) for k, v in state["model"].items())


def test_check_compatible_max_steps_and_init():
    saved = {"step": 5, "model_config": {}, "train": {"lr": 0.1}, "data": "d", "init": None, "max_steps": 5}
    check_compatible(saved, {**saved, "max_steps": 10}, "ckpt")  # a larger max_steps: fine
    check_compatible(saved, {**saved, "max_steps": 5}, "ckpt")
    with pytest.raises(CheckpointError, match="max_steps = 4 is below the step the run has reached"):
        check_compatible(saved, {**saved, "max_steps": 4}, "ckpt")
    a = {"path": "/x", "sha256": "a" * 64}
    check_compatible({**saved, "init": a}, {**saved, "init": {**a, "path": "/moved"}}, "ckpt")
    with pytest.raises(CheckpointError, match="initial weights"):
        check_compatible({**saved, "init": a}, {**saved, "init": {**a, "sha256": "b" * 64}}, "ckpt")
    old = {k: v for k, v in saved.items() if k not in ("init", "max_steps")}  # older checkpoints: no init recorded
    check_compatible(old, saved, "ckpt")


def test_init_from_a_folder_converted_from_the_official_tf_checkpoint(tiny_setup, tmp_path, capsys):
    from helpers import REPO
    from litebert.heads import AlbertForPreTraining
    from litebert.pretraining.init_from import load_init_weights, read_init_model

    tf = REPO / "tests" / "fixtures" / "tf" / "pretrain"
    converted = tmp_path / "converted"
    assert main(["convert", "tf", "--checkpoint", str(tf / "model.ckpt-best"), "--config",
                 str(tf / "albert_config.json"), "--out", str(converted)]) == 0
    init = read_init_model(converted)
    torch.manual_seed(0)
    model = AlbertForPreTraining(init.config)
    note = load_init_weights(model, init)
    reference = AlbertForPreTraining.from_pretrained(converted)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in reference.state_dict().items())
    assert note is None  # the official pretraining checkpoint has both heads and the pooler
    # its 16 positions are checked first (from its config.json alone), then its 40-piece vocabulary: not the store's
    refused(capsys, pretrain(tiny_setup, tmp_path / "run", "--init-from", str(converted)),
            "--seq-len 64 exceeds the model's max_position_embeddings 16")
    refused(capsys, pretrain(tiny_setup, tmp_path / "run", "--init-from", str(converted), "--seq-len", "16"),
            "has a vocabulary of 40 pieces, --data")
