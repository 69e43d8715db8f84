"""GLUE presets on tables (`litebert.tasks.glue_tables`): a `datasets` folder written by ``save_to_disk``, with the
Hub's GLUE features (nyu-mll/glue: its column names, ``ClassLabel`` label names, ``idx``), gives the examples the
same rows give from the benchmark's TSV files, label spellings included."""

import pytest

from litebert.errors import DataError
from litebert.tasks.presets import get_preset
from litebert.tasks.readers import read_glue
from litebert.tasks.sources import eval_path, split_paths

datasets = pytest.importorskip("datasets")
pq = pytest.importorskip("pyarrow.parquet")
datasets.disable_progress_bars()

V = datasets.Value
# The features of nyu-mll/glue's configurations, as the Hub lists them (tensorflow/datasets
# docs/community_catalog/huggingface/glue.md has the same).
HUB = {
    "cola": {"sentence": V("string"), "label": datasets.ClassLabel(names=["unacceptable", "acceptable"])},
    "sst-2": {"sentence": V("string"), "label": datasets.ClassLabel(names=["negative", "positive"])},
    "wnli": {"sentence1": V("string"), "sentence2": V("string"),
             "label": datasets.ClassLabel(names=["not_entailment", "entailment"])},
    "mnli": {"premise": V("string"), "hypothesis": V("string"),
             "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"])},
    "sts-b": {"sentence1": V("string"), "sentence2": V("string"), "label": V("float32")},
}
# (text_a, text_b, label as the TSV writes it) per task; the TSVs below are in the GLUE files' layouts
ROWS = {
    "cola": [("The sailors rode the breeze clear of the rocks.", None, "1"), ("The more we study verbs.", None, "0"),
             ("Bill left.", None, "1")],
    "sst-2": [("a gripping , funny film", None, "1"), ("dull and overlong", None, "0"), ("warm", None, "1")],
    "wnli": [("The cat sat.", "It sat.", "1"), ("John hit Bill.", "Bill hit John.", "0"), ("A b.", "B a.", "1")],
    "mnli": [("A man plays.", "Someone plays.", "entailment"), ("A dog runs.", "A cat sleeps.", "contradiction"),
             ("Kids eat.", "Kids eat lunch.", "neutral")],
    "sts-b": [("A man plays a guitar.", "A man plays music.", 3.8), ("A cat.", "A plane.", 0.2),
              ("Dogs run.", "Dogs are running.", 4.75)],
}


def tsv(task: str, rows) -> str:
    """The rows in the GLUE TSV layout of ``task`` (CoLA train/dev: no header, the sentence last)."""
    if task == "cola":
        return "".join(f"gj04\t{y}\t\t{a}\n" for a, _, y in rows)
    if task == "sst-2":
        return "sentence\tlabel\n" + "".join(f"{a}\t{y}\n" for a, _, y in rows)
    if task == "mnli":
        return "index\tsentence1\tsentence2\tgold_label\n" + "".join(f"{i}\t{a}\t{b}\t{y}\n"
                                                                      for i, (a, b, y) in enumerate(rows))
    label = "score" if task == "sts-b" else "label"
    return f"index\tsentence1\tsentence2\t{label}\n" + "".join(f"{i}\t{a}\t{b}\t{y}\n" for i, (a, b, y) in
                                                               enumerate(rows))


def hub_split(task: str, rows, labelled: bool = True) -> "datasets.Dataset":
    """``rows`` as the Hub's GLUE holds them: its columns, the label a ClassLabel index (-1: none), ``idx``."""
    features = HUB[task]
    a, b = [c for c in features if c != "label"] + [None] * (3 - len(features))
    label = features["label"]
    values = {a: [r[0] for r in rows], "label": [(label.str2int(_hub_name(task, r[2])) if labelled else -1)
                                                 if isinstance(label, datasets.ClassLabel) else r[2] for r in rows]}
    if b:
        values[b] = [r[1] for r in rows]
    values["idx"] = list(range(len(rows)))
    return datasets.Dataset.from_dict(values, features=datasets.Features({**features, "idx": V("int32")}))


# What the TSV's 0 and 1 mean, by the GLUE tasks' definitions (CoLA: 1 = acceptable; SST-2: 1 = positive;
# WNLI: 1 = the hypothesis is entailed); MNLI's TSV spells its labels out.
MEANING = {"cola": {"0": "unacceptable", "1": "acceptable"}, "sst-2": {"0": "negative", "1": "positive"},
           "wnli": {"0": "not_entailment", "1": "entailment"}}


def _hub_name(task: str, tsv_label: str) -> str:
    """The Hub's class name for a TSV label."""
    return MEANING[task][tsv_label] if task in MEANING else tsv_label


def examples(task, path):
    return [(e.text_a, e.text_b, e.label) for e in get_preset(task).kind.read(path)]


@pytest.mark.parametrize("task", sorted(ROWS))
def test_a_saved_hub_glue_split_reads_as_its_tsv(task, tmp_path):
    (tmp_path / "train.tsv").write_text(tsv(task, ROWS[task]), encoding="utf-8")
    hub_split(task, ROWS[task]).save_to_disk(str(tmp_path / "saved"))
    from_tsv, from_table = examples(task, tmp_path / "train.tsv"), examples(task, tmp_path / "saved")
    if task == "sts-b":  # the Hub stores the scores as float32
        assert [r[:2] for r in from_table] == [r[:2] for r in from_tsv]
        assert [r[2] for r in from_table] == pytest.approx([r[2] for r in from_tsv], rel=1e-6)
    else:
        assert from_table == from_tsv == [(a, b, y) for a, b, y in ROWS[task]]
    hub_split(task, ROWS[task]).to_parquet(str(tmp_path / "hub.parquet"))  # the Hub's Parquet export: the same
    assert examples(task, tmp_path / "hub.parquet") == from_table


def test_a_dataset_dict_folder_gives_its_splits_by_name(tmp_path):
    part = hub_split("mnli", ROWS["mnli"])
    other = hub_split("mnli", ROWS["mnli"][:1])
    datasets.DatasetDict({"train": part, "validation_matched": part, "validation_mismatched": other,
                          "test_matched": hub_split("mnli", ROWS["mnli"], labelled=False)}).save_to_disk(
        str(tmp_path / "mnli"))
    train, dev = split_paths(tmp_path / "mnli", None)
    assert (train.name, dev.name) == ("train", "validation_matched")
    assert examples("mnli", train) == examples("mnli", dev) == ROWS["mnli"]
    _, dev = split_paths(tmp_path / "mnli", "validation_mismatched")  # --dev: a split by its name
    assert examples("mnli", dev) == ROWS["mnli"][:1]
    assert eval_path(tmp_path / "mnli").name == "validation_matched"
    test = get_preset("mnli").kind.read(tmp_path / "mnli" / "test_matched")  # a test split: no labels
    assert [e.label for e in test] == [None] * 3 and [e.guid for e in test] == ["mnli-0", "mnli-1", "mnli-2"]


def test_tsv_columns_in_a_table_and_the_errors(tmp_path):
    pd = pytest.importorskip("pandas")
    (tmp_path / "train.tsv").write_text(tsv("sst-2", ROWS["sst-2"]), encoding="utf-8")
    datasets.Dataset.from_pandas(pd.read_csv(tmp_path / "train.tsv", sep="\t")).save_to_disk(str(tmp_path / "p"))
    assert examples("sst-2", tmp_path / "p") == examples("sst-2", tmp_path / "train.tsv")  # the TSV's columns
    with pytest.raises(DataError, match=r"no columns for GLUE MNLI: the Hub's GLUE has premise, hypothesis, the TSV "
                                        r"files sentence1, sentence2; the table has sentence, label"):
        read_glue("mnli", tmp_path / "p")
    part = hub_split("sst-2", ROWS["sst-2"])
    mixed = datasets.concatenate_datasets([part, hub_split("sst-2", ROWS["sst-2"][:1], labelled=False)])
    mixed.save_to_disk(str(tmp_path / "mixed"))
    with pytest.raises(DataError, match=r"mixed: row 3: no label \(null, or -1 in a ClassLabel\) where other rows "
                                        r"have one"):
        read_glue("sst-2", tmp_path / "mixed")
    bad = datasets.Dataset.from_dict({"sentence": ["x"], "label": [7]})
    bad.save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(DataError, match=r"bad: row 0: label '7' is not one of the task's labels \['0', '1'\]"):
        read_glue("sst-2", tmp_path / "bad")
