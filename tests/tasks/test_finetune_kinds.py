"""The task kinds (`litebert.tasks.kinds`) on hand-set model outputs: predictions, scores, predict's rows, labels,
predict's inputs, and the presets' kinds as the tasks define them. No model runs here; `test_finetune.py` runs the
kinds end to end."""

import inspect
import math
from pathlib import Path

import numpy as np
import pytest

from litebert.errors import DataError
from litebert.tasks import kinds as K
from litebert.tasks.presets import PRESETS, preset_from_json
from litebert.tasks.readers import MultipleChoiceExample, SquadExample, TextExample, TokenExample

WHERE = Path("in.jsonl")


def test_every_preset_has_the_kind_its_task_defines():
    # GLUE: STS-B is the one regression task; SQuAD 2.0 adds unanswerable questions; RACE is 4-way multiple choice
    # in its own JSON; CoNLL-2003 tags words.
    special = {"sts-b": K.Regression(glue="sts-b"), "regress": K.Regression(),
               "squad1": K.ExtractiveQA(), "squad2": K.ExtractiveQAWithNoAnswer(),
               "race": K.MultipleChoice(format="race"), "mc": K.MultipleChoice(format="jsonl"),
               "conll": K.TokenClassification(), "classify": K.Classification(),
               "sentiment": K.Classification(glue="sst-2")}
    for name, preset in PRESETS.items():
        assert preset.kind == special.get(name, K.Classification(glue=name)), name
        assert not inspect.isabstract(type(preset.kind)), name  # every abstract method is implemented
        for method in ("read", "examples_from_json", "collect_labels", "featurize", "new_model", "load_model",
                       "predictions", "score", "output_rows", "thresholded", "chosen_on_dev"):
            assert callable(getattr(preset.kind, method)), (name, method)
        assert preset_from_json(name, preset.to_json()) == preset, name


def test_finetune_json_written_before_kind_objects_still_reads():
    # a "preset" entry as litebert wrote it when kinds were strings (the run had --max-seq-length 96); SQuAD v2's
    # older entry, with its "version", is loaded end to end in test_finetune.py
    race = {"name": "race", "kind": "multiple_choice", "metric": "accuracy", "lr": 1e-05, "batch_size": 32,
            "train_steps": 12000, "epochs": None, "warmup_steps": 1000, "warmup_proportion": 0.1,
            "max_seq_length": 96, "eval_every": 100, "labels": None, "source": "google-research/albert README "
            "(run_race)", "extra": {"max_qa_length": 64, "format": "race"}}
    p = preset_from_json("race", race)
    assert p.kind == K.MultipleChoice(format="race", max_qa_length=64) and p.max_seq_length == 96
    assert preset_from_json("cola", None) == PRESETS["cola"]


def test_classification():
    kind = K.Classification()
    labels = ["neg", "pos"]
    outs = [{"logits": np.array([1.0, 3.0])}, {"logits": np.array([0.0, 0.0])}, {"logits": np.array([2.0, -1.0])}]
    preds = kind.predictions(None, None, outs, labels)
    assert preds == ["pos", "neg", "neg"]  # a tie goes to the first label, as argmax
    gold = [TextExample(str(i), "t", label=l) for i, l in enumerate(["pos", "pos", "neg"])]
    # TP 1 (pos/pos), FN 1 (pos/neg), TN 1: MCC = (1*1 - 0*1) / sqrt(1*2*1*2) = 0.5; F1 = 2*1 / (2*1 + 0 + 1)
    assert kind.score(gold, preds, labels) == pytest.approx({"accuracy": 2 / 3, "matthews": 0.5, "f1": 2 / 3})
    assert "f1" not in kind.score(gold, preds, ["neg", "pos", "neutral"])  # F1 only for two labels
    rows = kind.output_rows(preds, outs, labels)
    e2 = math.exp(2)
    assert rows[0]["label"] == "pos"
    assert rows[0]["probabilities"] == pytest.approx({"neg": 1 / (1 + e2), "pos": e2 / (1 + e2)})
    assert rows[1]["probabilities"] == pytest.approx({"neg": 0.5, "pos": 0.5})
    assert kind.thresholded(preds, 0.5) == preds and kind.chosen_on_dev({"best_f1_thresh": 0.5}) == {}


def test_classification_labels_and_inputs():
    kind = K.Classification()
    seen = [TextExample("0", "x", label="b"), TextExample("1", "y", label="a"), TextExample("2", "z", label="b")]
    assert kind.collect_labels(seen, None) == ["a", "b"]
    assert kind.collect_labels(seen, ("1", "0")) == ["1", "0"]  # the preset's order is the head's
    with pytest.raises(DataError, match="1 distinct label"):
        kind.collect_labels(seen[:1], None)
    rows = [(1, {"review": "good", "id": 7}), (2, {"text": "bad", "text_b": "worse"})]
    assert kind.examples_from_json(rows, WHERE, {"text_a": "review"}) == [
        TextExample("7", "good"), TextExample("2", "bad", "worse")]
    with pytest.raises(DataError, match=r"in.jsonl:3: missing key"):
        kind.examples_from_json([(3, {"sentense": "typo"})], WHERE)


def test_regression():
    kind = K.Regression()
    outs = [{"logits": np.array([v])} for v in (0.5, 1.5, 2.5)]
    preds = kind.predictions(None, None, outs, None)
    assert preds == [0.5, 1.5, 2.5]
    gold = [TextExample(str(i), "t", label=float(v)) for i, v in enumerate((1, 2, 3))]
    # every prediction 0.5 below its gold: perfectly correlated, squared error 0.25
    assert kind.score(gold, preds, None) == pytest.approx({"pearson": 1.0, "spearman": 1.0, "mse": 0.25})
    assert kind.output_rows(preds, outs, None) == [{"score": 0.5}, {"score": 1.5}, {"score": 2.5}]
    assert kind.collect_labels(gold, None) is None


def test_token_classification():
    kind = K.TokenClassification()
    labels = ["O", "B-PER", "I-PER"]
    ex = [TokenExample("0", ["Peter", "Blackburn", "rejects"], ["B-PER", "I-PER", "O"]),
          TokenExample("1", ["Jo", "said", "so"], ["B-PER", "O", "O"])]
    logits = np.full((6, 3), -1.0)
    # positions: [CLS] Peter Black -burn rejects [SEP]; the second piece of a word is never read
    for pos, tag in ((1, 1), (2, 2), (3, 1), (4, 0)):
        logits[pos, tag] = 1.0
    cut = np.full((3, 3), -1.0)
    cut[1, 1] = 1.0  # only "Jo" fit in max_length; the cut words are predicted "O"
    feats = [{"word_ids": [None, 0, 1, 1, 2, None]}, {"word_ids": [None, 0, None]}]
    preds = kind.predictions(ex, feats, [{"logits": logits}, {"logits": cut}], labels)
    assert preds == [["B-PER", "I-PER", "O"], ["B-PER", "O", "O"]]
    assert kind.score(ex, preds, labels) == pytest.approx(
        {"precision": 1.0, "recall": 1.0, "f1": 1.0, "token_accuracy": 1.0})
    wrong = [["B-PER", "O", "O"], ["B-PER", "O", "O"]]  # "Peter Blackburn" cut short: 1 of 2 entities right
    assert kind.score(ex, wrong, labels) == pytest.approx(
        {"precision": 0.5, "recall": 0.5, "f1": 0.5, "token_accuracy": 5 / 6})
    assert kind.output_rows(preds, None, labels)[1] == {"tags": ["B-PER", "O", "O"]}
    assert kind.collect_labels(ex, None) == ["B-PER", "I-PER", "O"]
    assert kind.examples_from_json([(1, {"text": "a  b"}), (2, {"words": ["c"]})], WHERE) == [
        TokenExample("1", ["a", "b"]), TokenExample("2", ["c"])]
    with pytest.raises(DataError, match="in.jsonl:1: 'words' must be a list of strings"):
        kind.examples_from_json([(1, {"words": "a b"})], WHERE)


def test_multiple_choice():
    kind = K.MultipleChoice()
    outs = [{"logits": np.array([0.0, math.log(3.0), 0.0])}, {"logits": np.array([2.0, 1.0, 0.0])}]
    preds = kind.predictions(None, None, outs, None)
    assert preds == [1, 0]
    gold = [MultipleChoiceExample(str(i), "", "q", ["a", "b", "c"], label=l) for i, l in enumerate((1, 2))]
    assert kind.score(gold, preds, None) == {"accuracy": 0.5}
    assert kind.output_rows(preds, outs, None)[0] == {"label": 1, "probabilities": pytest.approx([0.2, 0.6, 0.2])}
    rows = [(1, {"question": "q?", "choices": ["a", "b"]}), (2, {"question": "r?", "choices": ["a", "b", "c"]})]
    assert kind.examples_from_json(rows[:1], WHERE) == [MultipleChoiceExample("1", "", "q?", ["a", "b"])]
    with pytest.raises(DataError, match="every item needs the same number of choices"):
        kind.examples_from_json(rows, WHERE)
    with pytest.raises(DataError, match="in.jsonl:1: 'choices'"):
        kind.examples_from_json([(1, {"question": "q?", "choices": ["only"]})], WHERE)


def _squad_case():
    """One question, one window: input positions 3.. are the 8 context words; "Denver Broncos" scores best."""
    ctx = "Denver Broncos won Super Bowl 50 in 2016."
    ex = SquadExample("q", "Who won?", ctx, [{"text": "the Denver Broncos", "answer_start": 0}])
    words = [(0, 6), (7, 14), (15, 18), (19, 24), (25, 29), (30, 32), (33, 35), (36, 41)]
    feat = {"example_index": 0, "context_offset": 3, "spans": words, "max_context": [True] * 8}
    start, end = np.full(11, -10.0), np.full(11, -10.0)
    start[3], end[4] = 5.0, 5.0
    return [ex], [feat], {"start_logits": start, "end_logits": end}


def test_extractive_qa():
    kind = K.ExtractiveQA()
    ex, feats, out = _squad_case()
    preds = kind.predictions(ex, feats, [out], None)
    assert preds == [{"id": "q", "answer": "Denver Broncos", "answer_start": 0}]
    # the official normalization drops "the": an exact match
    assert kind.score(ex, preds, None) == pytest.approx({"exact": 100.0, "f1": 100.0, "total": 1, "HasAns_exact": 100.0,
                                                         "HasAns_f1": 100.0, "HasAns_total": 1})
    assert kind.output_rows(preds, [out], None) == [{"answer": "Denver Broncos", "answer_start": 0}]
    assert kind.thresholded(preds, 0.1) == preds and kind.chosen_on_dev({"best_f1_thresh": 0.3}) == {}
    rows = [(4, {"id": "a1", "question": "Who?", "context": "Me."}), (5, {"question": "Why?", "context": "So."})]
    assert kind.examples_from_json(rows, WHERE) == [SquadExample("a1", "Who?", "Me."), SquadExample("5", "Why?", "So.")]


def test_extractive_qa_with_no_answer():
    kind = K.ExtractiveQAWithNoAnswer()
    ex, feats, out = _squad_case()
    out["na_logits"] = np.float32(math.log(3.0))  # sigmoid = 0.75
    (pred,) = kind.predictions(ex, feats, [out], None)
    assert pred == {"id": "q", "answer": "Denver Broncos", "answer_start": 0, "no_answer_prob": pytest.approx(0.75)}
    assert kind.thresholded([pred], 0.8) == [pred]
    assert kind.thresholded([pred], 0.5) == [{**pred, "answer": "", "answer_start": -1}]
    # above the threshold the answerable question counts as "no answer": 0; the sweep finds 0.75 keeps it: 100
    m = kind.score(ex, [pred], None, null_threshold=0.5)
    assert (m["exact"], m["f1"], m["best_f1"], m["best_f1_thresh"]) == pytest.approx((0.0, 0.0, 100.0, 0.75))
    assert kind.score(ex, [pred], None)["f1"] == pytest.approx(100.0)  # default threshold 1.0: no question refused
    assert kind.chosen_on_dev(m) == {"null_threshold": pytest.approx(0.75)}
    assert kind.chosen_on_dev({"f1": 1.0}) == {}
    assert kind.output_rows([pred], [out], None) == [
        {"answer": "Denver Broncos", "answer_start": 0, "no_answer_prob": pytest.approx(0.75)}]


def test_the_docs_table_of_tasks_shows_the_presets():
    """docs/finetune.md's table of tasks shows each preset's hyperparameters: the presets are the one table of them,
    the docs their rendering (a preset changed without its row fails here)."""
    def shown(p) -> str:
        steps = f"{p.train_steps:,}" if p.train_steps else f"{p.epochs:g} epochs"
        warmup = (f"{p.warmup_steps:,}" if p.warmup_steps is not None
                  else f"{p.warmup_proportion:.0%}".replace("%", " %"))
        return f"{p.lr:.0e}".replace("e-0", "e-") + f" / {p.batch_size} / {steps} / {warmup}"

    docs = (Path(__file__).resolve().parents[2] / "docs" / "finetune.md").read_text()
    rows = {}
    for line in docs.split("## Tasks", 1)[1].split("\n\n", 2)[1].splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        for name in cells[0].replace("`", "").split(", "):
            rows[name] = cells[-1]
    assert set(rows) == set(PRESETS)
    for name, preset in PRESETS.items():
        assert rows[name].startswith(shown(preset)), (name, rows[name], shown(preset))


# the scores each kind gives, as the metrics it declares (what --metric may choose before any data is read)
SCORED = {
    K.Classification: (lambda: ([TextExample("0", "a", label="1"), TextExample("1", "b", label="0"),
                                 TextExample("2", "c", label="1")], ["1", "1", "0"], ["0", "1"])),
    K.Regression: (lambda: ([TextExample("0", "a", label=1.0), TextExample("1", "b", label=3.0),
                             TextExample("2", "c", label=2.0)], [1.5, 2.5, 2.0], None)),
    K.TokenClassification: (lambda: ([TokenExample("0", ["Ann", "ran"], ["B-PER", "O"])], [["B-PER", "O"]],
                                     ["B-PER", "O"])),
    K.MultipleChoice: (lambda: ([MultipleChoiceExample("0", "c", "q", ["a", "b"], label=1)], [1], None)),
    K.ExtractiveQA: (lambda: ([SquadExample("q1", "who?", "Ann ran.", [{"text": "Ann", "answer_start": 0}])],
                              [{"id": "q1", "answer": "Ann"}], None)),
    K.ExtractiveQAWithNoAnswer: (lambda: ([SquadExample("q1", "who?", "Ann ran.", [{"text": "Ann", "answer_start": 0}]),
                                           SquadExample("q2", "why?", "Ann ran.", [], is_impossible=True)],
                                          [{"id": "q1", "answer": "Ann", "no_answer_prob": 0.2},
                                           {"id": "q2", "answer": "", "no_answer_prob": 0.9}], None)),
}


@pytest.mark.parametrize("kind", sorted({type(p.kind) for p in PRESETS.values()}, key=lambda k: k.__name__))
def test_each_kind_scores_the_metrics_it_declares(kind):
    """Every metric a kind's score returns is one it declares in ``metrics`` (and the task's preset metric is
    among them), so that a --metric outside them can be refused before any data is read."""
    examples, preds, labels = SCORED[kind]()
    scored = kind().score(examples, preds, labels)
    assert scored and set(scored) <= set(kind.metrics), set(scored) - set(kind.metrics)
    for p in PRESETS.values():
        if type(p.kind) is kind:
            assert p.metric in kind.metrics, p.name
