"""Shared by the benchmark scripts: the machine description and section-wise updates of docs/BENCHMARKS.md.

Each benchmark owns one section, delimited by ``<!-- bench:NAME -->`` ... ``<!-- /bench:NAME -->``, so scripts can be
re-run independently without clobbering each other's results.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"
HEADER = ("# Benchmarks\n\nWritten by the scripts in `bench/` (`make bench` runs them all). "
          "Each section names its script.\n")


def machine() -> str:
    """One line describing this machine and the software versions measured."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"Python {platform.python_version()}")


def write_section(name: str, markdown: str, doc: Path = DOC) -> None:
    """Replace (or append) the section NAME of docs/BENCHMARKS.md with MARKDOWN, atomically."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = doc.read_text() if doc.exists() else HEADER
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    tmp = doc.with_suffix(".md.tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)
