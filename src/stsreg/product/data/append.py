"""``stsreg data add``: new rows appended to a table of yours, after its existing bytes, never a rewrite.

- CSV / TSV: the new rows are written in the file's own dialect (:class:`~stsreg.product.data.delimited.Dialect`:
  encoding, delimiter, quoting, line ending) after its last byte (a missing final newline is added first); the BOM
  and every earlier byte stay as they were, so every earlier row reads back identical and keeps its split.
- JSONL: one object per new row, appended the same way (in the file's own encoding).
- Parquet has no append: the file is written anew from its own rows (read back identical, same schema: categorical
  columns keep their categories and gain the new values, nullable and string types stay theirs) plus the new.

Rows whose pair (stripped sentence1, sentence2) is already in the table, or repeated in the new file, are
reported; ``duplicates: skip`` (the default) leaves them out, ``refuse`` refuses the whole add. An add holds the
project's data lock (:func:`stsreg.infra.locking.data_write_lock`: no stage and no ``dvc repro`` runs beside it).

Before it reports success the grown file is read back with the reader ``prepare`` uses and every appended row
compared with the input (each column's text; numbers as numbers), and ``check`` (prepare's reading of the grown
table, its reject cap included) runs. Any refusal (other columns, a character the file's encoding cannot hold, a
value the column's type cannot hold, a row that reads back different, the grown table refused) writes nothing: the
file is restored byte for byte and the error names the rows and the reason.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from stsreg.infra import atomic
from stsreg.infra.errors import InputError
from stsreg.infra.locking import data_write_lock
from stsreg.product.data import delimited
from stsreg.product.data.table_files import TableFile, kind_of, read_frame

DUPLICATE_MODES = ("skip", "refuse")


@dataclass(frozen=True)
class Added:
    """What an add did: rows appended, rows left out as duplicates (their lines in the new file), the dialect."""

    added: int
    duplicates: tuple[int, ...]
    dialect: str


def _pair_keys(frame: pd.DataFrame, s1: str, s2: str) -> pd.Series:
    return frame[s1].map(lambda x: str(x).strip()) + "\t" + frame[s2].map(lambda x: str(x).strip())


def _new_rows(rows_file: Path, current: TableFile, table) -> tuple[pd.DataFrame, pd.Series]:
    """The rows to add (columns in the table's order) and their lines in ``rows_file``."""
    new = read_frame(rows_file)
    if new.rejects:
        line, reason, _ = new.rejects[0]
        raise InputError(f"{rows_file}: {len(new.rejects)} record(s) cannot be read (line {line}: {reason}); "
                         "nothing was added")
    if sorted(new.frame.columns) != sorted(current.frame.columns):
        raise InputError(f"{rows_file}: columns {list(new.frame.columns)} differ from {table.file}'s "
                         f"{list(current.frame.columns)}; nothing was added")
    return new.frame[list(current.frame.columns)], pd.Series(new.line, index=new.frame.index)


def _encode(text: str, codec: str, rows_file: Path, lines: pd.Series, fields: list[list[str]]) -> bytes:
    """``text`` in the file's ``codec``; a character it cannot hold is refused naming the row and the character."""
    try:
        return text.encode(codec)
    except UnicodeEncodeError:
        for line, row in zip(lines, fields):
            for value in row:
                try:
                    value.encode(codec)
                except UnicodeEncodeError as exc:
                    raise InputError(f"{rows_file}: line {line}: {value[exc.start:exc.end]!r} cannot be written in "
                                     f"the table's encoding {codec}; nothing was added") from None
        raise


def _delimited_bytes(rows: pd.DataFrame, dialect, rows_file: Path, lines: pd.Series) -> bytes:
    fields = [["" if v is None else str(v) for v in row] for row in rows.itertuples(index=False)]
    buf = io.StringIO()
    if dialect.quoting == "rfc4180":
        csv.writer(buf, delimiter=dialect.delimiter, lineterminator=dialect.newline,
                   quoting=csv.QUOTE_MINIMAL).writerows(fields)
    else:  # unquoted: a field holding the delimiter or a line break cannot be written without changing the file's form
        for i, row in zip(lines, fields):
            if any(dialect.delimiter in f or "\n" in f or "\r" in f for f in row):
                what = "tab" if dialect.delimiter == "\t" else "delimiter"
                raise InputError(f"{rows_file}: line {i}: a field holds a {what} or a line break, which the table's "
                                 "unquoted form cannot hold; nothing was added")
            buf.write(dialect.delimiter.join(row) + dialect.newline)
    return _encode(buf.getvalue(), dialect.encoding, rows_file, lines, fields)


def _jsonl_bytes(rows: pd.DataFrame, newline: str, codec: str, rows_file: Path, lines: pd.Series) -> bytes:
    records = [{k: v for k, v in row.items() if v is not None} for row in rows.to_dict("records")]
    text = "".join(json.dumps(r, ensure_ascii=False) + newline for r in records)
    return _encode(text, codec, rows_file, lines, [[str(v) for v in r.values()] for r in records])


def _text_form(path: Path) -> tuple[str, str]:
    """(codec, newline) of a JSONL file, as its reader decodes it."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    _, codec, _ = delimited.decode(head, path)
    return codec, "\r\n" if "\r\n".encode(codec) in head else "\n"


def _tail_needs_newline(path: Path, codec: str) -> bool:
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 4))
        return not fh.read().endswith("\n".encode(codec))


def _as_column(old: pd.Series, new: pd.Series, rows_file: Path, lines: pd.Series) -> tuple[pd.Series, pd.Series]:
    """``old`` and ``new`` as one Parquet column of ``old``'s type: a categorical gains the new values as categories,
    a numeric column takes numbers only (a value it cannot hold is refused with its line), text stays text."""
    name = old.name
    if isinstance(old.dtype, pd.CategoricalDtype):
        # the new values in the categories' own type, then added to them
        _, values = _as_column(pd.Series(old.cat.categories, name=name), new, rows_file, lines)
        extra = [v for v in pd.unique(values.dropna()) if v not in set(old.cat.categories)]
        dtype = pd.CategoricalDtype(list(old.cat.categories) + extra, ordered=old.cat.ordered)
        return old.astype(dtype), values.astype(dtype)
    if pd.api.types.is_numeric_dtype(old.dtype) and not pd.api.types.is_bool_dtype(old.dtype):
        values = pd.to_numeric(new.map(lambda v: v.strip() if isinstance(v, str) else v), errors="coerce")
        bad = values.isna() & new.notna() & (new.astype(str).str.strip() != "")
        if bad.any():
            i = bad.idxmax()
            raise InputError(f"{rows_file}: line {lines[i]}: {new[i]!r} in column {name!r} is not a number, which "
                             f"the table's {old.dtype} column cannot hold; nothing was added")
        return old, values.astype(old.dtype)
    try:
        return old, new.astype(old.dtype)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{rows_file}: column {name!r}: the new values do not fit the table's {old.dtype} column "
                         f"({exc}); nothing was added") from None


def _parquet(target: Path, rows: pd.DataFrame, rows_file: Path, lines: pd.Series) -> None:
    old = pd.read_parquet(target)
    new = rows.reset_index(drop=True)
    both = {c: _as_column(old[c], new[c], rows_file, lines.reset_index(drop=True)) for c in old.columns}
    grown = pd.concat([pd.DataFrame({c: o for c, (o, _) in both.items()}),
                       pd.DataFrame({c: n for c, (_, n) in both.items()})], ignore_index=True)
    atomic.to_parquet(grown, target)


def _same(a, b) -> bool:
    """Whether a value read back equals the one given: missing as missing, numbers as numbers, else the text."""
    def norm(v):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        try:
            return float(str(v).strip())
        except ValueError:
            return str(v)
    return norm(a) == norm(b)


def _verify(target: Path, table, before: TableFile, rows: pd.DataFrame, lines: pd.Series, rows_file: Path) -> None:
    """The grown file read back as ``prepare`` reads it: the earlier rows as they were, then exactly the new ones."""
    after = read_frame(target, table.quoting, table.encoding)
    n = len(before.frame)
    problems = []
    if len(after.frame) != n + len(rows) or len(after.rejects) != len(before.rejects):
        problems.append(f"{len(after.frame) - n} row(s) read back for {len(rows)} written")
    else:
        grown = after.frame.iloc[n:].reset_index(drop=True)
        given = rows.reset_index(drop=True)
        for i in range(len(given)):
            wrong = [c for c in given.columns if not _same(grown.at[i, c], given.at[i, c])]
            if wrong:
                problems.append(f"line {lines.iloc[i]}: {wrong[0]!r} reads back as {grown.at[i, wrong[0]]!r}, not "
                                f"{given.at[i, wrong[0]]!r}")
    if problems:
        raise InputError(f"{rows_file}: the grown {table.file} does not read back as written ("
                         + "; ".join(problems[:5]) + "); nothing was added (the file is as it was)")


def append_rows(project: Path, table, rows_file: Path, duplicates: str = "skip", check=None) -> Added:
    """Append ``rows_file``'s rows (any supported format, the table's column names) to declared ``table``'s file.
    ``check(table, project)`` (prepare's reading of the grown table) runs after the read-back; it raising restores
    the file. Raises :class:`InputError` with nothing written."""
    if duplicates not in DUPLICATE_MODES:
        raise InputError(f"duplicates must be one of {DUPLICATE_MODES}, got {duplicates!r}")
    target = project / table.file
    kind = kind_of(target)
    with data_write_lock(project):
        current = read_frame(target, table.quoting, table.encoding)
        rows, lines = _new_rows(rows_file, current, table)
        s1, s2 = table.columns.sentence1, table.columns.sentence2
        if s1 in rows.columns and s2 in rows.columns:
            keys = _pair_keys(rows, s1, s2)
            dup = keys.isin(set(_pair_keys(current.frame, s1, s2))) | keys.duplicated()
        else:
            dup = pd.Series(False, index=rows.index)
        if dup.any() and duplicates == "refuse":
            raise InputError(f"{rows_file}: {int(dup.sum())} row(s) repeat a pair already in {table.file} or in the "
                             f"file (lines {lines[dup].tolist()[:10]}); nothing was added (--duplicates skip adds the "
                             "rest)")
        rows, lines, dup_lines = rows[~dup], lines[~dup], tuple(int(x) for x in lines[dup])
        described = current.dialect.describe() if current.dialect else kind
        if rows.empty:
            return Added(0, dup_lines, described)
        # what restores the file: a text file grows at its end only (cut back to its size), a Parquet file is rewritten
        original = target.read_bytes() if kind == "parquet" else target.stat().st_size
        try:
            _write(target, kind, current, rows, lines, rows_file)
            _verify(target, table, current, rows, lines, rows_file)
            if check is not None:
                check(table, project)
        except BaseException:
            _restore(target, original)
            raise
        return Added(len(rows), dup_lines, described)


def _write(target: Path, kind: str, current: TableFile, rows: pd.DataFrame, lines: pd.Series, rows_file: Path) -> None:
    if kind == "parquet":
        _parquet(target, rows, rows_file, lines)
        return
    if current.dialect:
        codec, newline = current.dialect.encoding, current.dialect.newline
        data = _delimited_bytes(rows, current.dialect, rows_file, lines)
    else:
        codec, newline = _text_form(target)
        data = _jsonl_bytes(rows, newline, codec, rows_file, lines)
    lead = newline.encode(codec) if _tail_needs_newline(target, codec) else b""
    with open(target, "ab") as fh:
        fh.write(lead + data)
        fh.flush()
        os.fsync(fh.fileno())


def _restore(target: Path, original: bytes | int) -> None:
    """The file as it was: a Parquet file's ``original`` bytes written back whole (atomically), a text file cut at its
    ``original`` size (the bytes before it never changed)."""
    if isinstance(original, bytes):
        with atomic.replace_file(target) as tmp:
            tmp.write_bytes(original)
    else:
        os.truncate(target, original)
