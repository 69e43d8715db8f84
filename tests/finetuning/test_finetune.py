"""Fine-tuning end to end on a tiny model: features, SQuAD windows/decoding, batching, the CLI commands, bad input.

The tokenizer is a 1,000-piece vocabulary trained here on the bundled sentiment snippets; the model is the "tiny"
preset, randomly initialised (so accuracy claims are made only on a separable task).
"""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.separable_task import write_separable
from litebert.cli import main
from litebert.tasks import features as F
from litebert.tasks import readers as R
from litebert.tasks import squad as S
from litebert.tasks.metrics import normalize_answer
from litebert.tasks.squad import ANSWERABILITY_FILE, SquadV2Model

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "finetune"


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("base")
    corpus = root / "corpus.txt"
    with gzip.open(DATA / "sentiment" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        corpus.write_text("".join(line.split("\t")[0] + "\n" for line in f), encoding="utf-8")
    tok = train_tokenizer([corpus], root / "model", vocab_size=1000, progress=False)
    torch.manual_seed(0)
    cfg = AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size, max_position_embeddings=256)
    AlbertForPreTraining(cfg).save_pretrained(root / "model")
    return root / "model", tok


def test_squad_windows_map_answers_back_to_the_original_context(base):
    _, tok = base
    examples, _ = R.read_squad(DATA / "squad" / "disfl_qa_dev.json.gz")
    examples = examples[:80]
    feats = S.encode_squad(tok, examples, max_seq_length=64, doc_stride=16, max_query_length=24)
    by_ex = {}
    for f in feats:
        by_ex.setdefault(f["example_index"], []).append(f)
        assert len(f["input_ids"]) <= 64
    assert max(len(v) for v in by_ex.values()) > 3  # long contexts really are windowed
    checked = 0
    for ei, ex in enumerate(examples):
        fs = by_ex[ei]
        # every context piece is the max-context piece of exactly one window
        n_pieces = len(tok.encode_with_offsets(ex.context)[0])
        assert sum(sum(f["max_context"]) for f in fs) == n_pieces
        hits = [f for f in fs if f["start_positions"] > 0]
        if ex.is_impossible:
            assert not hits and all(f["is_impossible"] for f in fs)
            continue
        for f in hits:
            off = f["context_offset"]
            a = f["spans"][f["start_positions"] - off][0]
            b = f["spans"][f["end_positions"] - off][1]
            assert normalize_answer(ex.context[a:b]) == normalize_answer(ex.answers[0]["text"])
            checked += 1
    assert checked > 40


def _toy_example():
    ctx = "Denver Broncos won Super Bowl 50 in 2016."
    ex = R.SquadExample("q", "Who won?", ctx, [{"text": "Denver Broncos", "answer_start": 0}])
    words = [(0, 6), (7, 14), (15, 18), (19, 24), (25, 29), (30, 32), (33, 35), (36, 41)]
    f = {"example_index": 0, "context_offset": 3, "spans": words, "max_context": [True] * 8}
    return ex, f


def test_decode_hand_case():
    from litebert.tasks.qa_decode import QADecoding, decode

    ex, f = _toy_example()
    start = np.full(12, -10.0)
    end = np.full(12, -10.0)
    start[3], end[4] = 5.0, 5.0  # "Denver Broncos" = context pieces 0..1 = input positions 3..4
    start[9], end[10] = 6.0, 6.0  # "in 2016" scores higher...
    start[0], end[0] = 20.0, 20.0  # [CLS] and the question are never answers

    def answer(feature, **options):
        (best, *_), = decode([ex.context], [feature], [start], [end], QADecoding("official", n_best=5, **options))
        return best["answer"]

    assert answer(f, max_answer_len=30) == "in 2016."
    assert answer(f, max_answer_len=1) not in ("in 2016.", "Denver Broncos")  # 2-piece spans excluded
    f2 = dict(f, max_context=[True] * 6 + [False, False])  # start "in" is better scored in another window
    assert answer(f2, max_answer_len=30) == "Denver Broncos won Super Bowl 50 in 2016."  # 5 + 6 beats 5 + 5
    assert answer(f2, max_answer_len=2) == "Denver Broncos"
    # v2: no-answer probability sigmoid(min over windows) against the threshold
    assert S.no_answer_probs(1, [f], [2.0]) == [pytest.approx(1 / (1 + np.exp(-2.0)))]


def test_token_labels_on_first_piece_and_truncation(base):
    _, tok = base
    ex = R.TokenExample("0", ["Peter", "Blackburnshire", "rejects"], ["B-PER", "I-PER", "O"])
    labels = ["O", "B-PER", "I-PER"]
    (f,) = F.encode_tokens(tok, [ex], 64, labels)
    pieces = [tok.encode_ids(w) for w in ex.words]
    expect = [F.IGNORE]
    for w, p in enumerate(pieces):
        expect += [labels.index(ex.labels[w])] + [F.IGNORE] * (len(p) - 1)
    assert f["labels"] == expect + [F.IGNORE]
    long = R.TokenExample("1", ["word"] * 1000, ["O"] * 1000)
    (g,) = F.encode_tokens(tok, [long], 32, labels)
    assert len(g["input_ids"]) <= 32 and g["input_ids"][-1] == tok.sep_token_id


class WordTokenizer:
    """One piece per whitespace word, id = the word's number: truncation results can be computed by hand."""

    cls_token_id, sep_token_id = 2, 3

    def encode_ids(self, text):
        return [int(w) for w in text.split()]


def test_multiple_choice_truncation_is_the_official_race_rule():
    # official race_utils.convert_single_example: question+option keeps its LAST max_qa_length pieces, then only the
    # end of the context is cut so that [CLS] ctx [SEP] qa [SEP] fits max_seq_length.
    ctx = " ".join(str(i) for i in range(100, 140))  # 40 pieces
    ex = R.MultipleChoiceExample("0", ctx, "10 11 _ 12", ["20 21", "30"], label=1)
    (f,) = F.encode_multiple_choice(WordTokenizer(), [ex], max_length=16, max_qa_length=4)
    # option 0: "10 11 20 21 12" -> last 4 = 11 20 21 12; context 16 - 3 - 4 = 9 pieces
    assert f["input_ids"][0] == [2] + list(range(100, 109)) + [3, 11, 20, 21, 12, 3]
    assert f["token_type_ids"][0] == [0] * 11 + [1] * 5
    # option 1: "10 11 30 12" fits max_qa_length: kept whole, the option is never cut
    assert f["input_ids"][1] == [2] + list(range(100, 109)) + [3, 10, 11, 30, 12, 3]
    assert f["labels"] == 1
    # no blank: question and option joined; a question+option longer than the room keeps its end + 1 context piece
    ex = R.MultipleChoiceExample("1", ctx, "10 11 12 13 14 15 16 17 18 19", ["20"])
    (f,) = F.encode_multiple_choice(WordTokenizer(), [ex], max_length=10, max_qa_length=128)
    assert f["input_ids"][0] == [2, 100, 3, 15, 16, 17, 18, 19, 20, 3] and "labels" not in f
    # no context: question and option trimmed longest-first (official _truncate_seq_pair)
    ex = R.MultipleChoiceExample("2", "", "10 11 12 13 14 15", ["20 21"])
    (f,) = F.encode_multiple_choice(WordTokenizer(), [ex], max_length=9)
    assert f["input_ids"][0] == [2, 10, 11, 12, 13, 3, 20, 21, 3]


def test_length_grouped_batches_cover_once_and_cut_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 200, 1000).tolist()
    b1 = F.length_grouped_batches(lengths, 16, np.random.default_rng(1))
    assert sorted(i for b in b1 for i in b) == list(range(1000))
    assert b1 == F.length_grouped_batches(lengths, 16, np.random.default_rng(1))  # a pure function of the seed

    def padded(batches):
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    rand = F.random_batches(1000, 16, np.random.default_rng(1))
    assert padded(b1) < 0.7 * padded(rand)


def test_collate_dynamic_and_fixed_padding():
    feats = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "labels": 1},
             {"input_ids": [2, 5, 6, 7, 3], "token_type_ids": [0, 0, 0, 1, 1], "labels": 0}]
    b = F.collate(feats)
    assert b["input_ids"].shape == (2, 5) and b["attention_mask"].tolist()[0] == [1, 1, 1, 0, 0]
    assert F.collate(feats, pad_to=16)["input_ids"].shape == (2, 16)
    mc = [{"input_ids": [[2, 3], [2, 4, 4, 3]], "token_type_ids": [[0, 0], [0, 0, 1, 1]], "labels": 1}]
    assert F.collate(mc)["input_ids"].shape == (1, 2, 4)


def test_cli_finetune_evaluate_predict_on_a_separable_task(base, tmp_path, capsys):
    model, _ = base
    data = tmp_path / "data"
    data.mkdir()
    write_separable(data / "train.jsonl", 400, 0, text="review", label="stars")
    write_separable(data / "dev.jsonl", 100, 1, text="review", label="stars")
    out = tmp_path / "out"
    code = main(["finetune", "classify", "--model", str(model), "--data", str(data), "--out", str(out),
                 "--columns", "text_a=review,label=stars", "--max-steps", "250", "--eval-every", "50",
                 "--patience", "2", "--batch-size", "16", "--lr", "5e-4", "--no-progress"])
    assert code == 0
    meta = json.loads((out / "finetune.json").read_text())
    assert meta["labels"] == ["neg", "pos"] and meta["dev_metrics"]["accuracy"] >= 0.9  # chance is 0.5
    said = capsys.readouterr()  # where the run's settings come from, in words
    assert "; hyperparameters: BERT-style defaults for your own data (not from the paper)" in said.out + said.err
    assert main(["evaluate", "--model", str(out), "--data", str(data / "dev.jsonl"), "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(meta["dev_metrics"]["accuracy"])
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"review": "a wonderful film"}) + "\n"
                   + json.dumps({"review": " ".join(["terrible"] + ["film"] * 3000)}) + "\n")  # >> max length
    assert main(["predict", "--model", str(out), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"),
                 "--no-progress"]) == 0
    rows = [json.loads(l) for l in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows] == ["pos", "neg"]
    assert sum(rows[0]["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)


def test_cli_reports_bad_input_without_traceback(base, tmp_path, capsys):
    model, _ = base
    bad = tmp_path / "train.jsonl"
    bad.write_text('{"text": "fine", "label": "a"}\n{"txt": "oops", "label": "b"}\n')
    code = main(["finetune", "classify", "--model", str(model), "--data", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "train.jsonl:2: missing column 'text'" in err and "Traceback" not in err
    empty = tmp_path / "dev.tsv"
    empty.write_text("")
    code = main(["finetune", "rte", "--model", str(model), "--data", str(empty), "--out", str(tmp_path / "o")])
    assert code == 2 and "empty" in capsys.readouterr().err


def test_bad_model_folders_and_lengths_are_clear_errors(base, tmp_path, capsys):
    from litebert.errors import CheckpointError
    from litebert.heads import AlbertForQuestionAnswering

    model, _ = base
    # a question longer than max_seq_length allows: the error names the question and the fix
    code = main(["finetune", "squad2", "--model", str(model), "--data", str(DATA / "squad"), "--out",
                 str(tmp_path / "o"), "--seq-len", "8", "--max-train-examples", "4", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "leaves no room for context" in err and "--seq-len" in err and "Traceback" not in err
    # a damaged finetune.json
    folder = tmp_path / "ft"
    folder.mkdir()
    (folder / "finetune.json").write_text("{")
    assert main(["evaluate", "--model", str(folder), "--data", str(DATA / "squad")]) == 2
    assert "finetune.json:1: not valid JSON" in capsys.readouterr().err
    (folder / "finetune.json").write_text('{"labels": []}')
    assert main(["evaluate", "--model", str(folder), "--data", str(DATA / "squad")]) == 2
    assert "no 'task' entry" in capsys.readouterr().err
    # a truncated answerability head
    SquadV2Model(AlbertForQuestionAnswering.from_pretrained(model)).save_pretrained(folder)
    head = folder / ANSWERABILITY_FILE
    head.write_bytes(head.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=ANSWERABILITY_FILE):
        SquadV2Model.from_pretrained(folder)
    assert not list(folder.glob("*.tmp*"))  # atomic_write leaves no temporary behind


def test_squad2_pipeline_and_answerability_roundtrip(base, tmp_path, capsys):
    model, _ = base
    out = tmp_path / "sq"
    code = main(["finetune", "squad2", "--model", str(model), "--data", str(DATA / "squad"), "--out", str(out),
                 "--max-steps", "6", "--eval-every", "3", "--batch-size", "8", "--max-train-examples", "24",
                 "--max-eval-examples", "16", "--seq-len", "96", "--lr", "1e-3", "--no-progress"])
    assert code == 0
    meta = json.loads((out / "finetune.json").read_text())
    assert {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"} <= set(meta["dev_metrics"])
    assert (out / ANSWERABILITY_FILE).is_file() and "null_threshold" in meta
    inp = tmp_path / "q.jsonl"
    ctx = "The common allotrope of elemental oxygen on Earth is called dioxygen. " * 8  # several windows
    inp.write_text(json.dumps({"id": "x", "question": "What is it called?", "context": ctx}) + "\n")
    assert main(["predict", "--model", str(out), "--input", str(inp), "--output", str(tmp_path / "a.jsonl"),
                 "--seq-len", "48", "--no-progress"]) == 0
    row = json.loads((tmp_path / "a.jsonl").read_text())
    assert 0 <= row["no_answer_prob"] <= 1
    if row["answer"]:
        assert ctx[row["answer_start"]:row["answer_start"] + len(row["answer"])] == row["answer"]
    # the answerability head reloads exactly
    m1 = SquadV2Model.from_pretrained(out).eval()
    m2 = SquadV2Model.from_pretrained(out).eval()
    x = torch.randint(5, 900, (2, 20))
    assert torch.equal(m1(x).na_logits, m2(x).na_logits)
    fresh = SquadV2Model.from_pretrained(model).eval()
    assert not torch.equal(m1(x).na_logits, fresh(x).na_logits)


def test_multiple_choice_and_race_run(base, tmp_path):
    model, _ = base
    for task, data in (("mc", DATA / "mc"), ("race", DATA / "race" / "question_selection.json.gz")):
        out = tmp_path / task
        args = ["finetune", task, "--model", str(model), "--data", str(data), "--out", str(out), "--max-steps", "2",
                "--batch-size", "4", "--max-train-examples", "8", "--seq-len", "64", "--no-progress"]
        if task == "race":
            args += ["--dev", str(data), "--max-eval-examples", "8"]
        else:
            args += ["--max-eval-examples", "8"]
        assert main(args) == 0
        assert 0 <= json.loads((out / "finetune.json").read_text())["dev_metrics"]["accuracy"] <= 1


def test_embed_is_padding_invariant(base, tmp_path):
    model, _ = base
    texts = ["a short one", "a much longer sentence about a film that goes on and on for a while"]
    inp = tmp_path / "t.txt"
    inp.write_text("\n".join(texts) + "\n")
    assert main(["embed", "--model", str(model), "--input", str(inp), "--output", str(tmp_path / "e.npy")]) == 0
    both = np.load(tmp_path / "e.npy")
    (tmp_path / "one.txt").write_text(texts[0] + "\n")
    assert main(["embed", "--model", str(model), "--input", str(tmp_path / "one.txt"),
                 "--output", str(tmp_path / "one.npy")]) == 0
    alone = np.load(tmp_path / "one.npy")
    assert both.shape == (2, 32)
    np.testing.assert_allclose(both[0], alone[0], atol=1e-5)  # padding in the batch does not leak into the mean


def test_folders_written_before_kind_objects_still_load(base, tmp_path, capsys):
    """finetune.json as litebert wrote it when kinds were strings ("extra" held SQuAD's version) still loads,
    predicts and evaluates; a kind that contradicts the task is refused."""
    from litebert.errors import CheckpointError
    from litebert.heads import AlbertForQuestionAnswering, AlbertForSequenceClassification
    from litebert.inference.finetuned import load_finetuned
    from litebert.tasks import kinds as K

    model, tok = base
    old_preset = {"name": "squad2", "kind": "squad", "metric": "best_f1", "lr": 5e-05, "batch_size": 48,
                  "train_steps": None, "epochs": 2.0, "warmup_steps": None, "warmup_proportion": 0.1,
                  "max_seq_length": 96, "eval_every": 1000, "labels": None,
                  "source": "google-research/albert README (run_squad_v1 / run_squad_v2)",
                  "extra": {"doc_stride": 128, "max_query_length": 64, "n_best": 20, "max_answer_length": 30,
                            "version": "2.0"}}
    sq = tmp_path / "squad2"
    torch.manual_seed(1)
    saved = SquadV2Model(AlbertForQuestionAnswering.from_pretrained(model))
    saved.save_pretrained(sq)
    tok.save_pretrained(sq)
    (sq / "finetune.json").write_text(json.dumps(
        {"task": "squad2", "kind": "squad", "labels": None, "metric": "best_f1", "preset": old_preset,
         "columns": {}, "null_threshold": 0.9, "best_step": 6, "dev_metrics": {"best_f1": 50.0}}))
    preset, loaded, _, meta = load_finetuned(sq)
    # n_best 20 and max_answer_length 30, stored by earlier versions, are the official decoding's own (qa_decode)
    assert preset.kind == K.ExtractiveQAWithNoAnswer(doc_stride=128, max_query_length=64, decoding="official")
    assert preset.max_seq_length == 96 and preset.metric == "best_f1"
    assert isinstance(loaded, SquadV2Model)
    for a, b in zip(saved.answerability.state_dict().values(), loaded.answerability.state_dict().values()):
        assert torch.equal(a, b)
    inp = tmp_path / "q.jsonl"
    inp.write_text(json.dumps({"question": "What is it?", "context": "It is called dioxygen."}) + "\n")
    assert main(["predict", "--model", str(sq), "--input", str(inp), "--output", str(tmp_path / "a.jsonl"),
                 "--no-progress"]) == 0
    row = json.loads((tmp_path / "a.jsonl").read_text())
    assert set(row) == {"question", "context", "answer", "answer_start", "no_answer_prob"}
    assert (row["answer"] == "") == (row["no_answer_prob"] > 0.9)  # the stored threshold applies

    old_preset = {"name": "classify", "kind": "classification", "metric": "accuracy", "lr": 2e-05, "batch_size": 32,
                  "train_steps": None, "epochs": 3.0, "warmup_steps": None, "warmup_proportion": 0.1,
                  "max_seq_length": 128, "eval_every": 200, "labels": None,
                  "source": "not in the paper: BERT-style defaults for your own data", "extra": {}}
    cl = tmp_path / "classify"
    AlbertForSequenceClassification.from_pretrained(model, num_labels=2).save_pretrained(cl)
    tok.save_pretrained(cl)
    meta = {"task": "classify", "kind": "classification", "labels": ["neg", "pos"], "metric": "accuracy",
            "preset": old_preset, "columns": {"text_a": "review", "label": "stars"}}
    (cl / "finetune.json").write_text(json.dumps(meta))
    inp.write_text(json.dumps({"review": "a fine film"}) + "\n")
    assert main(["predict", "--model", str(cl), "--input", str(inp), "--output", str(tmp_path / "c.jsonl"),
                 "--no-progress"]) == 0
    row = json.loads((tmp_path / "c.jsonl").read_text())
    assert row["label"] in ("neg", "pos") and list(row["probabilities"]) == ["neg", "pos"]
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(json.dumps({"review": r, "stars": s}) + "\n" for r, s in (("good", "pos"), ("bad", "neg"))))
    capsys.readouterr()
    assert main(["evaluate", "--model", str(cl), "--data", str(dev), "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] in (0.0, 0.5, 1.0)

    (cl / "finetune.json").write_text(json.dumps({**meta, "kind": "token"}))
    with pytest.raises(CheckpointError, match="kind 'token' does not match task 'classify'"):
        load_finetuned(cl)


def test_find_split_by_usual_names_skipping_hidden_temporaries(tmp_path):
    from litebert.tasks.sources import find_split

    for name in (".dev_matched.tsv.tmp-123", "dev_mismatched.tsv", "dev_matched.tsv", "train.tsv", "test.tsv",
                 "pretrain.txt"):
        (tmp_path / name).write_text("x")
    assert find_split(tmp_path, "dev").name == "dev_matched.tsv"  # MNLI: matched before mismatched
    assert find_split(tmp_path, "train").name == "train.tsv"  # "pretrain" is not the word "train"
    assert find_split(tmp_path, "test").name == "test.tsv"
    (tmp_path / "dev_matched.tsv").unlink()
    assert find_split(tmp_path, "dev").name == "dev_mismatched.tsv"


# ------------------------------------------------------------------------------------------- the plan before the data
@pytest.mark.parametrize("config, refused", [
    (dict(metric="nosuch"), r"metric = 'nosuch': the classify task's dev metrics are accuracy, matthews, f1"),
    (dict(precision="fp16"), r"precision"),
    (dict(batch_size=8, micro_batch=3), r"batch_size = 8 is not a multiple of FinetuneConfig.micro_batch = 3"),
])
def test_flags_are_checked_before_any_data_is_read(separable_task, tmp_path, config, refused):
    """What the flags decide (the metric, the precision on this machine, the batch split) is refused before a row is
    read: here the training file is broken at its second line, and the error is the flag's; the output folder is
    not created."""
    from litebert import FinetuneConfig, finetune
    from litebert.errors import ConfigError

    model, _ = separable_task
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"text": "a fine day", "label": "1"}\n{broken\n')
    with pytest.raises(ConfigError, match=refused):
        finetune("classify", model, data, tmp_path / "out", config=FinetuneConfig(max_steps=2, **config),
                 progress=False, log=None)
    assert not (tmp_path / "out").exists()
    # the same call with the flag mended reaches the data, and names its broken line
    from litebert.errors import DataError

    with pytest.raises(DataError, match=r"train.jsonl:2"):
        finetune("classify", model, data, tmp_path / "out", config=FinetuneConfig(max_steps=2), progress=False,
                 log=None)


def test_a_metric_of_compute_metrics_waits_for_the_evaluation(separable_task, tmp_path):
    """With compute_metrics, a metric outside the task's may be one of its own: not refused up front."""
    from litebert import FinetuneConfig, finetune

    model, data = separable_task
    done = finetune("classify", model, data, tmp_path / "out",
                    config=FinetuneConfig(max_steps=2, eval_every=2, metric="mine"), progress=False, log=None,
                    compute_metrics=lambda preds, gold: {"mine": float(sum(p == g for p, g in zip(preds, gold)))})
    assert done.complete and done.metric == "mine" and "mine" in done.best_metrics
