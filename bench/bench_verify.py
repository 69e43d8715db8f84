"""Cost of checking a token store before training (`TokenStore(path, verify=...)`, what `litebert pretrain` and
`litebert data inspect` do before step 0), on two stores:

- the demo store: the bundled corpus (data/corpus/*.txt.xz) prepared with the bundled 30k ALBERT vocabulary;
- a synthetic store of at least ``--gb`` GB (random uint16 token ids, sentences of 1-48 tokens, documents of 1-19
  sentences), written through the store's own shard writer, and deleted afterwards.

For each: seconds and GB/s of the full check (sha256 of every file + manifest, sizes, token ids, offsets) and of the
check without hashing (`--no-verify-data`). The files were just written, so they are read from the page cache: on a
cold cache the hashing is bounded by the disk's read speed as well.

    .venv/bin/python bench/bench_verify.py [--gb 1.1] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from litebert.data.store import (  # noqa: E402
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    TokenizerFacts,
    TokenStore,
    _file_record,
    _ShardWriter,
    manifest_checksum,
    prepare_store,
    token_dtype,
)
from litebert.files import write_json  # noqa: E402

VOCAB = ROOT / "data" / "albert-30k" / "spiece.model"
CORPUS = sorted((ROOT / "data" / "corpus").glob("*.txt.xz"))


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def synthetic_store(out: Path, gigabytes: float, vocab_size: int = 30000, shard_tokens: int = 1 << 26) -> None:
    """Write a store of random ids of about ``gigabytes`` GB with the writer `prepare_store` uses."""
    rng = np.random.default_rng(0)
    word_start = np.ones(vocab_size, bool)
    facts = TokenizerFacts(vocab_size, 0, 2, 3, 4, "synthetic", word_start, np.arange(5, vocab_size, dtype=np.int32))
    dtype = token_dtype(vocab_size)
    out.mkdir(parents=True)
    np.save(out / "word_start.npy", facts.word_start)
    np.save(out / "normal_ids.npy", facts.normal_ids)
    # bytes per token: 2 (id) + 8/24.5 (a sentence offset per ~24.5 tokens) + 8/245 (a document offset)
    target_tokens = int(gigabytes * 1e9 / (2 + 8 / 24.5 + 8 / 245))
    shards, written, k = [], 0, 0
    while written < target_tokens:
        w = _ShardWriter(out, k, dtype)
        while w.num_tokens < shard_tokens and written < target_tokens:
            doc_counts = rng.integers(1, 20, 4096)
            lengths = rng.integers(1, 49, int(doc_counts.sum()))
            tokens = rng.integers(5, vocab_size, int(lengths.sum()), dtype=np.uint32)
            w.add(tokens, lengths, doc_counts)
            written += tokens.size
        shards.append(w.close())
        k += 1
    totals = {key: sum(s[key] for s in shards) for key in ("num_tokens", "num_sentences", "num_documents")}
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "dtype": dtype.str, "tokenizer": facts.to_json(),
                **totals, "shards": shards,
                "aux_files": {n: _file_record(out, n) for n in ("word_start.npy", "normal_ids.npy")},
                "tokenizer_folder": None, "inputs": [], "input_format": "official", "encoding_errors": "strict",
                "empty_inputs": [], "dropped_empty_documents": 0}
    manifest["manifest_sha256"] = manifest_checksum(manifest)
    write_json(out / MANIFEST, manifest, indent=1)


def measure(path: Path, repeats: int = 3) -> dict:
    size = store_bytes(path)
    result = {"store": str(path), "bytes": size, "tokens": TokenStore(path, verify=False).num_tokens}
    for verify in (True, False):
        best = min(_timed(path, verify) for _ in range(repeats))
        result["verify" if verify else "no_verify"] = {"seconds": round(best, 3),
                                                       "GB_per_s": round(size / best / 1e9, 2)}
    return result


def _timed(path: Path, verify: bool) -> float:
    t = time.perf_counter()
    TokenStore(path, verify=verify)
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gb", type=float, default=1.1, help="size of the synthetic store in GB (default 1.1)")
    p.add_argument("--dir", default=None, help="folder for the temporary stores (default: the system's)")
    p.add_argument("--workers", type=int, default=2, help="tokenizing processes for the demo store")
    args = p.parse_args()
    from litebert.tokenizer import AlbertTokenizer

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        demo = Path(tmp) / "demo"
        t = time.perf_counter()
        prepare_store(CORPUS, AlbertTokenizer.from_pretrained(VOCAB), demo, workers=args.workers, progress=False)
        print(f"demo store prepared in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        results = [measure(demo)]
        shutil.rmtree(demo)
        big = Path(tmp) / "big"
        t = time.perf_counter()
        synthetic_store(big, args.gb)
        print(f"synthetic store written in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        results.append(measure(big, repeats=2))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
