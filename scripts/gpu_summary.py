"""The JSON summaries that scripts/gpu_run.sh returns from a GPU machine.

    python3 scripts/gpu_summary.py tests JUNIT.xml OUT.json --exit-status N   # pytest's counts and failures
    python3 scripts/gpu_summary.py mfu WORK OUT.json                         # the profile and the MFU variants
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def tests_summary(junit: Path, exit_status: int) -> dict:
    """pytest's counts from its JUnit XML, each failure and error with the first line of its message."""
    if not junit.is_file():
        return {"exit_status": exit_status, "complete": False, "note": f"no {junit.name}: pytest did not finish"}
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    problems = []
    for case in suite.iter("testcase"):
        for kind in ("failure", "error"):
            for node in case.findall(kind):
                message = (node.get("message") or node.text or "").strip().splitlines()
                problems.append({"test": f"{case.get('classname')}::{case.get('name')}", "kind": kind,
                                 "message": message[0][:300] if message else ""})
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {"exit_status": exit_status, "complete": True, "passed": passed, **counts,
            "seconds": float(suite.get("time", 0)), "problems": problems}


def mfu_summary(work: Path) -> dict:
    """bench/gpu_profile.py's JSON and one row per bench/gpu_mfu.py variant (its arguments; its result, or why
    there is none); the best of litebert's variants, and HF's (``--model hf``) where one ran."""
    profile = work / "profile.json"
    out = {"profile": json.loads(profile.read_text()) if profile.is_file() else None, "variants": []}
    for args in sorted(work.glob("mfu-*.args"), key=lambda p: int(p.stem.split("-")[1])):
        result = args.with_suffix(".json")
        row = {"args": args.read_text().strip()}
        row.update(json.loads(result.read_text()) if result.is_file() else {"result": None,
                   "note": "no result: failed, stopped at its time limit or skipped (see mfu.log)"})
        out["variants"].append(row)
    done = [v for v in out["variants"] if v.get("mfu") is not None]
    ours = [v for v in done if v.get("model", "litebert") == "litebert"]
    out["best"] = max(ours, key=lambda v: v["mfu"]) if ours else None
    hf = [v for v in done if v.get("model") == "hf"]
    out["hf"] = max(hf, key=lambda v: v["mfu"]) if hf else None  # HF's step, measured in the same call
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tests")
    t.add_argument("junit", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--exit-status", type=int, default=0)
    m = sub.add_parser("mfu")
    m.add_argument("work", type=Path)
    m.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    summary = tests_summary(args.junit, args.exit_status) if args.what == "tests" else mfu_summary(args.work)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary if args.what == "tests" else {"best": summary["best"]}, indent=1)[:2000])
    if args.what == "tests":
        return 0 if summary["complete"] and args.exit_status == 0 else 1
    return 0 if summary["best"] else 1  # no variant measured


if __name__ == "__main__":
    sys.exit(main())
