"""Readers for the standard fine-tuning formats, each returning plain dataclasses.

Every reader names the file and line (a table's row) of a bad record (``DataError``) and refuses empty files. Files
are opened through `litebert.inputs.text`: gzip, xz, bz2 and zstd are decompressed transparently (by their magic
bytes), what is not text is refused naming its format, and invalid UTF-8 is an error naming the file, line and byte
offset unless ``encoding_errors="replace"`` (so is a JSON escape that decodes to a lone surrogate, ``"\\ud800"``,
naming the file, line and field). Formats:

* GLUE TSV, as distributed by the GLUE benchmark (all nine tasks and the AX diagnostic): columns are found by header
  name; CoLA train/dev have no header and are read by position, as the official ``ColaProcessor`` does.
* SQuAD v1.1 / v2.0 JSON (``data → paragraphs → qas``).
* RACE JSON (one passage per file: ``article``, ``questions``, ``options``, ``answers``), a file or a folder of them.
* Multiple-choice JSONL: ``{"id", "context", "question", "choices": [...], "label": 0 | "A"}`` one object a line.
* CoNLL-2003: ``word POS chunk NER`` a line, blank lines between sentences, ``-DOCSTART-`` lines skipped.
* A user's own CSV / TSV / JSONL, or table (Parquet, Arrow, a `datasets` folder: `litebert.inputs.columnar`), with a
  column mapping (``text_a``, optional ``text_b``, ``label``). The multiple-choice reader and `records` (what
  ``predict`` reads) take tables too, a row for a JSON line.
"""

from __future__ import annotations

import csv
import json
import sys
import warnings
from pathlib import Path

from litebert.errors import DataError, literal
from litebert.files import parse_json
from litebert.inputs import columnar
from litebert.inputs import text as text_input
from litebert.inputs.remote import RemotePath, as_path
from litebert.tasks.examples import (
    GLUE_TASKS,
    MultipleChoiceExample,
    SquadExample,
    TextExample,
    TokenExample,
    check_label,
    check_score,
    glue_task_name,
)
from litebert.tasks.glue_tables import read_glue_table


def open_text(path: str | Path, *, encoding_errors: str = "strict") -> text_input.TextStream:
    """A text stream of ``path``: `litebert.inputs.text.open_text`."""
    return text_input.open_text(path, encoding_errors)


def _read_rows(path: Path, encoding_errors: str, **csv_options) -> list[list[str]]:
    """The rows of a CSV/TSV file; an empty file is a DataError."""
    return [row for _, _, row in _read_spans(path, encoding_errors, **csv_options)]


def _read_spans(path: Path, encoding_errors: str, **csv_options) -> list[tuple[int, int, list[str]]]:
    """``(first line, last line, fields)`` of each row of a CSV/TSV file (a quoted field may span lines). An empty
    file, a malformed row, or a quote left open at the end of the file is a DataError naming the line."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    spans: list[tuple[int, int, list[str]]] = []
    with open_text(path, encoding_errors=encoding_errors) as f:
        row_lines: list[str] = []  # the lines of the row being read: csv pulls exactly these before yielding it

        def lines():
            for line in f:
                row_lines.append(line)
                yield line

        reader = csv.reader(lines(), **csv_options)
        start = 1
        try:
            for row in reader:
                spans.append((start, reader.line_num, row))
                start = reader.line_num + 1
                last, row_lines = row_lines, []
        except csv.Error as e:
            raise DataError(f"{path}:{reader.line_num}: malformed CSV/TSV row ({e})") from None
    if not spans or all(not any(r) for _, _, r in spans):
        raise DataError(f"{path}: the file is empty")
    first, end, _ = spans[-1]
    if end > first and csv_options.get("quotechar", '"') is not None:
        try:  # the last row spans lines: was its quote ever closed, or did the file end inside it?
            list(csv.reader(last, strict=True, **csv_options))
        except csv.Error as e:
            if "unexpected end of data" in str(e):
                raise DataError(f"{path}:{first}: unbalanced quote: a quoted field opened on this line is never "
                                f"closed (the file ends inside it, at line {end}); close or escape "
                                f"the quote (\"\" inside a quoted field)") from None
    return spans


def _read_json(path: Path, encoding_errors: str = "strict"):
    """A whole JSON document; an empty file or bad JSON is a DataError naming the file (and line), a lone surrogate
    one naming the file and field (or U+FFFD with ``encoding_errors="replace"``: `text_input.mend_lone_surrogates`)."""
    with open_text(path, encoding_errors=encoding_errors) as f:
        text = f.read()
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    return text_input.mend_lone_surrogates(parse_json(text, path, DataError), text, str(path), encoding_errors)


def _glue_layout(name: str, spec: dict, path: Path, rows: list[list[str]]) -> tuple[list[str], list[list[str]], int]:
    """``(header, body rows, line of the first body row)`` of a GLUE file; a missing text column is a DataError."""
    if name == "cola" and rows[0][:2] != ["index", "sentence"]:
        # CoLA train/dev: no header; columns: source, label, original annotation, sentence.
        header, body, first = ["source", "label", "annotation", "sentence"], rows, 1
    else:
        header, body, first = rows[0], rows[1:], 2
    for key in ("a", "b"):
        if spec[key] is not None and spec[key] not in header:
            raise DataError(f"{path}:1: missing column {spec[key]!r} for GLUE {name.upper()}; header is {header}")
    return header, body, first


def _check_glue_row(path: Path, line: int, row: list[str], spec: dict, col: dict[str, int], header: list[str],
                    has_label: bool) -> None:
    """Raise when ``row`` is too short to hold a column the task reads."""
    need = [spec["a"]] + ([spec["b"]] if spec["b"] else []) + ([spec["label"]] if has_label else [])
    for c in need:
        if col[c] >= len(row):
            raise DataError(f"{path}:{line}: missing column {c!r} (row has {len(row)} fields, header has "
                            f"{len(header)})")


def _glue_label(path: Path, line: int, raw: str, spec: dict) -> str | float:
    """The label of a GLUE row: a float for regression (STS-B), else one of the task's labels."""
    if spec["labels"] is None:
        return check_score(f"{path}:{line}", raw, f"column {spec['label']!r}")
    return check_label(f"{path}:{line}", raw, spec["labels"])


def read_glue(task: str, path: str | Path, *, encoding_errors: str = "strict") -> list[TextExample]:
    """Read one GLUE split file. Test files (no label column) give examples with ``label=None``. A table (a
    `datasets` folder or split, Parquet, Arrow) is read with the columns of the Hub's GLUE (`glue_tables`)."""
    name, path = glue_task_name(task), as_path(path)
    spec = GLUE_TASKS[name]
    if text_input.table_kind(path):  # a datasets folder or split, a Parquet or Arrow file: the Hub's GLUE columns
        return read_glue_table(name, path)
    # The official GLUE processors read with quotechar=None: MNLI/QQP contain unbalanced quotes.
    rows = _read_rows(path, encoding_errors, delimiter="\t", quotechar=None)
    header, body, first = _glue_layout(name, spec, path, rows)
    col = {h: i for i, h in enumerate(header)}
    has_label = spec["label"] in col
    guid_col = col.get("index", col.get("id"))
    out: list[TextExample] = []
    for n, row in enumerate(body):
        line = first + n
        if not any(row):
            continue
        _check_glue_row(path, line, row, spec, col, header, has_label)
        label = _glue_label(path, line, row[col[spec["label"]]].strip(), spec) if has_label else None
        own_id = row[guid_col] if guid_col is not None and guid_col < len(row) else None
        out.append(TextExample(f"{name}-{own_id if own_id is not None else n}", row[col[spec["a"]]],
                               row[col[spec["b"]]] if spec["b"] else None, label, own_id))
    if not out:
        raise DataError(f"{path}: no examples (only a header?)")
    return out


def records(path: str | Path, *, encoding_errors: str = "strict", columns: list[str] | None = None):
    """Yield ``(number, object)`` of each record of a JSON-lines file or a table (`litebert.inputs.text.iter_records`:
    line numbers, or row numbers from 0); an empty file is a DataError."""
    empty = True
    for record in text_input.iter_records(path, encoding_errors, columns):
        empty = False
        yield record
    if empty:
        raise DataError(f"{path}: the file is empty")


def _delimited_records(path: Path, fmt: str, encoding_errors: str, columns: list[str]) -> list[tuple[int, dict]]:
    """``(line, {column: field})`` of each non-blank row of a CSV/TSV file with a header row; one of ``columns``
    twice in the header is a DataError (`litebert.inputs.columnar.check_columns`)."""
    rows = _read_spans(path, encoding_errors, delimiter="," if fmt == "csv" else "\t")
    header = rows[0][2]
    columnar.check_columns(f"{path}:1", header, columns)  # a dict per row would keep the last of two
    records: list[tuple[int, dict]] = []
    for n, end, row in rows[1:]:
        if not any(row):
            continue
        if len(row) != len(header) and end > n:
            raise DataError(f"{path}:{n}: {len(row)} fields but the header has {len(header)}, in a row that a "
                            f"quoted field stretches to line {end}: an unbalanced quote on line {n}?")
        if len(row) > len(header):
            raise DataError(f"{path}:{n}: {len(row)} fields but the header has {len(header)}")
        records.append((n, dict(zip(header, row))))
    return records


def _table_rows(path: Path, kind: str, columns: list[str], encoding_errors: str) -> list[tuple[int, dict]]:
    """``(row, record)`` of each row of a table, in ``columns`` (and ``id`` when it has one): a missing column is a
    DataError naming the file and the columns it has."""
    have = columnar.column_names(path, kind)
    missing = [c for c in columns if c not in have]
    if missing:
        raise DataError(f"{literal(path)}: no column {literal(repr(missing[0]))} (it has {literal(', '.join(have))}"
                        f"{columnar.near_miss(missing[0], have)}); set the column mapping, e.g. " + "{columns}",
                        columns="text_a=review,label=stars")
    wanted = list(dict.fromkeys(columns + (["id"] if "id" in have else [])))
    return list(records(path, encoding_errors=encoding_errors, columns=wanted))


def _table_records(path: Path, fmt: str, encoding_errors: str, columns: list[str]) -> list[tuple[int, dict]]:
    """``(line, record)`` of each example of a JSONL, CSV or TSV file, or ``(row, record)`` of a table (only
    ``columns`` read); an unknown format or no records is an error."""
    kind = text_input.table_kind(path)
    if kind is not None:
        records_ = _table_rows(path, kind, columns, encoding_errors)
    elif fmt == "jsonl":
        records_ = list(records(path, encoding_errors=encoding_errors))
    elif fmt in ("csv", "tsv"):
        records_ = _delimited_records(path, fmt, encoding_errors, columns)
    else:
        raise DataError(f"{path}: unknown format {fmt!r}; use .csv, .tsv, .jsonl, .parquet or .arrow (or pass fmt)")
    if not records_:
        raise DataError(f"{path}: no examples (only a header?)")
    return records_


def _column(at: str, rec: dict, key: str):
    """``rec[key]``, of the record at ``at``; a missing column is a DataError that says how to map the columns."""
    if key not in rec:
        raise DataError(f"{literal(at)}: missing column {literal(repr(key))} (has: {literal(sorted(rec))}"
                        f"{columnar.near_miss(key, list(rec))}); set the column mapping, e.g. " + "{columns}",
                        columns="text_a=review,label=stars")
    return rec[key]


def _table_label(at: str, raw, label: str, label_list: list[str] | None, regression: bool) -> str | float:
    """A table label: a float for regression, else a class name (JSON values stringified) checked against the list.
    An empty one (null; -1 in a ``datasets`` ClassLabel column) is an error: a labelled file labels every example."""
    if raw is None:
        raise DataError(f"{at}: column {label!r} is empty (null, or -1 in a datasets ClassLabel: a test split?); "
                        f"label every example, or use predict for unlabelled data")
    if regression:
        return check_score(at, raw, f"column {label!r}")
    raw = raw if isinstance(raw, str) else json.dumps(raw)
    return check_label(at, raw.strip(), label_list)


def _table_example(at: str, number: int, rec: dict, text_a: str, text_b: str | None, label: str | None,
                   label_list: list[str] | None, regression: bool) -> TextExample:
    """One record of a user's table (record ``number``, at ``at``) as a `TextExample`; text columns must hold
    text."""
    a = _column(at, rec, text_a)
    if not isinstance(a, str):
        raise DataError(f"{at}: column {text_a!r} must be text, got {a!r}")
    b = _column(at, rec, text_b) if text_b else None
    if b is not None and not isinstance(b, str):
        raise DataError(f"{at}: column {text_b!r} must be text, got {b!r}")
    y = None
    if label is not None:
        y = _table_label(at, _column(at, rec, label), label, label_list, regression)
    return TextExample(str(rec.get("id", number)), a, b, y, rec.get("id"))


def read_table(path: str | Path, text_a: str = "text", text_b: str | None = None, label: str | None = "label",
               label_list: list[str] | None = None, regression: bool = False, fmt: str | None = None, *,
               encoding_errors: str = "strict") -> list[TextExample]:
    """A user's CSV (header row), TSV (header row) or JSONL file, or a table (Parquet, Arrow, a `datasets` folder;
    only the mapped columns are read), with the columns named by the mapping.

    ``label=None`` reads unlabelled data (for ``predict``). Class labels are kept as strings (JSON numbers are
    stringified; a ``datasets`` ClassLabel gives its names); with ``label_list`` given, a label outside it is an
    error naming the file and line (row).
    """
    path = as_path(path)
    fmt = fmt or {"json": "jsonl"}.get(_format_of(path), _format_of(path))
    columns = [c for c in (text_a, text_b, label) if c]
    return [_table_example(text_input.where(path, n), n, rec, text_a, text_b, label, label_list, regression)
            for n, rec in _table_records(path, fmt, encoding_errors, columns)]


def _format_of(path: Path) -> str:
    ext = text_input.format_suffix(path).lstrip(".")
    return {"ndjson": "jsonl"}.get(ext, ext)


def _squad_items(value, where: str, key: str) -> list[dict]:
    """``value[key]``: a list of JSON objects (absent: empty)."""
    got = value.get(key, [])
    if not isinstance(got, list) or not all(isinstance(x, dict) for x in got):
        raise DataError(f"{where}: {key!r} must be a list of JSON objects")
    return got


def _squad_is_impossible(qa: dict, where: str) -> bool:
    """Check a question's ``id`` and ``question``; return its ``is_impossible`` flag (absent: False)."""
    for key, kinds, kind in (("id", (str, int), "string or an integer"), ("question", str, "string")):
        if not isinstance(qa.get(key), kinds) or isinstance(qa.get(key), bool):
            raise DataError(f"{where}: {key!r} must be a {kind}")
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(f"{where} (id {qa['id']}): 'is_impossible' must be true or false")
    return impossible


def _squad_answers(qa: dict, where: str, context: str, bad: list) -> list[dict]:
    """A question's answers that point at their text in ``context``; the id of each other answer goes to ``bad``."""
    answers = []
    for ans in _squad_items(qa, where, "answers"):
        if not isinstance(ans.get("text"), str) or "answer_start" not in ans:
            raise DataError(f"{where} (id {qa['id']}): an answer lacks 'text' (a string) or 'answer_start'")
        s = ans["answer_start"]
        if not isinstance(s, int) or isinstance(s, bool) or s < 0 or context[s:s + len(ans["text"])] != ans["text"]:
            bad.append(qa["id"])
            continue
        answers.append({"text": ans["text"], "answer_start": s})
    return answers


def _squad_context(para: dict, where: str) -> str:
    """A paragraph's ``context``, which must be a string."""
    context = para.get("context")
    if not isinstance(context, str):
        raise DataError(f"{where}: 'context' must be a string")
    return context


def read_squad(path: str | Path, *, encoding_errors: str = "strict") -> tuple[list[SquadExample], dict]:
    """Read SQuAD v1.1/v2.0 JSON. Returns (examples, report).

    An answer whose ``answer_start`` does not point at its text is skipped with a warning and counted in
    ``report["bad_answers"]``; a question left with no valid answer (and not marked impossible) is dropped and counted
    in ``report["dropped_questions"]``. ``report["version"]`` is "2.0" when any question has ``is_impossible``.
    """
    path = as_path(path)
    doc = _read_json(path, encoding_errors)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataError(f"{path}: not SQuAD JSON: expected an object with a 'data' list")
    examples, bad, dropped, v2 = [], [], 0, False
    for a, article in enumerate(_squad_items(doc, str(path), "data")):
        for p, para in enumerate(_squad_items(article, f"{path}: data[{a}]", "paragraphs")):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            context = _squad_context(para, where)
            for q, qa in enumerate(_squad_items(para, where, "qas")):
                impossible = _squad_is_impossible(qa, f"{where}.qas[{q}]")
                v2 |= "is_impossible" in qa
                answers = _squad_answers(qa, f"{where}.qas[{q}]", context, bad)
                if not impossible and not answers:
                    dropped += 1
                    continue
                title = article.get("title", "")
                examples.append(SquadExample(str(qa["id"]), qa["question"], context, answers, impossible,
                                             title if isinstance(title, str) else str(title)))
    if bad:
        warnings.warn(f"{path}: skipped {len(bad)} answer(s) whose answer_start does not match their text "
                      f"(first in question {bad[0]}); dropped {dropped} question(s) left without an answer",
                      stacklevel=2)
    if not examples:
        raise DataError(f"{path}: no questions")
    return examples, {"version": "2.0" if v2 else "1.1", "bad_answers": len(bad), "dropped_questions": dropped}


def _letter_or_index(value, n: int, where: str) -> int:
    if isinstance(value, str) and len(value) == 1 and value.isalpha():
        idx = ord(value.upper()) - ord("A")
    elif isinstance(value, int) and not isinstance(value, bool):
        idx = value
    else:
        raise DataError(f"{where}: answer must be a letter A.. or a 0-based index, got {value!r}")
    if not 0 <= idx < n:
        raise DataError(f"{where}: answer {value!r} is outside the {n} choices")
    return idx


def _race_objects(path: Path, encoding_errors: str) -> list[tuple[str, object]]:
    """``(where, object)`` of each RACE passage in a folder, a JSONL file or a JSON file (an object or a list)."""
    if isinstance(path, (Path, RemotePath)) and path.is_dir():
        files = [p for p in text_input.expand_inputs([path]) if text_input.format_suffix(p) in (".txt", ".json")]
        if not files:
            raise DataError(f"{path}: no RACE .txt/.json files in this folder")
        return [(str(p), _read_json(p, encoding_errors)) for p in files]
    if _format_of(path) == "jsonl":
        return [(f"{path}:{n}", o) for n, o in records(path, encoding_errors=encoding_errors)]
    doc = _read_json(path, encoding_errors)
    return [(f"{path}[{i}]", o) for i, o in enumerate(doc)] if isinstance(doc, list) else [(str(path), doc)]


def _race_types_ok(o: dict, answers) -> bool:
    """Whether a RACE object's fields have their types: text article, lists of questions, options and answers."""
    return (isinstance(o["article"], str) and isinstance(o["questions"], list) and isinstance(answers, list)
            and all(isinstance(q, str) for q in o["questions"]) and isinstance(o["options"], list)
            and all(isinstance(x, list) and all(isinstance(c, str) for c in x) for x in o["options"]))


def _race_answers(where: str, o) -> list:
    """Check one RACE object's keys, types and lengths; return its answers (all None when it has none)."""
    if not isinstance(o, dict):
        raise DataError(f"{where}: expected a JSON object with 'article', 'questions' and 'options'")
    for key in ("article", "questions", "options"):
        if key not in o:
            raise DataError(f"{where}: missing key {key!r}")
    answers = o.get("answers") or [None] * len(o["questions"])
    if not _race_types_ok(o, answers):
        raise DataError(f"{where}: 'article' must be a string, 'questions' a list of strings, 'options' a list of "
                        "lists of strings and 'answers' a list")
    if not len(o["questions"]) == len(o["options"]) == len(answers):
        raise DataError(f"{where}: 'questions', 'options' and 'answers' have different lengths")
    return answers


def read_race(path: str | Path, *, encoding_errors: str = "strict") -> list[MultipleChoiceExample]:
    """RACE: one JSON object per file (``article``, ``questions``, ``options``, ``answers``, ``id``); ``path`` is a
    file, a folder (searched recursively for ``*.txt``/``*.json``, optionally compressed, sorted), or a JSONL of such
    objects."""
    out = []
    for where, o in _race_objects(as_path(path), encoding_errors):
        answers = _race_answers(where, o)
        for i, (q, opts, ans) in enumerate(zip(o["questions"], o["options"], answers)):
            label = None if ans is None else _letter_or_index(ans, len(opts), f"{where} question {i}")
            out.append(MultipleChoiceExample(f"{o.get('id', where)}-{i}", o["article"], q, list(opts), label,
                                             f"{o['id']}-{i}" if "id" in o else None))
    return out


def read_multiple_choice(path: str | Path, *, encoding_errors: str = "strict") -> list[MultipleChoiceExample]:
    """Generic multiple-choice JSONL (or a table with these columns, ``choices`` a list column): ``question`` and
    ``choices`` required; ``context``, ``id``, ``label`` optional."""
    path = as_path(path)
    out, n_choices = [], None
    for line, o in records(path, encoding_errors=encoding_errors):
        at = text_input.where(path, line)
        for key in ("question", "choices"):
            if key not in o:
                raise DataError(f"{at}: missing key {key!r} (has: {sorted(o)})")
        choices = o["choices"]
        if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise DataError(f"{at}: 'choices' must be a list of at least two strings")
        if n_choices is not None and len(choices) != n_choices:
            raise DataError(f"{at}: {len(choices)} choices, but earlier lines have {n_choices}; "
                            f"every item needs the same number")
        n_choices = len(choices)
        for key in ("question", "context"):
            if not isinstance(o.get(key, ""), str):
                raise DataError(f"{at}: {key!r} must be a string")
        label = o.get("label")
        label = None if label is None else _letter_or_index(label, len(choices), at)
        out.append(MultipleChoiceExample(str(o.get("id", line)), o.get("context", ""), o["question"], choices, label,
                                         o.get("id")))
    return out


def read_conll(path: str | Path, label_list: list[str] | None = None, *,
               encoding_errors: str = "strict") -> list[TokenExample]:
    """CoNLL-2003: whitespace-separated columns, the word first and the NER tag last; blank lines end sentences.

    A single-column file reads as unlabelled words (for ``predict``).
    """
    path = as_path(path)
    out, words, labels, ncols = [], [], [], None

    def flush():
        if words:
            out.append(TokenExample(str(len(out)), list(words), list(labels) if ncols and ncols > 1 else None))
        words.clear(), labels.clear()

    for line_no, _, line in text_input.iter_lines(path, encoding_errors):
        parts = line.split()
        if not parts:
            flush()
            continue
        if parts[0] == "-DOCSTART-":
            flush()
            continue
        if ncols is None:
            ncols = len(parts)
        elif len(parts) != ncols:
            raise DataError(f"{path}:{line_no}: {len(parts)} columns, but earlier lines have {ncols}")
        words.append(parts[0])
        if ncols > 1:
            labels.append(check_label(f"{path}:{line_no}", parts[-1], label_list))
    flush()
    if not out:
        raise DataError(f"{path}: the file is empty (no sentences)")
    return out


def json_text(obj: dict, keys: tuple, where: str) -> str:
    """The string under the first of ``keys`` that ``obj`` has; a missing key or a non-string names ``where``."""
    for k in keys:
        if k in obj:
            if not isinstance(obj[k], str):
                raise DataError(f"{where}: {k!r} must be a string")
            return obj[k]
    raise DataError(f"{where}: missing key; expected one of {list(keys)} (has: {sorted(obj)})")
