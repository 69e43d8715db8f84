"""Peak memory of `litebert data prepare` on Parquet corpora of growing size: tables are read a row group at a time,
so the peak should follow the row group, not the file.

    .venv/bin/python bench/bench_columnar.py [--sizes-mb 20 200] [--row-group-mb 4] [--workers 2]
                                             [--formats parquet jsonl]

Each corpus repeats the bundled public-domain text (data/corpus), ten of its lines a document, one document a row of a
``text`` column, written in row groups of about ``--row-group-mb`` MB of text. Each preparation runs in a fresh
process; its peak RSS (the main process's VmHWM, and the largest tokenizing worker's) and the peak anonymous memory
of the main process are printed as JSON, a line per corpus.
"""

from __future__ import annotations

import argparse
import json
import lzma
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB = ROOT / "data" / "albert-30k" / "spiece.model"
CORPUS = [ROOT / "data" / "corpus" / "sotu.txt.xz", ROOT / "data" / "corpus" / "moby_dick.txt.xz"]

# Run in a fresh interpreter so that its peak RSS is the preparation's alone: VmHWM, everything resident, including
# the pages of the finished store that prepare_store's closing check maps (getrusage's ru_maxrss would also count
# this script's own memory, which Linux carries over a fork and exec). A thread samples the main process's anonymous
# memory every 20 ms: what reading and batching hold. Workers: getrusage's largest child.
PREPARE = """
import json, resource, sys, threading, time
from litebert.data.store import prepare_store
from litebert.tokenizer import AlbertTokenizer
src, out, workers, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
peak = [0]
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
def sample():
    while True:
        with open("/proc/self/status") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))
        peak[0] = max(peak[0], kb)
        time.sleep(0.02)
threading.Thread(target=sample, daemon=True).start()
tok = AlbertTokenizer.from_pretrained(vocab)
t = time.perf_counter()
store = prepare_store([src], tok, out, workers=workers, progress=False)
print(json.dumps({"seconds": round(time.perf_counter() - t, 1), "tokens": store.num_tokens,
                  "anon_main_mb": round(peak[0] / 1024, 1),
                  "rss_main_mb": round(hwm() / 1024, 1),
                  "rss_worker_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}))
"""


def documents() -> list[str]:
    """The bundled corpus (a sentence a line) as documents of ten lines each, each line a paragraph."""
    lines = []
    for path in CORPUS:
        lines += [line for line in lzma.decompress(path.read_bytes()).decode("utf-8").splitlines() if line.strip()]
    return ["\n".join(lines[i:i + 10]) for i in range(0, len(lines), 10)]


def write_parquet(path: Path, size_mb: float, row_group_mb: float) -> dict:
    """A Parquet file of at least ``size_mb`` MB of text in row groups of about ``row_group_mb`` MB of text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = documents()
    schema = pa.schema([("text", pa.string())])
    written = groups = 0
    with pq.ParquetWriter(path, schema) as writer:
        group, group_bytes = [], 0
        while written < size_mb * 1e6:
            for doc in docs:
                group.append(doc)
                group_bytes += len(doc.encode("utf-8"))
                if group_bytes >= row_group_mb * 1e6:
                    writer.write_table(pa.table({"text": group}, schema=schema), row_group_size=len(group))
                    written, groups, group, group_bytes = written + group_bytes, groups + 1, [], 0
                    if written >= size_mb * 1e6:
                        break
    return {"text_mb": round(written / 1e6, 1), "row_groups": groups, "file_mb": round(path.stat().st_size / 1e6, 1)}


def write_jsonl(parquet: Path, path: Path) -> None:
    """The same rows as JSON lines, for comparison with the text readers."""
    import pyarrow.parquet as pq

    with open(path, "w", encoding="utf-8") as f:
        for batch in pq.ParquetFile(parquet).iter_batches(columns=["text"]):
            f.writelines(json.dumps({"text": t}) + "\n" for t in batch.column(0).to_pylist())


def measure(sizes_mb: list[float], row_group_mb: float, workers: int, folder: Path,
            formats: tuple[str, ...] = ("parquet",)) -> list[dict]:
    """Prepare a Parquet corpus (and the same rows as JSON lines, for "jsonl" in ``formats``) of each size in a
    fresh process; the figures, one dict per corpus."""
    rows = []
    for mb in sizes_mb:
        table = folder / f"corpus_{mb}.parquet"
        facts = write_parquet(table, mb, row_group_mb)
        for fmt in formats:
            src = table if fmt == "parquet" else folder / f"corpus_{mb}.jsonl"
            if fmt == "jsonl":
                write_jsonl(table, src)
            out = subprocess.run([sys.executable, "-c", PREPARE, str(src), str(folder / f"store_{mb}_{fmt}"),
                                  str(workers), str(VOCAB)], check=True, capture_output=True, text=True).stdout
            sizes = facts if fmt == "parquet" else {"text_mb": facts["text_mb"],
                                                     "file_mb": round(src.stat().st_size / 1e6, 1)}
            row = {"format": fmt, **sizes, **json.loads(out.strip().splitlines()[-1])}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if fmt == "jsonl":
                src.unlink()
        table.unlink()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-mb", type=float, nargs="+", default=[20, 200])
    p.add_argument("--row-group-mb", type=float, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--formats", nargs="+", default=["parquet"], choices=["parquet", "jsonl"],
                   help="jsonl: also prepare the same rows as JSON lines")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(args.sizes_mb, args.row_group_mb, args.workers, Path(tmp), tuple(args.formats))


if __name__ == "__main__":
    main()
