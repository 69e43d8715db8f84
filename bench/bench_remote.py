"""Peak memory of `litebert data prepare` reading its corpus from a URL, beside the same files read from disk: a URL
is streamed through fsspec's read-ahead cache, so the peak should not grow with the file.

    .venv/bin/python bench/bench_remote.py [--sizes-mb 20 200] [--workers 2] [--formats jsonl parquet]

The corpora are bench_columnar's (the bundled text, ten lines a document, a document a row or a JSON line), served
from a temporary folder by an HTTP server on 127.0.0.1 that answers byte ranges (as S3, GCS and most web servers
do). Each preparation runs in a fresh process (bench_columnar's: main process VmHWM, peak anonymous memory, the
largest worker); one JSON line per corpus and source.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.bench_columnar import PREPARE, VOCAB, write_jsonl, write_parquet  # noqa: E402


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Python's file server, answering ``Range: bytes=A-B`` (what fsspec's HTTP files ask for) with 206."""

    def log_message(self, *args):
        pass

    def end_headers(self):
        self.send_header("Accept-Ranges", "bytes")
        super().end_headers()

    def send_head(self):
        path = self.translate_path(self.path)
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if wanted is None or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        start, end = int(wanted[1]), min(int(wanted[2] or size - 1), size - 1)
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(end - start + 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return io.BytesIO(data)


def prepare(src: str, out: Path, workers: int) -> dict:
    result = subprocess.run([sys.executable, "-c", PREPARE, src, str(out), str(workers), str(VOCAB)], check=True,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(sizes_mb: list[float], workers: int, folder: Path, formats: tuple[str, ...]) -> list[dict]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(RangeHandler,
                                                                                 directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rows = []
    try:
        for mb in sizes_mb:
            table = folder / f"corpus_{mb}.parquet"
            facts = write_parquet(table, mb, 4)
            files = {"parquet": table}
            if "jsonl" in formats:
                write_jsonl(table, folder / f"corpus_{mb}.jsonl")
                files["jsonl"] = folder / f"corpus_{mb}.jsonl"
            for fmt in formats:
                for source, src in (("disk", str(files[fmt])),
                                    ("http", f"http://127.0.0.1:{server.server_port}/{files[fmt].name}")):
                    row = {"format": fmt, "source": source, "text_mb": facts["text_mb"],
                           "file_mb": round(files[fmt].stat().st_size / 1e6, 1),
                           **prepare(src, folder / f"store_{mb}_{fmt}_{source}", workers)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            for f in files.values():
                f.unlink()
    finally:
        server.shutdown()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-mb", type=float, nargs="+", default=[20, 200])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--formats", nargs="+", default=["jsonl", "parquet"], choices=["parquet", "jsonl"])
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(args.sizes_mb, args.workers, Path(tmp), tuple(args.formats))


if __name__ == "__main__":
    main()
