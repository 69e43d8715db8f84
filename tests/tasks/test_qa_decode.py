"""One question-answering decoder (`litebert.tasks.qa_decode`) behind `litebert predict`, `litebert evaluate` and
``pipeline("question-answering")``: on every question of the bundled SQuAD dev set (data/finetune/squad, 317
questions), with a tiny model fine-tuned here for a few steps, the three give the same answers under each decoding;
`predict` and `evaluate` decode the official way when not told (and say so), the pipeline HF's way, and the "hf"
decoding gives what transformers' own question-answering pipeline gives on the same folder, key for key."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

import litebert
from helpers.pipelines import assert_same, hf_pipeline
from litebert.cli import main
from litebert.finetuning.run import FinetuneConfig, finetune

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:transformers")]  # HF's numpy 2 notices
SQUAD = Path(__file__).resolve().parents[2] / "data" / "finetune" / "squad"


@pytest.fixture(scope="module")
def squad(albert_vocab, tmp_path_factory):
    """(folder, questions): a tiny ALBERT (official 30k vocabulary) fine-tuned on SQuAD for 8 steps with windows of
    192 pieces, and the dev set's (id, question, context) triples, also written as predict's input (in.jsonl)."""
    from litebert.tokenizer import AlbertTokenizer

    root = tmp_path_factory.mktemp("squad")
    torch.manual_seed(0)
    config = litebert.AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=37)
    litebert.AlbertForPreTraining(config).save_pretrained(root / "pre")
    AlbertTokenizer.from_pretrained(albert_vocab).save_pretrained(root / "pre")
    finetune("squad1", root / "pre", SQUAD, root / "qa", progress=False, log=None,
             config=FinetuneConfig(max_steps=8, batch_size=8, eval_every=8, max_train_examples=64,
                                   max_eval_examples=8, seq_len=192, lr=1e-3, report_to="none"))
    with gzip.open(SQUAD / "disfl_qa_dev.json.gz", "rt", encoding="utf-8") as f:
        data = json.load(f)["data"]
    questions = [(q["id"], q["question"], p["context"]) for a in data for p in a["paragraphs"] for q in p["qas"]]
    (root / "in.jsonl").write_text("".join(json.dumps({"id": i, "question": q, "context": c}) + "\n"
                                           for i, q, c in questions))
    return root, questions


def ask(pipe, questions, **options) -> list[dict]:
    return pipe(question=[q for _, q, _ in questions], context=[c for _, _, c in questions], **options)


def predicted(root: Path, **options) -> list[tuple[str, int]]:
    litebert.predict(root / "qa", root / "in.jsonl", root / "out.jsonl", progress=False, overwrite=True, **options)
    return [(r["answer"], r["answer_start"]) for r in map(json.loads, (root / "out.jsonl").read_text().splitlines())]


@pytest.mark.parametrize("decoding", ["official", "hf"])
def test_predict_evaluate_and_the_pipeline_give_the_same_answers(squad, decoding):
    """Every dev question answered alike by the three; predict and evaluate decode the official way when not told,
    and their results say which decoding they used."""
    root, questions = squad
    options = {} if decoding == "official" else {"qa_decoding": decoding}
    pipe = litebert.pipeline("question-answering", model=root / "qa", device="cpu", decoding=decoding)
    answers = ask(pipe, questions)
    assert len(answers) == len(questions) == 317
    assert predicted(root, **options) == [(a["answer"], a["start"]) for a in answers]
    result = litebert.evaluate(root / "qa", SQUAD, progress=False, **options)
    rows = result.rows
    assert [r["id"] for r in rows] == [i for i, _, _ in questions]
    assert [(r["prediction"], r["answer_start"]) for r in rows] == [(a["answer"], a["start"]) for a in answers]
    assert result.qa_decoding == decoding
    assert litebert.predict(root / "qa", root / "in.jsonl", root / "out.jsonl", progress=False, overwrite=True,
                            **options).qa_decoding == decoding


def test_the_pipeline_answers_as_transformers_pipeline_by_default(squad):
    """``litebert.pipeline("question-answering")`` untold: transformers' answers key for key (score, start, end,
    answer) on every held-out dev question, top 3 included; ``decoding="official"`` answers otherwise."""
    root, questions = squad
    hf = hf_pipeline("question-answering", root / "qa")
    ref = hf(question=[q for _, q, _ in questions], context=[c for _, _, c in questions])
    ref_top3 = hf(question=[q for _, q, _ in questions[:20]], context=[c for _, _, c in questions[:20]], top_k=3)
    pipe = litebert.pipeline("question-answering", model=root / "qa", device="cpu")
    got = ask(pipe, questions)
    assert_same(ref, got)
    assert_same(ref_top3, ask(pipe, questions[:20], top_k=3))
    assert_same(ref, ask(litebert.pipeline("question-answering", model=root / "qa", device="cpu", decoding="hf"),
                         questions))
    # the decodings differ on most questions: the option is not a no-op
    official = ask(litebert.pipeline("question-answering", model=root / "qa", device="cpu", decoding="official"),
                   questions)
    assert sum(o["answer"] != g["answer"] for o, g in zip(official, got)) > len(questions) // 2


def test_official_answers_are_the_n_best_read_by_hand(squad):
    """The official answer of a question (run_squad's `write_predictions`, read here from the model's logits): of
    each window's 20 best starts and 20 best ends, the pair with the best start + end logit, the start in its
    max-context window, at most 30 pieces; its score the softmax over the n-best."""
    from litebert.inference.finetuned import load_finetuned
    from litebert.tasks.qa_decode import QADecoding, windows
    from litebert.tasks.readers import SquadExample

    root, questions = squad
    _, model, tok, _ = load_finetuned(root / "qa")
    pipe = litebert.pipeline("question-answering", model=root / "qa", device="cpu", decoding="official")
    for qid, question, context in questions[:12]:
        best = None
        for f in windows(tok, [SquadExample(qid, question, context)], QADecoding(), 192, 96, 64):
            with torch.no_grad():
                out = model(torch.tensor([f["input_ids"]]), token_type_ids=torch.tensor([f["token_type_ids"]]))
            start, end = out.start_logits[0].tolist(), out.end_logits[0].tolist()
            off, n = f["context_offset"], len(f["spans"])
            starts = sorted(range(n), key=lambda k: -start[off + k])[:20]
            ends = sorted(range(n), key=lambda k: -end[off + k])[:20]
            for i in starts:
                for j in ends:
                    score = start[off + i] + end[off + j]
                    if f["max_context"][i] and i <= j < i + 30 and (best is None or score > best[0]):
                        best = (score, f["spans"][i][0], f["spans"][j][1])
        got = pipe(question=question, context=context)
        assert (got["start"], got["end"], got["answer"]) == (best[1], best[2], context[best[1]:best[2]])
        top = pipe(question=question, context=context, top_k=20)
        assert sum(a["score"] for a in top) == pytest.approx(1.0) and top[0]["score"] == got["score"]


def test_qa_decoding_on_the_command_line(squad, capsys):
    root, questions = squad
    out = root / "cli.jsonl"
    assert main(["predict", "--model", str(root / "qa"), "--input", str(root / "in.jsonl"), "--output", str(out),
                 "--qa-decoding", "hf", "--no-progress", "--overwrite"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["answer"], r["answer_start"]) for r in rows] == predicted(root, qa_decoding="hf")
    capsys.readouterr()
    assert main(["evaluate", "--model", str(root / "qa"), "--data", str(SQUAD), "--qa-decoding", "hf",
                 "--no-progress"]) == 0
    hf = json.loads(capsys.readouterr().out)
    official = litebert.evaluate(root / "qa", SQUAD, progress=False).metrics
    assert hf["total"] == official["total"] == len(questions) and hf["f1"] != official["f1"]
    assert hf["qa_decoding"] == "hf"
    assert main(["evaluate", "--model", str(root / "qa"), "--data", str(SQUAD), "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["qa_decoding"] == "official"
    assert main(["predict", "--model", str(root / "qa"), "--input", str(root / "in.jsonl"), "--output", str(out),
                 "--no-progress", "--overwrite"]) == 0
    assert "(answers decoded the official way)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["predict", "--model", str(root / "qa"), "--input", str(root / "in.jsonl"), "--output", str(out),
              "--qa-decoding", "best", "--overwrite"])
    assert e.value.code == 2
    assert "--qa-decoding: invalid choice: 'best'" in capsys.readouterr().err


def test_wrong_decoding_options_are_one_line_errors(squad):
    from litebert.errors import ConfigError

    root, _ = squad
    pipe = litebert.pipeline("question-answering", model=root / "qa", device="cpu", decoding="official")
    with pytest.raises(ConfigError, match="^decoding = 'squad'"):
        pipe(question="Who?", context="Ahab hunted.", decoding="squad")
    with pytest.raises(ConfigError, match="^doc_stride = 0: the official decoding starts a window every"):
        pipe(question="Who?", context="Ahab hunted.", doc_stride=0)
    with pytest.raises(ConfigError, match="^qa_decoding = 'squad'"):
        litebert.predict(root / "qa", root / "in.jsonl", root / "x.jsonl", qa_decoding="squad")
    with pytest.raises(ConfigError, match="^aggregation_strategy = 'simple': entities are answered by token-"):
        litebert.predict(root / "qa", root / "in.jsonl", root / "x.jsonl", aggregation_strategy="simple")
    assert not (root / "x.jsonl").exists()
    assert json.loads((root / "qa" / "finetune.json").read_text())["preset"]["extra"]["decoding"] == "official"
