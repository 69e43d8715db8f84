"""Every code block of the docs runs as written after the README, or says what it needs.

The convention (stated for writers in README's "Documentation" section):
- A fenced ```bash or ```python block is code: the slow test below runs it, in a scratch folder holding copies of
  `data/` and `tests/fixtures/tf` where the README's "Command line" block has already run (it made runs/tok,
  runs/store, runs/tiny, runs/sentiment, ...), with `.venv/bin` first on PATH. The docs run in the order of the
  README's documentation table, each in its blocks' order, so a block may use what an earlier one made.
- A code block is not run when the line right before its opening fence is `<!-- not run: REASON -->`, REASON naming
  what it needs (a CUDA GPU, the network, several GPUs under torchrun, your own corpus, hours on 2 cores, ...) or
  that it is a synopsis. Such a block is still checked for syntax (`bash -n`, `compile`).
- A code block is quick when the line right before its opening fence is `<!-- quick -->`: it takes seconds and needs
  nothing but a copy of `data/` (nothing an earlier block made). The default run (`make test`) runs each quick block
  in a scratch folder of its own (test_quick_blocks_run_as_written); the slow test leaves them to it.
- Blocks of any other language (a plain ``` fence, output listings, folder layouts) are not code and not run.
- A python block whose lines start with `>>>` is a doctest: its shown output is checked.
- A bash block runs line by line (a line ending in `\\` continues on the next); a python block runs as one script.

The README's "Command line" and "Python API" blocks are tested by test_readme.py; this file checks its other blocks.
"""

import doctest
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^( {0,3})(`{3,})([^`]*)$")  # CommonMark: an info string holds no backtick
NOT_RUN = re.compile(r"^<!-- not run: (.*\S.*?) -->$")
QUICK = "<!-- quick -->"
README_TESTED = ("Command line", "Python API")  # test_readme.py runs these sections' blocks


@dataclass
class Block:
    doc: str  # path from the repository root
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    section: str  # the "## " heading above it
    reason: str | None  # the `not run` annotation's reason
    quick: bool = False  # annotated `<!-- quick -->`: the default run runs it

    @property
    def doctest(self) -> bool:
        return self.language == "python" and self.code.lstrip().startswith(">>>")


def parse(doc: str) -> tuple[list[Block], list[str]]:
    """The fenced blocks of ``doc`` and the problems of its annotations (one not right before a code block)."""
    lines = (REPO / doc).read_text(encoding="utf-8").splitlines()
    blocks, problems, section, k = [], [], "", 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("## "):
            section = line[3:].strip()
        if re.match(r"\s*<!--\s*(not run|quick)", line):  # an annotation, or one meant to be
            after = lines[k + 1] if k + 1 < len(lines) else ""
            opens = FENCE.match(after)
            if not (NOT_RUN.match(line.strip()) or line.strip() == QUICK):
                problems.append(f"{doc}:{k + 1}: write the annotation as `<!-- not run: REASON -->` or "
                                f"`{QUICK}`: {line.strip()}")
            elif not (opens and opens.group(3).strip() in ("bash", "python")):
                problems.append(f"{doc}:{k + 1}: the annotation is not right before a ```bash or ```python fence")
        opens = FENCE.match(line)
        if not opens:
            k += 1
            continue
        indent, ticks, language = len(opens.group(1)), opens.group(2), opens.group(3).strip()
        end = k + 1
        while end < len(lines) and not re.match(rf"^ {{0,3}}{ticks}`*\s*$", lines[end]):
            end += 1
        assert end < len(lines), f"{doc}:{k + 1}: a fence that is never closed"
        body = "\n".join(text[min(indent, len(text) - len(text.lstrip(" "))):] for text in lines[k + 1:end])
        annotation = NOT_RUN.match(lines[k - 1].strip()) if k else None
        quick = bool(k) and lines[k - 1].strip() == QUICK and language in ("bash", "python")
        blocks.append(Block(doc, k + 1, language, body + "\n", section, annotation and annotation.group(1), quick))
        k = end + 1
    return blocks, problems


def documentation_order() -> list[str]:
    """docs/*.md in the order of the README's documentation table."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Documentation"):].split("\n## ")[0]
    return [d for d in re.findall(r"^\| \[(docs/[^\]]+\.md)\]", table, re.M)]


def all_blocks() -> list[Block]:
    found = [b for b in parse("README.md")[0] if b.section not in README_TESTED]
    for doc in documentation_order():
        found += parse(doc)[0]
    return found


def bash_commands(code: str, first_line: int) -> list[tuple[int, str]]:
    """A bash block's commands with the line each starts on: a line, with the next ones while it ends in ``\\`` or
    leaves a quote open (as bash reads it: ``bash -n`` accepts the lines joined); blank and comment lines left out."""
    commands, pending, start = [], [], 0
    for k, line in enumerate(code.splitlines()):
        if not pending:
            start = first_line + 1 + k
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        pending.append(line)
        text = "\n".join(pending)
        if line.rstrip().endswith("\\") or subprocess.run(["bash", "-n"], input=text, capture_output=True,
                                                          text=True).returncode:
            continue
        commands.append((start, text))
        pending = []
    assert not pending, f"line {start}: a command that never ends"
    return commands


# --------------------------------------------------------------------------------------------------- fast checks
def test_every_doc_is_in_the_documentation_table():
    listed = documentation_order()
    assert sorted(listed) == sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))


def test_annotations_sit_right_before_a_code_block():
    problems = [p for doc in ["README.md", *documentation_order()] for p in parse(doc)[1]]
    assert not problems, "\n".join(problems)


def test_every_code_block_is_annotated_or_valid():
    code = [b for b in all_blocks() if b.language in ("bash", "python")]
    assert len(code) > 40, len(code)  # the parser found the docs' blocks
    assert sum(b.reason is None for b in code) >= 10  # and the convention leaves most examples to run
    bad = []
    for b in code:
        where = f"{b.doc}:{b.line}"
        if b.language == "bash":
            done = subprocess.run(["bash", "-n"], input=b.code, capture_output=True, text=True)
            if done.returncode:
                bad.append(f"{where}: bash -n: {done.stderr.strip()}")
        elif b.doctest:
            for example in doctest.DocTestParser().get_examples(b.code):
                try:
                    compile(example.source, where, "single")
                except SyntaxError as e:
                    bad.append(f"{where}: {e}")
        else:
            try:
                compile(b.code, where, "exec")
            except SyntaxError as e:
                bad.append(f"{where}: {e}")
    assert not bad, "\n".join(bad)


def test_quick_annotations_are_read_and_checked(tmp_path, monkeypatch):
    (tmp_path / "x.md").write_text("<!-- quick -->\n```bash\ntrue\n```\n\n<!-- quick: soon -->\n```bash\ntrue\n```\n"
                                   "<!-- quick -->\n```\nout\n```\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    blocks, problems = parse("x.md")
    assert [b.quick for b in blocks] == [True, False, False]
    assert [p.split(": ")[0] for p in problems] == ["x.md:6", "x.md:10"]


def test_bash_commands_span_continuations_and_open_quotes():
    code = "# a comment\nlitebert a \\\n    --b 1\n\necho '{\"x\": 1,\n  \"y\": 2}' > c.json\nlitebert c\n"
    assert bash_commands(code, 10) == [(12, "litebert a \\\n    --b 1"),
                                       (15, "echo '{\"x\": 1,\n  \"y\": 2}' > c.json"),
                                       (17, "litebert c")]


# ---------------------------------------------------------------------------------------------------- the run
def _run(command: list[str], cwd: Path, env: dict, where: str, shown: str):
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{where}: {shown}\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"


def scratch(folder: Path, parts=("data", "tests/fixtures/tf")) -> dict:
    """Copy ``parts`` of the checkout into ``folder`` and return the environment the blocks run in: the running
    Python's bin/ first on PATH (what `source .venv/bin/activate` does), one thread, PYTHONPATH made absolute."""
    for part in parts:
        shutil.copytree(REPO / part, folder / part)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1"}
    if env.get("PYTHONPATH"):  # PYTHONPATH=src names this checkout's src/ in the scratch folder too
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


def run_block(b: Block, folder: Path, env: dict):
    """Run one code block in ``folder`` as the docs say: bash line by line, a doctest in this process (in
    ``folder``), any other python block as a script."""
    if b.language == "bash":
        for line, command in bash_commands(b.code, b.line):
            _run(["bash", "-c", command], folder, env, f"{b.doc}:{line}", command)
    elif b.doctest:
        test = doctest.DocTestParser().get_doctest(b.code, {}, b.doc, b.doc, b.line)
        report = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        before = os.getcwd()
        os.chdir(folder)
        try:
            runner.run(test, out=report.append)
        finally:
            os.chdir(before)
        assert not runner.failures, f"{b.doc}:{b.line}:\n" + "".join(report)[-3000:]
    else:
        script = folder / f"{Path(b.doc).stem}_{b.line}.py"
        script.write_text(b.code, encoding="utf-8")
        _run([sys.executable, script.name], folder, env, f"{b.doc}:{b.line}", f"python {script.name}")


QUICK_BLOCKS = [b for b in all_blocks() if b.quick]


def test_quick_blocks_are_a_handful_of_runnable_code():
    assert 4 <= len(QUICK_BLOCKS) <= 20, [f"{b.doc}:{b.line}" for b in QUICK_BLOCKS]
    assert all(b.language in ("bash", "python") and b.reason is None for b in QUICK_BLOCKS)


@pytest.mark.parametrize("b", QUICK_BLOCKS, ids=[f"{b.doc}:{b.line}" for b in QUICK_BLOCKS])
def test_quick_blocks_run_as_written(b, tmp_path):
    run_block(b, tmp_path, scratch(tmp_path, ("data",)))


def test_a_broken_quick_block_fails_its_run(tmp_path):
    env = scratch(tmp_path, ())
    for code in ("true\nfalse\n", "import litebert\nraise SystemExit(3)\n", ">>> 1 + 1\n3\n"):
        language = "bash" if "true" in code else "python"
        with pytest.raises(AssertionError, match="docs/x.md"):
            run_block(Block("docs/x.md", 1, language, code, "", None, True), tmp_path, env)


@pytest.mark.slow
def test_docs_blocks_run_as_written_after_the_readme(tmp_path):
    env = scratch(tmp_path)
    readme = [b for b in parse("README.md")[0] if b.section == "Command line" and b.language == "bash"]
    assert len(readme) == 2 and readme[0].code.startswith("litebert sample --out sample")  # the quickstart, the clone's
    for block in readme:
        for line, command in bash_commands(block.code, block.line):
            _run(["bash", "-c", command], tmp_path, env, f"README.md:{line}", command)
    failed = []  # every block is tried, so that one run names every block that fails, not only the first
    for b in all_blocks():  # the quick ones run in the default run (test_quick_blocks_run_as_written)
        if b.reason is None and not b.quick and b.language in ("bash", "python"):
            try:
                run_block(b, tmp_path, env)
            except AssertionError as e:
                failed.append(str(e))
    assert not failed, f"{len(failed)} block(s) failed:\n\n" + "\n\n".join(failed)
