"""The demos' numbers in the docs, from the demos' own reports: one source for every figure a user reads.

    python scripts/demo_docs.py            # rewrite the generated blocks of README.md and docs/*.md
    python scripts/demo_docs.py --check    # exit 1, naming each, when a block or a claim disagrees with its report

The reports are the recorded runs in bench/results/: `make demo`'s report.json (CPU_REPORT) and the GPU demo's
demo.json (GPU_REPORT). A new recorded run: copy its report there and run this script. Two kinds of text come from
them: **blocks** (tables), between ``<!-- generated: NAME ... -->`` and ``<!-- end NAME -->`` lines, rewritten whole;
and **claims**, figures in prose (``held-out MLM 14.9%``), each checked to appear as written
(tests/scripts/test_demo_docs.py runs the check in the suite).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from demo_finetune import added_mark  # scripts/, beside this file

REPO = Path(__file__).resolve().parent.parent
CPU_REPORT = "bench/results/demo-cpu/report.json"
GPU_REPORT = "bench/results/h200-2026-11-28/demo.json"
SENTIMENT_NAMES = {"pretrained": "pretrained, fine-tuned", "from_scratch": "the same architecture from random weights "
                   "(control)", "bag_of_words": "bag of words: TF-IDF word 1-2-grams + logistic regression",
                   "majority": "majority class"}


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def rate(x: float) -> str:
    """A learning rate as the docs write it: 1e-4, 3e-5, 1.76e-3."""
    mantissa, exponent = f"{x:.6e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _rate(x: dict) -> str:
    """A rate tried, ``+`` before it when the grid added it beyond an edge dev picked."""
    return added_mark(x) + rate(x["lr"])


def _rates(r: dict) -> str:
    """Every rate tried with its dev accuracy, dev's choice in bold."""
    return ", ".join((f"**{_rate(x)}: {pct(x['dev_accuracy'])}**" if x["lr"] == r["lr"] else
                      f"{_rate(x)}: {pct(x['dev_accuracy'])}") for x in r["runs"])


def sentiment_table(s: dict) -> list[str]:
    """Dev and test accuracy of every model (best dev and test in bold) and each fine-tuning's rates."""
    best = {split: max(s[k][f"{split}_accuracy"] for k in SENTIMENT_NAMES if k in s) for split in ("dev", "test")}

    def cell(r: dict, split: str) -> str:
        v = pct(r[f"{split}_accuracy"])
        return f"**{v}**" if r[f"{split}_accuracy"] == best[split] else v

    rows = ["| sentiment (1,000 dev, 1,000 test) | dev | test | dev by rate (dev's choice in bold; + added beyond "
            "the grid's edge) |",
            "|---|---|---|---|"]
    for key, name in SENTIMENT_NAMES.items():
        r = s[key]
        extra = _rates(r) if "runs" in r else f"C = {r['C']:g}" if "C" in r else ""
        rows.append(f"| {name} | {cell(r, 'dev')} | {cell(r, 'test')} | {extra} |".replace("|  |", "| |"))
    return rows


def readme_sentiment(s: dict) -> list[str]:
    def grid(r):
        return ", ".join(_rate(x) for x in r["runs"])

    p, c, b, m = s["pretrained"], s["from_scratch"], s["bag_of_words"], s["majority"]
    return ["| | dev | test |", "|---|---|---|",
            f"| the demo's pretrained model, fine-tuned (lr {rate(p['lr'])} of {grid(p)}) | {pct(p['dev_accuracy'])} | "
            f"{pct(p['test_accuracy'])} |",
            f"| the same architecture from random weights (control; lr {rate(c['lr'])} of {grid(c)}) | "
            f"{pct(c['dev_accuracy'])} | {pct(c['test_accuracy'])} |",
            f"| bag of words: TF-IDF + logistic regression (C chosen on dev) | **{pct(b['dev_accuracy'])}** | "
            f"**{pct(b['test_accuracy'])}** |",
            f"| majority class | {pct(m['dev_accuracy'])} | {pct(m['test_accuracy'])} |"]


def label_point(r: dict) -> list[str]:
    """The demo's one point of the label-efficiency curve: dev and test of each model on N labelled snippets."""
    le = r["label_efficiency"]
    names = {"pretrained": "the demo's pretrained model", "control": "the same architecture from random weights",
             "bag_of_words": "bag of words"}
    best = {split: max(le[k][f"{split}_accuracy"] for k in names) for split in ("dev", "test")}

    def cell(k: str, split: str) -> str:
        v = pct(le[k][f"{split}_accuracy"])
        return f"**{v}**" if le[k][f"{split}_accuracy"] == best[split] else v

    return [f"| {le['examples']:,} labelled snippets (`--label-examples {le['examples']}`: seed {le['seed']}, "
            f"{le['steps']} steps a run) | dev | test |",
            "|---|---|---|", *(f"| {name} | {cell(k, 'dev')} | {cell(k, 'test')} |" for k, name in names.items())]


def cpu_heldout(r: dict) -> list[str]:
    f, b = r["final_eval"], r["baselines"]
    piece = r["mlm_most_frequent_piece"].replace("\u2581", "▁")
    return ["| held-out | demo | baseline |", "|---|---|---|",
            f"| MLM accuracy | **{pct(f['mlm_accuracy'])}** | {pct(b['mlm_most_frequent'])} always \"{piece}\"; "
            f"{100 * b['mlm_uniform']:.3f}% uniform |",
            f"| MLM loss | **{f['mlm_loss']:.2f}** | {-math.log(b['mlm_uniform']):.2f} = ln "
            f"{round(1 / b['mlm_uniform']):,} uniform"
            + (f"; {r['unigram_entropy']:.2f} = H1, the unigram entropy |" if "unigram_entropy" in r else " |"),
            f"| SOP accuracy ({f['examples']} pairs) | {pct(f['sop_accuracy'])} (loss {f['sop_loss']:.3f}) | "
            f"{pct(b['sop_majority'])} majority label; ln 2 = 0.693 |"]


def gpu_heldout(r: dict) -> list[str]:
    f, b, pc = r["final_eval"], r["baselines"], r["plateau_check"]
    return [f"| held-out ({f['examples']:,} sequences) | GPU demo | baseline |", "|---|---|---|",
            f"| MLM accuracy | **{pct(f['mlm_accuracy'])}** | {pct(b['mlm_most_frequent'])} always the most "
            "frequent piece |",
            f"| MLM loss | {f['mlm_loss']:.2f} | H1 = {pc['unigram_entropy']:.2f}, the unigram entropy of the masked "
            "targets |",
            f"| SOP accuracy | {pct(f['sop_accuracy'])} | {pct(b['sop_majority'])} majority label |"]


def blocks(cpu: dict, gpu: dict) -> dict[str, list[str]]:
    return {"cpu-readme-sentiment": readme_sentiment(cpu["sentiment"]), "cpu-heldout": cpu_heldout(cpu),
            "cpu-label-point": label_point(cpu),
            "cpu-sentiment": sentiment_table(cpu["sentiment"]), "gpu-heldout": gpu_heldout(gpu),
            "gpu-sentiment": sentiment_table(gpu["sentiment"])}


def claims(cpu: dict, gpu: dict) -> dict[str, list[str]]:
    """Figures in prose, by file: each string must appear there as written."""
    gs = gpu["sentiment"]
    cpu_mlm, gpu_mlm, gpu_sop = (pct(cpu["final_eval"]["mlm_accuracy"]), pct(gpu["final_eval"]["mlm_accuracy"]),
                                 pct(gpu["final_eval"]["sop_accuracy"]))
    gpu_pair = f"{pct(gs['pretrained']['test_accuracy'])} test beside the control's " \
               f"{pct(gs['from_scratch']['test_accuracy'])}"
    p, c = gs["pretrained"], gs["from_scratch"]
    gpu_row = (f"pretrained **{pct(p['test_accuracy'])}** (dev {pct(p['dev_accuracy'])}, lr {rate(p['lr'])}) vs "
               f"from-scratch control {pct(c['test_accuracy'])} (dev {pct(c['dev_accuracy'])}, lr {rate(c['lr'])}); "
               f"bag of words {pct(gs['bag_of_words']['test_accuracy'])}")
    return {
        "README.md": [f"held-out MLM {cpu_mlm}", f"MLM {gpu_mlm} and SOP {gpu_sop}", gpu_pair],
        "docs/pretraining.md": [f"({cpu_mlm} of masked pieces right",
                                f"in {cpu['elapsed_s'] / 60:.1f} minutes of training",
                                f"{cpu['seconds'] / 60:.1f} minutes in all for the recorded run",
                                f"{gpu['step']:,} steps ({gpu['tokens_seen'] / 1e6:.0f}M tokens)",
                                f"{gpu_mlm} held-out MLM and SOP {gpu_sop}"],
        "docs/GPU.md": [f"held-out MLM {gpu_mlm}, SOP {gpu_sop}", gpu_row],
    }


FILES = ("README.md", "docs/pretraining.md", "docs/GPU.md")
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+)[^\n]*-->\n)(?P<body>.*?)(<!-- end (?P=name) -->)", re.S)


def render(text: str, made: dict[str, list[str]]) -> tuple[str, list[str]]:
    """``text`` with every generated block rewritten; the names of blocks it holds."""
    seen = []

    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in made:
            raise SystemExit(f"demo_docs: unknown block {name!r}; known: {', '.join(made)}")
        seen.append(name)
        return m.group(1) + "\n".join(made[name]) + "\n" + m.group(4)

    return _BLOCK.sub(one, text), seen


def load(root: Path = REPO) -> tuple[dict, dict]:
    return (json.loads((root / CPU_REPORT).read_text()), json.loads((root / GPU_REPORT).read_text()))


def problems(root: Path = REPO) -> list[str]:
    """What disagrees with the reports: stale or missing blocks, claims not found."""
    cpu, gpu = load(root)
    made, said = blocks(cpu, gpu), claims(cpu, gpu)
    out, placed = [], []
    for name in FILES:
        text = (root / name).read_text(encoding="utf-8")
        new, seen = render(text, made)
        placed += seen
        if new != text:
            out.append(f"{name}: a generated block differs from its report (run scripts/demo_docs.py)")
        out += [f"{name}: does not say {c!r}" for c in said.get(name, []) if c not in text]
    out += [f"block {b!r} appears in none of {', '.join(FILES)}" for b in made if b not in placed]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when anything disagrees")
    args = ap.parse_args(argv)
    if not args.check:
        cpu, gpu = load()
        made = blocks(cpu, gpu)
        for name in FILES:
            path = REPO / name
            path.write_text(render(path.read_text(encoding="utf-8"), made)[0], encoding="utf-8")
    found = problems()
    for p in found:
        print(p, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
