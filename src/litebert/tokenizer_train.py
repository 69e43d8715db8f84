"""Training an ALBERT SentencePiece vocabulary, and the ``litebert tokenizer`` command (``train``, ``encode``).

The settings are those of the official ALBERT English vocabulary (google-research/albert README, "SentencePiece"):

    spm_train --input all.txt --model_prefix=30k-clean --vocab_size=30000 --pad_id=0 --unk_id=1 --eos_id=-1
      --bos_id=-1 --control_symbols=[CLS],[SEP],[MASK] --user_defined_symbols="(,),\\",-,.,–,£,€"
      --shuffle_input_sentence=true --input_sentence_size=10000000 --character_coverage=0.99995 --model_type=unigram

Every line goes through the same normalization the tokenizer applies at encoding time (lower-casing, accent
stripping), which is why the released vocabulary holds no upper-case pieces.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import sentencepiece as spm
from tqdm import tqdm

from litebert.errors import DataError, TokenizerError
from litebert.tokenizer import AlbertTokenizer, preprocess_text

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")


def iter_corpus_lines(files: Iterable[str | os.PathLike], *, jsonl_field: str = "text", skip_invalid: bool = False,
                      stats: dict | None = None, progress: bool = False) -> Iterator[str]:
    """Lines of text from plain text, gzip (detected by its magic bytes) or JSONL files (``.jsonl``/``.json``, one
    object a line, text under ``jsonl_field``, newlines in it starting new lines; ``.jsonl.gz`` works too).

    Invalid UTF-8 raises a DataError naming the file, line and byte offset (in the decompressed stream); with
    ``skip_invalid`` the line is skipped and counted in ``stats["skipped_lines"]``."""
    paths = [Path(f) for f in files]
    for p in paths:
        if not p.is_file():
            raise DataError(f"{p}: training input not found")
    stats = stats if stats is not None else {}
    stats.setdefault("skipped_lines", 0)
    bar = tqdm(total=sum(p.stat().st_size for p in paths), unit="B", unit_scale=True, desc="reading corpus",
               disable=not progress)
    try:
        for p in paths:
            is_jsonl = any(s in (".jsonl", ".json") for s in p.suffixes)
            with open(p, "rb") as raw:
                gz = raw.read(2) == b"\x1f\x8b"
                raw.seek(0)
                stream = gzip.GzipFile(fileobj=raw) if gz else raw
                offset, seen = 0, 0  # byte offset in the (decompressed) stream; compressed bytes shown by the bar
                try:
                    for lineno, line_bytes in enumerate(stream, 1):
                        try:
                            line = line_bytes.decode("utf-8")
                        except UnicodeDecodeError as e:
                            if not skip_invalid:
                                raise DataError(f"{p}:{lineno}: invalid UTF-8 at byte offset {offset + e.start} "
                                                f"({e.reason}); fix the file or pass --skip-invalid-utf8") from None
                            stats["skipped_lines"] += 1
                            line = None
                        offset += len(line_bytes)
                        if line is not None and is_jsonl and line.strip():
                            yield from _jsonl_text(line, p, lineno, jsonl_field).splitlines()
                        elif line is not None and not is_jsonl:
                            yield line.rstrip("\r\n")
                        if lineno % 1024 == 0:
                            pos = raw.tell()
                            bar.update(pos - seen)
                            seen = pos
                except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
                    raise DataError(f"{p}: cannot read ({e})") from None
                bar.update(p.stat().st_size - seen)
    finally:
        bar.close()


def _jsonl_text(line: str, path: Path, lineno: int, field: str) -> str:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
        raise DataError(f"{path}:{lineno}: expected a JSON object with a string field {field!r} "
                        "(choose another with --jsonl-field)")
    return obj[field]


def train_tokenizer(files, out_dir, vocab_size: int = 30000, *, do_lower_case: bool = True,
                    keep_accents: bool = False, character_coverage: float = 0.99995,
                    input_sentence_size: int = 10_000_000, max_sentence_length: int = 4192, num_threads: int | None = None,
                    seed: int = 0, jsonl_field: str = "text", skip_invalid: bool = False,
                    progress: bool = True) -> AlbertTokenizer:
    """Train an ALBERT unigram vocabulary on ``files`` and save it to ``out_dir`` in the HF layout.

    Uses the official settings (see the module docstring); SentencePiece samples ``input_sentence_size`` sentences
    when the corpus is larger (its sampling is seeded with ``seed``), on ``num_threads`` threads (default: all cores).
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    if vocab_size < 1:
        raise TokenizerError(f"vocab_size must be positive, got {vocab_size}")
    n_reserved = len(("<pad>", "<unk>")) + len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS)
    if vocab_size <= n_reserved:
        raise TokenizerError(f"vocab_size={vocab_size} leaves no room: the ALBERT special and user-defined pieces "
                             f"alone take {n_reserved}")
    stats: dict = {"lines": 0, "skipped_lines": 0}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".train-") as tmp:
        # Normalize into one file first: bad input is reported before SentencePiece starts (an exception raised
        # inside its sentence iterator would surface as an opaque RuntimeError), and SentencePiece samples from it.
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            for line in iter_corpus_lines(files, jsonl_field=jsonl_field, skip_invalid=skip_invalid, stats=stats,
                                          progress=progress):
                text = preprocess_text(line, lower=do_lower_case, keep_accents=keep_accents)
                if text:
                    stats["lines"] += 1
                    f.write(text + "\n")
        if stats["lines"] == 0:
            raise DataError(f"empty corpus: no line of text in {', '.join(str(x) for x in files)}")
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        try:
            # Fed through an iterator and written to memory, so that no temporary path is recorded in the model's
            # trainer_spec: the same corpus and settings give the same bytes (the same fingerprint).
            with open(corpus, encoding="utf-8") as lines:
                spm.SentencePieceTrainer.train(
                    sentence_iterator=(line.rstrip("\n") for line in lines), model_writer=model,
                    vocab_size=vocab_size, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                    control_symbols=list(CONTROL_SYMBOLS), user_defined_symbols=list(USER_DEFINED_SYMBOLS),
                    character_coverage=character_coverage, input_sentence_size=input_sentence_size,
                    shuffle_input_sentence=True, max_sentence_length=max_sentence_length,
                    num_threads=num_threads or os.cpu_count() or 1, minloglevel=2)
        except (RuntimeError, OSError) as e:
            raise _explain_trainer_error(e, vocab_size, files) from None
        model_path = Path(tmp) / "spiece.model"
        model_path.write_bytes(model.getvalue())
        tok = AlbertTokenizer(model_path, do_lower_case=do_lower_case, keep_accents=keep_accents)
        tok.save_pretrained(out)
        # The human-readable piece list spm_train writes beside the model (piece<TAB>score).
        vocab_tmp = out / ".spiece.vocab.tmp"
        vocab_tmp.write_text("".join(f"{p}\t{tok.sp.get_score(i):g}\n" for i, p in
                                     enumerate(tok.convert_ids_to_tokens(list(range(tok.vocab_size))))),
                             encoding="utf-8")
        os.replace(vocab_tmp, out / "spiece.vocab")
    tok = AlbertTokenizer.from_pretrained(out)
    tok.train_stats = dict(stats)
    if progress:
        skipped = f", skipped {stats['skipped_lines']} invalid line(s)" if stats["skipped_lines"] else ""
        print(f"trained a {tok.vocab_size}-piece vocabulary on {stats['lines']} lines{skipped} -> {out}",
              file=sys.stderr)
    return tok


def _explain_trainer_error(e: Exception, vocab_size: int, files) -> Exception:
    msg = str(e)
    m = re.search(r"Vocabulary size (?:is )?too high \((\d+)\)\. Please set it to a value <= (\d+)", msg)
    if m:
        return DataError(f"vocab_size={vocab_size} is more than this corpus can support (at most {m.group(2)} "
                         f"pieces); use a smaller --vocab-size or more text")
    m = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", msg)
    if m:
        return DataError(f"vocab_size={vocab_size} is smaller than the {m.group(2)} distinct characters the corpus "
                         f"needs at character_coverage; raise --vocab-size or lower --character-coverage")
    return DataError(f"SentencePiece training failed on {', '.join(map(str, files))}: {msg}")


# ---------------------------------------------------------------------------------------------------- CLI
def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="{train,encode}")
    t = sub.add_parser("train", help="train a SentencePiece vocabulary with the official ALBERT settings",
                       description="Train an ALBERT SentencePiece unigram vocabulary; writes spiece.model, "
                                   "tokenizer_config.json and tokenizer.json (HF layout) to --out.")
    t.add_argument("--input", nargs="+", required=True, help="text, .gz or .jsonl files (one sentence/line)")
    t.add_argument("--out", required=True, help="output folder")
    t.add_argument("--vocab-size", type=int, default=30000)
    t.add_argument("--cased", action="store_true", help="do not lower-case (do_lower_case=False)")
    t.add_argument("--keep-accents", action="store_true", help="skip NFKD accent stripping")
    t.add_argument("--character-coverage", type=float, default=0.99995)
    t.add_argument("--input-sentence-size", type=int, default=10_000_000,
                   help="sample this many sentences from larger corpora (0 = all)")
    t.add_argument("--threads", type=int, default=None, help="default: all cores")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--jsonl-field", default="text")
    t.add_argument("--skip-invalid-utf8", action="store_true", help="skip (and count) lines that are not UTF-8")
    t.add_argument("--quiet", action="store_true")
    e = sub.add_parser("encode", help="encode text to ids (JSON lines)",
                       description="Encode each input line (or --text) and print one JSON object per line.")
    e.add_argument("--tokenizer", required=True, help="a tokenizer folder or a .model file")
    e.add_argument("--text", action="append", help="text to encode (repeatable); default: read --input or stdin")
    e.add_argument("--input", help="a text file, one text per line")
    e.add_argument("--pieces", action="store_true", help="also print the pieces")
    e.add_argument("--offsets", action="store_true", help="also print character offsets into the input")
    e.add_argument("--no-special-tokens", action="store_true", help="omit [CLS]/[SEP]")


def run(args) -> int:
    if args.action == "train":
        train_tokenizer(args.input, args.out, args.vocab_size, do_lower_case=not args.cased,
                        keep_accents=args.keep_accents, character_coverage=args.character_coverage,
                        input_sentence_size=args.input_sentence_size, num_threads=args.threads, seed=args.seed,
                        jsonl_field=args.jsonl_field, skip_invalid=args.skip_invalid_utf8, progress=not args.quiet)
        return 0
    tok = AlbertTokenizer.from_pretrained(args.tokenizer)
    if args.text:
        texts: Iterable[str] = args.text
    elif args.input:
        texts = (line.rstrip("\n") for line in iter_corpus_lines([args.input]))
    else:
        texts = (line.rstrip("\n") for line in sys.stdin)
    for text in texts:
        enc = tok(text, return_offsets=args.offsets, add_special_tokens=not args.no_special_tokens)
        row = {"input_ids": enc["input_ids"]}
        if args.pieces:
            row["pieces"] = tok.convert_ids_to_tokens(enc["input_ids"])
        if args.offsets:
            row["offsets"] = enc["offsets"]
        print(json.dumps(row, ensure_ascii=False))
    return 0
