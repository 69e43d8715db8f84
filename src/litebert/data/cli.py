"""`litebert data prepare` and `litebert data inspect` (see docs/data.md)."""

from __future__ import annotations

import argparse
import json

import numpy as np

from litebert.checks import AT_LEAST_0, AT_LEAST_1, FRACTION, Range
from litebert.cli import ranged
from litebert.data.documents import CORPUS_MAX_LINE_BYTES, FORMATS, MAX_DOCUMENT_CHARS
from litebert.errors import DataError


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = sub.add_parser("prepare", help="tokenize a corpus into a sharded, memory-mapped token store",
                       description="Tokenize files/directories/globs into a token store for `litebert pretrain`.")
    p.add_argument("--input", dest="inputs", nargs="+", required=True, metavar="PATH",
                   help="files, directories (read recursively) or globs, local or URLs (s3://, gs://, hf://, "
                        "https://...: fsspec); gzip/xz/bz2/zstd are decompressed transparently; .parquet/.arrow "
                        "tables and datasets folders are read a row a document")
    p.add_argument("--tokenizer", required=True, metavar="DIR",
                   help="tokenizer folder (spiece.model or a BERT-style vocab.txt [+ tokenizer_config.json]), "
                        "one of those files, or a hub id")
    p.add_argument("--out", required=True, metavar="STORE",
                   help="store folder to create (new or empty; an existing store only with --overwrite)")
    ranged(p.add_argument("--workers", type=int, default=1, help="tokenizing processes (default 1)"), AT_LEAST_1)
    p.add_argument("--format", default="auto", choices=FORMATS,
                   help="official: a sentence per line, blank line between documents; paragraphs: a document per "
                        "paragraph; files: a document per file; jsonl: a document per line (or table row); auto "
                        "(default): jsonl for *.jsonl/*.json and tables, official otherwise")
    p.add_argument("--text-field", default="text",
                   help="JSONL field or table column holding the text (default: text)")
    p.add_argument("--encoding-errors", default="strict", choices=("strict", "replace"),
                   help="invalid UTF-8: stop with file/line/byte offset (strict, default) or substitute U+FFFD")
    ranged(p.add_argument("--shard-tokens", type=int, default=1 << 26, help="tokens per shard (default 2^26)"),
           AT_LEAST_1)
    ranged(p.add_argument("--max-line-bytes", type=int, default=CORPUS_MAX_LINE_BYTES,
                          help="refuse a line longer than this, naming its file and line (default "
                               f"{CORPUS_MAX_LINE_BYTES}, 8 MiB): memory stays bounded on a file without line breaks"),
           AT_LEAST_1)
    ranged(p.add_argument("--max-document-chars", type=int, default=MAX_DOCUMENT_CHARS,
                          help="cut a longer document, at a line, into consecutive documents, with one warning "
                               f"(default {MAX_DOCUMENT_CHARS}, 4 Mi): memory stays bounded on a corpus without "
                               "blank lines"), AT_LEAST_1)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing token store (refused if the folder holds anything else)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")

    q = sub.add_parser("inspect", help="summarise a store; sample examples and check their statistics",
                       description="Print a store's manifest summary; with --sample N build N pretraining examples "
                                   "and print their measured statistics beside the paper's targets.")
    q.add_argument("store", metavar="STORE")
    q.add_argument("--verify", action="store_true",
                   help="check the sha256 of every file (the default; the flag is kept for scripts that pass it)")
    q.add_argument("--no-verify-data", action="store_true",
                   help="skip the sha256 check of the store's files (the size, token id and offset checks still run)")
    q.add_argument("--tokenizer", metavar="DIR",
                   help="check it is the store's tokenizer; --show uses it (default: the one inside the store)")
    for flag, kind, default, rng, text in (
            ("--sample", int, 0, AT_LEAST_0, "examples to sample for statistics"),
            ("--show", int, 0, AT_LEAST_0, "print the first K examples as pieces"),
            ("--seq-len", int, 128, Range(5), "sequence length of the examples ([CLS] A [SEP] B [SEP]: >= 5)"),
            ("--masked-lm-prob", float, 0.15, FRACTION, "fraction of tokens masked"),
            ("--max-predictions", int, 20, AT_LEAST_0, "masked positions per sequence"),
            ("--max-ngram", int, 3, AT_LEAST_1, "longest masked n-gram"),
            ("--short-seq-prob", float, 0.1, FRACTION, "fraction of shorter sequences"),
            ("--seed", int, 0, AT_LEAST_0, "seed of the pairs and masks"),
            ("--epoch", int, 0, AT_LEAST_0, "the epoch whose examples are built")):
        ranged(q.add_argument(flag, type=kind, default=default, help=text), rng)
    q.add_argument("--objective", default="sop", choices=("sop", "nsp"))
    q.add_argument("--json", action="store_true", help="print the statistics as JSON")


def _load_tokenizer(path: str):
    from litebert.tokenizer import load_tokenizer

    return load_tokenizer(path)


def run(args: argparse.Namespace) -> int:
    if args.action == "prepare":
        return _prepare(args)
    return _inspect(args)


def _prepare(args) -> int:
    from litebert.data.store import prepare_store

    store = prepare_store(args.inputs, args.tokenizer, args.out, workers=args.workers, fmt=args.format,
                          encoding_errors=args.encoding_errors, text_field=args.text_field,
                          shard_tokens=args.shard_tokens, overwrite=args.overwrite, progress=args.progress,
                          max_line_bytes=args.max_line_bytes, max_document_chars=args.max_document_chars)
    print(store)
    for path in store.manifest["empty_inputs"]:
        print(f"warning: {path} holds no text and was skipped")
    return 0


def _inspect(args) -> int:
    from litebert.data.pretraining import PretrainingDataset
    from litebert.data.stats import example_statistics, format_statistics
    from litebert.data.store import TokenStore

    tok = _load_tokenizer(args.tokenizer) if args.tokenizer else None
    if args.verify and args.no_verify_data:
        raise DataError("--verify and --no-verify-data contradict each other; give one")
    verify = not args.no_verify_data
    store = TokenStore(args.store, tokenizer=tok, verify=verify)
    m = store.manifest
    if not args.json:
        print(store)
        print(f"  tokenizer sha256 {m['tokenizer']['fingerprint']}, vocab {m['tokenizer']['vocab_size']}, "
              + (f"saved in {store.tokenizer_path}" if store.tokenizer_path else "not saved in the store"))
        print(f"  {len(m['inputs'])} input file(s), format {m['input_format']}; "
              f"{len(m['empty_inputs'])} empty; {m['dropped_empty_documents']} empty documents dropped")
        print("  checked: manifest, sizes, token ids, offsets" + (", sha256 checksums" if verify else
                                                                   " (sha256 checksums skipped: --no-verify-data)"))
    if not (args.sample or args.show):
        return 0
    ds = PretrainingDataset(store, max_seq_length=args.seq_len, objective=args.objective, seed=args.seed,
                            masked_lm_prob=args.masked_lm_prob, max_predictions_per_seq=args.max_predictions,
                            max_ngram=args.max_ngram, short_seq_prob=args.short_seq_prob)
    if args.show:
        tok = tok or store.tokenizer()
        if tok is None:
            raise DataError(f"--show needs --tokenizer to print pieces: the store {store.path} holds no tokenizer")
        for i in range(min(args.show, ds.num_examples)):
            e = ds.example(args.epoch, i)
            pieces = tok.convert_ids_to_tokens(e["input_ids"].tolist())
            for p, orig in zip(e["mlm_positions"].tolist(), e["mlm_ids"].tolist()):
                pieces[p] = f"{pieces[p]}<{tok.convert_ids_to_tokens(orig)}>"
            print(f"\nexample {i} (label {int(e['sentence_order_label'])}): {' '.join(pieces)}")
    if args.sample:
        n = min(args.sample, ds.num_examples)
        idx = np.random.default_rng(args.seed).choice(ds.num_examples, size=n, replace=False)
        stats = example_statistics(ds, args.epoch, idx)
        if args.json:
            print(json.dumps(stats, indent=1))
        else:
            print(f"\n{n} of {ds.num_examples} examples per epoch, epoch {args.epoch}, seed {args.seed}:")
            print(format_statistics(stats, ds))
    return 0
