"""Training an ALBERT SentencePiece vocabulary.

The settings are those of the official ALBERT English vocabulary (google-research/albert README, "SentencePiece"):

    spm_train --input all.txt --model_prefix=30k-clean --vocab_size=30000 --pad_id=0 --unk_id=1 --eos_id=-1
      --bos_id=-1 --control_symbols=[CLS],[SEP],[MASK] --user_defined_symbols="(,),\\",-,.,–,£,€"
      --shuffle_input_sentence=true --input_sentence_size=10000000 --character_coverage=0.99995 --model_type=unigram

Every line goes through the same normalization the tokenizer applies at encoding time (lower-casing, accent
stripping), which is why the released vocabulary holds no upper-case pieces. Stripping is meant for the diacritics of
English; in other scripts it removes marks that are part of the spelling (the Devanagari virama, the Arabic hamza, the
Russian ``ё``). Unless ``keep_accents`` is given, it is decided from the corpus (`litebert.tokenizer.accents`): the
accents are kept when at least 1% of a sample of its words would lose such a mark, and one line says which was chosen
and why. An explicit ``keep_accents=False`` on such a corpus gets a one-time warning
(`litebert.tokenizer.normalize.StrippedMarksCheck`).

The corpus is read through `litebert.inputs.text`: files, directories and globs; gzip, xz, bz2 and zstd; plain text
(a line is a sentence), or records: JSON lines, Parquet and Arrow tables, `datasets` folders, or texts given in Python
(the text under ``text_field``, each of its lines a sentence).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Iterator

import sentencepiece as spm
from tqdm import tqdm

from litebert import folders
from litebert.arguments import checked
from litebert.checks import AT_LEAST_0, AT_LEAST_1, CHARACTER_COVERAGE
from litebert.errors import DataError, LitebertError, TokenizerError, WriteError, literal
from litebert.files import atomic_write, remove_stale_temporaries_of
from litebert.inputs import text as text_input
from litebert.tokenizer.accents import AccentSample
from litebert.tokenizer.normalize import StrippedMarksCheck
from litebert.tokenizer.spm_progress import training_progress
from litebert.tokenizer.tokenizer import AlbertTokenizer, preprocess_text

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")


def corpus_lines(inputs, *, text_field: str = "text", encoding_errors: str = "strict") -> Iterator[str]:
    """The lines of text in ``inputs`` (files, directories, globs, or texts held in Python:
    `litebert.inputs.text.corpus_sources`): a line of a plain text file, or a line of the ``text_field`` string of a
    record (a JSON line of ``*.jsonl``, ``*.json``, ``*.ndjson``, optionally compressed; a row of a Parquet or Arrow
    table or a `datasets` folder; a text given in Python)."""
    for path in text_input.corpus_sources(inputs, text_field):
        if text_input.is_records(path):
            for _, text in text_input.iter_record_texts(path, text_field, encoding_errors):
                yield from text.splitlines()
        else:
            for _, _, line in text_input.iter_lines(path, encoding_errors):
                yield line


@checked(vocab_size=AT_LEAST_1, character_coverage=CHARACTER_COVERAGE, input_sentence_size=AT_LEAST_0,
         max_sentence_length=AT_LEAST_1, num_threads=AT_LEAST_1, seed=AT_LEAST_0)
def train_tokenizer(inputs: text_input.Corpus, out: str | os.PathLike, vocab_size: int = 30000, *,
                    do_lower_case: bool = True, keep_accents: bool | None = None, character_coverage: float = 0.99995,
                    input_sentence_size: int = 10_000_000, max_sentence_length: int = 4192,
                    num_threads: int | None = None,
                    seed: int = 0, text_field: str = "text", encoding_errors: str = "strict",
                    progress: bool = True, overwrite: bool = False) -> AlbertTokenizer:
    """Train an ALBERT unigram vocabulary on ``inputs`` (files, directories, globs; or, in Python, a
    ``datasets.Dataset``/``IterableDataset`` or an iterator of strings, each of whose lines is a sentence: see
    `corpus_lines`) and save it to ``out`` in the HF layout.

    ``keep_accents``: True keeps accents and combining marks, False strips them (the official normalization);
    None (the default) decides from the corpus, keeping them when at least 1% of a sample of its words would lose a
    mark other than a Latin diacritic (`litebert.tokenizer.accents`), and says which it chose. The choice is saved in
    ``tokenizer_config.json`` (so loading the folder normalizes the same way) and, with its reasons, in the folder's
    ``.litebert.json``.

    Uses the official settings (see the module docstring); SentencePiece samples ``input_sentence_size`` sentences
    when the corpus is larger (its sampling is seeded with ``seed``), on ``num_threads`` threads (default: all cores).
    Invalid UTF-8 stops with the file, line and byte offset, unless ``encoding_errors="replace"`` reads each bad byte
    as U+FFFD.

    ``out`` must be absent, empty, or hold a tokenizer written by this function: an unfinished one (a killed
    run) is replaced, a finished one only with ``overwrite``; anything else is refused before anything is written.
    """
    files = text_input.corpus_sources(inputs, text_field)  # a missing input is reported before anything is written
    given = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs if isinstance(inputs, (list, tuple)) else []
    given_inputs = [f for f in given if "*" not in str(f) and "?" not in str(f)]
    n_reserved = len(("<pad>", "<unk>")) + len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS)
    if vocab_size <= n_reserved:
        raise TokenizerError("{vocab_size} leaves no room: the ALBERT special and user-defined pieces alone take "
                             f"{n_reserved}", vocab_size=vocab_size)
    stats: dict = {"lines": 0}
    out = Path(out)
    _remove_old_leftovers(out)
    # the output must not be, hold or lie inside what is read
    plan = folders.plan(out, folders.TOKENIZER, overwrite=overwrite,
                        inputs={"inputs": [*given_inputs, *(f for f in files if isinstance(f, Path))]})
    # Scratch space beside --out, removed at the end (or, if killed, at the next start): --out itself is written
    # only once the vocabulary is trained, so bad input leaves it as it was.
    tmp = out.parent / f".{out.name}.train.tmp-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries_of(out, "train.tmp")
        tmp.mkdir()
        tok = _train(tmp, files, stats, vocab_size, do_lower_case, keep_accents, character_coverage,
                     input_sentence_size, max_sentence_length, num_threads, seed, text_field, encoding_errors, progress)
        with folders.begin(plan) as writer:
            tok.save_pretrained(out)
            # The human-readable piece list spm_train writes beside the model (piece<TAB>score).
            pieces = tok.convert_ids_to_tokens(list(range(tok.vocab_size)))
            atomic_write(out / "spiece.vocab", "".join(f"{p}\t{tok.sp.get_score(i):g}\n"
                                                       for i, p in enumerate(pieces)))
            writer.finish(accents=stats["accents"])
    except OSError as e:
        if isinstance(e, LitebertError):
            raise
        raise WriteError("{out}: cannot write the tokenizer (" + literal(e.strerror or e) + ")", out=out) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tok = AlbertTokenizer.from_pretrained(out)
    tok.train_stats = dict(stats)
    if progress:
        print(f"trained a {tok.vocab_size}-piece vocabulary on {stats['lines']} lines -> {out}", file=sys.stderr)
    return tok


def _remove_old_leftovers(out: Path) -> None:
    """Remove the scratch folders (``.train-XXXXXXXX`` holding only corpus.txt / spiece.model) that killed runs of
    earlier versions left in a tokenizer folder."""
    if not out.is_dir():
        return
    for p in out.iterdir():
        if re.fullmatch(r"\.train-[a-z0-9_]{8}", p.name) and p.is_dir() and not p.is_symlink() \
                and {c.name for c in p.iterdir()} <= {"corpus.txt", "spiece.model"}:
            shutil.rmtree(p, ignore_errors=True)


def _train(tmp: Path, files, stats, vocab_size, do_lower_case, keep_accents, character_coverage,
           input_sentence_size, max_sentence_length, num_threads, seed, text_field, encoding_errors,
           progress) -> AlbertTokenizer:
    """Train the vocabulary in the scratch folder ``tmp`` and return its tokenizer (nothing written elsewhere)."""
    # Read the corpus into one file first: bad input is reported before SentencePiece starts (an exception raised
    # inside its sentence iterator would surface as an opaque RuntimeError), and SentencePiece samples from it.
    # The lines are stored with their whitespace runs made one space (the first step of the normalization) and
    # normalized as SentencePiece reads them back: whether accents are stripped may only be known once the whole
    # corpus has been sampled. A scratch file in the scratch folder (never a result), so it is written directly.
    corpus = os.path.join(tmp, "corpus.txt")
    # Stripping accents, when asked for, from a script that needs its marks says so, once.
    check = StrippedMarksCheck("train with --keep-accents (keep_accents=True) to keep them") \
        if keep_accents is False else None
    sample = AccentSample() if keep_accents is None else None
    stored = 0
    with open(corpus, "w", encoding="utf-8") as f:
        lines = corpus_lines(files, text_field=text_field, encoding_errors=encoding_errors)
        for line in tqdm(lines, desc="reading corpus", unit=" lines", disable=not progress):
            if check is not None:
                check.add(line)
            if sample is not None:
                sample.add(line)
            text = " ".join(line.split())
            if text:
                stored += 1
                f.write(text + "\n")
    if check is not None:
        check.finish()
    if stored == 0:
        raise DataError(f"empty corpus: no line of text in {', '.join(str(x) for x in files)}")
    if sample is not None:
        keep_accents = sample.keep_accents()
        stats["accents"] = sample.record()
        if progress:
            print(sample.message(), file=sys.stderr)
    else:
        stats["accents"] = {"keep_accents": keep_accents, "chosen": "given"}

    def normalized(lines):
        for line in lines:
            text = preprocess_text(line.rstrip("\n"), lower=do_lower_case, keep_accents=keep_accents)
            if text:  # a line of combining marks alone is empty once they are stripped
                stats["lines"] += 1
                yield text

    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    try:
        # Fed through an iterator and written to memory, so that no temporary path is recorded in the model's
        # trainer_spec: the same corpus and settings give the same bytes (the same fingerprint).
        with open(corpus, encoding="utf-8", newline="\n") as lines, \
                training_progress(progress, vocab_size, stored) as loglevel:
            spm.SentencePieceTrainer.train(
                sentence_iterator=normalized(lines), model_writer=model,
                vocab_size=vocab_size, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                control_symbols=list(CONTROL_SYMBOLS), user_defined_symbols=list(USER_DEFINED_SYMBOLS),
                character_coverage=character_coverage, input_sentence_size=input_sentence_size,
                shuffle_input_sentence=True, max_sentence_length=max_sentence_length,
                num_threads=num_threads or os.cpu_count() or 1, minloglevel=loglevel)
    except (RuntimeError, OSError) as e:
        raise _explain_trainer_error(e, vocab_size, files) from None
    model_path = Path(tmp) / "spiece.model"
    model_path.write_bytes(model.getvalue())
    return AlbertTokenizer(model_path, do_lower_case=do_lower_case, keep_accents=keep_accents)


def _explain_trainer_error(e: Exception, vocab_size: int, files) -> Exception:
    msg = str(e)
    m = re.search(r"Vocabulary size (?:is )?too high \((\d+)\)\. Please set it to a value <= (\d+)", msg)
    if m:
        return DataError("{vocab_size} is more than this corpus can support (at most " + f"{m.group(2)} pieces); use "
                         "a smaller {vocab_size:flag} or more text", vocab_size=vocab_size)
    m = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", msg)
    if m:
        return DataError("{vocab_size} is smaller than the " + f"{m.group(2)} distinct characters the corpus needs at "
                         "{character_coverage:flag}; raise {vocab_size:flag} or lower {character_coverage:flag}",
                         vocab_size=vocab_size, character_coverage=None)
    return DataError(f"SentencePiece training failed on {', '.join(map(str, files))}: {msg}")
