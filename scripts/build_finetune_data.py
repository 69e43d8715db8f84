"""Rebuild data/finetune/ from two source archives on PyPI, byte for byte (fixed seeds, gzip mtime 0).

    python scripts/build_finetune_data.py [--vader vaderSentiment-3.3.2.tar.gz] [--bigbench bigbench-1.0.0.tar.gz]

Archives not given are fetched with ``pip download --no-deps --no-binary :all:`` into a temporary folder.
See data/finetune/README.md for what each file is, its source and its license.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "data" / "finetune"
SEED = 20200426  # ALBERT's ICLR 2020 date; any fixed number would do


def fetch(spec: str, dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", spec,
                    "-d", str(dest)], check=True)
    name = spec.replace("==", "-")
    (path,) = [p for p in dest.iterdir() if p.name.lower().startswith(name.lower()) and p.name.endswith(".tar.gz")]
    return path


def write_gz(path: Path, text: str) -> None:
    """Deterministic gzip (mtime 0, no file name), written atomically."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as g:
        g.write(text.encode("utf-8"))
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, path)
    print(f"{path.relative_to(OUT.parent.parent)}: {len(text.encode()):,} bytes -> {len(buf.getvalue()):,} gzipped")


def sentiment(vader_sdist: Path) -> None:
    """The 10,605 Rotten Tomatoes snippets (Hutto & Gilbert 2014) -> binary SST-2-style TSVs.

    label 1 if the mean human rating (-4..4) is > 0, 0 if < 0; the 37 snippets rated exactly 0 are dropped, like
    SST-2 drops neutral sentences. Split 8,568 train / 1,000 dev / 1,000 test, shuffled with SEED.
    """
    with tarfile.open(vader_sdist) as outer:
        inner_bytes = outer.extractfile("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(inner_bytes)) as inner:
        raw = inner.extractfile("hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt").read().decode("utf-8")
    rows = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        _id, score, text = line.split("\t", 2)
        score = float(score)
        text = " ".join(text.split())  # no tabs/newlines inside a TSV field
        if score != 0.0:
            rows.append((int(_id), text, int(score > 0), score))
    assert len(rows) == 10605 - 37, len(rows)
    order = np.random.default_rng(SEED).permutation(len(rows))
    parts = {"dev": order[:1000], "test": order[1000:2000], "train": order[2000:]}
    for split, idx in parts.items():
        body = "".join(f"{rows[i][1]}\t{rows[i][2]}\t{rows[i][3]:.4f}\t{rows[i][0]}\n" for i in idx)
        write_gz(OUT / f"sentiment/{split}.tsv.gz", "sentence\tlabel\tscore\tid\n" + body)


def _task(bb: tarfile.TarFile, name: str) -> list[dict]:
    return json.load(bb.extractfile(f"bigbench-1.0.0/bigbench/benchmark_tasks/{name}/task.json"))["examples"]


def disfl_qa(bb: tarfile.TarFile) -> None:
    """BIG-bench disfl_qa (disfluent questions over SQuAD v2 paragraphs) -> SQuAD v2.0 JSON.

    Target "unknown" -> is_impossible. An answer must occur verbatim in the (tokenized) context; answer_start is its
    first occurrence. 1,200 answerable + 400 unanswerable questions, split by paragraph 80/20 (no paragraph in both).
    """
    rng = np.random.default_rng(SEED + 1)
    answerable, impossible = [], []
    for i, e in enumerate(_task(bb, "disfl_qa")):
        question, context = e["input"].split("\ncontext: ", 1)
        question, context, target = " ".join(question.split()), context.strip(), e["target"]
        if target == "unknown":
            impossible.append((i, question, context, None))
        elif context.find(target) >= 0:
            answerable.append((i, question, context, target))
    pick = [answerable[j] for j in rng.choice(len(answerable), 1200, replace=False)]
    pick += [impossible[j] for j in rng.choice(len(impossible), 400, replace=False)]
    by_context = defaultdict(list)
    for item in sorted(pick):
        by_context[item[2]].append(item)
    contexts = sorted(by_context)
    order = rng.permutation(len(contexts))
    n_dev = len(contexts) // 5
    for split, idx in (("dev", order[:n_dev]), ("train", order[n_dev:])):
        paragraphs = []
        for c in sorted(idx):
            qas = []
            for i, q, ctx, t in by_context[contexts[c]]:
                qa = {"id": f"disfl_qa-{i}", "question": q, "is_impossible": t is None,
                      "answers": [] if t is None else [{"text": t, "answer_start": ctx.find(t)}]}
                qas.append(qa)
            paragraphs.append({"context": contexts[c], "qas": qas})
        doc = {"version": "v2.0", "source": "BIG-bench 1.0.0 disfl_qa (see data/finetune/README.md)",
               "data": [{"title": "disfl_qa", "paragraphs": paragraphs}]}
        write_gz(OUT / f"squad/disfl_qa_{split}.json.gz", json.dumps(doc, ensure_ascii=False, indent=0))


def social_iqa(bb: tarfile.TarFile) -> None:
    """BIG-bench social_iqa -> generic multiple-choice JSONL (3 choices; the 4 two-choice items dropped), 80/20
    split."""
    rng = np.random.default_rng(SEED + 2)
    items = []
    for i, e in enumerate(_task(bb, "social_iqa")):
        choices = list(e["target_scores"])
        if len(choices) != 3:
            continue
        label = max(range(3), key=lambda k: e["target_scores"][choices[k]])
        items.append({"id": f"social_iqa-{i}", "context": "", "question": e["input"].strip(), "choices": choices,
                      "label": label})
    order = rng.permutation(len(items))
    n_dev = len(items) // 5
    for split, idx in (("dev", order[:n_dev]), ("train", order[n_dev:])):
        write_gz(OUT / f"mc/social_iqa_{split}.jsonl.gz",
                 "".join(json.dumps(items[j], ensure_ascii=False) + "\n" for j in sorted(idx)))


def question_selection(bb: tarfile.TarFile) -> None:
    """BIG-bench question_selection -> RACE-format JSON: which of 4 questions has the given short answer.

    Items with at least 4 candidate questions keep the right one and 3 distractors drawn with the seed; the options
    are shuffled (in the source the right question always comes first).
    """
    rng = np.random.default_rng(SEED + 3)
    out = []
    for i, e in enumerate(_task(bb, "question_selection")):
        scores = e["target_scores"]
        if len(scores) < 4:
            continue
        right = max(scores, key=scores.get)
        wrong = [q for q in scores if q != right]
        options = [right] + [wrong[j] for j in rng.choice(len(wrong), 3, replace=False)]
        options = [options[j] for j in rng.permutation(4)]
        answer, context = e["input"].split(" Context: ", 1)
        answer = answer.removeprefix("Short Answer: ")
        out.append({"id": f"question_selection-{i}", "article": context,
                    "questions": [f"Which question has the answer \"{answer}\"?"], "options": [options],
                    "answers": ["ABCD"[options.index(right)]]})
    write_gz(OUT / "race/question_selection.json.gz", json.dumps(out, ensure_ascii=False, indent=0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vader", type=Path, help="vaderSentiment-3.3.2.tar.gz (fetched from PyPI if omitted)")
    ap.add_argument("--bigbench", type=Path, help="bigbench-1.0.0.tar.gz (fetched from PyPI if omitted)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vader = args.vader or fetch("vaderSentiment==3.3.2", Path(tmp))
        bigbench = args.bigbench or fetch("bigbench==1.0.0", Path(tmp))
        for sub in ("sentiment", "squad", "mc", "race"):
            (OUT / sub).mkdir(parents=True, exist_ok=True)
        sentiment(vader)
        with tarfile.open(bigbench) as bb:
            disfl_qa(bb)
            social_iqa(bb)
            question_selection(bb)


if __name__ == "__main__":
    main()
