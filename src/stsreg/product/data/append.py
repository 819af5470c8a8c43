"""``stsreg data add``: new rows appended to a table of yours, after its existing bytes, never a rewrite.

- CSV / TSV: the new rows are written in the file's own dialect (:class:`~stsreg.product.data.delimited.Dialect`:
  encoding, delimiter, quoting, line ending) after its last byte (a missing final newline is added first); the BOM
  and every earlier byte stay as they were, so every earlier row reads back identical and keeps its split.
- JSONL: one object per new row, appended the same way.
- Parquet has no append: the file is written anew from its own rows (read back identical, same schema) plus the new.

Rows whose pair (stripped sentence1, sentence2) is already in the table, or repeated in the new file, are
reported; ``duplicates: skip`` (the default) leaves them out, ``refuse`` refuses the whole add. Two adds to one
table serialise on a lock file beside it. Any refusal (other columns, an unwritable row, the grown table refused by
:func:`~stsreg.product.data.user_tables.read_table`) writes nothing: the file is cut back to its original bytes.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from filelock import FileLock

from stsreg.infra import atomic
from stsreg.infra.errors import InputError
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


def _delimited_bytes(rows: pd.DataFrame, dialect, rows_file: Path, lines: pd.Series) -> bytes:
    buf = io.StringIO()
    if dialect.quoting == "rfc4180":
        writer = csv.writer(buf, delimiter=dialect.delimiter, lineterminator=dialect.newline, quoting=csv.QUOTE_MINIMAL)
        writer.writerows([["" if v is None else str(v) for v in row] for row in rows.itertuples(index=False)])
    else:  # unquoted: a field holding the delimiter or a line break cannot be written without changing the file's form
        for i, row in zip(lines, rows.itertuples(index=False)):
            fields = ["" if v is None else str(v) for v in row]
            if any(dialect.delimiter in f or "\n" in f or "\r" in f for f in fields):
                raise InputError(f"{rows_file}: line {i}: a field holds a {'tab' if dialect.delimiter == chr(9) else 'delimiter'} "
                                 "or a line break, which the table's unquoted form cannot hold; nothing was added")
            buf.write(dialect.delimiter.join(fields) + dialect.newline)
    return buf.getvalue().encode(dialect.encoding)


def _jsonl_bytes(rows: pd.DataFrame, newline: str) -> bytes:
    return "".join(json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False) + newline
                   for row in rows.to_dict("records")).encode("utf-8")


def _tail_needs_newline(path: Path) -> bool:
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) != b"\n"


def append_rows(project: Path, table, rows_file: Path, duplicates: str = "skip", check=None) -> Added:
    """Append ``rows_file``'s rows (any supported format, the table's column names) to declared ``table``'s file.
    ``check(table, project)`` (prepare's reading of the grown table) runs before the add is kept; it raising cuts the
    file back. Raises :class:`InputError` with nothing written."""
    if duplicates not in DUPLICATE_MODES:
        raise InputError(f"duplicates must be one of {DUPLICATE_MODES}, got {duplicates!r}")
    target = project / table.file
    kind = kind_of(target)
    with FileLock(str(target) + ".lock"):
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
                             f"file (lines {lines[dup].tolist()[:10]}); nothing was added (--duplicates skip adds the rest)")
        rows, dup_lines = rows[~dup], tuple(int(x) for x in lines[dup])
        described = current.dialect.describe() if current.dialect else kind
        if rows.empty:
            return Added(0, dup_lines, described)
        size, backup = target.stat().st_size, None
        if kind == "parquet":
            backup = target.read_bytes()
            old = pd.read_parquet(target)
            atomic.to_parquet(pd.concat([old, rows.astype(old.dtypes.to_dict(), errors="ignore")], ignore_index=True), target)
        else:
            newline = current.dialect.newline if current.dialect else _jsonl_newline(target)
            data = (_delimited_bytes(rows, current.dialect, rows_file, lines[~dup]) if current.dialect
                    else _jsonl_bytes(rows, newline))
            lead = newline.encode(current.dialect.encoding if current.dialect else "utf-8") if _tail_needs_newline(target) else b""
            with open(target, "ab") as fh:
                fh.write(lead + data)
                fh.flush()
                os.fsync(fh.fileno())
        try:
            if check is not None:
                check(table, project)
        except BaseException:
            if backup is not None:
                target.write_bytes(backup)
            else:
                os.truncate(target, size)
            raise
        return Added(len(rows), dup_lines, described)


def _jsonl_newline(path: Path) -> str:
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    return "\r\n" if b"\r\n" in head else "\n"
