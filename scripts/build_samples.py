"""Build the sample shipped inside the package (src/litebert/samples/) from the bundled data (data/).

    python scripts/build_samples.py    # reads data/corpus and data/finetune/sentiment, writes src/litebert/samples

The sample lets the README's quickstart run from a wheel, outside a checkout (`litebert sample --out sample`,
`litebert.samples.corpus()`); it is an excerpt, chosen by fixed rules (no randomness beyond a fixed seed), so the output
is the same byte for byte from the same data/ files:

- corpus/moby_dick.txt.xz: Moby-Dick's first MOBY_DOCS documents (etymology, extracts, the first chapters);
- corpus/sotu.txt.xz: every SOTU_EVERY-th State of the Union address, 1790 to 2021;
- sentiment/{train,dev}.tsv.gz: the first TRAIN_ROWS / DEV_ROWS rows of data/finetune/sentiment's train / dev splits
  (already shuffled with a fixed seed by scripts/build_finetune_data.py), and examples.jsonl as it is.

Sources and licenses: data/README.md and data/finetune/README.md (public domain; MIT for the sentiment snippets).
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MOBY_DOCS = 40
SOTU_EVERY = 30
TRAIN_ROWS = 1500
DEV_ROWS = 500


def documents(path: Path) -> list[str]:
    """The documents of a corpus file in the official format (a blank line between documents)."""
    text = lzma.decompress(path.read_bytes()).decode("utf-8")
    return [d for d in text.split("\n\n") if d.strip()]


def write_xz(path: Path, docs: list[str]) -> None:
    path.write_bytes(lzma.compress(("\n\n".join(d.strip("\n") for d in docs) + "\n").encode("utf-8"),
                                   preset=9 | lzma.PRESET_EXTREME))


def write_gz(path: Path, lines: list[str]) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write("".join(lines).encode("utf-8"))


def head(path: Path, rows: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        lines = f.readlines()
    return lines[:rows + 1]  # the header line and the first rows


def build(data: Path, out: Path) -> None:
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    (out / "sentiment").mkdir(parents=True, exist_ok=True)
    write_xz(out / "corpus" / "moby_dick.txt.xz", documents(data / "corpus" / "moby_dick.txt.xz")[:MOBY_DOCS])
    write_xz(out / "corpus" / "sotu.txt.xz", documents(data / "corpus" / "sotu.txt.xz")[::SOTU_EVERY])
    sentiment = data / "finetune" / "sentiment"
    write_gz(out / "sentiment" / "train.tsv.gz", head(sentiment / "train.tsv.gz", TRAIN_ROWS))
    write_gz(out / "sentiment" / "dev.tsv.gz", head(sentiment / "dev.tsv.gz", DEV_ROWS))
    shutil.copyfile(sentiment / "examples.jsonl", out / "sentiment" / "examples.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO / "data"), help="the bundled data folder")
    parser.add_argument("--out", default=str(REPO / "src" / "litebert" / "samples"))
    args = parser.parse_args()
    build(Path(args.data), Path(args.out))
    for path in sorted(Path(args.out).rglob("*")):
        if path.is_file() and path.suffix != ".py":
            print(f"{path.relative_to(args.out)}  {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
