"""Columns, as every columnar reader sees them (Parquet, Arrow file and stream, CSV, TSV): a header generated with
duplicate, empty, case- and space-variant and hostile names gives the examples a reference reading computes from the
rows written, or a one-line `DataError` naming the file and the column; never another exception (issue 57, tab-02: a
Parquet file with two columns named ``text`` was ``internal error: KeyError``)."""

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.hostile import BOM, column_names, outcome
from litebert.errors import DataError
from litebert.inputs import columnar
from litebert.tasks.readers import read_table

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# what a header may hold and a UTF-8 file can: no NUL (a binary file), no lone surrogate (not UTF-8), no U+FEFF (a
# byte order mark at the start of the file is dropped, by design)
names = column_names().map(lambda cols: [c for c in cols if not set(c) & {"\x00", "\udcff", "\ufeff"}]).filter(bool)
values = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=6)
FORMATS = ("parquet", "arrow", "arrow-stream", "csv", "tsv")


def write(path, fmt: str, header: list[str], rows: list[list[str]], bom: bool):
    if fmt in ("csv", "tsv"):
        out = io.StringIO(newline="")
        writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerows([header] + rows)
        path.write_bytes((BOM if bom else b"") + out.getvalue().encode("utf-8"))
        return
    table = pa.Table.from_arrays([pa.array([r[i] for r in rows], pa.string()) for i in range(len(header))],
                                 names=header)
    if fmt == "parquet":
        pq.write_table(table, path)
        return
    with pa.OSFile(str(path), "wb") as f, (pa.ipc.new_stream if fmt == "arrow-stream" else pa.ipc.new_file)(
            f, table.schema) as w:
        w.write_table(table)


def expected(header: list[str], rows: list[list[str]]):
    """The reference: (text, label) of each row when the header has "text" and "label" once each, else None."""
    if header.count("text") != 1 or header.count("label") != 1:
        return None
    a, y = header.index("text"), header.index("label")
    return [(r[a], r[y]) for r in rows]


@given(fmt=st.sampled_from(FORMATS), header=names, data=st.data(), bom=st.booleans())
def test_a_header_reads_as_the_reference_or_is_refused_naming_file_and_column(tmp_path_factory, fmt, header, data,
                                                                              bom):
    header = header + data.draw(st.sampled_from(([], ["text"], ["label"], ["text", "label"])))
    header = data.draw(st.permutations(header))
    rows = data.draw(st.lists(st.lists(values, min_size=len(header), max_size=len(header)), min_size=1, max_size=3))
    path = tmp_path_factory.mktemp("t") / f"data.{fmt.split('-')[0]}"
    write(path, fmt, header, rows, bom)
    want = expected(header, rows)
    got = outcome(lambda: [(e.text_a, e.label) for e in read_table(path, "text", label="label")], path.name)
    assert got == want
    if want is None and "text" in header and "label" in header:  # the error names the column that is there twice
        with pytest.raises(DataError, match=r"the column '(text|label)' is there \d times"):
            read_table(path, "text", label="label")


@given(header=names, data=st.data())
def test_the_text_column_of_a_table_reads_or_is_refused(tmp_path_factory, header, data):
    header = data.draw(st.permutations(header + data.draw(st.sampled_from(([], ["text"], ["text", "text"])))))
    rows = data.draw(st.lists(st.lists(values, min_size=len(header), max_size=len(header)), min_size=1, max_size=3))
    path = tmp_path_factory.mktemp("t") / "data.parquet"
    write(path, "parquet", header, rows, False)
    got = outcome(lambda: [t for _, t in columnar.iter_texts(path, "parquet", "text")], path.name)
    assert got == ([r[header.index("text")] for r in rows] if header.count("text") == 1 else None)


def test_two_text_columns_in_parquet_by_hand(tmp_path):
    """tab-02 as the battery ran it: the message names the file, the column and where it is."""
    path = tmp_path / "two.parquet"
    write(path, "parquet", ["text", "label", "text"], [["a", "pos", "b"]], False)
    message = f"^{path}: the column 'text' is there 2 times \\(columns 1, 3 of 3\\); give each column its own name$"
    with pytest.raises(DataError, match=message):
        read_table(path, "text", label="label")
    with pytest.raises(DataError, match=message):
        list(columnar.iter_texts(path, "parquet", "text"))


def test_a_column_that_differs_in_case_or_spaces_is_pointed_at(tmp_path):
    path = tmp_path / "spaced.csv"
    write(path, "csv", ["Text ", "label"], [["a", "pos"]], False)
    with pytest.raises(DataError, match=r"missing column 'text' .*'Text ' differs from it only in case or spaces"):
        read_table(path, "text", label="label")


def test_a_dataframe_with_two_columns_of_a_name_is_refused():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([["a", "b"]], columns=["text", "text"])  # frame["text"] is a frame: its texts, the names
    with pytest.raises(DataError, match="^<DataFrame>: the column 'text' is there 2 times"):
        columnar.text_source(frame)
