"""Your files read as their tools wrote them (RFC 4180 quoting, BOM, CRLF, raw TSV with stray quotes), and `data add`
appending after the existing bytes, never rewriting them."""

import csv
import threading

import pandas as pd
import pytest

from stsreg.infra.config import StsTableColumns, StsTableSource
from stsreg.infra.errors import InputError
from stsreg.product.data.append import AddRequest, append_rows, prepare_check
from stsreg.product.data.table_files import read_frame
from stsreg.product.data.user_tables import read_table
from tests.conftest import tiny_sts

#: Sentences a spreadsheet quotes: a tab, a comma, doubled quotes, a line break inside a cell, a leading quote.
HARD = [("a\tb with a tab", 'she said "yes", twice', "1.5"),
        ('"quoted" at the start', "two\nlines in one cell", "4"),
        ("plain", "also plain", "2.25"),
        ('ends with a quote"', "comma, inside", "0")]


def _rows(n=60, seed=0):
    t = tiny_sts(n, seed)
    plain = [(a, b, f"{s:g}") for a, b, s in zip(t.sentence1, t.sentence2, t.score)]
    return HARD + plain


def _expect(frame, rows):
    got = [tuple(r) for r in frame[["sentence1", "sentence2", "score"]].astype(str).itertuples(index=False)]
    assert got == [tuple(map(str, r)) for r in rows]


@pytest.mark.parametrize("delimiter,ext", [(",", ".csv"), ("\t", ".tsv")])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("bom", [False, True])
def test_files_written_by_pythons_csv_module_read_back_exactly(tmp_path, delimiter, ext, newline, bom):
    rows = _rows()
    path = tmp_path / f"t{ext}"
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as fh:
        w = csv.writer(fh, delimiter=delimiter, lineterminator=newline)
        w.writerow(["sentence1", "sentence2", "score"])
        w.writerows(rows)
    read = read_frame(path)
    assert read.rejects == [] and read.dialect.quoting == "rfc4180" and read.dialect.newline == newline
    assert read.dialect.bom == (b"\xef\xbb\xbf" if bom else b"")
    _expect(read.frame, rows)
    # the physical line where each record starts: the quoted line break in row 2 moves every later row down one
    assert read.line[:5].tolist() == [2, 3, 5, 6, 7]


@pytest.mark.parametrize("sep,ext", [(",", ".csv"), ("\t", ".tsv")])
def test_files_written_by_pandas_read_back_exactly(tmp_path, sep, ext):
    rows = _rows()
    path = tmp_path / f"t{ext}"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_csv(path, sep=sep, index=False)
    read = read_frame(path)
    assert read.rejects == []
    _expect(read.frame, rows)


def test_a_raw_tsv_with_stray_quotes_is_detected_and_said_so(tmp_path):
    """The public STS files' form: no quoting, unbalanced quotes are text. `auto` reads it unquoted and says why;
    declared `quoting: none` reads the same; RFC 4180 forced rejects the stray lines, each with its line."""
    rows = [('"Hello," he said.', "He said hello.", "4"), ('a "b', "c", "2"), ("x", 'y "z" w', "3")]
    rows += [(a, b, s) for a, b, s in _rows()[4:30]]
    path = tmp_path / "raw.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    auto = read_frame(path)
    assert auto.dialect.quoting == "none" and "read unquoted" in auto.dialect.note and auto.rejects == []
    _expect(auto.frame, rows)
    assert read_frame(path, quoting="none").frame.equals(auto.frame)
    forced = read_frame(path, quoting="rfc4180")
    assert forced.rejects and forced.rejects[0][0] == 2 and "quoting error" in forced.rejects[0][1]


def test_an_unbalanced_quote_rejects_its_line_only_and_later_lines_keep_their_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('sentence1,sentence2,score\na,b,1\n"broken,c,2\nd,e,3\n"f\ng",h,4\ni,j,5\n', encoding="utf-8")
    read = read_frame(path, quoting="rfc4180")
    assert [n for n, _, _ in read.rejects] == [3]
    assert read.line.tolist() == [2, 4, 5, 7]
    assert read.frame.sentence1.tolist() == ["a", "d", "f\ng", "i"]


def test_undecodable_bytes_reject_their_line_and_utf16_with_bom_reads(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"sentence1,sentence2,score\na,b,1\nbad \xff byte,c,2\nd,e,3\n")
    read = read_frame(path)
    assert [(n, r) for n, r, _ in read.rejects] == [(3, "not valid UTF-8 (undecodable bytes)")]
    assert read.line.tolist() == [2, 4]
    wide = tmp_path / "excel.tsv"  # Excel's "Unicode text": UTF-16 LE with a BOM, tab-separated, CRLF
    wide.write_bytes(b"\xff\xfe" + "sentence1\tsentence2\tscore\r\ncaf\u00e9\tna\u00efve\t3\r\n".encode("utf-16-le"))
    read = read_frame(wide)
    assert read.dialect.encoding == "utf-16-le" and read.frame.iloc[0].tolist() == ["caf\u00e9", "na\u00efve", "3"]


def _declare(tmp_path, ext, write):
    path = tmp_path / f"data/tables/mine{ext}"
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path)
    return StsTableSource(name="mine", file=f"data/tables/mine{ext}", columns=StsTableColumns(), scale=(0.0, 5.0))


def _writers():
    def csv_bom_crlf(path, rows):
        with open(path, "w", newline="", encoding="utf-8-sig") as fh:
            w = csv.writer(fh, lineterminator="\r\n")
            w.writerow(["sentence1", "sentence2", "score"])
            w.writerows(rows)

    def tsv_quoted(path, rows):
        pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_csv(path, sep="\t", index=False)

    def tsv_raw(path, rows):  # no final newline, stray quotes
        lines = ["sentence1\tsentence2\tscore"] + ["\t".join(r) for r in rows
                                                   if not any("\t" in f or "\n" in f for f in r)]
        lines.insert(3, '"Hello," he said.\tHe said hello.\t4')  # a leading quote that is text: unquoted form
        path.write_text("\n".join(lines) + '\nsaid "hi\tok\t2', encoding="utf-8")

    def jsonl(path, rows):
        pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_json(path, orient="records", lines=True)

    def parquet(path, rows):
        pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(path, index=False)

    return {".csv": csv_bom_crlf, ".tsv": tsv_quoted, ".raw.tsv": tsv_raw, ".jsonl": jsonl, ".parquet": parquet}


@pytest.mark.parametrize("form", list(_writers()))
def test_data_add_appends_after_the_existing_bytes_and_every_row_keeps_its_split(tmp_path, form):
    ext = ".tsv" if form == ".raw.tsv" else form
    rows = _rows(200)
    table = _declare(tmp_path, ext, lambda p: _writers()[form](p, rows))
    path = tmp_path / table.file
    original = path.read_bytes()
    before, _, _ = read_table(table, tmp_path)
    new = tmp_path / "new.csv"
    fresh = [(a + " new", b, s) for a, b, s in _rows(30, seed=5)[4:]] + [rows[10]]  # the last one is already there
    pd.DataFrame(fresh, columns=["sentence1", "sentence2", "score"]).to_csv(new, index=False)
    added = append_rows(tmp_path, table, AddRequest(table.name, new), check=prepare_check())
    assert added.added == len(fresh) - 1 and added.duplicates == (len(fresh) + 1,)
    grown = path.read_bytes()
    if ext != ".parquet":  # an append: the earlier bytes are untouched (BOM, CRLF, quoting, the missing final newline)
        assert grown.startswith(original) and len(grown) > len(original)
    after, _, _ = read_table(table, tmp_path)
    key = ["sentence1", "sentence2", "score", "split"]
    assert after[key].head(len(before)).equals(before[key])
    assert len(after) == len(before) + added.added
    # appending the same file again adds nothing and says which lines it skipped
    again = append_rows(tmp_path, table, AddRequest(table.name, new), check=prepare_check())
    assert again.added == 0 and len(again.duplicates) == len(fresh)
    with pytest.raises(InputError, match="repeat a pair already in"):
        append_rows(tmp_path, table, AddRequest(table.name, new, duplicates="refuse"))


def test_a_refused_add_leaves_the_file_byte_for_byte(tmp_path):
    table = _declare(tmp_path, ".csv", lambda p: _writers()[".csv"](p, _rows(200)))
    path = tmp_path / table.file
    original = path.read_bytes()
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"sentence1": [f"s{i}" for i in range(400)], "sentence2": ["t"] * 400,
                  "score": ["9"] * 400}).to_csv(bad, index=False)
    with pytest.raises(InputError, match="outside the declared scale"):
        append_rows(tmp_path, table, AddRequest(table.name, bad), check=prepare_check())
    assert path.read_bytes() == original
    raw = _declare(tmp_path, ".tsv", lambda p: _writers()[".raw.tsv"](p, _rows(200)))
    before = (tmp_path / raw.file).read_bytes()
    tabbed = tmp_path / "tabbed.csv"
    pd.DataFrame({"sentence1": ["a\tb"], "sentence2": ["c"], "score": ["1"]}).to_csv(tabbed, index=False)
    with pytest.raises(InputError, match="unquoted form cannot hold"):
        append_rows(tmp_path, raw, AddRequest(raw.name, tabbed), check=prepare_check())
    assert (tmp_path / raw.file).read_bytes() == before


def test_two_concurrent_adds_serialise(tmp_path):
    table = _declare(tmp_path, ".csv", lambda p: _writers()[".csv"](p, _rows(200)))
    files = []
    for k in range(2):
        f = tmp_path / f"new{k}.csv"
        pd.DataFrame([(f"batch {k} row {i}", "other", "3") for i in range(50)],
                     columns=["sentence1", "sentence2", "score"]).to_csv(f, index=False)
        files.append(f)
    before, _, _ = read_table(table, tmp_path)
    threads = [threading.Thread(target=append_rows, args=(tmp_path, table, AddRequest(table.name, f)),
                                kwargs={"check": prepare_check()})
               for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after, _, _ = read_table(table, tmp_path)
    assert len(after) == len(before) + 100 and not after.duplicated(["sentence1", "sentence2"]).any()


def test_prepare_says_how_auto_read_a_table(tmp_path, caplog):
    import logging

    raw = _declare(tmp_path, ".tsv", lambda p: _writers()[".raw.tsv"](p, _rows(200)))
    caplog.set_level(logging.INFO, logger="stsreg.product.data.user_tables")
    read_table(raw, tmp_path)
    assert any("read unquoted" in r.getMessage() and "quoting to decide" in r.getMessage() for r in caplog.records)
