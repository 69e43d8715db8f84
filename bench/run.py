"""`make bench`: every benchmark in one run; each writes its own section of docs/BENCHMARKS.md.

    .venv/bin/python bench/run.py [--only model,tokenizer,data,finetune,kernels] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "model": "bench_model.py",  # the pretraining step, inference and memory vs HF transformers
    "tokenizer": "bench_tokenizer.py",  # batch encoding vs HF's tokenizer
    "data": "bench_data.py",  # example building vs the training step; memory while preparing a store
    "finetune": "bench_finetune.py",  # dynamic padding + length grouping vs fixed padding
    "kernels": "bench_kernels.py",  # the former CPU kernels against the reference model (only with --only)
}
DEFAULT = ["model", "tokenizer", "data", "finetune"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated subset of: " + ", ".join(SCRIPTS))
    parser.add_argument("--quick", action="store_true", help="pass --quick to the scripts that take it")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else DEFAULT
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(SCRIPTS)}")
    failed = []
    for name in names:
        script = HERE / SCRIPTS[name]
        cmd = [sys.executable, str(script)]
        if args.quick and "--quick" in script.read_text():
            cmd.append("--quick")
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        t = time.time()
        if subprocess.run(cmd).returncode != 0:
            failed.append(name)
        print(f"=== {name}: {time.time() - t:.0f} s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"\nresults: {HERE.parent / 'docs' / 'BENCHMARKS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
