"""``litebert tokenizer train`` (a vocabulary with the official ALBERT settings) and ``litebert tokenizer encode``."""

from __future__ import annotations

import argparse
import sys
from typing import Iterable

from litebert.checks import AT_LEAST_0, AT_LEAST_1, CHARACTER_COVERAGE
from litebert.cli import ranged
from litebert.errors import ConfigError
from litebert.inputs.text import ENCODING_ERRORS, iter_lines
from litebert.terminal import json_line
from litebert.tokenizer.train import train_tokenizer


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="{train,encode}")
    t = sub.add_parser("train", help="train a SentencePiece vocabulary with the official ALBERT settings",
                       description="Train an ALBERT SentencePiece unigram vocabulary; writes spiece.model, "
                                   "tokenizer_config.json and tokenizer.json (HF layout) to --out.")
    t.add_argument("--input", dest="inputs", nargs="+", required=True, metavar="PATH",
                   help="files, directories (read recursively) or globs: plain text (a sentence a line), JSON "
                        "lines (*.jsonl/*.json) or tables (*.parquet/*.arrow, datasets folders); gzip/xz/bz2/zstd "
                        "are decompressed transparently")
    t.add_argument("--out", required=True, help="output folder (created; one already holding a tokenizer needs "
                                                "--overwrite)")
    t.add_argument("--overwrite", action="store_true", help="--out holds a tokenizer: replace it")
    ranged(t.add_argument("--vocab-size", type=int, default=30000,
                          help="pieces in the vocabulary, special pieces included"), AT_LEAST_1)
    t.add_argument("--cased", action="store_true", help="do not lower-case (do_lower_case=False)")
    accents = t.add_mutually_exclusive_group()
    accents.add_argument("--keep-accents", dest="keep_accents", action="store_const", const=True, default=None,
                         help="keep accents and combining marks (no NFKD stripping). Default: decided from the corpus, "
                              "kept when at least 1%% of a sample of its words would lose a mark other than a Latin "
                              "diacritic (Indic scripts, Arabic, Russian...; docs/tokenizer.md)")
    accents.add_argument("--strip-accents", dest="keep_accents", action="store_const", const=False,
                         help="strip accents and combining marks, as the official English ALBERT vocabulary, "
                              "whatever the corpus")
    ranged(t.add_argument("--character-coverage", type=float, default=0.99995,
                          help="fraction of the corpus's characters the vocabulary covers, 0.98 to 1 (the rest "
                               "become <unk>; 0.9995 for CJK)"),
           CHARACTER_COVERAGE)
    ranged(t.add_argument("--input-sentence-size", type=int, default=10_000_000,
                          help="sample this many sentences from larger corpora (0 = all)"), AT_LEAST_0)
    ranged(t.add_argument("--threads", type=int, default=None, help="default: all cores"), AT_LEAST_1)
    ranged(t.add_argument("--seed", type=int, default=0, help="seed of SentencePiece's sentence sampling"), AT_LEAST_0)
    t.add_argument("--text-field", default="text", help="JSONL field or table column holding the text")
    t.add_argument("--encoding-errors", default="strict", choices=ENCODING_ERRORS,
                   help="invalid UTF-8: stop with file/line/byte offset (strict) or substitute U+FFFD (replace)")
    t.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    e = sub.add_parser("encode", help="encode text to ids (JSON lines)",
                       description="Encode each input line (or --text) and print one JSON object per line.")
    e.add_argument("--tokenizer", required=True,
                   help="a tokenizer folder (spiece.model, a BERT-style vocab.txt, or tokenizer.json alone), one of "
                        "those files, or a hub id")
    e.add_argument("--text", action="append", help="text to encode (repeatable); default: read --input or stdin")
    e.add_argument("--input", help="a text file, one text per line (gzip/xz/bz2 decompressed transparently)")
    e.add_argument("--encoding-errors", default="strict", choices=ENCODING_ERRORS,
                   help="invalid UTF-8 in --input: stop with file/line/byte offset (strict) or substitute U+FFFD")
    e.add_argument("--pieces", action="store_true", help="also print the pieces")
    e.add_argument("--offsets", action="store_true", help="also print character offsets into the input")
    e.add_argument("--no-special-tokens", action="store_true", help="omit [CLS]/[SEP]")
    # Not given (None): the folder's tokenizer_config.json decides, as it does for HF; a plain store_true would
    # override a folder that says true with False.
    e.add_argument("--split-special-tokens", action="store_const", const=True, default=None,
                   help="read [MASK], [CLS], ... written in the text as plain text (as the official tokenizer does), "
                        "not as their ids (default: split_special_tokens of the folder's tokenizer_config.json, "
                        "else off)")
    e.add_argument("--no-split-special-tokens", dest="split_special_tokens", action="store_const", const=False,
                   help="read [MASK], [CLS], ... written in the text as their ids, whatever the folder says")


def run(args) -> int:
    if args.action == "train":
        train_tokenizer(args.inputs, args.out, args.vocab_size, do_lower_case=not args.cased,
                        keep_accents=args.keep_accents, character_coverage=args.character_coverage,
                        input_sentence_size=args.input_sentence_size, num_threads=args.threads, seed=args.seed,
                        text_field=args.text_field, encoding_errors=args.encoding_errors, progress=not args.quiet,
                        overwrite=args.overwrite)
        return 0
    if args.text and args.input:  # one source of texts: the other would be ignored silently
        raise ConfigError("{text:flag} and {input:flag} both give the texts to encode; give one of them",
                          text=args.text[0], input=args.input)
    given = {} if args.split_special_tokens is None else {"split_special_tokens": args.split_special_tokens}
    from litebert.tokenizer import load_tokenizer

    tok = load_tokenizer(args.tokenizer, **given)
    if args.text:
        texts: Iterable[str] = args.text
    elif args.input:
        texts = (line for _, _, line in iter_lines(args.input, args.encoding_errors))
    else:
        texts = (line.rstrip("\n") for line in sys.stdin)
    for text in texts:
        enc = tok(text, return_offsets=args.offsets, add_special_tokens=not args.no_special_tokens)
        row = {"input_ids": enc["input_ids"]}
        if args.pieces:
            row["pieces"] = tok.convert_ids_to_tokens(enc["input_ids"])
        if args.offsets:
            row["offsets"] = enc["offsets"]
        print(json_line(row))
    return 0
