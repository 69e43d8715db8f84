"""Readers: the official file layouts, and bad input named by file and line."""

import gzip
import json
import lzma

import pytest

from litebert.errors import DataError
from litebert.tasks import readers as R

# Headers as in the files distributed by the GLUE benchmark.
GLUE_FILES = {
    "sst-2": "sentence\tlabel\nit 's a charming journey . \t1\nbad movie\t0\n",
    "mrpc": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said .\tHe stated .\n",
    "sts-b": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
             "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\t"
             "An air plane is taking off.\t5.000\n",
    "qqp": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\tHow?\tWhy?\t0\n",
    "mnli": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
            "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
            "0\t1\t1n\tgov\t(x)\t(y)\t(X)\t(Y)\tConceptually \"cream skimming\t"
            "Product and geography\tneutral\tneutral\n",
    "qnli": "index\tquestion\tsentence\tlabel\n0\tWhat?\tThis.\tnot_entailment\n",
    "rte": "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n",
    "wnli": "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\t1\n",
    "ax": "index\tsentence1\tsentence2\n0\tThe cat sat.\tThe cat did not sit.\n",
}


@pytest.mark.parametrize("task", sorted(GLUE_FILES))
def test_glue_headers(task, tmp_path):
    p = tmp_path / "f.tsv"
    p.write_text(GLUE_FILES[task])
    ex = R.read_glue(task, p)
    assert ex and ex[0].text_a
    if task == "sts-b":
        assert ex[0].label == 5.0 and ex[0].text_b == "An air plane is taking off."
    if task == "mnli":  # unbalanced quote kept verbatim (quotechar=None, as the official processors)
        assert ex[0].text_a == 'Conceptually "cream skimming' and ex[0].label == "neutral"
    if task == "ax":
        assert ex[0].label is None


def test_cola_without_header_and_test_file(tmp_path):
    p = tmp_path / "train.tsv"
    p.write_text("gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n")
    ex = R.read_glue("CoLA", p)
    assert [e.label for e in ex] == ["1", "0"] and ex[1].text_a == "They drank the pub."
    t = tmp_path / "test.tsv"
    t.write_text("index\tsentence\n0\tBill whistled past the house.\n")
    assert R.read_glue("cola", t)[0].label is None


def test_glue_gzip(tmp_path):
    p = tmp_path / "dev.tsv.gz"
    with gzip.open(p, "wt") as f:
        f.write(GLUE_FILES["sst-2"])
    assert len(R.read_glue("SST2", p)) == 2


def test_glue_bad_input_names_file_and_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tA.\tB.\tmaybe\n")
    with pytest.raises(DataError, match=r"bad.tsv:3: label 'maybe'"):
        R.read_glue("rte", p)
    p.write_text("index\tsentence1\tsentence2\tlabel\n0\tA.\n")
    with pytest.raises(DataError, match=r"bad.tsv:2: missing column 'sentence2'"):
        R.read_glue("rte", p)
    p.write_text("index\tsentence1\tlabel\n0\tA.\t1\n")
    with pytest.raises(DataError, match=r"bad.tsv:1: missing column 'sentence2'"):
        R.read_glue("rte", p)
    p.write_text("")
    with pytest.raises(DataError, match="empty"):
        R.read_glue("rte", p)
    with pytest.raises(DataError, match="unknown GLUE task"):
        R.read_glue("squad", p)


def test_user_table_formats_and_mapping(tmp_path):
    c = tmp_path / "d.csv"
    c.write_text('review,stars\n"Great, really great",pos\nawful,neg\n')
    ex = R.read_table(c, text_a="review", label="stars", label_list=["neg", "pos"])
    assert ex[0].text_a == "Great, really great" and ex[0].label == "pos"
    j = tmp_path / "d.jsonl"
    j.write_text('{"t": "a", "y": 1.5}\n\n{"t": "b", "y": 2}\n')
    ex = R.read_table(j, text_a="t", label="y", regression=True)
    assert [e.label for e in ex] == [1.5, 2.0]
    ex = R.read_table(j, text_a="t", label="y")  # classification: labels become strings
    assert [e.label for e in ex] == ["1.5", "2"]
    j.write_text('{"t": "a", "y": 1}\n{"text": "b", "y": 0}\n')
    with pytest.raises(DataError, match=r"d.jsonl:2: missing column 't'"):
        R.read_table(j, text_a="t", label="y")
    j.write_text('{"t": "a", "y": 1}\n{"t": "b", "y": 7}\n')
    with pytest.raises(DataError, match=r"d.jsonl:2: label '7' is not one of"):
        R.read_table(j, text_a="t", label="y", label_list=["0", "1"])
    j.write_text('{"t": "a"\n')
    with pytest.raises(DataError, match=r"d.jsonl:1: not valid JSON"):
        R.read_table(j, text_a="t", label=None)
    j.write_text("\n\n")
    with pytest.raises(DataError, match="empty"):
        R.read_table(j)


def test_encoding_errors_bom_and_xz(tmp_path):
    t = tmp_path / "latin1.tsv"
    t.write_bytes(b"sentence\tlabel\nfine\t1\nna\xefve\t0\n")  # line 3 starts at byte 15 + 7 = 22; 0xef at 24
    with pytest.raises(DataError, match=r"latin1\.tsv:3: invalid UTF-8 at byte offset 24 \(byte 0xef\)"):
        R.read_glue("sst-2", t)
    assert R.read_glue("sst-2", t, encoding_errors="replace")[1].text_a == "na\ufffdve"
    # a spreadsheet's CSV: a UTF-8 byte order mark before the first column name, CRLF line ends
    c = tmp_path / "excel.csv"
    c.write_bytes(b"\xef\xbb\xbfreview,stars\r\ngood,pos\r\n")
    ex = R.read_table(c, text_a="review", label="stars")
    assert (ex[0].text_a, ex[0].label) == ("good", "pos")
    j = tmp_path / "d.jsonl.xz"  # the format is named before the compression suffix
    j.write_bytes(lzma.compress(b'{"t": "a", "y": 1}\n'))
    assert R.read_table(j, text_a="t", label="y")[0].label == "1"
    conll = tmp_path / "ner.txt"
    conll.write_bytes(b"EU NNP B-ORG\nrejects VBZ O\n\nM\xfcller NNP B-PER\n")  # line 4 starts at 13 + 14 + 1 = 28
    with pytest.raises(DataError, match=r"ner\.txt:4: invalid UTF-8 at byte offset 29 \(byte 0xfc\)"):
        R.read_conll(conll)
    assert R.read_conll(conll, encoding_errors="replace")[1].words == ["M\ufffdller"]


def _squad(qas, context="The Broncos won in 2016 at Levi's Stadium.", version="v2.0"):
    return {"version": version, "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_squad_v2_and_bad_answer_start(tmp_path):
    qas = [
        {"id": "a", "question": "Who won?", "answers": [{"text": "The Broncos", "answer_start": 0}],
         "is_impossible": False},
        {"id": "b", "question": "When?", "answers": [{"text": "2016", "answer_start": 3}], "is_impossible": False},
        {"id": "c", "question": "Who lost?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "Broncos", "answer_start": 4}]},
    ]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_squad(qas)))
    with pytest.warns(UserWarning, match="skipped 1 answer"):
        ex, report = R.read_squad(p)
    assert [e.qas_id for e in ex] == ["a", "c"]
    assert report == {"version": "2.0", "bad_answers": 1, "dropped_questions": 1}
    assert ex[1].is_impossible and ex[1].answers == []
    p.write_text("")
    with pytest.raises(DataError, match="empty"):
        R.read_squad(p)
    p.write_text('{"data": [\n{"title": 1,}]}')
    with pytest.raises(DataError, match=r"s.json:2: not valid JSON"):
        R.read_squad(p)


def test_race_and_multiple_choice(tmp_path):
    d = tmp_path / "race" / "high"
    d.mkdir(parents=True)
    (d / "1.txt").write_text(json.dumps({"id": "high1.txt", "article": "Tom is tall.", "questions": ["Tom is _ ."],
                                         "options": [["tall", "short", "old", "young"]], "answers": ["A"]}))
    ex = R.read_race(tmp_path / "race")
    assert ex[0].label == 0 and ex[0].choices[1] == "short" and ex[0].context == "Tom is tall."
    m = tmp_path / "mc.jsonl"
    m.write_text('{"question": "q", "choices": ["x", "y", "z"], "label": 2}\n'
                 '{"question": "q", "choices": ["x", "y", "z"], "label": "B"}\n')
    assert [e.label for e in R.read_multiple_choice(m)] == [2, 1]
    m.write_text('{"question": "q", "choices": ["x", "y"], "label": 2}\n')
    with pytest.raises(DataError, match=r"mc.jsonl:1: answer 2 is outside the 2 choices"):
        R.read_multiple_choice(m)
    m.write_text('{"question": "q", "choices": ["x", "y"]}\n{"question": "q", "choices": ["x", "y", "z"]}\n')
    with pytest.raises(DataError, match=r"mc.jsonl:2: 3 choices"):
        R.read_multiple_choice(m)
    m.write_text('{"choices": ["x", "y"]}\n')
    with pytest.raises(DataError, match=r"mc.jsonl:1: missing key 'question'"):
        R.read_multiple_choice(m)


def test_conll(tmp_path):
    p = tmp_path / "train.txt"
    p.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n"
                 "Peter NNP B-NP B-PER\nBlackburn NNP B-NP I-PER\n")
    ex = R.read_conll(p)
    assert [e.words for e in ex] == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    assert ex[1].labels == ["B-PER", "I-PER"]
    p.write_text("EU NNP B-NP B-ORG\nrejects VBZ O\n")
    with pytest.raises(DataError, match=r"train.txt:2: 3 columns"):
        R.read_conll(p)
    p.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP X-FOO\n")
    with pytest.raises(DataError, match=r"train.txt:2: label 'X-FOO'"):
        R.read_conll(p, label_list=["O", "B-ORG"])
    p.write_text("\n\n")
    with pytest.raises(DataError, match="empty"):
        R.read_conll(p)
