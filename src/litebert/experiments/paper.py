"""The paper's own numbers for each experiment (Lan et al., ICLR 2020, Tables 2-5), printed under every results.md
so that a run is read beside what it reproduces.

All rows are ALBERT-base-shaped models (H = 768, 12 layers, 12 heads) unless named otherwise, pretrained for 125k
steps of 4096 x 512 tokens on BookCorpus and English Wikipedia with LAMB; scores are dev-set accuracies (SQuAD: F1/EM).
The paper's Avg is the mean of its five downstream scores, each SQuAD counting as the mean of its F1 and EM.
"""

from __future__ import annotations

from dataclasses import dataclass

SETUP = ("ALBERT-base shape (H = 768, 12 layers) unless named, 125k steps of 4096 x 512 tokens on BookCorpus + "
         "Wikipedia, dev scores")
DOWNSTREAM = ("SQuAD1.1", "SQuAD2.0", "MNLI", "SST-2", "RACE")


@dataclass(frozen=True)
class Row:
    name: str
    parameters: str  # as printed ("12M")
    squad1: tuple[float, float]  # F1, EM
    squad2: tuple[float, float]
    mnli: float
    sst2: float
    race: float
    avg: float  # as printed
    intrinsic: tuple[float, float, float] | None = None  # MLM, NSP, SOP accuracy (Table 5 only)
    speedup: str | None = None  # Table 2 only, relative to BERT-large

    def computed_avg(self) -> float:
        return (sum(self.squad1) / 2 + sum(self.squad2) / 2 + self.mnli + self.sst2 + self.race) / 5


@dataclass(frozen=True)
class Table:
    number: int
    caption: str
    rows: tuple[Row, ...]
    note: str = ""


TABLES: dict[str, Table] = {
    "speedup": Table(2, "Dev set results and training speedup relative to BERT-large (same number of TPUs)", (
        Row("BERT-base", "108M", (90.4, 83.2), (80.4, 77.6), 84.5, 92.8, 68.2, 82.3, speedup="4.7x"),
        Row("BERT-large", "334M", (92.2, 85.5), (85.0, 82.2), 86.6, 93.0, 73.9, 85.2, speedup="1.0"),
        Row("ALBERT-base", "12M", (89.3, 82.3), (80.0, 77.1), 81.6, 90.3, 64.0, 80.1, speedup="5.6x"),
        Row("ALBERT-large", "18M", (90.6, 83.9), (82.3, 79.4), 83.5, 91.7, 68.5, 82.4, speedup="1.7x"),
        Row("ALBERT-xlarge", "60M", (92.5, 86.1), (86.1, 83.1), 86.4, 92.4, 74.8, 85.5, speedup="0.6x"),
        Row("ALBERT-xxlarge", "235M", (94.1, 88.3), (88.1, 85.1), 88.0, 95.2, 82.3, 88.7, speedup="0.3x"),
    ), "The paper's speedup is data throughput in its data-parallel TPU training, where gradients are all-reduced."),
    "embedding-size": Table(3, "The effect of the vocabulary embedding size E (ALBERT-base)", (
        Row("not-shared E64", "87M", (89.9, 82.9), (80.1, 77.8), 82.9, 91.5, 66.7, 81.3),
        Row("not-shared E128", "89M", (89.9, 82.8), (80.3, 77.3), 83.7, 91.5, 67.9, 81.7),
        Row("not-shared E256", "93M", (90.2, 83.2), (80.3, 77.4), 84.1, 91.9, 67.3, 81.8),
        Row("not-shared E768", "108M", (90.4, 83.2), (80.4, 77.6), 84.5, 92.8, 68.2, 82.3),
        Row("all-shared E64", "10M", (88.7, 81.4), (77.5, 74.8), 80.8, 89.4, 63.5, 79.0),
        Row("all-shared E128", "12M", (89.3, 82.3), (80.0, 77.1), 81.6, 90.3, 64.0, 80.1),
        Row("all-shared E256", "16M", (88.8, 81.5), (79.1, 76.3), 81.5, 90.3, 63.4, 79.6),
        Row("all-shared E768", "31M", (88.6, 81.5), (79.2, 76.6), 82.0, 90.6, 63.3, 79.8),
    ), "The paper's E = 64 .. 768 at H = 768 are H/12 .. H."),
    "sharing": Table(4, "Cross-layer parameter-sharing strategies (ALBERT-base)", (
        Row("E768 all-shared", "31M", (88.6, 81.5), (79.2, 76.6), 82.0, 90.6, 63.3, 79.8),
        Row("E768 shared-attention", "83M", (89.9, 82.7), (80.0, 77.2), 84.0, 91.4, 67.7, 81.6),
        Row("E768 shared-FFN", "57M", (89.2, 82.1), (78.2, 75.4), 81.5, 90.8, 62.6, 79.5),
        Row("E768 not-shared", "108M", (90.4, 83.2), (80.4, 77.6), 84.5, 92.8, 68.2, 82.3),
        Row("E128 all-shared", "12M", (89.3, 82.3), (80.0, 77.1), 82.0, 90.3, 64.0, 80.1),
        Row("E128 shared-attention", "64M", (89.9, 82.8), (80.7, 77.9), 83.4, 91.9, 67.6, 81.7),
        Row("E128 shared-FFN", "38M", (88.9, 81.6), (78.6, 75.6), 82.3, 91.7, 64.4, 80.2),
        Row("E128 not-shared", "89M", (89.9, 82.8), (80.3, 77.3), 83.2, 91.5, 67.9, 81.6),
    ), "The paper's E = 768 = H and E = 128 = H/6."),
    "sentence-objective": Table(5, "The sentence-level objective: intrinsic (MLM, NSP, SOP) and downstream accuracy "
                                   "(ALBERT-base, all-shared, E = 128)", (
        Row("None", "12M", (88.6, 81.5), (78.1, 75.3), 81.5, 89.9, 61.7, 79.0, intrinsic=(54.9, 52.4, 53.3)),
        Row("NSP", "12M", (88.4, 81.5), (77.2, 74.6), 81.6, 91.1, 62.3, 79.2, intrinsic=(54.5, 90.5, 52.0)),
        Row("SOP", "12M", (89.3, 82.3), (80.0, 77.1), 82.0, 90.3, 64.0, 80.1, intrinsic=(54.0, 78.9, 86.5)),
    )),
}


def markdown(experiment: str) -> str:
    """The paper's table for ``experiment`` as Markdown lines to print under a run's own table ("" if none)."""
    table = TABLES.get(experiment)
    if table is None:
        return ""
    intrinsic = any(r.intrinsic for r in table.rows)
    speedup = any(r.speedup for r in table.rows)
    head = ["Model", "Parameters"] + (["MLM", "NSP", "SOP"] if intrinsic else []) + list(DOWNSTREAM) + ["Avg"]
    head += ["Speedup"] if speedup else []
    lines = [f"## The paper's Table {table.number}", "",
             f"{table.caption}. {SETUP}. Sentiment here is the closest bundled counterpart of SST-2, and MC (3-choice "
             f"Social IQa) of RACE (4-choice reading comprehension). {table.note}".rstrip(), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.rows:
        cells = [r.name, r.parameters] + ([f"{v:.1f}" for v in r.intrinsic] if intrinsic else [])
        cells += [f"{r.squad1[0]:.1f}/{r.squad1[1]:.1f}", f"{r.squad2[0]:.1f}/{r.squad2[1]:.1f}", f"{r.mnli:.1f}",
                  f"{r.sst2:.1f}", f"{r.race:.1f}", f"{r.avg:.1f}"]
        cells += [r.speedup or "-"] if speedup else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
