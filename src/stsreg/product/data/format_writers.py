"""How each table file format takes new rows (``stsreg data add``), after the file's own: the ``append`` of each
:class:`~stsreg.product.data.table_files.FileFormat`. Each takes ``(target, current, rows, lines, rows_file)``: the
file, how it read (:class:`~stsreg.product.data.table_files.TableFile`), the new rows (the table's columns), their
lines in ``rows_file``; each refuses what the file cannot hold with an :class:`InputError` naming the line.

- CSV / TSV: the rows in the file's own dialect (encoding, delimiter, quoting, line ending) after its last byte;
- JSONL: one object per row, in the file's own encoding and line ending;
- Parquet: the file written anew from its own rows plus the new, in its own schema.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pandas as pd

from stsreg.infra import atomic
from stsreg.infra.errors import InputError
from stsreg.product.data import delimited


def append_delimited(target: Path, current, rows: pd.DataFrame, lines: pd.Series, rows_file: Path) -> None:
    """CSV / TSV (any delimiter its reader read): the rows in the file's own dialect, after its last byte."""
    dialect = current.dialect
    _append_bytes(target, dialect.encoding, dialect.newline, _delimited_bytes(rows, dialect, rows_file, lines))


def append_jsonl(target: Path, current, rows: pd.DataFrame, lines: pd.Series, rows_file: Path) -> None:
    """JSONL: one object per row (missing values left out), in the file's own encoding and line ending."""
    codec, newline = _text_form(target)
    _append_bytes(target, codec, newline, _jsonl_bytes(rows, newline, codec, rows_file, lines))


def append_parquet(target: Path, current, rows: pd.DataFrame, lines: pd.Series, rows_file: Path) -> None:
    """Parquet (no append): the file anew, its own rows then the new, each column in its own type."""
    old = pd.read_parquet(target)
    new = rows.reset_index(drop=True)
    both = {c: _as_column(old[c], new[c], rows_file, lines.reset_index(drop=True)) for c in old.columns}
    grown = pd.concat([pd.DataFrame({c: o for c, (o, _) in both.items()}),
                       pd.DataFrame({c: n for c, (_, n) in both.items()})], ignore_index=True)
    atomic.to_parquet(grown, target)


def _append_bytes(target: Path, codec: str, newline: str, data: bytes) -> None:
    """``data`` after the file's last byte (a missing final line break written first), flushed to disk."""
    lead = newline.encode(codec) if _tail_needs_newline(target, codec) else b""
    with open(target, "ab") as fh:
        fh.write(lead + data)
        fh.flush()
        os.fsync(fh.fileno())


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
