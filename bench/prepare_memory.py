"""Peak memory of `litebert data prepare` against the size and the shape of its input: a corpus in the official
format (documents separated by blank lines) of growing size, the same text without a blank line (one document of the
whole corpus), and one endless line in a small ``.zst``. Each run is the command line in a fresh process (one
worker) under an address-space limit, so that a run without a bound fails instead of exhausting the machine; its
peak RSS is the kernel's (``wait4``).

    .venv/bin/python bench/prepare_memory.py [--sizes-mb 12 24 48] [--line-mb 8 100 500] [--src OTHER/src]

``--src`` runs another checkout's ``src`` (the code before a change, say) on the same inputs. Results go to
bench/results/prepare_memory*.json; docs/data.md ("Memory") quotes them.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB = ROOT / "data" / "albert-30k" / "spiece.model"
CORPUS = [ROOT / "data" / "corpus" / "sotu.txt.xz", ROOT / "data" / "corpus" / "moby_dick.txt.xz"]


def corpus_text(blank_lines: bool) -> bytes:
    """The bundled public-domain corpus, a sentence a line; documents separated by a blank line, or by none."""
    text = b"".join(lzma.decompress(p.read_bytes()).rstrip(b"\n") + b"\n\n" for p in CORPUS)
    if not blank_lines:
        text = b"\n".join(line for line in text.split(b"\n") if line.strip()) + b"\n"
    return text


def write_corpus(path: Path, size_mb: int, blank_lines: bool) -> int:
    """The bundled corpus (12 MB) repeated as often as it fits in ``size_mb`` MB, once at least; returns the bytes
    written."""
    text = corpus_text(blank_lines)
    written = 0
    with open(path, "wb") as f:
        while written == 0 or written + len(text) <= size_mb * 1e6:
            f.write(text)
            written += len(text)
    return written


def write_endless_line(path: Path, size_mb: float) -> int:
    """``size_mb`` MB of words without a line break, zstd-compressed (a few kB); returns the decompressed bytes."""
    import zstandard

    chunk = b"word " * (1 << 18)
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as z:
        for _ in range(int(size_mb * 1e6) // len(chunk)):
            z.write(chunk)
    return int(size_mb * 1e6) // len(chunk) * len(chunk)


def prepare(src: Path, out: Path, code: Path, limit_gb: float) -> dict:
    """`litebert data prepare` of ``src`` with the code of ``code``: peak RSS, seconds, exit status, last line."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    limit = int(limit_gb * (1 << 30))

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, "-m", "litebert.cli", "data", "prepare", "--input", str(src), "--tokenizer", str(VOCAB),
           "--out", str(out), "--no-progress", "--overwrite"]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, preexec_fn=cap, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = p.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in output.splitlines() if line.strip()]
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "seconds": round(time.perf_counter() - t, 1),
            "exit": p.returncode, "said": (lines[-1] if lines else "")[:300]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[12, 24, 48, 96],
                    help="corpus sizes (the bundled corpus, 12 MB, repeated)")
    ap.add_argument("--line-mb", type=float, nargs="+", default=[8, 100, 500],
                    help="sizes of the endless line (8: just under the default --max-line-bytes, read)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the litebert source tree to run")
    ap.add_argument("--limit-gb", type=float, default=4.0, help="address-space limit of each run")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "prepare_memory.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = [("official format", lambda p, mb=mb: write_corpus(p, mb, True), ".txt") for mb in args.sizes_mb]
        cases += [("no blank line (one document)", lambda p, mb=mb: write_corpus(p, mb, False), ".txt")
                  for mb in args.sizes_mb]
        cases += [("one line, in a .zst", lambda p, mb=mb: write_endless_line(p, mb), ".zst") for mb in args.line_mb]
        for name, make, suffix in cases:
            src = tmp / f"input{suffix}"
            size = make(src)
            r = {"input": name, "input_mb": round(size / 1e6, 1), "file_kb": round(src.stat().st_size / 1e3, 1),
                 **prepare(src, tmp / "store", args.src, args.limit_gb)}
            src.unlink()
            rows.append(r)
            print(json.dumps(r), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"src": str(args.src), "limit_gb": args.limit_gb, "python": sys.version.split()[0],
                                    "machine": platform.machine(), "cpus": os.cpu_count(), "runs": rows},
                                   indent=1) + "\n")
    print("\n| input | text MB | file kB | peak RSS MB | seconds | exit |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['input']} | {r['input_mb']} | {r['file_kb']} | {r['peak_rss_mb']} | {r['seconds']} | "
              f"{r['exit']} |")


if __name__ == "__main__":
    main()
